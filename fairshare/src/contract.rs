//! The minimum-runtime contract (docs/fair-share.md, docs/design.md).
//!
//! Rules, each with its boundary:
//! - **Minimum runtime** = the job's declared value (any Slurm time format),
//!   else its partition's `default_min_runtime`, else the global default.
//!   A declared value above `max_min_runtime` is rejected (never silently
//!   capped: the user must know what they bought); exactly the cap is
//!   accepted. An unparsable value is rejected, never read as 0.
//! - **Which minimum runtime a job has**, once it is submitted, is decided by
//!   one function, [`ContractPolicy::job_min_runtime`], that every reader
//!   calls (the priority and preempt plugins, `allot sync`'s charge, drain,
//!   `allot explain`, the simulator): the minimum runtime recorded on the job
//!   (AdminComment, read with [`crate::record::recorded_min_runtime`]) at
//!   most today's `max_min_runtime`; else the default of its partition (the
//!   first of a comma-separated list, as at submission); else the global
//!   default.
//! - **Time limit**: a job's minimum runtime is never above its time limit
//!   (Slurm's `--time`, or the limit slurmctld gave it), since Slurm ends the
//!   job there: protection past it is never delivered, so it is neither
//!   promised nor charged. A *declared* minimum runtime above the time limit
//!   given at submission is refused, naming both ([`ContractPolicy::min_runtime`],
//!   as Slurm refuses `--time-min` above `--time`); exactly the limit is
//!   accepted. A *default* minimum runtime, and a record above a limit
//!   lowered or set since (a partition's `DefaultTime`, `scontrol update
//!   TimeLimit`), count as the time limit ([`within_time_limit`]), in every
//!   reader through [`ContractPolicy::job_min_runtime`]: the plugins (from
//!   the job record), `allot sync` (sacct's `Timelimit`), drain, `allot
//!   explain` and the simulator (the trace's `time_limit`). Where no limit is
//!   known (`INFINITE`, `Partition_Limit`, a trace without limits) nothing
//!   changes. A limit never makes an allocated job free tier: the cap applies
//!   to limits of at least one second.
//! - **Tier**: minimum runtime 0 = *unallocated* (free tier): charged
//!   nothing, preemptible from the first second, below every allocated job.
//!   Anything above 0 = *allocated*.
//! - **Protection**: a job is protected while its running time is
//!   *strictly less* than its minimum runtime (`run_time < min_runtime`). A
//!   job whose running time *equals* its minimum runtime is no longer
//!   protected: it may be preempted at that very second.
//! - **Requeue points** (off unless `requeue_period` > 0): past its minimum
//!   runtime, an allocated job may be preempted only while `run_time mod
//!   requeue_period < requeue_window`, i.e. in the first `requeue_window`
//!   seconds of each `requeue_period` of running time, counted from its
//!   start ([`RequeuePoints::open`]). A job that checkpoints every
//!   `requeue_period` of running time then loses at most `requeue_window`
//!   of work to a preemption. The window is the same for every allocated
//!   job; free-tier jobs stay preemptible at any second, drain is not
//!   affected (it requeues at the minimum runtime). Why: after the minimum
//!   runtime, *when* a victim is taken decides how much of its work is
//!   thrown away, and the scheduler cannot know when a job checkpoints
//!   unless the contract says so. Measured on full Philly
//!   (docs/simulator.md): 30 min / 10 min (examples/sim-philly.toml) cut
//!   lost work from 0.74% to 0.25% of delivered, 30 min / 5 min to 0.10%.
//! - **Running time** counts running seconds only: it starts when the job
//!   starts (Slurm's `start_time`; leaving CONFIGURING does not restart it)
//!   and stops while the job is suspended.
//! - **Charging**: an allocated job is charged `rate x max(runtime, min
//!   runtime)` (protection is bought); with `charge_min_runtime = false`,
//!   `rate x runtime`. Unallocated jobs are charged 0. `runtime` here is wall
//!   time from start to end: a suspended job keeps its GPUs allocated.
//!   Which attempts pay the minimum runtime (those their owner ended, not
//!   the cluster), resized runs (the minimum runtime once per run) and the
//!   rule that one job's charged intervals never overlap:
//!   [`crate::attempts`].

