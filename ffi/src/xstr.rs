//! Strings handed to Slurm that Slurm frees with `xfree` (job_submit's
//! `err_msg`, priority factor objects, ...). They must come from
//! libslurmfull's allocator: a libc `strdup` there crashes slurmctld.

use std::ffi::{c_char, CString};

use crate::sys;

/// Allocates a copy of `s` with Slurm's `xstrdup` (interior NULs are
/// escaped as `\0`). The caller hands the pointer to Slurm, which owns and
/// frees it. Only callable inside a Slurm process.
pub fn xstrdup(s: &str) -> *mut c_char {
    let c = CString::new(s.replace('\0', "\\0")).expect("NULs were escaped");
    // SAFETY: xstrdup copies a valid NUL-terminated string.
    unsafe { sys::xstrdup(c.as_ptr()) }
}
