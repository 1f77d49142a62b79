//! `allot explain JOBID`: why a job has its priority, whether it is
//! protected and until when, what could preempt it, and for a requeued job
//! which job preempted it and by which rule ([`preempted`]). Reuses the engine's
//! [`fairshare::Explanation`] over the ledger's window usage, as the
//! plugins compute it.

use std::collections::BTreeMap;

use allot_ledger::LedgerReader;
use fairshare::duration::SlurmDuration;
use fairshare::live_load::{LoadCounter, LoadJob, LoadState};
use fairshare::record::recorded_sweep;
use fairshare::{Config, Contract, Engine, Explanation, PendingJob, RunClock};
use serde::Serialize;

pub mod preempted;

use crate::slurm::squeue::{array_has_task, LiveJob};
use crate::when::when;
use preempted::{requeues, Requeue};

/// The job id that `job` names: a job id (`4242`), or a task of a job
/// array as squeue shows it (`4242_7`), found among slurmctld's `jobs`.
///
/// # Errors
/// Neither form, or an array task slurmctld no longer has (the message
/// says how to find its job id).
pub fn resolve(job: &str, jobs: &BTreeMap<u64, LiveJob>) -> Result<u64, String> {
    let job = job.trim();
    let id = |s: &str| -> Result<Option<u64>, String> {
        match s.parse::<u64>() {
            Ok(n) if n > u64::from(u32::MAX) => Err(format!(
                "{s} is not a job id: Slurm's job ids go up to {}",
                u32::MAX
            )),
            Ok(n) => Ok(Some(n)),
            Err(_) => Ok(None),
        }
    };
    if let Some(n) = id(job)? {
        return Ok(n);
    }
    let not_an_id = || {
        format!(
            "{job:?} is not a job id: give a number (4242) or an array task as squeue shows it (4242_7, or 4242_[8-15] for its pending tasks)"
        )
    };
    let Some((a, t)) = job.split_once('_') else {
        return Err(not_an_id());
    };
    let Some(array) = id(a)? else {
        return Err(not_an_id());
    };
    // The array's pending tasks as squeue prints them (4242_[8-15]): the
    // array's own record.
    let pending_record = jobs
        .get(&array)
        .filter(|l| l.array.is_none() && !l.array_pending.is_empty());
    if t.starts_with('[') && t.ends_with(']') {
        return match pending_record {
            Some(_) => Ok(array),
            None => Err(format!(
                "{job} is not in slurmctld now: array {array} has no pending tasks (squeue shows their record as {array}_[...])"
            )),
        };
    }
    let Some(task) = id(t)? else {
        return Err(not_an_id());
    };
    if let Some((id, _)) = jobs.iter().find(|(_, l)| l.array == Some((array, task))) {
        return Ok(*id);
    }
    match (pending_record, jobs.get(&array)) {
        // Tasks not started yet share one record, the array's own id.
        (Some(rec), _) if array_has_task(&rec.array_pending, task) => Err(format!(
            "array task {array}_{task} has not started: slurmctld keeps the array's pending tasks as one job, {array}_[{}]; ask for job {array}, which stands for the first of them (tasks start in order)",
            rec.array_pending
        )),
        (Some(rec), _) => Err(format!(
            "array task {array}_{task} is not in slurmctld now, nor among the array's pending tasks {array}_[{}]; if it ran, give its job id (sacct -j {array}_{task} -X -n -o JobIDRaw)",
            rec.array_pending
        )),
        (None, Some(l)) if l.array.is_none() => Err(format!(
            "job {array} is not a job array, so it has no task {task}: ask for job {array}"
        )),
        _ => Err(format!(
            "array task {array}_{task} is not in slurmctld now; give its job id instead (sacct -j {array}_{task} -X -n -o JobIDRaw)"
        )),
    }
}

/// `allot explain JOB --json`, and the sidecar's `/api/v1/jobs/JOB`.
#[derive(Debug, Clone, Serialize)]
pub struct Output {
    /// The job id.
    pub job_id: u64,
    /// What slurmctld says of it; `None` once it left slurmctld.
    pub live: Option<LiveJob>,
    /// The engine's account of it ([`fairshare::Explanation`]).
    pub explanation: Explanation,
    /// Every attempt the ledger has of it, oldest first, and how each
    /// ended.
    pub attempts: Vec<Attempt>,
    /// Its preempted attempts, each with its preemptor and rule.
    pub requeues: Vec<Requeue>,
    /// Who owns it (the user of slurmctld's job, else of its last
    /// attempt in the ledger): what `PrivateData=jobs` checks.
    pub user: String,
    /// For a pending job, its start forecast (times in seconds since the
    /// epoch; [`crate::forecast::forecast_job`], `docs/forecast.md`);
    /// absent for other jobs and where none was asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forecast: Option<allot_sim::forecast::live::LiveForecast>,
    /// Why a pending job has no forecast, where one was asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forecast_error: Option<String>,
    /// The sidecar is still making its forecast: ask again.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub forecast_pending: bool,
}

