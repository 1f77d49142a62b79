//! Charging a job's attempts together, from small sacct dumps of what
//! Slurm records (issue 39): attempts the cluster ended, requeue loops and
//! resized jobs, written through the ledger's writer.

use std::collections::BTreeMap;

use super::*;
use crate::sacct::{Parser, RowOutcome};
use crate::{Ledger, StoredAttempt};

const HEADER: &str =
    "JobID|JobIDRaw|Account|User|Partition|AllocTRES|Submit|Start|End|Elapsed|State|AdminComment";
const T0: i64 = 1_700_000_000;

/// Job 100 (team a1, 8 GPUs, the 1 h default contract) loses its node
/// after 3 min 59 s and runs 2 h once requeued; job 200 (team b1) fails to
/// boot at 0 s; job 201 (b1) goes round a requeue loop of four 0-1 s
/// attempts, the last held.
fn system_ended() -> String {
    let row = |job: u32, account: &str, submit: i64, start: i64, end: i64, state: &str| {
        format!("{job}|{job}|{account}|u|gpu|cpu=8,gres/gpu=8|{submit}|{start}|{end}||{state}|\n")
    };
    let t = T0;
    [
        row(100, "a1", t, t + 60, t + 299, "NODE_FAIL"),
        row(100, "a1", t + 299, t + 420, t + 7620, "COMPLETED"),
        row(200, "b1", t, t + 100, t + 100, "BOOT_FAIL"),
        row(201, "b1", t + 200, t + 300, t + 301, "REQUEUED"),
        row(201, "b1", t + 301, t + 362, t + 362, "REQUEUED"),
        row(201, "b1", t + 362, t + 424, t + 424, "REQUEUED"),
        row(201, "b1", t + 424, t + 485, t + 485, "REQUEUE_HOLD"),
    ]
    .concat()
}

/// Job 300 (team c1, 1 h default contract): 16 GPUs for 20 min, resized to
/// 8 GPUs for 100 min. Slurm ends the first record RESIZING at the resize
/// and starts the second there (submit = start = the resize time).
fn resized() -> String {
    let t = T0;
    format!(
        "300|300|c1|u|gpu|gres/gpu=16|{t}|{}|{}||RESIZING|\n\
         300|300|c1|u|gpu|gres/gpu=8|{}|{}|{}||COMPLETED|\n",
        t + 100,
        t + 1300,
        t + 1300,
        t + 1300,
        t + 7300
    )
}

fn records(dump: &str) -> Vec<AttemptRecord> {
    let parser = Parser::from_header_line(HEADER, jiff::tz::TimeZone::UTC).unwrap();
    let rules = Charging::new(ContractPolicy::default(), ChargeWeights::default());
    dump.lines()
        .map(|l| match parser.parse(l).unwrap() {
            RowOutcome::Attempt(a) => rules.record(&a),
            RowOutcome::Skipped | RowOutcome::Step => panic!("{l}"),
        })
        .collect()
}

