//! `allot`: the sidecar and command-line tool of the allot Slurm plugin suite.
//!
//! Subcommands are added by the issues that bring their subsystems; each one
//! is real (no placeholders). Every subcommand takes `--config FILE` (see
//! [`cli::common`]); each lives in its own module of [`cli`], the simulator
//! front end in [`simulate`].

use std::process::ExitCode;

use clap::{CommandFactory, Parser};

mod cli;
mod simulate;

use cli::{config, explain, forecast, health, report, shares, sync, tree, Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    cli::remote::VERBOSE.store(cli.verbose, std::sync::atomic::Ordering::Relaxed);
    if let Command::Sync(a) = &cli.command {
        if let Some(msg) = sync::follow_only_with_from(a) {
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
        Command::CheckConfig(args) => config::run(args),
        Command::Shares(args) => shares::run(args),
        Command::Sync(args) => sync::run(args),
        Command::Report(args) => report::run(args),
        Command::Sim(args) => simulate::run(args),
        Command::Health(args) => health::run(args),
        Command::Tree(args) => tree::run(args),
        Command::Explain(args) => explain::run(args),
        Command::Forecast(args) => forecast::run(args),
    };
    result.unwrap_or_else(|e| {
        eprintln!("allot: {e:#}");
        ExitCode::FAILURE
    })
}
