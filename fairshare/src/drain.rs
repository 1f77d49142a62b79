//! Contract-aware draining: which jobs on a draining node to requeue now,
//! and when to look again (docs/health.md). `allot sync --follow` acts on
//! it for real nodes; the simulator for its drain events.
//!
//! The rule, with its boundaries:
//! - A job is requeued at the first pass where it is **no longer
//!   protected** by its contract ([`crate::contract::protected`]):
//!   running time (suspended time excluded) `>=` minimum runtime. A job
//!   whose running time *equals* its minimum runtime is requeued; one
//!   second less and it is left alone.
//! - Unallocated jobs (minimum runtime 0) are never protected: requeued at
//!   once.
//! - A job submitted with `--no-requeue` (Slurm `Requeue=0`) is never
//!   requeued or cancelled: the user said a rerun is unsafe, and cancelling
//!   would throw its work away. It is left to finish (logged and recorded
//!   once as `kept`); the node becomes DRAINED when it ends.
//! - When to look again: the earliest [`crate::contract::protected_until`]
//!   of the protected jobs; a suspended protected job has a stopped clock
//!   and adds no deadline.
//!
//! Pure: the Slurm commands that feed it and act on it live in the `allot`
//! binary (`accounting-sync/src/draining.rs`).

use crate::contract::{protected, protected_until, Contract};

/// A job running (or suspended) on a draining node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeJob {
    /// Slurm job id (`JobIDRaw`).
    pub job_id: u64,
    /// Its contract and running-time clock.
    pub contract: Contract,
    /// False for a `--no-requeue` job.
    pub requeueable: bool,
}

/// What to do with the jobs of one draining node at `now`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    /// Jobs to requeue now (contract served, or unallocated).
    pub requeue: Vec<u64>,
    /// `--no-requeue` jobs past their contract: left to finish.
    pub keep: Vec<u64>,
    /// Protected jobs with the instant (epoch s) their protection ends;
    /// `None` while suspended.
    pub wait: Vec<(u64, Option<u64>)>,
    /// When to look at this node again (epoch s): the earliest end of
    /// protection among `wait`; `None` when nothing is waiting on a clock.
    pub next_look: Option<u64>,
}

/// Decides, at `now` (epoch seconds), what to do with each job of a
/// draining node. See the module rules.
pub fn plan(jobs: &[NodeJob], now: u64) -> Plan {
    let mut p = Plan::default();
    for j in jobs {
        if protected(&j.contract, now) {
            let until = protected_until(&j.contract, now);
            p.wait.push((j.job_id, until));
            if let Some(t) = until {
                p.next_look = Some(p.next_look.map_or(t, |n: u64| n.min(t)));
            }
        } else if j.requeueable {
            p.requeue.push(j.job_id);
        } else {
            p.keep.push(j.job_id);
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::RunClock;

    fn job(id: u64, min: u64, started: u64) -> NodeJob {
        NodeJob {
            job_id: id,
            contract: Contract {
                min_runtime: min,
                clock: RunClock::started(started),
            },
            requeueable: true,
        }
    }

    #[test]
    fn requeued_exactly_at_the_minimum_runtime_not_a_second_before() {
        let jobs = [job(1, 5, 1000), job(2, 40, 1000)];
        // 4 s in: both protected; look again when the first contract ends.
        let p = plan(&jobs, 1004);
        assert!(p.requeue.is_empty());
        assert_eq!(p.wait, vec![(1, Some(1005)), (2, Some(1040))]);
        assert_eq!(p.next_look, Some(1005));
        // run time == 5 == min runtime: no longer protected, requeued.
        let p = plan(&jobs, 1005);
        assert_eq!(p.requeue, vec![1]);
        assert_eq!(p.next_look, Some(1040));
        // 39 s: the second is still inside its contract.
        let p = plan(&jobs[1..], 1039);
        assert!(p.requeue.is_empty());
        assert_eq!(p.next_look, Some(1040));
        let p = plan(&jobs[1..], 1040);
        assert_eq!(p.requeue, vec![2]);
        assert_eq!(p.next_look, None);
    }

    #[test]
    fn unallocated_jobs_go_at_once() {
        let p = plan(&[job(7, 0, 1000)], 1000);
        assert_eq!(p.requeue, vec![7]);
        assert!(p.wait.is_empty());
    }

    #[test]
    fn no_requeue_jobs_are_kept_after_their_contract_and_protected_before() {
        let mut j = job(9, 10, 1000);
        j.requeueable = false;
        let p = plan(&[j], 1009);
        assert_eq!(p.wait, vec![(9, Some(1010))]);
        assert!(p.keep.is_empty());
        let p = plan(&[j], 1010);
        assert_eq!(p.keep, vec![9]);
        assert!(p.requeue.is_empty());
    }

    #[test]
    fn suspended_protected_job_adds_no_deadline() {
        let mut j = job(3, 600, 0);
        j.contract.clock.suspend(100);
        let p = plan(&[j], 5000);
        assert_eq!(p.wait, vec![(3, None)]);
        assert_eq!(p.next_look, None);
    }
}
