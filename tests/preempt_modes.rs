//! preempt/allot under each slurm.conf PreemptMode (issue 19): REQUEUE
//! (the default, covered in `plugins`: an expired contract is requeued and
//! not before), CANCEL (honoured with the same contract rules: the victim
//! ends PREEMPTED, after its minimum runtime, and the ledger shows it so),
//! and every other mode refused at slurmctld start with one log line
//! naming the supported ones. Each test restarts slurmctld with
//! `ALLOT_TB_PREEMPT_MODE` and puts REQUEUE back when it ends.

use std::time::Duration;

use allot_e2e::{serial, wait_until, Testbed};

const HOUR: i64 = 3600;

/// Stops slurmctld (SIGTERM: it saves its state) and runs `testbed up`
/// with PreemptMode `mode`; returns whether `up` succeeded.
fn restart_with_mode(tb: &Testbed, mode: &str) -> bool {
    let pidfile = tb.dir.join("run/slurmctld.pid");
    if let Ok(pid) = std::fs::read_to_string(&pidfile) {
        let pid = pid.trim().to_string();
        let _ = tb.run("kill", &[&pid]);
        wait_until(Duration::from_secs(20), "slurmctld to stop", || {
            if std::path::Path::new("/proc").join(&pid).exists() {
                Err("alive".into())
            } else {
                Ok(())
            }
        });
    }
    std::process::Command::new(tb.root.join("scripts/testbed"))
        .arg("up")
        .env("ALLOT_TB_PREEMPT_MODE", mode)
        .status()
        .unwrap()
        .success()
}

/// Puts PreemptMode=REQUEUE back, also when the test fails.
struct BackToRequeue<'a>(&'a Testbed);

impl Drop for BackToRequeue<'_> {
    fn drop(&mut self) {
        assert!(
            restart_with_mode(self.0, "REQUEUE"),
            "testbed up with PreemptMode=REQUEUE"
        );
    }
}

fn slurmctld_log(tb: &Testbed) -> String {
    std::fs::read_to_string(tb.dir.join("log/slurmctld.log")).unwrap_or_default()
}

#[test]
fn cancel_mode_ends_victims_preempted_after_their_contract() {
    let _one = serial();
    let tb = Testbed::from_env();
    tb.cancel_all();
    let _back = BackToRequeue(&tb);
    assert!(
        restart_with_mode(&tb, "CANCEL"),
        "slurmctld starts with PreemptMode=CANCEL"
    );
    let conf = tb.ok("scontrol", &["show", "config"]);
    assert!(
        conf.lines()
            .any(|l| l.starts_with("PreemptMode") && l.contains("CANCEL")),
        "{conf}"
    );
    tb.reset_ledger(&[("b1", 2, 12 * HOUR, 10 * HOUR, 3600)]);
    // b1 fills the cluster with four quarters of it: one job with an 8 s
    // contract, three with 10 minutes.
    let jobs = tb.run_quarters("b1", &["0:08", "10:00", "10:00", "10:00"]);
    let (short, long) = (jobs[0], jobs[1..].to_vec());
    let b2 = tb.sbatch_quarter("b2", "0:01");
    tb.wait_state(b2, "RUNNING", Duration::from_secs(60));
    // The short job was cancelled as PREEMPTED (one attempt, not requeued),
    // after its 8 s contract.
    let rows = wait_until(
        Duration::from_secs(30),
        "the preempted job in sacct",
        || {
            let rows: Vec<(String, u64)> = tb
                .attempt_states(short)
                .into_iter()
                .map(|(s, e)| (s, e.unwrap_or(0)))
                .collect();
            if rows.iter().any(|(s, _)| s.starts_with("PREEMPTED")) {
                Ok(rows)
            } else {
                Err(format!("{rows:?}"))
            }
        },
    );
    assert_eq!(rows.len(), 1, "cancelled, not requeued: {rows:?}");
    assert!(
        rows[0].1 >= 8,
        "preempted after {} s, inside its 8 s contract",
        rows[0].1
    );
    assert_eq!(
        tb.squeue(short, "%T"),
        "",
        "the cancelled job is gone from the queue"
    );
    for j in &long {
        assert_eq!(
            tb.squeue(*j, "%T"),
            "RUNNING",
            "job {j} inside its 10 min contract was left alone"
        );
    }
    // The ledger and `allot explain` show the attempt as PREEMPTED.
    let conf = tb.allot_conf();
    let conf = conf.to_str().unwrap();
    let bin = tb.allot_bin();
    tb.ok(bin.to_str().unwrap(), &["sync", "--config", conf]);
    let explain = tb.ok(
        bin.to_str().unwrap(),
        &[
            "explain",
            &short.to_string(),
            "--json",
            "--no-forecast",
            "--config",
            conf,
        ],
    );
    let v: serde_json::Value = serde_json::from_str(&explain).unwrap();
    assert_eq!(v["requeues"][0]["state"], "PREEMPTED", "{explain}");
    // ... preempted for b2's job, as preempt/allot recorded it.
    assert_eq!(v["requeues"][0]["preempted_by"], u64::from(b2), "{explain}");
    assert_eq!(v["requeues"][0]["rule"], "net_gain", "{explain}");
    tb.cancel_all();
}

#[test]
fn other_modes_are_refused_at_slurmctld_start_with_one_line() {
    let _one = serial();
    let tb = Testbed::from_env();
    tb.cancel_all();
    let _back = BackToRequeue(&tb);
    for mode in ["SUSPEND,GANG", "REQUEUE,GANG"] {
        let before = slurmctld_log(&tb).len();
        assert!(
            !restart_with_mode(&tb, mode),
            "slurmctld must not start with PreemptMode={mode}"
        );
        let log = slurmctld_log(&tb);
        let new = &log[before.min(log.len())..];
        let lines: Vec<&str> = new
            .lines()
            .filter(|l| l.contains("preempt/allot: PreemptMode="))
            .collect();
        assert_eq!(lines.len(), 1, "{new}");
        assert!(
            lines[0].contains(&format!("PreemptMode={mode} is not supported"))
                && lines[0]
                    .contains("supported: REQUEUE (--no-requeue jobs are cancelled) or CANCEL"),
            "{}",
            lines[0]
        );
    }
}
