//! Who may preempt whom: the verdict for one candidate, and why
//! preemption cannot cycle. The types are [`crate::preempt`]'s; the
//! victim search is [`super::victims`].
//!
//! # May `P` (pending) preempt `R` (running) at `now`? All must hold:
//! 1. `P` is allocated (minimum runtime > 0); free-tier jobs never preempt.
//! 2. `P`'s account is in the tree.
//! 3. `R` is not protected: its running time is at least its minimum runtime
//!    ([`crate::contract::protected`]; equal = preemptible), and, if it is
//!    allocated, it has been requeued fewer than `[contract] max_requeues`
//!    times ([`crate::contract::requeues_used`]: a job that has used its
//!    requeues runs to its end, still charged).
//! 4. Either `R` is unallocated (free tier: preemptible by any allocated
//!    job, its own account's included), or all of:
//!    - `R` is at a requeue point: with `[contract] requeue_period` set, its
//!      running time is in the first `requeue_window` of a period
//!      ([`crate::contract::RequeuePoints`]; a job that checkpoints every
//!      period loses at most the window's work);
//!    - if `R` is of `P`'s own account or leaf: `P` is debug work
//!      ([`crate::priority::PriorityWeights::is_debug`]), `R` is not, and `R`
//!      has two requeues left or more (the team trades its own batch work
//!      for its debug work, never a job's last requeue; [`crate::owed`]
//!      counts these GPUs as room for the team's debug work);
//!    - otherwise: `P`'s leaf holds fewer GPUs than it is entitled to now
//!      ([`crate::entitlement`]: capacity water-filled down the tree against
//!      demand), and the victims' leaves lose less than half the
//!      entitlement `P`'s leaf gains ([`UNCOVER_FRACTION`]): with `cov(l) =
//!      min(running(l), entitled(l))`, `P`'s leaf gains `cov` by `min(P's
//!      GPUs, entitled - running)`, and the drop of `cov` summed over the
//!      leaves of `R` and of every other victim chosen for `P` must be
//!      strictly less than half of that. A leaf loses no `cov` while it
//!      stays at or above its entitlement, so GPUs above a leaf's
//!      entitlement are always available; a leaf may be pushed below its
//!      entitlement only by a job that covers at least twice as much
//!      elsewhere. An account not in the tree is entitled to nothing.
//!
//! No rule reads a job's shape between teams: debug work, sweeps and size
//! give no licence to take another team's GPUs ([`crate::owed`]: shape
//! orders work inside a team only). The sliding-window rank plays no part
//! here either: it orders the queue (who gets idle GPUs). Preemption only
//! moves GPUs to a leaf below its entitlement, and only when the
//! entitlement covered cluster-wide grows, or inside one leaf.
//!
//! # Termination
//! Without an arrival, a completion or a capacity change, only finitely
//! many preemptions can happen, whatever the order of decisions and
//! snapshots. What strictly decreases is `(R, -allocated)`, compared
//! lexicographically, with `R` the requeues left summed over the allocated
//! jobs (`max_requeues - requeues` each, for the jobs present) and
//! `allocated` the GPUs held by allocated jobs:
//! - a preemption with an allocated victim requeues it: its requeues left
//!   fall by one (rule 3 refuses a job with none left, so `R` never goes
//!   below 0), and no preemption gives a job requeues back: `R` strictly
//!   decreases;
//! - a preemption with free-tier victims only leaves `R` as it was and
//!   starts an allocated preemptor in their place: `allocated` strictly
//!   increases, up to the capacity.
//!
//! Normal starts never change `R` and never lower `allocated`. `R` is at
//! most `max_requeues` times the jobs present and `allocated` at most the
//! capacity, so the sequence ends. The same bound holds each job on its
//! own: an allocated job is requeued at most `max_requeues` times by
//! preemption, whatever arrives (the property test checks it). A job that
//! has used its requeues waits to start while its leaf holds its
//! entitlement ([`crate::contract::waits_for_share`]): that removes starts,
//! never adds a preemption.
//!
//! Between teams the rule also never moves GPUs back and forth: every
//! preemption of another leaf's allocated work needs the preemptor's leaf
//! below its entitlement and raises `covered = sum over leaves of
//! min(running, entitled)` (it gains `g > 0` and its victims' leaves lose
//! less than `g / 2`); entitlements depend on capacity and demand only, and
//! a preemption changes neither (the preemptor goes from pending to
//! running, each victim from running to pending). Once a job of leaf `A`
//! has so preempted a job of `B` leaving `B` at or above its entitlement,
//! no job of `B` can preempt one of `A` until a job ends or arrives (it
//! would need `B` below its entitlement). A trade inside a leaf (rule 4)
//! moves nothing between leaves; its victim is never debug work, and it
//! needs two requeues left, so a trade never uses a job's last requeue. The
//! property tests in `preempt/tests.rs` check both; the simulator counts
//! answers within the first preemptor's minimum runtime (`reversals`,
//! docs/simulator.md).
//!

