//! The checks of `allot health` on fixtures: each rule with its own small
//! input. The kernel log's shapes (MIG Xid lines, a GPU NVML cannot open,
//! NVSwitch SXids) are in `kernel_log.rs`, the fabric state in
//! `fabric.rs` (issue 53).

use super::fixture::FixtureSource;
use super::*;

pub(super) fn fixture(name: &str) -> FixtureSource {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/health")
        .join(name);
    FixtureSource::load(&path).unwrap()
}

pub(super) fn run(name: &str) -> NodeReport {
    let mut f = fixture(name);
    f.nvml_status().unwrap();
    let expected = f.expected_gpus;
    check_node("gpu-a01", &mut f, expected)
}

#[test]
fn healthy_node_of_8() {
    let r = run("healthy-8.json");
    assert_eq!(r.found, 8);
    assert_eq!(r.gpus.len(), 8);
    assert!(r.gpus.iter().all(|g| g.verdict == Verdict::Healthy));
    // A driver without the recovery-action field, GPUs on no NVSwitch
    // fabric (this fixture records neither) lose no check: the GPUs stay
    // healthy.
    assert!(r
        .gpus
        .iter()
        .all(|g| g.checks.iter().all(|(n, c)| *c == Check::Ok
            || ((n == "recovery_action" || n == "fabric") && matches!(c, Check::Unsupported(_))))));
    assert_eq!(r.count, Check::Ok);
    assert_eq!(r.verdict, Verdict::Healthy);
    assert_eq!(drain_reason(&r), None);
    let text = render_text(&r);
    assert_eq!(
        text.lines().count(),
        11,
        "8 GPU lines + summary + why unsupported (recovery action, SXids):\n{text}"
    );
    assert!(text.starts_with("gpu0   healthy  serial=1652221028510 bus=00000000:18:00.0 present=ok xid=ok ecc=ok retired_pages=ok row_remap=ok recovery_action=unsupported fabric=unsupported\n"), "{text}");
    assert!(
        text.ends_with(
            "node gpu-a01: healthy: 8 GPUs (8 expected), 0 failed, 0 unknown; count ok; nvswitch unsupported\n  unsupported: unsupported (fixture)\n  unsupported: no kernel_log in the fixture: NVSwitch SXids not recorded\n"
        ),
        "{text}"
    );
}

#[test]
fn lost_gpu_among_8_the_other_7_still_reported() {
    let r = run("lost-gpu.json");
    assert_eq!(r.gpus.len(), 8);
    let lost = &r.gpus[5];
    assert_eq!(lost.verdict, Verdict::Failed);
    assert_eq!(
        lost.checks[0],
        ("present".into(), Check::Failed("lost".into()))
    );
    let others: Vec<_> = r.gpus.iter().filter(|g| g.index != 5).collect();
    assert_eq!(others.len(), 7);
    assert!(others
        .iter()
        .all(|g| g.verdict == Verdict::Healthy && g.serial.is_some()));
    assert_eq!(r.verdict, Verdict::Failed);
    assert_eq!(drain_reason(&r).as_deref(), Some("allot: gpu5 lost"));
}

#[test]
fn xid_79_fails_and_names_gpu_serial_and_fault() {
    let r = run("xid79.json");
    let g = &r.gpus[3];
    assert_eq!(g.verdict, Verdict::Failed);
    assert_eq!(
        g.checks[1],
        ("xid".into(), Check::Failed("Xid 79".into())),
        "Xid 13 (an application fault) is not listed"
    );
    assert_eq!(
        r.gpus
            .iter()
            .filter(|g| g.verdict == Verdict::Failed)
            .count(),
        1
    );
    assert_eq!(r.verdict, Verdict::Failed);
    assert_eq!(
        drain_reason(&r).as_deref(),
        Some("allot: gpu3 Xid 79 serial=1652221028513")
    );
    assert!(render_text(&r).contains(
        "gpu3   FAILED   serial=1652221028513 bus=00000000:3B:00.0 present=ok xid=FAILED(Xid 79)"
    ));
}

