//! Contract-aware draining on the real testbed (issue 6, must show 2): two
//! jobs with minimum runtimes of 5 s and 40 s run on the first node (pinned
//! there with `-w`, so that after their requeue they wait for it rather
//! than start on another node); an admin drains it for maintenance; `allot sync --follow --interval 1s` requeues
//! the first soon after 5 s of running time and the second not before 40 s;
//! the node ends DRAINED; `allot report --health` lists both requeues with
//! their reasons and how long the node took to empty.
//!
//! And `allot health --drain` on each fault of issue 53 (a GPU NVML cannot
//! open with Xid 79 at its PCI address, the fabric manager down, a fatal
//! NVSwitch SXid, an uncontained ECC error on a MIG GPU instance): Slurm
//! holds the reason allot wrote, word for word, and the ledger's health
//! event names the check.

use std::process::Child;
use std::time::Duration;

use allot_e2e::{serial, wait_until, Testbed};

/// Undoes the test whatever happens: stops the sync, cancels the requeued
/// jobs (before the resume, so they never start again) and resumes the node.
struct Cleanup<'a> {
    tb: &'a Testbed,
    node: String,
    sync: Option<Child>,
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        if let Some(mut c) = self.sync.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.tb.cancel_all();
        let _ = self.tb.run(
            "scontrol",
            &["update", &format!("nodename={}", self.node), "state=resume"],
        );
    }
}

/// The running time the requeue reason reports (`... (ran N s)`).
fn ran(reason: &str) -> u64 {
    let tail = reason.rsplit("(ran ").next().unwrap();
    tail.trim_end_matches(" s)")
        .parse()
        .unwrap_or_else(|_| panic!("no running time in {reason:?}"))
}

#[test]
fn draining_node_requeues_each_job_at_its_contract_end() {
    let _one = serial();
    let tb = Testbed::from_env();
    let node = tb.nodes()[0].clone();
    tb.cancel_all();
    let _ = tb.run(
        "scontrol",
        &["update", &format!("nodename={node}"), "state=resume"],
    );
    let mut guard = Cleanup {
        tb: &tb,
        node: node.clone(),
        sync: None,
    };

    let short = tb.sbatch_pinned(&node, "b1", "0:05");
    let long = tb.sbatch_pinned(&node, "b2", "0:40");
    tb.wait_state(short, "RUNNING", Duration::from_secs(30));
    tb.wait_state(long, "RUNNING", Duration::from_secs(30));

    tb.drain_for_maintenance(&node);
    assert_eq!(tb.node_state(&node), "draining");

    guard.sync = Some(tb.start_sidecar("health-test-sync.log"));

    // The first job: requeued soon after its 5 s; the second not before
    // 40 s of running time. Neither runs again while the node drains, and
    // the node ends DRAINED.
    tb.wait_drain_requeues(&node, short, long, 40, Duration::from_secs(70));
    for j in [short, long] {
        assert_eq!(
            tb.squeue(j, "%T"),
            "PENDING",
            "job {j} waits elsewhere after its requeue"
        );
    }

    // Slurm's own record of each first attempt: REQUEUED, ran its contract.
    for (job, min, slack) in [(short, 5, 6), (long, 40, 6)] {
        let first = tb.wait_first_attempt(
            job,
            "REQUEUED",
            "State,ElapsedRaw",
            Duration::from_secs(20),
            "slurmdbd to record the requeue",
        );
        let elapsed: u64 = first[1].parse().unwrap();
        assert!(
            (min..=min + slack).contains(&elapsed),
            "job {job} ran {elapsed} s before its requeue; expected {min}..={} s",
            min + slack
        );
    }

    // The ledger: both requeues with their reasons; the drain emptied.
    let got = wait_until(
        Duration::from_secs(10),
        "both requeues in the report",
        || {
            let r = tb.requeue_events();
            if r.len() >= 2 {
                Ok(r)
            } else {
                Err(format!("{r:?}"))
            }
        },
    );
    let reason = |job: u32| {
        got.iter()
            .find(|(j, _)| *j == u64::from(job))
            .map(|(_, r)| r.clone())
            .unwrap_or_else(|| panic!("no requeue of {job} in {got:?}"))
    };
    let (r1, r2) = (reason(short), reason(long));
    assert!(
        r1.starts_with(&format!(
            "node {node} draining (maintenance): minimum runtime 5 s served (ran "
        )),
        "{r1}"
    );
    assert!(
        r2.starts_with(&format!(
            "node {node} draining (maintenance): minimum runtime 40 s served (ran "
        )),
        "{r2}"
    );
    assert!((5..=8).contains(&ran(&r1)), "{r1}");
    assert!((40..=43).contains(&ran(&r2)), "{r2}");

    // The latest drain of this node (earlier runs may have left others).
    let last_drain = |text: &str| {
        text.lines()
            .skip_while(|l| *l != "Drains")
            .filter(|l| l.starts_with(&format!("{node} ")))
            .last()
            .map(str::to_string)
    };
    let (text, drain_line) = wait_until(
        Duration::from_secs(10),
        "the drain to be reported emptied",
        || {
            let out = tb.ok(
                tb.allot_bin().to_str().unwrap(),
                &[
                    "report",
                    "--health",
                    "--config",
                    tb.allot_conf().to_str().unwrap(),
                ],
            );
            match last_drain(&out) {
                Some(l) if !l.contains("still draining") => Ok((out, l)),
                _ => Err(out),
            }
        },
    );
    println!("{text}");
    assert!(text.contains(&format!("requeue  {short:>8}")), "{text}");
    assert!(text.contains(&format!("requeue  {long:>8}")), "{text}");
    assert!(drain_line.ends_with("maintenance"), "{drain_line}");
    assert!(
        drain_line.contains("       2     0  "),
        "two requeued, none kept: {drain_line}"
    );
    drop(guard);
    assert_ne!(
        tb.node_state(&node),
        "drained",
        "resumed for the next tests"
    );
}

