//! What one job attempt is charged: the engine's rule applied to sacct rows.
//!
//! This file only *applies* the engine's rules; it defines none:
//! - the minimum runtime is [`fairshare::ContractPolicy::job_min_runtime`]
//!   of the one recorded on the job (`AdminComment`, read by
//!   [`fairshare::record::recorded_min_runtime`]), of its partition and of
//!   its time limit (sacct's `Timelimit`: the minimum runtime charged is at
//!   most that);
//! - the charge rate (milli-units per second; 1000 per GPU with the default
//!   weights) is [`fairshare::charge::ChargeWeights::rate`] of the
//!   allocated TRES: Slurm's unrounded billing, so a 1-core job at
//!   `cpu = 0.05` is charged 50, not a whole unit;
//! - the charged interval is `[start, charged_end)` with `charged_end` from
//!   [`fairshare::attempts::charged_ends`] over *all* the job's attempts:
//!   an attempt its owner ended (`COMPLETED`, `FAILED`, `CANCELLED`,
//!   `TIMEOUT`, `OUT_OF_MEMORY`, `PREEMPTED`, ...) pays `max(end, start of
//!   its run + min runtime)` when minimum runtimes are charged; one the
//!   cluster ended (`NODE_FAIL`, `BOOT_FAIL`, `REQUEUED`, `REQUEUE_HOLD`,
//!   `REQUEUE_FED`) and a segment ended `RESIZING` pay their runtime only;
//!   a later attempt's start cuts an earlier attempt's charged tail, so one
//!   job's charged intervals never overlap; an unallocated job (minimum
//!   runtime 0) pays nothing. [`Charging::record`] charges one attempt
//!   alone; [`Charging::charge_job`] charges a job's attempts together (the
//!   ledger's writer calls it with every attempt of the job it holds).
//!
//! A running attempt has no charged end yet: readers count it up to the
//! time they ask about (see [`crate::LedgerReader::usage`]).

use fairshare::attempts::{ended_by, AttemptSpan};
use fairshare::charge::ChargeWeights;
use fairshare::{Config, ContractPolicy};

use crate::sacct::Attempt;
use crate::AttemptRecord;

/// The charging rules of one config.
#[derive(Debug, Clone)]
pub struct Charging {
    policy: ContractPolicy,
    weights: ChargeWeights,
}

impl Charging {
    /// The rules of `config` (`[contract]` and `[charge]`).
    pub fn from_config(config: &Config) -> Charging {
        Charging {
            policy: config.contract.clone(),
            weights: config.charge.clone(),
        }
    }

    /// Rules from their parts (tests, benchmarks).
    pub fn new(policy: ContractPolicy, weights: ChargeWeights) -> Charging {
        Charging { policy, weights }
    }

    /// Charge milli-units per second of an attempt (1000 per GPU with
    /// default weights).
    /// Typed GPU entries (`gres/gpu:a100`) count through the `gres/gpu`
    /// total unless a weight names the type.
    pub fn rate(&self, a: &Attempt) -> u64 {
        self.weights.rate_of_counts(&a.tres, a.gpus)
    }

