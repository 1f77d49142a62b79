//! Critical Xids, and reading Xids from the kernel log.
//!
//! An Xid is an error report the NVIDIA driver prints to the kernel log:
//! `NVRM: Xid (PCI:0000:3b:00): 79, pid=1101234, name=nvc:[driver], GPU has
//! fallen off the bus.` (older drivers omit `PCI:`). On a GPU in MIG mode
//! the parenthesis also names the GPU instance the fault hit: `NVRM: Xid
//! (PCI:0000:01:00 GPU-I:05): 95, ...`. The line is matched to its GPU by
//! the PCI address alone, whatever else the parenthesis holds: an Xid is
//! never dropped for a word allot does not know there (a dropped Xid 95
//! reads healthy). NVML's event API only
//! reports Xids that happen while a process is registered for them, so a
//! periodic health check reads the kernel log (`/dev/kmsg`, records since
//! boot) instead. An Xid stays there until reboot: after repairing a GPU
//! without rebooting, clear the ring buffer (`dmesg -C`) before resuming the
//! node.

/// Xids that need a GPU reset or a reboot (or service) before the GPU can
/// be trusted again, whatever their line says. Source: NVIDIA, "Xid
/// Errors" and the Xid catalog (docs.nvidia.com/deploy/xid-errors/,
/// resolution buckets RESET_GPU / RESTART_BM / CONTACT_SUPPORT for hardware
/// faults), and NVIDIA's health validation (Xid checks of severity
/// CRITICAL, action drain + reset):
///
/// | Xid | meaning |
/// | --- | --- |
/// | 46 | GPU stopped processing (health validation: critical, reset the GPU) |
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
/// Xids 144-150 ([`SEVERITY_XIDS`]) depend on their line's severity word.
/// Application faults (13, 31, 43, 45, ...) are reported but do not fail
/// the check: they concern a job, not the GPU.
pub const CRITICAL_XIDS: &[u64] = &[
    46, 48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140, 154,
];

/// NVLink Xids (Blackwell and newer: 144 SAW, 145 RLW, 146 TLW, 147 TREX,
/// 148 NVLPW control, 149 NETIR, 150 MSE) whose kernel line carries a
/// severity word after the unit, e.g. `145, RLW_REMAP Fatal XC0 i0 Link 23
/// (...)`. The catalogue resolves the fatal (uncorrectable) ones with a GPU
/// reset or a reboot (until then NCCL hangs); the non-fatal ones are
/// corrected by the hardware. Such an Xid is critical when its word says
/// fatal or uncorrectable ([`severity_is_fatal`]); listed, not failed, when
/// it says non-fatal or correctable; and, without a word allot knows,
/// neither: the check is in error (the GPU unknown, never healthy).
pub const SEVERITY_XIDS: std::ops::RangeInclusive<u64> = 144..=150;

/// One Xid of the kernel log: its number, the severity word of its line
/// (`Fatal`, `NonFatal`, `Uncorrectable`, ..., as written) and the MIG GPU
/// instance of its parenthesis (`GPU-I:05`), each when it has one.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct XidEvent {
    /// The Xid number.
    pub xid: u64,
    /// The line's severity word, as written.
    pub severity: Option<String>,
    /// The GPU instance of a GPU in MIG mode (`05` of `GPU-I:05`), as
    /// written. The Xid concerns the whole GPU all the same: its check is
    /// judged by the number as on any GPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_instance: Option<String>,
}

impl XidEvent {
    /// An Xid without a severity word, on no GPU instance.
    pub fn code(xid: u64) -> XidEvent {
        XidEvent {
            xid,
            severity: None,
            gpu_instance: None,
        }
    }

    /// `145 Fatal`, `79` without a severity word, `95 (GPU-I:05)` on a MIG
    /// GPU instance.
    pub fn words(&self) -> String {
        let mut s = self.xid.to_string();
        if let Some(w) = &self.severity {
            s.push(' ');
            s.push_str(w);
        }
        if let Some(i) = &self.gpu_instance {
            s.push_str(&format!(" (GPU-I:{i})"));
        }
        s
    }
}

