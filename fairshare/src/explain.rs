//! A structured "why" for one job: its account's place in Fair Tree (Level
//! FS at each level of its path), its tier, its priority factors, the
//! protection it has left and what could preempt it. `sprio`, `allot
//! explain` and the simulator all print this; it serialises to JSON.

use serde::Serialize;

use crate::contract::{protected_until, requeues_used, Contract, Tier};
use crate::duration::SlurmDuration;
use crate::engine::Engine;
use crate::fair_tree::LevelFs;
use crate::priority::{PendingJob, PriorityFactors};
use crate::tree::NodeId;

/// One level of the path from the root to the job's leaf.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Level {
    /// Node path, e.g. `tree.nlp.a1`.
    pub node: String,
    /// Raw share.
    pub share: u32,
    /// Share normalised among siblings.
    pub norm_share: f64,
    /// Fraction of the cluster this node may claim.
    pub allocation: f64,
    /// Charged usage of the subtree in the window, in charge units
    /// (GPU-seconds by default): the engine's milli-units / 1000.
    pub usage: f64,
    /// Usage as a fraction of the parent's.
    pub effective_usage: f64,
    /// Level FS = norm_share / effective_usage.
    pub level_fs: LevelFs,
    /// Place among its siblings by Level FS (1 = first).
    pub place: usize,
    /// Number of siblings, itself included.
    pub siblings: usize,
}

/// Protection a running job has left.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Protection {
    /// Minimum runtime, seconds.
    pub min_runtime: u64,
    /// Running seconds so far (suspended time excluded).
    pub run_time: u64,
    /// Running seconds of protection left (0 = preemptible now).
    pub left: u64,
    /// Epoch second protection ends if the job keeps running; `None` while
    /// suspended.
    pub until: Option<u64>,
}

/// What could preempt a running job (ignoring whether it would fit).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Preemptible {
    /// Nothing can preempt it before this epoch second: the end of its
    /// protection, or with `[contract] requeue_period` the first requeue
    /// point after it (`now` if it is preemptible already; `None` while a
    /// suspended job waits for either).
    pub from: Option<u64>,
    /// True for an unallocated job: any allocated job, of any account.
    pub by_any_allocated_job: bool,
    /// GPUs its leaf held above its entitlement at the snapshot (`None`:
    /// the snapshot has no load, or the job is unallocated).
    pub leaf_surplus: Option<u64>,
    /// Leaves (paths) below their entitlement at the snapshot: their
    /// allocated jobs may preempt it once it is unprotected, as long as its
    /// leaf stays at or above its entitlement ([`crate::preempt`]).
    pub by_leaves_below_entitlement: Vec<String>,
    /// Times it has been requeued (Slurm's `Restarts`).
    pub requeues: u32,
    /// Requeues left before it runs to its end (`[contract] max_requeues`;
    /// [`crate::contract::requeues_used`]); `None` for the free tier,
    /// which has no bound.
    pub requeues_left: Option<u32>,
}

/// Why a job has its priority and its preemption exposure.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explanation {
    /// Slurm account.
    pub account: String,
    /// Its leaf's path; `None` if the account is not in the tree.
    pub leaf: Option<String>,
    /// Tier.
    pub tier: Tier,
    /// Fair Tree rank (L = first); 0 if unknown.
    pub rank: u32,
    /// Number of leaves L.
    pub leaves: usize,
    /// Fair-share factor rank / L.
    pub fair_share: f64,
    /// Levels from the root's child down to the leaf.
    pub levels: Vec<Level>,
    /// Priority factors (pending jobs).
    pub priority: Option<PriorityFactors>,
    /// Protection (running jobs).
    pub protection: Option<Protection>,
    /// What could preempt it (running jobs).
    pub preemptible: Option<Preemptible>,
    /// One line for humans.
    pub summary: String,
}

