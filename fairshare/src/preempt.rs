//! Who may preempt whom, and which running jobs to preempt (docs/fair-share.md).
//!
//! # May `P` (pending) preempt `R` (running) at `now`? All must hold:
//! 1. `P` is allocated (minimum runtime > 0); free-tier jobs never preempt.
//! 2. `P`'s account is in the tree.
//! 3. `P` and `R` are not of one account (nor of one leaf: accounts of one
//!    leaf share its usage and rank).
//! 4. `R` is not protected: its running time is at least its minimum runtime
//!    ([`crate::contract::protected`]; equal = preemptible).
//! 5. Either `R` is unallocated (preemptible by any allocated job), or `R`'s
//!    account ranks strictly below `P`'s **and** it still does not rank
//!    strictly above `P`'s after the move, i.e. with `P`'s leaf charged
//!    `P.rate x P.min_runtime` more (no ping-pong). Tied accounts never
//!    preempt each other. An account not in the tree ranks below all others.
//!
//! Every allowed edge goes strictly down in (tier, rank) order, so the
//! "may preempt" relation of one snapshot has no cycle.
//!
//! # Victims
//! The preemptor needs `nodes` nodes with `gpus_per_node` free GPUs each.
//! Candidates are the running jobs it may preempt, in preference order:
//! `--no-requeue` jobs last; before that, unallocated first; then the most
//! over-served accounts (lowest rank) first; then least work lost
//! (GPUs x running time); then job id. Two searches run and the smaller
//! result wins (on equal size, the one with the more preferred victims):
//! - node by node: repeatedly pick the node needing the fewest new victims
//!   (taken in preference order until it fits, those it can do without
//!   given back), until enough nodes fit;
//! - in order: take candidates in preference order until enough nodes fit
//!   (better when one victim spans several nodes).
//!
//! Each result is pruned, giving back any victim not needed (latest in
//! preference order first), so the set is minimal:
//! releasing any one job fewer would not let the preemptor start.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::contract::{protected, protected_until, Contract, Tier};
use crate::engine::Engine;
use crate::fair_tree::FairTree;
use crate::tree::LeafId;

/// GPUs on one node (node index as the caller numbers them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NodeGpus {
    /// Node index.
    pub node: u32,
    /// GPUs.
    pub gpus: u32,
}

/// A running job that might be preempted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunningJob<'a> {
    /// Slurm job id (any unique id).
    pub id: u64,
    /// Slurm account.
    pub account: &'a str,
    /// Minimum runtime and running-time clock.
    pub contract: Contract,
    /// GPUs it holds, per node.
    pub alloc: &'a [NodeGpus],
    /// False for `--no-requeue` jobs (preempting them kills them).
    pub requeue: bool,
}

/// A pending job that wants to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preemptor<'a> {
    /// Slurm account.
    pub account: &'a str,
    /// Minimum runtime, seconds (0 = unallocated).
    pub min_runtime: u64,
    /// Charge units per second it will be charged (GPUs by default).
    pub rate: u64,
    /// Nodes it needs.
    pub nodes: u32,
    /// Free GPUs it needs on each of them.
    pub gpus_per_node: u32,
}

/// The answer of [`Engine::preempt_verdict`], with the reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// Preemption allowed.
    Allowed,
    /// The preemptor is unallocated: free-tier jobs never preempt.
    PreemptorUnallocated,
    /// The preemptor's account is not in the tree.
    UnknownAccount,
    /// Same account or leaf.
    SameAccount,
    /// The running job is inside its minimum runtime until `until`
    /// (epoch seconds; `None` while it is suspended).
    Protected {
        /// When protection ends.
        until: Option<u64>,
    },
    /// The running job's account does not rank strictly below.
    NotRankedBelow,
    /// After the move the running job's account would rank above the
    /// preemptor's (ping-pong).
    WouldInvert,
}

impl<'a> RunningJob<'a> {
    fn gpus_on(&self, node: u32) -> u32 {
        self.alloc
            .iter()
            .filter(|a| a.node == node)
            .map(|a| a.gpus)
            .sum()
    }

