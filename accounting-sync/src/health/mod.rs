//! GPU health: what `allot health` reads, how each check is judged, and the
//! drain reason it writes.
//!
//! Rules (docs/health.md):
//! - A [`GpuSource`] reports each GPU: NVML ([`nvml::NvmlSource`]) on a GPU
//!   node, a recorded JSON state ([`fixture::FixtureSource`]) for tests and
//!   for replaying an incident.
//! - Per GPU, seven checks, each **ok**, **failed**, **reset required**,
//!   **unsupported** (NVML's NOT_SUPPORTED) or **error** (any other NVML
//!   error, e.g. UNKNOWN: the query failed): `present` (not lost / fallen
//!   off the bus), `xid` (a critical Xid, see [`xid::CRITICAL_XIDS`]), `ecc`
//!   (uncorrectable ECC errors since the driver loaded), `retired_pages`
//!   (pages pending retirement), `row_remap` (a remapping failure fails; a
//!   remap *pending* means the GPU must be reset before it applies: reset
//!   required), `recovery_action` (the driver's
//!   `NVML_FI_DEV_GET_GPU_RECOVERY_ACTION`: `none` is ok, `gpu_reset` and
//!   `drain_and_reset` are reset required, `node_reboot` and `drain_p2p`
//!   fail), `fabric` (the GPU's registration with the NVLink fabric of an
//!   NVSwitch node: anything but completed fails, [`fabric`]). Per node,
//!   `count`: fewer GPUs than Slurm's `Gres=gpu:N` fails; `nvswitch`: an
//!   NVSwitch SXid of the kernel log that needs a reset fails ([`sxid`]). GPU_IS_LOST from any query is a lost GPU; a GPU whose
//!   handle cannot be read for another error still gets its Xids, by its
//!   PCI address ([`unreadable`]).
//! - A GPU is **failed** when any check failed; else **reset required**
//!   when any check says so (drained like a failure, so the GPU can be reset
//!   once its jobs have left); else **unknown** when any check is
//!   unsupported or in error (never counts as failed *or* as healthy);
//!   else **healthy**. One exception: a driver without the recovery-action
//!   field (before R570) loses no check, since the driver derives the action
//!   from the faults the other checks read, so `recovery_action`
//!   *unsupported* does not make a GPU unknown (an *error* there does);
//!   nor does `fabric` *unsupported* (a GPU on no NVSwitch fabric). The
//!   node follows the same rule over its GPUs, its count check and its
//!   `nvswitch` check (whose *unsupported*, an unreadable kernel log, costs
//!   nothing: the GPUs' `xid` checks say so already).
//! - One GPU that cannot be read is reported as such; the others are still
//!   read ([`check_node`] asks the source for each index separately).

use serde::Serialize;

pub mod fabric;
pub mod fixture;
pub mod node;
pub mod nvml;
mod reading;
mod reason;
pub mod sxid;
mod text;
pub mod unreadable;
pub mod xid;

pub use reading::{
    init_error_drains, probe_from, GpuError, GpuReading, Probe, QueryError, RecoveryAction,
    RowRemap, SourceError, Unreadable,
};
pub use reason::{check_of_reason, drain_reason, first_failure};
pub use text::render_text;

/// Where GPU state comes from: NVML on a GPU node, or a fixture.
pub trait GpuSource {
    /// How many GPUs the driver reports.
    ///
    /// # Errors
    /// A message when even the count cannot be read.
    fn count(&mut self) -> Result<u32, String>;
    /// Reads GPU `index` (`0..count`). A failure here concerns this GPU
    /// only.
    ///
    /// # Errors
    /// [`GpuError`] when the GPU cannot be read at all.
    fn read(&mut self, index: u32) -> Result<GpuReading, GpuError>;
    /// The NVSwitch SXids of the kernel log since boot, or why they could
    /// not be read (the log is unreadable, or a fixture records none).
    fn sxids(&mut self) -> Probe<Vec<sxid::SxidEvent>>;
}

/// Result of one check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", content = "detail", rename_all = "lowercase")]
pub enum Check {
    /// Passed.
    Ok,
    /// Failed; the fault as written in a drain reason (`Xid 79`).
    Failed(String),
    /// The GPU must be reset (what is pending, e.g. `reset required (row
    /// remap pending)`): drained like a failure, so the reset can happen
    /// once the jobs have left, but not a broken GPU.
    #[serde(rename = "reset_required")]
    ResetRequired(String),
    /// Not supported (the reason): neither healthy nor failed.
    Unsupported(String),
    /// The query failed with an NVML error other than NOT_SUPPORTED (the
    /// error): neither healthy nor failed.
    Error(String),
}

