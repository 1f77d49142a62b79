//! Sweeps: short jobs submitted in bulk are throughput work, not debug work.
//!
//! # Rule
//! A job that fits the short band ([`crate::priority`]: allocated, at most
//! `short_max_gpus` GPUs, a time limit of at most `short_max_time`) is part
//! of a *sweep* when its account had already submitted `sweep_jobs` or more
//! such jobs in the `sweep_window` seconds before it. An array of `n` tasks
//! counts `n` jobs and is a sweep as a whole when its `n` would pass the
//! limit. Every short-band submission counts, sweep or not, so a sweep stays
//! one while the account keeps submitting. `sweep_jobs = 0` (the default):
//! no sweeps.
//!
//! A sweep job is batch work inside its team: it does not go first among
//! the team's jobs and it may not take the team's own batch work
//! ([`crate::owed`], [`crate::preempt`]). Between teams no shape has a
//! place of its own: a sweep is ordered as any other job of its team.

//! # Why
//! Someone debugging submits a few jobs and waits for them; a parameter
//! sweep submits hundreds at once and waits for all of them. Before this
//! rule every short job could preempt, so one team's sweep (Philly:
//! hundreds of one-GPU, 24-minute jobs in half an hour) took GPUs from
//! batch work of every team, threw its work away, and still made the p90
//! wait of debug work half an hour: a sweep larger than the cluster cannot
//! start at once however much is preempted. Measured on full Philly in
//! docs/simulator.md.
//!
//! # Decided once, from submission times only
//! The decision depends on the account's submissions alone, never on the
//! queue or the load, so it is made once: job_submit/allot records it at
//! submission (`allot:sweep` in AdminComment, [`crate::record`]) and the
//! simulator when it loads a trace. It is therefore the same job set under
//! every policy the simulator replays, and the simulator's *debug* class
//! (the wait percentiles) is the short-band jobs that are not sweeps.
//!
//! # Termination
//! The rule only removes preemptions; the argument of [`crate::preempt`]
//! (what strictly increases with every preemption) is unchanged.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

use crate::priority::PriorityWeights;

/// Counts each account's recent short-band submissions and says which are
/// sweeps. Keyed by whatever names an account for the caller (its name in
/// the plugins, an index in the simulator).
#[derive(Debug, Clone)]
pub struct SweepCounter<K> {
    limit: u32,
    window: u64,
    recent: HashMap<K, Recent>,
}

/// One account's submissions inside the window: `(time, jobs)` in time
/// order and their total.
#[derive(Debug, Clone, Default)]
struct Recent {
    submissions: VecDeque<(u64, u64)>,
    jobs: u64,
}

impl<K: Hash + Eq> SweepCounter<K> {
    /// A counter for at most `limit` short jobs per account within `window`
    /// seconds (`limit` 0: nothing is ever a sweep).
    pub fn new(limit: u32, window: u64) -> Self {
        SweepCounter {
            limit,
            window,
            recent: HashMap::new(),
        }
    }

    /// The counter of a config's `[priority] sweep_jobs` and `sweep_window`.
    pub fn of(weights: &PriorityWeights) -> Self {
        Self::new(weights.sweep_jobs, weights.sweep_window)
    }

    /// True when the counter never calls anything a sweep.
    pub fn is_off(&self) -> bool {
        self.limit == 0
    }

    /// True when it counts with `weights`' `sweep_jobs` and `sweep_window`
    /// (a counter kept across config reloads starts again when they change).
    pub fn counts_for(&self, weights: &PriorityWeights) -> bool {
        (self.limit, self.window) == (weights.sweep_jobs, weights.sweep_window)
    }

    /// Records `count` short-band jobs (1, or an array's tasks) of
    /// `account` submitted at `time` (seconds; an account's times should
    /// not go backwards, an earlier one only keeps more in the window) and
    /// returns true when they are a sweep: the account's short-band jobs
    /// submitted in the `window` seconds before `time`, plus `count`, pass
    /// the limit.
    pub fn submit(&mut self, account: K, time: u64, count: u64) -> bool {
        if self.limit == 0 {
            return false;
        }
        let r = self.recent.entry(account).or_default();
        while let Some(&(t, n)) = r.submissions.front() {
            if t.saturating_add(self.window) > time {
                break;
            }
            r.submissions.pop_front();
            r.jobs -= n;
        }
        let sweep = r.jobs + count > u64::from(self.limit);
        r.submissions.push_back((time, count));
        r.jobs += count;
        sweep
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_job_after_the_limit_within_the_window_is_a_sweep() {
        let mut c = SweepCounter::new(3, 900);
        let got: Vec<bool> = (0..5).map(|i| c.submit("a", 100 + i, 1)).collect();
        assert_eq!(got, [false, false, false, true, true]);
        // Another account has its own count.
        assert!(!c.submit("b", 104, 1));
    }

    #[test]
    fn jobs_leave_the_count_when_the_window_has_passed() {
        let mut c = SweepCounter::new(2, 900);
        assert!(!c.submit("a", 0, 1));
        assert!(!c.submit("a", 10, 1));
        assert!(c.submit("a", 899, 1), "the job at 0 is still within 900 s");
        // At 900 the job at 0 has left (a job stays exactly `window`
        // seconds); those at 10 and 899 remain.
        assert!(c.submit("a", 900, 1));
        // At 1799 the jobs at 10 and 899 have left: only 900 remains.
        assert!(!c.submit("a", 1799, 1));
        // After a quiet window the account starts again from 0.
        assert!(!c.submit("a", 5000, 1));
    }

    #[test]
    fn an_array_is_a_sweep_when_its_tasks_pass_the_limit() {
        let mut c = SweepCounter::new(16, 900);
        assert!(!c.submit("a", 0, 16), "16 tasks fit a limit of 16");
        assert!(c.submit("a", 1, 1), "the 17th is a sweep");
        let mut c = SweepCounter::new(16, 900);
        assert!(c.submit("a", 0, 17));
        assert!(c.submit("a", 1, 1), "the array's tasks count");
    }

    #[test]
    fn counts_for_the_settings_it_was_made_with() {
        let w = PriorityWeights {
            sweep_jobs: 16,
            ..PriorityWeights::default()
        };
        let c = SweepCounter::<&str>::of(&w);
        assert!(c.counts_for(&w));
        assert!(!c.counts_for(&PriorityWeights { sweep_jobs: 8, ..w }));
        assert!(!c.counts_for(&PriorityWeights {
            sweep_window: 60,
            ..w
        }));
    }

    #[test]
    fn limit_zero_is_off() {
        let mut c = SweepCounter::new(0, 900);
        assert!(c.is_off());
        assert!((0..1000).all(|t| !c.submit("a", t, 1)));
    }

    #[test]
    fn times_out_of_order_keep_more_in_the_window_not_less() {
        let mut c = SweepCounter::new(2, 100);
        assert!(!c.submit("a", 500, 1));
        assert!(!c.submit("a", 450, 1));
        assert!(c.submit("a", 520, 1));
    }
}