#[test]
fn ecc_unsupported_is_unknown_not_failed() {
    let r = run("ecc-unsupported.json");
    for g in &r.gpus {
        assert_eq!(g.verdict, Verdict::Unknown, "gpu{}", g.index);
        assert!(matches!(g.checks[2].1, Check::Unsupported(_)));
    }
    assert_eq!(r.verdict, Verdict::Unknown);
    assert_eq!(drain_reason(&r), None, "unknown never drains");
    let text = render_text(&r);
    assert!(
        text.contains("node gpu-a01: unknown: 8 GPUs (8 expected), 0 failed, 8 unknown"),
        "{text}"
    );
    assert!(
        text.contains("  unsupported: unsupported (fixture)"),
        "{text}"
    );
}

#[test]
fn nvml_absent_is_reported_by_the_source() {
    let f = fixture("nvml-absent.json");
    let e = f.nvml_status().unwrap_err();
    assert!(matches!(e, SourceError::Absent(_)));
    assert!(e.to_string().starts_with("NVML is not available ("), "{e}");
}

#[test]
fn fewer_gpus_than_gres_fails_the_count() {
    let mut f = fixture("healthy-8.json");
    let r = check_node("gpu-a01", &mut f, Some(9));
    assert_eq!(r.count, Check::Failed("8 of 9 GPUs visible".into()));
    assert_eq!(r.verdict, Verdict::Failed);
    assert_eq!(
        drain_reason(&r).as_deref(),
        Some("allot: 8 of 9 GPUs visible")
    );
    // Unknown expected count: unsupported, so the node is unknown.
    let r = check_node("gpu-a01", &mut f, None);
    assert!(matches!(r.count, Check::Unsupported(_)));
    assert_eq!(r.verdict, Verdict::Unknown);
    // More than expected is fine.
    assert_eq!(check_node("gpu-a01", &mut f, Some(8)).count, Check::Ok);
}

#[test]
fn several_failures_are_counted_in_the_reason() {
    let text = r#"{"gpus": [
        {"serial": "A", "xids": [48], "ecc_uncorrected": 2, "retired_pages_pending": true,
         "row_remap": {"pending": true, "failure": true}},
        {"serial": "B", "xids": [], "ecc_uncorrected": 0, "retired_pages_pending": false,
         "row_remap": {"pending": true, "failure": false}}
    ]}"#;
    let mut f = FixtureSource::parse(text).unwrap();
    let r = check_node("n", &mut f, Some(2));
    assert_eq!(
        drain_reason(&r).as_deref(),
        Some("allot: gpu0 Xid 48 serial=A (+4 more)"),
        "gpu0's four failures, gpu1's reset required"
    );
    assert_eq!(
        r.gpus[1].verdict,
        Verdict::ResetRequired,
        "a pending row remap alone is not a failure: the GPU needs a reset"
    );
}

