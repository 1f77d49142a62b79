//! SPANK: the plugin interface of sbatch/srun/salloc and slurmd.
//!
//! allot's SPANK plugin adds `--min-runtime=<time>` and hands the value to
//! slurmctld through the job-control environment (`spank_job_env` of the
//! job request, which job_submit reads with
//! [`JobDesc::spank_env`](crate::job::JobDesc::spank_env)).

use std::ffi::{c_char, c_int, CString};

use crate::sys;

/// The SPANK handle passed to a `slurm_spank_*` callback.
#[derive(Clone, Copy)]
pub struct Handle(sys::spank_t);

impl Handle {
    /// Wraps the handle SPANK passed to the current callback.
    ///
    /// # Safety
    /// `sp` is the handle of the running callback, used only during it.
    pub unsafe fn from_raw(sp: sys::spank_t) -> Handle {
        Handle(sp)
    }
}

/// Where a SPANK plugin is running (`spank_context()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// srun (local).
    Local,
    /// slurmstepd (remote).
    Remote,
    /// sbatch or salloc.
    Allocator,
    /// slurmd.
    Slurmd,
    /// The job script (prolog/epilog).
    JobScript,
    /// Unknown / error.
    Other,
}

/// The current SPANK context.
pub fn context() -> Context {
    // SAFETY: spank_context takes no arguments and only reads a global.
    match unsafe { sys::spank_context() } {
        sys::spank_context_S_CTX_LOCAL => Context::Local,
        sys::spank_context_S_CTX_REMOTE => Context::Remote,
        sys::spank_context_S_CTX_ALLOCATOR => Context::Allocator,
        sys::spank_context_S_CTX_SLURMD => Context::Slurmd,
        sys::spank_context_S_CTX_JOB_SCRIPT => Context::JobScript,
        _ => Context::Other,
    }
}

/// A SPANK option callback: `(val, optarg, remote) -> 0 | -1`.
pub type OptionCallback = unsafe extern "C" fn(c_int, *const c_char, c_int) -> c_int;

/// Registers `--NAME=ARGINFO` with usage text; `cb` is called when the user
/// gives it. Strings must be `'static` (SPANK keeps the pointers).
///
/// # Errors
/// The SPANK error code when registration fails.
pub fn register_option(
    sp: Handle,
    name: &'static std::ffi::CStr,
    arginfo: &'static std::ffi::CStr,
    usage: &'static std::ffi::CStr,
    cb: OptionCallback,
) -> Result<(), i32> {
    let mut opt = sys::spank_option {
        name: name.as_ptr() as *mut c_char,
        arginfo: arginfo.as_ptr() as *mut c_char,
        usage: usage.as_ptr() as *mut c_char,
        has_arg: 1,
        val: 0,
        cb: Some(cb),
    };
    // SAFETY: sp is live (Handle::from_raw); SPANK copies the struct; the strings are 'static.
    let rc = unsafe { sys::spank_option_register(sp.0, &mut opt) };
    if rc == 0 {
        Ok(())
    } else {
        Err(rc as i32)
    }
}

/// Sets `NAME=VALUE` in the job-control environment (allocator and local
/// contexts), which travels to slurmctld in the job request.
///
/// # Errors
/// The SPANK error code (e.g. wrong context).
pub fn job_control_setenv(sp: Handle, name: &str, value: &str) -> Result<(), i32> {
    let n = CString::new(name).map_err(|_| -1)?;
    let v = CString::new(value).map_err(|_| -1)?;
    // SAFETY: sp is live (Handle::from_raw); both strings are valid for the call and copied.
    let rc = unsafe { sys::spank_job_control_setenv(sp.0, n.as_ptr(), v.as_ptr(), 1) };
    if rc == 0 {
        Ok(())
    } else {
        Err(rc as i32)
    }
}

/// Reads a C string argument of a SPANK callback (`None` for NULL / non-UTF-8).
///
/// # Safety
/// `p` is NULL or a NUL-terminated string valid for the call.
pub unsafe fn arg_str<'a>(p: *const c_char) -> Option<&'a str> {
    if p.is_null() {
        None
    } else {
        std::ffi::CStr::from_ptr(p).to_str().ok()
    }
}
