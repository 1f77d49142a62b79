//! Ledger benchmarks, printing figures (run: `cargo bench -p accounting-sync --bench ledger`).
//!
//! 1. Ingest 1,000,000 synthetic `sacct --parsable2` rows into a fresh
//!    ledger (parse + charge + write, batches of 10,000). Goal: >= 100,000
//!    rows/s.
//! 2. A 7-day report (per-account/user usage of the window) over a ledger
//!    of 5,000,000 attempts spread over a year. Goal: < 500 ms.
//!
//! `ALLOT_BENCH_ROWS` / `ALLOT_BENCH_ATTEMPTS` shrink them for a quick run;
//! `ALLOT_BENCH_ONLY=ingest|report` runs one of the two (scripts/bench runs
//! each as its own process, for its peak memory). Filling the 5,000,000-attempt
//! ledger takes minutes, so `ALLOT_BENCH_CACHE=DIR` keeps the filled ledger
//! there as `report-v{schema}-g{generator}-{attempts}.sqlite` and reuses it
//! (a new schema version or generator gives a new file). Besides the human
//! lines it prints `BENCH name=value unit=...` lines for `scripts/bench`.
// `%` stays: `is_multiple_of` is newer than the workspace's rust-version.
#![allow(clippy::manual_is_multiple_of)]

use std::time::Instant;

use allot_ledger::charge::Charging;
use allot_ledger::sacct::Parser;
use allot_ledger::{Ledger, LedgerReader, SCHEMA_VERSION};
use allot_sync::sidecar::sync::import_lines;
use fairshare::charge::ChargeWeights;
use fairshare::ContractPolicy;

const T0: i64 = 1_700_000_000;
const ACCOUNTS: usize = 40;
const USERS: usize = 400;
/// Bump when `row` or the report fill changes: cached ledgers are keyed by it.
const GENERATOR: u32 = 1;

