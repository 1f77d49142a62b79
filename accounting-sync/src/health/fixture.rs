//! A recorded GPU state (JSON) read instead of NVML: for tests, and for
//! replaying a captured incident. Format (docs/health.md):
//!
//! ```json
//! {
//!   "node": "gpu-a01",
//!   "expected_gpus": 8,
//!   "nvml": "ok",
//!   "gpus": [
//!     { "index": 0, "serial": "1652221028513", "uuid": "GPU-5a1c...",
//!       "pci_bus_id": "00000000:3B:00.0",
//!       "xids": [], "ecc_uncorrected": 0, "retired_pages_pending": false,
//!       "row_remap": { "pending": false, "failure": false } },
//!     { "index": 3, "lost": true }
//!   ]
//! }
//! ```
//!
//! - `node` (optional): the Slurm node name; `expected_gpus` (optional):
//!   what Slurm's `Gres=gpu:N` says; `nvml`: `"ok"` (default), `"absent"`
//!   (no libnvidia-ml) or `"init_failed"`; `count` (optional): GPUs the
//!   driver lists, default the highest listed index + 1, at most 1024;
//!   `kernel_log` (optional): the kernel log lines, read as the live check
//!   reads `/dev/kmsg` (each GPU's Xids are its lines, by `pci_bus_id`), or
//!   `"unsupported"`; `driver_gpus` (optional): the PCI addresses of
//!   `/proc/driver/nvidia/gpus/`, from which an `unreadable` GPU's address
//!   is found by elimination ([`super::unreadable`]).
//! - Per GPU: `index` (default: its position), `serial`, `uuid`,
//!   `pci_bus_id`; `lost: true` (fallen off the bus) or `unreadable:
//!   "why"` instead of readings (an unreadable GPU keeps its `pci_bus_id`
//!   and `xids`); the probes `xids` (list of Xid numbers or kernel lines),
//!   `ecc_uncorrected` (count), `retired_pages_pending` (bool), `row_remap`
//!   (`{pending, failure}`), `recovery_action` (`"none"`, `"gpu_reset"`,
//!   `"node_reboot"`, `"drain_p2p"`, `"drain_and_reset"`, or NVML's
//!   number), `fabric` (`{"state": "completed", "status": "SUCCESS"}`). A
//!   probe that is absent or `"unsupported"` is unsupported; a
//!   probe `{"error": "CODE"}` is the query failing with NVML_ERROR_CODE
//!   (`NOT_SUPPORTED`: unsupported; `GPU_IS_LOST`: the GPU is lost; any
//!   other, e.g. `UNKNOWN`: an error, never healthy). Unknown keys, duplicate indexes and an index at or above
//!   `count` are refused.

use std::path::Path;

use serde_json::Value;

use super::fabric::{Fabric, FabricState};
use super::xid::{self, PciKey, XidEvent};
use super::{
    probe_from, GpuError, GpuReading, GpuSource, Probe, QueryError, RecoveryAction, RowRemap,
    SourceError, Unreadable,
};
use super::{sxid, unreadable};

/// What the fixture says about NVML itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FixtureNvml {
    /// NVML works.
    Ok,
    /// No libnvidia-ml on the node.
    Absent,
    /// NVML fails to initialise with NVML_ERROR_`CODE` (`"init_failed"`:
    /// `DRIVER_NOT_LOADED`).
    InitFailed(String),
}

#[derive(Debug, Clone)]
enum Slot {
    Read(Box<GpuReading>),
    Err(GpuError),
}

/// A GPU source read from a fixture file.
#[derive(Debug, Clone)]
pub struct FixtureSource {
    /// `node` of the fixture.
    pub node: Option<String>,
    /// `expected_gpus` of the fixture.
    pub expected_gpus: Option<u32>,
    /// `nvml` of the fixture.
    pub nvml: FixtureNvml,
    count: u32,
    slots: Vec<(u32, Slot)>,
    /// `kernel_log` of the fixture: its text, or why it is unreadable.
    kernel: Option<Result<String, String>>,
}

/// A fixture that does not follow the format: the field and what to write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("fixture {field}: {problem}")]
pub struct FixtureError {
    /// JSON path of the offending field, e.g. `gpus[2].ecc_uncorrected`.
    pub field: String,
    /// What is wrong and what to write instead.
    pub problem: String,
}

