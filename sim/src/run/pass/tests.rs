//! The main pass: its interval, a blocked short job.

use crate::testutil::*;
use crate::*;

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
