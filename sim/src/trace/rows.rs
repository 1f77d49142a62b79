//! One row of a CSV trace: splitting the line, finding each format's
//! columns, and reading a job, a node event or a row skipped on purpose.

use std::borrow::Cow;

use super::time::{parse_time, Clock};
use super::{
    NodeEvent, NodeEventKind, RowError, TraceError, TraceFormat, TraceJob, LATEST_PLAUSIBLE_TIME,
    MAX_PLAUSIBLE_RUN_SECS,
};

/// Splits one CSV line (RFC 4180 quoting; `sep` is the separator).
pub fn split_fields(line: &str, sep: char) -> Vec<Cow<'_, str>> {
    if !line.contains('"') {
        return line.split(sep).map(Cow::Borrowed).collect();
    }
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            c if c == sep && !quoted => out.push(Cow::Owned(std::mem::take(&mut cur))),
            c => cur.push(c),
        }
    }
    out.push(Cow::Owned(cur));
    out
}

pub(super) struct Columns {
    pub(super) names: Vec<String>,
}

impl Columns {
    fn find(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }
    fn need(&self, format: TraceFormat, name: &'static str) -> Result<usize, TraceError> {
        self.find(name).ok_or(TraceError::MissingColumn {
            format,
            column: name,
        })
    }
}

/// A job or event before time normalisation.
pub(super) enum Raw {
    Job(TraceJob, i64),
    Event(NodeEvent, i64),
    Skip(&'static str),
}

pub(super) struct RowReader {
    format: TraceFormat,
    team: usize,
    submit: usize,
    duration: Option<usize>,
    gpus: usize,
    id: Option<usize>,
    partition: Option<usize>,
    min_runtime: Option<usize>,
    time_limit: Option<usize>,
    submit_ms: Option<usize>,
    resumable: Option<usize>,
    kind: Option<usize>,
    node: Option<usize>,
    // Alibaba: scheduled / deletion times, fractional GPUs.
    scheduled: Option<usize>,
    deletion: Option<usize>,
    names: Vec<String>,
}

impl RowReader {
    pub(super) fn new(format: TraceFormat, c: &Columns) -> Result<RowReader, TraceError> {
        use TraceFormat::*;
        let (team, submit, gpus) = match format {
            Allot => ("team", "submit", "gpus"),
            Philly => ("cluster", "timestamp", "num_gpus"),
            Helios => ("vc", "submit_time", "gpu_num"),
            Acme => ("user", "submit_time", "gpu_num"),
            Alibaba => ("qos", "creation_time", "num_gpu"),
        };
        let duration = match format {
            Alibaba => None,
            _ => Some(c.need(format, "duration")?),
        };
        let (scheduled, deletion) = match format {
            Alibaba => (
                Some(c.need(format, "scheduled_time")?),
                Some(c.need(format, "deletion_time")?),
            ),
            _ => (None, None),
        };
        Ok(RowReader {
            format,
            team: c.need(format, team)?,
            submit: c.need(format, submit)?,
            gpus: c.need(format, gpus)?,
            duration,
            id: c.find(match format {
                Allot => "id",
                Helios | Acme => "job_id",
                Alibaba => "name",
                Philly => "\0",
            }),
            partition: c.find("partition"),
            min_runtime: c.find("min_runtime"),
            time_limit: c.find("time_limit"),
            submit_ms: c.find("submit_ms"),
            resumable: c.find("resumable"),
            kind: c.find("kind"),
            node: c.find("node"),
            scheduled,
            deletion,
            names: c.names.clone(),
        })
    }

    /// Reads one data row (`line`, 1-based), already split into fields.
    pub(super) fn read(
        &self,
        line: u32,
        f: &[Cow<'_, str>],
    ) -> Result<(Raw, Option<Clock>), RowError> {
        if f.len() < self.names.len() {
            return Err(RowError {
                line,
                column: None,
                message: format!(
                    "{} fields, the header has {}; quote fields that contain commas",
                    f.len(),
                    self.names.len()
                ),
            });
        }
        let row = Row { r: self, line, f };
        let (submit, clock) = row.submit()?;
        let duration = match row.duration()? {
            Ok(d) => d,
            Err(skip) => return Ok((Raw::Skip(skip), Some(clock))),
        };
        let kind = row.opt(self.kind).unwrap_or("job");
        if self.format == TraceFormat::Allot && kind != "job" {
            let event = row.node_event(kind, duration)?;
            return Ok((Raw::Event(event, submit), Some(clock)));
        }
        let gpus = row.gpus()?;
        if gpus == 0 {
            return Ok((Raw::Skip("no GPUs"), Some(clock)));
        }
        if duration == 0 {
            return Ok((Raw::Skip("zero runtime"), Some(clock)));
        }
        let job = row.job(gpus, duration)?;
        Ok((Raw::Job(job, submit), Some(clock)))
    }
}

/// One data row being read: its fields and the reader's columns.
struct Row<'a, 'f> {
    r: &'a RowReader,
    line: u32,
    f: &'a [Cow<'f, str>],
}

impl Row<'_, '_> {
    fn err(&self, col: usize, message: String) -> RowError {
        RowError {
            line: self.line,
            column: Some(self.r.names[col].clone()),
            message,
        }
    }

