//! allot's fuzz targets (see `targets.rs`); each binary in `fuzz_targets/`
//! hands libFuzzer's input to one of them.
pub mod targets;
pub use targets::*;