fn bad(field: &str, problem: impl Into<String>) -> FixtureError {
    FixtureError {
        field: field.to_string(),
        problem: problem.into(),
    }
}

const UNSUPPORTED: &str = "unsupported (fixture)";

/// A probe of the fixture: its value, unsupported, or the NVML error a
/// query failed with (`{"error": "UNKNOWN"}`), as NVML's would be read.
fn probe<T>(
    v: Option<&Value>,
    field: &str,
    what: &str,
    get: impl Fn(&Value) -> Option<T>,
) -> Result<Result<Probe<T>, GpuError>, FixtureError> {
    match v {
        None | Some(Value::Null) => Ok(Ok(Probe::Unsupported(UNSUPPORTED.into()))),
        Some(Value::String(s)) if s == "unsupported" => {
            Ok(Ok(Probe::Unsupported(UNSUPPORTED.into())))
        }
        Some(Value::Object(o)) if o.contains_key("error") => {
            let code = match (o.len(), o.get("error")) {
                (1, Some(Value::String(c))) if !c.is_empty() => c.as_str(),
                _ => {
                    return Err(bad(
                        field,
                        "an error is {\"error\": \"CODE\"} alone, CODE as in NVML_ERROR_CODE (UNKNOWN, NOT_SUPPORTED, GPU_IS_LOST)",
                    ))
                }
            };
            let why = format!("NVML_ERROR_{code} (fixture)");
            Ok(probe_from(Err(match code {
                "NOT_SUPPORTED" => QueryError::NotSupported(why),
                "GPU_IS_LOST" => QueryError::GpuLost(why),
                _ => QueryError::Other(why),
            })))
        }
        Some(v) => get(v).map(|v| Ok(Probe::Value(v))).ok_or_else(|| {
            bad(
                field,
                format!("expected {what}, \"unsupported\" or {{\"error\": \"CODE\"}} (found {v})"),
            )
        }),
    }
}

/// One Xid of a fixture's `xids`: a number (no severity word), or a
/// kernel log line (`NVRM: Xid (PCI:0000:3b:00): 145, ... Fatal ...`) or
/// its text after the colon (`145, RLW_REMAP Fatal XC0 i0 Link 23`), read
/// as the live check reads `/dev/kmsg`.
fn fixture_xid(v: &Value) -> Option<XidEvent> {
    match v {
        Value::String(s) if s.contains("NVRM: Xid (") => xid::parse_xid_line(s).map(|(_, x)| x),
        Value::String(s) => xid::parse_xid_text(s),
        v => v.as_u64().map(XidEvent::code),
    }
}

/// A fixture's `fabric`: `{"state": "completed", "status": "SUCCESS"}`;
/// the state by name or NVML's number, the status `SUCCESS` (the default)
/// or the NVML error CODE the registration ended with.
fn fixture_fabric(v: &Value) -> Option<Fabric> {
    let o = v.as_object()?;
    let state = match o.get("state")? {
        Value::String(s) => FabricState::from_name(s)?,
        v => FabricState::from_value(u8::try_from(v.as_u64()?).ok()?),
    };
    let error = match o.get("status") {
        None => None,
        Some(Value::String(s)) if s == "SUCCESS" => None,
        Some(Value::String(s)) if !s.is_empty() => Some(format!("NVML_ERROR_{s}")),
        Some(_) => return None,
    };
    Some(Fabric { state, error })
}

/// The NVML errors `nvmlInit` may answer, as a fixture's `"nvml":
/// {"error": "CODE"}` names them (a misspelled code is refused: it would
/// hide a mismatch as a passing "unknown").
const INIT_CODES: &[&str] = &[
    "LIB_RM_VERSION_MISMATCH",
    "DRIVER_NOT_LOADED",
    "NO_PERMISSION",
    "GPU_IS_LOST",
    "UNKNOWN",
];

/// The most GPUs a fixture may declare (`count`).
pub const MAX_GPUS: u32 = 1024;

fn opt_str(
    o: &serde_json::Map<String, Value>,
    key: &str,
    field: &str,
) -> Result<Option<String>, FixtureError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(bad(field, format!("expected a string (found {v})"))),
    }
}

fn opt_u32(v: Option<&Value>, field: &str) -> Result<Option<u32>, FixtureError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| bad(field, format!("expected a whole number >= 0 (found {v})"))),
    }
}

