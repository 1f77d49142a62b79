//! # slurm-plugin: the shared glue of allot's Slurm plugins
//!
//! The cdylibs slurmctld dlopens (`priority/allot`, `preempt/allot`,
//! `job_submit/allot` and the SPANK option) are thin: convert Slurm structs
//! (through `allot-ffi`'s safe accessors) to `fairshare` types, call the
//! engine, convert back. This crate holds what every exported function
//! shares; the plugins themselves arrive with the plugins issue.
//!
//! The one rule at the boundary: a panic must never unwind into C. Every
//! exported function runs its body through [`guard`], which logs the panic
//! and answers a safe value instead.
#![deny(missing_docs)]

pub mod config;
pub mod jobs;
pub mod preempt_live;
pub mod preempt_mode;
pub mod preempt_record;
pub mod shares;
pub mod snapshot;
pub mod submit;

use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs `body`; if it panics, reports the panic through `report` (the
/// plugins pass a closure that writes to slurmctld's log) and returns
/// `fallback`. `what` names the exported function in the report.
pub fn guard_with<T>(
    what: &str,
    fallback: T,
    report: impl FnOnce(&str),
    body: impl FnOnce() -> T,
) -> T {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(v) => v,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic payload".to_string());
            report(&format!(
                "{what}: internal error (panic: {msg}); answered a safe default"
            ));
            fallback
        }
    }
}

/// [`guard_with`] reporting into slurmctld's log with `error()`.
/// Only usable inside a Slurm process.
pub fn guard<T>(plugin: &str, what: &str, fallback: T, body: impl FnOnce() -> T) -> T {
    guard_with(what, fallback, |m| allot_ffi::log::error(plugin, m), body)
}

/// A plugin's `init` of what it keeps in `cell`: unless `cell` holds it
/// already, `start` builds it and `cell` keeps it (`SLURM_SUCCESS`); a
/// failure is logged with `error` and answered `SLURM_ERROR`, which stops
/// slurmctld.
pub fn start_once<T>(
    cell: &std::sync::OnceLock<T>,
    error: fn(&str),
    start: impl FnOnce() -> Result<T, String>,
) -> std::ffi::c_int {
    if cell.get().is_some() {
        return allot_ffi::sys::SLURM_SUCCESS as std::ffi::c_int;
    }
    match start() {
        Ok(v) => {
            let _ = cell.set(v);
            allot_ffi::sys::SLURM_SUCCESS as std::ffi::c_int
        }
        Err(e) => {
            error(&e);
            allot_ffi::sys::SLURM_ERROR
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_values_through() {
        assert_eq!(
            guard_with("f", 0, |_| panic!("no report expected"), || 7),
            7
        );
    }

    #[test]
    fn a_panic_becomes_the_fallback_and_a_report() {
        let mut seen = String::new();
        let v = guard_with(
            "priority_p_set",
            -1,
            |m| seen = m.to_string(),
            || -> i32 { panic!("boom {}", 1) },
        );
        assert_eq!(v, -1);
        assert!(
            seen.contains("priority_p_set") && seen.contains("boom 1"),
            "{seen}"
        );
    }
}
