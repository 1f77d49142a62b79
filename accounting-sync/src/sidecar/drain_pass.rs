//! The draining pass of `allot sync --follow`: finds draining nodes with
//! sinfo, reads their jobs with squeue, requeues each job whose contract is
//! served ([`fairshare::drain::plan`]) with `scontrol requeue` (the three
//! through [`crate::slurm`]), and records the drain, each requeue and the
//! moment the node is empty in the ledger.
//!
//! Cost: one `sinfo` per pass when no node drains (two slurmctld RPCs:
//! node and partition info); one `squeue -w NODE` more per draining node.

use std::collections::HashSet;

use fairshare::drain::{self, Plan};
use fairshare::ContractPolicy;

use crate::slurm::scontrol;
use crate::slurm::sinfo::{draining_nodes, DrainingNode};
use crate::slurm::squeue::jobs_on;
use allot_ledger::events::{Event, EventKind};
use allot_ledger::Ledger;

/// What one pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PassReport {
    /// Nodes draining (jobs left) in this pass.
    pub draining: Vec<String>,
    /// Jobs requeued in this pass.
    pub requeued: Vec<u64>,
    /// When a protected job's contract ends next (epoch s): look again then.
    pub next_look: Option<i64>,
    /// Each node draining in this pass whose jobs could be read.
    pub nodes: Vec<DrainingStatus>,
}

/// One draining node as this pass saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainingStatus {
    /// Node name.
    pub node: String,
    /// Jobs running or suspended on it (the ones requeued now included).
    pub jobs: u64,
    /// When it will be empty (epoch s; [`empty_by`]), `None` when
    /// unknown (a `--no-requeue` job, a suspended protected job, a requeue
    /// that failed).
    pub empty_by: Option<i64>,
}

/// Runs the draining passes; remembers what it already warned about.
#[derive(Debug)]
pub struct DrainWatcher {
    policy: ContractPolicy,
    warned: HashSet<u64>,
}

/// When a draining node will be empty, from its [`Plan`] at `now` (epoch
/// s): the instant its last protected job's minimum runtime ends (`now`
/// when no job is protected: every job is being requeued). `None` when that
/// is unknown: a `--no-requeue` job left to finish (it runs until it ends),
/// or a protected job suspended (its clock is stopped).
pub fn empty_by(plan: &Plan, now: u64) -> Option<u64> {
    if !plan.keep.is_empty() {
        return None;
    }
    plan.wait
        .iter()
        .try_fold(now, |latest, (_, until)| until.map(|t| latest.max(t)))
}

impl DrainWatcher {
    /// A watcher applying `policy`'s defaults to jobs without a recorded
    /// contract.
    pub fn new(policy: ContractPolicy) -> DrainWatcher {
        DrainWatcher {
            policy,
            warned: HashSet::new(),
        }
    }

    /// One pass at `now` (epoch seconds). Events go to `ledger` (a failure
    /// to record is logged, never stops a requeue).
    ///
    /// # Errors
    /// sinfo failing; a node whose squeue fails is logged and skipped.
    pub fn pass(&mut self, ledger: &Ledger, now: i64) -> anyhow::Result<PassReport> {
        let nodes = draining_nodes()?;
        let mut report = PassReport::default();
        for n in &nodes {
            let since = n.since.unwrap_or(now);
            record(
                ledger,
                Event {
                    time: since,
                    node: n.node.clone(),
                    kind: EventKind::Drain,
                    since: Some(since),
                    job_id: None,
                    gpu: None,
                    serial: None,
                    reason: n.reason.clone(),
                },
            );
            if n.drained {
                if record(
                    ledger,
                    Event {
                        time: now,
                        node: n.node.clone(),
                        kind: EventKind::Drained,
                        since: Some(since),
                        job_id: None,
                        gpu: None,
                        serial: None,
                        reason: n.reason.clone(),
                    },
                ) {
                    tracing::info!(node = %n.node, after_s = now - since, "node drained: no job left, ready for repair ({})", n.reason);
                }
                continue;
            }
            report.draining.push(n.node.clone());
            if let Err(e) = self.node_pass(ledger, n, since, now, &mut report) {
                tracing::error!(node = %n.node, "draining pass: {e:#}");
            }
        }
        Ok(report)
    }

