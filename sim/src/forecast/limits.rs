//! Time limits users would set, for a trace that has none (Philly's has
//! none), so that a forecast and its baseline plan with what slurmctld
//! would know of a job, never its run time.
//!
//! **The model.** A user's limit is the run time divided by an accuracy
//! drawn uniformly from [`MIN_ACCURACY`, 1] (Mu'alem and Feitelson, IEEE
//! TPDS 12(6), 2001, found run time / requested time roughly uniform
//! across jobs), rounded up to the next value users write ([`ROUNDED`]:
//! 5, 10, 15, 20, 30, 45 minutes, 1, 1.5, 2, 3, 4, 6, 8, 12, 16 hours,
//! 1, 1.5, 2, 3, 4, 5, 7 days, then whole days). The draw is seeded by the
//! job's place in the trace, so the same trace gets the same limits.

use crate::trace::Trace;

/// The least accuracy drawn (a limit at most 10 times the run time, before
/// rounding).
pub const MIN_ACCURACY: f64 = 0.1;

/// The values users write, seconds, ascending.
pub const ROUNDED: [u64; 22] = [
    300, 600, 900, 1_200, 1_800, 2_700, 3_600, 5_400, 7_200, 10_800, 14_400, 21_600, 28_800,
    43_200, 57_600, 86_400, 129_600, 172_800, 259_200, 345_600, 432_000, 604_800,
];

/// The limit a user sets for a job of `duration` seconds, with `u` in
/// [0, 1) the draw: at least `duration`.
pub fn user_limit(duration: u64, u: f64) -> u64 {
    let accuracy = MIN_ACCURACY + (1.0 - MIN_ACCURACY) * (1.0 - u);
    let wanted = (duration as f64 / accuracy).ceil() as u64;
    let limit = match ROUNDED.iter().find(|&&r| r >= wanted) {
        Some(&r) => r,
        None => wanted.div_ceil(86_400) * 86_400,
    };
    limit.max(duration)
}

/// Gives every job of `trace` without a time limit the one [`user_limit`]
/// draws for it (seeded by `seed` and its place); returns how many got one.
pub fn assign(trace: &mut Trace, seed: u64) -> usize {
    let mut n = 0;
    for (i, j) in trace.jobs.iter_mut().enumerate() {
        if j.time_limit.is_none() {
            let h = crate::cluster::mix(seed ^ 0x11_1e5 ^ ((i as u64) << 16));
            let u = (h >> 11) as f64 / (1u64 << 53) as f64;
            j.time_limit = Some(user_limit(j.duration, u));
            n += 1;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_is_a_rounded_value_at_least_the_run_time() {
        // Accuracy 1 (u = 0): the run time rounded up.
        assert_eq!(user_limit(3_000, 0.0), 3_600);
        assert_eq!(user_limit(3_600, 0.0), 3_600);
        assert_eq!(user_limit(3_601, 0.0), 5_400);
        // Accuracy 0.1 (u -> 1): ten times, rounded up.
        assert_eq!(user_limit(3_600, 0.999_999_9), 43_200);
        // Beyond a week: whole days.
        assert_eq!(user_limit(10 * 86_400, 0.0), 10 * 86_400);
        assert_eq!(user_limit(10 * 86_400 + 1, 0.0), 11 * 86_400);
        for d in [1, 59, 600, 7_000, 100_000, 2_000_000] {
            for u in [0.0, 0.3, 0.7, 0.99] {
                let l = user_limit(d, u);
                assert!(
                    l >= d && (ROUNDED.contains(&l) || l.is_multiple_of(86_400)),
                    "{d} {u} -> {l}"
                );
            }
        }
    }

    #[test]
    fn assign_keeps_limits_the_trace_has_and_is_seeded() {
        let mut t = crate::trace::parse(
            "submit,duration,gpus,team,time_limit\n0,600,1,a,3600\n1,600,1,a,\n2,600,1,a,\n",
            None,
        )
        .unwrap();
        let mut u = t.clone();
        assert_eq!(assign(&mut t, 1), 2);
        assert_eq!(t.jobs[0].time_limit, Some(3_600));
        assert!(t.jobs[1..].iter().all(|j| j.time_limit.unwrap() >= 600));
        assign(&mut u, 1);
        assert_eq!(t.jobs, u.jobs);
    }
}
