//! examples/grafana/allot.json: every query names only metrics the sidecar
//! serves and labels they carry, every panel has a query, and (with
//! Debian's `prometheus` package installed) promtool parses every query.

use std::collections::BTreeSet;
use std::process::Command;
use std::sync::Arc;

use allot_ledger::events::{append_event, Event, EventKind};
use allot_ledger::Ledger;
use allot_sync::sidecar::drain_pass::{DrainingStatus, PassReport};
use allot_sync::sidecar::metrics::{to_text_format, SidecarMetrics};

mod common;

fn dashboard() -> serde_json::Value {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/grafana/allot.json"
    ))
    .unwrap();
    serde_json::from_str(&text).expect("valid JSON")
}

/// Every PromQL string of the dashboard: panel targets and variable queries.
fn queries(d: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().into_iter().flatten() {
            out.push(t["expr"].as_str().unwrap().to_string());
        }
    }
    for v in d["templating"]["list"].as_array().unwrap() {
        if let Some(q) = v["definition"].as_str() {
            out.push(q.to_string());
        }
    }
    out
}

/// (metric names served, label names served), from a sidecar whose every
/// family has a series: a ledger with open jobs and an event.
fn served() -> (BTreeSet<String>, BTreeSet<String>) {
    let dir = std::env::temp_dir().join(format!("allot-grafana-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ledger.sqlite");
    let text = common::example_with_ledger(&path);
    let config = Arc::new(fairshare::Config::from_toml_str(&text).unwrap());
    let now = 1_750_000_000;
    let (s, e) = (now - 7200, now - 3600);
    let dump = format!(
        "JobID|JobIDRaw|Account|User|Partition|AllocTRES|Submit|Start|End|Elapsed|State|AdminComment\n\
         1|1|a1|alice|gpu|gres/gpu=2|{s}|{s}|{e}|01:00:00|COMPLETED|\n\
         2|2|b1|bob|gpu|gres/gpu=1|{s}|{s}||01:00:00|RUNNING|\n\
         3|3|a2|carol|gpu|gres/gpu=3|{s}|||00:00:00|PENDING|\n\
         4|4|a1|alice|gpu|gres/gpu=1|{s}|{s}|{e}|01:00:00|PREEMPTED|\n\
         4|4|a1|alice|gpu|gres/gpu=1|{e}|||00:00:00|PENDING|\n"
    );
    let mut ledger = Ledger::open(&path).unwrap();
    allot_sync::sidecar::sync::import_dump(
        &mut ledger,
        &allot_ledger::charge::Charging::from_config(&config),
        dump.as_bytes(),
        jiff::tz::TimeZone::UTC,
        100,
    )
    .unwrap();
    append_event(
        &path,
        &Event {
            time: now - 100,
            node: "gpu-a01".into(),
            kind: EventKind::Requeue,
            since: Some(now - 200),
            job_id: Some(2),
            gpu: None,
            serial: None,
            reason: "test".into(),
        },
    )
    .unwrap();
    for (time, kind, since, reason) in [
        (now - 50, EventKind::Drained, Some(now - 200), "test"),
        (
            now - 40,
            EventKind::Health,
            None,
            "allot: gpu3 Xid 79 serial=1",
        ),
    ] {
        append_event(
            &path,
            &Event {
                time,
                node: "gpu-a01".into(),
                kind,
                since,
                job_id: None,
                gpu: None,
                serial: None,
                reason: reason.into(),
            },
        )
        .unwrap();
    }
    let m = SidecarMetrics::new();
    m.update_from_ledger(&ledger.reader().unwrap(), config, 16, now)
        .unwrap();
    m.record_pass(true, std::time::Duration::from_secs(1), now, Some(now));
    m.record_drain_pass(&PassReport {
        nodes: vec![DrainingStatus {
            node: "gpu-a02".into(),
            jobs: 1,
            empty_by: Some(now + 600),
        }],
        ..Default::default()
    });
    let text = to_text_format(&m.encode(now));
    let _ = std::fs::remove_dir_all(&dir);
    let names: BTreeSet<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect();
    let mut labels = BTreeSet::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        if let Some((_, rest)) = line.split_once('{') {
            for pair in rest.split("\",") {
                if let Some((k, _)) = pair.split_once("=\"") {
                    labels.insert(k.to_string());
                }
            }
        }
    }
    // Every family has a series, so every label name was seen.
    for n in &names {
        assert!(
            text.lines()
                .any(|l| l.starts_with(&format!("{n} ")) || l.starts_with(&format!("{n}{{"))),
            "{n} has no series in the test ledger"
        );
    }
    (names, labels)
}

