//! `allot sync`: its flags, checked before the ledger is opened, and what
//! they ask for: a dump imported (`--from`), one live pass retried for a
//! while, or the sidecar (`--follow`: [`allot_sync::sidecar::follow::Sidecar`],
//! whose pass is stated there). See `allot_sync::sidecar::sync` and
//! docs/ledger.md.

use std::io::BufReader;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use allot_ledger::charge::Charging;
use allot_ledger::Ledger;
use allot_sync::sidecar::follow::{Listener, Sidecar};
use allot_sync::sidecar::sync::{self, ImportStats, SyncOptions};
use anyhow::Context;

use super::common::{self, init_logging, now, parse_interval, parse_when, ConfigArg, LedgerArg};

/// Arguments of `allot sync`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub config: ConfigArg,
    #[command(flatten)]
    pub ledger: LedgerArg,
    /// Import a saved `sacct --parsable2` dump (with its header line; `-` = stdin)
    /// instead of running sacct
    #[arg(long, value_name = "FILE", conflicts_with = "follow")]
    pub from: Option<PathBuf>,
    /// With --from: succeed even when the dump holds no job attempt (a
    /// header only, only job steps or unreadable rows), e.g. to create an
    /// empty ledger; without it such a dump is an error
    #[arg(long, requires = "from")]
    pub allow_empty: bool,
    /// Time zone of the dump's local times (those without a UTC offset), e.g. Europe/Paris [default: the system's]
    #[arg(long, value_name = "TZ", requires = "from")]
    pub timezone: Option<String>,
    /// Keep syncing, one pass every --interval
    #[arg(long)]
    pub follow: bool,
    /// Time between passes with --follow: 60s, 5m, 1h or a Slurm time
    /// [default: `[sync] interval` of allot.toml]
    #[arg(long, value_name = "TIME", requires = "follow")]
    pub interval: Option<String>,
    /// How far before the watermark each pass re-reads (same formats as --interval)
    #[arg(long, value_name = "TIME", default_value = "1h")]
    pub overlap: String,
    /// Where the first pass on an empty ledger starts: epoch seconds or
    /// YYYY-MM-DD[THH:MM:SS] local [default: one window (allot.toml) ago]
    #[arg(long, value_name = "TIME", conflicts_with = "from")]
    pub since: Option<String>,
    /// Job attempts per transaction, at least 1
    #[arg(long, value_name = "N", default_value_t = 10_000, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=10_000_000))]
    pub batch_size: usize,
    /// With --follow, do not requeue the jobs of draining nodes (see
    /// docs/health.md; by default each is requeued once its minimum runtime
    /// has passed)
    #[arg(long, requires = "follow")]
    pub no_drain: bool,
    /// With --follow, serve researchers and Prometheus at http://ADDR:PORT
    /// (e.g. 0.0.0.0:9817; port 0 picks a free one, logged at start),
    /// read-only: the live budget page (/), each job's "why" (/jobs/ID),
    /// their JSON (/api/v1/report, /api/v1/jobs/ID) and /metrics.
    /// docs/researchers.md; metrics: docs/operating.md
    #[arg(
        long = "listen",
        visible_alias = "metrics-listen",
        value_name = "ADDR:PORT",
        requires = "follow"
    )]
    pub listen: Option<String>,
    /// Without --follow: how long to keep retrying a failed pass (sacct or
    /// slurmdbd down), with backoff 1 s, 2 s, 4 s ... up to 60 s; 0 = no retry
    #[arg(long, value_name = "TIME", default_value = "5m")]
    pub retry_for: String,
    /// The sacct program
    #[arg(
        long,
        value_name = "PROGRAM",
        env = "ALLOT_SACCT",
        default_value = "sacct"
    )]
    pub sacct: String,
}

/// Whether `program` names an executable file: a path as given, or a name
/// found in one of `$PATH`'s directories.
fn program_exists(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return executable(std::path::Path::new(program));
    }
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| executable(&d.join(program))))
}