impl Engine {
    fn levels(&self, leaf_node: NodeId) -> Vec<Level> {
        let tree = self.tree();
        let fair = self.fair_tree();
        tree.lineage(leaf_node)
            .into_iter()
            .map(|id| {
                let n = tree.node(id);
                let sibs = &tree.node(n.parent.unwrap_or(id)).children;
                let lfs = fair.level_fs(id);
                let place = 1 + sibs.iter().filter(|&&s| fair.level_fs(s).0 > lfs.0).count();
                Level {
                    node: n.path.clone(),
                    share: n.share,
                    norm_share: n.norm_share,
                    allocation: n.allocation,
                    usage: fair.usage(id) / crate::charge::MILLI_PER_UNIT as f64,
                    effective_usage: fair.effective_usage(id),
                    level_fs: lfs,
                    place,
                    siblings: sibs.len(),
                }
            })
            .collect()
    }

    fn base(&self, account: &str, min_runtime: u64) -> Explanation {
        let leaf = self.leaf_of(account);
        let fair = self.fair_tree();
        Explanation {
            account: account.to_string(),
            leaf: leaf.map(|l| self.tree().node(self.tree().leaf_node(l)).path.clone()),
            tier: Tier::of(min_runtime),
            rank: leaf.map_or(0, |l| fair.rank(l)),
            leaves: self.tree().leaves().len(),
            fair_share: leaf.map_or(0.0, |l| fair.factor(l)),
            levels: leaf.map_or_else(Vec::new, |l| self.levels(self.tree().leaf_node(l))),
            priority: None,
            protection: None,
            preemptible: None,
            summary: String::new(),
        }
    }

    /// Explains a pending job's priority.
    pub fn explain_pending(&self, job: &PendingJob<'_>) -> Explanation {
        let mut e = self.base(job.account, job.min_runtime);
        let f = self.priority_factors(job);
        e.summary = match &e.leaf {
            None => format!(
                "account {} is not in the tree: ranked below every known account",
                job.account
            ),
            Some(path) => format!(
                "{:?} job of {path}: account rank {} of {} (fair-share {:.3}); priority {}",
                e.tier, e.rank, e.leaves, e.fair_share, f.priority
            ),
        };
        e.priority = Some(f);
        e
    }