    fn get(&self, i: usize) -> &str {
        self.f[i].trim()
    }

    fn opt(&self, i: Option<usize>) -> Option<&str> {
        i.map(|i| self.f[i].trim()).filter(|s| !s.is_empty())
    }

    /// A whole number of seconds >= 0 (fractions rounded).
    fn secs(&self, i: usize) -> Result<u64, RowError> {
        let s = self.get(i);
        match s.parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => Ok(v.round() as u64),
            _ => Err(self.err(
                i,
                format!("{s:?} is not a number of seconds; write a whole number >= 0 such as 3600"),
            )),
        }
    }

    /// The submit time and its clock; refused after 2199.
    fn submit(&self) -> Result<(i64, Clock), RowError> {
        let col = self.r.submit;
        let (submit, clock) = parse_time(self.get(col)).ok_or_else(|| {
            self.err(
                col,
                format!(
                    "{:?} is not a time; write seconds (e.g. 1506638472) or YYYY-MM-DD HH:MM:SS, optionally with a UTC offset (+08:00)",
                    self.get(col)
                ),
            )
        })?;
        if submit >= LATEST_PLAUSIBLE_TIME {
            return Err(self.err(
                col,
                format!(
                    "{:?} is after 2199; fix the row or remove it",
                    self.get(col)
                ),
            ));
        }
        Ok((submit, clock))
    }

