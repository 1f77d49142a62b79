//! Charging across nodes: a job spanning two nodes is charged for all its
//! GPUs; a node lost mid-job ends the attempt as NODE_FAIL, charged up to
//! the failure, and Slurm requeues the job.

use super::*;

#[test]
fn a_two_node_job_is_charged_for_all_its_gpus() {
    let _one = serial();
    let tb = Testbed::from_env();
    let (_, _guard) = take_cluster(&tb);
    let g = tb.gpus_per_node();
    let t0 = epoch();
    // Two whole nodes, a 5 s contract, 8 s of work.
    let job = tb.sbatch(&[
        "-N",
        "2",
        &format!("--gres=gpu:{g}"),
        "-A",
        "a1",
        "--min-runtime=0:05",
        "--wrap",
        "sleep 8",
    ]);
    tb.wait_state(job, "RUNNING", Duration::from_secs(30));
    let on = tb.job_nodes(job);
    assert_eq!(on.len(), 2, "two nodes: {on:?}");
    assert_ne!(on[0], on[1]);
    let row = tb.wait_first_attempt(
        job,
        "COMPLETED",
        "State,AllocTRES,NodeList,ElapsedRaw",
        Duration::from_secs(60),
        "the job in sacct, completed",
    );
    assert!(
        row[1]
            .split(',')
            .any(|kv| kv == format!("gres/gpu={}", 2 * g)),
        "sacct AllocTRES holds {} GPUs: {row:?}",
        2 * g
    );
    assert!(row[1].split(',').any(|kv| kv == "node=2"), "{row:?}");
    let elapsed: i64 = row[3].parse().unwrap();
    assert!((8..=12).contains(&elapsed), "ran {elapsed} s: {row:?}");

    let ledger = sync_into(&tb, "two-node.sqlite", t0 - 60);
    let a = attempts(&ledger, job);
    assert_eq!(a.len(), 1, "one attempt: {a:?}");
    let r = &a[0].record;
    let (start, end) = (r.start.unwrap(), r.end.unwrap());
    assert_eq!(r.gpus, u64::from(2 * g), "{r:?}");
    assert_eq!(
        r.rate,
        1000 * u64::from(2 * g),
        "charged per GPU (milli-units): {r:?}"
    );
    assert_eq!(r.state, "COMPLETED");
    assert_eq!(end - start, elapsed, "the ledger's interval is sacct's");
    assert_eq!(r.min_runtime, 5);
    // Ran longer than its contract: charged its runtime, on all 16 GPUs.
    assert_eq!(r.charge_end, Some(end));
    assert_eq!(
        r.charged,
        1000 * u64::from(2 * g) * (end - start) as u64,
        "charged {} GPUs x {} s: {r:?}",
        2 * g,
        end - start
    );
}

/// SIGKILLs what runs the jobs of `node` (a lost node loses them too): each
/// batch script under the node's spool directory with its process group
/// (the job's processes), and the slurmstepd above it. Returns how many
/// scripts it found.
fn kill_node_jobs(tb: &Testbed, node: &str) -> usize {
    let spool = format!("{}/spool/slurmd-{node}/", tb.dir.display());
    let mut found = 0;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if !String::from_utf8_lossy(&cmdline).contains(&spool) {
            continue;
        }
        // stat: "pid (comm) state ppid pgrp ...", comm may hold spaces.
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let rest: Vec<&str> = stat
            .rsplit_once(") ")
            .map_or(Vec::new(), |(_, r)| r.split_whitespace().collect());
        let (Some(ppid), Some(pgrp)) = (rest.get(1), rest.get(2)) else {
            continue;
        };
        found += 1;
        let parent = std::fs::read(format!("/proc/{ppid}/cmdline")).unwrap_or_default();
        if parent.starts_with(b"slurmstepd:") {
            let _ = tb.run("kill", &["-KILL", ppid]);
        }
        if *pgrp == pid.to_string() {
            let _ = tb.run("kill", &["-KILL", "--", &format!("-{pgrp}")]);
        }
    }
    found
}

/// The slurmd of `node`, from its pid file.
fn slurmd_pid(tb: &Testbed, node: &str) -> String {
    std::fs::read_to_string(tb.dir.join(format!("run/slurmd-{node}.pid")))
        .unwrap_or_else(|e| panic!("slurmd-{node}.pid: {e}"))
        .trim()
        .to_string()
}

