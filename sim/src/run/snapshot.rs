//! The policy's view of the cluster: the engine snapshot (`allot`, rebuilt
//! every `sync.interval`) or the decayed usage of the baselines, and the
//! leaves' entitlements now (cached per load version).

use super::*;

impl Sim<'_> {
    /// Rebuilds the policy's view (engine snapshot or decayed usage) when due.
    pub(super) fn refresh(&mut self) {
        let now = self.now;
        match self.policy {
            Policy::Allot if now >= self.next_refresh || self.engine.is_none() => {
                let engine = Engine::from_tracker(self.config.clone(), &self.tracker)
                    .with_load((*self.entitlements()).clone());
                for (t, team) in self.w.teams.iter().enumerate() {
                    self.team_rank[t] = engine.fair_tree().rank(team.leaf);
                    self.team_below[t] = engine.load().is_some_and(|l| l.below(team.leaf));
                }
                self.engine = Some(engine);
                let iv = self.config.sync_interval.max(1);
                self.next_refresh = (now / iv + 1) * iv;
                self.snapshot += 1;
                self.epoch += 1;
            }
            Policy::Classic | Policy::FairTree if now >= self.decay.next => {
                let s = &self.config.sim;
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

    /// The leaves' allocated GPUs running and pending now, and their
    /// entitlements to the capacity now.
    pub(super) fn entitlements(&self) -> std::rc::Rc<Entitlements> {
        let mut guard = self.load_cache.borrow_mut();
        let cache = &mut *guard;
        if cache.version != Some(self.load_version) {
            let (tree, capacity) = (&self.config.tree, self.cluster.capacity);
            let (running, pending) = (&self.leaf_running, &self.leaf_pending);
            match std::rc::Rc::get_mut(&mut cache.value) {
                Some(e) => e.recompute(tree, capacity, running, pending, &mut cache.scratch),
                None => {
                    cache.value =
                        std::rc::Rc::new(Entitlements::compute(tree, capacity, running, pending))
                }
            }
            cache.version = Some(self.load_version);
        }
        cache.value.clone()
    }
}
