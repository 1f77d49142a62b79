//! Slurm job records as the engine sees them (shared by the priority and
//! preempt plugins).

use allot_ffi::job::{JobRecord, JobState};
use fairshare::live_load::{LoadCounter, LoadJob, LoadState};
use fairshare::owed::OwedBands;
use fairshare::record::{recorded_min_runtime, recorded_sweep};
use fairshare::{
    Contract, Engine, Entitlements, PendingJob, Preemptor, RunClock, RunningJob, Tier,
};

/// The job's minimum runtime: [`fairshare::ContractPolicy::job_min_runtime`]
/// of the one job_submit recorded in AdminComment, of its partition and of
/// its time limit ([`time_limit`]: the minimum runtime is at most that).
pub fn min_runtime(engine: &Engine, job: &JobRecord<'_>) -> u64 {
    recorded(engine, job).0
}

/// What job_submit recorded in AdminComment, read once: the job's
/// [`min_runtime`] and whether job_submit marked it part of a sweep
/// ([`fairshare::sweep`]).
fn recorded(engine: &Engine, job: &JobRecord<'_>) -> (u64, bool) {
    let comment = job.admin_comment();
    let min_runtime = engine.config().contract.job_min_runtime(
        comment.and_then(recorded_min_runtime),
        job.partition(),
        time_limit(job),
    );
    (min_runtime, comment.is_some_and(recorded_sweep))
}

/// Allocated GPUs, from the allocated TRES (`tres_fmt_alloc_str`, read
/// with [`fairshare::tres::gpu_count`]); 0 when none or not allocated.
pub fn allocated_gpus(job: &JobRecord<'_>) -> u64 {
    job.tres_alloc_str()
        .and_then(|s| fairshare::tres::gpu_count(s).ok())
        .unwrap_or(0)
}

/// Requested GPUs, from the requested TRES (`tres_req_str`); 0 when none.
pub fn gpus_in_tres_req(job: &JobRecord<'_>) -> u64 {
    job.tres_req_str()
        .and_then(|s| fairshare::tres::gpu_count(s).ok())
        .unwrap_or(0)
}

/// The time limit in seconds, `None` when unlimited or unset.
pub fn time_limit(job: &JobRecord<'_>) -> Option<u64> {
    job.time_limit_minutes().map(|m| u64::from(m) * 60)
}

/// True for debug work ([`fairshare::priority::PriorityWeights::is_debug`]).
pub fn is_debug(engine: &Engine, job: &JobRecord<'_>) -> bool {
    let (min_runtime, sweep) = recorded(engine, job);
    debug_work(engine, job, min_runtime, gpus_in_tres_req(job), sweep)
}

/// [`is_debug`] for a caller that has read the job's [`min_runtime`],
/// [`gpus_in_tres_req`] and sweep mark already.
fn debug_work(
    engine: &Engine,
    job: &JobRecord<'_>,
    min_runtime: u64,
    gpus: u64,
    sweep: bool,
) -> bool {
    engine
        .config()
        .priority
        .is_debug(Tier::of(min_runtime), gpus, time_limit(job), sweep)
}

/// When the job became eligible: `max(submit, begin)`, epoch seconds (a
/// requeued job's begin time is when it may run again).
pub fn eligible_time(job: &JobRecord<'_>) -> u64 {
    job.begin_time().max(job.submit_time()).max(0) as u64
}

/// A pending job for priority: age counts from [`eligible_time`].
pub fn pending<'a>(engine: &Engine, job: &JobRecord<'a>) -> PendingJob<'a> {
    let (min_runtime, sweep) = recorded(engine, job);
    PendingJob {
        id: u64::from(job.job_id()),
        account: job.account().unwrap_or(""),
        min_runtime,
        nice: job.nice(),
        eligible_time: eligible_time(job),
        gpus: gpus_in_tres_req(job),
        time_limit: time_limit(job),
        sweep,
    }
}

/// What the Reason of a job held by [`waits_for_share`] begins with: the
/// priority plugin releases only the holds it made.
pub const SHARE_HOLD: &str = "allot: ";

/// The Reason `squeue` shows for a pending job that has used its requeues
/// (`requeues`: Slurm's `Restarts`) and waits for its team's share
/// ([`fairshare::contract::waits_for_share`]), or `None` when it may start:
/// [`SHARE_HOLD`], the requeues used and the account. `job` is the job as
/// [`pending`] read it, so its contract is parsed once per recalculation.
pub fn waits_for_share(engine: &Engine, job: &PendingJob<'_>, requeues: u32) -> Option<String> {
    engine
        .waits_for_share(job.account, job.min_runtime, requeues)
        .then(|| {
            format!(
                "{SHARE_HOLD}used its {} requeues; starts when account {} holds less than its entitlement",
                engine.config().contract.max_requeues,
                job.account
            )
        })
}

