//! Helpers for allot's end-to-end tests against the local Slurm testbed.
//!
//! `scripts/test` brings the testbed up (`scripts/testbed up`) and runs these
//! tests with its environment (`SLURM_CONF`, `ALLOT_TESTBED`). Tests never
//! sleep a fixed time: they poll a condition until a deadline.
#![deny(missing_docs)]

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
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

    /// Waits up to `timeout` (`what` names the wait) until sacct's first
    /// attempt of `job` is in `state`; returns its `fields` (State first).
    pub fn wait_first_attempt(
        &self,
        job: u32,
        state: &str,
        fields: &str,
        timeout: Duration,
        what: &str,
    ) -> Vec<String> {
        wait_until(timeout, what, || {
            let rows = self.sacct(job, fields);
            match rows.first() {
                Some(r) if r[0] == state => Ok(r.clone()),
                _ => Err(format!("{rows:?}")),
            }
        })
    }

    /// `(State, ElapsedRaw)` of each attempt of `job` in sacct; `None` where
    /// ElapsedRaw is not a number.
    pub fn attempt_states(&self, job: u32) -> Vec<(String, Option<u64>)> {
        self.sacct(job, "State,ElapsedRaw")
            .into_iter()
            .map(|f| {
                let elapsed = f.get(1).and_then(|e| e.trim().parse().ok());
                (f[0].clone(), elapsed)
            })
            .collect()
    }
}

/// The testbed's nodes (`sinfo`, partition `gpu`: every node), sorted:
/// `gpu01`, `gpu02`, ... (`ALLOT_TB_NODES`, default 4).
impl Testbed {
    /// Every node's name, sorted.
    pub fn nodes(&self) -> Vec<String> {
        let out = self.ok("sinfo", &["-h", "-N", "-p", "gpu", "-o", "%N"]);
        let mut v: Vec<String> = out.split_whitespace().map(str::to_string).collect();
        v.sort();
        v.dedup();
        assert!(!v.is_empty(), "sinfo shows no node");
        v
    }

