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
//!   print, as `allot sync` does); otherwise it is sacct's ISO local time
//!   `YYYY-MM-DDTHH:MM:SS`, read in the time zone given to
//!   [`Parser::new`] (a time that a DST change makes ambiguous takes the
//!   earlier instant).
//! - `Elapsed` is `[d-]hh:mm:ss` or `mm:ss`.
//! - GPUs come from `AllocTRES` via [`fairshare::tres::gpu_count`]
//!   (`gres/gpu:a100=2,gres/gpu=2` is 2 GPUs).
//! - The contract comes from the `AdminComment` token
//!   `allot:min_runtime=<seconds>` that job_submit/allot records, read with
//!   the engine's one parser, [`fairshare::record::recorded_min_runtime`];
//!   users cannot edit `AdminComment`, and the user-editable `Comment` is
//!   never read.
//! - A row that cannot be read is a [`RowError`] naming the JobID, the field
//!   and the value; the caller logs it and carries on.

use std::collections::HashMap;

use fairshare::duration::{parse_slurm_duration, LATEST_PLAUSIBLE_TIME, MAX_PLAUSIBLE_RUN_SECS};

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
    "AdminComment",
];

/// Fields a `--from` dump must have (any order, any case): what charging
/// an attempt needs, a job number (`JobIDRaw`, else `JobID`), its account,
/// its GPUs and its start and end.
pub const REQUIRED_FIELDS: &[&str] = &["JobIDRaw", "Account", "AllocTRES", "Start", "End"];

/// Fields read when present: `JobID` (the printed label; without it
/// `JobIDRaw` stands in), `Submit` (without it an attempt is keyed by its
/// start), `User`, `Partition`, `State`, `Elapsed` (stored for reference)
/// and `AdminComment` (the contract token).
pub const OPTIONAL_FIELDS: &[&str] = &[
    "JobID",
    "Submit",
    "User",
    "Partition",
    "State",
    "Elapsed",
    "AdminComment",
];

/// The header of a dump lacks fields the import needs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the sacct dump lacks the field(s) {missing}; re-run sacct with -o {all} \
     (and --parsable2, with the header line)",
    missing = .missing.join(", "),
    all = LIVE_FIELDS.join(",")
)]
pub struct MissingFields {
    /// The required field names not found in the header.
    pub missing: Vec<String>,
}

