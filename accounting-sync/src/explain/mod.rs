//! `allot explain JOBID`: why a job has its priority, whether it is
//! protected and until when, what could preempt it, and for a requeued job
//! which job preempted it and by which rule ([`preempted`]). Reuses the engine's
//! [`fairshare::Explanation`] over the ledger's window usage, as the
//! plugins compute it.

use std::collections::BTreeMap;

use allot_ledger::LedgerReader;
use fairshare::duration::SlurmDuration;
use fairshare::record::{recorded_min_runtime, recorded_sweep};
use fairshare::{Config, Contract, ContractPolicy, Engine, Explanation, PendingJob, RunClock};
use serde::Serialize;

pub mod preempted;

use preempted::{requeues, Requeue};

/// What slurmctld says of the job (from `squeue --json`).
/// Times are seconds since the epoch, 0 when Slurm has none.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LiveJob {
    /// Its name (`-J`), as the user gave it.
    pub name: String,
    /// The job's state (`PENDING`, `RUNNING`, ...).
    pub state: String,
    /// Its account.
    pub account: String,
    /// Its user's name.
    pub user: String,
    /// Its partition (or partitions, comma-separated).
    pub partition: String,
    /// Its priority in slurmctld.
    pub priority: u64,
    /// Its nice value.
    pub nice: i64,
    /// Submit time.
    pub submit: u64,
    /// Eligible time.
    pub eligible: u64,
    /// Start time (expected start while pending).
    pub start: u64,
    /// Last suspend or resume time.
    pub suspend_time: u64,
    /// Seconds it ran before its last suspension.
    pub pre_sus_time: u64,
    /// Its AdminComment (where allot records the contract).
    pub admin_comment: String,
    /// How often Slurm requeued it (`restart_cnt`).
    pub restarts: u64,
    /// For a task of a job array: the array's job id and the task's index
    /// (squeue shows it as `ARRAY_TASK`).
    pub array: Option<(u64, u64)>,
    /// GPUs requested (from `tres_req_str`).
    pub gpus: u64,
    /// Time limit, seconds (`None`: unlimited or not given).
    pub time_limit: Option<u64>,
    /// Why it waits, as squeue says (`Priority`, `Resources`,
    /// `JobHeldUser`, `Dependency`, `BeginTime`, ...; `None` otherwise).
    pub reason: String,
    /// For the record of a job array's tasks that have not started yet
    /// (squeue's `4242_[3-9]`), their ids as squeue prints them (`3-9`);
    /// empty for any other job.
    pub array_pending: String,
}

impl LiveJob {
    /// Why a pending job waits for something other than GPUs and its
    /// turn: held, or waiting for a dependency. slurmctld starts neither
    /// when GPUs free up, so a forecast leaves them out; `None` for any
    /// other job. (A job waiting for its begin time, squeue's `BeginTime`,
    /// is not among them: slurmctld gives every requeued job a begin time
    /// a few seconds ahead; its forecast starts no earlier than then,
    /// [`LiveJob::begins`].)
    pub fn waits_for_other_than_turn(&self) -> Option<&'static str> {
        match self.reason.as_str() {
            "JobHeldUser" | "JobHeldAdmin" => {
                Some("it is held: it starts only once released (scontrol release)")
            }
            "Dependency" | "DependencyNeverSatisfied" => Some(
                "it waits for a dependency (squeue -o %E): it starts only once that is satisfied",
            ),
            _ => None,
        }
    }

    /// When a pending job waiting for its begin time (`--begin`, or the
    /// delay slurmctld puts before a requeued job) may start, epoch
    /// seconds: its eligible time, where that is after `now`.
    pub fn begins(&self, now: i64) -> Option<i64> {
        (self.state == "PENDING" && self.eligible as i64 > now).then_some(self.eligible as i64)
    }

    /// The tasks this record stands for: the count of ids in
    /// `array_pending` (`0-5` is 6, `1,3,8-15:2` is 6; a `%N` throttle
    /// is ignored), at least 1.
    pub fn tasks(&self) -> u64 {
        array_task_count(&self.array_pending).max(1)
    }

    /// Its minimum runtime, read as the plugins read it (at most its time
    /// limit).
    pub fn min_runtime(&self, policy: &ContractPolicy) -> u64 {
        policy.job_min_runtime(
            recorded_min_runtime(&self.admin_comment),
            Some(&self.partition),
            self.time_limit,
        )
    }
}

