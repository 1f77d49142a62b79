//! The drain reason `allot health --drain` writes, and the check a reason
//! names (for the ledger's `health` events and the metrics).
//!
//! Rule: the reason names the **first failure**, GPUs in index order and
//! each GPU's checks in output order ([`super::GPU_CHECKS`]), then the
//! node's count check; a failure comes before a reset required. Its GPU
//! index, the fault and the serial are written (the PCI bus id for a GPU
//! without a readable serial), and `(+N more)` counts every other check
//! that failed or requires a reset.

#[cfg(doc)]
use super::{init_failed_node, GPU_CHECKS};
use super::{Check, NodeReport};

/// The first failure, for the drain reason and the ledger event: `(GPU
/// index, serial, fault)`; GPU `None` for the node's count and NVSwitch
/// checks. A failure comes before a reset required.
pub fn first_failure(r: &NodeReport) -> Option<(Option<u32>, Option<String>, String)> {
    for g in &r.gpus {
        for (_, c) in &g.checks {
            if let Check::Failed(f) = c {
                return Some((Some(g.index), g.serial.clone(), f.clone()));
            }
        }
    }
    for c in [&r.count, &r.nvswitch] {
        if let Check::Failed(f) = c {
            return Some((None, None, f.clone()));
        }
    }
    for g in &r.gpus {
        for (_, c) in &g.checks {
            if let Check::ResetRequired(f) = c {
                return Some((Some(g.index), g.serial.clone(), f.clone()));
            }
        }
    }
    None
}

/// The drain reason: `allot: gpu3 Xid 79 serial=1652221028513`, with
/// ` (+N more)` when other checks failed too; `allot: 7 of 8 GPUs visible`
/// for the count; `allot: nvswitch3 SXid 24007 Fatal` for the NVSwitches.
/// `None` when nothing failed.
pub fn drain_reason(r: &NodeReport) -> Option<String> {
    let (gpu, serial, fault) = first_failure(r)?;
    let failures = r
        .gpus
        .iter()
        .flat_map(|g| g.checks.iter())
        .filter(|(_, c)| matches!(c, Check::Failed(_) | Check::ResetRequired(_)))
        .count()
        + usize::from(matches!(r.count, Check::Failed(_)))
        + usize::from(matches!(r.nvswitch, Check::Failed(_)));
    let mut s = match gpu {
        Some(i) => format!("allot: gpu{i} {fault}"),
        None => format!("allot: {fault}"),
    };
    // A GPU without a serial (its handle unreadable) is named by its PCI
    // bus id when known: the index alone may name another GPU after a
    // reboot.
    let bus = || {
        let g = r.gpus.iter().find(|g| Some(g.index) == gpu)?;
        g.pci_bus_id.clone()
    };
    match (serial, bus()) {
        (Some(serial), _) => s.push_str(&format!(" serial={serial}")),
        (None, Some(bus)) => s.push_str(&format!(" bus={bus}")),
        (None, None) => {}
    }
    if failures > 1 {
        s.push_str(&format!(" (+{} more)", failures - 1));
    }
    Some(s)
}

/// The check named by a drain reason of [`drain_reason`] (the `reason` of
/// a ledger `health` event): one of [`GPU_CHECKS`], `count` for the node's
/// GPU count, `nvswitch` for a fatal NVSwitch SXid, `nvml` for NVML failing
/// to initialise ([`init_failed_node`]), `other` for a text this allot does
/// not write. Only the first failure is named in a reason; the `(+N more)`
/// are not.
pub fn check_of_reason(reason: &str) -> &'static str {
    let r = reason.strip_prefix("allot: ").unwrap_or(reason);
    let fault = match r.strip_prefix("gpu") {
        Some(rest) if rest.starts_with(|c: char| c.is_ascii_digit()) => rest
            .trim_start_matches(|c: char| c.is_ascii_digit())
            .trim_start(),
        _ if r.starts_with("NVML init failed") => return "nvml",
        _ if r.starts_with("nvswitch") && r.contains(" SXid ") => return "nvswitch",
        _ => {
            // The count check: `7 of 8 GPUs visible`.
            let mut w = r.split_whitespace();
            return match (w.next(), w.next(), w.next(), w.next()) {
                (Some(a), Some("of"), Some(b), Some("GPUs"))
                    if a.parse::<u32>().is_ok() && b.parse::<u32>().is_ok() =>
                {
                    "count"
                }
                _ => "other",
            };
        }
    };
    let starts = |p: &str| fault.starts_with(p);
    if starts("Xid ") {
        "xid"
    } else if starts("uncorrectable ECC") {
        "ecc"
    } else if starts("retired pages") {
        "retired_pages"
    } else if starts("row remap") || starts("reset required (row remap") {
        "row_remap"
    } else if starts("recovery action") || starts("reset required (recovery action") {
        "recovery_action"
    } else if starts("fabric ") {
        "fabric"
    } else if fault == "lost" || starts("lost ") {
        "present"
    } else {
        "other"
    }
}
