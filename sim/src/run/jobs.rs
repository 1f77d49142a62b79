//! Starting and stopping a job: the cluster's GPUs, the usage tracker and
//! the leaves' load, contract expiry events, lost work and requeues.

use super::*;
use crate::{AttemptEnd, AttemptRecord};
use fairshare::attempts::{charged_ends, AttemptSpan, EndedBy};

impl Sim<'_> {
    pub(super) fn start(&mut self, id: u32, alloc: Vec<NodeGpus>) {
        let now = self.now;
        let debug = self.is_debug(id);
        let sweep = self.is_sweep(id);
        let exhausted = self.is_exhausted(id);
        let sj = &self.w.jobs[id as usize];
        let team = sj.team as usize;
        let gpus = sj.gpus();
        let j = &mut self.jobs[id as usize];
        let q = queue_of(sj.team, sj.min_runtime, debug, sweep, exhausted);
        self.queues[q].remove(&self.queue_pos, j.order, id);
        self.pending -= 1;
        self.load_version += 1;
        if sj.min_runtime > 0 {
            let l = self.w.teams[team].leaf.0 as usize;
            self.leaf_pending[l] -= u64::from(gpus);
            self.leaf_running[l] += u64::from(gpus);
        }
        self.cluster.take(id, &alloc);
        self.last_change = now;
        j.state = State::Running;
        j.start = now;
        // Slurm stamps start and end in whole seconds: an attempt whose
        // work starts `attempt_overhead_ms` after its start's offset into
        // the second is recorded one second longer when the two cross a
        // second. With `sched_interval` the offset is that of the pass
        // starting it (Sim::second_with_passes), else seeded; the end comes
        // at the same offset past the last whole second.
        let overhead = attempt_overhead_us(self.sim, id, j.attempt);
        let phase = match self.pass_us {
            Some(us) => us,
            None if overhead == 0 => 0,
            None => sub_second_ms(self.sim.seed, id, u64::from(j.attempt)) * 1000,
        };
        let extra = (phase + overhead) / 1_000_000;
        j.end_us = ((phase + overhead) % 1_000_000) as u32;
        j.end = now + j.remaining + extra;
        j.alloc = alloc;
        j.unprotected = false;
        if j.first_start == u64::MAX {
            j.first_start = now;
        }
        self.running_by_end.insert((j.end, id));
        if self.plans_by_limit {
            self.running_by_plan.insert((plan_end(sj, j), id));
        }
        self.events.push(Reverse((j.end, COMPLETE, id, j.attempt)));
        if self.policy == Policy::Allot {
            if sj.min_runtime > 0 {
                let rate = self.rate[(gpus as usize - 1).min(self.rate.len() - 1)];
                j.open = Some(self.tracker.add_running(
                    &self.w.accounts[sj.account as usize],
                    rate,
                    now,
                ));
                if self.sim.ledger_lag > 0 {
                    self.ledger_recent.push_back(LedgerEvent {
                        at: now,
                        account: sj.account,
                        rate,
                        charged_end: None,
                    });
                }
                // Protection ends when the contract says (fairshare::contract).
                let contract = Contract {
                    min_runtime: sj.min_runtime,
                    clock: RunClock::started(now),
                };
                if let Some(until) = protected_until(&contract, now).filter(|&u| u < j.end) {
                    self.events.push(Reverse((until, EXPIRY, id, j.attempt)));
                }
            } else {
                j.unprotected = true;
                self.free_tier[team].insert((0, now, id), Holding::of(&j.alloc));
                self.free_tier_gpus[team] += u64::from(gpus);
                self.epoch += 1;
            }
        }
        self.m
            .change_team(team, now, i64::from(gpus), -i64::from(gpus));
        self.m.starts += 1;
    }

    pub(super) fn stop(&mut self, id: u32, why: StopReason) {
        let now = self.now;
        let sj = &self.w.jobs[id as usize];
        let team = sj.team as usize;
        let gpus = sj.gpus();
        let j = &mut self.jobs[id as usize];
        let run = now - j.start;
        if sj.min_runtime > 0 {
            let l = self.w.teams[team].leaf.0 as usize;
            self.leaf_running[l] -= u64::from(gpus);
        }
        self.load_version += 1;
        self.last_change = now;
        self.cluster.release(id, &j.alloc);
        self.running_by_end.remove(&(j.end, id));
        if self.plans_by_limit {
            self.running_by_plan.remove(&(plan_end(sj, j), id));
        }
        if j.unprotected {
            if sj.min_runtime == 0 {
                self.free_tier[team].remove(&(0, j.start, id));
                self.free_tier_gpus[team] -= u64::from(gpus);
            } else {
                self.unprot[team].remove(&(fewest(j.attempt), j.start, id));
                self.unprot_gpus[team] -= u64::from(gpus);
            }
            j.unprotected = false;
        }
        if let Some(open) = j.open.take() {
            // The engine's rule for who ended the attempt
            // (fairshare::attempts): a node failure is the cluster's (its
            // runtime is charged), a completion or allot's preemption the
            // owner's (the contract); a drain requeues at the minimum
            // runtime, where the two agree. The next attempt starts later.
            let span = AttemptSpan {
                start: Some(j.start),
                end: Some(now),
                ended_by: why.ended_by(),
                min_runtime: sj.min_runtime,
            };
            let end = charged_ends(&self.config.contract, &[span])[0].unwrap_or(now);
            self.tracker.close(open, end);
            let rate = self.rate[(gpus as usize - 1).min(self.rate.len() - 1)];
            self.m.team_charged_s[team] += rate * (end - j.start);
            if self.sim.ledger_lag > 0 {
                self.ledger_recent.push_back(LedgerEvent {
                    at: now,
                    account: sj.account,
                    rate,
                    charged_end: Some(end),
                });
            }
        }
        self.m.change_team(team, now, -i64::from(gpus), 0);
        self.m
            .attempts
            .push(attempt_record(sj, j, Some(now), why.attempt_end()));
        if sj.min_runtime == 0 {
            self.m.free_tier_gpu_s += u64::from(gpus) * run;
        }
        self.epoch += 1;
        if why == StopReason::Complete {
            j.state = State::Done;
            j.remaining = 0;
            j.alloc = Vec::new();
            self.m.finished += 1;
            return;
        }
        let ckpt = self.sim.checkpoint_interval;
        let saved = match (sj.resumable, ckpt) {
            (false, _) => 0,
            (true, 0) => run,
            (true, c) => run / c * c,
        }
        .min(j.remaining.saturating_sub(1));
        let lost = run - saved;
        j.remaining -= saved;
        j.attempt += 1;
        let delay = self.sim.requeue_delay;
        j.eligible = now + delay;
        j.order = now;
        j.alloc = Vec::new();
        let lost_gs = u64::from(gpus) * lost;
        self.m.lost_gpu_s += lost_gs;
        self.m.team_lost_gpu_s[team] += lost_gs;
        match why {
            StopReason::Preempted => self.m.team_preempted[team] += 1,
            StopReason::Drain => self.m.drain_requeues += 1,
            StopReason::Fail => self.m.fail_requeues += 1,
            StopReason::Complete => unreachable!(),
        }
        self.enqueue_at(id, now + delay);
    }
}

