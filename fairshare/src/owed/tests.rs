use proptest::prelude::*;

use super::*;
use crate::priority::Band;
use crate::testutil::{example_engine, tree_and_usage};
use crate::{Config, Engine};

const NOW: u64 = 1_700_000_000;

fn q(id: u64, leaf: u32, gpus: u64, debug: bool, eligible: u64) -> Queued {
    Queued {
        id,
        leaf: LeafId(leaf),
        gpus,
        debug,
        eligible,
    }
}

fn band(o: &OwedBands, j: &Queued) -> Band {
    o.band(j.leaf, j.key(), j.id)
}

/// The worked example (a1, a2 under a 60; b1, b2 under b 40), 16 GPUs.
/// Window ranks: b1 4, b2 3, a2 2, a1 1.
#[test]
fn the_prefix_fits_the_room_of_the_leaf_and_every_group_above() {
    let e = example_engine(NOW);
    // Every leaf wants 8: a 60 / b 40 of 16 = 9.6 / 6.4, then a1 35 / a2 25
    // of 9.6 = 5.6 / 4.0, b1 and b2 3.2 each.
    let run = [0, 0, 0, 0];
    let pend = [8, 8, 8, 8];
    let load = Entitlements::compute(e.tree(), 16, &run, &pend);
    assert!((load.entitled(LeafId(2)) - 3.2).abs() < 1e-9);
    let mut jobs = vec![
        q(1, 2, 2, false, 10),
        q(2, 2, 1, false, 20),
        q(3, 2, 1, false, 30),
        q(4, 2, 4, false, 40),
        // Debug work goes first whatever its age.
        q(5, 0, 1, true, 99),
        q(6, 0, 4, false, 1),
        q(7, 0, 4, false, 2),
    ];
    let o = e.owed_bands(&load, &mut jobs, &[]);
    let by_id = |id: u64| *jobs.iter().find(|j| j.id == id).unwrap();
    // b1: 2 + 1 fit 3.2; the third (1 GPU) crosses it; then it ends.
    assert_eq!(band(&o, &by_id(1)), Band::Owed);
    assert_eq!(band(&o, &by_id(2)), Band::Owed);
    assert_eq!(band(&o, &by_id(3)), Band::Crossing);
    assert_eq!(band(&o, &by_id(4)), Band::Allocated);
    // a1 (35 of a's 60: 5.6 GPUs): its debug job, then 4 fit (5 <= 5.6),
    // the next 4 cross it.
    assert_eq!(band(&o, &by_id(5)), Band::Owed);
    assert_eq!(band(&o, &by_id(6)), Band::Owed);
    assert_eq!(band(&o, &by_id(7)), Band::Crossing);
    // A job the snapshot did not see (eligible after it) is allocated.
    assert_eq!(band(&o, &q(99, 0, 1, false, 1000)), Band::Allocated);
}

#[test]
fn a_team_at_its_entitlement_has_no_owed_work_but_its_debug_work_may_trade() {
    let e = example_engine(NOW);
    // b1 holds 4 (entitled 3.2): nothing of b1 is owed.
    let load = Entitlements::compute(e.tree(), 16, &[4, 4, 4, 4], &[0, 0, 4, 0]);
    let mut jobs = vec![q(1, 2, 1, true, 5), q(2, 2, 2, false, 1)];
    let o = e.owed_bands(&load, &mut jobs, &[]);
    assert_eq!(band(&o, &jobs[0]), Band::Allocated);
    assert_eq!(band(&o, &jobs[1]), Band::Allocated);
    // With 1 GPU of its own batch work past contract, the debug job is
    // owed (it takes the team's own GPU), the batch job is not.
    let o = e.owed_bands(&load, &mut jobs, &[0, 0, 1, 0]);
    let debug = *jobs.iter().find(|j| j.debug).unwrap();
    let batch = *jobs.iter().find(|j| !j.debug).unwrap();
    assert_eq!(band(&o, &debug), Band::Owed);
    assert_eq!(band(&o, &batch), Band::Allocated);
}

#[test]
fn a_group_bounds_its_leaves_together() {
    let e = example_engine(NOW);
    // Group b is entitled to 6.4 of 16; b1 and b2 each to 3.2. Splitting
    // b's work over b1 and b2 gives no more than the group's room.
    let load = Entitlements::compute(e.tree(), 16, &[5, 5, 0, 0], &[0, 0, 16, 16]);
    let mut jobs: Vec<Queued> = (0..8)
        .map(|i| q(i, 2 + (i % 2) as u32, 1, false, i))
        .collect();
    let o = e.owed_bands(&load, &mut jobs, &[]);
    let owed: u64 = jobs
        .iter()
        .filter(|j| band(&o, j) != Band::Allocated)
        .map(|j| j.gpus)
        .sum();
    assert!(owed as f64 <= load.node_rooms()[load.path(LeafId(2))[1]] + 1.0);
}

