//! The backfill pass: reservations, whole nodes, will-run windows, resolution, preemption.

use crate::testutil::*;
use crate::*;

/// `will_run_window`: Slurm's will-run test takes the running jobs off in
/// windows and picks the job's node among all that fit then. Node 0 runs a
/// 4-GPU job planned to end at 75 (4 GPUs free), node 1 an 8-GPU job
/// planned to end at 40. An 8-GPU job P and then a 4-GPU job Q (limit 80
/// s) arrive at 5. Exactly, P is planned on node 1 from 40 and Q starts on
/// node 0 at the first backfill pass, at 6. In windows of 30 s (the first end, 40, rounded up to
/// 60, and 30 s more) both ends come off together, node 0 (the first of
/// the two then empty) is reserved for P from 75, and Q, which would
/// overlap it, waits until P starts on node 1 at 40. With slurmctld's
/// clock 19 s ahead the first window ends at 41 + 30 and takes node 1's
/// end alone: as exactly.
#[test]
fn the_will_run_test_plans_in_windows() {
    let q_wait = |sim: &str| {
        let c = config(&format!(
            "{TWO_TEAMS}[sim]\nbackfill_interval = \"0:01\"\nbackfill_reserve = \"all\"\nbackfill_hold = \"nodes\"\nplacement = \"cons_tres\"\nnode_cpus = 16\n{sim}"
        ));
        let with_limit = |id, submit, duration, gpus, limit| TraceJob {
            time_limit: Some(limit),
            ..job(id, "t1", submit, duration, gpus)
        };
        let jobs = vec![
            with_limit(1, 0, 50, 4, 75),
            with_limit(2, 0, 40, 8, 40),
            with_limit(3, 5, 10, 8, 60),
            with_limit(4, 5, 10, 4, 80),
        ];
        let r = run(&c, jobs, TWO_NODES, Policy::Allot);
        assert_eq!((r.finished, r.preemptions), (4, 0));
        let mut w = r.wait_samples[JobClass::Batch as usize].clone();
        w.sort_unstable();
        assert_eq!(w.len(), 2, "{w:?}");
        w[1]
    };
    assert_eq!(q_wait(""), 1);
    assert_eq!(q_wait("will_run_window = \"0:30\"\n"), 35);
    assert_eq!(
        q_wait("will_run_window = \"0:30\"\nwill_run_offset = 19\n"),
        1
    );
    let e = sim_error("will_run_window = \"0:30\"\n");
    assert!(
        e.contains("sim.will_run_window") && e.contains("backfill_hold"),
        "{e}"
    );
    let e = sim_error("will_run_window = \"0:30\"\nwill_run_offset = 30\n");
    assert!(e.contains("sim.will_run_offset"), "{e}");
}

/// `[sim] backfill_reserve` with trace time limits: EASY (`first`) lets a
/// small job start on GPUs the second blocked job will need; `all`
/// (Slurm's sched/backfill) reserves them for it, so the small job waits.
#[test]
fn backfill_reserves_for_every_job_with_all() {
    let base = "[contract]\ndefault_min_runtime = \"0\"\n[tree.t1]\nshare = 1\n[tree.t2]\nshare = 1\n[sim]\nbackfill_interval = \"0:01\"\n";
    // 1 holds one node until 100; 2 half of the other until 150. 3 (8 GPUs)
    // is reserved the first node at 100, 4 (8 GPUs) the second at 150; 5 (4
    // GPUs for 200 s) fits now on the second node's free half, but would
    // hold it past 150.
    let jobs = || {
        vec![
            limited(1, "t1", 0, 100, 8),
            limited(2, "t1", 0, 150, 4),
            limited(3, "t2", 1, 100, 8),
            limited(4, "t2", 2, 100, 8),
            limited(5, "t2", 3, 200, 4),
        ]
    };
    let easy = run(&config(base), jobs(), TWO_NODES, Policy::Fifo);
    let all = run(
        &config(&format!("{base}backfill_reserve = \"all\"\n")),
        jobs(),
        TWO_NODES,
        Policy::Fifo,
    );
    assert_eq!((easy.finished, all.finished), (5, 5));
    let batch = |r: &SimReport| {
        r.waits
            .iter()
            .find(|w| w.class == JobClass::Batch)
            .unwrap()
            .p90_s
    };
    // EASY: 5 keeps off the first blocked job's node and starts at once.
    assert_eq!(batch(&easy), 0);
    // all: 5 waits for the first node to be free after 3 (at 200).
    assert_eq!(batch(&all), 200 - 3);
}

/// `[sim] backfill_hold`: t1's 4-GPU job is planned on the node when t1's
/// 6-GPU job ends at 100; t2's 2-GPU job of 200 s fits in the two GPUs free
/// now and beside that reservation's 4 GPUs (`gpus`), but not beside a
/// reservation of the whole node (`nodes`, as Slurm's sched/backfill): it
/// starts at 100 with the 4-GPU job.
#[test]
fn a_reservation_holds_its_whole_node_with_nodes() {
    let base = "[contract]\ndefault_min_runtime = \"0\"\n[tree.t1]\nshare = 1\n[tree.t2]\nshare = 1\n[sim]\nbackfill_interval = \"0:01\"\nbackfill_reserve = \"all\"\n";
    let jobs = || {
        vec![
            limited(1, "t1", 0, 100, 6),
            limited(2, "t1", 1, 100, 4),
            limited(3, "t2", 2, 200, 2),
        ]
    };
    let wait = |hold: &str| {
        let r = run(
            &config(&format!("{base}backfill_hold = \"{hold}\"\n")),
            jobs(),
            ONE_NODE,
            Policy::Fifo,
        );
        assert_eq!(r.finished, 3);
        r.waits[JobClass::Debug as usize].p90_s
    };
    assert_eq!(wait("gpus"), 0);
    assert_eq!(wait("nodes"), 100 - 2);
    let e = sim_error("backfill_hold = \"node\"\n");
    assert!(
        e.contains("sim.backfill_hold") && e.contains("\"nodes\""),
        "{e}"
    );
}