#[test]
fn fixture_errors_name_the_field() {
    let e = FixtureSource::parse(r#"{"gpus": [{"ecc_uncorrected": "lots"}]}"#).unwrap_err();
    assert_eq!(e.field, "gpus[0].ecc_uncorrected");
    assert!(
        e.to_string()
            .contains("expected a count such as 0, \"unsupported\" or {\"error\": \"CODE\"}"),
        "{e}"
    );
    let e = FixtureSource::parse(r#"{"nvml": "gone"}"#).unwrap_err();
    assert_eq!(e.field, "nvml");
}

#[test]
fn json_output_carries_every_check() {
    let r = run("xid79.json");
    let v: serde_json::Value = serde_json::to_value(&r).unwrap();
    assert_eq!(v["verdict"], "failed");
    assert_eq!(v["gpus"][3]["checks"][1][1]["status"], "failed");
    assert_eq!(v["gpus"][3]["checks"][1][1]["detail"], "Xid 79");
    assert_eq!(v["gpus"].as_array().unwrap().len(), 8);
}

#[test]
fn absurd_fixture_gpu_count_is_refused() {
    // Regression (fuzz target `health_fixture`): `"count": 4000000000` made
    // check_node read four billion GPUs.
    let e = FixtureSource::parse(r#"{"count": 4000000000, "gpus": []}"#).unwrap_err();
    assert!(e.to_string().contains("at most 1024"), "{e}");
    assert!(FixtureSource::parse(r#"{"count": 1024, "gpus": []}"#).is_ok());
}

#[test]
fn a_lost_gpu_listed_alone_is_still_reported_lost() {
    // Found by a newcomer: with the count defaulting to the list's length,
    // a lost gpu5 listed after gpu0 was never read, and the node read as
    // "2 of 8 visible" instead of "gpu5 lost".
    let text = r#"{"gpus": [{"index": 0, "xids": [], "ecc_uncorrected": 0,
        "retired_pages_pending": false, "row_remap": {"pending": false, "failure": false}},
        {"index": 5, "lost": true}]}"#;
    let mut f = FixtureSource::parse(text).unwrap();
    let r = check_node("n", &mut f, None);
    assert_eq!(r.found, 6);
    assert_eq!(drain_reason(&r).as_deref(), Some("allot: gpu5 lost"));
}

#[test]
fn fixtures_that_could_hide_a_fault_are_refused() {
    let field = |text: &str| FixtureSource::parse(text).unwrap_err().field;
    // A misspelled probe would read as "unsupported".
    assert_eq!(field(r#"{"gpus": [{"xid": [79]}]}"#), "gpus[0].xid");
    assert_eq!(field(r#"{"gpuz": []}"#), "gpuz");
    assert_eq!(
        field(r#"{"gpus": [{"row_remap": {"failed": true}}]}"#),
        "gpus[0].row_remap.failed"
    );
    // The same GPU twice.
    assert_eq!(
        field(r#"{"gpus": [{"index": 2}, {"index": 2, "lost": true}]}"#),
        "gpus[1].index"
    );
    // An index no node has, or one the count leaves out.
    assert_eq!(
        field(r#"{"gpus": [{"index": 4294967295, "lost": true}]}"#),
        "gpus[0].index"
    );
    let e = FixtureSource::parse(r#"{"count": 1, "gpus": [{}, {"lost": true}]}"#).unwrap_err();
    assert_eq!(e.field, "count");
    assert!(e.to_string().contains("lists index 1"), "{e}");
}

pub(super) fn one_gpu(probes: &str) -> NodeReport {
    let text = format!(
        r#"{{"gpus": [{{"serial": "S2", "xids": [], "ecc_uncorrected": 0,
            "retired_pages_pending": false, "row_remap": {{"pending": false, "failure": false}},
            "recovery_action": "none", {probes}}}]}}"#
    );
    let mut f = FixtureSource::parse(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    check_node("n", &mut f, Some(1))
}

#[test]
fn pending_row_remap_is_reset_required_not_failed() {
    // The GPU at index 2, so the reason names gpu2.
    let text = r#"{"gpus": [{"index": 2, "xids": [], "ecc_uncorrected": 0,
        "retired_pages_pending": false, "row_remap": {"pending": true, "failure": false},
        "recovery_action": "none"}]}"#;
    let mut f = FixtureSource::parse(text).unwrap();
    let r = check_node("n", &mut f, None);
    let g = &r.gpus[2];
    assert_eq!(g.verdict, Verdict::ResetRequired);
    assert_eq!(
        g.checks[4],
        (
            "row_remap".into(),
            Check::ResetRequired("reset required (row remap pending)".into())
        )
    );
    assert_eq!(
        drain_reason(&r).as_deref(),
        Some("allot: gpu2 reset required (row remap pending)")
    );
    assert!(r.verdict.drains());
    assert!(render_text(&r).contains("row_remap=RESET(reset required (row remap pending))"));
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["gpus"][2]["verdict"], "reset_required");
    assert_eq!(v["gpus"][2]["checks"][4][1]["status"], "reset_required");
    // Rows remapped, nothing pending: healthy.
    let r = one_gpu(r#""index": 0"#);
    assert_eq!(r.verdict, Verdict::Healthy);
    // A remap failure stays a failure, even with a remap pending.
    let text = r#"{"gpus": [{"serial": "S", "xids": [], "ecc_uncorrected": 0,
        "retired_pages_pending": false, "row_remap": {"pending": true, "failure": true},
        "recovery_action": "none"}]}"#;
    let r = check_node("n", &mut FixtureSource::parse(text).unwrap(), Some(1));
    assert_eq!(r.verdict, Verdict::Failed);
    assert_eq!(
        drain_reason(&r).as_deref(),
        Some("allot: gpu0 row remap failure serial=S")
    );
    // A board without row remapping: unsupported, unknown, never drained.
    let text = r#"{"gpus": [{"xids": [], "ecc_uncorrected": 0,
        "retired_pages_pending": false, "row_remap": "unsupported", "recovery_action": "none"}]}"#;
    let r = check_node("n", &mut FixtureSource::parse(text).unwrap(), Some(1));
    assert_eq!(r.verdict, Verdict::Unknown);
    assert!(matches!(r.gpus[0].checks[4].1, Check::Unsupported(_)));
    assert_eq!(drain_reason(&r), None);
}

