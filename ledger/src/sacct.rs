//! Parsing `sacct --parsable2` rows into job attempts.
//!
//! Pure functions, no I/O. One row of `sacct -X -D` is one *attempt* of one
//! allocation: a requeued job has one row per attempt (same `JobIDRaw`,
//! different `Submit`), array tasks and het-job components have rows of
//! their own, and steps never appear (`-X`).
//!
//! Rules:
//! - `JobIDRaw` is the key; `JobID` is kept as printed (`1043074_91`,
//!   `93+1`). A pending array range (`123_[1-5%2]`) is not a job: the row is
//!   [`RowOutcome::Skipped`].
//! - A job step (`5101.batch`, `5104.0`, `5104.extern`, `7100_3.batch` whose
//!   `JobIDRaw` is `7104.batch`; any `sacct` without `-X` prints them) is
//!   [`RowOutcome::Step`]: normal output, not an error; its job's own row
//!   carries the allocation that is charged. Callers count steps and say so
//!   once.
//! - `Unknown`, `None`, `N/A` and the empty string are absent values
//!   (`None`), never 0.
//! - Times are seconds since the Unix epoch (UTC). A field made of digits
//!   only is already an epoch (what `SLURM_TIME_FORMAT=%s` makes sacct
//!   print, as `allot sync` does); a date-time with a UTC offset
//!   (`2026-01-10T23:30:00+0100`, `-05:00`, `Z`: what
//!   `SLURM_TIME_FORMAT=%Y-%m-%dT%H:%M:%S%z` prints) is the instant it
//!   names; otherwise it is sacct's ISO local time `YYYY-MM-DDTHH:MM:SS`,
//!   read in the time zone given to [`Parser::new`] (a time that a DST
//!   change makes ambiguous takes the earlier instant). The zone applies
//!   only to times without an offset.
//! - `Elapsed` is `[d-]hh:mm:ss` or `mm:ss`.
//! - GPUs come from `AllocTRES` via [`fairshare::tres::gpu_count`]
//!   (`gres/gpu:a100=2,gres/gpu=2` is 2 GPUs).
//! - The time limit comes from `TimelimitRaw` (minutes), else `Timelimit`
//!   (`[d-]hh:mm:ss`); `UNLIMITED` and `Partition_Limit` are no limit
//!   known. The minimum runtime charged is at most it
//!   ([`fairshare::ContractPolicy::job_min_runtime`]).
//! - The contract comes from the `AdminComment` token
//!   `allot:min_runtime=<seconds>` that job_submit/allot records, read with
//!   the engine's one parser, [`fairshare::record::recorded_min_runtime`];
//!   users cannot edit `AdminComment`, and the user-editable `Comment` is
//!   never read.
//! - A dump holds one cluster's jobs: job ids are numbered per cluster, so
//!   a `Cluster` column (`sacct -M all`) naming two or more clusters is
//!   refused whole by [`one_cluster`] before any row is used.
//! - Free text (`JobName`, `Comment`, ...) may hold `|`, newlines and bytes
//!   that are not UTF-8: rows are read with [`Parser::rows`] and
//!   [`Parser::parse_row`], which place the fields allot reads around it
//!   (rules in `sacct/rows.rs`).
//! - A row that cannot be read is a [`RowError`] naming the line, the JobID,
//!   the field and the value; the caller logs it, counts the GPU-hours it
//!   held ([`Parser::held_gpu_seconds`]) and carries on.

use std::collections::HashMap;

use fairshare::duration::{parse_slurm_duration, LATEST_PLAUSIBLE_TIME, MAX_PLAUSIBLE_RUN_SECS};

mod fields;
mod rows;

use fields::{is_local_time, parse_label};
pub use fields::{
    is_placeholder, is_step_id, parse_elapsed, parse_time, parse_time_limit, PLAUSIBLE_FROM,
};
pub use rows::{DumpRow, DumpRows, FREE_TEXT_FIELDS, MAX_JOINED_LINES};

