//! `allot sim`: replay a trace against scheduling configurations and compare.
//!
//! ```text
//! allot sim --trace FILE --config allot.toml [--cluster NODESxGPUS]
//!           [--policy NAME]... [--sweep key=v1,v2,...]... [--json] [--plot DIR]
//!           [--preemptions FILE] [--priorities FILE] [--attempts FILE]
//! ```
//!
//! Every combination of `--sweep` values x `--policy` is one run; runs go in
//! parallel (rayon), each on one core, and the engine code is the one the
//! plugins run (see `allot_sim`). The output says how the trace's teams
//! mapped onto the tree (unknown accounts are listed, never dropped
//! silently), which contract rules decided how many jobs, then one table
//! row per run and one column per run in the per-team table. `--plot DIR`
//! writes SVGs: share over time per team (one per run), wait-time CDFs per
//! job class, share error over time. `--preemptions FILE` lists every
//! preemption of every run, one JSON object a line; `--priorities FILE`
//! every job's priority at submission (slurmctld's `InitPrio`); `--attempts
//! FILE` every attempt of every job (as `sacct --duplicates`). Formats and every
//! metric: docs/simulator.md.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use allot_sim::{
    self as sim, trace, ClusterSpec, JobClass, Policy, SimReport, SimSettings, Trace, TraceJob,
    Workload,
};
use anyhow::{bail, Context};
use fairshare::duration::parse_slurm_duration;
use fairshare::Config;
use rayon::prelude::*;
use serde::Serialize;

use crate::cli::common::{self as config_path, ConfigArg};

mod input;
mod outputs;
mod plot;
mod table;

use input::load_trace;
#[cfg(test)]
use table::human_secs;
use table::print_text;

/// Arguments of `allot sim`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub config: ConfigArg,
    /// The workload: allot CSV, Philly, Helios, Acme, Alibaba pod list, a
    /// sacct --parsable2 dump or an allot ledger (.sqlite)
    #[arg(long, value_name = "FILE")]
    pub trace: PathBuf,
    /// Trace format [default: from the file: .sqlite = ledger, `|` header = sacct, else the CSV header]
    #[arg(long, value_name = "NAME", value_parser = ["allot", "philly", "helios", "acme", "alibaba", "sacct", "ledger"])]
    pub format: Option<String>,
    /// Cluster shape NODESxGPUS, e.g. 44x8 [default: [sim] cluster, else capacity_gpus in 8-GPU nodes]
    #[arg(long, value_name = "NODESxGPUS")]
    pub cluster: Option<String>,
    /// Policy to replay (repeat for several): allot, fifo, static, classic, fairtree [default: all five]
    #[arg(long = "policy", value_name = "NAME")]
    pub policies: Vec<String>,
    /// Vary a setting: key=v1,v2,... (repeat for a grid). Keys: window, half_life,
    /// calc_period, default_min_runtime, max_min_runtime, charge_min_runtime, requeue_period,
    /// requeue_window (0 = off), sync_interval, checkpoint_interval, metric_window,
    /// backfill_depth, seed, cluster
    #[arg(long = "sweep", value_name = "KEY=V1,V2")]
    pub sweeps: Vec<String>,
    /// JSON output: every run's summary and per-team results
    #[arg(long)]
    pub json: bool,
    /// Write SVG plots into this directory
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Write every preemption of every run to FILE, one JSON object a line: run, time (s since
    /// the first submission), preemptor and victim (trace ids and teams), the victim's run time
    #[arg(long, value_name = "FILE")]
    pub preemptions: Option<PathBuf>,
    /// Write every job's priority at its submission (allot runs) to FILE, one JSON object a
    /// line: run, time (s since the first submission), job (trace id), team, band (0 free tier,
    /// 1 allocated, 2 entitled, 3 short) and rank: what slurmctld logs as InitPrio
    #[arg(long, value_name = "FILE")]
    pub priorities: Option<PathBuf>,
    /// Write every attempt of every job of every run to FILE, one JSON object a line (as
    /// `sacct --duplicates` lists them): run, job (trace id), team, attempt (0 first, n after
    /// n requeues), start and end (s since the first submission), gpus, min_runtime (s) and
    /// how it ended (completed, preempted, drained, failed; running if the replay stopped)
    #[arg(long, value_name = "FILE")]
    pub attempts: Option<PathBuf>,
    /// Replay what could be read even if some rows are malformed (they are listed on stderr)
    #[arg(long)]
    pub skip_bad_rows: bool,
    /// Backtest the start forecast: at the submission of a sample of the jobs, forecast its
    /// start from that moment (`allot forecast`'s method) and compare with the start the replay
    /// gives it; --json puts a `forecast` object under each run. Jobs without a time limit get
    /// one from the user-limit model (docs/forecast.md)
    #[arg(long)]
    pub forecast_backtest: bool,
    /// With --forecast-backtest: jobs to sample at most (every n-th job), at least 1
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1000,
        requires = "forecast_backtest",
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub forecast_jobs: u32,
    /// With --forecast-backtest: forks (draws) per forecast
    #[arg(long, value_name = "N", default_value_t = 16, requires = "forecast_backtest", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub forecast_draws: u32,
    /// Worker threads, 1 to 1024 [default: one per core]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,
}

