//! `allot sim`: replay a trace against scheduling configurations and compare.
//!
//! ```text
//! allot sim --trace FILE --config allot.toml [--cluster NODESxGPUS]
//!           [--policy NAME]... [--sweep key=v1,v2,...]... [--json] [--plot DIR]
//! ```
//!
//! Every combination of `--sweep` values x `--policy` is one run; runs go in
//! parallel (rayon), each on one core, and the engine code is the one the
//! plugins run (see `allot_sim`). The output says how the trace's teams
//! mapped onto the tree (unknown accounts are listed, never dropped
//! silently), which contract rules decided how many jobs, then one table
//! row per run and one column per run in the per-team table. `--plot DIR`
//! writes SVGs: share over time per team (one per run), wait-time CDFs per
//! job class, share error over time. Formats and every metric:
//! docs/simulator.md.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use allot_sim::{
    self as sim, trace, ClusterSpec, JobClass, Policy, SimReport, Trace, TraceJob, Workload,
};
use anyhow::{bail, Context};
use fairshare::duration::parse_slurm_duration;
use fairshare::Config;
use rayon::prelude::*;
use serde::Serialize;

use crate::config_path::{self, ConfigArg};

mod plot;

/// Arguments of `allot sim`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub config: ConfigArg,
    /// The workload: allot CSV, Philly, Helios/Acme, Alibaba pod list, a
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
    /// calc_period, default_min_runtime, max_min_runtime, charge_min_runtime, sync_interval,
    /// checkpoint_interval, metric_window, backfill_depth, seed, cluster
    #[arg(long = "sweep", value_name = "KEY=V1,V2")]
    pub sweeps: Vec<String>,
    /// JSON output: every run's summary and per-team results
    #[arg(long)]
    pub json: bool,
    /// Write SVG plots into this directory
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Replay what could be read even if some rows are malformed (they are listed on stderr)
    #[arg(long)]
    pub skip_bad_rows: bool,
    /// Worker threads [default: one per core]
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
}

/// One configuration of a sweep: its label and config.
#[derive(Clone)]
struct Variant {
    label: String,
    config: Arc<Config>,
    cluster: ClusterSpec,
}

/// A finished run.
#[derive(Serialize)]
struct RunOut {
    config: String,
    cluster: String,
    #[serde(flatten)]
    report: SimReport,
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
    let config = config_path::load(&args.config.path())?;
    let (trace, format) = load_trace(&args.trace, args.format.as_deref())?;
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
        bail!("{}: no jobs to replay", args.trace.display());
    }
    let policies = parse_policies(&args.policies)?;
    let base_cluster = match (&args.cluster, config.sim.cluster, config.capacity_gpus) {
        (Some(c), _, _) => ClusterSpec::parse(c).map_err(anyhow::Error::msg)?,
        (None, Some(c), _) => c,
        (None, None, Some(cap)) => ClusterSpec::from_capacity(cap),
        (None, None, None) => bail!(
            "no cluster size: pass --cluster NODESxGPUS (e.g. 44x8), or set [sim] cluster or capacity_gpus in {}",
            args.config.path().display()
        ),
    };
    let variants = sweep_variants(&config, base_cluster, &args.sweeps)?;
    let runs: Vec<(usize, Policy)> = (0..variants.len())
        .flat_map(|v| policies.iter().map(move |&p| (v, p)))
        .collect();
    // Workloads depend on the config's rules and the cluster: one per variant.
    let workloads: Vec<Workload> = variants
        .iter()
        .map(|v| Workload::prepare(&trace, &v.config, v.cluster))
        .collect();
    // A replay of the few jobs whose accounts the tree knows would be a
    // table of zeros (or of a sliver) presented as a result: refuse it.
    if let Some(u) = workloads
        .iter()
        .find_map(|w| w.unmatched(trace.classes_only))
    {
        bail!("{}: {u}", args.trace.display());
    }
    // Nothing left to replay (every job larger than the cluster, say): a
    // table of zeros is no result either.
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
        .num_threads(args.threads.unwrap_or(0))
        .build()
        .context("cannot start worker threads")?;
    let outs: Vec<RunOut> = pool.install(|| {
        runs.par_iter()
            .map(|&(v, policy)| {
                let var = &variants[v];
                let w = &workloads[v];
                let started = Instant::now();
                let mut last = 0u64;
                let report = sim::simulate(
                    w,
                    var.config.clone(),
                    var.cluster,
                    policy,
                    &trace.events,
                    &mut |done| {
                        bar.inc(done - last);
                        last = done;
                    },
                );
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
                }
            })
            .collect()
    });
    bar.finish_and_clear();
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
            config.sim.metric_window,
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
    Ok(ExitCode::SUCCESS)
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