use std::collections::BTreeMap;

use serde::Serialize;

use super::grounds::{Decision, Rule};
use super::{Preemptor, RunningJob};
use crate::contract::{protected, protected_until, requeues_used, Tier};
use crate::engine::Engine;
use crate::entitlement::Entitlements;
use crate::tree::LeafId;

/// Of the entitlement a preemptor's leaf covers by starting, the fraction
/// its victims' leaves may uncover, together and strictly less: 1/2, so
/// every preemption of an allocated job raises `covered` by more than half
/// of what the preemptor gains. Measured on full Philly (docs/simulator.md):
/// 1 (any net gain) delivers 0.3 owed points more and throws away 46% more
/// work; 1/4 and 1/10 leave the worst team at 95.2% and 92.8%; 0 (victims
/// never below their entitlement) leaves 3 of 11 teams under 95%.
pub const UNCOVER_FRACTION: f64 = 0.5;

/// Tolerance (GPUs) of the strict comparison against the allowance, so that
/// rounding cannot turn an equal trade into a gain.
const GAIN_EPS: f64 = 1e-6;

/// The answer of [`Engine::preempt_verdict`], with the reason.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// Preemption allowed.
    Allowed,
    /// The preemptor is unallocated: free-tier jobs never preempt.
    PreemptorUnallocated,
    /// The preemptor's account is not in the tree.
    UnknownAccount,
    /// A job of the same account or leaf that the preemptor may not trade:
    /// only debug work takes its own leaf's batch work, never debug work nor
    /// a job on its last requeue.
    SameAccount,
    /// The running job is inside its minimum runtime until `until`
    /// (epoch seconds; `None` while it is suspended).
    Protected {
        /// When protection ends.
        until: Option<u64>,
    },
    /// The running job is past its minimum runtime but between two requeue
    /// points ([`crate::contract::RequeuePoints`]).
    BetweenRequeuePoints {
        /// When the next requeue point opens (epoch seconds; `None` while
        /// it is suspended).
        next: Option<u64>,
    },
    /// The running job has been requeued `[contract] max_requeues` times:
    /// it runs to its end.
    RequeuesUsed {
        /// Times it has been requeued.
        requeues: u32,
    },
    /// The preemptor's leaf already holds its entitlement.
    PreemptorServed {
        /// GPUs its allocated jobs hold.
        running: u64,
        /// GPUs it is entitled to now.
        entitled: f64,
    },
    /// The running job's leaf would lose too much of its entitlement: it
    /// would end below it by as much as the preemptor's
    /// [`Engine::allowance`] or more.
    PreempteeAtEntitlement {
        /// GPUs its allocated jobs hold.
        running: u64,
        /// GPUs it is entitled to now.
        entitled: f64,
    },
}

