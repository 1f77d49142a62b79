//! A real Prometheus (Debian's `prometheus` package) scrapes the sidecar's
//! `/metrics` on the testbed, and a PromQL query over Prometheus' HTTP API
//! finds each team's window usage equal to what `allot report --json` says.
//!
//! The sidecar syncs the testbed's sacct into a ledger of its own (so only
//! this test's finished jobs are in it and the numbers cannot move while it
//! runs); its jobs have 1-second minimum runtimes, so nothing is still being
//! charged when the values are compared.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use allot_e2e::{epoch, free_port, serial, wait_until, Killed, Testbed};

/// The body of `GET path` on 127.0.0.1:port, if it answered 200.
fn get(port: u16, path: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let (head, body) = out.split_once("\r\n\r\n")?;
    if !head.lines().next()?.contains(" 200") {
        return None;
    }
    Some(body.to_string())
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Values of an instant PromQL query: (labels, value) per series.
fn promql(port: u16, query: &str) -> Option<Vec<(serde_json::Value, f64)>> {
    let body = get(port, &format!("/api/v1/query?query={}", urlencode(query)))?;
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    if v["status"] != "success" {
        return None;
    }
    Some(
        v["data"]["result"]
            .as_array()?
            .iter()
            .map(|r| {
                let value = r["value"][1].as_str().unwrap();
                let f = match value {
                    "+Inf" => f64::INFINITY,
                    x => x.parse().unwrap(),
                };
                (r["metric"].clone(), f)
            })
            .collect(),
    )
}

fn allot(tb: &Testbed) -> Command {
    let bin = tb.allot_bin();
    assert!(bin.exists(), "{} missing: cargo build first", bin.display());
    Command::new(bin)
}

fn prometheus_config(dir: &Path, target: u16) -> std::path::PathBuf {
    let p = dir.join("prometheus.yml");
    std::fs::write(
        &p,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: allot\n    static_configs:\n      - targets: [\"127.0.0.1:{target}\"]\n"
        ),
    )
    .unwrap();
    p
}

#[test]
fn prometheus_sees_the_report() {
    let tb = Testbed::from_env();
    let _g = serial();
    assert!(
        Command::new("prometheus").arg("--version").output().is_ok(),
        "prometheus not found: apt-get install prometheus (scripts/testbed install does)"
    );
    tb.cancel_all();
    // Jobs of earlier tests ended before `since`: with --overlap 0s no pass
    // reads them back.
    let since = epoch() + 1;
    wait_until(Duration::from_secs(5), "a new second", || {
        if epoch() > since {
            Ok(())
        } else {
            Err(epoch().to_string())
        }
    });
    // Two teams' jobs, finished and fully charged (1 s minimum runtimes).
    let jobs = [
        tb.sbatch(&[
            "-A",
            "a1",
            "--gres=gpu:2",
            "--min-runtime=0:01",
            "--wrap",
            "sleep 3",
        ]),
        tb.sbatch(&[
            "-A",
            "b2",
            "--gres=gpu:1",
            "--min-runtime=0:01",
            "--wrap",
            "sleep 2",
        ]),
    ];
    for j in jobs {
        wait_until(
            Duration::from_secs(120),
            &format!("job {j} to complete"),
            || {
                let rows = tb.sacct(j, "State");
                if rows.len() == 1 && rows[0][0] == "COMPLETED" {
                    Ok(())
                } else {
                    Err(format!("{rows:?}"))
                }
            },
        );
    }

    // A range query can miss a job for a moment after `sacct -j` shows it
    // COMPLETED; the sidecar's default 1 h overlap would read it on a later
    // pass, which --overlap 0s turns off here: wait until the range query
    // the sidecar runs lists both jobs.
    let start = jiff::tz::TimeZone::system()
        .to_datetime(jiff::Timestamp::from_second(since).unwrap())
        .strftime("%Y-%m-%dT%H:%M:%S")
        .to_string();
    wait_until(
        Duration::from_secs(60),
        "sacct -S to list both jobs",
        || {
            let ids = tb.ok(
                "sacct",
                &[
                    "-a", "-X", "-n", "-P", "-S", &start, "-E", "now", "-o", "JobIDRaw",
                ],
            );
            if jobs
                .iter()
                .all(|j| ids.lines().any(|l| l.trim() == j.to_string()))
            {
                Ok(())
            } else {
                Err(ids)
            }
        },
    );

    let dir = std::env::temp_dir().join(format!("allot-prometheus-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let ledger = dir.join("ledger.sqlite");
    let metrics_port = free_port();
    // The sidecar as the shipped allot-sync.service runs it (the packaged
    // unit and binary on the host testbed), its options as
    // /etc/default/allot-sync's ALLOT_SYNC_OPTS would give them.
    let opts: Vec<String> = [
        "--no-drain",
        "--interval",
        "2s",
        "--overlap",
        "0s",
        "--since",
        &since.to_string(),
        "--ledger",
        ledger.to_str().unwrap(),
        "--metrics-listen",
        &format!("127.0.0.1:{metrics_port}"),
    ]
    .map(String::from)
    .to_vec();
    let sidecar = tb.unit_command(&opts);
    assert_eq!(sidecar[1..3], ["sync", "--follow"], "{sidecar:?}");
    eprintln!("sidecar: {}", sidecar.join(" "));
    let _sidecar = Killed(
        Command::new(&sidecar[0])
            .args(&sidecar[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("sidecar.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    wait_until(
        Duration::from_secs(60),
        "the sidecar's first pass with both jobs",
        || {
            let m = get(metrics_port, "/metrics").ok_or("no answer")?;
            if m.contains("allot_ledger_rows 2\n")
                && m.contains("allot_sync_passes_total{result=\"success\"}")
            {
                Ok(())
            } else {
                Err(m)
            }
        },
    );

    let prom_port = free_port();
    let config = prometheus_config(&dir, metrics_port);
    let _prometheus = Killed(
        Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    wait_until(
        Duration::from_secs(90),
        "Prometheus to scrape the sidecar",
        || {
            let up = promql(prom_port, "up{job=\"allot\"}").ok_or("no answer")?;
            if up.len() == 1 && up[0].1 == 1.0 {
                Ok(())
            } else {
                Err(format!("{up:?}"))
            }
        },
    );

    let out = allot(&tb)
        .args(["report", "--json", "--ledger"])
        .arg(&ledger)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let charged = |node: &str| {
        report["lines"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["account"] == node && l["user"].is_null())
            .and_then(|l| l["charged_gpu_seconds"].as_f64())
            .unwrap_or_else(|| panic!("{node} not in the report"))
    };
    for (node, gpus, at_least_s) in [("a1", 2.0, 3.0), ("b2", 1.0, 2.0), ("root", 0.0, 0.0)] {
        let want = charged(node);
        assert!(want >= gpus * at_least_s, "{node}: {want} GPU-s");
        // The PromQL check: the series equals the report's number.
        let q = format!(
            "allot_node_window_usage_gpu_seconds{{job=\"allot\",node=\"{node}\"}} == {want:?}"
        );
        let got = wait_until(Duration::from_secs(30), &format!("PromQL {q}"), || {
            let r = promql(prom_port, &q).ok_or("no answer")?;
            if r.len() == 1 {
                Ok(r[0].1)
            } else {
                Err(format!("{r:?}"))
            }
        });
        assert_eq!(got, want, "{node}");
        eprintln!("{q} -> {got}");
    }
    // And a team's share of its allocation, as a dashboard would plot it.
    let q = "100 * allot_node_window_usage_gpu_seconds{node=\"a1\"} / allot_node_allocation_gpu_seconds{node=\"a1\"}";
    let r = promql(prom_port, q).unwrap();
    assert_eq!(r.len(), 1, "{q}");
    assert!(r[0].1 > 0.0, "{q}: {}", r[0].1);
    let _ = std::fs::remove_dir_all(&dir);
}
