//! Inside a second: idle backfill passes, late submissions, pass offsets.

use super::Sim;
use crate::testutil::*;
use crate::*;

#[test]
fn passes_fall_evenly_between_the_seen_ones() {
    // Seen at 0.5 s and 10.7 s: ten passes of 1.02 s between them.
    let seen = [500_000, 10_700_000];
    let at = |t| Sim::pass_from_seen(&seen, 0, 1, 0, t);
    assert_eq!(at(0), (0, 500_000));
    assert_eq!(at(1), (1, 520_000));
    assert_eq!(at(5), (5, 600_000));
    assert_eq!(at(10), (10, 700_000));
    // After the last, on at the period; before the first, back from it.
    assert_eq!(at(11), (11, 700_000));
    assert_eq!(Sim::pass_from_seen(&[3_200_000], 0, 2, 0, 0), (1, 200_000));
    // None seen: the fitted series.
    assert_eq!(
        Sim::pass_from_seen(&[], 250_000, 2, 1000, 7),
        Sim::pass_from(250_000, 2, 1000, 7)
    );
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