/// Applies `key=value` to a config (and cluster).
fn apply(
    config: &mut Config,
    cluster: &mut ClusterSpec,
    key: &str,
    value: &str,
) -> anyhow::Result<()> {
    let dur =
        || parse_slurm_duration(value).map_err(|e| anyhow::anyhow!("--sweep {key}={value}: {e}"));
    let positive = |d: u64| -> anyhow::Result<u64> {
        if d == 0 {
            bail!("--sweep {key}={value}: must be longer than 0");
        }
        Ok(d)
    };
    let int = || -> anyhow::Result<u64> {
        value
            .parse()
            .with_context(|| format!("--sweep {key}={value}: expected a whole number"))
    };
    match key {
        "window" => config.window = positive(dur()?)?,
        "half_life" => config.sim.half_life = positive(dur()?)?,
        "calc_period" => config.sim.calc_period = positive(dur()?)?,
        "sync_interval" => config.sync_interval = positive(dur()?)?,
        "checkpoint_interval" => config.sim.checkpoint_interval = dur()?,
        "metric_window" => config.sim.metric_window = positive(dur()?)?,
        "default_min_runtime" => {
            let d = dur()?;
            if d > config.contract.max_min_runtime {
                bail!("--sweep {key}={value}: above contract.max_min_runtime; sweep max_min_runtime first");
            }
            config.contract.default_min_runtime = d;
        }
        "max_min_runtime" => {
            config.contract.max_min_runtime = dur()?;
            let m = config.contract.max_min_runtime;
            config.contract.default_min_runtime = config.contract.default_min_runtime.min(m);
        }
        "charge_min_runtime" => {
            config.contract.charge_min_runtime = value
                .parse()
                .with_context(|| format!("--sweep {key}={value}: expected true or false"))?
        }
        "backfill_depth" => config.sim.backfill_depth = u32::try_from(int()?).context("backfill_depth too large")?,
        "seed" => config.sim.seed = int()?,
        "cluster" => *cluster = ClusterSpec::parse(value).map_err(anyhow::Error::msg)?,
        other => bail!(
            "--sweep {other}: unknown key; use window, half_life, calc_period, default_min_runtime, max_min_runtime, charge_min_runtime, sync_interval, checkpoint_interval, metric_window, backfill_depth, seed or cluster"
        ),
    }
    Ok(())
}

