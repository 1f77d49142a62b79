use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::config::Config;
use crate::contract::RunClock;
use crate::testutil::{example_tree, example_usage, tree_and_usage};
use crate::tree::{NodeSpec, Tree};

pub(super) const NOW: u64 = 1_700_000_000;
const H: u64 = 3600;

/// Worked example: ranks b1 4, b2 3, a2 2, a1 1.
pub(super) fn engine() -> Engine {
    Engine::new(
        Arc::new(Config::with_tree(example_tree())),
        example_usage(),
        NOW,
    )
}

fn pending(account: &str, min_runtime: u64, gpus: u32) -> Preemptor<'_> {
    Preemptor {
        account,
        min_runtime,
        rate: u64::from(gpus),
        nodes: 1,
        gpus_per_node: gpus,
    }
}

pub(super) fn running<'a>(
    id: u64,
    account: &'a str,
    min: u64,
    ran: u64,
    alloc: &'a [NodeGpus],
) -> RunningJob<'a> {
    RunningJob {
        id,
        account,
        contract: Contract {
            min_runtime: min,
            clock: RunClock::started(NOW - ran),
        },
        alloc,
        requeue: true,
    }
}

const ONE: &[NodeGpus] = &[NodeGpus { node: 0, gpus: 1 }];

#[test]
fn higher_ranked_account_preempts_past_contract_only() {
    let e = engine();
    let p = pending("b1", H, 1);
    assert!(e.may_preempt(&p, &running(1, "a1", H, 2 * H, ONE), NOW));
    assert_eq!(
        e.preempt_verdict(&p, &running(1, "a1", H, H - 1, ONE), NOW),
        Verdict::Protected {
            until: Some(NOW + 1)
        }
    );
    assert!(
        e.may_preempt(&p, &running(1, "a1", H, H, ONE), NOW),
        "run time == min runtime: preemptible"
    );
    // The other way round: a1 ranks below b1.
    assert_eq!(
        e.preempt_verdict(&pending("a1", H, 1), &running(2, "b1", H, 9 * H, ONE), NOW),
        Verdict::NotRankedBelow
    );
}

#[test]
fn one_account_never_preempts_itself() {
    let e = engine();
    assert_eq!(
        e.preempt_verdict(&pending("b1", H, 1), &running(1, "b1", 0, 0, ONE), NOW),
        Verdict::SameAccount
    );
    // Accounts of one leaf count as one account.
    let t = Tree::build(&[
        NodeSpec {
            accounts: Some(vec!["x".into(), "x-dev".into()]),
            ..NodeSpec::leaf("x", 1)
        },
        NodeSpec::leaf("y", 1),
    ])
    .unwrap();
    let e = Engine::new(Arc::new(Config::with_tree(t)), vec![0.0, 100.0], NOW);
    assert_eq!(
        e.preempt_verdict(&pending("x", H, 1), &running(1, "x-dev", 0, 0, ONE), NOW),
        Verdict::SameAccount
    );
}

#[test]
fn unallocated_jobs_are_preemptible_at_once_by_any_allocated_job() {
    let e = engine();
    // a1 ranks last, yet preempts b1's free-tier job from its first second.
    assert!(e.may_preempt(&pending("a1", H, 1), &running(1, "b1", 0, 0, ONE), NOW));
    // Free-tier jobs never preempt.
    assert_eq!(
        e.preempt_verdict(&pending("b1", 0, 1), &running(1, "a1", 0, 9 * H, ONE), NOW),
        Verdict::PreemptorUnallocated
    );
    assert_eq!(
        e.preempt_verdict(&pending("zz", H, 1), &running(1, "a1", 0, 0, ONE), NOW),
        Verdict::UnknownAccount
    );
}

#[test]
fn no_ping_pong() {
    // x ranks above y by a little; starting x's 8-GPU, 8-hour job would
    // push x below y, so x may not preempt y.
    let t = Tree::build(&[NodeSpec::leaf("x", 1), NodeSpec::leaf("y", 1)]).unwrap();
    let e = Engine::new(
        Arc::new(Config::with_tree(t)),
        vec![100.0 * H as f64, 110.0 * H as f64],
        NOW,
    );
    let y_job = running(1, "y", H, 2 * H, ONE);
    let big = Preemptor {
        account: "x",
        min_runtime: 8 * H,
        rate: 8,
        nodes: 1,
        gpus_per_node: 8,
    };
    assert_eq!(e.preempt_verdict(&big, &y_job, NOW), Verdict::WouldInvert);
    let small = Preemptor {
        account: "x",
        min_runtime: H,
        rate: 1,
        nodes: 1,
        gpus_per_node: 1,
    };
    assert!(e.may_preempt(&small, &y_job, NOW));
}

