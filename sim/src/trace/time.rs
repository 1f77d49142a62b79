//! Time fields of a trace: which clock a value uses (epoch seconds,
//! relative seconds or a civil date-time) and how to read each.

/// Which clock a time value uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Clock {
    DateTime,
    Epoch,
    Relative,
}

impl Clock {
    pub(super) fn name(self) -> &'static str {
        match self {
            Clock::DateTime => "a date-time",
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
/// civil time it names (no zone).
pub fn parse_datetime(s: &str) -> Option<i64> {
    let s = s.trim();
    let (date, time) = s.split_once([' ', 'T'])?;
    let mut d = date.splitn(3, '-').map(|x| x.parse::<i64>().ok());
    let (y, mo, da) = (d.next()??, d.next()??, d.next()??);
    let mut t = time.splitn(3, ':').map(|x| x.parse::<f64>().ok());
    let (h, mi) = (t.next()??, t.next()??);
    let se = t.next().flatten().unwrap_or(0.0);
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
    Some(days_from_civil(y, mo, da) * 86_400 + h as i64 * 3600 + mi as i64 * 60 + se as i64)
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
    parse_datetime(s).map(|v| (v, Clock::DateTime))
}
