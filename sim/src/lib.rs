//! The simulator: replays a workload trace against a scheduling policy on a
//! cluster of nodes x GPUs, in simulated time, with the same engine code the
//! plugins run (for the `allot` policy: [`Engine`](fairshare::Engine) snapshots
//! rebuilt every `sync.interval` from a [`UsageTracker`](fairshare::UsageTracker)
//! charged by the contract rule, the engine's `u32` priorities, and
//! [`Engine::choose_victims`](fairshare::Engine::choose_victims) for preemption).
//!
//! - [`trace`]: parsing traces (allot CSV, Philly, Helios, Acme, Alibaba);
//! - [`settings`]: the `[sim]` section of `allot.toml` ([`SimSettings`]:
//!   cluster, half-life, contract rules, checkpoints, the timing model),
//!   which the engine's config keeps as written; parsed and validated here
//!   against that config, one validator per key;
//! - [`workload`]: teams mapped to leaves, contracts assigned, job classes;
//! - the event loop (`run.rs`), placement (`cluster.rs`) and [`metrics`].
//!
//! Deterministic: the same trace, config, cluster, policy and seed give the
//! same [`SimReport`], bit for bit.
//!
//! ```
//! use std::sync::Arc;
//! use fairshare::Config;
//! use allot_sim::{simulate, trace, ClusterSpec, Policy, SimSettings, Workload};
//!
//! let config = Arc::new(Config::from_toml_str(r#"
//!     [tree.a]
//!     share = 1
//!     [tree.b]
//!     share = 1
//! "#).unwrap());
//! let t = trace::parse("submit,duration,gpus,team\n0,7200,4,a\n0,7200,4,a\n60,3600,4,b\n", None).unwrap();
//! let cluster = ClusterSpec { nodes: 1, gpus_per_node: 8 };
//! let sim = SimSettings::from_config(&config).unwrap();
//! let w = Workload::prepare(&t, &config, &sim, cluster);
//! let r = simulate(&w, config, &sim, cluster, Policy::Allot, &t.events, &mut |_| {});
//! assert_eq!(r.finished, 3);
//! // a holds all 8 GPUs, b is entitled to 4: once a's jobs are past their
//! // 1 h contract, b's job preempts one of them (and only one).
//! assert_eq!(r.preemptions, 1);
//! assert_eq!(r.waits[1].p50_s, 0); // batch class: a's jobs started at once
//! assert_eq!(r.waits[1].p90_s, 3540); // b waited for a's contract
//! ```

mod baselines;
mod cluster;
pub mod forecast;
pub mod metrics;
mod run;
pub mod settings;
#[cfg(test)]
mod testutil;
pub mod trace;
pub mod workload;

use std::sync::Arc;

use serde::Serialize;

use fairshare::config::Config;
pub use metrics::Hourly;
pub use settings::{ClusterSpec, ContractRule, RuleMinRuntime, SimSettings};
pub use trace::{NodeEvent, NodeEventKind, Trace, TraceFormat, TraceJob};
pub use workload::{JobClass, SimJob, Team, Workload};

/// A scheduling policy to replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// allot: the engine's priorities over the sliding window, minimum-runtime
    /// contracts, fair-share preemption.
    Allot,
    /// Plain priority FIFO: submit order, no preemption, no fair share.
    Fifo,
    /// Static ownership: each team may hold at most its allocation of the
    /// GPUs (floor, remainders by largest fraction); idle slices are not
    /// lent; FIFO inside the slice.
    Static,
    /// Slurm classic fair-share (multifactor, `NO_FAIR_TREE`):
    /// `2^(-UE/S)` over half-life decayed usage; no preemption.
    Classic,
    /// Slurm Fair Tree over half-life decayed usage (the engine's Fair Tree
    /// code, Slurm's decay instead of a window); no preemption.
    #[serde(rename = "fairtree")]
    FairTree,
}

impl Policy {
    /// Every policy, in report order.
    pub const ALL: [Policy; 5] = [
        Policy::Allot,
        Policy::Fifo,
        Policy::Static,
        Policy::Classic,
        Policy::FairTree,
    ];

    /// Its CLI name.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Allot => "allot",
            Policy::Fifo => "fifo",
            Policy::Static => "static",
            Policy::Classic => "classic",
            Policy::FairTree => "fairtree",
        }
    }

    /// Parses a CLI name.
    pub fn from_name(name: &str) -> Option<Policy> {
        Policy::ALL.into_iter().find(|p| p.name() == name)
    }
}

impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Queue waits of one job class, seconds (first start - submit).
///
/// A class no job of which started has no waits: its percentiles read 0
/// here but are `null` in JSON, as the table prints `-` (a wait of 0 s
/// would read as "started at once").
#[derive(Debug, Clone, PartialEq)]
pub struct ClassWaits {
    /// The class.
    pub class: JobClass,
    /// Jobs of the class that started.
    pub jobs: u64,
    /// Median wait, seconds.
    pub p50_s: u64,
    /// 90th percentile, seconds.
    pub p90_s: u64,
    /// 99th percentile, seconds.
    pub p99_s: u64,
}

impl Serialize for ClassWaits {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let some = |v: u64| (self.jobs > 0).then_some(v);
        let mut st = s.serialize_struct("ClassWaits", 5)?;
        st.serialize_field("class", &self.class)?;
        st.serialize_field("jobs", &self.jobs)?;
        st.serialize_field("p50_s", &some(self.p50_s))?;
        st.serialize_field("p90_s", &some(self.p90_s))?;
        st.serialize_field("p99_s", &some(self.p99_s))?;
        st.end()
    }
}

/// One team's results. GPU-hours are GPU-seconds / 3600.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TeamReport {
    /// Leaf name.
    pub name: String,
    /// Allocation: fraction of the cluster, [0, 1].
    pub allocation: f64,
    /// Jobs submitted.
    pub jobs: u64,
    /// GPU-hours its jobs held.
    pub gpu_hours: f64,
    /// Allocation capped hour by hour at demand, GPU-hours.
    pub owed_gpu_hours: f64,
    /// What it got of that, GPU-hours.
    pub delivered_gpu_hours: f64,
    /// delivered / owed, [0, 1]; 1 for a team owed nothing (a share of 0,
    /// or no jobs), which nothing fell short for.
    pub owed_delivered: f64,
    /// Its share of all GPU-hours delivered, [0, 1].
    pub share: f64,
    /// Its GPU-hours / the cluster's capacity, [0, 1].
    pub occupancy: f64,
    /// Times its jobs were preempted.
    pub preempted: u64,
    /// Work its jobs lost to requeues, GPU-hours.
    pub lost_gpu_hours: f64,
    /// Median queue wait, seconds.
    pub wait_p50_s: u64,
    /// 90th percentile queue wait, seconds.
    pub wait_p90_s: u64,
    /// The same team's `wait_p90_s` under `classic` on the same
    /// configuration: `None` from the simulator, filled by a front end
    /// (`allot sim`) that replayed classic beside this run.
    pub classic_wait_p90_s: Option<u64>,
    /// GPU-hours it was entitled to: hour by hour, the org tree's
    /// water-fill of the hour's capacity against every team's demand of
    /// the hour ([`fairshare::entitlement`]), summed. What "more than its
    /// entitlement" is judged against.
    pub entitled_gpu_hours: f64,
    /// GPU-hours it held above its entitlement: hour by hour, what it got
    /// beyond what it was entitled to that hour (0 in an hour it held no
    /// more), summed.
    pub excess_gpu_hours: f64,
    /// The most of that in any one hour, as GPUs held on average over the
    /// hour.
    pub excess_peak_gpus: f64,
    /// What its ended attempts were charged under `allot`, charge
    /// unit-hours (GPU-hours with the default `[charge]` weights): the
    /// contract's charge of each attempt as the ledger computes it
    /// ([`fairshare::attempts`]: an attempt a node failure ended pays its
    /// runtime only). 0 under the baselines and for the free tier.
    pub charged_gpu_hours: f64,
}

/// A group of the org tree (an interior node: not the root, not a leaf):
/// its teams' GPU-hours against its entitlement, hour by hour
/// ([`SimReport::groups`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupReport {
    /// Its path below the root, dotted (e.g. `nlp` or `nlp.vision`).
    pub name: String,
    /// Its teams (leaves below it), by name.
    pub teams: Vec<String>,
    /// GPU-hours its teams held.
    pub gpu_hours: f64,
    /// GPU-hours it was entitled to: its teams' entitlements, summed (the
    /// water-fill splits a group's entitlement among its children, all of
    /// it as they want it).
    pub entitled_gpu_hours: f64,
    /// GPU-hours its teams together held above its entitlement, hour by
    /// hour (in one hour a team below its own entitlement offsets a
    /// sibling above: the allowance holds at the group; an hour below does
    /// not offset another above).
    pub excess_gpu_hours: f64,
    /// The most of that in one hour, as GPUs held on average over it.
    pub excess_peak_gpus: f64,
}

