//! `allot.toml`: parsing and validation.
//!
//! ```toml
//! window = "7-0"                 # Slurm time format; default 7 days
//! capacity_gpus = 64             # optional; default: the cluster's GPU count
//! [charge]                       # TRES billing weights; default { "gres/gpu" = 1.0 }
//! "gres/gpu" = 1.0
//! [contract]
//! default_min_runtime = "1:00:00"
//! max_min_runtime = "8:00:00"
//! charge_min_runtime = true
//! requeue_period = "30:00"       # optional: past its minimum runtime a job is preempted
//! requeue_window = "5:00"        #   only in the first 5 min of each 30 min of running time
//! [contract.partition.debug]
//! default_min_runtime = "0"      # debug jobs are unallocated unless they say otherwise
//! [priority]
//! age_weight = 1000
//! max_age = "7-0"
//! nice_weight = 1
//! short_max_gpus = 2             # jobs of <= 2 GPUs and a time limit <= short_max_time sort first
//! short_max_time = "1:00:00"
//! [ledger]
//! path = "/var/lib/allot/ledger.sqlite"
//! [sync]
//! interval = "1:00"
//! [server]                       # the sidecar's page and API, for users' `allot` commands
//! url = "http://slurm-head:9817"
//! munge_socket = "/run/munge/munge.socket.2"
//! [tree.nlp]                     # a node: `share`, optional `accounts`, child tables
//! share = 60
//! [tree.nlp.a1]
//! share = 35
//! accounts = ["a1", "a1-interactive"]
//! ```
//!
//! Every key is documented in `docs/configuration.md`. Validation collects
//! every problem rather than stopping at the first; each message names the
//! key or node path and the fix. Unknown keys are errors everywhere.

use std::collections::BTreeMap;

use serde::Deserialize;

// The errors sit in their own module, below every other (charge and tree
// use them too); re-exported here, where they were before.
pub use crate::error::{ConfigError, ConfigErrors};

use crate::charge::ChargeWeights;
use crate::contract::ContractPolicy;
use crate::duration::{parse_slurm_duration, SlurmDuration};
use crate::priority::{PriorityWeights, MAX_AGE_WEIGHT};
use crate::tree::{NodeSpec, Tree, MAX_SHARE};

/// Longest sliding window: 100 x 365 days, in seconds.
pub const MAX_WINDOW: u64 = 100 * 365 * 86_400;

/// Default sliding window: 7 days, in seconds.
pub const DEFAULT_WINDOW: u64 = 7 * 86_400;
/// Default ledger location.
pub const DEFAULT_LEDGER_PATH: &str = "/var/lib/allot/ledger.sqlite";
/// Default interval between two `allot sync` passes, in seconds.
pub const DEFAULT_SYNC_INTERVAL: u64 = 60;

/// A validated `allot.toml`.
#[derive(Debug, Clone)]
pub struct Config {
    /// Length of the fair-share window, seconds (> 0).
    pub window: u64,
    /// Cluster capacity in GPUs, if configured (else the plugins use the
    /// GPU GRES of the nodes).
    pub capacity_gpus: Option<u64>,
    /// TRES weights that turn a job's resources into charge units per
    /// second ([`crate::charge`]: counted in milli-units).
    pub charge: ChargeWeights,
    /// Minimum-runtime contract settings.
    pub contract: ContractPolicy,
    /// Weights of the within-account priority terms.
    pub priority: PriorityWeights,
    /// Ledger path (`[ledger] path`); the engine never opens it.
    pub ledger_path: String,
    /// Seconds between sync passes (`[sync] interval`); the plugins
    /// rebuild their engine snapshot from the ledger on the same interval.
    pub sync_interval: u64,
    /// Seconds a preempted job gets between SIGTERM and requeue
    /// (`[preempt] grace_time`, Slurm's GraceTime; default 0).
    pub preempt_grace_time: u64,
    /// The sidecar's address for users' commands (`[server] url`,
    /// `http://HOST:PORT` without a path): `allot explain` and `allot
    /// report` ask it when the ledger is not readable. `None`: not set.
    pub server_url: Option<String>,
    /// The munge socket that users' commands and the sidecar use to
    /// attribute a request to a user (`[server] munge_socket`; `None`:
    /// munge's own default).
    pub munge_socket: Option<String>,
    /// The org tree.
    pub tree: Tree,
    /// `[sim]` as written (how `allot sim` replays traces): the engine and
    /// the plugins never read it; the simulator parses and validates it
    /// (`allot_sim::SimSettings::from_config`). `None` without a `[sim]`.
    pub sim: Option<toml::Value>,
}

