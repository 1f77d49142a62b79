//! The NVML GPU source: `libnvidia-ml.so.1` loaded at run time (through
//! `nvml-wrapper`; nothing is linked, so `allot` runs on nodes without a
//! driver and says so), plus the kernel log for Xids ([`super::xid`]).

use std::time::Duration;

use nvml_wrapper::enum_wrappers::device::{EccCounter, MemoryError};
use nvml_wrapper::enums::device::SampleValue;
use nvml_wrapper::error::{nvml_try, NvmlError};
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::sys_exports::field_id::{
    NVML_FI_DEV_GET_GPU_RECOVERY_ACTION, NVML_FI_DEV_REMAPPED_FAILURE, NVML_FI_DEV_REMAPPED_PENDING,
};
use nvml_wrapper::Nvml;
use nvml_wrapper_sys::bindings::{
    nvmlGpuFabricInfo_t, nvmlGpuFabricInfo_v2_t, nvmlGpuFabricInfo_v3_t,
    nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH,
};

use super::fabric::{Fabric, FabricState};

use super::{
    probe_from, GpuError, GpuReading, GpuSource, Probe, QueryError, RecoveryAction, RowRemap,
    SourceError, Unreadable,
};
use super::{sxid, unreadable, xid};

/// Reads GPUs through NVML.
pub struct NvmlSource {
    nvml: Nvml,
    /// Xids of the kernel log since boot, or why it could not be read.
    xids: Result<Vec<(xid::PciKey, xid::XidEvent)>, String>,
    /// SXids (the NVSwitches' errors) of the same log.
    sxids: Result<Vec<sxid::SxidEvent>, String>,
    /// Every GPU index's PCI address, those NVML cannot open found by
    /// elimination ([`unreadable`]); read once, when a GPU first cannot
    /// be opened.
    addresses: Option<Vec<Option<xid::PciKey>>>,
}

impl std::fmt::Debug for NvmlSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvmlSource").finish_non_exhaustive()
    }
}

/// True when the error means "no NVML library here" (not a GPU node).
fn is_absent(e: &NvmlError) -> bool {
    matches!(
        e,
        NvmlError::LibloadingError(_)
            | NvmlError::LibraryNotFound
            | NvmlError::FailedToLoadSymbol(_)
    )
}

impl NvmlSource {
    /// Loads `libnvidia-ml.so.1` and initialises NVML. Initialisation
    /// errors other than a missing library are retried `attempts` times
    /// with a doubling pause starting at `backoff` (0.5 s, 1 s, 2 s for the
    /// defaults), then reported as [`SourceError::InitFailed`].
    ///
    /// # Errors
    /// [`SourceError::Absent`] when the library is not installed;
    /// [`SourceError::InitFailed`] after the retries.
    pub fn open(attempts: u32, backoff: Duration) -> Result<NvmlSource, SourceError> {
        let attempts = attempts.max(1);
        let mut pause = backoff;
        let mut last = String::new();
        let mut code = None;
        for attempt in 1..=attempts {
            match Nvml::init() {
                Ok(nvml) => {
                    let log = xid::read_kmsg();
                    return Ok(NvmlSource {
                        nvml,
                        xids: log.as_ref().map(|l| xid::xids_in(l)).map_err(Clone::clone),
                        sxids: log.map(|l| sxid::sxids_in(&l)),
                        addresses: None,
                    });
                }
                Err(e) if is_absent(&e) => return Err(SourceError::Absent(e.to_string())),
                Err(e) => {
                    last = e.to_string();
                    code = init_code(&e).map(String::from);
                    tracing::warn!(attempt, attempts, "NVML failed to initialise: {e}");
                    if attempt < attempts {
                        std::thread::sleep(pause);
                        pause *= 2;
                    }
                }
            }
        }
        Err(SourceError::InitFailed {
            attempts,
            reason: last,
            code,
        })
    }
}

/// NVML's name of an initialisation error (NVML_ERROR_*), for
/// [`super::init_error_drains`]; `None` for one allot does not name.
fn init_code(e: &NvmlError) -> Option<&'static str> {
    Some(match e {
        NvmlError::LibRmVersionMismatch => "LIB_RM_VERSION_MISMATCH",
        NvmlError::DriverNotLoaded => "DRIVER_NOT_LOADED",
        NvmlError::NoPermission => "NO_PERMISSION",
        NvmlError::GpuLost => "GPU_IS_LOST",
        NvmlError::Unknown => "UNKNOWN",
        _ => return None,
    })
}

