use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::config::Config;
use crate::contract::Contract;
use crate::contract::RunClock;
use crate::engine::Engine;
use crate::entitlement::Entitlements;
use crate::tree::{NodeSpec, Tree};

pub(super) const NOW: u64 = 1_700_000_000;
const H: u64 = 3600;

fn engine_of(tree: Tree) -> Engine {
    engine_with(tree, crate::contract::RequeuePoints::default())
}

fn engine_with(tree: Tree, points: crate::contract::RequeuePoints) -> Engine {
    let mut config = Config::with_tree(tree);
    config.priority.short_max_gpus = 2;
    config.contract.requeue = points;
    Engine::new(Arc::new(config), Vec::new(), NOW)
}

/// a and b, equal shares.
pub(super) fn pair() -> Engine {
    engine_of(Tree::build(&[NodeSpec::leaf("a", 1), NodeSpec::leaf("b", 1)]).unwrap())
}

pub(super) fn pending(account: &str, min_runtime: u64, gpus: u32) -> Preemptor<'_> {
    Preemptor {
        account,
        min_runtime,
        rate: 1000 * u64::from(gpus),
        nodes: 1,
        gpus_per_node: gpus,
        short: false,
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
        short: false,
        requeues: 0,
    }
}

/// Entitlements of `e`'s leaves on `capacity` GPUs, from (account,
/// running, pending) allocated GPUs.
pub(super) fn load(e: &Engine, capacity: u64, per: &[(&str, u64, u64)]) -> Entitlements {
    let n = e.tree().leaves().len();
    let (mut run, mut pend) = (vec![0; n], vec![0; n]);
    for (a, r, p) in per {
        let l = e.leaf_of(a).unwrap().0 as usize;
        run[l] += r;
        pend[l] += p;
    }
    Entitlements::compute(e.tree(), capacity, &run, &pend)
}

const ONE: &[NodeGpus] = &[NodeGpus { node: 0, gpus: 1 }];

#[test]
fn below_entitlement_preempts_past_contract_only() {
    let e = pair();
    // a holds all 8 GPUs, b wants 4: b is entitled to 4.
    let l = load(&e, 8, &[("a", 8, 0), ("b", 0, 4)]);
    let p = pending("b", H, 1);
    assert!(e.may_preempt(&p, &running(1, "a", H, 2 * H, ONE), &l, NOW));
    assert_eq!(
        e.preempt_verdict(&p, &running(1, "a", H, H - 1, ONE), &l, NOW),
        Verdict::Protected {
            until: Some(NOW + 1)
        }
    );
    assert!(
        e.may_preempt(&p, &running(1, "a", H, H, ONE), &l, NOW),
        "equal to the minimum runtime = preemptible"
    );
    // a cannot preempt b back: a is above its entitlement.
    let l2 = load(&e, 8, &[("a", 4, 4), ("b", 4, 0)]);
    assert_eq!(
        e.preempt_verdict(
            &pending("a", H, 1),
            &running(2, "b", H, 9 * H, ONE),
            &l2,
            NOW
        ),
        Verdict::PreemptorServed {
            running: 4,
            entitled: 4.0
        }
    );
    // b at 4 of 4 cannot take a fifth GPU from a.
    let l3 = load(&e, 8, &[("a", 4, 0), ("b", 4, 4)]);
    assert!(!e.may_preempt(
        &pending("b", H, 1),
        &running(3, "a", H, 9 * H, ONE),
        &l3,
        NOW
    ));
}

/// Neither of `a` and `b` may preempt the other's job past its contract.
fn neither_way(e: &Engine, l: &Entitlements, a: &str, b: &str) {
    for (id, x, y) in [(1, a, b), (2, b, a)] {
        assert!(
            !e.may_preempt(&pending(x, H, 1), &running(id, y, H, 9 * H, ONE), l, NOW),
            "{x} may preempt {y}"
        );
    }
}

