//! What Slurm says about this node (`scontrol show node -o NAME`): the GPUs
//! it expects and whether it is already draining; and the drain itself.

use std::process::Command;

/// The fields of `scontrol show node -o` that `allot health` needs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeInfo {
    /// GPUs of `Gres=` (sum of every `gpu` entry), `None` without any.
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

/// GPUs in a `Gres=` value: `gpu:8`, `gpu:a100:4(S:0-1),gpu:v100:2`,
/// `gpu:tesla:8(S:0,1),mps:100` -> 8, 6, 8. `None` when no `gpu` entry.
pub fn gres_gpus(gres: &str) -> Option<u32> {
    // Drop the socket bindings in parentheses: they may contain commas.
    let mut plain = String::new();
    let mut depth = 0;
    for c in gres.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ if depth == 0 => plain.push(c),
            _ => {}
        }
    }
    let mut total = None;
    for item in plain.split(',') {
        let parts: Vec<&str> = item.trim().split(':').collect();
        if parts.first() != Some(&"gpu") {
            continue;
        }
        let n = match parts.len() {
            1 => 1,
            _ => parts.last()?.parse().ok()?,
        };
        total = Some(total.unwrap_or(0) + n);
    }
    total
}

/// Parses one line of `scontrol show node -o`.
pub fn parse_show_node(line: &str) -> NodeInfo {
    let mut info = NodeInfo::default();
    for kv in line.split_whitespace() {
        if let Some(v) = kv.strip_prefix("Gres=") {
            info.gres_gpus = gres_gpus(v);
        } else if let Some(v) = kv.strip_prefix("State=") {
            info.state = v.to_string();
        }
    }
    info
}

/// Runs `scontrol show node -o NODE`.
///
/// # Errors
/// A message with scontrol's error when it cannot run or fails.
pub fn show_node(node: &str) -> Result<NodeInfo, String> {
    let out = Command::new("scontrol")
        .args(["show", "node", "-o", node])
        .output()
        .map_err(|e| format!("cannot run scontrol: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "scontrol show node {node} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(parse_show_node(&String::from_utf8_lossy(&out.stdout)))
}

/// Drains `node` with `reason`: `scontrol update nodename=NODE state=drain
/// reason=REASON`.
///
/// # Errors
/// scontrol's message when it fails.
pub fn drain(node: &str, reason: &str) -> Result<(), String> {
    let out = Command::new("scontrol")
        .args([
            "update",
            &format!("nodename={node}"),
            "state=drain",
            &format!("reason={reason}"),
        ])
        .output()
        .map_err(|e| format!("cannot run scontrol: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "scontrol update nodename={node} state=drain failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

/// This node's Slurm name: `$SLURMD_NODENAME` (set by slurmd for
/// HealthCheckProgram), else the short host name.
pub fn local_node_name() -> String {
    if let Ok(n) = std::env::var("SLURMD_NODENAME") {
        if !n.is_empty() {
            return n;
        }
    }
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into our buffer.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    let full = String::from_utf8_lossy(&buf[..end]).into_owned();
    full.split('.').next().unwrap_or(&full).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gres_forms() {
        assert_eq!(gres_gpus("gpu:8"), Some(8));
        assert_eq!(gres_gpus("gpu:a100:4(S:0-1),gpu:v100:2"), Some(6));
        assert_eq!(gres_gpus("gpu:tesla:8(S:0,1),mps:100"), Some(8));
        assert_eq!(gres_gpus("mps:100"), None);
        assert_eq!(gres_gpus("(null)"), None);
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
    }
}
