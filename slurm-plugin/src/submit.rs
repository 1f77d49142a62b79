//! job_submit/allot's decisions, as pure functions over plain values (the
//! cdylib converts Slurm's structs and calls these).
//!
//! - The account must be a leaf account of the allot tree; a job without
//!   `--account` uses the user's default account, and a user without one is
//!   told what to write.
//! - The minimum runtime comes from `--min-runtime` (SPANK), else a
//!   `min_runtime=<time>` token in `--comment`, else the partition default,
//!   else the global default; unparsable, above the cap or above the time
//!   limit the job gives (`--time`) is refused, naming both values; a
//!   default is capped at that time limit
//!   ([`fairshare::ContractPolicy::min_runtime`]).
//! - The contract is recorded in AdminComment (`allot:min_runtime=<s>`),
//!   which only operators can change and which survives restarts.
//! - A job of the short band is counted against its account's sweep limit
//!   ([`fairshare::sweep`]); one that passes it is marked `allot:sweep` in
//!   AdminComment. Its GPUs are what it asks for at submission, in any
//!   form (per job, node, task or socket: [`gpus_at_submission`]), its time limit
//!   the one it gives (a job without one is not counted: the partition's
//!   default is applied later). The counts live in slurmctld's memory: a
//!   restart starts them again from zero.
//! - On modification, the minimum runtime may change only while the job is
//!   pending, within the cap and the job's time limit; an operator's AdminComment edit keeps the recorded contract
//!   and the sweep mark.

use fairshare::contract::ContractError;
use fairshare::record::{comment_min_runtime, recorded_min_runtime, recorded_sweep, with_record};
use fairshare::sweep::SweepCounter;
use fairshare::{Config, Tier};

mod gpus;

pub use gpus::{gpus_at_submission, GpuRequest};

/// At most this many account names are listed in a message.
const LIST_MAX: usize = 12;

/// What job_submit sees of a new job.
#[derive(Debug, Default, Clone)]
pub struct Submission<'a> {
    /// `--account`, if given.
    pub account: Option<&'a str>,
    /// The user's default account (slurmctld's association manager).
    pub default_account: Option<&'a str>,
    /// `--partition`, if given (first of a list is used for the default).
    pub partition: Option<&'a str>,
    /// `--min-runtime` value from the SPANK job-control environment.
    pub spank_min_runtime: Option<&'a str>,
    /// `--comment`.
    pub comment: Option<&'a str>,
    /// AdminComment in the request (operators only).
    pub admin_comment: Option<&'a str>,
    /// GPUs it asks for in all ([`gpus_at_submission`]).
    pub gpus: u64,
    /// `--time`, seconds (`None`: not given, or unlimited).
    pub time_limit: Option<u64>,
    /// Jobs it makes: 1, or an array's tasks ([`array_tasks`]).
    pub tasks: u64,
}

/// Tasks of an `--array` index expression (`0-599%10`, `1,3,5-11:2`); 1 for
/// no expression or one that does not parse (slurmctld refuses those).
pub fn array_tasks(array_inx: Option<&str>) -> u64 {
    let Some(expr) = array_inx else {
        return 1;
    };
    let expr = expr.split('%').next().unwrap_or("");
    let count = |item: &str| -> Option<u64> {
        let (range, step) = match item.split_once(':') {
            Some((r, s)) => (r, s.parse::<u64>().ok().filter(|&s| s > 0)?),
            None => (item, 1),
        };
        match range.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u64, u64) = (a.parse().ok()?, b.parse().ok()?);
                (b >= a).then(|| (b - a) / step + 1)
            }
            None => range.parse::<u64>().ok().map(|_| 1),
        }
    };
    expr.split(',')
        .map(count)
        .sum::<Option<u64>>()
        .filter(|&n| n > 0)
        .unwrap_or(1)
}

/// Why a submission is refused: the message sbatch prints, and which Slurm
/// error it maps to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No or unknown account (maps to ESLURM_INVALID_ACCOUNT).
    Account(String),
    /// Bad minimum runtime (maps to ESLURM_INVALID_TIME_LIMIT).
    MinRuntime(String),
}

impl Refusal {
    /// The text the user sees.
    pub fn message(&self) -> &str {
        match self {
            Refusal::Account(m) | Refusal::MinRuntime(m) => m,
        }
    }
}

