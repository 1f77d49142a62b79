//! # allot_sync: the ledger and the `allot` command's library
//!
//! `allot sync` reads Slurm's accounting (`sacct`) into a SQLite ledger of
//! job attempts and their charges; the Slurm priority plugin and the
//! reports read it back. Layout:
//! - [`sacct`]: parsing `sacct --parsable2` rows (pure functions);
//! - [`charge`]: applying the engine's charging rule to one attempt;
//! - [`ledger`]: the SQLite file, its single writer and its readers;
//! - [`sync`]: the import (live from sacct, or from a saved dump);
//! - [`report`]: the budget report;
//! - [`health`]: GPU health checks (`allot health`), [`drain`] and
//!   [`draining`]: contract-aware draining in `allot sync --follow`,
//!   [`health_report`]: `allot report --health`.
//!
//! Reading a ledger (what the plugin does):
//!
//! ```no_run
//! use allot_sync::ledger::LedgerReader;
//! let reader = LedgerReader::open("/var/lib/allot/ledger.sqlite".as_ref())?;
//! let now = 1_700_000_000;
//! // Charged GPU-seconds per account over the last 7 days.
//! for (account, gpu_seconds) in reader.charged_by_account(now - 7 * 86_400, now)? {
//!     println!("{account}: {gpu_seconds}");
//! }
//! # Ok::<(), allot_sync::ledger::LedgerError>(())
//! ```
#![deny(missing_docs)]

pub mod charge;
pub mod drain;
pub mod draining;
pub mod health;
pub mod health_report;
pub mod ledger;
pub mod report;
pub mod sacct;
pub mod sync;
pub mod tree_sync;
