use proptest::prelude::*;

use super::*;

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("allot-ledger-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("ledger.sqlite")
}

/// A finished allocated attempt: `gpus` GPUs from `start` to `end`, charged
/// `[start, charge_end)`.
fn rec(
    job: u64,
    account: &str,
    gpus: u64,
    start: i64,
    end: Option<i64>,
    min_runtime: u64,
) -> AttemptRecord {
    let charge_end = match end {
        Some(e) if min_runtime > 0 => Some(e.max(start + min_runtime as i64)),
        _ => None,
    };
    AttemptRecord {
        job_id: job,
        submit: start - 10,
        label: job.to_string(),
        array_job: None,
        array_task: None,
        het_job: None,
        het_offset: None,
        account: account.into(),
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
        min_runtime,
        min_runtime_recorded: false,
        charge_end,
        charged: charge_end.map_or(0, |ce| gpus * (ce - start) as u64),
        time_limit: None,
    }
}

/// The default contract and weights: the charging rules the records of
/// [`rec`] follow.
fn rules() -> crate::charge::Charging {
    crate::charge::Charging::new(fairshare::ContractPolicy::default(), Default::default())
}

const T0: i64 = 1_700_000_000; // an arbitrary epoch, not on an hour boundary

#[test]
fn straddling_job_counts_only_the_overlap() {
    let path = tmp("straddle");
    let mut l = Ledger::open(&path).unwrap();
    // Window [T0, T0 + 7 d); the job started 2 h before it and ran 3 h.
    l.write_batch(
        &[rec(1, "a1", 1, T0 - 7200, Some(T0 + 3600), 3600)],
        Some(T0),
        &rules(),
    )
    .unwrap();
    let r = l.reader().unwrap();
    let u = r.usage(T0, T0 + 7 * 86_400).unwrap();
    let a = u[&("a1".to_string(), "alice".to_string())];
    assert_eq!(a.charged, 3600, "1 GPU-hour inside the window");
    assert_eq!(a.gpu_seconds, 3600);
    assert_eq!(a.unallocated, 0);
    assert_eq!(
        r.charged_by_account(T0, T0 + 7 * 86_400).unwrap()["a1"],
        3600
    );
    assert_eq!(r.watermark().unwrap(), Some(T0));
}

#[test]
fn minimum_runtime_extends_the_charge_not_the_occupancy() {
    let path = tmp("minrt");
    let mut l = Ledger::open(&path).unwrap();
    l.write_batch(&[rec(1, "a1", 2, T0, Some(T0 + 600), 3600)], None, &rules())
        .unwrap();
    let u = l.reader().unwrap().usage(T0 - 86_400, T0 + 86_400).unwrap();
    let a = u[&("a1".to_string(), "alice".to_string())];
    assert_eq!((a.charged, a.gpu_seconds), (2 * 3600, 2 * 600));
    // Asked at T0 + 1800, the not-yet-served part is not counted yet.
    let u = l.reader().unwrap().usage(T0 - 86_400, T0 + 1800).unwrap();
    assert_eq!(
        u[&("a1".to_string(), "alice".to_string())].charged,
        2 * 1800
    );
}