fn account_list(config: &Config) -> String {
    let mut names: Vec<&str> = config.tree.accounts().map(|(a, _)| a).collect();
    names.sort_unstable();
    let more = names.len().saturating_sub(LIST_MAX);
    let mut s = names
        .into_iter()
        .take(LIST_MAX)
        .collect::<Vec<_>>()
        .join(", ");
    if more > 0 {
        s.push_str(&format!(" and {more} more"));
    }
    s
}

/// The declared minimum runtime text of a submission.
fn declared<'a>(spank: Option<&'a str>, comment: Option<&'a str>) -> Option<&'a str> {
    spank.or_else(|| comment.and_then(comment_min_runtime))
}

/// Validates a submission made at `now` (epoch seconds), counting it
/// against its account's sweep limit in `sweeps`; on success returns the
/// job's account, its minimum runtime and the AdminComment to set (with the
/// recorded contract and, for a job of a sweep, `allot:sweep`).
pub fn decide_submit(
    config: &Config,
    s: &Submission<'_>,
    sweeps: &mut SweepCounter<String>,
    now: u64,
) -> Result<(String, u64, String), Refusal> {
    let account = match s.account.or(s.default_account) {
        Some(a) => a,
        None => {
            return Err(Refusal::Account(format!(
                "allot: this job has no account and you have no default account; submit with --account=<name>, one of: {}",
                account_list(config)
            )))
        }
    };
    if config.tree.leaf_of_account(account).is_none() {
        return Err(Refusal::Account(format!(
            "allot: account {account:?} is not in the allot tree, so it has no budget; submit with --account=<name>, one of: {} (or ask your admin to add it to allot.toml)",
            account_list(config)
        )));
    }
    let min_runtime = config
        .contract
        .min_runtime(
            declared(s.spank_min_runtime, s.comment),
            s.partition,
            s.time_limit,
        )
        .map_err(|e| {
            Refusal::MinRuntime(match e {
                ContractError::Unparsable(_) => format!(
                    "allot: {e}; write e.g. --min-runtime=4:00:00 (or --comment=min_runtime=4:00:00), or --min-runtime=0 for the free preemptible tier"
                ),
                ContractError::AboveCap { .. } | ContractError::AboveTimeLimit { .. } => {
                    format!("allot: {e}")
                }
            })
        })?;
    let short = config
        .priority
        .is_short(Tier::of(min_runtime), s.gpus, s.time_limit);
    let sweep = short && sweeps.submit(account.to_string(), now, s.tasks.max(1));
    Ok((
        account.to_string(),
        min_runtime,
        with_record(s.admin_comment, min_runtime, sweep),
    ))
}

/// What job_modify sees of a change request and the job it targets.
#[derive(Debug, Default, Clone)]
pub struct Modification<'a> {
    /// New `--comment`, if the request changes it.
    pub comment: Option<&'a str>,
    /// New AdminComment, if an operator's request changes it.
    pub admin_comment: Option<&'a str>,
    /// The job's current AdminComment (holds the recorded contract).
    pub current_admin_comment: Option<&'a str>,
    /// The job's partition.
    pub partition: Option<&'a str>,
    /// The job's time limit, seconds: the request's new one if it sets
    /// one, else the job's (`None`: unlimited).
    pub time_limit: Option<u64>,
    /// Whether the job is still pending.
    pub pending: bool,
}

/// Outcome of a modification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModifyDecision {
    /// Nothing of allot's changes.
    Unchanged,
    /// The user changed the minimum runtime of a pending job: write this
    /// AdminComment on the job record itself (a non-operator's request may
    /// not carry an AdminComment in 22.05).
    SetJobAdminComment(String),
    /// An operator rewrote AdminComment: put this (their text plus the
    /// recorded contract) in the request instead.
    SetAdminComment(String),
    /// Refuse: the minimum runtime of a job that has started cannot change.
    NotPending(String),
    /// Refuse: the new minimum runtime is invalid.
    Invalid(String),
}