/// Fields `allot sync` asks sacct for, in this order. `AdminComment` is last
/// because it is free text: a `|` inside it is joined back into the field.
pub const LIVE_FIELDS: &[&str] = &[
    "JobID",
    "JobIDRaw",
    "Account",
    "User",
    "Partition",
    "AllocTRES",
    "Submit",
    "Start",
    "End",
    "Elapsed",
    "State",
    "TimelimitRaw",
    "AdminComment",
];

/// Fields a `--from` dump must have (any order, any case): what charging
/// an attempt needs, a job number (`JobIDRaw`, else `JobID`), its account,
/// its GPUs and its start and end.
pub const REQUIRED_FIELDS: &[&str] = &["JobIDRaw", "Account", "AllocTRES", "Start", "End"];

/// Fields read when present: `JobID` (the printed label; without it
/// `JobIDRaw` stands in), `Submit` (without it an attempt is keyed by its
/// start), `User`, `Partition`, `State`, `Elapsed` (stored for reference),
/// `TimelimitRaw` or `Timelimit` (the time limit, which caps the minimum
/// runtime charged) and `AdminComment` (the contract token). `Cluster` (what `sacct -M all`
/// adds) is only checked: a dump may hold one cluster's jobs
/// ([`one_cluster`]).
pub const OPTIONAL_FIELDS: &[&str] = &[
    "JobID",
    "Submit",
    "User",
    "Partition",
    "State",
    "Elapsed",
    "TimelimitRaw",
    "Timelimit",
    "AdminComment",
    "Cluster",
];

/// The job states sacct prints (Slurm 22.05 to 24.11, `job_state_string`),
/// without their reason (`CANCELLED by 0`): three open ones, then the nine
/// ended ones of [`ENDED_STATES`], then the rest.
const SLURM_JOB_STATES: &[&str] = &[
    "PENDING",
    "RUNNING",
    "SUSPENDED",
    "COMPLETED",
    "CANCELLED",
    "FAILED",
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
    "OUT_OF_MEMORY",
    "REQUEUED",
    "REQUEUE_FED",
    "REQUEUE_HOLD",
    "RESIZING",
    "REVOKED",
    "SPECIAL_EXIT",
    "STOPPED",
    "SIGNALING",
    "STAGE_OUT",
    "COMPLETING",
    "CONFIGURING",
    "RESV_DEL_HOLD",
    "POWER_UP_NODE",
    "UPDATE_DB",
    "LAUNCH_FAILED",
    "RECONFIG_FAIL",
    "UNKNOWN",
];

/// States of an attempt that has ended (`COMPLETED` to `OUT_OF_MEMORY`
/// in [`SLURM_JOB_STATES`]): one of them with no `End` is a record
/// slurmdbd lost the end of (a runaway).
const ENDED_STATES: &[&str] = SLURM_JOB_STATES.split_at(3).1.split_at(9).0;

/// The `sacct` command that saves a dump `allot sync --from` reads: every
/// user, allocations only (`-X`), every attempt (`-D`), with the header line
/// (no `--noheader`), times as epoch seconds (`SLURM_TIME_FORMAT=%s`: local
/// times are ambiguous in the hour a DST change repeats). `-S` is the
/// history to import.
pub fn dump_command() -> String {
    format!(
        "SLURM_TIME_FORMAT=%s sacct -a -X -D --parsable2 -S 2024-01-01 -E now -o {} > dump",
        LIVE_FIELDS.join(",")
    )
}

/// The header of a dump lacks fields the import needs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct MissingFields {
    /// The required field names not found in the header.
    pub missing: Vec<String>,
    /// The first line, cut to 80 characters, when it names no sacct field
    /// allot reads: most likely a row (a dump saved with `--noheader`), not
    /// a header.
    pub not_a_header: Option<String>,
}