#[test]
fn a_claim_needs_a_job_larger_than_the_static_share_and_a_team_below_its_window_share() {
    // b1 has used nothing over the window (Level FS above 1 at b1 and b):
    // its head job of 12 GPUs (static share 3.2 of 16) claims.
    let e = example_engine(NOW);
    let load = Entitlements::compute(e.tree(), 16, &[8, 8, 0, 0], &[0, 0, 12, 0]);
    assert!(e.below_window_share(LeafId(2)));
    let mut jobs = vec![q(1, 2, 12, false, 1)];
    let o = e.owed_bands(&load, &mut jobs, &[]);
    assert_eq!(band(&o, &jobs[0]), Band::Owed);
    // a1 used the most: its big job never claims; it crosses its room
    // (band 2), behind every team's owed work.
    assert!(!e.below_window_share(LeafId(0)));
    let load = Entitlements::compute(e.tree(), 16, &[0, 8, 8, 0], &[12, 0, 0, 0]);
    let mut jobs = vec![q(1, 0, 12, false, 1)];
    let o = e.owed_bands(&load, &mut jobs, &[]);
    assert_eq!(band(&o, &jobs[0]), Band::Crossing);
    // Once a1 holds its entitlement, it has no room: band 1.
    let load = Entitlements::compute(e.tree(), 16, &[12, 2, 2, 0], &[12, 0, 0, 0]);
    let o = e.owed_bands(&load, &mut jobs, &[]);
    assert_eq!(band(&o, &jobs[0]), Band::Allocated);
}

proptest! {
    /// Whatever the shapes, sizes, order and split over leaves of the
    /// pending jobs: the owed jobs (bands 3 and 2, claims apart) of each
    /// tree node's subtree hold at most its room plus one crossing job per
    /// leaf, and a job's band depends on its own leaf's queue and the other
    /// leaves' prefixes only (never on its shape beyond its GPUs and debug
    /// mark).
    #[test]
    fn owed_work_never_exceeds_the_room(
        (tree, usage) in tree_and_usage(),
        run in prop::collection::vec(0u64..8, 1..12),
        jobs in prop::collection::vec((0u32..12, 1u64..10, any::<bool>(), 0u64..1000), 0..40),
        cap in 1u64..64,
    ) {
        let e = Engine::new(std::sync::Arc::new(Config::with_tree(tree)), usage, NOW);
        let leaves = e.tree().leaves().len() as u32;
        let mut queued: Vec<Queued> = jobs
            .iter()
            .enumerate()
            .map(|(i, &(l, g, d, el))| q(i as u64, l % leaves, g, d, el))
            .collect();
        let mut pend = vec![0u64; leaves as usize];
        for j in &queued {
            pend[j.leaf.0 as usize] += j.gpus;
        }
        let load = Entitlements::compute(e.tree(), cap, &run, &pend);
        let o = e.owed_bands(&load, &mut queued, &[]);
        let mut per_leaf_owed = vec![0u64; leaves as usize];
        let mut largest = vec![0u64; leaves as usize];
        for j in &queued {
            let b = band(&o, j);
            let claim = o.claim[j.leaf.0 as usize] == Some(j.id);
            if matches!(b, Band::Owed | Band::Crossing) && !claim {
                per_leaf_owed[j.leaf.0 as usize] += j.gpus;
                largest[j.leaf.0 as usize] = largest[j.leaf.0 as usize].max(j.gpus);
            }
        }
        for l in 0..leaves {
            let leaf = LeafId(l);
            for &n in &load.path(leaf) {
                // The owed GPUs of the leaves below n.
                let below: Vec<u32> = (0..leaves)
                    .filter(|&m| load.path(LeafId(m)).contains(&n))
                    .collect();
                let owed: u64 = below.iter().map(|&m| per_leaf_owed[m as usize]).sum();
                let slack: u64 = below.iter().map(|&m| largest[m as usize]).sum();
                let room = load.node_rooms()[n];
                prop_assert!(
                    owed as f64 <= room + slack as f64 + 1e-6,
                    "node {n}: owed {owed} room {room} slack {slack}"
                );
            }
        }
        // The prefix is a prefix: in each leaf's own order, no allocated
        // job comes before an owed one (claims apart).
        for l in 0..leaves {
            let mine: Vec<&Queued> = queued.iter().filter(|j| j.leaf.0 == l).collect();
            let mut seen_allocated = false;
            for j in mine {
                let b = band(&o, j);
                let claim = o.claim[l as usize] == Some(j.id);
                if b == Band::Allocated {
                    seen_allocated = true;
                } else if !claim {
                    prop_assert!(!seen_allocated);
                }
            }
        }
    }
}
