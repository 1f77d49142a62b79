//! sacct: slurmdbd's record of every job attempt.
//!
//! allot asks one question of it: every user's allocations, each attempt
//! (`-D`), with the fields the ledger's row parser reads
//! ([`allot_ledger::sacct::LIVE_FIELDS`]), times as epoch seconds, no
//! header; over a time range ([`Which::Since`]) or for given jobs
//! ([`Which::Jobs`]). The rows are read by [`allot_ledger::sacct::Parser`],
//! the one reader of sacct's rows (the ledger, `allot sync --from` and
//! `allot sim` read them too). The sync pass streams them into the ledger
//! ([`Attempts::stream`]); the forecast takes them whole
//! ([`attempts_since`]).

use std::io::BufRead;
use std::time::Duration;

use allot_ledger::sacct::{Attempt, Parser, RowOutcome, LIVE_FIELDS};
use anyhow::Context;

use super::command::Slurm;

/// Which attempts to list.
#[derive(Debug, Clone, Copy)]
pub enum Which<'a> {
    /// Those pending, running or ended at any time after this instant
    /// (epoch s) up to now: `-S <local time> -E now`. Without `-s`, sacct
    /// lists every job that was pending or running then, so running and
    /// pending jobs always come back.
    Since(i64),
    /// These jobs' (`-j 1,2,3`).
    Jobs(&'a [String]),
}

/// The attempts query of `program` (`sacct`, or the path the user gave).
pub struct Attempts(Slurm);

impl Attempts {
    /// `program -a -X -D --parsable2 --noheader -o <LIVE_FIELDS>` with
    /// `SLURM_TIME_FORMAT=%s` and [`timeout`], for `which`.
    ///
    /// # Errors
    /// A time out of range.
    pub fn new(program: &str, which: Which<'_>) -> anyhow::Result<Attempts> {
        let c = Slurm::new(program)
            .epoch_times()
            .args(["-a", "-X", "-D", "--parsable2", "--noheader", "-o"])
            .arg(LIVE_FIELDS.join(","))
            .timeout(timeout())
            .timeout_note("ALLOT_SACCT_TIMEOUT sets the limit");
        Ok(Attempts(match which {
            Which::Since(t) => c.arg("-S").arg(local_iso(t)?).args(["-E", "now"]),
            Which::Jobs(ids) => c.arg("-j").arg(ids.join(",")),
        }))
    }

    /// Runs it, handing its rows to `read` as they come (a first import
    /// of a year's history is written while sacct still prints).
    ///
    /// # Errors
    /// sacct cannot run, fails, or outlives [`timeout`].
    pub fn stream<T>(&self, read: impl FnOnce(&mut dyn BufRead) -> T) -> anyhow::Result<T> {
        self.0.stream(read)
    }
}

/// How long one sacct run may take: `ALLOT_SACCT_TIMEOUT` seconds, default
/// 1800 (a first import of a year of history takes minutes). A sacct that
/// never answers (slurmdbd wedged) must not stall the sidecar and its
/// drain requeues.
pub fn timeout() -> Duration {
    let secs = std::env::var("ALLOT_SACCT_TIMEOUT")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|s| *s > 0)
        .unwrap_or(1800);
    Duration::from_secs(secs)
}

/// `t` (epoch s) as a local date-time, as sacct's `-S` and `-E` read it.
///
/// # Errors
/// A time out of range.
pub fn local_iso(t: i64) -> anyhow::Result<String> {
    let ts = jiff::Timestamp::from_second(t).context("time out of range")?;
    Ok(jiff::tz::TimeZone::system()
        .to_datetime(ts)
        .strftime("%Y-%m-%dT%H:%M:%S")
        .to_string())
}

/// sacct's attempts (every user's, allocations only) that ran within
/// `[start, now]`, epoch seconds; rows that are not attempts are left out.
///
/// # Errors
/// sacct missing, failing or outliving its timeout.
pub fn attempts_since(start: i64) -> anyhow::Result<Vec<Attempt>> {
    let parser = Parser::live(jiff::tz::TimeZone::system());
    Attempts::new("sacct", Which::Since(start))?.stream(|r| {
        r.split(b'\n')
            .map_while(Result::ok)
            .filter_map(|l| match parser.parse(&String::from_utf8_lossy(&l)) {
                Ok(RowOutcome::Attempt(a)) => Some(*a),
                _ => None,
            })
            .collect()
    })
}