/// Decides a job modification.
pub fn decide_modify(config: &Config, m: &Modification<'_>) -> ModifyDecision {
    let recorded = m.current_admin_comment.and_then(recorded_min_runtime);
    let sweep = m.current_admin_comment.is_some_and(recorded_sweep);
    if let Some(text) = m.comment.and_then(comment_min_runtime) {
        if !m.pending {
            return ModifyDecision::NotPending(
                "allot: the minimum runtime of a job that has started cannot change".to_string(),
            );
        }
        let base = m.admin_comment.or(m.current_admin_comment);
        return match config
            .contract
            .min_runtime(Some(text), m.partition, m.time_limit)
        {
            Ok(secs) if m.admin_comment.is_some() => {
                ModifyDecision::SetAdminComment(with_record(base, secs, sweep))
            }
            Ok(secs) => ModifyDecision::SetJobAdminComment(with_record(base, secs, sweep)),
            Err(e) => ModifyDecision::Invalid(format!("allot: {e}")),
        };
    }
    // An operator rewriting AdminComment must not erase the contract or
    // the sweep mark.
    match (m.admin_comment, recorded) {
        (Some(new), Some(secs))
            if recorded_min_runtime(new) != Some(secs) || recorded_sweep(new) != sweep =>
        {
            ModifyDecision::SetAdminComment(with_record(Some(new), secs, sweep))
        }
        _ => ModifyDecision::Unchanged,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One submission with a counter of its own, at time 0.
    fn submit(c: &Config, s: &Submission<'_>) -> Result<(String, u64, String), Refusal> {
        decide_submit(c, s, &mut SweepCounter::of(&c.priority), 0)
    }

    fn config() -> Config {
        Config::from_toml_str(
            r#"
            [contract]
            default_min_runtime = "1:00:00"
            max_min_runtime = "8:00:00"
            [contract.partition.debug]
            default_min_runtime = "0"
            [tree.nlp]
            share = 60
            [tree.nlp.a1]
            share = 35
            [tree.nlp.a2]
            share = 25
            [tree.vision]
            share = 40
            "#,
        )
        .unwrap()
    }

    #[test]
    fn records_the_declared_contract() {
        let c = config();
        let s = Submission {
            account: Some("a1"),
            spank_min_runtime: Some("4:00:00"),
            ..Default::default()
        };
        assert_eq!(
            submit(&c, &s).unwrap(),
            ("a1".into(), 14_400, "allot:min_runtime=14400".into())
        );
        let s = Submission {
            account: Some("a2"),
            comment: Some("run 3 min_runtime=30"),
            ..Default::default()
        };
        assert_eq!(submit(&c, &s).unwrap().1, 1800);
    }

    #[test]
    fn defaults_by_partition_then_global() {
        let c = config();
        let s = Submission {
            account: Some("a1"),
            partition: Some("debug"),
            ..Default::default()
        };
        assert_eq!(submit(&c, &s).unwrap().1, 0);
        let s = Submission {
            account: Some("a1"),
            partition: Some("gpu,debug"),
            ..Default::default()
        };
        assert_eq!(submit(&c, &s).unwrap().1, 3600);
        let s = Submission {
            default_account: Some("vision"),
            ..Default::default()
        };
        assert_eq!(submit(&c, &s).unwrap().0, "vision");
    }

    #[test]
    fn refusals_say_what_to_write() {
        let c = config();
        let e = submit(
            &c,
            &Submission {
                account: Some("a1"),
                spank_min_runtime: Some("9:00:00"),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(matches!(e, Refusal::MinRuntime(_)));
        assert!(
            e.message()
                .contains("above the cluster's cap of 08:00:00; ask for at most 08:00:00"),
            "{e:?}"
        );
        let e = submit(
            &c,
            &Submission {
                account: Some("a1"),
                comment: Some("min_runtime=4h"),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(
            e.message().contains("\"4h\"") && e.message().contains("--min-runtime=4:00:00"),
            "{e:?}"
        );
        let e = submit(
            &c,
            &Submission {
                account: Some("physics"),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(matches!(e, Refusal::Account(_)));
        assert!(
            e.message().contains("\"physics\"") && e.message().contains("a1, a2, vision"),
            "{e:?}"
        );
        let e = submit(&c, &Submission::default()).unwrap_err();
        assert!(
            e.message().contains("no account") && e.message().contains("--account="),
            "{e:?}"
        );
    }

    #[test]
    fn array_tasks_as_the_clients_send_them() {
        assert_eq!(array_tasks(None), 1);
        assert_eq!(array_tasks(Some("0-599%10")), 600);
        assert_eq!(array_tasks(Some("1,3,5-11:2")), 6);
        assert_eq!(array_tasks(Some("7")), 1);
        assert_eq!(array_tasks(Some("5-1")), 1);
        assert_eq!(array_tasks(Some("a-b")), 1);
    }

    #[test]
    fn short_jobs_past_the_sweep_limit_are_marked_and_keep_it() {
        let c = Config::from_toml_str(
            "[priority]\nshort_max_gpus = 2\nsweep_jobs = 2\nsweep_window = \"15:00\"\n[tree.a1]\nshare = 1\n[tree.a2]\nshare = 1\n",
        )
        .unwrap();
        let mut sweeps = SweepCounter::of(&c.priority);
        let job = |account, gpus, time: u64, tasks| Submission {
            account: Some(account),
            gpus,
            time_limit: Some(time),
            tasks,
            ..Default::default()
        };
        let mut marked = |s: &Submission<'_>, now| {
            recorded_sweep(&decide_submit(&c, s, &mut sweeps, now).unwrap().2)
        };
        // Not short (3 GPUs, or 2 h): never counted, never marked.
        assert!(!marked(&job("a1", 3, 600, 1), 0));
        assert!(!marked(&job("a1", 1, 7200, 50), 0));
        assert!(!marked(&job("a1", 1, 600, 1), 1));
        assert!(!marked(&job("a1", 2, 600, 1), 2));
        assert!(
            marked(&job("a1", 1, 600, 1), 3),
            "the third short job in 15 min"
        );
        assert!(!marked(&job("a2", 1, 600, 1), 3), "another account's count");
        assert!(marked(&job("a2", 1, 600, 2), 4), "an array of 2 after 1");
        assert!(
            !marked(&job("a1", 1, 600, 1), 3 + 900),
            "the window has passed"
        );
        // The mark survives a new contract and an operator's rewrite.
        let current = "allot:min_runtime=3600 allot:sweep";
        let m = Modification {
            comment: Some("min_runtime=2:00"),
            current_admin_comment: Some(current),
            pending: true,
            ..Default::default()
        };
        assert_eq!(
            decide_modify(&c, &m),
            ModifyDecision::SetJobAdminComment("allot:min_runtime=120 allot:sweep".into())
        );
        let m = Modification {
            admin_comment: Some("ticket-7"),
            current_admin_comment: Some(current),
            ..Default::default()
        };
        assert_eq!(
            decide_modify(&c, &m),
            ModifyDecision::SetAdminComment("ticket-7 allot:min_runtime=3600 allot:sweep".into())
        );
    }

    #[test]
    fn a_job_asking_gpus_per_task_is_neither_short_nor_a_sweep() {
        // Issue 39: `-n 8 --gpus-per-task=1 --time=30:00` counted 0 GPUs,
        // was taken for debug work and marked a sweep past the limit.
        let c = Config::from_toml_str(
            "[priority]\nshort_max_gpus = 2\nsweep_jobs = 1\nsweep_window = \"15:00\"\n[tree.a1]\nshare = 1\n",
        )
        .unwrap();
        let mut sweeps = SweepCounter::of(&c.priority);
        let per_task = GpuRequest {
            per_task: Some("gres:gpu:1"),
            tasks: Some(8),
            ..Default::default()
        };
        let s = Submission {
            account: Some("a1"),
            gpus: gpus_at_submission(&per_task),
            time_limit: Some(1800),
            tasks: 1,
            ..Default::default()
        };
        assert_eq!(s.gpus, 8);
        assert!(!c.priority.is_short(Tier::Allocated, s.gpus, s.time_limit));
        for now in 0..3 {
            let comment = decide_submit(&c, &s, &mut sweeps, now).unwrap().2;
            assert_eq!(comment, "allot:min_runtime=1800", "second {now}");
        }
        // One GPU per task for one task is short, and the second is a sweep.
        let one = Submission {
            gpus: gpus_at_submission(&GpuRequest {
                tasks: Some(1),
                ..per_task
            }),
            ..s
        };
        assert_eq!(one.gpus, 1);
        assert!(!recorded_sweep(
            &decide_submit(&c, &one, &mut sweeps, 10).unwrap().2
        ));
        assert!(recorded_sweep(
            &decide_submit(&c, &one, &mut sweeps, 11).unwrap().2
        ));
    }

    #[test]
    fn min_runtime_above_the_time_limit_is_refused_and_the_default_capped() {
        // Issue 39: `--time=30:00 --min-runtime=4:00:00` was accepted (and
        // charged 4 h); `--time=10:00` recorded the 1 h default.
        let c = config();
        let job = |min: Option<&'static str>, time| Submission {
            account: Some("a1"),
            spank_min_runtime: min,
            time_limit: time,
            ..Default::default()
        };
        let e = submit(&c, &job(Some("4:00:00"), Some(1800))).unwrap_err();
        assert!(matches!(e, Refusal::MinRuntime(_)));
        assert!(
            e.message().starts_with(
                "allot: minimum runtime 04:00:00 is above the job's time limit of 00:30:00"
            ) && e.message().contains("--min-runtime=00:30:00"),
            "{e:?}"
        );
        let e = submit(
            &c,
            &Submission {
                comment: Some("min_runtime=1:00:01"),
                ..job(None, Some(3600))
            },
        )
        .unwrap_err();
        assert!(
            e.message()
                .contains("01:00:01 is above the job's time limit of 01:00:00"),
            "{e:?}"
        );
        let (_, secs, comment) = submit(&c, &job(Some("30:00"), Some(1800))).unwrap();
        assert_eq!((secs, comment.as_str()), (1800, "allot:min_runtime=1800"));
        let (_, secs, comment) = submit(&c, &job(None, Some(600))).unwrap();
        assert_eq!((secs, comment.as_str()), (600, "allot:min_runtime=600"));
        // No --time (the partition's limit applies later): unchanged.
        assert_eq!(submit(&c, &job(Some("4:00:00"), None)).unwrap().1, 14_400);
        assert_eq!(submit(&c, &job(None, None)).unwrap().1, 3600);
        // On modification too, against the job's limit.
        let m = Modification {
            comment: Some("min_runtime=2:00:00"),
            current_admin_comment: Some("allot:min_runtime=1800"),
            time_limit: Some(3600),
            pending: true,
            ..Default::default()
        };
        match decide_modify(&c, &m) {
            ModifyDecision::Invalid(msg) => assert!(
                msg.contains("02:00:00 is above the job's time limit of 01:00:00"),
                "{msg}"
            ),
            d => panic!("{d:?}"),
        }
        let m = Modification {
            comment: Some("min_runtime=1:00:00"),
            ..m
        };
        assert_eq!(
            decide_modify(&c, &m),
            ModifyDecision::SetJobAdminComment("allot:min_runtime=3600".into())
        );
    }

    #[test]
    fn spank_value_wins_over_comment() {
        let c = config();
        let s = Submission {
            account: Some("a1"),
            spank_min_runtime: Some("0"),
            comment: Some("min_runtime=2:00:00"),
            ..Default::default()
        };
        assert_eq!(submit(&c, &s).unwrap().1, 0);
    }

    #[test]
    fn modify_only_while_pending() {
        let c = config();
        let cur = Some("allot:min_runtime=3600");
        let m = Modification {
            comment: Some("min_runtime=2:00:00"),
            current_admin_comment: cur,
            pending: true,
            ..Default::default()
        };
        assert_eq!(
            decide_modify(&c, &m),
            ModifyDecision::SetJobAdminComment("allot:min_runtime=7200".into())
        );
        let m = Modification {
            pending: false,
            ..m
        };
        assert!(matches!(
            decide_modify(&c, &m),
            ModifyDecision::NotPending(_)
        ));
        let m = Modification {
            comment: Some("min_runtime=99:00:00"),
            current_admin_comment: cur,
            pending: true,
            ..Default::default()
        };
        assert!(matches!(decide_modify(&c, &m), ModifyDecision::Invalid(_)));
        let m = Modification {
            comment: Some("just a note"),
            current_admin_comment: cur,
            pending: false,
            ..Default::default()
        };
        assert_eq!(decide_modify(&c, &m), ModifyDecision::Unchanged);
    }

    #[test]
    fn operator_admin_comment_keeps_the_contract() {
        let c = config();
        let m = Modification {
            admin_comment: Some("node swap"),
            current_admin_comment: Some("allot:min_runtime=600"),
            ..Default::default()
        };
        assert_eq!(
            decide_modify(&c, &m),
            ModifyDecision::SetAdminComment("node swap allot:min_runtime=600".into())
        );
    }
}