/// The fields of a job in `squeue --json` that allot reads; serde skips
/// the others (dozens per job) without building them.
#[derive(serde::Deserialize)]
struct SqueueJob {
    #[serde(default)]
    job_id: serde_json::Value,
    #[serde(default)]
    name: serde_json::Value,
    #[serde(default)]
    job_state: serde_json::Value,
    #[serde(default)]
    account: serde_json::Value,
    #[serde(default)]
    user_name: serde_json::Value,
    #[serde(default)]
    partition: serde_json::Value,
    #[serde(default)]
    priority: serde_json::Value,
    #[serde(default)]
    nice: serde_json::Value,
    #[serde(default)]
    submit_time: serde_json::Value,
    #[serde(default)]
    eligible_time: serde_json::Value,
    #[serde(default)]
    start_time: serde_json::Value,
    #[serde(default)]
    suspend_time: serde_json::Value,
    #[serde(default)]
    pre_sus_time: serde_json::Value,
    #[serde(default)]
    admin_comment: serde_json::Value,
    #[serde(default)]
    restart_cnt: serde_json::Value,
    #[serde(default)]
    tres_req_str: serde_json::Value,
    #[serde(default)]
    time_limit: serde_json::Value,
    #[serde(default)]
    array_job_id: serde_json::Value,
    #[serde(default)]
    array_task_id: serde_json::Value,
    #[serde(default)]
    array_task_string: serde_json::Value,
    #[serde(default)]
    state_reason: serde_json::Value,
}

#[derive(serde::Deserialize)]
struct SqueueOutput {
    #[serde(default)]
    jobs: Vec<SqueueJob>,
}

/// Every job in `squeue --json` output read from `r` as it streams (the
/// text is never held whole: with 10,000 jobs it is tens of MB), by job
/// id.
///
/// # Errors
/// Not JSON, or `jobs` not a list of objects.
pub fn read_squeue(r: impl std::io::Read) -> serde_json::Result<BTreeMap<u64, LiveJob>> {
    let out: SqueueOutput = serde_json::from_reader(std::io::BufReader::new(r))?;
    Ok(out
        .jobs
        .iter()
        .filter_map(|j| Some((number(&j.job_id)?, live_of(j))))
        .collect())
}

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

/// Every job slurmctld has now (`squeue --json`, streamed through
/// [`read_squeue`]), by job id.
///
/// # Errors
/// squeue cannot run, fails, or prints something that is not JSON.
pub fn squeue_now() -> anyhow::Result<BTreeMap<u64, LiveJob>> {
    let mut child = std::process::Command::new("squeue")
        .arg("--json")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot run squeue: {e}"))?;
    let parsed = read_squeue(child.stdout.take().expect("piped"));
    let out = child.wait_with_output()?;
    if !out.status.success() {
        anyhow::bail!(
            "squeue --json failed: {} (is slurmctld up, and SLURM_CONF its slurm.conf? For the \
             testbed: eval \"$(scripts/testbed env)\")",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    parsed.map_err(|e| anyhow::anyhow!("squeue --json printed invalid JSON: {e}"))
}

/// A number as 22.05 prints it (plain) or 24.11 does
/// (`{"set", "infinite", "number"}`).
fn number(v: &serde_json::Value) -> Option<u64> {
    v.as_u64().or_else(|| v["number"].as_u64())
}

/// A string, or the first of a list (24.11's state: "RUNNING" first,
/// then flags).
fn text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Array(a) => a.first().and_then(|x| x.as_str()).unwrap_or(""),
        v => v.as_str().unwrap_or(""),
    }
    .to_string()
}

/// One job of `squeue --json`. Slurm 22.05 (openapi/v0.0.38) prints
/// plain values; 24.11 (data_parser/v0.0.42) prints the state as a list
/// and numbers as {"set", "infinite", "number"}. Both are read.
fn live_of(j: &SqueueJob) -> LiveJob {
    let n = |v: &serde_json::Value| number(v).unwrap_or(0);
    LiveJob {
        name: text(&j.name),
        state: text(&j.job_state),
        account: text(&j.account),
        user: text(&j.user_name),
        partition: text(&j.partition),
        priority: n(&j.priority),
        nice: j
            .nice
            .as_i64()
            .or_else(|| j.nice["number"].as_i64())
            .unwrap_or(0),
        submit: n(&j.submit_time),
        eligible: n(&j.eligible_time),
        start: n(&j.start_time),
        suspend_time: n(&j.suspend_time),
        pre_sus_time: n(&j.pre_sus_time),
        admin_comment: text(&j.admin_comment),
        restarts: n(&j.restart_cnt),
        array: match (
            number(&j.array_job_id),
            j.array_task_id.as_u64().or_else(|| {
                (j.array_task_id["set"] == true)
                    .then(|| j.array_task_id["number"].as_u64())
                    .flatten()
            }),
        ) {
            (Some(a), Some(t)) if a > 0 => Some((a, t)),
            _ => None,
        },
        gpus: fairshare::tres::gpu_count(&text(&j.tres_req_str)).unwrap_or(0),
        reason: text(&j.state_reason),
        array_pending: text(&j.array_task_string),
        // Minutes; an infinite limit is none.
        time_limit: (j.time_limit["infinite"] != true)
            .then(|| number(&j.time_limit))
            .flatten()
            .filter(|&m| m > 0 && m < u64::from(u32::MAX))
            .map(|m| m * 60),
    }
}

