//! Fair Tree over the org tree: ranks leaves, yields each one's fair-share
//! factor. Source: Slurm's Fair Tree, <https://slurm.schedmd.com/fair_tree.html>
//! and `src/plugins/priority/multifactor/fair_tree.c`; org-tree leaves play
//! the part of Slurm's user associations, interior nodes of its accounts.
//!
//! # The rule
//! - For every node below the root: `S` = its share normalised among its
//!   siblings; `U` = its subtree's usage divided by its parent's subtree
//!   usage (Slurm's `EffectvUsage`; 0 if the parent has none).
//! - **Level FS = S / U.** If the node's share is 0, Level FS = 0 (the lowest
//!   value, even without usage). Else if `U` = 0, Level FS = infinity:
//!   NOT A BUG, infinity is a valid value and sorts first. A tiny but
//!   non-zero usage gives a huge *finite* value (clamped to `f64::MAX`), so it
//!   sorts after a sibling with no usage at all.
//! - Starting at the root's children, siblings are sorted by Level FS,
//!   highest first; on equal Level FS leaves come before interior nodes,
//!   then names in byte order. Walking that order depth first, every leaf
//!   reached gets the next rank, from `L` (the number of leaves) down to 1.
//! - **Ties** (as fair_tree.c):
//!   1. sibling leaves with equal Level FS get the same rank;
//!   2. sibling interior nodes with equal Level FS have their children
//!      merged into one list before sorting (each child keeps the Level FS
//!      computed against its own siblings);
//!   3. a leaf with the same Level FS as a sibling interior node gets the
//!      same rank as that node's highest-ranked leaf.
//!
//!   A tied leaf takes the rank of the leaf before it; the rank counter
//!   still moves down, so the next untied leaf's rank counts every leaf
//!   above it (1, 1, 3 rather than 1, 1, 2; in factor terms 4/4, 4/4, 2/4).
//!   Equality is decided on Level FS rounded to 40 significant bits
//!   (relative 1e-12), so ratios equal in exact arithmetic tie although
//!   floating point computed them along different paths (Slurm compares
//!   `long double`s exactly). Infinity ties infinity; 0 ties 0.
//! - **Fair-share factor** of a leaf = rank / L, always in (0, 1]: the
//!   first leaf gets 1.0, the last 1/L.
//!
//! A consequence the property tests check: a subtree whose Level FS is
//! above its sibling's (say, under its share while the sibling is over)
//! has every one of its leaves ranked strictly above every leaf of the
//! sibling.

use std::cmp::Ordering;

use serde::{Serialize, Serializer};

use crate::tree::{LeafId, NodeId, Tree};

/// A Level FS value: a finite number >= 0 or infinity. Serialises as a
/// number, or the string `"inf"`; displays as sshare does.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct LevelFs(pub f64);

impl LevelFs {
    /// True for the "no usage" value.
    pub fn is_infinite(self) -> bool {
        self.0.is_infinite()
    }
}

impl Serialize for LevelFs {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.0.is_finite() {
            s.serialize_f64(self.0)
        } else {
            s.serialize_str("inf")
        }
    }
}

impl std::fmt::Display for LevelFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_finite() {
            write!(f, "{:.6}", self.0)
        } else {
            f.write_str("inf")
        }
    }
}

/// The result of one Fair Tree pass: per-node Level FS and usage, per-leaf
/// rank and factor.
#[derive(Debug, Clone)]
pub struct FairTree {
    usage: Vec<f64>,
    effective: Vec<f64>,
    level_fs: Vec<f64>,
    rank: Vec<u32>,
    order: Vec<LeafId>,
}

struct Ranker<'a> {
    tree: &'a Tree,
    keys: Vec<u64>,
    rank: u32,
    rank_no_ties: u32,
    out_rank: Vec<u32>,
    order: Vec<LeafId>,
}

