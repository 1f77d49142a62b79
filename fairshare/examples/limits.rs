//! Limits (issue 9): a 10,000-account tree and 100,000 pending jobs. Prints
//! what each plugin call costs through the engine, and the memory it holds.
//!
//! ```sh
//! cargo run --release -p fairshare --example limits
//! ```
//!
//! - snapshot rebuild (the background thread, off slurmctld's locks except
//!   the re-prioritisation): `Engine::from_account_usage` over 10,000 accounts;
//! - `priority_p_set`: one `Engine::priority` call;
//! - the recalculation pass: 100,000 priorities;
//! - `preempt_p_preemptable`: one `Engine::may_preempt` call, worst case
//!   (the no-ping-pong rule re-ranks the tree with the move applied);
//! - victim choice over 2,000 running jobs.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fairshare::contract::{Contract, RunClock};
use fairshare::{Config, Engine, NodeGpus, PendingJob, Preemptor, RunningJob, Tree};

#[path = "../benches/common/mod.rs"]
mod common;
use common::{lcg, synthetic_tree};

const NOW: u64 = 1_700_000_000;

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("VmRSS:")
                    .map(|v| v.trim().trim_end_matches(" kB").parse().unwrap_or(0))
            })
        })
        .unwrap_or(0)
}

/// Median and max of `n` timed runs of `f`.
fn time<T>(n: usize, mut f: impl FnMut(usize) -> T) -> (Duration, Duration) {
    let mut v: Vec<Duration> = (0..n)
        .map(|i| {
            let t = Instant::now();
            black_box(f(i));
            t.elapsed()
        })
        .collect();
    v.sort();
    (v[n / 2], v[n - 1])
}

