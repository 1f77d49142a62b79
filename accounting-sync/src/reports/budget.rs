//! The budget report (`allot report`): per org-tree node, its share, its
//! allocation over the window, what it was charged, what its free-tier jobs
//! held, its Level FS and fair-share, and its open jobs.
//!
//! Definitions (window `[start, end)`, seconds since the epoch):
//! - **Share %**: the node's share normalised among its siblings.
//! - **Allocation GPU-h**: node allocation (product of normalised shares
//!   from the root) x capacity (GPUs) x window length, in GPU-hours.
//! - **Charged GPU-h**: charged milli-unit-seconds of the subtree inside the
//!   window (see [`allot_ledger`]), summed exactly, then / 1000 / 3600;
//!   printed with three decimals, the resolution of a fractional TRES
//!   weight such as `cpu = 0.05` over an hour; **Used %** = charged /
//!   allocation.
//! - **Unallocated GPU-h**: GPU-seconds held by minimum-runtime-0 jobs.
//! - **Level FS**, **FairShare**: the engine's Fair Tree over the charged
//!   usage of the window ([`fairshare::Engine`]); FairShare only for leaves.
//! - **Running**, **Pending**: open attempts as of the last sync.
//! - Cluster totals: capacity, capacity x window, charged, occupancy (GPU
//!   seconds held / capacity x window).
//!
//! Accounts the ledger knows but `allot.toml` does not are listed under a
//! `(not in allot.toml)` row, never dropped.

/// The report line (and page section) of the accounts the tree does not
/// name: their use is counted, never dropped.
pub const UNKNOWN_ACCOUNTS: &str = "(not in allot.toml)";

use std::collections::BTreeMap;
use std::sync::Arc;

use fairshare::{Config, Engine, NodeId, Tree};
use serde::Serialize;

use allot_ledger::{LedgerReader, OpenCounts, Usage};

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Line {
    /// Tree depth (root = 0); indentation of the account column.
    pub depth: u32,
    /// Node name (a leaf's name, an inner node's name, or `root`).
    pub account: String,
    /// User, on `--users` drill-down lines.
    pub user: Option<String>,
    /// Normalised share among siblings, percent.
    pub share_pct: f64,
    /// Allocation over the window, GPU-hours.
    pub allocation_gpu_h: f64,
    /// Charged GPU-seconds (unit-seconds) inside the window: the ledger's
    /// exact milli-unit-seconds / 1000, fractional under fractional weights.
    pub charged_gpu_seconds: f64,
    /// Charged, GPU-hours.
    pub charged_gpu_h: f64,
    /// Charged / allocation, percent (0 when the allocation is 0).
    pub used_pct: f64,
    /// GPU-seconds held by unallocated jobs inside the window.
    pub unallocated_gpu_seconds: u64,
    /// Unallocated, GPU-hours.
    pub unallocated_gpu_h: f64,
    /// Level FS (`None` on user lines and the root); infinite = no usage.
    pub level_fs: Option<f64>,
    /// Fair-share factor in (0, 1], leaves only.
    pub fair_share: Option<f64>,
    /// Running attempts.
    pub running: u64,
    /// Pending attempts.
    pub pending: u64,
}

/// Cluster totals.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Totals {
    /// Capacity, GPUs.
    pub capacity_gpus: u64,
    /// Window start, seconds since the epoch.
    pub start: i64,
    /// Window end, seconds since the epoch.
    pub end: i64,
    /// Capacity x window, GPU-hours.
    pub capacity_gpu_h: f64,
    /// Charged GPU-hours, every account.
    pub charged_gpu_h: f64,
    /// GPU-hours held by every job.
    pub occupied_gpu_h: f64,
    /// Occupied / capacity, percent.
    pub occupancy_pct: f64,
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Lines in tree order (pre-order, children by name order of the tree).
    pub lines: Vec<Line>,
    /// Cluster totals.
    pub totals: Totals,
}

fn hours(secs: u64) -> f64 {
    secs as f64 / 3600.0
}

/// GPU-seconds and GPU-hours of a charge in milli-unit-seconds.
fn charged(milli: u64) -> (f64, f64) {
    (
        fairshare::charge::units(milli),
        fairshare::charge::unit_hours(milli),
    )
}

fn pct(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        100.0 * a / b
    } else {
        0.0
    }
}

