//! The debug lane: a fast lane for debug work, only as far as its team's
//! fair share allows. Decides a job's priority band ([`crate::priority`]).
//!
//! # Rule
//! *Debug work* is an allocated job of at most `short_max_gpus` GPUs with a
//! time limit of at most `short_max_time` that is not part of a sweep
//! ([`crate::sweep`]). A leaf's *lane is open* while both hold:
//! 1. **within its share**: it and every group above it (the root aside)
//!    hold fewer GPUs than their entitlement now ([`crate::entitlement`])
//!    plus `[priority] short_allowance` (GPUs, or a share of the
//!    entitlement; at least `short_max_gpus` GPUs, the default);
//! 2. **yielding to owed work**: no *other* leaf is *held back*: below its
//!    entitlement, with a pending allocated job (batch work: not of the
//!    short shape, so neither debug work nor a sweep) that is
//!    first in the queue after debug work, has waited at least
//!    `[priority] short_yield` (default 3 min), asks for more GPUs than
//!    are free and for no more than are free plus those other leaves'
//!    running short jobs hold ([`HeldBack`]; the leaf's longest-waiting
//!    such job is the one tested, and it holds the lanes shut at most
//!    `short_max_time`, once). Then debug work is what stands between that
//!    job and its start, and every other leaf's debug work waits behind it
//!    until the short jobs it waits for have ended.
//!
//! Bands, highest first: *short* (debug work of a leaf whose lane is
//! open), *entitled* (every other allocated job of a leaf below its
//! entitlement but sweeps), *allocated* (every other allocated job), *free*.
//! Inside one account debug work goes first, whatever the band. A sweep's
//! jobs never preempt ([`crate::sweep`]), so they are never in the entitled
//! band (the band of the jobs that may preempt): there, one that cannot
//! start would stop the scheduler's pass before its leaf's batch work got
//! the chance to preempt.
//!
//! The same rule bounds what debug work may take by preemption: a short
//! preemptor keeps its privileges ([`crate::preempt::verdict`], rule 4:
//! its own leaf's jobs, other leaves' down to `short_max_gpus` below their
//! entitlement, after `[preempt] short_wait`) only while its lane is open;
//! otherwise it is judged as any other preemptor.
//!
//! # Why no job shape gets around it
//! - **Owed work waits for other teams' debug work at most `short_yield`
//!   plus `short_max_time`.** A job of a leaf below its entitlement that
//!   fits the cluster and is held back by other leaves' short jobs closes
//!   their lanes once it has waited `short_yield`: their debug work then
//!   sorts below it, backfill plans it first and reserves its nodes, and
//!   the short jobs running on them end within `short_max_time` (Slurm
//!   kills them at their time limit; none is started in the reservation).
//!   Their number, arrival rate or size changes nothing: while they hold
//!   what the job needs, the lanes stay shut. Before this rule the short
//!   band sorted above every band, and a stream of 1-GPU jobs kept a 16-GPU
//!   job of a team owed 8 GPUs waiting as long as the stream lasted.
//! - **The lane ends at the allowance.** A leaf holding its entitlement
//!   plus `short_allowance` or more has no lane: its debug work sorts
//!   with its batch work, by the window's fair share. Debug work started
//!   through the lane can take a leaf at most `short_allowance +
//!   short_max_gpus - 1` GPUs above its entitlement, plus the jobs that
//!   start between two snapshots (`sync.interval`).
//! - **Sweeps are throughput work.** A sweep's jobs are not debug work:
//!   they sort with their leaf's batch work, and never preempt.
//! - **Splitting work over many accounts gains nothing.** The allowance
//!   holds at every group above the leaf as well, so a team of many small
//!   accounts has one allowance, not one per account.
//! - **Cutting training into short jobs gains nothing.** Short jobs of a
//!   leaf at or above its entitlement plus the allowance sort as batch
//!   work; below it they are the leaf's own entitlement or its allowance.
//!
//! # Termination
//! The rule orders the queue and removes preemptions (a short preemptor
//! whose lane is closed loses its privileges); it adds none. The argument
//! of [`crate::preempt::verdict`] (what strictly increases with every
//! preemption) is unchanged: a short preemptor still starts a short job.
//! Whether lanes are shut is decided once per snapshot from the load, so
//! no decision within a snapshot can flip it.

use crate::contract::Tier;
use crate::entitlement::Entitlements;
use crate::priority::{Band, PriorityWeights};
use crate::tree::LeafId;

