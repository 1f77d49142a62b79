//! The victim order as one `u32`, for Slurm's `PREEMPT_DATA_PRIO` (the
//! preempt plugin): slurmctld takes candidates in *ascending* order until
//! the preemptor fits, so the number packs the engine's candidate order
//! ([`Engine::victim_key`]) most significant first:
//!
//! ```text
//!  bit 31         bit 30        bits 29..28   bits 27..0
//! [ no-requeue ] [ allocated ] [ requeues ] [ work lost, 28 bits ]
//! ```
//! 1. **no-requeue**: 1 for `--no-requeue` jobs (preempting them kills
//!    them), so they come last;
//! 2. **allocated**: 0 for the free tier (minimum runtime 0), so free-tier
//!    jobs go before every allocated one;
//! 3. **requeues**: times an allocated job has been requeued, saturating
//!    at 3: the jobs requeued fewest times first (0 for the free tier);
//! 4. **work lost**: GPUs x running seconds / 60 (GPU-minutes, rounded
//!    down), saturating at 2^28 - 1 (about 4.5 million GPU-hours): least
//!    work (the youngest jobs) first.
//!
//! Which jobs are candidates at all is the preempt rule's
//! ([`crate::preempt`], asked per job by `preempt_p_preemptable`). Ties are
//! equal numbers; Slurm keeps its own order between them, where the engine
//! breaks ties by job id. Saturation only makes unequal jobs tie, never
//! reverses two of them, and no field can spill into the one above it.

use super::RunningJob;
use crate::contract::Tier;
use crate::engine::Engine;

const NO_REQUEUE_SHIFT: u32 = 31;
const ALLOCATED_SHIFT: u32 = 30;
const REQUEUES_SHIFT: u32 = 28;
const REQUEUES_MAX: u32 = 3;
const WORK_MASK: u32 = (1 << 28) - 1;

/// Packs the victim order (see the module documentation): `requeue` false
/// for `--no-requeue`, the job's `tier`, the times it has been requeued and
/// the work it would lose in GPU-seconds.
pub fn pack_victim_order(requeue: bool, tier: Tier, requeues: u32, work_gpu_seconds: u128) -> u32 {
    let no_requeue = u32::from(!requeue) << NO_REQUEUE_SHIFT;
    let allocated = u32::from(tier == Tier::Allocated) << ALLOCATED_SHIFT;
    let requeues = requeues.min(REQUEUES_MAX) << REQUEUES_SHIFT;
    let work = (work_gpu_seconds / 60).min(u128::from(WORK_MASK)) as u32;
    no_requeue | allocated | requeues | work
}

impl Engine {
    /// A running job's place in the victim order at `now` (ascending =
    /// preempted first), for `PREEMPT_DATA_PRIO`. `job.alloc` gives its
    /// GPUs (any node numbering: only their sum counts).
    pub fn victim_order(&self, job: &RunningJob<'_>, now: u64) -> u32 {
        let (no_requeue, tier, requeues, work, _) = self.victim_key(job, now);
        pack_victim_order(!no_requeue, tier, requeues, work)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::tests::{pair, running, NOW};
    use super::*;
    use crate::preempt::NodeGpus;

    const A: Tier = Tier::Allocated;
    const U: Tier = Tier::Unallocated;

    #[test]
    fn fields_and_their_boundaries() {
        assert_eq!(pack_victim_order(true, U, 0, 0), 0);
        assert_eq!(pack_victim_order(true, A, 0, 0), 1 << 30);
        assert_eq!(pack_victim_order(false, U, 0, 0), 1 << 31);
        assert_eq!(pack_victim_order(true, U, 0, 59), 0, "whole GPU-minutes");
        assert_eq!(pack_victim_order(true, U, 0, 60), 1);
        // Saturation stays inside the work field.
        assert_eq!(
            pack_victim_order(true, A, 0, u128::MAX),
            (1 << 30) | WORK_MASK
        );
        assert_eq!(pack_victim_order(true, A, 2, 0), (1 << 30) | (2 << 28));
        assert_eq!(pack_victim_order(false, A, 9, u128::MAX), u32::MAX);
    }

    #[test]
    fn order_of_the_fields() {
        let last_free = pack_victim_order(true, U, 0, u128::MAX);
        assert!(
            last_free < pack_victim_order(true, A, 0, 0),
            "free tier first"
        );
        let last_requeueable = pack_victim_order(true, A, 3, u128::MAX);
        assert!(
            last_requeueable < pack_victim_order(false, U, 0, 0),
            "no-requeue last"
        );
        assert!(
            pack_victim_order(true, A, 0, u128::MAX) < pack_victim_order(true, A, 1, 0),
            "fewest requeues first"
        );
        assert!(pack_victim_order(true, A, 0, 600) < pack_victim_order(true, A, 0, 660));
    }

    #[test]
    fn an_engine_packs_its_own_key() {
        let engine = pair();
        let two = [NodeGpus { node: 0, gpus: 2 }];
        assert_eq!(
            engine.victim_order(&running(1, "a", 3600, 7200, &two), NOW),
            (1 << 30) | 240
        );
        assert_eq!(
            engine.victim_order(&running(1, "b", 0, 7200, &two), NOW),
            240
        );
        let mut kept = running(1, "a", 0, 0, &two);
        kept.requeue = false;
        assert_eq!(engine.victim_order(&kept, NOW), 1 << 31);
    }

    proptest! {
        /// The packed order never contradicts the engine's candidate key
        /// (no-requeue, tier, requeues, work): a smaller number is a smaller key;
        /// only saturation turns a smaller key into a tie.
        #[test]
        fn packing_keeps_the_engines_order(
            a in (any::<bool>(), any::<bool>(), 0u32..6, 0u128..u128::from(u64::MAX)),
            b in (any::<bool>(), any::<bool>(), 0u32..6, 0u128..u128::from(u64::MAX)),
        ) {
            let tier = |allocated| if allocated { A } else { U };
            let key = |(r, t, q, w): (bool, bool, u32, u128)| (!r, tier(t), q, w / 60);
            let pack = |(r, t, q, w): (bool, bool, u32, u128)| pack_victim_order(r, tier(t), q, w);
            if pack(a) < pack(b) {
                prop_assert!(key(a) < key(b));
            }
            if key(a) < key(b) {
                prop_assert!(pack(a) <= pack(b));
            }
        }
    }
}
