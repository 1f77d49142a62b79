//! sinfo: the nodes and their GPUs.
//!
//! - The draining pass: nodes draining or drained, since when and why
//!   ([`draining_nodes`], read by [`parse_sinfo`]).
//! - The start forecast: the nodes in service and their GPUs
//!   ([`cluster_now`], read by [`cluster_of`]).
//! - The capacity where allot.toml sets none: every node's GPUs
//!   ([`total_gpus`], read by [`gpus_from_sinfo`]).
//!
//! A node in several partitions is listed once per partition; each reader
//! counts it once. GPUs in a Gres string: [`super::gpus::in_gres`].

use std::collections::{BTreeMap, BTreeSet};

use allot_sim::ClusterSpec;

use super::command::Slurm;
use super::gpus;

/// A node Slurm reports as draining or drained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainingNode {
    /// Node name.
    pub node: String,
    /// True once no job is left (`drained`); false while `draining`.
    pub drained: bool,
    /// When the drain reason was set (epoch s): the start of the episode.
    pub since: Option<i64>,
    /// The drain reason (`maintenance`, `allot: gpu3 Xid 79 ...`).
    pub reason: String,
}

/// The sinfo format [`parse_sinfo`] reads (run with `SLURM_TIME_FORMAT=%s`).
pub const SINFO_FORMAT: &str = "%N|%T|%H|%E";

