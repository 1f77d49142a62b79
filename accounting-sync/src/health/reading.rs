//! What one GPU gives when it is read (each quantity, or why it could not
//! be read) and why a GPU or a whole node could not be read: the input of
//! the checks in [`super`].

use serde::Serialize;

use super::fabric::Fabric;
use super::xid;

/// One quantity read from a GPU, or why it could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Probe<T> {
    /// The value.
    Value(T),
    /// Not supported by this GPU or driver (NVML's NOT_SUPPORTED; the reason).
    Unsupported(String),
    /// The query failed with another error (UNKNOWN, ...): never healthy.
    Error(String),
}

/// Why one NVML query gave no value, as the checks tell errors apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryError {
    /// NVML_ERROR_NOT_SUPPORTED: this GPU or driver has no such value.
    NotSupported(String),
    /// NVML_ERROR_GPU_IS_LOST: the GPU has fallen off the bus.
    GpuLost(String),
    /// Any other error (UNKNOWN, TIMEOUT, ...): the value is not known.
    Other(String),
}

/// A query's result as a probe: not supported is unsupported, a lost GPU
/// is the whole GPU lost, any other error is [`Probe::Error`].
///
/// # Errors
/// [`GpuError::Lost`] for GPU_IS_LOST.
pub fn probe_from<T>(r: Result<T, QueryError>) -> Result<Probe<T>, GpuError> {
    match r {
        Ok(v) => Ok(Probe::Value(v)),
        Err(QueryError::NotSupported(why)) => Ok(Probe::Unsupported(why)),
        Err(QueryError::GpuLost(why)) => Err(GpuError::Lost(why)),
        Err(QueryError::Other(why)) => Ok(Probe::Error(why)),
    }
}

/// The driver's recommended recovery action for a GPU
/// (`NVML_FI_DEV_GET_GPU_RECOVERY_ACTION`, R570 and newer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RecoveryAction {
    /// 0: nothing to do.
    None,
    /// 1: reset the GPU.
    GpuReset,
    /// 2: reboot the node.
    NodeReboot,
    /// 3: drain peer-to-peer traffic.
    DrainP2p,
    /// 4: drain the GPU, then reset it.
    DrainAndReset,
    /// A value this allot does not know.
    Other(u64),
}

impl RecoveryAction {
    /// From NVML's numeric value.
    pub fn from_value(v: u64) -> RecoveryAction {
        match v {
            0 => RecoveryAction::None,
            1 => RecoveryAction::GpuReset,
            2 => RecoveryAction::NodeReboot,
            3 => RecoveryAction::DrainP2p,
            4 => RecoveryAction::DrainAndReset,
            n => RecoveryAction::Other(n),
        }
    }

    /// From the fixture's name (`none`, `gpu_reset`, `node_reboot`,
    /// `drain_p2p`, `drain_and_reset`).
    pub fn from_name(name: &str) -> Option<RecoveryAction> {
        Some(match name {
            "none" => RecoveryAction::None,
            "gpu_reset" => RecoveryAction::GpuReset,
            "node_reboot" => RecoveryAction::NodeReboot,
            "drain_p2p" => RecoveryAction::DrainP2p,
            "drain_and_reset" => RecoveryAction::DrainAndReset,
            _ => return None,
        })
    }

    /// As written in a drain reason.
    pub fn words(self) -> String {
        match self {
            RecoveryAction::None => "none".into(),
            RecoveryAction::GpuReset => "GPU reset".into(),
            RecoveryAction::NodeReboot => "node reboot".into(),
            RecoveryAction::DrainP2p => "drain P2P".into(),
            RecoveryAction::DrainAndReset => "drain and reset".into(),
            RecoveryAction::Other(n) => format!("code {n}"),
        }
    }
}

/// Row remapper state (Ampere and newer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct RowRemap {
    /// A remapping is pending (applied at the next GPU reset).
    pub pending: bool,
    /// A remapping failed at some point: the GPU needs service.
    pub failure: bool,
}

