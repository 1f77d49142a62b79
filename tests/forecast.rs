//! The start forecast on the testbed (issue 41), as a researcher runs it:
//! alice, a plain user, asks `allot forecast` for 20 pending jobs; each
//! forecast stands beside `squeue --start` and the start the job got.
//!
//! Every job holds a sixteenth of the cluster for 20 s under a 1-minute
//! time limit. A first wave of 8 such jobs per account ends before the
//! forecasts, so each job's batch (its account, limit and GPUs, submitted
//! within the hour) has 8 ended jobs to draw run times from: a third of the
//! limit. `squeue --start` plans with the limits.

use std::time::Duration;

use allot_e2e::{epoch, exclusive, wait_until, Testbed};

const ACCOUNTS: [&str; 4] = ["a1", "a2", "b1", "b2"];

/// A sixteenth of the cluster for 20 s under a 1-minute limit, of `account`.
fn sixteenth(tb: &Testbed, account: &str) -> u32 {
    tb.sbatch_gpus(
        tb.total_gpus() / 16,
        &[
            "-A",
            account,
            "--time=1:00",
            "--min-runtime=0:30",
            "--wrap",
            "sleep 20",
        ],
    )
}

/// A time as Slurm prints it (`2026-12-05T20:48:00`, local), in epoch
/// seconds; `None` for `Unknown`, `N/A` and the like.
fn epoch_of(tb: &Testbed, t: &str) -> Option<i64> {
    if !t.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let out = tb.run("date", &["-d", t, "+%s"]);
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

/// The first start of `job` (epoch s), once it has one.
fn first_start(tb: &Testbed, job: u32) -> Option<i64> {
    tb.sacct(job, "Start")
        .iter()
        .filter_map(|f| epoch_of(tb, &f[0]))
        .min()
}

#[test]
fn twenty_forecasts_beside_squeue_start_and_the_starts() {
    let (_one, tb) = exclusive(&[]);
    // History: two rounds that fill the cluster and end.
    let first: Vec<u32> = (0..32).map(|i| sixteenth(&tb, ACCOUNTS[i % 4])).collect();
    wait_until(Duration::from_secs(180), "the first wave to end", || {
        let left = first
            .iter()
            .filter(|&&j| !tb.squeue(j, "%T").is_empty())
            .count();
        if left == 0 {
            Ok(())
        } else {
            Err(format!("{left} left"))
        }
    });
    // The wave forecast: 16 fill the cluster, 24 wait.
    let jobs: Vec<u32> = (0..40).map(|i| sixteenth(&tb, ACCOUNTS[i % 4])).collect();
    wait_until(Duration::from_secs(60), "the cluster to fill", || {
        let pending = jobs
            .iter()
            .filter(|&&j| tb.squeue(j, "%T") == "PENDING")
            .count();
        if pending >= 20 {
            Ok(())
        } else {
            Err(format!("{pending} pending"))
        }
    });
    // alice forecasts each pending job; squeue --start beside it.
    let mut made = Vec::new();
    for &j in &jobs {
        if made.len() == 20 || tb.squeue(j, "%T") != "PENDING" {
            continue;
        }
        let out = tb.allot_as("alice", &format!("forecast {j} --json"));
        if !out.status.success() {
            // It started meanwhile.
            assert!(
                tb.squeue(j, "%T") != "PENDING",
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            continue;
        }
        let f: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let (at, p10, p50, p90) = (
            f["at"].as_i64().unwrap(),
            f["p10"].as_i64().unwrap(),
            f["p50"].as_i64().unwrap(),
            f["p90"].as_i64().unwrap(),
        );
        assert!(at <= p10 && p10 <= p50 && p50 <= p90, "{f}");
        assert!((at - epoch()).abs() < 60, "{f}");
        let squeue = tb.squeue(j, "%S");
        let planned = epoch_of(&tb, &squeue);
        made.push((j, at, p10, p50, p90, planned));
    }
    assert!(made.len() >= 15, "only {} forecasts made", made.len());
    // A running job has no forecast, and says why.
    let running = wait_until(Duration::from_secs(60), "a running job", || {
        jobs.iter()
            .copied()
            .find(|&j| tb.squeue(j, "%T") == "RUNNING")
            .ok_or_else(|| "none".to_string())
    });
    let out = tb.allot_as("alice", &format!("forecast {running}"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("is not pending"),
        "{err}"
    );
    // Every forecast job starts.
    let mut rows = Vec::new();
    for &(j, at, p10, p50, p90, planned) in &made {
        let start = wait_until(
            Duration::from_secs(300),
            &format!("job {j} to start"),
            || first_start(&tb, j).ok_or_else(|| tb.squeue(j, "%T")),
        );
        rows.push((j, at, p10, p50, p90, planned, start));
    }
    eprintln!("job      p10   p50   p90  squeue  actual  (s after the forecast)");
    let (mut err_f, mut err_s, mut n_s, mut inside) = (0i64, 0i64, 0i64, 0);
    for &(j, at, p10, p50, p90, planned, start) in &rows {
        let plan = planned.map(|p| p - at);
        eprintln!(
            "{j:<7} {:>5} {:>5} {:>5} {:>7} {:>7}",
            p10 - at,
            p50 - at,
            p90 - at,
            plan.map_or("-".into(), |p| p.to_string()),
            start - at
        );
        err_f += (p50 - start).abs();
        if let Some(p) = planned {
            err_s += (p - start).abs();
            n_s += 1;
        }
        inside += usize::from(p10 - 5 <= start && start <= p90 + 5);
    }
    let n = rows.len() as i64;
    eprintln!(
        "{n} jobs: forecast p50 mean error {} s; squeue --start mean error {} s ({n_s} with a plan); {inside} within p10-p90 (+-5 s)",
        err_f / n,
        if n_s > 0 { (err_s / n_s).to_string() } else { "-".into() }
    );
    // The forecast knows these jobs run a third of their limit: it is
    // nearer than squeue --start's plan by their limits.
    if n_s > 0 {
        assert!(
            err_f / n < err_s / n_s,
            "forecast error {} s, squeue --start {} s",
            err_f / n,
            err_s / n_s
        );
    }
    assert!(err_f / n <= 30, "forecast p50 mean error {} s", err_f / n);
}

/// Resumes the drained node and cancels the test's jobs whatever happens.
struct Resume<'a> {
    tb: &'a Testbed,
    node: String,
}

impl Drop for Resume<'_> {
    fn drop(&mut self) {
        self.tb.cancel_all();
        let _ = self.tb.run(
            "scontrol",
            &["update", &format!("nodename={}", self.node), "state=resume"],
        );
        // Until slurmctld answers for it again (`idle*` for a moment), so
        // the next test finds every node in service; never a panic here.
        for _ in 0..60 {
            if self.tb.node_state(&self.node) == "idle" {
                break;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

/// alice's forecast of the job behind a full cluster, before and while an
/// admin drains one of its nodes: sinfo's draining node is counted
/// (`draining` in the JSON, "draining" in the text) and starts nothing in
/// the replay, so the job cannot start sooner than before.
#[test]
fn a_draining_node_is_out_of_the_forecast() {
    let (_one, tb) = exclusive(&[]);
    let per = tb.gpus_per_node();
    let nodes = tb.nodes();
    let node_job = |account: &str| {
        tb.sbatch_gpus(
            per,
            &[
                "-A",
                account,
                "--time=10:00",
                "--min-runtime=10:00",
                "--wrap",
                "sleep 600",
            ],
        )
    };
    let running: Vec<u32> = (0..nodes.len())
        .map(|i| node_job(ACCOUNTS[i % 4]))
        .collect();
    for &j in &running {
        tb.wait_state(j, "RUNNING", Duration::from_secs(60));
    }
    let waiting = node_job("a1");
    tb.wait_state(waiting, "PENDING", Duration::from_secs(10));
    let forecast = || -> serde_json::Value {
        let out = tb.allot_as("alice", &format!("forecast {waiting} --json"));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let before = forecast();
    assert_eq!(before["draining"], 0, "{before}");

    let node = tb.job_nodes(running[0])[0].clone();
    let _resume = Resume {
        tb: &tb,
        node: node.clone(),
    };
    tb.drain_for_maintenance(&node);
    assert_eq!(tb.node_state(&node), "draining");
    let during = forecast();
    assert_eq!(during["draining"], 1, "{during}");
    assert_eq!(during["running"], before["running"], "{during}");
    let text = tb.allot_as("alice", &format!("forecast {waiting}"));
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(&format!(
            "{} nodes x {per} GPUs in service, 1 of them draining",
            nodes.len()
        )),
        "{text}"
    );
    eprintln!(
        "p50 before the drain: {} s ahead; during it: {} s ahead",
        before["p50"].as_i64().unwrap() - before["at"].as_i64().unwrap(),
        during["p50"].as_i64().unwrap() - during["at"].as_i64().unwrap()
    );
    // Three nodes' jobs can end, not four: the first of them ends no
    // sooner than the first of all four did (the draws are seeded).
    assert!(
        during["p10"].as_i64().unwrap() >= before["p10"].as_i64().unwrap(),
        "before {before}\nduring {during}"
    );
}

/// Behind a full cluster, alice's forecasts as slurmctld's queue holds
/// them: a held job has none and says why; a job array's pending tasks,
/// one squeue record (`N_[0-3]`), count as four jobs of the replay, and a
/// task inside that record is named with the job to ask for; `allot -v`
/// says what the forecast read.
#[test]
fn held_jobs_and_pending_array_tasks() {
    let (_one, tb) = exclusive(&[]);
    let per = tb.gpus_per_node();
    let node_job = |account: &str, extra: &[&str]| {
        let mut args = vec!["-A", account, "--time=10:00", "--min-runtime=10:00"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--wrap", "sleep 600"]);
        tb.sbatch_gpus(per, &args)
    };
    let running: Vec<u32> = (0..tb.nodes().len())
        .map(|i| node_job(ACCOUNTS[i % 4], &[]))
        .collect();
    for &j in &running {
        tb.wait_state(j, "RUNNING", Duration::from_secs(60));
    }
    let held = node_job("a1", &["--hold"]);
    let array = node_job("b1", &["--array=0-3"]);
    let waiting = node_job("a2", &[]);
    tb.wait_state(waiting, "PENDING", Duration::from_secs(10));

    let out = tb.allot_as("alice", &format!("forecast {held}"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("it is held"), "{err}");

    let out = tb.allot_as("alice", &format!("-v forecast {waiting} --json"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let f: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The array's four tasks and the waiting job; not the held one.
    assert_eq!(f["pending"], 5, "{f}");
    // `-v` says what the forecast read, itself: slurmctld's nodes as sinfo
    // gives them, not the sidecar.
    let nodes = format!(
        "sinfo: {} nodes x {per} GPUs in service, 0 draining",
        tb.nodes().len()
    );
    assert!(
        err.contains("forecasting here from squeue, sacct and sinfo") && err.contains(&nodes),
        "{err}"
    );

    let out = tb.allot_as("alice", &format!("forecast {array}_3"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains(&format!("ask for job {array}")),
        "{err}"
    );
    let out = tb.allot_as("alice", &format!("forecast {array} --json"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
