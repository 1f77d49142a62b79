//! The import: sacct rows -> ledger, in batches, idempotent.
//!
//! - Live ([`sync_once`]): `sacct -a -X -D --parsable2 --noheader -o
//!   <LIVE_FIELDS> -S <watermark - overlap>` with `SLURM_TIME_FORMAT=%s`
//!   (epoch seconds, no time-zone guessing). Without `-s`, sacct lists every
//!   job that was pending or running at any time after `-S`, so running and
//!   pending jobs always come back. Attempts the ledger still holds as open
//!   but this pass did not see (an end record slurmdbd got late) are asked
//!   for again by id (`-j`). The watermark moves to the pass's start time
//!   with the pass's last batch, never before every row is written.
//! - From a dump ([`import_dump`]): a saved `sacct --parsable2` output with
//!   its header line; see [`allot_ledger::sacct::REQUIRED_FIELDS`].
//! - Each batch is one transaction; a record already stored identically is
//!   left alone, so a crash or a re-run never double-counts. A dump import
//!   is one transaction as a whole ([`Ledger::all_or_nothing`]): an error
//!   anywhere writes nothing.
//! - Rows are read as bytes ([`Parser::rows`]): free text that holds `|`, a
//!   newline or bytes that are not UTF-8 never stops an import (rules in
//!   `ledger/src/sacct/rows.rs`).
//! - A row that cannot be parsed is logged with its line, JobID, field and
//!   value, and skipped; the GPU-hours it held are counted
//!   ([`ImportStats::bad_gpu_seconds`]) and said in the summary. Job steps
//!   (a dump without `-X`) are counted, not logged.

use std::collections::{BTreeMap, HashSet};
use std::io::BufRead;
use std::time::Duration;

use anyhow::{bail, Context};

use allot_ledger::charge::Charging;
use allot_ledger::sacct::{DumpRow, Parser, RowOutcome, SeveralClusters, LIVE_FIELDS};
use allot_ledger::{AttemptRecord, BatchStats, Ledger};

use crate::slurm::sacct::{Attempts, Which};
use crate::slurm::squeue::{jobs_now, LiveJob};

pub mod runaway;

/// Counts of one import.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportStats {
    /// Lines read (header excluded).
    pub rows: u64,
    /// Rows that were not jobs (pending array ranges).
    pub skipped: u64,
    /// Job steps (`5104.batch`, `5104.0`: a dump made without `-X`),
    /// skipped: their job's row is the allocation.
    pub steps: u64,
    /// Rows that could not be parsed (logged, skipped).
    pub bad: u64,
    /// Why the first of them could not (the line, JobID, field, value,
    /// reason).
    pub first_bad: Option<String>,
    /// GPU-seconds the unreadable rows held, where their AllocTRES, Start
    /// and End could still be read ([`Parser::held_gpu_seconds`]).
    pub bad_gpu_seconds: u64,
    /// Unreadable rows whose GPU-seconds could not be read (cut before
    /// them, still running, or unreadable there too).
    pub bad_unknown: u64,
    /// Ledger writes.
    pub written: BatchStats,
    /// Preemption records read from preempt/allot's log (live passes).
    pub preemptions: u64,
    /// Attempts read (rows that were jobs).
    pub attempts: u64,
    /// Of `attempts`, those whose AllocTRES held at least one GPU.
    pub gpu_attempts: u64,
    /// Of `attempts`, those started and not ended (charged up to now until
    /// a later row ends them).
    pub running: u64,
    /// Runaway records among the ledger's open attempts (live passes;
    /// [`runaway::look_for`]).
    pub runaways: u64,
    /// Attempts holding a GPU share (`gres/shard`, `gres/mps`) and no
    /// whole GPU, charged 0 because no weight charges that TRES
    /// ([`Charging::unweighted_sharing`]), and which kinds.
    pub shared_unweighted: u64,
    /// The kinds of [`ImportStats::shared_unweighted`], in order seen.
    pub shared_kinds: Vec<&'static str>,
}

impl ImportStats {
    fn add(&mut self, b: BatchStats) {
        self.written.inserted += b.inserted;
        self.written.updated += b.updated;
        self.written.unchanged += b.unchanged;
        self.written.superseded += b.superseded;
        self.written.corrected += b.corrected;
    }
}

