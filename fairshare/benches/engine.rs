//! One full priority pass: rank a 1,000-leaf tree (10 programs x 10 groups
//! x 10 projects) and compute priorities for 100,000 pending jobs, as the
//! priority plugin does each cycle. Goal: under 10 ms on one core.
//! Also: the incremental usage tracker's cost per job and per advance, and
//! one preemption round as preempt/allot judges it: 252 running candidates
//! of one pending job on 1,024 GPUs (128 nodes of 8), as in the 1,024-GPU
//! scale run (docs/benchmarks.md).

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use fairshare::preempt::round::{Candidate, Rounds};
use fairshare::{
    Config, Contract, Engine, Entitlements, PendingJob, Preemptor, RunClock, RunningJob, Tree,
    UsageTracker,
};

mod common;
use common::{lcg, synthetic_tree};

const NOW: u64 = 1_700_000_000;

fn config() -> Arc<Config> {
    let programs = synthetic_tree(&mut 7, 10, "l");
    Arc::new(Config::with_tree(Tree::build(&programs).unwrap()))
}

fn bench_pass(c: &mut Criterion) {
    let config = config();
    let mut seed = 11;
    let usage: Vec<f64> = (0..1000)
        .map(|_| (lcg(&mut seed) % 10_000_000) as f64)
        .collect();
    let accounts: Vec<String> = config.tree.accounts().map(|(a, _)| a.to_string()).collect();
    assert_eq!(accounts.len(), 1000);
    let jobs: Vec<PendingJob<'_>> = (0..100_000)
        .map(|_| PendingJob {
            id: 0,
            account: &accounts[(lcg(&mut seed) % 1000) as usize],
            min_runtime: [0, 3600, 4 * 3600][(lcg(&mut seed) % 3) as usize],
            nice: (lcg(&mut seed) % 200) as i64 - 100,
            eligible_time: NOW - lcg(&mut seed) % 1_000_000,
            gpus: 1 + lcg(&mut seed) % 8,
            time_limit: Some(3600 * (1 + lcg(&mut seed) % 24)),
            sweep: false,
        })
        .collect();
    let mut out = Vec::with_capacity(jobs.len());

    c.bench_function("rank 1000-leaf tree", |b| {
        b.iter(|| Engine::new(config.clone(), black_box(usage.clone()), NOW))
    });
    c.bench_function("full pass: rank 1000 leaves + 100k priorities", |b| {
        b.iter(|| {
            let engine = Engine::new(config.clone(), black_box(usage.clone()), NOW);
            out.clear();
            engine.priorities(black_box(&jobs), &mut out);
            black_box(&out);
        })
    });

    c.bench_function("usage: add 10k jobs over a day, then advance a week", |b| {
        b.iter(|| {
            let mut t = UsageTracker::new(7 * 86_400, NOW);
            let mut s = 3;
            for i in 0..10_000u64 {
                let start = NOW + i * 8;
                let a = &accounts[(lcg(&mut s) % 1000) as usize];
                t.add_closed(a, 1 + lcg(&mut s) % 8, start, start + 3600);
            }
            for step in 1..=168u64 {
                t.advance_to(NOW + step * 3600).unwrap();
            }
            black_box(t.occupancy(&accounts[0]))
        })
    });
}

fn bench_round(c: &mut Criterion) {
    let config = config();
    let engine = Engine::new(config.clone(), vec![0.0; 1000], NOW);
    let accounts: Vec<String> = config.tree.accounts().map(|(a, _)| a.to_string()).collect();
    let mut seed = 5;
    // 252 running 4-GPU jobs past their contract on 128 nodes (two a node
    // on most), of accounts other than the preemptor's.
    let jobs: Vec<(RunningJob<'_>, String)> = (0..252u64)
        .map(|i| {
            let job = RunningJob {
                id: 1000 + i,
                account: &accounts[1 + (lcg(&mut seed) % 999) as usize],
                contract: Contract {
                    min_runtime: 3600,
                    clock: RunClock::started(NOW - 7200),
                },
                alloc: &[],
                requeue: true,
                short: false,
                requeues: 0,
            };
            (job, format!("gpu{:03}", i % 128))
        })
        .collect();
    let n = config.tree.leaves().len();
    let mut running = vec![0u64; n];
    for (j, _) in &jobs {
        running[engine.leaf_of(j.account).unwrap().0 as usize] += 4;
    }
    let mut pending = vec![0u64; n];
    pending[engine.leaf_of(&accounts[0]).unwrap().0 as usize] = 8;
    let load = Entitlements::compute(engine.tree(), 1024, &running, &pending);
    let p = Preemptor {
        account: &accounts[0],
        min_runtime: 3600,
        rate: 8,
        nodes: 1,
        gpus_per_node: 8,
        short: false,
    };
    c.bench_function("preemption round: 252 candidates, 1024 GPUs", |b| {
        b.iter(|| {
            let mut rounds = Rounds::default();
            rounds.set_load(load.clone());
            rounds.enter(1, 1);
            let mut allowed = 0;
            for (j, node) in &jobs {
                let cand = Candidate {
                    id: j.id,
                    job: j,
                    gpus: 4,
                    nodes: Some(node),
                };
                allowed += usize::from(
                    rounds
                        .judge(&engine, 1, &p, 8, black_box(cand), NOW)
                        .map(|j| j.0)
                        == Some(fairshare::Verdict::Allowed),
                );
            }
            black_box(allowed)
        })
    });
}

criterion_group!(benches, bench_pass, bench_round);
criterion_main!(benches);
