//! The trace `allot sim` replays: a file in any supported format, a
//! `sacct --parsable2` dump or an allot ledger turned into a [`Trace`].

use super::*;

/// Reads a trace in any supported format.
pub(super) fn load_trace(path: &Path, format: Option<&str>) -> anyhow::Result<(Trace, String)> {
    if !path.exists() {
        anyhow::bail!(
            "--trace {}: no such file; give the path of an existing trace: a workload file \
             (allot CSV, Philly, Helios, Acme, Alibaba), a sacct --parsable2 dump, or a ledger \
             written by `allot sync` (its path is [ledger] path in allot.toml)",
            path.display()
        );
    }
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    if format == Some("ledger") || (format.is_none() && matches!(ext, "sqlite" | "db")) {
        return Ok((ledger_trace(path)?, "ledger".into()));
    }
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let first = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
    if format == Some("sacct") || (format.is_none() && first.contains(&b'|')) {
        // Read as bytes: free text that is not UTF-8 stops nothing.
        return Ok((
            sacct_trace(&bytes).with_context(|| format!("{}", path.display()))?,
            "sacct".into(),
        ));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let line = e.as_bytes()[..at].iter().filter(|b| **b == b'\n').count() + 1;
        anyhow::anyhow!(
            "{}: line {line} holds bytes that are not UTF-8 (at byte {at}); a workload trace must be UTF-8 text: convert it (iconv -f <its encoding> -t UTF-8) or remove the line",
            path.display()
        )
    })?;
    let fmt = format.map(|f| trace::TraceFormat::from_name(f).expect("clap checked the name"));
    let t = trace::parse(&text, fmt).with_context(|| format!("{}", path.display()))?;
    // The format the reader used: named, or found in the header (after a
    // byte-order mark or comment lines, as the reader finds it).
    let name = t.format.map_or("csv", trace::TraceFormat::name).to_string();
    Ok((t, name))
}

/// One job per Slurm job (a job id Slurm reused names several, each its own
/// job: `allot_ledger::recycled`): the first submit, the sum of its attempts'
/// wall times (`End - Start`, what the ledger charges: `Elapsed` leaves out
/// time suspended), its GPUs, its time limit, its recorded contract. An
/// attempt on other GPUs than the job's first (a resized job requeued) is
/// a job of its own. Jobs that never started
/// or still run are skipped (counted). A resized job's later segments
/// (records after one that ended `RESIZING`: Slurm starts a new record of
/// the job at the resize) are jobs of their own, submitted at the resize,
/// with their own GPUs and run time and what is left of the recorded
/// contract, so the replay holds each segment's GPUs for its own time (a
/// job of 16 GPUs for 20 min then 8 for 100 min is 18.667 GPU-h, not one
/// 16-GPU job of 2 h).
pub(super) fn attempts_to_trace(attempts: impl IntoIterator<Item = AttemptLite>) -> Trace {
    let mut by_id: BTreeMap<u64, Vec<AttemptLite>> = BTreeMap::new();
    for a in attempts {
        by_id.entry(a.job_id).or_default().push(a);
    }
    let mut jobs: Vec<TraceJob> = Vec::new();
    let mut skipped: BTreeMap<&'static str, u64> = BTreeMap::new();
    for (_, mut attempts) in by_id {
        attempts.sort_by_key(|a| a.submit);
        // A recycled id names several jobs (allot_ledger::recycled): the
        // k-th reuse is replayed as a job of its own, id + k x 2^32.
        let starts =
            allot_ledger::recycled::job_starts(&attempts, |a| (a.user.as_str(), a.submit, a.end));
        for (k, from) in starts.into_iter().enumerate().rev() {
            let reuse: Vec<AttemptLite> = attempts.split_off(from);
            one_job(reuse, (k as u64) << 32, &mut jobs, &mut skipped);
        }
    }
    let jobs: Vec<TraceJob> = jobs.into_iter().filter(|j| j.duration > 0).collect();
    let mut t = trace::from_jobs(jobs, Vec::new());
    t.skipped = skipped
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    t
}