/// Attempts read, none holding a GPU: slurmdbd records GPUs in AllocTRES
/// only where `AccountingStorageTRES` names `gres/gpu`, and every report
/// would read zero GPU use.
fn no_gpus_warning(s: &ImportStats) -> Option<String> {
    // Jobs on shared GPUs have their own warning (the weights to set).
    (s.attempts > 0 && s.gpu_attempts == 0 && s.shared_unweighted == 0).then(|| {
        format!(
            "none of the {} attempts read holds a GPU (no gres/gpu in AllocTRES), so they charge nothing; if these jobs used GPUs, add gres/gpu to AccountingStorageTRES in slurm.conf (slurmdbd records GPUs only then)",
            s.attempts
        )
    })
}

/// `--interval`, `--no-drain` and `--metrics-listen` act only with
/// `--follow`, which `--from` excludes: clap's `requires = "follow"` is
/// waived when `--from` is present (a conflicting argument), so it is
/// checked here. The message names both flags and the fix; `main` reports it
/// as a usage error.
pub fn follow_only_with_from(args: &Args) -> Option<String> {
    args.from.as_ref()?;
    let flag = if args.listen.is_some() {
        "--listen"
    } else if args.interval.is_some() {
        "--interval"
    } else if args.no_drain {
        "--no-drain"
    } else {
        return None;
    };
    Some(format!(
        "{flag} acts only with --follow, and --from imports the dump once and exits: \
         drop {flag} from `allot sync --from`, or run the sidecar separately: \
         allot sync --follow {flag}{}",
        if flag == "--no-drain" { "" } else { " ..." }
    ))
}

/// What a run does, every input checked before the ledger is opened.
enum Plan {
    /// `--from`: the dump, its name, the zone of its local times.
    Dump(
        Box<dyn std::io::BufRead>,
        Option<PathBuf>,
        jiff::tz::TimeZone,
    ),
    /// One live pass, retried for the duration.
    Once(SyncOptions, Duration),
    /// `--follow`: options, interval in seconds, the metrics server
    /// (already listening).
    Follow(SyncOptions, u64, Option<Listener>),
}

/// Checks every input of `args` and opens what they name (the dump, the
/// metrics port), so that a bad one fails before the ledger is created.
fn plan(
    args: &Args,
    config: &fairshare::Config,
    sim: &allot_sim::SimSettings,
) -> anyhow::Result<Plan> {
    if let Some(from) = &args.from {
        let tz = match &args.timezone {
            Some(name) => jiff::tz::TimeZone::get(name)
                .with_context(|| format!("--timezone {name:?}: unknown time zone; use an IANA name such as UTC or Europe/Paris"))?,
            None => jiff::tz::TimeZone::system(),
        };
        if from.as_os_str() == "-" {
            return Ok(Plan::Dump(
                Box::new(BufReader::new(std::io::stdin())),
                None,
                tz,
            ));
        }
        let f = std::fs::File::open(from).with_context(|| {
            format!(
                "--from {}: cannot open the dump; give the path of a saved `sacct --parsable2` output (- = stdin)",
                from.display()
            )
        })?;
        return Ok(Plan::Dump(
            Box::new(BufReader::new(f)),
            Some(from.clone()),
            tz,
        ));
    }
    let first_start = match &args.since {
        Some(s) => parse_when(s)?,
        None => now() - config.window as i64,
    };
    let overlap = parse_interval(&args.overlap).context("--overlap")? as i64;
    // A missing program never appears by retrying: say so at once.
    if !program_exists(&args.sacct) {
        anyhow::bail!(
            "--sacct {:?}: no such program{}; install slurm-client or give sacct's path (--sacct or ALLOT_SACCT)",
            args.sacct,
            if args.sacct.contains('/') { "" } else { " on PATH" }
        );
    }
    let opts = SyncOptions {
        sacct: args.sacct.clone(),
        overlap,
        first_start,
        batch: args.batch_size,
    };
    if !args.follow {
        let retry_for =
            Duration::from_secs(parse_interval(&args.retry_for).context("--retry-for")?);
        return Ok(Plan::Once(opts, retry_for));
    }
    let interval = match &args.interval {
        Some(s) => match parse_interval(s).context("--interval")? {
            0 => anyhow::bail!("--interval {s}: must be longer than 0; write e.g. 60s or 5m"),
            n => n,
        },
        None => config.sync_interval,
    }
    .max(1);
    let listener = match &args.listen {
        Some(addr) => Some(Listener::start(
            addr,
            config,
            sim,
            &args.ledger.path(config),
        )?),
        None => None,
    };
    Ok(Plan::Follow(opts, interval, listener))
}