/// Keys a fixture may hold: top level, per GPU, and in `row_remap`.
const TOP_KEYS: &[&str] = &[
    "node",
    "expected_gpus",
    "nvml",
    "count",
    "gpus",
    "kernel_log",
    "driver_gpus",
];
const GPU_KEYS: &[&str] = &[
    "index",
    "serial",
    "uuid",
    "pci_bus_id",
    "lost",
    "unreadable",
    "xids",
    "ecc_uncorrected",
    "retired_pages_pending",
    "row_remap",
    "recovery_action",
    "fabric",
];
const ROW_REMAP_KEYS: &[&str] = &["pending", "failure"];
const FABRIC_KEYS: &[&str] = &["state", "status"];

/// A misspelled key (`"xid"` for `"xids"`) would silently turn a probe
/// into "unsupported" and hide a fault: every key must be a known one.
fn known_keys(
    o: &serde_json::Map<String, Value>,
    allowed: &[&str],
    at: &str,
) -> Result<(), FixtureError> {
    match o.keys().find(|k| !allowed.contains(&k.as_str())) {
        None => Ok(()),
        Some(k) => Err(bad(
            &format!("{at}{k}"),
            format!("unknown field; the fields here are {}", allowed.join(", ")),
        )),
    }
}

/// Every Xid of the fixture's `kernel_log`, or why the log is unreadable
/// (`"unsupported"`); `None` without a `kernel_log`.
type LogXids = Option<Result<Vec<(PciKey, XidEvent)>, String>>;

/// The fixture's `kernel_log`: the kernel log lines as `/dev/kmsg` has them
/// (read as the live check reads them), or `"unsupported"` (the log could
/// not be read). `None` when absent.
fn kernel_log(v: Option<&Value>) -> Result<Option<Result<String, String>>, FixtureError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s == "unsupported" => {
            Ok(Some(Err("kernel log unreadable (fixture)".into())))
        }
        Some(Value::Array(lines)) => {
            let mut text = String::new();
            for (i, l) in lines.iter().enumerate() {
                let Some(l) = l.as_str() else {
                    return Err(bad(
                        &format!("kernel_log[{i}]"),
                        format!("expected a kernel log line as a string (found {l})"),
                    ));
                };
                text.push_str(l);
                text.push('\n');
            }
            Ok(Some(Ok(text)))
        }
        Some(v) => Err(bad(
            "kernel_log",
            format!("expected a list of kernel log lines, or \"unsupported\" (found {v})"),
        )),
    }
}

/// The fixture's `driver_gpus`: the PCI addresses of the kernel module's
/// GPUs, as the directories of /proc/driver/nvidia/gpus/ name them.
fn driver_gpus(v: Option<&Value>) -> Result<Option<Vec<PciKey>>, FixtureError> {
    let list = match v {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(a)) => a,
        Some(v) => {
            return Err(bad(
                "driver_gpus",
                format!("expected a list of PCI addresses such as [\"0000:3b:00.0\"] (found {v})"),
            ))
        }
    };
    let mut out = Vec::with_capacity(list.len());
    for (i, a) in list.iter().enumerate() {
        match a.as_str().and_then(xid::pci_key) {
            Some(k) => out.push(k),
            None => {
                return Err(bad(
                    &format!("driver_gpus[{i}]"),
                    format!("expected a PCI address such as \"0000:3b:00.0\" (found {a})"),
                ))
            }
        }
    }
    Ok(Some(out))
}

/// A GPU's `pci_bus_id` as an address, for matching kernel log lines:
/// required to parse when the fixture has a `kernel_log`.
fn pci_of(
    g: &serde_json::Map<String, Value>,
    field: &str,
    log: &LogXids,
) -> Result<Option<PciKey>, FixtureError> {
    let Some(id) = opt_str(g, "pci_bus_id", field)? else {
        return Ok(None);
    };
    match (xid::pci_key(&id), log) {
        (Some(k), _) => Ok(Some(k)),
        (None, None) => Ok(None),
        (None, Some(_)) => Err(bad(
            field,
            format!("expected a PCI bus id such as \"00000000:3B:00.0\" to match the kernel_log's lines (found {id:?})"),
        )),
    }
}