/// One attempt of the job, as the ledger has it.
#[derive(Debug, Clone, Serialize)]
pub struct Attempt {
    /// 0, 1, ...: its index.
    pub attempt: u32,
    /// When it started (epoch s); `None` if it never did.
    pub start: Option<i64>,
    /// When it ended (epoch s); `None` while it runs or waits.
    pub end: Option<i64>,
    /// How it ended, as sacct says (`COMPLETED`, `PREEMPTED`, `NODE_FAIL`,
    /// ...; `RUNNING` or `PENDING` for the current one).
    pub state: String,
    /// GPUs it held.
    pub gpus: u64,
    /// What it was charged, GPU-seconds (charge units).
    pub charged_gpu_seconds: f64,
}

/// Why `build` has nothing to say.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// Neither slurmctld nor the ledger knows the job.
    #[error("job {0} is neither known to slurmctld (squeue) nor in the ledger; run `allot sync` if it ended")]
    Unknown(u64),
    /// The ledger cannot be read.
    #[error(transparent)]
    Ledger(#[from] allot_ledger::LedgerError),
}

/// The engine over the ledger's charged usage of the window ending at
/// `now` (epoch s), as the plugins build it, with the load of `jobs`
/// (slurmctld's jobs now, [`live_load`]) when given.
///
/// # Errors
/// Ledger errors.
pub fn engine_now(
    config: &std::sync::Arc<Config>,
    reader: &LedgerReader,
    now: i64,
    jobs: Option<&BTreeMap<u64, LiveJob>>,
) -> allot_ledger::Result<Engine> {
    let usage = reader.charged_by_account(now - config.window as i64, now)?;
    let engine = Engine::from_account_usage(
        config.clone(),
        usage.iter().map(|(a, u)| (a.as_str(), *u as f64)),
        now as u64,
    )
    .0;
    Ok(match jobs {
        Some(jobs) => {
            let (load, owed) = live_load(&engine, jobs);
            engine.with_load(load).with_owed(owed)
        }
        None => engine,
    })
}

/// Each leaf's running and pending GPUs of allocated jobs in `jobs`, the
/// entitlements they give and the owed band of the pending jobs on them,
/// counted as priority/allot counts slurmctld's job list at its rebuild
/// ([`fairshare::live_load`], the same counter): it sets the priority band
/// and what may preempt a running job.
pub fn live_load(
    engine: &Engine,
    jobs: &BTreeMap<u64, LiveJob>,
) -> (fairshare::Entitlements, fairshare::owed::OwedBands) {
    let config = engine.config();
    let mut counter = LoadCounter::default();
    for (&id, j) in jobs {
        let state = match j.state.as_str() {
            "RUNNING" | "SUSPENDED" => LoadState::Running {
                gpus: j.gpus,
                clock: RunClock {
                    accumulated: j.pre_sus_time,
                    running_since: (j.state == "RUNNING").then(|| j.start.max(j.suspend_time)),
                },
            },
            "PENDING" => LoadState::Pending {
                gpus: j.gpus,
                eligible: j.eligible.max(j.submit),
                schedulable: j.priority != 0,
            },
            _ => LoadState::Other,
        };
        let job = LoadJob {
            id,
            account: &j.account,
            min_runtime: j.min_runtime(&config.contract),
            time_limit: j.time_limit,
            sweep: recorded_sweep(&j.admin_comment),
            requeues: u32::try_from(j.restarts).unwrap_or(u32::MAX),
            state,
        };
        counter.add(engine, &job, engine.now());
    }
    counter.finish(engine)
}

