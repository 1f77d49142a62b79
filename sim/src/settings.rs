//! The `[sim]` section of `allot.toml`: how the simulator replays a trace.
//!
//! The engine keeps the section as written ([`Config::sim`], a raw TOML
//! value the plugins never read); this module parses and validates it,
//! one validator per key (`settings/keys.rs`, the rules and accounts in
//! `settings/rules.rs`), against the engine settings it depends on
//! (`sync.interval`, `contract.max_min_runtime`, `priority.short_max_gpus`).
//! `allot check-config` validates it with the rest of the file, so a typo
//! is caught before a long replay.
//!
//! ```toml
//! [sim]
//! timing = "ideal"                # "slurmctld": slurmctld's timing keys at once (below); keys written here win
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
//! worst_floor_gpu_hours = 100     # the worst team among those owed at least this many GPU-hours
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
//! `timing = "slurmctld"` sets each key of [`preset::SLURMCTLD`] that
//! `[sim]` does not write: slurm.conf's (`sched_interval` 1:00,
//! `backfill_interval` 0:30, `backfill_depth` 500, `backfill_resolution`
//! 1:00, `requeue_delay` 2:01, `repreempt_delay` 0:40) at Slurm 22.05's
//! defaults, slurmctld's behaviour (`backfill_reserve` "all",
//! `backfill_hold` "nodes", `backfill_candidates` "free", `backfill_idle`
//! "skip", `backfill_preempt` "all", `will_run_window` 0:30,
//! `preemptor_start` "next_pass", `placement` "cons_tres",
//! `short_partition` "shared" when the short band is on), allot's
//! (`victim_budget` "node", `snapshot_phase` "clock", `ledger_lag` 0:01),
//! both passes mid-second (`main_phase_ms` 500, `pass_miss_ms` 500: no
//! run's phase) and the testbed's measured latencies (`attempt_overhead_ms` 74,
//! `attempt_jitter_ms` 37, `victim_complete_ms` 42, `drain_pass_ms` 347).
//! A site writes its own slurm.conf values beside it (docs/simulator.md
//! tables where each comes from); `"ideal"`, the default, sets nothing.
//!
//! A job whose trace row records a minimum runtime keeps it; otherwise the
//! first rule that matches sets it (and/or `resumable`); a job matching no
//! rule gets `contract.default_min_runtime`. The simulator reports how many
//! jobs and GPU-hours each rule took.

use fairshare::config::{Config, ConfigError, ConfigErrors};

mod choices;
mod keys;
pub mod preset;
mod raw;
mod rules;
#[cfg(test)]
mod tests;

pub use choices::{
    BackfillCandidates, BackfillHold, BackfillIdle, BackfillPreempt, BackfillReserve, ClusterSpec,
    ContractRule, Placement, PreemptorStart, RuleMinRuntime, ShortPartition, SnapshotPhase,
    VictimBudget,
};

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
    /// 120 s in slurm_cred.c, so 121 s; a comment in job_mgr.c says
    /// 1200); the default 0 makes it eligible at once, as the simulator
    /// always did. `scripts/calibrate` gives the testbed's value.
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
    /// epoch ([`fairshare::timer`]), so `scripts/calibrate` gives each run's.
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
    /// GPU-hours a team must be owed to count for the report's
    /// `worst_team_floor` (default 100): the plain worst team is often one
    /// owed almost nothing, whose owed% is noise.
    pub worst_floor_gpu_hours: u64,
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
            worst_floor_gpu_hours: 100,
            rules: Vec::new(),
            accounts: Default::default(),
        }
    }
}

impl SimSettings {
    /// Parses and validates `[sim]` as the engine's `config` keeps it
    /// ([`Config::sim`]), against that config's `sync.interval`,
    /// `contract.max_min_runtime` and `priority.short_max_gpus`. No `[sim]`:
    /// every default.
    ///
    /// # Errors
    /// Every problem found, each naming its key (`sim.…`) and the fix.
    pub fn from_config(config: &Config) -> Result<SimSettings, ConfigErrors> {
        let Some(value) = &config.sim else {
            return Ok(SimSettings::default());
        };
        let mut errors = Vec::new();
        let s = parse(value, config, &mut errors);
        if errors.is_empty() {
            Ok(s)
        } else {
            Err(ConfigErrors(errors))
        }
    }
}

/// Parses and validates the text of an `allot.toml`: the engine's config,
/// then its `[sim]` section.
///
/// # Errors
/// The engine's errors ([`Config::from_toml_str`]), then those of `[sim]`.
pub fn from_toml_str(text: &str) -> Result<(Config, SimSettings), ConfigErrors> {
    match Config::from_toml_str(text) {
        Ok(config) => with_settings(config),
        Err(errors) => Err(and_of_sim(errors, toml::from_str(text).ok())),
    }
}

