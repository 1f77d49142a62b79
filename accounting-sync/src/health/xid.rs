//! Critical Xids, and reading Xids from the kernel log.
//!
//! An Xid is an error report the NVIDIA driver prints to the kernel log:
//! `NVRM: Xid (PCI:0000:3b:00): 79, pid=1101234, name=nvc:[driver], GPU has
//! fallen off the bus.` (older drivers omit `PCI:`). NVML's event API only
//! reports Xids that happen while a process is registered for them, so a
//! periodic health check reads the kernel log (`/dev/kmsg`, records since
//! boot) instead. An Xid stays there until reboot: after repairing a GPU
//! without rebooting, clear the ring buffer (`dmesg -C`) before resuming the
//! node.

/// Xids that need a GPU reset or a reboot (or service) before the GPU can
/// be trusted again. Source: NVIDIA, "Xid Errors" and the Xid catalog
/// (docs.nvidia.com/deploy/xid-errors/, resolution buckets RESET_GPU /
/// RESTART_BM / CONTACT_SUPPORT for hardware faults):
///
/// | Xid | meaning |
/// | --- | --- |
/// | 48 | double-bit (uncorrectable) ECC error |
/// | 61, 62 | internal micro-controller breakpoint / halt |
/// | 63, 64 | ECC page retirement or row remap recorded / failed |
/// | 74 | NVLink error |
/// | 79 | GPU has fallen off the bus |
/// | 92 | high single-bit ECC error rate |
/// | 94, 95 | contained / uncontained ECC error (94: the row remap it triggers needs a reset) |
/// | 119, 120 | GSP RPC timeout / GSP error |
/// | 140 | unrecovered ECC error |
/// | 154 | GPU recovery action changed: reset or reboot required |
///
/// Application faults (13, 31, 43, 45, ...) are reported but do not fail
/// the check: they concern a job, not the GPU.
pub const CRITICAL_XIDS: &[u64] = &[48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140, 154];

/// A PCI address as `(domain, bus, device)`.
pub type PciKey = (u32, u32, u32);

/// True for an Xid of [`CRITICAL_XIDS`].
pub fn is_critical(xid: u64) -> bool {
    CRITICAL_XIDS.contains(&xid)
}

/// A PCI address as `(domain, bus, device)`, from either the kernel's form
/// (`0000:3b:00`, `PCI:0000:3b:00`) or NVML's (`00000000:3B:00.0`).
pub fn pci_key(s: &str) -> Option<PciKey> {
    let s = s.trim().trim_start_matches("PCI:");
    let mut parts = s.split(':');
    let domain = u32::from_str_radix(parts.next()?, 16).ok()?;
    let bus = u32::from_str_radix(parts.next()?, 16).ok()?;
    let dev = parts.next()?;
    let dev = dev.split('.').next()?;
    let dev = u32::from_str_radix(dev, 16).ok()?;
    if parts.next().is_some() {
        return None;
    }
    Some((domain, bus, dev))
}

/// An Xid line of the kernel log: `(PCI address key, Xid)`. `None` for
/// any other line.
pub fn parse_xid_line(line: &str) -> Option<(PciKey, u64)> {
    let rest = &line[line.find("NVRM: Xid (")? + "NVRM: Xid (".len()..];
    let close = rest.find(')')?;
    let key = pci_key(&rest[..close])?;
    let after = rest[close + 1..]
        .trim_start()
        .strip_prefix(':')?
        .trim_start();
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    Some((key, digits.parse().ok()?))
}

/// Every Xid in `log` (kernel log text, one record per line), in order.
pub fn xids_in(log: &str) -> Vec<(PciKey, u64)> {
    log.lines().filter_map(parse_xid_line).collect()
}

/// Reads the kernel log since boot from `/dev/kmsg` without blocking.
///
/// # Errors
/// A message naming the file and the fix (run as root) when it cannot be
/// read.
pub fn read_kmsg() -> Result<String, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open("/dev/kmsg")
        .map_err(|e| format!("cannot read /dev/kmsg for Xids ({e}); run as root, as slurmd runs HealthCheckProgram"))?;
    let mut out = String::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        // One read returns one record: `prio,seq,usec,flags;message`.
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let rec = String::from_utf8_lossy(&buf[..n]);
                let msg = rec.split_once(';').map_or(&*rec, |(_, m)| m);
                out.push_str(msg.lines().next().unwrap_or(""));
                out.push('\n');
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            // EPIPE: the record we were about to read was overwritten; go on.
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
            Err(e) => return Err(format!("reading /dev/kmsg: {e}")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xid_lines() {
        let line = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1101234, name=nvc:[driver], GPU has fallen off the bus.";
        assert_eq!(parse_xid_line(line), Some(((0, 0x3b, 0), 79)));
        assert_eq!(
            parse_xid_line("[ 12.5] NVRM: Xid (0000:03:00): 14, Channel 00000001"),
            Some(((0, 3, 0), 14))
        );
        assert_eq!(
            parse_xid_line("NVRM: GPU at 0000:03:00: GPU-b850f46d"),
            None
        );
        assert_eq!(parse_xid_line("usb 1-1: new device"), None);
        let log = format!("{line}\nsomething else\nNVRM: Xid (PCI:0000:86:00): 48, DBE\n");
        assert_eq!(xids_in(&log), vec![((0, 0x3b, 0), 79), ((0, 0x86, 0), 48)]);
    }

    #[test]
    fn pci_forms_agree() {
        assert_eq!(pci_key("00000000:3B:00.0"), pci_key("PCI:0000:3b:00"));
        assert_eq!(pci_key("0001:86:1f.0"), Some((1, 0x86, 0x1f)));
        assert_eq!(pci_key("garbage"), None);
    }

    #[test]
    fn critical_list() {
        for x in [48, 79, 94, 95, 92, 119, 120] {
            assert!(is_critical(x), "{x}");
        }
        for x in [13, 31, 43, 45] {
            assert!(!is_critical(x), "{x}");
        }
    }
}
