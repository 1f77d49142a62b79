//! The backfill's reservations: EASY's for the first blocked job
//! (`backfill_reserve = "first"`), or one for every job the pass looks at
//! (`"all"`, as Slurm's sched/backfill plans).

use super::*;

/// GPUs a reservation holds on one node over `[start, end)`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Held {
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) node: u32,
    gpus: u32,
}

impl Sim<'_> {
    /// EASY backfill's reservation for job `id`: the earliest time enough
    /// nodes will have its GPUs free by the running jobs' planned ends
    /// (their time limits where the trace gives them, as Slurm plans;
    /// else their real ends), and those nodes.
    /// Running jobs by the end the backfill plans with (see
    /// `running_by_plan`).
    fn by_plan(&self) -> &BTreeSet<(u64, u32)> {
        if self.plans_by_limit {
            &self.running_by_plan
        } else {
            &self.running_by_end
        }
    }

    pub(super) fn reservation(&self, id: u32) -> Option<Reservation> {
        let sj = &self.w.jobs[id as usize];
        let (n, g) = (sj.nodes as usize, sj.gpus_per_node);
        if self.cluster.usable_count() < n {
            return None;
        }
        let mut nodes: Vec<u32> = self.cluster.fitting(g).take(n).collect();
        let mut scratch = self.scratch.borrow_mut();
        let extra = &mut scratch.per_node;
        let mut touched: Vec<u32> = Vec::new();
        let mut found = None;
        'walk: for &(end, r) in self.by_plan() {
            for a in &self.jobs[r as usize].alloc {
                if !self.cluster.usable(a.node) {
                    continue;
                }
                let e = &mut extra[a.node as usize];
                if *e == 0 {
                    touched.push(a.node);
                }
                let before = self.cluster.free[a.node as usize] + *e;
                *e += a.gpus;
                if before < g && before + a.gpus >= g {
                    nodes.push(a.node);
                }
            }
            if nodes.len() >= n {
                found = Some(end);
                break 'walk;
            }
        }
        for t in touched {
            extra[t as usize] = 0;
        }
        found.map(|shadow| {
            nodes.sort_unstable();
            Reservation { shadow, nodes }
        })
    }

    /// `backfill_reserve = "all"`: a job of `nodes` x `g` GPUs planned to run
    /// `planned` seconds either starts now, if enough usable nodes have `g`
    /// GPUs free now and keep them free for every reservation in `held`
    /// over `[now, now + planned)` (returned: its placement, fullest nodes
    /// first), or gets a reservation of its own at the earliest time it
    /// fits by the running jobs' planned ends and the reservations before
    /// it (added to `held`; `None`). A running job is planned to end no
    /// earlier than the next second. With `backfill_hold = "nodes"` a
    /// reservation holds its whole nodes: a node is usable at `t` only if no
    /// reservation on it overlaps `[t, t + planned]` (Slurm's node_space
    /// test, both ends included). `cands` (sorted job indices, see
    /// [`Sim::preemptable_by`]): running jobs whose GPUs count free from
    /// now; when any are given the job is only planned, never started
    /// (its start needs them preempted): a fit now is held from now.
    pub(super) fn plan(
        &self,
        nodes: u32,
        g: u32,
        planned: u64,
        held: &mut Vec<Held>,
        cands: &[u32],
    ) -> Option<Vec<NodeGpus>> {
        let now = self.now;
        let usable: Vec<u32> = (0..self.cluster.nodes())
            .filter(|&n| self.cluster.usable(n))
            .collect();
        if usable.len() < nodes as usize {
            return None;
        }
        let mut releases: Vec<(u64, u32, u32)> = Vec::new();
        for &(end, r) in self.by_plan() {
            // A candidate's GPUs are free from now.
            let end = if cands.binary_search(&r).is_ok() {
                now
            } else {
                end.max(now + 1)
            };
            for a in &self.jobs[r as usize].alloc {
                releases.push((end, a.node, a.gpus));
            }
        }
        let whole = self.config.sim.backfill_hold == BackfillHold::Nodes;
        let free_at = |node: u32, t: u64| -> i64 {
            let mut f = i64::from(self.cluster.free[node as usize]);
            for &(e, n, gp) in &releases {
                if n == node && e <= t {
                    f += i64::from(gp);
                }
            }
            if !whole {
                for h in held.iter() {
                    if h.node == node && h.start <= t && t < h.end {
                        f -= i64::from(h.gpus);
                    }
                }
            }
            f
        };
        let mut times: Vec<u64> = std::iter::once(now)
            .chain(releases.iter().map(|r| r.0))
            .chain(held.iter().map(|h| h.end))
            .filter(|&t| t >= now)
            .collect();
        times.sort_unstable();
        times.dedup();
        let need = i64::from(g);
        for t in times {
            let mut fit: Vec<(i64, u32)> = Vec::new();
            for &node in &usable {
                let f = free_at(node, t);
                let ok = f >= need
                    && held.iter().all(|h| {
                        if whole {
                            h.node != node || h.end <= t || h.start > t + planned
                        } else {
                            h.node != node
                                || h.start <= t
                                || h.start >= t + planned
                                || free_at(node, h.start) >= need
                        }
                    });
                if ok {
                    fit.push((f, node));
                }
            }
            if fit.len() >= nodes as usize {
                if self.cluster.cons_tres {
                    // As placement: the most jobs running, lowest index.
                    fit.sort_unstable_by_key(|&(_, n)| {
                        (Reverse(self.cluster.jobs_on[n as usize].len()), n)
                    });
                } else {
                    fit.sort_unstable();
                }
                fit.truncate(nodes as usize);
                if t == now && cands.is_empty() {
                    return Some(
                        fit.into_iter()
                            .map(|(_, node)| NodeGpus { node, gpus: g })
                            .collect(),
                    );
                }
                self.hold(held, fit.into_iter().map(|(_, node)| node), g, t, planned);
                return None;
            }
        }
        None
    }

    /// `backfill_candidates = "free"`: job `id`, which neither started nor
    /// preempted, gets its reservation (the holds in `held` after
    /// `before`, made by [`Sim::plan`]) planned again with the jobs it may
    /// preempt counted free from now, as Slurm's will-run test plans it.
    /// Nothing changes when it may preempt nobody.
    pub(super) fn replan_over_candidates(&self, id: u32, held: &mut Vec<Held>, before: usize) {
        if self.config.sim.backfill_candidates != BackfillCandidates::Free {
            return;
        }
        let cands = self.preemptable_by(id);
        if cands.is_empty() {
            return;
        }
        held.truncate(before);
        let sj = &self.w.jobs[id as usize];
        let _ = self.plan(sj.nodes, sj.gpus_per_node, self.planned(id), held, &cands);
    }

    /// Adds a reservation of `g` GPUs on each of `nodes` for a job planned
    /// to start at `t` and run `planned` seconds. `backfill_resolution`:
    /// both ends rounded down on slurmctld's clock; an empty reservation
    /// holds nothing, except that with `backfill_hold = "nodes"` it holds at
    /// least one resolution slot (backfill.c `_add_reservation`).
    pub(super) fn hold(
        &self,
        held: &mut Vec<Held>,
        nodes: impl IntoIterator<Item = u32>,
        g: u32,
        t: u64,
        planned: u64,
    ) {
        let (start, mut end) = match self.config.sim.backfill_resolution {
            0 => (t, t + planned),
            r => {
                let off = self.config.sim.resolution_offset;
                let down = |x: u64| ((x + off) / r * r).saturating_sub(off);
                (down(t), down(t + planned))
            }
        };
        if self.config.sim.backfill_hold == BackfillHold::Nodes {
            end = end.max(start + self.config.sim.backfill_resolution.max(1));
        }
        if end > start {
            for node in nodes {
                held.push(Held {
                    start,
                    end,
                    node,
                    gpus: g,
                });
            }
        }
    }
}
