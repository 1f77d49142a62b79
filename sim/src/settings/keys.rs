//! One validator per `[sim]` key. Each reads its key from the table as
//! written ([`super::raw::RawSim`]), checks it (against the keys before it and the
//! engine's config where it depends on them) and sets it in the settings;
//! a problem is an error naming the key and the fix, and the key keeps its
//! default. [`KEYS`] runs them in the order their errors are listed.

use fairshare::config::{Config, ConfigError};

use super::raw::{duration, RawSim};
use super::rules;
use super::*;

/// A key's validator: the table as written, the engine's config, the
/// settings so far (the keys before it), the errors so far.
pub(super) type Validator = fn(&RawSim, &Config, &mut SimSettings, &mut Vec<ConfigError>);

/// Every key's validator, in the order of their errors. A key read by
/// another's check (`sched_interval` by `main_phase_ms`, `preemptor_start`
/// by `victim_complete_ms`) comes first.
pub(super) const KEYS: &[Validator] = &[
    cluster,
    half_life,
    calc_period,
    checkpoint_interval,
    metric_window,
    worst_floor_gpu_hours,
    backfill_interval,
    requeue_delay,
    ledger_lag,
    repreempt_delay,
    sched_interval,
    backfill_resolution,
    will_run_window,
    will_run_offset,
    resolution_offset,
    sched_offset,
    sync_offset,
    backfill_reserve,
    backfill_hold,
    backfill_candidates,
    backfill_idle,
    backfill_preempt,
    short_partition,
    snapshot_phase,
    preemptor_start,
    victim_budget,
    placement,
    attempt_overhead_ms,
    attempt_jitter_ms,
    pass_miss_ms,
    main_phase_ms,
    drain_pass_ms,
    victim_complete_ms,
    pass_drift_us,
    main_drift_us,
    main_passes_us,
    backfill_passes_us,
    node_cpus,
    seed,
    will_run_needs_nodes,
    backfill_depth,
    resumable,
    rules::accounts,
    rules::rules,
    short_partition_needs_the_short_band,
];

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

/// A Slurm duration at `path` into `slot`, if given; 0 is an error unless
/// `zero_ok`.
fn seconds(
    path: &str,
    v: &Option<toml::Value>,
    zero_ok: bool,
    slot: &mut u64,
    errors: &mut Vec<ConfigError>,
) {
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
}

fn cluster(r: &RawSim, _: &Config, s: &mut SimSettings, errors: &mut Vec<ConfigError>) {
    if let Some(c) = &r.cluster {
        match ClusterSpec::parse(c) {
            Ok(c) => s.cluster = Some(c),
            Err(message) => errors.push(ConfigError::Invalid {
                path: "sim.cluster".into(),
                message,
            }),
        }
    }
}

fn half_life(r: &RawSim, _: &Config, s: &mut SimSettings, errors: &mut Vec<ConfigError>) {
    seconds(
        "sim.half_life",
        &r.half_life,
        false,
        &mut s.half_life,
        errors,
    );
}

fn calc_period(r: &RawSim, _: &Config, s: &mut SimSettings, errors: &mut Vec<ConfigError>) {
    seconds(
        "sim.calc_period",
        &r.calc_period,
        false,
        &mut s.calc_period,
        errors,
    );
}

fn checkpoint_interval(r: &RawSim, _: &Config, s: &mut SimSettings, e: &mut Vec<ConfigError>) {
    let slot = &mut s.checkpoint_interval;
    seconds(
        "sim.checkpoint_interval",
        &r.checkpoint_interval,
        true,
        slot,
        e,
    );
}

fn metric_window(r: &RawSim, _: &Config, s: &mut SimSettings, errors: &mut Vec<ConfigError>) {
    let slot = &mut s.metric_window;
    seconds("sim.metric_window", &r.metric_window, false, slot, errors);
}

fn worst_floor_gpu_hours(r: &RawSim, _: &Config, s: &mut SimSettings, e: &mut Vec<ConfigError>) {
    match &r.worst_floor_gpu_hours {
        None => {}
        Some(toml::Value::Integer(n)) if *n >= 0 => s.worst_floor_gpu_hours = *n as u64,
        Some(other) => e.push(ConfigError::Invalid {
            path: "sim.worst_floor_gpu_hours".into(),
            message: format!(
                "{other} is not a whole number of GPU-hours, 0 or more; write e.g. 100 (0 counts every team owed anything)"
            ),
        }),
    }
}