    /// The GPU-sharing GRES (`gres/shard`, `gres/mps`, typed or not) an
    /// attempt holds without a whole GPU and without a charge weight for
    /// it: such a job uses a GPU and is charged 0, so its team ranks as if
    /// idle. `None` when it holds none, holds GPUs too, or the weights
    /// charge it (`[charge] "gres/shard" = 1 / shards per GPU`,
    /// `"gres/mps" = 1 / MPS count per GPU`).
    pub fn unweighted_sharing(&self, a: &Attempt) -> Option<&'static str> {
        if a.gpus > 0 {
            return None;
        }
        ["gres/shard", "gres/mps"].into_iter().find(|kind| {
            let held: Vec<(&str, u64)> = a
                .tres
                .iter()
                .filter(|(n, c)| {
                    *c > 0
                        && n.strip_prefix(kind)
                            .is_some_and(|rest| rest.is_empty() || rest.starts_with(':'))
                })
                .map(|(n, c)| (n.as_str(), *c))
                .collect();
            !held.is_empty() && self.weights.rate_of_counts(&held, 0) == 0
        })
    }

    /// The ledger record of an attempt: contract, rate, charged end and
    /// charged milli-unit-seconds (1000 per GPU-second by default; 0 while running, for a
    /// job that never started, and for an unallocated job).
    pub fn record(&self, a: &Attempt) -> AttemptRecord {
        let min_runtime =
            self.policy
                .job_min_runtime(a.min_runtime, a.partition.as_deref(), a.time_limit);
        let recorded = a.min_runtime.is_some();
        let rate = self.rate(a);
        let mut record = AttemptRecord {
            job_id: a.job_id,
            submit: a.submit,
            label: a.label.clone(),
            array_job: a.array.map(|x| x.job),
            array_task: a.array.map(|x| x.task),
            het_job: a.het.map(|x| x.job),
            het_offset: a.het.map(|x| x.offset),
            account: a.account.clone(),
            user: a.user.clone(),
            partition: a.partition.clone(),
            gpus: a.gpus,
            rate,
            start: a.start,
            end: a.end,
            elapsed: a.elapsed,
            state: a.state.clone(),
            min_runtime,
            min_runtime_recorded: recorded,
            charge_end: None,
            charged: 0,
            time_limit: a.time_limit,
        };
        self.charge_job(std::slice::from_mut(&mut record));
        record
    }

    /// Sets `charge_end` and `charged` of one job's attempts, given in
    /// submit order, from their start, end, state, minimum runtime and rate
    /// ([`fairshare::attempts::charged_ends`]): an attempt the cluster
    /// ended pays its runtime, a resized run its segments and its minimum
    /// runtime once, and no two attempts' charged intervals overlap.
    /// Nothing is charged at rate 0.
    pub fn charge_job(&self, attempts: &mut [AttemptRecord]) {
        let epoch = |t: Option<i64>| t.map(|t| t.max(0) as u64);
        let spans: Vec<AttemptSpan> = attempts
            .iter()
            .map(|r| AttemptSpan {
                start: epoch(r.start),
                end: epoch(r.end),
                ended_by: ended_by(&r.state),
                min_runtime: r.min_runtime,
            })
            .collect();
        let ends = fairshare::attempts::charged_ends(&self.policy, &spans);
        for (r, end) in attempts.iter_mut().zip(ends) {
            r.charge_end = end
                .filter(|_| r.rate > 0)
                .map(|ce| i64::try_from(ce).unwrap_or(i64::MAX));
            r.charged = match (r.start, r.charge_end) {
                (Some(s), Some(ce)) => r.rate.saturating_mul(ce.saturating_sub(s).max(0) as u64),
                _ => 0,
            };
        }
    }
}