/// Job `job` as the live load reads it ([`fairshare::live_load`]); only
/// running, suspended and pending jobs read their admin comment.
pub fn load_job<'a>(engine: &Engine, job: &JobRecord<'a>) -> LoadJob<'a> {
    let state = match job.state() {
        JobState::Running | JobState::Suspended => LoadState::Running {
            gpus: allocated_gpus(job),
            clock: run_clock(job),
        },
        JobState::Pending => LoadState::Pending {
            gpus: gpus_in_tres_req(job),
            eligible: eligible_time(job),
            schedulable: job.priority() != 0,
        },
        _ => LoadState::Other,
    };
    let (min_runtime, sweep) = match state {
        LoadState::Other => (0, false),
        _ => recorded(engine, job),
    };
    LoadJob {
        id: u64::from(job.job_id()),
        account: job.account().unwrap_or(""),
        min_runtime,
        time_limit: time_limit(job),
        sweep,
        requeues: job.restarts(),
        state,
    }
}

/// The load now and the owed band on it, from slurmctld's job list (taking
/// the job read lock: only from the plugin's own thread). `None` outside
/// slurmctld.
pub fn load_now(engine: &Engine) -> Option<(Entitlements, OwedBands)> {
    let mut c = LoadCounter::default();
    let now = allot_ffi::ctld::time_now();
    allot_ffi::ctld::for_each_job(|j| c.add(engine, &load_job(engine, j), now))
        .then(|| c.finish(engine))
}

/// The running-time clock of a job: `pre_sus_time` accumulated, plus the
/// current stretch since `max(start_time, suspend_time)` while it runs.
pub fn run_clock(job: &JobRecord<'_>) -> RunClock {
    let accumulated = job.pre_suspend_secs().max(0) as u64;
    let running_since = match job.state() {
        JobState::Running => Some(job.start_time().max(job.suspend_time()).max(0) as u64),
        _ => None,
    };
    RunClock {
        accumulated,
        running_since,
    }
}

/// A pending job as a preemptor, read once and owned: charged at the rate
/// of its requested TRES; its requested GPUs (as one node's) are what its
/// leaf would cover by starting ([`Engine::gain`], the net rule of
/// [`fairshare::preempt`]). The preempt
/// plugin reads it once per preemptor and second instead of once per
/// candidate: slurmctld asks about every running job for one pending job
/// in a row (252 candidates in the scale benchmark, where rebuilding the
/// preemptor was 5-6% of slurmctld's samples: docs/benchmarks.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreemptorFacts {
    account: String,
    min_runtime: u64,
    rate: u64,
    gpus: u64,
    debug: bool,
}

impl PreemptorFacts {
    /// Reads `job`: its account, [`min_runtime`], the charge rate of its
    /// requested TRES, [`gpus_in_tres_req`] and whether it is debug work (as
    /// [`is_debug`], from the minimum runtime, GPUs and sweep mark just read).
    pub fn of(engine: &Engine, job: &JobRecord<'_>) -> PreemptorFacts {
        let (min_runtime, sweep) = recorded(engine, job);
        let gpus = gpus_in_tres_req(job);
        PreemptorFacts {
            account: job.account().unwrap_or("").to_string(),
            min_runtime,
            rate: job
                .tres_req_str()
                .map_or(0, |t| engine.config().charge.rate_of_tres(t)),
            gpus,
            debug: debug_work(engine, job, min_runtime, gpus, sweep),
        }
    }

    /// Its requested GPUs ([`gpus_in_tres_req`]).
    pub fn gpus(&self) -> u64 {
        self.gpus
    }

    /// The preemptor.
    pub fn preemptor(&self) -> Preemptor<'_> {
        Preemptor {
            account: &self.account,
            min_runtime: self.min_runtime,
            rate: self.rate,
            nodes: 1,
            gpus_per_node: u32::try_from(self.gpus).unwrap_or(u32::MAX),
            short: self.debug,
        }
    }
}

