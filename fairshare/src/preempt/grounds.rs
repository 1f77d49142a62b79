//! Why an allowed preemption was allowed: the clause of the rules of
//! [`super::verdict`] that let it through, and the figures it was judged
//! on. preempt/allot records these for every preemption slurmctld carries
//! out, and `allot explain` shows them for the victim's attempt.
//!
//! # The clauses ([`Rule`]), in the order [`Engine::decide_beside`] tries them
//! 1. [`Rule::FreeTier`]: the victim is unallocated (minimum runtime 0),
//!    past its protection; any allocated job may take it, its own
//!    account's included.
//! 2. [`Rule::ShortOwnLeaf`]: debug work took an allocated batch job of
//!    its own account or leaf with two requeues left or more: the leaf
//!    trades batch work for debug work inside what it holds.
//! 3. [`Rule::VictimNotInTree`]: the victim's account is not in the tree,
//!    so it is entitled to nothing and loses no covered entitlement.
//! 4. [`Rule::NetGain`]: the net rule. The preemptor's leaf holds fewer
//!    GPUs than its entitlement, and the victims' leaves lose together
//!    strictly less covered entitlement than [`super::UNCOVER_FRACTION`]
//!    of what the preemptor's leaf gains ([`Grounds::lost`] <
//!    [`Grounds::allowance`]).
//!
//! Every clause also needs rules 1-3 and the requeue point of rule 4
//! (the victim past its minimum runtime, at a requeue point, with
//! requeues left): [`VictimFigures`] holds what they were judged on.

use serde::{Deserialize, Serialize};

use super::{Preemptor, RunningJob};
use crate::engine::Engine;
use crate::entitlement::Entitlements;
use crate::tree::LeafId;

/// The clause that allowed a preemption (module doc). Stored by name
/// (`free_tier`, `short_own_leaf`, `victim_not_in_tree`, `short_slack`,
/// `net_gain`) in preempt/allot's record and the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// The victim is a free-tier job.
    FreeTier,
    /// Debug work took a batch job of its own account or leaf.
    ShortOwnLeaf,
    /// The victim's account is not in the tree.
    VictimNotInTree,
    /// Earlier releases only (the debug lane, now gone): a short preemptor
    /// took a job of a leaf left at most `short_max_gpus` below its
    /// entitlement. Kept so that old records still read.
    ShortSlack,
    /// The net rule: the preemptor's leaf is below its entitlement and the
    /// victims' leaves lose less than half of what it gains.
    NetGain,
}

impl Rule {
    /// Every clause, in the order they are tried.
    pub const ALL: [Rule; 5] = [
        Rule::FreeTier,
        Rule::ShortOwnLeaf,
        Rule::VictimNotInTree,
        Rule::ShortSlack,
        Rule::NetGain,
    ];

    /// The stored name (`net_gain`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::FreeTier => "free_tier",
            Rule::ShortOwnLeaf => "short_own_leaf",
            Rule::VictimNotInTree => "victim_not_in_tree",
            Rule::ShortSlack => "short_slack",
            Rule::NetGain => "net_gain",
        }
    }

    /// The clause in words, for `allot explain`.
    pub fn describe(self) -> &'static str {
        match self {
            Rule::FreeTier => "the victim was a free-tier job (minimum runtime 0)",
            Rule::ShortOwnLeaf => "debug work took a batch job of its own leaf past its contract",
            Rule::VictimNotInTree => "the victim's account is not in the tree",
            Rule::ShortSlack => {
                "(earlier releases) a short job took a job of a leaf left at most short_max_gpus below its entitlement"
            }
            Rule::NetGain => {
                "the preemptor's leaf was below its entitlement and the victims' leaves lost less than half of what it gained"
            }
        }
    }
}

/// A leaf's load when the preemption was judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeafFigures {
    /// The leaf's dotted path (`tree.nlp.a1`).
    pub leaf: String,
    /// GPUs its allocated jobs held (the preemptor's own leaf: without the
    /// preemptor).
    pub running: u64,
    /// GPUs it was entitled to (real-valued).
    pub entitled: f64,
}

/// The victim's contract when the preemption was judged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VictimFigures {
    /// GPUs it held.
    pub gpus: u64,
    /// Its minimum runtime, seconds (0 = free tier).
    pub min_runtime: u64,
    /// Seconds it had run (suspended time excluded).
    pub run_time: u64,
    /// Times it had been requeued before.
    pub requeues: u32,
    /// `[contract] max_requeues`.
    pub max_requeues: u32,
    /// `[contract] requeue_period`, seconds (0: any second past the
    /// minimum runtime is a requeue point).
    pub requeue_period: u64,
    /// `[contract] requeue_window`, seconds.
    pub requeue_window: u64,
}