/// How the `xid` check reads one Xid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XidClass {
    /// Fails the check: the GPU needs a reset, a reboot or service.
    Critical,
    /// Listed in the reading, never failed (an application fault, a
    /// corrected NVLink error).
    NonCritical,
    /// An Xid of [`SEVERITY_XIDS`] without a severity word allot knows:
    /// neither healthy nor failed.
    SeverityUnknown,
}

/// `Some(true)` for a word saying fatal (`Fatal`, `Uncorrectable`,
/// `Uncorrected`), `Some(false)` for one saying it is not (`NonFatal`,
/// `Non-fatal`, `Nonfatal`, `Correctable`, `Corrected`), `None` for any other
/// word. Case does not matter.
pub fn severity_is_fatal(word: &str) -> Option<bool> {
    match word.to_ascii_lowercase().as_str() {
        "fatal" | "uncorrectable" | "uncorrected" => Some(true),
        "nonfatal" | "non-fatal" | "non_fatal" | "correctable" | "corrected" => Some(false),
        _ => None,
    }
}

/// The class of one Xid: [`CRITICAL_XIDS`] always, [`SEVERITY_XIDS`] by
/// their severity word, any other never.
pub fn classify(x: &XidEvent) -> XidClass {
    if CRITICAL_XIDS.contains(&x.xid) {
        return XidClass::Critical;
    }
    if !SEVERITY_XIDS.contains(&x.xid) {
        return XidClass::NonCritical;
    }
    match x.severity.as_deref().and_then(severity_is_fatal) {
        Some(true) => XidClass::Critical,
        Some(false) => XidClass::NonCritical,
        None => XidClass::SeverityUnknown,
    }
}

/// A PCI address as `(domain, bus, device)`.
pub type PciKey = (u32, u32, u32);

/// True for an Xid of [`CRITICAL_XIDS`] (critical whatever its line says).
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

/// The text of an Xid after `NVRM: Xid (PCI:...): `, e.g. `145, pid=...,
/// name=..., RLW_REMAP Fatal XC0 i0 Link 23 (...)`: the number and the
/// first severity word ([`severity_is_fatal`] knows it) among the words
/// after it. `key=value` words (`pid=`, `name=`) are skipped, so a process
/// name is never read as a severity. `None` when it does not start with a
/// number.
pub fn parse_xid_text(text: &str) -> Option<XidEvent> {
    let text = text.trim_start();
    let digits: String = text.chars().take_while(char::is_ascii_digit).collect();
    let xid = digits.parse().ok()?;
    let rest = &text[digits.len()..];
    let severity = rest
        .split_whitespace()
        .filter(|w| !w.contains('='))
        .flat_map(|w| w.split([',', '(', ')', ':', ';', '.']))
        .find(|w| severity_is_fatal(w).is_some())
        .map(str::to_string);
    Some(XidEvent {
        xid,
        severity,
        gpu_instance: None,
    })
}

/// A PCI address in NVML's form (`00000000:3B:00.0`, function 0), as
/// `GpuReading::pci_bus_id` holds it.
pub fn pci_bus_id(key: PciKey) -> String {
    format!("{:08X}:{:02X}:{:02X}.0", key.0, key.1, key.2)
}

/// The Xids of `all` (every `(address, Xid)` of the kernel log) logged at
/// `key`, in order.
pub fn xids_at(all: &[(PciKey, XidEvent)], key: PciKey) -> Vec<XidEvent> {
    all.iter()
        .filter(|(k, _)| *k == key)
        .map(|(_, x)| x.clone())
        .collect()
}

