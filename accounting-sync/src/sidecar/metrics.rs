//! Prometheus metrics of the sidecar (`allot sync --follow --metrics-listen
//! ADDR:PORT`): `/metrics` in the OpenMetrics text format, which Prometheus
//! scrapes natively, served by a small HTTP server on a background thread.
//!
//! The sync loop calls [`SidecarMetrics::record_pass`] after every pass and
//! [`SidecarMetrics::update_from_ledger`] after every successful one; the
//! per-node values are those of [`crate::reports::budget::build`] over the last
//! window (what `allot report --json` prints for the same ledger). Names
//! and units: docs/operating.md.
//!
//! This module holds [`SidecarMetrics`] (every metric, registered), the
//! pass and draining-pass records and the encoding; its parts:
//! `from_ledger` (the values read from the ledger after a pass), `http`
//! (serving `/metrics`) and `exposition` (content types, the 0.0.4 text
//! format, a parser).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use allot_ledger::events::EventKind;
use allot_ledger::{InterruptedAttempt, InterruptedScan, LedgerReader};
use fairshare::{Config, Tree};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// A label set: (name, value) pairs.
type Labels = Vec<(&'static str, String)>;
type FGauge = Gauge<f64, AtomicU64>;
type IGauge = Gauge<i64, AtomicI64>;

mod exposition;
mod from_ledger;
mod http;
#[cfg(test)]
mod tests;

pub use exposition::{
    parse_exposition, to_text_format, Exposition, CONTENT_TYPE, TEXT_CONTENT_TYPE,
};
pub use http::listen_addr;

/// Every metric the sidecar serves, and the registry that encodes them.
#[derive(Debug)]
pub struct SidecarMetrics {
    registry: Registry,
    /// Held while the values are replaced and while they are encoded, so a
    /// scrape never sees a half-updated set.
    lock: Mutex<()>,
    /// The ledger's watermark after the last successful pass (`i64::MIN`:
    /// none yet): the lag is measured from it at each scrape.
    watermark: AtomicI64,
    capacity: IGauge,
    window: IGauge,
    node_share: Family<Labels, FGauge>,
    node_allocation_ratio: Family<Labels, FGauge>,
    node_allocation: Family<Labels, FGauge>,
    node_usage: Family<Labels, FGauge>,
    node_free_usage: Family<Labels, FGauge>,
    node_level_fs: Family<Labels, FGauge>,
    node_fair_share: Family<Labels, FGauge>,
    running_gpus: Family<Labels, IGauge>,
    pending_gpus: Family<Labels, IGauge>,
    running_jobs: Family<Labels, IGauge>,
    pending_jobs: Family<Labels, IGauge>,
    node_events: Family<Labels, Counter>,
    requeues: Family<Labels, Counter>,
    preemptions: Family<Labels, Counter>,
    recorded_preemptions: Family<Labels, Counter>,
    health_drains: Family<Labels, Counter>,
    drain_emptied_after: Family<Labels, IGauge>,
    draining_jobs: Family<Labels, IGauge>,
    draining_time_to_empty: Family<Labels, IGauge>,
    /// Per draining node, when it will be empty (epoch s), from the last
    /// draining pass: the time to empty is measured from it at each scrape.
    draining_empty_by: Mutex<BTreeMap<String, i64>>,
    /// The ledger's interrupted attempts, read incrementally pass after
    /// pass (the requeue and preemption counters are counted from them).
    interrupted: Mutex<InterruptedScan>,
    passes: Family<Labels, Counter>,
    last_success: IGauge,
    last_duration: FGauge,
    lag: IGauge,
    ledger_rows: IGauge,
}

impl Default for SidecarMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl SidecarMetrics {
    /// All metrics registered, none set yet.
    pub fn new() -> SidecarMetrics {
        let mut r = Registry::default();
        let m = SidecarMetrics {
            registry: Registry::default(),
            lock: Mutex::new(()),
            watermark: AtomicI64::new(i64::MIN),
            capacity: Default::default(),
            window: Default::default(),
            node_share: Default::default(),
            node_allocation_ratio: Default::default(),
            node_allocation: Default::default(),
            node_usage: Default::default(),
            node_free_usage: Default::default(),
            node_level_fs: Default::default(),
            node_fair_share: Default::default(),
            running_gpus: Default::default(),
            pending_gpus: Default::default(),
            running_jobs: Default::default(),
            pending_jobs: Default::default(),
            node_events: Default::default(),
            requeues: Default::default(),
            preemptions: Default::default(),
            recorded_preemptions: Default::default(),
            health_drains: Default::default(),
            drain_emptied_after: Default::default(),
            draining_jobs: Default::default(),
            draining_time_to_empty: Default::default(),
            draining_empty_by: Mutex::new(BTreeMap::new()),
            interrupted: Mutex::new(InterruptedScan::new()),
            passes: Default::default(),
            last_success: Default::default(),
            last_duration: Default::default(),
            lag: Default::default(),
            ledger_rows: Default::default(),
        };
        let info: Family<Labels, IGauge> = Default::default();
        info.get_or_create(&vec![("version", env!("CARGO_PKG_VERSION").to_string())])
            .set(1);
        r.register("allot_build", "allot's version (value 1)", info);
        r.register(
            "allot_capacity_gpus",
            "Cluster capacity in GPUs used for the allocations",
            m.capacity.clone(),
        );
        r.register(
            "allot_window_seconds",
            "Length of the fair-share window",
            m.window.clone(),
        );
        r.register(
            "allot_node_share_ratio",
            "Org-tree node's share among its siblings (0-1)",
            m.node_share.clone(),
        );
        r.register(
            "allot_node_allocation_ratio",
            "Org-tree node's allocation: fraction of the cluster (product of normalised shares from the root)",
            m.node_allocation_ratio.clone(),
        );
        r.register(
            "allot_node_allocation_gpu_seconds",
            "Org-tree node's allocation over the window in GPU-seconds: allocation x capacity x window",
            m.node_allocation.clone(),
        );
        r.register(
            "allot_node_window_usage_gpu_seconds",
            "Charged usage of the node's subtree inside the window (GPU-seconds with default charge weights)",
            m.node_usage.clone(),
        );
        r.register(
            "allot_node_free_tier_usage_gpu_seconds",
            "GPU-seconds held by the subtree's free-tier (minimum runtime 0) jobs inside the window",
            m.node_free_usage.clone(),
        );
        r.register(
            "allot_node_level_fs",
            "Fair Tree Level FS of the node (share / usage among siblings; +Inf = no usage); not for the root",
            m.node_level_fs.clone(),
        );
        r.register(
            "allot_node_fair_share_factor",
            "Fair-share factor of a leaf in (0, 1]: its rank among all leaves, 1 = served first",
            m.node_fair_share.clone(),
        );
        r.register(
            "allot_account_running_gpus",
            "GPUs held by the account's running jobs as of the last sync, by tier (allocated, free)",
            m.running_gpus.clone(),
        );
        r.register(
            "allot_account_pending_gpus",
            "GPUs asked for by the account's pending jobs as of the last sync, by tier",
            m.pending_gpus.clone(),
        );
        r.register(
            "allot_account_running_jobs",
            "Running job attempts of the account as of the last sync, by tier",
            m.running_jobs.clone(),
        );
        r.register(
            "allot_account_pending_jobs",
            "Pending job attempts of the account as of the last sync, by tier",
            m.pending_jobs.clone(),
        );
        r.register(
            "allot_node_events",
            "Health and draining events the ledger holds per Slurm node and kind (health, drain, requeue, kept, drained)",
            m.node_events.clone(),
        );
        r.register(
            "allot_requeues",
            "Ended job attempts in the ledger whose job went back to the queue, by account, tier and reason \
             (preempted, drain: allot's automatic requeue on a draining node, node_fail, other: scontrol requeue or Slurm)",
            m.requeues.clone(),
        );
        r.register(
            "allot_preemptions",
            "Job attempts in the ledger that ended PREEMPTED (requeued or cancelled), by account and tier",
            m.preemptions.clone(),
        );
        r.register(
            "allot_preemptions_recorded",
            "Preemptions preempt/allot recorded (the ledger's preemptions), by the clause that allowed them \
             (rule: free_tier, short_own_leaf, victim_not_in_tree, short_slack, net_gain)",
            m.recorded_preemptions.clone(),
        );
        r.register(
            "allot_health_drains",
            "Nodes drained by `allot health --drain` (ledger health events) per Slurm node and failed check \
             (the first failure of the drain reason: present, xid, ecc, retired_pages, row_remap, recovery_action, fabric, count, nvswitch, nvml, other)",
            m.health_drains.clone(),
        );
        r.register(
            "allot_node_drain_emptied_after_seconds",
            "How long the Slurm node's latest completed drain took to empty: from the drain to DRAINED (ledger events)",
            m.drain_emptied_after.clone(),
        );
        r.register(
            "allot_draining_node_jobs",
            "Jobs still running or suspended on a draining Slurm node at the last draining pass (requeued ones included)",
            m.draining_jobs.clone(),
        );
        r.register(
            "allot_draining_node_time_to_empty_seconds",
            "Seconds until the last protected job on a draining Slurm node reaches its minimum runtime \
             (0: every job is being requeued); absent when unknown (--no-requeue or suspended job)",
            m.draining_time_to_empty.clone(),
        );
        r.register(
            "allot_sync_passes",
            "Sync passes of this sidecar by result (success, failure)",
            m.passes.clone(),
        );
        r.register(
            "allot_sync_last_success_timestamp_seconds",
            "When the last successful sync pass ended (Unix time)",
            m.last_success.clone(),
        );
        r.register(
            "allot_sync_last_pass_duration_seconds",
            "How long the last sync pass took",
            m.last_duration.clone(),
        );
        r.register(
            "allot_sync_lag_seconds",
            "Age of the ledger's data at scrape time: now minus the watermark of the last successful pass",
            m.lag.clone(),
        );
        r.register(
            "allot_ledger_rows",
            "Job attempts (rows) in the ledger",
            m.ledger_rows.clone(),
        );
        SidecarMetrics { registry: r, ..m }
    }

    /// Counts one sync pass that took `took`; after a successful one,
    /// `now` is the time it ended and `watermark` the ledger's watermark.
    pub fn record_pass(&self, ok: bool, took: Duration, now: i64, watermark: Option<i64>) {
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let result = if ok { "success" } else { "failure" };
        self.passes
            .get_or_create(&vec![("result", result.to_string())])
            .inc();
        self.last_duration.set(took.as_secs_f64());
        if ok {
            self.last_success.set(now);
            if let Some(w) = watermark {
                self.watermark
                    .store(w, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }

    /// Replaces the draining gauges with what a draining pass saw.
    pub fn record_drain_pass(&self, report: &super::drain_pass::PassReport) {
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.draining_jobs.clear();
        let mut empty_by = self
            .draining_empty_by
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        empty_by.clear();
        for n in &report.nodes {
            self.draining_jobs
                .get_or_create(&vec![("node", n.node.clone())])
                .set(n.jobs as i64);
            if let Some(t) = n.empty_by {
                empty_by.insert(n.node.clone(), t);
            }
        }
    }

    /// The OpenMetrics text of every metric, the lag measured at `now`.
    pub fn encode(&self, now: i64) -> String {
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let w = self.watermark.load(std::sync::atomic::Ordering::Relaxed);
        if w != i64::MIN {
            self.lag.set((now - w).max(0));
        }
        self.draining_time_to_empty.clear();
        for (node, t) in self
            .draining_empty_by
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            self.draining_time_to_empty
                .get_or_create(&vec![("node", node.clone())])
                .set((t - now).max(0));
        }
        let mut text = String::new();
        encode(&mut text, &self.registry).expect("writing to a String cannot fail");
        // The encoder writes an infinite value (Level FS of a node with no
        // usage) as `inf`; the exposition formats spell it `+Inf`.
        let mut out = String::with_capacity(text.len() + 64);
        for line in text.split_inclusive('\n') {
            match line.strip_suffix(" inf\n") {
                Some(head) if !line.starts_with('#') => {
                    out.push_str(head);
                    out.push_str(" +Inf\n");
                }
                _ => match line.strip_suffix(" -inf\n") {
                    Some(head) if !line.starts_with('#') => {
                        out.push_str(head);
                        out.push_str(" -Inf\n");
                    }
                    _ => out.push_str(line),
                },
            }
        }
        out
    }
}
