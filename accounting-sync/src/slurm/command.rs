//! The one runner of Slurm commands: every `squeue`, `sacct`, `sinfo`,
//! `scontrol` and `sacctmgr` that allot starts goes through [`Slurm`].
//!
//! - **Timeouts.** Each run has one ([`RPC_TIMEOUT`] unless the caller
//!   sets another: sacct's is [`super::sacct::timeout`]). A command still
//!   running then is killed with its whole process group (it runs in a
//!   group of its own, so a wrapper script's children die too and release
//!   the output pipe), and the run fails saying so. Slurm's clients retry
//!   an unreachable daemon for a minute or more; a sidecar must not stall
//!   behind one.
//! - **Output.** Read whole ([`Slurm::output`]) or streamed as it comes
//!   ([`Slurm::stream`]: sacct's rows are written while sacct still runs;
//!   squeue's JSON is never held whole).
//! - **Errors**, one style: `cannot run PROGRAM: WHY; is ...`, `PROGRAM
//!   ARGS failed (STATUS): STDERR; is DAEMON up ...`, `PROGRAM ARGS did
//!   not finish within N s and was killed; is DAEMON answering?`.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context};

/// How long a command asking slurmctld or slurmdbd may take unless the
/// caller says otherwise: five minutes, far above a healthy answer (under
/// a second) and above Slurm's own retries of an unreachable daemon.
pub const RPC_TIMEOUT: Duration = Duration::from_secs(300);

/// One Slurm command to run: its program (`sacct`, or a path given by the
/// user), arguments, environment and timeout.
#[derive(Debug, Clone)]
pub struct Slurm {
    program: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    timeout: Duration,
    note: Option<String>,
}

impl Slurm {
    /// `program` with no arguments yet and the [`RPC_TIMEOUT`].
    pub fn new(program: impl Into<String>) -> Slurm {
        Slurm {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            timeout: RPC_TIMEOUT,
            note: None,
        }
    }

    /// Adds one argument.
    pub fn arg(mut self, a: impl Into<String>) -> Slurm {
        self.args.push(a.into());
        self
    }

    /// Adds arguments.
    pub fn args<I, S>(mut self, args: I) -> Slurm
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Times as epoch seconds (`SLURM_TIME_FORMAT=%s`): no time zone to
    /// guess.
    pub fn epoch_times(mut self) -> Slurm {
        self.env.push(("SLURM_TIME_FORMAT".into(), "%s".into()));
        self
    }

    /// Another timeout than [`RPC_TIMEOUT`].
    pub fn timeout(mut self, t: Duration) -> Slurm {
        self.timeout = t;
        self
    }

    /// A note added to the message of a run that timed out (what sets the
    /// limit).
    pub fn timeout_note(mut self, note: impl Into<String>) -> Slurm {
        self.note = Some(note.into());
        self
    }

    /// The program, as given.
    pub fn program(&self) -> &str {
        &self.program
    }