/// Issue 53, item 1: slurmdbd keeps a job RUNNING that slurmctld forgot
/// (a runaway record). Before: charged up to now, 8 GPUs x 7 days = 1,344
/// GPU-h in one week for a job with a 2-hour limit. Now: up to start +
/// time limit, whatever the window; a job without a limit still counts up
/// to now; a ledger read across its time limit gives the same figure.
#[test]
fn a_runaway_record_is_charged_up_to_its_time_limit() {
    let path = tmp("runaway");
    let mut l = Ledger::open(&path).unwrap();
    let mut runaway = rec(1, "a1", 8, T0, None, 3600);
    runaway.time_limit = Some(7200);
    let unlimited = rec(2, "a2", 1, T0, None, 3600);
    l.write_batch(&[runaway.clone(), unlimited], None, &rules())
        .unwrap();
    let r = l.reader().unwrap();
    let week = r.usage(T0, T0 + 7 * 86_400).unwrap();
    let a1 = week[&("a1".into(), "alice".into())];
    assert_eq!((a1.charged, a1.gpu_seconds), (8 * 7200, 8 * 7200));
    assert_eq!(week[&("a2".into(), "alice".into())].gpu_seconds, 7 * 86_400);
    // Inside its limit it counts up to the window's end as before.
    let hour = r.usage(T0, T0 + 3600).unwrap();
    assert_eq!(hour[&("a1".into(), "alice".into())].gpu_seconds, 8 * 3600);
    // A window after its limit holds none of it.
    assert!(!r
        .usage(T0 + 86_400, T0 + 2 * 86_400)
        .unwrap()
        .contains_key(&("a1".into(), "alice".into())));
    // Stored and read back with its limit.
    let back = &r.attempts_of_job(1).unwrap()[0].record;
    assert_eq!(
        (back.time_limit, back.open_until()),
        (Some(7200), Some(T0 + 7200))
    );
}

/// Issue 53, item 7: an admin corrects a finished job's accounting (Slurm
/// 25.11 allows it) and sacct prints the new End and GPUs. The charge
/// follows, counted and logged; the same row again is no correction.
#[test]
fn a_corrected_ended_attempt_is_charged_as_corrected() {
    let path = tmp("corrected");
    let mut l = Ledger::open(&path).unwrap();
    let first = rec(5, "a1", 2, T0, Some(T0 + 7200), 0);
    l.write_batch(std::slice::from_ref(&first), None, &rules())
        .unwrap();
    let mut fixed = first.clone();
    fixed.end = Some(T0 + 3600);
    fixed.gpus = 1;
    fixed.rate = 1;
    let s = l
        .write_batch(std::slice::from_ref(&fixed), None, &rules())
        .unwrap();
    assert_eq!((s.updated, s.corrected), (1, 1));
    let u = l.reader().unwrap().usage(T0, T0 + 86_400).unwrap();
    assert_eq!(u[&("a1".into(), "alice".into())].gpu_seconds, 3600);
    let s = l.write_batch(&[fixed], None, &rules()).unwrap();
    assert_eq!((s.unchanged, s.corrected), (1, 0));
}

/// Issue 53, item 2: Slurm reused job id 700 three years later for bob.
/// Before, bob's job was attempt 2 of alice's and `allot explain 700`
/// listed alice's attempts to bob. Now they are two jobs: numbered and
/// charged apart, and the id's attempts are bob's only.
#[test]
fn a_recycled_job_id_stays_two_jobs() {
    let path = tmp("recycled");
    let mut l = Ledger::open(&path).unwrap();
    let first = rec(700, "a1", 2, T0, Some(T0 + 600), 3600);
    let requeued = rec(700, "a1", 2, T0 + 610, Some(T0 + 4000), 3600);
    let years = 3 * 365 * 86_400;
    let mut bobs = rec(700, "b1", 4, T0 + years, Some(T0 + years + 100), 3600);
    bobs.user = "bob".into();
    l.write_batch(&[first, requeued, bobs], None, &rules())
        .unwrap();
    let r = l.reader().unwrap();
    let mine = r.attempts_of_job(700).unwrap();
    assert_eq!(mine.len(), 1);
    assert_eq!((mine[0].attempt, mine[0].record.user.as_str()), (0, "bob"));
    // Bob's job pays its own minimum runtime (1 h for 100 s).
    assert_eq!(mine[0].record.charge_end, Some(T0 + years + 3600));
    let numbers: Vec<(u32, String)> = r
        .all_attempts()
        .unwrap()
        .into_iter()
        .map(|a| (a.attempt, a.record.user))
        .collect();
    assert_eq!(
        numbers,
        [(0, "alice".into()), (1, "alice".into()), (0, "bob".into())]
    );
}

