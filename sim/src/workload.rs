//! From a trace to the simulator's jobs: teams mapped to leaves of the
//! tree, contracts assigned by the `[sim]` rules, job classes.
//!
//! - A team is a Slurm account; the leaf holding it is the simulated team.
//!   Accounts the tree does not know are **reported** (jobs, GPU-hours) and
//!   left out, as Slurm with `AccountingStorageEnforce=associations` would
//!   refuse their jobs.
//! - Jobs larger than the cluster can never run: reported and left out.
//! - Contract: the trace's recorded minimum runtime if any (capped at
//!   `max_min_runtime`), else the first matching `[[sim.rule]]`, else the
//!   job's default (its partition's, else `contract.default_min_runtime`);
//!   record and default as the plugins read them
//!   ([`fairshare::ContractPolicy::job_min_runtime`]). Resumable: the trace, else the first
//!   matching rule that sets it, else `[sim] resumable`.
//! - Classes (for wait-time percentiles): **debug** = at most 2 GPUs and at
//!   most 1 hour of runtime; **large** = 8 GPUs or more (a whole 8-GPU node or
//!   several nodes); **batch** = everything else.

use serde::Serialize;

use super::trace::Trace;
use fairshare::config::sim::{ClusterSpec, RuleMinRuntime};
use fairshare::config::Config;
use fairshare::tree::LeafId;

/// Job class for wait-time metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum JobClass {
    /// At most 2 GPUs and at most 1 hour.
    Debug,
    /// Neither debug nor large.
    Batch,
    /// 8 GPUs or more.
    Large,
}

impl JobClass {
    /// Every class, in report order.
    pub const ALL: [JobClass; 3] = [JobClass::Debug, JobClass::Batch, JobClass::Large];

    /// The class of a job of `gpus` GPUs running `duration` seconds.
    pub fn of(gpus: u32, duration: u64) -> JobClass {
        if gpus >= 8 {
            JobClass::Large
        } else if gpus <= 2 && duration <= 3600 {
            JobClass::Debug
        } else {
            JobClass::Batch
        }
    }

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            JobClass::Debug => "debug",
            JobClass::Batch => "batch",
            JobClass::Large => "large",
        }
    }
}

/// A job ready to simulate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimJob {
    /// Trace id.
    pub id: u64,
    /// Team index (into [`Workload::teams`]).
    pub team: u32,
    /// The account it is charged to (index into [`Workload::accounts`]).
    pub account: u32,
    /// Submit, seconds since the first submission.
    pub submit: u64,
    /// Work, seconds of running.
    pub duration: u64,
    /// Nodes it needs.
    pub nodes: u32,
    /// GPUs on each of them.
    pub gpus_per_node: u32,
    /// Minimum runtime, seconds (0 = free tier).
    pub min_runtime: u64,
    /// Continues after a requeue.
    pub resumable: bool,
    /// Wait-time class.
    pub class: JobClass,
}

impl SimJob {
    /// GPUs it holds while running.
    pub fn gpus(&self) -> u32 {
        self.nodes * self.gpus_per_node
    }
}

/// A simulated team: one leaf of the tree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Team {
    /// The leaf's name.
    pub name: String,
    /// Its leaf in the tree.
    #[serde(skip)]
    pub leaf: LeafId,
    /// Its allocation: fraction of the cluster, in [0, 1].
    pub allocation: f64,
}

/// How many jobs a rule (or the trace, or the default) gave a contract to.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuleUse {
    /// `trace` (recorded in the trace), a rule's name, or `default`.
    pub rule: String,
    /// What it set, e.g. `min_runtime=0` or `min_runtime=01:00:00`.
    pub sets: String,
    /// Jobs it decided.
    pub jobs: u64,
    /// Their GPU-hours of work.
    pub gpu_hours: f64,
}

/// Jobs left out, by reason.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeftOut {
    /// Why, e.g. `unknown account 23dbec` or `larger than the cluster`.
    pub reason: String,
    /// Jobs.
    pub jobs: u64,
    /// Their GPU-hours of work.
    pub gpu_hours: f64,
}

/// A trace prepared against one config and cluster.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Jobs by submit time.
    pub jobs: Vec<SimJob>,
    /// Teams (leaves of the tree, all of them, in leaf order).
    pub teams: Vec<Team>,
    /// Accounts jobs are charged to.
    pub accounts: Vec<String>,
    /// Which contract rules decided how many jobs.
    pub rules: Vec<RuleUse>,
    /// Jobs left out and why.
    pub left_out: Vec<LeftOut>,
}

fn hours(gpus: u32, secs: u64) -> f64 {
    f64::from(gpus) * secs as f64 / 3600.0
}

/// Nodes and GPUs per node for a job of `gpus` GPUs on `cluster`: one
/// node if it fits, else `ceil(gpus / gpus_per_node)` nodes with an equal
/// share each (rounded up, so 12 GPUs on 8-GPU nodes = 2 x 6).
pub fn shape(gpus: u32, cluster: ClusterSpec) -> (u32, u32) {
    if gpus <= cluster.gpus_per_node {
        (1, gpus)
    } else {
        let nodes = gpus.div_ceil(cluster.gpus_per_node);
        (nodes, gpus.div_ceil(nodes))
    }
}

