//! # allot_sync: the `allot` command's library
//!
//! `allot sync` reads Slurm's accounting (`sacct`) into the SQLite ledger
//! of job attempts and their charges (the `allot-ledger` crate: the file,
//! its writer and readers, sacct row parsing and charging, shared with the
//! Slurm plugins); the plugins and the reports read it back. Layout, by the
//! process that runs the code:
//! - [`sidecar`]: `allot sync` and the sidecar, `allot sync --follow`
//!   ([`sidecar::follow::Sidecar`]: sync, metrics, snapshot and drain in
//!   one pass); and `allot tree`'s sync of the org tree with slurmdbd;
//! - [`slurm`]: every Slurm command allot runs (one runner: timeouts,
//!   errors) and the reading of what each prints; the GPUs of a Gres;
//! - [`server`]: the sidecar's bounded, read-only HTTP/1.1 server (GET and
//!   HEAD), its routes over a snapshot taken each pass, its pages and JSON;
//! - [`reports`]: `allot report`: the budget report (text, JSON), the HTML
//!   budget page, the health report;
//! - [`health`]: GPU health checks through NVML (`allot health`);
//! - [`explain`]: why a job has its priority, its protection and its
//!   requeues (`allot explain`, the sidecar's job pages and API);
//! - [`forecast`]: a pending job's start forecast from slurmctld's present;
//! - [`when`]: a time as every command prints it beside now.
//!
//! The command line itself (arguments, the helpers every command shares)
//! and the simulator front end are in the binary (`src/cli/`,
//! `src/simulate/`).
#![deny(missing_docs)]

pub mod explain;
pub mod forecast;
pub mod health;
pub mod reports;
pub mod server;
pub mod sidecar;
pub mod slurm;
pub mod when;
