//! The requeue bound and debug work in the verdict (rules 3 and 4 of
//! [`super`]): a job that used its requeues is left alone, debug work of a
//! team above its entitlement takes nothing of other teams, and over
//! rounds with arrivals no job is requeued more than `max_requeues` times.

use std::sync::Arc;

use proptest::prelude::*;

use crate::config::Config;
use crate::contract::{Contract, RunClock};
use crate::engine::Engine;
use crate::entitlement::Entitlements;
use crate::preempt::tests::{load, pair, pending, running, NAMES, NOW};
use crate::preempt::{NodeGpus, Preemptor, RunningJob, Verdict};
use crate::tree::{NodeSpec, Tree};

const H: u64 = 3600;
const ONE: &[NodeGpus] = &[NodeGpus { node: 0, gpus: 1 }];

#[test]
fn a_job_that_used_its_requeues_runs_to_its_end() {
    let e = pair();
    let l = load(&e, 8, &[("a", 8, 0), ("b", 0, 4)]);
    let p = pending("b", H, 1);
    let mut r = running(1, "a", H, 2 * H, ONE);
    r.requeues = 2;
    assert_eq!(e.preempt_verdict(&p, &r, &l, NOW), Verdict::Allowed);
    r.requeues = 3;
    assert_eq!(
        e.preempt_verdict(&p, &r, &l, NOW),
        Verdict::RequeuesUsed { requeues: 3 }
    );
    // The free tier is never exempt: it is charged nothing.
    let mut free = running(2, "a", 0, 2 * H, ONE);
    free.requeues = 9;
    assert_eq!(e.preempt_verdict(&p, &free, &l, NOW), Verdict::Allowed);
}

#[test]
fn debug_work_of_a_team_above_its_entitlement_takes_nothing_of_others() {
    let e = pair();
    // a holds 5 of its 4 and wants more; b holds 1 of its 4. a's debug job
    // may not take b's GPUs; its own leaf's batch work it may.
    let l = load(&e, 8, &[("a", 5, 2), ("b", 1, 3)]);
    let p = Preemptor {
        short: true,
        ..pending("a", H, 1)
    };
    let b = running(1, "b", H, 2 * H, ONE);
    assert!(matches!(
        e.preempt_verdict(&p, &b, &l, NOW),
        Verdict::PreemptorServed { .. }
    ));
    let own = running(2, "a", H, 2 * H, ONE);
    assert_eq!(e.preempt_verdict(&p, &own, &l, NOW), Verdict::Allowed);
}

/// A job of the multi-round replay below: team, GPUs, short, requeues.
type Queued = (usize, u32, bool, u32);

fn rounds_state() -> impl Strategy<Value = (Vec<u32>, u32, u32, Vec<Vec<Queued>>)> {
    (2usize..5).prop_flat_map(|teams| {
        let arrivals = prop::collection::vec(
            prop::collection::vec(
                (
                    0..teams,
                    prop_oneof![Just(1u32), Just(2), Just(4), Just(8)],
                    prop::bool::weighted(0.2),
                    Just(0u32),
                ),
                0..6,
            ),
            1..30,
        );
        (
            prop::collection::vec(1u32..5, teams),
            1u32..4,
            0u32..5,
            arrivals,
        )
    })
}

proptest! {
    /// Rounds of scheduling with time passing between them (every job past
    /// its contract at the next round) and arrivals: no allocated job is
    /// ever requeued by preemption more than `max_requeues` times, and
    /// every round's preemptions end.
    #[test]
    fn no_job_is_requeued_more_than_max_requeues_times(
        (shares, nodes, max, arrivals) in rounds_state(),
    ) {
        let specs: Vec<NodeSpec> = shares
            .iter()
            .enumerate()
            .map(|(i, &x)| NodeSpec::leaf(NAMES[i], x))
            .collect();
        let mut config = Config::with_tree(Tree::build(&specs).unwrap());
        config.priority.short_max_gpus = 2;
        config.contract.max_requeues = max;
        let e = Engine::new(Arc::new(config), Vec::new(), NOW);
        let teams = shares.len();
        let mut free = vec![8u32; nodes as usize];
        // (id, queued job, node)
        let mut run: Vec<(u64, Queued, u32)> = Vec::new();
        let mut queue: Vec<(u64, Queued)> = Vec::new();
        let mut next = 0u64;
        for batch in &arrivals {
            for &q in batch {
                queue.push((next, q));
                next += 1;
            }
            let mut steps = 0;
            let mut waiting = Vec::new();
            while let Some((id, q)) = queue.pop() {
                steps += 1;
                prop_assert!(steps < 2_000, "a round without end");
                let (mut r_run, mut r_pend) = (vec![0u64; teams], vec![0u64; teams]);
                for (_, j, _) in &run {
                    r_run[j.0] += u64::from(j.1);
                }
                for (_, j) in queue.iter().chain(&waiting).chain([(id, q)].iter()) {
                    r_pend[j.0] += u64::from(j.1);
                }
                let load = Entitlements::compute(e.tree(), 8 * u64::from(nodes), &r_run, &r_pend);
                let allocs: Vec<[NodeGpus; 1]> = run
                    .iter()
                    .map(|(_, j, n)| [NodeGpus { node: *n, gpus: j.1 }])
                    .collect();
                let jobs: Vec<RunningJob<'_>> = run
                    .iter()
                    .zip(&allocs)
                    .map(|((rid, j, _), a)| RunningJob {
                        id: *rid,
                        account: NAMES[j.0],
                        // Started last round: past its contract now.
                        contract: Contract { min_runtime: H, clock: RunClock::started(NOW - 2 * H) },
                        alloc: a,
                        requeue: true,
                        short: j.2,
                        requeues: j.3,
                    })
                    .collect();
                let frees: Vec<NodeGpus> = free
                    .iter()
                    .enumerate()
                    .map(|(n, &f)| NodeGpus { node: n as u32, gpus: f })
                    .collect();
                let p = Preemptor { short: q.2, ..pending(NAMES[q.0], H, q.1) };
                let Some(victims) = e.choose_victims(&p, &jobs, &frees, &load, NOW) else {
                    waiting.push((id, q));
                    continue;
                };
                drop(jobs);
                for v in victims {
                    let i = run.iter().position(|r| r.0 == v).unwrap();
                    let (vid, mut vj, vn) = run.remove(i);
                    prop_assert!(vj.3 < max, "job {} requeued a {}th time (max {})", vid, vj.3 + 1, max);
                    vj.3 += 1;
                    free[vn as usize] += vj.1;
                    waiting.push((vid, vj));
                }
                let n = free.iter().position(|&f| f >= q.1);
                prop_assert!(n.is_some(), "the victims make it fit");
                let n = n.unwrap();
                free[n] -= q.1;
                run.push((id, q, n as u32));
            }
            queue = waiting;
        }
    }
}
