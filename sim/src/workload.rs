//! From a trace to the simulator's jobs: teams mapped to leaves of the
//! tree, contracts assigned by the `[sim]` rules, job classes.
//!
//! - A team is a Slurm account; the leaf holding it is the simulated team.
//!   A trace's name (already lower-cased by the reader) is first looked up
//!   in `[sim.accounts]` (then its `*` key); a trace without tenants (the
//!   Alibaba pod list: QoS classes only) replayed on a tree of one leaf
//!   puts every job on that leaf. Accounts the tree does not know are
//!   **reported** (jobs, GPU-hours) and left out, as Slurm with
//!   `AccountingStorageEnforce=associations` would refuse their jobs;
//!   [`Workload::unmatched`] says when they are most of the trace.
//! - Jobs larger than the cluster can never run: reported and left out;
//!   [`Workload::oversized`] says when what is left out (they and the
//!   unknown accounts' jobs) is most of the trace.
//! - Contract: the trace's recorded minimum runtime if any (capped at
//!   `max_min_runtime`), else the first matching `[[sim.rule]]`, else the
//!   job's default (its partition's, else `contract.default_min_runtime`);
//!   record and default as the plugins read them
//!   ([`fairshare::ContractPolicy::job_min_runtime`]). Each is at most the
//!   job's time limit where the trace gives one
//!   ([`fairshare::contract::within_time_limit`]: Slurm ends the job
//!   there, and job_submit refuses a declared minimum runtime above it, so
//!   a rule's value counts as the limit too); a trace without limits is
//!   unchanged. Resumable: the trace, else the first
//!   matching rule that sets it, else `[sim] resumable`.
//! - Classes (for wait-time percentiles): **debug** = at most 2 GPUs and at
//!   most 1 hour of runtime; **large** = 8 GPUs or more (a whole 8-GPU node or
//!   several nodes); **batch** = everything else; **sweep** = a job of the
//!   short band that the config's sweep rule ([`fairshare::sweep`]: more
//!   than `sweep_jobs` of an account's short jobs within `sweep_window`)
//!   calls part of a sweep, whatever its shape. Sweeps are decided from the
//!   submission times alone, once, so every policy is measured on the same
//!   classes.

use serde::Serialize;

use super::trace::Trace;
use crate::settings::{ClusterSpec, RuleMinRuntime, SimSettings};
use fairshare::config::Config;
use fairshare::contract::within_time_limit;
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
    /// A short-band job in a sweep ([`fairshare::sweep`]).
    Sweep,
}

impl JobClass {
    /// Every class, in report order.
    pub const ALL: [JobClass; 4] = [
        JobClass::Debug,
        JobClass::Batch,
        JobClass::Large,
        JobClass::Sweep,
    ];

    /// The class of a job of `gpus` GPUs running `duration` seconds that is
    /// not part of a sweep.
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
            JobClass::Sweep => "sweep",
        }
    }
}

