//! The metrics read from the ledger after each successful pass: the
//! per-node values of the budget report, the open jobs per account, the
//! event, requeue, preemption (and recorded preemption, by rule) and
//! health-drain counters, drain durations.

use super::*;
use crate::reports::budget;

impl SidecarMetrics {
    /// Replaces the per-node, per-account and ledger metrics with what the
    /// ledger says now: the budget report of `[now - window, now)` for
    /// `capacity` GPUs, the open jobs, the events and the row count.
    ///
    /// # Errors
    /// Ledger errors (the previous values stay).
    pub fn update_from_ledger(
        &self,
        reader: &LedgerReader,
        config: Arc<Config>,
        capacity: u64,
        now: i64,
    ) -> allot_ledger::Result<()> {
        let window = config.window as i64;
        let report = budget::build(reader, config.clone(), capacity, now - window, now, false)?;
        let open = reader.open_gpus()?;
        let events = reader.events(i64::MIN, i64::MAX)?;
        let rows = reader.attempt_count()?;
        let by_rule = reader.preemptions_by_rule()?;
        let mut interrupted = self.interrupted.lock().unwrap_or_else(|e| e.into_inner());
        interrupted.update(reader)?;

        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.capacity.set(capacity as i64);
        self.window.set(window);
        self.ledger_rows.set(rows as i64);
        for f in [
            &self.node_share,
            &self.node_allocation_ratio,
            &self.node_allocation,
            &self.node_usage,
            &self.node_free_usage,
            &self.node_level_fs,
            &self.node_fair_share,
        ] {
            f.clear();
        }
        // The report's first lines are the tree's nodes in pre-order
        // (children in tree order); lines outside the tree follow.
        let tree = &config.tree;
        let mut stack = vec![Tree::ROOT];
        let mut lines = report.lines.iter();
        while let Some(id) = stack.pop() {
            let n = tree.node(id);
            let Some(l) = lines.next() else { break };
            debug_assert_eq!(l.account, n.name);
            let labels: Labels = vec![
                ("node", n.name.clone()),
                ("path", n.path.clone()),
                (
                    "parent",
                    n.parent
                        .map(|p| tree.node(p).name.clone())
                        .unwrap_or_default(),
                ),
            ];
            // Base units, as Prometheus wants: the report's GPU-seconds, and
            // its allocation (GPU-hours) in GPU-seconds.
            let values = [
                (
                    &self.node_share,
                    Some(if id == Tree::ROOT { 1.0 } else { n.norm_share }),
                ),
                (&self.node_allocation_ratio, Some(n.allocation)),
                (
                    &self.node_allocation,
                    Some(n.allocation * capacity as f64 * window as f64),
                ),
                (&self.node_usage, Some(l.charged_gpu_seconds)),
                (
                    &self.node_free_usage,
                    Some(l.unallocated_gpu_seconds as f64),
                ),
                (&self.node_level_fs, l.level_fs),
                (&self.node_fair_share, l.fair_share),
            ];
            for (family, v) in values {
                if let Some(v) = v {
                    family.get_or_create(&labels).set(v);
                }
            }
            for c in n.children.iter().rev() {
                stack.push(*c);
            }
        }
        for f in [
            &self.running_gpus,
            &self.pending_gpus,
            &self.running_jobs,
            &self.pending_jobs,
        ] {
            f.clear();
        }
        for ((account, free), o) in &open {
            let labels: Labels = vec![
                ("account", account.clone()),
                ("tier", tier(*free).to_string()),
            ];
            for (family, v) in [
                (&self.running_gpus, o.running_gpus),
                (&self.pending_gpus, o.pending_gpus),
                (&self.running_jobs, o.running),
                (&self.pending_jobs, o.pending),
            ] {
                family.get_or_create(&labels).set(v as i64);
            }
        }
        // Counters: the ledger keeps every event and attempt, so its counts
        // only grow; each counter is brought up to its count.
        let mut counts: BTreeMap<(String, EventKind), u64> = BTreeMap::new();
        let mut health: BTreeMap<Labels, u64> = BTreeMap::new();
        // Job id -> times of allot's automatic requeues of it.
        let mut drain_requeues: BTreeMap<u64, Vec<i64>> = BTreeMap::new();
        for e in &events {
            let e = &e.event;
            *counts.entry((e.node.clone(), e.kind)).or_insert(0) += 1;
            match e.kind {
                EventKind::Health => {
                    let check = crate::health::check_of_reason(&e.reason);
                    *health
                        .entry(vec![("node", e.node.clone()), ("check", check.to_string())])
                        .or_insert(0) += 1;
                }
                EventKind::Requeue => {
                    if let Some(j) = e.job_id {
                        drain_requeues.entry(j).or_default().push(e.time);
                    }
                }
                _ => {}
            }
        }
        for ((node, kind), n) in counts {
            bring_up(
                &self.node_events,
                &vec![("node", node), ("kind", kind.as_str().to_string())],
                n,
            );
        }
        for (labels, n) in health {
            bring_up(&self.health_drains, &labels, n);
        }
        let (requeues, preemptions) = interruptions(interrupted.attempts(), &drain_requeues);
        for (labels, n) in requeues {
            bring_up(&self.requeues, &labels, n);
        }
        for (labels, n) in preemptions {
            bring_up(&self.preemptions, &labels, n);
        }
        for (rule, n) in by_rule {
            bring_up(&self.recorded_preemptions, &vec![("rule", rule)], n);
        }
        self.drain_emptied_after.clear();
        for d in crate::reports::health::build(events).drains {
            if let Some(s) = d.emptied_after {
                // Oldest first: the latest episode's value stays.
                self.drain_emptied_after
                    .get_or_create(&vec![("node", d.node)])
                    .set(s);
            }
        }
        Ok(())
    }
}

