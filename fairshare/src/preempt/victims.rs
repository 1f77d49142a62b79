//! Which running jobs to preempt so that a pending job fits: the search
//! behind [`Engine::choose_victims`]. Which candidates are allowed at all
//! is the verdict's ([`super::verdict`]).
//!
//! # Victims
//! The preemptor needs `nodes` nodes with `gpus_per_node` free GPUs each.
//! Candidates are the running jobs it may preempt, in preference order:
//! `--no-requeue` jobs last; before that, unallocated first; then, for a
//! short preemptor, its own leaf's jobs; then those requeued fewest times;
//! then least work lost (GPUs x
//! running time: the youngest jobs); then job id. The
//! victims of one leaf together never exceed what the rule above lets it
//! lose (for a short preemptor: what it holds above its entitlement plus
//! `short_max_gpus`; otherwise: all it holds above its entitlement plus
//! less than the allowance, and the allowance is shared by all victims'
//! leaves). Two searches run and the smaller result wins (on equal
//! size, the one with the more preferred victims):
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

use super::verdict::within_allowance;
use super::{NodeGpus, Preemptor, RunningJob, Verdict};
use crate::contract::Tier;
use crate::engine::Engine;
use crate::entitlement::Entitlements;
use crate::tree::LeafId;

/// What a victim costs its leaf's entitlement: the leaf's index + 1, or 0
/// for jobs that cost none (free tier, accounts not in the tree).
fn budget_group(engine: &Engine, r: &RunningJob<'_>, own: Option<LeafId>) -> usize {
    if Tier::of(r.contract.min_runtime) == Tier::Unallocated {
        return 0;
    }
    match engine.leaf_of(r.account) {
        Some(l) if Some(l) != own => l.0 as usize + 1,
        _ => 0,
    }
}

impl Engine {
    /// The victim preference key of a running job (ascending = preempted
    /// first): `--no-requeue` last, free tier first, then the allocated
    /// jobs requeued fewest times (so that requeues spread over jobs instead
    /// of sending the youngest, just restarted job back again and again),
    /// then least work lost (GPUs x running seconds), then id.
    pub fn victim_key(&self, r: &RunningJob<'_>, now: u64) -> (bool, Tier, u32, u128, u64) {
        let tier = Tier::of(r.contract.min_runtime);
        let requeues = if tier == Tier::Unallocated {
            0
        } else {
            r.requeues
        };
        (!r.requeue, tier, requeues, r.work(now), r.id)
    }

    /// [`Engine::victim_key`] for one preemptor: a short job takes its own
    /// leaf's jobs before other leaves' (after the free tier).
    fn victim_key_for(
        &self,
        p: &Preemptor<'_>,
        r: &RunningJob<'_>,
        now: u64,
    ) -> (bool, Tier, bool, u32, u128, u64) {
        let (a, b, q, c, d) = self.victim_key(r, now);
        let own = r.account == p.account
            || self
                .leaf_of(r.account)
                .is_some_and(|l| Some(l) == self.leaf_of(p.account));
        let foreign = !(p.short && own);
        (a, b, foreign, q, c, d)
    }