    fn node_pass(
        &mut self,
        ledger: &Ledger,
        n: &DrainingNode,
        since: i64,
        now: i64,
        report: &mut PassReport,
    ) -> anyhow::Result<()> {
        let mut jobs = Vec::new();
        for row in jobs_on(&n.node)? {
            match row {
                Ok(j) => jobs.push(j),
                Err(e) => tracing::warn!(node = %n.node, "skipping a job: {e}"),
            }
        }
        let now_u = now.max(0) as u64;
        let node_jobs: Vec<_> = jobs
            .iter()
            .map(|j| j.node_job(&self.policy, now_u))
            .collect();
        let plan = drain::plan(&node_jobs, now_u);
        let mut empty_by = empty_by(&plan, now_u).map(|t| t as i64);
        let describe = |id: u64| {
            let j = node_jobs
                .iter()
                .find(|j| j.job_id == id)
                .expect("planned job");
            let ran = j.contract.clock.run_time(now_u);
            if j.contract.min_runtime == 0 {
                format!(
                    "node {} draining ({}): unallocated job (minimum runtime 0), ran {ran} s",
                    n.node, n.reason
                )
            } else {
                format!(
                    "node {} draining ({}): minimum runtime {} s served (ran {ran} s)",
                    n.node, n.reason, j.contract.min_runtime
                )
            }
        };
        for &id in &plan.requeue {
            let why = describe(id);
            match scontrol::requeue(id) {
                Ok(_) => {
                    tracing::info!(job = id, node = %n.node, "requeued: {why}");
                    report.requeued.push(id);
                    record(
                        ledger,
                        job_event(n, since, now, EventKind::Requeue, id, why),
                    );
                }
                Err(e) => {
                    // It stays on the node until it ends.
                    empty_by = None;
                    if self.warned.insert(id) {
                        tracing::warn!(job = id, node = %n.node, "cannot requeue ({why}): {e:#}; it is left to finish");
                    }
                }
            }
        }
        for &id in &plan.keep {
            let why = format!("{}; --no-requeue: left to finish", describe(id));
            if record(
                ledger,
                job_event(n, since, now, EventKind::Kept, id, why.clone()),
            ) {
                tracing::warn!(job = id, node = %n.node, "not requeued: {why}");
            }
        }
        report.nodes.push(DrainingStatus {
            node: n.node.clone(),
            jobs: node_jobs.len() as u64,
            empty_by,
        });
        if let Some(t) = plan.next_look {
            let t = t as i64;
            report.next_look = Some(report.next_look.map_or(t, |x| x.min(t)));
        }
        Ok(())
    }
}

fn job_event(
    n: &DrainingNode,
    since: i64,
    now: i64,
    kind: EventKind,
    job: u64,
    reason: String,
) -> Event {
    Event {
        time: now,
        node: n.node.clone(),
        kind,
        since: Some(since),
        job_id: Some(job),
        gpu: None,
        serial: None,
        reason,
    }
}

/// Records `e`; true when it is new. A ledger error is logged.
fn record(ledger: &Ledger, e: Event) -> bool {
    match ledger.record_event(&e) {
        Ok(new) => new,
        Err(err) => {
            tracing::error!(node = %e.node, kind = e.kind.as_str(), "cannot record the event: {err}");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_by_is_the_last_contract_end() {
        let now = 1000;
        let p = Plan {
            requeue: vec![1],
            wait: vec![(2, Some(1500)), (3, Some(4000))],
            next_look: Some(1500),
            ..Default::default()
        };
        assert_eq!(empty_by(&p, now), Some(4000));
        let p = Plan {
            requeue: vec![1],
            ..Default::default()
        };
        assert_eq!(empty_by(&p, now), Some(now), "requeued now");
        let p = Plan {
            wait: vec![(2, Some(1500)), (3, None)],
            ..Default::default()
        };
        assert_eq!(empty_by(&p, now), None, "suspended: clock stopped");
        let p = Plan {
            keep: vec![4],
            wait: vec![(2, Some(1500))],
            ..Default::default()
        };
        assert_eq!(empty_by(&p, now), None, "--no-requeue: runs to its end");
    }
}
