//! The `[sim]` section of `allot.toml`: how the simulator replays a trace.
//!
//! The plugins ignore this section; `allot check-config` validates it with
//! the rest of the file, so a typo is caught before a long replay.
//!
//! ```toml
//! [sim]
//! cluster = "44x8"                # NODESxGPUS; `allot sim --cluster` overrides
//! half_life = "7-0"               # classic/fairtree: Slurm's PriorityDecayHalfLife
//! calc_period = "5:00"            # classic/fairtree: Slurm's PriorityCalcPeriod
//! seed = 0                        # placement tie-breaks
//! backfill_depth = 500            # jobs the backfill pass looks at (Slurm: bf_max_job_test)
//! backfill_interval = "0:30"      # seconds between backfill passes (Slurm: bf_interval)
//! backfill_reserve = "first"      # "all": every job the backfill looks at gets a reservation
//! backfill_hold = "gpus"          # "nodes": with "all", a reservation holds its whole nodes, as in Slurm
//! backfill_candidates = "busy"    # "free": with "all", a reservation counts the job's preemption candidates free
//! backfill_idle = "run"           # "skip": with sched_interval, a backfill pass only after a change, as in Slurm
//! backfill_preempt = "first"      # "all": the backfill may preempt for every job it looks at
//! short_partition = "apart"       # "shared": a short job that cannot start holds up the others like any job, as in Slurm
//! preemptor_start = "at_once"     # "next_pass": a preemptor waits for a later pass, as in Slurm
//! victim_budget = "cluster"       # "node": a team's victims bounded per node, as the preempt plugin
//! snapshot_phase = "pass"         # with sched_interval, the plugins' rebuild: "seeded" offset into its second, "clock": 0.5 s
//! sync_offset = 0                 # the sync.interval ticks fall at the seconds t with t mod sync.interval = this
//! drain_pass_ms = ...             # with sched_interval: the sidecar's draining pass, ms into each tick (default: at once)
//! victim_complete_ms = ...        # with next_pass: a victim's GPUs stay busy this long after its preemption (default: to the pass's end)
//! ledger_lag = "0"                # a job's start or end reaches the plugins' usage this much later
//! repreempt_delay = "0"           # a job that preempted may not again for this long (Slurm: KillWait + MessageTimeout)
//! requeue_delay = "0"             # a requeued job waits this long (Slurm: cred_expire + 1)
//! placement = "best_fit"          # "cons_tres": Slurm's node choice (most jobs, lowest index)
//! node_cpus = 0                   # with cons_tres: CPUs a node (one a job): its runs of nodes
//! attempt_overhead_ms = 0         # launch + end report of each attempt, milliseconds
//! attempt_jitter_ms = 0           # ... each attempt's drawn (seeded) within this of it
//! pass_miss_ms = 0                # part of each second after slurmctld's pass, milliseconds
//! main_phase_ms = 0               # the main pass's offset into its second, milliseconds (0-999)
//! pass_drift_us = 0               # both passes start this much later each second, microseconds
//! main_drift_us = ...             # the main pass's own drift (default: pass_drift_us)
//! main_passes_us = []             # instants the main pass was seen at (µs since second 0); evenly between
//! backfill_passes_us = []         # ... and the backfill pass
//! sched_interval = "0"            # main scheduler only every this, before the second's arrivals
//! sched_offset = 0                # ... at the seconds t with t mod sched_interval = this
//! backfill_resolution = "0"       # reservations' ends rounded down to this (Slurm: bf_resolution)
//! resolution_offset = 0           # ... the trace's second 0 past a multiple of it
//! will_run_window = "0"           # with "all" and "nodes": Slurm's will-run test, running jobs' ends in windows (30 s)
//! will_run_offset = 0             # ... the trace's second 0 past a multiple of it
//! resumable = true                # requeued jobs continue with their remaining work
//! checkpoint_interval = "30:00"   # ... from their last checkpoint; "0" = lose nothing
//! metric_window = "1-0"           # rolling window of the share-error metric
//!
//! [[sim.rule]]                    # traces carry no contracts: first matching rule wins
//! name = "debug"
//! max_gpus = 1
//! max_duration = "30:00"
//! min_runtime = "0"               # free tier
//! [[sim.rule]]
//! name = "long-runs"
//! min_duration = "8:00:00"
//! min_runtime = "runtime"         # declare the job's own runtime, capped at max_min_runtime
//! ```
//!
//! A job whose trace row records a minimum runtime keeps it; otherwise the
//! first rule that matches sets it (and/or `resumable`); a job matching no
//! rule gets `contract.default_min_runtime`. The simulator reports how many
//! jobs and GPU-hours each rule took.

use serde::Deserialize;

use crate::config::ConfigError;
use crate::duration::parse_slurm_duration;

/// A cluster of identical GPU nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ClusterSpec {
    /// Number of nodes (> 0).
    pub nodes: u32,
    /// GPUs per node (> 0).
    pub gpus_per_node: u32,
}

impl ClusterSpec {
    /// Total GPUs.
    pub fn gpus(&self) -> u64 {
        u64::from(self.nodes) * u64::from(self.gpus_per_node)
    }

    /// Parses `NODESxGPUS` such as `44x8`.
    ///
    /// # Errors
    /// A message naming the text and what to write.
    pub fn parse(text: &str) -> Result<ClusterSpec, String> {
        let bad = || format!("cluster {text:?}: write NODESxGPUS, e.g. 44x8 (44 nodes of 8 GPUs)");
        let (n, g) = text.trim().split_once(['x', 'X']).ok_or_else(bad)?;
        let nodes: u32 = n.trim().parse().map_err(|_| bad())?;
        let gpus_per_node: u32 = g.trim().parse().map_err(|_| bad())?;
        if nodes == 0 || gpus_per_node == 0 || gpus_per_node > 1024 || nodes > 1_000_000 {
            return Err(format!(
                "cluster {text:?}: nodes must be 1..=1000000 and GPUs per node 1..=1024"
            ));
        }
        Ok(ClusterSpec {
            nodes,
            gpus_per_node,
        })
    }

    /// A cluster of `capacity` GPUs in nodes of 8 (the last node may be
    /// smaller in reality; here it is rounded up to a whole node).
    pub fn from_capacity(capacity: u64) -> ClusterSpec {
        ClusterSpec {
            nodes: capacity.div_ceil(8).max(1) as u32,
            gpus_per_node: 8,
        }
    }
}

impl std::fmt::Display for ClusterSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{}", self.nodes, self.gpus_per_node)
    }
}