/// The grid of configurations `--sweep` asks for (one, unlabelled, without).
fn sweep_variants(
    config: &Config,
    cluster: ClusterSpec,
    sweeps: &[String],
) -> anyhow::Result<Vec<Variant>> {
    let mut variants = vec![(String::new(), config.clone(), cluster)];
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
        let mut next = Vec::new();
        for (label, c, cl) in &variants {
            for v in values.split(',').map(str::trim).filter(|v| !v.is_empty()) {
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
    Ok(variants
        .into_iter()
        .map(|(label, c, cluster)| Variant {
            label,
            config: Arc::new(c),
            cluster,
        })
        .collect())
}

/// Reads a trace in any supported format.
fn load_trace(path: &Path, format: Option<&str>) -> anyhow::Result<(Trace, String)> {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    if format == Some("ledger") || (format.is_none() && matches!(ext, "sqlite" | "db")) {
        return Ok((ledger_trace(path)?, "ledger".into()));
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let first = text.lines().next().unwrap_or("");
    if format == Some("sacct") || (format.is_none() && first.contains('|')) {
        return Ok((
            sacct_trace(&text).with_context(|| format!("{}", path.display()))?,
            "sacct".into(),
        ));
    }
    let fmt = format.map(|f| trace::TraceFormat::from_name(f).expect("clap checked the name"));
    let t = trace::parse(&text, fmt).with_context(|| format!("{}", path.display()))?;
    let name = fmt
        .or_else(|| {
            let cols: Vec<String> = trace::split_fields(first, ',')
                .iter()
                .map(|c| c.trim().to_ascii_lowercase())
                .collect();
            trace::TraceFormat::detect(&cols.iter().map(String::as_str).collect::<Vec<_>>())
        })
        .map(|f| format!("{f:?}").to_lowercase())
        .unwrap_or_default();
    Ok((t, name))
}

/// One job per Slurm job id: the first submit, the sum of its attempts'
/// run times, its most GPUs, its recorded contract. Jobs that never started
/// or still run are skipped (counted).
fn attempts_to_trace(attempts: impl IntoIterator<Item = AttemptLite>) -> Trace {
    let mut by_job: BTreeMap<u64, TraceJob> = BTreeMap::new();
    let mut skipped: BTreeMap<&'static str, u64> = BTreeMap::new();
    for a in attempts {
        let (Some(start), Some(end)) = (a.start, a.end) else {
            *skipped
                .entry(if a.start.is_none() {
                    "never started"
                } else {
                    "still running"
                })
                .or_default() += 1;
            continue;
        };
        if a.gpus == 0 {
            *skipped.entry("no GPUs").or_default() += 1;
            continue;
        }
        let run = a.elapsed.unwrap_or_else(|| (end - start).max(0) as u64);
        let e = by_job.entry(a.job_id).or_insert_with(|| TraceJob {
            id: a.job_id,
            team: a.account.to_ascii_lowercase(),
            partition: a.partition.clone(),
            submit: a.submit.max(0) as u64,
            duration: 0,
            gpus: 0,
            min_runtime: a.min_runtime,
            resumable: None,
            line: a.line,
        });
        e.submit = e.submit.min(a.submit.max(0) as u64);
        e.duration += run;
        e.gpus = e.gpus.max(u32::try_from(a.gpus).unwrap_or(u32::MAX));
    }
    let jobs: Vec<TraceJob> = by_job.into_values().filter(|j| j.duration > 0).collect();
    let mut t = trace::from_jobs(jobs, Vec::new());
    t.skipped = skipped
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    t
}

struct AttemptLite {
    line: u32,
    job_id: u64,
    account: String,
    partition: Option<String>,
    submit: i64,
    start: Option<i64>,
    end: Option<i64>,
    elapsed: Option<u64>,
    gpus: u64,
    min_runtime: Option<u64>,
}

fn sacct_trace(text: &str) -> anyhow::Result<Trace> {
    let mut lines = text.lines().enumerate();
    let (_, header) = lines.next().context("empty sacct dump")?;
    let parser =
        allot_ledger::sacct::Parser::from_header_line(header, jiff::tz::TimeZone::system())?;
    if let Some(note) = parser.layout_note() {
        // Without Submit a job's submit time is its first start: waits read 0.
        eprintln!("allot sim: note: {note} (waits read from the first start)");
    }
    let mut errors = Vec::new();
    let mut attempts = Vec::new();
    let mut steps = 0u64;
    for (i, line) in lines {
        if line.trim().is_empty() {
            continue;
        }
        match parser.parse(line) {
            Ok(allot_ledger::sacct::RowOutcome::Attempt(a)) => attempts.push(AttemptLite {
                line: i as u32 + 1,
                job_id: a.job_id,
                account: a.account,
                partition: a.partition,
                submit: a.submit,
                start: a.start,
                end: a.end,
                elapsed: a.elapsed,
                gpus: a.gpus,
                min_runtime: a.min_runtime,
            }),
            Ok(allot_ledger::sacct::RowOutcome::Skipped) => {}
            Ok(allot_ledger::sacct::RowOutcome::Step) => steps += 1,
            Err(e) => errors.push(trace::RowError {
                line: i as u32 + 1,
                column: Some(e.field.to_string()),
                message: e.to_string(),
            }),
        }
    }
    let mut t = attempts_to_trace(attempts);
    t.errors = errors;
    if steps > 0 {
        t.skipped
            .push(("job steps (their jobs' rows are read)".into(), steps));
    }
    Ok(t)
}

fn ledger_trace(path: &Path) -> anyhow::Result<Trace> {
    let reader = allot_ledger::LedgerReader::open(path)
        .with_context(|| format!("cannot open the ledger {}", path.display()))?;
    let attempts = reader.all_attempts()?;
    Ok(attempts_to_trace(attempts.into_iter().enumerate().map(
        |(i, a)| {
            let r = a.record;
            AttemptLite {
                line: i as u32 + 1,
                job_id: r.job_id,
                account: r.account,
                partition: r.partition,
                submit: r.submit,
                start: r.start,
                end: r.end,
                elapsed: r.elapsed,
                gpus: r.gpus,
                min_runtime: r.min_runtime_recorded.then_some(r.min_runtime),
            }
        },
    )))
}

/// `1234` s as `20.6m`, `3.4h`, `2.1d`.
pub fn human_secs(s: u64) -> String {
    let s = s as f64;
    if s < 60.0 {
        format!("{s:.0}s")
    } else if s < 3600.0 {
        format!("{:.1}m", s / 60.0)
    } else if s < 86_400.0 {
        format!("{:.1}h", s / 3600.0)
    } else {
        format!("{:.1}d", s / 86_400.0)
    }
}

fn print_text(
    args: &Args,
    format: &str,
    trace: &Trace,
    w: &Workload,
    variants: &[Variant],
    outs: &[RunOut],
) {
    let span = trace.jobs.last().map_or(0, |j| j.submit);
    println!(
        "trace {} ({format}): {} jobs, {} node events, submissions over {}",
        args.trace.display(),
        trace.jobs.len(),
        trace.events.len(),
        human_secs(span)
    );
    let mut seen: BTreeMap<&str, u64> = BTreeMap::new();
    for j in &w.jobs {
        *seen.entry(&w.accounts[j.account as usize]).or_default() += 1;
    }
    println!(
        "teams: {} accounts mapped onto {} leaves of the tree",
        seen.len(),
        w.teams.len()
    );
    for m in &w.mapped {
        println!("  {} -> {}: {} jobs ({})", m.name, m.account, m.jobs, m.by);
    }
    for l in &w.left_out {
        println!(
            "  left out: {} jobs ({:.0} GPU-h): {}",
            l.jobs, l.gpu_hours, l.reason
        );
    }
    println!("contract rules applied:");
    for r in &w.rules {
        println!(
            "  {:<12} {:>8} jobs {:>10.0} GPU-h  {}",
            r.rule, r.jobs, r.gpu_hours, r.sets
        );
    }
    if variants.len() > 1 {
        println!(
            "(rules shown for the first configuration; a sweep of contract keys changes them)"
        );
    }
    println!();
    let cfg_w = outs
        .iter()
        .map(|o| o.config.len())
        .max()
        .unwrap_or(0)
        .max(6);
    let header = format!(
        "{:<cfg_w$} {:<8} {:>6} {:>6} {:>7} {:>6} {:>6} {:>20} {:>20} {:>20} {:>7} {:>8} {:>6} {:>9}",
        "config", "policy", "owed%", "occ%", "unalc%", "err%", "err90%", "wait debug p50/90/99", "wait batch p50/90/99",
        "wait large p50/90/99", "preempt", "lost GPUh", "unfin", "jobs/s"
    );
    println!("{header}");
    println!("{}", "-".repeat(header.len()));
    for o in outs {
        let r = &o.report;
        let wait = |c: JobClass| {
            let x = &r.waits[c as usize];
            format!(
                "{}/{}/{}",
                human_secs(x.p50_s),
                human_secs(x.p90_s),
                human_secs(x.p99_s)
            )
        };
        println!(
            "{:<cfg_w$} {:<8} {:>6.1} {:>6.1} {:>7} {:>6.1} {:>6.1} {:>20} {:>20} {:>20} {:>7} {:>8.0} {:>6} {:>9.0}",
            o.config,
            r.policy.name(),
            100.0 * r.owed_delivered,
            100.0 * r.occupancy,
            if r.policy == Policy::Allot { format!("{:.1}", 100.0 * r.unallocated_share) } else { "-".into() },
            100.0 * r.share_error_mean,
            100.0 * r.share_error_p90,
            wait(JobClass::Debug),
            wait(JobClass::Batch),
            wait(JobClass::Large),
            r.preemptions,
            r.lost_gpu_hours,
            r.unfinished,
            o.jobs_per_s,
        );
    }
    let header = format!(
        "{:<cfg_w$} {:<8} {:>7} {:>9} {:>22} {:>7} {:>9} {:>9} {:>9}",
        "config",
        "policy",
        "weekly%",
        "teams>=95",
        "worst team owed%",
        "lost%",
        "pre/kGPUh",
        "reversals",
        "occ-end%"
    );
    println!("\n{header}");
    println!("{}", "-".repeat(header.len()));
    for o in outs {
        let r = &o.report;
        let worst = r
            .worst_team
            .as_ref()
            .map_or("-".to_string(), |(n, v)| format!("{n} {:.1}", 100.0 * v));
        println!(
            "{:<cfg_w$} {:<8} {:>7.1} {:>9} {:>22} {:>7.2} {:>9.1} {:>9} {:>9.1}",
            o.config,
            r.policy.name(),
            100.0 * r.owed_delivered_weekly,
            format!("{}/{}", r.teams_at_95, r.teams.len()),
            worst,
            100.0 * r.lost_of_delivered,
            r.preemptions_per_1000_gpu_hours,
            r.reversals,
            100.0 * r.occupancy_to_end,
        );
    }
    if outs.len() <= 8 {
        println!("\nowed GPU-hours delivered, per team (%; alloc = allocation, owed = GPU-h owed under the first run)");
        let labels: Vec<String> = outs.iter().map(run_label).collect();
        let cw = labels.iter().map(String::len).max().unwrap_or(6).max(6);
        let mut h = format!("{:<14} {:>6} {:>9}", "team", "alloc%", "owed GPUh");
        for l in &labels {
            h += &format!(" {l:>cw$}");
        }
        println!("{h}");
        for (t, team) in w.teams.iter().enumerate() {
            let mut line = format!(
                "{:<14} {:>6.1} {:>9.0}",
                team.name,
                100.0 * team.allocation,
                outs[0].report.teams[t].owed_gpu_hours
            );
            for o in outs {
                line += &format!(" {:>cw$.1}", 100.0 * o.report.teams[t].owed_delivered);
            }
            println!("{line}");
        }
    }
    println!(
        "\nowed% = owed GPU-hours delivered (weekly%: counted per week); occ% = occupancy from the first to the last submission (occ-end%: to the last event); lost% = GPU-h lost to requeues / delivered; pre/kGPUh = preemptions per 1,000 delivered GPU-h; unalc% = free-tier share of GPU time; err% = mean (and p90) hourly share error over a {} window; waits = first start - submit. See docs/simulator.md.",
        human_secs(variants[0].config.sim.metric_window)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_grid_and_errors() {
        let c = Config::from_toml_str("[tree.a]\nshare = 1\n").unwrap();
        let cl = ClusterSpec {
            nodes: 1,
            gpus_per_node: 8,
        };
        let v =
            sweep_variants(&c, cl, &["window=1-0,3-0".into(), "cluster=2x8,4x8".into()]).unwrap();
        let labels: Vec<&str> = v.iter().map(|v| v.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "window=1-0 cluster=2x8",
                "window=1-0 cluster=4x8",
                "window=3-0 cluster=2x8",
                "window=3-0 cluster=4x8"
            ]
        );
        assert_eq!(v[2].config.window, 3 * 86_400);
        assert_eq!(v[3].cluster.nodes, 4);
        let e = sweep_variants(&c, cl, &["windw=1-0".into()])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("unknown key"), "{e}");
        let e = sweep_variants(&c, cl, &["window=0".into()])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("longer than 0"), "{e}");
        let e = sweep_variants(&c, cl, &["window=1-0".into(), "window=2-0".into()])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("--sweep window is given twice"), "{e}");
        assert!(
            parse_policies(&["allot,fifo".into(), "fifo".into()]).unwrap()
                == vec![Policy::Allot, Policy::Fifo]
        );
        assert!(parse_policies(&["slurm".into()]).is_err());
        assert_eq!(human_secs(5400), "1.5h");
    }

    #[test]
    fn the_shipped_demo_runs_and_plots() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let dir = std::env::temp_dir().join(format!("allot-sim-plots-{}", std::process::id()));
        let args = Args {
            config: ConfigArg {
                config: Some(root.join("examples/sim-philly.toml")),
            },
            trace: root.join("examples/traces/philly-slice.csv"),
            format: None,
            cluster: Some("16x8".into()),
            policies: vec!["allot".into(), "fairtree".into()],
            sweeps: vec!["window=1-0,7-0".into()],
            json: true,
            plot: Some(dir.clone()),
            skip_bad_rows: false,
            threads: Some(2),
        };
        assert_eq!(run(&args).unwrap(), ExitCode::SUCCESS);
        for f in [
            "share-allot_window_1-0.svg",
            "wait-cdf-debug.svg",
            "share-error.svg",
        ] {
            let text = std::fs::read_to_string(dir.join(f)).unwrap();
            assert!(text.starts_with("<svg"), "{f}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn sacct_dumps_become_jobs() {
        let text = "JobIDRaw|JobID|Account|User|Partition|AllocTRES|Submit|Start|End|Elapsed|State|AdminComment\n\
                    10|10|a1|u|gpu|gres/gpu=2|1700000000|1700000100|1700003700|01:00:00|COMPLETED|allot:min_runtime=600\n\
                    11|11|a1|u|gpu|gres/gpu=1|1700000050|Unknown|Unknown|00:00:00|PENDING|\n";
        let t = sacct_trace(text).unwrap();
        assert_eq!(t.jobs.len(), 1, "{:?}", t.errors);
        assert_eq!(
            (t.jobs[0].gpus, t.jobs[0].duration, t.jobs[0].min_runtime),
            (2, 3600, Some(600))
        );
        assert_eq!(t.skipped, vec![("never started".to_string(), 1)]);
    }

    #[test]
    fn sacct_dumps_with_steps_replay_their_jobs() {
        let text = "JobIDRaw|JobID|Account|User|Partition|AllocTRES|Submit|Start|End|Elapsed|State|AdminComment\n\
                    5101|5101|a1|u|gpu|gres/gpu=2|1700000000|1700000100|1700003700|01:00:00|COMPLETED|\n\
                    5101.batch|5101.batch|a1|u||gres/gpu=2|1700000100|1700000100|1700003700|01:00:00|COMPLETED|\n\
                    5104.0|5104.0|a1|u||gres/gpu=2|1700000100|1700000100|1700003700|01:00:00|COMPLETED|\n\
                    5104.extern|5104.extern|a1|u||gres/gpu=2|1700000100|1700000100|1700003700|01:00:00|COMPLETED|\n\
                    7104.batch|7100_3.batch|a1|u||gres/gpu=1|1700000100|1700000100|1700003700|01:00:00|COMPLETED|\n";
        let t = sacct_trace(text).unwrap();
        assert!(t.errors.is_empty(), "{:?}", t.errors);
        assert_eq!(t.jobs.len(), 1);
        assert_eq!(
            t.skipped,
            vec![("job steps (their jobs' rows are read)".to_string(), 4)]
        );
    }

    fn sim_args(dir: &Path, config: &str, trace: &str) -> Args {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("allot.toml"), config).unwrap();
        std::fs::write(dir.join("trace.csv"), trace).unwrap();
        Args {
            config: ConfigArg {
                config: Some(dir.join("allot.toml")),
            },
            trace: dir.join("trace.csv"),
            format: None,
            cluster: Some("1x8".into()),
            policies: vec!["allot".into()],
            sweeps: vec![],
            json: true,
            plot: None,
            skip_bad_rows: false,
            threads: Some(1),
        }
    }

    #[test]
    fn mixed_case_trace_accounts_match_and_unmatched_traces_fail() {
        let dir = std::env::temp_dir().join(format!("allot-sim-case-{}", std::process::id()));
        let helios = "job_id,user,vc,gpu_num,submit_time,duration\n\
                      1,u,vcAB,2,0,3600\n2,u,vcCd,2,60,3600\n3,u,vcEF,1,120,3600\n";
        // vcAB and vcCd are the accounts vcab and vccd; vcEF (1 of 5 GPU-h) is left out.
        let args = sim_args(
            &dir,
            "capacity_gpus = 8\n[tree.vcab]\nshare = 1\n[tree.vccd]\nshare = 1\n",
            helios,
        );
        assert_eq!(run(&args).unwrap(), ExitCode::SUCCESS);
        let (trace, _) = load_trace(&args.trace, None).unwrap();
        let cfg = config_path::load(&args.config.path()).unwrap();
        let w = Workload::prepare(&trace, &cfg, ClusterSpec::parse("1x8").unwrap());
        assert_eq!(w.jobs.len(), 2);
        assert_eq!(w.accounts, ["vcab", "vccd"]);
        assert_eq!(
            w.unmatched(false),
            None,
            "1 GPU-h of 5 left out is not most"
        );
        // A tree that knows none of them: refused with one line, no table.
        let args = sim_args(&dir, "capacity_gpus = 8\n[tree.other]\nshare = 1\n", helios);
        let e = run(&args).unwrap_err().to_string();
        assert_eq!(e.lines().count(), 1, "{e}");
        assert!(
            e.contains("100% of the trace's GPU-hours (5 of 5) are in accounts the tree does not know: vcab, vccd, vcef"),
            "{e}"
        );
        assert!(e.contains("[sim.accounts] vcab = \"<account>\""), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn alibaba_pods_map_onto_one_team_or_by_class() {
        let dir = std::env::temp_dir().join(format!("allot-sim-ali-{}", std::process::id()));
        let pods = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n\
                    openb-pod-0001,6000,12288,1,1000,,LS,Running,0,3600,0\n\
                    openb-pod-0002,6000,12288,2,1000,,BE,Running,10,3610,10\n\
                    openb-pod-0003,6000,12288,1,500,,Burstable,Running,20,3620,20\n";
        // A one-team tree: every pod is that team's.
        let args = sim_args(&dir, "capacity_gpus = 8\n[tree.team]\nshare = 1\n", pods);
        assert_eq!(run(&args).unwrap(), ExitCode::SUCCESS);
        let cfg = config_path::load(&args.config.path()).unwrap();
        let (trace, _) = load_trace(&args.trace, None).unwrap();
        let w = Workload::prepare(&trace, &cfg, ClusterSpec::parse("1x8").unwrap());
        assert_eq!(w.jobs.len(), 3);
        assert_eq!(w.accounts, ["team"]);
        let mapped: Vec<(&str, &str, u64, &str)> = w
            .mapped
            .iter()
            .map(|m| (m.name.as_str(), m.account.as_str(), m.jobs, m.by))
            .collect();
        let one = "the one team: the trace has no tenants";
        assert_eq!(
            mapped,
            [
                ("be", "team", 1, one),
                ("burstable", "team", 1, one),
                ("ls", "team", 1, one)
            ]
        );
        // Two teams and no mapping: refused, naming the classes.
        let two = "capacity_gpus = 8\n[tree.prod]\nshare = 1\n[tree.research]\nshare = 1\n";
        let args = sim_args(&dir, two, pods);
        let e = run(&args).unwrap_err().to_string();
        assert!(
            e.contains("100% of the trace's GPU-hours (4 of 4) are in QoS classes (the trace has no tenants) the tree does not know: be, burstable, ls"),
            "{e}"
        );
        // Mapped by class, with `*` for the rest.
        let args = sim_args(
            &dir,
            &format!("{two}[sim.accounts]\nLS = \"prod\"\n\"*\" = \"research\"\n"),
            pods,
        );
        assert_eq!(run(&args).unwrap(), ExitCode::SUCCESS);
        let cfg = config_path::load(&args.config.path()).unwrap();
        let w = Workload::prepare(&trace, &cfg, ClusterSpec::parse("1x8").unwrap());
        let per_account: Vec<(u64, u32)> = w.jobs.iter().map(|j| (j.id, j.account)).collect();
        assert_eq!(w.accounts, ["prod", "research"]);
        assert!(w.mapped.iter().all(|m| m.by == "[sim.accounts]"));
        assert_eq!(w.mapped.iter().map(|m| m.jobs).sum::<u64>(), 3);
        assert_eq!(per_account, [(1, 0), (2, 1), (3, 1)]);
        // Every pod larger than the cluster: refused too, not a table of zeros.
        let mut args = sim_args(&dir, "capacity_gpus = 8\n[tree.team]\nshare = 1\n", pods);
        args.cluster = Some("1x1".into());
        let pods2 = pods
            .replace(",1,1000,,LS", ",2,1000,,LS")
            .replace(",1,500,,", ",2,500,,");
        std::fs::write(&args.trace, pods2).unwrap();
        let e = run(&args).unwrap_err().to_string();
        assert!(
            e.ends_with(
                "no job of the trace can be replayed (3 jobs larger than the cluster (1x1))"
            ),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