use std::collections::BTreeMap;

use serde::Serialize;

use crate::duration::{parse_slurm_duration, DurationError, SlurmDuration};

/// Contract settings from `[contract]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContractPolicy {
    /// Minimum runtime of a job that declares none, seconds (default 1 h).
    pub default_min_runtime: u64,
    /// Largest minimum runtime a job may declare, seconds (default 8 h).
    pub max_min_runtime: u64,
    /// Charge `max(runtime, min runtime)` (true, default) or runtime only.
    pub charge_min_runtime: bool,
    /// Per-partition default minimum runtime, seconds, overriding
    /// `default_min_runtime`.
    pub partition_default: BTreeMap<String, u64>,
    /// When a job past its minimum runtime may be preempted
    /// (`requeue_period`, `requeue_window`; off by default).
    pub requeue: RequeuePoints,
    /// Requeues after which an allocated job is not preempted again until
    /// it ends ([`requeues_used`]; `[contract] max_requeues`, default
    /// [`DEFAULT_MAX_REQUEUES`]).
    pub max_requeues: u32,
}

/// `[contract] max_requeues` when unset: 3 (docs/fair-share.md, measured
/// on full Philly: every team at >= 95% of owed GPU-hours with it).
pub const DEFAULT_MAX_REQUEUES: u32 = 3;

/// True when an allocated job (minimum runtime > 0) has been requeued
/// `requeues` times, at least `max_requeues`: it is not preempted again
/// until it ends. Free-tier jobs are never exempt (they are charged
/// nothing, and an exempt free-tier job would hold GPUs for free). The
/// count is every requeue of the job (Slurm's `Restarts`: preemptions,
/// drains, node failures, an admin's `scontrol requeue`), since each sends
/// the researcher back to the queue.
///
/// # Why a team cannot gain by collecting exempt jobs
/// - an exempt job is charged as any other (`rate x max(runtime, minimum
///   runtime)`), so its team's fair-share rank falls as it runs;
/// - its GPUs count in its leaf's running GPUs, so while the leaf is above
///   its entitlement its *other* jobs are preempted first and its pending
///   jobs are not in the entitled band;
/// - a job becomes exempt only by being started `max_requeues + 1` times,
///   each start on GPUs no team below its entitlement could use then
///   (queue order) or as its own leaf's entitlement (preemption), and each
///   requeue throws away up to `requeue_window` of its work and sends it
///   back to wait in the queue: collecting exempt jobs costs more GPU time
///   and waiting than asking for a larger share.
///
/// A drain still takes an exempt job at its minimum runtime
/// ([`crate::drain`]): health comes before the bound.
pub fn requeues_used(min_runtime: u64, requeues: u32, max_requeues: u32) -> bool {
    min_runtime > 0 && requeues >= max_requeues
}

/// True when a pending job that has used its requeues ([`requeues_used`]:
/// `used`) must wait to start: its leaf holds its entitlement or more now
/// (`leaf_below` false; [`crate::entitlement`]).
///
/// # Rule: an exempt job runs only within its team's share
/// A job that has used its requeues will not be preempted again, so where
/// it starts decides whose GPUs it holds until it ends. It starts only
/// while its leaf is below its entitlement: its protected GPUs are then
/// GPUs its own team is owed, never GPUs a team below its entitlement
/// could otherwise take back. Everything else about it is as before (it
/// is counted as its leaf's demand, so its leaf's entitlement covers it;
/// it is charged as any job). Without this, an exempt job started on GPUs
/// beyond its team's share kept a team below its entitlement waiting for
/// as long as it ran (measured on full Philly, docs/fair-share.md: the
/// worst-served team at 93.5-96.2% of owed over six seeds, 95.4-96.2%
/// with the rule).
///
/// It never idles the cluster for nobody: a leaf's entitlement is
/// water-filled against demand, so while no other leaf wants the GPUs the
/// waiting job's own demand makes its leaf's entitlement cover them, and
/// it starts. It never waits forever while GPUs are owed to it: its leaf's
/// other jobs are preemptible or end, and each one that ends lowers the
/// leaf's holding until it is below its entitlement. The plugins hold it
/// (priority 0, the reason saying why) and release it when its leaf is
/// below its entitlement again; the simulator keeps it out of the pass.
pub fn waits_for_share(used: bool, leaf_below: bool) -> bool {
    used && !leaf_below
}