/// A node lost mid-job: its slurmd is SIGKILLed while a job runs there, and
/// the job's processes on it (slurmstepd, the batch script and its children).
/// Slurm marks the node DOWN after SlurmdTimeout (30 s on the testbed), ends
/// the attempt as NODE_FAIL and requeues the job, which starts again on
/// another node. The ledger charges the lost attempt up to the failure
/// (its runtime is past its minimum) and holds the new attempt; a second
/// sync changes nothing.
#[test]
fn a_node_lost_mid_job_charges_the_attempt_up_to_the_failure_and_requeues_it() {
    let _one = serial();
    let tb = Testbed::from_env();
    let (_, _guard) = take_cluster(&tb);
    let g = tb.gpus_per_node();
    let t0 = epoch();
    let job = tb.sbatch(&[
        &format!("--gres=gpu:{g}"),
        "-A",
        "b2",
        "--min-runtime=0:05",
        "--wrap",
        "sleep 600",
    ]);
    tb.wait_state(job, "RUNNING", Duration::from_secs(30));
    let lost = tb.job_nodes(job);
    assert_eq!(lost.len(), 1, "{lost:?}");
    let lost = lost[0].clone();
    // Past its 5 s contract, then the node goes.
    std::thread::sleep(Duration::from_secs(8));
    let killed_at = epoch();
    tb.ok("kill", &["-KILL", &slurmd_pid(&tb, &lost)]);
    assert_eq!(
        kill_node_jobs(&tb, &lost),
        1,
        "the job's batch script on {lost}"
    );
    // NODE_FAIL and the requeue, as Slurm does them.
    let first = wait_until(
        Duration::from_secs(120),
        "the lost attempt to end NODE_FAIL in sacct",
        || {
            let rows = tb.sacct(job, "State,Start,End,NodeList,AllocTRES");
            match rows.first() {
                Some(r) if r[0] == "NODE_FAIL" => Ok(r.clone()),
                other => Err(format!("{other:?}; node {}", tb.node_state(&lost))),
            }
        },
    );
    assert_eq!(first[3], lost, "{first:?}");
    assert!(
        tb.node_state(&lost).starts_with("down"),
        "{lost} is {}",
        tb.node_state(&lost)
    );
    assert_eq!(tb.restarts(job), 1, "requeued once");
    // It starts again elsewhere (after the requeue's credential wait).
    tb.wait_state(job, "RUNNING", Duration::from_secs(90));
    let now_on = tb.job_nodes(job);
    assert!(
        !now_on.contains(&lost),
        "restarted on the lost node: {now_on:?}"
    );
    // The ledger: the lost attempt charged up to the failure.
    let ledger = sync_into(&tb, "node-lost.sqlite", t0 - 60);
    let a = attempts(&ledger, job);
    assert_eq!(a.len(), 2, "the lost attempt and the new one: {a:?}");
    let lost_attempt = &a[0].record;
    assert_eq!(a[0].attempt, 0);
    assert_eq!(lost_attempt.state, "NODE_FAIL", "{lost_attempt:?}");
    let (start, end) = (lost_attempt.start.unwrap(), lost_attempt.end.unwrap());
    assert!(
        end >= killed_at && end <= killed_at + 90,
        "ended at {end}, the slurmd was killed at {killed_at}: {lost_attempt:?}"
    );
    assert!(end - start >= 8, "{lost_attempt:?}");
    assert_eq!(lost_attempt.charge_end, Some(end), "{lost_attempt:?}");
    assert_eq!(
        lost_attempt.charged,
        1000 * u64::from(g) * (end - start) as u64,
        "{g} GPUs x {} s up to the failure: {lost_attempt:?}",
        end - start
    );
    let again = &a[1].record;
    assert_eq!(a[1].attempt, 1);
    assert!(again.start.is_some_and(|s| s >= end), "{again:?}");
    assert_eq!(again.end, None, "the new attempt runs: {again:?}");
    assert_eq!(again.charged, 0, "nothing charged while it runs: {again:?}");
    // Consistent: syncing again changes nothing but the running attempt's
    // elapsed seconds (sacct's Elapsed grows while it runs).
    let before = dump(&ledger);
    sync_again(&tb, &ledger, t0 - 60);
    let after = dump(&ledger);
    let mine = |d: &str| {
        d.lines()
            .filter(|l| l.contains(&format!("\"job_id\":{job},")))
            .map(|l| {
                let mut row: serde_json::Value = serde_json::from_str(l).unwrap();
                if row["end"].is_null() {
                    row["elapsed"] = serde_json::Value::Null;
                }
                row.to_string()
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        mine(&before),
        mine(&after),
        "a second sync changed the job's attempts"
    );
}
