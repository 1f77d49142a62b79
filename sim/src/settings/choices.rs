//! The value types of `[sim]`: the cluster shape, each setting's choices and
//! the contract rules.

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
    /// At [`fairshare::timer::REBUILD_OFFSET_MS`] into the tick's second, as
    /// the plugins rebuild on the clock ([`fairshare::timer`]).
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
            && self.min_gpus.is_none_or(|m| gpus >= m)
            && self.max_gpus.is_none_or(|m| gpus <= m)
            && self.min_duration.is_none_or(|m| duration >= m)
            && self.max_duration.is_none_or(|m| duration <= m)
    }
}
