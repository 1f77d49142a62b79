//! The validators of `[sim.accounts]` and `[[sim.rule]]`: trace names to
//! Slurm accounts, and the contract rules (a fixed minimum runtime is
//! checked against the engine's `contract.max_min_runtime`).

use fairshare::config::{Config, ConfigError};
use fairshare::duration::format_slurm_duration;

use super::raw::{duration, RawSim};
use super::*;

/// `[sim.accounts]`: trace names (lower-cased) to Slurm accounts.
pub(super) fn accounts(r: &RawSim, c: &Config, s: &mut SimSettings, e: &mut Vec<ConfigError>) {
    for (name, account) in &r.accounts {
        // Slurm stores account names lower-cased, and trace names are
        // matched lower-cased: an upper-case account would match nothing.
        if account.is_empty() || *account != account.to_ascii_lowercase() {
            e.push(ConfigError::Invalid {
                path: format!("sim.accounts.{name}"),
                message: format!(
                    "{account:?} is not a Slurm account name; write it in lower case, as slurmdbd stores it"
                ),
            });
            continue;
        }
        // Mapped onto an account the tree lacks, its jobs would be left out
        // as that account's, under a name the trace never used.
        if let Some(err) = not_in_tree(
            c,
            account,
            format!("sim.accounts.{name}"),
            &format!("map {name:?} onto one of them"),
        ) {
            e.push(err);
            continue;
        }
        s.accounts
            .insert(name.to_ascii_lowercase(), account.clone());
    }
}

/// `[[sim.rule]]`: each rule's conditions and what it sets.
pub(super) fn rules(r: &RawSim, c: &Config, s: &mut SimSettings, errors: &mut Vec<ConfigError>) {
    let max_min_runtime = c.contract.max_min_runtime;
    for (i, r) in r.rule.iter().enumerate() {
        let path = format!("sim.rule[{i}]");
        let mut d = |key: &str, v: &Option<toml::Value>| {
            v.as_ref()
                .and_then(|v| duration(&format!("{path}.{key}"), v, errors))
        };
        let min_duration = d("min_duration", &r.min_duration);
        let max_duration = d("max_duration", &r.max_duration);
        let min_runtime = match &r.min_runtime {
            None => None,
            Some(toml::Value::String(t)) if t == "runtime" => Some(RuleMinRuntime::Runtime),
            Some(v) => d("min_runtime", &Some(v.clone())).map(RuleMinRuntime::Fixed),
        };
        if let Some(RuleMinRuntime::Fixed(m)) = min_runtime {
            if m > max_min_runtime {
                errors.push(ConfigError::MinAboveMax {
                    path: format!("{path}.min_runtime"),
                    min: format_slurm_duration(m),
                    max: format_slurm_duration(max_min_runtime),
                });
            }
        }
        // A rule whose bounds exclude every job is a typo, not a rule.
        if let (Some(lo), Some(hi)) = (r.min_gpus, r.max_gpus) {
            if lo > hi {
                errors.push(ConfigError::Invalid {
                    path: format!("{path}.min_gpus"),
                    message: format!(
                        "{lo} is above max_gpus = {hi}: the rule matches no job; swap or fix them"
                    ),
                });
            }
        }
        if let (Some(lo), Some(hi)) = (min_duration, max_duration) {
            if lo > hi {
                errors.push(ConfigError::Invalid {
                    path: format!("{path}.min_duration"),
                    message: format!(
                        "{} is above max_duration = {}: the rule matches no job; swap or fix them",
                        format_slurm_duration(lo),
                        format_slurm_duration(hi)
                    ),
                });
            }
        }
        // A team the tree lacks matches no job: a typo, silently a rule
        // that decides nothing.
        for t in &r.teams {
            errors.extend(not_in_tree(
                c,
                t,
                format!("{path}.teams"),
                "rules match jobs by the Slurm account they are charged to (after [sim.accounts])",
            ));
        }
        if min_runtime.is_none() && r.resumable.is_none() {
            errors.push(ConfigError::Invalid {
                path,
                message: "sets nothing; give it min_runtime = \"...\" (or \"runtime\") and/or resumable = true|false"
                    .into(),
            });
            continue;
        }
        s.rules.push(ContractRule {
            name: r.name.clone().unwrap_or_else(|| format!("rule {}", i + 1)),
            teams: r.teams.clone(),
            partitions: r.partitions.clone(),
            min_gpus: r.min_gpus,
            max_gpus: r.max_gpus,
            min_duration,
            max_duration,
            min_runtime,
            resumable: r.resumable,
        });
    }
}

/// The error at `path` for an `account` the tree lacks, naming some of its
/// accounts and `fix`; `None` when the tree has it.
fn not_in_tree(c: &Config, account: &str, path: String, fix: &str) -> Option<ConfigError> {
    c.tree
        .leaf_of_account(account)
        .is_none()
        .then(|| ConfigError::Invalid {
            path,
            message: format!(
                "{account:?} is not an account of the tree ({}); {fix}",
                some_accounts(c)
            ),
        })
}

/// The tree's accounts for a message: sorted, the first eight, and how
/// many more.
fn some_accounts(c: &Config) -> String {
    let mut all: Vec<&str> = c.tree.accounts().map(|(a, _)| a).collect();
    all.sort_unstable();
    let more = all.len().saturating_sub(8);
    let mut s = all[..all.len().min(8)].join(", ");
    if more > 0 {
        s += &format!(" and {more} more");
    }
    s
}
