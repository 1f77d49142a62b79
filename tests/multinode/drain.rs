//! Draining one node (for maintenance, or by `allot health --drain` on a
//! recorded GPU failure) requeues only its jobs, each at its minimum
//! runtime, while the other nodes keep running and take new work.

use super::*;

/// How a node is drained in [`drain_one_node`].
enum Drain {
    /// An admin's `scontrol update state=drain reason=maintenance`.
    Maintenance,
    /// `allot health --drain` on a recorded GPU failure (Xid 79 on gpu3).
    Health,
}

/// Maintenance of one node: see [`drain_one_node`].
#[test]
fn draining_one_node_requeues_only_its_jobs_and_the_others_take_new_work() {
    drain_one_node(Drain::Maintenance);
}

/// A GPU failure on one node (`allot health --drain`, a fixture): the same
/// as a maintenance drain, with allot's reason.
#[test]
fn health_drain_of_one_node_requeues_only_its_jobs_and_the_others_take_new_work() {
    drain_one_node(Drain::Health);
}

/// Jobs with minimum runtimes of 5 s and 30 s on one node, and jobs whose
/// 5 s contracts end meanwhile on every other node; the node is drained.
/// Only its jobs are requeued by `allot sync --follow`, each once its own
/// minimum runtime has passed; the other nodes' jobs run on, and a job
/// submitted during the drain starts on another node.
fn drain_one_node(how: Drain) {
    let _one = serial();
    let tb = Testbed::from_env();
    let (nodes, mut guard) = take_cluster(&tb);
    let drained = nodes[1].clone();
    let others: Vec<String> = nodes.iter().filter(|n| **n != drained).cloned().collect();
    // Pinned (-w): the drained node's jobs wait for it after their requeue.
    let short = tb.sbatch_pinned(&drained, "b1", "0:05");
    let long = tb.sbatch_pinned(&drained, "b2", "0:30");
    let elsewhere: Vec<(u32, String)> = others
        .iter()
        .map(|n| (tb.sbatch_pinned(n, "b1", "0:05"), n.clone()))
        .collect();
    for j in [short, long]
        .into_iter()
        .chain(elsewhere.iter().map(|(j, _)| *j))
    {
        tb.wait_state(j, "RUNNING", Duration::from_secs(60));
    }
    match how {
        Drain::Maintenance => tb.drain_for_maintenance(&drained),
        Drain::Health => {
            let fixture = tb.root.join("accounting-sync/fixtures/health/xid79.json");
            let out = Command::new(tb.allot_bin())
                .args([
                    "health",
                    "--drain",
                    "--json",
                    "--node",
                    &drained,
                    "--fixture",
                ])
                .arg(&fixture)
                .arg("--config")
                .arg(tb.allot_conf())
                .output()
                .unwrap();
            let v: serde_json::Value = serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
            assert_eq!(v["verdict"], "failed", "{v}");
        }
    }
    assert_eq!(tb.node_state(&drained), "draining");
    // The drain's reason as Slurm holds it: `maintenance`, or allot's
    // `allot: gpu3 Xid 79 ...`.
    let drain_reason = tb
        .ok("sinfo", &["-h", "-N", "-n", &drained, "-o", "%E"])
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .to_string();
    match how {
        Drain::Maintenance => assert_eq!(drain_reason, "maintenance"),
        Drain::Health => assert!(
            drain_reason.starts_with("allot: gpu3 Xid 79"),
            "{drain_reason}"
        ),
    }
    guard.sync = Some(tb.start_sidecar("multinode-sync.log"));
    // New work during the drain: half a node, not pinned; it must start on
    // another node (the drained one takes nothing new).
    let g = tb.gpus_per_node();
    let fresh = tb.sbatch(&[
        &format!("--gres=gpu:{}", g / 2),
        "-A",
        "a1",
        "--min-runtime=5:00",
        "--wrap",
        "sleep 600",
    ]);
    tb.wait_state(fresh, "RUNNING", Duration::from_secs(30));
    let fresh_on = tb.job_nodes(fresh);
    assert!(
        !fresh_on.contains(&drained),
        "new work started on the draining node: {fresh_on:?}"
    );
    tb.wait_drain_requeues(&drained, short, long, 30, Duration::from_secs(60));
    // A few more sidecar passes: the other nodes' jobs, past their own 5 s
    // contracts, are never requeued; the new job runs on.
    std::thread::sleep(Duration::from_secs(5));
    for (j, n) in &elsewhere {
        assert_eq!(tb.squeue(*j, "%T"), "RUNNING", "job {j} on {n}");
        assert_eq!(tb.restarts(*j), 0, "job {j} on {n} was requeued");
    }
    assert_eq!(tb.squeue(fresh, "%T"), "RUNNING");
    assert_eq!(tb.restarts(fresh), 0);
    for j in [short, long] {
        assert_eq!(tb.squeue(j, "%T"), "PENDING", "job {j} waits for its node");
        assert_eq!(tb.restarts(j), 1, "job {j} requeued once");
    }
    // Slurm's record: each first attempt REQUEUED after its contract.
    for (job, min) in [(short, 5), (long, 30)] {
        let first = tb.wait_first_attempt(
            job,
            "REQUEUED",
            "State,ElapsedRaw,NodeList",
            Duration::from_secs(20),
            "slurmdbd to record the requeue",
        );
        let elapsed: u64 = first[1].parse().unwrap();
        assert!(
            (min..=min + 6).contains(&elapsed),
            "job {job} ran {elapsed} s before its requeue; expected {min}..={} s",
            min + 6
        );
        assert_eq!(first[2], drained);
    }
    // The ledger's events: requeues of the drained node's jobs only.
    let events = wait_until(
        Duration::from_secs(10),
        "both requeues in the report",
        || {
            let ev = tb.requeue_events();
            if [short, long]
                .iter()
                .all(|j| ev.iter().any(|(e, _)| *e == u64::from(*j)))
            {
                Ok(ev)
            } else {
                Err(format!("{ev:?}"))
            }
        },
    );
    for (j, n) in &elsewhere {
        assert!(
            !events.iter().any(|(e, _)| *e == u64::from(*j)),
            "job {j} on {n} in the requeue events: {events:?}"
        );
    }
    for (job, reason) in &events {
        if [short, long].iter().any(|j| u64::from(*j) == *job) {
            assert!(
                reason.starts_with(&format!("node {drained} draining ({drain_reason})")),
                "{reason}"
            );
        }
    }
}
