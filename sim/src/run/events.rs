//! What each event of the loop does (completion, node start and end,
//! contract expiry, drain requeue, snapshot tick, backfill, wake), and
//! putting a job (back) in its queue.

use super::*;

impl Sim<'_> {
    pub(super) fn handle(&mut self, kind: u8, a: u32, b: u32) {
        let now = self.now;
        match kind {
            COMPLETE => {
                let j = &self.jobs[a as usize];
                if j.state == State::Running && j.attempt == b {
                    self.stop(a, StopReason::Complete);
                }
            }
            EXPIRY => {
                let j = &self.jobs[a as usize];
                // Short jobs are never preempted (fairshare::preempt).
                // Nor is an allocated job that used its requeues
                // (fairshare::contract::requeues_used).
                let sj = &self.w.jobs[a as usize];
                let used = fairshare::contract::requeues_used(
                    sj.min_runtime,
                    j.attempt,
                    self.config.contract.max_requeues,
                );
                if j.state == State::Running && j.attempt == b && !j.unprotected && !used {
                    let team = self.w.jobs[a as usize].team as usize;
                    let (start, held) = (j.start, Holding::of(&j.alloc));
                    let key = (fewest(j.attempt), start, a);
                    self.jobs[a as usize].unprotected = true;
                    self.unprot[team].insert(key, held);
                    self.unprot_gpus[team] += u64::from(self.w.jobs[a as usize].gpus());
                    self.epoch += 1;
                }
            }
            DRAIN_REQUEUE => {
                let j = &self.jobs[a as usize];
                let on_drained = j
                    .alloc
                    .iter()
                    .any(|n| self.cluster.drains[n.node as usize] > 0);
                if j.state == State::Running && j.attempt == b && on_drained {
                    self.stop(a, StopReason::Drain);
                }
            }
            ELIGIBLE => {
                let j = &self.jobs[a as usize];
                if j.state == State::Pending && j.attempt == b {
                    self.join_queue(a);
                }
            }
            DRAIN_PASS => {
                if self.cluster.drains[a as usize] > 0 {
                    self.drain_pass(a);
                }
            }
            VICTIM_DONE => self.victims_done(a, b),
            TICK => self.tick_at = u64::MAX,
            WAKE => {
                self.wakes.remove(&now);
                // Attempts that failed while a short job waited may now hold.
                self.epoch += 1;
            }
            BACKFILL => {
                self.bf_at = u64::MAX;
                self.backfill_now = true;
            }
            // The pass itself runs in the event loop, before arrivals.
            MAIN => self.main_at = u64::MAX,
            NODE_START => {
                let e = self.node_events[a as usize];
                self.last_change = now;
                self.m.accrue_capacity(now, self.cluster.capacity);
                match e.kind {
                    NodeEventKind::Drain => {
                        self.cluster.change(e.node, 1, 0);
                        if self.policy == Policy::Allot {
                            match self.sim.drain_pass_ms {
                                None => self.drain_pass(e.node),
                                Some(ms) => {
                                    // The sidecar's first pass after the
                                    // drain: this second's, if it is a
                                    // tick's and the pass is still to come.
                                    let (iv, off) =
                                        (self.config.sync_interval.max(1), self.sim.sync_offset);
                                    let at_us = e.at_ms.map_or(0, |m| u64::from(m) * 1000);
                                    if now % iv == off % iv && at_us < ms * 1000 {
                                        self.timed_later.push((ms * 1000, DRAIN_PASS, e.node, 0));
                                    } else {
                                        let t = self.tick_after(now);
                                        self.events.push(Reverse((t, DRAIN_PASS, e.node, 0)));
                                    }
                                }
                            }
                        }
                    }
                    NodeEventKind::Fail => {
                        self.cluster.change(e.node, 0, 1);
                        for id in self.cluster.jobs_on[e.node as usize].clone() {
                            self.stop(id, StopReason::Fail);
                        }
                    }
                }
                self.events
                    .push(Reverse((now + e.duration, NODE_END, a, 0)));
                self.epoch += 1;
                self.load_version += 1;
            }
            NODE_END => {
                let e = self.node_events[a as usize];
                self.last_change = now;
                self.m.accrue_capacity(now, self.cluster.capacity);
                match e.kind {
                    NodeEventKind::Drain => self.cluster.change(e.node, -1, 0),
                    NodeEventKind::Fail => self.cluster.change(e.node, 0, -1),
                }
                self.epoch += 1;
                self.load_version += 1;
            }
            _ => unreachable!("unknown event kind"),
        }
    }

    /// The sidecar's draining pass over drained node `node` now (its rule,
    /// fairshare::drain): requeues each job whose contract is served, and
    /// looks again when each other job's contract ends.
    fn drain_pass(&mut self, node: u32) {
        let now = self.now;
        let on_node: Vec<NodeJob> = self.cluster.jobs_on[node as usize]
            .iter()
            .map(|&id| NodeJob {
                job_id: u64::from(id),
                contract: Contract {
                    min_runtime: self.w.jobs[id as usize].min_runtime,
                    clock: RunClock::started(self.jobs[id as usize].start),
                },
                requeueable: true,
            })
            .collect();
        let plan = drain::plan(&on_node, now);
        for id in plan.requeue {
            self.stop(id as u32, StopReason::Drain);
        }
        for (id, until) in plan.wait {
            let j = &self.jobs[id as usize];
            if let Some(until) = until.filter(|&u| u < j.end) {
                self.events
                    .push(Reverse((until, DRAIN_REQUEUE, id as u32, j.attempt)));
            }
        }
    }

    pub(super) fn enqueue(&mut self, id: u32) {
        self.count_pending(id);
        self.join_queue(id);
    }

    /// Under `allot`, records job `id`'s priority as it arrives: its band
    /// and its team's rank in the snapshot in effect (slurmctld's
    /// `InitPrio`, which the priority plugin sets from its last rebuild).
    pub(super) fn log_submit_priority(&mut self, id: u32) {
        if self.policy != Policy::Allot {
            return;
        }
        let sj = &self.w.jobs[id as usize];
        let q = queue_of(
            sj.team,
            sj.min_runtime,
            self.is_debug(id),
            self.is_sweep(id),
            self.is_exhausted(id),
        );
        let record = crate::PriorityRecord {
            time: self.now,
            job: sj.id,
            team: sj.team,
            band: self.queue_band(q) as u8,
            rank: self.team_rank[sj.team as usize],
        };
        self.m.submit_priorities.push(record);
    }

    /// Job `id` pending now, in its queue from second `at` on (an ELIGIBLE
    /// event if that is later): a requeue's `requeue_delay`, a submission
    /// that missed this second's pass.
    pub(super) fn enqueue_at(&mut self, id: u32, at: u64) {
        if at <= self.now {
            self.enqueue(id);
        } else {
            self.count_pending(id);
            let attempt = self.jobs[id as usize].attempt;
            self.events.push(Reverse((at, ELIGIBLE, id, attempt)));
        }
    }

    /// True if job `id` arrives in the last `pass_miss_ms` of its second
    /// (its submit phase), after slurmctld's pass.
    pub(super) fn misses_pass(&self, id: u32) -> bool {
        let miss = self.sim.pass_miss_ms;
        miss > 0 && self.submit_phase_ms(id) >= 1000 - miss
    }

    /// Where in its submit second job `id` arrived, milliseconds: the
    /// trace's `submit_ms`, else a seeded phase.
    pub(super) fn submit_phase_ms(&self, id: u32) -> u64 {
        match self.w.jobs[id as usize].submit_ms {
            Some(ms) => u64::from(ms),
            None => jobs::sub_second_ms(self.sim.seed, id, 1 << 31),
        }
    }

    /// Puts pending job `id` in its queue, where passes see it, with the
    /// shape the backfill plans it with.
    pub(super) fn join_queue(&mut self, id: u32) {
        let sj = &self.w.jobs[id as usize];
        let q = queue_of(
            sj.team,
            sj.min_runtime,
            self.is_debug(id),
            self.is_sweep(id),
            self.is_exhausted(id),
        );
        let shape = (sj.gpus_per_node, sj.nodes, self.planned(id));
        let (order, eligible) = (
            self.jobs[id as usize].order,
            self.jobs[id as usize].eligible,
        );
        self.queues[q].insert(&mut self.queue_pos, order, eligible, id, shape);
        self.pending += 1;
    }

    /// Marks job `id` pending: its leaf's pending GPUs count it.
    pub(super) fn count_pending(&mut self, id: u32) {
        let sj = &self.w.jobs[id as usize];
        self.jobs[id as usize].state = State::Pending;
        self.load_version += 1;
        self.last_change = self.now;
        if sj.min_runtime > 0 {
            self.leaf_pending[self.w.teams[sj.team as usize].leaf.0 as usize] +=
                u64::from(sj.gpus());
        }
        self.m
            .change_team(sj.team as usize, self.now, 0, i64::from(sj.gpus()));
    }
}

#[cfg(test)]
mod tests;
