//! Forking a replay at its present instant, for the start forecast
//! ([`crate::forecast`]): the copy goes on with other run times for the
//! jobs not yet ended and other jobs arriving, while the replay it was
//! taken from goes on as the trace says.

use super::*;

/// What a replay knows of a job at its present instant, without its run
/// time: its state, the work it kept from earlier attempts (a resumable
/// job's checkpoints) and, running, how long this attempt has run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Progress {
    /// Pending (queued or waiting out a requeue delay), running or ended.
    pub ended: bool,
    pub running: bool,
    /// Seconds of work kept from earlier attempts.
    pub kept: u64,
    /// Seconds this attempt has run (0 when not running).
    pub elapsed: u64,
}

impl<'w> Sim<'w> {
    /// A copy of this replay at its present instant that replays `w` from
    /// here on. `w` holds this replay's jobs submitted so far (the first
    /// `next_arrival` of its workload, in the same order and shapes; their
    /// `duration`s are not read) and may add later arrivals after them.
    pub(crate) fn fork<'x>(&self, w: &'x Workload) -> Sim<'x>
    where
        'w: 'x,
    {
        debug_assert!(w.jobs.len() >= self.next_arrival);
        let mut jobs = Vec::with_capacity(w.jobs.len());
        jobs.extend_from_slice(&self.jobs[..self.next_arrival]);
        jobs.extend(w.jobs[self.next_arrival..].iter().map(JobState::new));
        let mut queue_pos = self.queue_pos[..self.next_arrival].to_vec();
        queue_pos.resize(w.jobs.len(), 0);
        let m = self.m.for_fork();
        let nodes = self.cluster.nodes() as usize;
        Sim {
            w,
            config: self.config.clone(),
            sim: self.sim,
            policy: self.policy,
            cluster: self.cluster.clone(),
            jobs,
            queues: self.queues.clone(),
            queue_pos,
            pending: self.pending,
            running_by_end: self.running_by_end.clone(),
            running_by_plan: self.running_by_plan.clone(),
            plans_by_limit: self.plans_by_limit,
            events: self.events.clone(),
            node_events: self.node_events.clone(),
            next_arrival: self.next_arrival,
            now: self.now,
            tracker: self.tracker.clone(),
            ledger_recent: self.ledger_recent.clone(),
            engine: self.engine.clone(),
            next_refresh: self.next_refresh,
            snapshot: self.snapshot,
            team_rank: self.team_rank.clone(),
            team_below: self.team_below.clone(),
            rate: self.rate.clone(),
            unprot: self.unprot.clone(),
            unprot_gpus: self.unprot_gpus.clone(),
            free_tier: self.free_tier.clone(),
            free_tier_gpus: self.free_tier_gpus.clone(),
            leaf_running: self.leaf_running.clone(),
            leaf_pending: self.leaf_pending.clone(),
            load_version: self.load_version,
            // Recomputed at the first use: never shared between replays.
            load_cache: std::cell::RefCell::new(LoadCache {
                version: None,
                value: std::sync::Arc::new(Entitlements::compute(&self.config.tree, 0, &[], &[])),
                scratch: Default::default(),
            }),
            epoch: self.epoch,
            failed_attempt: self.failed_attempt,
            wakes: self.wakes.clone(),
            tick_at: self.tick_at,
            bf_at: self.bf_at,
            main_at: self.main_at,
            main_loop: self.main_loop.clone(),
            last_change: self.last_change,
            backfill_now: self.backfill_now,
            horizon: self.horizon,
            decay: self.decay.clone(),
            slices: self.slices.clone(),
            head_cache: self.head_cache.clone(),
            owed_buf: Vec::new(),
            pass_heap: Vec::new(),
            pass_floors: Vec::new(),
            completing: self.completing.clone(),
            victims_freed: self.victims_freed.clone(),
            victims_busy: self.victims_busy.clone(),
            pass_ends: Vec::new(),
            timed_later: self.timed_later.clone(),
            bf_blocked: self.bf_blocked,
            pass_us: self.pass_us,
            scratch: std::cell::RefCell::new(PreemptScratch {
                per_node: vec![0; nodes],
                spent: vec![0; nodes],
                ..PreemptScratch::default()
            }),
            m,
        }
    }

    /// Seconds since the trace's first submission.
    pub(crate) fn now(&self) -> u64 {
        self.now
    }

    /// Jobs finished so far.
    pub(crate) fn finished(&self) -> u64 {
        self.m.finished
    }

    /// Jobs of the workload submitted so far.
    pub(crate) fn arrived(&self) -> usize {
        self.next_arrival
    }

    /// The workload replayed.
    pub(crate) fn workload(&self) -> &'w Workload {
        self.w
    }

    /// When job `id` first started, if it has.
    pub(crate) fn first_start(&self, id: u32) -> Option<u64> {
        let s = self.jobs[id as usize].first_start;
        (s != u64::MAX).then_some(s)
    }

    /// When job `id` ended, if it has (seconds since the first submission).
    pub(crate) fn ended_at(&self, id: u32) -> Option<u64> {
        let j = &self.jobs[id as usize];
        (j.state == State::Done).then_some(j.end)
    }

    /// What is known of job `id` now, its run time aside. `duration` is
    /// the run time this replay gave it (the work it kept is what it has
    /// done of that: a replay's past, not its future).
    pub(crate) fn progress(&self, id: u32) -> Progress {
        let j = &self.jobs[id as usize];
        let total = self.w.jobs[id as usize].duration;
        Progress {
            ended: j.state == State::Done,
            running: j.state == State::Running,
            kept: total.saturating_sub(j.remaining),
            elapsed: if j.state == State::Running {
                self.now.saturating_sub(j.start)
            } else {
                0
            },
        }
    }

    /// Gives every job not yet ended the run time `work(id, progress)`
    /// returns, in seconds of work in all (kept work included; at least
    /// what it has done, plus one second), where it returns one: a pending
    /// job runs that much less its kept work once started, a running one
    /// ends when this attempt has run that much less its kept work.
    /// `progress` is [`Sim::progress`] of the job, read from the jobs this
    /// replay was forked with (their `duration`s are the past's).
    pub(crate) fn retime(&mut self, mut work: impl FnMut(u32, Progress) -> Option<u64>) {
        let mut moved = false;
        for id in 0..self.jobs.len() as u32 {
            let state = self.jobs[id as usize].state;
            if state == State::Done {
                continue;
            }
            let p = self.progress(id);
            let Some(total) = work(id, p) else { continue };
            let j = &mut self.jobs[id as usize];
            let left = total.saturating_sub(p.kept).max(p.elapsed + 1);
            match state {
                State::Pending => j.remaining = left,
                State::Running => {
                    let extra = j.end - j.start - j.remaining;
                    self.running_by_end.remove(&(j.end, id));
                    j.remaining = left;
                    j.end = j.start + left + extra;
                    self.running_by_end.insert((j.end, id));
                    moved = true;
                }
                State::Done => {}
            }
        }
        if moved {
            // Every running job's end event again, at its new end.
            let jobs = &self.jobs;
            let mut events: Vec<_> = std::mem::take(&mut self.events)
                .into_vec()
                .into_iter()
                .filter(|Reverse((_, kind, a, _))| {
                    *kind != COMPLETE
                        || jobs
                            .get(*a as usize)
                            .is_none_or(|j| j.state != State::Running)
                })
                .collect();
            for &(end, id) in &self.running_by_end {
                events.push(Reverse((end, COMPLETE, id, jobs[id as usize].attempt)));
            }
            self.events = BinaryHeap::from(events);
        }
    }
}