#[test]
fn a_tie_preempts_neither_way() {
    // Two share-0 teams beside an idle team: both at their entitlement.
    let e = engine_of(
        Tree::build(&[
            NodeSpec::leaf("c", 1),
            NodeSpec::leaf("x", 0),
            NodeSpec::leaf("y", 0),
        ])
        .unwrap(),
    );
    let l = load(&e, 8, &[("x", 4, 4), ("y", 4, 4)]);
    let (x, y) = (e.leaf_of("x").unwrap(), e.leaf_of("y").unwrap());
    assert_eq!((l.entitled(x), l.entitled(y)), (4.0, 4.0));
    neither_way(&e, &l, "x", "y");
    // Equal shares at equal use: the same.
    let e = pair();
    let l = load(&e, 8, &[("a", 4, 9), ("b", 4, 9)]);
    neither_way(&e, &l, "a", "b");
}

#[test]
fn sixteen_held_past_contract_eight_asked_exactly_eight_youngest_then_none() {
    let e = pair();
    // Two nodes of 8; a holds 16 one-GPU jobs past their contracts, the
    // job i having run (2 + i) hours; b asks for 8 one-GPU jobs, then more.
    let allocs: Vec<[NodeGpus; 1]> = (0..16)
        .map(|i| {
            [NodeGpus {
                node: i / 8,
                gpus: 1,
            }]
        })
        .collect();
    let mut jobs: Vec<RunningJob<'_>> = (0..16u64)
        .map(|i| running(i, "a", H, (2 + i) * H, &allocs[i as usize]))
        .collect();
    let mut preempted = Vec::new();
    let (mut a_run, mut b_run, mut b_pend) = (16u64, 0u64, 12u64);
    let mut free = vec![NodeGpus { node: 0, gpus: 0 }, NodeGpus { node: 1, gpus: 0 }];
    while b_pend > 0 {
        let l = load(&e, 16, &[("a", a_run, 0), ("b", b_run, b_pend)]);
        let Some(v) = e.choose_victims(&pending("b", H, 1), &jobs, &free, &l, NOW) else {
            break;
        };
        assert_eq!(v.len(), 1, "one GPU needs one victim");
        let j = jobs.iter().position(|j| j.id == v[0]).unwrap();
        let node = jobs[j].alloc[0].node;
        preempted.push(jobs.remove(j).id);
        // The victim's GPU goes straight to b's job.
        free[node as usize].gpus = 0;
        a_run -= 1;
        b_run += 1;
        b_pend -= 1;
    }
    assert_eq!(
        preempted,
        (0..8).collect::<Vec<u64>>(),
        "exactly 8, youngest first"
    );
    assert_eq!((a_run, b_run), (8, 8));
}

#[test]
fn free_tier_is_preempted_by_any_allocated_job_its_own_included() {
    let e = pair();
    let l = load(&e, 8, &[("a", 8, 1), ("b", 0, 0)]);
    let free_job = running(1, "a", 0, 0, ONE);
    // a is far above its entitlement and still may take its own free job.
    assert!(e.may_preempt(&pending("a", H, 1), &free_job, &l, NOW));
    assert!(e.may_preempt(&pending("b", H, 1), &free_job, &l, NOW));
    assert_eq!(
        e.preempt_verdict(&pending("b", 0, 1), &free_job, &l, NOW),
        Verdict::PreemptorUnallocated
    );
    assert_eq!(
        e.preempt_verdict(&pending("zz", H, 1), &free_job, &l, NOW),
        Verdict::UnknownAccount
    );
    // Allocated work of the same account is never a victim of a job that is not short.
    assert_eq!(
        e.preempt_verdict(
            &pending("a", H, 1),
            &running(2, "a", H, 9 * H, ONE),
            &l,
            NOW
        ),
        Verdict::SameAccount
    );
}