/// How many task ids squeue's `array_task_string` names: comma-separated
/// ids and ranges `a-b` or `a-b:step`, with an optional `%N` throttle at
/// the end (ignored); 0 for an empty or unreadable string.
pub fn array_task_count(s: &str) -> u64 {
    array_ranges(s).map_or(0, |r| {
        r.iter().map(|&(a, b, step)| (b - a) / step + 1).sum()
    })
}

/// True when task `task` is among the tasks of `s` (as
/// [`array_task_count`] reads it).
pub fn array_has_task(s: &str, task: u64) -> bool {
    array_ranges(s).is_some_and(|r| {
        r.iter()
            .any(|&(a, b, step)| (a..=b).contains(&task) && (task - a).is_multiple_of(step))
    })
}

/// The ranges (first, last, step) of an array's task list (`0-5`,
/// `1,3,8-15:2`, `[0-3]%2`); `None` where it is not one.
fn array_ranges(s: &str) -> Option<Vec<(u64, u64, u64)>> {
    let s = s.split('%').next().unwrap_or("").trim();
    let s = s.trim_start_matches('[').trim_end_matches(']');
    let mut out = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        let (range, step) = match part.split_once(':') {
            Some((r, st)) => (r, st.parse::<u64>().unwrap_or(1).max(1)),
            None => (part, 1),
        };
        let (a, b) = match range.split_once('-') {
            Some((a, b)) => (a.parse::<u64>(), b.parse::<u64>()),
            None => (range.parse::<u64>(), range.parse::<u64>()),
        };
        match (a, b) {
            (Ok(a), Ok(b)) if b >= a => out.push((a, b, step)),
            _ => return None,
        }
    }
    Some(out)
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
/// entitlements they give and the owed band of the pending jobs on them
/// ([`fairshare::owed`]), as priority/allot counts them at its rebuild
/// (`jobs::LoadCounter` in the plugins): free-tier jobs count nothing, the
/// capacity is `capacity_gpus` or the GPUs running jobs hold; the GPUs of
/// jobs past their contract with requeues left are room for the team's own
/// debug work. It sets the priority band and what may preempt a running
/// job.
pub fn live_load(
    engine: &Engine,
    jobs: &BTreeMap<u64, LiveJob>,
) -> (fairshare::Entitlements, fairshare::owed::OwedBands) {
    let leaves = engine.tree().leaves().len();
    let (mut running, mut pending) = (vec![0u64; leaves], vec![0u64; leaves]);
    let mut queued = Vec::new();
    let mut tradeable = vec![0u64; leaves];
    let config = engine.config();
    let max = config.contract.max_requeues;
    let now = engine.now();
    let mut held = 0u64;
    for (&id, j) in jobs {
        let is_running = matches!(j.state.as_str(), "RUNNING" | "SUSPENDED");
        if is_running {
            held += j.gpus;
        }
        let Some(leaf) = engine.leaf_of(&j.account) else {
            continue;
        };
        let min_runtime = j.min_runtime(&config.contract);
        if min_runtime == 0 {
            continue;
        }
        let l = leaf.0 as usize;
        let debug = config.priority.is_debug(
            fairshare::Tier::of(min_runtime),
            j.gpus,
            j.time_limit,
            recorded_sweep(&j.admin_comment),
        );
        let restarts = u32::try_from(j.restarts).unwrap_or(u32::MAX);
        if is_running {
            running[l] += j.gpus;
            let clock = RunClock {
                accumulated: j.pre_sus_time,
                running_since: (j.state == "RUNNING").then(|| j.start.max(j.suspend_time)),
            };
            let past = clock.run_time(now) >= min_runtime;
            if past && !fairshare::contract::requeues_used(min_runtime, restarts, max) {
                tradeable[l] += j.gpus;
            }
        } else if j.state == "PENDING" {
            pending[l] += j.gpus;
            let used = fairshare::contract::requeues_used(min_runtime, restarts, max);
            if j.priority != 0 && !used {
                queued.push(fairshare::owed::Queued {
                    id,
                    leaf,
                    gpus: j.gpus,
                    debug,
                    eligible: j.eligible.max(j.submit),
                });
            }
        }
    }
    let capacity = config.capacity_gpus.unwrap_or(held);
    let load = fairshare::Entitlements::compute(engine.tree(), capacity, &running, &pending);
    let owed = engine.owed_bands(&load, &mut queued, &tradeable);
    (load, owed)
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
                e.summary.push_str(
                    "; part of a sweep (allot:sweep): ordered as batch work inside its team, after its debug work",
                );
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
            engine.explain_running(
                &account,
                &contract,
                u32::try_from(l.restarts).unwrap_or(u32::MAX),
                t as u64,
            )
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

/// `t` (epoch s) against `now`: "5:00 ago" or "in 5:00".
pub fn when(t: i64, now: i64) -> String {
    let d = now - t;
    if d >= 0 {
        format!("{} ago", SlurmDuration(d as u64))
    } else {
        format!("in {}", SlurmDuration((-d) as u64))
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
            "  Priority {}{live} = tier {:?} | rank {} | score {} (age {} s -> {} points, nice {})",
            p.priority, p.tier, p.rank, p.score, p.age, p.age_points, p.nice
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn array_task_strings_count_their_tasks() {
        for (s, n) in [
            ("0-5", 6),
            ("7", 1),
            ("1,3,8-15:2", 6),
            ("0-9%2", 10),
            ("[0-3]", 4),
            ("", 0),
            ("5-2", 0),
            ("x", 0),
        ] {
            assert_eq!(array_task_count(s), n, "{s:?}");
        }
    }

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

    #[test]
    fn squeue_is_read_in_both_releases_forms() {
        // 22.05 (openapi/v0.0.38): plain values; 24.11 (v0.0.42): the
        // state a list, numbers {set, infinite, number}.
        let text = r#"{"meta": {"plugin": {"x": 1}}, "jobs": [
            {"job_id": 7, "name": "a <b>", "job_state": "PENDING", "account": "a1", "user_name": "alice",
             "partition": "gpu", "priority": 10, "nice": 0, "submit_time": 100, "eligible_time": 100,
             "start_time": 0, "suspend_time": 0, "pre_sus_time": 0, "admin_comment": "allot:min_runtime=600",
             "restart_cnt": 1, "tres_req_str": "cpu=1,gres/gpu=4", "time_limit": 60, "extra": [1, 2, {"deep": true}]},
            {"job_id": 8, "job_state": ["RUNNING", "COMPLETING"], "account": "b1", "user_name": "bob",
             "priority": {"set": true, "infinite": false, "number": 5}, "time_limit": {"set": true, "infinite": false, "number": 30},
             "tres_req_str": "gres/gpu=2"}
        ]}"#;
        let streamed = read_squeue(text.as_bytes()).unwrap();
        assert_eq!(streamed.keys().copied().collect::<Vec<_>>(), [7, 8]);
        let (a, b) = (&streamed[&7], &streamed[&8]);
        assert_eq!(
            (a.name.as_str(), a.gpus, a.time_limit, a.restarts),
            ("a <b>", 4, Some(3600), 1)
        );
        assert_eq!(
            (b.state.as_str(), b.priority, b.gpus, b.time_limit),
            ("RUNNING", 5, 2, Some(1800))
        );
        assert!(read_squeue("not json".as_bytes()).is_err());
    }

    #[test]
    fn a_live_job_has_the_plugins_minimum_runtime() {
        // explain read a record above today's cap as is (99 h) and did not
        // read a hand-written Slurm time (the default instead): one resolver
        // and one parser now.
        let mut policy = ContractPolicy::default();
        policy.partition_default.insert("debug".into(), 0);
        let job = |admin_comment: &str, partition: &str| LiveJob {
            admin_comment: admin_comment.into(),
            partition: partition.into(),
            ..LiveJob::default()
        };
        assert_eq!(
            job("allot:min_runtime=356400", "gpu").min_runtime(&policy),
            8 * 3600
        );
        assert_eq!(
            job("allot:min_runtime=4:00:00", "gpu").min_runtime(&policy),
            4 * 3600
        );
        assert_eq!(job("", "debug,gpu").min_runtime(&policy), 0);
        assert_eq!(job("ticket-9", "gpu").min_runtime(&policy), 3600);
        // At most its time limit (issue 39).
        let limited = |admin_comment: &str, time_limit| LiveJob {
            time_limit,
            ..job(admin_comment, "gpu")
        };
        assert_eq!(limited("", Some(600)).min_runtime(&policy), 600);
        assert_eq!(
            limited("allot:min_runtime=14400", Some(1800)).min_runtime(&policy),
            1800
        );
        assert_eq!(limited("", None).min_runtime(&policy), 3600);
    }
}
