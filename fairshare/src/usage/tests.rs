use proptest::prelude::*;

use super::*;

const H: u64 = 3600;
const T0: u64 = 1_700_000_000;

#[test]
fn a_busy_gpu_hour_inside_the_window_is_exactly_3600() {
    let mut u = UsageTracker::new(7 * 86_400, T0);
    u.add_closed("a1", 1, T0 - 2 * H, T0 - H);
    assert_eq!(u.occupancy("a1"), 3600);
    u.add_closed("a1", 4, T0 - 2 * H, T0 - H); // four more GPUs
    assert_eq!(u.occupancy("a1"), 5 * 3600);
    assert_eq!(u.occupancy("nobody"), 0);
}

#[test]
fn a_job_straddling_the_window_edge_counts_only_the_overlap() {
    let w = 10 * H;
    let mut u = UsageTracker::new(w, T0);
    // Ran from 12 h ago to 9 h ago: only the last hour is inside.
    u.add_closed("a", 2, T0 - 12 * H, T0 - 9 * H);
    assert_eq!(u.occupancy("a"), 2 * H);
    // Half an hour later, half of that hour has slid out.
    u.advance_to(T0 + H / 2).unwrap();
    assert_eq!(u.occupancy("a"), H);
    u.advance_to(T0 + H).unwrap();
    assert_eq!(u.occupancy("a"), 0);
    // A job entirely older than the window counts nothing.
    u.add_closed("b", 8, T0 - 30 * H, T0 - 20 * H);
    assert_eq!(u.occupancy("b"), 0);
}

#[test]
fn running_jobs_count_their_elapsed_part() {
    let mut u = UsageTracker::new(86_400, T0);
    let h = u.add_running("a", 4, T0 - 100);
    assert_eq!(u.occupancy("a"), 400);
    u.advance_to(T0 + 50).unwrap();
    assert_eq!(u.occupancy("a"), 600);
    assert!(u.close(h, T0 + 50));
    assert!(!u.close(h, T0 + 50), "closing twice is refused");
    u.advance_to(T0 + 5000).unwrap();
    assert_eq!(u.occupancy("a"), 600);
    assert_eq!(u.open_charges(), 0);
}

#[test]
fn a_charged_minimum_runtime_accrues_as_the_window_reaches_it() {
    // A 1-GPU job ran 10 min with a 1 h minimum runtime: charged [start, start + 1 h).
    let mut u = UsageTracker::new(86_400, T0);
    let h = u.add_running("a", 1, T0);
    u.advance_to(T0 + 600).unwrap();
    let end = crate::contract::ContractPolicy::default()
        .charged_end(T0, T0 + 600, H)
        .unwrap();
    u.close(h, end);
    assert_eq!(u.occupancy("a"), 600);
    u.advance_to(T0 + 2 * H).unwrap();
    assert_eq!(u.occupancy("a"), 3600);
}

#[test]
fn time_cannot_go_back() {
    let mut u = UsageTracker::new(100, T0);
    assert_eq!(
        u.advance_to(T0 - 1),
        Err(TimeWentBack {
            now: T0,
            requested: T0 - 1
        })
    );
    assert_eq!(u.now(), T0);
}

#[test]
fn old_changes_are_dropped_as_they_slide_out() {
    let mut u = UsageTracker::new(H, T0);
    for i in 0..1000 {
        u.add_closed("a", 1, T0 + i * 10, T0 + i * 10 + 5);
    }
    assert_eq!(u.changes.len(), 2000);
    u.advance_to(T0 + 20_000).unwrap();
    assert_eq!(
        u.changes.len(),
        0,
        "nothing left in the window, nothing kept"
    );
    assert_eq!(u.occupancy("a"), 0);
}

#[derive(Debug, Clone)]
enum Op {
    Closed {
        account: u8,
        rate: u8,
        start: u16,
        len: u16,
    },
    Running {
        account: u8,
        rate: u8,
        start: u16,
    },
    Close {
        which: u8,
        after: u16,
    },
    Advance(u16),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..3, 0u8..5, 0u16..3000, 0u16..800).prop_map(|(account, rate, start, len)| {
            Op::Closed {
                account,
                rate,
                start,
                len,
            }
        }),
        (0u8..3, 1u8..5, 0u16..3000).prop_map(|(account, rate, start)| Op::Running {
            account,
            rate,
            start
        }),
        (0u8..8, 0u16..500).prop_map(|(which, after)| Op::Close { which, after }),
        (0u16..400).prop_map(Op::Advance),
    ]
}

/// Brute force: rescan every interval.
fn model(intervals: &[(u8, u64, u64, Option<u64>)], account: u8, now: u64, window: u64) -> u64 {
    let back = now.saturating_sub(window);
    intervals
        .iter()
        .filter(|i| i.0 == account)
        .map(|&(_, rate, s, e)| {
            let e = e.unwrap_or(u64::MAX).min(now);
            let s = s.max(back);
            rate * e.saturating_sub(s)
        })
        .sum()
}

proptest! {
    #[test]
    fn incremental_matches_brute_force(window in 1u64..1500, ops in prop::collection::vec(op(), 1..60)) {
        let base = 1000u64;
        let mut u = UsageTracker::new(window, base);
        let mut intervals: Vec<(u8, u64, u64, Option<u64>)> = Vec::new();
        let mut open: Vec<(OpenCharge, usize)> = Vec::new();
        for op in ops {
            match op {
                Op::Closed { account, rate, start, len } => {
                    let s = u64::from(start);
                    u.add_closed(&account.to_string(), u64::from(rate), s, s + u64::from(len));
                    intervals.push((account, u64::from(rate), s, Some(s + u64::from(len))));
                }
                Op::Running { account, rate, start } => {
                    let s = u64::from(start);
                    let h = u.add_running(&account.to_string(), u64::from(rate), s);
                    intervals.push((account, u64::from(rate), s, None));
                    open.push((h, intervals.len() - 1));
                }
                Op::Close { which, after } => {
                    if !open.is_empty() {
                        let (h, idx) = open.remove(usize::from(which) % open.len());
                        let end = intervals[idx].2 + u64::from(after);
                        prop_assert!(u.close(h, end));
                        intervals[idx].3 = Some(end);
                    }
                }
                Op::Advance(dt) => u.advance_to(u.now() + u64::from(dt)).unwrap(),
            }
            for a in 0..3u8 {
                prop_assert_eq!(u.occupancy(&a.to_string()), model(&intervals, a, u.now(), window));
            }
        }
    }
}
