//! What the sidecar (`allot sync`, `allot sync --follow`) runs, and the
//! tree sync of `allot tree`:
//! - [`follow`]: the sidecar itself, [`follow::Sidecar`], whose pass
//!   (sync, metrics, snapshot, drain) is stated in one place;
//! - [`sync`]: the import (live from sacct, or from a saved dump);
//! - [`drain_pass`]: the draining pass of `--follow`, over what
//!   [`crate::slurm`] reads of sinfo and squeue; the rule is the engine's
//!   [`fairshare::drain`] (docs/health.md);
//! - [`metrics`]: the sidecar's Prometheus metrics (`--listen`);
//! - [`tree_sync`]: the org tree as code against slurmdbd's accounts.

pub mod drain_pass;
pub mod follow;
pub mod metrics;
pub mod sync;
pub mod tree_sync;
