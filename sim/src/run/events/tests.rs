//! Node events: failures, drains, the sidecar's drain pass.

use crate::testutil::*;
use crate::*;

#[test]
fn node_failures_and_drains() {
    let c = config(TWO_TEAMS);
    let cluster = ClusterSpec {
        nodes: 2,
        gpus_per_node: 8,
    };
    let jobs = vec![job(1, "t1", 0, 4 * 3600, 8), job(2, "t2", 0, 4 * 3600, 8)];
    let events = vec![
        NodeEvent {
            node: 0,
            at: 1800,
            duration: 3600,
            kind: NodeEventKind::Fail,
            at_ms: None,
        },
        NodeEvent {
            node: 1,
            at: 600,
            duration: 7200,
            kind: NodeEventKind::Drain,
            at_ms: None,
        },
        NodeEvent {
            node: 9,
            at: 600,
            duration: 60,
            kind: NodeEventKind::Drain,
            at_ms: None,
        },
    ];
    let t = trace::from_jobs(jobs, events);
    let w = Workload::prepare(&t, &c, &sim_of(&c), cluster);
    let r = simulate(
        &w,
        c.clone(),
        &sim_of(&c),
        cluster,
        Policy::Allot,
        &t.events,
        &mut |_| {},
    );
    assert_eq!(r.fail_requeues, 1);
    // The drained node's job is requeued when its 1 h contract runs out.
    assert_eq!(r.drain_requeues, 1);
    assert_eq!(r.ignored_node_events, 1);
    assert_eq!(r.finished, 2);
    // Capacity drops by one node for the failure's hour.
    assert_eq!(r.hourly.capacity[0], 16 * 1800 + 8 * 1800);
    check_invariants(&r, &w);
    // Baselines let the drained job finish.
    let r = simulate(
        &w,
        c.clone(),
        &sim_of(&c),
        cluster,
        Policy::Fifo,
        &t.events,
        &mut |_| {},
    );
    assert_eq!((r.fail_requeues, r.drain_requeues), (1, 0));
}

/// `drain_pass_ms`: the sidecar acts on a drain at its first pass after
/// it (every `sync.interval` tick, this far into the tick's second), not at
/// the drain's instant. One 8-GPU job (a 60 s contract, started at 0) on a
/// node drained at 101.3 s for 5 s: requeued at 101 s at once, at 102 s by
/// the pass of 102.25 s; drained at 102.1 s, by that same pass; drained at
/// 102.3 s, by the pass of 104.25 s. Its second attempt runs its 1000 s in
/// full, so the GPU-seconds delivered tell when the first one ended.
#[test]
fn the_sidecar_acts_on_a_drain_at_its_next_pass() {
    let held_s = |sim: &str, at: u64, at_ms: u16| {
        let c = config(&format!(
            "{TWO_TEAMS}[sync]\ninterval = \"0:02\"\n[sim]\nsched_interval = \"0:02\"\nbackfill_interval = \"0:01\"\nresumable = false\n{sim}"
        ));
        let jobs = vec![TraceJob {
            min_runtime: Some(60),
            ..job(1, "t1", 0, 1000, 8)
        }];
        let events = vec![NodeEvent {
            node: 0,
            at,
            duration: 5,
            kind: NodeEventKind::Drain,
            at_ms: Some(at_ms),
        }];
        let r = run_with_events(&c, jobs, events, ONE_NODE, Policy::Allot);
        assert_eq!((r.drain_requeues, r.finished), (1, 1));
        (r.gpu_hours * 3600.0 / 8.0).round() as u64 - 1000
    };
    assert_eq!(held_s("", 101, 300), 101);
    assert_eq!(held_s("drain_pass_ms = 250\n", 101, 300), 102);
    assert_eq!(held_s("drain_pass_ms = 250\n", 102, 100), 102);
    assert_eq!(held_s("drain_pass_ms = 250\n", 102, 300), 104);
    // On odd ticks (`sync_offset = 1`) the drain at 101.3 s waits for 103.25 s.
    assert_eq!(
        held_s("drain_pass_ms = 250\nsync_offset = 1\n", 101, 300),
        103
    );
    let e = sim_error("drain_pass_ms = 250\n");
    assert!(
        e.contains("sim.drain_pass_ms") && e.contains("sched_interval"),
        "{e}"
    );
    let e = sim_error("sched_interval = \"0:02\"\ndrain_pass_ms = 1000\n");
    assert!(
        e.contains("sim.drain_pass_ms") && e.contains("0-999"),
        "{e}"
    );
}

/// The charge of an attempt a node failure ended (fairshare::attempts):
/// its runtime, where a drain's requeue at the contract pays the contract
/// as before. One 8-GPU 2-h job of t1 (1 h contract, not resumable) on one
/// node that fails at 10 min for a minute (or drains at 10 min for 2 h).
#[test]
fn a_node_failure_charges_the_attempt_its_runtime_only() {
    let charged = |kind: NodeEventKind, duration: u64| {
        let c = config(&format!("{TWO_TEAMS}\n[sim]\nresumable = false\n"));
        let events = vec![NodeEvent {
            node: 0,
            at: 600,
            duration,
            kind,
            at_ms: None,
        }];
        let jobs = vec![job(1, "t1", 0, 7200, 8)];
        let r = run_with_events(&c, jobs, events, ONE_NODE, Policy::Allot);
        assert_eq!(r.finished, 1);
        r.teams
            .iter()
            .find(|t| t.name == "t1")
            .unwrap()
            .charged_gpu_hours
    };
    // NODE_FAIL at 10 min: 8 GPUs x 600 s, then the 2-h rerun: 1.333 +
    // 16 GPU-h (before: the failed attempt paid its hour, 8 + 16).
    let failed = charged(NodeEventKind::Fail, 60);
    assert!(
        (failed - (8.0 * 600.0 / 3600.0 + 16.0)).abs() < 1e-9,
        "{failed}"
    );
    // Drained at 10 min: requeued at its 1 h contract, which it pays, then
    // the 2-h rerun: 8 + 16 GPU-h, unchanged.
    let drained = charged(NodeEventKind::Drain, 7200);
    assert!((drained - 24.0).abs() < 1e-9, "{drained}");
}
