//! Entitlement: how many GPUs each leaf of the org tree is owed *now*.
//!
//! # Rule
//! The GPUs usable now (`capacity`) are split down the org tree by
//! water-filling against *demand* (a leaf's allocated GPUs running plus
//! pending; free-tier jobs are not demand, they are owed nothing):
//! - the root is entitled to `min(capacity, total demand)`;
//! - a node's entitlement is divided among its children in proportion to
//!   their shares, no child getting more than its subtree's demand; what a
//!   capped child leaves is divided again among its siblings that still want
//!   more, until the node's entitlement is used up (share-0 children get
//!   only what every positive-share sibling leaves, in proportion to
//!   demand);
//! - so a team that asks for less than its allocation x capacity is
//!   entitled to what it asks for, and the rest goes to its siblings first,
//!   then up the tree (Fair Tree's "siblings first", applied to GPUs now
//!   instead of usage over the window).
//!
//! A leaf whose demand is at least its allocation x capacity is entitled to
//! at least that, so a scheduler that keeps every leaf at its entitlement
//! delivers every GPU-hour that is *owed* (allocation x capacity, capped
//! hour by hour at demand: the simulator's metric, docs/simulator.md).
//!
//! The sliding window ([`crate::fair_tree`]) decides who gets *idle* GPUs
//! (the queue order); entitlement decides when a running job may be
//! requeued for another team's ([`crate::preempt`]). A preemption never
//! changes any leaf's demand (the preemptor goes from pending to running,
//! each victim from running to pending), so it never changes entitlements:
//! they move only with arrivals, completions and capacity.
//!
//! ```
//! use fairshare::entitlement::waterfill;
//! // 100 GPUs, equal weights: a wants 10, b wants 1000: a gets 10, b 90.
//! assert_eq!(waterfill(100.0, &[1.0, 1.0], &[10.0, 1000.0]), vec![10.0, 90.0]);
//! ```

use serde::Serialize;

use crate::tree::{LeafId, Tree};

/// Tolerance for comparing a whole number of GPUs with an entitlement.
const EPS: f64 = 1e-9;

/// Splits `capacity` among claimants in proportion to `weight`, none above
/// its `demand`; what capped claimants leave is split again among the
/// others. Claimants of weight 0 share what every positive-weight claimant
/// leaves, in proportion to demand. Units are the caller's (GPUs,
/// GPU-seconds); the result has the input's length and sums to
/// `min(capacity, total demand)` (up to rounding).
pub fn waterfill(capacity: f64, weight: &[f64], demand: &[f64]) -> Vec<f64> {
    let mut out = vec![0.0; weight.len()];
    waterfill_into(capacity, weight, demand, &mut out);
    out
}

/// [`waterfill`] into `out` (cleared and resized to the input's length),
/// allocating nothing once `out` has the room.
fn waterfill_into(capacity: f64, weight: &[f64], demand: &[f64], out: &mut Vec<f64>) {
    let n = weight.len();
    out.clear();
    out.resize(n, 0.0);
    let mut left = capacity;
    // Claimants still below their demand; each round caps those that the
    // proportional split would fill (against the round's `left`), or splits
    // what is left and ends.
    let mut active: Vec<usize> = (0..n)
        .filter(|&i| demand[i] > 0.0 && weight[i] > 0.0)
        .collect();
    while left > EPS && !active.is_empty() {
        let total: f64 = active.iter().map(|&i| weight[i]).sum();
        let round = left;
        let mut capped = false;
        active.retain(|&i| {
            if out[i] + round * weight[i] / total >= demand[i] {
                left -= demand[i] - out[i];
                out[i] = demand[i];
                capped = true;
                false
            } else {
                true
            }
        });
        if !capped {
            for &i in &active {
                out[i] += left * weight[i] / total;
            }
            left = 0.0;
        }
    }
    let zero = |i: &usize| weight[*i] == 0.0 && demand[*i] > 0.0;
    let zero_demand: f64 = (0..n).filter(zero).map(|i| demand[i]).sum();
    if left > EPS && zero_demand > 0.0 {
        for i in (0..n).filter(zero) {
            out[i] = (left * demand[i] / zero_demand).min(demand[i]);
        }
    }
}