/// `NVML_STRUCT_VERSION(GpuFabricInfo, N)`: the version field of the
/// struct `nvmlDeviceGetGpuFabricInfoV` fills (the size of version N of
/// it, and N in the top byte).
const FABRIC_INFO_V3: u32 = std::mem::size_of::<nvmlGpuFabricInfo_v3_t>() as u32 | (3 << 24);
const FABRIC_INFO_V2: u32 = std::mem::size_of::<nvmlGpuFabricInfo_v2_t>() as u32 | (2 << 24);

/// The GPU's registration with the NVLink fabric
/// (`nvmlDeviceGetGpuFabricInfoV`, version 3 of its struct, else version 2
/// for a driver that answers ARGUMENT_VERSION_MISMATCH; else the older
/// `nvmlDeviceGetGpuFabricInfo`; [`super::fabric`]). nvml-wrapper has no
/// safe method for it: the call is made through the library it loaded, on
/// a struct of plain integers the driver fills. A driver without either
/// call has no fabric to report: not supported.
fn fabric(nvml: &Nvml, dev: &nvml_wrapper::Device<'_>) -> Result<Fabric, QueryError> {
    let lib = nvml.lib();
    // SAFETY: the handle of `dev`, which borrows `nvml`: valid while both live.
    let handle = unsafe { dev.handle() };
    let (rc, state, status) = if let Ok(call) = &lib.nvmlDeviceGetGpuFabricInfoV {
        let mut last = (0, 0, 0);
        for version in [FABRIC_INFO_V3, FABRIC_INFO_V2] {
            // SAFETY: the struct (version 3, the largest the two versions
            // name) is integers and arrays of integers, for which all zero
            // bytes are a value; the driver writes within the size the
            // version gives, which is no larger than the struct.
            let mut info: nvmlGpuFabricInfo_v3_t = unsafe { std::mem::zeroed() };
            info.version = version;
            let rc = unsafe { call(handle, &mut info) };
            last = (rc, info.state, info.status);
            if rc != nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH {
                break;
            }
        }
        last
    } else if let Ok(call) = &lib.nvmlDeviceGetGpuFabricInfo {
        // SAFETY: as above, for the version 1 struct of this call.
        let mut info: nvmlGpuFabricInfo_t = unsafe { std::mem::zeroed() };
        let rc = unsafe { call(handle, &mut info) };
        (rc, info.state, info.status)
    } else {
        return Err(QueryError::NotSupported(
            "NVML: no nvmlDeviceGetGpuFabricInfo in this driver (no NVLink fabric state)".into(),
        ));
    };
    nvml_try(rc).map_err(|e| query_error(&e))?;
    let state = FabricState::from_value(state);
    if state == FabricState::NotSupported {
        return Err(QueryError::NotSupported(
            "NVML: no NVLink fabric on this GPU (fabric state not supported)".into(),
        ));
    }
    Ok(Fabric {
        state,
        error: nvml_try(status).err().map(|e| format!("NVML: {e}")),
    })
}

/// NOT_SUPPORTED, GPU_IS_LOST, or any other error (never read as a value).
fn query_error(e: &NvmlError) -> QueryError {
    match e {
        NvmlError::NotSupported => QueryError::NotSupported(format!("NVML: {e}")),
        NvmlError::GpuLost => QueryError::GpuLost("NVML: GPU is lost".into()),
        e => QueryError::Other(format!("NVML: {e}")),
    }
}

fn probe<T>(r: Result<T, NvmlError>) -> Result<Probe<T>, GpuError> {
    probe_from(r.map_err(|e| query_error(&e)))
}