fn backfill_interval(r: &RawSim, _: &Config, s: &mut SimSettings, e: &mut Vec<ConfigError>) {
    let slot = &mut s.backfill_interval;
    seconds(
        "sim.backfill_interval",
        &r.backfill_interval,
        false,
        slot,
        e,
    );
}

fn requeue_delay(r: &RawSim, _: &Config, s: &mut SimSettings, errors: &mut Vec<ConfigError>) {
    let slot = &mut s.requeue_delay;
    seconds("sim.requeue_delay", &r.requeue_delay, true, slot, errors);
}

fn ledger_lag(r: &RawSim, _: &Config, s: &mut SimSettings, errors: &mut Vec<ConfigError>) {
    seconds(
        "sim.ledger_lag",
        &r.ledger_lag,
        true,
        &mut s.ledger_lag,
        errors,
    );
}

fn repreempt_delay(r: &RawSim, _: &Config, s: &mut SimSettings, errors: &mut Vec<ConfigError>) {
    let slot = &mut s.repreempt_delay;
    seconds(
        "sim.repreempt_delay",
        &r.repreempt_delay,
        true,
        slot,
        errors,
    );
}

fn sched_interval(r: &RawSim, _: &Config, s: &mut SimSettings, errors: &mut Vec<ConfigError>) {
    let slot = &mut s.sched_interval;
    seconds("sim.sched_interval", &r.sched_interval, true, slot, errors);
}

fn backfill_resolution(r: &RawSim, _: &Config, s: &mut SimSettings, e: &mut Vec<ConfigError>) {
    let slot = &mut s.backfill_resolution;
    seconds(
        "sim.backfill_resolution",
        &r.backfill_resolution,
        true,
        slot,
        e,
    );
}

fn will_run_window(r: &RawSim, _: &Config, s: &mut SimSettings, errors: &mut Vec<ConfigError>) {
    let slot = &mut s.will_run_window;
    seconds(
        "sim.will_run_window",
        &r.will_run_window,
        true,
        slot,
        errors,
    );
}

fn will_run_offset(r: &RawSim, _: &Config, s: &mut SimSettings, errors: &mut Vec<ConfigError>) {
    if let Some(off) = phase(
        "sim.will_run_offset",
        r.will_run_offset,
        ("will_run_window", s.will_run_window),
        "it is where the trace's second 0 falls past a multiple of will_run_window on slurmctld's clock",
        errors,
    ) {
        s.will_run_offset = off;
    }
}

fn resolution_offset(r: &RawSim, _: &Config, s: &mut SimSettings, e: &mut Vec<ConfigError>) {
    if let Some(off) = phase(
        "sim.resolution_offset",
        r.resolution_offset,
        ("backfill_resolution", s.backfill_resolution),
        "it is where the trace's second 0 falls past a multiple of backfill_resolution",
        e,
    ) {
        s.resolution_offset = off;
    }
}

fn sched_offset(r: &RawSim, _: &Config, s: &mut SimSettings, errors: &mut Vec<ConfigError>) {
    if let Some(off) = phase(
        "sim.sched_offset",
        r.sched_offset,
        ("sched_interval", s.sched_interval),
        "it is the second of each sched_interval at which the main pass runs",
        errors,
    ) {
        s.sched_offset = off;
    }
}

/// Checked against the engine's `sync.interval`.
fn sync_offset(r: &RawSim, c: &Config, s: &mut SimSettings, errors: &mut Vec<ConfigError>) {
    if let Some(off) = phase(
        "sim.sync_offset",
        r.sync_offset,
        ("sync.interval", c.sync_interval),
        "it is the second of each sync.interval at which the engine snapshot is taken",
        errors,
    ) {
        s.sync_offset = off;
    }
}

fn backfill_reserve(r: &RawSim, _: &Config, s: &mut SimSettings, errors: &mut Vec<ConfigError>) {
    choose(
        "sim.backfill_reserve",
        r.backfill_reserve.as_deref(),
        &[("first", BackfillReserve::First), ("all", BackfillReserve::All)],
        "\"first\" (EASY: the first blocked job only) or \"all\" (every job the pass looks at, as Slurm's sched/backfill)",
        &mut s.backfill_reserve,
        errors,
    );
}

