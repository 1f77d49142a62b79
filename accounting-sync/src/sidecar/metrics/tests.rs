use super::*;
use allot_ledger::charge::Charging;
use allot_ledger::Ledger;

fn config(ledger: &std::path::Path) -> Config {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/allot.toml"
    ))
    .unwrap()
    .replace(
        "/var/lib/allot/ledger.sqlite",
        &ledger.display().to_string(),
    );
    Config::from_toml_str(&text).unwrap()
}

/// A ledger at `path` holding the attempts of a `sacct --parsable2` dump.
fn ledger_of(path: &std::path::Path, cfg: &Config, dump: &str) -> Ledger {
    let mut ledger = Ledger::open(path).unwrap();
    crate::sidecar::sync::import_dump(
        &mut ledger,
        &Charging::from_config(cfg),
        dump.as_bytes(),
        jiff::tz::TimeZone::UTC,
        100,
    )
    .unwrap();
    ledger
}

fn get(m: &Exposition, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut l: Vec<(String, String)> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    l.sort();
    m.get(&(name.to_string(), l)).copied()
}

#[test]
fn node_values_equal_the_report() {
    let dir = std::env::temp_dir().join(format!("allot-metrics-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ledger.sqlite");
    let _ = std::fs::remove_file(&path);
    let cfg = Arc::new(config(&path));
    let now = 1_750_000_000;
    let (s, e) = (now - 7200, now - 3600);
    let dump = format!(
        "JobID|JobIDRaw|Account|User|Partition|AllocTRES|Submit|Start|End|Elapsed|State|AdminComment\n\
         1|1|a1|alice|gpu|gres/gpu=2|{s}|{s}|{e}|01:00:00|COMPLETED|\n\
         2|2|b1|bob|gpu|gres/gpu=4|{s}|{s}|{e}|01:00:00|COMPLETED|\n\
         3|3|a2|carol|gpu|gres/gpu=3|{s}|||00:00:00|PENDING|\n"
    );
    let ledger = ledger_of(&path, &cfg, &dump);
    let reader = ledger.reader().unwrap();
    let m = SidecarMetrics::new();
    m.update_from_ledger(&reader, cfg.clone(), 16, now).unwrap();
    m.record_pass(true, Duration::from_millis(250), now, Some(now - 10));
    let text = m.encode(now + 5);
    assert!(text.ends_with("# EOF\n"), "{text}");
    let v = parse_exposition(&text);
    let r = crate::reports::budget::build(&reader, cfg, 16, now - 7 * 86400, now, false).unwrap();
    for l in &r.lines {
        let node = [("node", l.account.as_str())];
        // The node's sample of one metric, whatever its other labels.
        let of_node = |name: &str| {
            v.iter()
                .find(|((n, ls), _)| {
                    n == name && ls.iter().any(|(k, x)| k == "node" && x == &l.account)
                })
                .map(|(_, x)| *x)
        };
        let usage = of_node("allot_node_window_usage_gpu_seconds");
        assert_eq!(usage, Some(l.charged_gpu_seconds), "{node:?}");
        assert_eq!(
            of_node("allot_node_fair_share_factor"),
            l.fair_share,
            "{node:?}"
        );
        assert_eq!(of_node("allot_node_level_fs"), l.level_fs, "{node:?}");
    }
    // a1 charged max(1 h, 1 h minimum runtime) x 2 GPUs.
    let a1 = [("node", "a1"), ("path", "tree.nlp.a1"), ("parent", "nlp")];
    assert_eq!(
        get(&v, "allot_node_window_usage_gpu_seconds", &a1),
        Some(7200.0)
    );
    let share = get(&v, "allot_node_share_ratio", &a1).unwrap();
    assert!((share - 35.0 / 60.0).abs() < 1e-12, "{share}");
    let alloc = get(&v, "allot_node_allocation_gpu_seconds", &a1).unwrap();
    assert!(
        (alloc - 0.35 * 16.0 * 168.0 * 3600.0).abs() < 1e-6,
        "{alloc}"
    );
    assert_eq!(
        get(
            &v,
            "allot_account_pending_gpus",
            &[("account", "a2"), ("tier", "allocated")]
        ),
        Some(3.0)
    );
    assert_eq!(get(&v, "allot_ledger_rows", &[]), Some(3.0));
    assert_eq!(get(&v, "allot_sync_lag_seconds", &[]), Some(15.0));
    assert_eq!(
        get(&v, "allot_sync_passes_total", &[("result", "success")]),
        Some(1.0)
    );
    assert_eq!(
        get(&v, "allot_sync_last_success_timestamp_seconds", &[]),
        Some(now as f64)
    );
    assert_eq!(get(&v, "allot_capacity_gpus", &[]), Some(16.0));
    // Nodes without usage: Level FS +Inf, spelled as the format wants.
    assert!(
        text.contains(
            "node=\"vision\",path=\"tree.perception.vision\",parent=\"perception\"} +Inf\n"
        ),
        "{text}"
    );
    assert!(!text.contains(" inf\n"), "{text}");
    assert_eq!(
        get(
            &v,
            "allot_node_level_fs",
            &[
                ("node", "vision"),
                ("path", "tree.perception.vision"),
                ("parent", "perception")
            ]
        ),
        Some(f64::INFINITY)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn requeues_preemptions_health_and_drains() {
    use crate::sidecar::drain_pass::{DrainingStatus, PassReport};
    use allot_ledger::events::{append_event, Event};
    let dir = std::env::temp_dir().join(format!("allot-metrics-rq-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ledger.sqlite");
    let cfg = Arc::new(config(&path));
    let now = 1_750_000_000;
    let (s, e) = (now - 7200, now - 3600);
    let r = e + 5; // the requeued attempts' next submit
    let dump = format!(
        "JobID|JobIDRaw|Account|User|Partition|AllocTRES|Submit|Start|End|Elapsed|State|AdminComment\n\
         10|10|a1|alice|gpu|gres/gpu=2|{s}|{s}|{e}|01:00:00|PREEMPTED|\n\
         10|10|a1|alice|gpu|gres/gpu=2|{r}|{r}||00:10:00|RUNNING|\n\
         11|11|b1|bob|gpu|gres/gpu=1|{s}|{s}|{e}|01:00:00|REQUEUED|\n\
         11|11|b1|bob|gpu|gres/gpu=1|{r}|||00:00:00|PENDING|\n\
         12|12|a2|carol|gpu|gres/gpu=1|{s}|{s}|{e}|01:00:00|REQUEUED|\n\
         12|12|a2|carol|gpu|gres/gpu=1|{r}|{r}|{now}|00:59:55|COMPLETED|\n\
         13|13|b1|bob|gpu|gres/gpu=4|{s}|{s}|{e}|01:00:00|NODE_FAIL|\n\
         13|13|b1|bob|gpu|gres/gpu=4|{r}|||00:00:00|PENDING|\n\
         14|14|b1|bob|gpu|gres/gpu=4|{s}|{s}|{e}|01:00:00|NODE_FAIL|\n\
         15|15|a1|alice|gpu|gres/gpu=1|{s}|{s}|{e}|01:00:00|PREEMPTED|allot:min_runtime=0\n\
         16|16|a1|alice|gpu|gres/gpu=1|{s}|{s}|{e}|01:00:00|CANCELLED by 0|\n"
    );
    let ledger = ledger_of(&path, &cfg, &dump);
    let ev = |time, node: &str, kind, since, job_id, reason: &str| Event {
        time,
        node: node.into(),
        kind,
        since,
        job_id,
        gpu: None,
        serial: None,
        reason: reason.into(),
    };
    let drain = e - 600;
    for event in [
        ev(
            drain,
            "gpu-a01",
            EventKind::Drain,
            Some(drain),
            None,
            "maint",
        ),
        // allot requeued job 11 on the draining node (not job 12).
        ev(
            e - 1,
            "gpu-a01",
            EventKind::Requeue,
            Some(drain),
            Some(11),
            "served",
        ),
        ev(
            e + 300,
            "gpu-a01",
            EventKind::Drained,
            Some(drain),
            None,
            "maint",
        ),
        ev(
            s,
            "gpu-a02",
            EventKind::Health,
            None,
            None,
            "allot: gpu3 Xid 79 serial=7 (+1 more)",
        ),
        ev(
            s + 1,
            "gpu-a02",
            EventKind::Health,
            None,
            None,
            "allot: gpu0 Xid 48 serial=8",
        ),
        ev(
            s + 2,
            "gpu-a03",
            EventKind::Health,
            None,
            None,
            "allot: 7 of 8 GPUs visible",
        ),
    ] {
        append_event(&path, &event).unwrap();
    }
    // preempt/allot's records: two by the net rule, one of a free-tier job.
    for (victim, rule) in [(10, "net_gain"), (15, "free_tier"), (17, "net_gain")] {
        let p = allot_ledger::preemptions::Preemption {
            time: e,
            victim,
            victim_account: "a1".into(),
            preemptor: 13,
            preemptor_account: "b1".into(),
            rule: rule.into(),
            grounds: serde_json::Value::Null,
        };
        ledger.record_preemption(&p).unwrap();
    }
    let reader = ledger.reader().unwrap();
    let m = SidecarMetrics::new();
    // Twice: counters follow the ledger's counts, never add them up.
    m.update_from_ledger(&reader, cfg.clone(), 16, now).unwrap();
    m.update_from_ledger(&reader, cfg.clone(), 16, now).unwrap();
    m.record_drain_pass(&PassReport {
        draining: vec!["gpu-b01".into(), "gpu-b02".into()],
        nodes: vec![
            DrainingStatus {
                node: "gpu-b01".into(),
                jobs: 2,
                empty_by: Some(now + 1800),
            },
            DrainingStatus {
                node: "gpu-b02".into(),
                jobs: 1,
                empty_by: None,
            },
        ],
        ..Default::default()
    });
    let text = m.encode(now + 5);
    let v = parse_exposition(&text);
    let rq = |account: &str, tier: &str, reason: &str| {
        get(
            &v,
            "allot_requeues_total",
            &[("account", account), ("tier", tier), ("reason", reason)],
        )
    };
    assert_eq!(rq("a1", "allocated", "preempted"), Some(1.0), "{text}");
    assert_eq!(rq("b1", "allocated", "drain"), Some(1.0));
    assert_eq!(rq("a2", "allocated", "other"), Some(1.0));
    assert_eq!(
        rq("b1", "allocated", "node_fail"),
        Some(1.0),
        "job 14 ended"
    );
    assert_eq!(rq("a1", "free", "preempted"), None, "job 15 was cancelled");
    let requeues: f64 = v
        .iter()
        .filter(|((n, _), _)| n == "allot_requeues_total")
        .map(|(_, x)| x)
        .sum();
    assert_eq!(requeues, 4.0);
    let pre = |tier| {
        get(
            &v,
            "allot_preemptions_total",
            &[("account", "a1"), ("tier", tier)],
        )
    };
    assert_eq!(pre("allocated"), Some(1.0));
    assert_eq!(pre("free"), Some(1.0));
    let recorded = |rule| get(&v, "allot_preemptions_recorded_total", &[("rule", rule)]);
    assert_eq!(recorded("net_gain"), Some(2.0), "{text}");
    assert_eq!(recorded("free_tier"), Some(1.0));
    assert_eq!(recorded("short_slack"), None);
    let health = |node, check| {
        get(
            &v,
            "allot_health_drains_total",
            &[("node", node), ("check", check)],
        )
    };
    assert_eq!(health("gpu-a02", "xid"), Some(2.0));
    assert_eq!(health("gpu-a03", "count"), Some(1.0));
    assert_eq!(
        get(
            &v,
            "allot_node_events_total",
            &[("node", "gpu-a01"), ("kind", "requeue")]
        ),
        Some(1.0)
    );
    assert_eq!(
        get(
            &v,
            "allot_node_drain_emptied_after_seconds",
            &[("node", "gpu-a01")]
        ),
        Some(900.0)
    );
    let node = |name, n| get(&v, name, &[("node", n)]);
    assert_eq!(node("allot_draining_node_jobs", "gpu-b01"), Some(2.0));
    assert_eq!(node("allot_draining_node_jobs", "gpu-b02"), Some(1.0));
    assert_eq!(
        node("allot_draining_node_time_to_empty_seconds", "gpu-b01"),
        Some(1795.0)
    );
    assert_eq!(
        node("allot_draining_node_time_to_empty_seconds", "gpu-b02"),
        None,
        "a --no-requeue or suspended job: unknown"
    );
    // The next pass sees no draining node: the gauges go.
    m.record_drain_pass(&PassReport::default());
    let v = parse_exposition(&m.encode(now + 6));
    assert!(!v.keys().any(|(n, _)| n.starts_with("allot_draining_node_")));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn names_follow_the_conventions() {
    let text = SidecarMetrics::new().encode(0);
    for line in text.lines().filter(|l| l.starts_with("# TYPE ")) {
        let mut w = line.split_whitespace().skip(2);
        let (name, kind) = (w.next().unwrap(), w.next().unwrap());
        assert!(name.starts_with("allot_"), "{line}");
        assert!(
            name.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
            "{line}"
        );
        if kind == "counter" {
            assert!(
                text.contains(&format!("{name}_total")) || !text.contains(&format!("\n{name}")),
                "{line}"
            );
        }
    }
}