/// With a `kernel_log`, a GPU's Xids are its lines there, matched by PCI
/// address as the live check matches them: its own `xids` is refused (two
/// sources of one thing).
fn xids_from_log(
    g: &serde_json::Map<String, Value>,
    field: &str,
    key: Option<PciKey>,
    log: &Result<Vec<(PciKey, XidEvent)>, String>,
) -> Result<Probe<Vec<XidEvent>>, FixtureError> {
    if g.contains_key("xids") {
        return Err(bad(
            field,
            "this fixture has a kernel_log: a GPU's Xids are its lines there, matched by pci_bus_id as the live check matches them; leave xids out",
        ));
    }
    Ok(match (log, key) {
        (Err(why), _) => Probe::Unsupported(why.clone()),
        (Ok(_), None) => {
            Probe::Unsupported("PCI bus id unreadable: Xids cannot be matched to this GPU".into())
        }
        (Ok(all), Some(k)) => Probe::Value(xid::xids_at(all, k)),
    })
}

impl FixtureSource {
    /// Reads and checks a fixture file.
    ///
    /// # Errors
    /// The file cannot be read, is not JSON, or a field does not follow the
    /// format ([`FixtureError`] names it).
    pub fn load(path: &Path) -> anyhow::Result<FixtureSource> {
        use anyhow::Context;
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the fixture {}", path.display()))?;
        FixtureSource::parse(&text).with_context(|| format!("fixture {}", path.display()))
    }