fn backfill_hold(r: &RawSim, _: &Config, s: &mut SimSettings, errors: &mut Vec<ConfigError>) {
    choose(
        "sim.backfill_hold",
        r.backfill_hold.as_deref(),
        &[("gpus", BackfillHold::Gpus), ("nodes", BackfillHold::Nodes)],
        "\"gpus\" (a reservation holds its GPUs) or \"nodes\" (its whole nodes, as Slurm's sched/backfill)",
        &mut s.backfill_hold,
        errors,
    );
}

fn backfill_candidates(r: &RawSim, _: &Config, s: &mut SimSettings, e: &mut Vec<ConfigError>) {
    choose(
        "sim.backfill_candidates",
        r.backfill_candidates.as_deref(),
        &[("busy", BackfillCandidates::Busy), ("free", BackfillCandidates::Free)],
        "\"busy\" (a reservation waits for the jobs it may preempt to end) or \"free\" (it counts them free from now, as Slurm's will-run test)",
        &mut s.backfill_candidates,
        e,
    );
}

fn backfill_idle(r: &RawSim, _: &Config, s: &mut SimSettings, errors: &mut Vec<ConfigError>) {
    choose(
        "sim.backfill_idle",
        r.backfill_idle.as_deref(),
        &[("run", BackfillIdle::Run), ("skip", BackfillIdle::Skip)],
        "\"run\" (a backfill pass every backfill_interval while jobs wait) or \"skip\" (only after a job or node changed, as Slurm's backfill agent)",
        &mut s.backfill_idle,
        errors,
    );
}

fn backfill_preempt(r: &RawSim, _: &Config, s: &mut SimSettings, errors: &mut Vec<ConfigError>) {
    choose(
        "sim.backfill_preempt",
        r.backfill_preempt.as_deref(),
        &[("first", BackfillPreempt::First), ("all", BackfillPreempt::All)],
        "\"first\" (only the first job a backfill pass cannot start may preempt) or \"all\" (every job it looks at, as Slurm's sched/backfill)",
        &mut s.backfill_preempt,
        errors,
    );
}

fn short_partition(r: &RawSim, _: &Config, s: &mut SimSettings, errors: &mut Vec<ConfigError>) {
    choose(
        "sim.short_partition",
        r.short_partition.as_deref(),
        &[("apart", ShortPartition::Apart), ("shared", ShortPartition::Shared)],
        "\"apart\" (short jobs run on nodes of their own: one that cannot start holds up no other job) or \"shared\" (their partition shares nodes with the others: one that cannot start stops the main pass and is planned by the backfill like any job, as in Slurm)",
        &mut s.short_partition,
        errors,
    );
}

fn snapshot_phase(r: &RawSim, _: &Config, s: &mut SimSettings, errors: &mut Vec<ConfigError>) {
    choose(
        "sim.snapshot_phase",
        r.snapshot_phase.as_deref(),
        &[
            ("pass", SnapshotPhase::Pass),
            ("seeded", SnapshotPhase::Seeded),
            ("clock", SnapshotPhase::Clock),
        ],
        "\"pass\" (the snapshot at the tick's first pass), \"seeded\" (at a seeded offset into the tick's second) or \"clock\" (half a second into it, as the plugins' timer)",
        &mut s.snapshot_phase,
        errors,
    );
}

fn preemptor_start(r: &RawSim, _: &Config, s: &mut SimSettings, errors: &mut Vec<ConfigError>) {
    choose(
        "sim.preemptor_start",
        r.preemptor_start.as_deref(),
        &[("at_once", PreemptorStart::AtOnce), ("next_pass", PreemptorStart::NextPass)],
        "\"at_once\" (the preemptor starts on its victims' GPUs) or \"next_pass\" (it waits for a later pass, as in Slurm)",
        &mut s.preemptor_start,
        errors,
    );
}

fn victim_budget(r: &RawSim, _: &Config, s: &mut SimSettings, errors: &mut Vec<ConfigError>) {
    choose(
        "sim.victim_budget",
        r.victim_budget.as_deref(),
        &[("cluster", VictimBudget::Cluster), ("node", VictimBudget::Node)],
        "\"cluster\" (a team's loss bounded cluster-wide) or \"node\" (per node, as the preempt plugin)",
        &mut s.victim_budget,
        errors,
    );
}

