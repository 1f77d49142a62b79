//! The `[sim]` table as written ([`RawSim`]: each key as TOML gave it,
//! before any check) and the reading of a Slurm time in it ([`duration`]),
//! which the validators of [`super::keys`] and [`super::rules`] share.

use fairshare::config::ConfigError;
use fairshare::duration::parse_slurm_duration;
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSim {
    pub(super) cluster: Option<String>,
    pub(super) half_life: Option<toml::Value>,
    pub(super) calc_period: Option<toml::Value>,
    pub(super) seed: Option<u64>,
    pub(super) backfill_depth: Option<u32>,
    pub(super) backfill_interval: Option<toml::Value>,
    pub(super) backfill_reserve: Option<String>,
    pub(super) backfill_hold: Option<String>,
    pub(super) backfill_candidates: Option<String>,
    pub(super) short_partition: Option<String>,
    pub(super) backfill_idle: Option<String>,
    pub(super) backfill_preempt: Option<String>,
    pub(super) snapshot_phase: Option<String>,
    pub(super) preemptor_start: Option<String>,
    pub(super) victim_budget: Option<String>,
    pub(super) ledger_lag: Option<toml::Value>,
    pub(super) repreempt_delay: Option<toml::Value>,
    pub(super) placement: Option<String>,
    pub(super) node_cpus: Option<u32>,
    pub(super) requeue_delay: Option<toml::Value>,
    pub(super) attempt_overhead_ms: Option<u64>,
    pub(super) attempt_jitter_ms: Option<u64>,
    pub(super) pass_miss_ms: Option<u64>,
    pub(super) main_phase_ms: Option<u64>,
    pub(super) pass_drift_us: Option<u64>,
    pub(super) main_drift_us: Option<u64>,
    pub(super) main_passes_us: Option<Vec<u64>>,
    pub(super) backfill_passes_us: Option<Vec<u64>>,
    pub(super) sched_interval: Option<toml::Value>,
    pub(super) sched_offset: Option<u64>,
    pub(super) sync_offset: Option<u64>,
    pub(super) drain_pass_ms: Option<u64>,
    pub(super) victim_complete_ms: Option<u64>,
    pub(super) backfill_resolution: Option<toml::Value>,
    pub(super) resolution_offset: Option<u64>,
    pub(super) will_run_window: Option<toml::Value>,
    pub(super) will_run_offset: Option<u64>,
    pub(super) resumable: Option<bool>,
    pub(super) checkpoint_interval: Option<toml::Value>,
    pub(super) metric_window: Option<toml::Value>,
    pub(super) worst_floor_gpu_hours: Option<toml::Value>,
    #[serde(default)]
    pub(super) rule: Vec<RawRule>,
    #[serde(default)]
    pub(super) accounts: std::collections::BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRule {
    pub(super) name: Option<String>,
    #[serde(default)]
    pub(super) teams: Vec<String>,
    #[serde(default)]
    pub(super) partitions: Vec<String>,
    pub(super) min_gpus: Option<u32>,
    pub(super) max_gpus: Option<u32>,
    pub(super) min_duration: Option<toml::Value>,
    pub(super) max_duration: Option<toml::Value>,
    pub(super) min_runtime: Option<toml::Value>,
    pub(super) resumable: Option<bool>,
}

pub(super) fn duration(path: &str, v: &toml::Value, errors: &mut Vec<ConfigError>) -> Option<u64> {
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