/// Why one row could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("sacct row for job {job_id}: field {field} = {value:?}: {reason}")]
pub struct RowError {
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

/// True for a step id: a job id (`5104`, `7100_3`, `93+1`) then `.` and a
/// step name (`batch`, `extern`, `interactive`, `0`, or a het step `0+1`).
pub fn is_step_id(id: &str) -> bool {
    let Some((job, step)) = id.trim().split_once('.') else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let step_ok = matches!(step, "batch" | "extern" | "interactive")
        || match step.split_once('+') {
            Some((a, b)) => digits(a) && digits(b),
            None => digits(step),
        };
    step_ok && parse_label(job).is_ok()
}

/// True for sacct's placeholders of an absent value.
pub fn is_placeholder(s: &str) -> bool {
    matches!(s.trim(), "" | "Unknown" | "None" | "N/A" | "(null)")
}

/// Parses a time field into seconds since the epoch: placeholders give
/// `Ok(None)`, digits are an epoch, else ISO local time in `tz`.
///
/// # Errors
/// Text that is neither.
pub fn parse_time(s: &str, tz: &jiff::tz::TimeZone) -> Result<Option<i64>, String> {
    let s = s.trim();
    if is_placeholder(s) {
        return Ok(None);
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse::<i64>().map(Some).map_err(|e| e.to_string());
    }
    let dt: jiff::civil::DateTime = s
        .parse()
        .map_err(|e| format!("not an epoch nor a YYYY-MM-DDTHH:MM:SS time ({e})"))?;
    let ts = tz
        .to_ambiguous_timestamp(dt)
        .compatible()
        .map_err(|e| e.to_string())?;
    Ok(Some(ts.as_second()))
}

/// Earliest time a row may carry: the epoch (a negative time is a broken
/// clock or a corrupt row).
pub const PLAUSIBLE_FROM: i64 = 0;

/// Parses sacct's `Elapsed` (`[d-]hh:mm:ss` or `mm:ss`) into seconds.
///
/// # Errors
/// Any other shape.
pub fn parse_elapsed(s: &str) -> Result<Option<u64>, String> {
    let s = s.trim();
    if is_placeholder(s) {
        return Ok(None);
    }
    // sacct never prints a bare number or d-hh: insist on a ':'.
    if !s.contains(':') {
        return Err("expected [d-]hh:mm:ss or mm:ss".into());
    }
    parse_slurm_duration(s).map(Some).map_err(|e| e.to_string())
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
    admin_comment: Option<usize>,
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
            return Err(MissingFields { missing });
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
            admin_comment: find("AdminComment"),
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

    /// Parses one `--parsable2` line (no trailing newline needed).
    ///
    /// A line with more `|` than the header has is accepted when the extra
    /// ones fall in the last field and that field is `AdminComment` (free
    /// text); otherwise it is an error.
    ///
    /// # Errors
    /// [`RowError`] naming the job, field and value.
    pub fn parse(&self, line: &str) -> Result<RowOutcome, RowError> {
        let line = line.trim_end_matches(['\r', '\n']);
        let fields: Vec<&str> = line.splitn(self.width, '|').collect();
        let job_label = fields.get(self.job_id).copied().unwrap_or("?").to_string();
        let err = |field: &'static str, value: &str, reason: String| RowError {
            job_id: job_label.clone(),
            field,
            value: value.to_string(),
            reason,
        };
        if fields.len() < self.width {
            return Err(err(
                "(row)",
                line,
                format!("{} fields, the header has {}", fields.len(), self.width),
            ));
        }
        if self.admin_comment != Some(self.width - 1) && fields[self.width - 1].contains('|') {
            return Err(err(
                "(row)",
                line,
                format!("more fields than the header's {}", self.width),
            ));
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
                        "before Start ({}); the row is inconsistent",
                        f(self.start).trim()
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
        let state_text = self.state.map_or("UNKNOWN", |i| f(i).trim());
        let state = state_text
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_ascii_uppercase();
        if state.is_empty() {
            return Err(err("State", state_text, "missing".into()));
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
        })))
    }
}

