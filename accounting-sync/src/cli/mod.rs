//! The command line: the arguments of `allot` and each subcommand (one
//! module a subcommand, its `run` calling the library) and [`common`], the
//! helpers they all share (`--config`, `--ledger`, times, logging).

use clap::{Parser, Subcommand};

pub mod common;
pub mod config;
pub mod explain;
pub mod forecast;
pub mod health;
pub mod remote;
pub mod report;
pub mod shares;
pub mod sync;
pub mod tree;
pub mod usage_csv;

/// allot: budgeted, hierarchical fair-share GPU scheduling for Slurm.
#[derive(Parser, Debug)]
#[command(name = "allot", version, about, long_about = None)]
pub struct Cli {
    /// Say on stderr where answers come from (the ledger, or the sidecar
    /// as which user)
    #[arg(short, long, global = true)]
    pub verbose: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Validate allot.toml; print the tree with each node's allocation, or every error (exit 1)
    CheckConfig(config::Args),
    /// What-if Fair Tree: sshare-style shares, usage, Level FS and fair-share for a usage CSV
    Shares(shares::Args),
    /// Import Slurm accounting (sacct, or a saved --parsable2 dump) into the ledger
    Sync(sync::Args),
    /// Budget report: allocation, charged and unallocated GPU-hours, Level FS, fair-share
    Report(report::Args),
    /// Replay a workload trace against scheduling policies and configurations; compare
    Sim(crate::simulate::Args),
    /// Why a job has its priority, its protection, what could preempt it, who preempted it
    Explain(explain::Args),
    /// When a pending job may start (p10/p50/p90), from slurmctld's present replayed with allot's policy
    Forecast(forecast::Args),
    /// The org tree as code: compare allot.toml with slurmdbd's accounts (plan), apply, or import
    #[command(subcommand_value_name = "plan|apply|import")]
    Tree(tree::Args),
    /// Check this node's GPUs through NVML (Slurm's HealthCheckProgram); --drain on a failure
    Health(health::Args),
}
