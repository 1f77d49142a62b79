//! Invariants and scenarios of the simulator, with their expected values.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use fairshare::config::Config;

const TWO_TEAMS: &str = r#"
window = "7-0"
[contract]
default_min_runtime = "1:00:00"
[tree.t1]
share = 1
[tree.t2]
share = 1
"#;

fn config(text: &str) -> Arc<Config> {
    Arc::new(Config::from_toml_str(text).unwrap())
}

/// The errors of `TWO_TEAMS` with `sim` as its `[sim]` section, which
/// must be refused.
fn sim_error(sim: &str) -> String {
    Config::from_toml_str(&format!("{TWO_TEAMS}\n[sim]\n{sim}"))
        .unwrap_err()
        .to_string()
}

fn job(id: u64, team: &str, submit: u64, duration: u64, gpus: u32) -> TraceJob {
    TraceJob::plain(id, team, submit, duration, gpus)
}

fn run(
    config: &Arc<Config>,
    jobs: Vec<TraceJob>,
    cluster: ClusterSpec,
    policy: Policy,
) -> SimReport {
    let t = trace::from_jobs(jobs, Vec::new());
    let w = Workload::prepare(&t, config, cluster);
    simulate(&w, config.clone(), cluster, policy, &t.events, &mut |_| {})
}

const ONE_NODE: ClusterSpec = ClusterSpec {
    nodes: 1,
    gpus_per_node: 8,
};

const TWO_NODES: ClusterSpec = ClusterSpec {
    nodes: 2,
    gpus_per_node: 8,
};

/// A job whose trace gives a time limit equal to its duration (what the
/// backfill plans with under `backfill_reserve = "all"`).
fn limited(id: u64, team: &str, submit: u64, duration: u64, gpus: u32) -> TraceJob {
    TraceJob {
        time_limit: Some(duration),
        ..job(id, team, submit, duration, gpus)
    }
}

/// Every invariant the issue asks for, on one report.
fn check_invariants(r: &SimReport, w: &Workload) {
    // Delivered GPU time never exceeds capacity, hour by hour.
    for h in 0..r.hourly.hours() {
        let got: u64 = r.hourly.got.iter().map(|g| g[h]).sum();
        assert!(
            got <= r.hourly.capacity[h],
            "hour {h}: {got} > {}",
            r.hourly.capacity[h]
        );
    }
    // No preemption inside a contract.
    for p in &r.preemption_log {
        assert!(p.victim_run_time >= p.victim_min_runtime, "{p:?}");
    }
    // Preemption (fairshare::preempt): a team preempts its own jobs only if
    // they are free tier or the preemptor is short; at one moment (no job
    // arrived or ended in between) no two teams preempt each other's
    // allocated jobs with jobs that are not short, unless a preemption
    // between them pushed its victim's leaf below its entitlement (the net
    // rule: that one may be answered, and each answer raises `covered`).
    type Node = u32;
    let mut edges: BTreeMap<u64, BTreeSet<(Node, Node)>> = BTreeMap::new();
    let mut pushed_below: BTreeSet<(u64, Node, Node)> = BTreeSet::new();
    for p in &r.preemption_log {
        let victim_allocated = p.victim_min_runtime > 0;
        if p.preemptor_team == p.victim_team {
            assert!(!victim_allocated || p.preemptor_short, "{p:?}");
        }
        if p.victim_left_below {
            assert!(victim_allocated, "{p:?}");
            if !p.preemptor_short {
                pushed_below.insert((p.time, p.preemptor_team, p.victim_team));
            }
        }
        if victim_allocated && !p.preemptor_short {
            edges
                .entry(p.time)
                .or_default()
                .insert((p.preemptor_team, p.victim_team));
        }
    }
    for (snap, e) in &edges {
        for &(a, b) in e {
            let answered_net_move =
                pushed_below.contains(&(*snap, a, b)) || pushed_below.contains(&(*snap, b, a));
            assert!(
                answered_net_move || !e.contains(&(b, a)),
                "snapshot {snap}: {a:?} and {b:?} preempt each other"
            );
        }
    }
    // Every GPU-second held is work kept or work lost.
    let work: f64 = w
        .jobs
        .iter()
        .map(|j| f64::from(j.gpus()) * j.duration as f64)
        .sum::<f64>()
        / 3600.0;
    if r.unfinished == 0 {
        assert!(
            (r.gpu_hours - (work + r.lost_gpu_hours)).abs() < 1e-6,
            "{} vs {work} + {}",
            r.gpu_hours,
            r.lost_gpu_hours
        );
    }
    assert!(r.owed_delivered <= 1.0 + 1e-12 && r.occupancy <= 1.0 + 1e-12);
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
    let w = Workload::prepare(&trace::from_jobs(jobs, vec![]), &c, ONE_NODE);
    check_invariants(&r, &w);
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
    let w = Workload::prepare(&trace::from_jobs(jobs, vec![]), &c, cluster);
    check_invariants(&r, &w);
    assert!(r.preemptions > 0);
}

#[test]
fn identical_inputs_give_identical_results() {
    let c = config(TWO_TEAMS);
    let jobs: Vec<TraceJob> = (0..200)
        .map(|i| {
            job(
                i,
                if i % 3 == 0 { "t2" } else { "t1" },
                i * 97 % 20_000,
                600 + i * 131 % 9000,
                [1, 2, 4, 8, 3][i as usize % 5],
            )
        })
        .collect();
    let cluster = ClusterSpec {
        nodes: 2,
        gpus_per_node: 8,
    };
    for p in Policy::ALL {
        let a = run(&c, jobs.clone(), cluster, p);
        let b = run(&c, jobs.clone(), cluster, p);
        assert_eq!(a, b, "{p}");
    }
    // A different seed may place differently but never changes the rules.
    let c2 = config(&format!("{TWO_TEAMS}\n[sim]\nseed = 7\n"));
    let r = run(&c2, jobs, cluster, Policy::Allot);
    assert_eq!(r.finished, 200);
}