/// Parses `rows` ([`Parser::rows`]) and writes them in batches of `batch`
/// attempts. The last batch (possibly empty) carries `watermark`. An attempt still open that
/// sacct shows without a contract takes the one `live` reads from
/// slurmctld ([`LiveContracts`]; [`LiveContracts::off`] for a dump).
/// Returns the stats and the job ids seen.
///
/// # Errors
/// Ledger errors and read errors; a bad row is not an error.
pub fn import_lines<I>(
    ledger: &mut Ledger,
    charging: &Charging,
    parser: &Parser,
    rows: I,
    batch: usize,
    watermark: Option<i64>,
    live: &mut LiveContracts,
) -> anyhow::Result<(ImportStats, HashSet<u64>)>
where
    I: IntoIterator<Item = std::io::Result<DumpRow>>,
{
    let batch = batch.max(1);
    let mut stats = ImportStats::default();
    let mut seen = HashSet::new();
    let mut buf: Vec<AttemptRecord> = Vec::with_capacity(batch);
    for row in rows {
        let row = row.context("reading sacct output")?;
        if row.text.trim().is_empty() {
            continue;
        }
        stats.rows += 1;
        match parser.parse_row(&row) {
            Ok(RowOutcome::Attempt(mut a)) => {
                seen.insert(a.job_id);
                stats.attempts += 1;
                stats.gpu_attempts += u64::from(a.gpus > 0);
                stats.running += u64::from(a.start.is_some() && a.end.is_none());
                if let Some(kind) = charging.unweighted_sharing(&a) {
                    stats.shared_unweighted += 1;
                    if !stats.shared_kinds.contains(&kind) {
                        stats.shared_kinds.push(kind);
                    }
                }
                if a.min_runtime.is_none() && a.end.is_none() {
                    a.min_runtime = live.of(a.job_id);
                }
                buf.push(charging.record(&a));
            }
            Ok(RowOutcome::Skipped) => stats.skipped += 1,
            Ok(RowOutcome::Step) => stats.steps += 1,
            Err(e) => {
                stats.bad += 1;
                match parser.held_gpu_seconds(&row.text) {
                    Some(s) => stats.bad_gpu_seconds += s,
                    None => stats.bad_unknown += 1,
                }
                if stats.first_bad.is_none() {
                    stats.first_bad = Some(e.to_string());
                }
                tracing::warn!(job = %e.job_id, field = e.field, "skipping sacct row: {e}");
            }
        }
        if buf.len() >= batch {
            stats.add(ledger.write_batch(&buf, None, charging)?);
            buf.clear();
        }
    }
    stats.add(ledger.write_batch(&buf, watermark, charging)?);
    Ok((stats, seen))
}

/// Imports a saved `sacct --parsable2` dump (first line: the header) as
/// one transaction: all of it, or nothing on an error. Local times are read
/// in `tz`. The watermark is not moved.
///
/// # Errors
/// An empty input, a header lacking required fields (named in the
/// message), a dump of several clusters, read and ledger errors: each
/// writes nothing.
pub fn import_dump<R: BufRead>(
    ledger: &mut Ledger,
    charging: &Charging,
    mut input: R,
    tz: jiff::tz::TimeZone,
    batch: usize,
) -> anyhow::Result<ImportStats> {
    let mut header = Vec::new();
    if input
        .read_until(b'\n', &mut header)
        .context("reading the dump's header")?
        == 0
    {
        bail!(
            "the dump is empty: its first line must be the sacct --parsable2 header, such as {}; save it with: {}",
            LIVE_FIELDS.join("|"),
            allot_ledger::sacct::dump_command()
        );
    }
    let parser = Parser::from_header_line(&String::from_utf8_lossy(&header), tz)?;
    if let Some(note) = parser.layout_note() {
        tracing::info!("{note}");
    }
    // A `Cluster` column (`sacct -M`): the rows of each cluster are
    // counted as they are read, and a dump of several is rolled back.
    ledger.all_or_nothing(|ledger| {
        let mut clusters: Vec<(String, u64)> = Vec::new();
        let rows = parser.rows(input, 2).inspect(|row| {
            if let Some(c) = row.as_ref().ok().and_then(|r| parser.cluster(&r.text)) {
                match clusters.iter_mut().find(|(name, _)| name == c) {
                    Some((_, n)) => *n += 1,
                    None => clusters.push((c.to_string(), 1)),
                }
            }
        });
        let (stats, _) = import_lines(
            ledger,
            charging,
            &parser,
            rows,
            batch,
            None,
            &mut LiveContracts::off(),
        )?;
        match clusters.len() {
            0 => {}
            1 => tracing::info!(cluster = clusters[0].0, "the dump holds one cluster's jobs"),
            _ => return Err(SeveralClusters { clusters }.into()),
        }
        Ok(stats)
    })
}

