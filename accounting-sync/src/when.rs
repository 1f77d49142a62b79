//! A time as allot prints it beside now: `5:00 ago`, `in 5:00` (Slurm's
//! duration format). `allot explain`, `allot forecast` and the sidecar's
//! pages say every time this way.

use fairshare::duration::SlurmDuration;

/// `t` (epoch s) against `now`: "5:00 ago" or "in 5:00".
pub fn when(t: i64, now: i64) -> String {
    let d = now - t;
    if d >= 0 {
        format!("{} ago", SlurmDuration(d as u64))
    } else {
        format!("in {}", SlurmDuration((-d) as u64))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ago_and_in() {
        assert_eq!(super::when(100, 400), "00:05:00 ago");
        assert_eq!(super::when(400, 100), "in 00:05:00");
        assert_eq!(super::when(5, 5), "00:00:00 ago");
    }
}
