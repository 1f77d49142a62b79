use allot_ledger::preemptions::Preemption;

use super::*;
use crate::server::fixture::ledger_of_dump;

#[test]
fn a_recorded_attempt_names_its_preemptor_and_rule_and_only_others_are_guessed() {
    let dir = std::env::temp_dir().join(format!("allot-preempted-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // Job 7 of a1 preempted twice; b1's job 8 started after the first
    // (the record), b2's job 9 after the second (no record: the guess).
    let dump = "JobID|JobIDRaw|Account|User|Partition|AllocTRES|Submit|Start|End|Elapsed|State|AdminComment\n\
        7|7|a1|alice|gpu|gres/gpu=4|100|100|1000|00:15:00|PREEMPTED|\n\
        7|7|a1|alice|gpu|gres/gpu=4|1001|2000|3000|00:16:40|PREEMPTED|\n\
        7|7|a1|alice|gpu|gres/gpu=4|3001|Unknown|Unknown|00:00:00|PENDING|\n\
        8|8|b1|bob|gpu|gres/gpu=4|900|1010|5000|01:06:30|COMPLETED|\n\
        9|9|b2|carol|gpu|gres/gpu=4|2900|3010|5000|00:33:10|COMPLETED|\n";
    let ledger = ledger_of_dump(&dir.join("ledger.sqlite"), dump);
    ledger
        .record_preemption(&Preemption::new(
            1000,
            (7, "a1"),
            (8, "b1"),
            &Grounds::example(Rule::NetGain, "tree.b.b1", "tree.a.a1"),
        ))
        .unwrap();
    let reader = ledger.reader().unwrap();
    let attempts = reader.attempts_of_job(7).unwrap();
    let got = requeues(&reader, &attempts).unwrap();
    assert_eq!(got.len(), 2);
    let (first, second) = (&got[0], &got[1]);
    assert_eq!(
        (
            first.preempted_by,
            first.preemptor_account.as_deref(),
            first.rule.as_deref()
        ),
        (Some(8), Some("b1"), Some("net_gain"))
    );
    assert_eq!(first.preempted_at, Some(1000));
    assert!(
        first.guessed_preemptor.is_none(),
        "a record leaves no guess"
    );
    assert_eq!(
        first.grounds.as_ref().unwrap()["victim_leaf"]["running"],
        16
    );
    assert_eq!(second.preempted_by, None);
    assert_eq!(second.guessed_preemptor.as_ref().map(|g| g.job_id), Some(9));

    let when = |t: i64| format!("at {t}");
    let text = render(first, when);
    assert!(
        text.starts_with("  Attempt 0 ended at 1000 (PREEMPTED): preempted for job 8 of account b1 (at 1000), rule net_gain: the preemptor's leaf was below its entitlement"),
        "{text}"
    );
    assert!(
        text.contains("tree.b.b1 held 0 of 8.00 GPUs entitled; victim's leaf tree.a.a1 held 16 of 8.00 GPUs entitled; the preemptor's 4 GPU(s) cover 4.00 GPUs of entitlement, the victims' leaves lose 0.00 (must be < 2.00)"),
        "{text}"
    );
    assert!(
        text.contains("ran 02:00:00 of its minimum runtime 01:00:00"),
        "{text}"
    );
    let text = render(second, when);
    assert!(
        text.contains("no preemption record; guessed by time (not recorded): job 9 of account b2 started at 3010"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn figures_of_another_allot_fall_back_to_the_rule() {
    assert_eq!(figures(&serde_json::json!({"rule": "net_gain"})), None);
    assert_eq!(rule_words("free_tier"), Rule::FreeTier.describe());
    assert_eq!(
        rule_words("later_rule"),
        "a clause this allot does not know"
    );
}