/// The band of an allocated or free-tier job (module doc): `tier`; `debug`
/// for debug work ([`PriorityWeights::is_debug`]); `sweep` for a job of a
/// sweep; `below` if its leaf holds fewer GPUs than its entitlement;
/// `lane_open` if its leaf's lane is open ([`Entitlements::lane_open`]).
pub fn band(tier: Tier, debug: bool, sweep: bool, below: bool, lane_open: bool) -> Band {
    if tier == Tier::Unallocated {
        Band::Free
    } else if debug && lane_open {
        Band::Short
    } else if below && !sweep {
        Band::Entitled
    } else {
        Band::Allocated
    }
}

impl PriorityWeights {
    /// The band of a job of `tier`, `gpus` GPUs, `time_limit` seconds and
    /// `sweep` (module doc), whose leaf is `below` its entitlement and has
    /// its lane open or not.
    pub fn band(
        &self,
        tier: Tier,
        gpus: u64,
        time_limit: Option<u64>,
        sweep: bool,
        below: bool,
        lane_open: bool,
    ) -> Band {
        band(
            tier,
            self.is_debug(tier, gpus, time_limit, sweep),
            sweep && self.is_short(tier, gpus, time_limit),
            below,
            lane_open,
        )
    }
}

/// A leaf's longest-waiting pending allocated job of batch work (not of the
/// short shape: neither debug work nor a sweep, which never preempts):
/// its id, when it became eligible (epoch seconds) and the GPUs it asks
/// for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Oldest {
    /// Its job id (any id unique among pending jobs).
    pub id: u64,
    /// Eligible since, epoch seconds.
    pub eligible: u64,
    /// GPUs it asks for.
    pub gpus: u64,
}

impl Oldest {
    /// Keeps in `slot` the longer-waiting of what it holds and `job` (the
    /// first seen on a tie).
    pub fn keep(slot: &mut Option<Oldest>, job: Oldest) {
        if slot.is_none_or(|o| job.eligible < o.eligible) {
            *slot = Some(job);
        }
    }
}

/// Rule 2 of the module doc, kept from one load count to the next. A leaf
/// is held back while its longest-waiting pending allocated job of batch
/// work ([`Oldest`]) is the first job of the queue after debug
/// work (its leaf is below its entitlement and ranks first of those: if
/// another is ahead of it, it waits for that one, not for debug work), has
/// waited `short_yield`, lacks GPUs (it
/// asks for more than are free) and would have them with other leaves'
/// running short jobs gone; and for one count more once those are gone and
/// its GPUs are free, so that it takes them before any other leaf's debug
/// work does. One job holds its leaf back for at most `short_max_time`
/// from its first count, once: by then every short job that ran when it
/// began has ended, so what still keeps it waiting is not debug work.
#[derive(Debug, Clone, Default)]
pub struct HeldBack {
    by_leaf: Vec<Hold>,
}

/// One leaf's hold: the job holding its lane-shutting, since when (epoch
/// seconds), and whether its one count of grace is spent; or the job that
/// has had its hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Hold {
    job: Option<(u64, u64, bool)>,
    spent: Option<u64>,
}

