//! `scripts/testbed up` is idempotent and `down` stops exactly what `up`
//! started. Run last by scripts/test: it brings the testbed down.

use std::path::Path;
use std::process::Command;

use allot_e2e::Testbed;

fn testbed(root: &Path, verb: &str) {
    let st = Command::new(root.join("scripts/testbed"))
        .arg(verb)
        .status()
        .unwrap();
    assert!(st.success(), "scripts/testbed {verb} failed: {st}");
}

fn pid_alive(pid: &str) -> bool {
    Path::new("/proc").join(pid.trim()).exists()
}

#[test]
fn up_up_down_leaves_no_daemon() {
    let tb = Testbed::from_env();
    testbed(&tb.root, "up");
    let run = tb.dir.join("run");
    // One slurmd per node: run/slurmd-<node>.pid.
    let nodes = tb.nodes();
    let daemons: Vec<String> = ["munged", "mariadb", "slurmdbd", "slurmctld"]
        .iter()
        .map(|d| d.to_string())
        .chain(nodes.iter().map(|n| format!("slurmd-{n}")))
        .collect();
    let pids: Vec<(String, String)> = daemons
        .iter()
        .map(|d| {
            (
                d.clone(),
                std::fs::read_to_string(run.join(format!("{d}.pid")))
                    .unwrap_or_else(|e| panic!("{d}.pid: {e}")),
            )
        })
        .collect();
    assert!(
        pids.iter().all(|(_, p)| pid_alive(p)),
        "after up every daemon runs: {pids:?}"
    );
    testbed(&tb.root, "up");
    for (d, p) in &pids {
        let now = std::fs::read_to_string(run.join(format!("{d}.pid"))).unwrap();
        assert_eq!(&now, p, "second up must not restart {d}");
    }
    testbed(&tb.root, "down");
    for (d, p) in &pids {
        assert!(
            !pid_alive(p),
            "{d} (pid {}) still runs after down",
            p.trim()
        );
    }
    let left = Command::new("pgrep")
        .args(["-f", &tb.dir.to_string_lossy()])
        .output()
        .unwrap();
    assert!(
        left.stdout.is_empty(),
        "processes still use the testbed dir: {}",
        String::from_utf8_lossy(&left.stdout)
    );
}
