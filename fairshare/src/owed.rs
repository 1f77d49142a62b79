//! The one ordering rule between teams: the owed band.
//!
//! # Rule
//! A pending allocated job's priority band ([`crate::priority::Band`]) is
//! set by what its team is *owed now* and by its team's use over the
//! window, never by the job's shape:
//! 1. Each leaf's pending allocated jobs are taken in the team's own
//!    order ([`Queued::key`]: its debug work first, then by eligible time).
//!    Leaves are taken in Fair Tree rank order over the window, most
//!    under-served first. Each job of a leaf joins the leaf's *owed prefix*
//!    while the leaf and every group above it still have room: the node's
//!    entitlement not yet covered by what its leaves hold within their own
//!    ([`Entitlements::node_rooms`]; entitlement: [`crate::entitlement`], capacity
//!    water-filled down the tree against demand), less the GPUs of the jobs
//!    already in a prefix below `n`. A job that fits every room is band 3
//!    (*owed*); the first job that does not fit one of them, while every
//!    room is still positive, is band 2 (*crossing*: it takes the rest of
//!    the team's entitlement and a little more); the prefix ends there.
//! 2. A team's debug work ([`crate::priority::PriorityWeights::is_debug`])
//!    may also count as room the GPUs the team already holds without a
//!    contract ([`Tradeable`]): its allocated jobs past their minimum
//!    runtime, with requeues left. The team pays for that debug
//!    work with its own work: its batch work is traded by a preemption
//!    inside the team ([`crate::preempt`], rule 4), its own debug work ends
//!    within `short_max_time` and its GPUs go to the team's next debug job
//!    first.
//! 3. A *claim*: the head job of a leaf that is below its share of use
//!    over the window at every level (Level FS at least 1 at the leaf and at
//!    each group above it) and that is larger than the leaf's static share
//!    (allocation x capacity) is band 3. Such a job can never fit its
//!    leaf's room while other teams hold the cluster; without the claim a
//!    team whose honest work is one job larger than its share would wait
//!    for the whole cluster to drain.
//! 4. Every other allocated job is band 1, the free tier band 0. Inside a
//!    band, the window's Fair Tree rank orders the teams, then the
//!    within-team score ([`crate::priority`]).
//!
//! # Why no shape and no split gets around it
//! The room is the entitlement, which is the team's share of the capacity
//! water-filled against demand, less what the team already holds: the
//! sum of a team's owed jobs never exceeds what it is entitled to now (plus
//! one crossing job), whatever the size, duration, arrival pattern or
//! account of its jobs. A team that just used the cluster and whose jobs
//! just ended has room again only up to its entitlement now, and it
//! reaches the owed band only while it holds less than that: its history
//! lowers its rank in every band, and its jobs past that room are band 1
//! behind every other team's owed work. Splitting a team's work over many
//! accounts gives no more room: the room of every group above the leaves
//! bounds them together. Debug work and sweeps order jobs *inside* the
//! team's prefix only. A claim requires the team to be below its window
//! share at every level, which only using less than its share buys.
//!
//! # Termination
//! The bands are a function of one snapshot (load, ranks, queues); they
//! decide the queue order, never a preemption by themselves
//! ([`crate::preempt::verdict`] keeps its own argument: what strictly
//! increases with each preemption).

use crate::entitlement::Entitlements;
use crate::fair_tree::FairTree;
use crate::priority::Band;
use crate::tree::{LeafId, Tree};

/// GPUs compared with a room: tolerance of the real-valued entitlement.
const EPS: f64 = 1e-9;

/// One pending allocated job, as the owed band sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queued {
    /// Slurm job id (any unique id).
    pub id: u64,
    /// Its account's leaf.
    pub leaf: LeafId,
    /// GPUs it asks for (all nodes).
    pub gpus: u64,
    /// True for debug work ([`crate::priority::PriorityWeights::is_debug`]).
    pub debug: bool,
    /// When it became eligible, epoch seconds.
    pub eligible: u64,
}

impl Queued {
    /// The team's own order: debug work first, then by eligible time, then
    /// by id (Slurm's submit order).
    pub fn key(&self) -> (bool, u64, u64) {
        (!self.debug, self.eligible, self.id)
    }
}