/// The trace jobs of one job's attempts (sorted by submit), their ids
/// `job_id + id_offset`.
fn one_job(
    attempts: Vec<AttemptLite>,
    id_offset: u64,
    jobs: &mut Vec<TraceJob>,
    skipped: &mut BTreeMap<&'static str, u64>,
) {
    let mut main: Option<TraceJob> = None;
    // Run time of the resized run so far, and whether the previous
    // record ended RESIZING.
    let (mut ran, mut resized) = (0u64, false);
    for a in attempts {
        let continues = std::mem::replace(&mut resized, a.state == "RESIZING");
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
        // Wall time, as the ledger charges it (a suspended job holds its
        // GPUs; sacct's Elapsed leaves the suspension out).
        let run = (end - start).max(0) as u64;
        let gpus = u32::try_from(a.gpus).unwrap_or(u32::MAX);
        if !continues {
            ran = 0;
        }
        let segment = |min_runtime| TraceJob {
            id: a.job_id.wrapping_add(id_offset),
            team: a.account.to_ascii_lowercase(),
            partition: a.partition.clone(),
            submit: a.submit.max(0) as u64,
            duration: run,
            gpus,
            min_runtime,
            resumable: None,
            time_limit: a.time_limit,
            submit_ms: None,
            line: a.line,
        };
        if continues {
            // The rest of the contract, once per run (0 stays the free tier).
            let left = a.min_runtime.map(|m| {
                if m == 0 {
                    0
                } else {
                    m.saturating_sub(ran).max(1)
                }
            });
            jobs.push(segment(left));
        } else if let Some(e) = main.as_mut().filter(|e| e.gpus == gpus) {
            e.submit = e.submit.min(a.submit.max(0) as u64);
            e.duration += run;
        } else if main.is_some() {
            // A requeued attempt on other GPUs (a resized job requeued):
            // its own job, so the replay holds what the ledger charged.
            jobs.push(segment(a.min_runtime));
        } else {
            main = Some(segment(a.min_runtime));
        }
        ran += run;
    }
    jobs.extend(main);
}

pub(super) struct AttemptLite {
    line: u32,
    job_id: u64,
    /// User name (empty when the input has none): tells a recycled id.
    user: String,
    account: String,
    partition: Option<String>,
    submit: i64,
    start: Option<i64>,
    end: Option<i64>,
    /// Time limit, seconds (`TimelimitRaw`): the replay's short band and
    /// backfill read it, as the plugins read slurmctld's.
    time_limit: Option<u64>,
    gpus: u64,
    min_runtime: Option<u64>,
    /// Base state (`RESIZING` ends a segment of a resized run).
    state: String,
}

pub(super) fn sacct_trace(bytes: &[u8]) -> anyhow::Result<Trace> {
    let header_len = bytes
        .iter()
        .position(|b| *b == b'\n')
        .map_or(bytes.len(), |i| i + 1);
    anyhow::ensure!(header_len > 0, "empty sacct dump");
    let header = String::from_utf8_lossy(&bytes[..header_len]);
    let parser =
        allot_ledger::sacct::Parser::from_header_line(&header, jiff::tz::TimeZone::system())?;
    if let Some(note) = parser.layout_note() {
        // Without Submit a job's submit time is its first start: waits read 0.
        eprintln!("allot sim: note: {note} (waits read from the first start)");
    }
    let rows = parser
        .rows(&bytes[header_len..], 2)
        .collect::<std::io::Result<Vec<_>>>()
        .context("reading the sacct dump")?;
    allot_ledger::sacct::one_cluster(&parser, rows.iter().map(|r| r.text.as_str()))?;
    let mut errors = Vec::new();
    let mut attempts = Vec::new();
    let mut steps = 0u64;
    for row in &rows {
        let line = u32::try_from(row.line).unwrap_or(u32::MAX);
        match parser.parse_row(row) {
            Ok(allot_ledger::sacct::RowOutcome::Attempt(a)) => attempts.push(AttemptLite {
                line,
                job_id: a.job_id,
                user: a.user,
                account: a.account,
                partition: a.partition,
                submit: a.submit,
                start: a.start,
                end: a.end,
                time_limit: a.time_limit,
                gpus: a.gpus,
                min_runtime: a.min_runtime,
                state: a.state,
            }),
            Ok(allot_ledger::sacct::RowOutcome::Skipped) => {}
            Ok(allot_ledger::sacct::RowOutcome::Step) => steps += 1,
            Err(e) => errors.push(trace::RowError {
                line,
                column: Some(e.field.to_string()),
                // The line is the trace error's own.
                message: allot_ledger::sacct::RowError { line: None, ..e }.to_string(),
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

pub(super) fn ledger_trace(path: &Path) -> anyhow::Result<Trace> {
    let reader = match allot_ledger::LedgerReader::open(path) {
        Ok(r) => r,
        Err(allot_ledger::LedgerError::Missing { .. }) => anyhow::bail!(
            "--trace {}: not an allot ledger (no ledger schema in it); give a ledger written by \
             `allot sync`, or name the file's format with --format",
            path.display()
        ),
        Err(e) => {
            return Err(e).with_context(|| format!("cannot open the ledger {}", path.display()))
        }
    };
    let attempts = reader.all_attempts()?;
    Ok(attempts_to_trace(attempts.into_iter().enumerate().map(
        |(i, a)| {
            let r = a.record;
            AttemptLite {
                line: i as u32 + 1,
                job_id: r.job_id,
                user: r.user,
                account: r.account,
                partition: r.partition,
                submit: r.submit,
                start: r.start,
                end: r.end,
                time_limit: r.time_limit,
                gpus: r.gpus,
                min_runtime: r.min_runtime_recorded.then_some(r.min_runtime),
                state: r.state,
            }
        },
    )))
}
