//! `allot explain JOBID`: why a job has its priority, whether it is
//! protected and until when, what could preempt it, and for a requeued job
//! which job preempted it and by which rule (the library's
//! [`allot_sync::explain`]). An admin's command reads the ledger; a user
//! who cannot read it asks the sidecar (`[server] url`), which answers
//! with the same output for what PrivateData lets the user see.

use std::process::ExitCode;
use std::sync::Arc;

use allot_sync::explain;

use super::common::{load, now, ConfigArg, LedgerArg};
use super::remote::{self, Source};

/// `allot explain` arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Slurm job id, or a task of a job array as squeue shows it (4242_7)
    job: String,
    #[command(flatten)]
    config: ConfigArg,
    #[command(flatten)]
    ledger: LedgerArg,
    /// Print JSON
    #[arg(long)]
    json: bool,
}

/// Runs `allot explain`.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let config = Arc::new(load(&args.config.path())?);
    let reader = match remote::source(&config, &args.ledger)? {
        Source::Ledger(reader) => reader,
        Source::Server(client) => {
            let path = format!(
                "/api/v1/jobs/{}{}",
                args.job.trim(),
                if args.json { "" } else { "?format=text" }
            );
            print!("{}", client.get(&path)?);
            return Ok(ExitCode::SUCCESS);
        }
    };
    let t = now();
    let mut jobs = explain::squeue_now()?;
    let engine = explain::engine_now(&config, &reader, t, Some(&jobs))?;
    let job = explain::resolve(&args.job, &jobs).map_err(anyhow::Error::msg)?;
    let out = explain::build(&config, &engine, &reader, job, jobs.remove(&job), t)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!("{}", explain::render(&out, t));
    }
    Ok(ExitCode::SUCCESS)
}
