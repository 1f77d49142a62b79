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
}

/// The report's team called `name`.
fn team<'r>(r: &'r SimReport, name: &str) -> &'r TeamReport {
    r.teams.iter().find(|t| t.name == name).unwrap()
}

/// Two equal teams each submit an 8-GPU, 2-h job at 0 on one node; FIFO
/// runs t1's first. Hours 0-1 both want 8 GPUs: each is entitled to 4;
/// hours 2-3 only t2 wants any: 8. So t1 is entitled to 8 GPU-h, t2 to
/// 24; t2 is owed 16 (4 an hour) and gets 8 of them: 50%.
#[test]
fn entitlement_is_the_hourly_water_fill_and_the_floor_picks_the_worst_team_owed_enough() {
    let jobs = || vec![job(1, "t1", 0, 7200, 8), job(2, "t2", 0, 7200, 8)];
    let r = run(&config(TWO_TEAMS), jobs(), ONE_NODE, Policy::Fifo);
    assert_eq!(team(&r, "t1").entitled_gpu_hours, 8.0);
    assert_eq!(team(&r, "t2").entitled_gpu_hours, 24.0);
    assert_eq!(team(&r, "t2").owed_gpu_hours, 16.0);
    assert_eq!(team(&r, "t2").owed_delivered, 0.5);
    assert_eq!(
        team(&r, "t2").classic_wait_p90_s,
        None,
        "front ends fill it"
    );
    // The plain worst team is t2; at the default floor (100 GPU-h) no team
    // is owed enough.
    assert_eq!(r.worst_team, Some(("t2".into(), 0.5)));
    assert_eq!(r.worst_team_floor, None);
    for (floor, worst) in [(10, Some("t2")), (16, Some("t2")), (17, None)] {
        let c = config(&format!(
            "{TWO_TEAMS}\n[sim]\nworst_floor_gpu_hours = {floor}\n"
        ));
        let r = run(&c, jobs(), ONE_NODE, Policy::Fifo);
        assert_eq!(
            r.worst_team_floor.as_ref().map(|w| w.name.as_str()),
            worst,
            "floor {floor}"
        );
        if let Some(w) = &r.worst_team_floor {
            assert_eq!((w.owed_delivered, w.owed_gpu_hours), (0.5, 16.0));
        }
    }
}

/// The tree, not the flat allocation: group g (share 1) of leaves a and b
/// beside leaf c (share 1), each submitting an 8-GPU, 1-h job at 0 on one
/// node, run by FIFO in that order. Hour 0: g and c 4 each, a and b 2 each;
/// hour 1 (b and c want): b 4, c 4; hour 2: c 8.
#[test]
fn entitlement_splits_down_the_tree() {
    let c = config(
        "[tree.g]\nshare = 1\n[tree.g.a]\nshare = 1\n[tree.g.b]\nshare = 1\n[tree.c]\nshare = 1\n",
    );
    let jobs = vec![
        job(1, "a", 0, 3600, 8),
        job(2, "b", 0, 3600, 8),
        job(3, "c", 0, 3600, 8),
    ];
    let r = run(&c, jobs, ONE_NODE, Policy::Fifo);
    let got: Vec<(&str, f64)> = ["a", "b", "c"]
        .iter()
        .map(|n| (*n, team(&r, n).entitled_gpu_hours))
        .collect();
    assert_eq!(got, [("a", 2.0), ("b", 6.0), ("c", 16.0)]);
    // Entitlement splits what the teams wanted: all of it here.
    let total: f64 = r.teams.iter().map(|t| t.entitled_gpu_hours).sum();
    assert_eq!(total, r.gpu_hours);
    // Group g held 8 GPUs in hours 0 and 1, entitled to 4 each hour.
    assert_eq!(r.groups.len(), 1);
    let g = &r.groups[0];
    assert_eq!(
        (g.name.as_str(), g.teams.clone()),
        ("g", vec!["a".to_string(), "b".into()])
    );
    assert_eq!(
        (
            g.gpu_hours,
            g.entitled_gpu_hours,
            g.excess_gpu_hours,
            g.excess_peak_gpus
        ),
        (16.0, 8.0, 8.0, 4.0)
    );
}

