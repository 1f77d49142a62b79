//! This node for `allot health`: its Slurm name, and what Slurm says of
//! it (`scontrol show node -o NAME`: the GPUs it expects, whether it is
//! already draining) and the drain itself, both read and run by
//! [`crate::slurm::scontrol`].

pub use crate::slurm::scontrol::{drain_node as drain, show_node, NodeInfo};

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