    /// Run time, seconds: the `duration` column, or (Alibaba) deletion -
    /// scheduled; `Err(why)` for a pod to skip (never scheduled, or deleted
    /// before it was). Refused over 5 years.
    fn duration(&self) -> Result<Result<u64, &'static str>, RowError> {
        let r = self.r;
        let duration = match (r.duration, r.scheduled, r.deletion) {
            (Some(d), _, _) => self.secs(d)?,
            (None, Some(s), Some(d)) => {
                if self.get(s).is_empty() {
                    return Ok(Err("never scheduled"));
                }
                let start = self.secs(s)?;
                let end = self.secs(d)?;
                if end < start {
                    return Ok(Err("deleted before it was scheduled"));
                }
                end - start
            }
            _ => unreachable!("every format has a duration"),
        };
        if duration > MAX_PLAUSIBLE_RUN_SECS {
            return Err(RowError {
                line: self.line,
                column: Some(r.names[r.duration.or(r.deletion).unwrap_or(0)].clone()),
                message: format!(
                    "a job of {} s is longer than 5 years; fix the row or remove it",
                    // The cell as written where it saturated the count (1e30).
                    match r.duration {
                        Some(c) if duration == u64::MAX => self.get(c).to_string(),
                        _ => duration.to_string(),
                    }
                ),
            });
        }
        Ok(Ok(duration))
    }

    /// An allot CSV `drain` or `fail` row (its time is set by the caller).
    fn node_event(&self, kind: &str, duration: u64) -> Result<NodeEvent, RowError> {
        let kind = match kind {
            "drain" => NodeEventKind::Drain,
            "fail" => NodeEventKind::Fail,
            other => {
                return Err(self.err(
                    self.r.kind.unwrap_or(0),
                    format!("{other:?} is not a kind; write job, drain or fail"),
                ))
            }
        };
        let node_col = self.r.node.ok_or(RowError {
            line: self.line,
            column: Some("node".into()),
            message: "a drain or fail row needs a `node` column (node index from 0)".into(),
        })?;
        let node = self.get(node_col).parse::<u32>().map_err(|_| {
            self.err(
                node_col,
                format!(
                    "{:?} is not a node index; write 0, 1, ...",
                    self.get(node_col)
                ),
            )
        })?;
        // Node events do not set the clock: a trace of events only is odd
        // but its times are still relative to the first job.
        Ok(NodeEvent {
            node,
            at: 0,
            duration,
            kind,
            at_ms: self.submit_ms()?,
        })
    }

    /// The optional `submit_ms` column: 0-999, or empty.
    fn submit_ms(&self) -> Result<Option<u16>, RowError> {
        let Some(i) = self
            .r
            .submit_ms
            .filter(|_| self.opt(self.r.submit_ms).is_some())
        else {
            return Ok(None);
        };
        match self.get(i).parse::<u16>() {
            Ok(ms) if ms < 1000 => Ok(Some(ms)),
            _ => Err(self.err(
                i,
                format!(
                    "{:?} is not a millisecond of a second; write a whole number 0-999 (where in its submit second the job arrived) or leave it empty",
                    self.get(i)
                ),
            )),
        }
    }

    /// GPUs, rounded up; an Alibaba pod with a fraction of a GPU
    /// (`gpu_milli`) needs one.
    fn gpus(&self) -> Result<u32, RowError> {
        let col = self.r.gpus;
        let text = self.get(col);
        let mut gpus: u32 = match text.parse::<f64>() {
            // allot's CSV counts whole GPUs, as Slurm allocates them; other
            // traces' shares of a GPU (Alibaba's 0.5) hold a whole one.
            Ok(v)
                if self.r.format == TraceFormat::Allot
                    && v.is_finite()
                    && v > 0.0
                    && v.fract() != 0.0 =>
            {
                return Err(self.err(
                    col,
                    format!(
                        "{text:?} is not a whole GPU count; a job holds whole GPUs: write {} or {}",
                        v.floor(),
                        v.ceil()
                    ),
                ))
            }
            Ok(v) if v.is_finite() && v >= 0.0 && v <= f64::from(u32::MAX) => v.ceil() as u32,
            _ => {
                return Err(self.err(
                    col,
                    format!("{text:?} is not a GPU count; write a whole number such as 4"),
                ))
            }
        };
        if self.r.format == TraceFormat::Alibaba && gpus == 0 {
            let milli = self
                .r
                .names
                .iter()
                .position(|n| n == "gpu_milli")
                .map(|i| self.get(i));
            if milli.is_some_and(|m| m.parse::<u64>().is_ok_and(|m| m > 0)) {
                gpus = 1;
            }
        }
        Ok(gpus)
    }

    /// The job's other fields (its submit time is set by the caller).
    fn job(&self, gpus: u32, duration: u64) -> Result<TraceJob, RowError> {
        let r = self.r;
        let team = self.get(r.team);
        if team.is_empty() {
            return Err(self.err(
                r.team,
                "empty team; every job needs the account it is charged to".into(),
            ));
        }
        // Slurm lower-cases account names (`sacctmgr add account vcAB`
        // makes `vcab`): match a trace's tenants as Slurm would store them.
        let team = team.to_ascii_lowercase();
        let line = self.line;
        let id = match self.opt(r.id) {
            None => u64::from(line),
            // allot's own CSV: the id is the job's, whole, as its logs
            // (--attempts, --preemptions) name it; a mangled one would merge
            // two jobs there.
            Some(s) if r.format == TraceFormat::Allot => match s.parse::<u64>() {
                Ok(n) => n,
                Err(_) => {
                    return Err(self.err(
                        r.id.unwrap_or(0),
                        format!("{s:?} is not a job id; write a whole number (e.g. 4242), or leave the column empty to number the jobs by their line"),
                    ))
                }
            },
            // Other traces' ids carry prefixes (Helios `job-1234`): their digits.
            Some(s) => s
                .trim_start_matches(|c: char| !c.is_ascii_digit())
                .split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|d| d.parse().ok())
                .unwrap_or(u64::from(line)),
        };
        let min_runtime = match r.min_runtime.filter(|_| self.opt(r.min_runtime).is_some()) {
            Some(i) => Some(self.secs(i)?),
            None => None,
        };
        let time_limit = match r.time_limit.filter(|_| self.opt(r.time_limit).is_some()) {
            Some(i) => match self.secs(i)? {
                0 => {
                    return Err(self.err(
                        i,
                        "a time limit of 0 s would let no job run; write the limit in seconds (e.g. 3600) or leave it empty"
                            .into(),
                    ))
                }
                t => Some(t),
            },
            None => None,
        };
        let submit_ms = self.submit_ms()?;
        let resumable = match self.opt(r.resumable) {
            None => None,
            Some("true" | "1" | "yes") => Some(true),
            Some("false" | "0" | "no") => Some(false),
            Some(other) => {
                return Err(self.err(
                    r.resumable.unwrap_or(0),
                    format!("{other:?} is not a boolean; write true or false"),
                ))
            }
        };
        Ok(TraceJob {
            id,
            team,
            partition: self.opt(r.partition).map(str::to_string),
            submit: 0,
            duration,
            gpus,
            min_runtime,
            resumable,
            time_limit,
            submit_ms,
            line,
        })
    }
}