#[test]
fn debug_work_trades_its_own_leafs_batch_work_and_nothing_else() {
    let e = pair();
    let l = load(&e, 8, &[("a", 4, 4), ("b", 4, 0)]);
    let mut sp = pending("a", H, 1);
    sp.short = true;
    // a is at its entitlement: its debug job may take a's own batch work
    // past its contract...
    assert!(e.may_preempt(&sp, &running(1, "a", H, 2 * H, ONE), &l, NOW));
    // ...never on the job's last requeue, nor a's own debug work...
    let mut last = running(1, "a", H, 2 * H, ONE);
    last.requeues = 2;
    assert_eq!(e.preempt_verdict(&sp, &last, &l, NOW), Verdict::SameAccount);
    let mut own_debug = running(1, "a", H, 2 * H, ONE);
    own_debug.short = true;
    assert_eq!(
        e.preempt_verdict(&sp, &own_debug, &l, NOW),
        Verdict::SameAccount
    );
    // ...and between teams it is any other job: a holds its entitlement,
    // so it takes nothing of b (the debug lane is gone).
    assert!(matches!(
        e.preempt_verdict(&sp, &running(2, "b", H, 2 * H, ONE), &l, NOW),
        Verdict::PreemptorServed { .. }
    ));
    // Debug work of another team past its contract is no longer exempt.
    let mut debug_victim = running(3, "b", H, 9 * H, ONE);
    debug_victim.short = true;
    let l2 = load(&e, 8, &[("a", 0, 8), ("b", 8, 0)]);
    assert!(e.may_preempt(&pending("a", H, 1), &debug_victim, &l2, NOW));
}

#[test]
fn victims_leaves_lose_less_than_half_what_the_preemptor_covers() {
    let e = pair();
    // a holds 6 (entitled 4: surplus 2) in two 3-GPU jobs; b wants up to 4.
    let n0 = [NodeGpus { node: 0, gpus: 3 }];
    let n1 = [NodeGpus { node: 1, gpus: 3 }];
    let jobs = [
        running(1, "a", H, 2 * H, &n0),
        running(2, "a", H, 3 * H, &n1),
    ];
    let l = load(&e, 8, &[("a", 6, 0), ("b", 0, 4)]);
    assert_eq!(e.surplus_of(&l, "a"), 2);
    let one_free = [NodeGpus { node: 0, gpus: 1 }, NodeGpus { node: 1, gpus: 1 }];
    // A 3-GPU job of b covers 3 of b's entitlement; a 3-GPU victim leaves a
    // at 3, 1 below its 4: 1 < 3 / 2, allowed (the youngest goes).
    assert_eq!(e.gain(&pending("b", H, 3), &l), 3.0);
    assert_eq!(
        e.choose_victims(&pending("b", H, 3), &jobs, &one_free, &l, NOW),
        Some(vec![1])
    );
    // A 2-GPU job covers 2: losing 1 is not less than 2 / 2, refused; so is
    // a 1-GPU job (0.5).
    let none_free = [NodeGpus { node: 0, gpus: 0 }, NodeGpus { node: 1, gpus: 0 }];
    for gpus in [1, 2] {
        assert_eq!(
            e.choose_victims(&pending("b", H, gpus), &jobs, &none_free, &l, NOW),
            None,
            "{gpus} GPUs"
        );
        assert!(matches!(
            e.preempt_verdict(&pending("b", H, gpus), &jobs[0], &l, NOW),
            Verdict::PreempteeAtEntitlement { .. }
        ));
    }
}

impl Engine {
    fn surplus_of(&self, l: &Entitlements, account: &str) -> u64 {
        l.surplus(self.leaf_of(account).unwrap())
    }
}

#[test]
fn past_its_contract_a_job_is_preempted_only_at_its_requeue_points() {
    let points = crate::contract::RequeuePoints {
        period: 1800,
        window: 300,
    };
    let e = engine_with(
        Tree::build(&[NodeSpec::leaf("a", 1), NodeSpec::leaf("b", 1)]).unwrap(),
        points,
    );
    let l = load(&e, 8, &[("a", 8, 0), ("b", 0, 4)]);
    let p = pending("b", H, 1);
    // 1 h 5 min of running time: between the points of 1 h and 1 h 30 min.
    assert_eq!(
        e.preempt_verdict(&p, &running(1, "a", H, H + 300, ONE), &l, NOW),
        Verdict::BetweenRequeuePoints {
            next: Some(NOW + 1500)
        }
    );
    for ran in [H, H + 299, H + 1800, 5 * H + 100] {
        assert!(
            e.may_preempt(&p, &running(1, "a", H, ran, ONE), &l, NOW),
            "ran {ran}"
        );
    }
    // The free tier keeps no requeue points.
    assert!(e.may_preempt(&p, &running(1, "a", 0, H + 300, ONE), &l, NOW));
    // choose_victims takes the job at its point, not the younger one between.
    let jobs = [
        running(1, "a", H, H + 400, ONE),
        running(2, "a", H, 2 * H + 200, ONE),
    ];
    assert_eq!(e.choose_victims(&p, &jobs, &[], &l, NOW), Some(vec![2]));
}

