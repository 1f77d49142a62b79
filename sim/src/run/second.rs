//! One second of the replay with `sched_interval` set: slurmctld's two
//! scheduling passes at their offsets into the second, and the second's
//! arrivals and job ends in between, in the order of their offsets.
//!
//! What the testbed's slurmctld.log shows, and this models:
//! - the main scheduler runs every `sched_interval`, the backfill every
//!   `backfill_interval` while a job is pending, each at its own offset
//!   into the second (`main_phase_ms`, `1000 - pass_miss_ms`);
//! - both offsets drift later by `pass_drift_us` a second (the main pass
//!   by `main_drift_us` where given): the backfill
//!   sleeps `bf_interval` after each pass *ends* (backfill.c's agent), so
//!   each pass starts later by the last one's run time; an offset that
//!   passes the second's end moves the pass to the next second's start;
//! - a job submitted earlier in the second than a pass is in it (its
//!   offset: the trace's `submit_ms`, else seeded);
//! - a job starts at the offset of the pass that starts it and ends
//!   `attempt_overhead_ms` after that offset plus its run time: its end
//!   frees its GPUs for the passes after that offset;
//! - a drain or failure with the trace's `submit_ms` happens at that
//!   offset (`scontrol update state=drain` between two passes);
//! - with `drain_pass_ms` the sidecar acts on a drain at that offset into
//!   a `sync.interval` tick's second, and requeues a drained node's job at
//!   that offset into the second its contract ends;
//! - with `backfill_idle = "skip"` a backfill pass runs only if a job or
//!   node changed in the second the last one ran or later;
//! - with `victim_complete_ms` a preempted job's GPUs come back that long
//!   after the offset of the pass that preempted it (it is COMPLETING
//!   until then), for the passes after that offset.
//!
//! All offsets are in microseconds here (`_us`), seconds since the trace's
//! first submission times 1,000,000 plus the offset.

use super::*;

/// One microsecond short of a second: `pass_miss_ms = 0` puts the backfill
/// after every arrival and job end of its second, not in the next one.
const LAST_US: u64 = 999_999;