/// The clause and the figures behind an allowed preemption (module doc).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Grounds {
    /// The clause.
    pub rule: Rule,
    /// GPUs the preemptor asked for.
    pub preemptor_gpus: u64,
    /// True when the preemptor was debug work.
    pub preemptor_short: bool,
    /// The preemptor's leaf.
    pub preemptor_leaf: LeafFigures,
    /// The victim's leaf; `None` when its account is not in the tree.
    pub victim_leaf: Option<LeafFigures>,
    /// Covered entitlement (GPUs) the preemptor's leaf gains by starting
    /// ([`Engine::gain`]).
    pub gain: f64,
    /// Covered entitlement (GPUs) the victims' leaves lose together with
    /// this victim beside those already allowed in its round (net rule; 0
    /// for the other clauses).
    pub lost: f64,
    /// What they had to lose strictly less than (net rule:
    /// [`super::UNCOVER_FRACTION`] of [`Grounds::gain`]); `None` for the
    /// other clauses.
    pub allowance: Option<f64>,
    /// The victim's contract.
    pub victim: VictimFigures,
}

impl Grounds {
    /// Figures for tests and fixtures: `rule` let a 4-GPU preemptor of
    /// `preemptor_leaf` (holding 0 of 8 GPUs entitled) take a 4-GPU victim
    /// of `victim_leaf` (16 of 8) that ran 2 h of its 1 h minimum runtime,
    /// never requeued before (at most 3), gain 4, loss 0, allowance 2.
    #[doc(hidden)]
    pub fn example(rule: Rule, preemptor_leaf: &str, victim_leaf: &str) -> Grounds {
        Grounds {
            rule,
            preemptor_gpus: 4,
            preemptor_short: false,
            preemptor_leaf: LeafFigures {
                leaf: preemptor_leaf.into(),
                running: 0,
                entitled: 8.0,
            },
            victim_leaf: Some(LeafFigures {
                leaf: victim_leaf.into(),
                running: 16,
                entitled: 8.0,
            }),
            gain: 4.0,
            lost: 0.0,
            allowance: Some(2.0),
            victim: VictimFigures {
                gpus: 4,
                min_runtime: 3600,
                run_time: 7200,
                requeues: 0,
                max_requeues: 3,
                requeue_period: 0,
                requeue_window: 0,
            },
        }
    }
}

/// What [`Engine::decide_beside`] found: the verdict, the leaf whose tally
/// an allowed victim joins, the clause that allowed it and the covered
/// entitlement the victims' leaves lose with it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    /// The verdict.
    pub verdict: super::Verdict,
    /// The leaf whose tally it joins if allowed (an allocated job of
    /// another leaf; `None` for one that costs no entitlement).
    pub charged: Option<LeafId>,
    /// The clause that allowed it; `None` unless allowed.
    pub rule: Option<Rule>,
    /// Covered entitlement (GPUs) the victims' leaves lose together (net
    /// rule; 0 otherwise).
    pub lost: f64,
}

impl Decision {
    /// A refusal, or an allowance that charges no leaf (`rule` set).
    pub(super) fn plain(verdict: super::Verdict, rule: Option<Rule>) -> Decision {
        Decision {
            verdict,
            charged: None,
            rule,
            lost: 0.0,
        }
    }
}

impl Engine {
    fn leaf_figures(&self, leaf: LeafId, load: &Entitlements) -> LeafFigures {
        LeafFigures {
            leaf: self.tree().node(self.tree().leaf_node(leaf)).path.clone(),
            running: load.running(leaf),
            entitled: load.entitled(leaf),
        }
    }