impl Config {
    /// Parses and validates the text of an `allot.toml`.
    ///
    /// # Errors
    /// [`ConfigErrors`] with every problem found: TOML syntax, unknown keys,
    /// wrong types, unparsable durations, window 0, default minimum runtime
    /// above the cap, share missing/negative/fractional, all siblings at
    /// share 0, empty subtrees or `accounts`, an account in two leaves.
    pub fn from_toml_str(text: &str) -> Result<Config, ConfigErrors> {
        let raw: RawConfig = toml::from_str(text)
            .map_err(|e| ConfigErrors(vec![ConfigError::Syntax(e.to_string())]))?;
        Config::from_raw(raw)
    }

    /// The same from a file already read into a table (which `allot sim
    /// --sweep` patches before it parses the file again).
    ///
    /// # Errors
    /// As [`Config::from_toml_str`] (a wrong type or an unknown key is
    /// reported without a line number).
    pub fn from_toml_table(table: toml::Table) -> Result<Config, ConfigErrors> {
        let raw: RawConfig = toml::Value::Table(table)
            .try_into()
            .map_err(|e: toml::de::Error| ConfigErrors(vec![ConfigError::Syntax(e.to_string())]))?;
        Config::from_raw(raw)
    }

    fn from_raw(raw: RawConfig) -> Result<Config, ConfigErrors> {
        let mut errors = Vec::new();
        let mut dur = |path: &str, v: &Option<toml::Value>, default: u64| -> u64 {
            match v {
                None => default,
                Some(v) => duration_value(path, v).unwrap_or_else(|e| {
                    errors.push(e);
                    default
                }),
            }
        };
        let window = dur("window", &raw.window, DEFAULT_WINDOW);
        let c = &raw.contract;
        let mut contract = ContractPolicy {
            default_min_runtime: dur("contract.default_min_runtime", &c.default_min_runtime, 3600),
            max_min_runtime: dur("contract.max_min_runtime", &c.max_min_runtime, 8 * 3600),
            charge_min_runtime: c.charge_min_runtime.unwrap_or(true),
            partition_default: BTreeMap::new(),
            requeue: crate::contract::RequeuePoints {
                period: dur("contract.requeue_period", &c.requeue_period, 0),
                window: dur("contract.requeue_window", &c.requeue_window, 0),
            },
            max_requeues: crate::contract::DEFAULT_MAX_REQUEUES,
        };
        for (name, p) in &c.partition {
            let path = format!("contract.partition.{name}.default_min_runtime");
            if let Some(v) = &p.default_min_runtime {
                let secs = dur(&path, &Some(v.clone()), 0);
                contract.partition_default.insert(name.clone(), secs);
            }
        }
        let p = &raw.priority;
        let priority = PriorityWeights {
            age_weight: p.age_weight.unwrap_or(1000),
            max_age: dur("priority.max_age", &p.max_age, 7 * 86_400),
            nice_weight: p.nice_weight.unwrap_or(1),
            short_max_gpus: p.short_max_gpus.unwrap_or(0),
            short_max_time: dur("priority.short_max_time", &p.short_max_time, 3600),
            sweep_jobs: p.sweep_jobs.unwrap_or(0),
            sweep_window: dur("priority.sweep_window", &p.sweep_window, 900),
        };
        let sync_interval = dur("sync.interval", &raw.sync.interval, DEFAULT_SYNC_INTERVAL);
        let preempt_grace_time = dur("preempt.grace_time", &raw.preempt.grace_time, 0);
        // The debug lane's settings: debug work no longer has a place
        // above other teams (crate::owed), so they set nothing.
        for (path, set) in [
            ("priority.short_allowance", p.short_allowance.is_some()),
            ("priority.short_yield", p.short_yield.is_some()),
            ("preempt.short_wait", raw.preempt.short_wait.is_some()),
        ] {
            if set {
                errors.push(ConfigError::Invalid {
                    path: path.into(),
                    message: "is gone: debug work orders only its own team's jobs now and has no lane above other teams (docs/fair-share.md, the owed band); delete the line".into(),
                });
            }
        }
        if let Some(v) = &c.max_requeues {
            match v.as_integer().and_then(|n| u32::try_from(n).ok()) {
                Some(n) => contract.max_requeues = n,
                None => errors.push(ConfigError::Invalid {
                    path: "contract.max_requeues".into(),
                    message: format!(
                        "{v} is not a whole number of requeues, 0 or more; write e.g. max_requeues = 3"
                    ),
                }),
            }
        }

        if raw.window.is_some() && window == 0 {
            errors.push(ConfigError::WindowZero);
        }
        // Window arithmetic is in i64 seconds since the epoch: a window
        // reaching before 1970 many times over is a typo.
        if window > MAX_WINDOW {
            errors.push(ConfigError::Invalid {
                path: "window".into(),
                message: format!(
                    "{} is too long (at most 100 years, 36500-0); the usual is 7-0 to 30-0",
                    crate::duration::format_slurm_duration(window)
                ),
            });
        }
        if raw
            .ledger
            .path
            .as_deref()
            .is_some_and(|p| p.trim().is_empty())
        {
            errors.push(ConfigError::Invalid {
                path: "ledger.path".into(),
                message: format!(
                    "empty; give the SQLite file's absolute path, or remove the key for {DEFAULT_LEDGER_PATH}"
                ),
            });
        }
        check_contract(&contract, &mut errors);
        if priority.age_weight > MAX_AGE_WEIGHT {
            errors.push(ConfigError::Invalid {
                path: "priority.age_weight".into(),
                message: format!(
                    "{} is too large (at most {MAX_AGE_WEIGHT})",
                    priority.age_weight
                ),
            });
        }
        if priority.max_age == 0 {
            errors.push(ConfigError::Invalid {
                path: "priority.max_age".into(),
                message: "must be longer than 0; write e.g. max_age = \"7-0\"".into(),
            });
        }
        if priority.short_max_gpus > 0 && priority.short_max_time == 0 {
            errors.push(ConfigError::Invalid {
                path: "priority.short_max_time".into(),
                message: "must be longer than 0 while short_max_gpus is set; write e.g. short_max_time = \"1:00:00\", or short_max_gpus = 0 for no short band".into(),
            });
        }
        if priority.sweep_jobs > 0 && priority.short_max_gpus == 0 {
            errors.push(ConfigError::Invalid {
                path: "priority.sweep_jobs".into(),
                message: "counts jobs of the short band, which is off; set short_max_gpus (e.g. 2) or remove sweep_jobs".into(),
            });
        }
        if priority.sweep_jobs > 0 && priority.sweep_window == 0 {
            errors.push(ConfigError::Invalid {
                path: "priority.sweep_window".into(),
                message: "must be longer than 0 while sweep_jobs is set; write e.g. sweep_window = \"15:00\", or sweep_jobs = 0 for no sweeps".into(),
            });
        }
        if sync_interval == 0 {
            errors.push(ConfigError::Invalid {
                path: "sync.interval".into(),
                message: "must be longer than 0; write e.g. interval = \"1:00\" (one minute)"
                    .into(),
            });
        }
        if raw.capacity_gpus == Some(0) {
            errors.push(ConfigError::Invalid {
                path: "capacity_gpus".into(),
                message: "must be > 0; remove the key to use the cluster's GPU count".into(),
            });
        }
        let server_url = raw
            .server
            .url
            .as_deref()
            .and_then(|u| server_url(u).map_err(|e| errors.push(e)).ok());
        if raw.server.munge_socket.as_deref() == Some("") {
            errors.push(ConfigError::Invalid {
                path: "server.munge_socket".into(),
                message: "is empty; remove the key for munge's default socket or give its path"
                    .into(),
            });
        }
        let charge = match &raw.charge {
            None => ChargeWeights::default(),
            Some(w) => ChargeWeights::new(w.clone()).unwrap_or_else(|mut e| {
                errors.append(&mut e);
                ChargeWeights::default()
            }),
        };

        let top = match &raw.tree {
            None => {
                errors.push(ConfigError::EmptyTree);
                Vec::new()
            }
            Some(t) => parse_children("tree", t, &mut errors),
        };
        let tree = if raw.tree.is_some() {
            match Tree::build(&top) {
                Ok(t) => Some(t),
                Err(mut e) => {
                    errors.append(&mut e);
                    None
                }
            }
        } else {
            None
        };
        match tree {
            Some(tree) if errors.is_empty() => Ok(Config {
                window,
                capacity_gpus: raw.capacity_gpus,
                charge,
                contract,
                priority,
                ledger_path: raw
                    .ledger
                    .path
                    .unwrap_or_else(|| DEFAULT_LEDGER_PATH.into()),
                sync_interval,
                preempt_grace_time,
                server_url,
                munge_socket: raw.server.munge_socket,
                tree,
                sim: raw.sim,
            }),
            _ => Err(ConfigErrors(errors)),
        }
    }

