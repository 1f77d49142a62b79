//! `allot tree plan | apply | import`: allot.toml's org tree against
//! slurmdbd's account hierarchy (rules in [`allot_sync::sidecar::tree_sync`]).

use std::process::{Command, ExitCode};

use allot_sync::sidecar::tree_sync::{desired, import, parse_sacctmgr, plan, SlurmAccount};
use anyhow::{bail, Context};

use super::common::{load, ConfigArg};

/// `allot tree` arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    verb: Verb,
}

#[derive(clap::Subcommand, Debug)]
enum Verb {
    /// Print the account/parent/Fairshare changes that would make slurmdbd match allot.toml
    Plan(Common),
    /// Make those changes with sacctmgr (accounts are added or moved, never deleted)
    Apply(Common),
    /// Write an allot.toml tree from slurmdbd's account hierarchy to stdout
    Import(ImportArgs),
}

#[derive(clap::Args, Debug)]
struct Common {
    #[command(flatten)]
    config: ConfigArg,
    /// Slurm cluster [default: ClusterName of `scontrol show config`]
    #[arg(long)]
    cluster: Option<String>,
}

#[derive(clap::Args, Debug)]
struct ImportArgs {
    /// Slurm cluster [default: ClusterName of `scontrol show config`]
    #[arg(long)]
    cluster: Option<String>,
}

fn output(program: &str, args: &[String]) -> anyhow::Result<String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("cannot run {program}"))?;
    if !out.status.success() {
        bail!(
            "{program} {} failed: {} (are slurmctld and slurmdbd up, and SLURM_CONF their \
             slurm.conf? For the testbed: eval \"$(scripts/testbed env)\")",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn cluster(given: &Option<String>) -> anyhow::Result<String> {
    if let Some(c) = given {
        return Ok(c.clone());
    }
    let conf = output("scontrol", &["show".into(), "config".into()])?;
    conf.lines()
        .find_map(|l| {
            l.strip_prefix("ClusterName")
                .map(|v| v.trim().trim_start_matches('=').trim().to_string())
        })
        .filter(|c| !c.is_empty())
        .context("ClusterName not found in `scontrol show config`; pass --cluster NAME")
}

fn existing(cluster: &str) -> anyhow::Result<Vec<SlurmAccount>> {
    let assocs = output(
        "sacctmgr",
        &[
            "-n",
            "-P",
            "show",
            "assoc",
            &format!("cluster={cluster}"),
            "format=account,parentname,user,fairshare",
        ]
        .map(String::from),
    )?;
    let descs = output(
        "sacctmgr",
        &["-n", "-P", "show", "account", "format=account,description"].map(String::from),
    )?;
    parse_sacctmgr(&assocs, &descs).map_err(anyhow::Error::msg)
}

/// Runs `allot tree ...`.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    match &args.verb {
        Verb::Import(a) => {
            let cluster = cluster(&a.cluster)?;
            let (text, warnings) = import(&existing(&cluster)?, &cluster);
            for w in warnings {
                eprintln!("allot tree import: {w}");
            }
            print!("{text}");
            Ok(ExitCode::SUCCESS)
        }
        Verb::Plan(c) | Verb::Apply(c) => {
            let apply = matches!(args.verb, Verb::Apply(_));
            let config = load(&c.config.path())?;
            let cluster = cluster(&c.cluster)?;
            let (changes, extra) = plan(&desired(&config.tree), &existing(&cluster)?);
            for name in &extra {
                println!("not in allot.toml (left alone): account {name}");
            }
            if changes.is_empty() {
                println!("No changes: slurmdbd's accounts on cluster {cluster} match allot.toml.");
                return Ok(ExitCode::SUCCESS);
            }
            for ch in &changes {
                if apply {
                    output("sacctmgr", &ch.sacctmgr_args(&cluster))?;
                    println!("done: {ch}");
                } else {
                    println!("{ch}");
                }
            }
            if !apply {
                println!(
                    "{} change(s); `allot tree apply` makes them.",
                    changes.len()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