#[test]
fn baselines_behave_as_documented() {
    let c = config(TWO_TEAMS);
    // t1 floods first; t2 arrives later.
    let mut jobs: Vec<TraceJob> = (0..20).map(|i| job(i, "t1", 0, 3600, 4)).collect();
    jobs.push(job(100, "t2", 60, 3600, 4));
    let fifo = run(&c, jobs.clone(), ONE_NODE, Policy::Fifo);
    let classic = run(&c, jobs.clone(), ONE_NODE, Policy::Classic);
    let fairtree = run(&c, jobs.clone(), ONE_NODE, Policy::FairTree);
    let stat = run(&c, jobs.clone(), ONE_NODE, Policy::Static);
    for r in [&fifo, &classic, &fairtree, &stat] {
        assert_eq!(r.preemptions, 0);
        assert_eq!(r.finished, 21);
    }
    // FIFO: t2 waits behind all of t1's earlier jobs (10 hours of them).
    assert_eq!(fifo.teams[1].wait_p50_s, 10 * 3600 - 60);
    // Fair share: t2 (no usage) goes first at the next completion.
    assert_eq!(classic.teams[1].wait_p50_s, 3600 - 60);
    assert_eq!(fairtree.teams[1].wait_p50_s, 3600 - 60);
    // Static: t2 owns 4 GPUs, t1 only ever holds its 4.
    assert_eq!(stat.teams[1].wait_p50_s, 0);
    assert!(stat.hourly.got[0].iter().all(|&g| g <= 4 * 3600));
}

#[test]
fn classic_factor_formula() {
    // The engine's worked example: a (60) { a1 35, a2 25 }, b (40) { b1 20, b2 20 }.
    let example = "[tree.a]\nshare = 60\n[tree.a.a1]\nshare = 35\n[tree.a.a2]\nshare = 25\n\
                   [tree.b]\nshare = 40\n[tree.b.b1]\nshare = 20\n[tree.b.b2]\nshare = 20\n";
    let tree = config(example).tree.clone();
    let f = baselines::classic_factors(&tree, &[0.0; 4]);
    assert_eq!(f, vec![1.0; 4]);
    // a1 with all the usage: UE(a) = 1, UE(a1) = 1 + (1 - 1) * .. = 1; F = 2^(-1/0.35).
    let f = baselines::classic_factors(&tree, &[1.0, 0.0, 0.0, 0.0]);
    assert!((f[0] - 2f64.powf(-1.0 / 0.35)).abs() < 1e-12, "{f:?}");
    // b1 has no usage: UE = 0 + (0 - 0) ... = 0 -> F = 1.
    assert_eq!(f[2], 1.0);
}

#[test]
fn rules_assign_contracts_and_are_reported() {
    let c = config(&format!(
        "{TWO_TEAMS}\n[sim]\n[[sim.rule]]\nname = \"debug\"\nmax_gpus = 1\nmax_duration = \"30:00\"\nmin_runtime = \"0\"\n\
         [[sim.rule]]\nteams = [\"t2\"]\nmin_runtime = \"runtime\"\nresumable = false\n"
    ));
    let mut jobs = vec![
        job(1, "t1", 0, 600, 1),
        job(2, "t2", 0, 7200, 2),
        job(3, "t1", 0, 7200, 2),
        job(4, "ghost", 0, 60, 1),
    ];
    jobs[2].min_runtime = Some(99_999_999);
    let t = trace::from_jobs(jobs, vec![]);
    let w = Workload::prepare(&t, &c, ONE_NODE);
    let by_id: BTreeMap<u64, &SimJob> = w.jobs.iter().map(|j| (j.id, j)).collect();
    assert_eq!(by_id[&1].min_runtime, 0);
    assert_eq!((by_id[&2].min_runtime, by_id[&2].resumable), (7200, false));
    assert_eq!(
        by_id[&3].min_runtime,
        8 * 3600,
        "a recorded contract is capped"
    );
    let rules: Vec<(&str, u64)> = w.rules.iter().map(|r| (r.rule.as_str(), r.jobs)).collect();
    assert_eq!(rules, vec![("trace", 1), ("debug", 1), ("rule 2", 1)]);
    assert_eq!(w.left_out[0].reason, "unknown account ghost");
    assert_eq!(w.left_out[0].jobs, 1);
}