#[test]
fn unallocated_and_running_jobs() {
    let path = tmp("unalloc");
    let mut l = Ledger::open(&path).unwrap();
    let free = rec(1, "a1", 4, T0, Some(T0 + 1000), 0);
    let running = rec(2, "a2", 2, T0 + 100, None, 3600);
    let mut pending = rec(3, "a2", 0, T0, None, 3600);
    pending.start = None;
    l.write_batch(&[free, running, pending], None, &rules())
        .unwrap();
    let r = l.reader().unwrap();
    let u = r.usage(T0, T0 + 2000).unwrap();
    assert_eq!(
        u[&("a1".into(), "alice".into())],
        Usage {
            charged: 0,
            gpu_seconds: 4000,
            unallocated: 4000
        }
    );
    // Running: counts up to the end of the window asked about.
    assert_eq!(
        u[&("a2".into(), "alice".into())],
        Usage {
            charged: 2 * 1900,
            gpu_seconds: 2 * 1900,
            unallocated: 0
        }
    );
    let counts = r.open_counts().unwrap();
    assert_eq!(
        counts["a2"],
        OpenCounts {
            running: 1,
            pending: 1
        }
    );
    assert!(!counts.contains_key("a1"));
}

#[test]
fn rewrites_are_idempotent_and_updates_move_the_buckets() {
    let path = tmp("idem");
    let mut l = Ledger::open(&path).unwrap();
    let running = rec(7, "a1", 1, T0, None, 3600);
    let s = l
        .write_batch(std::slice::from_ref(&running), None, &rules())
        .unwrap();
    assert_eq!(
        s,
        BatchStats {
            inserted: 1,
            updated: 0,
            unchanged: 0,
            superseded: 0,
            corrected: 0
        }
    );
    let s = l.write_batch(&[running], None, &rules()).unwrap();
    assert_eq!(
        s,
        BatchStats {
            inserted: 0,
            updated: 0,
            unchanged: 1,
            superseded: 0,
            corrected: 0
        }
    );
    let done = rec(7, "a1", 1, T0, Some(T0 + 7200), 3600);
    let s = l
        .write_batch(std::slice::from_ref(&done), None, &rules())
        .unwrap();
    assert_eq!(
        s,
        BatchStats {
            inserted: 0,
            updated: 1,
            unchanged: 0,
            superseded: 0,
            corrected: 0
        }
    );
    let dump1 = l.reader().unwrap().dump().unwrap();
    l.write_batch(std::slice::from_ref(&done), None, &rules())
        .unwrap();
    assert_eq!(l.reader().unwrap().dump().unwrap(), dump1);
    // An older dump's row, the attempt still running, does not reopen it
    // (it would be charged up to now), alone or after the ended row in one
    // batch; a second row of one attempt in a batch is counted too.
    let running = rec(7, "a1", 1, T0, None, 3600);
    let s = l
        .write_batch(std::slice::from_ref(&running), None, &rules())
        .unwrap();
    assert_eq!((s.updated, s.unchanged, s.superseded), (0, 0, 1));
    assert_eq!(l.reader().unwrap().dump().unwrap(), dump1);
    let s = l
        .write_batch(&[done.clone(), running.clone()], None, &rules())
        .unwrap();
    assert_eq!((s.unchanged, s.superseded), (1, 1));
    assert_eq!(l.reader().unwrap().dump().unwrap(), dump1);
    let s = l
        .write_batch(&[done.clone(), done.clone()], None, &rules())
        .unwrap();
    assert_eq!((s.unchanged, s.superseded), (1, 1));
    // The job is re-labelled to another account: its charge moves with it.
    let mut moved = done;
    moved.account = "v1".into();
    l.write_batch(&[moved], None, &rules()).unwrap();
    let r = l.reader().unwrap();
    let by = r.charged_by_account(T0 - 86_400, T0 + 86_400).unwrap();
    assert_eq!(by.get("a1"), None);
    assert_eq!(by["v1"], 7200);
    assert!(!r.dump().unwrap().contains(" a1 "), "no bucket of a1 left");
}

