//! The baselines: documented behaviour and the classic factor.

use crate::testutil::*;
use crate::*;

#[test]
fn baselines_behave_as_documented() {
    let c = config(TWO_TEAMS);
    // t1 floods first; t2 arrives later.
    let mut jobs: Vec<TraceJob> = (0..20).map(|i| job(i, "t1", 0, 3600, 4)).collect();
    jobs.push(job(100, "t2", 60, 3600, 4));
    let fifo = run(&c, jobs.clone(), ONE_NODE, Policy::Fifo);
    let classic = run(&c, jobs.clone(), ONE_NODE, Policy::Classic);
    let fairtree = run(&c, jobs.clone(), ONE_NODE, Policy::FairTree);
    let stat = run(&c, jobs.clone(), ONE_NODE, Policy::Static);
    for r in [&fifo, &classic, &fairtree, &stat] {
        assert_eq!(r.preemptions, 0);
        assert_eq!(r.finished, 21);
    }
    // FIFO: t2 waits behind all of t1's earlier jobs (10 hours of them).
    assert_eq!(fifo.teams[1].wait_p50_s, 10 * 3600 - 60);
    // Fair share: t2 (no usage) goes first at the next completion.
    assert_eq!(classic.teams[1].wait_p50_s, 3600 - 60);
    assert_eq!(fairtree.teams[1].wait_p50_s, 3600 - 60);
    // Static: t2 owns 4 GPUs, t1 only ever holds its 4.
    assert_eq!(stat.teams[1].wait_p50_s, 0);
    assert!(stat.hourly.got[0].iter().all(|&g| g <= 4 * 3600));
}

#[test]
fn classic_factor_formula() {
    // The engine's worked example: a (60) { a1 35, a2 25 }, b (40) { b1 20, b2 20 }.
    let example = "[tree.a]\nshare = 60\n[tree.a.a1]\nshare = 35\n[tree.a.a2]\nshare = 25\n\
                   [tree.b]\nshare = 40\n[tree.b.b1]\nshare = 20\n[tree.b.b2]\nshare = 20\n";
    let tree = config(example).tree.clone();
    let f = baselines::classic_factors(&tree, &[0.0; 4]);
    assert_eq!(f, vec![1.0; 4]);
    // a1 with all the usage: UE(a) = 1, UE(a1) = 1 + (1 - 1) * .. = 1; F = 2^(-1/0.35).
    let f = baselines::classic_factors(&tree, &[1.0, 0.0, 0.0, 0.0]);
    assert!((f[0] - 2f64.powf(-1.0 / 0.35)).abs() < 1e-12, "{f:?}");
    // b1 has no usage: UE = 0 + (0 - 0) ... = 0 -> F = 1.
    assert_eq!(f[2], 1.0);
}
