//! # fairshare: the allot scheduling engine
//!
//! Pure Rust, no I/O and no clock: every function that depends on time takes
//! `now` (seconds since the Unix epoch) as an argument. The Slurm plugins, the
//! `allot` sidecar and the simulator all call this crate, so the simulator
//! predicts what the plugins do.
//!
//! Where to look:
//! - [`config`]: `allot.toml`, validated; [`tree`]: the org tree, shares and
//!   allocations; [`charge`]: TRES billing weights;
//! - [`usage`]: sliding-window occupancy, exact and incremental;
//! - [`fair_tree`]: Level FS, ranks and fair-share factors;
//! - [`priority`]: the `u32` priority layout; [`contract`]: minimum runtime,
//!   protection, charging; [`owed`]: the one ordering rule between teams,
//!   [`live_load`]: a live job list counted for it;
//!   [`attempts`]: which intervals a job's attempts
//!   are charged (who ended each, resized runs, no overlap); [`preempt`]: who may preempt whom, victims;
//! - [`engine`]: the immutable snapshot the plugins hold; [`timer`]: when
//!   they rebuild it and when the ledger is polled;
//!   [`explain`]: the structured "why".
//!
//! ```
//! use std::sync::Arc;
//! use fairshare::{Config, Engine, PendingJob};
//!
//! let config = Config::from_toml_str(r#"
//!     window = "7-0"
//!     [tree.a]
//!     share = 60
//!     [tree.b]
//!     share = 40
//! "#).unwrap();
//! // 100 GPU-hours used by a, none by b: b is served first.
//! let (engine, _unknown) =
//!     Engine::from_account_usage(Arc::new(config), [("a", 360_000.0)], 1_700_000_000);
//! assert_eq!(engine.fair_share("b"), Some(1.0));
//! assert_eq!(engine.fair_share("a"), Some(0.5));
//! let job = |account| PendingJob { id: 1, account, min_runtime: 3600, nice: 0, eligible_time: 1_700_000_000, gpus: 1, time_limit: None, sweep: false };
//! assert!(engine.priority(&job("b")) > engine.priority(&job("a")));
//! ```
#![deny(missing_docs)]

pub mod attempts;
pub mod charge;
pub mod config;
pub mod contract;
pub mod drain;
pub mod duration;
pub mod engine;
pub mod entitlement;
pub mod error;

pub mod explain;
pub mod fair_tree;
mod hash;
pub mod live_load;
pub mod owed;
pub mod preempt;
pub mod priority;
pub mod record;
pub mod sweep;
pub mod timer;
pub mod tree;
pub mod tres;
pub mod usage;

#[cfg(test)]
mod testutil;

pub use config::{Config, ConfigError, ConfigErrors};
pub use contract::{protected, protected_until, Contract, ContractPolicy, RunClock, Tier};
pub use engine::Engine;
pub use entitlement::Entitlements;
pub use explain::Explanation;
pub use fair_tree::{FairTree, LevelFs};
pub use preempt::{NodeGpus, Preemptor, RunningJob, Verdict, VictimTally};
pub use priority::{Band, PendingJob, PriorityFactors, PriorityWeights};
pub use tree::{LeafId, NodeId, NodeSpec, Tree};
pub use usage::{OpenCharge, UsageTracker};