    fn work(&self, now: u64) -> u128 {
        let gpus: u128 = self.alloc.iter().map(|a| u128::from(a.gpus)).sum();
        gpus * u128::from(self.contract.clock.run_time(now))
    }
}

impl Engine {
    fn rank_or_zero(&self, fair: &FairTree, leaf: Option<LeafId>) -> u32 {
        leaf.map_or(0, |l| fair.rank(l))
    }

    /// The ranking after `p` starts: its leaf charged `rate x min_runtime`.
    fn after_move(&self, p: &Preemptor<'_>, leaf: LeafId) -> std::sync::Arc<FairTree> {
        let extra = p.rate as f64 * p.min_runtime as f64;
        self.ranked_with_extra_cached(leaf, extra)
    }

    fn verdict_with(
        &self,
        p: &Preemptor<'_>,
        r: &RunningJob<'_>,
        now: u64,
        after: &mut Option<std::sync::Arc<FairTree>>,
    ) -> Verdict {
        if Tier::of(p.min_runtime) == Tier::Unallocated {
            return Verdict::PreemptorUnallocated;
        }
        let Some(pl) = self.leaf_of(p.account) else {
            return Verdict::UnknownAccount;
        };
        let rl = self.leaf_of(r.account);
        if p.account == r.account || rl == Some(pl) {
            return Verdict::SameAccount;
        }
        if protected(&r.contract, now) {
            return Verdict::Protected {
                until: protected_until(&r.contract, now),
            };
        }
        if Tier::of(r.contract.min_runtime) == Tier::Unallocated {
            return Verdict::Allowed;
        }
        let fair = self.fair_tree();
        if self.rank_or_zero(fair, rl) >= fair.rank(pl) {
            return Verdict::NotRankedBelow;
        }
        let after = after.get_or_insert_with(|| self.after_move(p, pl));
        if self.rank_or_zero(after, rl) > after.rank(pl) {
            return Verdict::WouldInvert;
        }
        Verdict::Allowed
    }

    /// Why `preemptor` may or may not preempt `preemptee` at `now` (epoch
    /// seconds). The rules are in the module doc.
    pub fn preempt_verdict(
        &self,
        preemptor: &Preemptor<'_>,
        preemptee: &RunningJob<'_>,
        now: u64,
    ) -> Verdict {
        self.verdict_with(preemptor, preemptee, now, &mut None)
    }

    /// True if `preemptor` may preempt `preemptee` at `now` (epoch seconds).
    pub fn may_preempt(
        &self,
        preemptor: &Preemptor<'_>,
        preemptee: &RunningJob<'_>,
        now: u64,
    ) -> bool {
        self.preempt_verdict(preemptor, preemptee, now) == Verdict::Allowed
    }

    /// The running jobs to preempt so that `preemptor` fits, as job ids in
    /// preference order (see the module doc), or `None` if no allowed set
    /// makes it fit. `Some(vec![])` means it already fits. `free` lists the
    /// free GPUs of every node the preemptor may use; a node that appears
    /// only in a running job's allocation has 0 free GPUs. Nodes absent from
    /// both are not considered.
    pub fn choose_victims(
        &self,
        preemptor: &Preemptor<'_>,
        running: &[RunningJob<'_>],
        free: &[NodeGpus],
        now: u64,
    ) -> Option<Vec<u64>> {
        let need = preemptor.gpus_per_node;
        let want = preemptor.nodes as usize;
        let mut after = None;
        let mut cands: Vec<&RunningJob<'_>> = running
            .iter()
            .filter(|r| self.verdict_with(preemptor, r, now, &mut after) == Verdict::Allowed)
            .collect();
        let fair = self.fair_tree();
        cands.sort_by_cached_key(|r| {
            (
                !r.requeue,
                Tier::of(r.contract.min_runtime),
                self.rank_or_zero(fair, self.leaf_of(r.account)),
                r.work(now),
                r.id,
            )
        });

        let mut free_on: BTreeMap<u32, u32> = BTreeMap::new();
        for f in free {
            *free_on.entry(f.node).or_default() += f.gpus;
        }
        for r in &cands {
            for a in r.alloc {
                free_on.entry(a.node).or_default();
            }
        }

        let packing = Packing {
            cands: &cands,
            free_on,
            need,
            want,
        };
        let by_nodes = packing.node_by_node().map(|v| packing.prune(v));
        let by_order = packing.in_order().map(|v| packing.prune(v));
        let best = match (by_nodes, by_order) {
            (Some(a), Some(b)) => Some(if packing.cost(&b) < packing.cost(&a) {
                b
            } else {
                a
            }),
            (a, b) => a.or(b),
        }?;
        Some(best.into_iter().map(|i| cands[i].id).collect())
    }
}

/// The search behind [`Engine::choose_victims`]. Victims are indices into
/// `cands`, which is in preference order.
struct Packing<'c, 'j> {
    cands: &'c [&'c RunningJob<'j>],
    free_on: BTreeMap<u32, u32>,
    need: u32,
    want: usize,
}

impl Packing<'_, '_> {
    /// Nodes that would have `need` free GPUs with `set` released.
    fn nodes_fitting(&self, set: &BTreeSet<usize>) -> usize {
        self.free_on
            .iter()
            .filter(|(&n, &f)| {
                let released: u32 = set.iter().map(|&i| self.cands[i].gpus_on(n)).sum();
                f.saturating_add(released) >= self.need
            })
            .count()
    }

