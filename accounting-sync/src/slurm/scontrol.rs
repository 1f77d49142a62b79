//! scontrol: slurmctld's configuration, a node's record, and the two
//! actions allot takes (drain a node, requeue a job).
//!
//! - `scontrol show config` ([`show_config`]): `PrivateData`
//!   ([`ShowConfig::private_data`]), `SlurmUser` ([`ShowConfig::slurm_user`]),
//!   `ClusterName` ([`ShowConfig::cluster_name`]);
//! - `scontrol show node -o NODE` ([`show_node`], read by
//!   [`parse_show_node`]): the GPUs it expects and whether it drains;
//! - `scontrol update nodename=NODE state=drain reason=...` ([`drain_node`])
//!   and `scontrol requeue JOB` ([`requeue`]).

use std::time::Duration;

use super::command::Slurm;
use super::gpus;

/// The output of `scontrol show config` (`Key = value` lines).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShowConfig(pub String);

/// `scontrol show config` now.
///
/// # Errors
/// scontrol cannot run or fails.
pub fn show_config() -> anyhow::Result<ShowConfig> {
    Slurm::new("scontrol")
        .args(["show", "config"])
        .output()
        .map(ShowConfig)
}

/// `scontrol show config` within `limit` (where the answer only decides
/// something small, such as the ledger file's owner).
///
/// # Errors
/// scontrol cannot run, fails or takes longer.
pub fn show_config_within(limit: Duration) -> anyhow::Result<ShowConfig> {
    Slurm::new("scontrol")
        .args(["show", "config"])
        .timeout(limit)
        .output()
        .map(ShowConfig)
}

impl ShowConfig {
    /// The value of `key` (`SlurmUser = slurm(64030)` gives
    /// `slurm(64030)`), trimmed.
    pub fn value(&self, key: &str) -> Option<&str> {
        self.0.lines().find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == key).then(|| v.trim())
        })
    }

    /// `PrivateData` (none set when absent).
    pub fn private_data(&self) -> PrivateData {
        self.value("PrivateData")
            .map(PrivateData::parse)
            .unwrap_or_default()
    }

    /// `SlurmUser` as name and uid (`slurm(64030)`); the uid `None` when
    /// the value has none.
    pub fn slurm_user(&self) -> Option<(String, Option<u32>)> {
        let v = self.value("SlurmUser")?;
        let (name, rest) = v.split_once('(').unwrap_or((v, ""));
        Some((name.to_string(), rest.trim_end_matches(')').parse().ok()))
    }

    /// `ClusterName`, unless empty.
    pub fn cluster_name(&self) -> Option<&str> {
        self.value("ClusterName").filter(|c| !c.is_empty())
    }
}

/// Slurm's `PrivateData` flags that allot honours.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PrivateData {
    /// `jobs`.
    pub jobs: bool,
    /// `usage`.
    pub usage: bool,
    /// `accounts`.
    pub accounts: bool,
    /// `users`.
    pub users: bool,
}

impl PrivateData {
    /// From the value of `PrivateData` in `scontrol show config`
    /// (`jobs,usage`, `none`); flags allot does not use are ignored.
    pub fn parse(value: &str) -> PrivateData {
        let mut p = PrivateData::default();
        for f in value.split(',').map(|f| f.trim().to_ascii_lowercase()) {
            match f.as_str() {
                "jobs" => p.jobs = true,
                "usage" => p.usage = true,
                "accounts" => p.accounts = true,
                "users" => p.users = true,
                _ => {}
            }
        }
        p
    }

    /// The flags as Slurm writes them (`none` when none is set).
    pub fn describe(&self) -> String {
        let on: Vec<&str> = [
            (self.accounts, "accounts"),
            (self.jobs, "jobs"),
            (self.usage, "usage"),
            (self.users, "users"),
        ]
        .into_iter()
        .filter_map(|(b, n)| b.then_some(n))
        .collect();
        if on.is_empty() {
            "none".into()
        } else {
            on.join(",")
        }
    }
}

/// The fields of `scontrol show node -o` that `allot health` needs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeInfo {
    /// GPUs of `Gres=` ([`gpus::in_gres`]), `None` without any.
    pub gres_gpus: Option<u32>,
    /// `State=`, e.g. `IDLE+DRAIN`, `MIXED`.
    pub state: String,
}

impl NodeInfo {
    /// True when the node is already draining or drained.
    pub fn draining(&self) -> bool {
        self.state.contains("DRAIN")
    }
}

/// Parses one line of `scontrol show node -o`.
pub fn parse_show_node(line: &str) -> NodeInfo {
    let mut info = NodeInfo::default();
    for kv in line.split_whitespace() {
        if let Some(v) = kv.strip_prefix("Gres=") {
            info.gres_gpus = gpus::in_gres(v).map(|n| u32::try_from(n).unwrap_or(u32::MAX));
        } else if let Some(v) = kv.strip_prefix("State=") {
            info.state = v.to_string();
        }
    }
    info
}

/// `scontrol show node -o NODE`.
///
/// # Errors
/// A message with scontrol's error when it cannot run or fails.
pub fn show_node(node: &str) -> Result<NodeInfo, String> {
    Slurm::new("scontrol")
        .args(["show", "node", "-o", node])
        .output()
        .map(|text| parse_show_node(&text))
        .map_err(|e| e.to_string())
}

/// Drains `node` with `reason`: `scontrol update nodename=NODE state=drain
/// reason=REASON`.
///
/// # Errors
/// scontrol's message when it fails.
pub fn drain_node(node: &str, reason: &str) -> Result<(), String> {
    Slurm::new("scontrol")
        .args([
            "update".to_string(),
            format!("nodename={node}"),
            "state=drain".to_string(),
            format!("reason={reason}"),
        ])
        .output()
        .map(drop)
        .map_err(|e| e.to_string())
}

/// Requeues `job`: `scontrol requeue JOB`.
///
/// # Errors
/// scontrol cannot run or fails (the job ended, or it is `--no-requeue`).
pub fn requeue(job: u64) -> anyhow::Result<()> {
    Slurm::new("scontrol")
        .args(["requeue".to_string(), job.to_string()])
        .epoch_times()
        .output()
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn show_config_values() {
        let show = ShowConfig(
            "ClusterName             = tb\nPriorityType            = priority/allot\n\
             PrivateData             = jobs,usage\nSlurmUser               = slurm(64030)\n"
                .into(),
        );
        let p = show.private_data();
        assert!(p.jobs && p.usage && !p.accounts && !p.users);
        assert_eq!(p.describe(), "jobs,usage");
        assert_eq!(
            ShowConfig("PrivateData = none\n".into()).private_data(),
            PrivateData::default()
        );
        assert_eq!(show.slurm_user(), Some(("slurm".into(), Some(64030))));
        assert_eq!(show.cluster_name(), Some("tb"));
        assert_eq!(ShowConfig("ClusterName = \n".into()).cluster_name(), None);
        assert_eq!(show.value("Nope"), None);
    }

    #[test]
    fn show_node_line() {
        let line = "NodeName=n1 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 Gres=gpu:8 NodeAddr=127.0.0.1 \
                    State=IDLE+DRAIN ThreadsPerCore=1 Reason=maintenance [root@2024-06-01T10:00:00]";
        let i = parse_show_node(line);
        assert_eq!(i.gres_gpus, Some(8));
        assert_eq!(i.state, "IDLE+DRAIN");
        assert!(i.draining());
        assert!(!parse_show_node("NodeName=n1 State=MIXED Gres=gpu:2").draining());
        assert_eq!(parse_show_node("NodeName=n1 Gres=(null)").gres_gpus, None);
    }
}
