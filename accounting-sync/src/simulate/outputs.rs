//! The log files of `allot sim`: `--preemptions`, `--priorities` and
//! `--attempts`, one JSON object a line.
//!
//! They are created (truncated) once the trace and the config have been
//! read and before the replay, so a path that cannot be written fails in
//! seconds instead of after a long replay, and no file is left half
//! written because another could not be created. Two logs on one path, or
//! a log on the trace or the config, are refused: the second would
//! overwrite the first, or the input, without a word.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use allot_sim::{self as sim, SimReport};
use anyhow::{bail, Context};
use serde::Serialize;

use super::{run_label, Args, RunOut};

/// Which log a file is: what it holds, and the option that asks for it.
#[derive(Clone, Copy)]
enum Kind {
    Preemptions,
    Priorities,
    Attempts,
}

impl Kind {
    /// The option that asks for this log (`--attempts`).
    fn flag(self) -> &'static str {
        match self {
            Kind::Preemptions => "--preemptions",
            Kind::Priorities => "--priorities",
            Kind::Attempts => "--attempts",
        }
    }
}

/// One log file, created.
struct Log {
    kind: Kind,
    path: PathBuf,
    file: File,
}

/// The log files the command line asked for.
pub(super) struct Logs(Vec<Log>);

/// `path` as it will be written: absolute, through symbolic links where
/// its directory exists (for comparing two paths).
fn resolved(path: &Path) -> PathBuf {
    if let Ok(p) = std::fs::canonicalize(path) {
        return p;
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match (std::fs::canonicalize(dir), path.file_name()) {
        (Ok(d), Some(name)) => d.join(name),
        _ => path.to_path_buf(),
    }
}

impl Logs {
    /// Creates every log file `args` names. Errors: a log on the same path
    /// as another log, the trace or the config; a file that cannot be
    /// created (each names the option, the file and the fix).
    pub fn create(args: &Args) -> anyhow::Result<Logs> {
        let asked: Vec<(Kind, &PathBuf)> = [
            (Kind::Preemptions, &args.preemptions),
            (Kind::Priorities, &args.priorities),
            (Kind::Attempts, &args.attempts),
        ]
        .into_iter()
        .filter_map(|(k, p)| p.as_ref().map(|p| (k, p)))
        .collect();
        let inputs = [
            ("--trace", args.trace.clone()),
            ("--config", args.config.path()),
        ];
        let mut taken: Vec<(&str, PathBuf)> =
            inputs.iter().map(|(f, p)| (*f, resolved(p))).collect();
        for &(kind, path) in &asked {
            let flag = kind.flag();
            let r = resolved(path);
            if let Some((other, _)) = taken.iter().find(|(_, t)| *t == r) {
                bail!(
                    "{flag} {}: {other} is that file too, and the log would overwrite it; give {flag} a file of its own",
                    path.display()
                );
            }
            taken.push((flag, r));
        }
        // Opened without truncating: if one cannot be opened, no file
        // named before it has lost its contents, and those this call
        // created are removed again.
        let mut opened: Vec<Log> = Vec::new();
        let mut created: Vec<PathBuf> = Vec::new();
        for &(kind, path) in &asked {
            let flag = kind.flag();
            let existed = path.exists();
            let file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(path);
            match file {
                Ok(file) => {
                    if !existed {
                        created.push(path.clone());
                    }
                    opened.push(Log {
                        kind,
                        path: path.clone(),
                        file,
                    });
                }
                Err(e) => {
                    for p in &created {
                        let _ = std::fs::remove_file(p);
                    }
                    return Err(e).with_context(|| {
                        format!(
                            "{flag} {}: cannot create it; give a file in a directory you can write",
                            path.display()
                        )
                    });
                }
            }
        }
        // A regular file is emptied; a device or pipe (/dev/stdout) is not.
        for log in &opened {
            let regular = log.file.metadata().is_ok_and(|m| m.is_file());
            if regular {
                log.file.set_len(0).with_context(|| {
                    format!(
                        "{} {}: cannot empty it",
                        log.kind.flag(),
                        log.path.display()
                    )
                })?;
            }
        }
        Ok(Logs(opened))
    }

    /// Writes every log of the runs `outs` (teams named from `teams`).
    /// Errors: a write fails (naming the option and the file).
    pub fn write(self, outs: &[RunOut], teams: &[sim::Team]) -> anyhow::Result<()> {
        for log in self.0 {
            match log.kind {
                Kind::Preemptions => write_preemptions(log, outs, teams)?,
                // Every allot run's submit-time priorities.
                Kind::Priorities => {
                    write_team_lines(log, outs, teams, |r| &r.submit_priorities, |p| p.team)?
                }
                Kind::Attempts => {
                    write_team_lines(log, outs, teams, |r| &r.attempt_log, |a| a.team)?
                }
            }
        }
        Ok(())
    }
}

/// One line of `--preemptions`: the run's label, the record, its teams'
/// names.
#[derive(Serialize)]
struct PreemptionLine<'a> {
    run: String,
    #[serde(flatten)]
    record: &'a sim::PreemptionRecord,
    preemptor_team_name: &'a str,
    victim_team_name: &'a str,
}

/// Writes every run's preemptions to `log`.
fn write_preemptions(log: Log, outs: &[RunOut], teams: &[sim::Team]) -> anyhow::Result<()> {
    let name = |t: u32| teams.get(t as usize).map_or("?", |t| t.name.as_str());
    let lines = outs.iter().flat_map(|o| {
        let run = run_label(o);
        o.report.preemption_log.iter().map(move |p| PreemptionLine {
            run: run.clone(),
            record: p,
            preemptor_team_name: name(p.preemptor_team),
            victim_team_name: name(p.victim_team),
        })
    });
    write_json_lines(log, lines)
}

/// One line of `--priorities` or `--attempts`: the run's label, the
/// record, its team's name.
#[derive(Serialize)]
struct TeamLine<'a, R> {
    run: String,
    #[serde(flatten)]
    record: &'a R,
    team_name: &'a str,
}

/// Writes the records `log_of` picks from every run's report to `log`,
/// each with its team's name (`team`: the record's team index).
fn write_team_lines<R: Serialize>(
    log: Log,
    outs: &[RunOut],
    teams: &[sim::Team],
    log_of: fn(&SimReport) -> &Vec<R>,
    team: fn(&R) -> u32,
) -> anyhow::Result<()> {
    let lines = outs.iter().flat_map(|o| {
        let run = run_label(o);
        log_of(&o.report).iter().map(move |r| TeamLine {
            run: run.clone(),
            record: r,
            team_name: teams.get(team(r) as usize).map_or("?", |t| t.name.as_str()),
        })
    });
    write_json_lines(log, lines)
}

/// Writes `lines` to `log`, one JSON object a line. Errors: a write
/// fails (naming the option and the file).
fn write_json_lines<T: Serialize>(log: Log, lines: impl Iterator<Item = T>) -> anyhow::Result<()> {
    let Log { kind, path, file } = log;
    let flag = kind.flag();
    let context = || format!("{flag} {}: cannot write it", path.display());
    let mut w = BufWriter::new(file);
    for line in lines {
        serde_json::to_writer(&mut w, &line).with_context(context)?;
        w.write_all(b"\n").with_context(context)?;
    }
    w.flush().with_context(context)
}
