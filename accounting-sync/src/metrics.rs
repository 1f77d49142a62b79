//! Prometheus metrics of the sidecar (`allot sync --follow --metrics-listen
//! ADDR:PORT`): `/metrics` in the OpenMetrics text format, which Prometheus
//! scrapes natively, served by a small HTTP server on a background thread.
//!
//! The sync loop calls [`SidecarMetrics::record_pass`] after every pass and
//! [`SidecarMetrics::update_from_ledger`] after every successful one; the
//! per-node values are those of [`crate::report::build`] over the last
//! window (what `allot report --json` prints for the same ledger). Names
//! and units: docs/operating.md.

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

/// The `Content-Type` of `/metrics` for a client that accepts OpenMetrics
/// (Prometheus does).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The `Content-Type` of `/metrics` for other clients (curl, promtool):
/// Prometheus' text format 0.0.4.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// OpenMetrics text -> Prometheus text format 0.0.4: a counter's HELP and
/// TYPE lines name its `_total` series, and there is no `# EOF` or `# UNIT`.
pub fn to_text_format(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|p| line.strip_prefix(p).map(|rest| (p, rest)));
        match meta {
            Some((p, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                if counters.contains(name) {
                    out.push_str(&format!("{p}{name}_total {tail}"));
                } else {
                    out.push_str(line);
                }
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

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

/// The address of `--metrics-listen`: `ADDR:PORT` (an IP address or a
/// host name, and a port; `[::1]:9817` for IPv6), checked before anything
/// else is done.
///
/// # Errors
/// Not of that form, or a host name that does not resolve; the message
/// shows the form with an example.
pub fn listen_addr(addr: &str) -> anyhow::Result<SocketAddr> {
    use std::net::ToSocketAddrs;
    let fix = "write ADDR:PORT, e.g. 127.0.0.1:9817 (port 0 picks a free one)";
    let mut found = addr
        .to_socket_addrs()
        .map_err(|e| anyhow::anyhow!("--metrics-listen {addr:?}: not ADDR:PORT ({e}); {fix}"))?;
    found
        .next()
        .ok_or_else(|| anyhow::anyhow!("--metrics-listen {addr:?}: no address found; {fix}"))
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
            "allot_health_drains",
            "Nodes drained by `allot health --drain` (ledger health events) per Slurm node and failed check \
             (the first failure of the drain reason: present, xid, ecc, retired_pages, row_remap, recovery_action, count, other)",
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
        let report =
            crate::report::build(reader, config.clone(), capacity, now - window, now, false)?;
        let open = reader.open_gpus()?;
        let events = reader.events(i64::MIN, i64::MAX)?;
        let rows = reader.attempt_count()?;
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
            self.node_share
                .get_or_create(&labels)
                .set(if id == Tree::ROOT { 1.0 } else { n.norm_share });
            self.node_allocation_ratio
                .get_or_create(&labels)
                .set(n.allocation);
            // Base units, as Prometheus wants: the report's GPU-seconds, and
            // its allocation (GPU-hours) in GPU-seconds.
            self.node_allocation
                .get_or_create(&labels)
                .set(n.allocation * capacity as f64 * window as f64);
            self.node_usage
                .get_or_create(&labels)
                .set(l.charged_gpu_seconds as f64);
            self.node_free_usage
                .get_or_create(&labels)
                .set(l.unallocated_gpu_seconds as f64);
            if let Some(v) = l.level_fs {
                self.node_level_fs.get_or_create(&labels).set(v);
            }
            if let Some(v) = l.fair_share {
                self.node_fair_share.get_or_create(&labels).set(v);
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
                ("tier", if *free { "free" } else { "allocated" }.to_string()),
            ];
            self.running_gpus
                .get_or_create(&labels)
                .set(o.running_gpus as i64);
            self.pending_gpus
                .get_or_create(&labels)
                .set(o.pending_gpus as i64);
            self.running_jobs
                .get_or_create(&labels)
                .set(o.running as i64);
            self.pending_jobs
                .get_or_create(&labels)
                .set(o.pending as i64);
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
        self.drain_emptied_after.clear();
        for d in crate::health_report::build(events).drains {
            if let Some(s) = d.emptied_after {
                // Oldest first: the latest episode's value stays.
                self.drain_emptied_after
                    .get_or_create(&vec![("node", d.node)])
                    .set(s);
            }
        }
        Ok(())
    }

    /// Replaces the draining gauges with what a draining pass saw.
    pub fn record_drain_pass(&self, report: &crate::draining::PassReport) {
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

    /// Serves `/metrics` on `addr` from a background thread (the port is
    /// bound before this returns, so a taken port is an error here).
    ///
    /// # Errors
    /// The address cannot be bound.
    pub fn serve(self: &Arc<Self>, addr: &str) -> anyhow::Result<SocketAddr> {
        let server = tiny_http::Server::http(listen_addr(addr)?).map_err(|e| {
            anyhow::anyhow!(
                "--metrics-listen {addr}: cannot listen: {e}; is another program on that port? \
                 Pick another ADDR:PORT, e.g. 127.0.0.1:9817, or port 0 for a free one"
            )
        })?;
        let bound = server
            .server_addr()
            .to_ip()
            .ok_or_else(|| anyhow::anyhow!("--metrics-listen {addr}: not an IP address"))?;
        let me = Arc::clone(self);
        std::thread::Builder::new()
            .name("allot-metrics".into())
            .spawn(move || {
                for req in server.incoming_requests() {
                    let _ = me.answer(req);
                }
            })?;
        Ok(bound)
    }

    fn answer(&self, req: tiny_http::Request) -> std::io::Result<()> {
        use tiny_http::{Header, Method, Response};
        let header = |k: &str, v: &str| Header::from_bytes(k, v).expect("valid header");
        let path = req.url().split('?').next().unwrap_or("");
        if !matches!(req.method(), Method::Get | Method::Head) {
            return req.respond(Response::from_string("only GET\n").with_status_code(405));
        }
        match path {
            "/metrics" => {
                let body = self.encode(jiff::Timestamp::now().as_second());
                let openmetrics = req.headers().iter().any(|h| {
                    h.field.equiv("Accept")
                        && h.value.as_str().contains("application/openmetrics-text")
                });
                let (body, kind) = if openmetrics {
                    (body, CONTENT_TYPE)
                } else {
                    (to_text_format(&body), TEXT_CONTENT_TYPE)
                };
                req.respond(Response::from_string(body).with_header(header("Content-Type", kind)))
            }
            "/" => req.respond(
                Response::from_string("allot sync: metrics at /metrics\n")
                    .with_header(header("Content-Type", "text/plain; charset=utf-8")),
            ),
            _ => req.respond(Response::from_string("not found\n").with_status_code(404)),
        }
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
        let tier = if a.min_runtime == 0 {
            "free"
        } else {
            "allocated"
        };
        let base: Labels = vec![("account", a.account.clone()), ("tier", tier.to_string())];
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

/// Parsed exposition: (metric name, sorted (label, value) pairs) -> value.
pub type Exposition = BTreeMap<(String, Vec<(String, String)>), f64>;

/// Values of an OpenMetrics/Prometheus text exposition: (name, sorted
/// labels) -> value. For tests and checks; `+Inf`/`inf` parse as infinity.
pub fn parse_exposition(text: &str) -> Exposition {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (series, value) = match line.rsplit_once(' ') {
            Some(x) => x,
            None => continue,
        };
        let (name, labels) = match series.split_once('{') {
            Some((n, rest)) => {
                let body = rest.trim_end_matches('}');
                let mut labels = Vec::new();
                // Label values here never hold `",` (names, paths, kinds).
                for part in body.split("\",") {
                    if let Some((k, v)) = part.split_once("=\"") {
                        labels.push((k.to_string(), v.trim_end_matches('"').to_string()));
                    }
                }
                labels.sort();
                (n.to_string(), labels)
            }
            None => (series.to_string(), Vec::new()),
        };
        let v = match value.to_ascii_lowercase().as_str() {
            "+inf" | "inf" => f64::INFINITY,
            "-inf" => f64::NEG_INFINITY,
            other => match other.parse() {
                Ok(v) => v,
                Err(_) => continue,
            },
        };
        out.insert((name, labels), v);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use allot_ledger::charge::Charging;
    use allot_ledger::Ledger;

    fn config(ledger: &std::path::Path) -> Config {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../examples/allot.toml"
        ))
        .unwrap()
        .replace(
            "/var/lib/allot/ledger.sqlite",
            &ledger.display().to_string(),
        );
        Config::from_toml_str(&text).unwrap()
    }

    /// A ledger at `path` holding the attempts of a `sacct --parsable2` dump.
    fn ledger_of(path: &std::path::Path, cfg: &Config, dump: &str) -> Ledger {
        let mut ledger = Ledger::open(path).unwrap();
        crate::sync::import_dump(
            &mut ledger,
            &Charging::from_config(cfg),
            dump.as_bytes(),
            jiff::tz::TimeZone::UTC,
            100,
        )
        .unwrap();
        ledger
    }

    fn get(m: &Exposition, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let mut l: Vec<(String, String)> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        l.sort();
        m.get(&(name.to_string(), l)).copied()
    }

    #[test]
    fn node_values_equal_the_report() {
        let dir = std::env::temp_dir().join(format!("allot-metrics-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ledger.sqlite");
        let _ = std::fs::remove_file(&path);
        let cfg = Arc::new(config(&path));
        let now = 1_750_000_000;
        let (s, e) = (now - 7200, now - 3600);
        let dump = format!(
            "JobID|JobIDRaw|Account|User|Partition|AllocTRES|Submit|Start|End|Elapsed|State|AdminComment\n\
             1|1|a1|alice|gpu|gres/gpu=2|{s}|{s}|{e}|01:00:00|COMPLETED|\n\
             2|2|b1|bob|gpu|gres/gpu=4|{s}|{s}|{e}|01:00:00|COMPLETED|\n\
             3|3|a2|carol|gpu|gres/gpu=3|{s}|||00:00:00|PENDING|\n"
        );
        let ledger = ledger_of(&path, &cfg, &dump);
        let reader = ledger.reader().unwrap();
        let m = SidecarMetrics::new();
        m.update_from_ledger(&reader, cfg.clone(), 16, now).unwrap();
        m.record_pass(true, Duration::from_millis(250), now, Some(now - 10));
        let text = m.encode(now + 5);
        assert!(text.ends_with("# EOF\n"), "{text}");
        let v = parse_exposition(&text);
        let r = crate::report::build(&reader, cfg, 16, now - 7 * 86400, now, false).unwrap();
        for l in &r.lines {
            let node = [("node", l.account.as_str())];
            // The node's sample of one metric, whatever its other labels.
            let of_node = |name: &str| {
                v.iter()
                    .find(|((n, ls), _)| {
                        n == name && ls.iter().any(|(k, x)| k == "node" && x == &l.account)
                    })
                    .map(|(_, x)| *x)
            };
            let usage = of_node("allot_node_window_usage_gpu_seconds");
            assert_eq!(usage, Some(l.charged_gpu_seconds as f64), "{node:?}");
            assert_eq!(
                of_node("allot_node_fair_share_factor"),
                l.fair_share,
                "{node:?}"
            );
            assert_eq!(of_node("allot_node_level_fs"), l.level_fs, "{node:?}");
        }
        // a1 charged max(1 h, 1 h minimum runtime) x 2 GPUs.
        let a1 = [("node", "a1"), ("path", "tree.nlp.a1"), ("parent", "nlp")];
        assert_eq!(
            get(&v, "allot_node_window_usage_gpu_seconds", &a1),
            Some(7200.0)
        );
        let share = get(&v, "allot_node_share_ratio", &a1).unwrap();
        assert!((share - 35.0 / 60.0).abs() < 1e-12, "{share}");
        let alloc = get(&v, "allot_node_allocation_gpu_seconds", &a1).unwrap();
        assert!(
            (alloc - 0.35 * 16.0 * 168.0 * 3600.0).abs() < 1e-6,
            "{alloc}"
        );
        assert_eq!(
            get(
                &v,
                "allot_account_pending_gpus",
                &[("account", "a2"), ("tier", "allocated")]
            ),
            Some(3.0)
        );
        assert_eq!(get(&v, "allot_ledger_rows", &[]), Some(3.0));
        assert_eq!(get(&v, "allot_sync_lag_seconds", &[]), Some(15.0));
        assert_eq!(
            get(&v, "allot_sync_passes_total", &[("result", "success")]),
            Some(1.0)
        );
        assert_eq!(
            get(&v, "allot_sync_last_success_timestamp_seconds", &[]),
            Some(now as f64)
        );
        assert_eq!(get(&v, "allot_capacity_gpus", &[]), Some(16.0));
        // Nodes without usage: Level FS +Inf, spelled as the format wants.
        assert!(
            text.contains(
                "node=\"vision\",path=\"tree.perception.vision\",parent=\"perception\"} +Inf\n"
            ),
            "{text}"
        );
        assert!(!text.contains(" inf\n"), "{text}");
        assert_eq!(
            get(
                &v,
                "allot_node_level_fs",
                &[
                    ("node", "vision"),
                    ("path", "tree.perception.vision"),
                    ("parent", "perception")
                ]
            ),
            Some(f64::INFINITY)
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn requeues_preemptions_health_and_drains() {
        use crate::draining::{DrainingStatus, PassReport};
        use allot_ledger::events::{append_event, Event};
        let dir = std::env::temp_dir().join(format!("allot-metrics-rq-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ledger.sqlite");
        let cfg = Arc::new(config(&path));
        let now = 1_750_000_000;
        let (s, e) = (now - 7200, now - 3600);
        let r = e + 5; // the requeued attempts' next submit
        let dump = format!(
            "JobID|JobIDRaw|Account|User|Partition|AllocTRES|Submit|Start|End|Elapsed|State|AdminComment\n\
             10|10|a1|alice|gpu|gres/gpu=2|{s}|{s}|{e}|01:00:00|PREEMPTED|\n\
             10|10|a1|alice|gpu|gres/gpu=2|{r}|{r}||00:10:00|RUNNING|\n\
             11|11|b1|bob|gpu|gres/gpu=1|{s}|{s}|{e}|01:00:00|REQUEUED|\n\
             11|11|b1|bob|gpu|gres/gpu=1|{r}|||00:00:00|PENDING|\n\
             12|12|a2|carol|gpu|gres/gpu=1|{s}|{s}|{e}|01:00:00|REQUEUED|\n\
             12|12|a2|carol|gpu|gres/gpu=1|{r}|{r}|{now}|00:59:55|COMPLETED|\n\
             13|13|b1|bob|gpu|gres/gpu=4|{s}|{s}|{e}|01:00:00|NODE_FAIL|\n\
             13|13|b1|bob|gpu|gres/gpu=4|{r}|||00:00:00|PENDING|\n\
             14|14|b1|bob|gpu|gres/gpu=4|{s}|{s}|{e}|01:00:00|NODE_FAIL|\n\
             15|15|a1|alice|gpu|gres/gpu=1|{s}|{s}|{e}|01:00:00|PREEMPTED|allot:min_runtime=0\n\
             16|16|a1|alice|gpu|gres/gpu=1|{s}|{s}|{e}|01:00:00|CANCELLED by 0|\n"
        );
        let ledger = ledger_of(&path, &cfg, &dump);
        let ev = |time, node: &str, kind, since, job_id, reason: &str| Event {
            time,
            node: node.into(),
            kind,
            since,
            job_id,
            gpu: None,
            serial: None,
            reason: reason.into(),
        };
        let drain = e - 600;
        for event in [
            ev(
                drain,
                "gpu-a01",
                EventKind::Drain,
                Some(drain),
                None,
                "maint",
            ),
            // allot requeued job 11 on the draining node (not job 12).
            ev(
                e - 1,
                "gpu-a01",
                EventKind::Requeue,
                Some(drain),
                Some(11),
                "served",
            ),
            ev(
                e + 300,
                "gpu-a01",
                EventKind::Drained,
                Some(drain),
                None,
                "maint",
            ),
            ev(
                s,
                "gpu-a02",
                EventKind::Health,
                None,
                None,
                "allot: gpu3 Xid 79 serial=7 (+1 more)",
            ),
            ev(
                s + 1,
                "gpu-a02",
                EventKind::Health,
                None,
                None,
                "allot: gpu0 Xid 48 serial=8",
            ),
            ev(
                s + 2,
                "gpu-a03",
                EventKind::Health,
                None,
                None,
                "allot: 7 of 8 GPUs visible",
            ),
        ] {
            append_event(&path, &event).unwrap();
        }
        let reader = ledger.reader().unwrap();
        let m = SidecarMetrics::new();
        // Twice: counters follow the ledger's counts, never add them up.
        m.update_from_ledger(&reader, cfg.clone(), 16, now).unwrap();
        m.update_from_ledger(&reader, cfg.clone(), 16, now).unwrap();
        m.record_drain_pass(&PassReport {
            draining: vec!["gpu-b01".into(), "gpu-b02".into()],
            nodes: vec![
                DrainingStatus {
                    node: "gpu-b01".into(),
                    jobs: 2,
                    empty_by: Some(now + 1800),
                },
                DrainingStatus {
                    node: "gpu-b02".into(),
                    jobs: 1,
                    empty_by: None,
                },
            ],
            ..Default::default()
        });
        let text = m.encode(now + 5);
        let v = parse_exposition(&text);
        let rq = |account: &str, tier: &str, reason: &str| {
            get(
                &v,
                "allot_requeues_total",
                &[("account", account), ("tier", tier), ("reason", reason)],
            )
        };
        assert_eq!(rq("a1", "allocated", "preempted"), Some(1.0), "{text}");
        assert_eq!(rq("b1", "allocated", "drain"), Some(1.0));
        assert_eq!(rq("a2", "allocated", "other"), Some(1.0));
        assert_eq!(
            rq("b1", "allocated", "node_fail"),
            Some(1.0),
            "job 14 ended"
        );
        assert_eq!(rq("a1", "free", "preempted"), None, "job 15 was cancelled");
        let requeues: f64 = v
            .iter()
            .filter(|((n, _), _)| n == "allot_requeues_total")
            .map(|(_, x)| x)
            .sum();
        assert_eq!(requeues, 4.0);
        let pre = |tier| {
            get(
                &v,
                "allot_preemptions_total",
                &[("account", "a1"), ("tier", tier)],
            )
        };
        assert_eq!(pre("allocated"), Some(1.0));
        assert_eq!(pre("free"), Some(1.0));
        let health = |node, check| {
            get(
                &v,
                "allot_health_drains_total",
                &[("node", node), ("check", check)],
            )
        };
        assert_eq!(health("gpu-a02", "xid"), Some(2.0));
        assert_eq!(health("gpu-a03", "count"), Some(1.0));
        assert_eq!(
            get(
                &v,
                "allot_node_events_total",
                &[("node", "gpu-a01"), ("kind", "requeue")]
            ),
            Some(1.0)
        );
        assert_eq!(
            get(
                &v,
                "allot_node_drain_emptied_after_seconds",
                &[("node", "gpu-a01")]
            ),
            Some(900.0)
        );
        let node = |name, n| get(&v, name, &[("node", n)]);
        assert_eq!(node("allot_draining_node_jobs", "gpu-b01"), Some(2.0));
        assert_eq!(node("allot_draining_node_jobs", "gpu-b02"), Some(1.0));
        assert_eq!(
            node("allot_draining_node_time_to_empty_seconds", "gpu-b01"),
            Some(1795.0)
        );
        assert_eq!(
            node("allot_draining_node_time_to_empty_seconds", "gpu-b02"),
            None,
            "a --no-requeue or suspended job: unknown"
        );
        // The next pass sees no draining node: the gauges go.
        m.record_drain_pass(&PassReport::default());
        let v = parse_exposition(&m.encode(now + 6));
        assert!(!v.keys().any(|(n, _)| n.starts_with("allot_draining_node_")));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn names_follow_the_conventions() {
        let text = SidecarMetrics::new().encode(0);
        for line in text.lines().filter(|l| l.starts_with("# TYPE ")) {
            let mut w = line.split_whitespace().skip(2);
            let (name, kind) = (w.next().unwrap(), w.next().unwrap());
            assert!(name.starts_with("allot_"), "{line}");
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                "{line}"
            );
            if kind == "counter" {
                assert!(
                    text.contains(&format!("{name}_total")) || !text.contains(&format!("\n{name}")),
                    "{line}"
                );
            }
        }
    }
}
