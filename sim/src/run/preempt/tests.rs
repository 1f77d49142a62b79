//! Scenarios of preemption: victims, requeue points, the victim budget, a preemptor's wait.

use crate::testutil::*;
use crate::*;

/// Two teams of equal share on 8 GPUs; t1 holds all 8 in four 2-GPU jobs
/// past their 1 h contracts; at 2 h t2 submits a 4-GPU job. Expected:
/// exactly two victims (two of t1's jobs, 4 GPUs), at 2 h, and then no
/// other preemption for the rest of the run (t1's requeued jobs rank below
/// t2 for as long as t2's job runs: stable).
#[test]
fn four_by_two_then_a_four_gpu_job_makes_exactly_two_victims() {
    let c = config(TWO_TEAMS);
    let mut jobs: Vec<TraceJob> = (1..=4).map(|i| job(i, "t1", 0, 2 * 86_400, 2)).collect();
    jobs.push(job(5, "t2", 7200, 86_400, 4));
    let r = run(&c, jobs.clone(), ONE_NODE, Policy::Allot);
    assert_eq!(r.preemptions, 2, "{:#?}", r.preemption_log);
    for p in &r.preemption_log {
        assert_eq!((p.time, p.preemptor, p.victim_team), (7200, 5, 0));
        assert!(p.victim_run_time >= 3600);
    }
    assert_eq!(r.waits.iter().map(|w| w.jobs).sum::<u64>(), 5);
    assert_eq!(r.finished, 5);
    // t2 started at once (wait 0); nothing else was disturbed.
    assert_eq!(r.teams[1].wait_p50_s, 0);
    assert_eq!(r.teams[0].preempted, 2);
    let w = Workload::prepare(&trace::from_jobs(jobs, vec![]), &c, &sim_of(&c), ONE_NODE);
    check_invariants(&r, &w);
}

/// A burst of short jobs of a team below its entitlement: debug work and
/// sweep alike take what the team is owed (4 GPUs of t2's jobs past their
/// contract), in the team's own order (debug work first): between teams
/// the shape gives no privilege and costs none (fairshare::owed).
#[test]
fn a_sweep_and_debug_work_take_what_their_team_is_owed() {
    // t2 fills the node with 8 one-GPU jobs of 10 h (unprotected after
    // 1 h); at 2 h t1 submits 4 short jobs of 10 min in the same second.
    let jobs = || {
        let mut v: Vec<TraceJob> = (0..8).map(|i| job(i, "t2", 0, 36_000, 1)).collect();
        v.extend((8..12).map(|i| job(i, "t1", 7200, 600, 1)));
        v
    };
    let base = format!("{TWO_TEAMS}\n[priority]\nshort_max_gpus = 2\nsweep_jobs = 2\n");
    let c = config(&base);
    let t = trace::from_jobs(jobs(), Vec::new());
    let w = Workload::prepare(&t, &c, &sim_of(&c), ONE_NODE);
    let sweeps: Vec<u64> = w.jobs.iter().filter(|j| j.sweep).map(|j| j.id).collect();
    assert_eq!(sweeps, [10, 11], "the third and fourth short job of t1");
    let r = run(&c, jobs(), ONE_NODE, Policy::Allot);
    assert_eq!(r.preemptions, 4, "{:#?}", r.preemption_log);
    assert!(r
        .preemption_log
        .iter()
        .all(|p| p.time == 7200 && p.victim_team == 1));
    let (debug, sweep) = (
        &r.waits[JobClass::Debug as usize],
        &r.waits[JobClass::Sweep as usize],
    );
    assert_eq!((debug.jobs, debug.p90_s), (2, 0));
    assert_eq!((sweep.jobs, sweep.p90_s), (2, 0));
    check_invariants(&r, &w);
}