    /// A config with every default and the given tree (for the simulator
    /// and tests).
    pub fn with_tree(tree: Tree) -> Config {
        Config {
            window: DEFAULT_WINDOW,
            capacity_gpus: None,
            charge: ChargeWeights::default(),
            contract: ContractPolicy::default(),
            priority: PriorityWeights::default(),
            ledger_path: DEFAULT_LEDGER_PATH.into(),
            sync_interval: DEFAULT_SYNC_INTERVAL,
            preempt_grace_time: 0,
            server_url: None,
            munge_socket: None,
            tree,
            sim: None,
        }
    }
}

fn check_contract(c: &ContractPolicy, errors: &mut Vec<ConfigError>) {
    let cap = c.max_min_runtime;
    let mut check = |path: String, v: u64| {
        if v > cap {
            errors.push(ConfigError::MinAboveMax {
                path,
                min: SlurmDuration(v).to_string(),
                max: SlurmDuration(cap).to_string(),
            });
        }
    };
    check("contract.default_min_runtime".into(), c.default_min_runtime);
    for (name, &v) in &c.partition_default {
        check(format!("contract.partition.{name}.default_min_runtime"), v);
    }
    let r = c.requeue;
    let message = if r.period == 0 && r.window > 0 {
        Some("requeue_window needs requeue_period; set requeue_period (e.g. \"30:00\", how often jobs checkpoint) or drop requeue_window")
    } else if r.period > 0 && (r.window == 0 || r.window >= r.period) {
        Some("must be longer than 0 and shorter than requeue_period (e.g. \"5:00\" of \"30:00\"); to let jobs be preempted at any second, drop requeue_period")
    } else {
        None
    };
    if let Some(message) = message {
        errors.push(ConfigError::Invalid {
            path: "contract.requeue_window".into(),
            message: message.into(),
        });
    }
}