/// Which pending jobs the simulator's backfill pass reserves GPUs for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BackfillReserve {
    /// EASY backfill: only the first blocked job gets a reservation; a
    /// later job may start if it ends before it or keeps off its nodes.
    First,
    /// Every job the pass looks at (up to `backfill_depth`) in priority
    /// order either starts without delaying any reservation made before it
    /// or gets one at the earliest time it fits: what Slurm's
    /// sched/backfill does (it plans a start for each job it tests).
    All,
}

/// What a backfill reservation (`backfill_reserve = "all"`) keeps from
/// lower jobs over its interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BackfillHold {
    /// Its own GPUs on each of its nodes: a lower job may use the rest of
    /// the node (what the simulator always did).
    Gpus,
    /// Its whole nodes: Slurm 22.05's sched/backfill keeps its plan as a
    /// map of node bitmaps over time (`node_space`), and a reservation
    /// takes its nodes out of the map over `[start, end)` rounded down to
    /// `bf_resolution` (at least one slot), whatever GPUs it asked for.
    /// A lower job may start only on nodes free of reservations from now to
    /// its time limit (both ends included). A job that preempts holds its
    /// nodes so from now until the pass ends (backfill.c "drop through and
    /// reserve these resources"). The testbed's `DebugFlags=Backfill` log
    /// shows a 2-GPU job's reservation taking a whole 8-GPU node for a
    /// minute.
    Nodes,
}

/// Where short jobs (the short band) run, as far as a job that cannot
/// start holding up the others goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ShortPartition {
    /// In a partition on nodes of their own: a short job that cannot start
    /// stops neither pass nor gets a backfill reservation (what the
    /// simulator always did).
    Apart,
    /// In a partition that shares its nodes with the others (or in the
    /// same one): a short job that cannot start is like any other. Slurm
    /// 22.05's main scheduler, once a job cannot start
    /// (`ESLURM_NODES_BUSY`), starts no more jobs of its partition *nor on
    /// that partition's nodes* for the rest of the pass (job_scheduler.c
    /// `fail_this_part`), and its backfill plans a start for every job it
    /// tests. The testbed's `gpu` and `debug` partitions share all nodes,
    /// and the calibration slices' short 2-GPU jobs run in `gpu` itself.
    Shared,
}

/// Whether a backfill pass runs when nothing changed since the last one
/// (with `sched_interval`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BackfillIdle {
    /// Every `backfill_interval` while a job is pending (what the
    /// simulator always did).
    Run,
    /// Only when a job was submitted, started, ended or requeued, or a
    /// node changed, in the second the last pass ran or later: Slurm
    /// 22.05's backfill agent skips the pass otherwise (backfill.c
    /// `_more_work`, whole-second stamps) and looks again a second later,
    /// so after a change in second `c` its passes run up to `c +
    /// backfill_interval`. A requeued job whose begin time passes, or a
    /// contract that ends, is no such change: in a quiet stretch it waits
    /// for the main pass (on the testbed a requeued job eligible at 14 s
    /// was started by the main pass at 15.2 s, not the backfill at 14.4).
    Skip,
}

/// How a backfill reservation (`backfill_reserve = "all"`) counts the
/// running jobs the pending job may preempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BackfillCandidates {
    /// Busy until their planned ends, like any running job (what the
    /// simulator always did).
    Busy,
    /// Free from now: Slurm 22.05's will-run test (select/cons_tres,
    /// cons_common `_will_run_test`) takes the preemptee candidates the
    /// preempt plugin allowed out of its copy of the nodes' usage before it
    /// walks the other running jobs' ends, so a job that cannot start even
    /// by preempting is planned onto the nodes where preemptable jobs run,
    /// and lower jobs may backfill the nodes it would otherwise wait for.
    /// Under `allot`, for an allocated job (the free tier preempts nobody).
    Free,
}

/// When, inside the second of a `sync.interval` tick, the simulator takes
/// its engine snapshot (with `sched_interval` set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotPhase {
    /// At the first scheduling pass at or after the tick, after the job
    /// ends and arrivals before that pass (what the simulator always did).
    Pass,
    /// At a seeded offset into the tick's second, whether or not a pass
    /// runs then, as the plugins' engine thread rebuilds on its own timer:
    /// the priority band reads the jobs running and pending at that
    /// instant, and a job that ends after it counts until the next
    /// rebuild. The thread's phase against slurmctld's second is not in any
    /// log, so each seed draws one (the plugins before their timer ran on
    /// the clock).
    Seeded,
    /// At [`crate::timer::REBUILD_OFFSET_MS`] into the tick's second, as
    /// the plugins rebuild on the clock ([`crate::timer`]).
    Clock,
}

/// For which pending jobs a backfill pass may preempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BackfillPreempt {
    /// Only the first job the pass cannot start (what the simulator always
    /// did).
    First,
    /// Every job the pass looks at (up to `backfill_depth`) that cannot
    /// start on free GPUs may preempt on the nodes no higher job is planned
    /// on over its time limit (the first reservation's nodes with
    /// `backfill_reserve = "first"`): what Slurm's sched/backfill does, which
    /// tests each job with its preemption candidates' resources counted
    /// free and starts it, preempting them, if that start is now.
    All,
}

/// When a job that preempted starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PreemptorStart {
    /// At once, on the GPUs its victims free (what the simulator always
    /// did).
    AtOnce,
    /// In a later pass, like any pending job: its victims hold their GPUs
    /// until the pass that preempted them ends (slurmctld signals them and
    /// they free the GPUs as their requeue completes, tens of milliseconds
    /// later), and the next pass gives the GPUs to the highest-priority job
    /// that fits, which need not be the preemptor. Slurm's main scheduler
    /// and backfill both leave the preemptor pending when they preempt
    /// (select_nodes answers "nodes busy"); the testbed's slurmctld.log
    /// shows a short job submitted a second later starting on them first.
    NextPass,
}

/// Where the simulator's search for a one-node preemptor's victims bounds
/// what a team may lose (before the engine judges the set it finds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VictimBudget {
    /// Cluster-wide: a team's youngest unprotected jobs use up what it may
    /// lose wherever they run (what the simulator always did); a node where
    /// the preemptor fits beside an older job of that team may be missed.
    Cluster,
    /// Per node: a team may lose that much on each node, as the preempt
    /// plugin allows (it tallies a one-node preemptor's victims per node,
    /// and slurmctld preempts only on the node the preemptor starts on).
    Node,
}