/// A team named as the worst served ([`SimReport::worst_team_floor`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorstTeam {
    /// Leaf name.
    pub name: String,
    /// Its owed GPU-hours delivered, [0, 1].
    pub owed_delivered: f64,
    /// GPU-hours it was owed.
    pub owed_gpu_hours: f64,
}

/// How often jobs went back to the queue ([`SimReport::requeues_per_job`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct RequeuesPerJob {
    /// The most times one job was requeued.
    pub max: u32,
    /// The 99th percentile (nearest rank) over every job of the run.
    pub p99: u32,
}

/// One preemption, for invariant checks and audits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PreemptionRecord {
    /// When, seconds since the first submission.
    pub time: u64,
    /// Engine snapshot number the decision used.
    pub snapshot: u32,
    /// Preempting job's trace id.
    pub preemptor: u64,
    /// Its team index.
    pub preemptor_team: u32,
    /// Its team's Fair Tree rank in that snapshot.
    pub preemptor_rank: u32,
    /// Victim's trace id.
    pub victim: u64,
    /// Victim's team index.
    pub victim_team: u32,
    /// Victim team's rank in that snapshot.
    pub victim_rank: u32,
    /// Victim's minimum runtime, seconds.
    pub victim_min_runtime: u64,
    /// How long the victim had run in this attempt, seconds.
    pub victim_run_time: u64,
    /// The preemptor is a short job (the short band).
    pub preemptor_short: bool,
    /// The preemptor's minimum runtime, seconds (its protection).
    pub preemptor_min_runtime: u64,
    /// The victim was allocated and its leaf ended below its entitlement
    /// (allowed only when the preemptor covers at least twice what the
    /// victims' leaves lose: [`fairshare::preempt`]).
    pub victim_left_below: bool,
}

/// A job's priority as slurmctld sets it at submission (`InitPrio`), under
/// `allot`: the band and the team's rank in the engine snapshot in effect
/// when it arrived (the rank's age score is 0 then).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PriorityRecord {
    /// When it arrived, seconds since the first submission.
    pub time: u64,
    /// The job's trace id.
    pub job: u64,
    /// Its team index.
    pub team: u32,
    /// Its band: the priority's bits 31-30 ([`fairshare::priority::Band`]:
    /// 0 free tier, 1 allocated, 2 entitled, 3 short).
    pub band: u8,
    /// Its team's Fair Tree rank (bits 29-16).
    pub rank: u32,
}

/// One attempt of a job (a run between its start and its end or requeue),
/// as `sacct --duplicates` lists them; times are seconds since the first
/// submission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct AttemptRecord {
    /// The job's trace id.
    pub job: u64,
    /// Its team index.
    pub team: u32,
    /// 0 for the first attempt, n after n requeues (Slurm's `Restarts`).
    pub attempt: u32,
    /// When the attempt started.
    pub start: u64,
    /// When it ended or was requeued; `None` if it was still running when
    /// the replay stopped (`stopped_at_horizon`).
    pub end: Option<u64>,
    /// GPUs it held.
    pub gpus: u32,
    /// The job's minimum runtime, seconds (0: free tier). The attempt
    /// could not be preempted before `start + min_runtime`.
    pub min_runtime: u64,
    /// How it ended.
    pub ended: AttemptEnd,
}

/// How an attempt ended ([`AttemptRecord::ended`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AttemptEnd {
    /// The job's work was done.
    Completed,
    /// Requeued by a preemptor.
    Preempted,
    /// Requeued by a drain of its node.
    Drained,
    /// Requeued by a node failure.
    Failed,
    /// Still running when the replay stopped.
    Running,
}