impl std::fmt::Display for MissingFields {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.not_a_header {
            Some(line) => write!(
                f,
                "the dump's first line {line:?} is not a sacct --parsable2 header \
                 (it names none of the fields {}): the first line must be the header; \
                 save the dump without --noheader: {}",
                LIVE_FIELDS.join(", "),
                dump_command()
            ),
            None => write!(
                f,
                "the sacct dump lacks the field(s) {}; re-run sacct with -o {} \
                 (and --parsable2, with the header line)",
                self.missing.join(", "),
                LIVE_FIELDS.join(",")
            ),
        }
    }
}

/// A dump holds the jobs of several clusters (`sacct -M all`, or several
/// `-M` names). Job ids are numbered per cluster, so two clusters' job 700
/// would read as two attempts of one job, and one cluster's attempt would
/// replace the other's: such a dump is refused whole.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct SeveralClusters {
    /// Each cluster found in the `Cluster` column and its number of rows,
    /// in the order first seen.
    pub clusters: Vec<(String, u64)>,
}

impl std::fmt::Display for SeveralClusters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list: Vec<String> = self
            .clusters
            .iter()
            .map(|(c, n)| format!("{c} ({n} row{})", if *n == 1 { "" } else { "s" }))
            .collect();
        write!(
            f,
            "the sacct dump holds the jobs of {} clusters: {}. Job ids are numbered per \
             cluster, so their jobs cannot share one ledger or one trace (the same job id \
             would merge or overwrite); nothing was read. Save one dump per cluster with \
             sacct -M <cluster> (e.g. sacct -M {} ...) and use each with its own ledger",
            self.clusters.len(),
            list.join(", "),
            self.clusters
                .first()
                .map_or("<cluster>", |(c, _)| c.as_str()),
        )
    }
}

/// Checks that the rows of a dump (header excluded) hold one cluster's
/// jobs: `Ok(Some(name))` for a single cluster, `Ok(None)` without a
/// `Cluster` column (or with it empty throughout).
///
/// # Errors
/// [`SeveralClusters`] naming every cluster found and its row count.
pub fn one_cluster<'a, I>(parser: &Parser, lines: I) -> Result<Option<String>, SeveralClusters>
where
    I: IntoIterator<Item = &'a str>,
{
    if !parser.has_cluster() {
        return Ok(None);
    }
    let mut clusters: Vec<(String, u64)> = Vec::new();
    for line in lines {
        let Some(c) = parser.cluster(line) else {
            continue;
        };
        match clusters.iter_mut().find(|(name, _)| name == c) {
            Some((_, n)) => *n += 1,
            None => clusters.push((c.to_string(), 1)),
        }
    }
    if clusters.len() > 1 {
        return Err(SeveralClusters { clusters });
    }
    Ok(clusters.pop().map(|(c, _)| c))
}

/// Why one row could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("sacct row{} for job {job_id}: field {field} = {value:?}: {reason}", .line.map(|l| format!(" at line {l}")).unwrap_or_default())]
pub struct RowError {
    /// The row's first line in the dump (the header is line 1), when it
    /// was read from one ([`Parser::parse_row`]).
    pub line: Option<u64>,
    /// The row's `JobID` as printed (or `?` when even that is missing).
    pub job_id: String,
    /// The field that failed.
    pub field: &'static str,
    /// Its text.
    pub value: String,
    /// What is wrong.
    pub reason: String,
}

/// An array task: `JobID` `1043074_91` = array job 1043074, task 91.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArrayTask {
    /// The array's job id (`ArrayJobID`).
    pub job: u64,
    /// The task index (`ArrayTaskID`).
    pub task: u32,
}

/// A heterogeneous-job component: `JobID` `93+1` = het job 93, offset 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HetComponent {
    /// The het job's leader id.
    pub job: u64,
    /// The component offset.
    pub offset: u32,
}

