//! The kernel log's shapes (issue 53): an Xid line of a MIG GPU instance,
//! the Xids of a GPU NVML cannot open (by its PCI address), NVSwitch SXids;
//! and the fixture's `kernel_log` and `driver_gpus`.

use super::super::fixture::FixtureSource;
use super::super::*;
use super::run;

#[test]
fn an_uncontained_ecc_error_on_a_mig_gpu_instance_fails_the_gpu() {
    // Issue 53, item 11: `NVRM: Xid (PCI:0000:01:00 GPU-I:05): 95, ...`
    // was dropped (the instance made the PCI address unreadable): healthy.
    let r = run("mig-xid.json");
    assert_eq!(
        r.gpus.iter().map(|g| g.verdict).collect::<Vec<_>>(),
        vec![Verdict::Failed, Verdict::Healthy]
    );
    assert_eq!(
        r.gpus[0].checks[1],
        ("xid".into(), Check::Failed("Xid 95 (GPU-I:05)".into()))
    );
    assert_eq!(
        drain_reason(&r).as_deref(),
        Some("allot: gpu0 Xid 95 (GPU-I:05) serial=1654100000100")
    );
    assert_eq!(check_of_reason(&drain_reason(&r).unwrap()), "xid");
    // The application faults of the instances are listed with them.
    let text = render_text(&r);
    let line = |i: usize| text.lines().nth(i).unwrap().to_string();
    assert!(
        line(0).ends_with("non_critical_xids=13(GPU-I:02)"),
        "{text}"
    );
    assert!(
        line(1).ends_with("non_critical_xids=13(GPU-I:01 x2)"),
        "{text}"
    );
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(
        v["gpus"][0]["xids"],
        serde_json::json!([
            {"xid": 95, "severity": null, "gpu_instance": "05", "critical": true, "count": 1},
            {"xid": 13, "severity": null, "gpu_instance": "02", "critical": false, "count": 1}
        ])
    );
}

#[test]
fn an_unreadable_gpu_with_xid_79_at_its_pci_address_fails() {
    // Issue 53, item 8: NVML answers "Unknown Error" for gpu1's handle (not
    // GPU_IS_LOST) and the kernel log has Xid 79 for 0000:3b:00. Read by
    // index alone gpu1 was unknown and never drained. Its address is the one
    // the driver holds that no opened GPU has.
    let r = run("unreadable-xid79.json");
    let g = &r.gpus[1];
    assert_eq!(g.verdict, Verdict::Failed);
    assert_eq!(g.pci_bus_id.as_deref(), Some("00000000:3B:00.0"));
    assert_eq!(
        g.checks[0],
        ("present".into(), Check::Error("NVML: Unknown Error".into()))
    );
    assert_eq!(g.checks[1], ("xid".into(), Check::Failed("Xid 79".into())));
    assert!(
        matches!(&g.checks[2].1, Check::Unsupported(w) if w == "not read: unreadable: NVML: Unknown Error"),
        "{:?}",
        g.checks[2]
    );
    assert_eq!(r.verdict, Verdict::Failed);
    assert_eq!(
        drain_reason(&r).as_deref(),
        Some("allot: gpu1 Xid 79 bus=00000000:3B:00.0")
    );
    assert_eq!(check_of_reason(&drain_reason(&r).unwrap()), "xid");
    // The others read as before; gpu2's application fault is listed.
    assert_eq!(
        r.gpus.iter().map(|g| g.verdict).collect::<Vec<_>>(),
        vec![
            Verdict::Healthy,
            Verdict::Failed,
            Verdict::Healthy,
            Verdict::Healthy
        ]
    );
    let text = render_text(&r);
    assert!(
        text.contains("gpu1   FAILED   serial=? bus=00000000:3B:00.0 present=ERROR(NVML: Unknown Error) xid=FAILED(Xid 79) ecc=unsupported"),
        "{text}"
    );
    assert!(
        text.lines()
            .nth(2)
            .unwrap()
            .ends_with("non_critical_xids=13"),
        "{text}"
    );
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(
        v["gpus"][1]["xids"],
        serde_json::json!([{"xid": 79, "severity": null, "critical": true, "count": 1}])
    );
}

