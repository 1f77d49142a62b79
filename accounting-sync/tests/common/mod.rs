//! What the integration tests share: the `allot` under test, the example
//! config, and running a command that must succeed. Each test file uses a
//! part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The `allot` binary under test, with `$ALLOT_CONF` and `$SLURM_CONF`
/// unset (a test names its config).
pub fn allot() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_allot"));
    c.env_remove("ALLOT_CONF").env_remove("SLURM_CONF");
    c
}

/// `examples/allot.toml`.
pub fn example() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/allot.toml")
}

/// The text of `examples/allot.toml` with its ledger at `ledger`.
pub fn example_with_ledger(ledger: &Path) -> String {
    std::fs::read_to_string(example()).unwrap().replace(
        "/var/lib/allot/ledger.sqlite",
        &ledger.display().to_string(),
    )
}

/// Runs `c`, which must succeed; returns its stdout.
///
/// # Panics
/// With the command and its stderr when it exits non-zero.
pub fn ok(c: &mut Command) -> String {
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{c:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
