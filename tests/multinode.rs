//! What only means something across nodes (issue 14), on the testbed's
//! several slurmd (default 4 nodes x 8 GPUs): a job spanning two nodes is
//! charged for all its GPUs; a preemptor's victims are on the node where it
//! starts and none elsewhere; draining one node (for maintenance, or by
//! `allot health --drain` on a recorded GPU failure) requeues only its
//! jobs, each at its minimum runtime, while the others keep
//! running and take new work; a node lost mid-job (its slurmd killed) ends
//! the attempt as NODE_FAIL, charged up to the failure, and Slurm requeues
//! the job. Each test takes the whole cluster, so they run one at a time.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use allot_e2e::{epoch, serial, wait_until, Testbed};
use allot_ledger::{LedgerReader, StoredAttempt};

const HOUR: i64 = 3600;

fn restarts(tb: &Testbed, job: u32) -> u32 {
    let out = tb.ok("scontrol", &["show", "job", "-o", &job.to_string()]);
    out.split_whitespace()
        .find_map(|w| w.strip_prefix("Restarts="))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The cluster as every test wants it at start and leaves it: no job, every
/// slurmd running (`scripts/testbed up` starts a missing one), every node
/// resumed and idle.
fn reset_cluster(tb: &Testbed) {
    tb.cancel_all();
    let st = Command::new(tb.root.join("scripts/testbed"))
        .arg("up")
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "scripts/testbed up failed");
    for node in tb.nodes() {
        if tb.node_state(&node) != "idle" {
            let _ = tb.run(
                "scontrol",
                &["update", &format!("nodename={node}"), "state=resume"],
            );
        }
    }
    wait_until(Duration::from_secs(60), "every node idle", || {
        let bad: Vec<String> = tb
            .nodes()
            .into_iter()
            .map(|n| format!("{n} {}", tb.node_state(&n)))
            .filter(|s| !s.ends_with(" idle"))
            .collect();
        if bad.is_empty() {
            Ok(())
        } else {
            Err(bad.join(", "))
        }
    });
}

/// Runs `reset_cluster` (and stops a sidecar) however the test ends.
struct Cleanup<'a> {
    tb: &'a Testbed,
    sync: Option<Child>,
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        if let Some(mut c) = self.sync.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        reset_cluster(self.tb);
    }
}