fn placement(r: &RawSim, _: &Config, s: &mut SimSettings, errors: &mut Vec<ConfigError>) {
    choose(
        "sim.placement",
        r.placement.as_deref(),
        &[("best_fit", Placement::BestFit), ("cons_tres", Placement::ConsTres)],
        "\"best_fit\" (fewest free GPUs, seeded ties) or \"cons_tres\" (Slurm's select/cons_tres: most jobs running, lowest index)",
        &mut s.placement,
        errors,
    );
}

fn attempt_overhead_ms(r: &RawSim, _: &Config, s: &mut SimSettings, e: &mut Vec<ConfigError>) {
    if let Some(ms) = within(
        "sim.attempt_overhead_ms",
        r.attempt_overhead_ms,
        |ms| ms <= 60_000,
        |ms| {
            format!("{ms} ms is over a minute; it is the launch and end-report time of one attempt in milliseconds (the testbed measures about 30-70), at most 60000")
        },
        e,
    ) {
        s.attempt_overhead_ms = ms;
    }
}

fn attempt_jitter_ms(r: &RawSim, _: &Config, s: &mut SimSettings, e: &mut Vec<ConfigError>) {
    if let Some(ms) = within(
        "sim.attempt_jitter_ms",
        r.attempt_jitter_ms,
        |ms| ms <= 60_000,
        |ms| {
            format!("{ms} ms is over a minute; it is how far one attempt's overhead may lie from attempt_overhead_ms, in milliseconds (the testbed measures about 10-20), at most 60000")
        },
        e,
    ) {
        s.attempt_jitter_ms = ms;
    }
}

fn pass_miss_ms(r: &RawSim, _: &Config, s: &mut SimSettings, errors: &mut Vec<ConfigError>) {
    if let Some(ms) = within(
        "sim.pass_miss_ms",
        r.pass_miss_ms,
        |ms| ms <= 1000,
        |ms| {
            format!("{ms} is more than a second; it is the part of each second after slurmctld's pass, in milliseconds: 0..=1000 (1000 - the pass's offset into the second, about 230 on the testbed)")
        },
        errors,
    ) {
        s.pass_miss_ms = ms;
    }
}

fn main_phase_ms(r: &RawSim, _: &Config, s: &mut SimSettings, errors: &mut Vec<ConfigError>) {
    let sched = s.sched_interval;
    if let Some(ms) = within(
        "sim.main_phase_ms",
        r.main_phase_ms,
        |ms| sched > 0 && ms <= 999,
        |ms| {
            format!("{ms} needs a sched_interval above 0 (now {sched} s) and must be 0-999: it is the main pass's offset into its second, in milliseconds (the testbed's varies from run to run; scripts/calibrate reads it from slurmctld.log)")
        },
        errors,
    ) {
        s.main_phase_ms = ms;
    }
}

fn drain_pass_ms(r: &RawSim, _: &Config, s: &mut SimSettings, errors: &mut Vec<ConfigError>) {
    let sched = s.sched_interval;
    if let Some(ms) = within(
        "sim.drain_pass_ms",
        r.drain_pass_ms,
        |ms| sched > 0 && ms <= 999,
        |ms| {
            format!("{ms} needs a sched_interval above 0 (now {sched} s) and must be 0-999: it is how far into a sync.interval tick's second the sidecar's draining pass requeues, in milliseconds (about 200-300 on the testbed; scripts/calibrate reads it from the sidecar's log)")
        },
        errors,
    ) {
        s.drain_pass_ms = Some(ms);
    }
}

fn victim_complete_ms(r: &RawSim, _: &Config, s: &mut SimSettings, e: &mut Vec<ConfigError>) {
    let sched = s.sched_interval;
    let next_pass = s.preemptor_start == PreemptorStart::NextPass;
    if let Some(ms) = within(
        "sim.victim_complete_ms",
        r.victim_complete_ms,
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
        e,
    ) {
        s.victim_complete_ms = Some(ms);
    }
}

fn pass_drift_us(r: &RawSim, _: &Config, s: &mut SimSettings, errors: &mut Vec<ConfigError>) {
    let sched = s.sched_interval;
    if let Some(us) = within(
        "sim.pass_drift_us",
        r.pass_drift_us,
        |us| sched > 0 && us <= 100_000,
        |us| {
            format!("{us} needs a sched_interval above 0 (now {sched} s) and must be at most 100000: it is how many microseconds later slurmctld's passes start each second (about 2000 on the testbed; scripts/calibrate reads it from slurmctld.log)")
        },
        errors,
    ) {
        s.pass_drift_us = us;
    }
}