    /// Explains a running job's protection and what could preempt it at
    /// `now` (epoch seconds).
    /// A running job of `account` with `contract`, requeued `requeues`
    /// times so far, at `now` (epoch seconds).
    pub fn explain_running(
        &self,
        account: &str,
        contract: &Contract,
        requeues: u32,
        now: u64,
    ) -> Explanation {
        let mut e = self.base(account, contract.min_runtime);
        let run_time = contract.clock.run_time(now);
        let left = contract.min_runtime.saturating_sub(run_time);
        let until = protected_until(contract, now);
        e.protection = Some(Protection {
            min_runtime: contract.min_runtime,
            run_time,
            left,
            until,
        });
        let by_any = e.tier == Tier::Unallocated;
        let leaf = self.leaf_of(account);
        let (surplus, below): (Option<u64>, Vec<String>) = match (self.load(), by_any) {
            (Some(load), false) => (
                leaf.map(|l| load.surplus(l)),
                self.tree()
                    .leaves()
                    .iter()
                    .enumerate()
                    .map(|(i, &n)| (crate::tree::LeafId(i as u32), n))
                    .filter(|&(l, _)| Some(l) != leaf && load.below(l))
                    .map(|(_, n)| self.tree().node(n).path.clone())
                    .collect(),
            ),
            _ => (None, Vec::new()),
        };
        // Past its protection an allocated job also waits for its next
        // requeue point (crate::contract::RequeuePoints).
        let points = self.config().contract.requeue;
        let from = if e.tier == Tier::Unallocated {
            until
        } else {
            points.preemptible_from(contract, now)
        };
        let max = self.config().contract.max_requeues;
        let requeues_left = (!by_any).then(|| max.saturating_sub(requeues));
        let used = requeues_used(contract.min_runtime, requeues, max);
        let from = if used { None } else { from };
        let when = match from {
            _ if used => "never".to_string(),
            Some(t) if t <= now => "now".to_string(),
            Some(t) => format!("in {}", SlurmDuration(t - now)),
            None => "not while suspended".to_string(),
        };
        e.summary = if by_any {
            format!("unallocated job: preemptible by any allocated job {when}")
        } else if used {
            format!(
                "allocated job, requeued {requeues} time(s): it has used the {max} requeues of its contract and runs to its end (still charged; a drain still requeues it at its minimum runtime)"
            )
        } else {
            let surplus = match surplus {
                Some(s) => format!("{s} GPU(s)"),
                None => "the GPUs".to_string(),
            };
            let points = if points.period == 0 {
                String::new()
            } else {
                format!(
                    " (then in the first {} of every {} of running time)",
                    SlurmDuration(points.window),
                    SlurmDuration(points.period)
                )
            };
            format!(
                "allocated job, {} of protection left; preemptible {when}{points} by allocated jobs of {} leaf(s) below their entitlement: freely while its leaf holds {surplus} above its own, beyond that only by a job that covers at least twice the entitlement its leaf would lose; {} of its {max} requeues left",
                SlurmDuration(left),
                below.len(),
                max.saturating_sub(requeues)
            )
        };
        e.preemptible = Some(Preemptible {
            from,
            by_any_allocated_job: by_any,
            leaf_surplus: surplus,
            by_leaves_below_entitlement: below,
            requeues,
            requeues_left,
        });
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::RunClock;

    const NOW: u64 = 1_700_000_000;

    fn engine() -> Engine {
        crate::testutil::example_engine(NOW)
    }

    #[test]
    fn pending_job_levels_and_rank() {
        let e = engine();
        let x = e.explain_pending(&PendingJob {
            id: 0,
            account: "a2",
            min_runtime: 3600,
            nice: 0,
            eligible_time: NOW,
            sweep: false,
            gpus: 1,
            time_limit: None,
        });
        assert_eq!(x.leaf.as_deref(), Some("tree.a.a2"));
        assert_eq!(
            (x.rank, x.leaves, x.fair_share, x.tier),
            (2, 4, 0.5, Tier::Allocated)
        );
        assert_eq!(x.levels.len(), 2);
        assert_eq!(x.levels[0].node, "tree.a");
        assert!((x.levels[0].level_fs.0 - 0.9).abs() < 1e-12);
        assert_eq!((x.levels[0].place, x.levels[0].siblings), (2, 2));
        assert!((x.levels[1].level_fs.0 - 2.5).abs() < 1e-12);
        assert_eq!(x.levels[1].place, 1);
        assert!(x.priority.is_some() && x.protection.is_none());
        assert!(x.summary.contains("rank 2 of 4"), "{}", x.summary);
    }

    #[test]
    fn running_job_protection_and_preemptors() {
        let e = engine();
        let c = Contract {
            min_runtime: 3600,
            clock: RunClock::started(NOW - 600),
        };
        let x = e.explain_running("a2", &c, 0, NOW);
        let p = x.protection.unwrap();
        assert_eq!((p.run_time, p.left, p.until), (600, 3000, Some(NOW + 3000)));
        let pre = x.preemptible.unwrap();
        assert_eq!(pre.from, Some(NOW + 3000));
        assert!(
            pre.by_leaves_below_entitlement.is_empty(),
            "no load in this snapshot"
        );
        assert_eq!(pre.leaf_surplus, None);
        // With a load: b1 and b2 wait below their entitlement, a2 holds 6 of 2.4.
        let tree = e.tree();
        let leaf = |a: &str| e.leaf_of(a).unwrap().0 as usize;
        let (mut run, mut pend) = (vec![0u64; 4], vec![0u64; 4]);
        run[leaf("a2")] = 6;
        pend[leaf("b1")] = 4;
        pend[leaf("b2")] = 4;
        let loaded = e
            .clone()
            .with_load(crate::Entitlements::compute(tree, 8, &run, &pend));
        let x = loaded.explain_running("a2", &c, 0, NOW);
        let pre = x.preemptible.unwrap();
        assert_eq!(pre.by_leaves_below_entitlement, ["tree.b.b1", "tree.b.b2"]);
        // a2 is entitled to 4.8 (a's 60% of 8, a1 idle): 1 whole GPU above.
        assert_eq!(pre.leaf_surplus, Some(1), "{pre:?}");
        assert!(
            x.summary.contains("00:50:00 of protection left"),
            "{}",
            x.summary
        );
        let free = e.explain_running(
            "b1",
            &Contract {
                min_runtime: 0,
                clock: RunClock::started(NOW),
            },
            7,
            NOW,
        );
        let free = free.preemptible.unwrap();
        assert!(free.by_any_allocated_job);
        assert_eq!(free.requeues_left, None, "the free tier has no bound");
        // Requeued twice: one of its three requeues left; three: none, and
        // nothing preempts it any more.
        let c = Contract {
            min_runtime: 3600,
            clock: RunClock::started(NOW - 2 * 3600),
        };
        let x = loaded.explain_running("a2", &c, 2, NOW);
        assert_eq!(x.preemptible.as_ref().unwrap().requeues_left, Some(1));
        assert!(
            x.summary.contains("1 of its 3 requeues left"),
            "{}",
            x.summary
        );
        let x = loaded.explain_running("a2", &c, 3, NOW);
        let pre = x.preemptible.unwrap();
        assert_eq!((pre.requeues_left, pre.from), (Some(0), None));
        assert!(x.summary.contains("runs to its end"), "{}", x.summary);
    }

    #[test]
    fn past_its_protection_a_job_waits_for_its_next_requeue_point() {
        let mut config = crate::config::Config::with_tree(crate::testutil::example_tree());
        config.contract.requeue = crate::contract::RequeuePoints {
            period: 1800,
            window: 300,
        };
        let e = Engine::new(
            std::sync::Arc::new(config),
            crate::testutil::example_usage(),
            NOW,
        );
        let at = |ran: u64| {
            let c = Contract {
                min_runtime: 3600,
                clock: RunClock::started(NOW - ran),
            };
            e.explain_running("a2", &c, 0, NOW)
        };
        // Protected for 50 min more; 1 h is a requeue point.
        assert_eq!(at(600).preemptible.unwrap().from, Some(NOW + 3000));
        assert_eq!(at(3700).preemptible.unwrap().from, Some(NOW));
        // 1 h 10 min: between points, the next at 1 h 30 min.
        let x = at(4200);
        assert_eq!(x.preemptible.unwrap().from, Some(NOW + 1200));
        assert!(
            x.summary
                .contains("(then in the first 00:05:00 of every 00:30:00 of running time)"),
            "{}",
            x.summary
        );
    }

    #[test]
    fn serialises_to_json_with_infinite_level_fs_as_inf() {
        let e = engine();
        let x = e.explain_pending(&PendingJob {
            id: 0,
            account: "b1",
            min_runtime: 0,
            nice: 0,
            eligible_time: NOW,
            sweep: false,
            gpus: 1,
            time_limit: None,
        });
        let json = serde_json::to_value(&x).unwrap();
        assert_eq!(json["tier"], "unallocated");
        assert_eq!(json["levels"][1]["level_fs"], "inf");
        assert!((json["levels"][0]["level_fs"].as_f64().unwrap() - 1.2).abs() < 1e-12);
        assert_eq!(json["priority"]["rank"], 4);
    }

    #[test]
    fn unknown_account_is_explained() {
        let e = engine();
        let x = e.explain_pending(&PendingJob {
            id: 0,
            account: "ghost",
            min_runtime: 0,
            nice: 0,
            eligible_time: NOW,
            sweep: false,
            gpus: 1,
            time_limit: None,
        });
        assert_eq!((x.leaf, x.rank, x.levels.len()), (None, 0, 0));
        assert!(x.summary.contains("not in the tree"));
    }
}