/// The same from an `allot.toml` already read into a table (what
/// `allot sim --sweep` patches before it parses the file again).
///
/// # Errors
/// As [`from_toml_str`].
pub fn from_toml_table(table: toml::Table) -> Result<(Config, SimSettings), ConfigErrors> {
    match Config::from_toml_table(table.clone()) {
        Ok(config) => with_settings(config),
        Err(errors) => Err(and_of_sim(errors, Some(table))),
    }
}

fn with_settings(config: Config) -> Result<(Config, SimSettings), ConfigErrors> {
    let sim = SimSettings::from_config(&config)?;
    Ok((config, sim))
}

/// The engine's `errors` and then those of `[sim]`, so that a file with
/// problems in both lists them all at once. `[sim]` is checked against the
/// engine keys it reads (`contract.max_min_runtime`, `sync.interval`,
/// `priority.short_max_gpus`) where `table` gives them valid, else against
/// their defaults.
fn and_of_sim(mut errors: ConfigErrors, table: Option<toml::Table>) -> ConfigErrors {
    let Some(table) = table else {
        return errors;
    };
    let Some(sim) = table.get("sim") else {
        return errors;
    };
    let mut doc: toml::Table = toml::from_str("[tree.x]\nshare = 1\n").expect("a valid tree");
    for (section, key) in [
        ("contract", "max_min_runtime"),
        ("sync", "interval"),
        ("priority", "short_max_gpus"),
    ] {
        let Some(v) = table.get(section).and_then(|t| t.get(key)) else {
            continue;
        };
        let mut with = doc.clone();
        let t = with
            .entry(section)
            .or_insert_with(|| toml::Value::Table(Default::default()));
        if let toml::Value::Table(t) = t {
            t.insert(key.into(), v.clone());
            if key == "max_min_runtime" {
                t.insert("default_min_runtime".into(), "0".into());
            }
        }
        if Config::from_toml_table(with.clone()).is_ok() {
            doc = with;
        }
    }
    doc.insert("sim".into(), sim.clone());
    if let Ok(config) = Config::from_toml_table(doc) {
        if let Err(mut e) = SimSettings::from_config(&config) {
            errors.0.append(&mut e.0);
        }
    }
    errors
}

/// Fills the `timing` preset's keys ([`preset::fill`]), then runs every
/// key's validator on the `[sim]` value; problems are appended to
/// `errors`, each naming its key, and a key with a problem keeps its
/// default.
fn parse(value: &toml::Value, config: &Config, errors: &mut Vec<ConfigError>) -> SimSettings {
    let mut value = value.clone();
    if let toml::Value::Table(sim) = &mut value {
        preset::fill(sim, config, errors);
        // `[sim.rule]` for `[[sim.rule]]`: one table where an array of them
        // belongs.
        if sim.get("rule").is_some_and(toml::Value::is_table) {
            errors.push(ConfigError::Invalid {
                path: "sim.rule".into(),
                message: "is a single table; write each rule as [[sim.rule]] (double brackets: an array of tables, tried in order)".into(),
            });
            return SimSettings::default();
        }
    }
    let raw: raw::RawSim = match value.try_into() {
        Ok(r) => r,
        Err(e) => {
            // serde lists the fields it expects; the list below is the one
            // to read (it has `timing`, which the preset took out).
            let e = e.to_string();
            let e = match e.split_once(", expected one of") {
                Some((head, _)) => head.trim().to_string(),
                None => e.trim().to_string(),
            };
            errors.push(ConfigError::Invalid {
                path: "sim".into(),
                message: format!(
                    "{e}; [sim] takes timing, cluster, half_life, calc_period, seed, backfill_depth, backfill_interval, backfill_reserve, backfill_hold, backfill_candidates, backfill_idle, backfill_preempt, short_partition, snapshot_phase, preemptor_start, victim_budget, ledger_lag, repreempt_delay, placement, node_cpus, requeue_delay, attempt_overhead_ms, attempt_jitter_ms, pass_miss_ms, main_phase_ms, pass_drift_us, main_drift_us, main_passes_us, backfill_passes_us, sched_interval, sched_offset, sync_offset, drain_pass_ms, victim_complete_ms, backfill_resolution, resolution_offset, will_run_window, will_run_offset, resumable, checkpoint_interval, metric_window, worst_floor_gpu_hours and [[sim.rule]] tables"
                ),
            });
            return SimSettings::default();
        }
    };
    let mut s = SimSettings::default();
    for validate in keys::KEYS {
        validate(&raw, config, &mut s, errors);
    }
    s
}
