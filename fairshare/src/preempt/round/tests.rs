use super::*;
use crate::preempt::tests::{load, pair, pending, running, NOW};
use crate::preempt::NodeGpus;

const H: u64 = 3600;
const N0: &[NodeGpus] = &[NodeGpus { node: 0, gpus: 4 }];
const N1: &[NodeGpus] = &[NodeGpus { node: 1, gpus: 4 }];

/// a holds all 16 GPUs of two 8-GPU nodes in four 4-GPU jobs past their
/// contract (1 and 2 on n0, 3 and 4 on n1); b wants 8: each is entitled
/// to 8. For b's 8-GPU preemptor a may lose 8 (down to its entitlement)
/// plus less than half of the 8 b gains: 11 GPUs, so two 4-GPU jobs.
fn a_holds_everything(e: &Engine) -> (Entitlements, Vec<(u64, RunningJob<'static>, &'static str)>) {
    let l = load(e, 16, &[("a", 16, 0), ("b", 0, 8)]);
    let jobs = [(1, N0, "n0"), (3, N1, "n1"), (2, N0, "n0"), (4, N1, "n1")]
        .into_iter()
        .map(|(id, alloc, node)| (id, running(id, "a", H, 2 * H, alloc), node))
        .collect();
    (l, jobs)
}

#[test]
fn a_one_node_preemptor_counts_each_nodes_victims_apart() {
    let e = pair();
    let (l, jobs) = a_holds_everything(&e);
    let p = pending("b", H, 8);
    let mut round = Round::default();
    // Asked round-robin over the nodes: each node's two jobs fit the bound
    // on their own, and the preemptor starts on one node only.
    let v: Vec<Verdict> = jobs
        .iter()
        .map(|(id, r, node)| {
            round.ask(*id);
            round.decide(&e, &p, r, 4, Some(node), &l, NOW).verdict
        })
        .collect();
    assert_eq!(v, [Verdict::Allowed; 4]);
    // A third job on n0 would take a beyond the bound there.
    let extra = running(5, "a", H, 2 * H, N0);
    round.ask(5);
    assert!(matches!(
        round.decide(&e, &p, &extra, 4, Some("n0"), &l, NOW).verdict,
        Verdict::PreempteeAtEntitlement { .. }
    ));
    // A job spanning both nodes is judged beside each node's victims.
    let span = running(6, "a", H, 2 * H, N0);
    round.ask(6);
    assert!(matches!(
        round
            .decide(&e, &p, &span, 4, Some("n[0-1]"), &l, NOW)
            .verdict,
        Verdict::PreempteeAtEntitlement { .. }
    ));
}

#[test]
fn a_preemptor_of_several_nodes_counts_every_victim_together() {
    let e = pair();
    let (l, jobs) = a_holds_everything(&e);
    let p = fairshare_two_nodes(pending("b", H, 4));
    let mut round = Round::default();
    let mut v = Vec::new();
    for (id, r, node) in &jobs {
        round.ask(*id);
        v.push(round.decide(&e, &p, r, 4, Some(node), &l, NOW).verdict == Verdict::Allowed);
    }
    assert_eq!(v, [true, true, false, false]);
    // Job 1 asked again: slurmctld started a new round, the tally is gone.
    round.ask(1);
    assert_eq!(
        round
            .decide(&e, &p, &jobs[0].1, 4, Some("n0"), &l, NOW)
            .verdict,
        Verdict::Allowed
    );
}

