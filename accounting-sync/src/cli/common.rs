//! What the subcommands share. Where `allot.toml` is, and loading it: every
//! subcommand takes `--config FILE`; without it the file is `$ALLOT_CONF`,
//! else `allot.toml` beside slurm.conf (the directory of `$SLURM_CONF`, else
//! `/etc/slurm`). The `--ledger` option; times and intervals on the command
//! line; logging; the cluster's capacity; the walk of the org tree.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use allot_sim::SimSettings;
use anyhow::Context;
use fairshare::{Config, ConfigErrors, NodeId, Tree};

/// Directory of slurm.conf when `$SLURM_CONF` is not set.
pub const DEFAULT_SLURM_CONF_DIR: &str = "/etc/slurm";

/// The `--config FILE` option, shared by every subcommand.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ConfigArg {
    /// allot.toml to use [default: $ALLOT_CONF, else allot.toml beside slurm.conf
    /// (dirname of $SLURM_CONF, else /etc/slurm)]
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// The `--ledger PATH` option of the commands that read or write the
/// ledger.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct LedgerArg {
    /// Ledger file [default: `[ledger] path` of allot.toml]
    #[arg(long, value_name = "PATH")]
    pub ledger: Option<PathBuf>,
}

impl LedgerArg {
    /// `--ledger`, else the config's `[ledger] path`.
    pub fn path(&self, config: &Config) -> PathBuf {
        self.ledger
            .clone()
            .unwrap_or_else(|| PathBuf::from(&config.ledger_path))
    }
}

impl ConfigArg {
    /// The path this invocation means, from the option or the environment.
    pub fn path(&self) -> PathBuf {
        resolve_config_path(
            self.config.as_deref(),
            std::env::var_os("ALLOT_CONF"),
            std::env::var_os("SLURM_CONF"),
        )
    }
}

/// The config path: `explicit`, else `allot_conf` (`$ALLOT_CONF`), else
/// `allot.toml` in the directory of `slurm_conf` (`$SLURM_CONF`), else
/// `/etc/slurm/allot.toml`. Empty environment values count as unset.
pub fn resolve_config_path(
    explicit: Option<&Path>,
    allot_conf: Option<OsString>,
    slurm_conf: Option<OsString>,
) -> PathBuf {
    if let Some(p) = explicit {
        return p.to_path_buf();
    }
    if let Some(p) = allot_conf.filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let dir = slurm_conf
        .filter(|p| !p.is_empty())
        .map(|p| {
            PathBuf::from(p)
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default()
        })
        .unwrap_or_else(|| PathBuf::from(DEFAULT_SLURM_CONF_DIR));
    dir.join("allot.toml")
}

/// Where the config path `path` came from, as [`resolve_config_path`]
/// chose it, for an error message: `$ALLOT_CONF`, beside `$SLURM_CONF`,
/// the default, or the command line.
pub fn config_origin(
    path: &Path,
    allot_conf: Option<OsString>,
    slurm_conf: Option<OsString>,
) -> String {
    let env = |v: &Option<OsString>| v.clone().filter(|p| !p.is_empty());
    if env(&allot_conf).is_some_and(|p| Path::new(&p) == path) {
        return "from $ALLOT_CONF".into();
    }
    if env(&allot_conf).is_none() {
        if let Some(sc) = env(&slurm_conf) {
            if resolve_config_path(None, None, Some(sc.clone())) == path {
                return format!(
                    "allot.toml beside slurm.conf: the directory of $SLURM_CONF={}",
                    Path::new(&sc).display()
                );
            }
        } else if Path::new(DEFAULT_SLURM_CONF_DIR).join("allot.toml") == path {
            return format!(
                "the default, allot.toml in {DEFAULT_SLURM_CONF_DIR}: neither $ALLOT_CONF nor $SLURM_CONF is set"
            );
        }
    }
    "from --config".into()
}