    /// Parses fixture JSON text.
    ///
    /// # Errors
    /// Not JSON, or a field that does not follow the format.
    pub fn parse(text: &str) -> Result<FixtureSource, FixtureError> {
        let root: Value =
            serde_json::from_str(text).map_err(|e| bad("(file)", format!("not JSON: {e}")))?;
        let Some(o) = root.as_object() else {
            return Err(bad("(file)", "expected an object with a \"gpus\" list"));
        };
        known_keys(o, TOP_KEYS, "")?;
        let nvml = match o.get("nvml") {
            None | Some(Value::Null) => FixtureNvml::Ok,
            Some(Value::String(s)) if s == "ok" => FixtureNvml::Ok,
            Some(Value::String(s)) if s == "absent" => FixtureNvml::Absent,
            Some(Value::String(s)) if s == "init_failed" => {
                FixtureNvml::InitFailed("DRIVER_NOT_LOADED".into())
            }
            Some(Value::Object(e))
                if e.len() == 1
                    && e.get("error")
                        .and_then(Value::as_str)
                        .is_some_and(|c| INIT_CODES.contains(&c)) =>
            {
                FixtureNvml::InitFailed(e["error"].as_str().unwrap_or_default().to_string())
            }
            Some(other) => {
                return Err(bad(
                    "nvml",
                    format!(
                        "expected \"ok\", \"absent\", \"init_failed\" or {{\"error\": \"CODE\"}} with CODE one of {} (found {other})",
                        INIT_CODES.join(", ")
                    ),
                ))
            }
        };
        let kernel = kernel_log(o.get("kernel_log"))?;
        let log: LogXids = kernel
            .as_ref()
            .map(|k| k.as_ref().map(|t| xid::xids_in(t)).map_err(Clone::clone));
        let driver = driver_gpus(o.get("driver_gpus"))?;
        let gpus = match o.get("gpus") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a.clone(),
            Some(v) => return Err(bad("gpus", format!("expected a list of GPUs (found {v})"))),
        };
        let mut slots = Vec::with_capacity(gpus.len());
        for (pos, g) in gpus.iter().enumerate() {
            let f = |k: &str| format!("gpus[{pos}].{k}");
            let Some(g) = g.as_object() else {
                return Err(bad(&format!("gpus[{pos}]"), "expected an object"));
            };
            known_keys(g, GPU_KEYS, &format!("gpus[{pos}]."))?;
            for (key, keys) in [("row_remap", ROW_REMAP_KEYS), ("fabric", FABRIC_KEYS)] {
                if let Some(Value::Object(r)) = g.get(key) {
                    if !r.contains_key("error") {
                        known_keys(r, keys, &f(&format!("{key}.")))?;
                    }
                }
            }
            let index = opt_u32(g.get("index"), &f("index"))?.unwrap_or(pos as u32);
            if index >= MAX_GPUS {
                return Err(bad(
                    &f("index"),
                    format!(
                        "at most {MAX_GPUS} GPUs per node: an index from 0 to {} (found {index})",
                        MAX_GPUS - 1
                    ),
                ));
            }
            if let Some(other) = slots.iter().position(|(i, _)| *i == index) {
                return Err(bad(
                    &f("index"),
                    format!("index {index} is also gpus[{other}]; each GPU once"),
                ));
            }
            if g.get("lost").and_then(Value::as_bool) == Some(true) {
                slots.push((
                    index,
                    Slot::Err(GpuError::Lost(
                        "GPU has fallen off the bus (fixture)".into(),
                    )),
                ));
                continue;
            }
            let pci = pci_of(g, &f("pci_bus_id"), &log)?;
            let xids = match &log {
                Some(log) => Ok(xids_from_log(g, &f("xids"), pci, log)?),
                None => probe(
                    g.get("xids"),
                    &f("xids"),
                    "a list of Xids such as [79] or [\"145, RLW_REMAP Fatal XC0 i0 Link 23\"] (a number, or the kernel line or its text after `NVRM: Xid (PCI:...): `; an NVSwitch SXid line goes in the top-level kernel_log)",
                    |v| v.as_array()?.iter().map(fixture_xid).collect(),
                )?,
            };
            if let Some(why) = opt_str(g, "unreadable", &f("unreadable"))? {
                // The handle cannot be read, but its PCI address may be
                // recorded (or found by elimination below), and its Xids
                // are read at that address.
                let recorded = opt_str(g, "pci_bus_id", &f("pci_bus_id"))?;
                let slot = match (xids, &log) {
                    (Err(lost), _) => lost,
                    (Ok(_), Some(log)) => GpuError::Unreadable(unreadable::at(why, pci, log)),
                    (Ok(xids), None) => {
                        let mut u = Unreadable::new(why);
                        u.pci_bus_id = recorded;
                        if g.contains_key("xids") {
                            u.xids = xids;
                        }
                        GpuError::Unreadable(u)
                    }
                };
                slots.push((index, Slot::Err(slot)));
                continue;
            }
            let ecc = probe(
                g.get("ecc_uncorrected"),
                &f("ecc_uncorrected"),
                "a count such as 0",
                Value::as_u64,
            )?;
            let pages = probe(
                g.get("retired_pages_pending"),
                &f("retired_pages_pending"),
                "true or false",
                Value::as_bool,
            )?;
            let remap = probe(
                g.get("row_remap"),
                &f("row_remap"),
                "{\"pending\": false, \"failure\": false}",
                |v| {
                    let o = v.as_object()?;
                    Some(RowRemap {
                        pending: o.get("pending").map_or(Some(false), Value::as_bool)?,
                        failure: o.get("failure").map_or(Some(false), Value::as_bool)?,
                    })
                },
            )?;
            let recovery = probe(
                g.get("recovery_action"),
                &f("recovery_action"),
                "\"none\", \"gpu_reset\", \"node_reboot\", \"drain_p2p\", \"drain_and_reset\" or NVML's number",
                |v| match v {
                    Value::String(s) => RecoveryAction::from_name(s),
                    v => v.as_u64().map(RecoveryAction::from_value),
                },
            )?;
            let fabric = probe(
                g.get("fabric"),
                &f("fabric"),
                "{\"state\": \"completed\"} (state not_supported, not_started, in_progress or completed, or NVML's number 0-3; \"status\": \"SUCCESS\" or an NVML error CODE, for a completed state)",
                fixture_fabric,
            )?;
            // GPU_IS_LOST from any query: the GPU is lost, as NVML's source says.
            let reading = (|| {
                Ok::<_, GpuError>(GpuReading {
                    index,
                    serial: None,
                    uuid: None,
                    pci_bus_id: None,
                    xids: xids?,
                    ecc_uncorrected: ecc?,
                    retired_pages_pending: pages?,
                    row_remap: remap?,
                    recovery_action: recovery?,
                    fabric: fabric?,
                })
            })();
            let mut reading = match reading {
                Ok(r) => r,
                Err(e) => {
                    slots.push((index, Slot::Err(e)));
                    continue;
                }
            };
            reading.serial = opt_str(g, "serial", &f("serial"))?;
            reading.uuid = opt_str(g, "uuid", &f("uuid"))?;
            reading.pci_bus_id = opt_str(g, "pci_bus_id", &f("pci_bus_id"))?;
            slots.push((index, Slot::Read(Box::new(reading))));
        }
        // Every listed GPU is one the driver lists: the count covers the
        // highest index (a lost gpu5 in a two-entry list is still gpu5).
        let listed = slots.iter().map(|(i, _)| i + 1).max().unwrap_or(0);
        let count = opt_u32(o.get("count"), "count")?.unwrap_or(listed);
        if count < listed {
            return Err(bad(
                "count",
                format!(
                    "{count} GPUs, but gpus lists index {}; count must be above every index (or leave it out)",
                    listed - 1
                ),
            ));
        }
        // `allot health` reads every GPU 0..count: an absurd count would loop
        // and allocate for minutes (found by fuzzing). No node has more.
        if count > MAX_GPUS {
            return Err(bad(
                "count",
                format!("at most {MAX_GPUS} GPUs per node (found {count})"),
            ));
        }
        if let Some(driver) = &driver {
            find_unreadable_addresses(&mut slots, count, driver, &log);
        }
        Ok(FixtureSource {
            node: opt_str(o, "node", "node")?,
            expected_gpus: opt_u32(o.get("expected_gpus"), "expected_gpus")?,
            nvml,
            count,
            slots,
            kernel,
        })
    }

    /// What opening NVML would have answered.
    ///
    /// # Errors
    /// [`SourceError`] for a fixture with `"nvml": "absent"` or
    /// `"init_failed"`.
    pub fn nvml_status(&self) -> Result<(), SourceError> {
        match &self.nvml {
            FixtureNvml::Ok => Ok(()),
            FixtureNvml::Absent => Err(SourceError::Absent(
                "libnvidia-ml.so.1: cannot open shared object file (fixture)".into(),
            )),
            FixtureNvml::InitFailed(code) => Err(SourceError::InitFailed {
                attempts: 1,
                reason: match code.as_str() {
                    "DRIVER_NOT_LOADED" => "driver not loaded (fixture)".into(),
                    "LIB_RM_VERSION_MISMATCH" => {
                        "RM detects a driver/library version mismatch (fixture)".into()
                    }
                    c => format!("NVML_ERROR_{c} (fixture)"),
                },
                code: Some(code.clone()),
            }),
        }
    }
}

