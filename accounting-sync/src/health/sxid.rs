//! NVSwitch SXids, and the node's `nvswitch` check.
//!
//! On an NVSwitch (HGX, DGX) node the NVSwitch driver reports the
//! switches' errors to the kernel log as "switch Xids": `nvidia-nvswitch3:
//! SXid (PCI:0000:86:00.0): 24007, Fatal, Link 12 sourcetrack timeout
//! error (First)`, then, for the same error, detail lines under the same
//! number (`..., 24007, Severity 1 Engine instance 12 Sub-engine instance
//! 00`, `..., 24007, Data {0x..., ...}`). A fatal one leaves the NVLink
//! fabric unusable until the switches and the GPUs are reset (on a
//! bare-metal node: a reboot); every multi-GPU job sent there hangs or
//! fails, while NVML still reads each GPU healthy.
//!
//! Rule (the `nvswitch` check, once per node; source: NVIDIA, Fabric
//! Manager User Guide, appendix "NVSwitch SXid errors", its non-fatal,
//! fatal, always-fatal and other notable lists):
//! - an SXid the catalogue resolves with a reset ([`RESET_SXIDS`]) fails
//!   the check, whatever its line says;
//! - any SXid whose line's severity word says fatal (`Fatal`) fails it;
//! - one the catalogue says is corrected by the switch or harmless
//!   ([`LISTED_SXIDS`]), or whose word says non-fatal, is listed, never
//!   failed;
//! - one the catalogue does not list and whose line has no severity word:
//!   the check is an **error** (unknown, never healthy, never drained);
//! - the detail lines (`Severity N ...`, `Data {...}`) belong to the error
//!   above them: not errors of their own.
//!
//! A fatal SXid is a **failure** (drained, reason `allot: nvswitch3 SXid
//! 24007 Fatal`), not a reset required: the switch reported a hardware
//! fault, as a critical Xid does for a GPU. Like an Xid, an SXid stays in
//! the kernel log until reboot.

use serde::Serialize;

use super::reading::Probe;
use super::xid::{self, severity_is_fatal, PciKey};
use super::Check;

/// SXids that NVIDIA's catalogue resolves with a reset of the NVSwitches
/// and GPUs (or a reboot), and says so whatever their line holds:
///
/// | SXid | what (catalogue list) |
/// | --- | --- |
/// | 10003 | unhandled host interrupt, never expected (other notable: reset every GPU and switch) |
/// | 11001, 11009, 11013, 11018, 11019, 11020 | ingress: invalid command, invalid VC set, header / RID / RLAN double-bit ECC, control parity (fatal) |
/// | 11004 | ingress invalid ACL: traffic stalls, jobs end with Xid 45 (non-fatal list, but recovered by a restart) |
/// | 12001, 12002, 12022, 12024, 12025, 12026, 12027, 12030, 12031, 12032 | egress: crossbar overflow, packet route, input / output double-bit ECC, credit overflow, destination request / response ID, control / credit parity, flit type mismatch (fatal) |
/// | 12020 | egress sequence ID (always fatal) |
/// | 12028 | egress non-posted PRIV error: traffic stalls, jobs end with Xid 45 (non-fatal list, recovered by a restart) |
/// | 14017 | TS ATO timeout (fatal) |
/// | 15001, 15006, 15009, 15010, 15012, 15013 | route: buffer / transdone over- or underflow, GLT double-bit ECC, parity, incoming double-bit ECC, credit parity (fatal) |
/// | 19047, 19048, 19054, 19056, 19058, 19060, 19061, 19063, 19064, 19066, 19067, 19069, 19070 | double-bit ECC in the NCISOC, HDR, DAT0/1, CREQ, response, COM and RSP1 RAMs (fatal) |
/// | 19084 | AN1 heartbeat timeout: reset every GPU and switch (non-fatal list) |
/// | 20034 | LTSSM fault up: a link went down from active (fatal) |
/// | 22003, 22011 | Minion halt, Minion external error (always fatal) |
/// | 22012 | Minion link NA interrupt (in the non-fatal and the fatal lists: read as fatal) |
/// | 23001 to 23017 | ingress / egress buffer, credit and packet errors (always fatal) |
/// | 24004, 24005, 24006, 24007 | sourcetrack crumbstore double-bit ECC, sourcetrack timeout (fatal) |
pub const RESET_SXIDS: &[u64] = &[
    10003, 11001, 11004, 11009, 11013, 11018, 11019, 11020, 12001, 12002, 12020, 12022, 12024,
    12025, 12026, 12027, 12028, 12030, 12031, 12032, 14017, 15001, 15006, 15009, 15010, 15012,
    15013, 19047, 19048, 19054, 19056, 19058, 19060, 19061, 19063, 19064, 19066, 19067, 19069,
    19070, 19084, 20034, 22003, 22011, 22012, 23001, 23002, 23003, 23004, 23005, 23006, 23007,
    23008, 23009, 23010, 23011, 23012, 23013, 23014, 23015, 23016, 23017, 24004, 24005, 24006,
    24007,
];