#[test]
fn recovery_action_drains_on_anything_but_none() {
    let case = |action: &str| {
        let text = format!(
            r#"{{"gpus": [{{"serial": "S", "xids": [], "ecc_uncorrected": 0,
                "retired_pages_pending": false, "row_remap": {{"pending": false, "failure": false}},
                "recovery_action": {action}}}]}}"#
        );
        let r = check_node("n", &mut FixtureSource::parse(&text).unwrap(), Some(1));
        (r.verdict, drain_reason(&r))
    };
    for (action, verdict, reason) in [
        (r#""none""#, Verdict::Healthy, None),
        (
            r#""gpu_reset""#,
            Verdict::ResetRequired,
            Some("allot: gpu0 reset required (recovery action: GPU reset) serial=S"),
        ),
        (
            r#""drain_and_reset""#,
            Verdict::ResetRequired,
            Some("allot: gpu0 reset required (recovery action: drain and reset) serial=S"),
        ),
        (
            r#""node_reboot""#,
            Verdict::Failed,
            Some("allot: gpu0 recovery action: node reboot serial=S"),
        ),
        (
            r#""drain_p2p""#,
            Verdict::Failed,
            Some("allot: gpu0 recovery action: drain P2P serial=S"),
        ),
    ] {
        assert_eq!(
            case(action),
            (verdict, reason.map(String::from)),
            "{action}"
        );
    }
    // NVML's numbers, including one this allot does not know.
    assert_eq!(case("2").0, Verdict::Failed);
    assert_eq!(
        case("9").1.as_deref(),
        Some("allot: gpu0 recovery action: code 9 serial=S")
    );
    // Drivers before the field: unsupported, the GPU stays healthy.
    assert_eq!(case(r#""unsupported""#), (Verdict::Healthy, None));
    assert_eq!(
        case(r#"{"error": "NOT_SUPPORTED"}"#),
        (Verdict::Healthy, None)
    );
    // But an error reading it is never healthy.
    assert_eq!(case(r#"{"error": "UNKNOWN"}"#), (Verdict::Unknown, None));
    assert!(FixtureSource::parse(r#"{"gpus": [{"recovery_action": "reboot"}]}"#).is_err());
}

#[test]
fn every_query_error_path_is_never_healthy() {
    // For each NVML query: NOT_SUPPORTED is unsupported (unknown), UNKNOWN
    // an error (unknown), GPU_IS_LOST the GPU lost (failed, drained).
    for probe in [
        "xids",
        "ecc_uncorrected",
        "retired_pages_pending",
        "row_remap",
        "recovery_action",
        "fabric",
    ] {
        let with = |code: &str| {
            let text = r#"{"gpus": [{"serial": "S", "xids": [], "ecc_uncorrected": 0,
                    "retired_pages_pending": false, "row_remap": {"pending": false, "failure": false},
                    "recovery_action": "none"}]}"#;
            let mut v: serde_json::Value = serde_json::from_str(text).unwrap();
            v["gpus"][0][probe] = serde_json::json!({ "error": code });
            let mut f = FixtureSource::parse(&v.to_string()).unwrap();
            check_node("n", &mut f, Some(1))
        };
        let r = with("UNKNOWN");
        assert_eq!(r.verdict, Verdict::Unknown, "{probe} UNKNOWN");
        let name = match probe {
            "xids" => "xid",
            "ecc_uncorrected" => "ecc",
            "retired_pages_pending" => "retired_pages",
            p => p,
        };
        let (_, check) = r.gpus[0].checks.iter().find(|(n, _)| n == name).unwrap();
        assert_eq!(
            *check,
            Check::Error("NVML_ERROR_UNKNOWN (fixture)".into()),
            "{probe}"
        );
        assert!(render_text(&r).contains("  error: NVML_ERROR_UNKNOWN (fixture)"));
        let r = with("GPU_IS_LOST");
        assert_eq!(r.verdict, Verdict::Failed, "{probe} GPU_IS_LOST");
        assert_eq!(
            drain_reason(&r).as_deref(),
            Some("allot: gpu0 lost"),
            "{probe}"
        );
        let r = with("NOT_SUPPORTED");
        let expect = if probe == "recovery_action" || probe == "fabric" {
            Verdict::Healthy
        } else {
            Verdict::Unknown
        };
        assert_eq!(r.verdict, expect, "{probe} NOT_SUPPORTED");
    }
    // The handle itself unreadable (nvmlDeviceGetHandleByIndex UNKNOWN).
    let text = r#"{"gpus": [{"index": 0, "unreadable": "NVML: Unknown Error"}]}"#;
    let r = check_node("n", &mut FixtureSource::parse(text).unwrap(), Some(1));
    assert_eq!(r.verdict, Verdict::Unknown);
    assert_eq!(
        r.gpus[0].checks[0],
        ("present".into(), Check::Error("NVML: Unknown Error".into()))
    );
    assert_eq!(drain_reason(&r), None);
    let e = FixtureSource::parse(r#"{"gpus": [{"ecc_uncorrected": {"error": ""}}]}"#).unwrap_err();
    assert_eq!(e.field, "gpus[0].ecc_uncorrected");
}

#[test]
fn reset_required_fixture_drains_with_the_first_reset() {
    // gpu2 has a row remap pending, gpu5 a recovery action "drain and reset".
    let r = run("reset-required.json");
    assert_eq!(r.verdict, Verdict::ResetRequired);
    let verdicts: Vec<Verdict> = r.gpus.iter().map(|g| g.verdict).collect();
    let mut want = vec![Verdict::Healthy; 8];
    want[2] = Verdict::ResetRequired;
    want[5] = Verdict::ResetRequired;
    assert_eq!(verdicts, want);
    assert_eq!(
        drain_reason(&r).as_deref(),
        Some("allot: gpu2 reset required (row remap pending) serial=1652221028512 (+1 more)")
    );
    assert!(render_text(&r).contains(
        "node gpu-a01: RESET: 8 GPUs (8 expected), 0 failed, 2 reset required, 0 unknown; count ok"
    ));
}

#[test]
fn check_of_reason_names_the_first_failed_check() {
    let gpu = |xids: &str, ecc: u32, pages: bool, remap: &str, action: &str| {
        let text = format!(
            r#"{{"gpus": [{{"serial": "S", "xids": [{xids}], "ecc_uncorrected": {ecc},
                "retired_pages_pending": {pages}, "row_remap": {remap},
                "recovery_action": "{action}"}}]}}"#
        );
        check_node("n", &mut FixtureSource::parse(&text).unwrap(), Some(2))
    };
    let ok_remap = r#"{"pending": false, "failure": false}"#;
    // The count check fails too (1 of 2 visible); a GPU failure comes first.
    let cases = [
        (gpu("79", 0, false, ok_remap, "none"), "xid"),
        (gpu("", 2, false, ok_remap, "none"), "ecc"),
        (gpu("", 0, true, ok_remap, "none"), "retired_pages"),
        (
            gpu(
                "",
                0,
                false,
                r#"{"pending": false, "failure": true}"#,
                "none",
            ),
            "row_remap",
        ),
        (
            gpu("", 0, false, ok_remap, "node_reboot"),
            "recovery_action",
        ),
    ];
    for (r, want) in &cases {
        let reason = drain_reason(r).unwrap();
        assert_eq!(check_of_reason(&reason), *want, "{reason}");
        // The same check as the report's own first failure.
        let first = r.gpus[0]
            .checks
            .iter()
            .find(|(_, c)| matches!(c, Check::Failed(_)))
            .map(|(n, _)| n.as_str());
        assert_eq!(first, Some(*want));
    }
    // Reset required only: the count is the failure, named first.
    let r = gpu(
        "",
        0,
        false,
        r#"{"pending": true, "failure": false}"#,
        "none",
    );
    assert_eq!(check_of_reason(&drain_reason(&r).unwrap()), "count");
    let r = check_node(
        "n",
        &mut FixtureSource::parse(
            r#"{"gpus": [{"xids": [], "ecc_uncorrected": 0, "retired_pages_pending": false,
            "row_remap": {"pending": true, "failure": false}, "recovery_action": "none"}]}"#,
        )
        .unwrap(),
        Some(1),
    );
    assert_eq!(check_of_reason(&drain_reason(&r).unwrap()), "row_remap");
    assert_eq!(check_of_reason("allot: gpu5 lost"), "present");
    assert_eq!(
        check_of_reason("allot: gpu2 reset required (recovery action: gpu reset)"),
        "recovery_action"
    );
    assert_eq!(check_of_reason("allot: 7 of 8 GPUs visible"), "count");
    assert_eq!(check_of_reason("maintenance"), "other");
}