/// A job as a preemptee (its per-node allocation is not needed for the
/// yes/no verdict, which is all slurmctld asks of a preempt plugin).
/// The contract (AdminComment) is read once.
pub fn running<'a>(engine: &Engine, job: &JobRecord<'a>) -> RunningJob<'a> {
    let (min_runtime, sweep) = recorded(engine, job);
    RunningJob {
        id: u64::from(job.job_id()),
        account: job.account().unwrap_or(""),
        contract: Contract {
            min_runtime,
            clock: run_clock(job),
        },
        alloc: &[],
        requeue: job.requeue(),
        short: debug_work(engine, job, min_runtime, gpus_in_tres_req(job), sweep),
        requeues: job.restarts(),
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::c_char;

    use allot_ffi::sys;

    use super::*;

    #[test]
    fn allocated_gpus_from_the_alloc_tres() {
        let tres = c"cpu=2,mem=1G,node=1,gres/gpu:a100=2,gres/gpu=2".as_ptr() as *mut c_char;
        let running = sys::job_record_t {
            tres_fmt_alloc_str: tres,
            ..Default::default()
        };
        let pending = sys::job_record_t::default();
        // SAFETY: the records and the string they point to outlive the views.
        let (running, pending) = unsafe {
            (
                JobRecord::from_ptr(&running).unwrap(),
                JobRecord::from_ptr(&pending).unwrap(),
            )
        };
        assert_eq!(allocated_gpus(&running), 2);
        assert_eq!(allocated_gpus(&pending), 0);
    }
    #[test]
    fn min_runtime_is_the_record_every_reader_reads() {
        // The plugins fell back to the default for a hand-written
        // `allot:min_runtime=4:00:00`, which sync charged and drain
        // protected as 4 h: one parser now.
        let config = fairshare::Config::from_toml_str(
            "[tree.a1]\nshare = 1\n[contract.partition.debug]\ndefault_min_runtime = \"0\"\n",
        )
        .unwrap();
        let (engine, _) = Engine::from_account_usage(std::sync::Arc::new(config), [], 0);
        let min = |admin_comment: &std::ffi::CStr, partition: &std::ffi::CStr| {
            let rec = sys::job_record_t {
                admin_comment: admin_comment.as_ptr() as *mut c_char,
                partition: partition.as_ptr() as *mut c_char,
                ..Default::default()
            };
            // SAFETY: the record and its strings outlive the view.
            min_runtime(&engine, &unsafe { JobRecord::from_ptr(&rec) }.unwrap())
        };
        assert_eq!(min(c"ticket-9 allot:min_runtime=4:00:00", c"gpu"), 4 * 3600);
        assert_eq!(min(c"allot:min_runtime=356400", c"gpu"), 8 * 3600);
        assert_eq!(min(c"", c"debug,gpu"), 0);
        assert_eq!(min(c"allot:min_runtime=4h", c"gpu"), 3600);
    }

    #[test]
    fn min_runtime_is_at_most_the_time_limit() {
        // Issue 39: a 10-minute job counted (and was protected) as the 1 h
        // default; a record above a limit lowered since counts as the limit.
        let config = fairshare::Config::from_toml_str("[tree.a1]\nshare = 1\n").unwrap();
        let (engine, _) = Engine::from_account_usage(std::sync::Arc::new(config), [], 0);
        let min = |admin_comment: &std::ffi::CStr, time_limit: u32| {
            let rec = sys::job_record_t {
                admin_comment: admin_comment.as_ptr() as *mut c_char,
                partition: c"gpu".as_ptr() as *mut c_char,
                time_limit,
                ..Default::default()
            };
            // SAFETY: the record and its strings outlive the view.
            min_runtime(&engine, &unsafe { JobRecord::from_ptr(&rec) }.unwrap())
        };
        assert_eq!(min(c"", 10), 600);
        assert_eq!(min(c"allot:min_runtime=14400", 30), 1800);
        assert_eq!(min(c"allot:min_runtime=1200", 30), 1200);
        assert_eq!(min(c"allot:min_runtime=0", 30), 0);
        // INFINITE and NO_VAL: no limit known, nothing changes.
        assert_eq!(min(c"", sys::INFINITE), 3600);
        assert_eq!(min(c"allot:min_runtime=14400", sys::NO_VAL), 14_400);
    }

    #[test]
    fn a_preemptor_read_once_is_the_job() {
        let config = fairshare::Config::from_toml_str(
            "[tree.a1]\nshare = 1\n[priority]\nshort_max_gpus = 2\n[charge]\n\"gres/gpu\" = 2.0\ncpu = 0.05\n",
        )
        .unwrap();
        let (engine, _) = Engine::from_account_usage(std::sync::Arc::new(config), [], 0);
        let rec = sys::job_record_t {
            account: c"a1".as_ptr() as *mut c_char,
            admin_comment: c"allot:min_runtime=1800 allot:sweep".as_ptr() as *mut c_char,
            tres_fmt_req_str: c"cpu=1,gres/gpu=2".as_ptr() as *mut c_char,
            time_limit: 30,
            ..Default::default()
        };
        // SAFETY: the record and its strings outlive the view.
        let job = unsafe { JobRecord::from_ptr(&rec) }.unwrap();
        let facts = PreemptorFacts::of(&engine, &job);
        let p = facts.preemptor();
        assert_eq!(
            (p.account, p.min_runtime, p.rate, p.nodes, p.gpus_per_node),
            ("a1", 1800, 4050, 1, 2),
            "2 GPUs x 2 + 1 core x 0.05, in milli-units per second"
        );
        assert!(
            !p.short,
            "2 GPUs for 30 min, marked a sweep: not debug work"
        );
        assert_eq!(facts.gpus(), 2);
    }
}