#[test]
fn a_job_past_its_contract_is_preempted_at_its_next_requeue_point() {
    // t1 holds the node with jobs of 10 h; t2 asks for 4 GPUs at 1 h 10 min,
    // when t1's jobs are past their 1 h contract.
    let jobs = || {
        vec![
            job(1, "t1", 0, 36_000, 4),
            job(2, "t1", 0, 36_000, 4),
            job(3, "t2", 4200, 600, 4),
        ]
    };
    let any_time = run(&config(TWO_TEAMS), jobs(), ONE_NODE, Policy::Allot);
    let points = run(
        &config(&TWO_TEAMS.replace(
            "[contract]\n",
            "[contract]\nrequeue_period = \"30:00\"\nrequeue_window = \"5:00\"\n",
        )),
        jobs(),
        ONE_NODE,
        Policy::Allot,
    );
    // Without requeue points the victim goes at once and loses the 10 min
    // since its checkpoint at 1 h; with them t2 waits for the point at
    // 1 h 30 min (the next backfill pass at or after it) and nothing is lost.
    let at = |r: &SimReport| r.preemption_log.iter().map(|p| p.time).collect::<Vec<_>>();
    assert_eq!(at(&any_time), [4200]);
    assert_eq!(any_time.lost_gpu_hours, 4.0 * 600.0 / 3600.0);
    assert_eq!(at(&points), [5400]);
    assert_eq!(points.lost_gpu_hours, 0.0);
    assert_eq!(points.finished, 3);
}

/// `[sim] victim_budget`: t1 holds 12 of 16 GPUs (entitled 8 once t2 asks
/// 8): its old job A shares a node with 4 free GPUs, its two younger jobs
/// fill the other. t2's 8-GPU job fits by preempting A alone, which leaves
/// t1 at its entitlement; counted cluster-wide, t1's youngest job uses up
/// what it may lose and A is never looked at; counted per node (as the
/// preempt plugin does) it is.
#[test]
fn a_team_may_lose_its_allowance_on_each_node_with_node() {
    let jobs = || {
        vec![
            job(1, "t1", 0, 36_000, 4),
            job(2, "t2", 0, 5, 4),
            job(3, "t1", 1, 36_000, 4),
            job(4, "t1", 2, 36_000, 4),
            job(5, "t2", 3700, 600, 8),
        ]
    };
    let run_with = |budget: &str| {
        run(
            &config(&format!(
                "{TWO_TEAMS}\n[sim]\nvictim_budget = \"{budget}\"\n"
            )),
            jobs(),
            TWO_NODES,
            Policy::Allot,
        )
    };
    let (cluster, node) = (run_with("cluster"), run_with("node"));
    assert_eq!(cluster.preemptions, 0, "{:#?}", cluster.preemption_log);
    let by = |r: &SimReport| {
        r.preemption_log
            .iter()
            .map(|p| (p.time, p.preemptor, p.victim))
            .collect::<Vec<_>>()
    };
    assert_eq!(by(&node), vec![(3700, 5, 1)]);
    assert_eq!((cluster.finished, node.finished), (5, 5));
}

/// `[sim] preemptor_start`: t1 holds the node with two 10 h jobs; t2's
/// 4-GPU job arrives at 4200, past their 1 h contracts, and preempts one.
/// `at_once` starts it on the victim's GPUs that second; `next_pass` (as
/// slurmctld) leaves it pending until a later pass: the next backfill, at
/// 4230 with passes every 30 s.
#[test]
fn a_preemptor_starts_in_a_later_pass_with_next_pass() {
    let jobs = || {
        vec![
            job(1, "t1", 0, 36_000, 4),
            job(2, "t1", 0, 36_000, 4),
            job(3, "t2", 4200, 600, 4),
        ]
    };
    let wait = |extra: &str| {
        let r = run(
            &config(&format!("{TWO_TEAMS}\n[sim]\n{extra}")),
            jobs(),
            ONE_NODE,
            Policy::Allot,
        );
        assert_eq!((r.preemptions, r.finished), (1, 3));
        assert_eq!(r.preemption_log[0].time, 4200);
        r.teams[1].wait_p50_s
    };
    assert_eq!(wait(""), 0);
    assert_eq!(wait("preemptor_start = \"next_pass\"\n"), 30);
    let e = sim_error("preemptor_start = \"later\"\n");
    assert!(
        e.contains("sim.preemptor_start") && e.contains("\"next_pass\""),
        "{e}"
    );
}

