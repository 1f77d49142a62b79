//! What the sidecar (`allot sync`, `allot sync --follow`) runs, and the
//! tree sync of `allot tree`:
//! - [`sync`]: the import (live from sacct, or from a saved dump);
//! - [`drain_pass`]: the draining pass of `--follow` (the Slurm commands),
//!   reading what [`sinfo_squeue`] parses; the rule is the engine's
//!   [`fairshare::drain`] (docs/health.md);
//! - [`metrics`]: the sidecar's Prometheus metrics (`--listen`);
//! - [`tree_sync`]: the org tree as code against slurmdbd's accounts.

pub mod drain_pass;
pub mod metrics;
pub mod sinfo_squeue;
pub mod sync;
pub mod tree_sync;

/// The standard output of `program args` (a Slurm command).
///
/// # Errors
/// It cannot run, or it fails: the message names the command and gives
/// its standard error.
pub(crate) fn slurm_output(program: &str, args: &[&str]) -> anyhow::Result<String> {
    let out = std::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| anyhow::anyhow!("cannot run {program}: {e}"))?;
    if !out.status.success() {
        anyhow::bail!(
            "{program} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The value of `key` in `scontrol show config` output (`SlurmUser =
/// slurm(64030)` gives `slurm(64030)`), trimmed.
pub fn show_config_value<'a>(show_config: &'a str, key: &str) -> Option<&'a str> {
    show_config.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == key).then(|| v.trim())
    })
}