/// Everything read from one GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuReading {
    /// NVML index (the `N` of `gpuN` in drain reasons).
    pub index: u32,
    /// Board serial number, when readable.
    pub serial: Option<String>,
    /// GPU UUID, when readable.
    pub uuid: Option<String>,
    /// PCI bus id (`00000000:3B:00.0`), when readable.
    pub pci_bus_id: Option<String>,
    /// Xids the driver reported for this GPU since boot, with their
    /// lines' severity words (any Xid; the check fails on the critical
    /// ones, [`xid::classify`]).
    pub xids: Probe<Vec<xid::XidEvent>>,
    /// Uncorrectable (double-bit) ECC errors since the driver loaded
    /// (NVML's volatile counter), count.
    pub ecc_uncorrected: Probe<u64>,
    /// Pages waiting to be retired at the next reset.
    pub retired_pages_pending: Probe<bool>,
    /// Row remapper state.
    pub row_remap: Probe<RowRemap>,
    /// The driver's recommended recovery action.
    pub recovery_action: Probe<RecoveryAction>,
    /// The GPU's registration with the NVLink fabric (NVSwitch nodes).
    pub fabric: Probe<Fabric>,
}

impl GpuReading {
    /// A reading with only the index set and every probe unsupported
    /// (`why`): the starting point of a source.
    pub fn unsupported(index: u32, why: &str) -> GpuReading {
        GpuReading {
            index,
            serial: None,
            uuid: None,
            pci_bus_id: None,
            xids: Probe::Unsupported(why.into()),
            ecc_uncorrected: Probe::Unsupported(why.into()),
            retired_pages_pending: Probe::Unsupported(why.into()),
            row_remap: Probe::Unsupported(why.into()),
            recovery_action: Probe::Unsupported(why.into()),
            fabric: Probe::Unsupported(why.into()),
        }
    }
}

/// Why one GPU could not be read at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GpuError {
    /// The GPU is lost (NVML `GPU_IS_LOST`: fallen off the bus).
    #[error("lost: {0}")]
    Lost(String),
    /// Another error reading the GPU's handle ("Unknown Error").
    #[error("unreadable: {}", .0.why)]
    Unreadable(Unreadable),
}

/// A GPU whose handle NVML cannot open, for an error other than
/// GPU_IS_LOST: what is still known of it without the handle
/// ([`super::unreadable`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    /// NVML's error on the handle, as written in the report.
    pub why: String,
    /// Its PCI bus id (`00000000:3B:00.0`), when known without the handle
    /// (by elimination over the driver's GPUs, or recorded in a fixture).
    pub pci_bus_id: Option<String>,
    /// The kernel log's Xids at that PCI bus id; unsupported when the PCI
    /// bus id or the log is unknown.
    pub xids: Probe<Vec<xid::XidEvent>>,
}

impl Unreadable {
    /// Nothing known but NVML's error (`why`).
    pub fn new(why: impl Into<String>) -> Unreadable {
        Unreadable {
            why: why.into(),
            pci_bus_id: None,
            xids: Probe::Unsupported("not read: the GPU's handle cannot be read".into()),
        }
    }
}

/// Why no GPU could be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// No NVML library on this machine (not a GPU node): not an error.
    #[error("NVML is not available ({0}); no NVIDIA driver on this node, nothing to check")]
    Absent(String),
    /// NVML is installed but did not initialise (after retries).
    #[error("NVML failed to initialise after {attempts} attempts: {reason}")]
    InitFailed {
        /// Attempts made.
        attempts: u32,
        /// The last error.
        reason: String,
        /// The last error as NVML names it (`LIB_RM_VERSION_MISMATCH` for
        /// NVML_ERROR_LIB_RM_VERSION_MISMATCH), when known.
        code: Option<String>,
    },
}

/// The NVML initialisation errors that leave a GPU node unusable until an
/// admin acts (every GPU job sent to it fails), as written in a drain
/// reason; `None` for the others (a driver still loading, ...: unknown,
/// never drained). NVML_ERROR_LIB_RM_VERSION_MISMATCH: the driver package
/// was upgraded but the old kernel module is still loaded ("Driver/library
/// version mismatch"); it lasts until the module is reloaded or the node
/// rebooted.
pub fn init_error_drains(code: &str) -> Option<&'static str> {
    match code {
        "LIB_RM_VERSION_MISMATCH" => Some("driver/library version mismatch"),
        _ => None,
    }
}
