//! The priority and preempt plugins' ledger refresh, outside slurmctld
//! (run: `cargo bench -p slurm-plugin --bench refresh -- ALLOT_TOML LEDGER END`).
//!
//! Each `sync.interval` the plugins' engine thread
//! ([`slurm_plugin::snapshot::EngineSnapshot`]) reads the charged GPU-seconds
//! per account of the fair-share window from the ledger
//! ([`slurm_plugin::snapshot::ledger_usage`]) and builds a new
//! [`fairshare::Engine`] from them ([`slurm_plugin::snapshot::build`]). This
//! bench times exactly those two calls on a given allot.toml and ledger,
//! with the window ending at END (epoch seconds; the synthetic ledgers of
//! `accounting-sync/benches/ledger.rs` lie in the past, so "now" would read
//! an empty window). What it leaves out runs only inside slurmctld: the walk
//! of the job list for the entitlements (`jobs::load_now`) and the priority
//! plugin's re-prioritisation of pending jobs after the swap.
//!
//! Prints the first (cold page cache aside) and the median and best of
//! `ALLOT_BENCH_REPEAT` (default 7) refreshes, and `BENCH` lines for
//! `scripts/bench --scale`.

use std::sync::Arc;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let [conf, ledger, end] = &args[..] else {
        eprintln!("usage: refresh ALLOT_TOML LEDGER END_EPOCH_SECONDS");
        std::process::exit(2);
    };
    let end: u64 = end.parse().expect("END: epoch seconds");
    let mut config = slurm_plugin::config::load(std::path::Path::new(conf)).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    config.ledger_path = ledger.clone();
    let config = Arc::new(config);
    let repeat: usize = std::env::var("ALLOT_BENCH_REPEAT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7);
    let mut ms = Vec::with_capacity(repeat);
    let (mut accounts, mut leaves) = (0, 0);
    for _ in 0..repeat.max(1) {
        let t = Instant::now();
        let usage =
            slurm_plugin::snapshot::ledger_usage(&config, end.saturating_sub(config.window), end)
                .unwrap_or_else(|e| {
                    eprintln!("{ledger}: {e}");
                    std::process::exit(1)
                });
        let engine = slurm_plugin::snapshot::build(config.clone(), &usage, end);
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
        accounts = usage.len();
        leaves = engine.tree().leaves().len();
        std::hint::black_box(engine);
    }
    let first = ms[0];
    let mut sorted = ms.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    println!(
        "ledger refresh ({accounts} accounts with usage in the window, {leaves} leaves): \
         first {first:.1} ms, median {median:.1} ms, best {:.1} ms of {}",
        sorted[0],
        ms.len()
    );
    println!("BENCH refresh_median_ms={median:.1} unit=ms");
    println!("BENCH refresh_first_ms={first:.1} unit=ms");
    println!("BENCH refresh_accounts={accounts} unit=accounts");
}