fn main_drift_us(r: &RawSim, _: &Config, s: &mut SimSettings, errors: &mut Vec<ConfigError>) {
    let sched = s.sched_interval;
    if let Some(us) = within(
        "sim.main_drift_us",
        r.main_drift_us,
        |us| sched > 0 && us <= 100_000,
        |us| {
            format!("{us} needs a sched_interval above 0 (now {sched} s) and must be at most 100000: it is how many microseconds later slurmctld's main pass starts each second (about 5000 on the testbed; scripts/calibrate reads it from slurmctld.log)")
        },
        errors,
    ) {
        s.main_drift_us = Some(us);
    }
}

fn main_passes_us(r: &RawSim, _: &Config, s: &mut SimSettings, errors: &mut Vec<ConfigError>) {
    let (sched, given) = (s.sched_interval, &r.main_passes_us);
    if let Some(v) = instants("sim.main_passes_us", given, sched, errors) {
        s.main_passes_us = v;
    }
}

fn backfill_passes_us(r: &RawSim, _: &Config, s: &mut SimSettings, e: &mut Vec<ConfigError>) {
    let (sched, given) = (s.sched_interval, &r.backfill_passes_us);
    if let Some(v) = instants("sim.backfill_passes_us", given, sched, e) {
        s.backfill_passes_us = v;
    }
}

/// Instants a pass was seen at (`main_passes_us`, `backfill_passes_us`):
/// they need a `sched_interval` and must ascend.
fn instants(
    path: &str,
    given: &Option<Vec<u64>>,
    sched: u64,
    errors: &mut Vec<ConfigError>,
) -> Option<Vec<u64>> {
    let v = given.as_ref()?;
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
        return Some(v.clone());
    }
    None
}

/// `node_cpus` (read after `placement`) shapes only cons_tres's choice: with
/// best_fit it would be ignored, silently.
fn node_cpus(r: &RawSim, _: &Config, s: &mut SimSettings, e: &mut Vec<ConfigError>) {
    s.node_cpus = r.node_cpus.unwrap_or(0);
    if s.node_cpus > 0 && s.placement != Placement::ConsTres {
        e.push(ConfigError::Invalid {
            path: "sim.node_cpus".into(),
            message: "needs placement = \"cons_tres\": it is how select/cons_tres sees a node's CPUs; set placement or leave node_cpus out".into(),
        });
    }
}

fn seed(r: &RawSim, _: &Config, s: &mut SimSettings, _: &mut Vec<ConfigError>) {
    s.seed = r.seed.unwrap_or(0);
}

/// `will_run_window` (read above) plans only whole-node reservations of
/// every job the backfill looks at.
fn will_run_needs_nodes(_: &RawSim, _: &Config, s: &mut SimSettings, e: &mut Vec<ConfigError>) {
    if s.will_run_window > 0
        && (s.backfill_reserve != BackfillReserve::All || s.backfill_hold != BackfillHold::Nodes)
    {
        e.push(ConfigError::Invalid {
            path: "sim.will_run_window".into(),
            message: "needs backfill_reserve = \"all\" and backfill_hold = \"nodes\": it is how Slurm's will-run test plans each job the backfill reserves whole nodes for; set those two or leave it out".into(),
        });
    }
}

fn backfill_depth(r: &RawSim, _: &Config, s: &mut SimSettings, _: &mut Vec<ConfigError>) {
    s.backfill_depth = r.backfill_depth.unwrap_or(s.backfill_depth);
}

fn resumable(r: &RawSim, _: &Config, s: &mut SimSettings, _: &mut Vec<ConfigError>) {
    s.resumable = r.resumable.unwrap_or(true);
}

/// `short_partition` (read above) against the engine's `[priority]`.
fn short_partition_needs_the_short_band(
    _: &RawSim,
    c: &Config,
    s: &mut SimSettings,
    errors: &mut Vec<ConfigError>,
) {
    if s.short_partition == ShortPartition::Shared && c.priority.short_max_gpus == 0 {
        errors.push(ConfigError::Invalid {
            path: "sim.short_partition".into(),
            message: "\"shared\" says how short-band jobs that cannot start hold up the others, and the short band is off; set priority.short_max_gpus (e.g. 2) or remove short_partition".into(),
        });
    }
}