#[test]
fn requeued_attempts_are_numbered_by_submit_time() {
    let path = tmp("attempts");
    let mut l = Ledger::open(&path).unwrap();
    let mut second = rec(9, "a1", 1, T0 + 5000, Some(T0 + 9000), 60);
    second.submit = T0 + 4000;
    let first = rec(9, "a1", 1, T0, Some(T0 + 4000), 60);
    // Out of order on purpose: the later attempt arrives first.
    l.write_batch(&[second], None, &rules()).unwrap();
    l.write_batch(&[first], None, &rules()).unwrap();
    let all = l.reader().unwrap().all_attempts().unwrap();
    assert_eq!(
        all.iter()
            .map(|a| (a.attempt, a.record.submit))
            .collect::<Vec<_>>(),
        [(0, T0 - 10), (1, T0 + 4000)]
    );
    assert_eq!(
        l.reader()
            .unwrap()
            .charged_by_account(T0, T0 + 9000)
            .unwrap()["a1"],
        8000
    );
}

/// Small deterministic generator (no dependency).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

fn brute(recs: &[AttemptRecord], s: i64, e: i64) -> BTreeMap<(String, String), Usage> {
    let mut out: BTreeMap<(String, String), Usage> = BTreeMap::new();
    for r in recs {
        let mut u = Usage::default();
        for (f, seg) in segments(r).into_iter().enumerate() {
            let Some(seg) = seg else { continue };
            let end = seg.end.unwrap_or(e).min(e);
            let v = (seg.rate * len(seg.start.max(s), end)) as u64;
            match f {
                0 => u.charged += v,
                1 => u.gpu_seconds += v,
                _ => u.unallocated += v,
            }
        }
        out.entry((r.account.clone(), r.user.clone()))
            .or_default()
            .add(&u);
    }
    out.retain(|_, u| *u != Usage::default());
    out
}

#[test]
fn window_queries_match_brute_force() {
    let path = tmp("brute");
    let mut l = Ledger::open(&path).unwrap();
    let mut g = Lcg(42);
    let mut recs = Vec::new();
    for job in 0..600u64 {
        let start = T0 + g.next(40 * 3600) as i64;
        let end = if g.next(10) == 0 {
            None
        } else {
            Some(start + g.next(6 * 3600) as i64)
        };
        let min = [0, 60, 3600, 7200][g.next(4) as usize];
        let mut r = rec(
            job,
            ["a1", "a2", "v1"][g.next(3) as usize],
            1 + g.next(8),
            start,
            end,
            min,
        );
        r.user = ["alice", "bob"][g.next(2) as usize].into();
        recs.push(r);
    }
    // Written in several batches, some records twice.
    for chunk in recs.chunks(97) {
        l.write_batch(chunk, None, &rules()).unwrap();
    }
    l.write_batch(&recs[100..200], None, &rules()).unwrap();
    let r = l.reader().unwrap();
    for _ in 0..60 {
        let s = T0 - 3600 + g.next(50 * 3600) as i64;
        let e = s + g.next(20 * 3600) as i64;
        assert_eq!(
            r.usage(s, e).unwrap(),
            brute(&recs, s, e),
            "window [{s}, {e})"
        );
    }
    // Hour-aligned edges too.
    let s = (T0 / 3600 + 2) * 3600;
    assert_eq!(
        r.usage(s, s + 10 * 3600).unwrap(),
        brute(&recs, s, s + 10 * 3600)
    );
    // attempts_overlapping returns exactly the attempts with usage inside.
    let (s, e) = (T0 + 10 * 3600, T0 + 12 * 3600);
    let got: Vec<u64> = r
        .attempts_overlapping(s, e)
        .unwrap()
        .iter()
        .map(|a| a.record.job_id)
        .collect();
    let mut want: Vec<u64> = recs
        .iter()
        .filter(|x| {
            brute(std::slice::from_ref(x), s, e)
                .values()
                .any(|u| *u != Usage::default())
        })
        .map(|x| x.job_id)
        .collect();
    let mut got_sorted = got.clone();
    got_sorted.sort();
    want.sort();
    assert_eq!(got_sorted, want);
}