    /// GPUs per node (`Gres=gpu:N` of the first node; every node has as many).
    pub fn gpus_per_node(&self) -> u32 {
        let out = self.ok("sinfo", &["-h", "-N", "-p", "gpu", "-o", "%G"]);
        let g = out.lines().next().unwrap_or("").trim();
        g.strip_prefix("gpu:")
            .and_then(|n| n.split(['(', ':']).next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no gpu:N in sinfo's GRES {g:?}"))
    }

    /// Every GPU of the cluster: nodes x GPUs per node (allot.toml's
    /// `capacity_gpus` on the testbed).
    pub fn total_gpus(&self) -> u32 {
        self.nodes().len() as u32 * self.gpus_per_node()
    }

    /// sbatch options for a job holding `gpus` GPUs: `--gres=gpu:N` on one
    /// node when it fits there, else whole nodes (`-N K --gres=gpu:G`).
    ///
    /// # Panics
    /// When `gpus` is neither at most a node's GPUs nor a multiple of them.
    pub fn gpu_args(&self, gpus: u32) -> Vec<String> {
        let g = self.gpus_per_node();
        if gpus <= g {
            vec![format!("--gres=gpu:{gpus}")]
        } else {
            assert!(
                gpus.is_multiple_of(g),
                "{gpus} GPUs are neither part of one {g}-GPU node nor whole nodes"
            );
            vec![
                "-N".into(),
                (gpus / g).to_string(),
                format!("--gres=gpu:{g}"),
            ]
        }
    }

    /// `sbatch` with [`Testbed::gpu_args`] for `gpus` GPUs before `args`.
    pub fn sbatch_gpus(&self, gpus: u32, args: &[&str]) -> u32 {
        let gpu = self.gpu_args(gpus);
        let mut all: Vec<&str> = gpu.iter().map(String::as_str).collect();
        all.extend_from_slice(args);
        self.sbatch(&all)
    }

    /// Submits a `sleep 300` job of `account` holding a quarter of the
    /// cluster's GPUs, with minimum runtime `min_runtime` (Slurm time).
    pub fn sbatch_quarter(&self, account: &str, min_runtime: &str) -> u32 {
        let quarter = self.total_gpus() / 4;
        let min_runtime = format!("--min-runtime={min_runtime}");
        self.sbatch_gpus(
            quarter,
            &["-A", account, &min_runtime, "--wrap", "sleep 300"],
        )
    }

    /// Submits one [`Testbed::sbatch_quarter`] job of `account` per minimum
    /// runtime in `min_runtimes`, in that order, then waits (30 s each)
    /// until every one runs; returns their ids in that order.
    pub fn run_quarters(&self, account: &str, min_runtimes: &[&str]) -> Vec<u32> {
        let jobs: Vec<u32> = min_runtimes
            .iter()
            .map(|m| self.sbatch_quarter(account, m))
            .collect();
        for j in &jobs {
            self.wait_state(*j, "RUNNING", Duration::from_secs(30));
        }
        jobs
    }

    /// The job's priority (`squeue %Q`).
    ///
    /// # Panics
    /// When squeue shows none (the job is not queued).
    pub fn priority(&self, job: u32) -> u64 {
        self.squeue(job, "%Q")
            .parse()
            .unwrap_or_else(|_| panic!("no priority for {job}"))
    }

    /// How many times Slurm requeued the job (`Restarts=` of `scontrol
    /// show job`; 0 when not shown).
    pub fn restarts(&self, job: u32) -> u32 {
        let out = self.ok("scontrol", &["show", "job", "-o", &job.to_string()]);
        out.split_whitespace()
            .find_map(|w| w.strip_prefix("Restarts="))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    /// AdminComment of a job from `scontrol show job -o` (squeue has no
    /// such field): the text after `AdminComment=` up to the next ` Key=`
    /// field; empty for `(null)`.
    pub fn admin_comment(&self, job: u32) -> String {
        let out = self.ok("scontrol", &["show", "job", "-o", &job.to_string()]);
        let rest = out.split_once("AdminComment=").map_or("", |(_, r)| r);
        let mut end = rest.len();
        for (i, _) in rest.match_indices(' ') {
            let word = rest[i + 1..].split(' ').next().unwrap_or("");
            if word.starts_with(|c: char| c.is_ascii_uppercase()) && word.contains('=') {
                end = i;
                break;
            }
        }
        let v = rest[..end].trim();
        if v == "(null)" {
            String::new()
        } else {
            v.to_string()
        }
    }

    /// A job of account `vision` that holds every GPU of the cluster inside
    /// a 10 minute contract, running, so that what is submitted next stays
    /// pending and is ordered by priority alone.
    pub fn block_cluster(&self) -> u32 {
        let j = self.sbatch_gpus(
            self.total_gpus(),
            &["-A", "vision", "--min-runtime=10:00", "--wrap", "sleep 600"],
        );
        self.wait_state(j, "RUNNING", Duration::from_secs(30));
        j
    }

    /// Submits a `sleep 600` job of `account` with one GPU and minimum
    /// runtime `min_runtime`, pinned to `node` (`-w`: after a requeue it
    /// waits for that node rather than start on another).
    pub fn sbatch_pinned(&self, node: &str, account: &str, min_runtime: &str) -> u32 {
        self.sbatch(&[
            "-w",
            node,
            "--gres=gpu:1",
            "-A",
            account,
            &format!("--min-runtime={min_runtime}"),
            "--wrap",
            "sleep 600",
        ])
    }

    /// On draining `node`, the sidecar requeues each job at its minimum
    /// runtime: waits (30 s) until `short`, the 5 s contract, leaves
    /// RUNNING while `long`, the `long_secs` s contract, still runs; then
    /// (up to `long_wait`) until `long` leaves RUNNING too; then (30 s) until
    /// the node is DRAINED.
    pub fn wait_drain_requeues(
        &self,
        node: &str,
        short: u32,
        long: u32,
        long_secs: u64,
        long_wait: Duration,
    ) {
        self.wait_left_state(
            short,
            "RUNNING",
            Duration::from_secs(30),
            "the 5 s job to be requeued",
        );
        assert_eq!(
            self.squeue(long, "%T"),
            "RUNNING",
            "the {long_secs} s job stays inside its contract"
        );
        self.wait_left_state(
            long,
            "RUNNING",
            long_wait,
            &format!("the {long_secs} s job to be requeued"),
        );
        self.wait_node_state(
            node,
            "drained",
            Duration::from_secs(30),
            "the node to be drained",
        );
    }

    /// Drains `node` as an admin does for maintenance (`scontrol update
    /// state=drain reason=maintenance`).
    pub fn drain_for_maintenance(&self, node: &str) {
        self.ok(
            "scontrol",
            &[
                "update",
                &format!("nodename={node}"),
                "state=drain",
                "reason=maintenance",
            ],
        );
    }

    /// The nodes a job runs on (`scontrol show job`'s NodeList, expanded
    /// with `scontrol show hostnames`); empty while it has none.
    pub fn job_nodes(&self, job: u32) -> Vec<String> {
        let out = self.run("scontrol", &["show", "job", "-o", &job.to_string()]);
        let text = String::from_utf8_lossy(&out.stdout);
        let list = text
            .split_whitespace()
            .find_map(|w| w.strip_prefix("NodeList="))
            .unwrap_or("(null)");
        if list == "(null)" || list.is_empty() {
            return Vec::new();
        }
        let mut v: Vec<String> = self
            .ok("scontrol", &["show", "hostnames", list])
            .split_whitespace()
            .map(str::to_string)
            .collect();
        v.sort();
        v
    }
}

/// Tests that fill the whole cluster take this lock so that they run one
/// at a time inside a test binary.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Seconds since the epoch.
pub fn epoch() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

impl Testbed {
    /// The `allot` binary the tests run: the packaged one when the testbed
    /// was brought up from the packages (`scripts/testbed` unpacks the
    /// allot package next to ALLOT_TB_PLUGIN_DEB under `pkgroot/`, as
    /// scripts/test does on the host), else the one of this build
    /// (scripts/test builds the workspace).
    pub fn allot_bin(&self) -> PathBuf {
        let packaged = self.packaged("usr/bin/allot");
        if packaged.exists() {
            return packaged;
        }
        let dir = std::env::var_os("CARGO_TARGET_DIR")
            .map_or_else(|| self.root.join("target"), PathBuf::from);
        dir.join("debug/allot")
    }

    /// `allot ARGS` (one shell string) run by `user` through `su`, as a
    /// researcher runs it: no access to the ledger.
    pub fn allot_as(&self, user: &str, args: &str) -> Output {
        let cmd = format!("{} {args}", self.allot_bin().display());
        Command::new("su")
            .args([user, "-c", &cmd])
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// Runs the `allot` under test ([`Testbed::allot_bin`]) with `args` and
    /// returns its stdout.
    ///
    /// # Panics
    /// With its stdout and stderr when it exits non-zero.
    pub fn allot_ok(&self, args: &[&str]) -> String {
        let out = Command::new(self.allot_bin())
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", self.allot_bin().display()));
        assert!(
            out.status.success(),
            "allot {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `(job, reason)` of the requeue events in `allot report --health
    /// --json` (the testbed's allot.toml and ledger).
    pub fn requeue_events(&self) -> Vec<(u64, String)> {
        let conf = self.allot_conf();
        let out = self.allot_ok(&[
            "report",
            "--health",
            "--json",
            "--config",
            conf.to_str().unwrap(),
        ]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == "requeue")
            .map(|e| {
                (
                    e["job_id"].as_u64().unwrap(),
                    e["reason"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    /// Starts the sidecar, `allot sync --follow --interval 1s` on the
    /// testbed's allot.toml, its log in `<testbed>/LOG`.
    pub fn start_sidecar(&self, log: &str) -> std::process::Child {
        let log = std::fs::File::create(self.dir.join(log)).unwrap();
        Command::new(self.allot_bin())
            .args(["sync", "--follow", "--interval", "1s", "--config"])
            .arg(self.allot_conf())
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .expect("cannot start allot sync --follow")
    }

    /// `path` (relative to `/`) in the packages the testbed was brought up
    /// from (it may not exist).
    pub fn packaged(&self, path: &str) -> PathBuf {
        self.dir.join("pkgroot").join(path)
    }

    /// The sidecar's command as the shipped `allot-sync.service` runs it:
    /// its `ExecStart=` with `$ALLOT_SYNC_OPTS` (the EnvironmentFile's
    /// options, split on whitespace as systemd splits `$VAR`) replaced by
    /// `opts` and `/usr/bin/allot` by [`Testbed::allot_bin`]. The unit is the
    /// packaged one when the testbed came from the packages, else the
    /// repository's `packaging/allot-sync.service`.
    pub fn unit_command(&self, opts: &[String]) -> Vec<String> {
        let packaged = self.packaged("lib/systemd/system/allot-sync.service");
        let unit = if packaged.exists() {
            packaged
        } else {
            self.root.join("packaging/allot-sync.service")
        };
        let text =
            std::fs::read_to_string(&unit).unwrap_or_else(|e| panic!("{}: {e}", unit.display()));
        let exec = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("ExecStart="))
            .unwrap_or_else(|| panic!("{}: no ExecStart=", unit.display()));
        let bin = self.allot_bin().display().to_string();
        exec.split_whitespace()
            .flat_map(|w| match w {
                "$ALLOT_SYNC_OPTS" => opts.to_vec(),
                "/usr/bin/allot" => vec![bin.clone()],
                w => vec![w.to_string()],
            })
            .collect()
    }

    /// The testbed's allot.toml (written by `scripts/testbed up`).
    pub fn allot_conf(&self) -> PathBuf {
        self.dir.join("etc/allot.toml")
    }

    /// Inserts `lines` after the first `[table]` header of the testbed's
    /// allot.toml and reconfigures slurmctld; the returned guard writes the
    /// file back and reconfigures again when dropped (also when the test
    /// fails).
    ///
    /// # Panics
    /// When the file has no such table.
    pub fn conf_with(&self, table: &str, lines: &str) -> ConfRestore<'_> {
        let conf = self.allot_conf();
        let good = std::fs::read_to_string(&conf).unwrap();
        let header = format!("[{table}]\n");
        assert!(good.contains(&header), "allot.toml has no {header}");
        std::fs::write(
            &conf,
            good.replacen(&header, &format!("{header}{lines}"), 1),
        )
        .unwrap();
        self.ok("scontrol", &["reconfigure"]);
        ConfRestore { tb: self, good }
    }

    /// Replaces `from` by `to` in the testbed's allot.toml and reconfigures
    /// slurmctld, as [`Testbed::conf_with`] (for a key the file sets).
    ///
    /// # Panics
    /// When the file does not contain `from`.
    pub fn conf_replaced(&self, from: &str, to: &str) -> ConfRestore<'_> {
        let conf = self.allot_conf();
        let good = std::fs::read_to_string(&conf).unwrap();
        assert!(good.contains(from), "allot.toml has no {from:?}");
        std::fs::write(&conf, good.replacen(from, to, 1)).unwrap();
        self.ok("scontrol", &["reconfigure"]);
        ConfRestore { tb: self, good }
    }

    /// Stops slurmctld (SIGTERM: it saves its state, as `systemctl restart`
    /// does) and starts it again (`scripts/testbed up` starts what is
    /// missing, and writes allot.toml anew).
    ///
    /// # Panics
    /// When slurmctld does not stop within 10 s or `up` fails.
    pub fn restart_slurmctld(&self) {
        // The first line: the full 24.11 suite once found "643\n5" there
        // (the pid, then a stray byte; which writer left it is not known).
        let text = std::fs::read_to_string(self.dir.join("run/slurmctld.pid")).unwrap();
        let pid = text.lines().next().unwrap_or("").to_string();
        self.ok("kill", &[pid.trim()]);
        wait_until(Duration::from_secs(10), "slurmctld to die", || {
            if std::path::Path::new("/proc").join(pid.trim()).exists() {
                Err("alive".into())
            } else {
                Ok(())
            }
        });
        let st = std::process::Command::new(self.root.join("scripts/testbed"))
            .arg("up")
            .status()
            .unwrap();
        assert!(st.success());
    }

    /// The ledger the testbed's plugins read.
    pub fn ledger(&self) -> PathBuf {
        self.dir.join("ledger.sqlite")
    }

    /// Cancels every job and waits until none is left running.
    pub fn cancel_all(&self) {
        let ids = self.ok("squeue", &["-h", "-o", "%i"]);
        let ids: Vec<&str> = ids.split_whitespace().collect();
        if !ids.is_empty() {
            let _ = self.run("scancel", &ids);
        }
        wait_until(Duration::from_secs(60), "every job to end", || {
            let left = self.ok("squeue", &["-h", "-o", "%i %T"]);
            if left.trim().is_empty() {
                Ok(())
            } else {
                Err(left)
            }
        });
    }

    /// Replaces the ledger (and preempt/allot's preemption log beside it)
    /// with one holding exactly these finished jobs,
    /// `(account, gpus, seconds before now it started, seconds it ran,
    /// minimum runtime)`, imported with `allot sync --from`. The plugins
    /// read it at their next refresh (every 2 s on the testbed): tests wait
    /// for what they expect to see (sprio's fair-share, a job starting).
    pub fn reset_ledger(&self, jobs: &[(&str, u32, i64, i64, u64)]) {
        for suffix in ["", "-wal", "-shm", ".preemptions"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", self.ledger().display()));
        }
        let fmt = |t: i64| {
            let out = Command::new("date")
                .args(["-u", "-d", &format!("@{t}"), "+%Y-%m-%dT%H:%M:%S"])
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        };
        let now = epoch();
        let mut dump = String::from(
            "JobID|JobIDRaw|Account|User|Partition|AllocTRES|Submit|Start|End|State|AdminComment\n",
        );
        for (i, (acct, gpus, ago, ran, min)) in jobs.iter().enumerate() {
            let id = 900_000 + i;
            let (start, end) = (now - ago, now - ago + ran);
            dump.push_str(&format!(
                "{id}|{id}|{acct}|root|gpu|cpu=1,gres/gpu={gpus},node=1|{}|{}|{}|COMPLETED|allot:min_runtime={min}\n",
                fmt(start),
                fmt(start),
                fmt(end)
            ));
        }
        let file = self.dir.join("ledger-seed.txt");
        std::fs::write(&file, dump).unwrap();
        let bin = self.allot_bin();
        let mut cmd = Command::new(&bin);
        cmd.args(["sync", "--timezone", "UTC", "--from"])
            .arg(&file)
            .arg("--config")
            .arg(self.allot_conf());
        if jobs.is_empty() {
            // A dump without jobs is an error unless asked for: here it
            // is how an empty ledger is made.
            cmd.arg("--allow-empty");
        }
        let out = cmd
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
        assert!(
            out.status.success(),
            "allot sync --from failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `squeue -h -j JOB -o FORMAT`, trimmed ("" once the job is gone).
    pub fn squeue(&self, job: u32, format: &str) -> String {
        let out = self.run("squeue", &["-h", "-j", &job.to_string(), "-o", format]);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Waits until the job is in `state` (squeue's %T).
    pub fn wait_state(&self, job: u32, state: &str, timeout: Duration) {
        wait_until(timeout, &format!("job {job} to be {state}"), || {
            let s = self.squeue(job, "%T");
            if s == state {
                Ok(())
            } else {
                Err(s)
            }
        });
    }

    /// Waits until `job` is no longer in `state` (e.g. a requeued job
    /// leaving RUNNING); panics after `timeout` with `what`.
    pub fn wait_left_state(&self, job: u32, state: &str, timeout: Duration, what: &str) {
        wait_until(timeout, what, || {
            let s = self.squeue(job, "%T");
            if s != state {
                Ok(())
            } else {
                Err(s)
            }
        });
    }

    /// sinfo's state of one node (`idle`, `draining`, `drained`, `down*`, ...).
    pub fn node_state(&self, node: &str) -> String {
        self.ok("sinfo", &["-h", "-N", "-n", node, "-o", "%T"])
            .lines()
            .next()
            .unwrap_or("")
            .trim()
            .to_string()
    }

    /// Waits until `node` is in `state`; panics after `timeout` with `what`.
    pub fn wait_node_state(&self, node: &str, state: &str, timeout: Duration, what: &str) {
        wait_until(timeout, what, || {
            let s = self.node_state(node);
            if s == state {
                Ok(())
            } else {
                Err(s)
            }
        });
    }
}

/// Two GPUs for ten hours of b1, ending two hours ago ([`Testbed::reset_ledger`]
/// jobs): b1 is over-served in the window, b2 (its equal-share sibling)
/// used nothing.
pub const B1_OVER_SERVED: &[(&str, u32, i64, i64, u64)] = &[("b1", 2, 12 * 3600, 10 * 3600, 3600)];

/// The start of a test that takes the whole cluster: the lock that runs
/// such tests one at a time ([`serial`]), and the testbed with no job left
/// and a ledger of `jobs` ([`Testbed::reset_ledger`]).
pub fn exclusive(jobs: &[(&str, u32, i64, i64, u64)]) -> (MutexGuard<'static, ()>, Testbed) {
    let one = serial();
    let tb = Testbed::from_env();
    tb.cancel_all();
    tb.reset_ledger(jobs);
    (one, tb)
}

/// `dir/name`, with no ledger there: the file and its `-wal`, `-shm` and
/// `.lock` removed.
pub fn fresh_ledger(dir: &std::path::Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    for suffix in ["", "-wal", "-shm", ".lock"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", p.display()));
    }
    p
}

/// A port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child process killed (and reaped) when dropped, also when a test
/// fails.
pub struct Killed(pub std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
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

/// The guard of [`Testbed::conf_with`]: restores allot.toml on drop.
pub struct ConfRestore<'a> {
    tb: &'a Testbed,
    good: String,
}

impl Drop for ConfRestore<'_> {
    fn drop(&mut self) {
        let _ = std::fs::write(self.tb.allot_conf(), &self.good);
        let _ = self.tb.run("scontrol", &["reconfigure"]);
    }
}
