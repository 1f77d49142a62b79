//! The text output of `allot health`: one line per GPU (its verdict,
//! identity, every check, the Xids that do not fail it), one per NVSwitch
//! that logged SXids, the node's summary (its verdict, GPU counts, the
//! count and NVSwitch checks) with the drain reason, then why each
//! unsupported or failed query could not be read, once per distinct
//! reason.

use super::reason::drain_reason;
use super::{Check, NodeReport, Verdict};

/// Text output: one line per GPU, then the node summary.
pub fn render_text(r: &NodeReport) -> String {
    let mut out = String::new();
    for g in &r.gpus {
        out.push_str(&format!(
            "gpu{:<3} {:<8} serial={} bus={}",
            g.index,
            g.verdict.as_str(),
            g.serial.as_deref().unwrap_or("?"),
            g.pci_bus_id.as_deref().unwrap_or("?")
        ));
        for (name, c) in &g.checks {
            out.push_str(&format!(" {name}={}", c.word()));
            if let Check::Failed(d) | Check::ResetRequired(d) | Check::Error(d) = c {
                out.push_str(&format!("({d})"));
            }
        }
        // The Xids that do not fail the check are listed, never hidden.
        let others: Vec<String> = g
            .xids
            .iter()
            .filter(|x| !x.critical)
            .map(|x| {
                let mut notes: Vec<String> = x.severity.iter().cloned().collect();
                if let Some(i) = &x.gpu_instance {
                    notes.push(format!("GPU-I:{i}"));
                }
                if x.count > 1 {
                    notes.push(format!("x{}", x.count));
                }
                if notes.is_empty() {
                    x.xid.to_string()
                } else {
                    format!("{}({})", x.xid, notes.join(" "))
                }
            })
            .collect();
        if !others.is_empty() {
            out.push_str(&format!(" non_critical_xids={}", others.join(",")));
        }
        out.push('\n');
    }
    // One line per NVSwitch that logged SXids: those that need a reset, and
    // the others (listed, never failed).
    let mut switches: Vec<(&str, &str)> = Vec::new();
    for s in &r.sxids {
        if !switches.iter().any(|(n, _)| *n == s.switch) {
            switches.push((&s.switch, &s.pci));
        }
    }
    for (name, pci) in switches {
        out.push_str(&format!("{name} bus={pci}"));
        for (label, fatal) in [("fatal_sxids", true), ("non_fatal_sxids", false)] {
            let these: Vec<String> = r
                .sxids
                .iter()
                .filter(|s| s.switch == name && s.fatal == fatal)
                .map(|s| {
                    let mut notes: Vec<String> = s.severity.iter().cloned().collect();
                    if s.count > 1 {
                        notes.push(format!("x{}", s.count));
                    }
                    if notes.is_empty() {
                        s.sxid.to_string()
                    } else {
                        format!("{}({})", s.sxid, notes.join(" "))
                    }
                })
                .collect();
            if !these.is_empty() {
                out.push_str(&format!(" {label}={}", these.join(",")));
            }
        }
        out.push('\n');
    }
    let failed = r
        .gpus
        .iter()
        .filter(|g| g.verdict == Verdict::Failed)
        .count();
    let unknown = r
        .gpus
        .iter()
        .filter(|g| g.verdict == Verdict::Unknown)
        .count();
    let reset = r
        .gpus
        .iter()
        .filter(|g| g.verdict == Verdict::ResetRequired)
        .count();
    let expected = r
        .expected
        .map_or_else(|| "?".to_string(), |e| e.to_string());
    out.push_str(&format!(
        "node {}: {}: {} GPUs ({} expected), {} failed, {}{} unknown; count {}; nvswitch {}",
        r.node,
        r.verdict.as_str(),
        r.found,
        expected,
        failed,
        if reset > 0 {
            format!("{reset} reset required, ")
        } else {
            String::new()
        },
        unknown,
        r.count.word(),
        r.nvswitch.word()
    ));
    if let Some(reason) = drain_reason(r) {
        out.push_str(&format!("; {reason}"));
    }
    out.push('\n');
    if let (Check::Failed(_), Some(note)) = (&r.count, &r.note) {
        out.push_str(&format!("  error: {note}\n"));
    }
    // Why each unsupported check is unsupported, once per distinct reason.
    let mut whys: Vec<String> = Vec::new();
    let all = r
        .gpus
        .iter()
        .flat_map(|g| g.checks.iter().map(|(_, c)| c))
        .chain([&r.count, &r.nvswitch]);
    for c in all {
        let line = match c {
            Check::Unsupported(why) => format!("  unsupported: {why}"),
            Check::Error(why) => format!("  error: {why}"),
            _ => continue,
        };
        {
            if !whys.contains(&line) {
                whys.push(line);
            }
        }
    }
    for w in whys {
        out.push_str(&w);
        out.push('\n');
    }
    out
}