/// One attempt of one allocation, as sacct reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// `JobIDRaw`: Slurm's unique job id of this allocation.
    pub job_id: u64,
    /// `JobID` as printed (`1043074_91`, `93+1`, `17`).
    pub label: String,
    /// Set for an array task.
    pub array: Option<ArrayTask>,
    /// Set for a het-job component.
    pub het: Option<HetComponent>,
    /// Slurm account.
    pub account: String,
    /// User name.
    pub user: String,
    /// Partition, absent when sacct shows none.
    pub partition: Option<String>,
    /// Allocated GPUs (0 for a job that never ran).
    pub gpus: u64,
    /// Allocated TRES with numeric counts (`mem` in megabytes), for
    /// weighted charging.
    pub tres: Vec<(String, u64)>,
    /// Submit time of this attempt, seconds since the epoch. With the job
    /// id it identifies the attempt (a requeue resubmits). From a dump
    /// without `Submit`, the attempt's start ([`Parser::keyed_by_start`]).
    pub submit: i64,
    /// Start, seconds since the epoch; `None` for a job that never started.
    pub start: Option<i64>,
    /// End, seconds since the epoch; `None` while running or pending.
    pub end: Option<i64>,
    /// `Elapsed`, seconds, when the dump has it.
    pub elapsed: Option<u64>,
    /// Base state (`COMPLETED`, `CANCELLED` without `by UID`, ...).
    pub state: String,
    /// Minimum runtime recorded on the job (`AdminComment`), seconds.
    pub min_runtime: Option<u64>,
    /// Time limit, seconds (`TimelimitRaw` or `Timelimit`); `None` when
    /// unlimited, left to the partition, or not in the dump.
    pub time_limit: Option<u64>,
}

impl Attempt {
    /// True for a job that never started (pending, or cancelled while
    /// pending).
    pub fn never_started(&self) -> bool {
        self.start.is_none()
    }
}

/// What became of one row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowOutcome {
    /// A job attempt.
    Attempt(Box<Attempt>),
    /// Not a job (a pending array range); nothing to record.
    Skipped,
    /// A job step (`5104.batch`, `5104.0`): its job's row is the allocation.
    Step,
}