impl ImportStats {
    /// The pass's one-line summary (logged by the sidecar, printed by
    /// `allot sync`).
    pub fn summary(&self) -> String {
        let s = self;
        let plural = |n: u64| if n == 1 { "" } else { "s" };
        let mut line = format!(
            "{} rows: {} new attempts, {} updated, {} unchanged, {} not jobs, ",
            s.rows, s.written.inserted, s.written.updated, s.written.unchanged, s.skipped,
        );
        if s.steps > 0 {
            line += &format!(
                "{} job step{} (skipped: their jobs' rows are charged), ",
                s.steps,
                plural(s.steps)
            );
        }
        line += &format!("{} unreadable (logged{})", s.bad, self.bad_held());
        if s.written.superseded > 0 {
            line += &format!(
                "; {} row{} settled by another row of the same attempt (a later row, or one that ended it; conflicts logged)",
                s.written.superseded,
                plural(s.written.superseded)
            );
        }
        if s.written.corrected > 0 {
            line += &format!(
                "; {} ended attempt{} corrected in slurmdbd (charged as corrected; each logged)",
                s.written.corrected,
                plural(s.written.corrected)
            );
        }
        if s.preemptions > 0 {
            line += &format!("; {} preemptions recorded", s.preemptions);
        }
        if s.shared_unweighted > 0 {
            line += &format!(
                "; {} attempt{} on shared GPUs ({}) charged 0: no charge weight for them",
                s.shared_unweighted,
                plural(s.shared_unweighted),
                s.shared_kinds.join(", ")
            );
        }
        if s.runaways > 0 {
            line += &format!(
                "; {} runaway record{} (warned: charged at most up to start + time limit)",
                s.runaways,
                plural(s.runaways)
            );
        }
        line
    }

    /// What the unreadable rows held: `, holding N GPU-h` (and how many
    /// rows' GPU-hours cannot be read), empty when every row was read.
    pub fn bad_held(&self) -> String {
        if self.bad == 0 {
            return String::new();
        }
        let mut s = format!(
            ", holding {:.1} GPU-h",
            self.bad_gpu_seconds as f64 / 3600.0
        );
        if self.bad_unknown > 0 {
            s += &format!(
                " and {} row{} whose GPU-hours cannot be read (cut before AllocTRES, Start or End, or still running)",
                self.bad_unknown,
                if self.bad_unknown == 1 { "" } else { "s" }
            );
        }
        s
    }

    /// The warning `allot sync` prints when attempts hold GPUs through
    /// `gres/shard` or `gres/mps` that no weight charges: the weights to
    /// set. `None` when there are none.
    pub fn sharing_warning(&self) -> Option<String> {
        (self.shared_unweighted > 0).then(|| {
            let mut weights = Vec::new();
            if self.shared_kinds.contains(&"gres/shard") {
                weights.push("\"gres/shard\" = 1 / the shards per GPU of gres.conf (0.25 for 4 shards per GPU)");
            }
            if self.shared_kinds.contains(&"gres/mps") {
                weights.push("\"gres/mps\" = 1 / the MPS count per GPU (0.01 for the usual Count=100 per GPU)");
            }
            let n = self.shared_unweighted;
            format!(
                "{n} attempt{} on a GPU through {} without a whole gres/gpu: charged 0, so the teams that ran them rank as if that work used nothing. Charge the GPU share: in allot.toml [charge], set {} (and keep {} in AccountingStorageTRES), then import again",
                if n == 1 { "" } else { "s" },
                self.shared_kinds.join(" or "),
                weights.join(" and "),
                self.shared_kinds.join(",")
            )
        })
    }

