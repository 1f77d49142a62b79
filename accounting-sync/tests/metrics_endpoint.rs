//! `allot sync --follow --metrics-listen`: scrapes the real binary's
//! `/metrics` (a fake sacct feeds it) and checks the per-node values equal
//! what `allot report --json` says for the same ledger. No Slurm needed.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use allot_sync::sidecar::metrics::parse_exposition;

mod common;

fn allot() -> Command {
    let mut c = common::allot();
    c.env("ALLOT_LOG", "info");
    c
}

/// Kills the sidecar when the test ends, failed or not.
struct Sidecar(Child);
impl Drop for Sidecar {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// (status line, headers + body) of a plain HTTP/1.0 GET, asking for
/// OpenMetrics as Prometheus does.
fn get(port: u16, path: &str) -> std::io::Result<(String, String)> {
    get_accepting(
        port,
        path,
        "application/openmetrics-text;version=1.0.0,text/plain;q=0.5",
    )
}

fn get_accepting(port: u16, path: &str, accept: &str) -> std::io::Result<(String, String)> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: localhost\r\nAccept: {accept}\r\n\r\n"
    )?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    let (status, rest) = out.split_once("\r\n").unwrap_or((&out, ""));
    Ok((status.to_string(), rest.to_string()))
}

fn setup(dir: &Path) -> (PathBuf, PathBuf) {
    std::fs::create_dir_all(dir).unwrap();
    let ledger = dir.join("ledger.sqlite");
    let config = dir.join("allot.toml");
    std::fs::write(&config, common::example_with_ledger(&ledger)).unwrap();
    // Finished jobs of three teams well inside the window, and a pending one:
    // the report's numbers do not move while the test runs.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let (s, e) = (now - 3 * 3600, now - 3600);
    let sacct = dir.join("sacct");
    std::fs::write(
        &sacct,
        format!(
            "#!/bin/sh\n\
             echo '11|11|a1|alice|gpu|gres/gpu=2|{s}|{s}|{e}|02:00:00|COMPLETED||'\n\
             echo '12|12|b1|bob|gpu|gres/gpu=4|{s}|{s}|{m}|01:00:00|COMPLETED||'\n\
             echo '13|13|a2|carol|gpu|gres/gpu=1|{s}|{s}|{e}|02:00:00|FAILED||'\n\
             echo '14|14|vision|carol|gpu|gres/gpu=3|{s}|Unknown|Unknown|00:00:00|PENDING||'\n",
            m = s + 1800
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&sacct, std::fs::Permissions::from_mode(0o755)).unwrap();
    (config, sacct)
}

#[test]
fn metrics_equal_the_report() {
    let dir = std::env::temp_dir().join(format!("allot-metrics-e2e-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (config, sacct) = setup(&dir);
    let port = free_port();
    let _sidecar = Sidecar(
        allot()
            .args([
                "sync",
                "--follow",
                "--no-drain",
                "--interval",
                "1s",
                "--config",
            ])
            .arg(&config)
            .arg("--sacct")
            .arg(&sacct)
            .args(["--metrics-listen", &format!("127.0.0.1:{port}")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );

    // Wait for a successful pass to show.
    let deadline = Instant::now() + Duration::from_secs(30);
    let text = loop {
        if let Ok((status, body)) = get(port, "/metrics") {
            if body.contains("allot_sync_passes_total{result=\"success\"}")
                && body.contains("allot_node_window_usage_gpu_seconds")
            {
                assert!(status.contains("200"), "{status}");
                assert!(
                    body.to_ascii_lowercase()
                        .contains("content-type: application/openmetrics-text"),
                    "{body}"
                );
                break body.split_once("\r\n\r\n").unwrap().1.to_string();
            }
        }
        assert!(
            Instant::now() < deadline,
            "no successful pass in /metrics after 30 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(text.ends_with("# EOF\n"), "{text}");
    // Anyone else (curl, promtool) gets Prometheus' text format 0.0.4, which
    // promtool's linter finds nothing to say about (when it is installed:
    // Debian's prometheus package, scripts/testbed install).
    let (_, plain) = get_accepting(port, "/metrics", "*/*").unwrap();
    assert!(
        plain
            .to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{plain}"
    );
    let plain = plain.split_once("\r\n\r\n").unwrap().1.to_string();
    assert!(!plain.contains("# EOF"), "{plain}");
    assert!(
        plain.contains("# TYPE allot_sync_passes_total counter\n"),
        "{plain}"
    );
    assert_eq!(parse_exposition(&plain), parse_exposition(&text));
    if let Ok(mut child) = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(plain.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success() && said.trim().is_empty(),
            "promtool check metrics:\n{said}"
        );
    } else {
        eprintln!("promtool not installed: the lint of /metrics is skipped");
    }
    let (status, _) = get(port, "/nothing").unwrap();
    assert!(status.contains("404"), "{status}");

    let metrics = parse_exposition(&text);
    let value = |name: &str, node: &str| -> Option<f64> {
        metrics
            .iter()
            .find(|((n, ls), _)| n == name && ls.iter().any(|(k, v)| k == "node" && v == node))
            .map(|(_, v)| *v)
    };

    let out = common::ok(allot().args(["report", "--json", "--config"]).arg(&config));
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    let lines = report["lines"].as_array().unwrap();
    assert_eq!(lines.len(), 8, "root, 2 programs, 5 leaves");
    let mut checked = 0;
    for l in lines {
        let node = l["account"].as_str().unwrap();
        let depth = l["depth"].as_u64().unwrap();
        // Window and free-tier usage (GPU-seconds): equal to the report's
        // exact GPU-seconds; the allocation: its GPU-hours x 3600.
        assert_eq!(
            value("allot_node_window_usage_gpu_seconds", node),
            l["charged_gpu_seconds"].as_f64(),
            "window usage of {node}"
        );
        assert_eq!(
            value("allot_node_free_tier_usage_gpu_seconds", node),
            l["unallocated_gpu_seconds"].as_u64().map(|v| v as f64),
            "free-tier usage of {node}"
        );
        let alloc = value("allot_node_allocation_gpu_seconds", node).unwrap();
        let want = l["allocation_gpu_h"].as_f64().unwrap() * 3600.0;
        assert!(
            (alloc - want).abs() <= 1e-9 * want.max(1.0),
            "allocation of {node}: {alloc} vs {want}"
        );
        // Level FS: JSON writes an infinite one (no usage) as null.
        match (depth, &l["level_fs"]) {
            (0, _) => assert_eq!(value("allot_node_level_fs", node), None),
            (_, serde_json::Value::Null) => {
                assert_eq!(
                    value("allot_node_level_fs", node),
                    Some(f64::INFINITY),
                    "{node}"
                )
            }
            (_, v) => assert_eq!(value("allot_node_level_fs", node), v.as_f64(), "{node}"),
        }
        assert_eq!(
            value("allot_node_fair_share_factor", node),
            l["fair_share"].as_f64(),
            "fair share of {node}"
        );
        checked += 1;
    }
    assert_eq!(checked, 8);
    // a1: 2 GPUs x 2 h; nlp: a1 + a2 (1 GPU x 2 h), in GPU-seconds.
    assert_eq!(
        value("allot_node_window_usage_gpu_seconds", "a1"),
        Some(4.0 * 3600.0)
    );
    assert_eq!(
        value("allot_node_window_usage_gpu_seconds", "nlp"),
        Some(6.0 * 3600.0)
    );
    let key = |name: &str, labels: &[(&str, &str)]| {
        let mut l: Vec<(String, String)> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        l.sort();
        (name.to_string(), l)
    };
    assert_eq!(
        metrics.get(&key(
            "allot_account_pending_gpus",
            &[("account", "vision"), ("tier", "allocated")]
        )),
        Some(&3.0)
    );
    assert_eq!(metrics.get(&key("allot_ledger_rows", &[])), Some(&4.0));
    let lag = metrics[&key("allot_sync_lag_seconds", &[])];
    assert!((0.0..30.0).contains(&lag), "lag {lag}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn metrics_listen_needs_follow_and_a_free_port() {
    let out = allot()
        .args(["sync", "--metrics-listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--follow"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A port already taken: one line, exit 1, before any pass.
    let dir = std::env::temp_dir().join(format!("allot-metrics-taken-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (config, sacct) = setup(&dir);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let out = allot()
        .args(["sync", "--follow", "--no-drain", "--config"])
        .arg(&config)
        .arg("--sacct")
        .arg(&sacct)
        .args(["--metrics-listen", &addr.to_string()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot listen"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