fn identifiers(q: &str) -> Vec<String> {
    let mut out = Vec::new();
    let b = q.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_alphabetic() || b[i] == b'_' {
            let j = (i..b.len())
                .find(|&j| !(b[j].is_ascii_alphanumeric() || b[j] == b'_'))
                .unwrap_or(b.len());
            out.push(q[i..j].to_string());
            i = j;
        } else if b[i] == b'"' {
            // skip string literals
            i += 1 + q[i + 1..].find('"').unwrap_or(q.len() - i - 1) + 1;
        } else {
            i += 1;
        }
    }
    out
}

#[test]
fn every_query_uses_served_metrics_and_labels() {
    let d = dashboard();
    let (names, labels) = served();
    assert!(names.len() >= 20, "{names:?}");
    let qs = queries(&d);
    assert!(qs.len() >= 15, "{qs:?}");
    let mut used = BTreeSet::new();
    for q in &qs {
        let metrics: Vec<String> = identifiers(q)
            .into_iter()
            .filter(|w| w.starts_with("allot_"))
            .collect();
        assert!(!metrics.is_empty(), "query without an allot metric: {q}");
        for m in metrics {
            assert!(
                names.contains(&m),
                "{q}: {m} is not served; served: {names:?}"
            );
            used.insert(m);
        }
        // Label names in matchers ({l="..."}, {l=~"..."}) and by (...).
        let mut rest = q.as_str();
        while let Some(i) = rest.find('{') {
            let body = &rest[i + 1..rest[i..].find('}').map(|j| i + j).unwrap()];
            for m in body.split(',') {
                let l = m.split(['=', '!']).next().unwrap().trim();
                assert!(
                    labels.contains(l) || l == "job" || l == "instance",
                    "{q}: label {l} is not served; served: {labels:?}"
                );
            }
            rest = &rest[i + 1..];
        }
        if let Some(i) = q.find("by (") {
            let body = &q[i + 4..i + 4 + q[i + 4..].find(')').unwrap()];
            for l in body.split(',') {
                assert!(labels.contains(l.trim()), "{q}: by label {l} is not served");
            }
        }
    }
    // The panels the issue asks for: share vs usage, the rank, requeues
    // and preemptions with their reasons, drains and time to empty, health
    // failures by check; and the sync's health.
    for m in [
        "allot_node_window_usage_gpu_seconds",
        "allot_node_allocation_gpu_seconds",
        "allot_node_allocation_ratio",
        "allot_node_fair_share_factor",
        "allot_node_events_total",
        "allot_requeues_total",
        "allot_preemptions_total",
        "allot_health_drains_total",
        "allot_draining_node_jobs",
        "allot_draining_node_time_to_empty_seconds",
        "allot_node_drain_emptied_after_seconds",
        "allot_sync_last_success_timestamp_seconds",
    ] {
        assert!(used.contains(m), "no panel uses {m}");
    }
    for p in d["panels"].as_array().unwrap() {
        assert!(
            !p["targets"].as_array().unwrap().is_empty(),
            "panel {} has no query",
            p["title"]
        );
        assert!(p["datasource"]["uid"] == "${datasource}", "{}", p["title"]);
    }
}

#[test]
fn promtool_parses_every_query() {
    if Command::new("promtool").arg("--version").output().is_err() {
        eprintln!("promtool not installed (Debian's prometheus package): syntax not checked");
        return;
    }
    let d = dashboard();
    let mut rules = String::from("groups:\n  - name: allot-dashboard\n    rules:\n");
    for (i, q) in queries(&d).iter().enumerate() {
        if q.starts_with("label_values(") {
            continue; // Grafana's own function, not PromQL
        }
        let q = q
            .replace("$__rate_interval", "5m")
            .replace("$node", ".*")
            .replace("$account", ".*");
        rules += &format!(
            "      - record: allot:dashboard_query:{i}\n        expr: '{}'\n",
            q.replace('\'', "''")
        );
    }
    let dir = std::env::temp_dir().join(format!("allot-grafana-rules-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("rules.yml");
    std::fs::write(&f, &rules).unwrap();
    let out = Command::new("promtool")
        .args(["check", "rules"])
        .arg(&f)
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "promtool check rules:\n{said}\n{rules}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
