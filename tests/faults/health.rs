//! `allot health --drain` with NVML failing intermittently.

use super::*;

// ----- NVML failing -----

fn node_name(tb: &Testbed) -> String {
    tb.ok("sinfo", &["-h", "-N", "-o", "%N"])
        .lines()
        .next()
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn nvml_failing_intermittently_reports_unknown_and_never_drains() {
    let _one = serial();
    let tb = Testbed::from_env();
    let dir = tb.dir.join("faults-health");
    std::fs::create_dir_all(&dir).unwrap();
    let node = node_name(&tb);
    let init_failed = dir.join("init-failed.json");
    std::fs::write(
        &init_failed,
        r#"{"nvml": "init_failed", "expected_gpus": 8}"#,
    )
    .unwrap();
    // The driver answers but two GPUs cannot be read this time.
    let flaky = dir.join("flaky.json");
    let mut gpus: Vec<String> = (0..8)
        .map(|i| format!(r#"{{"index": {i}, "xids": [], "ecc_uncorrected": 0, "retired_pages_pending": false, "row_remap": {{"pending": false, "failure": false}}}}"#))
        .collect();
    gpus[2] = r#"{"index": 2, "unreadable": "NVML_ERROR_UNKNOWN (fault injected)"}"#.into();
    gpus[5] = r#"{"index": 5, "xids": "unsupported", "ecc_uncorrected": "unsupported"}"#.into();
    std::fs::write(
        &flaky,
        format!(r#"{{"expected_gpus": 8, "gpus": [{}]}}"#, gpus.join(",")),
    )
    .unwrap();
    let healthy = tb
        .root
        .join("accounting-sync/fixtures/health/healthy-8.json");
    let ledger = fresh_ledger(&dir, "health.sqlite");
    for round in 0..4 {
        for (fx, want) in [
            (&init_failed, "unknown"),
            (&healthy, "healthy"),
            (&flaky, "unknown"),
        ] {
            let out = allot(
                &tb,
                &[
                    "health",
                    "--drain",
                    "--json",
                    "--node",
                    &node,
                    "--fixture",
                    fx.to_str().unwrap(),
                    "--ledger",
                    ledger.to_str().unwrap(),
                ],
            );
            assert!(
                out.status.success(),
                "round {round}, {}: {}",
                fx.display(),
                text(&out)
            );
            let v: serde_json::Value = serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
            assert_eq!(v["verdict"], want, "{}: {v}", fx.display());
            let st = tb.ok("sinfo", &["-h", "-n", &node, "-o", "%T"]);
            assert!(
                !st.contains("drain"),
                "round {round}: the node was drained ({st})"
            );
        }
    }
}