/// GPUs of the victims already allowed for one preemptor, per leaf (free
/// tier and the preemptor's own leaf cost none): what
/// [`Engine::preempt_verdict_tallied`] judges the next candidate beside.
/// Start a new one for each round of candidates of one pending job.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VictimTally {
    gpus: BTreeMap<LeafId, u64>,
}

impl VictimTally {
    /// Forgets every victim allowed so far.
    pub fn clear(&mut self) {
        self.gpus.clear();
    }

    /// Counts `gpus` more GPUs of `leaf`'s jobs as victims.
    pub fn add(&mut self, leaf: LeafId, gpus: u64) {
        *self.gpus.entry(leaf).or_default() += gpus;
    }

    /// This tally and `other`'s victims together.
    pub fn with(&self, other: &VictimTally) -> VictimTally {
        let mut t = self.clone();
        for (&l, &g) in &other.gpus {
            t.add(l, g);
        }
        t
    }
}

impl Engine {
    /// GPUs of entitlement the preemptor's leaf would cover by starting:
    /// `min(running + P, entitled) - min(running, entitled)` with `P` the
    /// preemptor's GPUs (0 for an account not in the tree).
    pub fn gain(&self, p: &Preemptor<'_>, load: &Entitlements) -> f64 {
        let Some(pl) = self.leaf_of(p.account) else {
            return 0.0;
        };
        let want = u64::from(p.nodes) * u64::from(p.gpus_per_node);
        load.gain(pl, want)
    }

    /// Covered entitlement (GPUs) the victims' leaves may lose together for
    /// `p`, strictly less than this: [`UNCOVER_FRACTION`] of its
    /// [`Engine::gain`].
    pub fn allowance(&self, p: &Preemptor<'_>, load: &Entitlements) -> f64 {
        self.gain(p, load) * UNCOVER_FRACTION
    }

    /// Why `p` may or may not preempt `r` at `now` (epoch seconds), `r`
    /// alone. `gpus` is what `r` holds in total (its allocation may list
    /// only some nodes, or none, as in the preempt plugin).
    pub fn preempt_verdict_with_gpus(
        &self,
        p: &Preemptor<'_>,
        r: &RunningJob<'_>,
        gpus: u64,
        load: &Entitlements,
        now: u64,
    ) -> Verdict {
        self.decide_beside(p, r, gpus, &VictimTally::default(), load, now)
            .verdict
    }

    /// [`Engine::preempt_verdict_with_gpus`] for `r` beside the victims
    /// already allowed for the same preemptor (`tally`), which it joins if
    /// allowed: rule 4 bounds what the victims' leaves lose *together*. The
    /// preempt plugin is asked about one candidate at a time (slurmctld
    /// then preempts any subset of those allowed); judged alone, two 4-GPU
    /// jobs of a leaf that may lose 4 were both allowed, and an 8-GPU
    /// preemptor took both. With the tally, whatever subset slurmctld
    /// takes keeps the bound, as [`Engine::choose_victims`] does, so the
    /// termination argument above holds for the plugin too. The tally is
    /// conservative: a candidate allowed early counts even if slurmctld
    /// then takes another.
    pub fn preempt_verdict_tallied(
        &self,
        p: &Preemptor<'_>,
        r: &RunningJob<'_>,
        gpus: u64,
        tally: &mut VictimTally,
        load: &Entitlements,
        now: u64,
    ) -> Verdict {
        let d = self.decide_beside(p, r, gpus, tally, load, now);
        if let Some(l) = d.charged {
            tally.add(l, gpus);
        }
        d.verdict
    }

