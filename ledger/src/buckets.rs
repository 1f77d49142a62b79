//! Hourly buckets: the charged, GPU and unallocated segments of an attempt
//! and the per-hour deltas the writer adds to the bucket table.

use super::*;

/// A segment `[start, end)` (end `None` = still open) at `rate`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Segment {
    pub(crate) start: i64,
    pub(crate) end: Option<i64>,
    pub(crate) rate: i64,
}

/// The three segments of a record: charged, gpu, unallocated.
pub(crate) fn segments(r: &AttemptRecord) -> [Option<Segment>; 3] {
    let Some(start) = r.start else {
        return [None; 3];
    };
    let closed = r.end.is_some();
    let charged = (r.min_runtime > 0 && r.rate > 0).then_some(Segment {
        start,
        end: if closed { r.charge_end } else { None },
        rate: r.rate as i64,
    });
    let gpu = (r.gpus > 0).then_some(Segment {
        start,
        end: r.end,
        rate: r.gpus as i64,
    });
    let unalloc = if r.min_runtime == 0 { gpu } else { None };
    // A closed attempt whose charged end is missing charges nothing.
    let charged = charged.filter(|s| !(closed && s.end.is_none()));
    [charged, gpu, unalloc]
}

pub(crate) fn len(s: i64, e: i64) -> i64 {
    (e - s).max(0)
}

/// A batch's per-hour bucket deltas `[q0, act0, q1, act1, q2, act2]`, by
/// account, user and hour: found by `&str`, so a segment allocates no key
/// once its (account, user) pair is in (one String per hour and segment
/// was most of the writer's allocation).
pub(crate) type Deltas = HashMap<String, HashMap<String, BTreeMap<i64, [i64; 6]>>>;

/// Adds `sign x` a closed segment to the per-hour deltas.
pub(crate) fn bucket_deltas(
    out: &mut Deltas,
    account: &str,
    user: &str,
    family: usize,
    seg: Segment,
    sign: i64,
) {
    let Some(end) = seg.end else { return };
    if end <= seg.start || seg.rate == 0 {
        return;
    }
    if !out.contains_key(account) {
        out.insert(account.to_string(), HashMap::new());
    }
    let users = out.get_mut(account).expect("inserted above");
    if !users.contains_key(user) {
        users.insert(user.to_string(), BTreeMap::new());
    }
    let hours = users.get_mut(user).expect("inserted above");
    let first = seg.start.div_euclid(BUCKET_SECS);
    let last = (end - 1).div_euclid(BUCKET_SECS);
    for h in first..=last {
        let h0 = h * BUCKET_SECS;
        let inside = len(seg.start.max(h0), end.min(h0 + BUCKET_SECS));
        let d = hours.entry(h).or_insert([0; 6]);
        // Saturating: a rate near i64::MAX (absurd weights x counts) must not
        // wrap into a negative charge.
        d[2 * family] =
            d[2 * family].saturating_add(sign.saturating_mul(seg.rate).saturating_mul(inside));
        if seg.start <= h0 {
            d[2 * family + 1] = d[2 * family + 1].saturating_add(sign.saturating_mul(seg.rate));
        }
    }
}