    /// Gives back every victim not needed, latest in preference order first.
    fn prune(&self, mut set: BTreeSet<usize>) -> BTreeSet<usize> {
        for i in set.clone().into_iter().rev() {
            set.remove(&i);
            if self.nodes_fitting(&set) < self.want {
                set.insert(i);
            }
        }
        set
    }

    /// Fewer victims first, then the more preferred ones.
    fn cost(&self, set: &BTreeSet<usize>) -> (usize, usize) {
        (set.len(), set.iter().sum())
    }

    /// Nodes one at a time, each time the one needing the fewest new
    /// victims given those already chosen.
    fn node_by_node(&self) -> Option<BTreeSet<usize>> {
        let mut chosen: Vec<u32> = Vec::with_capacity(self.want);
        let mut victims = BTreeSet::new();
        for _ in 0..self.want {
            let (key, plan) = self
                .free_on
                .iter()
                .filter(|(n, _)| !chosen.contains(n))
                .filter_map(|(&node, &f)| {
                    let plan = node_plan(self.cands, node, f, self.need, &victims)?;
                    Some(((plan.len(), plan.iter().sum::<usize>(), node), plan))
                })
                .min_by_key(|(key, _)| *key)?;
            chosen.push(key.2);
            victims.extend(plan);
        }
        Some(victims)
    }

    /// Candidates in preference order until enough nodes fit (better when
    /// one victim spans several nodes).
    fn in_order(&self) -> Option<BTreeSet<usize>> {
        let mut set = BTreeSet::new();
        if self.nodes_fitting(&set) >= self.want {
            return Some(set);
        }
        for i in 0..self.cands.len() {
            set.insert(i);
            if self.nodes_fitting(&set) >= self.want {
                return Some(set);
            }
        }
        None
    }
}

/// Victims (indices into `cands`, in preference order) to add to `already`
/// so that `node` has `need` free GPUs: taken in order until it fits, then
/// any it can do without given back, latest first. `None` if even every
/// candidate is not enough.
fn node_plan(
    cands: &[&RunningJob<'_>],
    node: u32,
    free: u32,
    need: u32,
    already: &BTreeSet<usize>,
) -> Option<Vec<usize>> {
    let mut have = already
        .iter()
        .fold(free, |h, &i| h.saturating_add(cands[i].gpus_on(node)));
    let mut taken = Vec::new();
    for (i, r) in cands.iter().enumerate() {
        if have >= need {
            break;
        }
        let g = r.gpus_on(node);
        if g > 0 && !already.contains(&i) {
            taken.push(i);
            have = have.saturating_add(g);
        }
    }
    if have < need {
        return None;
    }
    for k in (0..taken.len()).rev() {
        let g = cands[taken[k]].gpus_on(node);
        if have - g >= need {
            have -= g;
            taken.remove(k);
        }
    }
    Some(taken)
}

mod victim_order;
pub use victim_order::pack_victim_order;

#[cfg(test)]
mod tests;