#[test]
fn victims_smallest_set_in_preference_order() {
    let e = engine();
    let (two, four) = (
        [NodeGpus { node: 0, gpus: 2 }],
        [NodeGpus { node: 0, gpus: 4 }],
    );
    let jobs = [
        running(1, "a2", 0, 10, &two),     // unallocated: first in order
        running(2, "a1", H, 2 * H, &four), // allocated, most over-served
        running(3, "a2", H, 2 * H, &two),
    ];
    let free = [NodeGpus { node: 0, gpus: 0 }];
    // Needs 4: job 1 (2) is not enough with job 3; job 2 alone suffices,
    // so job 1 is given back.
    assert_eq!(
        e.choose_victims(&pending("b1", H, 4), &jobs, &free, NOW),
        Some(vec![2])
    );
    // Needs 2: the unallocated job goes first.
    assert_eq!(
        e.choose_victims(&pending("b1", H, 2), &jobs, &free, NOW),
        Some(vec![1])
    );
    // Needs 8: everything.
    assert_eq!(
        e.choose_victims(&pending("b1", H, 8), &jobs, &free, NOW),
        Some(vec![1, 2, 3])
    );
    // Needs 9: impossible.
    assert_eq!(
        e.choose_victims(&pending("b1", H, 9), &jobs, &free, NOW),
        None
    );
    // Already fits elsewhere.
    let free2 = [NodeGpus { node: 0, gpus: 0 }, NodeGpus { node: 1, gpus: 8 }];
    assert_eq!(
        e.choose_victims(&pending("b1", H, 4), &jobs, &free2, NOW),
        Some(vec![])
    );
}

#[test]
fn no_requeue_jobs_go_last_and_least_work_lost_first() {
    let e = engine();
    let a = [NodeGpus { node: 0, gpus: 2 }];
    let mut keep = running(1, "a1", 0, 10, &a);
    keep.requeue = false;
    let jobs = [
        keep,
        running(2, "a1", H, 5 * H, &a),
        running(3, "a1", H, 2 * H, &a),
    ];
    let free = [NodeGpus { node: 0, gpus: 0 }];
    assert_eq!(
        e.choose_victims(&pending("b1", H, 2), &jobs, &free, NOW),
        Some(vec![3])
    );
    assert_eq!(
        e.choose_victims(&pending("b1", H, 4), &jobs, &free, NOW),
        Some(vec![3, 2])
    );
}

#[test]
fn multi_node_preemptor_picks_the_cheapest_nodes() {
    let e = engine();
    let n0 = [NodeGpus { node: 0, gpus: 4 }];
    let n1 = [NodeGpus { node: 1, gpus: 2 }, NodeGpus { node: 2, gpus: 2 }];
    let jobs = [
        running(1, "a1", H, 2 * H, &n0),
        running(2, "a1", H, 2 * H, &n1),
    ];
    let free = [
        NodeGpus { node: 0, gpus: 0 },
        NodeGpus { node: 1, gpus: 2 },
        NodeGpus { node: 2, gpus: 2 },
    ];
    let p = Preemptor {
        account: "b1",
        min_runtime: H,
        rate: 8,
        nodes: 2,
        gpus_per_node: 4,
    };
    // Job 2 spans nodes 1 and 2: one victim frees both.
    assert_eq!(e.choose_victims(&p, &jobs, &free, NOW), Some(vec![2]));
}

/// Random jobs over the worked example and random trees.
/// (leaf, min runtime, ran for, node, GPUs, requeue)
type JobSpec = (usize, u64, u64, u32, u32, bool);

fn scenario() -> impl Strategy<Value = (Tree, Vec<f64>, Vec<JobSpec>)> {
    tree_and_usage().prop_flat_map(|(t, u)| {
        let leaves = t.leaves().len();
        let job = (
            0..leaves,
            prop_oneof![Just(0u64), Just(H), Just(4 * H)],
            0u64..6 * H,
            0u32..3,
            1u32..5,
            any::<bool>(),
        );
        (Just(t), Just(u), prop::collection::vec(job, 1..12))
    })
}