/// Reads and validates a config file: the engine's config and its `[sim]`
/// section (which only `allot sim` reads, but every command checks).
///
/// # Errors
/// The file cannot be read, or it is invalid: the message lists every
/// problem, one per indented line, under a line naming the file.
pub fn load(path: &Path) -> anyhow::Result<Config> {
    load_all(path).map(|l| l.config)
}

/// A config file as read and validated.
pub struct Loaded {
    /// The file as a TOML table (what `allot sim --sweep` patches).
    pub table: toml::Table,
    /// The engine's config.
    pub config: Config,
    /// Its `[sim]` settings.
    pub sim: SimSettings,
}

/// Reads and validates a config file, as [`load`], keeping its table and
/// its `[sim]` settings.
///
/// # Errors
/// As [`load`].
pub fn load_all(path: &Path) -> anyhow::Result<Loaded> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        let origin = config_origin(
            path,
            std::env::var_os("ALLOT_CONF"),
            std::env::var_os("SLURM_CONF"),
        );
        let fix = if e.kind() == std::io::ErrorKind::PermissionDenied {
            "make it readable by this user, or give --config FILE"
        } else if origin == "from --config" {
            "give --config an allot.toml that exists"
        } else {
            "give --config FILE, or set $ALLOT_CONF to the file"
        };
        anyhow::anyhow!("cannot read {} ({origin}): {e}; {fix}", path.display())
    })?;
    let (config, sim) =
        allot_sim::settings::from_toml_str(&text).map_err(|errs| listed(path, &errs))?;
    // Valid TOML: it parsed above.
    let table = toml::from_str(&text).with_context(|| format!("{}", path.display()))?;
    Ok(Loaded { table, config, sim })
}

/// The problems of the file at `path`, one per indented line, under a line
/// naming the file.
fn listed(path: &Path, errs: &ConfigErrors) -> anyhow::Error {
    let n = errs.0.len();
    let mut msg = format!(
        "{}: {n} error{}",
        path.display(),
        if n == 1 { "" } else { "s" }
    );
    for e in &errs.0 {
        for (i, line) in e.to_string().lines().enumerate() {
            msg += if i == 0 { "\n  " } else { "\n    " };
            msg += line;
        }
    }
    anyhow::anyhow!(msg)
}

/// Seconds since the epoch, now.
pub fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// A time on the command line: `now`, epoch seconds, or local
/// `YYYY-MM-DD[THH:MM[:SS]]`.
pub fn parse_when(s: &str) -> anyhow::Result<i64> {
    let t = s.trim();
    if t == "now" {
        return Ok(now());
    }
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return t
            .parse()
            .with_context(|| format!("invalid time {s:?}: epoch seconds out of range"));
    }
    let full = match t.len() {
        10 => format!("{t}T00:00:00"),
        16 => format!("{t}:00"),
        _ => t.to_string(),
    };
    allot_ledger::sacct::parse_time(&full, &jiff::tz::TimeZone::system())
        .ok()
        .flatten()
        .with_context(|| {
            format!("invalid time {s:?}; write now, epoch seconds, or YYYY-MM-DD[THH:MM[:SS]]")
        })
}

/// The cluster's GPUs: `flag` (`--capacity`), else `capacity_gpus` of
/// allot.toml, else every node's GPUs as sinfo says.
///
/// # Errors
/// Neither is set and sinfo cannot say.
pub fn capacity(flag: Option<u64>, config: &Config) -> anyhow::Result<u64> {
    if let Some(c) = flag.or(config.capacity_gpus) {
        return Ok(c);
    }
    allot_sync::slurm::sinfo::total_gpus()
        .context("capacity unknown: set capacity_gpus in allot.toml or pass --capacity")
}