/// The result of one replay.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimReport {
    /// Policy replayed.
    pub policy: Policy,
    /// Jobs replayed.
    pub jobs: u64,
    /// Jobs that finished.
    pub finished: u64,
    /// Jobs that never finished (e.g. larger than a static slice).
    pub unfinished: u64,
    /// Simulated span: first submission to last event, seconds.
    pub span_s: u64,
    /// Events processed.
    pub events: u64,
    /// Capacity over the span, GPU-hours.
    pub capacity_gpu_hours: f64,
    /// GPU-hours jobs held.
    pub gpu_hours: f64,
    /// Sum over teams of allocation capped hour by hour at demand, GPU-hours.
    pub owed_gpu_hours: f64,
    /// What was delivered of that, GPU-hours.
    pub delivered_gpu_hours: f64,
    /// delivered / owed, [0, 1].
    pub owed_delivered: f64,
    /// The same with owed and delivered counted per week instead of per
    /// hour (a team that gets its hours back within the week is made
    /// whole), [0, 1].
    pub owed_delivered_weekly: f64,
    /// Teams whose owed_delivered is at least 0.95.
    pub teams_at_95: u64,
    /// The team with the lowest owed_delivered (owed > 0), and its value.
    pub worst_team: Option<(String, f64)>,
    /// The team with the lowest owed_delivered among those owed at least
    /// `[sim] worst_floor_gpu_hours`; `None` when no team is.
    pub worst_team_floor: Option<WorstTeam>,
    /// Requeues per job (preemptions, drains and node failures), over
    /// every job of the run.
    pub requeues_per_job: RequeuesPerJob,
    /// GPU-hours held / capacity from the first submission to the last one,
    /// [0, 1]: one span for every policy, so a long tail of one policy does
    /// not change its denominator.
    pub occupancy: f64,
    /// GPU-hours held / capacity from the first submission to the last
    /// event (the whole replay), [0, 1].
    pub occupancy_to_end: f64,
    /// Share of GPU-hours held by free-tier (unallocated) jobs, [0, 1].
    pub unallocated_share: f64,
    /// Queue waits by class.
    pub waits: Vec<ClassWaits>,
    /// Preemptions.
    pub preemptions: u64,
    /// Requeues because a node was drained.
    pub drain_requeues: u64,
    /// Requeues because a node failed.
    pub fail_requeues: u64,
    /// Work lost to requeues, GPU-hours.
    pub lost_gpu_hours: f64,
    /// lost_gpu_hours / delivered_gpu_hours, [0, ..).
    pub lost_of_delivered: f64,
    /// Preemptions per 1,000 delivered GPU-hours.
    pub preemptions_per_1000_gpu_hours: f64,
    /// Reversals: preemptions by a job that is not short of team A of a job
    /// of team B that were answered by one of B's jobs (not short)
    /// preempting one of A's while A's preempting job was still inside its
    /// minimum runtime. Counted once per first preemption.
    pub reversals: u64,
    /// Mean hourly share error over the rolling metric window, [0, 1].
    pub share_error_mean: f64,
    /// 90th percentile of the hourly share error, [0, 1].
    pub share_error_p90: f64,
    /// Node events naming a node outside the cluster (ignored).
    pub ignored_node_events: u64,
    /// The run hit its horizon (a preemption livelock) with jobs unfinished.
    pub stopped_at_horizon: bool,
    /// Per team.
    pub teams: Vec<TeamReport>,
    /// Per group of the tree (interior node), in the tree's order; empty
    /// for a flat tree.
    pub groups: Vec<GroupReport>,
    /// Hourly series (for plots and invariant checks).
    #[serde(skip)]
    pub hourly: Hourly,
    /// Sorted waits per class (index = [`JobClass`] as usize), seconds.
    #[serde(skip)]
    pub wait_samples: Vec<Vec<u64>>,
    /// Every preemption.
    #[serde(skip)]
    pub preemption_log: Vec<PreemptionRecord>,
    /// Under `allot`, every job's priority at its submission.
    #[serde(skip)]
    pub submit_priorities: Vec<PriorityRecord>,
    /// Every attempt of every job, in the order they ended (those still
    /// running at the end last).
    #[serde(skip)]
    pub attempt_log: Vec<AttemptRecord>,
}

/// Replays `workload` under `policy` on `cluster`, with node `events`, the
/// engine's `config` and the `[sim]` settings `sim` (parsed from it).
/// `progress` is called now and then with the number of finished jobs.
pub fn simulate(
    workload: &Workload,
    config: Arc<Config>,
    sim: &SimSettings,
    cluster: ClusterSpec,
    policy: Policy,
    events: &[NodeEvent],
    progress: &mut dyn FnMut(u64),
) -> SimReport {
    run::Sim::new(workload, config, sim, cluster, policy, events).run(progress)
}

#[cfg(test)]
mod tests;