/// The requeue points of the contract (module doc): `[contract]
/// requeue_period` and `requeue_window`, seconds. `period == 0` (the
/// default) = a job past its minimum runtime is preemptible at any second.
/// The config guarantees `0 < window < period` when `period > 0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct RequeuePoints {
    /// Seconds of running time between two requeue points (0 = off).
    pub period: u64,
    /// Seconds after each requeue point during which the job may be
    /// preempted.
    pub window: u64,
}

impl RequeuePoints {
    /// True if a job that has run `run_time` seconds (and is past its
    /// minimum runtime) may be preempted now: always with the points off,
    /// else `run_time mod period < window`.
    pub fn open(&self, run_time: u64) -> bool {
        self.period == 0 || run_time % self.period < self.window
    }

    /// Seconds of running time from `run_time` until the job may next be
    /// preempted: 0 if [`RequeuePoints::open`], else up to the next multiple
    /// of `period`.
    pub fn wait(&self, run_time: u64) -> u64 {
        if self.open(run_time) {
            0
        } else {
            self.period - run_time % self.period
        }
    }

    /// The first epoch second `t >= now` at which an allocated `job` may be
    /// preempted if it keeps running: the end of its protection
    /// ([`protected_until`]), or the first requeue point after it. `None`
    /// while a suspended job waits for either (its clock is stopped).
    pub fn preemptible_from(&self, job: &Contract, now: u64) -> Option<u64> {
        let t = protected_until(job, now)?;
        match self.wait(job.clock.run_time(now) + (t - now)) {
            0 => Some(t),
            wait => job.clock.running_since.map(|_| t + wait),
        }
    }
}

impl Default for ContractPolicy {
    fn default() -> Self {
        ContractPolicy {
            default_min_runtime: 3600,
            max_min_runtime: 8 * 3600,
            charge_min_runtime: true,
            partition_default: BTreeMap::new(),
            requeue: RequeuePoints::default(),
            max_requeues: DEFAULT_MAX_REQUEUES,
        }
    }
}

/// Why a declared minimum runtime is refused at submit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContractError {
    /// Not a Slurm time string.
    #[error("minimum runtime: {0}")]
    Unparsable(#[from] DurationError),
    /// Longer than the job's time limit given at submission.
    #[error("minimum runtime {requested} is above the job's time limit of {limit}: Slurm ends the job at its time limit, so the protection could never be used; ask for at most --min-runtime={limit}, or raise --time to at least {requested}", requested = SlurmDuration(*.requested), limit = SlurmDuration(*.limit))]
    AboveTimeLimit {
        /// Requested seconds.
        requested: u64,
        /// The job's time limit, seconds.
        limit: u64,
    },
    /// Longer than `max_min_runtime`.
    #[error("minimum runtime {requested} is above the cluster's cap of {cap}; ask for at most {cap} (or 0 for the unallocated free tier)", requested = SlurmDuration(*.requested), cap = SlurmDuration(*.cap))]
    AboveCap {
        /// Requested seconds.
        requested: u64,
        /// The cap, seconds.
        cap: u64,
    },
}

impl ContractPolicy {
    /// A job's minimum runtime in seconds at submission, from its declared
    /// value (Slurm time string), else its partition's default, else the
    /// global default; `time_limit` is the job's time limit in seconds when
    /// it gives one (`--time`; `None`: not given or unlimited). A default is
    /// capped at the time limit ([`within_time_limit`]).
    ///
    /// # Errors
    /// [`ContractError::Unparsable`] for a bad time string,
    /// [`ContractError::AboveCap`] for more than `max_min_runtime`,
    /// [`ContractError::AboveTimeLimit`] for a declared value above
    /// `time_limit` (equal is accepted for both).
    pub fn min_runtime(
        &self,
        declared: Option<&str>,
        partition: Option<&str>,
        time_limit: Option<u64>,
    ) -> Result<u64, ContractError> {
        let secs = match declared {
            Some(text) => parse_slurm_duration(text)?,
            None => return Ok(within_time_limit(self.default_for(partition), time_limit)),
        };
        if secs > self.max_min_runtime {
            return Err(ContractError::AboveCap {
                requested: secs,
                cap: self.max_min_runtime,
            });
        }
        if let Some(limit) = time_limit.filter(|_| within_time_limit(secs, time_limit) < secs) {
            return Err(ContractError::AboveTimeLimit {
                requested: secs,
                limit,
            });
        }
        Ok(secs)
    }

