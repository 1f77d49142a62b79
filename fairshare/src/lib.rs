//! # fairshare: the allot scheduling engine
//!
//! Pure Rust, no I/O and no clock: every function that depends on time takes
//! `now` (seconds since the Unix epoch) as an argument. The Slurm plugins, the
//! `allot` sidecar and the simulator all call this crate, so the simulator
//! predicts what the plugins do.
//!
//! ```
//! use fairshare::duration::parse_slurm_duration;
//! assert_eq!(parse_slurm_duration("1-12:30:45").unwrap(), 131_445);
//! ```
#![deny(missing_docs)]

pub mod duration;
pub mod tres;