/// One configuration of a sweep: its label and config.
#[derive(Clone)]
struct Variant {
    label: String,
    config: Arc<Config>,
    sim: SimSettings,
    cluster: ClusterSpec,
}

/// A finished run.
#[derive(Serialize)]
struct RunOut {
    config: String,
    cluster: String,
    #[serde(flatten)]
    report: SimReport,
    /// With --forecast-backtest.
    #[serde(skip_serializing_if = "Option::is_none")]
    forecast: Option<sim::forecast::BacktestSummary>,
    wall_s: f64,
    jobs_per_s: f64,
}

#[derive(Serialize)]
struct JsonOut<'a> {
    trace: TraceSummary,
    rules: &'a [sim::workload::RuleUse],
    left_out: &'a [sim::workload::LeftOut],
    mapped: &'a [sim::workload::Mapped],
    runs: &'a [RunOut],
}

#[derive(Serialize)]
struct TraceSummary {
    path: String,
    format: String,
    jobs: usize,
    node_events: usize,
    span_s: u64,
    malformed_rows: usize,
}

/// Runs `allot sim`.
///
/// # Errors
/// Unreadable config or trace, an unusable trace (every malformed row is
/// listed), bad `--cluster`, `--policy` or `--sweep`.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let config_path::Loaded {
        table,
        config,
        sim: settings,
    } = config_path::load_all(&args.config.path())?;
    let (mut trace, format) = load_trace(&args.trace, args.format.as_deref())?;
    if !trace.errors.is_empty() {
        let shown: Vec<String> = trace
            .errors
            .iter()
            .take(20)
            .map(|e| format!("  {e}"))
            .collect();
        let more = trace.errors.len().saturating_sub(20);
        let msg = format!(
            "{}: {} malformed row{}:\n{}{}",
            args.trace.display(),
            trace.errors.len(),
            if trace.errors.len() == 1 { "" } else { "s" },
            shown.join("\n"),
            if more > 0 {
                format!("\n  ... and {more} more")
            } else {
                String::new()
            }
        );
        if !args.skip_bad_rows {
            bail!("{msg}\nfix them, or pass --skip-bad-rows to replay the rest");
        }
        eprintln!("allot sim: warning: {msg}\n(skipped)");
    }
    if trace.jobs.is_empty() {
        // Say what left every row out: the skipped (no GPUs, zero runtime,
        // never scheduled) and the malformed ones.
        let mut why: Vec<String> = trace
            .skipped
            .iter()
            .map(|(reason, n)| format!("{n} row(s): {reason}"))
            .collect();
        if !trace.errors.is_empty() {
            why.push(format!("{} malformed row(s), skipped", trace.errors.len()));
        }
        bail!(
            "{}: no jobs to replay{}",
            args.trace.display(),
            if why.is_empty() {
                " (the file has no rows below its header)".to_string()
            } else {
                format!(": every row was left out ({}); a job needs at least one GPU and a runtime above 0", why.join("; "))
            }
        );
    }
    // The forecast and its baseline plan with time limits, never run times.
    let limited = if args.forecast_backtest {
        sim::forecast::limits::assign(&mut trace, 0)
    } else {
        0
    };
    if limited > 0 && !args.json {
        eprintln!(
            "allot sim: {limited} of the trace's {} jobs have no time limit: each got the one the user-limit model draws (docs/forecast.md)",
            trace.jobs.len()
        );
    }
    // The plots' directory and the log files, made before the replay: a
    // path that cannot be written fails now, not after the replay.
    if let Some(dir) = &args.plot {
        std::fs::create_dir_all(dir).with_context(|| {
            format!(
                "--plot {}: cannot make it a directory; give --plot a directory (new or existing) for the SVG plots",
                dir.display()
            )
        })?;
    }
    let logs = outputs::Logs::create(args)?;
    let policies = parse_policies(&args.policies)?;
    let base_cluster = match (&args.cluster, settings.cluster, config.capacity_gpus) {
        (Some(c), _, _) => ClusterSpec::parse(c).map_err(anyhow::Error::msg)?,
        (None, Some(c), _) => c,
        (None, None, Some(cap)) => ClusterSpec::from_capacity(cap),
        (None, None, None) => bail!(
            "no cluster size: pass --cluster NODESxGPUS (e.g. 44x8), or set [sim] cluster or capacity_gpus in {}",
            args.config.path().display()
        ),
    };
    // --cluster and a sweep of the cluster would both set it: the sweep won,
    // silently.
    if args.cluster.is_some()
        && args.sweeps.iter().any(|s| {
            s.split_once('=')
                .is_some_and(|(k, _)| k.trim() == "cluster")
        })
    {
        bail!("--cluster and --sweep cluster=... both set the cluster; give the sizes in the sweep only (e.g. --sweep cluster=2x8,4x8)");
    }
    let variants = sweep_variants(&table, base_cluster, &args.sweeps)?;
    let runs: Vec<(usize, Policy)> = (0..variants.len())
        .flat_map(|v| policies.iter().map(move |&p| (v, p)))
        .collect();
    // Workloads depend on the config's rules and the cluster: one per variant.
    let workloads: Vec<Workload> = variants
        .iter()
        .map(|v| Workload::prepare(&trace, &v.config, &v.sim, v.cluster))
        .collect();
    // A replay of the few jobs whose accounts the tree knows would be a
    // table of zeros (or of a sliver) presented as a result: refuse it.
    if let Some(u) = workloads
        .iter()
        .find_map(|w| w.unmatched(trace.classes_only))
    {
        bail!("{}: {u}", args.trace.display());
    }
    // Jobs larger than the cluster holding most of the work (with the
    // unknown accounts' jobs): refused for the same reason.
    if let Some(o) = workloads.iter().find_map(Workload::oversized) {
        bail!("{}: {o}", args.trace.display());
    }
    // Nothing left to replay: a table of zeros is no result either.
    if let Some(w) = workloads.iter().find(|w| w.jobs.is_empty()) {
        let why: Vec<String> = w
            .left_out
            .iter()
            .filter(|l| l.jobs > 0)
            .map(|l| format!("{} jobs {}", l.jobs, l.reason))
            .collect();
        bail!(
            "{}: no job of the trace can be replayed ({})",
            args.trace.display(),
            why.join("; ")
        );
    }
    let total: u64 = runs
        .iter()
        .map(|&(v, _)| workloads[v].jobs.len() as u64)
        .sum();
    let bar = progress_bar(total);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(args.threads.map_or(0, |n| n as usize))
        .build()
        .context("cannot start worker threads")?;
    let mut outs: Vec<RunOut> = pool.install(|| {
        runs.par_iter()
            .map(|&(v, policy)| {
                let var = &variants[v];
                let w = &workloads[v];
                let started = Instant::now();
                let mut last = 0u64;
                let mut progress = |done: u64| {
                    bar.inc(done.saturating_sub(last));
                    last = last.max(done);
                };
                let (report, forecast) = if args.forecast_backtest {
                    let opts = sim::forecast::BacktestOptions {
                        jobs: args.forecast_jobs,
                        forecast: sim::forecast::ForecastOptions {
                            draws: args.forecast_draws,
                            seed: var.sim.seed,
                            ..Default::default()
                        },
                        ..Default::default()
                    };
                    let (r, f) = sim::forecast::backtest(
                        w,
                        var.config.clone(),
                        &var.sim,
                        var.cluster,
                        policy,
                        &trace.events,
                        &opts,
                        &mut progress,
                    );
                    (r, Some(f))
                } else {
                    let r = sim::simulate(
                        w,
                        var.config.clone(),
                        &var.sim,
                        var.cluster,
                        policy,
                        &trace.events,
                        &mut progress,
                    );
                    (r, None)
                };
                bar.inc((w.jobs.len() as u64).saturating_sub(last));
                let wall = started.elapsed().as_secs_f64();
                RunOut {
                    config: var.label.clone(),
                    cluster: var.cluster.to_string(),
                    jobs_per_s: if wall > 0.0 {
                        w.jobs.len() as f64 / wall
                    } else {
                        0.0
                    },
                    wall_s: wall,
                    report,
                    forecast,
                }
            })
            .collect()
    });
    bar.finish_and_clear();
    fill_classic_waits(&mut outs);
    warn_partial(&outs);
    let w0 = &workloads[0];
    if args.json {
        let out = JsonOut {
            trace: TraceSummary {
                path: args.trace.display().to_string(),
                format: format.clone(),
                jobs: trace.jobs.len(),
                node_events: trace.events.len(),
                span_s: trace.jobs.last().map_or(0, |j| j.submit),
                malformed_rows: trace.errors.len(),
            },
            rules: &w0.rules,
            left_out: &w0.left_out,
            mapped: &w0.mapped,
            runs: &outs,
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print_text(args, &format, &trace, w0, &variants, &outs);
    }
    logs.write(&outs, &w0.teams)?;
    if let Some(dir) = &args.plot {
        let alloc: Vec<f64> = w0.teams.iter().map(|t| t.allocation).collect();
        let names: Vec<String> = w0.teams.iter().map(|t| t.name.clone()).collect();
        let files = plot::write_all(
            dir,
            &outs
                .iter()
                .map(|o| (run_label(o), &o.report))
                .collect::<Vec<_>>(),
            &names,
            &alloc,
            settings.metric_window,
        )?;
        if !args.json {
            println!(
                "\nplots: {}",
                files
                    .iter()
                    .map(|f| f.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    // A backtest that compared nothing measured nothing: its figures are
    // printed (n/a, JSON null), and the run fails saying why.
    if let Some((o, f)) = outs
        .iter()
        .find_map(|o| o.forecast.as_ref().filter(|f| f.jobs == 0).map(|f| (o, f)))
    {
        // Sampling more helps only where some jobs were not sampled.
        let fix = if f.sampled_every > 1 {
            format!(
                "Sample more with --forecast-jobs N (now {}), or give a trace whose jobs queue",
                args.forecast_jobs
            )
        } else {
            "Every job was sampled: give a trace whose jobs queue (more work than GPUs at times)"
                .to_string()
        };
        bail!(
            "--forecast-backtest compared no forecast in run {}: of the jobs sampled (one in {}), none was left pending by its submission's scheduling pass and started later ({} never started). {fix}",
            run_label(o),
            f.sampled_every,
            f.never_started,
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Sets every run's per-team `classic_wait_p90_s` to the same team's
/// `wait_p90_s` in the classic run of the same configuration (`None` where
/// classic was not replayed).
fn fill_classic_waits(outs: &mut [RunOut]) {
    let classic: BTreeMap<String, Vec<u64>> = outs
        .iter()
        .filter(|o| o.report.policy == Policy::Classic)
        .map(|o| {
            let waits = o.report.teams.iter().map(|t| t.wait_p90_s).collect();
            (o.config.clone(), waits)
        })
        .collect();
    for o in outs {
        let waits = classic.get(&o.config);
        for (i, t) in o.report.teams.iter_mut().enumerate() {
            t.classic_wait_p90_s = waits.and_then(|w| w.get(i).copied());
        }
    }
}

/// Says on stderr (text and `--json` alike) what a run's figures leave
/// out without its table showing it: a run that gave up at its horizon
/// with jobs unfinished (its figures cover only the work done by then), and
/// node events naming nodes the cluster does not have (ignored).
fn warn_partial(outs: &[RunOut]) {
    for o in outs {
        let r = &o.report;
        if r.stopped_at_horizon {
            eprintln!(
                "allot sim: warning: {} stopped at its horizon (day {:.1}) with {} job(s) unfinished: its figures count only what ran before; a preemption livelock or nodes failed for longer than the work left gets there (docs/simulator.md, Horizon)",
                run_label(o),
                r.span_s as f64 / 86_400.0,
                r.unfinished
            );
        }
    }
    if let Some(o) = outs.iter().find(|o| o.report.ignored_node_events > 0) {
        eprintln!(
            "allot sim: warning: {} node event(s) name a node the cluster ({}) does not have, and were ignored: check the trace's node column (nodes count from 0) or the cluster size",
            o.report.ignored_node_events,
            o.cluster
        );
    }
}

fn run_label(o: &RunOut) -> String {
    if o.config.is_empty() {
        o.report.policy.to_string()
    } else {
        format!("{} {}", o.report.policy, o.config)
    }
}

fn progress_bar(total: u64) -> indicatif::ProgressBar {
    // Long runs only, and only on a terminal (indicatif hides itself
    // otherwise; checking first avoids even its bookkeeping).
    if total < 200_000 || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(total);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:40}] {pos}/{len} jobs ({per_sec}, eta {eta})",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    bar
}

fn parse_policies(names: &[String]) -> anyhow::Result<Vec<Policy>> {
    if names.is_empty() {
        return Ok(Policy::ALL.to_vec());
    }
    let mut out = Vec::new();
    for n in names.iter().flat_map(|n| n.split(',')) {
        let p = Policy::from_name(n.trim()).with_context(|| {
            format!(
                "--policy {n:?}: unknown policy; choose allot, fifo, static, classic or fairtree"
            )
        })?;
        if !out.contains(&p) {
            out.push(p);
        }
    }
    Ok(out)
}

/// Applies `key=value` to a config file's table (and the cluster), then
/// parses the table again with the config's own parser: a value it refuses
/// is refused with its message.
fn apply(
    doc: &mut toml::Table,
    cluster: &mut ClusterSpec,
    key: &str,
    value: &str,
) -> anyhow::Result<()> {
    use toml::Value;
    let dur =
        || parse_slurm_duration(value).map_err(|e| anyhow::anyhow!("--sweep {key}={value}: {e}"));
    let int = || -> anyhow::Result<u64> {
        value
            .parse()
            .with_context(|| format!("--sweep {key}={value}: expected a whole number"))
    };
    let text = || Value::String(value.into());
    match key {
        "window" => set(doc, None, key, text()),
        "half_life" | "calc_period" | "checkpoint_interval" | "metric_window" => {
            set(doc, Some("sim"), key, text())
        }
        "sync_interval" => set(doc, Some("sync"), "interval", text()),
        "default_min_runtime" => set(doc, Some("contract"), key, text()),
        "max_min_runtime" => {
            // The default follows the cap down.
            if parse(doc)?.0.contract.default_min_runtime > dur()? {
                set(doc, Some("contract"), "default_min_runtime", text());
            }
            set(doc, Some("contract"), key, text());
        }
        "charge_min_runtime" => {
            let on: bool = value
                .parse()
                .with_context(|| format!("--sweep {key}={value}: expected true or false"))?;
            set(doc, Some("contract"), key, Value::Boolean(on));
        }
        // 0 turns requeue points off (both keys).
        "requeue_period" | "requeue_window" => {
            if dur()? == 0 {
                if let Some(Value::Table(c)) = doc.get_mut("contract") {
                    c.remove("requeue_period");
                    c.remove("requeue_window");
                }
            } else {
                set(doc, Some("contract"), key, text());
            }
        }
        "backfill_depth" => {
            let depth = u32::try_from(int()?).context("backfill_depth too large")?;
            set(doc, Some("sim"), key, Value::Integer(depth.into()));
        }
        "seed" => {
            let seed = i64::try_from(int()?)
                .with_context(|| format!("--sweep {key}={value}: at most {}", i64::MAX))?;
            set(doc, Some("sim"), key, Value::Integer(seed));
        }
        "cluster" => {
            *cluster = ClusterSpec::parse(value).map_err(anyhow::Error::msg)?;
            return Ok(());
        }
        other => bail!(
            "--sweep {other}: unknown key; use window, half_life, calc_period, default_min_runtime, max_min_runtime, charge_min_runtime, requeue_period, requeue_window, sync_interval, checkpoint_interval, metric_window, backfill_depth, seed or cluster"
        ),
    }
    parse(doc)
        .map(|_| ())
        .map_err(|e| anyhow::anyhow!("--sweep {key}={value}: {e}"))
}

/// Sets `key` of `doc` (of its table `table`, made if missing) to `value`.
fn set(doc: &mut toml::Table, table: Option<&str>, key: &str, value: toml::Value) {
    let t = match table {
        None => doc,
        Some(t) => match doc
            .entry(t)
            .or_insert_with(|| toml::Value::Table(Default::default()))
        {
            toml::Value::Table(t) => t,
            // Not a table: parsing it again says so.
            _ => return,
        },
    };
    t.insert(key.into(), value);
}

/// The engine's config and the `[sim]` settings of a config file's table.
fn parse(doc: &toml::Table) -> anyhow::Result<(Config, SimSettings)> {
    sim::settings::from_toml_table(doc.clone()).map_err(anyhow::Error::msg)
}

/// The grid of configurations `--sweep` asks for (one, unlabelled, without),
/// from the config file's table.
fn sweep_variants(
    doc: &toml::Table,
    cluster: ClusterSpec,
    sweeps: &[String],
) -> anyhow::Result<Vec<Variant>> {
    let mut variants = vec![(String::new(), doc.clone(), cluster)];
    let mut seen: Vec<&str> = Vec::new();
    for s in sweeps {
        let (key, values) = s.split_once('=').with_context(|| {
            format!("--sweep {s:?}: write key=v1,v2,... e.g. window=1-0,3-0,7-0,14-0")
        })?;
        let key = key.trim();
        // Two sweeps of one key would overwrite each other in every run.
        if seen.contains(&key) {
            bail!("--sweep {key} is given twice; list its values once: --sweep {key}=v1,v2,...");
        }
        seen.push(key);
        // An empty or repeated value is a typo: it would drop a run, or
        // replay one twice under one label.
        let vals: Vec<&str> = values.split(',').map(str::trim).collect();
        for (i, v) in vals.iter().enumerate() {
            if v.is_empty() && vals.len() > 1 {
                bail!(
                    "--sweep {s:?}: value {} is empty; write key=v1,v2,... with no empty value",
                    i + 1
                );
            }
            if vals[..i].contains(v) {
                bail!("--sweep {s:?}: {v} is given twice; list each value once");
            }
        }
        let mut next = Vec::new();
        for (label, c, cl) in &variants {
            for v in vals.iter().copied().filter(|v| !v.is_empty()) {
                let (mut c, mut cl) = (c.clone(), *cl);
                apply(&mut c, &mut cl, key, v)?;
                let l = if label.is_empty() {
                    format!("{key}={v}")
                } else {
                    format!("{label} {key}={v}")
                };
                next.push((l, c, cl));
            }
        }
        if next.is_empty() {
            bail!("--sweep {s:?}: no values");
        }
        variants = next;
    }
    variants
        .into_iter()
        .map(|(label, doc, cluster)| {
            let (config, sim) = parse(&doc)?;
            Ok(Variant {
                label,
                config: Arc::new(config),
                sim,
                cluster,
            })
        })
        .collect()
}

#[cfg(test)]
mod one_reader_tests;
#[cfg(test)]
mod tests;