    /// The minimum runtime to honour for one recorded on a job (seconds):
    /// at most today's `max_min_runtime`. job_submit/allot caps at
    /// submission; a record above the cap (lowered since, or written by
    /// hand) counts as the cap for protection, charging and the simulator
    /// alike.
    pub fn recorded(&self, secs: u64) -> u64 {
        secs.min(self.max_min_runtime)
    }

    /// The minimum runtime of a submitted job, seconds: the one rule every
    /// reader applies. `recorded` is what its AdminComment records (read
    /// with [`crate::record::recorded_min_runtime`]): honoured up to today's
    /// cap ([`ContractPolicy::recorded`]). Without a record (a job submitted
    /// before allot was loaded, or an unreadable record), the default of
    /// `partition` ([`ContractPolicy::default_for`]). Either is at most the
    /// job's `time_limit`, seconds ([`within_time_limit`]; `None`: unlimited
    /// or unknown).
    pub fn job_min_runtime(
        &self,
        recorded: Option<u64>,
        partition: Option<&str>,
        time_limit: Option<u64>,
    ) -> u64 {
        let secs = match recorded {
            Some(secs) => self.recorded(secs),
            None => self.default_for(partition),
        };
        within_time_limit(secs, time_limit)
    }

    /// The default minimum runtime of a job in `partition`, seconds: the
    /// partition's `default_min_runtime`, else the global one. A
    /// comma-separated list (a job submitted to several partitions) counts
    /// by its first partition, as job_submit/allot reads it. Never above
    /// the cap (the config refuses a default above it).
    pub fn default_for(&self, partition: Option<&str>) -> u64 {
        partition
            .and_then(|p| p.split(',').next())
            .and_then(|p| self.partition_default.get(p).copied())
            .unwrap_or(self.default_min_runtime)
    }

    /// Charged seconds for a job that ran `runtime` seconds (wall time).
    pub fn charged_seconds(&self, runtime: u64, min_runtime: u64) -> u64 {
        charged_seconds(runtime, min_runtime, self.charge_min_runtime)
    }

    /// End of the charged interval of a job that ran from `start` to `end`
    /// (epoch seconds): `max(end, start + min_runtime)` when minimum
    /// runtimes are charged, else `end`. `None` for an unallocated job (it is
    /// charged nothing).
    pub fn charged_end(&self, start: u64, end: u64, min_runtime: u64) -> Option<u64> {
        if min_runtime == 0 {
            return None;
        }
        let end = end.max(start);
        Some(if self.charge_min_runtime {
            end.max(start.saturating_add(min_runtime))
        } else {
            end
        })
    }
}

/// A minimum runtime (seconds) at most the job's time limit (seconds;
/// `None`: unlimited or unknown): the time-limit rule of the module doc.
/// A limit of 0 (no limit Slurm would enforce) caps nothing, so an
/// allocated job stays allocated.
pub fn within_time_limit(min_runtime: u64, time_limit: Option<u64>) -> u64 {
    match time_limit {
        Some(limit) if limit > 0 => min_runtime.min(limit),
        _ => min_runtime,
    }
}

/// Seconds charged for a job: 0 when unallocated (`min_runtime == 0`), else
/// `max(runtime, min_runtime)` if `charge_min_runtime`, else `runtime`.
pub fn charged_seconds(runtime: u64, min_runtime: u64, charge_min_runtime: bool) -> u64 {
    match (min_runtime, charge_min_runtime) {
        (0, _) => 0,
        (m, true) => runtime.max(m),
        (_, false) => runtime,
    }
}

/// The service tier of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    /// Minimum runtime 0: free tier, sorted below every allocated job.
    Unallocated,
    /// Minimum runtime > 0: charged, protected for its minimum runtime.
    Allocated,
}

