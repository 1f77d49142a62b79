//! Workload traces: parsing text into jobs and node events. Pure functions
//! over `&str`; reading files is the caller's business.
//!
//! Formats (the header line decides, or the caller names one):
//! - **allot CSV** (documented in `docs/simulator.md`): header with at least
//!   `submit,duration,gpus,team`; optional `id,user,partition,min_runtime,
//!   resumable,kind,node,time_limit,submit_ms`. `kind` is `job` (default), `drain` or `fail`
//!   (a node event: node `node` out of service from `submit` for `duration`).
//!   Durations are whole seconds.
//! - **Philly** (`timestamp,duration,num_gpus,gpu_time,cluster`): the
//!   Pollux flattening of the Microsoft Philly trace; `cluster` (the virtual
//!   cluster) is the team.
//! - **Helios** (`job_id,user,vc,gpu_num,...,submit_time,...,duration`):
//!   `vc` is the team.
//! - **Acme** (InternLM's AcmeTrace: `job_id,user,node_num,gpu_num,cpu_num,
//!   type,state,submit_time,start_time,end_time,duration,...`): there is no
//!   `vc`; `user` is the team. Every state is replayed (a failed or
//!   cancelled job held its GPUs for its `duration`); one that never ran
//!   has a zero runtime and is skipped.
//! - **Alibaba 2023 pod list** (`name,...,num_gpu,gpu_milli,...,qos,...,
//!   creation_time,deletion_time,scheduled_time`): there is no tenant
//!   column, so the QoS class (`ls`, `be`, ...) stands in the team's place
//!   and [`Trace::classes_only`] says so (the workload maps classes onto
//!   the tree: `[sim.accounts]`, or the one leaf of a one-team tree);
//!   runtime = deletion - scheduled; pods never scheduled (or deleted before
//!   they were) are skipped, each reason counted; a fractional GPU counts as
//!   one GPU.
//!
//! Team names are lower-cased in every format, as Slurm stores account
//! names (`vcAB` in a Helios trace is the account `vcab`).
//!
//! Times: a time field is either a number of seconds (epoch seconds, or
//! seconds from an arbitrary origin) or a date-time `YYYY-MM-DD HH:MM:SS`
//! (also with `T`), read as a civil time without zone, unless a UTC offset
//! follows it (`2023-03-01 08:00:00+08:00`, `+0800`, `-05:00`, `Z`: the
//! Acme traces' form), which is honoured: the time is read as UTC. Every
//! submit time of one trace must use the same clock: mixing date-times with
//! numbers, date-times with an offset with ones without, or epoch seconds
//! (after 2000-01-01) with small relative ones, is rejected.
//! Times are normalised so that the first submission is 0.
//!
//! Rows that cannot be read are reported with their line number (1-based,
//! the header is line 1) in [`Trace::errors`]; jobs with no GPUs are
//! counted in [`Trace::skipped`].

use std::fmt;

mod rows;
mod time;

pub use rows::split_fields;
use rows::{Columns, Raw, RowReader};
pub use time::parse_datetime;
use time::Clock;

/// Trace formats [`parse`] understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TraceFormat {
    /// The allot CSV.
    Allot,
    /// Microsoft Philly (Pollux CSV).
    Philly,
    /// Helios CSV (the tenant is `vc`).
    Helios,
    /// InternLM's AcmeTrace CSV (no `vc`: the tenant is `user`).
    Acme,
    /// Alibaba cluster-trace-gpu-v2023 pod list.
    Alibaba,
}

impl TraceFormat {
    /// Parses a format name (`allot`, `philly`, `helios`, `acme`, `alibaba`).
    pub fn from_name(name: &str) -> Option<TraceFormat> {
        match name {
            "allot" => Some(TraceFormat::Allot),
            "philly" => Some(TraceFormat::Philly),
            "helios" => Some(TraceFormat::Helios),
            "acme" => Some(TraceFormat::Acme),
            "alibaba" => Some(TraceFormat::Alibaba),
            _ => None,
        }
    }