    /// The grounds of a preemption of `r` (holding `gpus` GPUs) by `p`
    /// that `rule` allowed at `now` (epoch seconds) on `load`, with `lost`
    /// the covered entitlement its victims' leaves lose together ([`Decision`]).
    /// `None` when `p`'s account is not in the tree (no clause allows that).
    #[allow(clippy::too_many_arguments)]
    pub fn grounds(
        &self,
        rule: Rule,
        lost: f64,
        p: &Preemptor<'_>,
        r: &RunningJob<'_>,
        gpus: u64,
        load: &Entitlements,
        now: u64,
    ) -> Option<Grounds> {
        let pl = self.leaf_of(p.account)?;
        let contract = &self.config().contract;
        Some(Grounds {
            rule,
            preemptor_gpus: u64::from(p.nodes) * u64::from(p.gpus_per_node),
            preemptor_short: p.short,
            preemptor_leaf: self.leaf_figures(pl, load),
            victim_leaf: self.leaf_of(r.account).map(|l| self.leaf_figures(l, load)),
            gain: self.gain(p, load),
            lost,
            allowance: (rule == Rule::NetGain).then(|| self.allowance(p, load)),
            victim: VictimFigures {
                gpus,
                min_runtime: r.contract.min_runtime,
                run_time: r.contract.clock.run_time(now),
                requeues: r.requeues,
                max_requeues: contract.max_requeues,
                requeue_period: contract.requeue.period,
                requeue_window: contract.requeue.window,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preempt::tests::{load, pair, pending, running, NOW};
    use crate::preempt::{NodeGpus, Verdict, VictimTally};

    const H: u64 = 3600;
    const FOUR: &[NodeGpus] = &[NodeGpus { node: 0, gpus: 4 }];

    #[test]
    fn each_clause_is_named_with_its_figures() {
        let e = pair();
        // a holds 12 of 16 GPUs (entitled 8), b 0 and wants 8: b gains 8,
        // may uncover less than 4.
        let l = load(&e, 16, &[("a", 12, 0), ("b", 0, 8)]);
        let p = pending("b", H, 8);
        let past = running(1, "a", H, 2 * H, FOUR);
        let d = e.decide_beside(&p, &past, 4, &VictimTally::default(), &l, NOW);
        assert_eq!(
            (d.verdict, d.rule, d.lost),
            (Verdict::Allowed, Some(Rule::NetGain), 0.0)
        );
        let g = e
            .grounds(Rule::NetGain, d.lost, &p, &past, 4, &l, NOW)
            .unwrap();
        assert_eq!(g.preemptor_leaf.leaf, "tree.b");
        assert_eq!(
            (g.preemptor_leaf.running, g.preemptor_leaf.entitled),
            (0, 8.0)
        );
        let v = g.victim_leaf.as_ref().unwrap();
        assert_eq!(
            (v.leaf.as_str(), v.running, v.entitled),
            ("tree.a", 12, 8.0)
        );
        assert_eq!((g.gain, g.allowance), (8.0, Some(4.0)));
        assert_eq!(
            (g.victim.min_runtime, g.victim.run_time, g.victim.gpus),
            (H, 2 * H, 4)
        );
        // Beside 8 GPUs of a already allowed, 4 more uncover 4: refused.
        let mut tally = VictimTally::default();
        tally.add(e.leaf_of("a").unwrap(), 8);
        let d = e.decide_beside(&p, &past, 4, &tally, &l, NOW);
        assert!(matches!(d.verdict, Verdict::PreempteeAtEntitlement { .. }));
        assert_eq!(d.rule, None);
        // a at 10: 4 GPUs leave it 2 below its entitlement: lost 2 < 4.
        let l10 = load(&e, 16, &[("a", 10, 0), ("b", 0, 8)]);
        let d = e.decide_beside(&p, &past, 4, &VictimTally::default(), &l10, NOW);
        assert_eq!((d.rule, d.lost), (Some(Rule::NetGain), 2.0));

        // A free-tier victim: any allocated job, even of its own account.
        let free = running(2, "a", 0, 60, FOUR);
        let d = e.decide_beside(
            &pending("a", H, 4),
            &free,
            4,
            &VictimTally::default(),
            &l,
            NOW,
        );
        assert_eq!(d.rule, Some(Rule::FreeTier));
        let g = e
            .grounds(Rule::FreeTier, 0.0, &pending("a", H, 4), &free, 4, &l, NOW)
            .unwrap();
        assert_eq!((g.allowance, g.victim.min_runtime), (None, 0));

        // A victim whose account is not in the tree.
        let stray = running(3, "zz", H, 2 * H, FOUR);
        let d = e.decide_beside(&p, &stray, 4, &VictimTally::default(), &l, NOW);
        assert_eq!(d.rule, Some(Rule::VictimNotInTree));
        let g = e
            .grounds(Rule::VictimNotInTree, 0.0, &p, &stray, 4, &l, NOW)
            .unwrap();
        assert_eq!(g.victim_leaf, None);

        // Debug work of a takes a's own batch job past its contract; debug
        // work of b is judged as any job of b (the net rule).
        let l9 = load(&e, 16, &[("a", 9, 0), ("b", 0, 8)]);
        let short = |account| Preemptor {
            short: true,
            ..pending(account, H, 1)
        };
        let d = e.decide_beside(&short("a"), &past, 4, &VictimTally::default(), &l9, NOW);
        assert_eq!(d.rule, Some(Rule::ShortOwnLeaf));
        let d = e.decide_beside(&short("b"), &past, 1, &VictimTally::default(), &l9, NOW);
        assert_eq!(d.verdict, Verdict::Allowed);
        assert_eq!(d.rule, Some(Rule::NetGain));
        let g = e
            .grounds(Rule::ShortOwnLeaf, 0.0, &short("a"), &past, 4, &l9, NOW)
            .unwrap();
        assert!(g.preemptor_short);
        assert_eq!(g.allowance, None);
        // Refusals carry no clause.
        let young = running(4, "a", H, 60, FOUR);
        let d = e.decide_beside(&p, &young, 4, &VictimTally::default(), &l, NOW);
        assert_eq!((d.rule, d.charged), (None, None));
    }

    #[test]
    fn the_stored_names_are_the_serde_names() {
        for r in Rule::ALL {
            let json = serde_json::to_string(&r).unwrap();
            assert_eq!(json, format!("\"{}\"", r.as_str()));
            assert_eq!(serde_json::from_str::<Rule>(&json).unwrap(), r);
        }
    }
}