    /// The warning `allot sync` prints when rows were left unread: how
    /// many, what they held, the first reason and the fix. `None` when
    /// every row was read.
    pub fn unread_warning(&self) -> Option<String> {
        (self.bad > 0).then(|| {
            format!(
                "{} row{} not imported{}; the first: {}. Each is logged with its line, JobID, field and value: fix them (or save the dump again with: {}) and import it again (rows already imported are kept, not counted twice)",
                self.bad,
                if self.bad == 1 { " was" } else { "s were" },
                self.bad_held(),
                self.first_bad.as_deref().unwrap_or("?"),
                allot_ledger::sacct::dump_command()
            )
        })
    }

    /// Job attempts read (written, updated or already stored).
    pub fn attempts(&self) -> u64 {
        self.written.inserted + self.written.updated + self.written.unchanged
    }

    /// When a dump import read no job attempt at all (a header only, only
    /// job steps, only unreadable rows): what was read and what to do.
    /// `None` when it read at least one.
    pub fn nothing_imported(&self) -> Option<String> {
        if self.attempts() > 0 {
            return None;
        }
        if self.rows == 0 {
            return Some(format!(
                "the dump has a header but no rows: nothing to import. \
                 Check the sacct command that saved it (-a for all users, -S/-E for the \
                 time range): {}",
                allot_ledger::sacct::dump_command()
            ));
        }
        let mut read = vec![format!(
            "{} row{} read",
            self.rows,
            if self.rows == 1 { "" } else { "s" }
        )];
        if self.steps > 0 {
            read.push(format!(
                "{} job step{} skipped",
                self.steps,
                if self.steps == 1 { "" } else { "s" }
            ));
        }
        if self.skipped > 0 {
            read.push(format!(
                "{} not jobs (pending array ranges, or jobs that never started in a dump without Submit)",
                self.skipped
            ));
        }
        if self.bad > 0 {
            read.push(format!(
                "{} unreadable{} (the first: {})",
                self.bad,
                self.bad_held(),
                self.first_bad.as_deref().unwrap_or("?")
            ));
        }
        let mut fix = Vec::new();
        if self.steps > 0 {
            fix.push(
                "save the dump with sacct -X, which lists each job's allocation (the row that is charged), not its steps",
            );
        }
        if self.bad > 0 {
            fix.push("fix or re-save the unreadable rows (each is logged with its line, JobID, field and value)");
        }
        if fix.is_empty() {
            fix.push("save the jobs themselves");
        }
        Some(format!(
            "no job attempt in the dump: {}. Nothing imported; {}. Recommended: {}",
            read.join(", "),
            fix.join("; "),
            allot_ledger::sacct::dump_command()
        ))
    }
}

/// Options of a live sync pass.
#[derive(Debug, Clone)]
pub struct SyncOptions {
    /// The sacct program (`sacct`, or a path).
    pub sacct: String,
    /// Seconds re-read before the watermark.
    pub overlap: i64,
    /// Where the first pass starts when the ledger has no watermark
    /// (seconds since the epoch).
    pub first_start: i64,
    /// Attempts per transaction.
    pub batch: usize,
}

/// Streams the attempts `which` of `program` (sacct) into the ledger as
/// they come; the caller moves the watermark once the whole pass
/// succeeded.
fn run_sacct(
    ledger: &mut Ledger,
    charging: &Charging,
    program: &str,
    which: Which<'_>,
    batch: usize,
    live: &mut LiveContracts,
) -> anyhow::Result<(ImportStats, HashSet<u64>)> {
    let parser = Parser::live(jiff::tz::TimeZone::system());
    Attempts::new(program, which)?.stream(|out| {
        let rows = parser.rows(out, 1);
        import_lines(ledger, charging, &parser, rows, batch, None, live)
    })?
}

