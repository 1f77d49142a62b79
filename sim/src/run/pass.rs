//! One scheduling pass (Slurm's main scheduler and backfill) and the
//! priority keys it orders queued jobs by.

use super::*;

impl Sim<'_> {
    /// Priority key of a pending job: higher first; ties by queued time
    /// (slurmctld's submit time: a requeue resets it), then job index.
    pub(super) fn key(&self, id: u32) -> u64 {
        let sj = &self.w.jobs[id as usize];
        let j = &self.jobs[id as usize];
        let q = queue_of(
            sj.team,
            sj.min_runtime,
            self.is_debug(id),
            self.is_sweep(id),
            self.is_exhausted(id),
        );
        let k = self.queue_key_of(q, j.eligible, id);
        debug_assert!(
            self.policy != Policy::Allot
                || k == u64::from(
                    self.engine
                        .as_ref()
                        .expect("refreshed")
                        .priority(&self.pending_job(id))
                ),
            "the queue's key is Engine::priority"
        );
        k
    }

    /// The priority of a job of queue `q` eligible since `eligible`: every
    /// factor is the queue's (team, tier, short) but age, so the pass can key
    /// a queue's next job from the queue alone. Under `allot`,
    /// Engine::priority with the account -> leaf lookups hoisted to the
    /// snapshot refresh (team_rank, team_below): the same band, score() and
    /// compose() the engine runs (checked against it in debug builds).
    pub(super) fn queue_key_of(&self, q: usize, eligible: u64, id: u32) -> u64 {
        let team = q / QUEUES_PER_TEAM;
        match self.policy {
            Policy::Allot => {
                let engine = self.engine.as_ref().expect("refreshed");
                let score = self.config.priority.score(
                    0,
                    engine.now().saturating_sub(eligible),
                    q % QUEUES_PER_TEAM == 2,
                );
                let band = match self.queue_band(q) {
                    Band::Free => Band::Free,
                    b => engine.owed().map_or(b, |o| {
                        let leaf = self.w.teams[team].leaf;
                        let debug = q % QUEUES_PER_TEAM == 2;
                        o.band(leaf, (!debug, eligible, u64::from(id)), u64::from(id))
                    }),
                };
                u64::from(compose(band, self.team_rank[team], score))
            }
            Policy::Fifo | Policy::Static => 0,
            Policy::Classic | Policy::FairTree => {
                // Slurm multifactor: PriorityWeightFairshare=10000,
                // PriorityWeightAge=1000, PriorityMaxAge=7-0.
                let max_age = 7.0 * 86_400.0;
                let age = (self.now.saturating_sub(eligible) as f64).min(max_age) / max_age;
                let p = 10_000.0 * self.decay.factor[team] + 1000.0 * age;
                (p * 1e6) as u64
            }
        }
    }

    /// Under `allot`, the lowest band of queue `q`'s jobs: free tier, or
    /// allocated (some may be owed: [`Sim::queue_key_of`]).
    pub(super) fn queue_band(&self, q: usize) -> Band {
        if q.is_multiple_of(QUEUES_PER_TEAM) {
            Band::Free
        } else {
            Band::Allocated
        }
    }

    /// Under `allot`, a lower bound of every key of queue `q`
    /// ([`Sim::queue_key`] with a score of 0): band and rank are the high
    /// bits of a priority, so a job of a queue whose floor is above another
    /// job's key sorts first whatever its age, without computing its score.
    fn queue_floor(&self, q: usize) -> Option<u64> {
        (self.policy == Policy::Allot).then(|| {
            u64::from(compose(
                self.queue_band(q),
                self.team_rank[q / QUEUES_PER_TEAM],
                0,
            ))
        })
    }

    /// Job `id` as the engine's priority sees it. Its time limit is the
    /// trace's, else its duration.
    pub(super) fn pending_job(&self, id: u32) -> PendingJob<'_> {
        let sj = &self.w.jobs[id as usize];
        PendingJob {
            id: u64::from(id),
            account: &self.w.accounts[sj.account as usize],
            min_runtime: sj.min_runtime,
            nice: 0,
            eligible_time: self.jobs[id as usize].eligible,
            gpus: u64::from(sj.gpus()),
            time_limit: Some(sj.limit()),
            sweep: sj.sweep,
        }
    }

    /// How long the backfill plans job `id` to run: its time limit where
    /// the trace gives one (as Slurm plans), else its remaining work.
    pub(super) fn planned(&self, id: u32) -> u64 {
        self.w.jobs[id as usize]
            .time_limit
            .unwrap_or(self.jobs[id as usize].remaining)
    }

    /// One scheduling pass. Returns true if a job was left blocked. Without
    /// `backfill` (Slurm's main scheduler, on every event) the pass stops at
    /// the first job that can neither start nor preempt; with it (every
    /// `backfill_interval`, Slurm's bf_interval) that job gets a reservation
    /// and up to `backfill_depth` more jobs are tried around it.
    pub(super) fn pass(&mut self, backfill: bool) -> bool {
        if self.pending == 0 {
            return false;
        }
        self.refresh();
        // The owed band on the live load (fairshare::owed): the plugins
        // recompute it at every rebuild and job end.
        if self.policy == Policy::Allot && self.mark_owed() {
            // Heads' keys depend on the owed prefix.
            for c in self.head_cache.iter_mut() {
                c.0 = u32::MAX;
            }
        }
        // Band and rank change only with the snapshot: each queue's floor
        // once per pass (when it goes past its first job: most stop there),
        // not once per job looked at.
        let mut floors = std::mem::take(&mut self.pass_floors);
        floors.clear();
        let mut heads = std::mem::take(&mut self.pass_heap);
        heads.clear();
        for q in 0..self.queues.len() {
            // A job that used its requeues starts only while its team is
            // below its entitlement (fairshare::contract::waits_for_share).
            if q % QUEUES_PER_TEAM == EXHAUSTED
                && fairshare::contract::waits_for_share(true, self.team_below[q / QUEUES_PER_TEAM])
            {
                continue;
            }
            if let Some((slot, s)) = self.queues[q].first() {
                let (order, id, shape) = (s.order, s.id, s.shape);
                // Under allot a head's key changes only with the snapshot.
                let c = self.head_cache[q];
                let key = if self.policy == Policy::Allot && c.0 == self.snapshot && c.1 == id {
                    c.2
                } else {
                    let k = self.key(id);
                    self.head_cache[q] = (self.snapshot, id, k);
                    k
                };
                heads.push((key, Reverse(order), Reverse(id), q as u32, shape, slot));
            }
        }
        // One heapify of all heads instead of a sift per push.
        let mut heap = BinaryHeap::from(heads);
        let mut reservation: Option<Reservation> = None;
        // `backfill_reserve = "all"`: every job the backfill pass looks at
        // after the first blocked one gets a reservation too.
        let mut held: Option<Vec<Held>> = None;
        let mut blocked = false;
        let mut looked = 0u32;
        let depth = self.sim.backfill_depth;
        // `backfill_preempt = "all"`: every job a backfill pass looks at
        // after the first blocked one may preempt too. Why a pass still
        // ends: the heap hands out each pending job at most once, and a
        // preemption starts the job it was for, so a pass makes at most one
        // preemption per job it looks at (at most `backfill_depth` + 1);
        // across passes the engine's rule cannot cycle (fairshare::preempt:
        // each preemption strictly increases a bounded quantity), checked by
        // the invariants property test with this setting.
        let bf_preempt = backfill && self.sim.backfill_preempt == BackfillPreempt::All;
        // Smallest GPUs-per-node that failed to place this pass, without and
        // with the reservation's nodes avoided: larger shapes fail too.
        let mut failed_any = u32::MAX;
        let mut failed_avoid = u32::MAX;
        // The queue whose head was just taken: its next job joins the heap
        // only when the pass goes on (most main-scheduler passes stop at the
        // first job, and keying its successor was a third of a replay).
        let mut advance: Option<(u32, u64, u32, usize)> = None;
        loop {
            // The taken queue's next job, if any: it replaces the heap's top
            // only when it sorts below it (one sift instead of a push and a
            // pop; a queue's jobs come out in order, so a long run of one
            // queue touches the heap not at all). Ids are unique: no ties.
            // (entry, taken at once without a look at the heap)
            let mut successor = None;
            if let Some((q, order, id, slot)) = advance.take() {
                // The queue walked on from the job just taken (its slot is
                // kept even once it started).
                let next = self.queues[q as usize].next_after(slot, order, id);
                if let Some((slot2, s)) = next {
                    let (el2, order2, id2, shape) = (s.eligible, s.order, s.id, s.shape);
                    // Its exact key matters only if it may sort below the
                    // heap's top (then it joins the heap). A successor whose
                    // queue's floor is above the top, as in a long run of one
                    // queue, is taken at once and its key is never read.
                    let above = match heap.peek() {
                        None => true,
                        Some(top) => {
                            if floors.is_empty() {
                                floors.extend((0..self.queues.len()).map(|q| self.queue_floor(q)));
                            }
                            floors[q as usize].is_some_and(|floor| floor > top.0)
                        }
                    };
                    let key = if above {
                        0
                    } else {
                        self.queue_key_of(q as usize, el2, id2)
                    };
                    successor =
                        Some(((key, Reverse(order2), Reverse(id2), q, shape, slot2), above));
                }
            }
            let taken = match (successor, heap.peek_mut()) {
                (Some((x, true)), _) => Some(x),
                (Some((x, false)), Some(mut top)) if x < *top => {
                    Some(std::mem::replace(&mut *top, x))
                }
                (Some((x, _)), _) => Some(x),
                (None, Some(top)) => Some(std::collections::binary_heap::PeekMut::pop(top)),
                (None, None) => None,
            };
            let Some((_, Reverse(order), Reverse(id), q, shape, slot)) = taken else {
                break;
            };
            let too_big = if self.policy == Policy::Static {
                let sj = &self.w.jobs[id as usize];
                let slice = self.slices[sj.team as usize];
                let too_big = u64::from(sj.gpus()) > slice;
                if !too_big && self.m.running_gpus(sj.team as usize) + u64::from(sj.gpus()) > slice
                {
                    // FIFO inside the slice: the team waits for its own GPUs.
                    continue;
                }
                too_big
            } else {
                false
            };
            advance = Some((q, order, id, slot));
            if too_big {
                // Larger than the team's whole slice: it can never run
                // (counted as unfinished) and must not block the team.
                continue;
            }
            if blocked {
                looked += 1;
                // Nothing fits anywhere any more (even 1 GPU failed): done,
                // unless a job further down may still preempt.
                let full = self.cluster.free_total == 0 || failed_any <= 1;
                if looked > depth || (full && !bf_preempt) {
                    break;
                }
            }
            let (g, nodes, planned) = shape;
            let salt = u64::from(id);
            if let Some(mut h) = held.take() {
                let before = h.len();
                if let Some(alloc) = self.plan(nodes, g, planned, &mut h, &[]) {
                    self.start(id, alloc);
                } else {
                    // Slurm's backfill preempts for any job it tests whose
                    // start, victims' GPUs counted free, is now on nodes no
                    // higher job is planned on over its time limit.
                    let preempted = bf_preempt && self.policy == Policy::Allot && {
                        let end = self.now + planned;
                        let mut avoid: Vec<u32> = h[..before]
                            .iter()
                            .filter(|r| r.start < end && r.end > self.now)
                            .map(|r| r.node)
                            .collect();
                        avoid.sort_unstable();
                        avoid.dedup();
                        self.try_preempt(id, &avoid)
                    };
                    if preempted {
                        h.truncate(before);
                        self.hold_preemptor_nodes(id);
                        failed_any = u32::MAX;
                        failed_avoid = u32::MAX;
                    } else {
                        self.replan_over_candidates(id, &mut h, before);
                    }
                }
                held = Some(h);
                continue;
            }
            let placed = match &reservation {
                Some(r) if self.now + planned > r.shadow => {
                    if g >= failed_avoid || g >= failed_any {
                        None
                    } else {
                        let p = self.cluster.place(nodes, g, &r.nodes, salt);
                        if p.is_none() && nodes == 1 {
                            failed_avoid = g;
                        }
                        p
                    }
                }
                _ if g >= failed_any => None,
                _ => {
                    let p = self.cluster.place(nodes, g, &[], salt);
                    if p.is_none() && nodes == 1 {
                        failed_any = g;
                    }
                    p
                }
            };
            if let Some(alloc) = placed {
                self.start(id, alloc);
                continue;
            }
            if blocked {
                if bf_preempt && self.policy == Policy::Allot {
                    let avoid = match &reservation {
                        Some(r) if self.now + planned > r.shadow => r.nodes.clone(),
                        _ => Vec::new(),
                    };
                    if self.try_preempt(id, &avoid) {
                        self.hold_preemptor_nodes(id);
                        failed_any = u32::MAX;
                        failed_avoid = u32::MAX;
                    }
                }
                continue;
            }
            if self.policy == Policy::Allot && self.try_preempt(id, &[]) {
                if backfill {
                    self.hold_preemptor_nodes(id);
                }
                // Victims freed GPUs: earlier placement failures may not hold.
                failed_any = u32::MAX;
                failed_avoid = u32::MAX;
                continue;
            }
            if self.policy == Policy::Allot
                && self.is_short(id)
                && self.sim.short_partition == ShortPartition::Apart
            {
                // Short jobs run in their own partition on nodes of their
                // own (docs/simulator.md): one that cannot start holds up
                // only that partition.
                continue;
            }
            blocked = true;
            if !backfill {
                break;
            }
            if self.sim.backfill_reserve == BackfillReserve::All {
                let mut h = Vec::new();
                // Nothing fits now (placement just failed): a reservation.
                let _ = self.plan(nodes, g, planned, &mut h, &[]);
                self.replan_over_candidates(id, &mut h, 0);
                held = Some(h);
            } else {
                reservation = self.reservation(id);
            }
        }
        self.pass_heap = heap.into_vec();
        self.pass_floors = floors;
        // GPUs held for preemptors in this pass (`preemptor_start =
        // "next_pass"`) come back now; the preemptors are still pending, so
        // the pass reports a blocked job and a later pass comes.
        let completing = !self.completing.is_empty();
        for (v, alloc) in std::mem::take(&mut self.completing) {
            self.cluster.release(v, &alloc);
        }
        self.hold_victims();
        if completing {
            self.epoch += 1;
        }
        blocked || completing
    }
}

#[cfg(test)]
mod tests;
