//! squeue: what slurmctld says of its jobs now.
//!
//! - `squeue --json` ([`jobs_now`], read by [`read_squeue`] as it streams)
//!   gives every job as a [`LiveJob`]: what `allot explain`, `allot
//!   forecast`, the sync pass (contracts of running jobs) and the sidecar's
//!   pages read. Slurm 22.05 and 24.11 print it differently; both are read.
//! - `squeue -h -w NODE -t R,S -O` [`SQUEUE_FORMAT`] ([`jobs_on`], read by
//!   [`parse_squeue`]) gives the jobs of a draining node as the drain pass
//!   needs them ([`SqueueJob::node_job`]: their contract).

use std::collections::BTreeMap;

use fairshare::contract::{Contract, RunClock};
use fairshare::drain::NodeJob;
use fairshare::record::recorded_min_runtime;
use fairshare::ContractPolicy;
use serde::Serialize;

use super::command::Slurm;
use super::gpus;

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
struct JsonJob {
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
    jobs: Vec<JsonJob>,
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

/// Every job slurmctld has now (`squeue --json`, streamed through
/// [`read_squeue`]), by job id.
///
/// # Errors
/// squeue cannot run, fails, or prints something that is not JSON.
pub fn jobs_now() -> anyhow::Result<BTreeMap<u64, LiveJob>> {
    Slurm::new("squeue")
        .arg("--json")
        .stream(|r| read_squeue(r))?
        .map_err(|e| anyhow::anyhow!("squeue --json printed invalid JSON: {e}"))
}

/// The running and suspended jobs of `node`, each a row or why its line
/// could not be read (for the caller to log).
///
/// # Errors
/// squeue cannot run or fails.
pub fn jobs_on(node: &str) -> anyhow::Result<Vec<Result<SqueueJob, String>>> {
    let text = Slurm::new("squeue")
        .args(["-h", "-w", node, "-t", "R,S", "-O", SQUEUE_FORMAT])
        .epoch_times()
        .output()?;
    Ok(parse_squeue(&text))
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
fn live_of(j: &JsonJob) -> LiveJob {
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
        gpus: gpus::in_tres(&text(&j.tres_req_str)),
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

/// The squeue `-O` format [`parse_squeue`] reads: `|`-separated, the free
/// text AdminComment last.
pub const SQUEUE_FORMAT: &str =
    "JobID:|,StateCompact:|,TimeUsed:|,Partition:|,Requeue:|,TimeLimit:|,admin_comment:";

/// A job line of `squeue -h -w NODE -t R,S -O` [`SQUEUE_FORMAT`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqueueJob {
    /// `JobIDRaw`.
    pub job_id: u64,
    /// `S` (suspended) rather than `R`.
    pub suspended: bool,
    /// Running seconds, suspended time excluded (squeue's `TimeUsed`).
    pub run_time: u64,
    /// Partition.
    pub partition: String,
    /// Slurm's `Requeue` flag (false for `--no-requeue`).
    pub requeue: bool,
    /// Time limit, seconds (squeue's `TimeLimit`); `None` for `UNLIMITED`
    /// or `NOT_SET`.
    pub time_limit: Option<u64>,
    /// The recorded minimum runtime, seconds, when AdminComment has one.
    pub recorded_min_runtime: Option<u64>,
}

/// Parses squeue output in [`SQUEUE_FORMAT`]; unreadable lines are
/// returned as errors naming the line, for the caller to log.
pub fn parse_squeue(text: &str) -> Vec<Result<SqueueJob, String>> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let f: Vec<&str> = line.splitn(7, '|').collect();
            let [id, state, used, part, requeue, limit, comment] = f.as_slice() else {
                return Err(format!(
                    "squeue line {line:?}: expected 7 |-separated fields"
                ));
            };
            let job_id = id
                .trim()
                .parse()
                .map_err(|_| format!("squeue line {line:?}: JobID {id:?} is not a number"))?;
            let run_time = fairshare::duration::parse_slurm_duration(used.trim())
                .map_err(|e| format!("squeue line {line:?}: TimeUsed {used:?}: {e}"))?;
            let time_limit = match limit.trim() {
                "UNLIMITED" | "NOT_SET" | "INVALID" => None,
                l => Some(
                    fairshare::duration::parse_slurm_duration(l)
                        .map_err(|e| format!("squeue line {line:?}: TimeLimit {limit:?}: {e}"))?,
                ),
            };
            let comment = comment.trim();
            Ok(SqueueJob {
                job_id,
                suspended: state.trim() == "S",
                run_time,
                partition: part.trim().to_string(),
                requeue: requeue.trim() != "0",
                time_limit,
                recorded_min_runtime: (comment != "(null)")
                    .then(|| recorded_min_runtime(comment))
                    .flatten(),
            })
        })
        .collect()
}

