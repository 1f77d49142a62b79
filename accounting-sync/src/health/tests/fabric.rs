//! The GPU fabric state of an NVSwitch node (issue 53, item 9).

use super::super::fixture::FixtureSource;
use super::super::*;
use super::{one_gpu, run};

#[test]
fn fabric_manager_down_fails_every_gpu_of_the_nvswitch_node() {
    // Issue 53, item 9: NVML reads every GPU, every CUDA job fails (802):
    // the GPUs' fabric registration never started.
    let r = run("fabric-not-started.json");
    for g in &r.gpus {
        assert_eq!(g.verdict, Verdict::Failed, "gpu{}", g.index);
        assert_eq!(
            g.checks[6],
            (
                "fabric".into(),
                Check::Failed("fabric not started (is nvidia-fabricmanager running?)".into())
            )
        );
    }
    let reason = drain_reason(&r).unwrap();
    assert_eq!(
        reason,
        "allot: gpu0 fabric not started (is nvidia-fabricmanager running?) serial=1650000000200 (+1 more)"
    );
    assert_eq!(check_of_reason(&reason), "fabric");
    assert!(render_text(&r).contains(
        "recovery_action=ok fabric=FAILED(fabric not started (is nvidia-fabricmanager running?))\n"
    ));
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["gpus"][1]["checks"][6][0], "fabric");
    assert_eq!(v["gpus"][1]["checks"][6][1]["status"], "failed");
}

#[test]
fn only_a_completed_fabric_registration_is_healthy() {
    let case = |fabric: &str| {
        let r = one_gpu(&format!(r#""fabric": {fabric}"#));
        (r.verdict, drain_reason(&r))
    };
    assert_eq!(case(r#"{"state": "completed"}"#), (Verdict::Healthy, None));
    assert_eq!(
        case(r#"{"state": "completed", "status": "SUCCESS"}"#),
        (Verdict::Healthy, None)
    );
    assert_eq!(
        case(r#"{"state": "completed", "status": "NOT_READY"}"#),
        (
            Verdict::Failed,
            Some("allot: gpu0 fabric registration failed (NVML_ERROR_NOT_READY) serial=S2".into())
        )
    );
    assert_eq!(
        case(r#"{"state": "in_progress"}"#),
        (
            Verdict::Failed,
            Some("allot: gpu0 fabric registration in progress serial=S2".into())
        )
    );
    // NVML's numbers: 1 not started, 3 completed.
    assert_eq!(case(r#"{"state": 1}"#).0, Verdict::Failed);
    assert_eq!(case(r#"{"state": 3}"#).0, Verdict::Healthy);
    // On no NVSwitch fabric (a PCIe board, before Hopper): nothing lost.
    assert_eq!(
        case(r#"{"state": "not_supported"}"#),
        (Verdict::Healthy, None)
    );
    assert_eq!(case(r#""unsupported""#), (Verdict::Healthy, None));
    // A state this allot does not know, or the query failing: unknown.
    assert_eq!(case(r#"{"state": 7}"#), (Verdict::Unknown, None));
    assert_eq!(case(r#"{"error": "UNKNOWN"}"#), (Verdict::Unknown, None));
    // A misspelled field would hide a state: refused, with what to write.
    let field = |text: &str| FixtureSource::parse(text).unwrap_err();
    let e = field(r#"{"gpus": [{"fabric": {"state": "completed", "satus": "SUCCESS"}}]}"#);
    assert_eq!(e.field, "gpus[0].fabric.satus");
    let e = field(r#"{"gpus": [{"fabric": {"state": "done"}}]}"#);
    assert_eq!(e.field, "gpus[0].fabric");
    assert!(
        e.to_string()
            .contains("not_supported, not_started, in_progress or completed"),
        "{e}"
    );
    assert_eq!(
        field(r#"{"gpus": [{"fabric": "completed"}]}"#).field,
        "gpus[0].fabric"
    );
}