impl FairTree {
    /// Runs Fair Tree with `leaf_usage[leaf]` = charged usage of each leaf
    /// (GPU-seconds or any unit; only ratios matter). Negative or NaN usage
    /// counts as 0, infinite as `f64::MAX`; missing trailing entries are 0.
    pub fn compute(tree: &Tree, leaf_usage: &[f64]) -> FairTree {
        let nodes = tree.nodes();
        let mut usage = vec![0.0f64; nodes.len()];
        for (i, &node) in tree.leaves().iter().enumerate() {
            let u = leaf_usage.get(i).copied().unwrap_or(0.0);
            usage[node.0 as usize] = if u.is_nan() || u <= 0.0 {
                0.0
            } else {
                u.min(f64::MAX)
            };
        }
        // Bottom-up: pre-order arena, so children come after parents.
        for i in (1..nodes.len()).rev() {
            let p = nodes[i].parent.expect("non-root has a parent").0 as usize;
            usage[p] = (usage[p] + usage[i]).min(f64::MAX);
        }
        let mut effective = vec![0.0f64; nodes.len()];
        let mut level_fs = vec![0.0f64; nodes.len()];
        effective[0] = 1.0;
        for i in 1..nodes.len() {
            let n = &nodes[i];
            let pu = usage[n.parent.expect("non-root").0 as usize];
            effective[i] = if pu > 0.0 { usage[i] / pu } else { 0.0 };
            level_fs[i] = if n.share == 0 {
                0.0
            } else if usage[i] == 0.0 {
                f64::INFINITY
            } else if effective[i] == 0.0 {
                f64::MAX // usage so small against its siblings' that U underflowed
            } else {
                (n.norm_share / effective[i]).min(f64::MAX)
            };
        }
        let leaf_count = tree.leaves().len() as u32;
        let mut r = Ranker {
            tree,
            keys: level_fs.iter().map(|&x| tie_key(x)).collect(),
            rank: leaf_count,
            rank_no_ties: leaf_count,
            out_rank: vec![0; tree.leaves().len()],
            order: Vec::with_capacity(tree.leaves().len()),
        };
        r.rank_siblings(tree.node(Tree::ROOT).children.clone(), false);
        let (rank, order) = (r.out_rank, r.order);
        FairTree {
            usage,
            effective,
            level_fs,
            rank,
            order,
        }
    }

    /// Rank of a leaf, from `L` (first) down to 1; tied leaves share one.
    pub fn rank(&self, leaf: LeafId) -> u32 {
        self.rank[leaf.0 as usize]
    }

    /// Fair-share factor of a leaf: rank / L, in (0, 1].
    pub fn factor(&self, leaf: LeafId) -> f64 {
        f64::from(self.rank(leaf)) / self.rank.len() as f64
    }

    /// Leaves, best first (ties in walk order).
    pub fn order(&self) -> &[LeafId] {
        &self.order
    }

    /// Level FS of a node (the root's is reported as infinity: it has no
    /// siblings).
    pub fn level_fs(&self, node: NodeId) -> LevelFs {
        if node == Tree::ROOT {
            LevelFs(f64::INFINITY)
        } else {
            LevelFs(self.level_fs[node.0 as usize])
        }
    }

    /// Charged usage of a node's subtree (the unit of `leaf_usage`).
    pub fn usage(&self, node: NodeId) -> f64 {
        self.usage[node.0 as usize]
    }

    /// Usage as a fraction of the parent's (sshare's `EffectvUsage` under
    /// Fair Tree); 1 for the root.
    pub fn effective_usage(&self, node: NodeId) -> f64 {
        self.effective[node.0 as usize]
    }
}

/// Monotone key of a Level FS >= 0, rounded to 40 significant bits:
/// equal keys = tied. Positive floats order like their bit patterns.
fn tie_key(x: f64) -> u64 {
    if x.is_infinite() {
        u64::MAX
    } else {
        (x.max(0.0).to_bits() + (1 << 11)) >> 12
    }
}

impl Ranker<'_> {
    fn cmp(&self, a: NodeId, b: NodeId) -> Ordering {
        let (na, nb) = (self.tree.node(a), self.tree.node(b));
        self.keys[b.0 as usize]
            .cmp(&self.keys[a.0 as usize])
            .then(nb.is_leaf().cmp(&na.is_leaf()))
            .then(na.name.cmp(&nb.name))
            .then(a.cmp(&b))
    }

    /// fair_tree.c's `_calc_tree_fs`: `account_tied` = this list's parent
    /// was tied with the leaf ranked just before it.
    fn rank_siblings(&mut self, mut siblings: Vec<NodeId>, account_tied: bool) {
        siblings.sort_by(|&a, &b| self.cmp(a, b));
        let mut prev: Option<u64> = None;
        let mut i = 0;
        while i < siblings.len() {
            let id = siblings[i];
            let key = self.keys[id.0 as usize];
            let tied = if i == 0 {
                account_tied
            } else {
                prev == Some(key)
            };
            prev = Some(key);
            let node = self.tree.node(id);
            if let Some(leaf) = node.leaf {
                if !tied {
                    self.rank = self.rank_no_ties;
                }
                self.out_rank[leaf.0 as usize] = self.rank;
                self.order.push(leaf);
                self.rank_no_ties -= 1;
                i += 1;
                continue;
            }
            // Interior: merge the children of every sibling interior node
            // tied with this one (rule 2), then recurse.
            let mut children = node.children.clone();
            let mut j = i + 1;
            while j < siblings.len() {
                let next = self.tree.node(siblings[j]);
                if next.is_leaf() || self.keys[siblings[j].0 as usize] != key {
                    break;
                }
                children.extend_from_slice(&next.children);
                j += 1;
            }
            self.rank_siblings(children, tied);
            i = j;
        }
    }
}

#[cfg(test)]
mod tests;