/// The attempt log's record of job `sj`'s current attempt `j`, which
/// ended at `end` (`None`: still running) as `ended` says.
pub(super) fn attempt_record(
    sj: &crate::workload::SimJob,
    j: &JobState,
    end: Option<u64>,
    ended: AttemptEnd,
) -> AttemptRecord {
    AttemptRecord {
        job: sj.id,
        team: sj.team,
        attempt: j.attempt,
        start: j.start,
        end,
        gpus: sj.gpus(),
        min_runtime: sj.min_runtime,
        ended,
    }
}

impl StopReason {
    /// The attempt log's word for it ([`AttemptRecord::ended`]).
    fn attempt_end(self) -> AttemptEnd {
        match self {
            StopReason::Complete => AttemptEnd::Completed,
            StopReason::Preempted => AttemptEnd::Preempted,
            StopReason::Drain => AttemptEnd::Drained,
            StopReason::Fail => AttemptEnd::Failed,
        }
    }

    /// Who ended the attempt, as Slurm would record it: `COMPLETED` and
    /// `PREEMPTED` are the owner's side, `REQUEUED` (a drain) and
    /// `NODE_FAIL` the cluster's ([`fairshare::attempts::ended_by`]).
    fn ended_by(self) -> EndedBy {
        match self {
            StopReason::Complete | StopReason::Preempted => EndedBy::Owner,
            StopReason::Drain | StopReason::Fail => EndedBy::Cluster,
        }
    }
}

/// When the backfill plans running job `j` to end: its start plus its time
/// limit where the trace gives one, else its real end (`running_by_plan`).
fn plan_end(sj: &crate::workload::SimJob, j: &JobState) -> u64 {
    sj.time_limit.map_or(j.end, |t| j.start + t)
}

/// Microseconds attempt `attempt` of job `id` holds its GPUs beyond its
/// work: `attempt_overhead_ms`, moved by a seeded draw within
/// ± `attempt_jitter_ms` (evenly, to the microsecond), never below 0.
pub(super) fn attempt_overhead_us(s: &crate::SimSettings, id: u32, attempt: u32) -> u64 {
    let mean = s.attempt_overhead_ms * 1000;
    let j = s.attempt_jitter_ms * 1000;
    if j == 0 {
        return mean;
    }
    // A salt of its own: the draw is not the seeded start phase's.
    let salt = 0x6a17_u64 << 40 | u64::from(attempt);
    let draw = crate::cluster::mix(s.seed ^ (u64::from(id) << 32) ^ salt) % (2 * j + 1);
    (mean + draw).saturating_sub(j)
}

/// A seeded sub-second phase (0..1000 ms) of job `id` for `salt`: where in
/// its second something of it happens (`pass_miss_ms`,
/// `attempt_overhead_ms`), the same for the same seed.
pub(super) fn sub_second_ms(seed: u64, id: u32, salt: u64) -> u64 {
    crate::cluster::mix(seed ^ (u64::from(id) << 32) ^ salt) % 1000
}

#[cfg(test)]
mod tests;