fn fairshare_two_nodes(mut p: Preemptor<'_>) -> Preemptor<'_> {
    p.nodes = 2;
    p
}

#[test]
fn scope_reads_the_node_list() {
    assert_eq!(Scope::of(2, Some("gpu01")), Scope::All);
    assert_eq!(Scope::of(1, Some("gpu01")), Scope::Node("gpu01"));
    assert_eq!(Scope::of(1, Some("gpu[01-02]")), Scope::Spanning);
    assert_eq!(Scope::of(1, Some("gpu01,gpu02")), Scope::Spanning);
    assert_eq!(Scope::of(1, None), Scope::Spanning);
}

/// `r` (job 1) as a 4-GPU candidate on node n0.
fn on_n0<'a, 'r>(r: &'r RunningJob<'a>) -> Candidate<'a, 'r> {
    Candidate {
        id: 1,
        job: r,
        gpus: 4,
        nodes: Some("n0"),
    }
}

#[test]
fn an_allowed_preemptor_counts_on_its_leaf_until_the_next_count() {
    let e = pair();
    let mut rounds = Rounds::default();
    let r = running(1, "a", H, 2 * H, N0);
    let c = on_n0(&r);
    rounds.enter(100, 7);
    assert_eq!(
        rounds
            .judge(&e, 100, &pending("b", H, 4), 4, c, NOW)
            .map(|j| j.0),
        None,
        "no load yet"
    );
    rounds.set_load(load(&e, 16, &[("a", 16, 0), ("b", 0, 8)]));
    // Two 4-GPU preemptors of b fill its entitlement of 8 ...
    for id in [100, 101] {
        rounds.enter(id, 7);
        let v = rounds
            .judge(&e, id, &pending("b", H, 4), 4, c, NOW)
            .map(|j| j.0);
        assert_eq!(v, Some(Verdict::Allowed), "preemptor {id}");
    }
    // ... so a third is served, while the first, asked again, is judged
    // without its own move.
    rounds.enter(102, 7);
    assert_eq!(
        rounds
            .judge(&e, 102, &pending("b", H, 4), 4, c, NOW)
            .map(|j| j.0),
        Some(Verdict::PreemptorServed {
            running: 8,
            entitled: 8.0
        })
    );
    rounds.enter(100, 7);
    assert_eq!(
        rounds
            .judge(&e, 100, &pending("b", H, 4), 4, c, NOW)
            .map(|j| j.0),
        Some(Verdict::Allowed)
    );
    // A fresh count has the preemptors in it (here: not yet running).
    rounds.set_load(load(&e, 16, &[("a", 16, 0), ("b", 0, 8)]));
    rounds.enter(102, 7);
    assert_eq!(
        rounds
            .judge(&e, 102, &pending("b", H, 4), 4, c, NOW)
            .map(|j| j.0),
        Some(Verdict::Allowed)
    );
}

#[test]
fn an_allowed_candidate_comes_with_its_grounds_on_the_load_it_was_judged_on() {
    let e = pair();
    let mut rounds = Rounds::default();
    let r = running(1, "a", H, 2 * H, N0);
    let c = on_n0(&r);
    rounds.set_load(load(&e, 16, &[("a", 16, 0), ("b", 0, 8)]));
    rounds.enter(100, 7);
    let (v, g) = rounds
        .judge(&e, 100, &pending("b", H, 4), 4, c, NOW)
        .unwrap();
    assert_eq!(v, Verdict::Allowed);
    let g = g.expect("grounds of an allowed candidate");
    assert_eq!(g.rule, crate::preempt::Rule::NetGain);
    assert_eq!(
        (g.preemptor_leaf.running, g.preemptor_leaf.entitled),
        (0, 8.0)
    );
    assert_eq!(g.victim_leaf.as_ref().map(|l| l.running), Some(16));
    assert_eq!((g.gain, g.allowance, g.lost), (4.0, Some(2.0), 0.0));
    // Asked again, the preemptor is judged without its own move: the same
    // figures. A young candidate is refused, without grounds.
    rounds.enter(100, 7);
    let (_, again) = rounds
        .judge(&e, 100, &pending("b", H, 4), 4, c, NOW)
        .unwrap();
    assert_eq!(again.map(|g| g.preemptor_leaf.running), Some(0));
    let young = running(2, "a", H, 60, N0);
    let c = Candidate {
        id: 2,
        job: &young,
        ..c
    };
    let (v, g) = rounds
        .judge(&e, 100, &pending("b", H, 4), 4, c, NOW)
        .unwrap();
    assert!(matches!(v, Verdict::Protected { .. }));
    assert_eq!(g, None);
}