impl Workload {
    /// Maps `trace` onto `config`'s tree and rules for `cluster`.
    pub fn prepare(trace: &Trace, config: &Config, cluster: ClusterSpec) -> Workload {
        let tree = &config.tree;
        let teams: Vec<Team> = tree
            .leaves()
            .iter()
            .enumerate()
            .map(|(i, &n)| Team {
                name: tree.node(n).name.clone(),
                leaf: LeafId(i as u32),
                allocation: tree.node(n).allocation,
            })
            .collect();
        let sim = &config.sim;
        let cap = config.contract.max_min_runtime;
        let mut accounts: Vec<String> = Vec::new();
        let mut account_ids: std::collections::HashMap<String, u32> = Default::default();
        let mut left: std::collections::BTreeMap<String, (u64, f64)> = Default::default();
        let mut uses: Vec<(u64, f64)> = vec![(0, 0.0); sim.rules.len() + 2];
        let mut jobs = Vec::with_capacity(trace.jobs.len());
        for j in &trace.jobs {
            let Some(leaf) = tree.leaf_of_account(&j.team) else {
                let e = left
                    .entry(format!("unknown account {}", j.team))
                    .or_default();
                e.0 += 1;
                e.1 += hours(j.gpus, j.duration);
                continue;
            };
            let (nodes, per) = shape(j.gpus, cluster);
            if nodes > cluster.nodes {
                let e = left
                    .entry(format!("larger than the cluster ({cluster})"))
                    .or_default();
                e.0 += 1;
                e.1 += hours(j.gpus, j.duration);
                continue;
            }
            let account = *account_ids.entry(j.team.clone()).or_insert_with(|| {
                accounts.push(j.team.clone());
                accounts.len() as u32 - 1
            });
            let part = j.partition.as_deref();
            let rule = sim.rules.iter().position(|r| {
                r.min_runtime.is_some() && r.matches(&j.team, part, j.gpus, j.duration)
            });
            // A recorded contract, else a rule, else the job's default, the
            // record and the default read as every reader reads them.
            let (min_runtime, decided) = match (j.min_runtime, rule) {
                (None, Some(i)) => (
                    match sim.rules[i].min_runtime {
                        Some(RuleMinRuntime::Fixed(m)) => m,
                        Some(RuleMinRuntime::Runtime) => j.duration.min(cap).max(1),
                        None => unreachable!("filtered on min_runtime"),
                    },
                    i + 1,
                ),
                (recorded, _) => (
                    config.contract.job_min_runtime(recorded, part),
                    if recorded.is_some() {
                        0
                    } else {
                        sim.rules.len() + 1
                    },
                ),
            };
            uses[decided].0 += 1;
            uses[decided].1 += hours(j.gpus, j.duration);
            let resumable = j.resumable.unwrap_or_else(|| {
                sim.rules
                    .iter()
                    .find(|r| r.resumable.is_some() && r.matches(&j.team, part, j.gpus, j.duration))
                    .and_then(|r| r.resumable)
                    .unwrap_or(sim.resumable)
            });
            jobs.push(SimJob {
                id: j.id,
                team: leaf.0,
                account,
                submit: j.submit,
                duration: j.duration,
                nodes,
                gpus_per_node: per,
                min_runtime,
                resumable,
                class: JobClass::of(j.gpus, j.duration),
            });
        }
        let describe = |m: &RuleMinRuntime| match m {
            RuleMinRuntime::Fixed(0) => "min_runtime=0 (free tier)".to_string(),
            RuleMinRuntime::Fixed(s) => {
                format!("min_runtime={}", fairshare::duration::SlurmDuration(*s))
            }
            RuleMinRuntime::Runtime => "min_runtime=runtime (capped)".to_string(),
        };
        let mut rules = Vec::new();
        let mut push = |rule: String, sets: String, (jobs, gpu_hours): (u64, f64)| {
            if jobs > 0 {
                rules.push(RuleUse {
                    rule,
                    sets,
                    jobs,
                    gpu_hours,
                });
            }
        };
        push(
            "trace".into(),
            "min_runtime recorded in the trace".into(),
            uses[0],
        );
        for (i, r) in sim.rules.iter().enumerate() {
            push(
                r.name.clone(),
                r.min_runtime.as_ref().map(describe).unwrap_or_default(),
                uses[i + 1],
            );
        }
        push(
            "default".into(),
            format!(
                "contract.default_min_runtime={}",
                fairshare::duration::SlurmDuration(config.contract.default_min_runtime)
            ),
            uses[sim.rules.len() + 1],
        );
        let mut left_out: Vec<LeftOut> = left
            .into_iter()
            .map(|(reason, (jobs, gpu_hours))| LeftOut {
                reason,
                jobs,
                gpu_hours,
            })
            .collect();
        for (why, n) in &trace.skipped {
            left_out.push(LeftOut {
                reason: format!("trace: {why}"),
                jobs: *n,
                gpu_hours: 0.0,
            });
        }
        Workload {
            jobs,
            teams,
            accounts,
            rules,
            left_out,
        }
    }
}