/// Builds the report of `[start, end)` (seconds since the epoch; pass
/// `end <= now`) for `capacity` GPUs; with `users`, a line per user under
/// each leaf.
///
/// # Errors
/// Ledger errors.
pub fn build(
    reader: &LedgerReader,
    config: Arc<Config>,
    capacity: u64,
    start: i64,
    end: i64,
    users: bool,
) -> allot_ledger::Result<Report> {
    let usage = reader.usage(start, end)?;
    let open = reader.open_counts()?;
    let mut by_account: BTreeMap<String, Usage> = BTreeMap::new();
    let mut by_user: BTreeMap<String, BTreeMap<String, Usage>> = BTreeMap::new();
    for ((a, u), v) in &usage {
        by_account.entry(a.clone()).or_default().add(v);
        by_user.entry(a.clone()).or_default().insert(u.clone(), *v);
    }
    let (engine, _) = Engine::from_account_usage(
        config.clone(),
        by_account
            .iter()
            .map(|(a, u)| (a.as_str(), u.charged as f64)),
        end.max(0) as u64,
    );
    let tree = &config.tree;
    let window = (end - start).max(0) as f64;
    let budget = |alloc: f64| alloc * capacity as f64 * window / 3600.0;
    let mut lines = Vec::new();
    let mut stack = vec![Tree::ROOT];
    while let Some(id) = stack.pop() {
        let n = tree.node(id);
        let accounts = subtree_accounts(tree, id);
        let mut u = Usage::default();
        let mut oc = OpenCounts::default();
        for a in &accounts {
            if let Some(x) = by_account.get(a.as_str()) {
                u.add(x);
            }
            if let Some(c) = open.get(a.as_str()) {
                oc.running += c.running;
                oc.pending += c.pending;
            }
        }
        let alloc = budget(n.allocation);
        lines.push(Line {
            depth: n.depth,
            account: n.name.clone(),
            user: None,
            share_pct: if id == Tree::ROOT {
                100.0
            } else {
                n.norm_share * 100.0
            },
            allocation_gpu_h: alloc,
            charged_gpu_seconds: charged(u.charged).0,
            charged_gpu_h: charged(u.charged).1,
            used_pct: pct(charged(u.charged).1, alloc),
            unallocated_gpu_seconds: u.unallocated,
            unallocated_gpu_h: hours(u.unallocated),
            level_fs: (id != Tree::ROOT).then(|| engine.fair_tree().level_fs(id).0),
            fair_share: n.leaf.map(|l| engine.fair_tree().factor(l)),
            running: oc.running,
            pending: oc.pending,
        });
        if users && n.is_leaf() {
            let mut per: BTreeMap<&str, Usage> = BTreeMap::new();
            for a in &accounts {
                for (user, v) in by_user.get(a.as_str()).into_iter().flatten() {
                    per.entry(user).or_default().add(v);
                }
            }
            for (user, v) in per {
                lines.push(user_line(n.depth + 1, &n.name, user, v, alloc));
            }
        }
        // Children in reverse so they pop in tree order.
        for c in n.children.iter().rev() {
            stack.push(*c);
        }
    }
    // Accounts outside the tree.
    let unknown: Vec<(&String, &Usage)> = by_account
        .iter()
        .filter(|(a, _)| tree.leaf_of_account(a).is_none())
        .collect();
    let unknown_open: Vec<(&String, &OpenCounts)> = open
        .iter()
        .filter(|(a, _)| tree.leaf_of_account(a).is_none())
        .collect();
    if !unknown.is_empty() || !unknown_open.is_empty() {
        let mut names: Vec<&String> = unknown
            .iter()
            .map(|x| x.0)
            .chain(unknown_open.iter().map(|x| x.0))
            .collect();
        names.sort();
        names.dedup();
        lines.push(Line {
            depth: 1,
            account: UNKNOWN_ACCOUNTS.into(),
            user: None,
            share_pct: 0.0,
            allocation_gpu_h: 0.0,
            charged_gpu_seconds: charged(unknown.iter().map(|x| x.1.charged).sum()).0,
            charged_gpu_h: charged(unknown.iter().map(|x| x.1.charged).sum()).1,
            used_pct: 0.0,
            unallocated_gpu_seconds: unknown.iter().map(|x| x.1.unallocated).sum(),
            unallocated_gpu_h: hours(unknown.iter().map(|x| x.1.unallocated).sum()),
            level_fs: None,
            fair_share: None,
            running: unknown_open.iter().map(|x| x.1.running).sum(),
            pending: unknown_open.iter().map(|x| x.1.pending).sum(),
        });
        for a in names {
            let u = by_account.get(a).copied().unwrap_or_default();
            let c = open.get(a).copied().unwrap_or_default();
            let mut l = user_line(2, a, "", u, 0.0);
            l.user = None;
            l.running = c.running;
            l.pending = c.pending;
            lines.push(l);
        }
    }
    let total_charged: u64 = by_account.values().map(|u| u.charged).sum();
    let total_gpu: u64 = by_account.values().map(|u| u.gpu_seconds).sum();
    let cap_h = capacity as f64 * window / 3600.0;
    Ok(Report {
        lines,
        totals: Totals {
            capacity_gpus: capacity,
            start,
            end,
            capacity_gpu_h: cap_h,
            charged_gpu_h: charged(total_charged).1,
            occupied_gpu_h: hours(total_gpu),
            occupancy_pct: pct(hours(total_gpu), cap_h),
        },
    })
}