#[test]
fn second_writer_is_refused_and_file_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let path = tmp("lock");
    let l = Ledger::open(&path).unwrap();
    let e = Ledger::open(&path).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, LedgerError::Locked { .. }), "{msg}");
    assert!(
        msg.contains("only one writer") && msg.contains(&format!("pid {}", std::process::id())),
        "{msg}"
    );
    // Readers are not writers: they open fine while the writer holds the lock.
    assert!(LedgerReader::open(&path).is_ok());
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);
    drop(l);
    // The WAL files stay, so a read-only reader can open the file later.
    for suffix in ["-wal", "-shm"] {
        let f = format!("{}{suffix}", path.display());
        assert!(Path::new(&f).exists(), "{f} was removed at close");
    }
    assert!(Ledger::open(&path).is_ok(), "lock released on drop");
}

#[test]
fn reader_refuses_missing_and_newer_ledgers() {
    let path = tmp("missing");
    let e = LedgerReader::open(&path).unwrap_err();
    assert!(e.to_string().contains("run `allot sync` first"), "{e}");
    let l = Ledger::open(&path).unwrap();
    l.conn
        .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();
    let e = LedgerReader::open(&path).unwrap_err();
    assert!(e.to_string().contains("upgrade allot"), "{e}");
    drop(l);
    assert!(matches!(
        Ledger::open(&path).unwrap_err(),
        LedgerError::NewerSchema { .. }
    ));
}

#[test]
fn an_overlapping_attempt_is_kept_and_both_are_charged() {
    // The same attempt imported twice with clocks an hour apart (another
    // --timezone): sync warns, and the ledger keeps both rather than
    // guessing which one is right.
    let path = tmp("overlap");
    let mut l = Ledger::open(&path).unwrap();
    let a = rec(21, "a1", 1, T0, Some(T0 + 4 * 3600), 60);
    let mut b = a.clone();
    b.submit += 3600;
    b.start = b.start.map(|s| s + 3600);
    b.end = b.end.map(|e| e + 3600);
    b.charge_end = b.charge_end.map(|e| e + 3600);
    l.write_batch(&[a], None, &rules()).unwrap();
    let stats = l.write_batch(&[b], None, &rules()).unwrap();
    assert_eq!(stats.inserted, 1);
    assert_eq!(l.reader().unwrap().attempts_of_job(21).unwrap().len(), 2);
}

/// One attempt for the property below: account, GPUs, start (s after T0),
/// run time (None: running), minimum runtime.
type Spec = (usize, u64, i64, Option<i64>, u64);
const ACCOUNTS: [&str; 3] = ["a1", "a2", "b1"];

fn spec() -> impl Strategy<Value = Spec> {
    let h: i64 = 3600;
    (
        0..ACCOUNTS.len(),
        0u64..9,
        0..12 * 24 * h,
        prop_oneof![3 => (0..3 * 24 * h).prop_map(Some), 1 => Just(None)],
        prop_oneof![
            Just(0u64),
            Just(600),
            Just(3600),
            Just(8 * 3600),
            1u64..20_000
        ],
    )
}