    /// The verdict for `r` (holding `gpus` GPUs) beside the victims in
    /// `tally`, the leaf whose tally it joins if allowed (an allocated job
    /// of another leaf; `None` for one that costs no entitlement), the
    /// clause that allowed it and the covered entitlement its victims'
    /// leaves lose together ([`Decision`], [`super::grounds`]).
    pub fn decide_beside(
        &self,
        p: &Preemptor<'_>,
        r: &RunningJob<'_>,
        gpus: u64,
        tally: &VictimTally,
        load: &Entitlements,
        now: u64,
    ) -> Decision {
        let v = |v: Verdict| Decision::plain(v, None);
        let allowed = |rule: Rule| Decision::plain(Verdict::Allowed, Some(rule));
        if Tier::of(p.min_runtime) == Tier::Unallocated {
            return v(Verdict::PreemptorUnallocated);
        }
        let Some(pl) = self.leaf_of(p.account) else {
            return v(Verdict::UnknownAccount);
        };
        let contract = r.contract;
        if protected(&contract, now) {
            return v(Verdict::Protected {
                until: protected_until(&contract, now),
            });
        }
        if Tier::of(contract.min_runtime) == Tier::Unallocated {
            return allowed(Rule::FreeTier);
        }
        let max = self.config().contract.max_requeues;
        if requeues_used(contract.min_runtime, r.requeues, max) {
            return v(Verdict::RequeuesUsed {
                requeues: r.requeues,
            });
        }
        let next = self
            .config()
            .contract
            .requeue
            .preemptible_from(&contract, now);
        if next != Some(now) {
            return v(Verdict::BetweenRequeuePoints { next });
        }
        let rl = self.leaf_of(r.account);
        if p.account == r.account || rl == Some(pl) {
            // The team trades its own batch work for its debug work, never
            // a job's last requeue (rule 4).
            return if p.short && !r.short && r.requeues.saturating_add(1) < max {
                allowed(Rule::ShortOwnLeaf)
            } else {
                v(Verdict::SameAccount)
            };
        }
        if !load.below(pl) {
            return v(Verdict::PreemptorServed {
                running: load.running(pl),
                entitled: load.entitled(pl),
            });
        }
        let Some(rl) = rl else {
            return allowed(Rule::VictimNotInTree);
        };
        // This leaf's GPUs with the victims already allowed beside it, and
        // what the other leaves already lose.
        let with = tally.gpus.get(&rl).copied().unwrap_or(0) + gpus;
        let others: f64 = tally
            .gpus
            .iter()
            .filter(|(&l, _)| l != rl)
            .map(|(&l, &g)| load.loss(l, g))
            .sum();
        let lost = others + load.loss(rl, with);
        if !within_allowance(lost, self.allowance(p, load)) {
            return v(Verdict::PreempteeAtEntitlement {
                running: load.running(rl),
                entitled: load.entitled(rl),
            });
        }
        Decision {
            verdict: Verdict::Allowed,
            charged: Some(rl),
            rule: Some(Rule::NetGain),
            lost,
        }
    }

    /// Why `preemptor` may or may not preempt `preemptee` at `now` (epoch
    /// seconds), given the leaves' running GPUs and entitlements now
    /// (`load`). The rules are in the module doc; `preemptee` alone is
    /// judged (with its allocation's GPUs; an empty allocation counts as 1
    /// GPU).
    pub fn preempt_verdict(
        &self,
        preemptor: &Preemptor<'_>,
        preemptee: &RunningJob<'_>,
        load: &Entitlements,
        now: u64,
    ) -> Verdict {
        let gpus = preemptee.gpus().max(1);
        self.preempt_verdict_with_gpus(preemptor, preemptee, gpus, load, now)
    }

    /// True if `preemptor` may preempt `preemptee` at `now` (epoch seconds).
    pub fn may_preempt(
        &self,
        preemptor: &Preemptor<'_>,
        preemptee: &RunningJob<'_>,
        load: &Entitlements,
        now: u64,
    ) -> bool {
        self.preempt_verdict(preemptor, preemptee, load, now) == Verdict::Allowed
    }
}

/// True if uncovering `lost` GPUs of entitlement is allowed against
/// `allowance`: nothing lost (victims' leaves stay at or above their
/// entitlement), or strictly less than the allowance.
pub(super) fn within_allowance(lost: f64, allowance: f64) -> bool {
    lost <= 1e-9 || lost < allowance - GAIN_EPS
}

#[cfg(test)]
mod tests;
