//! Budgets that cannot be gamed, on the testbed: a stream of one team's
//! short jobs never keeps another team's job owed GPUs waiting longer than
//! the stream's jobs run (the owed band, fairshare::owed: the team below its
//! entitlement sorts above every job of a team that holds more), and a job
//! requeued `[contract] max_requeues` times runs to its end, across a
//! slurmctld restart (fairshare::contract::requeues_used), and starts again
//! only while its team is below its entitlement
//! (fairshare::contract::waits_for_share).

use std::time::{Duration, Instant};

use allot_e2e::{epoch, exclusive, wait_until, Testbed, B1_OVER_SERVED};

/// Asserts `job` stays in `state` for `d`.
fn stays(tb: &Testbed, job: u32, state: &str, d: Duration) {
    let until = Instant::now() + d;
    while Instant::now() < until {
        assert_eq!(tb.squeue(job, "%T"), state, "job {job}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Gives preempt/allot time to read allot.toml after `scontrol
/// reconfigure`: it reloads on its own engine thread, within a few seconds
/// (and logs nothing when the text is what it already has).
fn let_preempt_reload() {
    std::thread::sleep(Duration::from_secs(10));
}

/// An account's pending jobs (squeue).
fn pending_of(tb: &Testbed, account: &str) -> usize {
    tb.ok("squeue", &["-h", "-A", account, "-t", "PD", "-o", "%i"])
        .split_whitespace()
        .count()
}

#[test]
fn a_stream_of_short_jobs_holds_a_whole_cluster_job_back_at_most_short_max_time() {
    let (_one, tb) = exclusive(B1_OVER_SERVED);
    // Debug work: <= 2 GPUs and --time <= 1:00. It goes first inside b1
    // only: between teams the owed band decides (fairshare::owed).
    let _short = tb.conf_replaced("short_max_time = \"1:00:00\"", "short_max_time = \"1:00\"");
    let all = tb.total_gpus();
    // b1 (over-served) streams 1-GPU, 45-s debug jobs: the cluster full of
    // them and a backlog of 8 always pending.
    let submit = |n: usize| {
        for _ in 0..n {
            tb.sbatch_gpus(
                1,
                &[
                    "-A",
                    "b1",
                    "--time=1:00",
                    "--min-runtime=0:30",
                    "--wrap",
                    "sleep 45",
                ],
            );
        }
    };
    submit(all as usize + 8);
    wait_until(
        Duration::from_secs(60),
        "b1's debug jobs to fill the cluster",
        || {
            let running = tb
                .ok("squeue", &["-h", "-A", "b1", "-t", "R", "-o", "%i"])
                .split_whitespace()
                .count();
            if running as u32 == all {
                Ok(())
            } else {
                Err(format!("{running} running"))
            }
        },
    );
    // a2, holding none of its entitlement, asks for the whole cluster.
    let t0 = epoch();
    let big = tb.sbatch_gpus(
        all,
        &["-A", "a2", "--min-runtime=5:00", "--wrap", "sleep 300"],
    );
    // At the next rebuild (a sync.interval, or a job's end) a2's job is in
    // the owed band, above every pending job of b1, which holds the whole
    // cluster: more than its entitlement.
    let mut compared = false;
    let started = wait_until(
        Duration::from_secs(240),
        "a2's whole-cluster job to start",
        || {
            if tb.squeue(big, "%T") == "RUNNING" {
                return Ok(epoch());
            }
            let theirs: Vec<u64> = tb
                .ok("squeue", &["-h", "-A", "b1", "-t", "PD", "-o", "%Q"])
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect();
            let mine: u64 = tb.squeue(big, "%Q").parse().unwrap_or(0);
            if mine >> 30 >= 2 && !theirs.is_empty() {
                let top = theirs.iter().max().copied().unwrap_or(0);
                assert!(
                    mine > top,
                    "a2's job {mine} sorts below b1's debug work {top}"
                );
                compared = true;
            }
            let missing = 8usize.saturating_sub(pending_of(&tb, "b1"));
            submit(missing);
            std::thread::sleep(Duration::from_secs(1));
            Err(format!("b1 pending: {}", pending_of(&tb, "b1")))
        },
    );
    let waited = started - t0;
    println!("a2's {all}-GPU job waited {waited} s behind b1's stream (short_max_time 60 s)");
    assert!(
        compared || waited <= 5,
        "a2's job never showed the owed band (2 or 3) beside b1's pending jobs"
    );
    assert!(
        waited <= 60 + 30 + 30,
        "waited {waited} s: more than short_max_time + a rebuild + 30 s of passes"
    );
    tb.cancel_all();
}

#[test]
fn a_job_requeued_max_requeues_times_runs_to_its_end() {
    let (_one, tb) = exclusive(B1_OVER_SERVED);
    let _bound = tb.conf_replaced("max_requeues = 3", "max_requeues = 1");
    let_preempt_reload();
    let conf = tb.allot_conf();
    // vision holds three quarters (two protected for 10 minutes, `v` for 5
    // s), above its entitlement; b1 the fourth, protected.
    let held = tb.run_quarters("vision", &["10:00", "10:00"]);
    let b1 = tb.run_quarters("b1", &["10:00"]);
    let v = tb.run_quarters("vision", &["0:05"])[0];
    std::thread::sleep(Duration::from_secs(6));
    // a2, below its entitlement, takes v's GPUs: v's first requeue.
    let first = tb.sbatch_quarter("a2", "5:00");
    tb.wait_state(first, "RUNNING", Duration::from_secs(60));
    wait_until(Duration::from_secs(30), "v requeued once", || {
        match tb.restarts(v) {
            1 => Ok(()),
            n => Err(format!("{n} restarts")),
        }
    });
    // v has used its requeues and vision holds its entitlement (2 of the
    // 4 quarters: a2 and b1 want one each): v is held, squeue says why
    // (fairshare::contract::waits_for_share).
    wait_until(
        Duration::from_secs(30),
        "v held for its team's share",
        || {
            let (state, reason) = (tb.squeue(v, "%T"), tb.squeue(v, "%r"));
            if state == "PENDING" && reason.starts_with("allot: used its 1 requeues") {
                Ok(())
            } else {
                Err(format!("{state} {reason}"))
            }
        },
    );
    assert!(tb
        .squeue(v, "%r")
        .contains("account vision holds less than its entitlement"));
    let why = tb.allot_ok(&[
        "explain",
        &v.to_string(),
        "--no-forecast",
        "--config",
        conf.to_str().unwrap(),
    ]);
    assert!(why.contains("it has used its 1 requeues"), "{why}");
    // a2 gives its GPUs back: vision is below its entitlement again, v is
    // released and runs, past its contract in 5 s.
    tb.ok("scancel", &[&first.to_string()]);
    tb.wait_state(v, "RUNNING", Duration::from_secs(60));
    std::thread::sleep(Duration::from_secs(6));
    let why = tb.allot_ok(&[
        "explain",
        &v.to_string(),
        "--no-forecast",
        "--config",
        conf.to_str().unwrap(),
    ]);
    assert!(why.contains("used the 1 requeues of its contract"), "{why}");
    // Across a slurmctld restart (Restarts is slurmctld's own state).
    tb.restart_slurmctld();
    // `up` writes allot.toml anew: the bound again, and a2 asks only once
    // preempt/allot has read it (its engine thread reloads on its own).
    let _again = tb.conf_replaced("max_requeues = 3", "max_requeues = 1");
    let_preempt_reload();
    tb.wait_state(v, "RUNNING", Duration::from_secs(30));
    assert_eq!(tb.restarts(v), 1, "Restarts survived the restart");
    // a2 asks again: v is the only job past its contract, and it has used
    // its requeues: a2 waits, v runs on.
    let second = tb.sbatch_quarter("a2", "5:00");
    stays(&tb, second, "PENDING", Duration::from_secs(20));
    assert_eq!(tb.squeue(v, "%T"), "RUNNING");
    assert_eq!(tb.restarts(v), 1, "v was not requeued a second time");
    for j in held.iter().chain(&b1) {
        assert_eq!(tb.restarts(*j), 0, "protected job {j}");
    }
    tb.cancel_all();
}