#[test]
fn no_requeue_jobs_go_last_and_least_work_lost_first() {
    let e = pair();
    let a = [NodeGpus { node: 0, gpus: 2 }];
    let mut keep = running(1, "a", 0, 10, &a);
    keep.requeue = false;
    let jobs = [
        keep,
        running(2, "a", H, 5 * H, &a),
        running(3, "a", H, 2 * H, &a),
    ];
    let free = [NodeGpus { node: 0, gpus: 0 }];
    let l = load(&e, 8, &[("a", 8, 0), ("b", 0, 8)]);
    assert_eq!(
        e.choose_victims(&pending("b", H, 2), &jobs, &free, &l, NOW),
        Some(vec![3])
    );
    assert_eq!(
        e.choose_victims(&pending("b", H, 4), &jobs, &free, &l, NOW),
        Some(vec![3, 2])
    );
}

#[test]
fn multi_node_preemptor_picks_the_cheapest_nodes() {
    let e = pair();
    let n0 = [NodeGpus { node: 0, gpus: 4 }];
    let n1 = [NodeGpus { node: 1, gpus: 2 }, NodeGpus { node: 2, gpus: 2 }];
    let jobs = [
        running(1, "a", H, 2 * H, &n0),
        running(2, "a", H, 2 * H, &n1),
    ];
    let free = [
        NodeGpus { node: 0, gpus: 0 },
        NodeGpus { node: 1, gpus: 2 },
        NodeGpus { node: 2, gpus: 2 },
    ];
    let p = Preemptor {
        nodes: 2,
        gpus_per_node: 4,
        rate: 8000,
        ..pending("b", H, 4)
    };
    let l = load(&e, 16, &[("a", 16, 0), ("b", 0, 8)]);
    // Job 2 spans nodes 1 and 2: one victim frees both.
    assert_eq!(e.choose_victims(&p, &jobs, &free, &l, NOW), Some(vec![2]));
}

/// A random cluster state: nodes of 8 GPUs, 2-10 teams with shares 0-5,
/// running jobs (team, GPUs, minimum runtime, ran for, short, free tier) and
/// pending jobs (team, GPUs, short).
#[derive(Debug, Clone)]
struct State {
    /// `[contract] requeue_period` and `requeue_window` (0 = off).
    points: (u64, u64),
    shares: Vec<u32>,
    nodes: u32,
    running: Vec<(usize, u32, u64, u64, bool, bool)>,
    pending: Vec<(usize, u32, bool)>,
}

fn state() -> impl Strategy<Value = State> {
    (2usize..=10, 1u32..=4).prop_flat_map(|(teams, nodes)| {
        let shares = prop::collection::vec(0u32..=5, teams)
            .prop_filter("a positive share", |s| s.iter().any(|&x| x > 0));
        let run = prop::collection::vec(
            (
                0..teams,
                prop_oneof![Just(1u32), Just(2), Just(4), Just(8)],
                prop_oneof![Just(H), Just(4 * H)],
                0u64..6 * H,
                prop::bool::weighted(0.1),
                prop::bool::weighted(0.1),
            ),
            0..24,
        );
        let pend = prop::collection::vec(
            (
                0..teams,
                prop_oneof![Just(1u32), Just(2), Just(4), Just(8)],
                prop::bool::weighted(0.2),
            ),
            1..24,
        );
        let points = prop_oneof![Just((0, 0)), Just((1800, 300)), Just((H, 600))];
        (points, shares, Just(nodes), run, pend).prop_map(
            |(points, shares, nodes, running, pending)| State {
                points,
                shares,
                nodes,
                running,
                pending,
            },
        )
    })
}