/// One live pass at `now` (seconds since the epoch): reads sacct from the
/// watermark minus the overlap, re-asks for attempts still open in the
/// ledger that sacct did not list, stores preempt/allot's new preemption
/// records ([`Ledger::import_preemption_log`]), then moves the watermark
/// to `now`. Open attempts without a contract take the one `live` reads
/// from slurmctld (the caller may keep what it read: [`LiveContracts::into_jobs`]).
///
/// # Errors
/// sacct cannot run or fails (the watermark then stays), ledger errors.
pub fn sync_once(
    ledger: &mut Ledger,
    charging: &Charging,
    opts: &SyncOptions,
    now: i64,
    live: &mut LiveContracts,
) -> anyhow::Result<ImportStats> {
    let from = ledger
        .watermark()?
        .map_or(opts.first_start, |w| w - opts.overlap);
    let (mut stats, seen) = run_sacct(
        ledger,
        charging,
        &opts.sacct,
        Which::Since(from),
        opts.batch,
        live,
    )?;
    let stale: Vec<String> = ledger
        .open_job_ids()?
        .into_iter()
        .filter(|id| !seen.contains(id))
        .map(|id| id.to_string())
        .collect();
    for ids in stale.chunks(500) {
        tracing::info!(
            jobs = ids.len(),
            "re-reading attempts still open in the ledger"
        );
        let (s, _) = run_sacct(
            ledger,
            charging,
            &opts.sacct,
            Which::Jobs(ids),
            opts.batch,
            live,
        )?;
        stats.rows += s.rows;
        stats.skipped += s.skipped;
        stats.bad += s.bad;
        stats.bad_gpu_seconds += s.bad_gpu_seconds;
        stats.bad_unknown += s.bad_unknown;
        if stats.first_bad.is_none() {
            stats.first_bad = s.first_bad;
        }
        stats.add(s.written);
    }
    // preempt/allot's records; a log that cannot be read waits for the
    // next pass and never fails this one.
    match ledger.import_preemption_log() {
        Ok(p) => stats.preemptions = p.new,
        Err(e) => tracing::warn!("{e}; preemption records are read at the next pass"),
    }
    stats.runaways = runaway::look_for(ledger, live, now)?;
    ledger.write_batch(&[], Some(now), charging)?;
    Ok(stats)
}

/// The contracts of jobs still running or pending, from slurmctld.
///
/// sacct shows a job's `AdminComment` only once the job has ended (Slurm
/// 22.05 and 24.11 alike), so an attempt still open reads as having no
/// recorded contract and would be charged as the configured default (a
/// free-tier job as an allocated one) until it ends. A live pass asks
/// slurmctld (`squeue --json`, its `admin_comment`) once, at the first
/// such attempt, and records the contract before the attempt is written.
/// squeue failing is logged and leaves the default until the next pass.
pub struct LiveContracts {
    /// True until squeue has been asked (never for [`LiveContracts::off`]).
    ask: bool,
    /// slurmctld's jobs, once read.
    jobs: Option<BTreeMap<u64, LiveJob>>,
}

impl LiveContracts {
    /// Never asks (a dump import: its jobs are not slurmctld's now).
    pub fn off() -> LiveContracts {
        LiveContracts {
            ask: false,
            jobs: None,
        }
    }

    /// Asks squeue at the first open attempt without a contract.
    pub fn from_squeue() -> LiveContracts {
        LiveContracts {
            ask: true,
            jobs: None,
        }
    }

    /// The contract slurmctld holds for `job`, if it has one.
    fn of(&mut self, job: u64) -> Option<u64> {
        fairshare::record::recorded_min_runtime(&self.known()?.get(&job)?.admin_comment)
    }

    /// slurmctld's jobs now, asking squeue at the first call; `None` for
    /// [`LiveContracts::off`] and when squeue failed (logged).
    fn known(&mut self) -> Option<&BTreeMap<u64, LiveJob>> {
        if std::mem::take(&mut self.ask) {
            match jobs_now() {
                Ok(jobs) => self.jobs = Some(jobs),
                Err(e) => tracing::warn!(
                    "cannot read slurmctld's jobs from squeue; running jobs' contracts keep the default and runaway records are not looked for until the next pass: {e:#}"
                ),
            }
        }
        self.jobs.as_ref()
    }