/// Raises counter `labels` of `family` to `n` (never lowers it).
fn bring_up(family: &Family<Labels, Counter>, labels: &Labels, n: u64) {
    let c = family.get_or_create(labels);
    let have = c.get();
    if n > have {
        c.inc_by(n - have);
    }
}

/// The `tier` label of a job: `free` (minimum runtime 0) or `allocated`.
fn tier(free: bool) -> &'static str {
    if free {
        "free"
    } else {
        "allocated"
    }
}

/// Seconds within which an attempt's end follows allot's requeue event of
/// its job (the draining pass records the event, then runs `scontrol
/// requeue`; Slurm ends the attempt then).
const DRAIN_REQUEUE_SLACK: i64 = 60;

/// Counts of the requeue and preemption counters from the ledger's
/// interrupted attempts and allot's requeue events (job id -> times):
/// `({account, tier, reason} -> requeues, {account, tier} -> preemptions)`.
/// - `PREEMPTED`: a preemption; a requeue (`preempted`) when a later
///   attempt of the job is in the ledger (`PreemptMode=CANCEL` ends it).
/// - `REQUEUED`, `REQUEUE_HOLD`, `REQUEUE_FED`: a requeue, `drain` when
///   allot's draining pass recorded a requeue of the job while the attempt
///   ran (up to [`DRAIN_REQUEUE_SLACK`] after its end), else `other`
///   (`scontrol requeue` by someone else, Slurm's own).
/// - `NODE_FAIL`: a requeue (`node_fail`) when a later attempt exists.
fn interruptions<'a>(
    attempts: impl IntoIterator<Item = &'a InterruptedAttempt>,
    drain_requeues: &BTreeMap<u64, Vec<i64>>,
) -> (BTreeMap<Labels, u64>, BTreeMap<Labels, u64>) {
    let mut requeues: BTreeMap<Labels, u64> = BTreeMap::new();
    let mut preemptions: BTreeMap<Labels, u64> = BTreeMap::new();
    for a in attempts {
        let base: Labels = vec![
            ("account", a.account.clone()),
            ("tier", tier(a.min_runtime == 0).to_string()),
        ];
        let reason = match a.state.as_str() {
            "PREEMPTED" => {
                *preemptions.entry(base.clone()).or_insert(0) += 1;
                a.requeued.then_some("preempted")
            }
            "NODE_FAIL" => a.requeued.then_some("node_fail"),
            s if s.starts_with("REQUEUE") => {
                let by_drain = drain_requeues.get(&a.job_id).is_some_and(|ts| {
                    ts.iter().any(|&t| {
                        t >= a.start.unwrap_or(i64::MIN) && t <= a.end + DRAIN_REQUEUE_SLACK
                    })
                });
                Some(if by_drain { "drain" } else { "other" })
            }
            _ => None,
        };
        if let Some(r) = reason {
            let mut l = base;
            l.push(("reason", r.to_string()));
            *requeues.entry(l).or_insert(0) += 1;
        }
    }
    (requeues, preemptions)
}
