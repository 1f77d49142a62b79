//! Slurm time strings (`--time`, `--min-runtime`, sacct's `Elapsed`).
//!
//! Accepted forms, as documented for `sbatch --time`: `mm`, `mm:ss`,
//! `hh:mm:ss`, `d-hh`, `d-hh:mm`, `d-hh:mm:ss`. Days may exceed 31. A parse
//! error is always an error: nothing here ever turns bad input into 0 or
//! "unlimited". Slurm's own `UNLIMITED`/`INFINITE` are not durations of a
//! contract and are rejected too; callers that accept them check first.

use std::fmt;

/// Why a Slurm time string could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid Slurm time {input:?}: {reason}; write mm, mm:ss, hh:mm:ss, d-hh, d-hh:mm or d-hh:mm:ss (e.g. 30, 4:00:00, 2-12)")]
pub struct DurationError {
    /// The text as given.
    pub input: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// First instant no job record may carry: 2200-01-01T00:00:00Z, seconds
/// since the epoch. Later is a broken clock or a corrupt row (sync and the
/// simulator's trace readers refuse it).
pub const LATEST_PLAUSIBLE_TIME: i64 = 7_258_118_400;

/// Longest run a job record may describe: 5 x 365 days, seconds. Longer is
/// a broken clock or a corrupt row, and would spread its charge over more
/// hourly buckets than any real job (sync and the simulator refuse it).
pub const MAX_PLAUSIBLE_RUN_SECS: u64 = 5 * 365 * 86_400;

fn err(input: &str, reason: &'static str) -> DurationError {
    DurationError {
        input: input.to_string(),
        reason,
    }
}

fn field(input: &str, s: &str) -> Result<u64, DurationError> {
    if s.is_empty() {
        return Err(err(input, "empty field"));
    }
    if !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(err(input, "fields must be unsigned decimal numbers"));
    }
    s.parse::<u64>().map_err(|_| err(input, "number too large"))
}

/// Parses a Slurm time string into seconds.
///
/// `10` = 600 s (minutes), `4:00` = 240 s (mm:ss), `1:00:00` = 3600 s,
/// `2-12` = 216000 s (days-hours), `1-12:30:45` = 131445 s. Surrounding
/// whitespace is ignored.
///
/// # Errors
/// [`DurationError`] for an empty string, a non-numeric field, too many
/// fields, or a value that overflows `u64` seconds.
pub fn parse_slurm_duration(input: &str) -> Result<u64, DurationError> {
    let s = input.trim();
    if s.is_empty() {
        return Err(err(input, "empty"));
    }
    if s.starts_with('-') {
        return Err(err(input, "a duration cannot be negative"));
    }
    let (days, rest) = match s.split_once('-') {
        Some((d, rest)) => (Some(field(input, d)?), rest),
        None => (None, s),
    };
    let parts: Vec<&str> = rest.split(':').collect();
    let nums = parts
        .iter()
        .map(|p| field(input, p))
        .collect::<Result<Vec<_>, _>>()?;
    let (h, m, sec) = match (days, nums.as_slice()) {
        (None, [m]) => (0, *m, 0),
        (None, [m, s]) => (0, *m, *s),
        (None, [h, m, s]) => (*h, *m, *s),
        (Some(_), [h]) => (*h, 0, 0),
        (Some(_), [h, m]) => (*h, *m, 0),
        (Some(_), [h, m, s]) => (*h, *m, *s),
        _ => return Err(err(input, "too many ':' fields")),
    };
    let total = days
        .unwrap_or(0)
        .checked_mul(86_400)
        .and_then(|d| h.checked_mul(3600).and_then(|h| d.checked_add(h)))
        .and_then(|t| m.checked_mul(60).and_then(|m| t.checked_add(m)))
        .and_then(|t| t.checked_add(sec))
        .ok_or_else(|| err(input, "duration too large"))?;
    Ok(total)
}

/// Formats seconds the way Slurm prints durations: `d-hh:mm:ss` when at
/// least a day, else `hh:mm:ss`.
pub fn format_slurm_duration(secs: u64) -> String {
    SlurmDuration(secs).to_string()
}

/// A duration in seconds that displays in Slurm's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct SlurmDuration(pub u64);

impl fmt::Display for SlurmDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        let (d, h, m, sec) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
        if d > 0 {
            write!(f, "{d}-{h:02}:{m:02}:{sec:02}")
        } else {
            write!(f, "{h:02}:{m:02}:{sec:02}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negative_durations_say_so() {
        for bad in ["-5", "-01:00:00", " -1-00:00:00"] {
            let e = parse_slurm_duration(bad).unwrap_err();
            assert_eq!(e.reason, "a duration cannot be negative", "{bad}");
        }
    }

    #[test]
    fn issue_vectors() {
        assert_eq!(parse_slurm_duration("10").unwrap(), 600);
        assert_eq!(parse_slurm_duration("4:00").unwrap(), 240);
        assert_eq!(parse_slurm_duration("1:00:00").unwrap(), 3600);
        assert_eq!(parse_slurm_duration("2-12").unwrap(), 216_000);
        assert_eq!(parse_slurm_duration("1-12:30:45").unwrap(), 131_445);
        assert_eq!(parse_slurm_duration("45:30").unwrap(), 2730);
        assert_eq!(parse_slurm_duration("35-00:00:00").unwrap(), 35 * 86_400);
        assert_eq!(parse_slurm_duration("7-0").unwrap(), 7 * 86_400);
        assert_eq!(
            parse_slurm_duration("2-3:04").unwrap(),
            2 * 86_400 + 3 * 3600 + 4 * 60
        );
        assert_eq!(parse_slurm_duration("0").unwrap(), 0);
    }

    #[test]
    fn errors_are_errors() {
        for bad in [
            "",
            " ",
            "abc",
            "1:2:3:4",
            "-5",
            "1-",
            "1--2",
            "1-2:3:4:5",
            "1:",
            ":1",
            "+5",
            "1.5",
            "99999999999999999999",
            "UNLIMITED",
            "1-2-3",
        ] {
            assert!(
                parse_slurm_duration(bad).is_err(),
                "{bad:?} must be rejected"
            );
        }
        let e = parse_slurm_duration("4h").unwrap_err().to_string();
        assert!(e.contains("\"4h\"") && e.contains("hh:mm:ss"), "{e}");
    }

    #[test]
    fn overflow_is_an_error() {
        // u64::MAX s is 213503982334601 days and a bit: one more day overflows.
        assert!(parse_slurm_duration("213503982334601-0").is_ok());
        assert!(parse_slurm_duration("213503982334602-0").is_err());
    }

    #[test]
    fn format_round_trips() {
        for s in [0u64, 59, 3600, 86_399, 86_400, 131_445, 35 * 86_400] {
            assert_eq!(parse_slurm_duration(&format_slurm_duration(s)).unwrap(), s);
        }
        assert_eq!(format_slurm_duration(131_445), "1-12:30:45");
        assert_eq!(format_slurm_duration(240), "00:04:00");
    }
}
