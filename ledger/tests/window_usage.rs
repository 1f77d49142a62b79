//! The ledger's window usage (hourly buckets, edge corrections and running
//! attempts in SQL) equals the engine's ([`fairshare::UsageTracker`], the
//! one the simulator charges) for random sets of attempts, both charged by
//! the engine's contract rule.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use allot_ledger::{AttemptRecord, Ledger};
use fairshare::{ContractPolicy, UsageTracker};
use proptest::prelude::*;

const T0: i64 = 1_700_000_123; // not on an hour boundary
const H: i64 = 3600;
const ACCOUNTS: [&str; 3] = ["a1", "a2", "b1"];

/// One attempt: account, GPUs, start (s after T0), run time (None:
/// running), minimum runtime.
type Spec = (usize, u64, i64, Option<i64>, u64);

fn spec() -> impl Strategy<Value = Spec> {
    (
        0..ACCOUNTS.len(),
        0u64..9,
        0..12 * 24 * H,
        prop_oneof![3 => (0..3 * 24 * H).prop_map(Some), 1 => Just(None)],
        prop_oneof![
            Just(0u64),
            Just(600),
            Just(3600),
            Just(8 * 3600),
            1u64..20_000
        ],
    )
}

fn tmp() -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "allot-window-usage-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("ledger.sqlite")
}

/// The ledger record of an attempt that started at `start`, charged as
/// `allot sync` charges it (the engine's `charged_end`).
fn record(job: u64, (acct, gpus, start, run, min): Spec, now: i64) -> AttemptRecord {
    let policy = ContractPolicy::default();
    let start = T0 + start.min(now - T0);
    let end = run.map(|r| (start + r).min(now));
    let charge_end = end.and_then(|e| {
        (gpus > 0)
            .then(|| policy.charged_end(start as u64, e as u64, min))
            .flatten()
            .map(|ce| ce as i64)
    });
    AttemptRecord {
        job_id: job,
        submit: start - 10,
        label: job.to_string(),
        array_job: None,
        array_task: None,
        het_job: None,
        het_offset: None,
        account: ACCOUNTS[acct].into(),
        user: "alice".into(),
        partition: Some("gpu".into()),
        gpus,
        rate: gpus,
        start: Some(start),
        end,
        elapsed: None,
        state: if end.is_some() {
            "COMPLETED"
        } else {
            "RUNNING"
        }
        .into(),
        min_runtime: min,
        min_runtime_recorded: true,
        charge_end,
        charged: charge_end.map_or(0, |ce| gpus * (ce - start) as u64),
    }
}

/// What the engine charges for `r` into `t` (the plugins' and the
/// simulator's rule: allocated jobs only, running ones up to `now`).
fn charge(t: &mut UsageTracker, r: &AttemptRecord) {
    let start = r.start.unwrap() as u64;
    if r.min_runtime == 0 || r.rate == 0 {
        return;
    }
    match r.charge_end {
        Some(ce) => t.add_closed(&r.account, r.rate, start, ce as u64),
        None if r.end.is_none() => {
            t.add_running(&r.account, r.rate, start);
        }
        None => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn ledger_window_usage_equals_the_engines(
        specs in prop::collection::vec(spec(), 0..40),
        now_after in 7 * 24 * H..14 * 24 * H,
        window in prop_oneof![Just(7 * 24 * H), 1..9 * 24 * H],
    ) {
        let now = T0 + now_after;
        let records: Vec<AttemptRecord> =
            specs.iter().enumerate().map(|(i, s)| record(i as u64 + 1, *s, now)).collect();
        let path = tmp();
        let mut ledger = Ledger::open(&path).unwrap();
        ledger.write_batch(&records, Some(now)).unwrap();
        let from_ledger = ledger.reader().unwrap().charged_by_account(now - window, now).unwrap();

        // The engine, all at once at `now`.
        let mut at_once = UsageTracker::new(window as u64, now as u64);
        for r in &records {
            charge(&mut at_once, r);
        }
        // And incrementally, as the simulator does: each attempt charged
        // when it starts, the clock advanced to `now` at the end.
        let mut sorted: Vec<&AttemptRecord> = records.iter().collect();
        sorted.sort_by_key(|r| r.start);
        let mut incremental = UsageTracker::new(window as u64, T0 as u64);
        for r in sorted {
            incremental.advance_to(r.start.unwrap() as u64).unwrap();
            charge(&mut incremental, r);
        }
        incremental.advance_to(now as u64).unwrap();

        for account in ACCOUNTS {
            let ledger_usage = from_ledger.get(account).copied().unwrap_or(0);
            prop_assert_eq!(ledger_usage, at_once.occupancy(account), "{} at once", account);
            prop_assert_eq!(ledger_usage, incremental.occupancy(account), "{} incremental", account);
        }
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }
}