/// Field values by id: each a number, or the error of the call or of that
/// field. `unsupported` words a NOT_SUPPORTED (or, for a field id this
/// driver does not know, INVALID_ARGUMENT) answer.
fn fields(
    dev: &nvml_wrapper::Device<'_>,
    ids: &[u32],
    unsupported: &str,
) -> Result<Vec<u64>, QueryError> {
    let field_ids: Vec<FieldId> = ids.iter().map(|&i| FieldId(i)).collect();
    let classify = |e: &NvmlError| match e {
        NvmlError::NotSupported | NvmlError::InvalidArg => {
            QueryError::NotSupported(unsupported.to_string())
        }
        e => query_error(e),
    };
    let samples = dev.field_values_for(&field_ids).map_err(|e| classify(&e))?;
    let mut out = Vec::with_capacity(ids.len());
    for s in &samples {
        let s = s.as_ref().map_err(classify)?;
        let v = s.value.as_ref().map_err(classify)?;
        out.push(match v {
            SampleValue::F64(x) => *x as u64,
            SampleValue::U32(x) => u64::from(*x),
            SampleValue::U64(x) => *x,
            SampleValue::I64(x) => *x as u64,
        });
    }
    if out.len() != ids.len() {
        return Err(QueryError::Other(format!(
            "NVML: {} field values for {} fields asked",
            out.len(),
            ids.len()
        )));
    }
    Ok(out)
}

impl NvmlSource {
    /// GPU `index`, whose handle NVML cannot open (`why`): its PCI address
    /// by elimination over the driver's GPUs, and the kernel log's Xids
    /// there.
    fn unreadable(&mut self, index: u32, why: String) -> Unreadable {
        if self.addresses.is_none() {
            let count = self.nvml.device_count().unwrap_or(0);
            let known: Vec<Option<xid::PciKey>> = (0..count)
                .map(|i| {
                    let dev = self.nvml.device_by_index(i).ok()?;
                    xid::pci_key(&dev.pci_info().ok()?.bus_id)
                })
                .collect();
            let driver = unreadable::driver_gpus().unwrap_or_else(|e| {
                tracing::warn!("{e}: the PCI address of a GPU NVML cannot open stays unknown");
                Vec::new()
            });
            self.addresses = Some(unreadable::by_elimination(&known, &driver));
        }
        let key = self
            .addresses
            .as_ref()
            .and_then(|a| a.get(index as usize).copied().flatten());
        unreadable::at(why, key, &self.xids)
    }
}

impl GpuSource for NvmlSource {
    fn count(&mut self) -> Result<u32, String> {
        self.nvml.device_count().map_err(|e| format!("NVML: {e}"))
    }

    fn sxids(&mut self) -> Probe<Vec<sxid::SxidEvent>> {
        match &self.sxids {
            Ok(all) => Probe::Value(all.clone()),
            Err(why) => Probe::Unsupported(why.clone()),
        }
    }

    fn read(&mut self, index: u32) -> Result<GpuReading, GpuError> {
        let dev = match self.nvml.device_by_index(index) {
            Ok(d) => d,
            Err(NvmlError::GpuLost) => {
                return Err(GpuError::Lost(
                    "NVML: GPU is lost (fallen off the bus)".into(),
                ))
            }
            Err(e) => {
                return Err(GpuError::Unreadable(
                    self.unreadable(index, format!("NVML: {e}")),
                ))
            }
        };
        let mut r = GpuReading::unsupported(index, "not read");
        r.serial = dev.serial().ok();
        r.uuid = dev.uuid().ok();
        r.pci_bus_id = dev.pci_info().ok().map(|p| p.bus_id);
        r.ecc_uncorrected =
            probe(dev.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile))?;
        r.retired_pages_pending = probe(dev.are_pages_pending_retired())?;
        r.row_remap = probe_from(
            fields(
                &dev,
                &[NVML_FI_DEV_REMAPPED_PENDING, NVML_FI_DEV_REMAPPED_FAILURE],
                "NVML: row remapper fields not supported (pre-Ampere GPU?)",
            )
            .map(|v| RowRemap {
                pending: v[0] != 0,
                failure: v[1] != 0,
            }),
        )?;
        r.recovery_action = probe_from(
            fields(
                &dev,
                &[NVML_FI_DEV_GET_GPU_RECOVERY_ACTION],
                "NVML: no GPU recovery action field (driver before R570)",
            )
            .map(|v| RecoveryAction::from_value(v[0])),
        )?;
        r.fabric = probe_from(fabric(&self.nvml, &dev))?;
        r.xids = match (&self.xids, r.pci_bus_id.as_deref().and_then(xid::pci_key)) {
            (Err(why), _) => Probe::Unsupported(why.clone()),
            (Ok(_), None) => Probe::Unsupported(
                "PCI bus id unreadable: Xids cannot be matched to this GPU".into(),
            ),
            (Ok(all), Some(key)) => Probe::Value(xid::xids_at(all, key)),
        };
        Ok(r)
    }
}
