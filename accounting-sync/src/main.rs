//! `allot`: the sidecar and command-line tool of the allot Slurm plugin suite.
//!
//! Subcommands are added by the issues that bring their subsystems; each one
//! is real (no placeholders).

use clap::{Parser, Subcommand};

/// allot: budgeted, hierarchical fair-share GPU scheduling for Slurm.
#[derive(Parser, Debug)]
#[command(name = "allot", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {}
}