impl Tier {
    /// The tier of a job with this minimum runtime (seconds).
    pub fn of(min_runtime: u64) -> Tier {
        if min_runtime == 0 {
            Tier::Unallocated
        } else {
            Tier::Allocated
        }
    }
}

/// A job's running-time clock: running seconds, suspended time excluded.
///
/// From a Slurm `job_record`: `accumulated` = `pre_sus_time`;
/// `running_since` = `Some(max(start_time, suspend_time))` while the job
/// runs (Slurm sets `suspend_time` at suspend and at resume), `None` while
/// it is suspended or has not started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct RunClock {
    /// Running seconds before the current run stretch.
    pub accumulated: u64,
    /// Start of the current run stretch (epoch seconds), `None` if not running.
    pub running_since: Option<u64>,
}

impl RunClock {
    /// A job that started at `start` and was never suspended.
    pub fn started(start: u64) -> Self {
        RunClock {
            accumulated: 0,
            running_since: Some(start),
        }
    }

    /// Running seconds at `now` (epoch seconds). A `now` before the stretch
    /// began counts that stretch as 0, never negative.
    pub fn run_time(&self, now: u64) -> u64 {
        let stretch = self.running_since.map_or(0, |s| now.saturating_sub(s));
        self.accumulated.saturating_add(stretch)
    }

    /// Suspends the job at `now`: the clock stops.
    pub fn suspend(&mut self, now: u64) {
        self.accumulated = self.run_time(now);
        self.running_since = None;
    }

    /// Resumes the job at `now`: the clock runs again.
    pub fn resume(&mut self, now: u64) {
        if self.running_since.is_none() {
            self.running_since = Some(now);
        }
    }
}

/// A running job's contract: its minimum runtime and its clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Contract {
    /// Minimum runtime, seconds (0 = unallocated).
    pub min_runtime: u64,
    /// Running-time clock.
    pub clock: RunClock,
}

/// True while the job may not be preempted: `run_time(now) < min_runtime`.
/// At `run_time == min_runtime` it is **not** protected. An unallocated job
/// (`min_runtime == 0`) is never protected.
pub fn protected(job: &Contract, now: u64) -> bool {
    job.clock.run_time(now) < job.min_runtime
}

