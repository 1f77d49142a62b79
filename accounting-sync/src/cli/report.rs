//! `allot report`: the budget report over a window. See `allot_sync::reports`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use allot_ledger::LedgerReader;
use allot_sync::reports::{budget, budget_page, health};
use anyhow::{bail, Context};

use super::common::{
    self, capacity, init_logging, now, parse_interval, parse_when, ConfigArg, LedgerArg,
};
use super::remote::{self, Source};

/// Arguments of `allot report`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub config: ConfigArg,
    #[command(flatten)]
    pub ledger: LedgerArg,
    /// Window start: epoch seconds, YYYY-MM-DD[THH:MM[:SS]] local, or now [default: end - window]
    #[arg(short = 'S', long = "starttime", value_name = "TIME")]
    pub start: Option<String>,
    /// Window end (same formats; capped at now) [default: now]
    #[arg(short = 'E', long = "endtime", value_name = "TIME")]
    pub end: Option<String>,
    /// Window length when -S is not given: Slurm time (7-0) or 60s/5m/1h/1d
    /// [default: `window` of allot.toml]
    #[arg(long, value_name = "TIME")]
    pub window: Option<String>,
    /// sacct-style output: `|`-separated, header line, no indentation
    #[arg(long, conflicts_with = "json")]
    pub parsable2: bool,
    /// JSON output (exact GPU-seconds included)
    #[arg(long)]
    pub json: bool,
    /// A line per user under each account
    #[arg(long)]
    pub users: bool,
    /// Cluster capacity in GPUs, at least 1 [default: `capacity_gpus` of allot.toml, else the GPUs sinfo reports]
    #[arg(long, value_name = "GPUS", value_parser = clap::value_parser!(u64).range(1..))]
    pub capacity: Option<u64>,
    /// Also write the budget page: one self-contained HTML file with each
    /// org-tree node's daily use against its allocation, the ranking and
    /// the free tier (docs/operating.md)
    #[arg(long, value_name = "FILE", conflicts_with = "health")]
    pub html: Option<PathBuf>,
    /// Days of daily use on the budget page: --windows x the window [default: 4]
    #[arg(long, value_name = "N", default_value_t = 4, requires = "html",
          value_parser = clap::value_parser!(u32).range(1..=52))]
    pub windows: u32,
    /// Health report instead: GPU health events, drains, automatic requeues
    /// and how long each node took to empty (text or --json)
    #[arg(long, conflicts_with_all = ["parsable2", "users", "capacity"])]
    pub health: bool,
}

/// Opens the ledger for a report; a ledger that is missing or holds no job
/// (never synced) is an error saying how to fill it, not a table of zeros.
fn open_with_jobs(path: &Path) -> anyhow::Result<LedgerReader> {
    let fill = "fill it with `allot sync` (reads sacct) or `allot sync --from DUMP` (a saved \
                sacct --parsable2 dump), or pass --ledger PATH (or [ledger] path in allot.toml) \
                naming the ledger that allot sync writes";
    let reader = match LedgerReader::open(path) {
        Ok(r) => r,
        Err(allot_ledger::LedgerError::Missing { .. }) => {
            bail!("no ledger at {} yet (never synced): {fill}", path.display())
        }
        Err(e) => return Err(e.into()),
    };
    if reader.attempt_count()? == 0 {
        bail!("the ledger {} has no jobs yet: {fill}", path.display());
    }
    Ok(reader)
}

/// The report of the current window from the sidecar, for a user who
/// cannot read the ledger: the same output as from the ledger, for what
/// PrivateData lets the user see.
fn through_sidecar(args: &Args, client: &remote::Client) -> anyhow::Result<ExitCode> {
    let local_only = [
        (args.start.is_some(), "-S"),
        (args.end.is_some(), "-E"),
        (args.window.is_some(), "--window"),
        (args.capacity.is_some(), "--capacity"),
        (args.html.is_some(), "--html"),
        (args.health, "--health"),
    ];
    if let Some((_, flag)) = local_only.iter().find(|(set, _)| *set) {
        bail!(
            "{flag} needs the ledger, which you cannot read; the sidecar ([server] url) serves the report of the current window only: run `allot report` without {flag}, or open the budget page at {}/",
            client.url()
        );
    }
    let format = if args.json {
        "json"
    } else if args.parsable2 {
        "parsable2"
    } else {
        "text"
    };
    let users = if args.users { "&users=1" } else { "" };
    let body = client.get(&format!("/api/v1/report?format={format}{users}"))?;
    print!("{body}");
    Ok(ExitCode::SUCCESS)
}

/// Runs the subcommand.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    init_logging();
    let config = common::load(&args.config.path())?;
    if config.server_url.is_some() {
        if let Source::Server(client) = remote::source(&config, &args.ledger)? {
            return through_sidecar(args, &client);
        }
    }
    let path = args.ledger.path(&config);
    let now = now();
    let end = match &args.end {
        Some(e) => parse_when(e)?.min(now),
        None => now,
    };
    let window = match &args.window {
        Some(w) => {
            let secs = parse_interval(w).context("--window")?;
            if secs == 0 {
                bail!("--window {w}: must be longer than 0; write e.g. 7-0 (7 days) or 1d");
            }
            // The same bound as allot.toml's `window`.
            if secs > fairshare::config::MAX_WINDOW {
                bail!("--window {w}: at most 100 years (36500-0)");
            }
            secs as i64
        }
        None => config.window as i64,
    };
    let start = match &args.start {
        Some(s) => parse_when(s)?,
        None => end - window,
    };
    if start >= end {
        bail!("empty window: -S {start} is not before -E {end} (epoch seconds)");
    }
    if args.health {
        let reader = LedgerReader::open(&path)?;
        let r = health::build(reader.events(start, end)?);
        if args.json {
            println!("{}", serde_json::to_string_pretty(&r)?);
        } else {
            print!("{}", health::render_text(&r));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let cap = capacity(args.capacity, &config)?;
    let reader = open_with_jobs(&path)?;
    let config = Arc::new(config);
    let r = budget::build(&reader, config.clone(), cap, start, end, args.users)?;
    if r.totals.occupied_gpu_h == 0.0 && r.lines.iter().all(|l| l.running + l.pending == 0) {
        // Legitimately zero: the ledger has jobs, none in this window.
        eprintln!(
            "allot report: no GPU use in this window: the ledger {} has {} job attempt(s), none using GPUs between -S and -E; widen the window (-S, --window) to see them (or, if no attempt of the ledger holds a GPU, add gres/gpu to AccountingStorageTRES in slurm.conf: slurmdbd records GPUs only then)",
            path.display(),
            reader.attempt_count()?
        );
    }
    if let Some(file) = &args.html {
        let days = ((args.windows as i64 * (end - start)) / 86_400).clamp(1, 3660) as u32;
        let daily = budget_page::daily(&reader, &config, end, days)?;
        let page = budget_page::render(&r, &config, &daily, now);
        std::fs::write(file, page).with_context(|| format!("cannot write {}", file.display()))?;
        eprintln!("budget page: {}", file.display());
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else if args.parsable2 {
        print!("{}", budget::render_parsable(&r));
    } else {
        print!("{}", budget::render_text(&r));
    }
    Ok(ExitCode::SUCCESS)
}