/// A Slurm time string; anything else is an error that says what to write.
fn duration_value(path: &str, v: &toml::Value) -> Result<u64, ConfigError> {
    match v {
        toml::Value::String(s) => parse_slurm_duration(s).map_err(|source| ConfigError::Duration {
            path: path.into(),
            source,
        }),
        other => Err(ConfigError::WrongType {
            path: path.into(),
            expected: "a Slurm time string such as \"8:00:00\" or \"7-0\"",
            found: describe(other),
        }),
    }
}

fn describe(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => format!("string {s:?}"),
        toml::Value::Table(_) => "a table".into(),
        other => format!("{} {other}", other.type_str()),
    }
}

/// Parses the child tables of a tree node (or of `[tree]` itself).
fn parse_children(path: &str, table: &toml::Table, errors: &mut Vec<ConfigError>) -> Vec<NodeSpec> {
    let mut children = Vec::new();
    for (key, value) in table {
        match value {
            toml::Value::Table(t) => {
                let child_path = format!("{path}.{key}");
                if key == "share" || key == "accounts" {
                    errors.push(ConfigError::Invalid {
                        path: child_path,
                        message: "`share` and `accounts` are keys of a node, not node names; rename the table"
                            .into(),
                    });
                    continue;
                }
                children.push(parse_node(&child_path, key, t, errors));
            }
            _ if path == "tree" => errors.push(ConfigError::Invalid {
                path: format!("tree.{key}"),
                message: "the root takes no keys; every entry under [tree] is a node table such as [tree.team]"
                    .into(),
            }),
            // `share` and `accounts` of the node itself: parsed by parse_node.
            _ if key == "share" || key == "accounts" => {}
            _ => errors.push(ConfigError::UnknownKey { path: path.into(), key: key.clone() }),
        }
    }
    children
}

fn parse_node(
    path: &str,
    name: &str,
    table: &toml::Table,
    errors: &mut Vec<ConfigError>,
) -> NodeSpec {
    let share = match table.get("share") {
        None => {
            errors.push(ConfigError::ShareMissing { path: path.into() });
            1
        }
        Some(v) => share_value(path, v).unwrap_or_else(|e| {
            errors.push(e);
            1
        }),
    };
    let accounts = table.get("accounts").map(|v| match v {
        toml::Value::Array(items) => items
            .iter()
            .filter_map(|i| match i {
                toml::Value::String(s) => Some(s.clone()),
                other => {
                    errors.push(ConfigError::WrongType {
                        path: format!("{path}.accounts"),
                        expected: "a list of Slurm account names such as [\"a1\", \"a1-dev\"]",
                        found: describe(other),
                    });
                    None
                }
            })
            .collect(),
        other => {
            errors.push(ConfigError::WrongType {
                path: format!("{path}.accounts"),
                expected: "a list of Slurm account names such as [\"a1\", \"a1-dev\"]",
                found: describe(other),
            });
            vec![name.to_string()]
        }
    });
    let children = parse_children(path, table, errors);
    NodeSpec {
        name: name.to_string(),
        share,
        accounts,
        children,
    }
}

