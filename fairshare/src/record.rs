//! How a job's contract is written on the Slurm job, and read back.
//!
//! - What the user writes: `--min-runtime=<time>` (SPANK), or without the
//!   SPANK plugin a token `min_runtime=<time>` anywhere in `--comment`
//!   (Slurm time format; `0` asks for the free, unallocated tier).
//! - What job_submit records: `allot:min_runtime=<seconds>` in the job's
//!   `AdminComment`, which only operators can change, which slurmctld saves
//!   across restarts, and which slurmdbd stores (sacct's `AdminComment`), so
//!   the plugins, `allot sync` and the simulator all read the same contract.
//!
//! - A job job_submit found to be part of a sweep ([`crate::sweep`]) also
//!   gets the token `allot:sweep` ([`recorded_sweep`]); it never preempts.
//!
//! Tokens are separated by whitespace, `,` or `;`.
//!
//! Reading the record back is [`recorded_min_runtime`], the one parser every
//! reader uses (the plugins, `allot sync`, drain, `allot explain`); what the
//! job then has is [`ContractPolicy::job_min_runtime`](crate::ContractPolicy::job_min_runtime).
//! The first `allot:min_runtime=` token decides. Its value is seconds
//! (`3600`, what job_submit writes); a value an operator wrote by hand is
//! read too when it cannot be mistaken: seconds with an `s` suffix (`90s`)
//! or a Slurm time with `:` or `-` (`4:00:00`, `0-2`). Anything else (`4h`,
//! `+5`, `soon`, an empty value) is no record: the job's default applies.

use crate::duration::parse_slurm_duration;

/// Prefix of the recorded token in AdminComment.
pub const RECORDED_KEY: &str = "allot:min_runtime=";
/// The token that marks a job of a sweep in AdminComment.
pub const SWEEP_TOKEN: &str = "allot:sweep";
/// Key of the user's token in `--comment`.
pub const COMMENT_KEY: &str = "min_runtime=";
/// Name of the job-control environment variable set by the SPANK option.
pub const SPANK_ENV: &str = "ALLOT_MIN_RUNTIME";

fn tokens(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| c.is_whitespace() || c == ',' || c == ';')
        .filter(|t| !t.is_empty())
}