/// The PCI address of each unreadable GPU that records none, by
/// elimination over the fixture's `driver_gpus` as the live source does
/// ([`unreadable::by_elimination`]); with a `kernel_log`, its Xids at that
/// address.
fn find_unreadable_addresses(
    slots: &mut [(u32, Slot)],
    count: u32,
    driver: &[PciKey],
    log: &LogXids,
) {
    let address = |s: &Slot| match s {
        Slot::Read(r) => r.pci_bus_id.as_deref().and_then(xid::pci_key),
        Slot::Err(GpuError::Unreadable(u)) => u.pci_bus_id.as_deref().and_then(xid::pci_key),
        Slot::Err(GpuError::Lost(_)) => None,
    };
    let known: Vec<Option<PciKey>> = (0..count)
        .map(|i| {
            slots
                .iter()
                .find(|(j, _)| *j == i)
                .and_then(|(_, s)| address(s))
        })
        .collect();
    let found = unreadable::by_elimination(&known, driver);
    for (i, slot) in slots.iter_mut() {
        let (Slot::Err(GpuError::Unreadable(u)), Some(Some(k))) = (slot, found.get(*i as usize))
        else {
            continue;
        };
        if u.pci_bus_id.is_some() {
            continue;
        }
        if let Some(log) = log {
            *u = unreadable::at(std::mem::take(&mut u.why), Some(*k), log);
        } else {
            u.pci_bus_id = Some(xid::pci_bus_id(*k));
        }
    }
}

impl GpuSource for FixtureSource {
    fn count(&mut self) -> Result<u32, String> {
        Ok(self.count)
    }

    fn sxids(&mut self) -> Probe<Vec<sxid::SxidEvent>> {
        match &self.kernel {
            None => Probe::Unsupported(
                "no kernel_log in the fixture: NVSwitch SXids not recorded".into(),
            ),
            Some(Err(why)) => Probe::Unsupported(why.clone()),
            Some(Ok(log)) => Probe::Value(sxid::sxids_in(log)),
        }
    }

    fn read(&mut self, index: u32) -> Result<GpuReading, GpuError> {
        match self.slots.iter().find(|(i, _)| *i == index) {
            Some((_, Slot::Read(r))) => Ok((**r).clone()),
            Some((_, Slot::Err(e))) => Err(e.clone()),
            None => Err(GpuError::Unreadable(Unreadable::new(format!(
                "no GPU with index {index} in the fixture"
            )))),
        }
    }
}