    /// Its name, as `--format` takes it.
    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::Allot => "allot",
            TraceFormat::Philly => "philly",
            TraceFormat::Helios => "helios",
            TraceFormat::Acme => "acme",
            TraceFormat::Alibaba => "alibaba",
        }
    }

    /// Recognises a format from its header's column names.
    pub fn detect(columns: &[&str]) -> Option<TraceFormat> {
        let has = |c: &str| columns.contains(&c);
        if has("timestamp") && has("num_gpus") && has("cluster") {
            Some(TraceFormat::Philly)
        } else if has("vc") && has("gpu_num") && has("submit_time") {
            Some(TraceFormat::Helios)
        } else if has("user") && has("gpu_num") && has("submit_time") && has("duration") {
            Some(TraceFormat::Acme)
        } else if has("creation_time") && has("num_gpu") && has("deletion_time") {
            Some(TraceFormat::Alibaba)
        } else if has("submit") && has("duration") && has("gpus") && has("team") {
            Some(TraceFormat::Allot)
        } else {
            None
        }
    }
}

/// One job of a trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceJob {
    /// Id from the trace, else the line number.
    pub id: u64,
    /// Team: the Slurm account the job is charged to.
    pub team: String,
    /// Partition, if the trace has one (contract rules may match it).
    pub partition: Option<String>,
    /// Submit time, seconds since the trace's first submission.
    pub submit: u64,
    /// Run time the job needs, seconds (> 0).
    pub duration: u64,
    /// GPUs (> 0).
    pub gpus: u32,
    /// Minimum runtime recorded in the trace, seconds, if any.
    pub min_runtime: Option<u64>,
    /// Whether it continues after a requeue, if the trace says.
    pub resumable: Option<bool>,
    /// Its time limit, seconds, if the trace records one (the allot CSV's
    /// `time_limit` column): the short band and the backfill's plans use
    /// it. `None`: the runtime stands for it.
    pub time_limit: Option<u64>,
    /// Milliseconds into its submit second (0-999), if the trace records
    /// them (the allot CSV's `submit_ms` column): where in that second it
    /// arrived, which the simulator compares with slurmctld's passes
    /// (`[sim] pass_miss_ms`, `main_phase_ms`). `None`: a seeded phase.
    pub submit_ms: Option<u16>,
    /// Line in the trace text (1-based).
    pub line: u32,
}

impl TraceJob {
    /// Job `id` of `team`, line `id` of its trace, with no partition,
    /// recorded contract or resumability of its own (synthetic traces,
    /// tests and benchmarks).
    pub fn plain(
        id: u64,
        team: impl Into<String>,
        submit: u64,
        duration: u64,
        gpus: u32,
    ) -> TraceJob {
        TraceJob {
            id,
            team: team.into(),
            partition: None,
            submit,
            duration,
            gpus,
            min_runtime: None,
            resumable: None,
            time_limit: None,
            submit_ms: None,
            line: id as u32,
        }
    }
}

/// What happens to a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeEventKind {
    /// Drained: no new jobs; running jobs are requeued as they reach their
    /// minimum runtime (allot) or finish (baselines).
    Drain,
    /// Failed: running jobs are killed and requeued at once.
    Fail,
}

/// A node out of service for a while.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct NodeEvent {
    /// Node index, 0-based.
    pub node: u32,
    /// Start, seconds since the trace's first submission.
    pub at: u64,
    /// How long, seconds.
    pub duration: u64,
    /// Drain or failure.
    pub kind: NodeEventKind,
    /// Milliseconds into its start second, if the trace records them (the
    /// allot CSV's `submit_ms`): with `[sim] sched_interval`, where it falls
    /// among that second's passes. `None`: before them.
    pub at_ms: Option<u16>,
}

