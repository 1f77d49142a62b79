//! A GPU NVML cannot open: its handle answers an error other than
//! GPU_IS_LOST (`nvmlDeviceGetHandleByIndex` = "Unknown Error", as after a
//! GPU falls off the bus on some drivers). Nothing can be asked of it, not
//! even its PCI bus id, yet the kernel log may hold an Xid 79 for that PCI
//! address: read by index alone the GPU is unknown, never drained, and
//! every job sent to it fails (issue 53, item 8).
//!
//! Rule: such a GPU's PCI address is found **by elimination**, from the
//! GPUs the kernel module holds (`/proc/driver/nvidia/gpus/`, one directory
//! per PCI address; a fixture's `driver_gpus`) less the addresses of the
//! GPUs NVML opened:
//! - one GPU without an address and one address left over: that address is
//!   the GPU's (nothing else can be);
//! - several of each, as many addresses as GPUs: paired in ascending order,
//!   since NVML numbers the GPUs of a boot in PCI bus order; only when the
//!   GPUs NVML opened follow that order too and the pairing keeps every
//!   index's address ascending, else none is paired;
//! - a different count (the driver holds a GPU NVML does not list, or the
//!   driver's list could not be read): none is paired.
//!
//! A GPU whose address is found gets the kernel log's Xids at that address,
//! judged as any GPU's; one whose address is not found stays unknown (its
//! Xids unsupported, never healthy).

use super::reading::{Probe, Unreadable};
use super::xid::{self, PciKey, XidEvent};

/// The PCI address of every GPU index: `known[i]` for a GPU NVML opened
/// (`None` for one it could not, lost or unreadable), completed by
/// elimination over `driver` (the kernel module's GPUs) as the rule at the
/// top of this file says. Known addresses are never changed.
pub fn by_elimination(known: &[Option<PciKey>], driver: &[PciKey]) -> Vec<Option<PciKey>> {
    let mut out = known.to_vec();
    let missing: Vec<usize> = (0..known.len()).filter(|&i| known[i].is_none()).collect();
    let mut left: Vec<PciKey> = driver
        .iter()
        .filter(|k| !known.contains(&Some(**k)))
        .copied()
        .collect();
    left.sort_unstable();
    left.dedup();
    if missing.is_empty() || missing.len() != left.len() {
        return out;
    }
    for (i, k) in missing.iter().zip(&left) {
        out[*i] = Some(*k);
    }
    let ascending = out.windows(2).all(|w| w[0] < w[1]);
    if missing.len() > 1 && !ascending {
        return known.to_vec();
    }
    out
}

/// An unreadable GPU: NVML's error (`why`), its PCI address when known
/// (`key`) and, from the kernel log's Xids (`log`: every `(address, Xid)`,
/// or why the log could not be read), those at that address.
pub fn at(
    why: String,
    key: Option<PciKey>,
    log: &Result<Vec<(PciKey, XidEvent)>, String>,
) -> Unreadable {
    let xids = match (log, key) {
        (Err(e), _) => Probe::Unsupported(e.clone()),
        (Ok(_), None) => Probe::Unsupported(
            "PCI bus id unknown (the handle cannot be read and the driver's GPUs do not single it out): Xids cannot be matched to this GPU"
                .into(),
        ),
        (Ok(all), Some(k)) => Probe::Value(xid::xids_at(all, k)),
    };
    Unreadable {
        why,
        pci_bus_id: key.map(xid::pci_bus_id),
        xids,
    }
}

/// The kernel module's GPUs: the PCI addresses named by the directories of
/// `/proc/driver/nvidia/gpus/` (`0000:3b:00.0`).
///
/// # Errors
/// A message naming the directory when it cannot be read.
pub fn driver_gpus() -> Result<Vec<PciKey>, String> {
    let dir = "/proc/driver/nvidia/gpus";
    let entries = std::fs::read_dir(dir).map_err(|e| format!("cannot list {dir}: {e}"))?;
    Ok(entries
        .filter_map(Result::ok)
        .filter_map(|e| xid::pci_key(&e.file_name().to_string_lossy()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: PciKey = (0, 0x1a, 0);
    const B: PciKey = (0, 0x3b, 0);
    const C: PciKey = (0, 0x86, 0);
    const D: PciKey = (0, 0xb1, 0);

    #[test]
    fn one_gpu_without_an_address_gets_the_one_left_over() {
        assert_eq!(
            by_elimination(&[Some(A), None], &[B, A]),
            vec![Some(A), Some(B)]
        );
        // Whatever the order: one address left is that GPU's.
        assert_eq!(
            by_elimination(&[Some(C), None, Some(A)], &[A, B, C]),
            vec![Some(C), Some(B), Some(A)]
        );
        // Nothing missing: unchanged.
        assert_eq!(
            by_elimination(&[Some(A), Some(B)], &[A, B, C]),
            vec![Some(A), Some(B)]
        );
    }

    #[test]
    fn several_are_paired_in_pci_order_only_when_it_holds() {
        // gpu1 and gpu3 unreadable; the opened ones ascend: paired in order.
        assert_eq!(
            by_elimination(&[Some(A), None, Some(C), None], &[A, B, C, D]),
            vec![Some(A), Some(B), Some(C), Some(D)]
        );
        // The opened GPUs do not follow PCI order: no pairing is sure.
        assert_eq!(
            by_elimination(&[Some(C), None, Some(A), None], &[A, B, C, D]),
            vec![Some(C), None, Some(A), None]
        );
        // The pairing itself would break the order (B after C): none.
        assert_eq!(
            by_elimination(&[None, None, Some(B)], &[A, B, C]),
            vec![None, None, Some(B)]
        );
    }

    #[test]
    fn a_count_that_does_not_match_pairs_nothing() {
        // The driver holds a GPU NVML does not list (two left, one missing).
        assert_eq!(
            by_elimination(&[Some(A), None], &[A, B, C]),
            vec![Some(A), None]
        );
        // The driver's list is empty (unreadable) or shorter.
        assert_eq!(by_elimination(&[Some(A), None], &[]), vec![Some(A), None]);
        assert_eq!(by_elimination(&[None, None], &[A]), vec![None, None]);
        // A duplicate directory is one GPU.
        assert_eq!(
            by_elimination(&[Some(A), None], &[B, B, A]),
            vec![Some(A), Some(B)]
        );
    }

    #[test]
    fn the_kernel_log_reaches_an_unreadable_gpu_by_its_address() {
        let log = Ok(xid::xids_in(
            "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n\
             NVRM: Xid (PCI:0000:1a:00): 13, pid=1, name=a, x\n",
        ));
        let u = at("NVML: Unknown Error".into(), Some(B), &log);
        assert_eq!(u.pci_bus_id.as_deref(), Some("00000000:3B:00.0"));
        assert_eq!(u.xids, Probe::Value(vec![XidEvent::code(79)]));
        let u = at("NVML: Unknown Error".into(), None, &log);
        assert!(matches!(&u.xids, Probe::Unsupported(w) if w.starts_with("PCI bus id unknown")));
        let u = at("x".into(), Some(B), &Err("cannot read /dev/kmsg".into()));
        assert_eq!(u.xids, Probe::Unsupported("cannot read /dev/kmsg".into()));
    }
}
