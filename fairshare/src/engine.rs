//! The engine snapshot the plugins hold: a config plus the usage at one
//! `now`, ranked once. Immutable, `Send + Sync`, cheap to query: a priority
//! costs one hash lookup and a few integer operations, so a pass over
//! 100,000 pending jobs takes milliseconds. A background thread builds a new
//! `Engine` from the ledger and swaps it in; calls read the current one.
//!
//! Preemption ([`crate::preempt`]) and explanations ([`crate::explain`])
//! are further `impl Engine` blocks in their own files.

use std::sync::Arc;

use crate::config::Config;
use crate::contract::Tier;
use crate::entitlement::Entitlements;
use crate::fair_tree::FairTree;
use crate::owed::{OwedBands, Queued};
use crate::priority::{compose, Band, PendingJob, PriorityFactors};
use crate::tree::{LeafId, Tree};
use crate::usage::UsageTracker;

/// A ranked snapshot: config + per-leaf usage at `now`.
#[derive(Debug, Clone)]
pub struct Engine {
    config: Arc<Config>,
    now: u64,
    leaf_usage: Vec<f64>,
    fair: FairTree,
    /// The leaves' running GPUs and entitlements when the snapshot was
    /// taken (for the priority band); `None` = every leaf counts as served.
    load: Option<Arc<Entitlements>>,
    /// The owed band of the pending jobs at the snapshot
    /// ([`crate::owed`]); `None` = every allocated job is band 1.
    owed: Option<Arc<OwedBands>>,
}

impl Engine {
    /// Ranks the tree with `leaf_usage[leaf]` = charged usage of each leaf
    /// inside the window (charge milli-unit-seconds, [`crate::charge`]:
    /// 1000 per GPU-second by default), as of `now` (epoch
    /// seconds). Missing entries count as 0.
    pub fn new(config: Arc<Config>, mut leaf_usage: Vec<f64>, now: u64) -> Engine {
        leaf_usage.resize(config.tree.leaves().len(), 0.0);
        let fair = FairTree::compute(&config.tree, &leaf_usage);
        Engine {
            config,
            now,
            leaf_usage,
            fair,
            load: None,
            owed: None,
        }
    }

    /// Ranks with the occupancy a tracker holds at its `now`. Accounts the
    /// tree does not know are ignored.
    pub fn from_tracker(config: Arc<Config>, tracker: &UsageTracker) -> Engine {
        let usage = leaf_usage(
            &config.tree,
            tracker.occupancies().map(|(a, u)| (a, u as f64)),
        )
        .0;
        Engine::new(config, usage, tracker.now())
    }

    /// Ranks with per-account usage (charge milli-unit-seconds, as
    /// [`Engine::new`]). Returns the engine and
    /// the accounts the tree does not know (their usage is ignored).
    pub fn from_account_usage<'a>(
        config: Arc<Config>,
        usage: impl IntoIterator<Item = (&'a str, f64)>,
        now: u64,
    ) -> (Engine, Vec<&'a str>) {
        let (u, unknown) = leaf_usage(&config.tree, usage);
        (Engine::new(config, u, now), unknown)
    }

    /// The config this snapshot ranks.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The shared config handle (to build the next snapshot).
    pub fn config_arc(&self) -> &Arc<Config> {
        &self.config
    }

    /// The org tree.
    pub fn tree(&self) -> &Tree {
        &self.config.tree
    }

    /// The Fair Tree result (Level FS per node, rank per leaf).
    pub fn fair_tree(&self) -> &FairTree {
        &self.fair
    }

    /// The time the usage was taken at (epoch seconds).
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Usage of each leaf, indexed by [`LeafId`].
    pub fn leaf_usage(&self) -> &[f64] {
        &self.leaf_usage
    }

    /// The leaf of a Slurm account.
    pub fn leaf_of(&self, account: &str) -> Option<LeafId> {
        self.config.tree.leaf_of_account(account)
    }

    /// Fair Tree rank of an account (L = first, 1 = last); `None` if the
    /// account is not in the tree.
    pub fn rank(&self, account: &str) -> Option<u32> {
        self.leaf_of(account).map(|l| self.fair.rank(l))
    }