fn ledger(name: &str) -> Ledger {
    let dir = std::env::temp_dir().join(format!("allot-charge-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Ledger::open(&dir.join("ledger.sqlite")).unwrap()
}

/// Writes `batches` in turn and returns every attempt and the charged
/// GPU-seconds per account over a window holding them all.
fn write(name: &str, batches: &[&[AttemptRecord]]) -> (Vec<StoredAttempt>, BTreeMap<String, u64>) {
    let rules = Charging::new(ContractPolicy::default(), ChargeWeights::default());
    let mut l = ledger(name);
    for b in batches {
        l.write_batch(b, None, &rules).unwrap();
    }
    let r = l.reader().unwrap();
    (
        r.all_attempts().unwrap(),
        r.charged_by_account(T0 - 86_400, T0 + 86_400).unwrap(),
    )
}

/// Each attempt's charge, in GPU-seconds (the ledger keeps milli-units:
/// [`fairshare::charge::MILLI_PER_UNIT`] per GPU-second).
fn charged(all: &[StoredAttempt]) -> Vec<(u64, u32, u64)> {
    all.iter()
        .map(|a| (a.record.job_id, a.attempt, a.record.charged / M))
        .collect()
}

/// Milli-units per GPU-second.
const M: u64 = fairshare::charge::MILLI_PER_UNIT;

#[test]
fn attempts_the_cluster_ended_are_charged_their_runtime() {
    let recs = records(&system_ended());
    let (all, by_account) = write("system", &[&recs]);
    // Before: 8 GPU-h for each of the five failed attempts and 16 for the
    // rerun, 64 GPU-h for 16.53 occupied; b1 billed 40 GPU-h.
    assert_eq!(
        charged(&all),
        vec![
            (100, 0, 8 * 239),  // NODE_FAIL after 3:59: 0.531 GPU-h
            (100, 1, 8 * 7200), // the rerun: 16 GPU-h
            (200, 0, 0),        // BOOT_FAIL at 0 s
            (201, 0, 8),        // the requeue loop: 1 s,
            (201, 1, 0),        // 0 s,
            (201, 2, 0),        // 0 s,
            (201, 3, 0),        // 0 s (REQUEUE_HOLD)
        ]
    );
    assert_eq!(by_account["a1"], 59_512 * M, "16.531 GPU-h, as occupied");
    assert_eq!(by_account["b1"], 8 * M, "8 GPU-seconds, not 40 GPU-h");
    // One job's charged intervals never overlap.
    let a100: Vec<_> = all.iter().filter(|a| a.record.job_id == 100).collect();
    assert_eq!(a100[0].record.charge_end, Some(T0 + 299));
    assert!(a100[0].record.charge_end <= a100[1].record.start);
}

#[test]
fn a_later_attempt_cuts_the_earlier_tail_whichever_batch_brings_it() {
    // An attempt its owner ended (cancelled at 10 min: the hour is bought)
    // and the job requeued by hand, started 20 min after the first start.
    let rows = format!(
        "400|400|a1|u|gpu|gres/gpu=2|{t}|{t}|{}||CANCELLED by 1001|\n\
         400|400|a1|u|gpu|gres/gpu=2|{}|{}|{}||COMPLETED|\n",
        T0 + 600,
        T0 + 600,
        T0 + 1200,
        T0 + 1800,
        t = T0
    );
    let recs = records(&rows);
    // Alone, the first attempt pays its hour.
    assert_eq!(recs[0].charged, 2 * 3600 * M);
    for (name, batches) in [
        ("one-batch", vec![&recs[..]]),
        ("in-order", vec![&recs[..1], &recs[1..]]),
        ("reversed", vec![&recs[1..], &recs[..1]]),
    ] {
        let (all, by_account) = write(name, &batches);
        assert_eq!(
            charged(&all),
            vec![(400, 0, 2 * 1200), (400, 1, 2 * 3600)],
            "{name}: the first hour is cut at the second start"
        );
        assert_eq!(by_account["a1"], 2 * 4800 * M, "{name}");
    }
}

#[test]
fn a_resized_job_pays_each_segment_and_its_contract_once() {
    let recs = records(&resized());
    let (all, by_account) = write("resized", &[&recs]);
    assert_eq!(
        charged(&all),
        vec![(300, 0, 16 * 1200), (300, 1, 8 * 6000)],
        "16 GPUs x 20 min, then 8 GPUs x 100 min"
    );
    // 18.667 GPU-h (before: 29.333, the first segment its own full hour).
    assert_eq!(by_account["c1"], 67_200 * M);
    // A resized run shorter than its contract: the last segment carries
    // the hour, counted from the run's start (20 + 10 min run: +30 min).
    let short = resized().replace(&(T0 + 7300).to_string(), &(T0 + 1900).to_string());
    let (all, _) = write("resized-short", &[&records(&short)]);
    assert_eq!(
        charged(&all),
        vec![(300, 0, 16 * 1200), (300, 1, 8 * (3600 - 1200))]
    );
}

#[test]
fn writing_the_same_attempts_again_changes_nothing() {
    let rules = Charging::new(ContractPolicy::default(), ChargeWeights::default());
    let recs = [records(&system_ended()), records(&resized())].concat();
    let mut l = ledger("again");
    l.write_batch(&recs, None, &rules).unwrap();
    let before = l.reader().unwrap().dump().unwrap();
    let stats = l.write_batch(&recs, None, &rules).unwrap();
    assert_eq!((stats.inserted, stats.updated), (0, 0));
    assert_eq!(stats.unchanged, recs.len() as u64);
    assert_eq!(l.reader().unwrap().dump().unwrap(), before);
}
