//! `allot explain JOBID`: why a job has its priority, whether it is
//! protected and until when, what could preempt it, and for a requeued job
//! which job preempted it and by which rule (the library's
//! [`allot_sync::explain`]). An admin's command reads the ledger; a user
//! who cannot read it asks the sidecar (`[server] url`), which answers
//! with the same output for what PrivateData lets the user see.

use std::process::ExitCode;
use std::sync::Arc;

use allot_sim::forecast::ForecastOptions;
use allot_sync::{explain, forecast};

use super::common::{load_all, now, ConfigArg, LedgerArg, Loaded};
use super::remote::{self, Source};

/// How long `allot explain` asks the sidecar for a forecast it is still
/// making before it prints the answer without one.
const FORECAST_PATIENCE: std::time::Duration = std::time::Duration::from_secs(120);

/// `allot explain` arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Slurm job id, or a task of a job array as squeue shows it (4242_7)
    #[arg(allow_negative_numbers = true)]
    job: String,
    #[command(flatten)]
    config: ConfigArg,
    #[command(flatten)]
    ledger: LedgerArg,
    /// Print JSON
    #[arg(long)]
    json: bool,
    /// Leave out a pending job's start forecast (which reads sacct's
    /// history and replays the queue: about a second on a large cluster)
    #[arg(long)]
    no_forecast: bool,
}

/// Runs `allot explain`.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let Loaded { config, sim, .. } = load_all(&args.config.path())?;
    let config = Arc::new(config);
    let reader = match remote::source(&config, &args.ledger)? {
        Source::Ledger(reader) => reader,
        Source::Server(client) => {
            let job = args.job.trim();
            if !args.no_forecast {
                // The sidecar makes a forecast off its request path: ask
                // until it is made (it then serves it for a minute).
                let path = format!("/api/v1/jobs/{job}?forecast=1");
                let give_up = std::time::Instant::now() + FORECAST_PATIENCE;
                loop {
                    let body = client.get(&path)?;
                    let v: serde_json::Value = serde_json::from_str(&body)
                        .map_err(|e| anyhow::anyhow!("the sidecar's answer is not JSON: {e}"))?;
                    let pending = v["forecast_pending"].as_bool() == Some(true);
                    if !pending || std::time::Instant::now() >= give_up {
                        if args.json {
                            print!("{body}");
                            return Ok(ExitCode::SUCCESS);
                        }
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_secs(2));
                }
            }
            let path = format!(
                "/api/v1/jobs/{job}?forecast={}{}",
                u8::from(!args.no_forecast),
                if args.json { "" } else { "&format=text" }
            );
            print!("{}", client.get(&path)?);
            return Ok(ExitCode::SUCCESS);
        }
    };
    let t = now();
    let jobs = allot_sync::slurm::squeue::jobs_now()?;
    let engine = explain::engine_now(&config, &reader, t, Some(&jobs))?;
    let job = explain::resolve(&args.job, &jobs).map_err(anyhow::Error::msg)?;
    let mut out = explain::build(&config, &engine, &reader, job, jobs.get(&job).cloned(), t)?;
    if out.is_pending() && !args.no_forecast {
        let opts = ForecastOptions {
            seed: sim.seed,
            ..ForecastOptions::default()
        };
        match forecast::Inputs::take(&config, &opts, t) {
            Ok(inputs) => {
                match forecast::forecast_job(&config, &sim, &jobs, &inputs, job, t, &opts) {
                    Ok(f) => out.forecast = Some(f),
                    Err(e) => out.forecast_error = Some(e.to_string()),
                }
            }
            Err(e) => out.forecast_error = Some(format!("{e:#}")),
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!("{}", explain::render(&out, t));
    }
    Ok(ExitCode::SUCCESS)
}
