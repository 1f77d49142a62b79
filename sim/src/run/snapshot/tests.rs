//! The engine snapshot: a late ledger, the band read at the snapshot's offset.

use crate::testutil::*;
use crate::*;

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
/// t2's job 3 wait. The owed band is read on the live load at every pass
/// (fairshare::owed; the plugins recompute it at every job's end), not at
/// the snapshot: wherever in the second the snapshot is taken, the pass
/// after job 1's end sees t1 holding nothing, both teams owed 4 GPUs of the
/// 8-GPU jobs (each crossing its room), tied on the window's rank (each
/// used 80 GPU-seconds): job 2, the older, starts at 20 s.
#[test]
fn the_band_is_read_on_the_live_load_whatever_the_snapshot_offset() {
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
    let t1_first = vec![0, 9, 19, 29];
    assert_eq!(waits(""), t1_first);
    let seeded = |seed| waits(&format!("snapshot_phase = \"seeded\"\nseed = {seed}\n"));
    assert_eq!(seeded(early), t1_first);
    assert_eq!(seeded(late), t1_first);
    assert_eq!(waits("snapshot_phase = \"clock\"\n"), t1_first);
    assert_eq!(
        waits("snapshot_phase = \"clock\"\nsync_offset = 1\n"),
        t1_first
    );
}
