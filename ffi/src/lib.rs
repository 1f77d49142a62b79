//! # allot-ffi: bindings to the installed Slurm, and thin safe accessors
//!
//! [`sys`] holds the bindgen output for Slurm's public headers and
//! slurmctld's internal ones (built against the exact installed version;
//! see `build.rs`). Everything else in this crate wraps it so that the
//! plugins never touch a raw pointer:
//!
//! - [`slurm_plugin!`] emits the `plugin_name` / `plugin_type` /
//!   `plugin_version` symbols slurmctld checks at dlopen;
//! - [`log`] writes into slurmctld's log (`slurm_info`, `error`);
//! - [`xstr`] makes strings that Slurm will `xfree`;
//! - [`job`] reads `job_record_t` and `job_desc_msg_t`;
//! - [`release`] holds what differs between the supported Slurm releases;
//! - [`ctld`] asks slurmctld for its state (job list, locks, sprio's list);
//! - [`xlist`] walks a Slurm `List`, [`factors`] holds sprio's columns.
//!
//! The modules form layers, none importing one above it: [`xlist`],
//! [`factors`] and [`xstr`] at the bottom; [`release`] over them; [`job`]
//! over [`release`] (the record's details type); [`ctld`] on top.
//!
//! Symbols such as `slurm_info` or `xstrdup` are resolved when slurmctld
//! dlopens a plugin (they live in libslurmfull, which a plugin must not link),
//! so the functions that call them only work inside a Slurm process.
//!
//! ```
//! // The version this crate was built against, as slurmctld checks it
//! // (one of the supported releases: 22.05, 24.11).
//! let n = allot_ffi::SLURM_VERSION_NUMBER;
//! let release = format!("{}.{:02}.", n >> 16, n >> 8 & 0xff);
//! assert!(allot_ffi::SLURM_VERSION.starts_with(&release));
//! ```
#![deny(missing_docs)]

/// Raw bindgen output. Layout assertions are compiled in (bindgen emits them
/// as `const` checks), so a header/struct mismatch fails the build.
#[allow(
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    dead_code,
    missing_docs,
    unnecessary_transmutes,
    clippy::all
)]
pub mod sys {
    include!(concat!(env!("OUT_DIR"), "/bindings.rs"));
}

pub mod assoc;
pub mod ctld;
pub mod factors;
pub mod job;
pub mod log;
pub mod long_double;
pub mod plugin;
pub mod release;
pub mod spank;
pub mod xlist;
pub mod xstr;

/// A Slurm list (`List` in 22.05, `list_t *` in 24.11): a pointer to
/// `struct xlist` in every release.
pub type List = *mut sys::xlist;

/// `SLURM_VERSION_NUMBER` of the Slurm this crate was built against
/// (`0x160508` for 22.05.8). slurmctld refuses a plugin whose
/// `plugin_version & 0xffffff` differs (major, minor and micro).
pub const SLURM_VERSION_NUMBER: u32 = sys::SLURM_VERSION_NUMBER;

/// The same version as text, e.g. `"22.05.8"`.
pub const SLURM_VERSION: &str = env!("ALLOT_SLURM_VERSION");
