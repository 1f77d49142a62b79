//! The victim order as one `u32`, for Slurm's `PREEMPT_DATA_PRIO` (the
//! preempt plugin): slurmctld takes candidates in *ascending* order until
//! the preemptor fits, so the number packs the engine's candidate order
//! ([`Engine::choose_victims`]) most significant first:
//!
//! ```text
//!  bit 31         bit 30        bits 29..15              bits 14..0
//! [ no-requeue ] [ allocated ] [ account rank, 15 bits ] [ work lost, 15 bits ]
//! ```
//! 1. **no-requeue**: 1 for `--no-requeue` jobs (preempting them kills
//!    them), so they come last;
//! 2. **allocated**: 0 for the free tier (minimum runtime 0), so free-tier
//!    jobs go before every allocated one;
//! 3. **account rank**: the Fair Tree rank of the job's leaf, 15 bits as in
//!    the priority ([`crate::priority`]; ranks are 1..=32767, 0 for an
//!    account not in the tree): the most over-served account (lowest rank)
//!    first;
//! 4. **work lost**: GPUs x running seconds / 60 (GPU-minutes, rounded
//!    down), saturating at 32767 (about 546 GPU-hours): least work first.
//!
//! Ties (same account, same work) are equal numbers; Slurm keeps its own
//! order between them, where the engine breaks ties by job id. Saturation
//! only makes unequal jobs tie, never reverses two of them, and no field
//! can spill into the one above it.

use super::RunningJob;
use crate::contract::Tier;
use crate::engine::Engine;
use crate::priority::RANK_MASK;

const NO_REQUEUE_SHIFT: u32 = 31;
const ALLOCATED_SHIFT: u32 = 30;
const RANK_SHIFT: u32 = 15;
const WORK_MASK: u32 = (1 << 15) - 1;

/// Packs the victim order (see the module documentation): `requeue` false
/// for `--no-requeue`, the job's `tier`, its account's `rank` and the work
/// it would lose in GPU-seconds.
pub fn pack_victim_order(requeue: bool, tier: Tier, rank: u32, work_gpu_seconds: u128) -> u32 {
    let no_requeue = u32::from(!requeue) << NO_REQUEUE_SHIFT;
    let allocated = u32::from(tier == Tier::Allocated) << ALLOCATED_SHIFT;
    let rank = rank.min(RANK_MASK) << RANK_SHIFT;
    let work = (work_gpu_seconds / 60).min(u128::from(WORK_MASK)) as u32;
    no_requeue | allocated | rank | work
}

