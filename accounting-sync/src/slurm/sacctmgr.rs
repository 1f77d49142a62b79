//! sacctmgr: slurmdbd's accounts, associations and users.
//!
//! - The org tree's sync (`allot tree`): each account of a cluster, its
//!   parent, Fairshare and description ([`accounts`], read by
//!   [`parse_accounts`]), and the changes `allot tree apply` makes
//!   ([`modify`]);
//! - who is who for the sidecar's privacy: each user's accounts
//!   ([`associations`]) and the users of AdminLevel Operator or
//!   Administrator ([`operators`]).

use std::collections::{BTreeMap, BTreeSet};

use super::command::Slurm;

/// One Slurm account as slurmdbd holds it for a cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmAccount {
    /// Account name.
    pub name: String,
    /// Parent account (`None` for `root`).
    pub parent: Option<String>,
    /// `Fairshare` of the account's association; `None` for `parent`.
    pub fairshare: Option<u32>,
    /// Description.
    pub description: String,
}

/// Every account of `cluster` with its parent, Fairshare and description.
///
/// # Errors
/// sacctmgr cannot run or fails; a row that cannot be read.
pub fn accounts(cluster: &str) -> anyhow::Result<Vec<SlurmAccount>> {
    let assocs = Slurm::new("sacctmgr")
        .args(["-n", "-P", "show", "assoc"])
        .arg(format!("cluster={cluster}"))
        .arg("format=account,parentname,user,fairshare")
        .output()?;
    let descs = Slurm::new("sacctmgr")
        .args(["-n", "-P", "show", "account", "format=account,description"])
        .output()?;
    parse_accounts(&assocs, &descs).map_err(anyhow::Error::msg)
}

/// Runs `sacctmgr ARGS` (a change: `-i add account ...`, `-i modify ...`).
///
/// # Errors
/// sacctmgr cannot run or fails.
pub fn modify(args: &[String]) -> anyhow::Result<()> {
    Slurm::new("sacctmgr")
        .args(args.iter().cloned())
        .output()
        .map(drop)
}

/// Each user's accounts (`sacctmgr -n -P show assoc format=user,account`;
/// account rows, without a user, left out).
///
/// # Errors
/// sacctmgr cannot run or fails.
pub fn associations() -> anyhow::Result<BTreeMap<String, BTreeSet<String>>> {
    let text = Slurm::new("sacctmgr")
        .args(["-n", "-P", "show", "assoc", "format=user,account"])
        .output()?;
    let mut accounts: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for l in text.lines() {
        if let Some((u, a)) = l.split_once('|') {
            if !u.is_empty() {
                accounts
                    .entry(u.to_string())
                    .or_default()
                    .insert(a.to_string());
            }
        }
    }
    Ok(accounts)
}

/// The users of AdminLevel Operator or Administrator
/// (`sacctmgr -n -P show user format=user,adminlevel`).
///
/// # Errors
/// sacctmgr cannot run or fails.
pub fn operators() -> anyhow::Result<BTreeSet<String>> {
    let text = Slurm::new("sacctmgr")
        .args(["-n", "-P", "show", "user", "format=user,adminlevel"])
        .output()?;
    Ok(text
        .lines()
        .filter_map(|l| l.split_once('|'))
        .filter(|(_, level)| matches!(level.trim(), "Administrator" | "Operator"))
        .map(|(u, _)| u.to_string())
        .collect())
}

/// Parses `sacctmgr -n -P show assoc format=account,parentname,user,fairshare`
/// (account rows only: the user column empty) joined with descriptions
/// from `sacctmgr -n -P show account format=account,description`.
///
/// # Errors
/// A row with the wrong number of fields (the line is named).
pub fn parse_accounts(assocs: &str, descriptions: &str) -> Result<Vec<SlurmAccount>, String> {
    let mut desc = BTreeMap::new();
    for (i, l) in descriptions
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let (a, d) = l.split_once('|').ok_or_else(|| {
            format!(
                "sacctmgr show account, line {}: expected account|description, got {l:?}",
                i + 1
            )
        })?;
        desc.insert(a.to_string(), d.to_string());
    }
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, l) in assocs
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let f: Vec<&str> = l.split('|').collect();
        if f.len() < 4 {
            return Err(format!("sacctmgr show assoc, line {}: expected account|parentname|user|fairshare, got {l:?}", i + 1));
        }
        if !f[2].is_empty() || !seen.insert(f[0].to_string()) {
            continue;
        }
        out.push(SlurmAccount {
            name: f[0].to_string(),
            parent: (!f[1].is_empty()).then(|| f[1].to_string()),
            fairshare: f[3].parse().ok(),
            description: desc.get(f[0]).cloned().unwrap_or_default(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sacctmgr_rows() {
        let assocs = "root|||\nroot||root|1\nnlp|root||60\na1|nlp||35\na1||alice|1\n";
        let descs = "root|default root account\nnlp|allot: tree.nlp\na1|allot: tree.nlp.a1\n";
        let accts = parse_accounts(assocs, descs).unwrap();
        assert_eq!(accts.len(), 3);
        assert_eq!(
            accts[1],
            SlurmAccount {
                name: "nlp".into(),
                parent: Some("root".into()),
                fairshare: Some(60),
                description: "allot: tree.nlp".into()
            }
        );
        assert_eq!(accts[0].fairshare, None);
        assert!(parse_accounts("x|y\n", "").unwrap_err().contains("line 1"));
    }
}