fn allot(tb: &Testbed, args: &[&str]) -> String {
    let out = Command::new(tb.allot_bin())
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", tb.allot_bin().display()));
    assert!(
        out.status.success(),
        "allot {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A fresh ledger of this test: `allot sync` of the testbed's sacct since
/// `since` (epoch s) into `<testbed>/multinode/NAME`.
fn sync_into(tb: &Testbed, name: &str, since: i64) -> PathBuf {
    let dir = tb.dir.join("multinode");
    std::fs::create_dir_all(&dir).unwrap();
    let ledger = dir.join(name);
    for suffix in ["", "-wal", "-shm", ".lock"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", ledger.display()));
    }
    sync_again(tb, &ledger, since);
    ledger
}

fn sync_again(tb: &Testbed, ledger: &Path, since: i64) {
    allot(
        tb,
        &[
            "sync",
            "--config",
            tb.allot_conf().to_str().unwrap(),
            "--ledger",
            ledger.to_str().unwrap(),
            "--since",
            &since.to_string(),
        ],
    );
}

fn attempts(ledger: &Path, job: u32) -> Vec<StoredAttempt> {
    LedgerReader::open(ledger)
        .unwrap()
        .attempts_of_job(u64::from(job))
        .unwrap()
}

fn dump(ledger: &Path) -> String {
    LedgerReader::open(ledger).unwrap().dump().unwrap()
}

#[test]
fn a_two_node_job_is_charged_for_all_its_gpus() {
    let _one = serial();
    let tb = Testbed::from_env();
    let nodes = tb.nodes();
    assert!(
        nodes.len() >= 2,
        "this test needs 2 nodes or more (ALLOT_TB_NODES), the testbed has {nodes:?}"
    );
    let _guard = Cleanup {
        tb: &tb,
        sync: None,
    };
    reset_cluster(&tb);
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
    let row = wait_until(
        Duration::from_secs(60),
        "the job in sacct, completed",
        || {
            let rows = tb.sacct(job, "State,AllocTRES,NodeList,ElapsedRaw");
            match rows.first() {
                Some(r) if r[0] == "COMPLETED" => Ok(r.clone()),
                other => Err(format!("{other:?}")),
            }
        },
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
    assert_eq!(r.rate, u64::from(2 * g), "charged per GPU: {r:?}");
    assert_eq!(r.state, "COMPLETED");
    assert_eq!(end - start, elapsed, "the ledger's interval is sacct's");
    assert_eq!(r.min_runtime, 5);
    // Ran longer than its contract: charged its runtime, on all 16 GPUs.
    assert_eq!(r.charge_end, Some(end));
    assert_eq!(
        r.charged,
        u64::from(2 * g) * (end - start) as u64,
        "charged {} GPUs x {} s: {r:?}",
        2 * g,
        end - start
    );
}

/// A preemptor of half a node on a cluster full of quarter-node jobs whose
/// contracts have ended: it starts on one node, its victims are exactly the
/// two jobs that free its GPUs there, and no job on another node is touched,
/// though all of them are just as preemptable. The jobs are placed round
/// robin (`-w`), so consecutive job ids (the order of equal candidates) are
/// on different nodes: slurmctld tries candidates on several nodes before
/// one node has room, and must preempt only those on that node.
#[test]
fn a_preemptor_takes_its_victims_only_on_the_node_where_it_starts() {
    let _one = serial();
    let tb = Testbed::from_env();
    let nodes = tb.nodes();
    let g = tb.gpus_per_node();
    assert!(
        nodes.len() >= 2 && g % 4 == 0,
        "this test needs 2 nodes or more of 4k GPUs, the testbed has {} x {g}",
        nodes.len()
    );
    let _guard = Cleanup {
        tb: &tb,
        sync: None,
    };
    reset_cluster(&tb);
    // b1 used 2 GPUs for 10 h: over-served, and above its entitlement once
    // it holds the whole cluster; b2 (equal share) holds nothing.
    tb.reset_ledger(&[("b1", 2, 12 * HOUR, 10 * HOUR, 3600)]);
    let per_node = 4;
    let victims_size = g / 4;
    let b1: Vec<u32> = (0..per_node * nodes.len())
        .map(|i| {
            tb.sbatch(&[
                "-w",
                &nodes[i % nodes.len()],
                &format!("--gres=gpu:{victims_size}"),
                "-A",
                "b1",
                "--min-runtime=0:03",
                "--wrap",
                "sleep 600",
            ])
        })
        .collect();
    for j in &b1 {
        tb.wait_state(*j, "RUNNING", Duration::from_secs(60));
    }
    // Where each runs, before anything moves.
    let placed: Vec<(u32, String)> = b1
        .iter()
        .map(|j| {
            let n = tb.job_nodes(*j);
            assert_eq!(n.len(), 1, "job {j} on one node: {n:?}");
            (*j, n[0].clone())
        })
        .collect();
    for node in &nodes {
        let here = placed.iter().filter(|(_, n)| n == node).count();
        assert_eq!(here, per_node, "{per_node} jobs on {node}: {placed:?}");
    }
    // Let the 3 s contracts end, then b2 asks for half a node.
    std::thread::sleep(Duration::from_secs(5));
    let b2 = tb.sbatch(&[
        &format!("--gres=gpu:{}", g / 2),
        "-A",
        "b2",
        "--min-runtime=5:00",
        "--wrap",
        "sleep 600",
    ]);
    tb.wait_state(b2, "RUNNING", Duration::from_secs(90));
    let at = tb.job_nodes(b2);
    assert_eq!(at.len(), 1, "{at:?}");
    let node = &at[0];
    // Further passes move nothing: b2 runs, b1 stays above its entitlement.
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        assert_eq!(tb.squeue(b2, "%T"), "RUNNING");
        std::thread::sleep(Duration::from_millis(500));
    }
    let victims: Vec<&(u32, String)> = placed
        .iter()
        .filter(|(j, _)| restarts(&tb, *j) > 0)
        .collect();
    let report = format!(
        "b2 {b2} on {node}; victims {victims:?}; layout {placed:?}; {}",
        tb.ok("scontrol", &["show", "job", "-o", &b2.to_string()])
    );
    assert!(
        victims.iter().all(|(_, n)| n == node),
        "a job on another node was preempted: {report}"
    );
    assert_eq!(
        victims.len(),
        2,
        "exactly the two {victims_size}-GPU jobs that free {} GPUs: {report}",
        g / 2
    );
    for (j, n) in &placed {
        if !victims.iter().any(|(v, _)| v == j) {
            assert_eq!(tb.squeue(*j, "%T"), "RUNNING", "job {j} on {n}: {report}");
            assert_eq!(restarts(&tb, *j), 0);
        }
    }
    // Slurm's record: each victim's first attempt ended PREEMPTED (requeued).
    for (j, _) in &victims {
        let rows = wait_until(
            Duration::from_secs(20),
            "the victim's attempt in sacct",
            || {
                let rows = tb.sacct(*j, "State,NodeList");
                if rows
                    .iter()
                    .any(|r| r[0] == "PREEMPTED" || r[0] == "REQUEUED")
                {
                    Ok(rows)
                } else {
                    Err(format!("{rows:?}"))
                }
            },
        );
        assert!(
            rows.iter()
                .any(|r| (r[0] == "PREEMPTED" || r[0] == "REQUEUED") && &r[1] == node),
            "job {j}: {rows:?}"
        );
    }
}

/// `(job, reason)` of the requeue events in `allot report --health --json`.
fn requeue_events(tb: &Testbed) -> Vec<(u64, String)> {
    let out = allot(
        tb,
        &[
            "report",
            "--health",
            "--json",
            "--config",
            tb.allot_conf().to_str().unwrap(),
        ],
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "requeue")
        .map(|e| {
            (
                e["job_id"].as_u64().unwrap(),
                e["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

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
    let nodes = tb.nodes();
    assert!(
        nodes.len() >= 2,
        "this test needs 2 nodes or more: {nodes:?}"
    );
    let mut guard = Cleanup {
        tb: &tb,
        sync: None,
    };
    reset_cluster(&tb);
    let drained = nodes[1].clone();
    let others: Vec<String> = nodes.iter().filter(|n| **n != drained).cloned().collect();
    // Pinned (-w): the drained node's jobs wait for it after their requeue.
    let on = |node: &str, account: &str, min: &str| {
        tb.sbatch(&[
            "-w",
            node,
            "--gres=gpu:1",
            "-A",
            account,
            &format!("--min-runtime={min}"),
            "--wrap",
            "sleep 600",
        ])
    };
    let short = on(&drained, "b1", "0:05");
    let long = on(&drained, "b2", "0:30");
    let elsewhere: Vec<(u32, String)> = others
        .iter()
        .map(|n| (on(n, "b1", "0:05"), n.clone()))
        .collect();
    for j in [short, long]
        .into_iter()
        .chain(elsewhere.iter().map(|(j, _)| *j))
    {
        tb.wait_state(j, "RUNNING", Duration::from_secs(60));
    }
    match how {
        Drain::Maintenance => {
            tb.ok(
                "scontrol",
                &[
                    "update",
                    &format!("nodename={drained}"),
                    "state=drain",
                    "reason=maintenance",
                ],
            );
        }
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
    let log = std::fs::File::create(tb.dir.join("multinode-sync.log")).unwrap();
    guard.sync = Some(
        Command::new(tb.allot_bin())
            .args(["sync", "--follow", "--interval", "1s", "--config"])
            .arg(tb.allot_conf())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("cannot start allot sync --follow"),
    );
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
    tb.wait_left_state(
        short,
        "RUNNING",
        Duration::from_secs(30),
        "the 5 s job to be requeued",
    );
    assert_eq!(
        tb.squeue(long, "%T"),
        "RUNNING",
        "the 30 s job keeps its contract"
    );
    tb.wait_left_state(
        long,
        "RUNNING",
        Duration::from_secs(60),
        "the 30 s job to be requeued",
    );
    tb.wait_node_state(
        &drained,
        "drained",
        Duration::from_secs(30),
        "the node to be drained",
    );
    // A few more sidecar passes: the other nodes' jobs, past their own 5 s
    // contracts, are never requeued; the new job runs on.
    std::thread::sleep(Duration::from_secs(5));
    for (j, n) in &elsewhere {
        assert_eq!(tb.squeue(*j, "%T"), "RUNNING", "job {j} on {n}");
        assert_eq!(restarts(&tb, *j), 0, "job {j} on {n} was requeued");
    }
    assert_eq!(tb.squeue(fresh, "%T"), "RUNNING");
    assert_eq!(restarts(&tb, fresh), 0);
    for j in [short, long] {
        assert_eq!(tb.squeue(j, "%T"), "PENDING", "job {j} waits for its node");
        assert_eq!(restarts(&tb, j), 1, "job {j} requeued once");
    }
    // Slurm's record: each first attempt REQUEUED after its contract.
    for (job, min) in [(short, 5), (long, 30)] {
        let rows = wait_until(
            Duration::from_secs(20),
            "slurmdbd to record the requeue",
            || {
                let rows = tb.sacct(job, "State,ElapsedRaw,NodeList");
                if rows.first().is_some_and(|r| r[0] == "REQUEUED") {
                    Ok(rows)
                } else {
                    Err(format!("{rows:?}"))
                }
            },
        );
        let elapsed: u64 = rows[0][1].parse().unwrap();
        assert!(
            (min..=min + 6).contains(&elapsed),
            "job {job} ran {elapsed} s before its requeue; expected {min}..={} s",
            min + 6
        );
        assert_eq!(rows[0][2], drained);
    }
    // The ledger's events: requeues of the drained node's jobs only.
    let events = wait_until(
        Duration::from_secs(10),
        "both requeues in the report",
        || {
            let ev = requeue_events(&tb);
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
    let nodes = tb.nodes();
    assert!(
        nodes.len() >= 2,
        "this test needs 2 nodes or more: {nodes:?}"
    );
    let _guard = Cleanup {
        tb: &tb,
        sync: None,
    };
    reset_cluster(&tb);
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
    assert_eq!(restarts(&tb, job), 1, "requeued once");
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
        u64::from(g) * (end - start) as u64,
        "{g} GPUs x {} s up to the failure: {lost_attempt:?}",
        end - start
    );
    let again = &a[1].record;
    assert_eq!(a[1].attempt, 1);
    assert!(again.start.is_some_and(|s| s >= end), "{again:?}");
    assert_eq!(again.end, None, "the new attempt runs: {again:?}");
    assert_eq!(again.charged, 0, "nothing charged while it runs: {again:?}");
    // Consistent: syncing again changes nothing.
    let before = dump(&ledger);
    sync_again(&tb, &ledger, t0 - 60);
    let after = dump(&ledger);
    let mine = |d: &str| {
        d.lines()
            .filter(|l| l.contains(&format!("\"job_id\":{job},")))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        mine(&before),
        mine(&after),
        "a second sync changed the job's attempts"
    );
}
