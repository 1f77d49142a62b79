//! `allot report --html FILE`: the budget page. One self-contained HTML
//! file (inline CSS and SVG, no script, nothing fetched) for readers who
//! have never seen Slurm: each org-tree node's daily use against its daily
//! allocation over the last windows, the current ranking, and the free
//! tier. Its numbers are those of [`super::budget`] (`allot report --json`);
//! each carries `data-node`/`data-field` attributes so tests can read them.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use allot_ledger::{LedgerReader, Usage};
use fairshare::{Config, Tree};

use super::budget::{Report, UNKNOWN_ACCOUNTS};

/// Charged GPU-hours per org-tree node (tree order) for each day.
#[derive(Debug, Clone, Default)]
pub struct Daily {
    /// Start of each day (epoch seconds), oldest first.
    pub days: Vec<i64>,
    /// Node name -> charged GPU-hours per day (same order as `days`).
    pub charged_gpu_h: BTreeMap<String, Vec<f64>>,
}

/// Daily charged usage of every tree node over `[end - days x 1 d, end)`.
///
/// # Errors
/// Ledger errors.
pub fn daily(
    reader: &LedgerReader,
    config: &Config,
    end: i64,
    days: u32,
) -> allot_ledger::Result<Daily> {
    let tree = &config.tree;
    let mut out = Daily {
        days: Vec::new(),
        charged_gpu_h: BTreeMap::new(),
    };
    for d in (0..days as i64).rev() {
        let (s, e) = (end - (d + 1) * 86_400, end - d * 86_400);
        let usage = reader.usage(s, e)?;
        let mut by_account: BTreeMap<&str, Usage> = BTreeMap::new();
        for ((a, _), u) in &usage {
            by_account.entry(a.as_str()).or_default().add(u);
        }
        out.days.push(s);
        for (i, n) in tree.nodes().iter().enumerate() {
            let mut charged = 0u64;
            let mut stack = vec![fairshare::NodeId(i as u32)];
            while let Some(x) = stack.pop() {
                let node = tree.node(x);
                for a in &node.accounts {
                    charged += by_account.get(a.as_str()).map_or(0, |u| u.charged);
                }
                stack.extend(node.children.iter().copied());
            }
            out.charged_gpu_h
                .entry(n.name.clone())
                .or_default()
                .push(fairshare::charge::unit_hours(charged));
        }
    }
    Ok(out)
}

/// `s` escaped for HTML text and attribute values (`&`, `<`, `>`, `"`,
/// `'`).
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// The label of the 24 hours that start at `t` (epoch s): the date they
/// end on, so the last bar, up to now, reads today.
fn day_label(t: i64) -> String {
    jiff::Timestamp::from_second(t + 86_399)
        .map(|ts| {
            jiff::tz::TimeZone::system()
                .to_datetime(ts)
                .strftime("%b %d")
                .to_string()
        })
        .unwrap_or_default()
}

/// A bar chart: one bar a day (use), a line (the daily allocation).
fn chart(values: &[f64], allowance: f64, days: &[i64]) -> String {
    let (w, h, pad) = (720.0, 140.0, 24.0);
    let max = values
        .iter()
        .copied()
        .fold(allowance * 1.25, f64::max)
        .max(1e-9);
    let n = values.len().max(1) as f64;
    let bw = (w - 2.0 * pad) / n;
    let y = |v: f64| h - pad - (h - 2.0 * pad) * v / max;
    let mut s = format!(
        "<svg viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\" role=\"img\" aria-label=\"daily use against the daily allocation\">\
         <rect x=\"0\" y=\"0\" width=\"{w}\" height=\"{h}\" fill=\"#fafafa\"/>"
    );
    for (i, v) in values.iter().enumerate() {
        let x = pad + i as f64 * bw;
        let colour = if *v > allowance { "#d9534f" } else { "#4a90d9" };
        let _ = write!(
            s,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{colour}\"><title>{}: {:.1} GPU-hours</title></rect>",
            x + 1.0,
            y(*v),
            (bw - 2.0).max(1.0),
            (h - pad - y(*v)).max(0.0),
            day_label(days[i]),
            v
        );
    }
    let ya = y(allowance);
    let _ = write!(
        s,
        "<line x1=\"{pad}\" x2=\"{:.1}\" y1=\"{ya:.1}\" y2=\"{ya:.1}\" stroke=\"#222\" stroke-dasharray=\"6 4\" stroke-width=\"2\"/>\
         <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\">allocation {allowance:.1} GPU-h/day</text>",
        w - pad,
        w - pad,
        (ya - 4.0).max(10.0)
    );
    if let (Some(first), Some(last)) = (days.first(), days.last()) {
        let _ = write!(
            s,
            "<text x=\"{pad}\" y=\"{:.1}\" font-size=\"11\">{}</text><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\">{}</text>",
            h - 6.0,
            day_label(*first),
            w - pad,
            h - 6.0,
            day_label(*last)
        );
    }
    s + "</svg>"
}

