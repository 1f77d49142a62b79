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
use allot_ledger::LedgerReader;
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
        // Counters: the ledger keeps every event, so its counts only grow;
        // each counter is brought up to its count.
        let mut counts: BTreeMap<(String, EventKind), u64> = BTreeMap::new();
        for e in &events {
            *counts
                .entry((e.event.node.clone(), e.event.kind))
                .or_insert(0) += 1;
        }
        for ((node, kind), n) in counts {
            let c = self
                .node_events
                .get_or_create(&vec![("node", node), ("kind", kind.as_str().to_string())]);
            let have = c.get();
            if n > have {
                c.inc_by(n - have);
            }
        }
        Ok(())
    }

    /// The OpenMetrics text of every metric, the lag measured at `now`.
    pub fn encode(&self, now: i64) -> String {
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let w = self.watermark.load(std::sync::atomic::Ordering::Relaxed);
        if w != i64::MIN {
            self.lag.set((now - w).max(0));
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
        let mut ledger = Ledger::open(&path).unwrap();
        crate::sync::import_dump(
            &mut ledger,
            &Charging::from_config(&cfg),
            dump.as_bytes(),
            jiff::tz::TimeZone::UTC,
            100,
        )
        .unwrap();
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
