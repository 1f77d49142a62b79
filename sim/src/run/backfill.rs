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
        if self.sim.will_run_window > 0 {
            return self.plan_by_windows(nodes, g, planned, held, cands);
        }
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
        let whole = self.sim.backfill_hold == BackfillHold::Nodes;
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
                let chosen = fit.into_iter().map(|(_, node)| node).collect();
                return self.start_or_hold(chosen, g, t, planned, held, cands);
            }
        }
        None
    }

    /// [`Sim::plan`] as Slurm 22.05 plans (`will_run_window` set, whole-node
    /// holds): the backfill's loop over start times (backfill.c) around
    /// select/cons_tres's will-run test ([`Sim::will_run`]).
    ///
    /// From `start_res` = now: the nodes free of every hold over
    /// `[start_res, start_res + planned]` are the ones the test may use;
    /// `later` is the first end of a hold after `start_res` (when more
    /// nodes may become usable). The test gives a start and nodes; the
    /// job is retried from `later` if it gives none or a start after
    /// `later` (`TRY_LATER`), and from its start if the reservation there
    /// would overlap a hold on its nodes (`_test_resv_overlap`). Else it
    /// starts now (no `cands`) or is held from its start.
    ///
    /// Why it ends: each retry moves `start_res` strictly later (`later`
    /// and a start past `start_res` are, and an overlap at `start_res`
    /// itself moves it a second), and once `start_res` is past the last
    /// hold's end no node is held, so nothing is retried: the retries are
    /// at most that many seconds.
    fn plan_by_windows(
        &self,
        nodes: u32,
        g: u32,
        planned: u64,
        held: &mut Vec<Held>,
        cands: &[u32],
    ) -> Option<Vec<NodeGpus>> {
        let now = self.now;
        let c = &self.cluster;
        let n_all = c.nodes();
        if (0..n_all).filter(|&n| c.usable(n)).count() < nodes as usize {
            return None;
        }
        // The nodes as they are, the candidates' jobs gone (the will-run
        // test takes preemptable jobs off first), and the other running
        // jobs by their planned ends.
        let mut free: Vec<u32> = c.free.clone();
        let mut jobs: Vec<u32> = c.jobs_on.iter().map(|j| j.len() as u32).collect();
        let mut running: Vec<(u64, u32)> = Vec::new();
        for &(end, r) in self.by_plan() {
            if cands.binary_search(&r).is_ok() {
                for a in &self.jobs[r as usize].alloc {
                    free[a.node as usize] += a.gpus;
                    jobs[a.node as usize] = jobs[a.node as usize].saturating_sub(1);
                }
            } else {
                running.push((end.max(now + 1), r));
            }
        }
        running.sort_unstable();
        let mut start_res = now;
        let mut avail: Vec<bool> = Vec::with_capacity(n_all as usize);
        loop {
            // A usable node no hold overlaps: one walk of the holds (not
            // one per node: with `backfill_reserve = "all"` a pass holds
            // hundreds, and that product was 80% of a forecast's replay).
            avail.clear();
            avail.extend((0..n_all).map(|n| c.usable(n)));
            for h in held.iter() {
                if h.end > start_res && h.start <= start_res + planned {
                    avail[h.node as usize] = false;
                }
            }
            let later = held
                .iter()
                .filter(|h| c.usable(h.node) && h.end > start_res)
                .map(|h| h.end)
                .min();
            let Some((start, chosen)) = self.will_run(nodes, g, &avail, &free, &jobs, &running)
            else {
                match later {
                    Some(l) => {
                        start_res = l;
                        continue;
                    }
                    None => return None,
                }
            };
            let start = start.max(start_res);
            if let Some(l) = later.filter(|&l| start > l) {
                start_res = l;
                continue;
            }
            let (s_r, e_r) = self.reserved(start, planned);
            if start > now
                && held
                    .iter()
                    .any(|h| chosen.contains(&h.node) && h.end > s_r && h.start < e_r)
            {
                start_res = start.max(start_res + 1);
                continue;
            }
            return self.start_or_hold(chosen, g, start, planned, held, cands);
        }
    }

    /// A planned job's end of [`Sim::plan`]: on `chosen` at `t`, it
    /// starts there (returned) if `t` is now and it needs no candidate
    /// preempted, else it is held there from `t` (added to `held`).
    fn start_or_hold(
        &self,
        chosen: Vec<u32>,
        g: u32,
        t: u64,
        planned: u64,
        held: &mut Vec<Held>,
        cands: &[u32],
    ) -> Option<Vec<NodeGpus>> {
        if t == self.now && cands.is_empty() {
            return Some(
                chosen
                    .into_iter()
                    .map(|node| NodeGpus { node, gpus: g })
                    .collect(),
            );
        }
        self.hold(held, chosen, g, t, planned);
        None
    }

    /// select/cons_tres's will-run test (cons_common job_test.c
    /// `_will_run_test`, Slurm 22.05) for a job of `nodes` x `g` GPUs on
    /// the nodes `avail` allows, the nodes having `free` GPUs and `jobs`
    /// jobs (one CPU each) now and `running` (planned end, job; sorted)
    /// to end: its start and nodes, `None` if it never fits there.
    ///
    /// It fits now, or the running jobs on those nodes are taken off in
    /// windows: the first up to `will_run_window` past the first end
    /// rounded up to a multiple of `will_run_window` (on slurmctld's
    /// clock: `will_run_offset`), each next one up to twice as far past
    /// that instant as the last (as often doubled as it takes to reach the
    /// next end); after each window the job's nodes are picked among all
    /// that fit then (the placement's rule, with the jobs left), and it is
    /// planned to start at the last end taken off.
    fn will_run(
        &self,
        nodes: u32,
        g: u32,
        avail: &[bool],
        free: &[u32],
        jobs: &[u32],
        running: &[(u64, u32)],
    ) -> Option<(u64, Vec<u32>)> {
        let (mut free, mut jobs) = (free.to_vec(), jobs.to_vec());
        if let Some(chosen) = self.will_run_pick(nodes, g, avail, &free, &jobs) {
            return Some((self.now, chosen));
        }
        let w0 = self.sim.will_run_window;
        let off = self.sim.will_run_offset;
        let mut window = w0;
        let mut barrier: Option<u64> = None;
        let mut i = 0;
        while i < running.len() {
            let mut last = None;
            while i < running.len() {
                let (end, r) = running[i];
                i += 1;
                let alloc = &self.jobs[r as usize].alloc;
                if !alloc.iter().any(|a| avail[a.node as usize]) {
                    continue;
                }
                // The first end, rounded up past a multiple of the window.
                let b = *barrier.get_or_insert(end + w0 - (end + off) % w0);
                for a in alloc {
                    free[a.node as usize] += a.gpus;
                    jobs[a.node as usize] = jobs[a.node as usize].saturating_sub(1);
                }
                last = Some(end);
                if running.get(i).is_some_and(|&(next, _)| next > b + window) {
                    break;
                }
            }
            let Some(last) = last else { break };
            if let Some(b) = barrier {
                while running.get(i).is_some_and(|&(next, _)| next > b + window) {
                    window *= 2;
                }
            }
            if let Some(chosen) = self.will_run_pick(nodes, g, avail, &free, &jobs) {
                return Some((last, chosen));
            }
        }
        None
    }

    /// The nodes the will-run test gives a job of `nodes` x `g` GPUs among
    /// those `avail` allows with `free` GPUs and `jobs` jobs: as the
    /// placement would (`cons_tres`: its runs of nodes with `node_cpus`,
    /// else the most jobs and the lowest index; best fit: the fewest GPUs
    /// free), `None` if too few fit.
    fn will_run_pick(
        &self,
        nodes: u32,
        g: u32,
        avail: &[bool],
        free: &[u32],
        jobs: &[u32],
    ) -> Option<Vec<u32>> {
        let cpus = self.cluster.node_cpus;
        let fits = |n: u32| {
            avail[n as usize] && free[n as usize] >= g && (cpus == 0 || jobs[n as usize] < cpus)
        };
        let n_all = self.cluster.nodes();
        if nodes == 1 && self.cluster.cons_tres && cpus > 0 {
            return crate::cluster::cons_tres_run_pick(n_all, fits, |n| {
                cpus.saturating_sub(jobs[n as usize])
            })
            .map(|n| vec![n]);
        }
        let mut fit: Vec<u32> = (0..n_all).filter(|&n| fits(n)).collect();
        if fit.len() < nodes as usize {
            return None;
        }
        if self.cluster.cons_tres {
            fit.sort_unstable_by_key(|&n| (Reverse(jobs[n as usize]), n));
        } else {
            fit.sort_unstable_by_key(|&n| (free[n as usize], n));
        }
        fit.truncate(nodes as usize);
        Some(fit)
    }

    /// `backfill_candidates = "free"`: job `id`, which neither started nor
    /// preempted, gets its reservation (the holds in `held` after
    /// `before`, made by [`Sim::plan`]) planned again with the jobs it may
    /// preempt counted free from now, as Slurm's will-run test plans it.
    /// Nothing changes when it may preempt nobody.
    pub(super) fn replan_over_candidates(&self, id: u32, held: &mut Vec<Held>, before: usize) {
        if self.sim.backfill_candidates != BackfillCandidates::Free {
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

    /// The interval `[start, end)` a reservation holds for a job planned
    /// to start at `t` and run `planned` seconds ([`Sim::hold`]).
    fn reserved(&self, t: u64, planned: u64) -> (u64, u64) {
        let (start, mut end) = match self.sim.backfill_resolution {
            0 => (t, t + planned),
            r => {
                let off = self.sim.resolution_offset;
                let down = |x: u64| ((x + off) / r * r).saturating_sub(off);
                (down(t), down(t + planned))
            }
        };
        if self.sim.backfill_hold == BackfillHold::Nodes {
            end = end.max(start + self.sim.backfill_resolution.max(1));
        }
        (start, end)
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
        let (start, end) = self.reserved(t, planned);
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

#[cfg(test)]
mod tests;
