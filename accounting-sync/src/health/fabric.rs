//! The GPU fabric state, and the GPU's `fabric` check.
//!
//! On an NVSwitch node (HGX, DGX; Hopper and newer) the fabric manager
//! (`nvidia-fabricmanager`) trains the NVLinks and registers each GPU with
//! the NVLink fabric; until a GPU is registered, CUDA refuses it (every job
//! fails at its first CUDA call, `cudaErrorSystemNotReady`, error 802)
//! while NVML reads it, and every other check passes. With the fabric
//! manager down every job sent to the node fails, and each one is charged.
//!
//! Rule (NVML `nvmlDeviceGetGpuFabricInfoV`, else
//! `nvmlDeviceGetGpuFabricInfo`: the GPU's `state`, and `status`, the
//! registration's result, meaningful once the state is completed):
//! - state **completed** with status success: ok;
//! - completed with an error status: **failed** (`fabric registration
//!   failed (...)`);
//! - **not started** (the fabric manager is not running, or has not reached
//!   this GPU): **failed** (`fabric not started (is nvidia-fabricmanager
//!   running?)`);
//! - **in progress** (the fabric manager is still training the links, as in
//!   the first minutes after a boot): **failed** (`fabric registration in
//!   progress`): the GPU cannot run a job yet. Start slurmd after the fabric
//!   manager (`After=nvidia-fabricmanager.service`), so that the boot's
//!   first health check finds it completed;
//! - state **not supported**, the call answering NOT_SUPPORTED, or a driver
//!   without the call: **unsupported**, which costs the GPU no check (as for
//!   `recovery_action`): a GPU on no NVSwitch fabric (a PCIe board, an
//!   NVLink bridge, a GPU before Hopper) has nothing to register;
//! - a state number allot does not know, or any other NVML error: **error**
//!   (unknown, never healthy, never drained).

use serde::Serialize;

use super::Check;

/// `nvmlGpuFabricState_t`: where the GPU's registration with the NVLink
/// fabric stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FabricState {
    /// 0, `NVML_GPU_FABRIC_STATE_NOT_SUPPORTED`: the GPU is on no fabric.
    NotSupported,
    /// 1, `NOT_STARTED`: not registered yet (no fabric manager).
    NotStarted,
    /// 2, `IN_PROGRESS`: the fabric manager is registering it.
    InProgress,
    /// 3, `COMPLETED`: registered, or failed to (see the status).
    Completed,
    /// A value this allot does not know.
    Other(u8),
}

impl FabricState {
    /// From NVML's value.
    pub fn from_value(v: u8) -> FabricState {
        match v {
            0 => FabricState::NotSupported,
            1 => FabricState::NotStarted,
            2 => FabricState::InProgress,
            3 => FabricState::Completed,
            n => FabricState::Other(n),
        }
    }

    /// From the fixture's name (`not_supported`, `not_started`,
    /// `in_progress`, `completed`).
    pub fn from_name(name: &str) -> Option<FabricState> {
        Some(match name {
            "not_supported" => FabricState::NotSupported,
            "not_started" => FabricState::NotStarted,
            "in_progress" => FabricState::InProgress,
            "completed" => FabricState::Completed,
            _ => return None,
        })
    }
}

/// A GPU's fabric registration as NVML reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fabric {
    /// The registration's state.
    pub state: FabricState,
    /// The registration's error when the state is completed and it failed
    /// (NVML's `status`, as written), `None` for success.
    pub error: Option<String>,
}

/// The `fabric` check of a GPU's fabric registration, as the rule at the
/// top of this file says (the unsupported cases are the probe's, not
/// here).
pub fn check(f: &Fabric) -> Check {
    match (f.state, &f.error) {
        (FabricState::Completed, None) => Check::Ok,
        (FabricState::Completed, Some(e)) => {
            Check::Failed(format!("fabric registration failed ({e})"))
        }
        (FabricState::NotStarted, _) => {
            Check::Failed("fabric not started (is nvidia-fabricmanager running?)".into())
        }
        (FabricState::InProgress, _) => Check::Failed("fabric registration in progress".into()),
        (FabricState::NotSupported, _) => {
            Check::Unsupported("no NVLink fabric on this GPU (fabric state not supported)".into())
        }
        (FabricState::Other(n), _) => Check::Error(format!(
            "fabric state {n}, which this allot does not know: cannot tell whether the GPU is registered"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(state: FabricState, error: Option<&str>) -> Check {
        check(&Fabric {
            state,
            error: error.map(String::from),
        })
    }

    #[test]
    fn only_a_completed_registration_passes() {
        assert_eq!(f(FabricState::Completed, None), Check::Ok);
        assert_eq!(
            f(FabricState::Completed, Some("NVML_ERROR_NOT_READY")),
            Check::Failed("fabric registration failed (NVML_ERROR_NOT_READY)".into())
        );
        assert_eq!(
            f(FabricState::NotStarted, None),
            Check::Failed("fabric not started (is nvidia-fabricmanager running?)".into())
        );
        // The status is read only once completed.
        assert_eq!(
            f(FabricState::InProgress, Some("x")),
            Check::Failed("fabric registration in progress".into())
        );
        assert!(matches!(
            f(FabricState::NotSupported, None),
            Check::Unsupported(_)
        ));
        assert!(matches!(f(FabricState::Other(9), None), Check::Error(_)));
        assert_eq!(FabricState::from_value(1), FabricState::NotStarted);
        assert_eq!(FabricState::from_value(3), FabricState::Completed);
        assert_eq!(
            FabricState::from_name("in_progress"),
            Some(FabricState::InProgress)
        );
        assert_eq!(FabricState::from_name("done"), None);
    }
}