impl Engine {
    /// A running job's place in the victim order at `now` (ascending =
    /// preempted first), for `PREEMPT_DATA_PRIO`. `job.alloc` gives its
    /// GPUs (any node numbering: only their sum counts).
    pub fn victim_order(&self, job: &RunningJob<'_>, now: u64) -> u32 {
        let rank = self
            .leaf_of(job.account)
            .map_or(0, |l| self.fair_tree().rank(l));
        pack_victim_order(
            job.requeue,
            Tier::of(job.contract.min_runtime),
            rank,
            job.work(now),
        )
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::tests::{engine, running, NOW};
    use super::*;
    use crate::preempt::NodeGpus;

    const A: Tier = Tier::Allocated;
    const U: Tier = Tier::Unallocated;
    const MAX_WORK: u128 = 60 * WORK_MASK as u128;

    #[test]
    fn fields_and_their_boundaries() {
        assert_eq!(pack_victim_order(true, U, 0, 0), 0);
        assert_eq!(pack_victim_order(false, U, 0, 0), 1 << 31);
        assert_eq!(pack_victim_order(true, A, 0, 0), 1 << 30);
        assert_eq!(pack_victim_order(true, U, 1, 0), 1 << 15);
        // Work in whole GPU-minutes.
        assert_eq!(pack_victim_order(true, U, 0, 59), 0);
        assert_eq!(pack_victim_order(true, U, 0, 60), 1);
        // The largest rank (15 bits, as in the priority) keeps its value.
        assert_eq!(
            pack_victim_order(true, U, RANK_MASK, 0),
            RANK_MASK << 15,
            "rank 32767 is not cut to 14 bits"
        );
        assert_ne!(
            pack_victim_order(true, A, RANK_MASK, 0),
            pack_victim_order(true, A, RANK_MASK - 1, 0)
        );
    }

    #[test]
    fn saturation_never_spills_into_the_field_above() {
        let top = pack_victim_order(true, A, u32::MAX, u128::MAX);
        assert_eq!(top, (1 << 30) | (RANK_MASK << 15) | WORK_MASK);
        assert_eq!(pack_victim_order(true, U, u32::MAX, 0) & (1 << 30), 0);
        assert_eq!(pack_victim_order(true, U, 0, u128::MAX), WORK_MASK);
        assert_eq!(
            pack_victim_order(true, U, 0, MAX_WORK),
            pack_victim_order(true, U, 0, MAX_WORK + 1_000_000),
            "more work than the field holds ties, it does not wrap"
        );
    }

    #[test]
    fn order_of_the_fields() {
        // --no-requeue last: after a free-tier job, after the most
        // under-served allocated job with the most work.
        let last_requeueable = pack_victim_order(true, A, RANK_MASK, u128::MAX);
        assert!(pack_victim_order(false, U, 0, 0) > last_requeueable);
        // Free tier first: before the most over-served allocated job.
        assert!(
            pack_victim_order(true, U, RANK_MASK, u128::MAX) < pack_victim_order(true, A, 0, 0)
        );
        // Lower rank (more over-served) first, whatever the work.
        assert!(pack_victim_order(true, A, 1, u128::MAX) < pack_victim_order(true, A, 2, 0));
        // Then least work first.
        assert!(pack_victim_order(true, A, 2, 60) < pack_victim_order(true, A, 2, 120));
        // Ties are equal.
        assert_eq!(
            pack_victim_order(true, A, 3, 600),
            pack_victim_order(true, A, 3, 659)
        );
    }

    #[test]
    fn an_engine_packs_its_own_ranks() {
        let engine = engine(); // worked example: ranks b1 4, b2 3, a2 2, a1 1
        let two = [NodeGpus { node: 0, gpus: 2 }];
        let a1 = engine.victim_order(&running(1, "a1", 3600, 7200, &two), NOW);
        assert_eq!(a1, (1 << 30) | (1 << 15) | 240);
        let b1 = engine.victim_order(&running(1, "b1", 3600, 60, &two), NOW);
        assert_eq!(b1, (1 << 30) | (4 << 15) | 2);
        let free = engine.victim_order(&running(1, "b1", 0, 7200, &two), NOW);
        assert_eq!(free, (4 << 15) | 240);
        let unknown = engine.victim_order(&running(1, "nobody", 3600, 0, &two), NOW);
        assert_eq!(unknown, 1 << 30);
        let mut kept = running(1, "a1", 0, 0, &two);
        kept.requeue = false;
        assert_eq!(engine.victim_order(&kept, NOW), (1 << 31) | (1 << 15));
    }

    proptest! {
        /// The packed order never contradicts the engine's candidate key
        /// (no-requeue, tier, rank, work): a smaller number is a smaller
        /// key; only saturation turns a smaller key into a tie.
        #[test]
        fn packing_keeps_the_engines_order(
            a in (any::<bool>(), any::<bool>(), 0u32..40_000, 0u128..4_000_000),
            b in (any::<bool>(), any::<bool>(), 0u32..40_000, 0u128..4_000_000),
        ) {
            let tier = |allocated| if allocated { A } else { U };
            let key = |(r, t, rank, w): (bool, bool, u32, u128)| {
                (!r, tier(t), rank.min(RANK_MASK), w / 60)
            };
            let pack = |(r, t, rank, w): (bool, bool, u32, u128)| {
                pack_victim_order(r, tier(t), rank, w)
            };
            if pack(a) < pack(b) {
                prop_assert!(key(a) < key(b));
            }
            if key(a) < key(b) {
                prop_assert!(pack(a) <= pack(b));
            }
        }
    }
}