/// After a failed run: removes the ledger at `path` if this run created it
/// and it holds no attempt, so that a failure leaves nothing new behind.
fn remove_if_new_and_empty(path: &std::path::Path) {
    let empty = allot_ledger::LedgerReader::open(path)
        .and_then(|r| r.attempt_count())
        .is_ok_and(|n| n == 0);
    if !empty {
        return;
    }
    for suffix in ["", "-wal", "-shm", ".lock"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

/// `--from`: imports the dump; one that holds no job attempt is an error
/// unless `--allow-empty`.
fn import(
    ledger: &mut Ledger,
    charging: &Charging,
    input: Box<dyn std::io::BufRead>,
    name: Option<PathBuf>,
    tz: jiff::tz::TimeZone,
    args: &Args,
) -> anyhow::Result<ImportStats> {
    let what = match &name {
        Some(p) => format!("importing {}", p.display()),
        None => "importing the dump on stdin".to_string(),
    };
    let stats =
        sync::import_dump(ledger, charging, input, tz, args.batch_size).context(what.clone())?;
    if !args.allow_empty {
        if let Some(e) = stats.nothing_imported() {
            anyhow::bail!(
                "{what}: {e}. To create or keep a ledger without jobs on purpose, pass --allow-empty"
            );
        }
    }
    Ok(stats)
}

/// Runs the subcommand.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    init_logging();
    let config_file = args.config.path();
    let common::Loaded { config, sim, .. } = common::load_all(&config_file)?;
    let path = args.ledger.path(&config);
    let charging = Charging::from_config(&config);
    let plan = plan(args, &config, &sim)?;
    let existed = path.exists();
    let mut ledger = Ledger::open(&path)?;
    allot_sync::sidecar::sync::give_to_slurm_user(&path);
    let result = match plan {
        Plan::Follow(opts, interval, listener) => Sidecar::new(
            config,
            &path,
            ledger,
            opts,
            interval,
            !args.no_drain,
            listener,
        )
        .run(),
        Plan::Dump(input, name, tz) => {
            import(&mut ledger, &charging, input, name, tz, args).inspect(|s| {
                // A dump is a moment: what ran then is charged up to now.
                if s.running > 0 {
                    eprintln!(
                        "allot: note: {} row(s) of the dump have an attempt still running when it was saved; each is charged up to now until a row that ends it (a later dump, or a live `allot sync`) is read",
                        s.running
                    );
                }
            })
        }
        Plan::Once(opts, retry_for) => sync::sync_with_retry(
            &mut ledger,
            &charging,
            &opts,
            now,
            retry_for,
            Duration::from_secs(60),
        ),
    };
    drop(ledger);
    match result {
        Ok(stats) => {
            println!("{}: {}", path.display(), stats.summary());
            if let Some(w) = no_gpus_warning(&stats) {
                eprintln!("allot: warning: {w}");
            }
            if let Some(w) = stats.sharing_warning() {
                eprintln!("allot: warning: {w}");
            }
            if let Some(w) = stats.unread_warning() {
                eprintln!("allot: warning: {w}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            if !existed {
                remove_if_new_and_empty(&path);
            }
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_gpus_is_warned() {
        // Attempts read, none with a GPU: the site's AccountingStorageTRES is named.
        let mut s = ImportStats {
            attempts: 3,
            ..Default::default()
        };
        assert!(no_gpus_warning(&s)
            .unwrap()
            .contains("none of the 3 attempts read holds a GPU"));
        s.shared_unweighted = 3;
        assert_eq!(no_gpus_warning(&s), None, "the sharing warning says it");
        s.shared_unweighted = 0;
        s.gpu_attempts = 1;
        assert_eq!(no_gpus_warning(&s), None);
    }
}