    /// The daemon this program asks, for the messages.
    fn daemon(&self) -> &'static str {
        let name = self.program.rsplit('/').next().unwrap_or("");
        if name.contains("sacct") {
            "slurmdbd"
        } else {
            "slurmctld"
        }
    }

    /// The command line for a message; a long one (sacct -j with hundreds
    /// of ids) is cut.
    fn shown(&self) -> String {
        let mut s = self.program.clone();
        for a in &self.args {
            s.push(' ');
            s.push_str(a);
        }
        if s.chars().count() > 160 {
            s = s.chars().take(157).collect::<String>() + "...";
        }
        s
    }

    /// Its standard output, whole.
    ///
    /// # Errors
    /// It cannot start, fails, or outlives its timeout: the message names
    /// the command and gives its standard error.
    pub fn output(&self) -> anyhow::Result<String> {
        self.stream(|r| {
            let mut s = String::new();
            r.read_to_string(&mut s).map(|_| s)
        })?
        .with_context(|| format!("reading the output of {}", self.program))
    }

    /// Runs it and hands its standard output to `read` as it comes; the
    /// run is checked once `read` returns (whatever `read` returns is
    /// given back only when the command succeeded).
    ///
    /// # Errors
    /// As [`Slurm::output`].
    pub fn stream<T>(&self, read: impl FnOnce(&mut dyn BufRead) -> T) -> anyhow::Result<T> {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        // Its own process group, so the timeout kills a wrapper script's
        // children too (they would hold the output pipe open).
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        tracing::debug!(command = %self.shown(), "running");
        let mut child = cmd.spawn().map_err(|e| {
            anyhow::anyhow!(
                "cannot run {}: {e}; is Slurm's client (slurm-client) installed and {} on PATH?",
                self.program,
                self.program
            )
        })?;
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        let group = child.id() as libc::pid_t;
        let (done, finished) = std::sync::mpsc::channel::<()>();
        let timeout = self.timeout;
        let watchdog = std::thread::spawn(move || {
            let fired = finished.recv_timeout(timeout).is_err();
            if fired {
                // SAFETY: kill(2) with a negative pid signals that process
                // group; `group` is our unreaped child's (its pid stays
                // reserved until the wait below), so no other group is hit.
                unsafe {
                    libc::kill(-group, libc::SIGKILL);
                }
            }
            fired
        });
        let err_thread = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = BufReader::new(stderr).read_to_string(&mut s);
            s
        });
        let mut out = BufReader::new(stdout);
        let value = read(&mut out);
        // Whatever `read` left unread: the command must not block on a
        // full pipe before it exits.
        let _ = std::io::copy(&mut out, &mut std::io::sink());
        let _ = done.send(());
        let timed_out = watchdog.join().unwrap_or(false);
        let status = child
            .wait()
            .with_context(|| format!("waiting for {}", self.program))?;
        let stderr = err_thread.join().unwrap_or_default();
        if timed_out {
            bail!(
                "{} did not finish within {} s and was killed; is {} answering?{}",
                self.shown(),
                timeout.as_secs(),
                self.daemon(),
                self.note
                    .as_ref()
                    .map_or(String::new(), |n| format!(" ({n})"))
            );
        }
        if !status.success() {
            bail!(
                "{} failed ({status}): {}; is {} up, and $SLURM_CONF its slurm.conf?",
                self.shown(),
                stderr.trim(),
                self.daemon()
            );
        }
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A script at a path of its own that runs `body`.
    fn script(name: &str, body: &str) -> (std::path::PathBuf, String) {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("allot-slurm-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("squeue");
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        (dir, path.display().to_string())
    }

    #[test]
    fn output_and_the_three_failures() {
        let (dir, ok) = script("ok", "echo \"$SLURM_TIME_FORMAT $*\"");
        let out = Slurm::new(&ok).args(["-h", "x"]).epoch_times().output();
        assert_eq!(out.unwrap(), "%s -h x\n");
        std::fs::remove_dir_all(&dir).unwrap();

        let (dir, failing) = script(
            "fail",
            "echo 'squeue: error: Unable to contact slurm controller' >&2; exit 1",
        );
        let e = Slurm::new(&failing)
            .arg("--json")
            .output()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--json failed (exit status: 1): squeue: error: Unable to contact")
                && e.contains("is slurmctld up"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();

        let e = Slurm::new("/nonexistent/sacct")
            .output()
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("cannot run /nonexistent/sacct: "), "{e}");

        // A child of the script holds the pipe: the whole group is killed.
        let (dir, slow) = script("slow", "sleep 30 & sleep 30");
        let t0 = std::time::Instant::now();
        let e = Slurm::new(&slow)
            .timeout(Duration::from_millis(300))
            .timeout_note("ALLOT_X sets the limit")
            .output()
            .unwrap_err()
            .to_string();
        assert!(t0.elapsed() < Duration::from_secs(10));
        assert!(
            e.contains("did not finish within 0 s and was killed; is slurmctld answering? (ALLOT_X sets the limit)"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
