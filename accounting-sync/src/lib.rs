//! # allot_sync: the `allot` command's library
//!
//! `allot sync` reads Slurm's accounting (`sacct`) into the SQLite ledger
//! of job attempts and their charges (the `allot-ledger` crate: the file,
//! its writer and readers, sacct row parsing and charging, shared with the
//! Slurm plugins); the plugins and the reports read it back. Layout:
//! - [`sync`]: the import (live from sacct, or from a saved dump);
//! - [`report`]: the budget report;
//! - [`health`]: GPU health checks (`allot health`), [`drain`] and
//!   [`draining`]: contract-aware draining in `allot sync --follow`,
//!   [`health_report`]: `allot report --health`;
//! - [`metrics`]: the sidecar's Prometheus metrics (`--metrics-listen`).
#![deny(missing_docs)]

pub mod budget_page;
pub mod drain;
pub mod draining;
pub mod health;
pub mod health_report;
pub mod metrics;
pub mod report;
pub mod sync;
pub mod tree_sync;