impl SqueueJob {
    /// The job's contract at `now` (epoch s): its minimum runtime
    /// ([`ContractPolicy::job_min_runtime`] of its record, partition and
    /// time limit);
    /// its clock has run `run_time` seconds and runs on unless suspended.
    pub fn node_job(&self, policy: &ContractPolicy, now: u64) -> NodeJob {
        let min_runtime = policy.job_min_runtime(
            self.recorded_min_runtime,
            Some(&self.partition),
            self.time_limit,
        );
        NodeJob {
            job_id: self.job_id,
            contract: Contract {
                min_runtime,
                clock: RunClock {
                    accumulated: self.run_time,
                    running_since: (!self.suspended).then_some(now),
                },
            },
            requeueable: self.requeue,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairshare::drain::plan;

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
    #[test]
    fn squeue_lines_and_contracts() {
        let text = "101|R|0:07|gpu|1|UNLIMITED|allot:min_runtime=5\n\
                    102|S|1:00:00|debug|0|NOT_SET|ticket-9 allot:min_runtime=7200\n\
                    103|R|2-00:00:00|gpu|1|3-00:00:00|(null)\n\
                    oops\n";
        let rows = parse_squeue(text);
        assert_eq!(rows.len(), 4);
        let a = rows[0].clone().unwrap();
        assert_eq!(
            (
                a.job_id,
                a.suspended,
                a.run_time,
                a.requeue,
                a.recorded_min_runtime
            ),
            (101, false, 7, true, Some(5))
        );
        let b = rows[1].clone().unwrap();
        assert_eq!(
            (b.suspended, b.run_time, b.requeue, b.recorded_min_runtime),
            (true, 3600, false, Some(7200))
        );
        let c = rows[2].clone().unwrap();
        assert_eq!((c.run_time, c.recorded_min_runtime), (172_800, None));
        assert!(rows[3]
            .as_ref()
            .unwrap_err()
            .contains("7 |-separated fields"));

        let policy = ContractPolicy::default();
        let now = 10_000;
        let ja = a.node_job(&policy, now);
        assert_eq!(ja.contract.clock.run_time(now), 7);
        assert_eq!(plan(&[ja], now).requeue, vec![101]);
        let jb = b.node_job(&policy, now);
        assert_eq!(
            plan(&[jb], now).wait,
            vec![(102, None)],
            "suspended: clock stopped"
        );
        let jc = c.node_job(&policy, now);
        assert_eq!(
            jc.contract.min_runtime, 3600,
            "no record: the config's default"
        );
    }

    #[test]
    fn drain_reads_the_contract_as_the_plugins_do() {
        // Drain protected a record above today's cap for all of it, and
        // looked a partition list up whole; now the one resolver: the cap,
        // and the first partition's default.
        let mut policy = ContractPolicy::default();
        policy.partition_default.insert("debug".into(), 0);
        let rows = parse_squeue(
            "201|R|9:00:00|gpu|1|UNLIMITED|allot:min_runtime=356400\n\
             202|R|0:01|debug,gpu|1|UNLIMITED|(null)\n\
             203|R|1:00|gpu|1|UNLIMITED|allot:min_runtime=4:00:00\n",
        );
        let now = 100_000;
        let job = |i: usize| rows[i].clone().unwrap().node_job(&policy, now);
        assert_eq!(job(0).contract.min_runtime, 8 * 3600);
        assert_eq!(plan(&[job(0)], now).requeue, vec![201], "9 h run, 8 h cap");
        assert_eq!(job(1).contract.min_runtime, 0);
        assert_eq!(job(2).contract.min_runtime, 4 * 3600);
    }

    #[test]
    fn drain_caps_the_contract_at_the_time_limit() {
        // Issue 39: a job's minimum runtime is at most its time limit
        // (squeue prints it as it prints TimeUsed).
        let policy = ContractPolicy::default();
        let rows = parse_squeue(
            "301|R|5:00|gpu|1|30:00|allot:min_runtime=14400\n\
             302|R|5:00|gpu|1|10:00|(null)\n\
             303|R|5:00|gpu|1|soon|(null)\n",
        );
        let now = 100_000;
        let job = |i: usize| rows[i].clone().unwrap().node_job(&policy, now);
        assert_eq!(rows[0].as_ref().unwrap().time_limit, Some(1800));
        assert_eq!(job(0).contract.min_runtime, 1800);
        assert_eq!(job(1).contract.min_runtime, 600);
        assert_eq!(plan(&[job(1)], now).wait, vec![(302, Some(now + 300))]);
        assert!(rows[2].as_ref().unwrap_err().contains("TimeLimit \"soon\""));
    }
}