fn user_line(depth: u32, account: &str, user: &str, v: Usage, alloc: f64) -> Line {
    Line {
        depth,
        account: account.to_string(),
        user: Some(user.to_string()),
        share_pct: 0.0,
        allocation_gpu_h: 0.0,
        charged_gpu_seconds: charged(v.charged).0,
        charged_gpu_h: charged(v.charged).1,
        used_pct: pct(charged(v.charged).1, alloc),
        unallocated_gpu_seconds: v.unallocated,
        unallocated_gpu_h: hours(v.unallocated),
        level_fs: None,
        fair_share: None,
        running: 0,
        pending: 0,
    }
}

/// The tree's nodes in the order of the report's node lines (pre-order,
/// children in the tree's order; the lines of accounts outside the tree
/// follow them).
pub fn node_order(tree: &Tree) -> Vec<NodeId> {
    let mut out = Vec::new();
    let mut stack = vec![Tree::ROOT];
    while let Some(id) = stack.pop() {
        out.push(id);
        for c in tree.node(id).children.iter().rev() {
            stack.push(*c);
        }
    }
    out
}

/// Slurm accounts of a subtree.
pub fn subtree_accounts(tree: &Tree, id: NodeId) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![id];
    while let Some(n) = stack.pop() {
        let node = tree.node(n);
        out.extend(node.accounts.iter().cloned());
        stack.extend(node.children.iter().copied());
    }
    out
}

/// Column names of the text and `--parsable2` outputs.
pub const COLUMNS: &[&str] = &[
    "Account",
    "User",
    "Share%",
    "AllocGPUh",
    "ChargedGPUh",
    "Used%",
    "UnallocGPUh",
    "LevelFS",
    "FairShare",
    "Running",
    "Pending",
];

fn fs_text(v: Option<f64>) -> String {
    match v {
        None => String::new(),
        Some(x) if x.is_infinite() => "inf".into(),
        Some(x) => format!("{x:.6}"),
    }
}

fn cells(l: &Line, indent: bool) -> Vec<String> {
    let user_line = l.user.is_some();
    let blank_if_user = |s: String| if user_line { String::new() } else { s };
    vec![
        if indent {
            format!("{}{}", " ".repeat(l.depth as usize), l.account)
        } else {
            l.account.clone()
        },
        l.user.clone().unwrap_or_default(),
        blank_if_user(format!("{:.2}", l.share_pct)),
        blank_if_user(format!("{:.3}", l.allocation_gpu_h)),
        format!("{:.3}", l.charged_gpu_h),
        format!("{:.2}", l.used_pct),
        format!("{:.3}", l.unallocated_gpu_h),
        fs_text(l.level_fs),
        fs_text(l.fair_share),
        blank_if_user(l.running.to_string()),
        blank_if_user(l.pending.to_string()),
    ]
}

/// `--parsable2`: a header line, then one `|`-separated line per row (no
/// indentation, no totals line; totals are in the text and JSON outputs).
pub fn render_parsable(r: &Report) -> String {
    let mut out = COLUMNS.join("|");
    out.push('\n');
    for l in &r.lines {
        out.push_str(&cells(l, false).join("|"));
        out.push('\n');
    }
    out
}

