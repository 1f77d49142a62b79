//! One scheduling pass (Slurm's main scheduler and backfill) and the
//! priority keys it orders queued jobs by.

use super::*;

impl Sim<'_> {
    /// Priority key of a pending job: higher first; ties by eligible time,
    /// then job index.
    pub(super) fn key(&self, id: u32) -> u64 {
        let sj = &self.w.jobs[id as usize];
        let j = &self.jobs[id as usize];
        let q = queue_of(sj.team, sj.min_runtime, self.is_short(id));
        let k = self.queue_key(q, j.eligible);
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
    pub(super) fn queue_key(&self, q: usize, eligible: u64) -> u64 {
        let team = q / QUEUES_PER_TEAM;
        match self.policy {
            Policy::Allot => {
                let engine = self.engine.as_ref().expect("refreshed");
                let band = match q % QUEUES_PER_TEAM {
                    0 => Band::Free,
                    2 => Band::Short,
                    _ if self.team_below[team] => Band::Entitled,
                    _ => Band::Allocated,
                };
                let score = self
                    .config
                    .priority
                    .score(0, engine.now().saturating_sub(eligible));
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

    /// Job `id` as the engine's priority sees it. Its time limit is the
    /// trace's, else its duration.
    pub(super) fn pending_job(&self, id: u32) -> PendingJob<'_> {
        let sj = &self.w.jobs[id as usize];
        PendingJob {
            account: &self.w.accounts[sj.account as usize],
            min_runtime: sj.min_runtime,
            nice: 0,
            eligible_time: self.jobs[id as usize].eligible,
            gpus: u64::from(sj.gpus()),
            time_limit: Some(sj.limit()),
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
        let mut heap = BinaryHeap::from(std::mem::take(&mut self.pass_heap));
        heap.clear();
        let mut ahead = std::mem::take(&mut self.pass_ahead);
        for q in 0..self.queues.len() {
            if let Some(&(el, id)) = self.queues[q].first() {
                // Under allot a head's key changes only with the snapshot.
                let c = self.head_cache[q];
                let key = if self.policy == Policy::Allot && c.0 == self.snapshot && c.1 == id {
                    c.2
                } else {
                    let k = self.key(id);
                    self.head_cache[q] = (self.snapshot, id, k);
                    k
                };
                heap.push((key, Reverse(el), Reverse(id), q as u32, None));
            }
        }
        let mut reservation: Option<Reservation> = None;
        // `backfill_reserve = "all"`: every job the backfill pass looks at
        // after the first blocked one gets a reservation too.
        let mut held: Option<Vec<Held>> = None;
        let mut blocked = false;
        let mut looked = 0u32;
        let depth = self.config.sim.backfill_depth;
        // Smallest GPUs-per-node that failed to place this pass, without and
        // with the reservation's nodes avoided: larger shapes fail too.
        let mut failed_any = u32::MAX;
        let mut failed_avoid = u32::MAX;
        // The queue whose head was just taken: its next job joins the heap
        // only when the pass goes on (most main-scheduler passes stop at the
        // first job, and keying its successor was a third of a replay).
        let mut advance: Option<(u32, u64, u32)> = None;
        loop {
            // The taken queue's next job, if any: it replaces the heap's top
            // only when it sorts below it (one sift instead of a push and a
            // pop; a queue's jobs come out in order, so a long run of one
            // queue touches the heap not at all). Ids are unique: no ties.
            let mut successor = None;
            if let Some((q, el, id)) = advance.take() {
                let after = (Bound::Excluded((el, id)), Bound::Unbounded);
                let next = if blocked {
                    // Once the pass is blocked nothing preempts, so nothing
                    // joins a queue and only the job just taken leaves one:
                    // read each queue ahead in chunks instead of one B-tree
                    // lookup per job.
                    // Each job's shape is read with the chunk: one pass
                    // over memory instead of a cache miss per job taken.
                    let a = &mut ahead[q as usize];
                    if a.is_empty() {
                        for &(e, i) in self.queues[q as usize].range(after).take(32) {
                            let sj = &self.w.jobs[i as usize];
                            let shape = (sj.gpus_per_node, sj.nodes, self.planned(i));
                            a.push_back((e, i, shape));
                        }
                    }
                    a.pop_front().map(|(e, i, shape)| (e, i, Some(shape)))
                } else {
                    let next = self.queues[q as usize].range(after).next();
                    next.map(|&(e, i)| (e, i, None))
                };
                successor = next.map(|(el2, id2, shape)| {
                    (
                        self.queue_key(q as usize, el2),
                        Reverse(el2),
                        Reverse(id2),
                        q,
                        shape,
                    )
                });
            }
            let taken = match (successor, heap.peek_mut()) {
                (Some(x), Some(mut top)) if x < *top => Some(std::mem::replace(&mut *top, x)),
                (Some(x), _) => Some(x),
                (None, Some(top)) => Some(std::collections::binary_heap::PeekMut::pop(top)),
                (None, None) => None,
            };
            let Some((_, Reverse(el), Reverse(id), q, shape)) = taken else {
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
            advance = Some((q, el, id));
            if too_big {
                // Larger than the team's whole slice: it can never run
                // (counted as unfinished) and must not block the team.
                continue;
            }
            if blocked {
                looked += 1;
                // Nothing fits anywhere any more (even 1 GPU failed): done.
                if looked > depth || self.cluster.free_total == 0 || failed_any <= 1 {
                    break;
                }
            }
            let (g, nodes, planned) = shape.unwrap_or_else(|| {
                let sj = &self.w.jobs[id as usize];
                (sj.gpus_per_node, sj.nodes, self.planned(id))
            });
            let salt = u64::from(id);
            if let Some(h) = held.as_mut() {
                if let Some(alloc) = self.plan(nodes, g, planned, h) {
                    self.start(id, alloc);
                }
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
                continue;
            }
            if self.policy == Policy::Allot && self.try_preempt(id) {
                // Victims freed GPUs: earlier placement failures may not hold.
                failed_any = u32::MAX;
                failed_avoid = u32::MAX;
                continue;
            }
            if self.policy == Policy::Allot && self.is_short(id) {
                // Short jobs run in their own partition (docs/simulator.md):
                // one that cannot start holds up only that partition.
                continue;
            }
            blocked = true;
            if !backfill {
                break;
            }
            if self.config.sim.backfill_reserve == BackfillReserve::All {
                let mut h = Vec::new();
                // Nothing fits now (placement just failed): a reservation.
                let _ = self.plan(nodes, g, planned, &mut h);
                held = Some(h);
            } else {
                reservation = self.reservation(id);
            }
        }
        for a in &mut ahead {
            a.clear();
        }
        self.pass_ahead = ahead;
        self.pass_heap = heap.into_vec();
        blocked
    }
}