/// Explains job `job` at `now` (epoch s) from what slurmctld says of it
/// (`live`, `None` when squeue no longer lists it), the `engine` of
/// [`engine_now`] and the ledger's attempts and preemption records.
///
/// # Errors
/// [`ExplainError::Unknown`] when neither knows the job; ledger errors.
pub fn build(
    config: &Config,
    engine: &Engine,
    reader: &LedgerReader,
    job: u64,
    live: Option<LiveJob>,
    now: i64,
) -> Result<Output, ExplainError> {
    let t = now;
    let attempts = reader.attempts_of_job(job)?;
    let (account, min_runtime, user) = match (&live, attempts.last()) {
        (Some(l), _) => (
            l.account.clone(),
            l.min_runtime(&config.contract),
            l.user.clone(),
        ),
        (None, Some(a)) => (
            a.record.account.clone(),
            a.record.min_runtime,
            a.record.user.clone(),
        ),
        (None, None) => return Err(ExplainError::Unknown(job)),
    };
    let explanation = match live.as_ref().map(|l| l.state.as_str()) {
        Some("PENDING") => {
            let l = live.as_ref().expect("live");
            let mut e = engine.explain_pending(&PendingJob {
                id: job,
                account: &account,
                min_runtime,
                nice: l.nice,
                eligible_time: l.eligible.max(l.submit),
                gpus: l.gpus,
                time_limit: l.time_limit,
                sweep: recorded_sweep(&l.admin_comment),
            });
            if recorded_sweep(&l.admin_comment) {
                e.summary.push_str(SWEEP_NOTE);
            }
            let max = config.contract.max_requeues;
            let restarts = u32::try_from(l.restarts).unwrap_or(u32::MAX);
            if fairshare::contract::requeues_used(min_runtime, restarts, max) {
                e.summary.push_str(&format!(
                    "; it has used its {max} requeues, so it will not be preempted again and starts only while account {account} holds less than its entitlement (priority/allot holds it until then)"
                ));
            }
            e
        }
        Some("RUNNING") | Some("SUSPENDED") => {
            let l = live.as_ref().expect("live");
            let running_since = (l.state == "RUNNING").then(|| l.start.max(l.suspend_time));
            let contract = Contract {
                min_runtime,
                clock: RunClock {
                    accumulated: l.pre_sus_time,
                    running_since,
                },
            };
            let mut e = engine.explain_running(
                &account,
                &contract,
                u32::try_from(l.restarts).unwrap_or(u32::MAX),
                t as u64,
            );
            if recorded_sweep(&l.admin_comment) {
                e.summary.push_str(SWEEP_NOTE);
            }
            e
        }
        // Finished (or in another state): only its account's standing now.
        _ => {
            let mut e = engine.explain_pending(&PendingJob {
                id: job,
                account: &account,
                min_runtime,
                nice: 0,
                eligible_time: t as u64,
                gpus: 0,
                time_limit: None,
                sweep: false,
            });
            e.priority = None;
            e.summary = format!(
                "finished; its account {account} ranks {} of {} now",
                e.rank, e.leaves
            );
            e
        }
    };
    Ok(Output {
        job_id: job,
        requeues: requeues(reader, &attempts)?,
        attempts: attempts
            .iter()
            .map(|a| Attempt {
                attempt: a.attempt,
                start: a.record.start,
                end: a.record.end,
                state: a.record.state.clone(),
                gpus: a.record.gpus,
                charged_gpu_seconds: fairshare::charge::units(a.record.charged),
            })
            .collect(),
        live,
        explanation,
        user,
        forecast: None,
        forecast_error: None,
        forecast_pending: false,
    })
}

impl Output {
    /// Whether slurmctld has the job pending (what a forecast is for).
    pub fn is_pending(&self) -> bool {
        self.live.as_ref().is_some_and(|l| l.state == "PENDING")
    }
}