/// The first instant `t >= now` (epoch seconds) at which `protected(job, t)`
/// is false if the job keeps running: `now` for a job no longer protected,
/// else `now + (min_runtime - run_time(now))`. `None` while a protected job
/// is suspended (its clock is stopped, so protection does not run out).
/// The scheduler uses it to know when to look at the job again.
pub fn protected_until(job: &Contract, now: u64) -> Option<u64> {
    let run = job.clock.run_time(now);
    if run >= job.min_runtime {
        return Some(now);
    }
    job.clock.running_since?;
    Some(now.saturating_add(job.min_runtime - run))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(min: u64, start: u64) -> Contract {
        Contract {
            min_runtime: min,
            clock: RunClock::started(start),
        }
    }

    #[test]
    fn protection_boundary_is_exclusive() {
        let j = job(3600, 1000);
        assert!(protected(&j, 1000));
        assert!(protected(&j, 1000 + 3599));
        assert!(
            !protected(&j, 1000 + 3600),
            "run time == min runtime: preemptible"
        );
        assert!(!protected(&j, 1000 + 3601));
    }

    #[test]
    fn protected_until_is_the_first_unprotected_second() {
        let j = job(3600, 1000);
        for now in [1000, 2000, 4599] {
            let t = protected_until(&j, now).unwrap();
            assert_eq!(t, 4600);
            assert!(protected(&j, t - 1) && !protected(&j, t));
        }
        assert_eq!(protected_until(&j, 9000), Some(9000));
    }

    #[test]
    fn requeue_points_open_for_the_window_after_each_period() {
        let off = RequeuePoints::default();
        assert!((0..5000).all(|r| off.open(r) && off.wait(r) == 0));
        let p = RequeuePoints {
            period: 1800,
            window: 300,
        };
        // 1 h of running time is a requeue point: open for 300 s, then shut
        // until 1 h 30 min.
        assert!(p.open(3600) && p.open(3899));
        assert!(!p.open(3900) && !p.open(5399) && p.open(5400));
        assert_eq!(p.wait(3700), 0);
        assert_eq!(p.wait(3900), 1500);
        assert_eq!(p.wait(5399), 1);
        // Protected until 1 h, then the points: from 1 h, or 1 h 30 min
        // once the first window has shut; none while suspended between.
        assert_eq!(p.preemptible_from(&job(3600, 1000), 1000), Some(4600));
        assert_eq!(p.preemptible_from(&job(3600, 1000), 4700), Some(4700));
        assert_eq!(p.preemptible_from(&job(3600, 1000), 5000), Some(6400));
        let suspended = Contract {
            min_runtime: 3600,
            clock: RunClock {
                accumulated: 4000,
                running_since: None,
            },
        };
        assert_eq!(p.preemptible_from(&suspended, 9000), None);
        for r in 0..4000 {
            let w = p.wait(r);
            assert!(p.open(r + w), "wait({r}) = {w} lands on an open second");
            assert!((r..r + w).all(|x| !p.open(x)), "nothing open before it");
        }
    }

    #[test]
    fn unallocated_is_never_protected() {
        let j = job(0, 1000);
        assert!(!protected(&j, 1000));
        assert_eq!(protected_until(&j, 1000), Some(1000));
    }

    #[test]
    fn suspended_time_does_not_count() {
        let mut j = job(600, 0);
        j.clock.suspend(100); // ran 100 s
        assert_eq!(j.clock.run_time(10_000), 100);
        assert!(protected(&j, 10_000));
        assert_eq!(
            protected_until(&j, 10_000),
            None,
            "stopped clock: protection does not run out"
        );
        j.clock.resume(10_000);
        assert_eq!(protected_until(&j, 10_000), Some(10_500));
        assert!(protected(&j, 10_499));
        assert!(!protected(&j, 10_500));
    }

    #[test]
    fn job_min_runtime_record_then_partition_then_global() {
        let mut p = ContractPolicy::default();
        p.partition_default.insert("debug".into(), 0);
        // A record wins over every default, the free tier included.
        assert_eq!(p.job_min_runtime(Some(7200), Some("debug"), None), 7200);
        assert_eq!(p.job_min_runtime(Some(0), Some("gpu"), None), 0);
        // Above today's cap it counts as the cap; exactly the cap is kept.
        assert_eq!(p.job_min_runtime(Some(356_400), None, None), 8 * 3600);
        assert_eq!(p.job_min_runtime(Some(8 * 3600), None, None), 8 * 3600);
        // No record: the partition's default, else the global one.
        assert_eq!(p.job_min_runtime(None, Some("debug"), None), 0);
        assert_eq!(p.job_min_runtime(None, Some("gpu"), None), 3600);
        assert_eq!(p.job_min_runtime(None, None, None), 3600);
    }

    #[test]
    fn a_partition_list_counts_by_its_first_partition() {
        // A job submitted to "debug,gpu": job_submit and the plugins used the
        // first partition's default, while sync, drain and explain looked the
        // whole list up (no such partition: the global default).
        let mut p = ContractPolicy::default();
        p.partition_default.insert("debug".into(), 0);
        assert_eq!(p.default_for(Some("debug,gpu")), 0);
        assert_eq!(p.job_min_runtime(None, Some("debug,gpu"), None), 0);
        assert_eq!(p.min_runtime(None, Some("debug,gpu"), None), Ok(0));
        assert_eq!(p.job_min_runtime(None, Some("gpu,debug"), None), 3600);
        assert_eq!(p.default_for(Some("")), 3600);
    }

    #[test]
    fn min_runtime_sources_and_cap() {
        let mut p = ContractPolicy::default();
        p.partition_default.insert("debug".into(), 0);
        assert_eq!(
            p.min_runtime(Some("2:00:00"), Some("debug"), None),
            Ok(7200)
        );
        assert_eq!(p.min_runtime(None, Some("debug"), None), Ok(0));
        assert_eq!(p.min_runtime(None, Some("gpu"), None), Ok(3600));
        assert_eq!(p.min_runtime(None, None, None), Ok(3600));
        assert_eq!(
            p.min_runtime(Some("8:00:00"), None, None),
            Ok(8 * 3600),
            "exactly the cap is accepted"
        );
        let e = p.min_runtime(Some("8:00:01"), None, None).unwrap_err();
        assert_eq!(
            e,
            ContractError::AboveCap {
                requested: 8 * 3600 + 1,
                cap: 8 * 3600
            }
        );
        assert!(e.to_string().contains("at most 08:00:00"), "{e}");
        assert!(matches!(
            p.min_runtime(Some("4h"), None, None),
            Err(ContractError::Unparsable(_))
        ));
    }

    #[test]
    fn a_minimum_runtime_is_never_above_the_time_limit() {
        // Issue 39: --time=30:00 --min-runtime=4:00:00 was accepted and
        // charged 4 h after Slurm ended the job at 30 min; a 10-minute job
        // (--time=10:00) was charged the 1 h default.
        let mut p = ContractPolicy::default(); // 1 h default, 8 h cap
        p.partition_default.insert("debug".into(), 0);
        let e = p
            .min_runtime(Some("4:00:00"), None, Some(1800))
            .unwrap_err();
        assert_eq!(
            e,
            ContractError::AboveTimeLimit {
                requested: 14_400,
                limit: 1800
            }
        );
        let text = e.to_string();
        assert!(
            text.contains("minimum runtime 04:00:00 is above the job's time limit of 00:30:00")
                && text.contains("--min-runtime=00:30:00")
                && text.contains("--time to at least 04:00:00"),
            "{text}"
        );
        // Exactly the limit is accepted; below it, and without a limit, as before.
        assert_eq!(p.min_runtime(Some("30:00"), None, Some(1800)), Ok(1800));
        assert_eq!(p.min_runtime(Some("20:00"), None, Some(1800)), Ok(1200));
        assert_eq!(p.min_runtime(Some("4:00:00"), None, None), Ok(14_400));
        // The free tier fits every limit; the cap is checked first.
        assert_eq!(p.min_runtime(Some("0"), None, Some(60)), Ok(0));
        assert!(matches!(
            p.min_runtime(Some("9:00:00"), None, Some(1800)),
            Err(ContractError::AboveCap { .. })
        ));
        // A default is capped at the limit: 10 min, not the 1 h default.
        assert_eq!(p.min_runtime(None, None, Some(600)), Ok(600));
        assert_eq!(p.min_runtime(None, None, Some(7200)), Ok(3600));
        assert_eq!(p.min_runtime(None, Some("debug"), Some(600)), Ok(0));
        // Every reader: the default, and a record above a limit set since.
        assert_eq!(p.job_min_runtime(None, Some("gpu"), Some(600)), 600);
        assert_eq!(p.job_min_runtime(Some(14_400), None, Some(1800)), 1800);
        assert_eq!(p.job_min_runtime(Some(1200), None, Some(1800)), 1200);
        assert_eq!(
            p.job_min_runtime(Some(356_400), None, Some(86_400)),
            8 * 3600
        );
        assert_eq!(p.job_min_runtime(None, Some("debug"), Some(600)), 0);
        // No limit known, or a limit of 0: nothing changes (never free tier).
        assert_eq!(p.job_min_runtime(None, None, None), 3600);
        assert_eq!(within_time_limit(3600, Some(0)), 3600);
        assert_eq!(within_time_limit(3600, Some(1)), 1);
    }

    #[test]
    fn charging_rule() {
        assert_eq!(charged_seconds(600, 3600, true), 3600);
        assert_eq!(charged_seconds(7200, 3600, true), 7200);
        assert_eq!(charged_seconds(600, 3600, false), 600);
        assert_eq!(charged_seconds(600, 0, true), 0, "unallocated is free");
        let p = ContractPolicy::default();
        assert_eq!(p.charged_end(100, 200, 3600), Some(3700));
        assert_eq!(p.charged_end(100, 9000, 3600), Some(9000));
        assert_eq!(p.charged_end(100, 200, 0), None);
        assert_eq!(Tier::of(0), Tier::Unallocated);
        assert!(Tier::Allocated > Tier::Unallocated);
    }
}
