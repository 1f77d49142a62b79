//! `allot check-config [FILE]`: validates allot.toml and prints the tree
//! with each node's share, allocation (% of the cluster) and, when the
//! capacity is configured, its budget over the window in GPU-hours.

use std::path::PathBuf;
use std::process::ExitCode;

use fairshare::duration::SlurmDuration;
use fairshare::{Config, NodeId, Tree};

use crate::config_path::{self, ConfigArg};

/// Arguments of `allot check-config`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The file to check (default: as for --config)
    #[arg(value_name = "FILE")]
    pub file: Option<PathBuf>,
    #[command(flatten)]
    pub config: ConfigArg,
}

/// Runs the subcommand: the tree on stdout, or the errors (exit 1).
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let path = args.file.clone().unwrap_or_else(|| args.config.path());
    let config = config_path::load(&path)?;
    println!("{}: OK", path.display());
    print!("{}", render(&config));
    Ok(ExitCode::SUCCESS)
}

/// The report check-config prints for a valid config.
pub fn render(config: &Config) -> String {
    let tree = &config.tree;
    let accounts = tree.accounts().count();
    let mut out = format!(
        "window {}, {} leaves, {} Slurm accounts, capacity {}\n\n",
        SlurmDuration(config.window),
        tree.leaves().len(),
        accounts,
        config
            .capacity_gpus
            .map_or("from the cluster's GPUs".to_string(), |c| format!(
                "{c} GPUs"
            )),
    );
    let width = tree
        .nodes()
        .iter()
        .map(|n| n.depth as usize + n.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let mut head = format!("{:<width$}  {:>7}  {:>10}", "Node", "Share", "Allocation");
    if config.capacity_gpus.is_some() {
        head += &format!("  {:>15}", "Budget/window");
    }
    out += head.as_str();
    out += "  Accounts\n";
    walk(tree, Tree::ROOT, &mut |id| {
        let n = tree.node(id);
        let name = format!("{}{}", " ".repeat(n.depth as usize), n.name);
        let share = if id == Tree::ROOT {
            String::new()
        } else {
            n.share.to_string()
        };
        let mut line = format!("{name:<width$}  {share:>7}  {:>9.2}%", n.allocation * 100.0);
        if let Some(c) = config.capacity_gpus {
            let gpu_hours = n.allocation * c as f64 * config.window as f64 / 3600.0;
            line += &format!("  {:>9.1} GPU-h", gpu_hours);
        }
        line += "  ";
        line += &n.accounts.join(", ");
        out += line.trim_end();
        out.push('\n');
    });
    out
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
    fn renders_allocations_and_budgets() {
        let c = Config::from_toml_str(include_str!("../../examples/allot.toml")).unwrap();
        let s = render(&c);
        assert!(
            s.starts_with("window 7-00:00:00, 5 leaves, 6 Slurm accounts, capacity 16 GPUs"),
            "{s}"
        );
        let a1 = s
            .lines()
            .find(|l| l.trim_start().starts_with("a1 "))
            .unwrap();
        // 35% of 16 GPUs for a week = 940.8 GPU-hours.
        assert!(
            a1.contains("35.00%")
                && a1.contains("940.8 GPU-h")
                && a1.ends_with("a1, a1-interactive"),
            "{a1}"
        );
        assert!(s.contains("\n nlp ") && s.contains("\n  a2 "), "{s}");
    }
}