/// The human table, tree-indented like sreport, with the cluster totals.
pub fn render_text(r: &Report) -> String {
    let rows: Vec<Vec<String>> = r.lines.iter().map(|l| cells(l, true)).collect();
    let widths: Vec<usize> = (0..COLUMNS.len())
        .map(|i| {
            rows.iter()
                .map(|c| c[i].len())
                .chain([COLUMNS[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let fmt_row = |c: &[String]| {
        c.iter()
            .enumerate()
            .map(|(i, s)| {
                if i < 2 {
                    format!("{s:<w$}", w = widths[i])
                } else {
                    format!("{s:>w$}", w = widths[i])
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let t = &r.totals;
    let mut out = format!(
        "Window {} - {} ({}), capacity {} GPUs = {:.1} GPU-h\n\n",
        local(t.start),
        local(t.end),
        fairshare::duration::SlurmDuration((t.end - t.start).max(0) as u64),
        t.capacity_gpus,
        t.capacity_gpu_h
    );
    let head: Vec<String> = COLUMNS.iter().map(|s| s.to_string()).collect();
    out += &fmt_row(&head);
    out.push('\n');
    out += &widths
        .iter()
        .map(|w| "-".repeat(*w))
        .collect::<Vec<_>>()
        .join("  ");
    out.push('\n');
    for c in &rows {
        out += &fmt_row(c);
        out.push('\n');
    }
    out += &format!(
        "\nCluster: charged {:.3} GPU-h, occupied {:.1} of {:.1} GPU-h ({:.1}%)\n",
        t.charged_gpu_h, t.occupied_gpu_h, t.capacity_gpu_h, t.occupancy_pct
    );
    out
}

/// `YYYY-MM-DDTHH:MM:SS` in the system's time zone (sacct's format).
fn local(t: i64) -> String {
    jiff::Timestamp::from_second(t).map_or(t.to_string(), |ts| {
        jiff::tz::TimeZone::system()
            .to_datetime(ts)
            .strftime("%Y-%m-%dT%H:%M:%S")
            .to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use allot_ledger::{AttemptRecord, Ledger};

    fn rec(
        job: u64,
        account: &str,
        user: &str,
        gpus: u64,
        start: i64,
        end: i64,
        min: u64,
    ) -> AttemptRecord {
        let ce = if min > 0 {
            Some(end.max(start + min as i64))
        } else {
            None
        };
        AttemptRecord {
            job_id: job,
            submit: start,
            label: job.to_string(),
            array_job: None,
            array_task: None,
            het_job: None,
            het_offset: None,
            account: account.into(),
            user: user.into(),
            partition: None,
            gpus,
            rate: 1000 * gpus,
            start: Some(start),
            end: Some(end),
            elapsed: None,
            state: "COMPLETED".into(),
            min_runtime: min,
            min_runtime_recorded: true,
            charge_end: ce,
            charged: ce.map_or(0, |c| 1000 * gpus * (c - start) as u64),
            time_limit: None,
        }
    }

    /// An hour boundary.
    const T0: i64 = 1_700_000_000 - 1_700_000_000 % 3600;

    /// The report of `[T0, T0 + 1 d)` on 8 GPUs of a fresh ledger holding
    /// `records`, with the tree `tree` (allot.toml text).
    fn report_of(name: &str, records: &[AttemptRecord], tree: &str, users: bool) -> Report {
        let dir = std::env::temp_dir().join(format!("allot-report-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut l = Ledger::open(&dir.join("l.sqlite")).unwrap();
        l.write_batch(
            records,
            None,
            &allot_ledger::charge::Charging::new(Default::default(), Default::default()),
        )
        .unwrap();
        let config = Arc::new(Config::from_toml_str(tree).unwrap());
        build(&l.reader().unwrap(), config, 8, T0, T0 + 86_400, users).unwrap()
    }

    #[test]
    fn fractional_charges_are_reported_to_the_milli_gpu_hour() {
        // One hour of 1 CPU (0.05 GPU per second at `cpu = 0.05`) and one
        // of 1 shard + 1 CPU (0.175): 0.225 GPU-h, where whole units
        // charged 2.
        let at = |job, rate| AttemptRecord {
            rate,
            charged: rate * 3600,
            time_limit: None,
            gpus: 0,
            ..rec(job, "a1", "alice", 0, T0, T0 + 3600, 60)
        };
        let r = report_of(
            "frac",
            &[at(1, 50), at(2, 175)],
            "[tree.a1]\nshare = 1\n[tree.b1]\nshare = 1\n",
            false,
        );
        let a1 = r.lines.iter().find(|l| l.account == "a1").unwrap();
        assert_eq!((a1.charged_gpu_seconds, a1.charged_gpu_h), (810.0, 0.225));
        assert_eq!(r.totals.charged_gpu_h, 0.225);
        assert!(render_parsable(&r).contains("\na1||50.00|96.000|0.225|"));
        assert!(render_text(&r).contains("Cluster: charged 0.225 GPU-h"));
    }

    #[test]
    fn report_values() {
        let t0 = T0;
        let r = report_of(
            "test",
            &[
                rec(1, "a1", "alice", 2, t0, t0 + 7200, 60), // 4 GPU-h charged
                rec(2, "a1", "bob", 1, t0, t0 + 3600, 60),   // 1 GPU-h
                rec(3, "v1", "carol", 4, t0, t0 + 1800, 0),  // free: 2 GPU-h unallocated
                rec(4, "zz", "carol", 1, t0, t0 + 3600, 3600), // not in the tree
            ],
            "[tree.nlp]\nshare = 60\n[tree.nlp.a1]\nshare = 1\n[tree.vision]\nshare = 40\n[tree.vision.v1]\nshare = 1\n",
            true,
        );
        let line = |name: &str| {
            r.lines
                .iter()
                .find(|l| l.account == name && l.user.is_none())
                .unwrap()
        };
        assert_eq!(line("a1").charged_gpu_seconds, 5.0 * 3600.0);
        assert_eq!(line("nlp").charged_gpu_seconds, 5.0 * 3600.0);
        assert!((line("nlp").allocation_gpu_h - 0.6 * 8.0 * 24.0).abs() < 1e-9);
        assert!((line("a1").used_pct - 100.0 * 5.0 / (0.6 * 8.0 * 24.0)).abs() < 1e-9);
        assert_eq!(line("v1").unallocated_gpu_seconds, 2 * 3600);
        assert_eq!(line("v1").charged_gpu_seconds, 0.0);
        assert_eq!(
            line("v1").fair_share,
            Some(1.0),
            "no charged usage: served first"
        );
        assert!(line("v1").level_fs.unwrap().is_infinite());
        assert_eq!(line("(not in allot.toml)").charged_gpu_seconds, 3600.0);
        // The budget page shows it too, with its accounts.
        let config = Config::from_toml_str(
            "[tree.nlp]\nshare = 60\n[tree.nlp.a1]\nshare = 1\n[tree.vision]\nshare = 40\n[tree.vision.v1]\nshare = 1\n",
        )
        .unwrap();
        let page = super::super::budget_page::render(&r, &config, &Default::default(), t0);
        assert!(
            page.contains("<h2>Accounts not in allot.toml</h2>")
                && page.contains("data-field=\"charged_gpu_h\">1.000</b> GPU-hours charged")
                && page.contains("Accounts (GPU-hours): zz (1.000)."),
            "{page}"
        );
        let users: Vec<_> = r
            .lines
            .iter()
            .filter(|l| l.account == "a1" && l.user.is_some())
            .collect();
        assert_eq!(
            users
                .iter()
                .map(|l| (l.user.as_deref().unwrap(), l.charged_gpu_seconds))
                .collect::<Vec<_>>(),
            [("alice", 4.0 * 3600.0), ("bob", 3600.0)]
        );
        assert!((r.totals.occupied_gpu_h - (4.0 + 1.0 + 2.0 + 1.0)).abs() < 1e-9);
        assert!((r.totals.capacity_gpu_h - 8.0 * 24.0).abs() < 1e-9);
        let p = render_parsable(&r);
        assert!(p.starts_with("Account|User|Share%|"), "{p}");
        assert!(p.contains("\na1||100.00|115.200|5.000|4.34|0.000|"), "{p}");
        let text = render_text(&r);
        assert!(
            text.contains("  a1 ") && text.contains("occupied 8.0 of 192.0 GPU-h"),
            "{text}"
        );
    }
}