/// Per leaf: GPUs held by allocated jobs now, GPUs owed now, and demand.
/// Built once per decision point (a scheduling pass, a snapshot); the
/// preemption rule reads it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entitlements {
    capacity: u64,
    running: Vec<u64>,
    demand: Vec<u64>,
    entitled: Vec<f64>,
    /// Per tree node: its entitlement; with each node's parent (`u32::MAX`
    /// for the root) and each leaf's node, for the groups above a leaf
    /// ([`crate::owed`]).
    #[serde(skip)]
    node_entitled: Vec<f64>,
    #[serde(skip)]
    parent: Vec<u32>,
    #[serde(skip)]
    leaf_node: Vec<u32>,
}

/// Buffers of [`Entitlements::recompute`], kept by a caller between calls:
/// per tree node its subtree demand and entitlement, and one node's
/// children's weights, demands and split.
#[derive(Debug, Default, Clone)]
pub struct Scratch {
    sub: Vec<f64>,
    ent: Vec<f64>,
    weight: Vec<f64>,
    demand: Vec<f64>,
    split: Vec<f64>,
}

impl Entitlements {
    /// Water-fills `capacity` GPUs over the tree (module doc). `running[l]`
    /// and `pending[l]` are the GPUs of leaf `l`'s allocated jobs running and
    /// pending (missing entries count as 0, extra ones are ignored).
    pub fn compute(tree: &Tree, capacity: u64, running: &[u64], pending: &[u64]) -> Entitlements {
        let mut e = Entitlements {
            capacity,
            running: Vec::new(),
            demand: Vec::new(),
            entitled: Vec::new(),
            node_entitled: Vec::new(),
            parent: Vec::new(),
            leaf_node: Vec::new(),
        };
        e.recompute(tree, capacity, running, pending, &mut Scratch::default());
        e
    }

    /// [`Entitlements::compute`] in place: the same result, reusing this
    /// value's vectors and `scratch`'s, so that a caller recomputing on every
    /// change of the load (the simulator) allocates nothing once they have
    /// the room.
    pub fn recompute(
        &mut self,
        tree: &Tree,
        capacity: u64,
        running: &[u64],
        pending: &[u64],
        scratch: &mut Scratch,
    ) {
        let leaves = tree.leaves().len();
        let fill = |out: &mut Vec<u64>, from: &[u64]| {
            out.clear();
            out.extend(from.iter().take(leaves));
            out.resize(leaves, 0);
        };
        self.capacity = capacity;
        fill(&mut self.running, running);
        fill(&mut self.demand, pending);
        for (d, r) in self.demand.iter_mut().zip(&self.running) {
            *d = r.saturating_add(*d);
        }
        let nodes = tree.nodes();
        let Scratch {
            sub,
            ent,
            weight: w,
            demand: d,
            split,
        } = scratch;
        // Subtree demand, children after parents in `nodes`.
        sub.clear();
        sub.resize(nodes.len(), 0.0);
        for (l, &n) in tree.leaves().iter().enumerate() {
            sub[n.0 as usize] = self.demand[l] as f64;
        }
        for i in (1..nodes.len()).rev() {
            let p = nodes[i].parent.expect("non-root").0 as usize;
            sub[p] += sub[i];
        }
        ent.clear();
        ent.resize(nodes.len(), 0.0);
        ent[0] = (capacity as f64).min(sub[0]);
        for i in 0..nodes.len() {
            let kids = &nodes[i].children;
            if kids.is_empty() || ent[i] <= 0.0 {
                continue;
            }
            w.clear();
            w.extend(kids.iter().map(|k| f64::from(nodes[k.0 as usize].share)));
            d.clear();
            d.extend(kids.iter().map(|k| sub[k.0 as usize]));
            waterfill_into(ent[i], w, d, split);
            for (k, &e) in kids.iter().zip(split.iter()) {
                ent[k.0 as usize] = e;
            }
        }
        self.entitled.clear();
        self.entitled
            .extend(tree.leaves().iter().map(|n| ent[n.0 as usize]));
        self.node_entitled.clear();
        self.node_entitled.extend_from_slice(ent);
        self.parent.clear();
        self.parent
            .extend(nodes.iter().map(|n| n.parent.map_or(u32::MAX, |p| p.0)));
        self.leaf_node.clear();
        self.leaf_node.extend(tree.leaves().iter().map(|n| n.0));
    }

    /// The tree nodes (indices into [`Tree::nodes`]) from the leaf up to,
    /// not including, the root; empty for a leaf not in the tree.
    pub fn path(&self, leaf: LeafId) -> Vec<usize> {
        let mut out = Vec::new();
        let Some(&first) = self.leaf_node.get(leaf.0 as usize) else {
            return out;
        };
        let mut n = first;
        while n != u32::MAX && self.parent[n as usize] != u32::MAX {
            out.push(n as usize);
            n = self.parent[n as usize];
        }
        out
    }