/// The recorded minimum runtime in seconds, from an AdminComment; `None`
/// when there is no `allot:min_runtime=` token or the first one is
/// unreadable (see the module documentation for what is read).
pub fn recorded_min_runtime(admin_comment: &str) -> Option<u64> {
    let value = tokens(admin_comment).find_map(|t| t.strip_prefix(RECORDED_KEY))?;
    let seconds = |digits: &str| {
        (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
            .then(|| digits.parse().ok())
            .flatten()
    };
    if let Some(n) = value.strip_suffix('s') {
        seconds(n)
    } else if value.contains([':', '-']) {
        parse_slurm_duration(value).ok()
    } else {
        seconds(value)
    }
}

/// True when an AdminComment marks the job as part of a sweep (the
/// token `allot:sweep`, exactly).
pub fn recorded_sweep(admin_comment: &str) -> bool {
    tokens(admin_comment).any(|t| t == SWEEP_TOKEN)
}

/// AdminComment with the contract and the sweep mark recorded: previous
/// allot tokens are replaced, other text (an operator's note) is kept.
pub fn with_record(admin_comment: Option<&str>, min_runtime: u64, sweep: bool) -> String {
    let mut kept: Vec<&str> = admin_comment
        .map(|c| {
            tokens(c)
                .filter(|t| !t.starts_with(RECORDED_KEY) && *t != SWEEP_TOKEN)
                .collect()
        })
        .unwrap_or_default();
    let token = format!("{RECORDED_KEY}{min_runtime}");
    kept.push(&token);
    if sweep {
        kept.push(SWEEP_TOKEN);
    }
    kept.join(" ")
}

/// AdminComment with the contract recorded and the sweep mark it had kept
/// ([`with_record`]).
pub fn with_recorded_min_runtime(admin_comment: Option<&str>, min_runtime: u64) -> String {
    with_record(
        admin_comment,
        min_runtime,
        admin_comment.is_some_and(recorded_sweep),
    )
}

/// The value of the user's `min_runtime=<time>` token in `--comment`, as
/// written (parse it with [`ContractPolicy::min_runtime`](crate::ContractPolicy::min_runtime)
/// so that errors and the cap are reported the same way for every source).
pub fn comment_min_runtime(comment: &str) -> Option<&str> {
    tokens(comment).find_map(|t| t.strip_prefix(COMMENT_KEY))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_round_trip() {
        let c = with_recorded_min_runtime(None, 3600);
        assert_eq!(c, "allot:min_runtime=3600");
        assert_eq!(recorded_min_runtime(&c), Some(3600));
    }

    #[test]
    fn recording_replaces_and_keeps_operator_text() {
        let c = with_recorded_min_runtime(Some("ticket-42 allot:min_runtime=5"), 0);
        assert_eq!(c, "ticket-42 allot:min_runtime=0");
        assert_eq!(recorded_min_runtime(&c), Some(0));
    }

    #[test]
    fn the_sweep_mark_is_one_exact_token_kept_by_later_records() {
        let c = with_record(Some("ticket-42"), 3600, true);
        assert_eq!(c, "ticket-42 allot:min_runtime=3600 allot:sweep");
        assert!(recorded_sweep(&c));
        assert_eq!(recorded_min_runtime(&c), Some(3600));
        // A new contract keeps the mark; with_record decides it.
        assert!(recorded_sweep(&with_recorded_min_runtime(Some(&c), 60)));
        assert!(!recorded_sweep(&with_record(Some(&c), 60, false)));
        for not in [
            "",
            "allot:sweep=1",
            "allot:sweeps",
            "xallot:sweep",
            "allot:min_runtime=0",
        ] {
            assert!(!recorded_sweep(not), "{not:?}");
        }
        assert!(recorded_sweep("note;allot:sweep,other"));
    }

    #[test]
    fn absent_or_garbled_recorded_token_is_none() {
        assert_eq!(recorded_min_runtime(""), None);
        assert_eq!(recorded_min_runtime("allot:min_runtime=abc"), None);
        assert_eq!(recorded_min_runtime("xallot:min_runtime=5"), None);
    }

    #[test]
    fn what_the_record_parser_accepts() {
        // What job_submit writes: seconds, anywhere among other tokens.
        assert_eq!(recorded_min_runtime("allot:min_runtime=3600"), Some(3600));
        assert_eq!(recorded_min_runtime("allot:min_runtime=0"), Some(0));
        assert_eq!(
            recorded_min_runtime("x=1 allot:min_runtime=600;y"),
            Some(600)
        );
        // Written by hand: a Slurm time with ':' or '-', or seconds with 's'.
        // (`allot sync` and drain read these while the plugins and `allot
        // explain` fell back to the default: one parser now.)
        assert_eq!(
            recorded_min_runtime("allot:min_runtime=4:00:00"),
            Some(14_400)
        );
        assert_eq!(
            recorded_min_runtime("ticket-9,allot:min_runtime=1:30:00"),
            Some(5400)
        );
        assert_eq!(recorded_min_runtime("allot:min_runtime=0-2"), Some(7200));
        assert_eq!(recorded_min_runtime("allot:min_runtime=90s"), Some(90));
        // Above the cap is still a record (the reader caps it).
        assert_eq!(
            recorded_min_runtime("allot:min_runtime=356400"),
            Some(356_400)
        );
    }

    #[test]
    fn what_the_record_parser_refuses() {
        for text in [
            "allot:min_runtime=",
            "allot:min_runtime=soon",
            "allot:min_runtime=4h",
            "allot:min_runtime=90m",
            "allot:min_runtime=+5",
            "allot:min_runtime=-5",
            "allot:min_runtime=s",
            "allot:min_runtime=1:00s",
            "allot:min_runtime=1:99:99:99",
            "allot:min_runtime=99999999999999999999999",
            "min_runtime=90",
            "ALLOT:MIN_RUNTIME=90",
        ] {
            assert_eq!(recorded_min_runtime(text), None, "{text:?}");
        }
        // The first token decides: an unreadable one is not skipped for a
        // later one (with_recorded_min_runtime never writes two).
        assert_eq!(
            recorded_min_runtime("allot:min_runtime=abc allot:min_runtime=5"),
            None
        );
        assert_eq!(
            recorded_min_runtime("allot:min_runtime=5 allot:min_runtime=60"),
            Some(5)
        );
    }

    #[test]
    fn comment_tokens() {
        assert_eq!(
            comment_min_runtime("exp 7; min_runtime=4:00:00"),
            Some("4:00:00")
        );
        assert_eq!(comment_min_runtime("min_runtime=0"), Some("0"));
        assert_eq!(comment_min_runtime("nothing here"), None);
        assert_eq!(comment_min_runtime("min_runtime=4h"), Some("4h"));
    }
}
