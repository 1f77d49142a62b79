//! job_submit/allot's decisions, as pure functions over plain values (the
//! cdylib converts Slurm's structs and calls these).
//!
//! - The account must be a leaf account of the allot tree; a job without
//!   `--account` uses the user's default account, and a user without one is
//!   told what to write.
//! - The minimum runtime comes from `--min-runtime` (SPANK), else a
//!   `min_runtime=<time>` token in `--comment`, else the partition default,
//!   else the global default; unparsable or above the cap is refused.
//! - The contract is recorded in AdminComment (`allot:min_runtime=<s>`),
//!   which only operators can change and which survives restarts.
//! - On modification, the minimum runtime may change only while the job is
//!   pending; an operator's AdminComment edit keeps the recorded contract.

use fairshare::contract::ContractError;
use fairshare::record::{comment_min_runtime, recorded_min_runtime, with_recorded_min_runtime};
use fairshare::Config;

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

/// Validates a submission; on success returns the job's account and the
/// AdminComment to set (with the recorded contract).
pub fn decide_submit(
    config: &Config,
    s: &Submission<'_>,
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
        .min_runtime(declared(s.spank_min_runtime, s.comment), s.partition)
        .map_err(|e| {
            Refusal::MinRuntime(match e {
                ContractError::Unparsable(_) => format!(
                    "allot: {e}; write e.g. --min-runtime=4:00:00 (or --comment=min_runtime=4:00:00), or --min-runtime=0 for the free preemptible tier"
                ),
                ContractError::AboveCap { .. } => format!("allot: {e}"),
            })
        })?;
    Ok((
        account.to_string(),
        min_runtime,
        with_recorded_min_runtime(s.admin_comment, min_runtime),
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
    if let Some(text) = m.comment.and_then(comment_min_runtime) {
        if !m.pending {
            return ModifyDecision::NotPending(
                "allot: the minimum runtime of a job that has started cannot change".to_string(),
            );
        }
        let base = m.admin_comment.or(m.current_admin_comment);
        return match config.contract.min_runtime(Some(text), m.partition) {
            Ok(secs) if m.admin_comment.is_some() => {
                ModifyDecision::SetAdminComment(with_recorded_min_runtime(base, secs))
            }
            Ok(secs) => ModifyDecision::SetJobAdminComment(with_recorded_min_runtime(base, secs)),
            Err(e) => ModifyDecision::Invalid(format!("allot: {e}")),
        };
    }
    // An operator rewriting AdminComment must not erase the contract.
    match (m.admin_comment, recorded) {
        (Some(new), Some(secs)) if recorded_min_runtime(new) != Some(secs) => {
            ModifyDecision::SetAdminComment(with_recorded_min_runtime(Some(new), secs))
        }
        _ => ModifyDecision::Unchanged,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            decide_submit(&c, &s).unwrap(),
            ("a1".into(), 14_400, "allot:min_runtime=14400".into())
        );
        let s = Submission {
            account: Some("a2"),
            comment: Some("run 3 min_runtime=30"),
            ..Default::default()
        };
        assert_eq!(decide_submit(&c, &s).unwrap().1, 1800);
    }

    #[test]
    fn defaults_by_partition_then_global() {
        let c = config();
        let s = Submission {
            account: Some("a1"),
            partition: Some("debug"),
            ..Default::default()
        };
        assert_eq!(decide_submit(&c, &s).unwrap().1, 0);
        let s = Submission {
            account: Some("a1"),
            partition: Some("gpu,debug"),
            ..Default::default()
        };
        assert_eq!(decide_submit(&c, &s).unwrap().1, 3600);
        let s = Submission {
            default_account: Some("vision"),
            ..Default::default()
        };
        assert_eq!(decide_submit(&c, &s).unwrap().0, "vision");
    }

    #[test]
    fn refusals_say_what_to_write() {
        let c = config();
        let e = decide_submit(
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
        let e = decide_submit(
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
        let e = decide_submit(
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
        let e = decide_submit(&c, &Submission::default()).unwrap_err();
        assert!(
            e.message().contains("no account") && e.message().contains("--account="),
            "{e:?}"
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
        assert_eq!(decide_submit(&c, &s).unwrap().1, 0);
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