/// Resumes the node whatever happens.
struct Resume<'a>(&'a Testbed, &'a str);

impl Drop for Resume<'_> {
    fn drop(&mut self) {
        let _ = self.0.run(
            "scontrol",
            &["update", &format!("nodename={}", self.1), "state=resume"],
        );
    }
}

#[test]
fn allot_health_drains_on_each_fault_of_issue_53_with_its_reason() {
    let _one = serial();
    let tb = Testbed::from_env();
    let node = tb.nodes()[0].clone();
    let dir = tb.dir.join("health-issue-53");
    std::fs::create_dir_all(&dir).unwrap();
    let ledger = allot_e2e::fresh_ledger(&dir, "health.sqlite");
    drop(allot_ledger::Ledger::open(&ledger).unwrap());
    let _resume = Resume(&tb, &node);
    let fixtures = tb.root.join("accounting-sync/fixtures/health");
    for (fixture, reason, check) in [
        (
            "unreadable-xid79.json",
            "allot: gpu1 Xid 79 bus=00000000:3B:00.0",
            "xid",
        ),
        (
            "fabric-not-started.json",
            "allot: gpu0 fabric not started (is nvidia-fabricmanager running?) serial=1650000000200 (+1 more)",
            "fabric",
        ),
        (
            "nvswitch-sxid.json",
            "allot: nvswitch3 SXid 24007 Fatal",
            "nvswitch",
        ),
        (
            "mig-xid.json",
            "allot: gpu0 Xid 95 (GPU-I:05) serial=1654100000100",
            "xid",
        ),
    ] {
        tb.cancel_all();
        let _ = tb.run(
            "scontrol",
            &["update", &format!("nodename={node}"), "state=resume"],
        );
        let path = fixtures.join(fixture);
        let out = std::process::Command::new(tb.allot_bin())
            .args(["health", "--drain", "--json", "--node", &node, "--fixture"])
            .arg(&path)
            .arg("--ledger")
            .arg(&ledger)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(1),
            "{fixture}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["verdict"], "failed", "{fixture}: {v}");
        // (`drained*` while slurmctld waits for the resumed node's ping.)
        assert_eq!(
            tb.node_state(&node).trim_end_matches('*'),
            "drained",
            "{fixture}: an idle node drains at once"
        );
        let held = tb.ok("sinfo", &["-h", "-N", "-n", &node, "-o", "%E"]);
        assert_eq!(held.lines().next().unwrap_or("").trim(), reason, "{fixture}");
        assert_eq!(allot_sync::health::check_of_reason(reason), check);
    }
    // The ledger has the four events, each with the reason Slurm holds (the
    // report's window ends at the current second, exclusive: wait for it).
    let reasons = wait_until(Duration::from_secs(10), "four health events", || {
        let report = tb.ok(
            tb.allot_bin().to_str().unwrap(),
            &[
                "report",
                "--health",
                "--json",
                "--ledger",
                ledger.to_str().unwrap(),
                "--config",
                tb.allot_conf().to_str().unwrap(),
            ],
        );
        let v: serde_json::Value = serde_json::from_str(&report).unwrap();
        let reasons: Vec<String> = v["events"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["kind"] == "health")
            .filter_map(|e| e["reason"].as_str().map(str::to_string))
            .collect();
        if reasons.len() == 4 {
            Ok(reasons)
        } else {
            Err(report)
        }
    });
    assert!(
        reasons[2].starts_with("allot: nvswitch3 SXid 24007"),
        "{reasons:?}"
    );
}