/// What the engine charges for an attempt (the plugins' and the
/// simulator's rule: `ContractPolicy::charged_end` for a finished
/// allocated attempt, up to `now` for a running one).
fn engine_charge(
    t: &mut fairshare::UsageTracker,
    account: &str,
    gpus: u64,
    start: i64,
    end: Option<i64>,
    min: u64,
) {
    if min == 0 || gpus == 0 {
        return;
    }
    let start = start as u64;
    match end {
        Some(e) => {
            let ce = fairshare::ContractPolicy::default().charged_end(start, e as u64, min);
            t.add_closed(account, gpus, start, ce.unwrap());
        }
        None => {
            t.add_running(account, gpus, start);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// The ledger's window usage (buckets, edge corrections, running
    /// attempts in SQL) equals the engine's `UsageTracker`, built at once
    /// and incrementally (as the simulator does), for random attempts.
    #[test]
    fn ledger_window_usage_equals_the_engines(
        specs in prop::collection::vec(spec(), 0..40),
        now_after in 7 * 86_400i64..14 * 86_400,
        window in prop_oneof![Just(7 * 86_400i64), 1..9 * 86_400i64],
    ) {
        let now = T0 + now_after;
        let attempts: Vec<(&str, u64, i64, Option<i64>, u64)> = specs
            .iter()
            .map(|&(a, gpus, start, run, min)| {
                let start = T0 + start.min(now_after);
                (ACCOUNTS[a], gpus, start, run.map(|r| (start + r).min(now)), min)
            })
            .collect();
        let records: Vec<AttemptRecord> = attempts
            .iter()
            .enumerate()
            .map(|(i, &(account, gpus, start, end, min))| rec(i as u64, account, gpus, start, end, min))
            .collect();
        let path = tmp("engine-window");
        let mut ledger = Ledger::open(&path).unwrap();
        ledger.write_batch(&records, Some(now), &rules()).unwrap();
        let from_ledger = ledger.reader().unwrap().charged_by_account(now - window, now).unwrap();

        let mut at_once = fairshare::UsageTracker::new(window as u64, now as u64);
        let mut incremental = fairshare::UsageTracker::new(window as u64, T0 as u64);
        let mut by_start = attempts.clone();
        by_start.sort_by_key(|a| a.2);
        for &(account, gpus, start, end, min) in &by_start {
            engine_charge(&mut at_once, account, gpus, start, end, min);
            incremental.advance_to(start as u64).unwrap();
            engine_charge(&mut incremental, account, gpus, start, end, min);
        }
        incremental.advance_to(now as u64).unwrap();
        for account in ACCOUNTS {
            let ledger_usage = from_ledger.get(account).copied().unwrap_or(0);
            prop_assert_eq!(ledger_usage, at_once.occupancy(account), "{} at once", account);
            prop_assert_eq!(ledger_usage, incremental.occupancy(account), "{} incremental", account);
        }
    }
}

/// Random batches of a job history (attempts submitted, started, ended in
/// every state the scan knows and others, requeued into later attempts,
/// ended attempts rewritten, identical rows written again): after each
/// batch an [`InterruptedScan`] updated every batch, and one updated every
/// third, hold what a full scan returns.
#[test]
fn interrupted_scan_equals_a_full_scan_after_each_batch() {
    const STATES: [&str; 7] = [
        "COMPLETED",
        "PREEMPTED",
        "REQUEUED",
        "REQUEUE_HOLD",
        "NODE_FAIL",
        "FAILED",
        "CANCELLED",
    ];
    let path = tmp("interrupted");
    let mut l = Ledger::open(&path).unwrap();
    let reader = l.reader().unwrap();
    let (mut every, mut third) = (InterruptedScan::new(), InterruptedScan::new());
    let mut g = Lcg(7);
    // Every attempt written so far, the open ones by index.
    let mut history: Vec<AttemptRecord> = Vec::new();
    let mut open: Vec<usize> = Vec::new();
    let mut next_job = 1;
    let mut now = T0;
    for batch in 0..40 {
        let open_before = open.len();
        let mut write = Vec::new();
        now += 600;
        for _ in 0..g.next(6) {
            let mut r = rec(
                next_job,
                ["a1", "a2"][g.next(2) as usize],
                1,
                now,
                None,
                60 * g.next(3),
            );
            next_job += 1;
            if g.next(3) == 0 {
                r.start = None;
                r.state = "PENDING".into();
            }
            history.push(r.clone());
            open.push(history.len() - 1);
            write.push(r);
        }
        let mut still_open = Vec::new();
        for i in std::mem::take(&mut open) {
            if g.next(2) == 0 {
                still_open.push(i);
                continue;
            }
            let r = &mut history[i];
            r.start.get_or_insert(now - 300);
            r.end = Some(now - 60);
            r.state = STATES[g.next(STATES.len() as u64) as usize].into();
            write.push(r.clone());
            if g.next(2) == 0 {
                // The job goes back to the queue: a later attempt.
                let mut next = rec(r.job_id, &r.account.clone(), 1, now, None, r.min_runtime);
                next.submit = now - 30;
                history.push(next.clone());
                still_open.push(history.len() - 1);
                write.push(next);
            }
        }
        open = still_open;
        if batch % 7 == 6 {
            // An ended attempt rewritten in place (a dump imported again).
            if let Some(r) = history.iter_mut().find(|r| r.end.is_some()) {
                r.state = if r.state == "PREEMPTED" {
                    "COMPLETED"
                } else {
                    "PREEMPTED"
                }
                .into();
                write.push(r.clone());
            }
        }
        if let Some(r) = history.first() {
            write.push(r.clone()); // unchanged
        }
        let stats = l.write_batch(&write, Some(now), &rules()).unwrap();
        let full = reader.interrupted_attempts().unwrap();
        every.update(&reader).unwrap();
        assert_eq!(
            every.attempts().cloned().collect::<Vec<_>>(),
            full,
            "batch {batch}"
        );
        if batch % 7 != 6 {
            // Only the attempts open before and the new ones were read.
            assert_eq!(
                every.rows_read,
                open_before + stats.inserted as usize,
                "batch {batch}"
            );
        } else {
            assert_eq!(every.rows_read, history.len(), "batch {batch}: starts over");
        }
        if batch % 3 == 2 {
            third.update(&reader).unwrap();
            assert_eq!(
                third.attempts().cloned().collect::<Vec<_>>(),
                full,
                "batch {batch}"
            );
        }
    }
    let full = reader.interrupted_attempts().unwrap();
    assert!(
        full.len() > 20,
        "the history interrupts jobs: {}",
        full.len()
    );
    assert!(full.iter().any(|a| a.requeued) && full.iter().any(|a| !a.requeued));
}

#[test]
fn a_ledger_of_whole_units_reads_and_migrates_to_milli_units() {
    // A schema-2 ledger stored whole units: rate 2 for 2 GPUs, a closed
    // attempt of 2 GPU-hours and a 1-GPU attempt running since T0.
    let path = tmp("milli-migration");
    let mut l = Ledger::open(&path).unwrap();
    l.write_batch(
        &[
            rec(1, "a1", 2, T0 - 7200, Some(T0 - 3600), 3600),
            rec(2, "b1", 1, T0, None, 3600),
        ],
        Some(T0),
        &rules(),
    )
    .unwrap();
    // As schema 2 had it: no time limits (schema 5) either.
    l.conn
        .execute_batch("ALTER TABLE attempts DROP COLUMN time_limit")
        .unwrap();
    l.conn.pragma_update(None, "user_version", 2).unwrap();
    drop(l);
    let expect = BTreeMap::from([
        ("a1".to_string(), 2000 * 3600),
        ("b1".to_string(), 1000 * 1800),
    ]);
    // Read before any writer migrated it (the plugins upgraded first).
    let old = LedgerReader::open(&path).unwrap();
    assert_eq!(
        old.charged_by_account(T0 - 86_400, T0 + 1800).unwrap(),
        expect
    );
    let job1 = &old.attempts_of_job(1).unwrap()[0].record;
    assert_eq!((job1.rate, job1.charged), (2000, 2000 * 3600));
    drop(old);
    // The writer migrates it: the same figures, now stored in milli-units.
    let l = Ledger::open(&path).unwrap();
    let version: i64 = l
        .conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    let (rate, charged): (i64, i64) = l
        .conn
        .query_row(
            "SELECT rate, charged FROM attempts WHERE job_id = 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((rate, charged), (2000, 2000 * 3600));
    let r = l.reader().unwrap();
    assert_eq!(
        r.charged_by_account(T0 - 86_400, T0 + 1800).unwrap(),
        expect
    );
    let job1 = &r.attempts_of_job(1).unwrap()[0].record;
    assert_eq!((job1.rate, job1.charged), (2000, 2000 * 3600));
}