impl Check {
    pub(crate) fn word(&self) -> &'static str {
        match self {
            Check::Ok => "ok",
            Check::Failed(_) => "FAILED",
            Check::ResetRequired(_) => "RESET",
            Check::Unsupported(_) => "unsupported",
            Check::Error(_) => "ERROR",
        }
    }
}

/// Verdict on a GPU or a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Every check passed.
    Healthy,
    /// No check failed, but at least one is unsupported or in error:
    /// never drained.
    Unknown,
    /// No check failed, but the GPU must be reset: drained.
    #[serde(rename = "reset_required")]
    ResetRequired,
    /// At least one check failed.
    Failed,
}

impl Verdict {
    fn of<'a>(checks: impl IntoIterator<Item = &'a Check>) -> Verdict {
        let mut v = Verdict::Healthy;
        for c in checks {
            v = v.max(match c {
                Check::Ok => Verdict::Healthy,
                Check::Unsupported(_) | Check::Error(_) => Verdict::Unknown,
                Check::ResetRequired(_) => Verdict::ResetRequired,
                Check::Failed(_) => Verdict::Failed,
            });
        }
        v
    }

    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Healthy => "healthy",
            Verdict::Unknown => "unknown",
            Verdict::ResetRequired => "RESET",
            Verdict::Failed => "FAILED",
        }
    }

    /// True for the verdicts `allot health --drain` drains on.
    pub fn drains(self) -> bool {
        self >= Verdict::ResetRequired
    }
}

/// The checks of one GPU, in output order.
pub const GPU_CHECKS: [&str; 7] = [
    "present",
    "xid",
    "ecc",
    "retired_pages",
    "row_remap",
    "recovery_action",
    "fabric",
];

/// The checks whose *unsupported* costs a GPU nothing: the driver has no
/// such value because the GPU has nothing to report there
/// (`recovery_action` before R570: the other checks read the faults it
/// derives from; `fabric` on a GPU on no NVSwitch fabric).
const OPTIONAL_CHECKS: [&str; 2] = ["recovery_action", "fabric"];

fn unread<T>(p: &Probe<T>) -> Option<Check> {
    match p {
        Probe::Value(_) => None,
        Probe::Unsupported(why) => Some(Check::Unsupported(why.clone())),
        Probe::Error(why) => Some(Check::Error(why.clone())),
    }
}

/// One GPU's report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuReport {
    /// NVML index.
    pub index: u32,
    /// Serial number, when readable.
    pub serial: Option<String>,
    /// UUID, when readable.
    pub uuid: Option<String>,
    /// PCI bus id, when readable.
    pub pci_bus_id: Option<String>,
    /// `(name, result)` for each of [`GPU_CHECKS`], in that order.
    pub checks: Vec<(String, Check)>,
    /// Every distinct Xid read for this GPU (number, severity word, MIG
    /// GPU instance), in the order first seen: the critical ones (also in
    /// the `xid` check's fault) and the others, listed, never failed.
    pub xids: Vec<XidSeen>,
    /// Worst of the checks.
    pub verdict: Verdict,
}

/// One distinct Xid of a GPU's reading.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct XidSeen {
    /// The Xid number.
    pub xid: u64,
    /// The line's severity word (`Fatal`, `NonFatal`, ...), when it had one.
    pub severity: Option<String>,
    /// The MIG GPU instance of its line (`05` of `GPU-I:05`), when it had
    /// one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_instance: Option<String>,
    /// True when it fails the `xid` check.
    pub critical: bool,
    /// How many times it was logged.
    pub count: u64,
}

/// The distinct Xids of `events`, first seen first, counted.
fn xids_seen(events: &[xid::XidEvent]) -> Vec<XidSeen> {
    let mut out: Vec<XidSeen> = Vec::new();
    for e in events {
        match out.iter_mut().find(|s| {
            s.xid == e.xid && s.severity == e.severity && s.gpu_instance == e.gpu_instance
        }) {
            Some(s) => s.count += 1,
            None => out.push(XidSeen {
                xid: e.xid,
                severity: e.severity.clone(),
                gpu_instance: e.gpu_instance.clone(),
                critical: xid::classify(e) == xid::XidClass::Critical,
                count: 1,
            }),
        }
    }
    out
}

/// The whole node's report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeReport {
    /// Slurm node name.
    pub node: String,
    /// One report per GPU index the driver listed.
    pub gpus: Vec<GpuReport>,
    /// GPUs the driver reports.
    pub found: u32,
    /// GPUs Slurm expects (`Gres=gpu:N`), when known.
    pub expected: Option<u32>,
    /// The count check: fewer than expected fails.
    pub count: Check,
    /// The NVSwitch check: a fatal SXid in the kernel log fails
    /// ([`sxid`]); unsupported when the log could not be read, which costs
    /// no check (the GPUs' `xid` checks, read from the same log, are then
    /// unsupported too).
    pub nvswitch: Check,
    /// Every distinct SXid of the kernel log (the NVSwitches' errors).
    pub sxids: Vec<sxid::SxidSeen>,
    /// Worst of every GPU, the count and the NVSwitch check.
    pub verdict: Verdict,
    /// Why the node is unknown without any GPU (NVML failed to initialise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The `xid` check of a GPU's Xids: failed on a critical one, an error on