impl HeldBack {
    /// Decides at `now` (epoch seconds) and marks on `load` each leaf held
    /// back. `free`: GPUs no running job holds; `short_running[leaf]`: GPUs
    /// its running allocated jobs of the short shape hold (sweeps included:
    /// they are never preempted either); `oldest[leaf]`: see [`Oldest`];
    /// `rank`: each leaf's Fair Tree rank (higher first). Missing entries
    /// count as none.
    #[allow(clippy::too_many_arguments)]
    pub fn update(
        &mut self,
        load: &mut Entitlements,
        weights: &PriorityWeights,
        free: u64,
        short_running: &[u64],
        oldest: &[Option<Oldest>],
        rank: impl Fn(LeafId) -> u32,
        now: u64,
    ) {
        load.clear_held_back();
        self.by_leaf.resize(oldest.len(), Hold::default());
        let total: u64 = short_running.iter().sum();
        // The first job of the queue after debug work: of the leaves below
        // their entitlement, the best-ranked one's (oldest first on a tie).
        let first = oldest
            .iter()
            .enumerate()
            .filter_map(|(l, o)| o.map(|o| (LeafId(l as u32), o)))
            .filter(|&(l, _)| load.below(l))
            .max_by_key(|&(l, o)| (rank(l), std::cmp::Reverse(o.eligible)))
            .map(|(l, _)| l);
        for (l, o) in oldest.iter().enumerate() {
            let leaf = LeafId(l as u32);
            let hold = &mut self.by_leaf[l];
            let Some(o) = o.filter(|o| {
                // `first` is below its entitlement.
                first == Some(leaf)
                    && now.saturating_sub(o.eligible) >= weights.short_yield
                    && hold.spent != Some(o.id)
            }) else {
                hold.job = None;
                continue;
            };
            let others = total - short_running.get(l).copied().unwrap_or(0);
            let same = hold.job.filter(|h| h.0 == o.id);
            hold.job = if same.is_some_and(|h| now >= h.1 + weights.short_max_time) {
                // Every short job running when it began has ended: what
                // still holds the job back is not debug work.
                hold.spent = Some(o.id);
                None
            } else if o.gpus > free && o.gpus <= free + others {
                // Other leaves' short jobs hold what it lacks.
                Some((o.id, same.map_or(now, |h| h.1), false))
            } else if same.is_some_and(|h| !h.2) && o.gpus <= free {
                // They just ended: one count more, so that it takes the
                // GPUs before any other leaf's debug work.
                same.map(|h| (h.0, h.1, true))
            } else {
                None
            };
            if hold.job.is_some() {
                load.hold_back(leaf);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::priority::{Allowance, ShortAllowance};
    use crate::tree::{NodeSpec, Tree};

    #[test]
    fn debug_work_goes_first_while_its_lane_is_open() {
        let w = PriorityWeights {
            short_max_gpus: 2,
            ..PriorityWeights::default()
        };
        let a = Tier::Allocated;
        assert_eq!(
            w.band(a, 16, Some(4 * 3600), false, true, true),
            Band::Entitled
        );
        assert_eq!(w.band(a, 1, Some(1800), false, false, true), Band::Short);
        assert_eq!(w.band(a, 1, Some(1800), false, true, true), Band::Short);
        assert_eq!(w.band(a, 1, Some(1800), false, true, false), Band::Entitled);
        assert_eq!(
            w.band(a, 1, Some(1800), false, false, false),
            Band::Allocated
        );
        assert_eq!(
            w.band(a, 1, Some(1800), true, false, true),
            Band::Allocated,
            "a sweep"
        );
        assert_eq!(
            w.band(a, 1, Some(1800), true, true, true),
            Band::Allocated,
            "a sweep of a leaf below its entitlement: it never preempts"
        );
        assert_eq!(
            w.band(a, 3, Some(1800), false, false, true),
            Band::Allocated
        );
        assert_eq!(w.band(a, 1, None, false, false, true), Band::Allocated);
        assert_eq!(
            w.band(Tier::Unallocated, 1, Some(60), false, true, true),
            Band::Free
        );
        let off = PriorityWeights::default();
        assert_eq!(
            off.band(a, 1, Some(60), false, false, true),
            Band::Allocated
        );
        assert!(Band::Short > Band::Entitled && Band::Entitled > Band::Allocated);
    }

    #[test]
    fn owed_work_held_back_by_debug_work_shuts_the_other_lanes() {
        // s streams 1-GPU debug jobs on all 16 GPUs; h, holding none of its
        // 8, waits for a 16-GPU job.
        let tree = Tree::build(&[NodeSpec::leaf("s", 1), NodeSpec::leaf("h", 1)]).unwrap();
        let (s, h) = (LeafId(0), LeafId(1));
        let w = PriorityWeights {
            short_max_gpus: 2,
            ..PriorityWeights::default()
        };
        let job = |waited: u64| Oldest {
            id: 7,
            eligible: 10_000 - waited,
            gpus: 16,
        };
        let step = |held: &mut HeldBack, waited: u64, free: u64, short: u64| {
            let mut l = Entitlements::compute(&tree, 16, &[16 - free, 0], &[8, 16]);
            held.update(
                &mut l,
                &w,
                free,
                &[short, 0],
                &[None, Some(job(waited))],
                |_| 1,
                10_000,
            );
            l
        };
        let load = |waited, free, short| step(&mut HeldBack::default(), waited, free, short);
        // s holds 16 of its 8: its lane is shut by the allowance anyway.
        assert!(!load(0, 0, 16).lane_open(s, Allowance::gpus(2)));
        // s at 9 (within 8 + 2), 7 GPUs free: h's job is held back by the
        // debug work once it has waited short_yield, not before.
        let l = load(179, 7, 9);
        assert!(l.lane_open(s, Allowance::gpus(2)) && !l.is_held_back(h));
        let l = load(180, 7, 9);
        assert!(l.is_held_back(h) && !l.lane_open(s, Allowance::gpus(2)));
        assert!(
            l.lane_open(h, Allowance::gpus(2)),
            "the held-back leaf's own lane stays open"
        );
        // Batch work, not debug work, holds it back: nothing is shut.
        let l = load(3600, 7, 0);
        assert!(!l.is_held_back(h) && l.lane_open(s, Allowance::gpus(2)));
        // Everything free but never held back: nothing to yield (it starts).
        let l = load(3600, 16, 0);
        assert!(!l.is_held_back(h));
        // Held back, then the debug work ends: it stays held back for that
        // job one count more, so that no other leaf's debug work takes the
        // free GPUs first; then not (placement, not debug work, stops it).
        let mut held = HeldBack::default();
        assert!(step(&mut held, 600, 7, 9).is_held_back(h));
        let l = step(&mut held, 700, 16, 0);
        assert!(l.is_held_back(h) && !l.lane_open(s, Allowance::gpus(2)));
        assert!(!step(&mut held, 800, 16, 0).is_held_back(h));
        let l = load(3600, 7, 0);
        assert!(!l.is_held_back(h) && l.lane_open(s, Allowance::gpus(2)));
    }

    #[test]
    fn the_lane_closes_at_the_allowance_at_every_level() {
        // Team t (share 1) of accounts t1..t4 (equal shares) beside team u
        // (share 1), 16 GPUs, both wanting all: each team is entitled to 8,
        // each account of t to 2.
        let tree = Tree::build(&[
            NodeSpec::group(
                "t",
                1,
                (1..=4)
                    .map(|i| NodeSpec::leaf(&format!("t{i}"), 1))
                    .collect(),
            ),
            NodeSpec::leaf("u", 1),
        ])
        .unwrap();
        let leaf = |a: &str| tree.leaf_of_account(a).unwrap();
        let n = tree.leaves().len();
        let at = |held: &[(&str, u64)]| {
            let mut run = vec![0; n];
            for (a, g) in held {
                run[leaf(a).0 as usize] = *g;
            }
            Entitlements::compute(&tree, 16, &run, &vec![16; n])
        };
        // u at 9 of 8: open with an allowance of 2, closed at 10.
        assert!(at(&[("u", 9)]).lane_open(leaf("u"), Allowance::gpus(2)));
        assert!(!at(&[("u", 10)]).lane_open(leaf("u"), Allowance::gpus(2)));
        // Each account of t at 3 of 2 (each under its own 2 + 2), but the
        // team at 12 of 8: the team's allowance is spent, every lane shut.
        let l = at(&[("t1", 3), ("t2", 3), ("t3", 3), ("t4", 3)]);
        assert!(!l.lane_open(leaf("t1"), Allowance::gpus(2)));
        let l = at(&[("t1", 3), ("t2", 3), ("t3", 3)]);
        assert!(
            l.lane_open(leaf("t4"), Allowance::gpus(2)),
            "the team holds 9 of 8: under 10"
        );
        // A share of the entitlement, at least its floor: u is entitled to
        // 8, so 50% is 4 GPUs above it.
        let half = Allowance {
            gpus: 2,
            percent: 50,
        };
        assert!(at(&[("u", 11)]).lane_open(leaf("u"), half));
        assert!(!at(&[("u", 12)]).lane_open(leaf("u"), half));
        let w = PriorityWeights {
            short_max_gpus: 2,
            short_allowance: Some(ShortAllowance::Percent(10)),
            ..PriorityWeights::default()
        };
        assert_eq!(
            w.allowance(),
            Allowance {
                gpus: 2,
                percent: 10
            }
        );
        let mut l = at(&[("t1", 3), ("t2", 3), ("t3", 3), ("t4", 1)]);
        assert!(
            !l.lane_open(leaf("t4"), Allowance::gpus(2)),
            "t4 holds 1 of 2, the team 10 of 8"
        );
        l.shift(leaf("t1"), -3);
        assert!(
            l.lane_open(leaf("t4"), Allowance::gpus(2)),
            "7 of 8 after t1's 3 stopped"
        );
    }
}