    /// The running jobs to preempt so that `preemptor` fits, as job ids in
    /// preference order (see the module doc), or `None` if no allowed set
    /// makes it fit. `Some(vec![])` means it already fits. `free` lists the
    /// free GPUs of every node the preemptor may use; a node that appears
    /// only in a running job's allocation has 0 free GPUs. Nodes absent from
    /// both are not considered. `load` holds the leaves' running GPUs and
    /// entitlements now.
    pub fn choose_victims(
        &self,
        preemptor: &Preemptor<'_>,
        running: &[RunningJob<'_>],
        free: &[NodeGpus],
        load: &Entitlements,
        now: u64,
    ) -> Option<Vec<u64>> {
        let need = preemptor.gpus_per_node;
        let want = preemptor.nodes as usize;
        let mut cands: Vec<&RunningJob<'_>> = running
            .iter()
            .filter(|r| {
                self.preempt_verdict_with_gpus(preemptor, r, r.gpus(), load, now)
                    == Verdict::Allowed
            })
            .collect();
        // Jobs whose leaf stays at or above its entitlement without them
        // first: they cost no covered entitlement.
        cands.sort_by_cached_key(|r| {
            let uncovers = Tier::of(r.contract.min_runtime) == Tier::Allocated
                && self
                    .leaf_of(r.account)
                    .is_some_and(|l| load.surplus(l) < r.gpus());
            (uncovers, self.victim_key_for(preemptor, r, now))
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
        let own = self.leaf_of(preemptor.account);
        let group: Vec<usize> = cands.iter().map(|r| budget_group(self, r, own)).collect();
        let mut budget = vec![u64::MAX; self.tree().leaves().len() + 1];
        let allowance = self.allowance(preemptor, load);
        for (l, b) in budget.iter_mut().enumerate().skip(1) {
            *b = load.may_lose(LeafId(l as u32 - 1), allowance);
        }
        let net = Some((load, allowance));

        let packing = Packing {
            cands: &cands,
            free_on,
            need,
            want,
            group,
            budget,
            net,
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
    /// Per candidate: its budget group (0 = unlimited).
    group: Vec<usize>,
    /// Per group: GPUs its victims may hold in total.
    budget: Vec<u64>,
    /// For a preemptor that is not short: the load and its
    /// [`Engine::allowance`]; the victims' leaves together lose less.
    net: Option<(&'c Entitlements, f64)>,
}

impl Packing<'_, '_> {
    /// GPUs each budget group loses with `set` preempted.
    fn spent(&self, set: impl IntoIterator<Item = usize>) -> Vec<u64> {
        let mut spent = vec![0u64; self.budget.len()];
        for i in set {
            spent[self.group[i]] += self.cands[i].gpus();
        }
        spent
    }

    /// True if candidate `i` can join a set that spends `spent`.
    fn affordable(&self, i: usize, spent: &[u64]) -> bool {
        let g = self.group[i];
        if g == 0 {
            return true;
        }
        let s = spent[g] + self.cands[i].gpus();
        if s > self.budget[g] {
            return false;
        }
        let Some((load, allowance)) = self.net else {
            return true;
        };
        let lost: f64 = spent
            .iter()
            .enumerate()
            .skip(1)
            .map(|(h, &t)| {
                let t = if h == g { s } else { t };
                if t == 0 {
                    0.0
                } else {
                    load.loss(LeafId(h as u32 - 1), t)
                }
            })
            .sum();
        within_allowance(lost, allowance)
    }

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
                    let plan = self.node_plan(node, f, &victims)?;
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
        let mut spent = self.spent([]);
        for i in 0..self.cands.len() {
            if !self.affordable(i, &spent) {
                continue;
            }
            spent[self.group[i]] += self.cands[i].gpus();
            set.insert(i);
            if self.nodes_fitting(&set) >= self.want {
                return Some(set);
            }
        }
        None
    }

    /// Victims (indices into `cands`, in preference order) to add to
    /// `already` so that `node` has `need` free GPUs: taken in order until
    /// it fits (skipping those over their leaf's budget), then any it can do
    /// without given back, latest first. `None` if even every affordable
    /// candidate is not enough.
    fn node_plan(&self, node: u32, free: u32, already: &BTreeSet<usize>) -> Option<Vec<usize>> {
        let cands = self.cands;
        let need = self.need;
        let mut spent = self.spent(already.iter().copied());
        let mut have = already
            .iter()
            .fold(free, |h, &i| h.saturating_add(cands[i].gpus_on(node)));
        let mut taken = Vec::new();
        for (i, r) in cands.iter().enumerate() {
            if have >= need {
                break;
            }
            let g = r.gpus_on(node);
            if g > 0 && !already.contains(&i) && self.affordable(i, &spent) {
                spent[self.group[i]] += r.gpus();
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
}
