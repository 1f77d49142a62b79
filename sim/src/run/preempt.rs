//! Preemption in the replay: which queued job may take whose GPUs, by the
//! engine's rule ([`fairshare::preempt`]: entitlement now, the team's own
//! trade of batch work for debug work, free tier) on the
//! live load of the simulated cluster.

use super::*;
use fairshare::preempt::Scope;

impl Sim<'_> {
    /// True for a job of the short shape ([`fairshare::priority`]).
    pub(super) fn is_short(&self, id: u32) -> bool {
        self.w.jobs[id as usize].in_short_band(&self.config.priority)
    }

    /// True for debug work ([`fairshare::owed`]): the short shape, not a
    /// sweep.
    pub(super) fn is_debug(&self, id: u32) -> bool {
        !self.w.jobs[id as usize].sweep && self.is_short(id)
    }

    /// Under `allot`, true for an allocated job that has used its requeues
    /// ([`fairshare::contract::requeues_used`]): it waits in a queue of its
    /// own, out of the pass while its team holds its entitlement
    /// ([`fairshare::contract::waits_for_share`]).
    pub(super) fn is_exhausted(&self, id: u32) -> bool {
        self.policy == Policy::Allot
            && fairshare::contract::requeues_used(
                self.w.jobs[id as usize].min_runtime,
                self.jobs[id as usize].attempt,
                self.config.contract.max_requeues,
            )
    }

    /// True for a job of a sweep of the short shape (its own queue, ordered
    /// as batch work inside its team).
    pub(super) fn is_sweep(&self, id: u32) -> bool {
        self.w.jobs[id as usize].sweep && self.is_short(id)
    }

    /// What a failed preemption attempt of `id` depends on: the epoch (any
    /// start or stop) and, with requeue points on, the backfill interval it
    /// falls in. Candidates enter and leave their requeue windows with
    /// time alone, so a blocked job is asked again once per
    /// `backfill_interval`, as slurmctld's backfill pass asks it.
    pub(super) fn attempt_key(&self, id: u32) -> (u32, u64, u64) {
        let round = if self.config.contract.requeue.period == 0 {
            0
        } else {
            self.now / self.sim.backfill_interval.max(1)
        };
        (id, self.epoch, round)
    }

    /// A failed attempt of `id`: remembered (not asked again until
    /// [`Sim::attempt_key`] changes) when `remember`. Returns false.
    fn attempt_failed(&mut self, id: u32, remember: bool) -> bool {
        if remember {
            self.failed_attempt = Some(self.attempt_key(id));
        }
        false
    }

    /// Under `allot`: asks the engine for victims so that `id` can start,
    /// and starts it on their GPUs (with `preemptor_start = "next_pass"`
    /// it stays pending and the victims' GPUs are held until the pass
    /// ends). Returns true if it preempted.
    /// The rule and why it terminates: [`fairshare::preempt`].
    /// `avoid` (sorted): nodes the job may not use, those the backfill has
    /// planned for higher jobs over its time limit (empty for the first
    /// job a pass cannot start). Only an attempt with nothing avoided is
    /// remembered as failed.
    pub(super) fn try_preempt(&mut self, id: u32, avoid: &[u32]) -> bool {
        let sj = &self.w.jobs[id as usize];
        if sj.min_runtime == 0 || self.failed_attempt == Some(self.attempt_key(id)) {
            return false;
        }
        // `repreempt_delay`: a job that preempted waits for those GPUs
        // (Slurm kills no more for it until KillWait + MessageTimeout).
        let last = self.jobs[id as usize].preempted_at;
        let delay = self.sim.repreempt_delay;
        if last != u64::MAX && self.now < last + delay {
            self.wake(last + delay);
            return false;
        }
        let remember = avoid.is_empty();
        let ok = |n: &u32| avoid.binary_search(n).is_err();
        let team = sj.team as usize;
        let my_rank = self.team_rank[team];
        let (n, g) = (sj.nodes as usize, sj.gpus_per_node);
        // Debug work may take its own team's batch work (rule 4).
        let load = self.entitlements();
        let short = self.is_debug(id);
        // Necessary before the load is even computed: the GPUs free, of the
        // free tier and of every unprotected job it could take (no team
        // gives more than its unprotected GPUs, nor its own to a job that is
        // not debug work).
        let need = (n as u64) * u64::from(g);
        // Free GPUs and the free tier's: any allocated job may take them.
        let free = self.cluster.free_total + self.free_tier_gpus.iter().sum::<u64>();
        let unprotected: u64 =
            self.unprot_gpus.iter().sum::<u64>() - if short { 0 } else { self.unprot_gpus[team] };
        if free + unprotected < need {
            return self.attempt_failed(id, remember);
        }
        let mut guard = self.scratch.borrow_mut();
        let PreemptScratch {
            per_node: pre,
            gives,
            teams: teams_by_surplus,
            touched,
            pairs,
            fitting,
            spent,
            spent_touched,
        } = &mut *guard;
        self.gives(id, &load, gives);
        // Quick necessary condition: enough GPUs free, free-tier or above
        // other teams' entitlements.
        if free + gives.iter().sum::<u64>() < need {
            drop(guard);
            return self.attempt_failed(id, remember);
        }
        // Candidates in the engine's preference order, tallied per node
        // until one node more than needed could fit. The engine then
        // chooses among the jobs on those nodes only: its victim search is
        // quadratic in the candidates, and jobs elsewhere cannot help this
        // job fit.
        touched.clear();
        pairs.clear();
        fitting.clear();
        fitting.extend(
            self.cluster
                .fitting(g)
                .filter(ok)
                .take(n)
                .map(|node| (0, node)),
        );
        self.walk_candidates(
            &load,
            gives,
            teams_by_surplus,
            sj.nodes,
            spent,
            spent_touched,
            |r, alloc| {
                for a in alloc {
                    if !self.cluster.usable(a.node) || !ok(&a.node) {
                        continue;
                    }
                    let free = self.cluster.free[a.node as usize];
                    let e = &mut pre[a.node as usize];
                    if *e == 0 {
                        touched.push(a.node);
                    }
                    let before = free + *e;
                    *e += a.gpus;
                    pairs.push((a.node, r));
                    if before < g && before + a.gpus >= g {
                        fitting.push((g - free, a.node));
                    }
                }
                fitting.len() > n
            },
        );
        for &t in touched.iter() {
            pre[t as usize] = 0;
        }
        if fitting.len() < n {
            drop(guard);
            return self.attempt_failed(id, remember);
        }
        fitting.sort_unstable();
        fitting.truncate(n + 1);
        let mut chosen: Vec<u32> = fitting.iter().map(|f| f.1).collect();
        chosen.sort_unstable();
        let mut cands: Vec<u32> = pairs
            .iter()
            .filter(|(node, _)| chosen.binary_search(node).is_ok())
            .map(|p| p.1)
            .collect();
        cands.sort_unstable();
        cands.dedup();
        let free: Vec<NodeGpus> = fitting
            .iter()
            .map(|&(_, node)| NodeGpus {
                node,
                gpus: self.cluster.free[node as usize],
            })
            .collect();
        drop(guard);
        let running: Vec<RunningJob<'_>> = cands
            .iter()
            .map(|&r| {
                let j = &self.jobs[r as usize];
                let s = &self.w.jobs[r as usize];
                RunningJob {
                    id: u64::from(r),
                    account: &self.w.accounts[s.account as usize],
                    contract: Contract {
                        min_runtime: s.min_runtime,
                        clock: RunClock::started(j.start),
                    },
                    alloc: &j.alloc,
                    requeue: true,
                    short: self.is_debug(r),
                    requeues: j.attempt,
                }
            })
            .collect();
        let p = Preemptor {
            account: &self.w.accounts[sj.account as usize],
            min_runtime: sj.min_runtime,
            rate: self.rate_of(sj.gpus()),
            nodes: sj.nodes,
            gpus_per_node: g,
            short,
        };
        let engine = self.engine.as_ref().expect("refreshed");
        let Some(victims) = engine.choose_victims(&p, &running, &free, &load, self.now) else {
            return self.attempt_failed(id, remember);
        };
        drop(running);
        // GPUs each team loses, to tell whether its leaf ends below its
        // entitlement (free-tier victims are not its allocated GPUs).
        let mut lost = vec![0u64; self.w.teams.len()];
        for &v in &victims {
            let vj = &self.w.jobs[v as usize];
            if vj.min_runtime > 0 {
                lost[vj.team as usize] += u64::from(vj.gpus());
            }
        }
        self.jobs[id as usize].preempted_at = self.now;
        let next_pass = self.sim.preemptor_start == PreemptorStart::NextPass;
        // GPUs the victims held, by node (`next_pass`: still busy until the
        // pass ends).
        let mut freed: Vec<NodeGpus> = Vec::new();
        for &v in &victims {
            let v = v as u32;
            if next_pass {
                for a in &self.jobs[v as usize].alloc {
                    match freed.iter_mut().find(|f| f.node == a.node) {
                        Some(f) => f.gpus += a.gpus,
                        None => freed.push(*a),
                    }
                }
            }
            let vj = &self.w.jobs[v as usize];
            let vl = self.w.teams[vj.team as usize].leaf;
            let left_below = vj.min_runtime > 0 && load.below_after(vl, lost[vj.team as usize]);
            self.m.preemptions.push(PreemptionRecord {
                time: self.now,
                snapshot: self.snapshot,
                preemptor: self.w.jobs[id as usize].id,
                preemptor_team: team as u32,
                preemptor_rank: my_rank,
                victim: vj.id,
                victim_team: vj.team,
                victim_rank: self.team_rank[vj.team as usize],
                victim_min_runtime: vj.min_runtime,
                victim_run_time: self.now - self.jobs[v as usize].start,
                preemptor_short: short,
                preemptor_min_runtime: self.w.jobs[id as usize].min_runtime,
                victim_left_below: left_below,
            });
            self.stop(v, StopReason::Preempted);
        }
        if next_pass {
            // As in slurmctld, the preemptor stays pending and a later pass
            // starts whichever job is first in priority order then. Until
            // this pass ends the victims are still completing and the rest
            // of the preemptor's placement is held for it (slurmctld's
            // backfill reserves it; its main scheduler skips the partition's
            // lower jobs): one hold per node of the larger of the two.
            // Why replays still end: every preemption is one the engine's
            // rule allows (fairshare::preempt); a preemptor whose GPUs went
            // to another job preempts again only after `repreempt_delay`
            // (slurmctld's KillWait + MessageTimeout); a livelock stops at
            // the horizon (run::horizon). The invariants property test runs
            // with `next_pass` and checks that jobs are left unfinished only
            // there. `victim_complete_ms` holds the victims' GPUs a few
            // milliseconds longer, each hold with its release event queued
            // (Sim::hold_victims): it adds no preemption and no loop.
            if self.sim.victim_complete_ms.is_some() {
                // Still COMPLETING when the pass ends (Sim::hold_victims).
                self.victims_freed.push((id, freed.clone()));
            }
            let sj = &self.w.jobs[id as usize];
            let mut hold = self
                .cluster
                .place(sj.nodes, sj.gpus_per_node, avoid, u64::from(id))
                .unwrap_or_default();
            for f in freed {
                match hold.iter_mut().find(|h| h.node == f.node) {
                    Some(h) => h.gpus = h.gpus.max(f.gpus),
                    None => hold.push(f),
                }
            }
            // Never more than is free (the placement and the victims' GPUs
            // overlap on their node).
            for h in &mut hold {
                h.gpus = h.gpus.min(self.cluster.free[h.node as usize]);
            }
            hold.retain(|h| h.gpus > 0);
            self.cluster.take(id, &hold);
            self.completing.push((id, hold));
            return true;
        }
        let sj = &self.w.jobs[id as usize];
        match self
            .cluster
            .place(sj.nodes, sj.gpus_per_node, avoid, u64::from(id))
        {
            Some(alloc) => {
                self.start(id, alloc);
                true
            }
            None => {
                // The engine saw free GPUs on nodes it was shown; placement
                // agrees by construction, but never loop on a mismatch.
                self.attempt_failed(id, remember)
            }
        }
    }

    /// GPUs of team `t` counted as room for its own debug work
    /// ([`fairshare::owed`], rule 2): its allocated jobs past their contract
    /// with requeues left. 0 while the team has no debug work pending (only
    /// debug work reads it).
    pub(super) fn tradeable(&self, t: usize) -> u64 {
        if self.queues[t * QUEUES_PER_TEAM + 2].first().is_none() {
            return 0;
        }
        self.unprot_gpus[t]
    }

    /// Per team (`out`, indexed by team), the GPUs job `id` may take from
    /// it by the engine's rule ([`fairshare::preempt`]) on the live load:
    /// the unprotected GPUs a team holds above its entitlement, and fewer
    /// than half of what `id`'s team gains below it (rule 4's bound), when
    /// `id`'s own team is below its entitlement; its own team's unprotected
    /// GPUs for debug work. The free tier is not counted: any allocated job
    /// may take all of it.
    fn gives(&self, id: u32, load: &Entitlements, out: &mut Vec<u64>) {
        let sj = &self.w.jobs[id as usize];
        let team = sj.team as usize;
        let need = u64::from(sj.nodes) * u64::from(sj.gpus_per_node);
        let short = self.is_debug(id);
        let leaf = |t: usize| self.w.teams[t].leaf;
        let below = load.below(leaf(team));
        let allowance = load.gain(leaf(team), need) * fairshare::preempt::UNCOVER_FRACTION;
        let give = |t: usize| {
            if leaf(t) == leaf(team) {
                if short {
                    self.unprot_gpus[t]
                } else {
                    0
                }
            } else if !below {
                0
            } else {
                load.may_lose(leaf(t), allowance).min(self.unprot_gpus[t])
            }
        };
        out.clear();
        out.extend((0..self.w.teams.len()).map(give));
    }

    /// Walks the running jobs a preemptor whose teams may lose `gives` GPUs
    /// (from [`Sim::gives`]) may take, in the engine's preference order:
    /// the free tier, then the teams furthest above their entitlement,
    /// youngest jobs first, each team's jobs while they fit its budget.
    /// `f` gets each candidate (job index, and its allocation) and returns
    /// true to stop. Only allocated jobs wait for their requeue points
    /// (fairshare::contract). With `victim_budget = "node"` and a preemptor
    /// of one node (`nodes`) a team's budget holds per node, as the preempt
    /// plugin tallies such a preemptor's victims (slurmctld preempts only
    /// on the node it starts on), so the youngest jobs of a team elsewhere
    /// do not use up what it may give where the preemptor fits. Jobs on
    /// several nodes, every job for a preemptor of several nodes, and every
    /// job with `"cluster"` share one. (A necessary condition only: the
    /// engine judges the set.) `teams`, `spent` (0 for every node) and
    /// `spent_touched` are scratch space, `spent` left as found.
    #[allow(clippy::too_many_arguments)]
    fn walk_candidates<'a>(
        &'a self,
        load: &Entitlements,
        gives: &[u64],
        teams: &mut Vec<(Reverse<u64>, usize)>,
        nodes: u32,
        spent: &mut [u64],
        spent_touched: &mut Vec<u32>,
        mut f: impl FnMut(u32, &'a [NodeGpus]) -> bool,
    ) {
        let leaf = |t: usize| self.w.teams[t].leaf;
        let per_node = nodes == 1 && self.sim.victim_budget == VictimBudget::Node;
        teams.clear();
        teams.extend(
            (0..self.w.teams.len())
                .filter(|&t| gives[t] > 0)
                .map(|t| (Reverse(load.surplus(leaf(t))), t)),
        );
        teams.sort_unstable();
        // (candidates, GPUs they may give, allocated)
        let sources = (0..self.w.teams.len())
            .map(|t| (&self.free_tier[t], u64::MAX, false))
            .chain(
                teams
                    .iter()
                    .map(|&(_, t)| (&self.unprot[t], gives[t], true)),
            );
        let points = self.config.contract.requeue;
        'outer: for (set, budget, allocated) in sources {
            if budget == 0 {
                continue;
            }
            for &node in spent_touched.iter() {
                spent[node as usize] = 0;
            }
            spent_touched.clear();
            let mut left = budget;
            for (&(_, start, r), held) in set.iter().rev() {
                if left == 0 && !per_node {
                    break;
                }
                let gpus = u64::from(held.gpus);
                if allocated && !points.open(self.now - start) {
                    continue;
                }
                // Which of the team's victims count together: the plugin's
                // round scope (fairshare::preempt::Scope), or all of them.
                let scope = if per_node {
                    Scope::of_node(nodes, held.node.map(|one| one.node))
                } else {
                    Scope::All
                };
                match scope {
                    Scope::Node(node) => {
                        let s = &mut spent[node as usize];
                        if *s + gpus > budget {
                            continue;
                        }
                        if *s == 0 {
                            spent_touched.push(node);
                        }
                        *s += gpus;
                    }
                    Scope::All | Scope::Spanning => {
                        if gpus > left {
                            continue;
                        }
                        left -= gpus;
                    }
                }
                let alloc = match &held.node {
                    Some(one) => std::slice::from_ref(one),
                    None => &self.jobs[r as usize].alloc[..],
                };
                if f(r, alloc) {
                    break 'outer;
                }
            }
        }
        for &node in spent_touched.iter() {
            spent[node as usize] = 0;
        }
        spent_touched.clear();
    }

    /// `backfill_candidates = "free"`: the running jobs job `id` may preempt,
    /// as the preempt plugin lists them for slurmctld's will-run test
    /// (sorted job indices; empty for a free-tier job or another policy).
    /// The backfill counts their GPUs free from now when it plans `id`'s
    /// start (cons_common `_will_run_test` removes the preemptee candidates
    /// before it walks the running jobs' ends).
    pub(super) fn preemptable_by(&self, id: u32) -> Vec<u32> {
        let sj = &self.w.jobs[id as usize];
        if self.policy != Policy::Allot || sj.min_runtime == 0 {
            return Vec::new();
        }
        let load = self.entitlements();
        let mut guard = self.scratch.borrow_mut();
        let PreemptScratch {
            gives,
            teams,
            spent,
            spent_touched,
            ..
        } = &mut *guard;
        self.gives(id, &load, gives);
        let mut out = Vec::new();
        self.walk_candidates(
            &load,
            gives,
            teams,
            sj.nodes,
            spent,
            spent_touched,
            |r, _| {
                out.push(r);
                false
            },
        );
        out.sort_unstable();
        out.dedup();
        out
    }

    /// `backfill_hold = "nodes"`, after `id` preempted in a backfill pass
    /// (`preemptor_start = "next_pass"`): it holds its whole nodes until
    /// the pass ends. Slurm's backfill, when the preemptor cannot start yet,
    /// "drops through and reserves these resources": its nodes leave the
    /// pass's map from now on, whatever GPUs it asked for.
    pub(super) fn hold_preemptor_nodes(&mut self, id: u32) {
        if self.sim.backfill_hold != BackfillHold::Nodes {
            return;
        }
        let Some((pid, hold)) = self.completing.last() else {
            return;
        };
        if *pid != id {
            return;
        }
        let rest: Vec<NodeGpus> = hold
            .iter()
            .map(|h| NodeGpus {
                node: h.node,
                gpus: self.cluster.free[h.node as usize],
            })
            .filter(|h| h.gpus > 0)
            .collect();
        if !rest.is_empty() {
            // A second entry: each is taken and given back on its own.
            self.cluster.take(id, &rest);
            self.completing.push((id, rest));
        }
    }

    /// `victim_complete_ms`, when a pass that preempted ends: its victims'
    /// GPUs stay busy (slurmctld: COMPLETING until the node's epilog
    /// reports) until `victim_complete_ms` past the pass's offset, held
    /// under their preemptor; then [`Sim::victims_done`] frees them for
    /// the passes after that (slurmctld runs no pass of its own then: the
    /// testbed's main passes all fall on the `sched_interval` cadence).
    /// Nothing is held twice: the pass's own holds came back just before.
    pub(super) fn hold_victims(&mut self) {
        let Some(ms) = self.sim.victim_complete_ms else {
            return;
        };
        let at = self.now * 1_000_000 + self.pass_us.unwrap_or(0);
        let done = at + ms * 1000;
        for (id, mut gpus) in std::mem::take(&mut self.victims_freed) {
            for g in &mut gpus {
                g.gpus = g.gpus.min(self.cluster.free[g.node as usize]);
            }
            gpus.retain(|g| g.gpus > 0);
            self.cluster.take(id, &gpus);
            self.victims_busy.push((done, id, gpus));
            let (second, off) = (done / 1_000_000, (done % 1_000_000) as u32);
            if second == self.now {
                self.timed_later
                    .push((u64::from(off), VICTIM_DONE, id, off));
            } else {
                self.events.push(Reverse((second, VICTIM_DONE, id, off)));
            }
        }
    }

    /// `victim_complete_ms`: the victims of preemptor `id` held until
    /// `off` µs into this second are done; their GPUs are free.
    pub(super) fn victims_done(&mut self, id: u32, off: u32) {
        let done = self.now * 1_000_000 + u64::from(off);
        if let Some(i) = self
            .victims_busy
            .iter()
            .position(|(d, p, _)| *d == done && *p == id)
        {
            let (_, _, gpus) = self.victims_busy.swap_remove(i);
            self.cluster.release(id, &gpus);
            self.last_change = self.now;
            // Placement failures of this second may not hold any more.
            self.epoch += 1;
        }
    }
}

#[cfg(test)]
mod tests;