fn cell(node: &str, field: &str, text: String) -> String {
    format!(
        "<td data-node=\"{}\" data-field=\"{field}\">{text}</td>",
        esc(node)
    )
}

/// The page.
pub fn render(r: &Report, config: &Config, daily: &Daily, generated: i64) -> String {
    render_page(r, config, daily, generated, None)
}

/// The page, with `live` (HTML the sidecar's live page puts under the
/// introduction: the job lookup and who is viewing) when served by the
/// sidecar rather than written by `allot report --html`.
pub fn render_page(
    r: &Report,
    config: &Config,
    daily: &Daily,
    generated: i64,
    live: Option<&str>,
) -> String {
    let tree = &config.tree;
    let t = &r.totals;
    let window_days = (t.end - t.start) as f64 / 86_400.0;
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>GPU budget</title><style>\
         body{{font-family:sans-serif;max-width:980px;margin:2em auto;color:#222}}\
         table{{border-collapse:collapse;margin:1em 0}}td,th{{border-bottom:1px solid #ddd;padding:4px 10px;text-align:right}}\
         td:first-child,th:first-child,td:nth-child(2){{text-align:left}}h2{{margin-top:2em}}.note{{color:#555;font-size:90%}}\
         section{{margin:1.5em 0;padding:0.5em 1em;border-left:4px solid #4a90d9}}.over{{border-left-color:#d9534f}}</style></head><body>"
    );
    let _ = write!(
        h,
        "<h1>GPU budget</h1><p>The cluster has <b data-field=\"capacity_gpus\">{}</b> GPUs. Each team is given a share of them; \
         what it used over the last <b>{:.0} days</b> is compared with what that share allows \
         (its <i>allocation</i>: share &times; GPUs &times; {:.0} days). Teams that used less than their allocation get the next free GPUs first. \
         {} {}.</p>",
        t.capacity_gpus,
        window_days,
        window_days,
        if live.is_some() { "Live: as of" } else { "Generated" },
        jiff::Timestamp::from_second(generated).map(|x| x.to_string()).unwrap_or_default()
    );
    h += live.unwrap_or("");
    // Ranking: leaves by fair-share factor, highest first.
    let mut leaves: Vec<&super::budget::Line> = r
        .lines
        .iter()
        .filter(|l| l.user.is_none() && l.fair_share.is_some())
        .collect();
    leaves.sort_by(|a, b| {
        b.fair_share
            .partial_cmp(&a.fair_share)
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    h += "<h2>Who goes first now</h2><p class=\"note\">Rank 1 is served first among jobs that pay from a budget. \
          A team's rank falls as it uses more than its share.</p>\
          <table><tr><th>Rank</th><th>Team</th><th>Share of the cluster</th><th>Allocation (GPU-h)</th><th>Used (GPU-h)</th><th>Used of allocation</th><th>Fair-share factor</th><th>Running jobs</th><th>Pending jobs</th></tr>";
    for (i, l) in leaves.iter().enumerate() {
        let alloc = tree
            .nodes()
            .iter()
            .find(|n| n.name == l.account)
            .map_or(0.0, |n| n.allocation);
        let _ = write!(
            h,
            "<tr><td data-node=\"{n}\" data-field=\"rank\">{}</td><td>{n}</td><td>{:.1}%</td>{}{}{}{}{}{}</tr>",
            i + 1,
            alloc * 100.0,
            cell(&l.account, "allocation_gpu_h", format!("{:.3}", l.allocation_gpu_h)),
            cell(&l.account, "charged_gpu_h", format!("{:.3}", l.charged_gpu_h)),
            cell(&l.account, "used_pct", format!("{:.2}%", l.used_pct)),
            cell(&l.account, "fair_share", format!("{:.6}", l.fair_share.unwrap_or(0.0))),
            cell(&l.account, "running", l.running.to_string()),
            cell(&l.account, "pending", l.pending.to_string()),
            n = esc(&l.account),
        );
    }
    h += "</table>";
    // Free tier.
    let free: f64 = r
        .lines
        .iter()
        .find(|l| l.depth == 0)
        .map_or(0.0, |l| l.unallocated_gpu_h);
    let _ = write!(
        h,
        "<h2>Free tier</h2><p>Jobs that ask for no protection run for free on idle GPUs and give way to any budgeted job. \
         Over the last {:.0} days they used <b data-node=\"root\" data-field=\"unallocated_gpu_h\">{:.3}</b> GPU-hours: \
         <b data-field=\"free_tier_pct\">{:.1}%</b> of all GPU time used ({:.3} GPU-hours), and the cluster was busy \
         <b data-field=\"occupancy_pct\">{:.1}%</b> of the time.</p>",
        window_days,
        free,
        if t.occupied_gpu_h > 0.0 { 100.0 * free / t.occupied_gpu_h } else { 0.0 },
        t.occupied_gpu_h,
        t.occupancy_pct
    );
    // Each node, in tree order.
    h += "<h2>Each team, day by day</h2><p class=\"note\">Bars: GPU-hours used each day (red above the daily allocation). \
          Dashed line: the daily allocation.</p>";
    let mut stack = vec![Tree::ROOT];
    while let Some(id) = stack.pop() {
        let n = tree.node(id);
        if let Some(l) = r
            .lines
            .iter()
            .find(|l| l.user.is_none() && l.account == n.name)
        {
            let per_day = n.allocation * t.capacity_gpus as f64 * 24.0;
            let values = daily
                .charged_gpu_h
                .get(&n.name)
                .cloned()
                .unwrap_or_default();
            let _ = write!(
                h,
                "<section class=\"{}\"><h3>{}{}</h3><p>Allocation: {:.1}% of the cluster, {:.1} GPU-hours a day. \
                 Used in the last {:.0} days: <span data-node=\"{}\" data-field=\"charged_gpu_h\">{:.3}</span> GPU-hours \
                 of <span data-node=\"{}\" data-field=\"allocation_gpu_h\">{:.3}</span> (<span data-node=\"{}\" data-field=\"used_pct\">{:.2}%</span>).</p>{}</section>",
                if l.used_pct > 100.0 { "over" } else { "" },
                if id == Tree::ROOT { "Whole cluster".to_string() } else { esc(&n.path.trim_start_matches("tree.").replace('.', " / ")) },
                if n.is_leaf() { format!(" <small>(Slurm accounts: {})</small>", esc(&n.accounts.join(", "))) } else { String::new() },
                n.allocation * 100.0,
                per_day,
                window_days,
                esc(&n.name),
                l.charged_gpu_h,
                esc(&n.name),
                l.allocation_gpu_h,
                esc(&n.name),
                l.used_pct,
                chart(&values, per_day, &daily.days)
            );
        }
        for c in n.children.iter().rev() {
            stack.push(*c);
        }
    }
    // Use charged to accounts the tree does not name: no budget, no rank,
    // but GPU time all the same (the text report's "(not in allot.toml)").
    if let Some(i) = r
        .lines
        .iter()
        .position(|l| l.user.is_none() && l.account == UNKNOWN_ACCOUNTS)
    {
        let l = &r.lines[i];
        let accounts: Vec<String> = r.lines[i + 1..]
            .iter()
            .take_while(|a| a.depth > l.depth)
            .filter(|a| a.user.is_none())
            .map(|a| format!("{} ({:.3})", esc(&a.account), a.charged_gpu_h))
            .collect();
        let _ = write!(
            h,
            "<h2>Accounts not in allot.toml</h2><p>Jobs of Slurm accounts the tree does not name have no budget and no rank, \
             but their GPU time is counted: <b data-node=\"{n}\" data-field=\"charged_gpu_h\">{:.3}</b> GPU-hours charged \
             in the last {:.0} days, <span data-node=\"{n}\" data-field=\"running\">{}</span> running and \
             <span data-node=\"{n}\" data-field=\"pending\">{}</span> pending jobs. Accounts (GPU-hours): {}. \
             Add them to the tree, or map them, to give them a budget.</p>",
            l.charged_gpu_h,
            window_days,
            l.running,
            l.pending,
            accounts.join(", "),
            n = esc(UNKNOWN_ACCOUNTS),
        );
    }
    h += if live.is_some() {
        "<p class=\"note\">Served by <code>allot sync --listen</code>; the same numbers as <code>allot report</code> (JSON: <a href=\"/api/v1/report\">/api/v1/report</a>).</p></body></html>\n"
    } else {
        "<p class=\"note\">Made by <code>allot report --html</code>; the same numbers as <code>allot report</code>.</p></body></html>\n"
    };
    h
}