/// A row that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowError {
    /// Line number (1-based; the header is line 1).
    pub line: u32,
    /// Column involved, if one.
    pub column: Option<String>,
    /// What is wrong and what to write.
    pub message: String,
}

impl fmt::Display for RowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.column {
            Some(c) => write!(f, "line {}: column `{c}`: {}", self.line, self.message),
            None => write!(f, "line {}: {}", self.line, self.message),
        }
    }
}

/// A trace that cannot be used at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    /// Empty text.
    #[error("the trace is empty; it needs a header line and at least one job")]
    Empty,
    /// Unrecognised header.
    #[error("unrecognised header {header:?}; an allot CSV needs the columns submit,duration,gpus,team (see docs/simulator.md), or name the format (philly, helios, acme, alibaba, sacct)")]
    UnknownFormat {
        /// The header line.
        header: String,
    },
    /// A required column is missing.
    #[error("the {format:?} header lacks column `{column}`")]
    MissingColumn {
        /// Format.
        format: TraceFormat,
        /// The column.
        column: &'static str,
    },
    /// The submissions span more than [`MAX_TRACE_SPAN`].
    #[error("line {line} submits {years} years after the first job; a trace may span at most 10 years: fix or remove that row")]
    TooLong {
        /// The latest submission's line.
        line: u32,
        /// Its distance from the first submission, whole years.
        years: i64,
    },
    /// Different clocks in one trace.
    #[error("mixed clocks: line {line} gives {found} but line {first_line} gave {first}; every submit time of a trace must be a date-time, or all epoch seconds, or all relative seconds")]
    MixedClocks {
        /// The offending line.
        line: u32,
        /// Its clock.
        found: &'static str,
        /// The first data line.
        first_line: u32,
        /// Its clock.
        first: &'static str,
    },
}

pub use fairshare::duration::{LATEST_PLAUSIBLE_TIME, MAX_PLAUSIBLE_RUN_SECS};
/// The longest a trace may span, first to last submission: 10 x 365 days, seconds.
pub const MAX_TRACE_SPAN: i64 = 10 * 365 * 86_400;

/// A parsed trace, sorted by submit time (then line), times normalised.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    /// Jobs, by submit time.
    pub jobs: Vec<TraceJob>,
    /// Node drains and failures, by start time.
    pub events: Vec<NodeEvent>,
    /// The first submission in the trace's own clock (epoch seconds, or
    /// the raw value of a relative clock); add it to get original times.
    pub origin: i64,
    /// Rows that could not be read.
    pub errors: Vec<RowError>,
    /// Rows skipped on purpose, with why (e.g. no GPUs, never scheduled).
    pub skipped: Vec<(String, u64)>,
    /// True when the trace has no tenant column and its jobs' `team` is a
    /// class of service instead (the Alibaba pod list's `qos`).
    pub classes_only: bool,
    /// The CSV format it was read as (named or detected); `None` for a
    /// trace built from jobs ([`from_jobs`]: sacct, the ledger, tests).
    pub format: Option<TraceFormat>,
}