    /// Fair-share factor of an account, in (0, 1]; `None` if unknown.
    pub fn fair_share(&self, account: &str) -> Option<f64> {
        self.leaf_of(account).map(|l| self.fair.factor(l))
    }

    /// The same snapshot with the leaves' running GPUs and entitlements
    /// at its `now` (they set the priority band of allocated jobs).
    pub fn with_load(mut self, load: Entitlements) -> Engine {
        self.load = Some(Arc::new(load));
        self
    }

    /// The load given to [`Engine::with_load`], if any.
    pub fn load(&self) -> Option<&Entitlements> {
        self.load.as_deref()
    }

    /// The same snapshot with the owed band of its pending jobs
    /// ([`Engine::owed_bands`] on its load).
    pub fn with_owed(mut self, owed: OwedBands) -> Engine {
        self.owed = Some(Arc::new(owed));
        self
    }

    /// The owed band of every pending allocated job on `load`
    /// ([`crate::owed::owed_bands`] with this snapshot's Fair Tree).
    pub fn owed_bands(
        &self,
        load: &Entitlements,
        queued: &mut [Queued],
        tradeable: &crate::owed::Tradeable,
    ) -> OwedBands {
        crate::owed::owed_bands(self.tree(), &self.fair, load, queued, tradeable)
    }

    /// True if the leaf and each group above it use at most their share of
    /// the window ([`crate::owed::below_window_share`]).
    pub fn below_window_share(&self, leaf: LeafId) -> bool {
        crate::owed::below_window_share(self.tree(), &self.fair, leaf)
    }

    /// The owed bands given to [`Engine::with_owed`], if any.
    pub fn owed(&self) -> Option<&OwedBands> {
        self.owed.as_deref()
    }

    /// The job's priority band ([`crate::owed`]): free tier, else its band
    /// in the snapshot's owed bands (allocated when there are none, or the
    /// job arrived after the snapshot: it is placed at the next one).
    pub fn band(&self, job: &PendingJob<'_>) -> Band {
        if Tier::of(job.min_runtime) == Tier::Unallocated {
            return Band::Free;
        }
        match (&self.owed, self.leaf_of(job.account)) {
            (Some(owed), Some(leaf)) => {
                let q = Queued {
                    id: job.id,
                    leaf,
                    gpus: job.gpus,
                    debug: self.is_debug(job),
                    eligible: job.eligible_time,
                };
                owed.band(leaf, q.key(), job.id)
            }
            _ => Band::Allocated,
        }
    }

    /// True when a pending job of `account` with `min_runtime` seconds of
    /// contract, requeued `requeues` times, must wait to start because it
    /// has used its requeues and its leaf holds its entitlement or more
    /// ([`crate::contract::waits_for_share`]). Without a load nothing
    /// waits; an account not in the tree is entitled to nothing.
    pub fn waits_for_share(&self, account: &str, min_runtime: u64, requeues: u32) -> bool {
        let Some(load) = &self.load else {
            return false;
        };
        let below = self.leaf_of(account).is_some_and(|l| load.below(l));
        let used = crate::contract::requeues_used(
            min_runtime,
            requeues,
            self.config.contract.max_requeues,
        );
        crate::contract::waits_for_share(used, below)
    }

    /// True for debug work ([`crate::priority::PriorityWeights::is_debug`]).
    fn is_debug(&self, job: &PendingJob<'_>) -> bool {
        self.config.priority.is_debug(
            Tier::of(job.min_runtime),
            job.gpus,
            job.time_limit,
            job.sweep,
        )
    }

    /// The job's Slurm priority (see [`crate::priority`]). An account not in
    /// the tree ranks 0: below every known account of its band.
    pub fn priority(&self, job: &PendingJob<'_>) -> u32 {
        let rank = self.leaf_of(job.account).map_or(0, |l| self.fair.rank(l));
        let score = self.config.priority.score(
            job.nice,
            self.now.saturating_sub(job.eligible_time),
            self.is_debug(job),
        );
        compose(self.band(job), rank, score)
    }