/// SXids the catalogue says need no reset: listed, never failed (unless
/// their line says `Fatal`):
///
/// | SXid | what |
/// | --- | --- |
/// | 10001, 10002 | host PRIV error / timeout: not fatal, may come before fatal ones |
/// | 10004, 10005 | thermal event start / end: the cooling may be short (links slowed) |
/// | 11012, 11021, 11022, 11023, 12021, 12023, 15008, 15011, 19049, 19055, 19057, 19059, 19062, 19065, 19068, 19071, 24001, 24002, 24003 | single-bit ECC, corrected by the switch |
/// | 20001 | TX replay: a packet sent again (throughput only) |
/// | 20012 | broken or inconsistent link, or a shutdown out of step: check the cables if it was not a shutdown |
/// | 22013 | Minion link DLREQ interrupt: may be ignored |
pub const LISTED_SXIDS: &[u64] = &[
    10001, 10002, 10004, 10005, 11012, 11021, 11022, 11023, 12021, 12023, 15008, 15011, 19049,
    19055, 19057, 19059, 19062, 19065, 19068, 19071, 20001, 20012, 22013, 24001, 24002, 24003,
];

/// One SXid of the kernel log.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct SxidEvent {
    /// The switch as the driver names it (`nvswitch3` of
    /// `nvidia-nvswitch3:`), else `nvswitch@` and its PCI address.
    pub switch: String,
    /// The switch's PCI address, as written (`0000:86:00.0`).
    pub pci: String,
    /// The SXid number.
    pub sxid: u64,
    /// The line's severity word (`Fatal`, `Non-fatal`), as written.
    pub severity: Option<String>,
}

impl SxidEvent {
    /// `nvswitch3 SXid 24007 Fatal`.
    pub fn words(&self) -> String {
        match &self.severity {
            Some(w) => format!("{} SXid {} {w}", self.switch, self.sxid),
            None => format!("{} SXid {}", self.switch, self.sxid),
        }
    }
}

/// How the `nvswitch` check reads one SXid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SxidClass {
    /// Fails the check: the switches and GPUs need a reset.
    Reset,
    /// Listed, never failed.
    Listed,
    /// Not in the catalogue, no severity word: neither healthy nor failed.
    SeverityUnknown,
}

/// The class of one SXid, as the rule at the top of this file says.
pub fn classify(e: &SxidEvent) -> SxidClass {
    let fatal = e.severity.as_deref().and_then(severity_is_fatal);
    if RESET_SXIDS.contains(&e.sxid) || fatal == Some(true) {
        SxidClass::Reset
    } else if LISTED_SXIDS.contains(&e.sxid) || fatal == Some(false) {
        SxidClass::Listed
    } else {
        SxidClass::SeverityUnknown
    }
}