/// Parses a trace. `format` = `None` detects it from the header.
///
/// # Errors
/// [`TraceError`] for an empty text, an unknown header, a missing column or
/// mixed clocks. Unreadable rows do not fail the parse: they are listed in
/// [`Trace::errors`] with their line numbers.
pub fn parse(text: &str, format: Option<TraceFormat>) -> Result<Trace, TraceError> {
    // A spreadsheet's UTF-8 byte-order mark is not part of the header.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i as u32 + 1, l.trim_end_matches('\r')))
        .filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'));
    let (_, header) = lines.next().ok_or(TraceError::Empty)?;
    let names: Vec<String> = split_fields(header, ',')
        .iter()
        .map(|c| c.trim().to_ascii_lowercase())
        .collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let format = match format {
        Some(f) => f,
        None => TraceFormat::detect(&refs).ok_or_else(|| TraceError::UnknownFormat {
            header: header.to_string(),
        })?,
    };
    let cols = Columns { names };
    let reader = RowReader::new(format, &cols)?;
    let mut trace = Trace {
        classes_only: format == TraceFormat::Alibaba,
        format: Some(format),
        ..Trace::default()
    };
    let mut raws = Vec::new();
    let mut first_clock: Option<(Clock, u32)> = None;
    for (line, text) in lines {
        let fields = split_fields(text, ',');
        match reader.read(line, &fields) {
            Ok((raw, clock)) => {
                if let Some(clock) = clock {
                    match first_clock {
                        None => first_clock = Some((clock, line)),
                        Some((c, first_line)) if c != clock => {
                            return Err(TraceError::MixedClocks {
                                line,
                                found: clock.name(),
                                first_line,
                                first: c.name(),
                            })
                        }
                        _ => {}
                    }
                }
                raws.push(raw);
            }
            Err(e) => trace.errors.push(e),
        }
    }
    let origin = raws
        .iter()
        .filter_map(|r| match r {
            Raw::Job(_, t) => Some(*t),
            _ => None,
        })
        .min()
        .unwrap_or(0);
    // One row from another century would stretch the replay (and its
    // hourly metrics) over centuries: refuse a trace longer than 10 years.
    if let Some((line, t)) = raws
        .iter()
        .filter_map(|r| match r {
            Raw::Job(j, t) => Some((j.line, *t)),
            _ => None,
        })
        .max_by_key(|(_, t)| *t)
    {
        if t - origin > MAX_TRACE_SPAN {
            return Err(TraceError::TooLong {
                line,
                years: (t - origin) / (365 * 86_400),
            });
        }
    }
    // allot's CSV names each job by its id: a second row with an id already
    // given would be a second job under the same name in every log.
    if format == TraceFormat::Allot {
        let mut first: std::collections::HashMap<u64, u32> = Default::default();
        raws.retain(|r| match r {
            Raw::Job(j, _) => match first.get(&j.id) {
                Some(&line) => {
                    trace.errors.push(RowError {
                        line: j.line,
                        column: Some("id".into()),
                        message: format!(
                            "job id {} is already line {line}'s; each row is one job: give it its own id, or leave the column empty to number the jobs by their line",
                            j.id
                        ),
                    });
                    false
                }
                None => {
                    first.insert(j.id, j.line);
                    true
                }
            },
            _ => true,
        });
    }
    let mut skipped: std::collections::BTreeMap<&'static str, u64> = Default::default();
    for raw in raws {
        match raw {
            Raw::Job(mut j, t) => {
                j.submit = (t - origin).max(0) as u64;
                trace.jobs.push(j);
            }
            Raw::Event(mut e, t) => {
                e.at = (t - origin).max(0) as u64;
                trace.events.push(e);
            }
            Raw::Skip(why) => *skipped.entry(why).or_default() += 1,
        }
    }
    trace.jobs.sort_by_key(|j| (j.submit, j.line));
    trace.events.sort_by_key(|e| (e.at, e.node));
    trace.origin = origin;
    trace.skipped = skipped
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    Ok(trace)
}

/// Builds a trace from jobs made elsewhere (sacct, the ledger, tests):
/// sorts them and normalises submit times (epoch seconds or any clock) so
/// that the first is 0.
pub fn from_jobs(mut jobs: Vec<TraceJob>, events: Vec<NodeEvent>) -> Trace {
    let origin = jobs.iter().map(|j| j.submit).min().unwrap_or(0);
    for j in &mut jobs {
        j.submit -= origin;
    }
    let mut events = events;
    for e in &mut events {
        e.at = e.at.saturating_sub(origin);
    }
    jobs.sort_by_key(|j| (j.submit, j.line, j.id));
    events.sort_by_key(|e| (e.at, e.node));
    Trace {
        jobs,
        events,
        origin: origin as i64,
        errors: Vec::new(),
        skipped: Vec::new(),
        classes_only: false,
        format: None,
    }
}

#[cfg(test)]
mod tests;