/// Draining and drained nodes in `sinfo -h -N -o "%N|%T|%H|%E"` output
/// (`SLURM_TIME_FORMAT=%s`), once per node even when it is in several
/// partitions. States are sinfo's long names; a trailing flag character
/// (`*` not responding, `~` powered off, ...) is ignored.
pub fn parse_sinfo(text: &str) -> Vec<DrainingNode> {
    let mut out: Vec<DrainingNode> = Vec::new();
    for line in text.lines() {
        let mut f = line.splitn(4, '|');
        let (Some(node), Some(state), Some(time), reason) =
            (f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        let state = state
            .trim()
            .trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
        let drained = match state {
            "draining" => false,
            "drained" => true,
            _ => continue,
        };
        let node = node.trim().to_string();
        if out.iter().any(|n| n.node == node) {
            continue;
        }
        out.push(DrainingNode {
            node,
            drained,
            since: time.trim().parse().ok(),
            reason: reason.unwrap_or("").trim().to_string(),
        });
    }
    out
}

/// The draining and drained nodes now (`sinfo -h -N -o` [`SINFO_FORMAT`]).
///
/// # Errors
/// sinfo cannot run or fails.
pub fn draining_nodes() -> anyhow::Result<Vec<DrainingNode>> {
    let text = Slurm::new("sinfo")
        .args(["-h", "-N", "-o", SINFO_FORMAT])
        .epoch_times()
        .output()?;
    Ok(parse_sinfo(&text))
}

/// The nodes in service and their GPUs, from `sinfo -N -h -o "%N|%G|%T"`
/// output, and how many of them are draining: nodes down, drained, failed
/// or in maintenance are out; the cluster is the nodes left, each with the
/// most GPUs a node has. A draining node (`draining`: it still holds jobs)
/// is in the cluster and counted: the forecast drains it from now on.
///
/// # Errors
/// No node with GPUs in service.
pub fn cluster_of(sinfo: &str) -> anyhow::Result<(ClusterSpec, u32)> {
    let mut nodes: BTreeMap<&str, u32> = BTreeMap::new();
    let mut draining: BTreeSet<&str> = BTreeSet::new();
    for line in sinfo.lines() {
        let mut f = line.split('|');
        let (Some(name), Some(gres), Some(state)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let state = state.trim().to_ascii_lowercase();
        let out = [
            "down",
            "drained",
            "fail",
            "maint",
            "unknown",
            "not_responding",
        ]
        .iter()
        .any(|s| state.contains(s))
            || state.ends_with('*');
        let gpus = u32::try_from(gpus::in_gres(gres).unwrap_or(0)).unwrap_or(u32::MAX);
        if !out && gpus > 0 {
            // sinfo -N lists a node once per partition.
            nodes.insert(name.trim(), gpus);
            if state.contains("drain") {
                draining.insert(name.trim());
            }
        }
    }
    let per = nodes.values().copied().max().unwrap_or(0);
    if per == 0 {
        anyhow::bail!("sinfo shows no node with GPUs in service");
    }
    Ok((
        ClusterSpec {
            nodes: nodes.len() as u32,
            gpus_per_node: per,
        },
        draining.len() as u32,
    ))
}

/// [`cluster_of`] on what sinfo says now.
///
/// # Errors
/// sinfo missing or failing; no node with GPUs in service.
pub fn cluster_now() -> anyhow::Result<(ClusterSpec, u32)> {
    cluster_of(
        &Slurm::new("sinfo")
            .args(["-N", "-h", "-o", "%N|%G|%T"])
            .output()?,
    )
}

/// Total GPUs in `sinfo -h -N -O NodeHost:100,Gres:300` output: each node
/// counted once, its Gres read by [`gpus::in_gres`].
pub fn gpus_from_sinfo(text: &str) -> u64 {
    let mut seen = std::collections::HashSet::new();
    let mut total = 0u64;
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let (Some(host), gres) = (it.next(), it.next().unwrap_or("")) else {
            continue;
        };
        if seen.insert(host.to_string()) {
            total = total.saturating_add(gpus::in_gres(gres).unwrap_or(0));
        }
    }
    total
}

/// The cluster's GPUs now: [`gpus_from_sinfo`] of what sinfo says.
///
/// # Errors
/// sinfo cannot run or fails.
pub fn total_gpus() -> anyhow::Result<u64> {
    let text = Slurm::new("sinfo")
        .args(["-h", "-N", "-O", "NodeHost:100,Gres:300"])
        .output()?;
    Ok(gpus_from_sinfo(&text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sinfo_lines() {
        let text = "n1|draining|1717236000|maintenance\nn1|draining|1717236000|maintenance\n\
                    n2|drained*|1717230000|allot: gpu3 Xid 79 serial=1|x\nn3|mixed|Unknown|none\nn4|idle|0|\n";
        let got = parse_sinfo(text);
        assert_eq!(
            got,
            vec![
                DrainingNode {
                    node: "n1".into(),
                    drained: false,
                    since: Some(1717236000),
                    reason: "maintenance".into()
                },
                DrainingNode {
                    node: "n2".into(),
                    drained: true,
                    since: Some(1717230000),
                    reason: "allot: gpu3 Xid 79 serial=1|x".into()
                },
            ]
        );
    }

    #[test]
    fn the_cluster_is_the_nodes_in_service() {
        let sinfo = "gpu01|gpu:8|mixed\ngpu02|gpu:a100:8(S:0,1)|idle\ngpu03|gpu:8|drained\ngpu04|gpu:8|down*\ngpu05|gpu:8|draining\ncpu01|(null)|idle\n";
        let (c, draining) = cluster_of(sinfo).unwrap();
        assert_eq!((c.nodes, c.gpus_per_node, draining), (3, 8, 1));
        // A node in two partitions is listed twice and counted once.
        let (c, draining) = cluster_of("gpu05|gpu:8|draining\ngpu05|gpu:8|draining\n").unwrap();
        assert_eq!((c.nodes, draining), (1, 1));
        let e = cluster_of("gpu03|gpu:8|drained\n").unwrap_err().to_string();
        assert!(e.contains("no node with GPUs in service"), "{e}");
    }

    #[test]
    fn sinfo_gres() {
        let text = "vm  gpu:8(S:0)\nvm  gpu:8(S:0)\nn2  gpu:a100:4(S:0-1),gpu:v100:2\nn3  (null)\n";
        assert_eq!(gpus_from_sinfo(text), 14);
        // A bare gpu is one GPU (gpus::in_gres), as the health check reads it.
        assert_eq!(gpus_from_sinfo("n4  gpu\n"), 1);
    }
}