/// How the simulator picks the node of a one-node job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// The node with the fewest free GPUs that holds it, ties broken by a
    /// seeded hash of the job.
    BestFit,
    /// Slurm 22.05's select/cons_tres with one CPU a job: of the nodes with
    /// the GPUs free, the one with the fewest CPUs available, i.e. the most
    /// jobs running, the lowest index on a tie.
    ConsTres,
}

/// What a rule sets as the minimum runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleMinRuntime {
    /// A fixed number of seconds (0 = free tier).
    Fixed(u64),
    /// The job's own runtime from the trace, capped at `max_min_runtime`
    /// (a user who knows how long the job runs and buys all of it).
    Runtime,
}

/// One `[[sim.rule]]`: conditions (all must hold; absent = any) and what
/// it sets.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ContractRule {
    /// Shown in the output (default `rule N`, 1-based).
    pub name: String,
    /// Teams (Slurm accounts) it applies to; empty = every team.
    pub teams: Vec<String>,
    /// Partitions it applies to; empty = every partition.
    pub partitions: Vec<String>,
    /// Jobs with at least this many GPUs.
    pub min_gpus: Option<u32>,
    /// Jobs with at most this many GPUs.
    pub max_gpus: Option<u32>,
    /// Jobs whose trace runtime is at least this, seconds.
    pub min_duration: Option<u64>,
    /// Jobs whose trace runtime is at most this, seconds.
    pub max_duration: Option<u64>,
    /// The minimum runtime it sets, if any.
    pub min_runtime: Option<RuleMinRuntime>,
    /// Whether its jobs continue after a requeue, if set.
    pub resumable: Option<bool>,
}

impl ContractRule {
    /// True if a job of `team`, `partition`, `gpus` GPUs and `duration`
    /// seconds matches every condition.
    pub fn matches(&self, team: &str, partition: Option<&str>, gpus: u32, duration: u64) -> bool {
        (self.teams.is_empty() || self.teams.iter().any(|t| t == team))
            && (self.partitions.is_empty()
                || partition.is_some_and(|p| self.partitions.iter().any(|x| x == p)))
            && self.min_gpus.map_or(true, |m| gpus >= m)
            && self.max_gpus.map_or(true, |m| gpus <= m)
            && self.min_duration.map_or(true, |m| duration >= m)
            && self.max_duration.map_or(true, |m| duration <= m)
    }
}