/// `[sim] backfill_candidates`: t1's 8-GPU job holds node 0 until 5000;
/// on node 1 its 4-GPU job ends at 100 beside its free-tier 2-GPU job. t2's
/// 8-GPU job cannot start or preempt now (t1's jobs are inside their
/// contracts). Planned with the free-tier job busy (`busy`), it is
/// reserved node 0 at 5000, so t2's 2-GPU job behind it starts at once on
/// node 1's two free GPUs and is still there at 100; planned with it free
/// (`free`, Slurm's will-run test) it is reserved node 1 at 100, the 2-GPU
/// job is kept off node 1, and at 100 the 8-GPU job preempts the free-tier
/// job and starts.
#[test]
fn a_reservation_counts_preemptable_jobs_free_with_free() {
    let free_tier = |id, submit, duration, gpus| TraceJob {
        min_runtime: Some(0),
        ..limited(id, "t1", submit, duration, gpus)
    };
    let jobs = || {
        vec![
            limited(1, "t1", 0, 5000, 8),
            limited(2, "t1", 0, 100, 4),
            free_tier(3, 0, 10_000, 2),
            limited(4, "t2", 10, 1000, 8),
            limited(5, "t2", 11, 1000, 2),
        ]
    };
    let run_with = |candidates: &str| {
        run(
            &config(&format!(
                "{TWO_TEAMS}\n[sim]\nbackfill_interval = \"0:01\"\nbackfill_reserve = \"all\"\nbackfill_candidates = \"{candidates}\"\n"
            )),
            jobs(),
            TWO_NODES,
            Policy::Allot,
        )
    };
    let (busy, free) = (run_with("busy"), run_with("free"));
    let by = |r: &SimReport| {
        r.preemption_log
            .iter()
            .map(|p| (p.time, p.preemptor, p.victim))
            .collect::<Vec<_>>()
    };
    assert_eq!(by(&busy), vec![(1011, 4, 3)]);
    assert_eq!(by(&free), vec![(100, 4, 3)]);
    assert_eq!((busy.finished, free.finished), (5, 5));
    let e = sim_error("backfill_candidates = \"yes\"\n");
    assert!(
        e.contains("sim.backfill_candidates") && e.contains("\"free\""),
        "{e}"
    );
}

/// `[sim] backfill_preempt`: t1 holds both nodes past its contracts; t2's
/// 16-GPU job cannot take them all (t1 keeps its entitlement) and blocks
/// the pass; t2's 4-GPU job behind it may preempt only when the backfill
/// preempts for every job it looks at (`all`, as Slurm's sched/backfill),
/// on a node the blocked job is not planned on before it ends.
#[test]
fn backfill_preempts_behind_a_blocked_job_only_with_all() {
    let base =
        format!("{TWO_TEAMS}[sim]\nbackfill_interval = \"0:01\"\nbackfill_reserve = \"all\"\n");
    let jobs = || {
        vec![
            limited(1, "t1", 0, 2 * 86_400, 8),
            limited(2, "t1", 0, 2 * 86_400, 8),
            limited(3, "t2", 7200, 3600, 16),
            limited(4, "t2", 7201, 3600, 4),
        ]
    };
    let first = run(&config(&base), jobs(), TWO_NODES, Policy::Allot);
    let all = run(
        &config(&format!("{base}backfill_preempt = \"all\"\n")),
        jobs(),
        TWO_NODES,
        Policy::Allot,
    );
    assert_eq!(first.preemptions, 0, "{:#?}", first.preemption_log);
    let by = |r: &SimReport| {
        r.preemption_log
            .iter()
            .map(|p| (p.time, p.preemptor, p.victim_team))
            .collect::<Vec<_>>()
    };
    assert_eq!(by(&all), vec![(7201, 4, 0)]);
    assert_eq!((first.finished, all.finished), (4, 4));
}

/// `[sim] backfill_resolution`: t2's 8-GPU job is planned at 100 (when
/// t1's 4-GPU job ends) to 200; exactly, that reservation keeps t3's 4-GPU
/// job of 150 s off the node until 200. Rounded down to 300 s the
/// reservation is empty ([0, 0)), so t3's job starts at once and t2's
/// waits for it (152), as slurmctld's bf_resolution lets happen.
#[test]
fn backfill_resolution_shortens_reservations_down_to_nothing() {
    let waits = |extra: &str| {
        fifo_waits_of_three_teams(
            &format!("backfill_interval = \"0:01\"\nbackfill_reserve = \"all\"\n{extra}"),
            vec![
                limited(1, "t1", 0, 100, 4),
                limited(2, "t2", 1, 100, 8),
                limited(3, "t3", 2, 150, 4),
            ],
        )
    };
    assert_eq!(waits(""), vec![0, 99, 198]);
    assert_eq!(waits("backfill_resolution = \"5:00\"\n"), vec![0, 151, 0]);
    // The same rounding with the trace's second 0 at 250 s past a multiple
    // of 300: [100, 200) becomes [50, 50), still empty.
    assert_eq!(
        waits("backfill_resolution = \"5:00\"\nresolution_offset = 250\n"),
        vec![0, 151, 0]
    );
}