/// `60s`, `5m`, `2h`, `1d`, or a Slurm time (`1:00`, `0-1`), in seconds.
pub fn parse_interval(s: &str) -> anyhow::Result<u64> {
    let t = s.trim();
    let unit = match t.chars().last() {
        Some('s') => Some(1),
        Some('m') => Some(60),
        Some('h') => Some(3600),
        Some('d') => Some(86_400),
        _ => None,
    };
    if let Some(u) = unit {
        let n: u64 = t[..t.len() - 1].parse().with_context(|| {
            format!(
                "invalid time {s:?}; write e.g. 60s, 5m, 1h, 1d or a Slurm time such as 1:00:00"
            )
        })?;
        return n
            .checked_mul(u)
            .with_context(|| format!("invalid time {s:?}: too large"));
    }
    fairshare::duration::parse_slurm_duration(t).with_context(|| {
        format!("invalid time {s:?}; write e.g. 60s, 5m, 1h, 1d or a Slurm time such as 1:00:00")
    })
}

/// Logs to stderr, filtered by `ALLOT_LOG` (default `info`); colours only
/// on a terminal (a log file or journald gets plain text).
pub fn init_logging() {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_env("ALLOT_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
}

/// Pre-order walk, children in name order (as sshare prints).
pub fn walk(tree: &Tree, id: NodeId, f: &mut impl FnMut(NodeId)) {
    f(id);
    for &c in &tree.node(id).children {
        walk(tree, c, f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolution_order() {
        let os = |s: &str| Some(OsString::from(s));
        assert_eq!(
            resolve_config_path(
                Some(Path::new("x.toml")),
                os("/a/allot.toml"),
                os("/s/slurm.conf")
            ),
            PathBuf::from("x.toml")
        );
        assert_eq!(
            resolve_config_path(None, os("/a/b.toml"), os("/s/slurm.conf")),
            PathBuf::from("/a/b.toml")
        );
        assert_eq!(
            resolve_config_path(None, None, os("/s/slurm.conf")),
            PathBuf::from("/s/allot.toml")
        );
        assert_eq!(
            resolve_config_path(None, os(""), os("")),
            PathBuf::from("/etc/slurm/allot.toml")
        );
        assert_eq!(
            resolve_config_path(None, None, None),
            PathBuf::from("/etc/slurm/allot.toml")
        );
        assert_eq!(
            resolve_config_path(None, None, os("slurm.conf")),
            PathBuf::from("allot.toml")
        );
    }

    #[test]
    fn a_config_error_says_where_the_path_came_from() {
        let os = |s: &str| Some(OsString::from(s));
        let at = |p: &str, a, s| config_origin(Path::new(p), a, s);
        assert_eq!(
            at("/a/b.toml", os("/a/b.toml"), os("/s/slurm.conf")),
            "from $ALLOT_CONF"
        );
        assert!(
            at("/s/allot.toml", None, os("/s/slurm.conf")).contains("$SLURM_CONF=/s/slurm.conf")
        );
        assert!(at("/etc/slurm/allot.toml", os(""), None)
            .contains("neither $ALLOT_CONF nor $SLURM_CONF"));
        // An explicit file, also where the environment names another.
        assert_eq!(at("x.toml", os("/a/b.toml"), None), "from --config");
        assert_eq!(
            at("/s/allot.toml", os("/a/b.toml"), os("/s/slurm.conf")),
            "from --config"
        );
        let e = load_all(Path::new("/nonexistent/allot-test.toml"))
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("cannot read /nonexistent/allot-test.toml") && e.contains("give --config"),
            "{e}"
        );
    }

    #[test]
    fn intervals() {
        assert_eq!(parse_interval("60s").unwrap(), 60);
        assert_eq!(parse_interval("5m").unwrap(), 300);
        assert_eq!(parse_interval("1h").unwrap(), 3600);
        assert_eq!(parse_interval("1:00:00").unwrap(), 3600);
        assert!(parse_interval("soon")
            .unwrap_err()
            .to_string()
            .contains("60s"));
    }
}