/// Marks the jobs of sweeps ([`fairshare::sweep`]) in submission order: a
/// short-band job (its runtime as its time limit) of an account that had
/// already submitted `sweep_jobs` of them within `sweep_window`.
fn mark_sweeps(jobs: &mut [SimJob], config: &Config) {
    let mut counter = fairshare::sweep::SweepCounter::of(&config.priority);
    if counter.is_off() {
        return;
    }
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&i| (jobs[i].submit, i));
    for i in order {
        let j = &mut jobs[i];
        if j.in_short_band(&config.priority) && counter.submit(j.account, j.submit, 1) {
            j.sweep = true;
            j.class = JobClass::Sweep;
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
    /// Part of a sweep ([`fairshare::sweep`]): never preempts.
    pub sweep: bool,
    /// Time limit from the trace, seconds, at least `duration`; `None`:
    /// the runtime stands for it (the short band, the backfill's plans).
    pub time_limit: Option<u64>,
    /// Milliseconds into its submit second, from the trace (`None`:
    /// seeded; [`crate::trace::TraceJob::submit_ms`]).
    pub submit_ms: Option<u16>,
}

impl SimJob {
    /// GPUs it holds while running.
    pub fn gpus(&self) -> u32 {
        self.nodes * self.gpus_per_node
    }

    /// True when the short band of `weights` ([`fairshare::priority`]) takes
    /// it, by its time limit, or its runtime where the trace has none.
    pub fn in_short_band(&self, weights: &fairshare::PriorityWeights) -> bool {
        weights.is_short(
            fairshare::Tier::of(self.min_runtime),
            u64::from(self.gpus()),
            Some(self.limit()),
        )
    }

    /// Its time limit, seconds: the trace's, else its runtime.
    pub fn limit(&self) -> u64 {
        self.time_limit.unwrap_or(self.duration)
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
    /// The trace's name for an unknown account (as read, lower-cased).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
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
    /// GPU-hours of every job of the trace (mapped or left out).
    pub trace_gpu_hours: f64,
    /// How trace names were mapped onto the tree's accounts, when they
    /// were (by name).
    pub mapped: Vec<Mapped>,
    /// The cluster it was prepared for.
    pub cluster: ClusterSpec,
    /// GPUs of the largest job left out as larger than the cluster (0: none).
    pub largest_too_large: u32,
}

/// A trace name mapped onto an account of the tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mapped {
    /// The trace's name (lower-cased).
    pub name: String,
    /// The account its jobs are charged to.
    pub account: String,
    /// Jobs replayed under it.
    pub jobs: u64,
    /// What mapped it: `[sim.accounts]`, or `the one team` (a trace
    /// without tenants on a one-leaf tree).
    pub by: &'static str,
}

/// Most of a trace's GPU-hours belong to accounts the tree does not know.
#[derive(Debug, Clone, PartialEq)]
pub struct Unmatched {
    /// The trace's unknown names, by GPU-hours (largest first).
    pub accounts: Vec<String>,
    /// Their GPU-hours.
    pub gpu_hours: f64,
    /// Every job's GPU-hours.
    pub trace_gpu_hours: f64,
    /// True when the trace names classes of service, not tenants.
    pub classes_only: bool,
    /// Those of `accounts` that name a group of the tree (not a leaf).
    pub groups: Vec<String>,
}

/// The start of a left-out reason for a trace name that is a group of the
/// tree.
const GROUP: &str = "group";

impl std::fmt::Display for Unmatched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown: Vec<&str> = self.accounts.iter().take(8).map(String::as_str).collect();
        let more = self.accounts.len().saturating_sub(shown.len());
        let first = self.accounts.first().map_or("name", String::as_str);
        write!(
            f,
            "{:.0}% of the trace's GPU-hours ({:.0} of {:.0}) are in {} the tree does not know: {}{}; \
             map them onto the tree's accounts in allot.toml, e.g. [sim.accounts] {} = \"<account>\" \
             (or \"*\" = \"<account>\" for every name not listed), or add them as leaves",
            100.0 * self.gpu_hours / self.trace_gpu_hours.max(f64::MIN_POSITIVE),
            self.gpu_hours,
            self.trace_gpu_hours,
            if self.classes_only { "QoS classes (the trace has no tenants)" } else { "accounts" },
            shown.join(", "),
            if more > 0 { format!(" and {more} more") } else { String::new() },
            toml_key(first),
        )?;
        if !self.groups.is_empty() {
            write!(
                f,
                " ({} {}: jobs are charged to a leaf, so map each onto one of its leaves)",
                self.groups.join(", "),
                if self.groups.len() == 1 {
                    "is a group of the tree, not a leaf"
                } else {
                    "are groups of the tree, not leaves"
                }
            )?;
        }
        Ok(())
    }
}

/// Jobs larger than the cluster (with the unknown accounts' jobs, if any)
/// hold more than half of a trace's GPU-hours.
#[derive(Debug, Clone, PartialEq)]
pub struct Oversized {
    /// Jobs larger than the cluster.
    pub jobs: u64,
    /// Their GPU-hours.
    pub gpu_hours: f64,
    /// GPU-hours of the jobs of accounts the tree does not know.
    pub unknown_gpu_hours: f64,
    /// Every job's GPU-hours.
    pub trace_gpu_hours: f64,
    /// GPUs of the largest of them.
    pub largest_gpus: u32,
    /// The cluster replayed.
    pub cluster: ClusterSpec,
}

impl std::fmt::Display for Oversized {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pct = |h: f64| 100.0 * h / self.trace_gpu_hours.max(f64::MIN_POSITIVE);
        let per = self.cluster.gpus_per_node.max(1);
        let nodes = self.largest_gpus.div_ceil(per).max(self.cluster.nodes);
        write!(
            f,
            "{} job{} larger than the cluster ({}) hold{} {:.0}% of the trace's GPU-hours ({:.0} of {:.0})",
            self.jobs,
            if self.jobs == 1 { "" } else { "s" },
            self.cluster,
            if self.jobs == 1 { "s" } else { "" },
            pct(self.gpu_hours),
            self.gpu_hours,
            self.trace_gpu_hours,
        )?;
        if self.unknown_gpu_hours > 0.0 {
            write!(
                f,
                ", and jobs of accounts the tree does not know {:.0}% more",
                pct(self.unknown_gpu_hours)
            )?;
        }
        write!(
            f,
            "; a replay of the rest would compare policies on a sliver of the workload: replay a \
             cluster that holds the largest job ({} GPUs), e.g. --cluster {nodes}x{per} or [sim] \
             cluster = \"{nodes}x{per}\"",
            self.largest_gpus,
        )
    }
}