fn main() {
    let rss0 = rss_kib();
    let rss_config_start = rss_kib();
    // 10 programs x 10 groups x 100 teams = 10,000 leaf accounts.
    let mut seed = 7;
    let programs = synthetic_tree(&mut seed, 100, "t");
    let config = Arc::new(Config::with_tree(Tree::build(&programs).unwrap()));
    let rss_config = rss_kib().saturating_sub(rss_config_start);
    let accounts: Vec<String> = config.tree.accounts().map(|(a, _)| a.to_string()).collect();
    assert_eq!(accounts.len(), 10_000);
    let usage: Vec<(String, f64)> = accounts
        .iter()
        .map(|a| (a.clone(), (lcg(&mut seed) % 50_000_000) as f64))
        .collect();

    let rss_before_engine = rss_kib();
    let engine = Engine::from_account_usage(
        config.clone(),
        usage.iter().map(|(a, u)| (a.as_str(), *u)),
        NOW,
    )
    .0;
    let rss_engine = rss_kib().saturating_sub(rss_before_engine);
    let (rebuild_med, rebuild_max) = time(20, |_| {
        Engine::from_account_usage(
            config.clone(),
            usage.iter().map(|(a, u)| (a.as_str(), *u)),
            NOW,
        )
        .0
    });

    let jobs: Vec<PendingJob<'_>> = (0..100_000)
        .map(|_| PendingJob {
            id: 0,
            account: &accounts[(lcg(&mut seed) % 10_000) as usize],
            min_runtime: [0, 3600, 4 * 3600][(lcg(&mut seed) % 3) as usize],
            nice: (lcg(&mut seed) % 200) as i64 - 100,
            eligible_time: NOW - lcg(&mut seed) % (14 * 86_400),
            gpus: 1 + lcg(&mut seed) % 8,
            time_limit: Some(3600 * (1 + lcg(&mut seed) % 24)),
            sweep: false,
        })
        .collect();
    let (set_med, set_max) = time(100_000, |i| engine.priority(&jobs[i]));
    let mut out = Vec::with_capacity(jobs.len());
    let (pass_med, pass_max) = time(20, |_| {
        out.clear();
        engine.priorities(&jobs, &mut out);
        out.len()
    });

    // preemptable: preemptor from an under-served account, preemptee from an
    // over-served one, both allocated and past its contract: every check runs.
    let fair = engine.fair_tree();
    let mut by_rank: Vec<&String> = accounts.iter().collect();
    by_rank.sort_by_key(|a| fair.rank(engine.leaf_of(a).unwrap()));
    let alloc = [NodeGpus { node: 0, gpus: 8 }];
    let running: Vec<RunningJob<'_>> = (0..2000)
        .map(|i| RunningJob {
            id: i,
            account: by_rank[(i as usize * 7) % 5000],
            contract: Contract {
                min_runtime: 3600,
                clock: RunClock::started(NOW - 7200),
            },
            alloc: &alloc,
            requeue: true,
            short: false,
            requeues: 0,
        })
        .collect();
    let preemptors: Vec<Preemptor<'_>> = (0..1000)
        .map(|i| Preemptor {
            account: by_rank[9999 - i % 1000],
            min_runtime: 3600,
            rate: 8,
            nodes: 1,
            gpus_per_node: 8,
            short: false,
        })
        .collect();
    // Every account's jobs: the over-served half runs 8 GPUs each, the
    // under-served half waits for 8 each (entitlements of 10,000 leaves).
    let leaves = engine.tree().leaves().len();
    let mut run_gpus = vec![0u64; leaves];
    let mut pend_gpus = vec![0u64; leaves];
    for (i, a) in by_rank.iter().enumerate() {
        let l = engine.leaf_of(a).unwrap().0 as usize;
        if i < 5000 {
            run_gpus[l] = 8;
        } else {
            pend_gpus[l] = 8;
        }
    }
    let (load_med, load_max) = time(20, |_| {
        fairshare::Entitlements::compute(engine.tree(), 40_000, &run_gpus, &pend_gpus)
    });
    let load = fairshare::Entitlements::compute(engine.tree(), 40_000, &run_gpus, &pend_gpus);
    // Each call from another preemptor...
    let (pre_med, pre_max) = time(1000, |i| {
        engine.may_preempt(&preemptors[i], &running[i], &load, NOW)
    });
    // ...and as slurmctld asks: one preemptor against every running job.
    let (same_med, same_max) = time(2000, |i| {
        engine.may_preempt(&preemptors[0], &running[i], &load, NOW)
    });
    let (vic_med, vic_max) = time(50, |i| {
        engine.choose_victims(&preemptors[i], &running, &[], &load, NOW)
    });
    let rss_end = rss_kib();

    println!(
        "allot limits: 10,000 accounts (10 x 10 x 100 tree), 100,000 pending jobs, 2,000 running"
    );
    println!(
        "  snapshot rebuild (background thread)   median {:>10.3?}  max {:>10.3?}",
        rebuild_med, rebuild_max
    );
    println!(
        "  entitlements (10,000 leaves)           median {:>10.3?}  max {:>10.3?}",
        load_med, load_max
    );
    println!(
        "  priority_p_set (one job)               median {:>10.3?}  max {:>10.3?}",
        set_med, set_max
    );
    println!(
        "  recalculation pass (100,000 jobs)      median {:>10.3?}  max {:>10.3?}",
        pass_med, pass_max
    );
    println!(
        "  preempt_p_preemptable (worst case)     median {:>10.3?}  max {:>10.3?}",
        pre_med, pre_max
    );
    println!(
        "  preempt_p_preemptable (same preemptor) median {:>10.3?}  max {:>10.3?}",
        same_med, same_max
    );
    println!(
        "  victim choice (2,000 running)          median {:>10.3?}  max {:>10.3?}",
        vic_med, vic_max
    );
    println!(
        "  memory: config + tree of 10,000 accounts and one engine snapshot ~{} KiB; whole process RSS {} KiB (start {} KiB)",
        rss_config + rss_engine,
        rss_end,
        rss0
    );
}