#[test]
fn fatal_xids_fail_and_non_critical_ones_are_listed() {
    // Kernel lines of the NVLink Xids 144-150 (severity word after the
    // unit), Xid 46 and application faults, one GPU each.
    let r = run("fatal-xids.json");
    let verdicts: Vec<Verdict> = r.gpus.iter().map(|g| g.verdict).collect();
    assert_eq!(
        verdicts,
        vec![
            Verdict::Failed,  // 145 Fatal
            Verdict::Failed,  // 46
            Verdict::Healthy, // 145 NonFatal x2, 13
            Verdict::Failed,  // 149 Uncorrectable
            Verdict::Unknown, // 147 without a severity word
            Verdict::Healthy, // 144 Non-fatal, 150 Correctable, 31
        ]
    );
    let xid = |i: usize| r.gpus[i].checks[1].1.clone();
    assert_eq!(xid(0), Check::Failed("Xid 145 Fatal".into()));
    assert_eq!(xid(1), Check::Failed("Xid 46".into()));
    assert_eq!(xid(2), Check::Ok);
    assert_eq!(xid(3), Check::Failed("Xid 149 Uncorrectable".into()));
    assert!(
        matches!(&xid(4), Check::Error(e) if e.starts_with("Xid 147 without a severity word")),
        "{:?}",
        xid(4)
    );
    assert_eq!(xid(5), Check::Ok);
    assert_eq!(r.verdict, Verdict::Failed);
    assert_eq!(
        drain_reason(&r).as_deref(),
        Some("allot: gpu0 Xid 145 Fatal serial=1653021000100 (+2 more)")
    );
    assert_eq!(check_of_reason(&drain_reason(&r).unwrap()), "xid");
    // The non-critical Xids are in the reading, text and JSON.
    let text = render_text(&r);
    let line = |i: usize| text.lines().nth(i).unwrap().to_string();
    assert!(
        line(2).ends_with(
            "recovery_action=ok fabric=unsupported non_critical_xids=145(NonFatal x2),13"
        ),
        "{text}"
    );
    assert!(
        line(5).ends_with("non_critical_xids=144(Non-fatal),150(Correctable),31"),
        "{text}"
    );
    assert!(
        line(0).ends_with("recovery_action=ok fabric=unsupported"),
        "{text}"
    );
    assert!(line(4).contains("xid=ERROR(Xid 147 without"), "{text}");
    assert!(line(4).ends_with("non_critical_xids=147"), "{text}");
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(
        v["gpus"][2]["xids"],
        serde_json::json!([
            {"xid": 145, "severity": "NonFatal", "critical": false, "count": 2},
            {"xid": 13, "severity": null, "critical": false, "count": 1}
        ])
    );
    assert_eq!(
        v["gpus"][0]["xids"],
        serde_json::json!([{"xid": 145, "severity": "Fatal", "critical": true, "count": 1}])
    );
}