/// A running job of the replay: (id, team, alloc, minimum runtime, ran for,
/// short, free tier).
type Held = (u64, usize, Vec<NodeGpus>, u64, u64, bool, bool);

pub(super) const NAMES: [&str; 10] = ["t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9"];

/// Replays one scheduling pass over `s` without time passing: pending jobs
/// in order, each starting where it fits or preempting. Checks every
/// decision and returns the (preemptor team, victim team, short preemptor,
/// victim's leaf left below its entitlement) moves of allocated victims.
fn replay(s: &State) -> Result<Vec<(usize, usize, bool, bool)>, TestCaseError> {
    let specs: Vec<NodeSpec> = s
        .shares
        .iter()
        .enumerate()
        .map(|(i, &x)| NodeSpec::leaf(NAMES[i], x))
        .collect();
    let points = crate::contract::RequeuePoints {
        period: s.points.0,
        window: s.points.1,
    };
    let e = engine_with(Tree::build(&specs).unwrap(), points);
    let teams = s.shares.len();
    let mut free = vec![8u32; s.nodes as usize];
    let mut run: Vec<Held> = Vec::new();
    for (i, &(t, g, min, ran, short, free_tier)) in s.running.iter().enumerate() {
        if let Some(n) = free.iter().position(|&f| f >= g) {
            free[n] -= g;
            let min = if free_tier { 0 } else { min };
            run.push((
                i as u64,
                t,
                vec![NodeGpus {
                    node: n as u32,
                    gpus: g,
                }],
                min,
                ran,
                short && !free_tier,
                free_tier,
            ));
        }
    }
    // (team, GPUs, short, free tier)
    let mut pend: Vec<(usize, u32, bool, bool)> = s
        .pending
        .iter()
        .map(|&(t, g, sh)| (t, g, sh, false))
        .collect();
    // Jobs tried that could neither start nor preempt: still waiting, so
    // still demand (a job leaving the queue would change entitlements).
    let mut waiting: Vec<(usize, u32, bool, bool)> = Vec::new();
    let mut moves = Vec::new();
    let mut next_id = 1000u64;
    let mut potential: Option<(i64, u64)> = None;
    let mut steps = 0;
    while let Some(k) = (0..pend.len()).next() {
        steps += 1;
        prop_assert!(steps < 10_000, "no end");
        let (t, g, short, free_tier) = pend.remove(k);
        let (mut r_run, mut r_pend) = (vec![0u64; teams], vec![0u64; teams]);
        for j in &run {
            if !j.6 {
                r_run[j.1] += j.2.iter().map(|a| u64::from(a.gpus)).sum::<u64>();
            }
        }
        for &(pt, pg, _, f) in pend
            .iter()
            .chain(&waiting)
            .chain([(t, g, short, free_tier)].iter())
        {
            if !f {
                r_pend[pt] += u64::from(pg);
            }
        }
        let load = Entitlements::compute(e.tree(), 8 * u64::from(s.nodes), &r_run, &r_pend);
        // The termination quantity (super::verdict): every preemption of an
        // allocated job uses one of its requeues; here a victim restarts
        // inside its contract, so the allocated jobs no contract protects
        // count what is left.
        let exposed = run.iter().filter(|j| !j.6 && j.4 >= j.3).count() as i64;
        let allocated: u64 = r_run.iter().sum();
        let now_potential = (-exposed, allocated);
        if let Some(before) = potential {
            prop_assert!(
                now_potential >= before,
                "potential went down without an arrival"
            );
        }
        let jobs: Vec<RunningJob<'_>> = run
            .iter()
            .map(|j| RunningJob {
                id: j.0,
                account: NAMES[j.1],
                contract: Contract {
                    min_runtime: j.3,
                    clock: RunClock::started(NOW - j.4),
                },
                alloc: &j.2,
                requeue: true,
                short: j.5,
                requeues: 0,
            })
            .collect();
        let frees: Vec<NodeGpus> = free
            .iter()
            .enumerate()
            .map(|(n, &f)| NodeGpus {
                node: n as u32,
                gpus: f,
            })
            .collect();
        let p = Preemptor {
            short: short && !free_tier,
            ..pending(NAMES[t], if free_tier { 0 } else { H }, g)
        };
        let Some(victims) = e.choose_victims(&p, &jobs, &frees, &load, NOW) else {
            // No preemption without a fit: nothing is changed.
            waiting.push((t, g, short, free_tier));
            continue;
        };
        // Every victim allowed alone, unprotected; the set fits and is minimal.
        let mut nfree = free.clone();
        for v in &victims {
            let j = jobs.iter().find(|j| j.id == *v).unwrap();
            prop_assert!(!crate::contract::protected(&j.contract, NOW));
            // An allocated victim is at a requeue point.
            prop_assert!(
                j.contract.min_runtime == 0 || points.open(j.contract.clock.run_time(NOW))
            );
            // A team's own debug work is never traded.
            prop_assert!(!(j.short && j.contract.min_runtime > 0 && j.account == p.account));
            prop_assert_eq!(e.preempt_verdict(&p, j, &load, NOW), Verdict::Allowed);
            for a in j.alloc {
                nfree[a.node as usize] += a.gpus;
            }
        }
        let node = nfree.iter().position(|&f| f >= g);
        prop_assert!(node.is_some(), "victims make it fit");
        for skip in 0..victims.len() {
            let mut f2 = free.clone();
            for (i, v) in victims.iter().enumerate() {
                if i != skip {
                    for a in jobs.iter().find(|j| j.id == *v).unwrap().alloc {
                        f2[a.node as usize] += a.gpus;
                    }
                }
            }
            prop_assert!(
                f2.iter().all(|&f| f < g),
                "minimal: one victim fewer would fit"
            );
        }
        // Apply: victims go back to the queue, the preemptor starts.
        drop(jobs);
        let first_move = moves.len();
        for v in &victims {
            let i = run.iter().position(|j| j.0 == *v).unwrap();
            let j = run.remove(i);
            if !j.6 {
                moves.push((t, j.1, short, false));
            }
            pend.push((j.1, j.2.iter().map(|a| a.gpus).sum(), j.5, j.6));
        }
        free = nfree;
        let n = node.unwrap();
        free[n] -= g;
        // Newly started jobs are inside their contract: protected.
        let min = if free_tier { 0 } else { H };
        run.push((
            next_id,
            t,
            vec![NodeGpus {
                node: n as u32,
                gpus: g,
            }],
            min,
            0,
            short && !free_tier,
            free_tier,
        ));
        next_id += 1;
        if !victims.is_empty() {
            // Recompute the potential after the move (demand is unchanged).
            let (mut a_run, mut a_pend) = (vec![0u64; teams], vec![0u64; teams]);
            for j in &run {
                if !j.6 {
                    a_run[j.1] += j.2.iter().map(|a| u64::from(a.gpus)).sum::<u64>();
                }
            }
            for &(pt, pg, _, f) in pend.iter().chain(&waiting) {
                if !f {
                    a_pend[pt] += u64::from(pg);
                }
            }
            let after = Entitlements::compute(e.tree(), 8 * u64::from(s.nodes), &a_run, &a_pend);
            let after_potential = (
                -(run.iter().filter(|j| !j.6 && j.4 >= j.3).count() as i64),
                a_run.iter().sum::<u64>(),
            );
            prop_assert!(
                after_potential > now_potential,
                "a preemption must raise (-exposed, allocated)"
            );
            // Between teams, a preemption of allocated work raises the
            // covered entitlement: GPUs move only towards a team below its
            // entitlement (no ping-pong).
            let cross = moves[first_move..].iter().any(|m| m.1 != t);
            if cross {
                prop_assert!(after.covered() > load.covered() - 1e-9);
            }
            // Whether each victim's leaf was pushed below its entitlement.
            for m in &mut moves[first_move..] {
                let l = e.tree().leaf_of_account(NAMES[m.1]).unwrap();
                m.3 = after.below(l);
            }
            potential = Some(after_potential);
        } else {
            potential = None;
        }
        if pend.len() > 200 {
            break;
        }
    }
    Ok(moves)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Random 2-10 team clusters: every preemption is allowed, unprotected,
    /// sufficient and minimal, raises the termination quantity, the pass
    /// ends, and no team that preempted another is preempted back by it
    /// unless a short job moved GPUs in between or a preemption pushed the
    /// victim's leaf below its entitlement (allowed only when the
    /// preemptor covered at least twice as much; the answer raises
    /// `covered` again, checked above).
    #[test]
    fn preemption_terminates_and_never_reverses(s in state()) {
        let moves = replay(&s)?;
        for (i, &(a, b, short_i, pushed_below)) in moves.iter().enumerate() {
            if a == b || short_i || pushed_below {
                continue;
            }
            for (j, &(c, d, short_j, _)) in moves.iter().enumerate().skip(i + 1) {
                let between = &moves[i + 1..j];
                let short_between = between.iter().any(|m| m.2);
                let b_pushed_below = between.iter().any(|m| m.1 == b && m.3);
                if (c, d) == (b, a) && !short_j && !short_between && !b_pushed_below {
                    prop_assert!(false, "{a} preempted {b}, then {b} preempted {a}: {moves:?}");
                }
            }
        }
    }
}

