//! The policy's view of the cluster: the engine snapshot (`allot`, rebuilt
//! every `sync.interval`) or the decayed usage of the baselines, and the
//! leaves' entitlements now (cached per load version).

use super::*;

impl Sim<'_> {
    /// With `snapshot_phase = "seeded"` or `"clock"` (and
    /// `sched_interval`): the offset (µs) into a tick's second at which the
    /// engine snapshot is taken.
    pub(super) fn snapshot_us(&self) -> Option<u64> {
        let s = self.sim;
        if self.policy != Policy::Allot || s.sched_interval == 0 {
            return None;
        }
        match s.snapshot_phase {
            SnapshotPhase::Pass => None,
            SnapshotPhase::Seeded => Some(crate::cluster::mix(s.seed ^ 0x5eed_5a11) % 1000 * 1000),
            SnapshotPhase::Clock => Some(fairshare::timer::REBUILD_OFFSET_MS * 1000),
        }
    }

    /// Takes the engine snapshot now if one is due (`snapshot_phase =
    /// "seeded"` or `"clock"`): called at the snapshot's offset into a tick's second,
    /// and before a second's events when the last tick fell in a second
    /// with none (nothing changed since).
    pub(super) fn refresh_at_tick(&mut self) {
        if self.now >= self.next_refresh {
            self.take_snapshot();
        }
    }

    /// The first `sync.interval` tick after second `t`: the seconds with
    /// t mod `sync.interval` = `sync_offset`.
    pub(super) fn tick_after(&self, t: u64) -> u64 {
        let iv = self.config.sync_interval.max(1);
        let off = self.sim.sync_offset % iv;
        off + (t + iv - off) / iv * iv
    }

    /// Rebuilds the policy's view (engine snapshot or decayed usage) when due.
    /// With `snapshot_phase = "seeded"` or `"clock"` the engine snapshot is taken by
    /// [`Sim::refresh_at_tick`] instead (a pass takes only the first).
    pub(super) fn refresh(&mut self) {
        let now = self.now;
        let seeded = self.snapshot_us().is_some();
        match self.policy {
            Policy::Allot if (now >= self.next_refresh && !seeded) || self.engine.is_none() => {
                self.take_snapshot();
            }
            Policy::Classic | Policy::FairTree if now >= self.decay.next => {
                let s = self.sim;
                let raw = self.m.take_raw_usage(now);
                let k = 0.5f64.powf((now - self.decay.last) as f64 / s.half_life as f64);
                for (u, r) in self.decay.usage.iter_mut().zip(raw) {
                    *u = *u * k + r;
                }
                self.decay.last = now;
                self.decay.next = (now / s.calc_period + 1) * s.calc_period;
                let tree = &self.config.tree;
                self.decay.factor = if self.policy == Policy::FairTree {
                    let ft = FairTree::compute(tree, &self.decay.usage);
                    self.w.teams.iter().map(|t| ft.factor(t.leaf)).collect()
                } else {
                    crate::baselines::classic_factors(tree, &self.decay.usage)
                };
            }
            _ => {}
        }
    }

    /// The engine snapshot of now (`allot`): ranks from the usage, the
    /// priority band from the load and the queues ([`Sim::mark_owed`]).
    fn take_snapshot(&mut self) {
        let now = self.now;
        let ranked = self.ledger_engine();
        let load = (*self.entitlements()).clone();
        let engine = ranked.with_load(load);
        for (t, team) in self.w.teams.iter().enumerate() {
            self.team_rank[t] = engine.fair_tree().rank(team.leaf);
            self.team_below[t] = engine.load().is_some_and(|l| l.below(team.leaf));
        }
        self.engine = Some(engine);
        self.mark_owed();
        self.next_refresh = self.tick_after(now);
        self.snapshot += 1;
        self.epoch += 1;
    }

    /// The engine on the usage the plugins would read now: the tracker's,
    /// or with `ledger_lag` the ledger's, which has not yet seen the
    /// starts and ends of the last `ledger_lag` seconds. An unseen start
    /// takes its charge so far off its account; an unseen end adds the
    /// charge the job would have made had it run on (the ledger charges a
    /// job it believes running up to now). (The few seconds of the window's
    /// far end are not shifted: a 7-day window moves by nothing that
    /// matters.)
    fn ledger_engine(&mut self) -> Engine {
        let lag = self.sim.ledger_lag;
        if lag == 0 {
            return Engine::from_tracker(self.config.clone(), &self.tracker);
        }
        let now = self.now;
        // Seen: what happened `lag` seconds ago or earlier.
        while self
            .ledger_recent
            .front()
            .is_some_and(|e| e.at + lag <= now)
        {
            self.ledger_recent.pop_front();
        }
        let mut usage: Vec<f64> = vec![0.0; self.w.accounts.len()];
        let index: std::collections::HashMap<&str, usize> = self
            .w
            .accounts
            .iter()
            .enumerate()
            .map(|(i, a)| (a.as_str(), i))
            .collect();
        let mut other: Vec<(&str, f64)> = Vec::new();
        for (a, u) in self.tracker.occupancies() {
            match index.get(a) {
                Some(&i) => usage[i] = u as f64,
                None => other.push((a, u as f64)),
            }
        }
        for e in &self.ledger_recent {
            let u = &mut usage[e.account as usize];
            let r = e.rate as f64;
            match e.charged_end {
                None => *u -= r * (now - e.at) as f64,
                Some(end) => *u += r * now.saturating_sub(end) as f64,
            }
        }
        let accounts = self
            .w
            .accounts
            .iter()
            .zip(&usage)
            .map(|(a, &u)| (a.as_str(), u.max(0.0)))
            .chain(other);
        Engine::from_account_usage(self.config.clone(), accounts, now).0
    }

    /// The owed band of every pending allocated job
    /// ([`fairshare::Engine::owed_bands`]) on the live load, with the
    /// snapshot's ranks: each team's debug work, batch work and sweeps (not
    /// the jobs that used their requeues, which wait for their team's
    /// share). Returns true if it changed (the queue heads' keys with it).
    pub(super) fn mark_owed(&mut self) -> bool {
        let Some(engine) = self.engine.as_ref() else {
            return false;
        };
        let load = self.entitlements();
        let mut buf = std::mem::take(&mut self.owed_buf);
        buf.clear();
        let mut tradeable = vec![0u64; self.config.tree.leaves().len()];
        for (t, team) in self.w.teams.iter().enumerate() {
            let base = t * QUEUES_PER_TEAM;
            for (q, debug) in [(base + 1, false), (base + 2, true), (base + 3, false)] {
                for sl in self.queues[q].iter() {
                    buf.push(fairshare::owed::Queued {
                        id: u64::from(sl.id),
                        leaf: team.leaf,
                        gpus: u64::from(self.w.jobs[sl.id as usize].gpus()),
                        debug,
                        eligible: sl.eligible,
                    });
                }
            }
            tradeable[team.leaf.0 as usize] += self.tradeable(t);
        }
        let owed = engine.owed_bands(&load, &mut buf, &tradeable);
        self.owed_buf = buf;
        if engine.owed() == Some(&owed) {
            return false;
        }
        self.engine = self.engine.take().map(|e| e.with_owed(owed));
        true
    }

    /// The leaves' allocated GPUs running and pending now, and their
    /// entitlements to the capacity now.
    pub(super) fn entitlements(&self) -> std::sync::Arc<Entitlements> {
        let mut guard = self.load_cache.borrow_mut();
        let cache = &mut *guard;
        if cache.version != Some((self.load_version, u64::from(self.snapshot))) {
            let (tree, capacity) = (&self.config.tree, self.cluster.capacity);
            let (running, pending) = (&self.leaf_running, &self.leaf_pending);
            match std::sync::Arc::get_mut(&mut cache.value) {
                Some(e) => e.recompute(tree, capacity, running, pending, &mut cache.scratch),
                None => {
                    cache.value =
                        std::sync::Arc::new(Entitlements::compute(tree, capacity, running, pending))
                }
            }
            cache.version = Some((self.load_version, u64::from(self.snapshot)));
        }
        cache.value.clone()
    }
}

#[cfg(test)]
mod tests;
