//! `allot`: the sidecar and command-line tool of the allot Slurm plugin suite.
//!
//! Subcommands are added by the issues that bring their subsystems; each one
//! is real (no placeholders). Every subcommand takes `--config FILE` (see
//! [`config_path`]); each lives in its own `cmd_*.rs` module.

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

mod cmd_config;
mod cmd_explain;
mod cmd_health;
mod cmd_report;
mod cmd_shares;
mod cmd_sim;
mod cmd_sync;
mod cmd_tree;
mod config_path;
mod usage_csv;

/// allot: budgeted, hierarchical fair-share GPU scheduling for Slurm.
#[derive(Parser, Debug)]
#[command(name = "allot", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Validate allot.toml; print the tree with each node's allocation, or every error (exit 1)
    CheckConfig(cmd_config::Args),
    /// What-if Fair Tree: sshare-style shares, usage, Level FS and fair-share for a usage CSV
    Shares(cmd_shares::Args),
    /// Import Slurm accounting (sacct, or a saved --parsable2 dump) into the ledger
    Sync(cmd_sync::Args),
    /// Budget report: allocation, charged and unallocated GPU-hours, Level FS, fair-share
    Report(cmd_report::Args),
    /// Replay a workload trace against scheduling policies and configurations; compare
    Sim(cmd_sim::Args),
    /// Why a job has its priority, its protection, what could preempt it, who preempted it
    Explain(cmd_explain::Args),
    /// The org tree as code: compare allot.toml with slurmdbd's accounts (plan), apply, or import
    #[command(subcommand_value_name = "plan|apply|import")]
    Tree(cmd_tree::Args),
    /// Check this node's GPUs through NVML (Slurm's HealthCheckProgram); --drain on a failure
    Health(cmd_health::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Sync(a) = &cli.command {
        if let Some(msg) = cmd_sync::follow_only_with_from(a) {
            let mut cmd = Cli::command();
            let sync = cmd
                .find_subcommand_mut("sync")
                .expect("sync is a subcommand");
            sync.clone()
                .bin_name("allot sync")
                .error(clap::error::ErrorKind::ArgumentConflict, msg)
                .exit();
        }
    }
    // A one-shot command piped into `head` should end quietly when the pipe
    // closes, as coreutils do, not panic in println!. Rust ignores SIGPIPE
    // by default; restore the default action except for the long-running
    // `sync --follow`, which must log a write error and keep running.
    if !matches!(&cli.command, Command::Sync(a) if a.follow) {
        // SAFETY: called once, before any thread is spawned; SIG_DFL is a
        // valid disposition for SIGPIPE.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    let result = match &cli.command {
        Command::CheckConfig(args) => cmd_config::run(args),
        Command::Shares(args) => cmd_shares::run(args),
        Command::Sync(args) => cmd_sync::run(args),
        Command::Report(args) => cmd_report::run(args),
        Command::Sim(args) => cmd_sim::run(args),
        Command::Health(args) => cmd_health::run(args),
        Command::Tree(args) => cmd_tree::run(args),
        Command::Explain(args) => cmd_explain::run(args),
    };
    result.unwrap_or_else(|e| {
        eprintln!("allot: {e:#}");
        ExitCode::FAILURE
    })
}
