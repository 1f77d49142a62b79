//! Logging into slurmctld's (or slurmd's) own log.
//!
//! In 22.05 `info()`/`verbose()` are macros, so we call the functions behind
//! them with a `"%s"` format: a message can never be read as a format string.
//! Only callable inside a Slurm process (the symbols come from libslurmfull).

use std::ffi::CString;

use crate::sys;

fn c_message(prefix: &str, msg: &str) -> CString {
    let text = format!("{prefix}{msg}").replace('\0', "\\0");
    CString::new(text).expect("NULs were escaped")
}

/// Logs `msg` at info level, prefixed with `prefix` (e.g. `"priority/allot: "`).
pub fn info(prefix: &str, msg: &str) {
    let c = c_message(prefix, msg);
    // SAFETY: "%s" consumes exactly one C string argument, which outlives the call.
    unsafe { sys::slurm_info(c"%s".as_ptr(), c.as_ptr()) }
}

/// Logs `msg` at error level (`error: ...` in the log).
pub fn error(prefix: &str, msg: &str) {
    let c = c_message(prefix, msg);
    // SAFETY: as in `info`.
    unsafe { sys::slurm_error(c"%s".as_ptr(), c.as_ptr()) }
}

/// Logs `msg` at verbose level (`-v` and above).
pub fn verbose(prefix: &str, msg: &str) {
    let c = c_message(prefix, msg);
    // SAFETY: as in `info`.
    unsafe { sys::slurm_verbose(c"%s".as_ptr(), c.as_ptr()) }
}

/// Logs `msg` at debug level.
pub fn debug(prefix: &str, msg: &str) {
    let c = c_message(prefix, msg);
    // SAFETY: as in `info`.
    unsafe { sys::slurm_debug(c"%s".as_ptr(), c.as_ptr()) }
}

#[cfg(test)]
mod tests {
    #[test]
    fn interior_nul_is_escaped() {
        let c = super::c_message("p: ", "a\0b");
        assert_eq!(c.to_str().unwrap(), "p: a\\0b");
    }
}