    /// Priorities of many jobs, appended to `out` in order (one allocation
    /// for the whole pass).
    pub fn priorities(&self, jobs: &[PendingJob<'_>], out: &mut Vec<u32>) {
        out.reserve(jobs.len());
        out.extend(jobs.iter().map(|j| self.priority(j)));
    }

    /// The factors behind [`priority`](Self::priority), for sprio.
    pub fn priority_factors(&self, job: &PendingJob<'_>) -> PriorityFactors {
        let w = &self.config.priority;
        let leaf = self.leaf_of(job.account);
        let age = self.now.saturating_sub(job.eligible_time);
        let tier = Tier::of(job.min_runtime);
        let band = self.band(job);
        let rank = leaf.map_or(0, |l| self.fair.rank(l));
        let score = w.score(job.nice, age, self.is_debug(job));
        PriorityFactors {
            tier,
            band,
            rank,
            fair_share: leaf.map_or(0.0, |l| self.fair.factor(l)),
            age,
            age_points: w.age_points(age),
            nice: job.nice,
            score,
            priority: compose(band, rank, score),
        }
    }
}

/// Sums per-account usage into per-leaf usage; returns unknown accounts.
pub fn leaf_usage<'a>(
    tree: &Tree,
    usage: impl IntoIterator<Item = (&'a str, f64)>,
) -> (Vec<f64>, Vec<&'a str>) {
    let mut out = vec![0.0; tree.leaves().len()];
    let mut unknown = Vec::new();
    for (account, u) in usage {
        match tree.leaf_of_account(account) {
            Some(l) => out[l.0 as usize] += u,
            None => unknown.push(account),
        }
    }
    (out, unknown)
}

#[cfg(test)]
mod tests {

    use proptest::prelude::*;

    use super::*;
    use crate::testutil::{example_tree, example_usage, tree_and_usage};

    const NOW: u64 = 1_700_000_000;

    fn engine() -> Engine {
        crate::testutil::example_engine(NOW)
    }

    /// contract::waits_for_share through the engine: a job that has used
    /// its requeues waits while its leaf holds its entitlement, starts
    /// once the leaf is below it; one with requeues left never waits.
    #[test]
    fn a_job_that_used_its_requeues_waits_for_its_leafs_share() {
        let e = engine();
        let max = e.config().contract.max_requeues;
        assert_eq!(max, 3);
        assert!(
            !e.waits_for_share("a2", 3600, max),
            "no load: nothing waits"
        );
        let leaf = |a: &str| e.leaf_of(a).unwrap().0 as usize;
        let (mut run, mut pend) = (vec![0u64; 4], vec![0u64; 4]);
        // a2 holds 6 of 8 GPUs, entitled to 4.8 (b1 and b2 want 4 each).
        run[leaf("a2")] = 6;
        pend[leaf("a2")] = 2;
        pend[leaf("b1")] = 4;
        pend[leaf("b2")] = 4;
        let over = e
            .clone()
            .with_load(crate::Entitlements::compute(e.tree(), 8, &run, &pend));
        assert!(over.waits_for_share("a2", 3600, max));
        assert!(over.waits_for_share("a2", 3600, max + 2));
        assert!(!over.waits_for_share("a2", 3600, max - 1), "requeues left");
        assert!(
            !over.waits_for_share("a2", 0, max),
            "the free tier has no bound"
        );
        assert!(
            !over.waits_for_share("b1", 3600, max),
            "b1 is below its entitlement"
        );
        assert!(
            over.waits_for_share("nobody", 3600, max),
            "entitled to nothing"
        );
        // Once a2 holds 4 of its 4.8 (two of its jobs ended), it starts.
        run[leaf("a2")] = 4;
        let below = e
            .clone()
            .with_load(crate::Entitlements::compute(e.tree(), 8, &run, &pend));
        assert!(!below.waits_for_share("a2", 3600, max));
    }

    fn job(account: &str, min_runtime: u64, nice: i64, waited: u64) -> PendingJob<'_> {
        PendingJob {
            id: 0,
            account,
            min_runtime,
            nice,
            eligible_time: NOW - waited,
            gpus: 1,
            time_limit: None,
            sweep: false,
        }
    }

