use std::sync::Arc;

use super::*;
use crate::config::Config;
use crate::priority::Band;
use crate::testutil::{example_tree, example_usage};
use crate::tree::LeafId;

const NOW: u64 = 1_700_000_000;
const B1: LeafId = LeafId(2);

/// The worked example (a1, a2, b1, b2) with debug work of at most 2 GPUs
/// and 1 h, 3 requeues per job.
fn engine() -> Engine {
    let mut config = Config::with_tree(example_tree());
    config.priority.short_max_gpus = 2;
    config.priority.short_max_time = 3600;
    Engine::new(Arc::new(config), example_usage(), NOW)
}

fn job(id: u64, account: &str, min_runtime: u64, state: LoadState) -> LoadJob<'_> {
    LoadJob {
        id,
        account,
        min_runtime,
        time_limit: Some(1800),
        sweep: false,
        requeues: 0,
        state,
    }
}

fn running(gpus: u64, since: u64) -> LoadState {
    LoadState::Running {
        gpus,
        clock: RunClock::started(since),
    }
}

fn pending(gpus: u64) -> LoadState {
    LoadState::Pending {
        gpus,
        eligible: NOW - 60,
        schedulable: true,
    }
}

fn count(e: &Engine, jobs: &[LoadJob<'_>]) -> (Entitlements, OwedBands) {
    let mut c = LoadCounter::default();
    for j in jobs {
        c.add(e, j, NOW);
    }
    c.finish(e)
}

#[test]
fn only_allocated_jobs_of_the_tree_count_for_a_leaf_and_every_running_gpu_for_the_capacity() {
    let e = engine();
    let jobs = [
        job(1, "b1", 3600, running(4, NOW - 10)),
        job(2, "b1", 3600, pending(2)),
        job(3, "b1", 0, running(2, NOW - 10)),
        job(4, "nobody", 3600, running(2, NOW - 10)),
        job(5, "b1", 3600, LoadState::Other),
    ];
    let (load, _) = count(&e, &jobs);
    assert_eq!(load.running(B1), 4);
    assert_eq!(load.demand(B1), 6);
    // capacity_gpus unset: the GPUs every running job holds.
    assert_eq!(load.capacity(), 8);
}

#[test]
fn held_jobs_and_jobs_that_used_their_requeues_stay_out_of_the_owed_band() {
    let e = engine();
    let held = LoadState::Pending {
        gpus: 1,
        eligible: NOW - 60,
        schedulable: false,
    };
    let mut exhausted = job(3, "b1", 3600, pending(1));
    exhausted.requeues = 3;
    let jobs = [
        job(9, "a1", 3600, running(16, NOW - 10)),
        job(1, "b1", 3600, pending(1)),
        job(2, "b1", 3600, held),
        exhausted,
    ];
    let (_, owed) = count(&e, &jobs);
    let band = |id: u64, eligible: u64| owed.band(B1, (false, eligible, id), id);
    assert_eq!(band(1, NOW - 60), Band::Owed);
    assert_eq!(band(2, NOW - 60), Band::Allocated);
    assert_eq!(band(3, NOW - 60), Band::Allocated);
}

#[test]
fn running_work_past_its_contract_with_requeues_left_is_room_for_its_own_debug_work() {
    let e = engine();
    // b1 holds 8 GPUs (entitled to less): its 1-GPU debug job is owed only
    // while 1 GPU of its own work is past contract with requeues left.
    let with = |since: u64, requeues: u32| {
        let mut own = job(1, "b1", 3600, running(8, since));
        own.requeues = requeues;
        let jobs = [
            own,
            job(9, "a1", 3600, running(8, NOW - 10)),
            job(2, "b1", 3600, pending(1)),
        ];
        count(&e, &jobs).1.band(B1, (false, NOW - 60, 2), 2)
    };
    assert_eq!(with(NOW - 3600, 0), Band::Owed);
    assert_eq!(with(NOW - 3599, 0), Band::Allocated);
    assert_eq!(with(NOW - 3600, 3), Band::Allocated);
}