/// Row `i`: one job every 2 s, 1 to 8 GPUs, 1 min to 6 h, every 50th running.
fn row(i: u64) -> String {
    let start = T0 + 2 * i as i64 + (i as i64 % 97);
    let run = 60 + (i as i64 * 7919) % (6 * 3600);
    let gpus = 1 + i % 8;
    let (end, state) = if i % 50 == 0 {
        ("Unknown".to_string(), "RUNNING")
    } else {
        ((start + run).to_string(), "COMPLETED")
    };
    let label = if i % 10 == 0 {
        format!("{}_{}", i / 10, i % 10)
    } else {
        i.to_string()
    };
    format!(
        "{label}|{i}|acct{}|user{}|gpu|billing={gpus},cpu={gpus},gres/gpu:a100={gpus},gres/gpu={gpus},mem=16G,node=1|{}|{start}|{end}|01:00:00|{state}||allot:min_runtime={}",
        i as usize % ACCOUNTS,
        i as usize % USERS,
        start - 30,
        [0, 600, 3600, 7200][(i % 4) as usize]
    )
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let dir = std::env::temp_dir().join(format!("allot-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let charging = Charging::new(ContractPolicy::default(), ChargeWeights::default());
    let parser = Parser::live(jiff::tz::TimeZone::UTC);
    let only = std::env::var("ALLOT_BENCH_ONLY").unwrap_or_default();
    if only != "report" {
        ingest(&dir, &charging, &parser);
    }
    if only != "ingest" {
        report(&dir, &charging, &parser);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn ingest(dir: &std::path::Path, charging: &Charging, parser: &Parser) {
    // 1. Ingest.
    let n = env("ALLOT_BENCH_ROWS", 1_000_000);
    let lines: Vec<String> = (0..n).map(row).collect();
    let path = dir.join("ingest.sqlite");
    let mut ledger = Ledger::open(&path).unwrap();
    let t = Instant::now();
    let (stats, _) = import_lines(
        &mut ledger,
        charging,
        parser,
        // One row per line, as `Parser::rows` reads them.
        lines.into_iter().zip(2..).map(|(text, line)| {
            Ok(allot_ledger::sacct::DumpRow {
                line,
                lines: 1,
                text,
                not_utf8: false,
            })
        }),
        10_000,
        Some(T0),
        &mut allot_sync::sidecar::sync::LiveContracts::off(),
    )
    .unwrap();
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(stats.written.inserted, n);
    println!(
        "ingest: {n} rows in {secs:.2} s = {:.0} rows/s (goal >= 100000)",
        n as f64 / secs
    );
    println!("BENCH ingest_rows_per_s={:.0} unit=rows/s", n as f64 / secs);
}

fn report(dir: &std::path::Path, charging: &Charging, parser: &Parser) {
    // 2. 7-day report over 5M attempts spread over 365 days.
    let m = env("ALLOT_BENCH_ATTEMPTS", 5_000_000);
    let year = 365 * 86_400i64;
    let cached = std::env::var_os("ALLOT_BENCH_CACHE").map(|d| {
        std::path::PathBuf::from(d)
            .join(format!("report-v{SCHEMA_VERSION}-g{GENERATOR}-{m}.sqlite"))
    });
    let path = match &cached {
        Some(p) if p.exists() => {
            println!("reusing the filled ledger {}", p.display());
            p.clone()
        }
        Some(p) => {
            // Fill beside the cache under another name, then rename: a
            // half-written ledger is never reused. Closing the writer
            // checkpoints the WAL, so the database file alone is complete.
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            let tmp = p.with_extension("partial");
            let siblings = |base: &std::path::Path| {
                ["", "-wal", "-shm", ".lock"].map(|s| {
                    let mut o = base.as_os_str().to_owned();
                    o.push(s);
                    std::path::PathBuf::from(o)
                })
            };
            for f in siblings(&tmp) {
                let _ = std::fs::remove_file(f);
            }
            fill(&tmp, m, year, charging, parser);
            for f in &siblings(&tmp)[1..] {
                let _ = std::fs::remove_file(f);
            }
            std::fs::rename(&tmp, p).unwrap();
            p.clone()
        }
        None => {
            let path = dir.join("report.sqlite");
            fill(&path, m, year, charging, parser);
            path
        }
    };
    let reader = LedgerReader::open(&path).unwrap();
    // The report is measured further down; `fill` writes the ledger.
    let end = T0 + year / 2 + 1234;
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        let u = reader.usage(end - 7 * 86_400, end).unwrap();
        let by = reader.charged_by_account(end - 7 * 86_400, end).unwrap();
        let c = reader.open_counts().unwrap();
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        assert!(!u.is_empty() && by.len() == ACCOUNTS && !c.is_empty());
        best = best.min(ms);
    }
    println!("7-day report over {m} attempts: {best:.1} ms (best of 5; goal < 500 ms)");
    println!("BENCH report_7d_ms={best:.1} unit=ms");
}

/// Fills a ledger with `m` attempts spread over a year (checkpointed WAL).
fn fill(path: &std::path::Path, m: u64, year: i64, charging: &Charging, parser: &Parser) {
    let mut ledger = Ledger::open(path).unwrap();
    let t = Instant::now();
    let mut batch = Vec::with_capacity(50_000);
    for i in 0..m {
        let line = row(i);
        let allot_ledger::sacct::RowOutcome::Attempt(mut a) = parser.parse(&line).unwrap() else {
            unreachable!()
        };
        let start = T0 + ((i as i64).wrapping_mul(2_654_435_761) % year).abs();
        let run = a.end.map(|e| e - a.start.unwrap());
        a.start = Some(start);
        a.submit = start - 30;
        a.end = run.map(|r| start + r);
        if a.end.is_none() && i % 1000 != 0 {
            a.end = Some(start + 600); // keep running jobs few, as in life
        }
        batch.push(charging.record(&a));
        if batch.len() == 50_000 {
            ledger.write_batch(&batch, None, charging).unwrap();
            batch.clear();
        }
    }
    ledger
        .write_batch(&batch, Some(T0 + year), charging)
        .unwrap();
    println!("filled {m} attempts in {:.1} s", t.elapsed().as_secs_f64());
    drop(ledger);
}