/// The text of `allot explain` for `o` at `now` (epoch s).
pub fn render(o: &Output, now: i64) -> String {
    use std::fmt::Write as _;
    let e = &o.explanation;
    let mut s = String::new();
    let state = o
        .live
        .as_ref()
        .map_or("not in slurmctld (finished)", |l| l.state.as_str());
    let _ = writeln!(
        s,
        "Job {} ({state}), account {}: {}",
        o.job_id, e.account, e.summary
    );
    match &e.leaf {
        Some(leaf) => {
            let _ = writeln!(
                s,
                "  Leaf {leaf}: rank {} of {} -> fair-share factor {:.4}",
                e.rank, e.leaves, e.fair_share
            );
        }
        None => {
            let _ = writeln!(
                s,
                "  Account {} is not in allot.toml: it ranks below every account in the tree.",
                e.account
            );
        }
    }
    let _ = writeln!(s, "  Tier: {:?}", e.tier);
    for l in &e.levels {
        let _ = writeln!(
            s,
            "    {:<28} share {:>5} ({:>6.2}% of siblings)  usage {:>12.0} GPU-s ({:>6.2}% of parent)  Level FS {:>12}  place {}/{}",
            l.node,
            l.share,
            100.0 * l.norm_share,
            l.usage,
            100.0 * l.effective_usage,
            l.level_fs.to_string(),
            l.place,
            l.siblings
        );
    }
    if let Some(p) = &e.priority {
        let live = o.live.as_ref().map_or(String::new(), |l| {
            format!(" (slurmctld has {})", l.priority)
        });
        let _ = writeln!(
            s,
            "  Priority {}{live} = tier {:?}, band {} | rank {} | score {} (age {} s -> {} points, nice {})",
            p.priority,
            p.tier,
            band_words(p.band),
            p.rank,
            p.score,
            p.age,
            p.age_points,
            p.nice
        );
    }
    if o.is_pending() {
        match (&o.forecast, &o.forecast_error) {
            (Some(f), _) => {
                let _ = writeln!(
                    s,
                    "  Forecast start: {} (allot forecast {} says what it assumes)",
                    crate::forecast::times(f, now),
                    o.job_id
                );
            }
            (None, Some(why)) if o.forecast_pending => {
                let _ = writeln!(s, "  Forecast start: {why}");
            }
            (None, Some(why)) => {
                let _ = writeln!(s, "  Forecast start: none ({why})");
            }
            (None, None) => {
                let _ = writeln!(
                    s,
                    "  When it may start: allot forecast {} (p10 / p50 / p90, docs/forecast.md)",
                    o.job_id
                );
            }
        }
    }
    if let Some(p) = &e.protection {
        let until = p.until.map_or("while suspended, never".to_string(), |u| {
            when(u as i64, now)
        });
        let _ = writeln!(
            s,
            "  Contract: minimum runtime {}, ran {}, protection left {} (ends {until})",
            SlurmDuration(p.min_runtime),
            SlurmDuration(p.run_time),
            SlurmDuration(p.left)
        );
    }
    if let Some(p) = &e.preemptible {
        if p.by_any_allocated_job {
            let _ = writeln!(
                s,
                "  Free tier: any allocated job, of any account, may preempt it at any time."
            );
        } else if p.leaf_surplus.is_none() {
            let _ = writeln!(
                s,
                "  May be preempted by allocated jobs of leaves below their entitlement, while its own leaf holds more than its entitlement."
            );
        } else if p.by_leaves_below_entitlement.is_empty() || p.leaf_surplus == Some(0) {
            let _ = writeln!(
                s,
                "  No other leaf is below its entitlement while this one is above its own: nothing would preempt it now."
            );
        } else {
            let _ = writeln!(
                s,
                "  May be preempted (its leaf holds {} GPU(s) above its entitlement) by allocated jobs of: {}",
                p.leaf_surplus.map_or("?".to_string(), |x| x.to_string()),
                p.by_leaves_below_entitlement.join(", ")
            );
        }
    }
    for r in &o.requeues {
        let _ = writeln!(s, "{}", preempted::render(r, |t| when(t, now)));
    }
    s
}

/// What `allot explain` adds for a job job_submit marked part of a sweep
/// ([`fairshare::sweep`]).
const SWEEP_NOTE: &str =
    "; part of a sweep (allot:sweep): ordered as batch work inside its team, after its debug work";

/// The owed band ([`fairshare::owed`]) in words, for `allot explain`.
fn band_words(b: fairshare::priority::Band) -> &'static str {
    use fairshare::priority::Band;
    match b {
        Band::Owed => "owed (its team is owed these GPUs now)",
        Band::Crossing => "crossing (it takes the rest of what its team is owed)",
        Band::Allocated => "allocated (beyond what its team is owed now)",
        Band::Free => "free tier",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_inside_the_pending_record_is_named() {
        let rec = LiveJob {
            state: "PENDING".into(),
            array_pending: "0-5".into(),
            ..LiveJob::default()
        };
        let jobs = BTreeMap::from([(28, rec)]);
        let e = resolve("28_5", &jobs).unwrap_err();
        assert!(
            e.contains("28_[0-5]") && e.contains("ask for job 28"),
            "{e}"
        );
        assert_eq!(resolve("28", &jobs), Ok(28));
        // As squeue prints the pending record.
        assert_eq!(resolve("28_[0-5]", &jobs), Ok(28));
        // A task the array does not have pending, a job that is no array,
        // an id above Slurm's.
        let e = resolve("28_9", &jobs).unwrap_err();
        assert!(
            e.contains("nor among the array's pending tasks 28_[0-5]"),
            "{e}"
        );
        let jobs = BTreeMap::from([(18, LiveJob::default())]);
        let e = resolve("18_3", &jobs).unwrap_err();
        assert!(e.contains("job 18 is not a job array"), "{e}");
        let e = resolve("4294967296", &jobs).unwrap_err();
        assert!(e.contains("up to 4294967295"), "{e}");
        assert!(array_has_task("1,3,8-15:2", 10) && !array_has_task("1,3,8-15:2", 9));
    }
}