#[cfg(test)]
mod attempts_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sacct::{Parser, RowOutcome};

    fn attempt(line: &str) -> Attempt {
        let p = Parser::live(jiff::tz::TimeZone::UTC);
        match p.parse(line).unwrap() {
            RowOutcome::Attempt(a) => *a,
            RowOutcome::Skipped | RowOutcome::Step => panic!(),
        }
    }

    fn rules() -> Charging {
        let mut policy = ContractPolicy::default(); // 1 h default, charged
        policy.partition_default.insert("debug".into(), 0);
        Charging::new(policy, ChargeWeights::default())
    }

    #[test]
    fn short_allocated_job_pays_its_minimum_runtime() {
        let r = rules().record(&attempt(
            "1|1|a1|alice|gpu|gres/gpu=2|0|1000|1600|00:10:00|COMPLETED||",
        ));
        assert_eq!((r.min_runtime, r.min_runtime_recorded), (3600, false));
        assert_eq!(r.charge_end, Some(4600));
        assert_eq!(r.charged, 2000 * 3600);
    }

    #[test]
    fn the_minimum_runtime_charged_is_at_most_the_time_limit() {
        // Issue 39: a job of --time=10:00 was charged the 1 h default, one
        // of --time=30:00 --min-runtime=4:00:00 4 h after Slurm ended it at
        // 30 min (TimelimitRaw: minutes).
        let ten = rules().record(&attempt(
            "9|9|a1|alice|gpu|gres/gpu=2|0|1000|1600|00:10:00|COMPLETED|10|",
        ));
        assert_eq!((ten.min_runtime, ten.charge_end), (600, Some(1600)));
        assert_eq!(ten.charged, 2000 * 600);
        let timeout = rules().record(&attempt(
            "10|10|a1|alice|gpu|gres/gpu=8|0|1000|2800|00:30:00|TIMEOUT|30|allot:min_runtime=14400",
        ));
        assert_eq!(
            (timeout.min_runtime, timeout.min_runtime_recorded),
            (1800, true)
        );
        assert_eq!(timeout.charged, 8000 * 1800);
        // A job ended early still pays the capped contract: 5 min of a
        // 30 min limit is charged 30 min, not the 1 h default.
        let early = rules().record(&attempt(
            "11|11|a1|alice|gpu|gres/gpu=1|0|1000|1300|00:05:00|CANCELLED|30|",
        ));
        assert_eq!((early.min_runtime, early.charged), (1800, 1000 * 1800));
        // No limit known: unchanged.
        for limit in ["UNLIMITED", "Partition_Limit", ""] {
            let r = rules().record(&attempt(&format!(
                "12|12|a1|alice|gpu|gres/gpu=1|0|1000|1600|00:10:00|COMPLETED|{limit}|"
            )));
            assert_eq!((r.min_runtime, r.charged), (3600, 1000 * 3600), "{limit:?}");
        }
    }

    #[test]
    fn recorded_contract_above_the_cap_counts_as_the_cap() {
        // 99 h recorded by hand; the cap is 8 h: a 1 h job pays 8 h, not 99.
        let r = rules().record(&attempt(
            "3|3|a1|alice|gpu|gres/gpu=1|0|1000|4600|01:00:00|COMPLETED||allot:min_runtime=356400",
        ));
        assert_eq!((r.min_runtime, r.min_runtime_recorded), (8 * 3600, true));
        assert_eq!(r.charged, 1000 * 8 * 3600);
    }

    #[test]
    fn long_job_pays_its_runtime_and_recorded_contract_wins() {
        let r = rules().record(&attempt(
            "2|2|a1|alice|gpu|gres/gpu=4|0|1000|11000|02:46:40|COMPLETED||allot:min_runtime=7200",
        ));
        assert_eq!((r.min_runtime, r.min_runtime_recorded), (7200, true));
        assert_eq!(r.charged, 4000 * 10_000);
    }

    #[test]
    fn unallocated_running_and_never_started_are_free() {
        let free = rules().record(&attempt(
            "3|3|a1|bob|debug|gres/gpu=1|0|1000|5000|01:06:40|COMPLETED||",
        ));
        assert_eq!(
            (free.min_runtime, free.charge_end, free.charged),
            (0, None, 0)
        );
        assert_eq!(free.gpus, 1);
        let run = rules().record(&attempt(
            "4|4|a1|bob|gpu|gres/gpu=1|0|1000|Unknown|00:10:00|RUNNING||",
        ));
        assert_eq!((run.charge_end, run.charged, run.rate), (None, 0, 1000));
        let pend = rules().record(&attempt(
            "5|5|a1|bob|gpu||0|None|Unknown|00:00:00|PENDING||",
        ));
        assert_eq!((pend.charge_end, pend.charged, pend.rate), (None, 0, 0));
    }

    #[test]
    fn typed_only_gpus_are_charged() {
        let r = rules().record(&attempt(
            "6|6|a1|bob|gpu|gres/gpu:a100=3|0|0|3600|01:00:00|COMPLETED||",
        ));
        assert_eq!((r.gpus, r.rate, r.charged), (3, 3000, 3000 * 3600));
    }

    #[test]
    fn fractional_weights_are_charged_unrounded() {
        // The docs' weights; four 1-hour jobs charged 2, 1, 1 and 1
        // GPU-hours when the rate was rounded up to whole units.
        let weights = ChargeWeights::new(std::collections::BTreeMap::from([
            ("gres/gpu".into(), 1.0),
            ("cpu".into(), 0.05),
            ("gres/shard".into(), 0.125),
        ]))
        .unwrap();
        let rules = Charging::new(ContractPolicy::default(), weights);
        let charged: Vec<(u64, f64)> = [
            "cpu=8,mem=32G,node=1,billing=8,gres/gpu=1",
            "cpu=1,mem=4G,node=1,billing=1",
            "cpu=20,mem=80G,node=1,billing=20",
            "cpu=1,mem=4G,node=1,billing=1,gres/shard=1",
        ]
        .iter()
        .enumerate()
        .map(|(i, tres)| {
            let r = rules.record(&attempt(&format!(
                "{i}|{i}|a1|bob|gpu|{tres}|0|0|3600|01:00:00|COMPLETED||"
            )));
            (r.rate, fairshare::charge::unit_hours(r.charged))
        })
        .collect();
        assert_eq!(
            charged,
            [(1400, 1.4), (50, 0.05), (1000, 1.0), (175, 0.175)]
        );
    }

    #[test]
    fn contract_read_as_the_plugins_read_it() {
        // A partition list was looked up whole (the global 1 h) where the
        // plugins take the first partition's default (debug: 0).
        let r = rules().record(&attempt(
            "7|7|a1|bob|debug,gpu|gres/gpu=1|0|1000|1600|00:10:00|CANCELLED||",
        ));
        assert_eq!((r.min_runtime, r.charged), (0, 0));
        // A hand-written Slurm time is a record here as everywhere.
        let r = rules().record(&attempt(
            "8|8|a1|bob|gpu|gres/gpu=1|0|1000|1600|00:10:00|COMPLETED||allot:min_runtime=2:00:00",
        ));
        assert_eq!((r.min_runtime, r.min_runtime_recorded), (7200, true));
    }
}
