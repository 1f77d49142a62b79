//! When the ledger is polled and the plugins rebuild their engine.
//!
//! The rule, on the wall clock, for an interval of `sync.interval` seconds
//! (`k` a whole number):
//! - `allot sync --follow` starts a pass at `k * interval` seconds since the
//!   Unix epoch ([`SYNC_OFFSET_MS`]);
//! - the priority and preempt plugins each rebuild their [`crate::Engine`]
//!   half a second later, at `k * interval + 0.5 s` ([`REBUILD_OFFSET_MS`]),
//!   and at once when `scontrol reconfigure` pokes them.
//!
//! Why fixed phases: a loop that slept an interval after each pass drifted
//! by the pass's own time, so the instant the priority band was read
//! wandered through slurmctld's second and no log recorded it; the two
//! plugins (two dlopen handles, two threads) drifted apart, and the
//! simulator could only draw the phase at random (docs/simulator.md). On
//! the clock, both plugins read the same instant, the ledger they read is
//! the poll of half a second before, and the simulator replays both
//! (`[sim] snapshot_phase = "clock"`). Half a second in, the whole-second
//! `time(2)` slurmctld stamps jobs with is unambiguous, and a poll (about
//! 0.2 s on the testbed) has landed.

/// Milliseconds into the second of a tick at which `allot sync --follow`
/// starts a pass.
pub const SYNC_OFFSET_MS: u64 = 0;

/// Milliseconds into the second of a tick at which the plugins rebuild
/// their engine.
pub const REBUILD_OFFSET_MS: u64 = 500;

/// The first instant strictly after `now_ms` (milliseconds since the
/// epoch) of the form `k * interval_s * 1000 + offset_ms`, for a timer
/// every `interval_s` seconds (0 is read as 1) at `offset_ms` into its
/// second (below 1000). Returns milliseconds since the epoch.
pub fn next_tick_ms(now_ms: u64, interval_s: u64, offset_ms: u64) -> u64 {
    let period = interval_s.max(1) * 1000;
    let k = now_ms.saturating_sub(offset_ms) / period;
    let at = k * period + offset_ms;
    if at > now_ms {
        at
    } else {
        at + period
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rebuilds_fall_half_a_second_into_each_interval() {
        let next = |now, iv| next_tick_ms(now, iv, REBUILD_OFFSET_MS);
        assert_eq!(next(0, 2), 500);
        assert_eq!(next(499, 2), 500);
        assert_eq!(next(500, 2), 2500);
        assert_eq!(next(2499, 2), 2500);
        assert_eq!(next(1_700_000_001_000, 2), 1_700_000_002_500);
        assert_eq!(next(1_700_000_000_600, 60), 1_700_000_040_500);
        assert_eq!(next(7, 0), 500);
        assert_eq!(next(500, 0), 1500);
    }

    #[test]
    fn sync_passes_fall_on_whole_intervals() {
        assert_eq!(next_tick_ms(0, 2, SYNC_OFFSET_MS), 2000);
        assert_eq!(next_tick_ms(1999, 2, SYNC_OFFSET_MS), 2000);
        assert_eq!(
            next_tick_ms(1_700_000_000_001, 60, SYNC_OFFSET_MS),
            1_700_000_040_000
        );
    }

    proptest::proptest! {
        #[test]
        fn the_next_tick_is_the_first_after_now(
            now in 0u64..4_000_000_000_000,
            iv in 1u64..7200,
            offset in 0u64..1000,
        ) {
            let at = next_tick_ms(now, iv, offset);
            proptest::prop_assert!(at > now && at - now <= iv * 1000);
            proptest::prop_assert_eq!(at % (iv * 1000), offset);
        }
    }
}
