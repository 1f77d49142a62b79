//! Queue order after a requeue.

use super::*;
use crate::testutil::*;
use crate::*;
use std::collections::BTreeSet;

/// Random inserts (mostly at the end, as arrivals are), removals from
/// anywhere and walks from any job: always what a B-tree set holds.
#[test]
fn a_queue_walks_like_an_ordered_set() {
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut q = Queue::default();
    let mut pos = vec![0u32; 4000];
    let mut set = BTreeSet::new();
    let mut queued_at = vec![None; 4000];
    let mut now = 0u64;
    for _ in 0..20_000 {
        now += next() % 3;
        let id = (next() % 4000) as u32;
        match queued_at[id as usize] {
            None => {
                // Mostly now; sometimes a little earlier.
                let el = now.saturating_sub(if next() % 10 == 0 { next() % 5 } else { 0 });
                q.insert(&mut pos, el, el, id, (1, 1, u64::from(id)));
                set.insert((el, id));
                queued_at[id as usize] = Some(el);
            }
            Some(el) => {
                q.remove(&pos, el, id);
                set.remove(&(el, id));
                queued_at[id as usize] = None;
            }
        }
        assert_eq!(q.first().map(|(_, s)| s.key()), set.first().copied());
        // Walks from a queued job (its slot as the hint), from one that
        // is not (taken, or never was; a stale hint), as a pass does.
        let queued = set.iter().nth((next() % 50) as usize).copied();
        let other = (now.saturating_sub(next() % 40), (next() % 4000) as u32);
        for (el, id) in queued.into_iter().chain([other]) {
            let mut hint = pos[id as usize] as usize;
            let (mut at, mut walked) = ((el, id), Vec::new());
            while let Some((i, s)) = q.next_after(hint, at.0, at.1).filter(|_| walked.len() < 20) {
                assert_eq!(s.shape.2, u64::from(s.id));
                (hint, at) = (i, s.key());
                walked.push(at);
            }
            let want: Vec<_> = set.range((el, id + 1)..).take(20).copied().collect();
            assert_eq!(walked, want);
        }
    }
}

/// Jobs of equal priority start in order of their queued time, then job,
/// as slurmctld orders them (submit time, then job id), and a requeue
/// resets the queued time to the moment of the requeue, not to when the
/// job is eligible again (`requeue_delay` later).
#[test]
fn a_requeued_job_keeps_its_place_by_the_moment_of_its_requeue() {
    let free = |id, submit, duration| TraceJob {
        min_runtime: Some(0),
        ..job(id, "t1", submit, duration, 8)
    };
    // t2's job preempts t1's free-tier job 1 at 10 and ends at 60; t1's
    // job 3, as large and of the same priority, arrives at 10 too.
    let jobs = vec![free(1, 0, 1000), job(2, "t2", 10, 50, 4), free(3, 10, 20)];
    let r = run(
        &config(&format!("{TWO_TEAMS}\n[sim]\nrequeue_delay = \"0:11\"\n")),
        jobs,
        ONE_NODE,
        Policy::Allot,
    );
    assert_eq!((r.preemptions, r.finished), (1, 3));
    // Job 1 (queued at 10, eligible at 21) goes first at 60, ahead of job 3
    // (queued at 10 too, a later job), which starts when it ends, at 1060.
    let large = &r.waits[JobClass::Large as usize];
    assert_eq!(large.p90_s, 1060 - 10);
}
