//! What only means something across nodes (issue 14), on the testbed's
//! several slurmd (default 4 nodes x 8 GPUs): a job spanning two nodes is
//! charged for all its GPUs; a preemptor's victims are on the node where it
//! starts and none elsewhere; draining one node (for maintenance, or by
//! `allot health --drain` on a recorded GPU failure) requeues only its
//! jobs, each at its minimum runtime, while the others keep
//! running and take new work; a node lost mid-job (its slurmd killed) ends
//! the attempt as NODE_FAIL, charged up to the failure, and Slurm requeues
//! the job. Each test takes the whole cluster, so they run one at a time.
//!
//! This file holds what the tests share (resetting the cluster, running
//! `allot`, syncing into a ledger of their own); the tests are in `charge`,
//! `preempt` and `drain`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use allot_e2e::{epoch, fresh_ledger, serial, wait_until, Testbed};
use allot_ledger::{LedgerReader, StoredAttempt};

mod charge;
mod drain;
mod preempt;

const HOUR: i64 = 3600;

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

/// Takes the whole cluster for one test: checks it has 2 nodes or more and
/// resets it, now and however the test ends (the returned guard); returns
/// its nodes too.
fn take_cluster(tb: &Testbed) -> (Vec<String>, Cleanup<'_>) {
    let nodes = tb.nodes();
    assert!(
        nodes.len() >= 2,
        "this test needs 2 nodes or more (ALLOT_TB_NODES), the testbed has {nodes:?}"
    );
    let guard = Cleanup { tb, sync: None };
    reset_cluster(tb);
    (nodes, guard)
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

/// A fresh ledger of this test: `allot sync` of the testbed's sacct since
/// `since` (epoch s) into `<testbed>/multinode/NAME`.
fn sync_into(tb: &Testbed, name: &str, since: i64) -> PathBuf {
    let dir = tb.dir.join("multinode");
    std::fs::create_dir_all(&dir).unwrap();
    let ledger = fresh_ledger(&dir, name);
    sync_again(tb, &ledger, since);
    ledger
}

fn sync_again(tb: &Testbed, ledger: &Path, since: i64) {
    tb.allot_ok(&[
        "sync",
        "--config",
        tb.allot_conf().to_str().unwrap(),
        "--ledger",
        ledger.to_str().unwrap(),
        "--since",
        &since.to_string(),
    ]);
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