/// Per leaf, GPUs of its own running allocated jobs past their minimum
/// runtime that have requeues left; indexed by leaf, missing leaves have
/// none.
pub type Tradeable = [u64];

/// The bands of one snapshot: per leaf, the last job of its owed prefix
/// (by [`Queued::key`]), its crossing job and its claim.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwedBands {
    last: Vec<Option<(bool, u64, u64)>>,
    crossing: Vec<Option<u64>>,
    claim: Vec<Option<u64>>,
}

impl OwedBands {
    /// The band of an allocated pending job of `leaf` with [`Queued::key`]
    /// `key` and id `id`: [`Band::Owed`], [`Band::Crossing`] or
    /// [`Band::Allocated`].
    pub fn band(&self, leaf: LeafId, key: (bool, u64, u64), id: u64) -> Band {
        let l = leaf.0 as usize;
        if self.claim.get(l).copied().flatten() == Some(id) {
            return Band::Owed;
        }
        match self.last.get(l).copied().flatten() {
            Some(last) if key <= last => {
                if self.crossing.get(l).copied().flatten() == Some(id) {
                    Band::Crossing
                } else {
                    Band::Owed
                }
            }
            _ => Band::Allocated,
        }
    }
}

/// True if the leaf and each group above it use at most their share of
/// the window: Level FS at least 1 at every level of `fair`, the Fair Tree
/// of `tree` ([`crate::fair_tree`]).
pub fn below_window_share(tree: &Tree, fair: &FairTree, leaf: LeafId) -> bool {
    let mut n = tree.leaves().get(leaf.0 as usize).copied();
    while let Some(id) = n {
        let node = tree.node(id);
        if node.parent.is_none() {
            return true;
        }
        if fair.level_fs(id).0 < 1.0 {
            return false;
        }
        n = node.parent;
    }
    false
}

/// The owed band of every pending allocated job (module doc) on `load`,
/// with the window's ranks and Level FS of `fair` (the Fair Tree of
/// `tree`). `queued` is sorted in place (by leaf, then [`Queued::key`]);
/// `tradeable` as [`Tradeable`]. Called through
/// [`crate::Engine::owed_bands`].
pub fn owed_bands(
    tree: &Tree,
    fair: &FairTree,
    load: &Entitlements,
    queued: &mut [Queued],
    tradeable: &Tradeable,
) -> OwedBands {
    let leaves = tree.leaves().len();
    let mut out = OwedBands {
        last: vec![None; leaves],
        crossing: vec![None; leaves],
        claim: vec![None; leaves],
    };
    queued.sort_unstable_by_key(|q| (q.leaf, q.key()));
    let mut room = load.node_rooms();
    let cap = load.capacity() as f64;
    // Each leaf's jobs: a range of `queued`.
    let mut ranges: Vec<(LeafId, usize, usize)> = Vec::new();
    let mut i = 0;
    while i < queued.len() {
        let leaf = queued[i].leaf;
        let j = i + queued[i..].iter().take_while(|q| q.leaf == leaf).count();
        if (leaf.0 as usize) < leaves {
            ranges.push((leaf, i, j));
        }
        i = j;
    }
    ranges.sort_by_key(|&(leaf, i, _)| (std::cmp::Reverse(fair.rank(leaf)), leaf, i));
    for (leaf, i, j) in ranges {
        let l = leaf.0 as usize;
        let head = &queued[i];
        let share = tree.node(tree.leaf_node(leaf)).allocation * cap;
        if head.gpus as f64 > share + EPS && below_window_share(tree, fair, leaf) {
            out.claim[l] = Some(head.id);
        }
        let path = load.path(leaf);
        let mut trade = tradeable.get(l).copied().unwrap_or(0) as f64;
        for q in &queued[i..j] {
            let g = q.gpus as f64;
            let fits = path.iter().all(|&n| room[n] + EPS >= g);
            if q.debug && !fits && trade + EPS >= g {
                trade -= g;
                out.last[l] = Some(q.key());
                continue;
            }
            if path.iter().any(|&n| room[n] <= EPS) {
                break;
            }
            for &n in &path {
                room[n] -= g;
            }
            out.last[l] = Some(q.key());
            if !fits {
                out.crossing[l] = Some(q.id);
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