fn account(t: &Tree, leaf: usize) -> &str {
    &t.node(t.leaves()[leaf]).accounts[0]
}

proptest! {
    #[test]
    fn victims_are_allowed_unprotected_sufficient_and_minimal(
        (t, usage, jobs) in scenario(), who in 0usize..64, min in prop_oneof![Just(0u64), Just(H)], need in 1u32..6,
    ) {
        let e = Engine::new(Arc::new(Config::with_tree(t.clone())), usage, NOW);
        let allocs: Vec<[NodeGpus; 1]> = jobs.iter().map(|j| [NodeGpus { node: j.3, gpus: j.4 }]).collect();
        let run: Vec<RunningJob<'_>> = jobs.iter().enumerate().map(|(i, j)| RunningJob {
            requeue: j.5,
            ..running(i as u64, account(&t, j.0), j.1, j.2, &allocs[i])
        }).collect();
        let p = Preemptor { account: account(&t, who % t.leaves().len()), min_runtime: min, rate: u64::from(need), nodes: 1, gpus_per_node: need };
        let free = [NodeGpus { node: 0, gpus: 0 }, NodeGpus { node: 1, gpus: 1 }, NodeGpus { node: 2, gpus: 0 }];
        if let Some(v) = e.choose_victims(&p, &run, &free, NOW) {
            let fits = |set: &[u64]| (0..3u32).any(|n| {
                let freed: u32 = run.iter().filter(|r| set.contains(&r.id)).map(|r| r.gpus_on(n)).sum();
                free[n as usize].gpus + freed >= need
            });
            prop_assert!(fits(&v));
            for id in &v {
                let r = &run[*id as usize];
                prop_assert!(!protected(&r.contract, NOW), "no preemption inside a contract");
                prop_assert!(e.may_preempt(&p, r, NOW));
                let fewer: Vec<u64> = v.iter().copied().filter(|x| x != id).collect();
                prop_assert!(!fits(&fewer), "victim {} is not needed", id);
            }
        }
        for r in &run {
            if protected(&r.contract, NOW) {
                prop_assert!(!e.may_preempt(&p, r, NOW));
            }
        }
    }

    #[test]
    fn no_preemption_cycle_and_no_ping_pong((t, usage, jobs) in scenario(), rate in 1u64..16) {
        let e = Engine::new(Arc::new(Config::with_tree(t.clone())), usage, NOW);
        // Every job seen both as a preemptor and (past its contract) as a preemptee.
        let preemptors: Vec<Preemptor<'_>> = jobs.iter().map(|j| Preemptor {
            account: account(&t, j.0), min_runtime: j.1, rate, nodes: 1, gpus_per_node: 1,
        }).collect();
        let runnings: Vec<RunningJob<'_>> = jobs.iter().enumerate()
            .map(|(i, j)| running(i as u64, account(&t, j.0), j.1, 9 * H, ONE)).collect();
        let n = jobs.len();
        let edge = |a: usize, b: usize| e.may_preempt(&preemptors[a], &runnings[b], NOW);
        // Floyd-Warshall reachability: no job may reach itself.
        let mut reach: Vec<Vec<bool>> = (0..n).map(|a| (0..n).map(|b| edge(a, b)).collect()).collect();
        for k in 0..n { for a in 0..n { for b in 0..n {
            if reach[a][k] && reach[k][b] { reach[a][b] = true; }
        }}}
        for (a, row) in reach.iter().enumerate() {
            prop_assert!(!row[a], "preemption cycle through job {}", a);
        }
        // After any allowed move among allocated jobs, the preemptee's account does not rank above.
        for p in &preemptors {
            for r in &runnings {
                if e.may_preempt(p, r, NOW) && r.contract.min_runtime > 0 {
                    let pl = e.leaf_of(p.account).unwrap();
                    let after = e.ranked_with_extra(pl, (rate * p.min_runtime) as f64);
                    let rl = e.leaf_of(r.account).unwrap();
                    prop_assert!(after.rank(rl) <= after.rank(pl));
                }
            }
        }
    }
}