/// `[sim] repreempt_delay`: t1 holds two nodes with eight 10 h jobs of 2
/// GPUs; t2's 4-GPU job (9) preempts two at 4200 and waits for a later
/// pass; t2's short job (10, short band: first in priority) arriving at
/// 4210 takes two of the freed GPUs. Job 9 preempts again at once (4210),
/// or with a 60 s delay (slurmctld: KillWait + MessageTimeout) only at
/// 4260.
#[test]
fn a_preemptor_that_lost_its_gpus_preempts_again_after_the_delay() {
    let base = format!(
        "{TWO_TEAMS}\n[priority]\nshort_max_gpus = 2\nshort_max_time = \"1:00:00\"\n[sim]\npreemptor_start = \"next_pass\"\n"
    );
    let jobs = || {
        let mut v: Vec<TraceJob> = (1..=8).map(|i| job(i, "t1", 0, 36_000, 2)).collect();
        v.push(job(9, "t2", 4200, 600, 4));
        v.push(job(10, "t2", 4210, 600, 2));
        v
    };
    let times = |extra: &str| {
        let r = run(
            &config(&format!("{base}{extra}")),
            jobs(),
            TWO_NODES,
            Policy::Allot,
        );
        assert_eq!(r.finished, 10);
        r.preemption_log
            .iter()
            .map(|p| (p.time, p.preemptor))
            .collect::<Vec<_>>()
    };
    assert_eq!(times(""), [(4200, 9), (4200, 9), (4210, 9)]);
    assert_eq!(
        times("repreempt_delay = \"1:00\"\n"),
        [(4200, 9), (4200, 9), (4260, 9)]
    );
}

/// `[sim] victim_complete_ms`: t1 holds the node with two 10 h jobs; t2's
/// 4-GPU job arrives at 4200.1 s, past their 1 h contracts, and preempts
/// one in the backfill pass at 900 ms. The main pass follows at 905 ms:
/// with the victim's GPUs free once the backfill pass ends it starts the
/// preemptor there (wait 0 s); with them busy 28 ms more (slurmctld: the
/// victim is COMPLETING until its epilog reports) it cannot, and the next
/// backfill, at 4201.9 s, does (wait 1 s).
#[test]
fn a_victims_gpus_stay_busy_for_victim_complete_ms() {
    let jobs = || {
        vec![
            job(1, "t1", 0, 36_000, 4),
            job(2, "t1", 0, 36_000, 4),
            TraceJob {
                submit_ms: Some(100),
                ..job(3, "t2", 4200, 600, 4)
            },
        ]
    };
    let base = "preemptor_start = \"next_pass\"\nrepreempt_delay = \"0:12\"\nbackfill_interval = \"0:01\"\nsched_interval = \"0:02\"\nmain_phase_ms = 905\npass_miss_ms = 100\n";
    let wait = |extra: &str| {
        let r = run(
            &config(&format!("{TWO_TEAMS}\n[sim]\n{base}{extra}")),
            jobs(),
            ONE_NODE,
            Policy::Allot,
        );
        assert_eq!((r.preemptions, r.finished), (1, 3));
        assert_eq!(r.preemption_log[0].time, 4200);
        r.teams[1].wait_p50_s
    };
    assert_eq!(wait(""), 0);
    assert_eq!(wait("victim_complete_ms = 28\n"), 1);
    for (sim, fix) in [
        ("victim_complete_ms = 28\n", "needs a sched_interval"),
        ("sched_interval = \"0:02\"\nvictim_complete_ms = 28\n", "next_pass"),
        (
            "sched_interval = \"0:02\"\npreemptor_start = \"next_pass\"\nvictim_complete_ms = 1000\n",
            "0-999",
        ),
    ] {
        let e = sim_error(sim);
        assert!(e.contains("sim.victim_complete_ms") && e.contains(fix), "{e}");
    }
}