/// Validated `[sim]` settings. Durations are seconds.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SimSettings {
    /// Cluster shape; `None`: `--cluster`, else `capacity_gpus` in nodes of 8.
    pub cluster: Option<ClusterSpec>,
    /// Half-life of decayed usage for `classic` and `fairtree` (default 7 d).
    pub half_life: u64,
    /// How often `classic` and `fairtree` recompute decayed usage (default 300 s).
    pub calc_period: u64,
    /// Seed for placement tie-breaks.
    pub seed: u64,
    /// Pending jobs the backfill pass examines after the first blocked one.
    pub backfill_depth: u32,
    /// Seconds between two backfill passes while a job is blocked (the main
    /// scheduler runs on every event and stops at the first blocked job).
    pub backfill_interval: u64,
    /// Which jobs the backfill pass reserves GPUs for: `first` (EASY, the
    /// default, what the simulator always did) or `all` (Slurm's
    /// sched/backfill; with the trace's `time_limit`s it plans as
    /// slurmctld does).
    pub backfill_reserve: BackfillReserve,
    /// What each such reservation holds: `gpus` (default: its GPUs) or
    /// `nodes` (its whole nodes, as Slurm's sched/backfill).
    pub backfill_hold: BackfillHold,
    /// How each such reservation counts the jobs its job may preempt:
    /// `busy` (default: until their planned ends) or `free` (from now, as
    /// Slurm's will-run test).
    pub backfill_candidates: BackfillCandidates,
    /// With `sched_interval`, whether a backfill pass runs when nothing
    /// changed since the last one: `run` (default) or `skip` (as Slurm's
    /// backfill agent).
    pub backfill_idle: BackfillIdle,
    /// Whether a short job that cannot start holds up the others
    /// ([`ShortPartition`]).
    pub short_partition: ShortPartition,
    /// For which jobs a backfill pass may preempt: `first` (default: the
    /// first job it cannot start) or `all` (every job it looks at, as
    /// Slurm's sched/backfill).
    pub backfill_preempt: BackfillPreempt,
    /// When in a tick's second the engine snapshot is taken: `pass`
    /// (default), `seeded` (at a seeded offset) or `clock` (half a second
    /// in, as the plugins' timer).
    pub snapshot_phase: SnapshotPhase,
    /// When a job that preempted starts: `at_once` (default) on its
    /// victims' GPUs, or `next_pass` (as slurmctld: it waits, and the next
    /// pass gives the GPUs to the highest-priority job that fits).
    pub preemptor_start: PreemptorStart,
    /// Where a team's loss is bounded while searching a one-node
    /// preemptor's victims: `cluster` (default) or `node` (as the preempt
    /// plugin judges them).
    pub victim_budget: VictimBudget,
    /// Seconds a job's start or end takes to reach the usage the plugins
    /// rank with (`allot`): the plugins read the ledger `allot sync` fills
    /// from sacct every `sync.interval`, and slurmdbd learns of a start or
    /// end some seconds after slurmctld. A snapshot at `t` charges the jobs
    /// it knows of (those started up to `t - ledger_lag`) up to `t`, and
    /// still counts a job that ended after `t - ledger_lag` as running. The
    /// priority band's load is slurmctld's own job list: never late.
    /// 0 (default): the usage is current.
    pub ledger_lag: u64,
    /// Seconds after a job preempts before it may preempt again. Slurm's
    /// select_nodes kills no more jobs for a preemptor whose preemption
    /// began less than `KillWait + MessageTimeout` ago (default 30 + 10 s;
    /// the testbed's 2 + 10): it waits for the GPUs already asked for, even
    /// when another job took them. 0 (default): no wait.
    pub repreempt_delay: u64,
    /// Node choice of one-node jobs: `best_fit` (default) or `cons_tres`
    /// (as slurmctld chooses; matters for which jobs a drain hits).
    pub placement: Placement,
    /// With `placement = "cons_tres"`: CPUs per node, one a job. Above 0,
    /// select/cons_tres's own choice: the nodes a job fits on form runs of
    /// consecutive nodes, the run with the fewest CPUs available in all
    /// is taken and in it the node with the fewest. 0 (default): the node
    /// with the fewest CPUs available (the most jobs) over all nodes.
    pub node_cpus: u32,
    /// Seconds a requeued job (preempted, drained or failed) waits before
    /// it may start again. Slurm 22.05 sets a requeued batch job's begin
    /// time to `now + cred_expire + 1` (`AuthInfo=cred_expire=`, default
    /// 1200 s, so 1201 s); the default 0 makes it eligible at once, as the
    /// simulator always did. `scripts/calibrate` gives the testbed's value.
    pub requeue_delay: u64,
    /// Milliseconds each attempt holds its GPUs beyond its work: the batch
    /// script's launch after slurmctld starts the job plus the report of
    /// its end. Slurm records start and end in whole seconds, so an
    /// attempt of `d` seconds of work is recorded (and held) as `d + 1`
    /// seconds when its start's offset into its second (with
    /// `sched_interval` the starting pass's, else a seeded hash of job and
    /// attempt) plus this overhead crosses a second: on average `d +
    /// overhead`. 0 (default): exactly `d`. At most 60000.
    pub attempt_overhead_ms: u64,
    /// Milliseconds by which one attempt's overhead differs from the next:
    /// each attempt's is drawn evenly from `attempt_overhead_ms` ± this
    /// (to the microsecond, seeded by `seed`, the job and its attempt, so
    /// the same seed replays the same), never below 0. The testbed's ends
    /// vary by tens of milliseconds, and an end that close to a pass may
    /// fall on either side of it: the seeded replays then sample both
    /// sides, as runs of the real cluster do. 0 (default): every attempt
    /// the same. At most 60000.
    pub attempt_jitter_ms: u64,
    /// The part of each second, milliseconds, after slurmctld's (backfill)
    /// pass in it: a job submitted then (its sub-second submit offset, the
    /// trace's `submit_ms` or else seeded, at least `1000 - pass_miss_ms`)
    /// is first looked at in the next second. 0 (default): every job is
    /// looked at in the second it arrives. At most 1000.
    pub pass_miss_ms: u64,
    /// With `sched_interval`: the main scheduler's offset into its second,
    /// milliseconds, 0-999. A job submitted earlier in that second (its
    /// submit phase: the trace's `submit_ms`, else seeded, the one
    /// `pass_miss_ms` reads) is in that main pass. The backfill runs at
    /// `1000 - pass_miss_ms`; the two passes run in the order of their
    /// offsets. 0 (default): the main pass comes first, before every
    /// arrival.
    pub main_phase_ms: u64,
    /// With `sched_interval`: microseconds by which both passes' offsets
    /// grow each second (0, the default: fixed offsets). slurmctld's
    /// backfill sleeps `bf_interval` after each pass *ends*, so each pass
    /// starts later by the last one's run time and its offset drifts
    /// through the second (on the testbed about 2 ms a second, 0.5 s over
    /// a calibration slice; the main pass drifts alike). `main_phase_ms`
    /// and `pass_miss_ms` give the offsets at the trace's second 0. With a
    /// drift a pass whose offset passes the second's end skips a second.
    /// At most 100000.
    pub pass_drift_us: u64,
    /// With `sched_interval`: the main pass's own drift, microseconds a
    /// second. slurmctld runs its main pass from a loop of a second plus
    /// this (controller.c `_slurmctld_background`; the simulator's
    /// `sim/src/run/main_loop.rs`), about 5000 on the testbed where the
    /// backfill drifts 2000-3000. `None` (default): `pass_drift_us`. At
    /// most 100000.
    pub main_drift_us: Option<u64>,
    /// With `sched_interval`: instants at which slurmctld's main pass was
    /// seen to run, microseconds since the trace's second 0, ascending
    /// (`scripts/calibrate` reads them from slurmctld.log: the passes that
    /// started a job). Each is a wake-up of the loop that runs the main
    /// pass; between two seen the loop's wake-ups fall evenly (as many
    /// whole seconds as fit, so the drift between them is exactly what
    /// the log shows), before the first and after the last one every
    /// second plus `main_drift_us`, and a wake-up runs the pass when its
    /// whole second is `sched_interval` past the last pass's. Empty
    /// (default): `sched_offset` and `main_phase_ms` give the one seen
    /// pass.
    pub main_passes_us: Vec<u64>,
    /// The same for the backfill pass (every `backfill_interval`; empty:
    /// `pass_miss_ms` and `pass_drift_us` alone).
    pub backfill_passes_us: Vec<u64>,
    /// Seconds between two passes of slurmctld's main scheduler (its
    /// `sched_interval`, 60 s by default in Slurm). 0 (default): the
    /// simulator's main pass runs at every event, after the second's
    /// arrivals, as it always did. Above 0: the main pass runs only every
    /// `sched_interval` (from second `sched_offset`, `main_phase_ms` into
    /// its second) and a backfill pass every `backfill_interval` while any
    /// job is pending (`1000 - pass_miss_ms` into its second); inside a
    /// second the passes, arrivals and job ends go in the order of their
    /// offsets.
    pub sched_interval: u64,
    /// The second of the first main pass (see `sched_interval`), less than
    /// `sched_interval`. slurmctld runs its main scheduler `sched_interval`
    /// after the last run, so the phase follows slurmctld's start, not the
    /// epoch (`scripts/calibrate` reads each run's from slurmctld.log).
    pub sched_offset: u64,
    /// The second of the first `sync.interval` tick (the engine snapshot
    /// `allot` takes), less than `sync.interval`: ticks fall at the
    /// trace's seconds t with t mod `sync.interval` = this. The plugins
    /// rebuild on the clock, at whole multiples of the interval since the
    /// epoch ([`crate::timer`]), so `scripts/calibrate` gives each run's.
    pub sync_offset: u64,
    /// With `sched_interval`: when the sidecar (`allot sync --follow`)
    /// acts on a drain, milliseconds into the second, 0-999. Its draining
    /// pass runs after each sync pass, at every `sync.interval` tick
    /// (`sync_offset`; the sync pass itself takes the first ~180 ms), and
    /// again at the second a protected job's contract on a draining node
    /// ends (it sleeps whole seconds from its last pass, so it wakes this
    /// far into that second too). So a node's drain is first acted on at
    /// the first tick at least this far past the drain, and each job
    /// there is requeued at that pass if its contract is served, else
    /// this far into the second its contract ends. `None` (default): at
    /// once, at the drain and at the start of the contract's last second.
    pub drain_pass_ms: Option<u64>,
    /// With `sched_interval` and `preemptor_start = "next_pass"`: how long,
    /// in milliseconds (0-999), a victim's GPUs stay busy after the pass
    /// that preempted it. slurmctld requeues a victim at once but it stays
    /// COMPLETING until its node's epilog reports, and only then are its
    /// GPUs free: slurmctld.log's `preempted JobId=V has been requeued` to
    /// `Requeuing JobId=V` (`batch_requeue_fini`), 26-34 ms on the testbed.
    /// So a main pass a few milliseconds after the backfill pass that
    /// preempted cannot start the preemptor there yet. `None` (default):
    /// they are free once the preempting pass ends.
    pub victim_complete_ms: Option<u64>,
    /// Slurm's `bf_resolution`, seconds (0, the default: exact). Above 0,
    /// a reservation the backfill (`backfill_reserve = "all"`) makes for a
    /// job planned over `[start, start + limit)` holds its nodes over
    /// `[start, start + limit)` with both ends rounded down to a multiple
    /// of it on slurmctld's clock (backfill.c: `start_time` and
    /// `end_reserve` divided by `backfill_resolution`): a reservation is
    /// shorter than the job's limit, down to nothing, and lower jobs fit in
    /// what it leaves.
    pub backfill_resolution: u64,
    /// Seconds past a multiple of `backfill_resolution` that the trace's
    /// second 0 falls on slurmctld's clock (`scripts/calibrate` gives each
    /// run's), less than `backfill_resolution`.
    pub resolution_offset: u64,
    /// With `backfill_reserve = "all"` and `backfill_hold = "nodes"`:
    /// Slurm's will-run test (select/cons_tres, cons_common job_test.c
    /// `_will_run_test`), seconds; 0 (default): exact. When a job cannot
    /// start now, Slurm does not walk the running jobs' planned ends one
    /// by one: it takes them off in windows, the first up to 30 s past the
    /// first end rounded up to a multiple of 30 on slurmctld's clock, then
    /// windows twice as wide, and after each window picks the job's nodes
    /// among all that then fit (by placement, not by which freed first),
    /// planning its start at the last end it took off. A job is then
    /// planned later, and often on another node, than the first node free
    /// would give; the backfill retries it from where a reservation on a
    /// node ends (backfill.c `later_start`, `TRY_LATER`). Slurm's is 30.
    pub will_run_window: u64,
    /// Seconds past a multiple of `will_run_window` that the trace's second
    /// 0 falls on slurmctld's clock (`scripts/calibrate` gives each run's),
    /// less than `will_run_window`.
    pub will_run_offset: u64,
    /// Default for jobs no rule marks: continue after requeue (true) or restart.
    pub resumable: bool,
    /// A resumable job keeps its work up to its last checkpoint, taken every
    /// this many seconds of running time; 0 = it loses nothing.
    pub checkpoint_interval: u64,
    /// Rolling window of the share-error metric (default 1 day).
    pub metric_window: u64,
    /// Contract rules, first match wins.
    pub rules: Vec<ContractRule>,
    /// `[sim.accounts]`: a trace's tenant (or class) name, lower-cased, to
    /// the Slurm account its jobs are charged to; the key `*` takes every
    /// name not listed. Empty: a trace's names are its accounts.
    pub accounts: std::collections::BTreeMap<String, String>,
}