/// Field positions of one sacct layout.
#[derive(Debug, Clone)]
pub struct Parser {
    tz: jiff::tz::TimeZone,
    width: usize,
    job_id: usize,
    job_id_raw: usize,
    account: usize,
    user: Option<usize>,
    partition: Option<usize>,
    alloc_tres: usize,
    submit: Option<usize>,
    start: usize,
    end: usize,
    state: Option<usize>,
    elapsed: Option<usize>,
    /// `TimelimitRaw` (true: minutes) or `Timelimit` (false: a duration).
    time_limit: Option<(usize, bool)>,
    admin_comment: Option<usize>,
    cluster: Option<usize>,
    /// The header's free-text columns ([`FREE_TEXT_FIELDS`]), in order,
    /// with their names.
    free_text: Vec<(usize, &'static str)>,
}

impl Parser {
    /// A parser for rows whose fields are named by `header` (sacct's field
    /// names, any order, case-insensitive), reading local times in `tz`.
    ///
    /// # Errors
    /// [`MissingFields`] naming every required field absent.
    pub fn new<S: AsRef<str>>(
        header: &[S],
        tz: jiff::tz::TimeZone,
    ) -> Result<Parser, MissingFields> {
        let index: HashMap<String, usize> = header
            .iter()
            .enumerate()
            .map(|(i, h)| (h.as_ref().trim().to_ascii_lowercase(), i))
            .collect();
        let find = |name: &str| index.get(&name.to_ascii_lowercase()).copied();
        // The job number: JobIDRaw, else JobID (the same for plain jobs).
        let raw = find("JobIDRaw").or_else(|| find("JobID"));
        let missing: Vec<String> = REQUIRED_FIELDS
            .iter()
            .filter(|f| match **f {
                "JobIDRaw" => raw.is_none(),
                f => find(f).is_none(),
            })
            .map(|f| match *f {
                "JobIDRaw" => "JobIDRaw (or JobID)".to_string(),
                f => f.to_string(),
            })
            .collect();
        if !missing.is_empty() {
            let known = LIVE_FIELDS.iter().any(|f| find(f).is_some());
            let not_a_header = (!known).then(|| {
                let line = header
                    .iter()
                    .map(|h| h.as_ref())
                    .collect::<Vec<_>>()
                    .join("|");
                match line.char_indices().nth(80) {
                    Some((i, _)) => format!("{}...", &line[..i]),
                    None => line,
                }
            });
            return Err(MissingFields {
                missing,
                not_a_header,
            });
        }
        let req = |name: &str| find(name).expect("checked above");
        let job_id_raw = raw.expect("checked above");
        Ok(Parser {
            tz,
            width: header.len(),
            job_id: find("JobID").unwrap_or(job_id_raw),
            job_id_raw,
            account: req("Account"),
            user: find("User"),
            partition: find("Partition"),
            alloc_tres: req("AllocTRES"),
            submit: find("Submit"),
            start: req("Start"),
            end: req("End"),
            state: find("State"),
            elapsed: find("Elapsed"),
            time_limit: find("TimelimitRaw")
                .map(|i| (i, true))
                .or_else(|| find("Timelimit").map(|i| (i, false))),
            admin_comment: find("AdminComment"),
            cluster: find("Cluster"),
            free_text: {
                let mut f: Vec<(usize, &'static str)> = FREE_TEXT_FIELDS
                    .iter()
                    .filter_map(|name| find(name).map(|i| (i, *name)))
                    .collect();
                f.sort_unstable();
                f
            },
        })
    }

    /// True when the dump has no `Submit`: each attempt is keyed by (job,
    /// `Start`) instead of (job, `Submit`), so requeued attempts are told
    /// apart by their start (an attempt that never started is skipped:
    /// it has nothing to charge and nothing to key it by).
    pub fn keyed_by_start(&self) -> bool {
        self.submit.is_none()
    }

    /// What this layout lacks that the live import has, said once by the
    /// callers: `None` when nothing.
    pub fn layout_note(&self) -> Option<String> {
        let mut notes = Vec::new();
        if self.keyed_by_start() {
            notes.push(
                "the dump has no Submit: requeued attempts are told apart by their Start, and attempts that never started are skipped",
            );
        }
        if self.user.is_none() {
            notes.push("no User: attempts are recorded without a user");
        }
        if self.state.is_none() {
            notes.push("no State: attempts are recorded with state UNKNOWN");
        }
        (!notes.is_empty()).then(|| notes.join("; "))
    }

    /// A parser for the fields of [`LIVE_FIELDS`], in that order.
    pub fn live(tz: jiff::tz::TimeZone) -> Parser {
        Parser::new(LIVE_FIELDS, tz).expect("LIVE_FIELDS has every required field")
    }

    /// A parser for a dump whose first line is `header_line`.
    ///
    /// # Errors
    /// [`MissingFields`].
    pub fn from_header_line(
        header_line: &str,
        tz: jiff::tz::TimeZone,
    ) -> Result<Parser, MissingFields> {
        let fields: Vec<&str> = header_line
            .strip_prefix('\u{feff}')
            .unwrap_or(header_line)
            .trim_end_matches(['\r', '\n'])
            .split('|')
            .collect();
        Parser::new(&fields, tz)
    }

    /// True when the dump has a `Cluster` column (`sacct -M ...`): its
    /// rows must be checked with [`one_cluster`] before any is used.
    pub fn has_cluster(&self) -> bool {
        self.cluster.is_some()
    }

    /// The `Cluster` field of one line, trimmed; `None` without the column,
    /// for a placeholder or for a line too short to have it.
    pub fn cluster<'a>(&self, line: &'a str) -> Option<&'a str> {
        let i = self.cluster?;
        let v = self.placed(line.trim_end_matches(['\r', '\n']), i)?.trim();
        (!is_placeholder(v)).then_some(v)
    }