/// An SXid line of the kernel log. `None` for any other line, for one
/// whose parenthesis does not hold a PCI address, and for a detail line
/// (its first field after the number is `Severity ...` or `Data ...`).
pub fn parse_sxid_line(line: &str) -> Option<SxidEvent> {
    let at = line.find("SXid (")?;
    let rest = &line[at + "SXid (".len()..];
    let close = rest.find(')')?;
    let pci = rest[..close].split_whitespace().next()?;
    let key: PciKey = xid::pci_key(pci)?;
    let after = rest[close + 1..]
        .trim_start()
        .strip_prefix(':')?
        .trim_start();
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    let sxid = digits.parse().ok()?;
    let text = after[digits.len()..].trim_start_matches([',', ' ']);
    let first = text.split(',').next().unwrap_or("").trim();
    if first.starts_with("Severity") || first.starts_with("Data") {
        return None;
    }
    let severity = text
        .split_whitespace()
        .flat_map(|w| w.split([',', '(', ')', ':', ';', '.']))
        .find(|w| severity_is_fatal(w).is_some())
        .map(str::to_string);
    let pci = pci.trim_start_matches("PCI:").to_string();
    let switch = line[..at]
        .trim_end()
        .trim_end_matches(':')
        .rsplit(|c: char| c.is_whitespace() || c == ']')
        .next()
        .and_then(|w| w.strip_prefix("nvidia-"))
        .filter(|w| {
            w.strip_prefix("nvswitch")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .map_or_else(
            || format!("nvswitch@{:04x}:{:02x}:{:02x}", key.0, key.1, key.2),
            str::to_string,
        );
    Some(SxidEvent {
        switch,
        pci,
        sxid,
        severity,
    })
}

/// Every SXid in `log` (kernel log text, one record per line), in order.
pub fn sxids_in(log: &str) -> Vec<SxidEvent> {
    log.lines().filter_map(parse_sxid_line).collect()
}

/// One distinct SXid of the node's kernel log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SxidSeen {
    /// The switch (`nvswitch3`).
    pub switch: String,
    /// Its PCI address.
    pub pci: String,
    /// The SXid number.
    pub sxid: u64,
    /// The line's severity word, when it had one.
    pub severity: Option<String>,
    /// True when it fails the `nvswitch` check (a reset is needed).
    pub fatal: bool,
    /// How many times it was logged (detail lines not counted).
    pub count: u64,
}

/// The node's `nvswitch` check over the kernel log's SXids, and every
/// distinct SXid, first seen first, counted. The fault names each distinct
/// SXid that needs a reset: `nvswitch3 SXid 24007 Fatal, nvswitch0 SXid
/// 20034 Fatal`.
pub fn check(sxids: &Probe<Vec<SxidEvent>>) -> (Check, Vec<SxidSeen>) {
    let events = match sxids {
        Probe::Value(events) => events,
        Probe::Unsupported(why) => return (Check::Unsupported(why.clone()), Vec::new()),
        Probe::Error(why) => return (Check::Error(why.clone()), Vec::new()),
    };
    let mut seen: Vec<SxidSeen> = Vec::new();
    for e in events {
        match seen
            .iter_mut()
            .find(|s| s.switch == e.switch && s.sxid == e.sxid && s.severity == e.severity)
        {
            Some(s) => s.count += 1,
            None => seen.push(SxidSeen {
                switch: e.switch.clone(),
                pci: e.pci.clone(),
                sxid: e.sxid,
                severity: e.severity.clone(),
                fatal: classify(e) == SxidClass::Reset,
                count: 1,
            }),
        }
    }
    let of = |class: SxidClass| {
        let mut v: Vec<&SxidEvent> = events.iter().filter(|e| classify(e) == class).collect();
        v.sort();
        v.dedup_by(|a, b| (&a.switch, a.sxid, &a.severity) == (&b.switch, b.sxid, &b.severity));
        v.iter().map(|e| e.words()).collect::<Vec<_>>()
    };
    let reset = of(SxidClass::Reset);
    let unknown = of(SxidClass::SeverityUnknown);
    let c = if !reset.is_empty() {
        Check::Failed(reset.join(", "))
    } else if !unknown.is_empty() {
        Check::Error(format!(
            "{} without a severity word (Fatal or Non-fatal) and not in NVIDIA's SXid catalogue: cannot tell whether it needs a reset",
            unknown.join(", ")
        ))
    } else {
        Check::Ok
    };
    (c, seen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sxid_lines_and_their_detail_lines() {
        let log = "[ 91.2] nvidia-nvswitch3: SXid (PCI:0000:86:00.0): 24007, Fatal, Link 12 sourcetrack timeout error (First)\n\
                   [ 91.2] nvidia-nvswitch3: SXid (PCI:0000:86:00.0): 24007, Severity 1 Engine instance 12 Sub-engine instance 00\n\
                   [ 91.2] nvidia-nvswitch3: SXid (PCI:0000:86:00.0): 24007, Data {0x00000001, 0x00000000}\n\
                   nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12021, Non-fatal, Link 32 egress single bit ECC error (First)\n\
                   NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=a, GPU has fallen off the bus.\n";
        let all = sxids_in(log);
        assert_eq!(
            all,
            vec![
                SxidEvent {
                    switch: "nvswitch3".into(),
                    pci: "0000:86:00.0".into(),
                    sxid: 24007,
                    severity: Some("Fatal".into())
                },
                SxidEvent {
                    switch: "nvswitch0".into(),
                    pci: "0000:05:00.0".into(),
                    sxid: 12021,
                    severity: Some("Non-fatal".into())
                },
            ]
        );
        assert_eq!(all[0].words(), "nvswitch3 SXid 24007 Fatal");
        // An Xid line is no SXid, and an SXid line no Xid.
        assert_eq!(xid::xids_in(log).len(), 1);
        // Without the driver's prefix the switch is named by its address.
        let e = parse_sxid_line("SXid (PCI:0000:07:00.0): 20034, Fatal, Link 37 LTSSM Fault Up")
            .unwrap();
        assert_eq!(e.switch, "nvswitch@0000:07:00");
        assert_eq!(parse_sxid_line("SXid (garbage): 20034, Fatal"), None);
        assert_eq!(
            parse_sxid_line("nvidia-nvswitch1: SXid (PCI:0000:06:00.0): Fatal"),
            None
        );
    }

    fn e(sxid: u64, severity: Option<&str>) -> SxidEvent {
        SxidEvent {
            switch: "nvswitch1".into(),
            pci: "0000:06:00.0".into(),
            sxid,
            severity: severity.map(String::from),
        }
    }

    #[test]
    fn the_catalogue_decides_then_the_severity_word() {
        // In the catalogue as needing a reset, whatever the line says.
        assert_eq!(classify(&e(24007, Some("Fatal"))), SxidClass::Reset);
        assert_eq!(classify(&e(12028, Some("Non-fatal"))), SxidClass::Reset);
        assert_eq!(classify(&e(20034, None)), SxidClass::Reset);
        assert_eq!(classify(&e(23017, None)), SxidClass::Reset);
        // Corrected by the switch: listed; but a line saying Fatal fails.
        assert_eq!(classify(&e(12021, Some("Non-fatal"))), SxidClass::Listed);
        assert_eq!(classify(&e(22013, None)), SxidClass::Listed);
        assert_eq!(classify(&e(12021, Some("Fatal"))), SxidClass::Reset);
        // Not in the catalogue: by the word, else unknown.
        assert_eq!(classify(&e(30001, Some("Fatal"))), SxidClass::Reset);
        assert_eq!(classify(&e(30001, Some("Non-fatal"))), SxidClass::Listed);
        assert_eq!(classify(&e(30001, None)), SxidClass::SeverityUnknown);
        // No number is in both lists.
        assert!(RESET_SXIDS.iter().all(|n| !LISTED_SXIDS.contains(n)));
    }

    #[test]
    fn the_check_fails_on_a_reset_and_counts_each_sxid() {
        let events = vec![
            e(12021, Some("Non-fatal")),
            e(24007, Some("Fatal")),
            e(12021, Some("Non-fatal")),
            SxidEvent {
                switch: "nvswitch0".into(),
                ..e(20034, Some("Fatal"))
            },
        ];
        let (c, seen) = check(&Probe::Value(events));
        assert_eq!(
            c,
            Check::Failed("nvswitch0 SXid 20034 Fatal, nvswitch1 SXid 24007 Fatal".into())
        );
        assert_eq!(
            seen.iter()
                .map(|s| (s.sxid, s.fatal, s.count))
                .collect::<Vec<_>>(),
            vec![(12021, false, 2), (24007, true, 1), (20034, true, 1)]
        );
        let (c, _) = check(&Probe::Value(vec![e(12021, Some("Non-fatal"))]));
        assert_eq!(c, Check::Ok);
        let (c, _) = check(&Probe::Value(vec![e(30001, None)]));
        assert!(
            matches!(&c, Check::Error(w) if w.starts_with("nvswitch1 SXid 30001 without a severity word")),
            "{c:?}"
        );
        assert_eq!(check(&Probe::Value(Vec::new())).0, Check::Ok);
        assert_eq!(
            check(&Probe::Unsupported("cannot read /dev/kmsg".into())).0,
            Check::Unsupported("cannot read /dev/kmsg".into())
        );
    }
}
