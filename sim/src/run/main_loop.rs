//! When slurmctld's main scheduler runs, with `sched_interval` set.
//!
//! The rule (Slurm 22.05 controller.c, `_slurmctld_background`): a loop
//! sleeps ten times 100 ms, reads the whole-second clock (`time(NULL)`)
//! and runs the main pass when that second is at least `sched_interval`
//! past the second the last pass read. A loop takes a little more than a
//! second (the sleeps overshoot and its own work adds), so its offset into
//! the second drifts later, by `main_drift_us` a loop (about 5 ms on the
//! testbed), and wraps past the second now and then. The passes therefore
//! keep to whole seconds `sched_interval` apart, and where the loop's
//! offset wraps right after a pass the next pass comes one loop (a
//! second) later: in one calibration run the main pass fell on odd
//! seconds at .97 s (89.97 s), then at .007 s of 97 s, on odd seconds
//! still, where a series of fixed period (2 s plus twice the drift) goes
//! on to even ones.
//!
//! The loop's wake-ups: each main pass seen in slurmctld.log
//! (`main_passes_us`) is one, and a pass; between two seen ones as many
//! loops as fit nearest, evenly; before the first and after the last one
//! every second plus the drift. Without any seen, the fitted first pass
//! (`sched_offset` s plus `main_phase_ms`) plays the one seen pass.
//!
//! All instants are microseconds since the trace's second 0.

use std::collections::VecDeque;

/// The main passes of one replay, computed as the replay asks for them.
#[derive(Debug, Clone)]
pub(super) struct MainLoop {
    /// The passes seen (ascending, never empty).
    seen: Vec<u64>,
    /// One loop, µs: a second plus the drift.
    period: u64,
    /// `sched_interval`, seconds (at least 1).
    interval: u64,
    /// Passes computed and not yet left behind, ascending.
    passes: VecDeque<u64>,
    /// The segment of the next wake-up: `k` is from `seen[k]` up to
    /// `seen[k + 1]`, the last from the last seen on.
    seg: usize,
    /// The index of the next wake-up in its segment.
    step: u64,
    /// The second the last pass read.
    last_s: u64,
}

impl MainLoop {
    /// `seen`: the passes seen (ascending; empty: `first` alone), `period`
    /// µs a loop, every `interval` s.
    pub(super) fn new(seen: &[u64], first: u64, period: u64, interval: u64) -> MainLoop {
        let seen = if seen.is_empty() {
            vec![first]
        } else {
            seen.to_vec()
        };
        let period = period.max(1);
        let interval = interval.max(1);
        // Before the first seen pass: back from it, the same rule.
        let mut back = Vec::new();
        let mut last_s = seen[0] / 1_000_000;
        let mut w = seen[0];
        while w >= period {
            w -= period;
            if last_s >= w / 1_000_000 + interval {
                last_s = w / 1_000_000;
                back.push(w);
            }
        }
        back.reverse();
        MainLoop {
            passes: back.into_iter().collect(),
            last_s: 0,
            seg: 0,
            step: 0,
            seen,
            period,
            interval,
        }
    }

    /// The next wake-up from the seen passes, and moves past it.
    fn next_wake(&mut self) -> (u64, bool) {
        let a = self.seen[self.seg];
        let Some(&b) = self.seen.get(self.seg + 1) else {
            self.step += 1;
            return (a + (self.step - 1) * self.period, self.step == 1);
        };
        let loops = ((b - a + self.period / 2) / self.period).max(1);
        let w = a + self.step * (b - a) / loops;
        let at_seen = self.step == 0;
        self.step += 1;
        if self.step == loops {
            self.seg += 1;
            self.step = 0;
        }
        (w, at_seen)
    }

    /// Computes passes until one falls at or after `until` µs.
    fn extend(&mut self, until: u64) {
        while !matches!(self.passes.back(), Some(&p) if p >= until) {
            let (w, at_seen) = self.next_wake();
            let s = w / 1_000_000;
            if at_seen || s >= self.last_s + self.interval {
                self.last_s = s;
                self.passes.push_back(w);
            }
        }
    }

    /// The pass in second `t`, if any, as its offset (µs), and the second
    /// of the next pass after `t`. `t` must not go back by more than
    /// `sched_interval` from one call to the next (passes before are
    /// forgotten).
    pub(super) fn pass_at(&mut self, t: u64) -> (Option<u64>, u64) {
        let from = t * 1_000_000;
        self.extend((t + 1) * 1_000_000);
        while self.passes.len() > 1 && self.passes[1] + self.interval * 1_000_000 < from {
            self.passes.pop_front();
        }
        let i = self.passes.partition_point(|&p| p < from);
        let this = self.passes[i];
        let here = (this / 1_000_000 == t).then_some(this % 1_000_000);
        // The last pass computed is in second t + 1 or later.
        let next = if here.is_some() {
            self.passes[i + 1]
        } else {
            this
        };
        (here, next / 1_000_000)
    }
}

#[cfg(test)]
mod tests {
    use super::MainLoop;

    fn passes(m: &mut MainLoop, to: u64) -> Vec<u64> {
        (0..to)
            .filter_map(|t| m.pass_at(t).0.map(|o| t * 1000 + o / 1000))
            .collect()
    }

    #[test]
    fn whole_seconds_apart_and_a_wrap_keeps_the_beat() {
        // A loop of 1.005 s through 87.978 s: passes on odd seconds; the
        // loop wraps past 92 s right after the pass at 91.998 s, and the
        // next pass is the next loop's, at 93.003 s (odd again; a fixed
        // period of 2.01 s would have gone on at 94.008 s).
        let mut m = MainLoop::new(&[87_978_000], 0, 1_005_000, 2);
        let p = passes(&mut m, 101);
        let tail: Vec<u64> = p.into_iter().filter(|&ms| ms >= 85_000).collect();
        assert_eq!(
            tail,
            [85_968, 87_978, 89_988, 91_998, 93_003, 95_013, 97_023, 99_033]
        );
        // The next pass's second, from a second without one.
        let mut m = MainLoop::new(&[87_978_000], 0, 1_005_000, 2);
        assert_eq!(m.pass_at(88), (None, 89));
        assert_eq!(m.pass_at(89), (Some(988_000), 91));
    }

    #[test]
    fn seen_passes_are_passes_and_loops_fall_evenly_between() {
        // Seen at 10.5 s and 20.6 s: ten loops of 1.01 s between them.
        let mut m = MainLoop::new(&[10_500_000, 20_600_000], 0, 1_000_000, 2);
        let p = passes(&mut m, 24);
        assert_eq!(
            p,
            [
                500, 2_500, 4_500, 6_500, 8_500, 10_500, 12_520, 14_540, 16_560, 18_580, 20_600,
                22_600
            ]
        );
    }

    #[test]
    fn without_seen_passes_the_fitted_first_one_anchors_the_loop() {
        let mut m = MainLoop::new(&[], 1_250_000, 1_000_000, 2);
        assert_eq!(passes(&mut m, 8), [1_250, 3_250, 5_250, 7_250]);
    }
}