#[test]
fn xid79_fixture_lists_the_application_fault() {
    // docs/health.md: application faults are listed in the reading.
    let r = run("xid79.json");
    let text = render_text(&r);
    assert!(
        text.lines()
            .nth(3)
            .unwrap()
            .ends_with("non_critical_xids=13"),
        "{text}"
    );
}

#[test]
fn fixture_xid_text_that_is_not_an_xid_is_refused() {
    let e = FixtureSource::parse(r#"{"gpus": [{"xids": ["RLW_REMAP Fatal"]}]}"#).unwrap_err();
    assert_eq!(e.field, "gpus[0].xids");
}

#[test]
fn driver_library_mismatch_on_a_gpu_node_fails_with_the_cause() {
    // After a driver package upgrade, nvmlInit answers
    // NVML_ERROR_LIB_RM_VERSION_MISMATCH: every GPU job on the node fails.
    let f = fixture("driver-mismatch.json");
    let e = f.nvml_status().unwrap_err();
    assert!(
        matches!(&e, SourceError::InitFailed { code: Some(c), .. } if c == "LIB_RM_VERSION_MISMATCH")
    );
    let r = init_failed_node("gpu-a01", f.expected_gpus, &e);
    assert_eq!(r.verdict, Verdict::Failed);
    assert!(r.verdict.drains());
    let reason = drain_reason(&r).unwrap();
    assert_eq!(
        reason,
        "allot: NVML init failed: driver/library version mismatch (0 of 8 GPUs usable)"
    );
    assert_eq!(check_of_reason(&reason), "nvml");
    let text = render_text(&r);
    assert!(
        text.contains("node gpu-a01: FAILED: 0 GPUs (8 expected), 0 failed, 0 unknown; count FAILED; nvswitch unsupported; allot: NVML init failed: driver/library version mismatch (0 of 8 GPUs usable)\n  error: NVML failed to initialise after 1 attempts: RM detects a driver/library version mismatch (fixture)\n"),
        "{text}"
    );
    // A node Slurm gives no GPUs (or does not say): unknown, never drained.
    for expected in [None, Some(0)] {
        let r = init_failed_node("cpu-01", expected, &e);
        assert_eq!(r.verdict, Verdict::Unknown, "{expected:?}");
        assert_eq!(drain_reason(&r), None);
    }
    // A driver not loaded (yet): unknown, never drained, as before.
    for nvml in [r#""init_failed""#, r#"{"error": "DRIVER_NOT_LOADED"}"#] {
        let f =
            FixtureSource::parse(&format!(r#"{{"nvml": {nvml}, "expected_gpus": 8}}"#)).unwrap();
        let r = init_failed_node("gpu-a01", Some(8), &f.nvml_status().unwrap_err());
        assert_eq!(r.verdict, Verdict::Unknown, "{nvml}");
    }
    // A misspelled code is refused, not read as a passing unknown.
    let e = FixtureSource::parse(r#"{"nvml": {"error": "LIB_RM_MISMATCH"}}"#).unwrap_err();
    assert_eq!(e.field, "nvml");
    assert!(e.to_string().contains("LIB_RM_VERSION_MISMATCH"), "{e}");
}

mod fabric;
mod kernel_log;