    /// Parses one `--parsable2` row (no trailing newline needed).
    ///
    /// A row with more `|` than the header has is read when the extra ones
    /// fall in free text and every field allot reads can still be placed
    /// (`sacct/rows.rs`); otherwise it is an error. Rows read from a dump go
    /// through [`Parser::parse_row`], which also names the line.
    ///
    /// # Errors
    /// [`RowError`] naming the job, field and value.
    pub fn parse(&self, line: &str) -> Result<RowOutcome, RowError> {
        self.parse_text(line, false)
    }

    /// [`Parser::parse`]; with `not_utf8`, a field allot reads that holds
    /// U+FFFD (a byte sequence that was not UTF-8) is an error.
    fn parse_text(&self, line: &str, not_utf8: bool) -> Result<RowOutcome, RowError> {
        let line = line.trim_end_matches(['\r', '\n']);
        match self.readings(line)?.as_slice() {
            [one] => self.parse_fields(&one.fields, not_utf8, false),
            several => self.parse_readings(line, several, not_utf8),
        }
    }

    /// One reading of a row: its fields, one per header column. With
    /// `strict` (one of several readings), a `State` Slurm never prints is
    /// an error, not a warning.
    fn parse_fields(
        &self,
        fields: &[&str],
        not_utf8: bool,
        strict: bool,
    ) -> Result<RowOutcome, RowError> {
        let job_label = fields[self.job_id].to_string();
        let err = |field: &'static str, value: &str, reason: String| RowError {
            job_id: job_label.clone(),
            field,
            value: value.to_string(),
            reason,
            line: None,
        };
        if not_utf8 {
            for (i, name) in self.read_columns() {
                // AdminComment's token is ASCII; the rest is free text.
                if name != "AdminComment" && fields[i].contains('\u{FFFD}') {
                    return Err(err(
                        name,
                        fields[i],
                        "holds bytes that are not UTF-8 (shown as U+FFFD); allot reads this field, so the row is left out: re-save the dump from sacct, or fix the row".into(),
                    ));
                }
            }
        }
        let f = |i: usize| fields[i];

        let label = f(self.job_id).trim();
        if label.contains('[') {
            return Ok(RowOutcome::Skipped); // pending array range, e.g. 123_[1-5%2]
        }
        let raw = f(self.job_id_raw).trim();
        if is_step_id(raw) || is_step_id(label) {
            return Ok(RowOutcome::Step);
        }
        let job_id: u64 = raw.parse().map_err(|_| {
            if self.job_id == self.job_id_raw && parse_label(raw).is_ok() {
                // A dump without JobIDRaw: an array task or het component
                // has no job number of its own in JobID.
                err(
                    "JobID",
                    raw,
                    "an array task or het-job component: its job number is JobIDRaw, which the dump lacks; add JobIDRaw to sacct -o".into(),
                )
            } else {
                err("JobIDRaw", raw, "not a job number".into())
            }
        })?;
        let (array, het) = parse_label(label).map_err(|r| err("JobID", label, r))?;