/// An Xid line of the kernel log: `(PCI address key, Xid)`. The
/// parenthesis holds the PCI address first (`PCI:0000:3b:00`, or
/// `0000:3b:00` from older drivers), then, on a MIG GPU, `GPU-I:NN` (kept
/// in [`XidEvent::gpu_instance`]); any other word after the address is
/// skipped, never a reason to drop the Xid. `None` for any other line, or
/// one whose parenthesis does not start with a PCI address.
pub fn parse_xid_line(line: &str) -> Option<(PciKey, XidEvent)> {
    let rest = &line[line.find("NVRM: Xid (")? + "NVRM: Xid (".len()..];
    let close = rest.find(')')?;
    let mut words = rest[..close].split_whitespace();
    let key = pci_key(words.next()?)?;
    let gpu_instance = words
        .find_map(|w| w.strip_prefix("GPU-I:"))
        .filter(|i| !i.is_empty())
        .map(str::to_string);
    let after = rest[close + 1..].trim_start().strip_prefix(':')?;
    let mut x = parse_xid_text(after)?;
    x.gpu_instance = gpu_instance;
    Some((key, x))
}

/// Every Xid in `log` (kernel log text, one record per line), in order.
pub fn xids_in(log: &str) -> Vec<(PciKey, XidEvent)> {
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
        assert_eq!(
            parse_xid_line(line),
            Some(((0, 0x3b, 0), XidEvent::code(79)))
        );
        assert_eq!(
            parse_xid_line("[ 12.5] NVRM: Xid (0000:03:00): 14, Channel 00000001"),
            Some(((0, 3, 0), XidEvent::code(14)))
        );
        assert_eq!(
            parse_xid_line("NVRM: GPU at 0000:03:00: GPU-b850f46d"),
            None
        );
        assert_eq!(parse_xid_line("usb 1-1: new device"), None);
        let log = format!("{line}\nsomething else\nNVRM: Xid (PCI:0000:86:00): 48, DBE\n");
        assert_eq!(
            xids_in(&log),
            vec![
                ((0, 0x3b, 0), XidEvent::code(79)),
                ((0, 0x86, 0), XidEvent::code(48))
            ]
        );
    }

    #[test]
    fn pci_forms_agree() {
        assert_eq!(pci_key("00000000:3B:00.0"), pci_key("PCI:0000:3b:00"));
        assert_eq!(pci_key("0001:86:1f.0"), Some((1, 0x86, 0x1f)));
        assert_eq!(pci_key("garbage"), None);
        assert_eq!(pci_bus_id((0, 0x3b, 0)), "00000000:3B:00.0");
        assert_eq!(pci_key(&pci_bus_id((1, 0x86, 0x1f))), Some((1, 0x86, 0x1f)));
    }

    fn line(text: &str) -> XidEvent {
        parse_xid_line(&format!("NVRM: Xid (PCI:0000:3b:00): {text}"))
            .unwrap()
            .1
    }

    #[test]
    fn severity_word_is_kept_from_the_kernel_line() {
        let x = line("145, pid='<unknown>', name=<unknown>, RLW_REMAP Fatal XC0 i0 Link 23 (0x00000004 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)");
        assert_eq!(x.xid, 145);
        assert_eq!(x.severity.as_deref(), Some("Fatal"));
        assert_eq!(x.words(), "145 Fatal");
        assert_eq!(classify(&x), XidClass::Critical);
        let x = line("145, pid='<unknown>', name=<unknown>, RLW_REMAP NonFatal XC0 i0 Link 23 (0x00000001 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)");
        assert_eq!(x.severity.as_deref(), Some("NonFatal"));
        assert_eq!(classify(&x), XidClass::NonCritical);
        let x = line("149, NETIR_LINK_EVT Uncorrectable XC0 i0 Link 04 (0x004505c6 0x00000000)");
        assert_eq!(
            (x.xid, x.severity.as_deref(), classify(&x)),
            (149, Some("Uncorrectable"), XidClass::Critical)
        );
        let x = line("144, SAW_MVB Non-fatal XC0 i0 Link -1 (0x00000000)");
        assert_eq!(classify(&x), XidClass::NonCritical);
        let x = line("150, MSE_WATCHDOG Correctable XC0 i0 Link -1 (0x00000000)");
        assert_eq!(classify(&x), XidClass::NonCritical);
        // A process named like a severity is not one.
        let x = line("146, pid=4242, name=fatal, TLW_RX Nonfatal XC0 i0 Link 2");
        assert_eq!(x.severity.as_deref(), Some("Nonfatal"));
        let x = line("147, pid=4242, name=x:fatal, TREX_EVT XC0 i0 Link 2");
        assert_eq!(
            (x.severity, classify(&line("147, TREX_EVT XC0 i0 Link 2"))),
            (None, XidClass::SeverityUnknown)
        );
        // Xid 46 is critical whatever the line says; Xid 13 never is.
        assert_eq!(
            classify(&line("46, pid=1, name=python, GPU stopped processing")),
            XidClass::Critical
        );
        assert_eq!(
            classify(&line(
                "13, pid=1, name=python, Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0): Fatal"
            )),
            XidClass::NonCritical
        );
    }

    #[test]
    fn mig_lines_keep_their_xid_and_gpu_instance() {
        // Issue 53, item 11: the GPU instance in the parenthesis made the
        // PCI address unreadable, and the line was dropped.
        let line = "NVRM: Xid (PCI:0000:01:00 GPU-I:05): 95, pid=20931, name=python3, Uncontained: FBHUB. RST: Yes, D-RST: No";
        let (key, x) = parse_xid_line(line).unwrap();
        assert_eq!(key, (0, 1, 0));
        assert_eq!(
            x,
            XidEvent {
                xid: 95,
                severity: None,
                gpu_instance: Some("05".into())
            }
        );
        assert_eq!(x.words(), "95 (GPU-I:05)");
        assert_eq!(classify(&x), XidClass::Critical);
        // Matched to the same GPU as a line without the instance.
        assert_eq!(
            xids_in(&format!(
                "{line}\nNVRM: Xid (PCI:0000:01:00): 13, pid=1, name=a, x\n"
            ))
            .iter()
            .map(|(k, x)| (*k, x.xid))
            .collect::<Vec<_>>(),
            vec![((0, 1, 0), 95), ((0, 1, 0), 13)]
        );
        // A word allot does not know after the address is skipped.
        let (key, x) = parse_xid_line(
            "NVRM: Xid (PCI:0000:01:00 GPU-I:02 GPU-CI:1): 94, pid=7, name=t, Contained: SM",
        )
        .unwrap();
        assert_eq!(
            (key, x.xid, x.gpu_instance.as_deref()),
            ((0, 1, 0), 94, Some("02"))
        );
        let (_, x) = parse_xid_line("NVRM: Xid (0000:01:00 something): 48, DBE").unwrap();
        assert_eq!((x.xid, x.gpu_instance), (48, None));
        // A severity word and an instance.
        let (_, x) = parse_xid_line(
            "NVRM: Xid (PCI:0000:01:00 GPU-I:03): 145, pid='<unknown>', name=<unknown>, RLW_REMAP Fatal XC0 i0 Link 2",
        )
        .unwrap();
        assert_eq!(x.words(), "145 Fatal (GPU-I:03)");
        // Still no PCI address, still no Xid.
        assert_eq!(parse_xid_line("NVRM: Xid (GPU-I:05): 95, x"), None);
        assert_eq!(parse_xid_line("NVRM: Xid (): 95, x"), None);
    }

    #[test]
    fn critical_list() {
        for x in [46, 48, 79, 94, 95, 92, 119, 120] {
            assert!(is_critical(x), "{x}");
        }
        for x in [13, 31, 43, 45] {
            assert!(!is_critical(x), "{x}");
        }
    }
}
