//! `allot forecast JOBID`: when a pending job may start, as p10/p50/p90,
//! from slurmctld's present replayed with allot's own policy
//! ([`allot_sync::forecast`], `docs/forecast.md`). It reads squeue, sacct
//! (every user's jobs of the usage window) and sinfo, so it answers fully
//! where those show every job: an admin's host, or a cluster without
//! `PrivateData=jobs,usage`. Elsewhere it refuses and names `allot explain`,
//! whose forecast the sidecar makes from every job.

use std::process::ExitCode;
use std::sync::Arc;

use allot_sim::forecast::ForecastOptions;
use allot_sync::server::auth;
use allot_sync::server::snapshot;
use allot_sync::slurm::{scontrol, squeue};
use allot_sync::{explain, forecast};

use super::common::{load_all, now, ConfigArg, Loaded};
use super::remote::verbose;

/// `allot forecast` arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Slurm job id of a pending job, or a task of a job array (4242_7)
    #[arg(allow_negative_numbers = true)]
    job: String,
    #[command(flatten)]
    config: ConfigArg,
    /// Replays (draws) of the forecast, 1 to 1000: more narrow the error of
    /// p10 and p90, each costing another replay of the queue
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1000))]
    draws: u32,
    /// Print JSON (times in seconds since the epoch)
    #[arg(long)]
    json: bool,
}

/// Runs `allot forecast`.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let path = args.config.path();
    let Loaded { config, sim, .. } = load_all(&path)?;
    let config = Arc::new(config);
    let t = now();
    // `allot -v`: what the answer is made of. The forecast never asks the
    // sidecar or the ledger: it reads slurmctld and slurmdbd itself.
    verbose(|| {
        format!(
            "forecasting here from squeue, sacct and sinfo, with the policy and [sim] of {}",
            path.display()
        )
    });
    refuse_partial_view()?;
    let jobs = squeue::jobs_now()?;
    verbose(|| format!("squeue --json: {} jobs", jobs.len()));
    let job = explain::resolve(&args.job, &jobs).map_err(anyhow::Error::msg)?;
    let opts = ForecastOptions {
        draws: args.draws,
        seed: sim.seed,
        ..ForecastOptions::default()
    };
    let inputs = forecast::Inputs::take(&config, &opts, t)?;
    verbose(|| {
        format!(
            "sacct: {} job attempts of the last {} days; sinfo: {} nodes x {} GPUs in service, {} draining",
            inputs.history.len(),
            forecast::Inputs::history_span(&config, &opts) / 86_400,
            inputs.cluster.nodes,
            inputs.cluster.gpus_per_node,
            inputs.draining
        )
    });
    let f = forecast::forecast_job(&config, &sim, &jobs, &inputs, job, t, &opts).map_err(|e| {
        // The user gave an array task: say which job that is.
        if args.job.trim() == job.to_string() {
            anyhow::Error::from(e)
        } else {
            anyhow::anyhow!("{} is job {job}: {e}", args.job.trim())
        }
    })?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&f)?);
    } else {
        print!(
            "{}",
            forecast::render(&f, inputs.cluster, opts.history / 86_400)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The forecast replays every job slurmctld has. Under `PrivateData=jobs`
/// (squeue) or `usage` (sacct), a user who is not an admin
/// ([`snapshot::admins`]) sees only their own jobs, and a forecast from them
/// would start the job as if the cluster held nobody else's: refused,
/// naming what sees every job.
///
/// # Errors
/// That case; scontrol or sacctmgr that cannot be run or fails.
fn refuse_partial_view() -> anyhow::Result<()> {
    let show = scontrol::show_config()?;
    let private = show.private_data();
    if !(private.jobs || private.usage) {
        return Ok(());
    }
    // SAFETY: getuid cannot fail.
    let me = auth::user_name(unsafe { libc::getuid() });
    if snapshot::admins(&show)?.contains(&me) {
        return Ok(());
    }
    anyhow::bail!(
        "slurmctld's PrivateData={} hides other users' jobs from {me}'s squeue and sacct, so a forecast made here would see an emptier cluster than there is. \
         Ask the sidecar, which sees every job: `allot explain JOBID` prints the same forecast (its `Forecast start` line; set [server] url in allot.toml if it says the sidecar is not configured), \
         and so does the researchers' page /jobs/JOBID. Root, SlurmUser and slurmdbd's Operators and Administrators can run `allot forecast`.",
        private.describe()
    )
}