/// `name` as a TOML key: bare when it can be.
fn toml_key(name: &str) -> String {
    if !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        name.to_string()
    } else {
        format!("{name:?}")
    }
}

impl Workload {
    /// The unknown accounts, when they hold more than half of the trace's
    /// GPU-hours: a replay of what is left would compare policies on a
    /// sliver of the workload (or on nothing), so `allot sim` refuses it.
    pub fn unmatched(&self, classes_only: bool) -> Option<Unmatched> {
        let mut unknown: Vec<(&str, f64)> = self
            .left_out
            .iter()
            .filter_map(|l| l.account.as_deref().map(|a| (a, l.gpu_hours)))
            .collect();
        let gpu_hours: f64 = unknown.iter().map(|u| u.1).sum();
        if unknown.is_empty() || gpu_hours * 2.0 <= self.trace_gpu_hours {
            return None;
        }
        unknown.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
        let groups = self
            .left_out
            .iter()
            .filter(|l| l.reason.starts_with(GROUP))
            .filter_map(|l| l.account.clone())
            .collect();
        Some(Unmatched {
            accounts: unknown.into_iter().map(|u| u.0.to_string()).collect(),
            groups,
            gpu_hours,
            trace_gpu_hours: self.trace_gpu_hours,
            classes_only,
        })
    }
}

impl Workload {
    /// The jobs larger than the cluster, when they and the unknown
    /// accounts' jobs together hold more than half of the trace's
    /// GPU-hours (the threshold of [`Workload::unmatched`], for the same
    /// reason: policies compared on the rest would be compared on a sliver
    /// of the workload), so `allot sim` refuses the replay. `None` when no
    /// job is larger than the cluster.
    pub fn oversized(&self) -> Option<Oversized> {
        let too_large = |l: &&LeftOut| l.account.is_none() && l.reason.starts_with(TOO_LARGE);
        let (jobs, gpu_hours) = self
            .left_out
            .iter()
            .filter(too_large)
            .fold((0, 0.0), |(j, h), l| (j + l.jobs, h + l.gpu_hours));
        let unknown_gpu_hours: f64 = self
            .left_out
            .iter()
            .filter(|l| l.account.is_some())
            .map(|l| l.gpu_hours)
            .sum();
        if jobs == 0 || (gpu_hours + unknown_gpu_hours) * 2.0 <= self.trace_gpu_hours {
            return None;
        }
        Some(Oversized {
            jobs,
            gpu_hours,
            unknown_gpu_hours,
            trace_gpu_hours: self.trace_gpu_hours,
            largest_gpus: self.largest_too_large,
            cluster: self.cluster,
        })
    }
}