#[test]
fn an_unreadable_gpu_whose_address_is_recorded_or_not_found() {
    let ok = r#""ecc_uncorrected": 0, "retired_pages_pending": false,
        "row_remap": {"pending": false, "failure": false}, "recovery_action": "none""#;
    // The address recorded with the GPU, its Xids listed with it.
    let text = format!(
        r#"{{"gpus": [{{"pci_bus_id": "00000000:1A:00.0", "xids": [], {ok}}},
            {{"unreadable": "NVML: Unknown Error", "pci_bus_id": "00000000:3B:00.0",
              "xids": ["NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."]}}]}}"#
    );
    let r = check_node("n", &mut FixtureSource::parse(&text).unwrap(), Some(2));
    assert_eq!(r.verdict, Verdict::Failed);
    assert_eq!(
        drain_reason(&r).as_deref(),
        Some("allot: gpu1 Xid 79 bus=00000000:3B:00.0")
    );
    // Two unreadable GPUs, the opened ones not in PCI order: which address
    // is whose is not sure, so neither gets the Xid: unknown, not drained.
    let text = format!(
        r#"{{"driver_gpus": ["0000:1a:00.0", "0000:3b:00.0", "0000:86:00.0", "0000:b1:00.0"],
            "kernel_log": ["NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."],
            "gpus": [{{"pci_bus_id": "00000000:86:00.0", {ok}}}, {{"unreadable": "NVML: Unknown Error"}},
                     {{"pci_bus_id": "00000000:1A:00.0", {ok}}}, {{"unreadable": "NVML: Unknown Error"}}]}}"#
    );
    let r = check_node("n", &mut FixtureSource::parse(&text).unwrap(), Some(4));
    assert_eq!(r.verdict, Verdict::Unknown);
    assert_eq!(drain_reason(&r), None);
    assert!(
        matches!(&r.gpus[1].checks[1].1, Check::Unsupported(w) if w.starts_with("PCI bus id unknown")),
        "{:?}",
        r.gpus[1].checks[1]
    );
    // In PCI order they pair up: gpu1 is 0000:3b:00 and fails, gpu3 is
    // 0000:b1:00 (no Xid there: unknown).
    let text = format!(
        r#"{{"driver_gpus": ["0000:1a:00.0", "0000:3b:00.0", "0000:86:00.0", "0000:b1:00.0"],
            "kernel_log": ["NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."],
            "gpus": [{{"pci_bus_id": "00000000:1A:00.0", {ok}}}, {{"unreadable": "NVML: Unknown Error"}},
                     {{"pci_bus_id": "00000000:86:00.0", {ok}}}, {{"unreadable": "NVML: Unknown Error"}}]}}"#
    );
    let r = check_node("n", &mut FixtureSource::parse(&text).unwrap(), Some(4));
    assert_eq!(
        r.gpus
            .iter()
            .map(|g| g.pci_bus_id.clone().unwrap_or_default())
            .collect::<Vec<_>>(),
        vec![
            "00000000:1A:00.0",
            "00000000:3B:00.0",
            "00000000:86:00.0",
            "00000000:B1:00.0"
        ]
    );
    assert_eq!(
        drain_reason(&r).as_deref(),
        Some("allot: gpu1 Xid 79 bus=00000000:3B:00.0")
    );
    assert_eq!(r.gpus[3].verdict, Verdict::Unknown, "no Xid at 0000:b1:00");
}

