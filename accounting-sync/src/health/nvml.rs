//! The NVML GPU source: `libnvidia-ml.so.1` loaded at run time (through
//! `nvml-wrapper`; nothing is linked, so `allot` runs on nodes without a
//! driver and says so), plus the kernel log for Xids ([`super::xid`]).

use std::time::Duration;

use nvml_wrapper::enum_wrappers::device::{EccCounter, MemoryError};
use nvml_wrapper::enums::device::SampleValue;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::sys_exports::field_id::{
    NVML_FI_DEV_REMAPPED_FAILURE, NVML_FI_DEV_REMAPPED_PENDING,
};
use nvml_wrapper::Nvml;

use super::xid;
use super::{GpuError, GpuReading, GpuSource, Probe, RowRemap, SourceError};

/// Reads GPUs through NVML.
pub struct NvmlSource {
    nvml: Nvml,
    /// Xids of the kernel log since boot, or why it could not be read.
    xids: Result<Vec<(xid::PciKey, u64)>, String>,
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
        for attempt in 1..=attempts {
            match Nvml::init() {
                Ok(nvml) => {
                    return Ok(NvmlSource {
                        nvml,
                        xids: xid::read_kmsg().map(|log| xid::xids_in(&log)),
                    })
                }
                Err(e) if is_absent(&e) => return Err(SourceError::Absent(e.to_string())),
                Err(e) => {
                    last = e.to_string();
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
        })
    }
}

fn probe<T>(r: Result<T, NvmlError>) -> Result<Probe<T>, GpuError> {
    match r {
        Ok(v) => Ok(Probe::Value(v)),
        Err(NvmlError::GpuLost) => Err(GpuError::Lost("NVML: GPU is lost".into())),
        Err(e) => Ok(Probe::Unsupported(format!("NVML: {e}"))),
    }
}

fn nonzero(v: &SampleValue) -> bool {
    match v {
        SampleValue::F64(x) => *x != 0.0,
        SampleValue::U32(x) => *x != 0,
        SampleValue::U64(x) => *x != 0,
        SampleValue::I64(x) => *x != 0,
    }
}

impl GpuSource for NvmlSource {
    fn count(&mut self) -> Result<u32, String> {
        self.nvml.device_count().map_err(|e| format!("NVML: {e}"))
    }

    fn read(&mut self, index: u32) -> Result<GpuReading, GpuError> {
        let dev = match self.nvml.device_by_index(index) {
            Ok(d) => d,
            Err(NvmlError::GpuLost) => {
                return Err(GpuError::Lost(
                    "NVML: GPU is lost (fallen off the bus)".into(),
                ))
            }
            Err(e) => return Err(GpuError::Unreadable(format!("NVML: {e}"))),
        };
        let mut r = GpuReading::unsupported(index, "not read");
        r.serial = dev.serial().ok();
        r.uuid = dev.uuid().ok();
        r.pci_bus_id = dev.pci_info().ok().map(|p| p.bus_id);
        r.ecc_uncorrected =
            probe(dev.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile))?;
        r.retired_pages_pending = probe(dev.are_pages_pending_retired())?;
        r.row_remap = match dev.field_values_for(&[
            FieldId(NVML_FI_DEV_REMAPPED_PENDING),
            FieldId(NVML_FI_DEV_REMAPPED_FAILURE),
        ]) {
            Ok(samples) => {
                let vals: Vec<Option<bool>> = samples
                    .iter()
                    .map(|s| {
                        s.as_ref()
                            .ok()
                            .and_then(|s| s.value.as_ref().ok())
                            .map(nonzero)
                    })
                    .collect();
                match vals.as_slice() {
                    [Some(pending), Some(failure)] => Probe::Value(RowRemap {
                        pending: *pending,
                        failure: *failure,
                    }),
                    _ => Probe::Unsupported(
                        "NVML: row remapper fields not supported (pre-Ampere GPU?)".into(),
                    ),
                }
            }
            Err(NvmlError::GpuLost) => return Err(GpuError::Lost("NVML: GPU is lost".into())),
            Err(e) => Probe::Unsupported(format!("NVML: {e}")),
        };
        r.xids = match (&self.xids, r.pci_bus_id.as_deref().and_then(xid::pci_key)) {
            (Err(why), _) => Probe::Unsupported(why.clone()),
            (Ok(_), None) => Probe::Unsupported(
                "PCI bus id unreadable: Xids cannot be matched to this GPU".into(),
            ),
            (Ok(all), Some(key)) => Probe::Value(
                all.iter()
                    .filter(|(k, _)| *k == key)
                    .map(|(_, x)| *x)
                    .collect(),
            ),
        };
        Ok(r)
    }
}
