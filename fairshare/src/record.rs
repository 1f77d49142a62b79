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
//! Tokens are separated by whitespace, `,` or `;`.

/// Prefix of the recorded token in AdminComment.
pub const RECORDED_KEY: &str = "allot:min_runtime=";
/// Key of the user's token in `--comment`.
pub const COMMENT_KEY: &str = "min_runtime=";
/// Name of the job-control environment variable set by the SPANK option.
pub const SPANK_ENV: &str = "ALLOT_MIN_RUNTIME";

fn tokens(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| c.is_whitespace() || c == ',' || c == ';')
        .filter(|t| !t.is_empty())
}

/// The recorded minimum runtime in seconds, from an AdminComment; `None`
/// when no (valid) `allot:min_runtime=` token is present.
pub fn recorded_min_runtime(admin_comment: &str) -> Option<u64> {
    tokens(admin_comment)
        .find_map(|t| t.strip_prefix(RECORDED_KEY))
        .and_then(|v| v.parse().ok())
}

/// AdminComment with the contract recorded: any previous allot token is
/// replaced, other text (an operator's note) is kept.
pub fn with_recorded_min_runtime(admin_comment: Option<&str>, min_runtime: u64) -> String {
    let mut kept: Vec<&str> = admin_comment
        .map(|c| tokens(c).filter(|t| !t.starts_with(RECORDED_KEY)).collect())
        .unwrap_or_default();
    let token = format!("{RECORDED_KEY}{min_runtime}");
    kept.push(&token);
    kept.join(" ")
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
    fn absent_or_garbled_recorded_token_is_none() {
        assert_eq!(recorded_min_runtime(""), None);
        assert_eq!(recorded_min_runtime("allot:min_runtime=abc"), None);
        assert_eq!(recorded_min_runtime("xallot:min_runtime=5"), None);
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
