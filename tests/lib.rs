//! Helpers for allot's end-to-end tests against the local Slurm testbed.
//!
//! `scripts/test` brings the testbed up (`scripts/testbed up`) and runs these
//! tests with its environment (`SLURM_CONF`, `ALLOT_TESTBED`). Tests never
//! sleep a fixed time: they poll a condition until a deadline.
#![deny(missing_docs)]

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The running testbed, as described by `scripts/testbed env`.
pub struct Testbed {
    /// State directory (`.testbed/` in the repository).
    pub dir: PathBuf,
    /// Repository root.
    pub root: PathBuf,
}

impl Testbed {
    /// Reads the testbed environment.
    ///
    /// # Panics
    /// When `SLURM_CONF`/`ALLOT_TESTBED` are unset: these tests run under
    /// `scripts/test`, or after `eval "$(scripts/testbed env)"`.
    pub fn from_env() -> Testbed {
        let dir = std::env::var_os("ALLOT_TESTBED").map(PathBuf::from).expect(
            "ALLOT_TESTBED is not set: run the end-to-end tests through scripts/test, \
             or `scripts/testbed up && eval \"$(scripts/testbed env)\"` first",
        );
        assert!(
            std::env::var_os("SLURM_CONF").is_some(),
            "SLURM_CONF is not set (see scripts/testbed env)"
        );
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap()
            .to_path_buf();
        Testbed { dir, root }
    }

    /// Working directory for batch jobs (their `slurm-%j.out` land here).
    pub fn jobs_dir(&self) -> PathBuf {
        self.dir.join("jobs")
    }

    /// Runs `program args...`, returning its output; panics if it cannot start.
    pub fn run(&self, program: &str, args: &[&str]) -> Output {
        Command::new(program)
            .args(args)
            .current_dir(self.jobs_dir())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {program}: {e}"))
    }

    /// Runs a command that must succeed and returns its stdout.
    ///
    /// # Panics
    /// With the command's stderr when it exits non-zero.
    pub fn ok(&self, program: &str, args: &[&str]) -> String {
        let out = self.run(program, args);
        assert!(
            out.status.success(),
            "{program} {args:?} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Submits with `sbatch --parsable ARGS` and returns the job id.
    pub fn sbatch(&self, args: &[&str]) -> u32 {
        let mut all = vec!["--parsable"];
        all.extend_from_slice(args);
        let out = self.ok("sbatch", &all);
        out.trim()
            .split(';')
            .next()
            .unwrap()
            .parse()
            .unwrap_or_else(|_| panic!("sbatch printed {out:?}"))
    }

    /// `sacct -X -D -n -P -j JOB -o FIELDS`, one `Vec` of fields per attempt.
    pub fn sacct(&self, job: u32, fields: &str) -> Vec<Vec<String>> {
        let out = self.ok(
            "sacct",
            &["-X", "-D", "-n", "-P", "-j", &job.to_string(), "-o", fields],
        );
        out.lines()
            .map(|l| l.split('|').map(str::to_string).collect())
            .collect()
    }
}

/// Polls `check` every 200 ms until it returns `Some`, or panics after
/// `timeout` with `what` and the last observation.
pub fn wait_until<T>(
    timeout: Duration,
    what: &str,
    mut check: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        match check() {
            Ok(v) => return v,
            Err(last) if Instant::now() >= deadline => {
                panic!("timed out after {timeout:?} waiting for {what}; last seen: {last}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}