/// Reads `123`, `123_4` (array task) and `93+1` (het component).
fn parse_label(label: &str) -> Result<(Option<ArrayTask>, Option<HetComponent>), String> {
    let num = |s: &str| {
        s.parse::<u64>()
            .map_err(|_| format!("{s:?} is not a number"))
    };
    if let Some((job, task)) = label.split_once('_') {
        let task =
            u32::try_from(num(task)?).map_err(|_| "array task index too large".to_string())?;
        return Ok((
            Some(ArrayTask {
                job: num(job)?,
                task,
            }),
            None,
        ));
    }
    if let Some((job, off)) = label.split_once('+') {
        let offset = u32::try_from(num(off)?).map_err(|_| "het offset too large".to_string())?;
        return Ok((
            None,
            Some(HetComponent {
                job: num(job)?,
                offset,
            }),
        ));
    }
    num(label)?;
    Ok((None, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc() -> jiff::tz::TimeZone {
        jiff::tz::TimeZone::UTC
    }

    const HEADER: &str = "JobID|JobIDRaw|Account|User|Partition|AllocTRES|Submit|Start|End|Elapsed|State|AdminComment";

    fn parse(line: &str) -> Result<RowOutcome, RowError> {
        Parser::from_header_line(HEADER, utc()).unwrap().parse(line)
    }

    fn attempt(line: &str) -> Attempt {
        match parse(line).unwrap() {
            RowOutcome::Attempt(a) => *a,
            o => panic!("{o:?}: {line}"),
        }
    }

    #[test]
    fn elapsed_formats() {
        assert_eq!(parse_elapsed("1-12:30:45"), Ok(Some(131_445)));
        assert_eq!(parse_elapsed("45:30"), Ok(Some(2730)));
        assert_eq!(parse_elapsed("35-00:00:00"), Ok(Some(35 * 86_400)));
        assert_eq!(parse_elapsed("00:00:00"), Ok(Some(0)));
        assert_eq!(parse_elapsed("Unknown"), Ok(None));
        assert!(parse_elapsed("INVALID").is_err());
        assert!(
            parse_elapsed("10").is_err(),
            "sacct never prints bare minutes"
        );
    }

    #[test]
    fn array_task_keeps_both_ids() {
        let a = attempt(
            "1043074_91|1043166|a1|alice|gpu|cpu=1,gres/gpu=1|100|110|200|00:01:30|COMPLETED|",
        );
        assert_eq!(a.job_id, 1_043_166);
        assert_eq!(a.label, "1043074_91");
        assert_eq!(
            a.array,
            Some(ArrayTask {
                job: 1_043_074,
                task: 91
            })
        );
        assert_eq!(a.het, None);
    }

    #[test]
    fn pending_array_range_is_not_a_job() {
        assert_eq!(
            parse("123_[1-5%2]|123|a1|bob|gpu||100|Unknown|Unknown|00:00:00|PENDING|").unwrap(),
            RowOutcome::Skipped
        );
    }

    #[test]
    fn job_steps_are_steps_and_garbage_is_not() {
        let p = Parser::from_header_line(HEADER, utc()).unwrap();
        for line in [
            "5101.batch|5101.batch|a1|alice|gpu|cpu=1,gres/gpu=1|100|110|200|00:01:30|COMPLETED|",
            "5104.0|5104.0|a1|alice|gpu|cpu=1,gres/gpu=1|100|110|200|00:01:30|COMPLETED|",
            "5104.extern|5104.extern|a1|alice|gpu|cpu=1|100|110|200|00:01:30|COMPLETED|",
            "7100_3.batch|7104.batch|a1|alice|gpu|cpu=1|100|110|200|00:01:30|COMPLETED|",
            "93+1.0+1|94.0+1|v1|carol|gpu|cpu=1|100|110|200|00:01:30|COMPLETED|",
        ] {
            assert_eq!(p.parse(line), Ok(RowOutcome::Step), "{line}");
        }
        assert!(is_step_id("5104.interactive"));
        // Garbage stays an error naming the field.
        for (line, field) in [
            (
                "5104.x|5104.x|a1|alice|gpu|cpu=1|100|110|200|00:01:30|COMPLETED|",
                "JobIDRaw",
            ),
            (
                "abc.batch|abc.batch|a1|alice|gpu|cpu=1|100|110|200|00:01:30|COMPLETED|",
                "JobIDRaw",
            ),
            (
                ".batch|.batch|a1|alice|gpu|cpu=1|100|110|200|00:01:30|COMPLETED|",
                "JobIDRaw",
            ),
            (
                "5104|5104.|a1|alice|gpu|cpu=1|100|110|200|00:01:30|COMPLETED|",
                "JobIDRaw",
            ),
        ] {
            assert_eq!(p.parse(line).unwrap_err().field, field, "{line}");
        }
    }

    #[test]
    fn het_component() {
        let a = attempt("93+1|94|v1|carol|gpu|gres/gpu=4|100|110|Unknown|00:00:10|RUNNING|");
        assert_eq!(a.job_id, 94);
        assert_eq!(a.het, Some(HetComponent { job: 93, offset: 1 }));
        assert_eq!(a.end, None);
    }

    #[test]
    fn typed_and_untyped_gpus_count_once() {
        let a = attempt("7|7|a1|alice|gpu|billing=2,cpu=2,gres/gpu:a100=2,gres/gpu=2,mem=8G,node=1|100|110|200|00:01:30|COMPLETED|");
        assert_eq!(a.gpus, 2);
        assert!(a.tres.contains(&("mem".to_string(), 8192)));
        assert!(a.tres.contains(&("gres/gpu".to_string(), 2)));
    }

    #[test]
    fn never_started_job() {
        let a = attempt("8|8|a2|bob|gpu||100|None|Unknown|00:00:00|PENDING|");
        assert!(a.never_started());
        assert_eq!((a.start, a.end), (None, None));
        assert_eq!(a.gpus, 0);
        // Cancelled while pending: an End, but never started.
        let c = attempt("9|9|a2|bob|gpu||100|None|300|00:00:00|CANCELLED by 0|");
        assert!(c.never_started());
        assert_eq!(c.state, "CANCELLED");
    }

    #[test]
    fn local_times_and_epochs() {
        let tz = jiff::tz::TimeZone::get("America/New_York").unwrap();
        // 2024-01-15 12:00 EST = 17:00 UTC.
        assert_eq!(
            parse_time("2024-01-15T12:00:00", &tz),
            Ok(Some(1_705_338_000))
        );
        assert_eq!(
            parse_time("2024-01-15T17:00:00", &utc()),
            Ok(Some(1_705_338_000))
        );
        assert_eq!(parse_time("1705338000", &tz), Ok(Some(1_705_338_000)));
        assert_eq!(parse_time("Unknown", &tz), Ok(None));
        assert_eq!(parse_time("None", &tz), Ok(None));
        assert!(parse_time("yesterday", &tz).is_err());
        // Fall back: 01:30 happens twice; the earlier (EDT) instant is taken.
        assert_eq!(
            parse_time("2024-11-03T01:30:00", &tz),
            Ok(Some(1_730_611_800))
        );
    }

    #[test]
    fn header_in_any_order_and_missing_fields_named() {
        let p = Parser::from_header_line(
            "state|jobidraw|JobID|user|account|partition|alloctres|submit|start|end",
            utc(),
        )
        .unwrap();
        let RowOutcome::Attempt(a) = p
            .parse("COMPLETED|5|5|alice|a1|gpu|gres/gpu=1|1|2|3")
            .unwrap()
        else {
            panic!()
        };
        assert_eq!(
            (a.job_id, a.start, a.end, a.elapsed),
            (5, Some(2), Some(3), None)
        );
        let e = Parser::from_header_line("JobID|Account|User|Start", utc()).unwrap_err();
        assert_eq!(e.missing, ["AllocTRES", "End"]);
        let e = Parser::from_header_line("User|Partition|Submit|State", utc()).unwrap_err();
        assert_eq!(
            e.missing,
            [
                "JobIDRaw (or JobID)",
                "Account",
                "AllocTRES",
                "Start",
                "End"
            ]
        );
        assert!(
            e.to_string()
                .contains("lacks the field(s) JobIDRaw (or JobID), Account, AllocTRES, Start, End"),
            "{e}"
        );
    }

    #[test]
    fn monitoring_dumps_without_jobid_and_submit() {
        // What monitoring tools save: JobIDRaw, no JobID, no Submit, epoch times.
        let p = Parser::from_header_line(
            "JobIDRaw|Start|End|Cluster|AllocTRES|AdminComment|User|Account|State|NNodes|NCPUS|ReqMem|QOS|Partition|TimelimitRaw|JobName",
            utc(),
        )
        .unwrap();
        assert!(p.keyed_by_start());
        assert!(p
            .layout_note()
            .unwrap()
            .contains("told apart by their Start"));
        let a = |line: &str| match p.parse(line).unwrap() {
            RowOutcome::Attempt(a) => *a,
            o => panic!("{o:?}"),
        };
        let first = a("5200|1700000100|1700003700|c|cpu=4,gres/gpu=2|allot:min_runtime=600|alice|a1|REQUEUED|1|4|16G|normal|gpu|60|train");
        let second = a("5200|1700003760|1700007360|c|cpu=4,gres/gpu=2|allot:min_runtime=600|alice|a1|COMPLETED|1|4|16G|normal|gpu|60|train");
        assert_eq!(
            (
                first.job_id,
                first.label.as_str(),
                first.submit,
                first.start,
                first.end
            ),
            (
                5200,
                "5200",
                1_700_000_100,
                Some(1_700_000_100),
                Some(1_700_003_700)
            )
        );
        assert_eq!(
            (second.submit, second.gpus, second.min_runtime),
            (1_700_003_760, 2, Some(600))
        );
        assert_eq!(
            (
                first.account.as_str(),
                first.user.as_str(),
                first.state.as_str()
            ),
            ("a1", "alice", "REQUEUED")
        );
        // Never started, no Submit: nothing to charge, nothing to key by.
        assert_eq!(
            p.parse("5201|Unknown|Unknown|c|||bob|a1|PENDING|1|4|16G|normal|gpu|60|x"),
            Ok(RowOutcome::Skipped)
        );
        // Only what charging needs: JobID for the number, no User or State.
        let p = Parser::from_header_line("JobID|Account|AllocTRES|Start|End", utc()).unwrap();
        assert!(p.layout_note().unwrap().contains("no User"));
        let RowOutcome::Attempt(b) = p.parse("77|b2|gres/gpu=1|100|200").unwrap() else {
            panic!()
        };
        assert_eq!(
            (
                b.job_id,
                b.submit,
                b.user.as_str(),
                b.state.as_str(),
                b.partition
            ),
            (77, 100, "", "UNKNOWN", None)
        );
        // Without JobIDRaw an array task has no job number of its own.
        let e = p.parse("7100_3|b2|gres/gpu=1|100|200").unwrap_err();
        assert_eq!((e.job_id.as_str(), e.field), ("7100_3", "JobID"));
        assert!(e.reason.contains("add JobIDRaw"), "{e}");
    }

    #[test]
    fn bad_rows_name_job_and_field() {
        let e = parse("12|12|a1|alice|gpu|gres/gpu=x|100|110|200|00:01:30|COMPLETED|").unwrap_err();
        assert_eq!((e.job_id.as_str(), e.field), ("12", "AllocTRES"));
        let e =
            parse("13|13|a1|alice|gpu|gres/gpu=1|100|noon|200|00:01:30|COMPLETED|").unwrap_err();
        assert_eq!((e.job_id.as_str(), e.field), ("13", "Start"));
        assert!(parse("14|14|a1")
            .unwrap_err()
            .to_string()
            .contains("job 14"));
        let e = parse("15|15||alice|gpu|gres/gpu=1|100|110|200|00:01:30|COMPLETED|").unwrap_err();
        assert_eq!(e.field, "Account");
    }

    #[test]
    fn impossible_times_are_refused_not_charged() {
        // End before Start.
        let e =
            parse("16|16|a1|alice|gpu|gres/gpu=1|100|7200|3600|00:00:00|COMPLETED|").unwrap_err();
        assert_eq!((e.job_id.as_str(), e.field), ("16", "End"));
        assert!(e.reason.contains("before Start (7200)"), "{e}");
        // A far-future epoch: refused before any hourly bucket is made
        // (found by a newcomer: one such row made `sync --from` use 24 GiB).
        let e = parse(
            "17|17|a2|bob|gpu|gres/gpu=1|9999999999999|9999999999999|99999999999999|01:00:00|COMPLETED|",
        )
        .unwrap_err();
        assert_eq!(e.field, "Submit");
        assert!(e.reason.contains("not a plausible time"), "{e}");
        // Plausible times, but a 6-year attempt.
        let six_years = 6 * 365 * 86_400;
        let e = parse(&format!(
            "18|18|a2|bob|gpu|gres/gpu=1|1000|1000|{}|01:00:00|COMPLETED|",
            1000 + six_years
        ))
        .unwrap_err();
        assert!(e.reason.contains("more than 5 years"), "{e}");
        // The boundary: exactly 5 years is an attempt.
        assert!(parse(&format!(
            "19|19|a2|bob|gpu|gres/gpu=1|1000|1000|{}|01:00:00|COMPLETED|",
            1000 + MAX_PLAUSIBLE_RUN_SECS as i64
        ))
        .is_ok());
    }

    #[test]
    fn multibyte_alloc_tres_count_is_not_a_crash() {
        // Regression (fuzz target `sacct`): a TRES count ending in a
        // multi-byte character made `fairshare::tres::counts` slice inside it
        // and panic, killing `allot sync --from`.
        let a =
            attempt("17|17|a1|alice|gpu|gres/gpu=1,mem=7\u{e9}|100|110|200|00:01:30|COMPLETED|");
        assert_eq!(a.gpus, 1);
        assert!(!a.tres.iter().any(|(n, _)| n == "mem"));
    }

    #[test]
    fn admin_comment_token() {
        // What the record parser accepts and refuses: fairshare::record.
        let min = |admin: &str| {
            attempt(&format!(
                "16|16|a1|alice|gpu|gres/gpu=1|100|110|200|00:01:30|COMPLETED|{admin}"
            ))
            .min_runtime
        };
        assert_eq!(min("allot:min_runtime=1:30:00;y"), Some(5400));
        assert_eq!(
            min("min_runtime=90"),
            None,
            "the user's --comment key is not a record"
        );
        assert_eq!(min("allot:min_runtime=soon"), None);
        // A '|' inside the last field (AdminComment) is kept in it.
        let a = attempt("16|16|a1|alice|gpu|gres/gpu=1|100|110|200|00:01:30|COMPLETED|a|b allot:min_runtime=600");
        assert_eq!(a.min_runtime, Some(600));
    }
}
