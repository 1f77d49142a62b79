//! The live load: slurmctld's job list, job by job, as the entitlements
//! ([`crate::entitlement`]) and the owed band ([`crate::owed`]) read it.
//!
//! One counter for every reader of a live job list, so that they cannot
//! disagree: the priority and preempt plugins (slurmctld's job records)
//! and `allot explain` (squeue's and scontrol's view of the same jobs).
//! The simulator keeps the same counts incrementally, job start by job end.
//!
//! # What counts
//! - Every running or suspended job's GPUs count toward the capacity used
//!   when `capacity_gpus` is not set (the cluster is full whenever a
//!   preemption is asked for).
//! - Only allocated jobs (minimum runtime > 0) of accounts in the tree
//!   count for a leaf: running (allocated GPUs) or pending (requested GPUs).
//! - A running allocated job past its minimum runtime with requeues left
//!   is *tradeable*: room for its own leaf's debug work
//!   ([`crate::owed::Tradeable`]).
//! - A pending allocated job joins the owed band's queue unless it is held
//!   (priority 0) or has used its requeues (it waits for its team's share
//!   apart, [`crate::contract::waits_for_share`]).

use crate::contract::{requeues_used, RunClock, Tier};
use crate::entitlement::Entitlements;
use crate::owed::{OwedBands, Queued};
use crate::Engine;

/// What a job is doing now, as the live load reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadState {
    /// Running or suspended: the GPUs allocated to it and its running-time
    /// clock.
    Running {
        /// GPUs allocated (all nodes).
        gpus: u64,
        /// Its running-time clock ([`RunClock`]).
        clock: RunClock,
    },
    /// Pending.
    Pending {
        /// GPUs it asks for (all nodes).
        gpus: u64,
        /// When it became eligible, `max(submit, begin)`, epoch seconds.
        eligible: u64,
        /// False while it is held (Slurm priority 0).
        schedulable: bool,
    },
    /// Anything else (finished, completing, configuring): counts nothing.
    Other,
}

/// One job of a live job list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadJob<'a> {
    /// Slurm job id.
    pub id: u64,
    /// Slurm account.
    pub account: &'a str,
    /// Minimum runtime, seconds ([`crate::contract::ContractPolicy::job_min_runtime`];
    /// 0 = free tier).
    pub min_runtime: u64,
    /// Time limit, seconds (`None` = none).
    pub time_limit: Option<u64>,
    /// True if job_submit marked it part of a sweep ([`crate::sweep`]).
    pub sweep: bool,
    /// Times it has been requeued (Slurm's `restart_cnt`).
    pub requeues: u32,
    /// What it is doing now.
    pub state: LoadState,
}

/// Counts a live job list for the entitlements and the owed band (see the
/// module's rules); [`LoadCounter::finish`] gives both.
#[derive(Debug, Clone, Default)]
pub struct LoadCounter {
    running: Vec<u64>,
    pending: Vec<u64>,
    queued: Vec<Queued>,
    tradeable: Vec<u64>,
    held: u64,
}

impl LoadCounter {
    /// Adds one job at `now` (epoch seconds).
    pub fn add(&mut self, engine: &Engine, job: &LoadJob<'_>, now: u64) {
        let leaves = engine.tree().leaves().len();
        if self.running.len() != leaves {
            self.running.resize(leaves, 0);
            self.pending.resize(leaves, 0);
            self.tradeable.resize(leaves, 0);
        }
        if let LoadState::Running { gpus, .. } = job.state {
            self.held += gpus;
        }
        let Some(leaf) = engine.leaf_of(job.account) else {
            return;
        };
        if job.min_runtime == 0 {
            return;
        }
        let l = leaf.0 as usize;
        let max = engine.config().contract.max_requeues;
        let used = requeues_used(job.min_runtime, job.requeues, max);
        match job.state {
            LoadState::Running { gpus, clock } => {
                self.running[l] += gpus;
                if clock.run_time(now) >= job.min_runtime && !used {
                    self.tradeable[l] += gpus;
                }
            }
            LoadState::Pending {
                gpus,
                eligible,
                schedulable,
            } => {
                self.pending[l] += gpus;
                if schedulable && !used {
                    let debug = engine.config().priority.is_debug(
                        Tier::of(job.min_runtime),
                        gpus,
                        job.time_limit,
                        job.sweep,
                    );
                    self.queued.push(Queued {
                        id: job.id,
                        leaf,
                        gpus,
                        debug,
                        eligible,
                    });
                }
            }
            LoadState::Other => {}
        }
    }

    /// The entitlements to `capacity_gpus` of the config, or to every GPU
    /// running jobs hold when it is not set, and the owed band of the
    /// pending jobs on them ([`Engine::owed_bands`]).
    pub fn finish(mut self, engine: &Engine) -> (Entitlements, OwedBands) {
        let capacity = engine.config().capacity_gpus.unwrap_or(self.held);
        let load = Entitlements::compute(engine.tree(), capacity, &self.running, &self.pending);
        let owed = engine.owed_bands(&load, &mut self.queued, &self.tradeable);
        (load, owed)
    }
}

#[cfg(test)]
mod tests;