#[test]
fn sim_section_errors_name_the_key() {
    let e = Config::from_toml_str(&format!("{TWO_TEAMS}\n[sim]\nclustr = \"4x8\"\n")).unwrap_err();
    assert!(
        e.0[0]
            .to_string()
            .starts_with("sim: unknown field `clustr`"),
        "{}",
        e.0[0]
    );
    let e = Config::from_toml_str(&format!("{TWO_TEAMS}\n[sim]\ncluster = \"4*8\"\n[[sim.rule]]\nmin_runtime = \"9:00:00\"\n[[sim.rule]]\nmax_gpus = 1\n"))
        .unwrap_err();
    let msgs: Vec<String> = e.0.iter().map(|e| e.to_string()).collect();
    assert!(
        msgs[0].starts_with("sim.cluster: cluster \"4*8\": write NODESxGPUS"),
        "{msgs:?}"
    );
    assert!(
        msgs[1].starts_with("sim.rule[0].min_runtime: 09:00:00 is longer than"),
        "{msgs:?}"
    );
    assert!(msgs[2].starts_with("sim.rule[1]: sets nothing"), "{msgs:?}");
    let e = Config::from_toml_str(&format!("{TWO_TEAMS}\n[[sim.rule]]\nmin_gpus = 4\nmax_gpus = 1\nmin_duration = \"2:00:00\"\nmax_duration = \"1:00:00\"\nresumable = false\n"))
        .unwrap_err();
    let msgs: Vec<String> = e.0.iter().map(|e| e.to_string()).collect();
    assert_eq!(
        msgs,
        [
            "sim.rule[0].min_gpus: 4 is above max_gpus = 1: the rule matches no job; swap or fix them",
            "sim.rule[0].min_duration: 02:00:00 is above max_duration = 01:00:00: the rule matches no job; swap or fix them",
        ]
    );
}

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
    let w = Workload::prepare(&t, &c, cluster);
    let r = simulate(
        &w,
        c.clone(),
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
    let r = simulate(&w, c, cluster, Policy::Fifo, &t.events, &mut |_| {});
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
        let t = trace::from_jobs(jobs, events);
        let w = Workload::prepare(&t, &c, ONE_NODE);
        let r = simulate(
            &w,
            c.clone(),
            ONE_NODE,
            Policy::Allot,
            &t.events,
            &mut |_| {},
        );
        assert_eq!((r.drain_requeues, r.finished), (1, 1));
        check_invariants(&r, &w);
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

fn arb_jobs() -> impl Strategy<Value = Vec<TraceJob>> {
    prop::collection::vec(
        (
            0usize..3,
            0u64..40_000,
            60u64..20_000,
            prop::sample::select(vec![1u32, 1, 1, 2, 4, 8, 12, 16]),
            prop::option::of(prop::sample::select(vec![0u64, 600, 3600])),
        ),
        1..40,
    )
    .prop_map(|v| {
        v.into_iter()
            .enumerate()
            .map(|(i, (t, s, d, g, m))| TraceJob {
                min_runtime: m,
                resumable: Some(i % 3 != 0),
                ..job(i as u64, ["a", "b", "c"][t], s, d, g)
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn invariants_hold_for_every_policy(
        jobs in arb_jobs(),
        window in prop::sample::select(vec!["2:00:00", "1-0", "7-0"]),
        // The backfill as the simulator always ran it, and as Slurm's
        // sched/backfill (every job planned; every job may preempt).
        backfill in prop::sample::select(vec![
            "",
            "backfill_preempt = \"all\"\n",
            "backfill_reserve = \"all\"\nbackfill_preempt = \"all\"\n",
            "backfill_preempt = \"all\"\nsched_interval = \"0:10\"\nsched_offset = 3\n",
            "backfill_reserve = \"all\"\nbackfill_resolution = \"1:00\"\nresolution_offset = 7\n",
            // slurmctld's timing as scripts/calibrate gives it.
            "backfill_reserve = \"all\"\nbackfill_preempt = \"all\"\nsched_interval = \"0:10\"\nsched_offset = 3\npreemptor_start = \"next_pass\"\nrepreempt_delay = \"0:30\"\nmain_phase_ms = 700\npass_miss_ms = 500\npass_drift_us = 50000\n",
            "preemptor_start = \"next_pass\"\n",
            // ... with the settings the calibration's logs added.
            "backfill_reserve = \"all\"\nbackfill_hold = \"nodes\"\nbackfill_candidates = \"free\"\nbackfill_preempt = \"all\"\nsched_interval = \"0:02\"\npreemptor_start = \"next_pass\"\nvictim_budget = \"node\"\nsnapshot_phase = \"seeded\"\nledger_lag = \"0:03\"\nrequeue_delay = \"0:11\"\n",
            // ... on the clock, with passes seen in a log.
            "backfill_reserve = \"all\"\nbackfill_hold = \"nodes\"\nbackfill_candidates = \"free\"\nbackfill_preempt = \"all\"\nsched_interval = \"0:02\"\npreemptor_start = \"next_pass\"\nvictim_budget = \"node\"\nsnapshot_phase = \"clock\"\nsync_offset = 7\nledger_lag = \"0:01\"\nrequeue_delay = \"0:11\"\npass_drift_us = 2000\nmain_passes_us = [1400000, 9450000, 300000000]\nbackfill_passes_us = [250000, 3270000, 20900000, 21930000]\n",
            // ... and the main pass's loop and the idle backfill.
            "backfill_reserve = \"all\"\nbackfill_hold = \"nodes\"\nbackfill_candidates = \"free\"\nbackfill_idle = \"skip\"\nbackfill_preempt = \"all\"\nsched_interval = \"0:02\"\npreemptor_start = \"next_pass\"\nvictim_budget = \"node\"\nsnapshot_phase = \"clock\"\nledger_lag = \"0:01\"\nrequeue_delay = \"0:11\"\npass_drift_us = 2000\nmain_drift_us = 5000\nmain_passes_us = [1400000, 9450000, 300000000]\n",
            // ... and Slurm's will-run test in windows, the sidecar's drain passes.
            "backfill_reserve = \"all\"\nbackfill_hold = \"nodes\"\nbackfill_candidates = \"free\"\nbackfill_idle = \"skip\"\nbackfill_preempt = \"all\"\nsched_interval = \"0:02\"\npreemptor_start = \"next_pass\"\nvictim_budget = \"node\"\nsnapshot_phase = \"clock\"\nledger_lag = \"0:01\"\nrequeue_delay = \"0:11\"\npass_drift_us = 2000\nmain_drift_us = 5000\nmain_passes_us = [1400000, 9450000, 300000000]\nwill_run_window = \"0:30\"\nwill_run_offset = 7\ndrain_pass_ms = 200\n",
            // ... and victims COMPLETING for a while, short jobs (a short
            // band of its own, the next table) sharing nodes.
            "backfill_reserve = \"all\"\nbackfill_hold = \"nodes\"\nbackfill_candidates = \"free\"\nbackfill_idle = \"skip\"\nbackfill_preempt = \"all\"\nsched_interval = \"0:02\"\npreemptor_start = \"next_pass\"\nvictim_budget = \"node\"\nsnapshot_phase = \"clock\"\nledger_lag = \"0:01\"\nrequeue_delay = \"0:11\"\nrepreempt_delay = \"0:12\"\npass_drift_us = 2000\nmain_drift_us = 5000\nwill_run_window = \"0:30\"\nwill_run_offset = 7\ndrain_pass_ms = 200\nvictim_complete_ms = 28\nshort_partition = \"shared\"\n[priority]\nshort_max_gpus = 2\nshort_max_time = \"1:00:00\"\n",
        ]),
    ) {
        let c = config(&format!(
            "window = \"{window}\"\n[tree.g]\nshare = 3\n[tree.g.a]\nshare = 1\n[tree.g.b]\nshare = 2\n[tree.c]\nshare = 1\n[sim]\ncheckpoint_interval = \"10:00\"\n{backfill}"
        ));
        let cluster = ClusterSpec { nodes: 2, gpus_per_node: 8 };
        let t = trace::from_jobs(jobs, vec![]);
        let w = Workload::prepare(&t, &c, cluster);
        for p in Policy::ALL {
            let r = simulate(&w, c.clone(), cluster, p, &[], &mut |_| {});
            check_invariants(&r, &w);
            match p {
                // Without preemption every job finishes (static: unless it
                // is larger than its team's slice).
                Policy::Fifo | Policy::Classic | Policy::FairTree => prop_assert_eq!(r.unfinished, 0, "{}", p),
                Policy::Static => prop_assert_eq!(r.preemptions, 0),
                // allot may livelock non-resumable jobs (see run::horizon);
                // then and only then some are left unfinished.
                Policy::Allot => prop_assert_eq!(r.unfinished > 0, r.stopped_at_horizon),
            }
        }
    }
}

/// The shipped Philly slice under the shipped example config: every team
/// maps, every job finishes under every policy, invariants hold.
#[test]
fn philly_slice_replays_under_every_policy() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples");
    let text = std::fs::read_to_string(format!("{dir}/traces/philly-slice.csv")).unwrap();
    let c = config(&std::fs::read_to_string(format!("{dir}/sim-philly.toml")).unwrap());
    let t = trace::parse(&text, None).unwrap();
    assert_eq!((t.jobs.len(), t.errors.len()), (3621, 0));
    let cluster = c.sim.cluster.unwrap();
    assert_eq!(
        cluster,
        ClusterSpec {
            nodes: 64,
            gpus_per_node: 8
        }
    );
    let w = Workload::prepare(&t, &c, cluster);
    assert_eq!(w.jobs.len(), 3621);
    assert!(w.left_out.is_empty(), "{:?}", w.left_out);
    // The recommended short band is exactly the debug class (<= 2 GPUs,
    // <= 1 hour) with the sweeps (more than 16 of a team's short jobs in
    // 15 minutes), and every job is allocated.
    let short = w
        .jobs
        .iter()
        .filter(|j| j.in_short_band(&c.priority))
        .count();
    let debug = w.jobs.iter().filter(|j| j.class == JobClass::Debug).count();
    let sweep = w.jobs.iter().filter(|j| j.class == JobClass::Sweep).count();
    assert_eq!((short, debug, sweep), (1766, 705, 1061));
    assert!(w
        .jobs
        .iter()
        .all(|j| j.sweep == (j.class == JobClass::Sweep)));
    assert!(w.jobs.iter().all(|j| j.min_runtime > 0));
    for p in Policy::ALL {
        let r = simulate(&w, c.clone(), cluster, p, &t.events, &mut |_| {});
        check_invariants(&r, &w);
        assert_eq!((r.finished, r.unfinished), (3621, 0), "{p}");
    }
}

#[test]
fn contracts_without_a_rule_are_the_plugins_contracts() {
    // The workload looked a partition list ("debug,gpu") up whole, where the
    // plugins take the first partition's default: one resolver now.
    let c = config(&format!(
        "{TWO_TEAMS}\n[contract.partition.debug]\ndefault_min_runtime = \"0\"\n"
    ));
    let mut jobs = vec![
        job(1, "t1", 0, 600, 1),
        job(2, "t1", 0, 600, 1),
        job(3, "t2", 0, 600, 1),
        job(4, "t2", 0, 600, 1),
    ];
    jobs[0].partition = Some("debug,gpu".into());
    jobs[1].partition = Some("gpu,debug".into());
    jobs[2].min_runtime = Some(99 * 3600); // a record above the 8 h cap
    let w = Workload::prepare(&trace::from_jobs(jobs, vec![]), &c, ONE_NODE);
    let min: Vec<u64> = w.jobs.iter().map(|j| j.min_runtime).collect();
    assert_eq!(min, vec![0, 3600, 8 * 3600, 3600]);
}

/// A burst of short jobs: those within the sweep limit preempt (after
/// `short_wait`, when one is set), the sweep waits for GPUs to come free.
#[test]
fn a_sweep_waits_for_free_gpus_and_debug_work_preempts() {
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
    let w = Workload::prepare(&t, &c, ONE_NODE);
    let sweeps: Vec<u64> = w.jobs.iter().filter(|j| j.sweep).map(|j| j.id).collect();
    assert_eq!(sweeps, [10, 11], "the third and fourth short job of t1");
    let r = run(&c, jobs(), ONE_NODE, Policy::Allot);
    assert_eq!(r.preemptions, 2, "{:#?}", r.preemption_log);
    let (debug, sweep) = (
        &r.waits[JobClass::Debug as usize],
        &r.waits[JobClass::Sweep as usize],
    );
    assert_eq!(
        (debug.jobs, debug.p90_s),
        (2, 0),
        "debug jobs preempt at once"
    );
    // The sweep starts when the two debug jobs end, on their GPUs.
    assert_eq!((sweep.jobs, sweep.p50_s, sweep.p90_s), (2, 600, 600));
    // With short_wait = 5 min, the debug jobs preempt at their 300th
    // second (a WAKE event), not at the next arrival or completion.
    let c = config(&format!("{base}[preempt]\nshort_wait = \"5:00\"\n"));
    let r = run(&c, jobs(), ONE_NODE, Policy::Allot);
    assert_eq!(r.preemptions, 2);
    let debug = &r.waits[JobClass::Debug as usize];
    assert_eq!((debug.p50_s, debug.p90_s), (300, 300));
    assert!(r.preemption_log.iter().all(|p| p.time == 7200 + 300));
}

/// `[sim] requeue_delay`: a preempted job waits that long before it may
/// start again (Slurm: `cred_expire + 1`), even with GPUs free; while it
/// waits it still counts as its leaf's pending demand.
#[test]
fn a_requeued_job_waits_the_requeue_delay() {
    let jobs = || {
        vec![
            job(1, "t1", 0, 7200, 4),
            job(2, "t1", 0, 7200, 4),
            job(3, "t2", 60, 600, 4),
        ]
    };
    let at_once = run(&config(TWO_TEAMS), jobs(), ONE_NODE, Policy::Allot);
    let delayed = run(
        &config(&format!("{TWO_TEAMS}\n[sim]\nrequeue_delay = \"20:00\"\n")),
        jobs(),
        ONE_NODE,
        Policy::Allot,
    );
    // t2's job preempts one of t1's at 3600 (its 1 h contract) and ends at
    // 4200; the victim (resumed from its checkpoint at 3600, 3600 s left)
    // starts again at once at 4200, or at 3600 + 1200 = 4800.
    assert_eq!((at_once.preemptions, delayed.preemptions), (1, 1));
    assert_eq!(at_once.span_s, 4200 + 3600);
    assert_eq!(delayed.span_s, 4800 + 3600);
    assert_eq!(delayed.finished, 3);
}

/// `[sim] backfill_idle = "skip"`: a backfill pass runs only after a
/// change. With "run", t2's 5-s job preempts one of t1's in the backfill
/// at 3600 (its contract's end, no change to a Slurm job) and the victim
/// restarts at 3611 (`requeue_delay`). With "skip" nothing changes from
/// 61 on, so t2's job waits for the main pass of 3605 (every 10 s from 5)
/// to preempt, ends at 3610, and the victim, eligible at 3616, a quiet
/// second, waits for the main pass of 3625.
#[test]
fn an_idle_backfill_pass_is_skipped() {
    let restart = |idle: &str| {
        let r = run(
            &config(&format!(
                "{TWO_TEAMS}\n[sim]\nrequeue_delay = \"0:11\"\nbackfill_interval = \"0:01\"\nsched_interval = \"0:10\"\nsched_offset = 5\nbackfill_idle = \"{idle}\"\n"
            )),
            vec![
                job(1, "t1", 0, 7200, 4),
                job(2, "t1", 0, 7200, 4),
                job(3, "t2", 60, 5, 4),
            ],
            ONE_NODE,
            Policy::Allot,
        );
        assert_eq!((r.preemptions, r.finished), (1, 3));
        // The victim resumes from its checkpoint at 3600 with 3600 s left.
        r.span_s - 3600
    };
    assert_eq!(restart("run"), 3611);
    assert_eq!(restart("skip"), 3625);
    let e = sim_error("backfill_idle = \"never\"\n");
    assert!(
        e.contains("sim.backfill_idle") && e.contains("\"skip\""),
        "{e}"
    );
}

/// Jobs of equal priority start in order of their queued time, then job,
/// as slurmctld orders them (submit time, then job id), and a requeue
/// resets the queued time to the moment of the requeue, not to when the
/// job is eligible again (`requeue_delay` later).
#[test]
fn a_requeued_job_keeps_its_place_by_the_moment_of_its_requeue() {
    let free = |id, submit, duration| TraceJob {
        min_runtime: Some(0),
        ..job(id, "t1", submit, duration, 8)
    };
    // t2's job preempts t1's free-tier job 1 at 10 and ends at 60; t1's
    // job 3, as large and of the same priority, arrives at 10 too.
    let jobs = vec![free(1, 0, 1000), job(2, "t2", 10, 50, 4), free(3, 10, 20)];
    let r = run(
        &config(&format!("{TWO_TEAMS}\n[sim]\nrequeue_delay = \"0:11\"\n")),
        jobs,
        ONE_NODE,
        Policy::Allot,
    );
    assert_eq!((r.preemptions, r.finished), (1, 3));
    // Job 1 (queued at 10, eligible at 21) goes first at 60, ahead of job 3
    // (queued at 10 too, a later job), which starts when it ends, at 1060.
    let large = &r.waits[JobClass::Large as usize];
    assert_eq!(large.p90_s, 1060 - 10);
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

/// `[sim] ledger_lag`: t1's 8-GPU job runs 0-10; at 10 t1's and t2's
/// jobs wait for the node (and t1's job 4 behind them). With the usage current t1 has used 80
/// GPU-seconds and t2's job ranks first (it waits 8 s); with the ledger
/// 30 s behind, the snapshot at 10 knows of no usage, the teams tie and
/// t1's job, queued first, starts first (t2's waits 18 s).
#[test]
fn ranks_read_a_late_ledger_with_ledger_lag() {
    let jobs = || {
        vec![
            job(1, "t1", 0, 10, 8),
            job(2, "t1", 1, 10, 8),
            job(3, "t2", 2, 10, 8),
            job(4, "t1", 3, 10, 8),
        ]
    };
    let t2_wait = |lag: &str| {
        let r = run(
            &config(&format!(
                "{TWO_TEAMS}\n[sync]\ninterval = \"0:01\"\n[sim]\nledger_lag = \"{lag}\"\n"
            )),
            jobs(),
            ONE_NODE,
            Policy::Allot,
        );
        assert_eq!(r.finished, 4);
        // As slurmctld's InitPrio: each job's band and rank at submission.
        let p: Vec<(u64, u8, u32)> = r
            .submit_priorities
            .iter()
            .map(|p| (p.job, p.band, p.rank))
            .collect();
        (
            r.teams.iter().find(|t| t.name == "t2").unwrap().wait_p50_s,
            p,
        )
    };
    // Live usage: from the snapshot of second 1 on, t1 has used some and
    // ranks below t2 (job 4, at 3 s, below job 3, at 2 s).
    let (wait, prio) = t2_wait("0");
    assert_eq!(wait, 8);
    assert_eq!(prio.len(), 4);
    assert!(prio[3].2 < prio[2].2, "{prio:?}");
    // 30 s late: the teams tie at every submission.
    let (wait, prio) = t2_wait("0:30");
    assert_eq!(wait, 18);
    assert_eq!(prio[3].2, prio[2].2, "{prio:?}");
    let e = sim_error("ledger_lag = -1\n");
    assert!(e.contains("sim.ledger_lag"), "{e}");
}

/// `[sim] snapshot_phase`: t2's job 0 runs 0-10, t1's job 1 10-20, each
/// ending at .5 s into its second (the backfill's offset), t1's job 2 and
/// t2's job 3 wait. With the snapshot of second 20 taken before job 1's end
/// (at the pass, or a seeded offset up to .5 s), t1 holds 8 GPUs above
/// its entitlement of 4 and t2's job 3 goes first in the Entitled band;
/// taken after it (a seeded offset past .5 s), both teams are below and
/// t1, with less usage, goes first. The pass that decides is at 21.5 s.
#[test]
fn the_band_is_read_at_the_snapshot_offset_with_seeded() {
    let at_ms = |id, team, submit, duration| TraceJob {
        submit_ms: Some(0),
        ..job(id, team, submit, duration, 8)
    };
    let jobs = || {
        vec![
            at_ms(0, "t2", 0, 10),
            at_ms(1, "t1", 1, 10),
            at_ms(2, "t1", 2, 10),
            at_ms(3, "t2", 3, 10),
        ]
    };
    let waits = |extra: &str| {
        let r = run(
            &config(&format!(
                "{TWO_TEAMS}\n[sync]\ninterval = \"0:02\"\n[sim]\nsched_interval = \"0:02\"\nmain_phase_ms = 400\npass_miss_ms = 500\nbackfill_interval = \"0:01\"\n{extra}"
            )),
            jobs(),
            ONE_NODE,
            Policy::Allot,
        );
        assert_eq!(r.finished, 4);
        let mut w = r.wait_samples[JobClass::Large as usize].clone();
        w.sort_unstable();
        w
    };
    // The seeded offset (ms) of a seed, as the simulator draws it.
    let phase = |seed: u64| crate::cluster::mix(seed ^ 0x5eed_5a11) % 1000;
    let early = (0..100).find(|&s| phase(s) < 400).unwrap();
    let late = (0..100).find(|&s| phase(s) > 600).unwrap();
    let t2_first = vec![0, 9, 18, 30];
    let t1_first = vec![0, 9, 19, 29];
    assert_eq!(waits(""), t2_first);
    let seeded = |seed| waits(&format!("snapshot_phase = \"seeded\"\nseed = {seed}\n"));
    assert_eq!(seeded(early), t2_first);
    assert_eq!(seeded(late), t1_first);
    // On the clock (half a second in, as the plugins' timer): the ends at
    // .5 s tie with it, and an end at a pass's or snapshot's own offset
    // comes after it, so the snapshot does not see them.
    assert_eq!(waits("snapshot_phase = \"clock\"\n"), t2_first);
    // With the ticks on odd seconds (`sync_offset`, as calibrate gives a run
    // whose second 0 is an odd second of the epoch), the snapshot at 21.5 s
    // comes after job 1's end and before the pass it ties with.
    assert_eq!(
        waits("snapshot_phase = \"clock\"\nsync_offset = 1\n"),
        t1_first
    );
    let e = sim_error("sched_interval = \"0:02\"\nbackfill_passes_us = [5, 3]\n");
    assert!(
        e.contains("sim.backfill_passes_us") && e.contains("ascending"),
        "{e}"
    );
    let e = sim_error("main_passes_us = [5]\n");
    assert!(
        e.contains("sim.main_passes_us") && e.contains("sched_interval"),
        "{e}"
    );
    let e = sim_error("sync_offset = 60\n");
    assert!(
        e.contains("sim.sync_offset") && e.contains("sync.interval"),
        "{e}"
    );
    let e = sim_error("snapshot_phase = \"random\"\n");
    assert!(
        e.contains("sim.snapshot_phase") && e.contains("\"seeded\""),
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

/// Teams t1, t2 and t3 of equal shares, `sim` as their `[sim]` section:
/// each team's median wait (seconds) replaying `jobs` (all must finish)
/// FIFO on one 8-GPU node.
fn fifo_waits_of_three_teams(sim: &str, jobs: Vec<TraceJob>) -> Vec<u64> {
    let c = config(&format!(
        "[tree.t1]\nshare = 1\n[tree.t2]\nshare = 1\n[tree.t3]\nshare = 1\n[sim]\n{sim}"
    ));
    let n = jobs.len() as u64;
    let r = run(&c, jobs, ONE_NODE, Policy::Fifo);
    assert_eq!(r.finished, n);
    r.teams.iter().map(|t| t.wait_p50_s).collect()
}

/// `[sim] sched_interval`: the main scheduler passes only at its seconds,
/// before that second's arrivals. t1's job at 0 starts in the backfill pass
/// at 0; t2's at 1 waits for the main pass at 10 (5 with `sched_offset =
/// 5`); t3's at 10 misses the pass at 10 and starts at 20 (15). Without it
/// every job starts the second it arrives.
#[test]
fn the_main_scheduler_passes_only_at_its_interval_before_arrivals() {
    let waits = |sim: &str| {
        fifo_waits_of_three_teams(
            sim,
            vec![
                job(1, "t1", 0, 100, 1),
                job(2, "t2", 1, 100, 1),
                job(3, "t3", 10, 100, 1),
            ],
        )
    };
    assert_eq!(waits(""), vec![0, 0, 0]);
    assert_eq!(waits("sched_interval = \"0:10\"\n"), vec![0, 9, 10]);
    assert_eq!(
        waits("sched_interval = \"0:10\"\nsched_offset = 5\n"),
        vec![0, 4, 5]
    );
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

/// `[sim] attempt_overhead_ms`: an attempt is held one second longer when
/// its seeded sub-second phase plus the overhead crosses a second; 999 ms
/// does so for almost every attempt, 0 for none.
#[test]
fn attempt_overhead_lengthens_attempts_by_whole_seconds() {
    let jobs = || {
        (0..50)
            .map(|i| job(i, "t1", i * 100, 10, 1))
            .collect::<Vec<_>>()
    };
    let none = run(&config(TWO_TEAMS), jobs(), ONE_NODE, Policy::Fifo);
    assert!((none.gpu_hours - 50.0 * 10.0 / 3600.0).abs() < 1e-9);
    let most = run(
        &config(&format!("{TWO_TEAMS}\n[sim]\nattempt_overhead_ms = 999\n")),
        jobs(),
        ONE_NODE,
        Policy::Fifo,
    );
    let extra_s = (most.gpu_hours * 3600.0 - 500.0).round() as u64;
    assert!((45..=50).contains(&extra_s), "{extra_s}");
    let e = sim_error("attempt_overhead_ms = 70000\n");
    assert!(
        e.contains("sim.attempt_overhead_ms") && e.contains("at most 60000"),
        "{e}"
    );
}

/// `[sim] attempt_jitter_ms`: each attempt's overhead is drawn within
/// the jitter of `attempt_overhead_ms`. At 1000 ms every attempt crosses
/// exactly one second; drawn from 0-2000 ms some cross none and some two,
/// so the total differs from seed to seed (and is the same for the same).
#[test]
fn attempt_jitter_draws_each_attempts_overhead() {
    let jobs = || {
        (0..50)
            .map(|i| job(i, "t1", i * 100, 10, 1))
            .collect::<Vec<_>>()
    };
    let extra = |sim: &str| {
        let r = run(
            &config(&format!("{TWO_TEAMS}\n[sim]\n{sim}")),
            jobs(),
            ONE_NODE,
            Policy::Fifo,
        );
        (r.gpu_hours * 3600.0 - 500.0).round() as u64
    };
    assert_eq!(extra("attempt_overhead_ms = 1000\n"), 50);
    let drawn = "attempt_overhead_ms = 1000\nattempt_jitter_ms = 1000\n";
    let seeds: Vec<u64> = (1..6)
        .map(|k| extra(&format!("{drawn}seed = {k}\n")))
        .collect();
    assert!(seeds.iter().all(|x| (25..=75).contains(x)), "{seeds:?}");
    assert!(seeds.iter().any(|&x| x != seeds[0]), "{seeds:?}");
    assert_eq!(extra(&format!("{drawn}seed = 3\n")), seeds[2]);
    let e = sim_error("attempt_jitter_ms = 70000\n");
    assert!(
        e.contains("sim.attempt_jitter_ms") && e.contains("at most 60000"),
        "{e}"
    );
}

/// `[sim] pass_miss_ms`: a job submitted after its second's pass (by its
/// seeded sub-second phase) starts in the next second.
#[test]
fn pass_miss_delays_late_submissions_by_a_second() {
    let jobs = || {
        (0..100)
            .map(|i| job(i, "t1", i * 100, 10, 1))
            .collect::<Vec<_>>()
    };
    let with = |ms: u64| {
        run(
            &config(&format!("{TWO_TEAMS}\n[sim]\npass_miss_ms = {ms}\n")),
            jobs(),
            ONE_NODE,
            Policy::Fifo,
        )
    };
    let debug = |r: &SimReport| r.wait_samples[JobClass::Debug as usize].clone();
    assert!(debug(&with(0)).iter().all(|&w| w == 0));
    assert!(debug(&with(1000)).iter().all(|&w| w == 1));
    let late = debug(&with(250)).iter().filter(|&&w| w == 1).count();
    assert!((10..=40).contains(&late), "{late} of 100 late at 250 ms");
    let e = sim_error("pass_miss_ms = 1001\n");
    assert!(
        e.contains("sim.pass_miss_ms") && e.contains("0..=1000"),
        "{e}"
    );
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

/// `[sim] short_partition`: t1's 7-GPU job holds the node for 10 h; t2's
/// short job (2 GPUs, 10 min: first in priority) cannot start at 100, and
/// t3's 1-GPU 100 s job arrives at 101. With short jobs `"apart"` the main
/// pass at 102 passes over the short one and starts it (wait 1 s); with
/// `"shared"` (Slurm's main scheduler stops at the first job that cannot
/// start, job_scheduler.c `fail_this_part`) it waits for the backfill
/// pass at 120 (every 30 s), which starts it as it ends before the short
/// job's reservation (wait 19 s).
#[test]
fn a_blocked_short_job_stops_the_main_pass_with_short_partition_shared() {
    let jobs = || {
        vec![
            job(1, "t1", 0, 36_000, 7),
            job(2, "t2", 100, 600, 2),
            job(3, "t3", 101, 100, 1),
        ]
    };
    let wait_of_3 = |extra: &str| {
        let r = run(
            &config(&format!(
                "window = \"7-0\"\n[contract]\ndefault_min_runtime = \"1:00:00\"\n[tree.t1]\nshare = 1\n[tree.t2]\nshare = 1\n[tree.t3]\nshare = 1\n[priority]\nshort_max_gpus = 2\nshort_max_time = \"1:00:00\"\n[sim]\nbackfill_interval = \"0:30\"\nsched_interval = \"0:02\"\n{extra}"
            )),
            jobs(),
            ONE_NODE,
            Policy::Allot,
        );
        assert_eq!((r.preemptions, r.finished), (0, 3));
        r.teams[2].wait_p50_s
    };
    assert_eq!(wait_of_3(""), 1);
    assert_eq!(wait_of_3("short_partition = \"apart\"\n"), 1);
    assert_eq!(wait_of_3("short_partition = \"shared\"\n"), 19);
    let e = sim_error("short_partition = \"own\"\n");
    assert!(
        e.contains("sim.short_partition") && e.contains("\"shared\""),
        "{e}"
    );
    // TWO_TEAMS has no short band: "shared" would change nothing.
    let e = sim_error("short_partition = \"shared\"\n");
    assert!(
        e.contains("sim.short_partition") && e.contains("short_max_gpus"),
        "{e}"
    );
}

/// `[sim] main_phase_ms`, `pass_miss_ms`, `pass_drift_us` and the trace's
/// `submit_ms`: a job is in the first pass of its second that comes after
/// its submission (main at 300 ms of the even seconds, backfill at 600 ms
/// of every second), else in the next second's. A drift of 100 ms a second
/// moves the backfill of second 3 to 900 ms, so a submission at 650 ms is
/// in it.
#[test]
fn a_submission_is_in_the_next_pass_after_it_within_its_second() {
    let at = |id: u64, team: &str, submit: u64, ms: u16| TraceJob {
        submit_ms: Some(ms),
        ..job(id, team, submit, 100, 1)
    };
    let waits = |extra: &str| {
        fifo_waits_of_three_teams(
            &format!(
                "backfill_interval = \"0:01\"\nsched_interval = \"0:02\"\nmain_phase_ms = 300\npass_miss_ms = 400\n{extra}"
            ),
            vec![at(1, "t1", 1, 700), at(2, "t2", 2, 100), at(3, "t3", 3, 650)],
        )
    };
    // 1: after the backfill of second 1 -> the main pass of 2. 2: before
    // the main pass of 2. 3: after the backfill of 3 -> 4.
    assert_eq!(waits(""), vec![1, 0, 1]);
    assert_eq!(waits("pass_drift_us = 100000\n"), vec![1, 0, 0]);
    for (key, value, fix) in [
        ("main_phase_ms", "1000", "0-999"),
        ("pass_drift_us", "200000", "at most 100000"),
        ("main_drift_us", "200000", "at most 100000"),
    ] {
        let e = sim_error(&format!("sched_interval = \"0:02\"\n{key} = {value}\n"));
        assert!(e.contains(&format!("sim.{key}")) && e.contains(fix), "{e}");
    }
    let e = sim_error("main_phase_ms = 300\n");
    assert!(e.contains("needs a sched_interval"), "{e}");
}

/// With `sched_interval`, a job ends at the offset of the pass that
/// started it (plus `attempt_overhead_ms`): job 1 (the whole node, 10 s)
/// starts in the backfill at 600 ms of second 0 and ends at 600 ms of
/// second 10, after that second's backfill, so job 2 starts at 11. With the
/// passes drifting 10 ms a second the backfill of second 10 is at 700 ms,
/// after the end, and job 2 starts at 10.
#[test]
fn a_job_ends_at_the_offset_of_the_pass_that_started_it() {
    let at = |id: u64, team: &str, submit: u64, ms: u16| TraceJob {
        submit_ms: Some(ms),
        ..job(id, team, submit, 10, 8)
    };
    let waits = |extra: &str| {
        fifo_waits_of_three_teams(
            &format!(
                "backfill_interval = \"0:01\"\nsched_interval = \"0:02\"\nmain_phase_ms = 300\npass_miss_ms = 400\n{extra}"
            ),
            vec![at(1, "t1", 0, 400), at(2, "t2", 5, 0)],
        )
    };
    assert_eq!(waits(""), vec![0, 6, 0]);
    assert_eq!(waits("pass_drift_us = 10000\n"), vec![0, 5, 0]);
}