    /// Per tree node (indexed as [`Tree::nodes`]), the entitlement its
    /// subtree has not covered: `entitled(n) - cov(n)`, with `cov(leaf) =
    /// min(running, entitled)` and `cov(group) = min(sum of its children's
    /// cov, entitled)`. GPUs a leaf holds above its own entitlement cover
    /// nothing of its group's: they are its siblings' (or cousins') to take
    /// back, so they do not shut the room of a sibling below its own
    /// ([`crate::owed`]). Never negative.
    pub fn node_rooms(&self) -> Vec<f64> {
        let n = self.node_entitled.len();
        let mut cov = vec![0.0f64; n];
        for (l, &node) in self.leaf_node.iter().enumerate() {
            cov[node as usize] = self.running[l] as f64;
        }
        for i in (0..n).rev() {
            cov[i] = cov[i].min(self.node_entitled[i]);
            let p = self.parent[i];
            if p != u32::MAX {
                cov[p as usize] += cov[i];
            }
        }
        (0..n)
            .map(|i| (self.node_entitled[i] - cov[i]).max(0.0))
            .collect()
    }

    /// GPUs usable now.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// GPUs the leaf's allocated jobs hold.
    pub fn running(&self, leaf: LeafId) -> u64 {
        self.running.get(leaf.0 as usize).copied().unwrap_or(0)
    }

    /// GPUs the leaf's allocated jobs hold or wait for.
    pub fn demand(&self, leaf: LeafId) -> u64 {
        self.demand.get(leaf.0 as usize).copied().unwrap_or(0)
    }

    /// GPUs the leaf is entitled to now (real-valued).
    pub fn entitled(&self, leaf: LeafId) -> f64 {
        self.entitled.get(leaf.0 as usize).copied().unwrap_or(0.0)
    }

    /// True while the leaf holds fewer GPUs than it is entitled to.
    pub fn below(&self, leaf: LeafId) -> bool {
        self.below_after(leaf, 0)
    }

    /// True if the leaf would hold fewer GPUs than it is entitled to after
    /// losing `gpus` of its running GPUs (a preemption changes no
    /// entitlement: demand stays).
    pub fn below_after(&self, leaf: LeafId, gpus: u64) -> bool {
        (self.running(leaf).saturating_sub(gpus) as f64) < self.entitled(leaf) - EPS
    }

    /// GPUs the leaf may lose and stay at or above its entitlement (0 when
    /// it is at or below it).
    pub fn surplus(&self, leaf: LeafId) -> u64 {
        let s = self.running(leaf) as f64 - self.entitled(leaf) + EPS;
        if s <= 0.0 {
            0
        } else {
            s.floor() as u64
        }
    }

    /// Covered entitlement (GPUs) the leaf loses if `gpus` of its GPUs stop:
    /// `min(running, entitled) - min(running - gpus, entitled)`; 0 while it
    /// stays at or above its entitlement, every GPU once it is below.
    pub fn loss(&self, leaf: LeafId, gpus: u64) -> f64 {
        let r = self.running(leaf) as f64;
        let e = self.entitled(leaf);
        r.min(e) - (r - gpus as f64).max(0.0).min(e)
    }

    /// Covered entitlement (GPUs) the leaf gains if `gpus` more of its GPUs
    /// start: `min(running + gpus, entitled) - min(running, entitled)`.
    pub fn gain(&self, leaf: LeafId, gpus: u64) -> f64 {
        let r = self.running(leaf) as f64;
        let e = self.entitled(leaf);
        (r + gpus as f64).min(e) - r.min(e)
    }

    /// The most GPUs the leaf may lose while losing less than `within` GPUs
    /// of covered entitlement ([`Entitlements::loss`] `< within`): all it
    /// holds above its entitlement, plus fewer than `within` below it.
    pub fn may_lose(&self, leaf: LeafId, within: f64) -> u64 {
        if within <= 0.0 {
            return self.surplus(leaf);
        }
        let above = (self.running(leaf) as f64 - self.entitled(leaf)).max(0.0);
        let most = ((above + within - 1e-6).ceil() - 1.0).max(0.0) as u64;
        most.min(self.running(leaf))
    }

    /// The covered entitlement `sum over leaves of min(running, entitled)`,
    /// GPUs: the quantity every preemption strictly increases
    /// ([`crate::preempt`], termination).
    pub fn covered(&self) -> f64 {
        self.running
            .iter()
            .zip(&self.entitled)
            .map(|(&r, &e)| (r as f64).min(e))
            .sum()
    }

