//! `[sim] timing`: a preset of the timing keys that are properties of
//! slurmctld (and of allot's plugins and sidecar) rather than of one run.
//!
//! `timing = "slurmctld"` fills every key of [`SLURMCTLD`] that `[sim]`
//! does not write itself, before the keys are validated: a key written in
//! `[sim]` wins, and each filled key is checked as if written. The keys a
//! `slurm.conf` sets are at Slurm 22.05's defaults (a site writes its own
//! from `scontrol show config`); the others are what `scripts/calibrate`
//! measured on the testbed (docs/calibration-record.md). Nothing of one
//! run is in it: the passes sit in the middle of their second
//! (`main_phase_ms`, `pass_miss_ms`), not at a run's phase, and drift,
//! `main_passes_us` and the offsets of the trace's second 0
//! (`sched_offset`, `sync_offset`, `resolution_offset`,
//! `will_run_offset`) stay at their defaults.

use fairshare::config::{Config, ConfigError};
use fairshare::duration::parse_slurm_duration;

/// The presets `timing` takes, and what each is, for the error message.
const CHOICES: &str = "\"ideal\" (the default: a pass at every event, exact ends, as the simulator always ran) or \"slurmctld\" (Slurm 22.05's passes and timing at its defaults, allot's measured on the testbed; docs/simulator.md)";

/// `timing = "slurmctld"`: each key and its value as TOML. Keys are
/// seconds as Slurm durations, milliseconds as whole numbers.
pub const SLURMCTLD: &[(&str, &str)] = &[
    // slurm.conf, at Slurm 22.05's defaults: SchedulerParameters'
    // sched_interval=60, bf_interval=30, bf_max_job_test=500 and
    // bf_resolution=60; AuthInfo's cred_expire=120 (+ 1); KillWait=30 +
    // MessageTimeout=10.
    ("sched_interval", "\"1:00\""),
    ("backfill_interval", "\"0:30\""),
    ("backfill_depth", "500"),
    ("backfill_resolution", "\"1:00\""),
    ("requeue_delay", "\"2:01\""),
    ("repreempt_delay", "\"0:40\""),
    // slurmctld's code (sched/backfill, select/cons_tres, job_scheduler.c).
    ("backfill_reserve", "\"all\""),
    ("backfill_hold", "\"nodes\""),
    ("backfill_candidates", "\"free\""),
    ("backfill_idle", "\"skip\""),
    ("backfill_preempt", "\"all\""),
    ("will_run_window", "\"0:30\""),
    ("preemptor_start", "\"next_pass\""),
    ("placement", "\"cons_tres\""),
    ("short_partition", "\"shared\""),
    // allot's plugins and sidecar.
    ("victim_budget", "\"node\""),
    ("snapshot_phase", "\"clock\""),
    ("ledger_lag", "\"0:01\""),
    // No run's phase: both passes in the middle of their second (each
    // run's lies anywhere, drifting; at 0 every attempt the backfill
    // starts would cross a second and be recorded a second longer).
    ("main_phase_ms", "500"),
    ("pass_miss_ms", "500"),
    // Measured on the testbed (scripts/calibrate, 2026-12-05).
    ("attempt_overhead_ms", "74"),
    ("attempt_jitter_ms", "37"),
    ("victim_complete_ms", "42"),
    ("drain_pass_ms", "347"),
];

/// Fills `[sim]` (the table `sim`, as written) with the preset its
/// `timing` names, each key only where `sim` does not write it, and a key
/// that needs another's value only where that holds ([`applies`]).
/// `timing` itself is taken out.
///
/// # Errors
/// A `timing` that names no preset, or is not a string: an error at
/// `sim.timing` listing the presets, and nothing is filled.
pub(super) fn fill(sim: &mut toml::Table, config: &Config, errors: &mut Vec<ConfigError>) {
    let Some(timing) = sim.remove("timing") else {
        return;
    };
    let preset = match timing.as_str() {
        Some("ideal") => return,
        Some("slurmctld") => SLURMCTLD,
        _ => {
            errors.push(ConfigError::Invalid {
                path: "sim.timing".into(),
                message: format!("{timing} is not a timing preset; write {CHOICES}"),
            });
            return;
        }
    };
    for &(key, value) in preset {
        if !sim.contains_key(key) && applies(key, sim, config) {
            let v: toml::Table = toml::from_str(&format!("v = {value}")).expect("a TOML value");
            sim.insert(key.into(), v["v"].clone());
        }
    }
}

/// Whether the preset's `key` applies beside the keys `sim` writes: a key
/// that needs another key's value is left out where `sim` writes that key
/// otherwise (`preemptor_start = "at_once"` takes `victim_complete_ms`
/// with it, `sched_interval = "0"` the passes' phases and `drain_pass_ms`
/// too), and `short_partition` where the engine's short band is off.
fn applies(key: &str, sim: &toml::Table, config: &Config) -> bool {
    let as_preset = |k: &str, v: &str| sim.get(k).is_none_or(|w| w.as_str() == Some(v));
    let passes = sim
        .get("sched_interval")
        .is_none_or(|v| v.as_str().and_then(|s| parse_slurm_duration(s).ok()) != Some(0));
    match key {
        "short_partition" => config.priority.short_max_gpus > 0,
        "will_run_window" => {
            as_preset("backfill_reserve", "all") && as_preset("backfill_hold", "nodes")
        }
        "victim_complete_ms" => passes && as_preset("preemptor_start", "next_pass"),
        "drain_pass_ms" | "main_phase_ms" | "pass_miss_ms" => passes,
        _ => true,
    }
}