/// one of [`xid::SEVERITY_XIDS`] without a severity word, else ok.
fn xid_check(xids: &Probe<Vec<xid::XidEvent>>) -> Check {
    let events = match xids {
        Probe::Value(events) => events,
        p => return unread(p).expect("not a value"),
    };
    let of = |class: xid::XidClass| {
        let mut seen: Vec<&xid::XidEvent> = events
            .iter()
            .filter(|e| xid::classify(e) == class)
            .collect();
        seen.sort();
        seen.dedup();
        seen.iter().map(|e| e.words()).collect::<Vec<String>>()
    };
    let critical = of(xid::XidClass::Critical);
    let unknown = of(xid::XidClass::SeverityUnknown);
    if !critical.is_empty() {
        Check::Failed(format!("Xid {}", critical.join(",")))
    } else if !unknown.is_empty() {
        Check::Error(format!(
            "Xid {} without a severity word (Fatal or NonFatal): cannot tell whether it needs a reset",
            unknown.join(",")
        ))
    } else {
        Check::Ok
    }
}

fn judge(r: &GpuReading) -> Vec<(String, Check)> {
    let xid = xid_check(&r.xids);
    let ecc = match &r.ecc_uncorrected {
        Probe::Value(0) => Check::Ok,
        Probe::Value(n) => Check::Failed(format!("uncorrectable ECC x{n}")),
        p => unread(p).expect("not a value"),
    };
    let pages = match &r.retired_pages_pending {
        Probe::Value(false) => Check::Ok,
        Probe::Value(true) => Check::Failed("retired pages pending".into()),
        p => unread(p).expect("not a value"),
    };
    let remap = match &r.row_remap {
        Probe::Value(RowRemap { failure: true, .. }) => Check::Failed("row remap failure".into()),
        Probe::Value(RowRemap { pending: true, .. }) => {
            Check::ResetRequired("reset required (row remap pending)".into())
        }
        Probe::Value(_) => Check::Ok,
        p => unread(p).expect("not a value"),
    };
    let recovery = match &r.recovery_action {
        Probe::Value(RecoveryAction::None) => Check::Ok,
        Probe::Value(a @ (RecoveryAction::GpuReset | RecoveryAction::DrainAndReset)) => {
            Check::ResetRequired(format!("reset required (recovery action: {})", a.words()))
        }
        Probe::Value(a) => Check::Failed(format!("recovery action: {}", a.words())),
        p => unread(p).expect("not a value"),
    };
    let fabric = match &r.fabric {
        Probe::Value(f) => fabric::check(f),
        p => unread(p).expect("not a value"),
    };
    vec![
        ("present".into(), Check::Ok),
        ("xid".into(), xid),
        ("ecc".into(), ecc),
        ("retired_pages".into(), pages),
        ("row_remap".into(), remap),
        ("recovery_action".into(), recovery),
        ("fabric".into(), fabric),
    ]
}

fn gpu_report(index: u32, read: Result<GpuReading, GpuError>) -> GpuReport {
    let (checks, serial, uuid, bus, xids) = match read {
        Ok(r) => {
            let xids = match &r.xids {
                Probe::Value(events) => xids_seen(events),
                _ => Vec::new(),
            };
            (judge(&r), r.serial, r.uuid, r.pci_bus_id, xids)
        }
        Err(e) => {
            let (present, unreadable) = match &e {
                GpuError::Lost(_) => (Check::Failed("lost".into()), None),
                // The handle query failed (not NOT_SUPPORTED): an error,
                // unknown; but the kernel log still reaches it by its PCI
                // address when that is known (`unreadable`).
                GpuError::Unreadable(u) => (Check::Error(u.why.clone()), Some(u)),
            };
            let mut checks = vec![("present".to_string(), present)];
            for name in &GPU_CHECKS[1..] {
                let c = match unreadable {
                    Some(u) if *name == "xid" => xid_check(&u.xids),
                    _ => Check::Unsupported(format!("not read: {e}")),
                };
                checks.push((name.to_string(), c));
            }
            let (bus, xids) = match unreadable {
                Some(Unreadable {
                    pci_bus_id,
                    xids: Probe::Value(events),
                    ..
                }) => (pci_bus_id.clone(), xids_seen(events)),
                Some(u) => (u.pci_bus_id.clone(), Vec::new()),
                None => (None, Vec::new()),
            };
            (checks, None, None, bus, xids)
        }
    };
    GpuReport {
        index,
        serial,
        uuid,
        pci_bus_id: bus,
        xids,
        verdict: gpu_verdict(&checks),
        checks,
    }
}

