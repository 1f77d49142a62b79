//! A replay set to a cluster's present state (for the start forecast of a
//! live job, [`crate::forecast::live`]): jobs that ended, jobs running
//! since when they started, jobs pending, and the usage window's charges.

use super::*;

/// Where a job of a present-state replay stands at its present.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Standing {
    /// Ended: ran from `start` to `end` (history, for run times and
    /// arrivals).
    Ended { start: u64, end: u64 },
    /// Running since `start`, its `attempt`-th attempt (0 the first).
    Running { start: u64, attempt: u32 },
    /// Pending, after `attempt` requeues.
    Pending { attempt: u32 },
}

/// A cluster's present as a replay starts from it (times in seconds of
/// the replay's clock).
pub(crate) struct AtPresent<'a> {
    /// The present instant.
    pub now: u64,
    /// Where each job of the workload stands (one entry per job, in its
    /// order).
    pub standing: &'a [Standing],
    /// The usage window's charged intervals besides the running jobs':
    /// (account, rate in milli-units a second, start, end).
    pub charges: &'a [(String, u64, u64, u64)],
    /// Nodes draining from `now` on.
    pub draining: u32,
}

impl<'w> Sim<'w> {
    /// A replay of `w` under `allot` at `p.now`, with every job of `w` as
    /// `p.standing` says and the usage window charged with `p.charges`
    /// besides the running jobs. Running jobs are
    /// placed, in the order they started, where the simulator would place
    /// them. `p.draining` nodes start to drain at `now` and stay drained:
    /// the nodes that hold the most GPUs once the running jobs are placed
    /// (slurmctld's draining nodes still hold jobs; where the replay placed
    /// which job is its own), their jobs requeued at their requeue points
    /// as allot's drain does (fairshare::drain). Nothing arrives after
    /// `now` but what a fork adds.
    ///
    /// # Errors
    /// A running job that does not fit the cluster beside those before it.
    pub(crate) fn at_present(
        w: &'w Workload,
        config: Arc<Config>,
        sim: &'w SimSettings,
        cluster: ClusterSpec,
        p: &AtPresent<'_>,
    ) -> Result<Sim<'w>, String> {
        let AtPresent {
            now,
            standing,
            charges,
            draining,
        } = *p;
        let mut s = Sim::new(w, config, sim, cluster, Policy::Allot, &[]);
        for (account, rate, start, end) in charges {
            s.tracker.add_closed(account, *rate, *start, *end);
        }
        let mut running: Vec<(u64, u32)> = Vec::new();
        let first = standing
            .iter()
            .filter_map(|st| match st {
                Standing::Running { start, .. } => Some(*start),
                _ => None,
            })
            .min()
            .unwrap_or(now)
            .min(now);
        s.set_now(first);
        for (id, st) in standing.iter().enumerate() {
            let id = id as u32;
            let j = &mut s.jobs[id as usize];
            match *st {
                Standing::Ended { start, end } => {
                    j.state = State::Done;
                    j.first_start = start;
                    j.start = start;
                    j.end = end;
                    j.remaining = 0;
                }
                Standing::Running { start, attempt } => {
                    j.attempt = attempt;
                    running.push((start, id));
                    s.enqueue(id);
                }
                Standing::Pending { attempt } => {
                    j.attempt = attempt;
                    s.enqueue(id);
                }
            }
        }
        s.next_arrival = w.jobs.len();
        running.sort_unstable();
        for (start, id) in running {
            s.set_now(start.max(first));
            let sj = &w.jobs[id as usize];
            let Some(alloc) = s
                .cluster
                .place(sj.nodes, sj.gpus_per_node, &[], u64::from(id))
            else {
                return Err(format!(
                    "running job {} ({} GPUs) does not fit a {}x{} cluster beside the jobs started before it",
                    sj.id,
                    sj.gpus(),
                    cluster.nodes,
                    cluster.gpus_per_node
                ));
            };
            // Its end is unknown: at least past now, until a fork draws it.
            let j = &mut s.jobs[id as usize];
            j.remaining = j.remaining.max(now.saturating_sub(start) + 1);
            s.start(id, alloc);
            s.jobs[id as usize].first_start = start;
        }
        s.set_now(now);
        // The draining nodes: most GPUs held first, then the lowest index.
        let mut by_use: Vec<u32> = (0..s.cluster.nodes()).collect();
        by_use.sort_by_key(|&n| (s.cluster.free[n as usize], n));
        for node in by_use.into_iter().take(draining as usize) {
            s.events
                .push(Reverse((now, NODE_START, s.node_events.len() as u32, 0)));
            s.node_events.push(NodeEvent {
                node,
                at: now,
                // Never resumed within any horizon: slurmctld says nothing
                // of when an admin resumes a node.
                duration: u64::from(u32::MAX),
                kind: NodeEventKind::Drain,
                at_ms: None,
            });
        }
        // Contracts that ended before now end now; the drains begin.
        while let Some(&Reverse((t, kind, a, b))) = s.events.peek() {
            if t > now {
                break;
            }
            s.events.pop();
            s.handle(kind, a, b);
        }
        s.wake(now);
        Ok(s)
    }
}
