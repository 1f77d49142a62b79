//! Attempts: the requeue delay, launch overhead and its jitter.

use super::attempt_overhead_us;
use crate::testutil::*;
use crate::*;

#[test]
fn overheads_are_drawn_within_the_jitter_and_never_below_zero() {
    let mut s = crate::SimSettings {
        attempt_overhead_ms: 30,
        attempt_jitter_ms: 10,
        ..Default::default()
    };
    let drawn: Vec<u64> = (0..400).map(|id| attempt_overhead_us(&s, id, 0)).collect();
    assert!(drawn.iter().all(|us| (20_000..=40_000).contains(us)));
    // Both halves of the range, and the same draw again.
    assert!(drawn.iter().any(|&us| us < 25_000) && drawn.iter().any(|&us| us > 35_000));
    assert_eq!(attempt_overhead_us(&s, 7, 0), drawn[7]);
    // Another attempt of the same job draws again.
    assert!((0..400).any(|id| attempt_overhead_us(&s, id, 1) != drawn[id as usize]));
    s.attempt_jitter_ms = 50;
    assert!((0..400).any(|id| attempt_overhead_us(&s, id, 0) == 0));
    s.attempt_jitter_ms = 0;
    assert_eq!(attempt_overhead_us(&s, 7, 0), 30_000);
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