        let text = |i: usize, name: &'static str| -> Result<String, RowError> {
            let v = f(i).trim();
            if is_placeholder(v) {
                Err(err(name, v, "missing".into()))
            } else {
                Ok(v.to_string())
            }
        };
        let account = text(self.account, "Account")?;
        let user = match self.user {
            Some(i) => text(i, "User")?,
            None => String::new(),
        };
        let partition = self
            .partition
            .map(|i| f(i).trim())
            .filter(|p| !is_placeholder(p))
            .map(str::to_string);

        let tres_text = f(self.alloc_tres).trim();
        let gpus = fairshare::tres::gpu_count(tres_text)
            .map_err(|e| err("AllocTRES", tres_text, e.reason))?;
        let tres = fairshare::tres::counts(tres_text);

        let time = |i: usize, name: &'static str| {
            parse_time(f(i), &self.tz).map_err(|r| err(name, f(i), r))
        };
        let start = time(self.start, "Start")?;
        let submit = match self.submit {
            Some(i) => time(i, "Submit")?.ok_or_else(|| err("Submit", f(i), "missing".into()))?,
            // Keyed by (job, Start): without a start there is no attempt to charge.
            None => match start {
                Some(s) => s,
                None => return Ok(RowOutcome::Skipped),
            },
        };
        let end = time(self.end, "End")?;
        for (value, i, name) in [
            (Some(submit), self.submit.unwrap_or(self.start), "Submit"),
            (start, self.start, "Start"),
            (end, self.end, "End"),
        ] {
            if value.is_some_and(|t| !(PLAUSIBLE_FROM..LATEST_PLAUSIBLE_TIME).contains(&t)) {
                return Err(err(
                    name,
                    f(i),
                    "not a plausible time (before 1970 or after 2199); fix the clock or drop the row"
                        .into(),
                ));
            }
        }
        if let (Some(s), Some(e)) = (start, end) {
            if e < s {
                return Err(err(
                    "End",
                    f(self.end),
                    format!(
                        "before Start ({}); the row is inconsistent{}",
                        f(self.start).trim(),
                        // A local time without an offset: the hour DST's end
                        // repeats reads as an hour earlier.
                        if is_local_time(f(self.end)) {
                            " (if the job ran across the end of daylight saving time, its local times repeat an hour: save the dump with SLURM_TIME_FORMAT=%s for epoch times)"
                        } else {
                            ""
                        }
                    ),
                ));
            }
            if (e - s) as u64 > MAX_PLAUSIBLE_RUN_SECS {
                return Err(err(
                    "End",
                    f(self.end),
                    "more than 5 years after Start; not a plausible job attempt".into(),
                ));
            }
        }
        let elapsed = match self.elapsed {
            Some(i) => parse_elapsed(f(i)).map_err(|r| err("Elapsed", f(i), r))?,
            None => None,
        };
        let time_limit = match self.time_limit {
            Some((i, raw)) => parse_time_limit(f(i), raw)
                .map_err(|r| err(if raw { "TimelimitRaw" } else { "Timelimit" }, f(i), r))?,
            None => None,
        };
        let state_text = self.state.map_or("UNKNOWN", |i| f(i).trim());
        let state = state_text
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_ascii_uppercase();
        if state.is_empty() {
            return Err(err("State", state_text, "missing".into()));
        }
        let known_state = SLURM_JOB_STATES.contains(&state.as_str());
        if strict && !known_state {
            return Err(err("State", state_text, "not a state Slurm prints".into()));
        }
        if !known_state {
            // Charged as an owner's ending (fairshare::attempts::ended_by);
            // a truncated or mistyped NODE_FAIL would bill the owner for the
            // cluster's failure, so say which state was not recognised.
            tracing::warn!(
                job = %job_label,
                state = state_text,
                "State is not one Slurm prints; the attempt is charged as its owner's ending (by the contract); fix the dump if it was cut or edited"
            );
        }
        if start.is_some() && end.is_none() && ENDED_STATES.contains(&state.as_str()) {
            // A record that ended without its end: slurmdbd lost it. Open
            // in the ledger, so charged at most to start + time limit.
            tracing::warn!(
                job = %job_label,
                state = state_text,
                "runaway record: the job ended ({state}) but has no End; it is charged as running, at most up to its start plus its time limit. Fix the record in slurmdbd: sacctmgr show runawayjobs"
            );
        }
        let min_runtime = self.admin_comment.and_then(|i| {
            let text = f(i);
            let token = fairshare::record::recorded_min_runtime(text);
            if token.is_none() && text.contains(fairshare::record::RECORDED_KEY) {
                tracing::warn!(
                    job = %job_label,
                    admin_comment = text.trim(),
                    "unreadable minimum-runtime record in AdminComment; the partition's or global default applies"
                );
            }
            token
        });
        Ok(RowOutcome::Attempt(Box::new(Attempt {
            job_id,
            label: label.to_string(),
            array,
            het,
            account,
            user,
            partition,
            gpus,
            tres,
            submit,
            start,
            end,
            elapsed,
            state,
            min_runtime,
            time_limit,
        })))
    }
}

#[cfg(test)]
mod tests;