#[test]
fn kernel_log_fixtures_that_could_hide_a_fault_are_refused() {
    let field = |text: &str| FixtureSource::parse(text).unwrap_err().field;
    // Two sources of one GPU's Xids.
    assert_eq!(
        field(r#"{"kernel_log": [], "gpus": [{"pci_bus_id": "00000000:3B:00.0", "xids": [79]}]}"#),
        "gpus[0].xids"
    );
    // A PCI bus id no kernel line can match.
    assert_eq!(
        field(r#"{"kernel_log": [], "gpus": [{"pci_bus_id": "slot 3"}]}"#),
        "gpus[0].pci_bus_id"
    );
    assert_eq!(field(r#"{"kernel_log": [79]}"#), "kernel_log[0]");
    assert_eq!(field(r#"{"kernel_log": "79"}"#), "kernel_log");
    assert_eq!(field(r#"{"driver_gpus": ["3b"]}"#), "driver_gpus[0]");
    // The log unreadable: every GPU's Xids unsupported, as live.
    let mut f = FixtureSource::parse(
        r#"{"kernel_log": "unsupported", "gpus": [{"pci_bus_id": "00000000:3B:00.0"}]}"#,
    )
    .unwrap();
    let r = check_node("n", &mut f, Some(1));
    assert_eq!(
        r.gpus[0].checks[1],
        (
            "xid".into(),
            Check::Unsupported("kernel log unreadable (fixture)".into())
        )
    );
}

#[test]
fn a_fatal_nvswitch_sxid_fails_the_node() {
    // Issue 53, item 10: the kernel log's SXids were never read; NVML reads
    // both GPUs healthy while the fabric behind them is down.
    let r = run("nvswitch-sxid.json");
    assert!(r.gpus.iter().all(|g| g.verdict == Verdict::Healthy));
    assert_eq!(
        r.nvswitch,
        Check::Failed("nvswitch3 SXid 24007 Fatal".into())
    );
    assert_eq!(r.verdict, Verdict::Failed);
    let reason = drain_reason(&r).unwrap();
    assert_eq!(reason, "allot: nvswitch3 SXid 24007 Fatal");
    assert_eq!(check_of_reason(&reason), "nvswitch");
    // Every SXid listed, counted without its detail lines.
    let text = render_text(&r);
    assert!(
        text.contains("\nnvswitch0 bus=0000:05:00.0 non_fatal_sxids=12021(Non-fatal x2)\nnvswitch3 bus=0000:86:00.0 fatal_sxids=24007(Fatal)\nnode gpu-a01: FAILED: 2 GPUs (2 expected), 0 failed, 0 unknown; count ok; nvswitch FAILED; allot: nvswitch3 SXid 24007 Fatal\n"),
        "{text}"
    );
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["nvswitch"]["status"], "failed");
    assert_eq!(
        v["sxids"],
        serde_json::json!([
            {"switch": "nvswitch0", "pci": "0000:05:00.0", "sxid": 12021, "severity": "Non-fatal", "fatal": false, "count": 2},
            {"switch": "nvswitch3", "pci": "0000:86:00.0", "sxid": 24007, "severity": "Fatal", "fatal": true, "count": 1}
        ])
    );
    // A GPU failure comes first in the reason, the SXid counted in (+N more).
    let mut v: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("fixtures/health/nvswitch-sxid.json"),
        )
        .unwrap(),
    )
    .unwrap();
    v["gpus"][1]["ecc_uncorrected"] = serde_json::json!(3);
    let r = check_node(
        "n",
        &mut FixtureSource::parse(&v.to_string()).unwrap(),
        Some(2),
    );
    assert_eq!(
        drain_reason(&r).as_deref(),
        Some("allot: gpu1 uncorrectable ECC x3 serial=1650000000301 (+1 more)")
    );
}

#[test]
fn non_fatal_or_unknown_sxids_never_drain() {
    let node = |lines: &str| {
        let text = format!(
            r#"{{"kernel_log": [{lines}], "gpus": [{{"pci_bus_id": "00000000:18:00.0", "ecc_uncorrected": 0,
                "retired_pages_pending": false, "row_remap": {{"pending": false, "failure": false}},
                "recovery_action": "none"}}]}}"#
        );
        check_node("n", &mut FixtureSource::parse(&text).unwrap(), Some(1))
    };
    // Corrected by the switch: listed, healthy.
    let r = node(
        r#""nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 15008, Non-fatal, Link 4 route single bit ECC error""#,
    );
    assert_eq!(
        (r.nvswitch.clone(), r.verdict),
        (Check::Ok, Verdict::Healthy)
    );
    // Not in the catalogue, no severity word: unknown, not drained.
    let r = node(r#""nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 31337, Link 4 something new""#);
    assert_eq!(r.verdict, Verdict::Unknown);
    assert!(
        matches!(&r.nvswitch, Check::Error(w) if w.starts_with("nvswitch1 SXid 31337 without a severity word"))
    );
    assert_eq!(drain_reason(&r), None);
    // In the catalogue as needing a reset, though the line says Non-fatal.
    let r = node(
        r#""nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)""#,
    );
    assert_eq!(
        drain_reason(&r).as_deref(),
        Some("allot: nvswitch2 SXid 12028 Non-fatal")
    );
    // No SXid at all: ok. The log unreadable: unsupported, like the Xids.
    assert_eq!(node("").nvswitch, Check::Ok);
    let mut f = FixtureSource::parse(r#"{"kernel_log": "unsupported", "gpus": []}"#).unwrap();
    assert_eq!(
        check_node("n", &mut f, None).nvswitch,
        Check::Unsupported("kernel log unreadable (fixture)".into())
    );
}

#[test]
fn an_sxid_line_among_a_gpus_xids_is_refused_with_where_it_goes() {
    let e = FixtureSource::parse(
        r#"{"gpus": [{"xids": ["nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 24007, Fatal, Link 12 sourcetrack timeout error (First)"]}]}"#,
    )
    .unwrap_err();
    assert_eq!(e.field, "gpus[0].xids");
    assert!(
        e.problem
            .contains("an NVSwitch SXid line goes in the top-level kernel_log"),
        "{e}"
    );
}
