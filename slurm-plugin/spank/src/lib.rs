//! SPANK plugin `allot.so` (plugstack.conf: `optional /usr/lib/x86_64-linux-gnu/slurm-wlm/allot.so`).
//!
//! Adds `--min-runtime=<time>` to sbatch, srun and salloc, so that
//! `#SBATCH --min-runtime=4:00:00` works and `--min-runtime=0` asks for the
//! free, preemptible tier. The value is checked here for syntax only (the
//! cap and partition defaults are job_submit/allot's) and handed to
//! slurmctld in the job-control environment as `ALLOT_MIN_RUNTIME`.
#![allow(non_upper_case_globals)]
// The exported functions take the raw pointers slurmd/sbatch pass (the C ABI
// SPANK defines); each is wrapped once, at the top, by an `unsafe`
// allot_ffi constructor whose safety contract the caller meets.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use std::ffi::{c_char, c_int};
use std::sync::Mutex;

use allot_ffi::spank::{self, Context, Handle};
use fairshare::duration::parse_slurm_duration;
use fairshare::record::SPANK_ENV;

/// SPANK plugins carry the same three symbols as other plugins, type "spank".
#[no_mangle]
#[used]
pub static plugin_name: [u8; 6] = *b"allot\0";
/// Plugin type.
#[no_mangle]
#[used]
pub static plugin_type: [u8; 6] = *b"spank\0";
/// Must equal the running Slurm's SLURM_VERSION_NUMBER.
#[no_mangle]
#[used]
pub static plugin_version: u32 = allot_ffi::SLURM_VERSION_NUMBER;

/// The value given on the command line, kept until `init_post_opt`.
static VALUE: Mutex<Option<String>> = Mutex::new(None);

unsafe extern "C" fn on_min_runtime(_val: c_int, optarg: *const c_char, remote: c_int) -> c_int {
    if remote != 0 {
        return 0;
    }
    let arg = unsafe { spank::arg_str(optarg) }.unwrap_or("");
    match std::panic::catch_unwind(|| parse_slurm_duration(arg)) {
        Ok(Ok(_)) => {
            if let Ok(mut v) = VALUE.lock() {
                *v = Some(arg.trim().to_string());
            }
            0
        }
        Ok(Err(e)) => {
            eprintln!("error: --min-runtime: {e}");
            -1
        }
        Err(_) => -1,
    }
}

/// Runs a SPANK callback's `body` on its handle; a panic answers -1 (it
/// never unwinds into Slurm).
fn callback(
    sp: allot_ffi::sys::spank_t,
    body: impl FnOnce(Handle) -> c_int + std::panic::UnwindSafe,
) -> c_int {
    // SAFETY: SPANK passes the live handle of this callback.
    let sp = unsafe { Handle::from_raw(sp) };
    std::panic::catch_unwind(|| body(sp)).unwrap_or(-1)
}

/// Registers `--min-runtime` in every context (slurmd too, so srun's option
/// is accepted when forwarded).
#[no_mangle]
pub extern "C" fn slurm_spank_init(
    sp: allot_ffi::sys::spank_t,
    _ac: c_int,
    _av: *mut *mut c_char,
) -> c_int {
    callback(sp, |sp| {
        match spank::register_option(
            sp,
            c"min-runtime",
            c"time",
            c"Minimum runtime: the job cannot be preempted before it has run this long (Slurm time: mm, hh:mm:ss, d-hh...); 0 = free, preemptible tier",
            on_min_runtime,
        ) {
            Ok(()) => 0,
            Err(rc) => rc,
        }
    })
}

/// In sbatch/salloc/srun: passes the value on to slurmctld.
#[no_mangle]
pub extern "C" fn slurm_spank_init_post_opt(
    sp: allot_ffi::sys::spank_t,
    _ac: c_int,
    _av: *mut *mut c_char,
) -> c_int {
    callback(sp, |sp| {
        if !matches!(spank::context(), Context::Allocator | Context::Local) {
            return 0;
        }
        let value = VALUE.lock().ok().and_then(|v| v.clone());
        match value {
            Some(v) => match spank::job_control_setenv(sp, SPANK_ENV, &v) {
                Ok(()) => 0,
                Err(rc) => {
                    eprintln!("error: --min-runtime: cannot pass the value to slurmctld (spank error {rc})");
                    -1
                }
            },
            None => 0,
        }
    })
}