#[test]
fn excess_counts_only_hours_above_the_entitlement() {
    // Hour 0: 2 GPU-h above; hour 1: 1 below (does not offset); hour 2: 3 above.
    let (sum, peak) = excess_gpu_s(
        &[6 * 3600, 3 * 3600, 7 * 3600],
        &[14400.0, 14400.0, 14400.0],
    );
    assert_eq!((sum / 3600.0, peak / 3600.0), (5.0, 3.0));
    assert_eq!(excess_gpu_s(&[], &[]), (0.0, 0.0));
}

#[test]
fn requeues_per_job_are_the_max_and_nearest_rank_p99() {
    let mut v = vec![0u32; 99];
    v.push(5);
    assert_eq!(
        requeues_per_job(v.clone()),
        RequeuesPerJob { max: 5, p99: 0 }
    );
    v[0] = 2;
    assert_eq!(requeues_per_job(v), RequeuesPerJob { max: 5, p99: 2 });
    assert_eq!(requeues_per_job(Vec::new()), RequeuesPerJob::default());
}

/// t1 fills the node with two 4-GPU, 3-h jobs (1-h contracts); t2, owed 4
/// GPUs, submits a 4-GPU job past them: allot requeues one of t1's jobs,
/// once. Under FIFO nothing is requeued.
#[test]
fn a_preempted_job_counts_one_requeue() {
    let jobs = || {
        vec![
            job(1, "t1", 0, 3 * 3600, 4),
            job(2, "t1", 0, 3 * 3600, 4),
            job(3, "t2", 3700, 3600, 4),
        ]
    };
    let c = config(TWO_TEAMS);
    let r = run(&c, jobs(), ONE_NODE, Policy::Allot);
    assert_eq!(r.preemptions, 1);
    assert_eq!(r.requeues_per_job, RequeuesPerJob { max: 1, p99: 1 });
    let r = run(&c, jobs(), ONE_NODE, Policy::Fifo);
    assert_eq!(r.requeues_per_job, RequeuesPerJob { max: 0, p99: 0 });
}

#[test]
fn the_worst_team_at_the_floor_skips_teams_owed_less() {
    let t = |name: &str, owed: f64, od: f64| TeamReport {
        name: name.into(),
        allocation: 0.5,
        jobs: 1,
        gpu_hours: owed * od,
        owed_gpu_hours: owed,
        delivered_gpu_hours: owed * od,
        owed_delivered: od,
        share: 0.5,
        occupancy: 0.5,
        preempted: 0,
        lost_gpu_hours: 0.0,
        wait_p50_s: 0,
        wait_p90_s: 0,
        classic_wait_p90_s: None,
        entitled_gpu_hours: owed,
        excess_gpu_hours: 0.0,
        excess_peak_gpus: 0.0,
        charged_gpu_hours: 0.0,
    };
    // A one-job tenant owed 0.4 GPU-h at 1.3% is the plain worst; the
    // floor names the worst of those that matter.
    let teams = [
        t("tiny", 0.4, 0.013),
        t("big", 500.0, 0.9),
        t("mid", 120.0, 0.8),
        t("none", 0.0, 0.0),
    ];
    let w = worst_team_above(&teams, 100.0).unwrap();
    assert_eq!(
        (w.name.as_str(), w.owed_delivered, w.owed_gpu_hours),
        ("mid", 0.8, 120.0)
    );
    assert_eq!(worst_team_above(&teams, 200.0).unwrap().name, "big");
    assert_eq!(worst_team_above(&teams, 0.0).unwrap().name, "tiny");
    assert_eq!(worst_team_above(&teams, 501.0), None);
}