impl Sim<'_> {
    /// The first pass of a series (the first at `first_us`, then every
    /// `period_s` seconds and `drift_us` microseconds more each second) in
    /// second `t` or later: (its second, its offset into it, µs).
    fn pass_from(first_us: u64, period_s: u64, drift_us: u64, t: u64) -> (u64, u64) {
        let period = period_s * (1_000_000 + drift_us);
        let from = t * 1_000_000;
        let k = if from <= first_us {
            0
        } else {
            (from - first_us).div_ceil(period)
        };
        let at = first_us + k * period;
        (at / 1_000_000, at % 1_000_000)
    }

    /// [`Sim::pass_from`] with the instants the passes were seen at
    /// (`seen`, µs since second 0, ascending): between two seen passes `n`
    /// passes fall evenly, `n` the whole periods (of `period_s` seconds
    /// and the drift) nearest their gap, so each seen pass is a pass;
    /// before the first and after the last, the series runs on from the
    /// nearest at its period. Empty `seen`: the series from `first_us`.
    fn pass_from_seen(
        seen: &[u64],
        first_us: u64,
        period_s: u64,
        drift_us: u64,
        t: u64,
    ) -> (u64, u64) {
        let (Some(&lo), Some(&hi)) = (seen.first(), seen.last()) else {
            return Self::pass_from(first_us, period_s, drift_us, t);
        };
        let period = period_s * (1_000_000 + drift_us);
        let from = t * 1_000_000;
        let at = if from <= lo {
            lo - (lo - from) / period * period
        } else if from > hi {
            hi + (from - hi).div_ceil(period) * period
        } else {
            // seen[i - 1] < from <= seen[i].
            let i = seen.partition_point(|&x| x < from);
            let (a, b) = (seen[i - 1], seen[i]);
            let n = ((b - a + period / 2) / period).max(1);
            // The k-th pass after `a`: a + k (b - a) / n, the first at or
            // after `from` (k = n is `b` itself).
            let k = ((from - a) * n).div_ceil(b - a);
            a + k * (b - a) / n
        };
        (at / 1_000_000, at % 1_000_000)
    }

    /// The main pass of second `t`, if any, as its offset (µs), and the
    /// second of the next main pass after `t` (`super::main_loop`).
    pub(super) fn main_pass_at(&mut self, t: u64) -> (Option<u64>, u64) {
        self.main_loop.pass_at(t)
    }

    /// The backfill pass of second `t`, if one falls in it, as its offset
    /// (µs), and the second of the next one after `t`.
    pub(super) fn backfill_pass_at(&self, t: u64) -> (Option<u64>, u64) {
        let s = self.sim;
        let first = ((1000 - s.pass_miss_ms.min(1000)) * 1000).min(LAST_US);
        let iv = s.backfill_interval.max(1);
        let seen = &s.backfill_passes_us;
        let at = |t| Self::pass_from_seen(seen, first, iv, s.pass_drift_us, t);
        let (second, off) = at(t);
        ((second == t).then_some(off), at(t + 1).0)
    }

    /// Second `t`'s events, arrivals, job ends and passes (`sched_interval`
    /// set). Sets `bf_blocked`.
    pub(super) fn second_with_passes(&mut self, t: u64) {
        // Job ends and node events at their offsets (µs); the rest now.
        let mut timed = std::mem::take(&mut self.pass_ends);
        while let Some(&Reverse((et, kind, a, b))) = self.events.peek() {
            if et != t {
                break;
            }
            self.events.pop();
            self.m.events += 1;
            let at = match kind {
                COMPLETE => Some(u64::from(self.jobs[a as usize].end_us)),
                NODE_START => self.node_events[a as usize]
                    .at_ms
                    .map(|ms| u64::from(ms) * 1000),
                DRAIN_PASS | DRAIN_REQUEUE => self.sim.drain_pass_ms.map(|ms| ms * 1000),
                VICTIM_DONE => Some(u64::from(b)),
                _ => None,
            };
            match at {
                Some(at) => timed.push((at, kind, a, b)),
                None => self.handle(kind, a, b),
            }
        }
        let first = self.next_arrival as u32;
        while self
            .w
            .jobs
            .get(self.next_arrival)
            .is_some_and(|j| j.submit == t)
        {
            self.next_arrival += 1;
            self.m.events += 1;
        }
        let arrivals = first..self.next_arrival as u32;
        timed.append(&mut self.timed_later);
        // `snapshot_phase = "seeded"` or `"clock"`: a tick that fell in a second with no
        // events (nothing changed since) is taken before this second's.
        let snapshot = self.snapshot_us();
        if snapshot.is_some() && self.engine.is_some() && self.next_refresh < t {
            self.refresh_at_tick();
            // `t` > `next_refresh` >= 0: a tick itself if the first after t - 1.
            if self.tick_after(t - 1) == t {
                self.next_refresh = t;
            }
        }
        let tick = snapshot.filter(|_| self.next_refresh == t);
        // In the order of their offsets: each step below applies a prefix.
        timed.sort_unstable();
        self.bf_blocked = false;
        // The second's passes in the order of their offsets (main first on
        // a tie); `None`: that pass does not run in this second.
        let main = self.main_pass_at(t).0;
        let backfill = self.backfill_pass_at(t).0;
        // (offset, kind: 0 the engine snapshot, 1 main, 2 backfill); on a
        // tie the snapshot first, then main.
        let mut passes = [(tick, 0u8), (main, 1), (backfill, 2)];
        passes.sort_by_key(|&(at, kind)| (at.unwrap_or(u64::MAX), kind));
        // Arrivals and job ends with an offset below `seen` are done.
        let mut seen = 0;
        for (at, kind) in passes {
            let Some(at) = at else { continue };
            self.arrive(arrivals.clone(), seen, at);
            self.apply_timed(&mut timed, at);
            seen = at;
            self.pass_us = Some(at);
            match kind {
                0 => self.refresh_at_tick(),
                1 => {
                    self.pass(false);
                }
                // backfill.c `_more_work`: nothing changed since the
                // second the last pass ran (the agent looks every
                // backfill_interval; after a change in second c its passes
                // run up to c + backfill_interval), no pass.
                _ if self.sim.backfill_idle == BackfillIdle::Skip
                    && self.last_change + self.sim.backfill_interval.max(1) < t => {}
                _ => self.bf_blocked = self.pass(true),
            }
            self.pass_us = None;
        }
        // After the second's passes: ends free their GPUs for the next
        // second's; arrivals are first seen in it.
        self.apply_timed(&mut timed, u64::MAX);
        for id in arrivals {
            if self.submit_phase_ms(id) * 1000 >= seen {
                self.log_submit_priority(id);
                self.enqueue_at(id, t + 1);
            }
        }
        self.backfill_now = false;
        self.pass_ends = timed;
    }

    /// Queues the arrivals `ids` whose submit offset is in `lo..hi` µs.
    fn arrive(&mut self, ids: std::ops::Range<u32>, lo: u64, hi: u64) {
        for id in ids {
            if (lo..hi).contains(&(self.submit_phase_ms(id) * 1000)) {
                self.log_submit_priority(id);
                self.enqueue_at(id, self.now);
            }
        }
    }

    /// Applies the events at the front of `timed` (offset µs, kind, a, b;
    /// sorted) whose offset is below `hi`; the rest stay.
    /// An event a handler or a pass times later in this second
    /// ([`Sim::timed_later`]: a drain's pass, a victim's completion) joins
    /// them in order, and is applied too if below `hi`.
    fn apply_timed(&mut self, timed: &mut Vec<(u64, u8, u32, u32)>, hi: u64) {
        let mut k = 0;
        loop {
            if !self.timed_later.is_empty() {
                timed.drain(..k);
                k = 0;
                timed.append(&mut self.timed_later);
                timed.sort_unstable();
            }
            if k >= timed.partition_point(|e| e.0 < hi) {
                break;
            }
            let (_, kind, a, b) = timed[k];
            k += 1;
            self.handle(kind, a, b);
        }
        timed.drain(..k);
    }
}

#[cfg(test)]
mod tests;