/// How a job larger than the cluster is left out ([`LeftOut::reason`]).
const TOO_LARGE: &str = "larger than the cluster";

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
    /// Maps `trace` onto `config`'s tree and `sim`'s rules (and
    /// `[sim.accounts]`) for `cluster`.
    pub fn prepare(
        trace: &Trace,
        config: &Config,
        sim: &SimSettings,
        cluster: ClusterSpec,
    ) -> Workload {
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
        let cap = config.contract.max_min_runtime;
        let mut accounts: Vec<String> = Vec::new();
        let mut account_ids: std::collections::HashMap<String, u32> = Default::default();
        let mut left: std::collections::BTreeMap<(String, Option<String>), (u64, f64)> =
            Default::default();
        let mut uses: Vec<(u64, f64)> = vec![(0, 0.0); sim.rules.len() + 2];
        let mut jobs = Vec::with_capacity(trace.jobs.len());
        let mut trace_gpu_hours = 0.0;
        let mut largest_too_large = 0u32;
        let mut mapped: std::collections::BTreeMap<(String, String, &'static str), u64> =
            Default::default();
        // A trace without tenants on a one-team tree: every job is that team's.
        let sole_account: Option<String> = match tree.leaves() {
            [only] if trace.classes_only => tree.node(*only).accounts.first().cloned(),
            _ => None,
        };
        for j in &trace.jobs {
            trace_gpu_hours += hours(j.gpus, j.duration);
            let by_config = sim.accounts.get(&j.team).or_else(|| sim.accounts.get("*"));
            let (account, by) = match (by_config, &sole_account) {
                (Some(a), _) => (a.as_str(), "[sim.accounts]"),
                (None, Some(a)) => (a.as_str(), "the one team: the trace has no tenants"),
                (None, None) => (j.team.as_str(), ""),
            };
            let Some(leaf) = tree.leaf_of_account(account) else {
                let e = left
                    .entry((
                        // A group's name: known to the tree, but jobs are
                        // charged to its leaves.
                        if tree
                            .find(account)
                            .is_some_and(|n| tree.node(n).leaf.is_none())
                        {
                            format!("{GROUP} {account} of the tree, not a leaf")
                        } else if account == j.team {
                            format!("unknown account {}", j.team)
                        } else {
                            format!("unknown account {account} (mapped from {})", j.team)
                        },
                        Some(j.team.clone()),
                    ))
                    .or_default();
                e.0 += 1;
                e.1 += hours(j.gpus, j.duration);
                continue;
            };
            let (nodes, per) = shape(j.gpus, cluster);
            if nodes > cluster.nodes {
                largest_too_large = largest_too_large.max(j.gpus);
                let e = left
                    .entry((format!("{TOO_LARGE} ({cluster})"), None))
                    .or_default();
                e.0 += 1;
                e.1 += hours(j.gpus, j.duration);
                continue;
            }
            if account != j.team {
                *mapped
                    .entry((j.team.clone(), account.to_string(), by))
                    .or_default() += 1;
            }
            let team = account;
            let account = *account_ids.entry(team.to_string()).or_insert_with(|| {
                accounts.push(team.to_string());
                accounts.len() as u32 - 1
            });
            let part = j.partition.as_deref();
            let rule = sim
                .rules
                .iter()
                .position(|r| r.min_runtime.is_some() && r.matches(team, part, j.gpus, j.duration));
            // A job runs no longer than its limit: a limit below the
            // runtime is read as the runtime.
            let time_limit = j.time_limit.map(|t| t.max(j.duration));
            // A recorded contract, else a rule, else the job's default, the
            // record and the default read as every reader reads them; never
            // above the time limit.
            let (min_runtime, decided) = match (j.min_runtime, rule) {
                (None, Some(i)) => (
                    within_time_limit(
                        match sim.rules[i].min_runtime {
                            Some(RuleMinRuntime::Fixed(m)) => m,
                            Some(RuleMinRuntime::Runtime) => j.duration.min(cap).max(1),
                            None => unreachable!("filtered on min_runtime"),
                        },
                        time_limit,
                    ),
                    i + 1,
                ),
                (recorded, _) => (
                    config.contract.job_min_runtime(recorded, part, time_limit),
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
                    .find(|r| r.resumable.is_some() && r.matches(team, part, j.gpus, j.duration))
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
                sweep: false,
                time_limit,
                submit_ms: j.submit_ms,
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
        // Every rule that sets a minimum runtime is listed, one that decided
        // no job too (its conditions match none: say so rather than hide it).
        let mut push = |rule: String, sets: String, (jobs, gpu_hours): (u64, f64), always: bool| {
            if jobs > 0 || always {
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
            false,
        );
        for (i, r) in sim.rules.iter().enumerate() {
            push(
                r.name.clone(),
                r.min_runtime.as_ref().map(describe).unwrap_or_default(),
                uses[i + 1],
                r.min_runtime.is_some(),
            );
        }
        push(
            "default".into(),
            format!(
                "contract.default_min_runtime={}",
                fairshare::duration::SlurmDuration(config.contract.default_min_runtime)
            ),
            uses[sim.rules.len() + 1],
            false,
        );
        let mut left_out: Vec<LeftOut> = left
            .into_iter()
            .map(|((reason, account), (jobs, gpu_hours))| LeftOut {
                account,
                reason,
                jobs,
                gpu_hours,
            })
            .collect();
        for (why, n) in &trace.skipped {
            left_out.push(LeftOut {
                account: None,
                reason: format!("trace: {why}"),
                jobs: *n,
                gpu_hours: 0.0,
            });
        }
        mark_sweeps(&mut jobs, config);
        Workload {
            jobs,
            teams,
            accounts,
            rules,
            left_out,
            trace_gpu_hours,
            mapped: mapped
                .into_iter()
                .map(|((name, account, by), jobs)| Mapped {
                    name,
                    account,
                    jobs,
                    by,
                })
                .collect(),
            cluster,
            largest_too_large,
        }
    }
}

#[cfg(test)]
mod tests;