fn share_value(path: &str, v: &toml::Value) -> Result<u32, ConfigError> {
    let path = path.to_string();
    match v {
        toml::Value::Integer(i) if *i < 0 => Err(ConfigError::ShareNegative {
            path,
            found: i.to_string(),
        }),
        toml::Value::Integer(i) if *i > i64::from(MAX_SHARE) => {
            Err(ConfigError::ShareTooLarge { path, found: *i })
        }
        toml::Value::Integer(i) => Ok(*i as u32),
        toml::Value::Float(f) if *f < 0.0 => Err(ConfigError::ShareNegative {
            path,
            found: f.to_string(),
        }),
        toml::Value::Float(f) if f.fract() == 0.0 && *f <= f64::from(MAX_SHARE) => Ok(*f as u32),
        toml::Value::Float(f) => Err(ConfigError::ShareNotInteger {
            path,
            found: f.to_string(),
        }),
        other => Err(ConfigError::ShareNotInteger {
            path,
            found: describe(other),
        }),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    window: Option<toml::Value>,
    capacity_gpus: Option<u64>,
    charge: Option<BTreeMap<String, f64>>,
    #[serde(default)]
    contract: RawContract,
    #[serde(default)]
    priority: RawPriority,
    #[serde(default)]
    ledger: RawLedger,
    #[serde(default)]
    sync: RawSync,
    #[serde(default)]
    preempt: RawPreempt,
    #[serde(default)]
    server: RawServer,
    sim: Option<toml::Value>,
    tree: Option<toml::Table>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawContract {
    default_min_runtime: Option<toml::Value>,
    max_min_runtime: Option<toml::Value>,
    charge_min_runtime: Option<bool>,
    requeue_period: Option<toml::Value>,
    requeue_window: Option<toml::Value>,
    max_requeues: Option<toml::Value>,
    #[serde(default)]
    partition: BTreeMap<String, RawPartition>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawPartition {
    default_min_runtime: Option<toml::Value>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawPriority {
    age_weight: Option<u32>,
    max_age: Option<toml::Value>,
    nice_weight: Option<u32>,
    short_max_gpus: Option<u32>,
    short_max_time: Option<toml::Value>,
    sweep_jobs: Option<u32>,
    sweep_window: Option<toml::Value>,
    short_allowance: Option<toml::Value>,
    short_yield: Option<toml::Value>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawLedger {
    path: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawSync {
    interval: Option<toml::Value>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawServer {
    url: Option<String>,
    munge_socket: Option<String>,
}

/// `[server] url`: `http://HOST:PORT` (no path, no https: the sidecar
/// serves plain HTTP; put a TLS proxy in front and name it here only if it
/// speaks plain HTTP to users).
fn server_url(url: &str) -> Result<String, ConfigError> {
    let bad = |why: &str| {
        ConfigError::Invalid {
        path: "server.url".into(),
        message: format!(
            "{url:?} {why}; write the sidecar's --listen address as url = \"http://HOST:PORT\", e.g. \"http://slurm-head:9817\""
        ),
    }
    };
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| bad("does not start with http://"))?;
    let hostport = rest.strip_suffix('/').unwrap_or(rest);
    if hostport.contains('/') || hostport.contains('?') {
        return Err(bad("has a path"));
    }
    let (host, port) = hostport
        .rsplit_once(':')
        .ok_or_else(|| bad("has no :PORT"))?;
    if hostport.contains('#') {
        return Err(bad("has a fragment"));
    }
    if host.contains('@') {
        return Err(bad("has a user name or password (the sidecar takes none)"));
    }
    let bracketed = host.starts_with('[') && host.ends_with(']');
    if host.is_empty()
        || !(bracketed
            || host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-'))
    {
        return Err(bad("has no valid host name or address"));
    }
    if port.parse::<u16>().map_or(true, |p| p == 0) {
        return Err(bad("has no valid port"));
    }
    Ok(format!("http://{hostport}"))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawPreempt {
    grace_time: Option<toml::Value>,
    short_wait: Option<toml::Value>,
}

#[cfg(test)]
mod tests;
