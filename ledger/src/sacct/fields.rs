//! One sacct field at a time: step ids, placeholders, times, elapsed
//! times, job labels (array tasks, het components).

use super::*;

/// True for a step id: a job id (`5104`, `7100_3`, `93+1`) then `.` and a
/// step name (`batch`, `extern`, `interactive`, `0`, or a het step `0+1`).
pub fn is_step_id(id: &str) -> bool {
    let Some((job, step)) = id.trim().split_once('.') else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let step_ok = matches!(step, "batch" | "extern" | "interactive")
        || match step.split_once('+') {
            Some((a, b)) => digits(a) && digits(b),
            None => digits(step),
        };
    step_ok && parse_label(job).is_ok()
}

/// True for sacct's placeholders of an absent value.
pub fn is_placeholder(s: &str) -> bool {
    matches!(s.trim(), "" | "Unknown" | "None" | "N/A" | "(null)")
}

/// Parses a time field into seconds since the epoch: placeholders give
/// `Ok(None)`, digits are an epoch, a date-time with a UTC offset
/// (`2026-01-10T23:30:00+0100`, `-05:00`, `+01`, `Z`: what
/// `SLURM_TIME_FORMAT=%Y-%m-%dT%H:%M:%S%z` prints) is the instant it names,
/// and one without is local time in `tz` (`tz` applies only there).
///
/// # Errors
/// Text that is none of these (an offset that is not `±HH[:MM]`, `±HHMM`
/// or `Z` included).
pub fn parse_time(s: &str, tz: &jiff::tz::TimeZone) -> Result<Option<i64>, String> {
    let s = s.trim();
    if is_placeholder(s) {
        return Ok(None);
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse::<i64>().map(Some).map_err(|e| e.to_string());
    }
    // jiff's RFC 3339 / ISO 8601 reader: the date, the time and the offset
    // when there is one (`Z` is UTC); a civil `DateTime` would drop the
    // offset and refuse `Z`.
    let pieces = jiff::fmt::temporal::Pieces::parse(s).map_err(|e| {
        format!("not an epoch nor a YYYY-MM-DDTHH:MM:SS time with or without a UTC offset ({e})")
    })?;
    let dt = pieces.date().to_datetime(pieces.time().unwrap_or_default());
    let ts = match pieces.to_numeric_offset() {
        Some(offset) => offset.to_timestamp(dt).map_err(|e| e.to_string())?,
        None => tz
            .to_ambiguous_timestamp(dt)
            .compatible()
            .map_err(|e| e.to_string())?,
    };
    Ok(Some(ts.as_second()))
}

/// True for a time [`parse_time`] reads as local time in its zone: a
/// date-time without a UTC offset (not an epoch, not a placeholder).
pub fn is_local_time(s: &str) -> bool {
    let s = s.trim();
    !is_placeholder(s)
        && !s.bytes().all(|b| b.is_ascii_digit())
        && jiff::fmt::temporal::Pieces::parse(s).is_ok_and(|p| p.to_numeric_offset().is_none())
}

/// Earliest time a row may carry: the epoch (a negative time is a broken
/// clock or a corrupt row).
pub const PLAUSIBLE_FROM: i64 = 0;

/// Parses sacct's `Elapsed` (`[d-]hh:mm:ss` or `mm:ss`) into seconds.
///
/// # Errors
/// Any other shape.
pub fn parse_elapsed(s: &str) -> Result<Option<u64>, String> {
    let s = s.trim();
    if is_placeholder(s) {
        return Ok(None);
    }
    // sacct never prints a bare number or d-hh: insist on a ':'.
    if !s.contains(':') {
        return Err("expected [d-]hh:mm:ss or mm:ss".into());
    }
    parse_slurm_duration(s).map(Some).map_err(|e| e.to_string())
}

/// Parses sacct's time limit into seconds: `TimelimitRaw` (`raw`: minutes,
/// `30`) or `Timelimit` (`[d-]hh:mm:ss`, `00:30:00`). `UNLIMITED`,
/// `Partition_Limit` (no limit of its own; sacct does not say the
/// partition's) and placeholders give `Ok(None)`: no limit known.
///
/// # Errors
/// Any other text.
pub fn parse_time_limit(s: &str, raw: bool) -> Result<Option<u64>, String> {
    let s = s.trim();
    if is_placeholder(s)
        || s.eq_ignore_ascii_case("UNLIMITED")
        || s.eq_ignore_ascii_case("Partition_Limit")
    {
        return Ok(None);
    }
    if raw {
        return s
            .parse::<u64>()
            .map(|minutes| Some(minutes.saturating_mul(60)))
            .map_err(|_| "expected minutes, UNLIMITED or Partition_Limit".into());
    }
    parse_slurm_duration(s).map(Some).map_err(|e| e.to_string())
}

/// Reads `123`, `123_4` (array task) and `93+1` (het component).
pub(crate) fn parse_label(
    label: &str,
) -> Result<(Option<ArrayTask>, Option<HetComponent>), String> {
    let num = |s: &str| {
        s.parse::<u64>()
            .map_err(|_| format!("{s:?} is not a number"))
    };
    if let Some((job, task)) = label.split_once('_') {
        let task =
            u32::try_from(num(task)?).map_err(|_| "array task index too large".to_string())?;
        return Ok((
            Some(ArrayTask {
                job: num(job)?,
                task,
            }),
            None,
        ));
    }
    if let Some((job, off)) = label.split_once('+') {
        let offset = u32::try_from(num(off)?).map_err(|_| "het offset too large".to_string())?;
        return Ok((
            None,
            Some(HetComponent {
                job: num(job)?,
                offset,
            }),
        ));
    }
    num(label)?;
    Ok((None, None))
}