    /// slurmctld's jobs if this pass read them (the sidecar's site takes
    /// them rather than asking squeue a second time).
    pub fn into_jobs(self) -> Option<BTreeMap<u64, LiveJob>> {
        self.jobs
    }
}

/// Delays between retries of a failed sync pass (slurmdbd down, sacct
/// failing): 1 s, 2 s, 4 s, ... doubling up to `max`. [`Backoff::reset`]
/// after a pass that succeeded.
#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
    max: Duration,
}

impl Backoff {
    /// A schedule starting at 1 s (or `max` if smaller) and capped at `max`.
    pub fn new(max: Duration) -> Backoff {
        Backoff {
            next: Duration::from_secs(1).min(max),
            max,
        }
    }

    /// The delay before the next retry; each call doubles the following one.
    pub fn next_delay(&mut self) -> Duration {
        let d = self.next;
        self.next = self.next.saturating_mul(2).min(self.max);
        d
    }

    /// Back to the first delay.
    pub fn reset(&mut self) {
        self.next = Duration::from_secs(1).min(self.max);
    }
}

/// [`sync_once`], retried with [`Backoff`] (capped at `max_delay`) while it
/// fails, for at most `retry_for` in all; `now` is asked again before each
/// try. Every failure is logged with the delay before the next try. Rows
/// written by a failed pass stay (they are idempotent) and the watermark
/// only moves on success, so a retry after slurmdbd comes back catches up
/// from where the last good pass ended: nothing is skipped.
///
/// # Errors
/// The last failure, once `retry_for` has passed.
pub fn sync_with_retry(
    ledger: &mut Ledger,
    charging: &Charging,
    opts: &SyncOptions,
    now: impl Fn() -> i64,
    retry_for: Duration,
    max_delay: Duration,
) -> anyhow::Result<ImportStats> {
    let deadline = std::time::Instant::now() + retry_for;
    let mut backoff = Backoff::new(max_delay);
    let mut attempt = 1u32;
    loop {
        match sync_once(
            ledger,
            charging,
            opts,
            now(),
            &mut LiveContracts::from_squeue(),
        ) {
            Ok(stats) => {
                if attempt > 1 {
                    tracing::info!(attempt, "sync pass succeeded after retrying");
                }
                return Ok(stats);
            }
            Err(e) => {
                let delay = backoff.next_delay();
                if std::time::Instant::now() + delay > deadline {
                    return Err(e.context(format!("giving up after {attempt} attempts")));
                }
                tracing::error!(
                    "sync pass failed (attempt {attempt}), retrying in {} s: {e:#}",
                    delay.as_secs()
                );
                std::thread::sleep(delay);
                attempt += 1;
            }
        }
    }
}

/// `SlurmUser` of the running Slurm (`scontrol show config`: `SlurmUser =
/// slurm(64030)`), as (uid, primary gid).
fn slurm_user() -> Option<(u32, u32)> {
    // Ten seconds: scontrol retries an unreachable slurmctld for a minute
    // or more, and this only decides the ledger file's owner.
    let (_, uid) = crate::slurm::scontrol::show_config_within(Duration::from_secs(10))
        .ok()?
        .slurm_user()?;
    let uid = uid?;
    // SAFETY: getpwuid returns NULL or a pointer to a static passwd record,
    // read at once on this thread.
    let gid = unsafe {
        let pw = libc::getpwuid(uid);
        if pw.is_null() {
            return None;
        }
        (*pw).pw_gid
    };
    Some((uid, gid))
}

/// Run as root, hand the ledger to SlurmUser (mode 0640): slurmctld's
/// plugins read it, other users cannot (docs/ledger.md). A failure is
/// logged, not fatal: the sync itself is unaffected.
pub fn give_to_slurm_user(path: &std::path::Path) {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return;
    }
    match slurm_user() {
        Some((uid, gid)) => {
            if let Err(e) = allot_ledger::set_owner(path, uid, gid) {
                tracing::warn!(ledger = %path.display(), "cannot give the ledger to SlurmUser (uid {uid}): {e}");
            }
        }
        None => {
            tracing::debug!("SlurmUser unknown (scontrol show config): ledger left owned by root")
        }
    }
}

#[cfg(test)]
mod tests;
