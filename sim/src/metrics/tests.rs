//! Scenarios of the metrics: GPU-seconds and shares over time.

use super::*;
use crate::testutil::*;
use crate::*;

#[test]
fn spans_split_at_hour_edges() {
    let mut b = Vec::new();
    add_span(&mut b, 3000, 7800, 2);
    assert_eq!(b, vec![1200, 7200, 1200]);
    add_span(&mut b, 0, 3600, 1);
    assert_eq!(b[0], 4800);
}

#[test]
fn waterfill_caps_at_demand() {
    let f = waterfill(100.0, &[0.5, 0.5], &[10.0, 1000.0]);
    assert_eq!(f, vec![10.0, 90.0]);
    let f = waterfill(100.0, &[0.25, 0.75], &[1000.0, 1000.0]);
    assert_eq!(f, vec![25.0, 75.0]);
    let f = waterfill(100.0, &[1.0, 0.0], &[10.0, 50.0]);
    assert_eq!(f, vec![10.0, 50.0]);
    assert_eq!(percentile(&[1, 2, 3, 4], 50.0), 2);
    assert_eq!(percentile(&[1, 2, 3, 4], 99.0), 4);
}

#[test]
fn a_preemption_answered_inside_the_first_preemptors_contract_is_a_reversal() {
    let rec = |time, preemptor_team, victim_team, preemptor_short| PreemptionRecord {
        time,
        snapshot: 0,
        preemptor: 0,
        preemptor_team,
        preemptor_rank: 0,
        victim: 0,
        victim_team,
        victim_rank: 0,
        victim_min_runtime: 3600,
        victim_run_time: 3600,
        preemptor_short,
        preemptor_min_runtime: 3600,
        victim_left_below: false,
    };
    // 0 takes from 1; 1 answers at 3599 s: one reversal. 2 takes from
    // 0 at 4000 s; 0 answers with a short job (never counts), then at
    // 7600 s, when 2's job has run its 1 h contract: none.
    let log = [
        rec(0, 0, 1, false),
        rec(3599, 1, 0, false),
        rec(4000, 2, 0, false),
        rec(5000, 0, 2, true),
        rec(7600, 0, 2, false),
    ];
    assert_eq!(reversals(&log), 1);
    assert_eq!(reversals(&log[2..]), 0);
}

#[test]
fn a_fully_busy_hour_is_3600_gpu_seconds_per_gpu() {
    let c = config(TWO_TEAMS);
    let r = run(
        &c,
        vec![job(1, "t1", 0, 3 * 3600, 8)],
        ONE_NODE,
        Policy::Allot,
    );
    assert_eq!(r.hourly.capacity, vec![8 * 3600; 3]);
    assert_eq!(r.hourly.got[0], vec![8 * 3600; 3]);
    assert_eq!(r.occupancy, 1.0);
    assert_eq!(r.gpu_hours, 24.0);
}

/// Two equal teams; t1 fills a 16-GPU cluster alone for a day (window 1 d),
/// then t2 arrives with as much work. Expected: within one window length
/// after t2 arrives, the window shares (what Fair Tree compares) are 50/50
/// within 8 points, and stay there while both want more than half.
#[test]
fn two_equal_teams_converge_to_half_within_a_window() {
    let c = config(&TWO_TEAMS.replace("window = \"7-0\"", "window = \"1-0\""));
    let cluster = ClusterSpec {
        nodes: 2,
        gpus_per_node: 8,
    };
    let mut jobs = Vec::new();
    for i in 0..300 {
        jobs.push(job(i, "t1", 0, 4 * 3600, 1));
        jobs.push(job(1000 + i, "t2", 86_400, 4 * 3600, 1));
    }
    let r = run(&c, jobs.clone(), cluster, Policy::Allot);
    let alloc = [0.5, 0.5];
    let shares = r.hourly.rolling_shares(&alloc, 24, 1);
    for (h, s, fair) in &shares[47..72] {
        assert!(
            (s[1] - 0.5).abs() <= 0.08,
            "hour {h}: t2 share {:.3} (fair {:?})",
            s[1],
            fair
        );
    }
    // Before t2 arrived, t1 had everything.
    assert_eq!(shares[23].1, vec![1.0, 0.0]);
    let w = Workload::prepare(&trace::from_jobs(jobs, vec![]), &c, &sim_of(&c), cluster);
    check_invariants(&r, &w);
    assert!(r.preemptions > 0);
}