    #[test]
    fn priorities_follow_the_worked_example() {
        let e = engine();
        let p: Vec<u32> = ["b1", "b2", "a2", "a1"]
            .iter()
            .map(|a| e.priority(&job(a, 3600, 0, 0)))
            .collect();
        assert!(p.windows(2).all(|w| w[0] > w[1]), "{p:?}");
        assert_eq!(e.rank("b1"), Some(4));
        assert_eq!(e.fair_share("a2"), Some(0.5));
        assert_eq!(e.rank("nobody"), None);
        let f = e.priority_factors(&job("b2", 3600, 5, 86_400));
        assert_eq!((f.rank, f.fair_share, f.age, f.nice), (3, 0.75, 86_400, 5));
        assert_eq!(f.priority, e.priority(&job("b2", 3600, 5, 86_400)));
    }

    #[test]
    fn users_cannot_jump_another_team() {
        let e = engine();
        // a1 (last) with the best a user can do vs b2 with the worst.
        let best_a1 = e.priority(&job("a1", 3600, i64::MIN, NOW));
        let worst_b2 = e.priority(&job("b2", 3600, i64::MAX, 0));
        assert!(worst_b2 > best_a1);
        // Unallocated never passes allocated, whatever the account.
        assert!(e.priority(&job("a1", 1, 0, 0)) > e.priority(&job("b1", 0, i64::MIN, NOW)));
        // Inside an account: nice in points (as Slurm), then age: a nice
        // more than age_weight (1000) outweighs any waiting time.
        assert!(
            e.priority(&job("a1", 3600, 0, 0)) > e.priority(&job("a1", 3600, 1001, 30 * 86_400))
        );
        assert!(e.priority(&job("a1", 3600, 100, 0)) < e.priority(&job("a1", 3600, 0, 0)));
        assert!(e.priority(&job("a1", 3600, 0, 86_400)) > e.priority(&job("a1", 3600, 0, 0)));
    }

    #[test]
    fn from_tracker_and_account_usage_agree() {
        let config = Arc::new(Config::with_tree(example_tree()));
        let mut t = UsageTracker::new(100 * 86_400, NOW);
        for (a, h) in [("a1", 500), ("a2", 100), ("b2", 300), ("ghost", 7)] {
            t.add_closed(a, 1, NOW - h * 3600, NOW);
        }
        let e1 = Engine::from_tracker(config.clone(), &t);
        let (e2, unknown) =
            Engine::from_account_usage(config, t.occupancies().map(|(a, u)| (a, u as f64)), NOW);
        assert_eq!(unknown, ["ghost"]);
        assert_eq!(e1.leaf_usage(), e2.leaf_usage());
        assert_eq!(e1.leaf_usage(), example_usage());
        assert_eq!(e1.rank("b1"), Some(4));
    }

    proptest! {
        #[test]
        fn priority_order_is_tier_then_rank(
            (tree, usage) in tree_and_usage(),
            jobs in prop::collection::vec((0usize..64, 0u64..3, any::<i32>(), 0u64..10_000_000), 2..20),
        ) {
            let e = Engine::new(Arc::new(Config::with_tree(tree)), usage, NOW);
            let leaves = e.tree().leaves().len();
            let acct = |i: usize| e.tree().node(e.tree().leaves()[i % leaves]).accounts[0].clone();
            let names: Vec<String> = jobs.iter().map(|j| acct(j.0)).collect();
            let js: Vec<PendingJob<'_>> = jobs.iter().zip(&names).map(|(j, a)| PendingJob {
                id: 0, account: a, min_runtime: j.1 * 1800, nice: i64::from(j.2), eligible_time: NOW.saturating_sub(j.3),
                gpus: 1, time_limit: None, sweep: false,
            }).collect();
            let mut out = Vec::new();
            e.priorities(&js, &mut out);
            for (x, px) in js.iter().zip(&out) {
                prop_assert!(*px >= 1);
                for (y, py) in js.iter().zip(&out) {
                    let kx = (Tier::of(x.min_runtime), e.rank(x.account).unwrap());
                    let ky = (Tier::of(y.min_runtime), e.rank(y.account).unwrap());
                    if kx > ky {
                        prop_assert!(px > py, "{:?} {} vs {:?} {}", kx, px, ky, py);
                    }
                }
            }
        }
    }
}
