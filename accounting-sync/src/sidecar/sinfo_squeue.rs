//! Contract-aware draining, as Slurm shows it: the sinfo and squeue text the
//! sidecar reads. The rule (which jobs to requeue now, when to look again)
//! is the engine's [`fairshare::drain`] (docs/health.md).
//!
//! The parsers here are pure: the Slurm commands that feed them and act on
//! them live in [`super::drain_pass`].

use fairshare::contract::{Contract, RunClock};
use fairshare::drain::{NodeJob, Plan};
use fairshare::record::recorded_min_runtime;
use fairshare::ContractPolicy;

/// A node Slurm reports as draining or drained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainingNode {
    /// Node name.
    pub node: String,
    /// True once no job is left (`drained`); false while `draining`.
    pub drained: bool,
    /// When the drain reason was set (epoch s): the start of the episode.
    pub since: Option<i64>,
    /// The drain reason (`maintenance`, `allot: gpu3 Xid 79 ...`).
    pub reason: String,
}

/// When a draining node will be empty, from its [`Plan`] at `now` (epoch
/// s): the instant its last protected job's minimum runtime ends (`now`
/// when no job is protected: every job is being requeued). `None` when that
/// is unknown: a `--no-requeue` job left to finish (it runs until it ends),
/// or a protected job suspended (its clock is stopped).
pub fn empty_by(plan: &Plan, now: u64) -> Option<u64> {
    if !plan.keep.is_empty() {
        return None;
    }
    plan.wait
        .iter()
        .try_fold(now, |latest, (_, until)| until.map(|t| latest.max(t)))
}

/// The sinfo format [`parse_sinfo`] reads (run with `SLURM_TIME_FORMAT=%s`).
pub const SINFO_FORMAT: &str = "%N|%T|%H|%E";

/// Draining and drained nodes in `sinfo -h -N -o "%N|%T|%H|%E"` output
/// (`SLURM_TIME_FORMAT=%s`), once per node even when it is in several
/// partitions. States are sinfo's long names; a trailing flag character
/// (`*` not responding, `~` powered off, ...) is ignored.
pub fn parse_sinfo(text: &str) -> Vec<DrainingNode> {
    let mut out: Vec<DrainingNode> = Vec::new();
    for line in text.lines() {
        let mut f = line.splitn(4, '|');
        let (Some(node), Some(state), Some(time), reason) =
            (f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        let state = state
            .trim()
            .trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
        let drained = match state {
            "draining" => false,
            "drained" => true,
            _ => continue,
        };
        let node = node.trim().to_string();
        if out.iter().any(|n| n.node == node) {
            continue;
        }
        out.push(DrainingNode {
            node,
            drained,
            since: time.trim().parse().ok(),
            reason: reason.unwrap_or("").trim().to_string(),
        });
    }
    out
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
    fn empty_by_is_the_last_contract_end() {
        let now = 1000;
        let p = Plan {
            requeue: vec![1],
            wait: vec![(2, Some(1500)), (3, Some(4000))],
            next_look: Some(1500),
            ..Default::default()
        };
        assert_eq!(empty_by(&p, now), Some(4000));
        let p = Plan {
            requeue: vec![1],
            ..Default::default()
        };
        assert_eq!(empty_by(&p, now), Some(now), "requeued now");
        let p = Plan {
            wait: vec![(2, Some(1500)), (3, None)],
            ..Default::default()
        };
        assert_eq!(empty_by(&p, now), None, "suspended: clock stopped");
        let p = Plan {
            keep: vec![4],
            wait: vec![(2, Some(1500))],
            ..Default::default()
        };
        assert_eq!(empty_by(&p, now), None, "--no-requeue: runs to its end");
    }

    #[test]
    fn sinfo_lines() {
        let text = "n1|draining|1717236000|maintenance\nn1|draining|1717236000|maintenance\n\
                    n2|drained*|1717230000|allot: gpu3 Xid 79 serial=1|x\nn3|mixed|Unknown|none\nn4|idle|0|\n";
        let got = parse_sinfo(text);
        assert_eq!(
            got,
            vec![
                DrainingNode {
                    node: "n1".into(),
                    drained: false,
                    since: Some(1717236000),
                    reason: "maintenance".into()
                },
                DrainingNode {
                    node: "n2".into(),
                    drained: true,
                    since: Some(1717230000),
                    reason: "allot: gpu3 Xid 79 serial=1|x".into()
                },
            ]
        );
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