impl Default for SimSettings {
    fn default() -> Self {
        SimSettings {
            cluster: None,
            half_life: 7 * 86_400,
            calc_period: 300,
            seed: 0,
            backfill_depth: 500,
            backfill_interval: 30,
            backfill_reserve: BackfillReserve::First,
            backfill_hold: BackfillHold::Gpus,
            backfill_candidates: BackfillCandidates::Busy,
            backfill_idle: BackfillIdle::Run,
            short_partition: ShortPartition::Apart,
            backfill_preempt: BackfillPreempt::First,
            snapshot_phase: SnapshotPhase::Pass,
            preemptor_start: PreemptorStart::AtOnce,
            victim_budget: VictimBudget::Cluster,
            ledger_lag: 0,
            repreempt_delay: 0,
            placement: Placement::BestFit,
            node_cpus: 0,
            requeue_delay: 0,
            attempt_overhead_ms: 0,
            attempt_jitter_ms: 0,
            pass_miss_ms: 0,
            main_phase_ms: 0,
            pass_drift_us: 0,
            main_drift_us: None,
            main_passes_us: Vec::new(),
            backfill_passes_us: Vec::new(),
            sched_interval: 0,
            sched_offset: 0,
            sync_offset: 0,
            drain_pass_ms: None,
            victim_complete_ms: None,
            backfill_resolution: 0,
            resolution_offset: 0,
            will_run_window: 0,
            will_run_offset: 0,
            resumable: true,
            checkpoint_interval: 1800,
            metric_window: 86_400,
            rules: Vec::new(),
            accounts: Default::default(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSim {
    cluster: Option<String>,
    half_life: Option<toml::Value>,
    calc_period: Option<toml::Value>,
    seed: Option<u64>,
    backfill_depth: Option<u32>,
    backfill_interval: Option<toml::Value>,
    backfill_reserve: Option<String>,
    backfill_hold: Option<String>,
    backfill_candidates: Option<String>,
    short_partition: Option<String>,
    backfill_idle: Option<String>,
    backfill_preempt: Option<String>,
    snapshot_phase: Option<String>,
    preemptor_start: Option<String>,
    victim_budget: Option<String>,
    ledger_lag: Option<toml::Value>,
    repreempt_delay: Option<toml::Value>,
    placement: Option<String>,
    node_cpus: Option<u32>,
    requeue_delay: Option<toml::Value>,
    attempt_overhead_ms: Option<u64>,
    attempt_jitter_ms: Option<u64>,
    pass_miss_ms: Option<u64>,
    main_phase_ms: Option<u64>,
    pass_drift_us: Option<u64>,
    main_drift_us: Option<u64>,
    main_passes_us: Option<Vec<u64>>,
    backfill_passes_us: Option<Vec<u64>>,
    sched_interval: Option<toml::Value>,
    sched_offset: Option<u64>,
    sync_offset: Option<u64>,
    drain_pass_ms: Option<u64>,
    victim_complete_ms: Option<u64>,
    backfill_resolution: Option<toml::Value>,
    resolution_offset: Option<u64>,
    will_run_window: Option<toml::Value>,
    will_run_offset: Option<u64>,
    resumable: Option<bool>,
    checkpoint_interval: Option<toml::Value>,
    metric_window: Option<toml::Value>,
    #[serde(default)]
    rule: Vec<RawRule>,
    #[serde(default)]
    accounts: std::collections::BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    name: Option<String>,
    #[serde(default)]
    teams: Vec<String>,
    #[serde(default)]
    partitions: Vec<String>,
    min_gpus: Option<u32>,
    max_gpus: Option<u32>,
    min_duration: Option<toml::Value>,
    max_duration: Option<toml::Value>,
    min_runtime: Option<toml::Value>,
    resumable: Option<bool>,
}

fn duration(path: &str, v: &toml::Value, errors: &mut Vec<ConfigError>) -> Option<u64> {
    match v {
        toml::Value::String(s) => match parse_slurm_duration(s) {
            Ok(d) => Some(d),
            Err(source) => {
                errors.push(ConfigError::Duration {
                    path: path.into(),
                    source,
                });
                None
            }
        },
        other => {
            errors.push(ConfigError::WrongType {
                path: path.into(),
                expected: "a Slurm time string such as \"30:00\" or \"7-0\"",
                found: other.to_string(),
            });
            None
        }
    }
}

/// One of `options` (name, value) for the key `path` into `slot`; absent
/// keeps the default; anything else is an error listing `choices`.
fn choose<T: Copy>(
    path: &str,
    given: Option<&str>,
    options: &[(&str, T)],
    choices: &str,
    slot: &mut T,
    errors: &mut Vec<ConfigError>,
) {
    let Some(given) = given else {
        return;
    };
    match options.iter().find(|(name, _)| *name == given) {
        Some(&(_, v)) => *slot = v,
        None => errors.push(ConfigError::Invalid {
            path: path.into(),
            message: format!("{given:?} is not a choice; write {choices}"),
        }),
    }
}

/// A phase `given` (seconds) of the period `(name, seconds)`: valid from 0
/// to the period - 1, which must be above 0; else an error at `path`
/// saying what the phase is (`meaning`).
fn phase(
    path: &str,
    given: Option<u64>,
    (name, period): (&str, u64),
    meaning: &str,
    errors: &mut Vec<ConfigError>,
) -> Option<u64> {
    let off = given?;
    if period == 0 || off >= period {
        errors.push(ConfigError::Invalid {
            path: path.into(),
            message: format!(
                "{off} needs a {name} above it (now {period} s); {meaning}, 0 to {name} - 1"
            ),
        });
        return None;
    }
    Some(off)
}

/// A number `given` for the key `path` if `ok` holds for it; else an error
/// at `path` with `message` (what the key is and its range).
fn within(
    path: &str,
    given: Option<u64>,
    ok: impl Fn(u64) -> bool,
    message: impl Fn(u64) -> String,
    errors: &mut Vec<ConfigError>,
) -> Option<u64> {
    let v = given?;
    if ok(v) {
        return Some(v);
    }
    errors.push(ConfigError::Invalid {
        path: path.into(),
        message: message(v),
    });
    None
}

/// Parses and validates the `[sim]` table. `max_min_runtime` is the
/// contract cap (seconds) that fixed rule minimum runtimes must respect;
/// `sync_interval` (seconds, `sync.interval`) bounds `sync_offset`.
/// Problems are appended to `errors`, each naming its key.
pub(crate) fn parse(
    value: &toml::Value,
    max_min_runtime: u64,
    sync_interval: u64,
    errors: &mut Vec<ConfigError>,
) -> SimSettings {
    let raw: RawSim = match value.clone().try_into() {
        Ok(r) => r,
        Err(e) => {
            errors.push(ConfigError::Invalid {
                path: "sim".into(),
                message: format!(
                    "{e}; [sim] takes cluster, half_life, calc_period, seed, backfill_depth, backfill_interval, backfill_reserve, backfill_hold, backfill_candidates, backfill_idle, backfill_preempt, short_partition, snapshot_phase, preemptor_start, victim_budget, ledger_lag, repreempt_delay, placement, node_cpus, requeue_delay, attempt_overhead_ms, attempt_jitter_ms, pass_miss_ms, main_phase_ms, pass_drift_us, main_drift_us, main_passes_us, backfill_passes_us, sched_interval, sched_offset, sync_offset, drain_pass_ms, victim_complete_ms, backfill_resolution, resolution_offset, will_run_window, will_run_offset, resumable, checkpoint_interval, metric_window and [[sim.rule]] tables"
                ),
            });
            return SimSettings::default();
        }
    };
    let mut s = SimSettings::default();
    if let Some(c) = &raw.cluster {
        match ClusterSpec::parse(c) {
            Ok(c) => s.cluster = Some(c),
            Err(message) => errors.push(ConfigError::Invalid {
                path: "sim.cluster".into(),
                message,
            }),
        }
    }
    let mut positive = |path: &str, v: &Option<toml::Value>, slot: &mut u64, zero_ok: bool| {
        if let Some(v) = v {
            if let Some(d) = duration(path, v, errors) {
                if d == 0 && !zero_ok {
                    errors.push(ConfigError::Invalid {
                        path: path.into(),
                        message: "must be longer than 0".into(),
                    });
                } else {
                    *slot = d;
                }
            }
        }
    };
    positive("sim.half_life", &raw.half_life, &mut s.half_life, false);
    positive(
        "sim.calc_period",
        &raw.calc_period,
        &mut s.calc_period,
        false,
    );
    positive(
        "sim.checkpoint_interval",
        &raw.checkpoint_interval,
        &mut s.checkpoint_interval,
        true,
    );
    positive(
        "sim.metric_window",
        &raw.metric_window,
        &mut s.metric_window,
        false,
    );
    positive(
        "sim.backfill_interval",
        &raw.backfill_interval,
        &mut s.backfill_interval,
        false,
    );
    positive(
        "sim.requeue_delay",
        &raw.requeue_delay,
        &mut s.requeue_delay,
        true,
    );
    positive("sim.ledger_lag", &raw.ledger_lag, &mut s.ledger_lag, true);
    positive(
        "sim.repreempt_delay",
        &raw.repreempt_delay,
        &mut s.repreempt_delay,
        true,
    );
    positive(
        "sim.sched_interval",
        &raw.sched_interval,
        &mut s.sched_interval,
        true,
    );
    positive(
        "sim.backfill_resolution",
        &raw.backfill_resolution,
        &mut s.backfill_resolution,
        true,
    );
    positive(
        "sim.will_run_window",
        &raw.will_run_window,
        &mut s.will_run_window,
        true,
    );
    if let Some(off) = phase(
        "sim.will_run_offset",
        raw.will_run_offset,
        ("will_run_window", s.will_run_window),
        "it is where the trace's second 0 falls past a multiple of will_run_window on slurmctld's clock",
        errors,
    ) {
        s.will_run_offset = off;
    }
    if let Some(off) = phase(
        "sim.resolution_offset",
        raw.resolution_offset,
        ("backfill_resolution", s.backfill_resolution),
        "it is where the trace's second 0 falls past a multiple of backfill_resolution",
        errors,
    ) {
        s.resolution_offset = off;
    }
    if let Some(off) = phase(
        "sim.sched_offset",
        raw.sched_offset,
        ("sched_interval", s.sched_interval),
        "it is the second of each sched_interval at which the main pass runs",
        errors,
    ) {
        s.sched_offset = off;
    }
    if let Some(off) = phase(
        "sim.sync_offset",
        raw.sync_offset,
        ("sync.interval", sync_interval),
        "it is the second of each sync.interval at which the engine snapshot is taken",
        errors,
    ) {
        s.sync_offset = off;
    }
    choose(
        "sim.backfill_reserve",
        raw.backfill_reserve.as_deref(),
        &[("first", BackfillReserve::First), ("all", BackfillReserve::All)],
        "\"first\" (EASY: the first blocked job only) or \"all\" (every job the pass looks at, as Slurm's sched/backfill)",
        &mut s.backfill_reserve,
        errors,
    );
    choose(
        "sim.backfill_hold",
        raw.backfill_hold.as_deref(),
        &[("gpus", BackfillHold::Gpus), ("nodes", BackfillHold::Nodes)],
        "\"gpus\" (a reservation holds its GPUs) or \"nodes\" (its whole nodes, as Slurm's sched/backfill)",
        &mut s.backfill_hold,
        errors,
    );
    choose(
        "sim.backfill_candidates",
        raw.backfill_candidates.as_deref(),
        &[("busy", BackfillCandidates::Busy), ("free", BackfillCandidates::Free)],
        "\"busy\" (a reservation waits for the jobs it may preempt to end) or \"free\" (it counts them free from now, as Slurm's will-run test)",
        &mut s.backfill_candidates,
        errors,
    );
    choose(
        "sim.backfill_idle",
        raw.backfill_idle.as_deref(),
        &[("run", BackfillIdle::Run), ("skip", BackfillIdle::Skip)],
        "\"run\" (a backfill pass every backfill_interval while jobs wait) or \"skip\" (only after a job or node changed, as Slurm's backfill agent)",
        &mut s.backfill_idle,
        errors,
    );
    choose(
        "sim.backfill_preempt",
        raw.backfill_preempt.as_deref(),
        &[("first", BackfillPreempt::First), ("all", BackfillPreempt::All)],
        "\"first\" (only the first job a backfill pass cannot start may preempt) or \"all\" (every job it looks at, as Slurm's sched/backfill)",
        &mut s.backfill_preempt,
        errors,
    );
    choose(
        "sim.short_partition",
        raw.short_partition.as_deref(),
        &[("apart", ShortPartition::Apart), ("shared", ShortPartition::Shared)],
        "\"apart\" (short jobs run on nodes of their own: one that cannot start holds up no other job) or \"shared\" (their partition shares nodes with the others: one that cannot start stops the main pass and is planned by the backfill like any job, as in Slurm)",
        &mut s.short_partition,
        errors,
    );
    choose(
        "sim.snapshot_phase",
        raw.snapshot_phase.as_deref(),
        &[
            ("pass", SnapshotPhase::Pass),
            ("seeded", SnapshotPhase::Seeded),
            ("clock", SnapshotPhase::Clock),
        ],
        "\"pass\" (the snapshot at the tick's first pass), \"seeded\" (at a seeded offset into the tick's second) or \"clock\" (half a second into it, as the plugins' timer)",
        &mut s.snapshot_phase,
        errors,
    );
    choose(
        "sim.preemptor_start",
        raw.preemptor_start.as_deref(),
        &[("at_once", PreemptorStart::AtOnce), ("next_pass", PreemptorStart::NextPass)],
        "\"at_once\" (the preemptor starts on its victims' GPUs) or \"next_pass\" (it waits for a later pass, as in Slurm)",
        &mut s.preemptor_start,
        errors,
    );
    choose(
        "sim.victim_budget",
        raw.victim_budget.as_deref(),
        &[("cluster", VictimBudget::Cluster), ("node", VictimBudget::Node)],
        "\"cluster\" (a team's loss bounded cluster-wide) or \"node\" (per node, as the preempt plugin)",
        &mut s.victim_budget,
        errors,
    );
    choose(
        "sim.placement",
        raw.placement.as_deref(),
        &[("best_fit", Placement::BestFit), ("cons_tres", Placement::ConsTres)],
        "\"best_fit\" (fewest free GPUs, seeded ties) or \"cons_tres\" (Slurm's select/cons_tres: most jobs running, lowest index)",
        &mut s.placement,
        errors,
    );
    if let Some(ms) = within(
        "sim.attempt_overhead_ms",
        raw.attempt_overhead_ms,
        |ms| ms <= 60_000,
        |ms| {
            format!("{ms} ms is over a minute; it is the launch and end-report time of one attempt in milliseconds (the testbed measures about 30-70), at most 60000")
        },
        errors,
    ) {
        s.attempt_overhead_ms = ms;
    }
    if let Some(ms) = within(
        "sim.attempt_jitter_ms",
        raw.attempt_jitter_ms,
        |ms| ms <= 60_000,
        |ms| {
            format!("{ms} ms is over a minute; it is how far one attempt's overhead may lie from attempt_overhead_ms, in milliseconds (the testbed measures about 10-20), at most 60000")
        },
        errors,
    ) {
        s.attempt_jitter_ms = ms;
    }
    if let Some(ms) = within(
        "sim.pass_miss_ms",
        raw.pass_miss_ms,
        |ms| ms <= 1000,
        |ms| {
            format!("{ms} is more than a second; it is the part of each second after slurmctld's pass, in milliseconds: 0..=1000 (1000 - the pass's offset into the second, about 230 on the testbed)")
        },
        errors,
    ) {
        s.pass_miss_ms = ms;
    }
    let sched = s.sched_interval;
    if let Some(ms) = within(
        "sim.main_phase_ms",
        raw.main_phase_ms,
        |ms| sched > 0 && ms <= 999,
        |ms| {
            format!("{ms} needs a sched_interval above 0 (now {sched} s) and must be 0-999: it is the main pass's offset into its second, in milliseconds (the testbed's varies from run to run; scripts/calibrate reads it from slurmctld.log)")
        },
        errors,
    ) {
        s.main_phase_ms = ms;
    }
    if let Some(ms) = within(
        "sim.drain_pass_ms",
        raw.drain_pass_ms,
        |ms| sched > 0 && ms <= 999,
        |ms| {
            format!("{ms} needs a sched_interval above 0 (now {sched} s) and must be 0-999: it is how far into a sync.interval tick's second the sidecar's draining pass requeues, in milliseconds (about 200-300 on the testbed; scripts/calibrate reads it from the sidecar's log)")
        },
        errors,
    ) {
        s.drain_pass_ms = Some(ms);
    }
    let next_pass = s.preemptor_start == PreemptorStart::NextPass;
    if let Some(ms) = within(
        "sim.victim_complete_ms",
        raw.victim_complete_ms,
        |ms| sched > 0 && next_pass && ms <= 999,
        |ms| {
            let fix = if sched == 0 {
                format!("needs a sched_interval above 0 (now {sched} s)")
            } else if !next_pass {
                "needs preemptor_start = \"next_pass\" (now \"at_once\")".to_string()
            } else {
                "must be 0-999".to_string()
            };
            format!("{ms} {fix}: it is how long a preempted job's GPUs stay busy after the pass that preempted it, in milliseconds (about 28 on the testbed; scripts/calibrate reads it from slurmctld.log)")
        },
        errors,
    ) {
        s.victim_complete_ms = Some(ms);
    }
    if let Some(us) = within(
        "sim.pass_drift_us",
        raw.pass_drift_us,
        |us| sched > 0 && us <= 100_000,
        |us| {
            format!("{us} needs a sched_interval above 0 (now {sched} s) and must be at most 100000: it is how many microseconds later slurmctld's passes start each second (about 2000 on the testbed; scripts/calibrate reads it from slurmctld.log)")
        },
        errors,
    ) {
        s.pass_drift_us = us;
    }
    if let Some(us) = within(
        "sim.main_drift_us",
        raw.main_drift_us,
        |us| sched > 0 && us <= 100_000,
        |us| {
            format!("{us} needs a sched_interval above 0 (now {sched} s) and must be at most 100000: it is how many microseconds later slurmctld's main pass starts each second (about 5000 on the testbed; scripts/calibrate reads it from slurmctld.log)")
        },
        errors,
    ) {
        s.main_drift_us = Some(us);
    }
    for (path, given, dst) in [
        (
            "sim.main_passes_us",
            raw.main_passes_us,
            &mut s.main_passes_us,
        ),
        (
            "sim.backfill_passes_us",
            raw.backfill_passes_us,
            &mut s.backfill_passes_us,
        ),
    ] {
        let Some(v) = given else { continue };
        if sched == 0 {
            errors.push(ConfigError::Invalid {
                path: path.into(),
                message: format!("needs a sched_interval above 0 (now {sched} s): it lists the instants slurmctld's passes were seen at"),
            });
        } else if let Some(w) = v.windows(2).find(|w| w[1] <= w[0]) {
            errors.push(ConfigError::Invalid {
                path: path.into(),
                message: format!("{} comes after {}: list the instants (microseconds since the trace's second 0) in ascending order, each once", w[1], w[0]),
            });
        } else {
            *dst = v;
        }
    }
    s.node_cpus = raw.node_cpus.unwrap_or(0);
    s.seed = raw.seed.unwrap_or(0);
    if s.will_run_window > 0
        && (s.backfill_reserve != BackfillReserve::All || s.backfill_hold != BackfillHold::Nodes)
    {
        errors.push(ConfigError::Invalid {
            path: "sim.will_run_window".into(),
            message: "needs backfill_reserve = \"all\" and backfill_hold = \"nodes\": it is how Slurm's will-run test plans each job the backfill reserves whole nodes for; set those two or leave it out".into(),
        });
    }
    s.backfill_depth = raw.backfill_depth.unwrap_or(s.backfill_depth);
    s.resumable = raw.resumable.unwrap_or(true);
    for (name, account) in raw.accounts {
        // Slurm stores account names lower-cased, and trace names are
        // matched lower-cased: an upper-case account would match nothing.
        if account.is_empty() || account != account.to_ascii_lowercase() {
            errors.push(ConfigError::Invalid {
                path: format!("sim.accounts.{name}"),
                message: format!(
                    "{account:?} is not a Slurm account name; write it in lower case, as slurmdbd stores it"
                ),
            });
            continue;
        }
        s.accounts.insert(name.to_ascii_lowercase(), account);
    }
    for (i, r) in raw.rule.into_iter().enumerate() {
        let path = format!("sim.rule[{i}]");
        let mut d = |key: &str, v: &Option<toml::Value>| {
            v.as_ref()
                .and_then(|v| duration(&format!("{path}.{key}"), v, errors))
        };
        let min_duration = d("min_duration", &r.min_duration);
        let max_duration = d("max_duration", &r.max_duration);
        let min_runtime = match &r.min_runtime {
            None => None,
            Some(toml::Value::String(t)) if t == "runtime" => Some(RuleMinRuntime::Runtime),
            Some(v) => d("min_runtime", &Some(v.clone())).map(RuleMinRuntime::Fixed),
        };
        if let Some(RuleMinRuntime::Fixed(m)) = min_runtime {
            if m > max_min_runtime {
                errors.push(ConfigError::MinAboveMax {
                    path: format!("{path}.min_runtime"),
                    min: crate::duration::format_slurm_duration(m),
                    max: crate::duration::format_slurm_duration(max_min_runtime),
                });
            }
        }
        // A rule whose bounds exclude every job is a typo, not a rule.
        if let (Some(lo), Some(hi)) = (r.min_gpus, r.max_gpus) {
            if lo > hi {
                errors.push(ConfigError::Invalid {
                    path: format!("{path}.min_gpus"),
                    message: format!(
                        "{lo} is above max_gpus = {hi}: the rule matches no job; swap or fix them"
                    ),
                });
            }
        }
        if let (Some(lo), Some(hi)) = (min_duration, max_duration) {
            if lo > hi {
                errors.push(ConfigError::Invalid {
                    path: format!("{path}.min_duration"),
                    message: format!(
                        "{} is above max_duration = {}: the rule matches no job; swap or fix them",
                        crate::duration::format_slurm_duration(lo),
                        crate::duration::format_slurm_duration(hi)
                    ),
                });
            }
        }
        if min_runtime.is_none() && r.resumable.is_none() {
            errors.push(ConfigError::Invalid {
                path,
                message: "sets nothing; give it min_runtime = \"...\" (or \"runtime\") and/or resumable = true|false"
                    .into(),
            });
            continue;
        }
        s.rules.push(ContractRule {
            name: r.name.unwrap_or_else(|| format!("rule {}", i + 1)),
            teams: r.teams,
            partitions: r.partitions,
            min_gpus: r.min_gpus,
            max_gpus: r.max_gpus,
            min_duration,
            max_duration,
            min_runtime,
            resumable: r.resumable,
        });
    }
    s
}
