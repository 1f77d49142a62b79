//! `allot check-config [FILE]`: validates allot.toml and prints the
//! contract as read (each value as written, then in words: Slurm's `4:30`
//! is 4 minutes 30 seconds), the `[priority]` short band when set, and the
//! tree with each node's share, allocation (% of the cluster) and, when the
//! capacity is configured, its budget over the window in GPU-hours.

use std::path::PathBuf;
use std::process::ExitCode;

use fairshare::duration::SlurmDuration;
use fairshare::{Config, Tree};

use super::common::{self, walk, ConfigArg};

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
    let config = common::load(&path)?;
    println!("{}: OK", path.display());
    // The text as written, for showing each value as read (the file parsed
    // above, so this reads the same text).
    let raw: Option<toml::Value> = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| toml::from_str(&t).ok());
    print!("{}", render_contract(&config, raw.as_ref()));
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

/// Seconds in words: `4 min 30 s`, `8 h`, `1 d 2 h 30 min`; `0` is the free tier.
pub fn in_words(secs: u64) -> String {
    if secs == 0 {
        return "0 (free tier)".into();
    }
    let parts = [
        (secs / 86_400, "d"),
        (secs % 86_400 / 3600, "h"),
        (secs % 3600 / 60, "min"),
        (secs % 60, "s"),
    ];
    parts
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, u)| format!("{n} {u}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The contract (and the `[priority]` short band, when set) as read: each
/// duration as written in `raw` (the file's TOML), else `(default)`, then
/// what it means in words.
pub fn render_contract(config: &Config, raw: Option<&toml::Value>) -> String {
    let written = |path: &[&str]| -> Option<String> {
        let mut v = raw?;
        for k in path {
            v = v.get(k)?;
        }
        Some(match v {
            toml::Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    };
    let line = |key: &str, path: &[&str], secs: u64| -> String {
        let shown = written(path).unwrap_or_else(|| format!("{} (default)", SlurmDuration(secs)));
        format!("  {key} {shown} = {}\n", in_words(secs))
    };
    let c = &config.contract;
    let mut out = String::from("contract:\n");
    out += &line(
        "default_min_runtime",
        &["contract", "default_min_runtime"],
        c.default_min_runtime,
    );
    out += &line(
        "max_min_runtime",
        &["contract", "max_min_runtime"],
        c.max_min_runtime,
    );
    out += &format!(
        "  charge_min_runtime {} = {}\n",
        c.charge_min_runtime,
        if c.charge_min_runtime {
            "allocated jobs are charged GPUs x max(runtime, minimum runtime)"
        } else {
            "jobs are charged their runtime only"
        }
    );
    if c.requeue.period > 0 {
        out += &line(
            "requeue_period",
            &["contract", "requeue_period"],
            c.requeue.period,
        );
        out += &line(
            "requeue_window",
            &["contract", "requeue_window"],
            c.requeue.window,
        );
        out += &format!(
            "  = past its minimum runtime an allocated job is preempted only in the first {} of every {} of running time\n",
            in_words(c.requeue.window),
            in_words(c.requeue.period)
        );
    }
    out += &format!(
        "  max_requeues {}{} = {}\n",
        c.max_requeues,
        if written(&["contract", "max_requeues"]).is_some() {
            ""
        } else {
            " (default)"
        },
        match c.max_requeues {
            0 => "allocated jobs are never preempted (preemption takes the free tier only)"
                .to_string(),
            n => format!(
                "an allocated job requeued {n} time(s) is not preempted again until it ends"
            ),
        }
    );
    for (name, secs) in &c.partition_default {
        out += &line(
            &format!("partition {name}: default_min_runtime"),
            &["contract", "partition", name, "default_min_runtime"],
            *secs,
        );
    }
    let p = &config.priority;
    if p.short_max_gpus > 0 {
        out += "debug work (it goes first inside its own team only):\n";
        out += &format!(
            "  short_max_gpus {} = jobs of at most {} GPUs",
            p.short_max_gpus, p.short_max_gpus
        );
        out += " and a time limit within short_max_time are debug work\n";
        out += &line(
            "short_max_time",
            &["priority", "short_max_time"],
            p.short_max_time,
        );
        if p.sweep_jobs > 0 {
            out += &format!(
                "  sweep_jobs {} = an account's short jobs beyond {} within sweep_window are a sweep: batch work\n",
                p.sweep_jobs, p.sweep_jobs
            );
            out += &line(
                "sweep_window",
                &["priority", "sweep_window"],
                p.sweep_window,
            );
        }
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_allocations_and_budgets() {
        let c = Config::from_toml_str(include_str!("../../../examples/allot.toml")).unwrap();
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

    #[test]
    fn contract_values_shown_as_read_in_words() {
        let text = "[contract]\ndefault_min_runtime = \"4:30\"\nmax_min_runtime = \"1-2:30\"\n\
                    requeue_period = \"30:00\"\nrequeue_window = \"5:00\"\n\
                    [contract.partition.debug]\ndefault_min_runtime = \"0\"\n\
                    [contract.partition.long]\ndefault_min_runtime = \"90\"\n\
                    [priority]\nshort_max_gpus = 2\nshort_max_time = \"30:00\"\nsweep_jobs = 16\n\
                    [tree.a]\nshare = 1\n";
        let c = Config::from_toml_str(text).unwrap();
        let raw: toml::Value = toml::from_str(text).unwrap();
        let s = render_contract(&c, Some(&raw));
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(
            lines,
            [
                "contract:",
                "  default_min_runtime 4:30 = 4 min 30 s",
                "  max_min_runtime 1-2:30 = 1 d 2 h 30 min",
                "  charge_min_runtime true = allocated jobs are charged GPUs x max(runtime, minimum runtime)",
                "  requeue_period 30:00 = 30 min",
                "  requeue_window 5:00 = 5 min",
                "  = past its minimum runtime an allocated job is preempted only in the first 5 min of every 30 min of running time",
                "  max_requeues 3 (default) = an allocated job requeued 3 time(s) is not preempted again until it ends",
                "  partition debug: default_min_runtime 0 = 0 (free tier)",
                "  partition long: default_min_runtime 90 = 1 h 30 min",
                "debug work (it goes first inside its own team only):",
                "  short_max_gpus 2 = jobs of at most 2 GPUs and a time limit within short_max_time are debug work",
                "  short_max_time 30:00 = 30 min",
                "  sweep_jobs 16 = an account's short jobs beyond 16 within sweep_window are a sweep: batch work",
                "  sweep_window 00:15:00 (default) = 15 min",
                "",
            ]
        );
        // Defaults are labelled as such; no short band, no priority lines.
        let c = Config::from_toml_str("[tree.a]\nshare = 1\n").unwrap();
        let s = render_contract(&c, None);
        assert!(
            s.contains("  default_min_runtime 01:00:00 (default) = 1 h\n"),
            "{s}"
        );
        assert!(
            s.contains("  max_min_runtime 08:00:00 (default) = 8 h\n"),
            "{s}"
        );
        assert!(!s.contains("debug work"), "{s}");
    }
}