    /// Records that `gpus` GPUs of `leaf`'s allocated jobs started (positive)
    /// or stopped (negative) without changing demand: a preemption's moves,
    /// charged before the next decision.
    pub fn shift(&mut self, leaf: LeafId, gpus: i64) {
        if let Some(r) = self.running.get_mut(leaf.0 as usize) {
            *r = r.saturating_add_signed(gpus);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::NodeSpec;

    fn tree(spec: &[NodeSpec]) -> Tree {
        Tree::build(spec).unwrap()
    }

    #[test]
    fn waterfill_caps_at_demand_and_redistributes() {
        assert_eq!(
            waterfill(100.0, &[1.0, 1.0], &[10.0, 1000.0]),
            vec![10.0, 90.0]
        );
        assert_eq!(
            waterfill(100.0, &[1.0, 3.0], &[1000.0, 1000.0]),
            vec![25.0, 75.0]
        );
        assert_eq!(
            waterfill(100.0, &[1.0, 0.0], &[10.0, 50.0]),
            vec![10.0, 50.0]
        );
        assert_eq!(waterfill(100.0, &[0.0, 0.0], &[0.0, 0.0]), vec![0.0, 0.0]);
    }

    #[test]
    fn unused_share_goes_to_siblings_first() {
        // p (50) = {x 1, y 1}, q (50). x idle: y gets p's whole half first.
        let t = tree(&[
            NodeSpec::group(
                "p",
                50,
                vec![NodeSpec::leaf("x", 1), NodeSpec::leaf("y", 1)],
            ),
            NodeSpec::leaf("q", 50),
        ]);
        let (x, y, q) = (
            t.leaf_of_account("x").unwrap(),
            t.leaf_of_account("y").unwrap(),
            t.leaf_of_account("q").unwrap(),
        );
        let e = Entitlements::compute(&t, 16, &[0, 0, 16], &[0, 100, 0]);
        assert_eq!(e.entitled(x), 0.0);
        assert_eq!(e.entitled(y), 8.0);
        assert_eq!(e.entitled(q), 8.0);
        assert!(e.below(y));
        assert_eq!(e.surplus(q), 8);
        assert_eq!(e.covered(), 8.0);
        // q alone wants anything: it is entitled to all of it.
        let e = Entitlements::compute(&t, 16, &[0, 0, 16], &[0, 0, 4]);
        assert_eq!(e.entitled(q), 16.0);
        assert_eq!(e.surplus(q), 0);
    }

    #[test]
    fn shares_split_a_full_cluster_and_sum_to_capacity() {
        let t = tree(&[NodeSpec::leaf("a", 3), NodeSpec::leaf("b", 1)]);
        let e = Entitlements::compute(&t, 8, &[8, 0], &[0, 8]);
        let (a, b) = (
            t.leaf_of_account("a").unwrap(),
            t.leaf_of_account("b").unwrap(),
        );
        assert_eq!((e.entitled(a), e.entitled(b)), (6.0, 2.0));
        assert_eq!(e.surplus(a), 2);
        // a holds 8 of its 6: losing 2 leaves it at its entitlement, 3 below.
        assert!(!e.below_after(a, 2));
        assert!(e.below_after(a, 3));
        assert!(e.below_after(a, 100), "saturates at 0 GPUs");
        let mut e = e;
        e.shift(a, -2);
        e.shift(b, 2);
        assert_eq!(e.covered(), 8.0);
        assert!(!e.below(b));
    }

    #[test]
    fn recompute_in_place_equals_compute() {
        // The simulator recomputes one value as the load moves; each result
        // must be what a fresh compute gives, whatever the value held.
        let t = tree(&[
            NodeSpec::group(
                "p",
                50,
                vec![NodeSpec::leaf("x", 1), NodeSpec::leaf("y", 0)],
            ),
            NodeSpec::leaf("q", 50),
        ]);
        let loads: [(u64, &[u64], &[u64]); 4] = [
            (16, &[0, 0, 16], &[0, 100, 0]),
            (0, &[], &[]),
            (32, &[4, 4], &[1, 0, 7, 99]),
            (8, &[8, 0, 0], &[0, 0, 8]),
        ];
        let mut e = Entitlements::compute(&t, 3, &[1, 2, 3], &[3, 2, 1]);
        let mut scratch = Scratch::default();
        for (capacity, running, pending) in loads {
            e.recompute(&t, capacity, running, pending, &mut scratch);
            assert_eq!(e, Entitlements::compute(&t, capacity, running, pending));
        }
    }
}