/// A GPU's verdict: the worst check, except that an unsupported one of
/// [`OPTIONAL_CHECKS`] is no loss of a check.
fn gpu_verdict(checks: &[(String, Check)]) -> Verdict {
    Verdict::of(
        checks
            .iter()
            .filter(|(n, c)| {
                !(OPTIONAL_CHECKS.contains(&n.as_str()) && matches!(c, Check::Unsupported(_)))
            })
            .map(|(_, c)| c),
    )
}

/// Reads every GPU of `source` and judges the node. `expected` is the GPU
/// count Slurm expects (`Gres=gpu:N`), `None` when unknown (the count check
/// is then unsupported). Each GPU is read on its own: a GPU that cannot be
/// read does not stop the others.
pub fn check_node(node: &str, source: &mut dyn GpuSource, expected: Option<u32>) -> NodeReport {
    let (found, gpus, count_err) = match source.count() {
        Ok(n) => {
            let gpus: Vec<GpuReport> = (0..n).map(|i| gpu_report(i, source.read(i))).collect();
            (n, gpus, None)
        }
        Err(e) => (0, Vec::new(), Some(e)),
    };
    let count = match (expected, &count_err) {
        (_, Some(e)) => Check::Unsupported(format!("GPU count unreadable: {e}")),
        (None, None) => Check::Unsupported(
            "expected GPU count unknown (no Gres=gpu:N for the node; pass --expected-gpus)".into(),
        ),
        (Some(want), None) if found < want => {
            Check::Failed(format!("{found} of {want} GPUs visible"))
        }
        (Some(_), None) => Check::Ok,
    };
    let (nvswitch, sxids) = sxid::check(&source.sxids());
    let verdict = gpus
        .iter()
        .map(|g| g.verdict)
        .chain(std::iter::once(Verdict::of([&count])))
        .chain(std::iter::once(node_check_verdict(&nvswitch)))
        .max()
        .unwrap_or(Verdict::Healthy);
    NodeReport {
        node: node.to_string(),
        gpus,
        found,
        expected,
        count,
        nvswitch,
        sxids,
        verdict,
        note: count_err,
    }
}

/// The verdict of the node's `nvswitch` check: unsupported costs no check
/// (the kernel log could not be read, and the GPUs' `xid` checks say so
/// already; or a fixture records no `kernel_log`).
fn node_check_verdict(nvswitch: &Check) -> Verdict {
    match nvswitch {
        Check::Unsupported(_) => Verdict::Healthy,
        c => Verdict::of([c]),
    }
}

/// The `nvswitch` check of a node whose NVML did not start (no source was
/// read).
fn nvswitch_not_read() -> Check {
    Check::Unsupported("not read: NVML did not initialise".into())
}

/// The report of a node whose NVML did not initialise (`e`, a
/// [`SourceError::InitFailed`]): **failed** when the cause is one of
/// [`init_error_drains`] and Slurm gives the node GPUs (`expected` above
/// 0): the count check fails with the cause, so `--drain` drains the node;
/// else unknown (never drained), as [`unknown_node`].
pub fn init_failed_node(node: &str, expected: Option<u32>, e: &SourceError) -> NodeReport {
    let why = e.to_string();
    let fatal = match e {
        SourceError::InitFailed {
            code: Some(code), ..
        } => init_error_drains(code),
        _ => None,
    };
    match (fatal, expected) {
        (Some(cause), Some(want)) if want > 0 => NodeReport {
            node: node.to_string(),
            gpus: Vec::new(),
            found: 0,
            expected,
            count: Check::Failed(format!(
                "NVML init failed: {cause} (0 of {want} GPUs usable)"
            )),
            nvswitch: nvswitch_not_read(),
            sxids: Vec::new(),
            verdict: Verdict::Failed,
            note: Some(why),
        },
        _ => unknown_node(node, expected, &why),
    }
}

/// The report of a node whose NVML did not initialise: unknown (never
/// drained), with the reason.
pub fn unknown_node(node: &str, expected: Option<u32>, why: &str) -> NodeReport {
    NodeReport {
        node: node.to_string(),
        gpus: Vec::new(),
        found: 0,
        expected,
        count: Check::Unsupported(why.to_string()),
        nvswitch: nvswitch_not_read(),
        sxids: Vec::new(),
        verdict: Verdict::Unknown,
        note: Some(why.to_string()),
    }
}

#[cfg(test)]
mod tests;
