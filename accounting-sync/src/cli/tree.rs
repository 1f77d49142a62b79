//! `allot tree plan | apply | import`: allot.toml's org tree against
//! slurmdbd's account hierarchy (rules in [`allot_sync::sidecar::tree_sync`]).

use std::process::ExitCode;

use allot_sync::sidecar::tree_sync::{desired, import, plan};
use allot_sync::slurm::sacctmgr::{self, accounts};
use allot_sync::slurm::scontrol;
use anyhow::Context;

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

fn cluster(given: &Option<String>) -> anyhow::Result<String> {
    if let Some(c) = given {
        return Ok(c.clone());
    }
    scontrol::show_config()?
        .cluster_name()
        .map(str::to_string)
        .context("ClusterName not found in `scontrol show config`; pass --cluster NAME")
}

/// Runs `allot tree ...`.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    match &args.verb {
        Verb::Import(a) => {
            let cluster = cluster(&a.cluster)?;
            let (text, warnings) = import(&accounts(&cluster)?, &cluster);
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
            let (changes, extra) = plan(&desired(&config.tree), &accounts(&cluster)?);
            for name in &extra {
                println!("not in allot.toml (left alone): account {name}");
            }
            if changes.is_empty() {
                println!("No changes: slurmdbd's accounts on cluster {cluster} match allot.toml.");
                return Ok(ExitCode::SUCCESS);
            }
            for ch in &changes {
                if apply {
                    sacctmgr::modify(&ch.sacctmgr_args(&cluster))?;
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
