//! Preemption: who may preempt whom, which running jobs to preempt, and
//! the round of candidates slurmctld asks about for one pending job
//! (docs/fair-share.md).
//!
//! - [`verdict`]: the numbered rules a preemption must meet and why no
//!   sequence of preemptions can cycle (what strictly increases);
//! - [`victims`]: the smallest allowed set of running jobs that lets a
//!   pending job start ([`Engine::choose_victims`], the simulator's);
//! - [`grounds`]: the clause that allowed a preemption and the figures
//!   behind it (what preempt/allot records);
//! - [`round`]: the candidates of one pending job judged together, as
//!   slurmctld asks preempt/allot about them one at a time;
//! - `victim_order`: the candidate order as one `u32` for Slurm
//!   ([`pack_victim_order`]).

use serde::Serialize;

use crate::contract::Contract;
#[cfg(doc)]
use crate::engine::Engine;

pub mod grounds;
pub mod round;
pub mod verdict;
mod victim_order;
pub mod victims;

pub use grounds::{Grounds, Rule};
pub use round::{Round, Scope};
pub use verdict::{Verdict, VictimTally, UNCOVER_FRACTION};
pub use victim_order::pack_victim_order;

/// GPUs on one node (node index as the caller numbers them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NodeGpus {
    /// Node index.
    pub node: u32,
    /// GPUs.
    pub gpus: u32,
}

/// A running job that might be preempted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunningJob<'a> {
    /// Slurm job id (any unique id).
    pub id: u64,
    /// Slurm account.
    pub account: &'a str,
    /// Minimum runtime and running-time clock.
    pub contract: Contract,
    /// GPUs it holds, per node.
    pub alloc: &'a [NodeGpus],
    /// False for `--no-requeue` jobs (preempting them kills them).
    pub requeue: bool,
    /// True for debug work ([`crate::priority::PriorityWeights::is_debug`]):
    /// its own team's debug work never takes it ([`verdict`], rule 4).
    pub short: bool,
    /// Times it has been requeued (Slurm's `Restarts`); at `[contract]
    /// max_requeues` an allocated job is not preempted again
    /// ([`crate::contract::requeues_used`]).
    pub requeues: u32,
}

/// A pending job that wants to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preemptor<'a> {
    /// Slurm account.
    pub account: &'a str,
    /// Minimum runtime, seconds (0 = unallocated).
    pub min_runtime: u64,
    /// Charge milli-units per second it will be charged
    /// ([`crate::charge::ChargeWeights::rate`]: 1000 per GPU by default).
    pub rate: u64,
    /// Nodes it needs.
    pub nodes: u32,
    /// Free GPUs it needs on each of them.
    pub gpus_per_node: u32,
    /// True for debug work ([`crate::priority::PriorityWeights::is_debug`]):
    /// it may take its own team's batch work past contract ([`verdict`],
    /// rule 4); between teams it is judged as any other job.
    pub short: bool,
}

impl<'a> RunningJob<'a> {
    pub(crate) fn gpus_on(&self, node: u32) -> u32 {
        self.alloc
            .iter()
            .filter(|a| a.node == node)
            .map(|a| a.gpus)
            .sum()
    }

    /// GPUs it holds on all nodes.
    pub fn gpus(&self) -> u64 {
        self.alloc.iter().map(|a| u64::from(a.gpus)).sum()
    }

    pub(crate) fn work(&self, now: u64) -> u128 {
        u128::from(self.gpus()) * u128::from(self.contract.clock.run_time(now))
    }
}

#[cfg(test)]
mod tests;
