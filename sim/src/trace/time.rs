//! Time fields of a trace: which clock a value uses (epoch seconds,
//! relative seconds or a civil date-time) and how to read each.

/// Which clock a time value uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Clock {
    DateTime,
    /// A date-time with a UTC offset (`+08:00`, `-0500`, `Z`): an instant,
    /// which a civil date-time without one cannot be compared with.
    ZonedDateTime,
    Epoch,
    Relative,
}

impl Clock {
    pub(super) fn name(self) -> &'static str {
        match self {
            Clock::DateTime => "a date-time",
            Clock::ZonedDateTime => "a date-time with a UTC offset",
            Clock::Epoch => "epoch seconds",
            Clock::Relative => "relative seconds",
        }
    }
}

/// 2000-01-01T00:00:00Z: numbers at or above it are epoch seconds.
const EPOCH_THRESHOLD: i64 = 946_684_800;

/// Days from 1970-01-01 to a civil date (proleptic Gregorian), Howard
/// Hinnant's algorithm.
pub(super) fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Parses `YYYY-MM-DD HH:MM:SS` (or with `T`) as seconds since 1970 in the
/// civil time it names (no zone); with a UTC offset after the time
/// (`+08:00`, `+0800`, `+08`, `-05:00`, `Z`), as seconds since 1970 UTC.
pub fn parse_datetime(s: &str) -> Option<i64> {
    parse_zoned(s).map(|(t, _)| t)
}

/// [`parse_datetime`], and whether the text had a UTC offset.
fn parse_zoned(s: &str) -> Option<(i64, bool)> {
    let s = s.trim();
    let (date, time) = s.split_once([' ', 'T'])?;
    let (time, offset) = split_offset(time.trim())?;
    let mut d = date.splitn(3, '-').map(|x| x.parse::<i64>().ok());
    let (y, mo, da) = (d.next()??, d.next()??, d.next()??);
    let mut t = time.splitn(3, ':').map(|x| x.parse::<f64>().ok());
    let (h, mi) = (t.next()??, t.next()??);
    // Seconds are optional (`08:00`), but present ones must be a number:
    // `00+08:00` read as 0 s once dropped the offset silently.
    let se = match t.next() {
        None => 0.0,
        Some(v) => v?,
    };
    // Years outside 0..=9999 are not trace times (and 24294967296017
    // overflowed the day count: found by fuzzing).
    if !(0..=9999).contains(&y) {
        return None;
    }
    if !(1..=12).contains(&mo) || !(1..=31).contains(&da) || !(0.0..24.0).contains(&h) {
        return None;
    }
    if !(0.0..60.0).contains(&mi) || !(0.0..61.0).contains(&se) {
        return None;
    }
    let civil = days_from_civil(y, mo, da) * 86_400 + h as i64 * 3600 + mi as i64 * 60 + se as i64;
    Some((civil - offset.unwrap_or(0), offset.is_some()))
}

/// Splits a time of day from its UTC offset: `08:00:00+08:00` is
/// (`08:00:00`, 8 h), `08:00:00Z` (`08:00:00`, 0), `08:00:00` (itself,
/// none). `None`: an offset that is not `+HH:MM`, `+HHMM` or `+HH` (or
/// `-`) of at most 18 hours.
fn split_offset(time: &str) -> Option<(&str, Option<i64>)> {
    if let Some(t) = time.strip_suffix(['Z', 'z']) {
        return Some((t, Some(0)));
    }
    let Some(i) = time.rfind(['+', '-']) else {
        return Some((time, None));
    };
    let (t, off) = time.split_at(i);
    let sign = if off.starts_with('-') { -1 } else { 1 };
    let digits = &off[1..];
    // Only ASCII digits and `:` from here: the splits below are by byte.
    if !digits.bytes().all(|b| b.is_ascii_digit() || b == b':') {
        return None;
    }
    let (hh, mm) = match (digits.len(), digits.split_once(':')) {
        (5, Some((h, m))) => (h, m),
        (4, None) => digits.split_at(2),
        (2, None) => (digits, "00"),
        _ => return None,
    };
    if !(hh.bytes().chain(mm.bytes()).all(|b| b.is_ascii_digit())) {
        return None;
    }
    let (hh, mm): (i64, i64) = (hh.parse().ok()?, mm.parse().ok()?);
    if hh > 18 || mm > 59 {
        return None;
    }
    Some((t, Some(sign * (hh * 3600 + mm * 60))))
}

/// A time value and its clock.
pub(super) fn parse_time(s: &str) -> Option<(i64, Clock)> {
    let s = s.trim();
    if let Ok(v) = s.parse::<f64>() {
        if !v.is_finite() || v < 0.0 {
            return None;
        }
        let v = v.round() as i64;
        let clock = if v >= EPOCH_THRESHOLD {
            Clock::Epoch
        } else {
            Clock::Relative
        };
        return Some((v, clock));
    }
    parse_zoned(s).map(|(v, zoned)| {
        (
            v,
            if zoned {
                Clock::ZonedDateTime
            } else {
                Clock::DateTime
            },
        )
    })
}
