//! Invariants of whole replays: determinism, every invariant on random traces, the shipped Philly slice.

use proptest::prelude::*;

use crate::testutil::*;
use crate::*;

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
        let w = Workload::prepare(&t, &c, &sim_of(&c), cluster);
        for p in Policy::ALL {
            let r = simulate(&w, c.clone(), &sim_of(&c), cluster, p, &[], &mut |_| {});
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
    let cluster = sim_of(&c).cluster.unwrap();
    assert_eq!(
        cluster,
        ClusterSpec {
            nodes: 64,
            gpus_per_node: 8
        }
    );
    let w = Workload::prepare(&t, &c, &sim_of(&c), cluster);
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
        let r = simulate(
            &w,
            c.clone(),
            &sim_of(&c),
            cluster,
            p,
            &t.events,
            &mut |_| {},
        );
        check_invariants(&r, &w);
        assert_eq!((r.finished, r.unfinished), (3621, 0), "{p}");
    }
}