/// The preempt plugin asks about one candidate at a time: beside a tally,
/// two jobs of a leaf that may lose one's GPUs are not both allowed, while
/// each alone is (what slurmctld then did: an 8-GPU job took both).
#[test]
fn candidates_judged_one_at_a_time_keep_the_bound_together() {
    let e = pair();
    // a holds 12 of 16 in three 4-GPU jobs, two on node 0; b holds none
    // and asks 8: each is entitled to 8, a's surplus is 4.
    let on = |node| [NodeGpus { node, gpus: 4 }];
    let (n0, n1) = (on(0), on(1));
    let jobs = [
        running(1, "a", H, 2 * H, &n0),
        running(2, "a", H, 2 * H, &n0),
        running(3, "a", H, 2 * H, &n1),
    ];
    let l = load(&e, 16, &[("a", 12, 0), ("b", 0, 8)]);
    assert_eq!(e.surplus_of(&l, "a"), 4);
    // An 8-GPU job of b covers 8, so a may uncover less than 4: one job (4
    // GPUs, all above a's entitlement) uncovers nothing, two uncover 4.
    let p = pending("b", H, 8);
    for r in &jobs {
        assert_eq!(e.preempt_verdict(&p, r, &l, NOW), Verdict::Allowed);
    }
    let mut tally = VictimTally::default();
    let verdicts: Vec<Verdict> = jobs
        .iter()
        .map(|r| e.preempt_verdict_tallied(&p, r, 4, &mut tally, &l, NOW))
        .collect();
    assert_eq!(verdicts[0], Verdict::Allowed);
    for v in &verdicts[1..] {
        assert!(matches!(v, Verdict::PreempteeAtEntitlement { .. }), "{v:?}");
    }
    // The set rule agrees: jobs 1 and 2 would fit it on node 0 but may not
    // go together; with 4 GPUs free beside job 3, job 3 alone goes.
    let free = |f| [NodeGpus { node: 0, gpus: 0 }, NodeGpus { node: 1, gpus: f }];
    assert_eq!(e.choose_victims(&p, &jobs, &free(0), &l, NOW), None);
    assert_eq!(
        e.choose_victims(&p, &jobs, &free(4), &l, NOW),
        Some(vec![3])
    );
    // A new round starts from nothing.
    tally.clear();
    assert_eq!(
        e.preempt_verdict_tallied(&p, &jobs[1], 4, &mut tally, &l, NOW),
        Verdict::Allowed
    );
}
