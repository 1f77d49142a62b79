//! Fault injection (issue 9) on the real testbed: each test breaks one
//! thing an admin will see break, and asserts what they expect afterwards.
//! The fault model and each assertion are listed in docs/hardening.md.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use allot_e2e::{epoch, serial, wait_until, Testbed};
use allot_ledger::LedgerReader;

const HOUR: i64 = 3600;

fn allot(tb: &Testbed, args: &[&str]) -> Output {
    Command::new(tb.allot_bin())
        .args(args)
        .output()
        .expect("run allot")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn fresh(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    for suffix in ["", "-wal", "-shm", ".lock"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", p.display()));
    }
    p
}

fn dump(path: &Path) -> String {
    LedgerReader::open(path).unwrap().dump().unwrap()
}

/// A small xorshift: the tests print their seed so a failure replays.
fn rng(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// A `--from` dump of `n` attempts over the last week: several accounts and
/// users, requeued attempts, running and pending jobs, free-tier jobs.
fn big_dump(path: &Path, n: usize) {
    let now = epoch();
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    writeln!(
        f,
        "JobID|JobIDRaw|Account|User|Partition|AllocTRES|Submit|Start|End|State|AdminComment"
    )
    .unwrap();
    let accounts = ["a1", "a1-interactive", "a2", "b1", "b2", "vision"];
    for i in 0..n {
        let id = 500_000 + i / 2; // two attempts per job id (a requeue)
        let submit = now - 7 * 86_400 + (i as i64) * 30;
        let (start, end, state) = match i % 10 {
            0 => (String::from("Unknown"), String::from("Unknown"), "PENDING"),
            1 => ((submit + 5).to_string(), String::from("Unknown"), "RUNNING"),
            2 => (
                (submit + 5).to_string(),
                (submit + 600).to_string(),
                "REQUEUED",
            ),
            _ => (
                (submit + 5).to_string(),
                (submit + 5 + 60 * (i as i64 % 97)).to_string(),
                "COMPLETED",
            ),
        };
        let min = [0, 600, 3600, 28_800][i % 4];
        writeln!(
            f,
            "{id}|{id}|{}|u{}|gpu|cpu=2,gres/gpu={},node=1|{submit}|{start}|{end}|{state}|allot:min_runtime={min}",
            accounts[i % accounts.len()],
            i % 7,
            1 + i % 8
        )
        .unwrap();
    }
}

#[test]
fn sync_killed_at_random_points_always_ends_identical() {
    let tb = Testbed::from_env();
    let dir = tb.dir.join("faults-sync");
    std::fs::create_dir_all(&dir).unwrap();
    let config = tb.allot_conf().display().to_string();
    let input = dir.join("dump.psv");
    big_dump(&input, 30_000);
    let import = |ledger: &Path| {
        let mut c = Command::new(tb.allot_bin());
        c.args([
            "sync",
            "--config",
            &config,
            "--timezone",
            "UTC",
            "--batch-size",
            "500",
            "--ledger",
        ])
        .arg(ledger)
        .arg("--from")
        .arg(&input)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        c
    };
    let reference = fresh(&dir, "reference.sqlite");
    let t0 = Instant::now();
    assert!(import(&reference).status().unwrap().success());
    let full = t0.elapsed();
    let want = dump(&reference);

    let mut seed = (epoch() as u64) | 1;
    println!("seed {seed}, an uninterrupted import takes {full:?}");
    let ledger = fresh(&dir, "killed.sqlite");
    for run in 0..12 {
        // Up to three kills in a row before the run that completes.
        for _ in 0..=(rng(&mut seed) % 3) {
            let delay = Duration::from_micros(rng(&mut seed) % (full.as_micros() as u64 + 1));
            let mut child = import(&ledger).spawn().unwrap();
            std::thread::sleep(delay);
            let _ = child.kill(); // SIGKILL
            let _ = child.wait();
        }
        assert!(
            import(&ledger).status().unwrap().success(),
            "run {run}: the re-run failed"
        );
        assert!(
            dump(&ledger) == want,
            "run {run}: the ledger differs from an uninterrupted import"
        );
    }
}

#[test]
fn two_concurrent_syncs_one_refuses() {
    let tb = Testbed::from_env();
    let dir = tb.dir.join("faults-sync");
    std::fs::create_dir_all(&dir).unwrap();
    let ledger = fresh(&dir, "concurrent.sqlite");
    // A sacct that takes 5 s: the first sync holds the writer lock meanwhile.
    let slow = dir.join("slow-sacct");
    std::fs::write(&slow, "#!/bin/sh\nsleep 5\n").unwrap();
    Command::new("chmod")
        .arg("755")
        .arg(&slow)
        .status()
        .unwrap();
    let config = tb.allot_conf().display().to_string();
    let args = |l: &Path| -> Vec<String> {
        [
            "sync",
            "--config",
            &config,
            "--retry-for",
            "0",
            "--sacct",
            slow.to_str().unwrap(),
            "--ledger",
            l.to_str().unwrap(),
        ]
        .map(String::from)
        .to_vec()
    };
    let mut first = Command::new(tb.allot_bin())
        .args(args(&ledger))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lock = PathBuf::from(format!("{}.lock", ledger.display()));
    let want = format!("pid {}", first.id());
    wait_until(
        Duration::from_secs(10),
        "the first sync to hold the lock",
        || {
            let s = std::fs::read_to_string(&lock).unwrap_or_default();
            if s.contains(&want) {
                Ok(())
            } else {
                Err(s)
            }
        },
    );
    let second = Command::new(tb.allot_bin())
        .args(args(&ledger))
        .output()
        .unwrap();
    assert!(
        !second.status.success(),
        "a second writer ran: {}",
        text(&second)
    );
    assert!(
        text(&second).contains(&format!("another `allot sync` ({want})")),
        "the refusal names the running one: {}",
        text(&second)
    );
    assert!(
        first.wait().unwrap().success(),
        "the first sync finished normally"
    );
    // Once it is done the lock is free again.
    let third = Command::new(tb.allot_bin())
        .args(args(&ledger))
        .output()
        .unwrap();
    assert!(third.status.success(), "{}", text(&third));
}

fn pid_of(tb: &Testbed, daemon: &str) -> String {
    std::fs::read_to_string(tb.dir.join(format!("run/{daemon}.pid")))
        .unwrap()
        .trim()
        .to_string()
}

fn kill_and_wait(pid: &str, signal: &str) {
    Command::new("kill").args([signal, pid]).status().unwrap();
    wait_until(
        Duration::from_secs(20),
        &format!("pid {pid} to exit"),
        || {
            if Path::new("/proc").join(pid).exists() {
                Err("alive".into())
            } else {
                Ok(())
            }
        },
    );
}

fn testbed_up(tb: &Testbed) {
    let st = Command::new(tb.root.join("scripts/testbed"))
        .arg("up")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "scripts/testbed up");
}

#[test]
fn slurmdbd_down_sync_retries_with_backoff_and_catches_up() {
    let _one = serial();
    let tb = Testbed::from_env();
    let dir = tb.dir.join("faults-sync");
    std::fs::create_dir_all(&dir).unwrap();
    let ledger = fresh(&dir, "dbd.sqlite");
    let since = (epoch() - 60).to_string();
    let before = tb.sbatch(&["-A", "a2", "--min-runtime=0", "--wrap", "true"]);
    wait_until(Duration::from_secs(30), "the first job in sacct", || {
        let rows = tb.sacct(before, "State");
        if rows.first().is_some_and(|r| r[0] == "COMPLETED") {
            Ok(())
        } else {
            Err(format!("{rows:?}"))
        }
    });

    kill_and_wait(&pid_of(&tb, "slurmdbd"), "-KILL");
    // A job that runs and ends while slurmdbd is down: slurmctld queues its record.
    let during = tb.sbatch(&["-A", "a2", "--min-runtime=0", "--wrap", "true"]);
    let config = tb.allot_conf().display().to_string();
    let log = dir.join("dbd-sync.log");
    let mut sync = Command::new(tb.allot_bin())
        .args([
            "sync",
            "--config",
            &config,
            "--since",
            &since,
            "--retry-for",
            "3m",
            "--ledger",
        ])
        .arg(&ledger)
        .stderr(std::fs::File::create(&log).unwrap())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_until(
        Duration::from_secs(30),
        "two failed attempts, retried with backoff",
        || {
            let l = std::fs::read_to_string(&log).unwrap_or_default();
            if l.contains("attempt 2), retrying in 2 s") {
                Ok(())
            } else {
                Err(l)
            }
        },
    );
    assert!(
        sync.try_wait().unwrap().is_none(),
        "the sync gave up while slurmdbd was down"
    );
    testbed_up(&tb); // starts slurmdbd again
    let st = sync.wait().unwrap();
    let l = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        st.success(),
        "the sync caught up once slurmdbd was back: {l}"
    );
    assert!(
        l.contains("retrying in 1 s") && l.contains("succeeded after retrying"),
        "{l}"
    );
    // Nothing skipped: the job that ended during the outage reaches
    // slurmdbd when slurmctld reconnects, and the next pass (overlap) has it.
    wait_until(Duration::from_secs(60), "the outage job in sacct", || {
        let rows = tb.sacct(during, "State");
        if rows.first().is_some_and(|r| r[0] == "COMPLETED") {
            Ok(())
        } else {
            Err(format!("{rows:?}"))
        }
    });
    let out = allot(
        &tb,
        &[
            "sync",
            "--config",
            &config,
            "--ledger",
            ledger.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let d = dump(&ledger);
    for j in [before, during] {
        assert!(
            d.lines().any(|l| l.contains(&format!("\"job_id\":{j},"))
                && l.contains("\"state\":\"COMPLETED\"")),
            "job {j} missing from the ledger:\n{d}"
        );
    }
}

// ----- the priority plugin and a broken ledger -----

fn priority(tb: &Testbed, job: u32) -> u64 {
    tb.squeue(job, "%Q")
        .parse()
        .unwrap_or_else(|_| panic!("no priority for {job}"))
}

/// Lines of slurmctld.log from `plugin` (`priority/allot`, `preempt/allot`) containing `needle`.
fn log_lines(tb: &Testbed, plugin: &str, needle: &str) -> usize {
    let log = std::fs::read_to_string(tb.dir.join("log/slurmctld.log")).unwrap_or_default();
    log.lines()
        .filter(|l| l.contains(&format!("{plugin}: ")) && l.contains(needle))
        .count()
}

const PLUGINS: [&str; 2] = ["priority/allot", "preempt/allot"];

/// Whether `plugin`'s last word on the ledger (since it was last loaded)
/// is that it reads it: a refresh that ran while the test rewrote the
/// ledger leaves the plugin failing until its next refresh.
fn reads_the_ledger(tb: &Testbed, plugin: &str) -> bool {
    let log = std::fs::read_to_string(tb.dir.join("log/slurmctld.log")).unwrap_or_default();
    let prefix = format!("{plugin}: ");
    let mut ok = true;
    for l in log.lines().filter(|l| l.contains(&prefix)) {
        if l.contains(&format!("{prefix}loaded ")) || l.contains("ledger readable again") {
            ok = true;
        } else if l.contains("keeping the last usage") {
            ok = false;
        }
    }
    ok
}

fn counts(tb: &Testbed, needle: &str) -> Vec<usize> {
    PLUGINS.iter().map(|p| log_lines(tb, p, needle)).collect()
}

/// Every GPU of the cluster, protected for 10 minutes.
fn block_the_node(tb: &Testbed) -> u32 {
    let j = tb.sbatch_gpus(
        tb.total_gpus(),
        &["-A", "vision", "--min-runtime=10:00", "--wrap", "sleep 600"],
    );
    tb.wait_state(j, "RUNNING", Duration::from_secs(30));
    j
}

/// Moves the ledger (and its -wal/-shm) aside, or back.
fn move_ledger(from: &Path, to: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let (a, b) = (
            format!("{}{suffix}", from.display()),
            format!("{}{suffix}", to.display()),
        );
        if Path::new(&a).exists() {
            std::fs::rename(a, b).unwrap();
        }
    }
}

#[test]
fn broken_ledger_keeps_the_last_snapshot_and_logs_once_per_state() {
    let _one = serial();
    let tb = Testbed::from_env();
    tb.cancel_all();
    tb.reset_ledger(&[("b1", 2, 12 * HOUR, 10 * HOUR, 3600)]);
    block_the_node(&tb);
    let b1 = tb.sbatch(&[
        "-A",
        "b1",
        "--gres=gpu:2",
        "--min-runtime=1:00",
        "--wrap",
        "true",
    ]);
    let b2 = tb.sbatch(&[
        "-A",
        "b2",
        "--gres=gpu:2",
        "--min-runtime=1:00",
        "--wrap",
        "true",
    ]);
    let bands = || (priority(&tb, b1) >> 16, priority(&tb, b2) >> 16);
    // b1 is the only account with usage, so once the priority plugin has
    // read the new ledger b1 ranks last of all (rank 1, under the tier bit);
    // before that every account ties and b2 > b1 holds by name order alone.
    let good = wait_until(Duration::from_secs(30), "b1 to rank last, below b2", || {
        let (p1, p2) = bands();
        if p1 == (1 << 15) + 1 && p2 > p1 {
            Ok((p1, p2))
        } else {
            Err(format!("{p1} {p2}"))
        }
    });
    // Both plugins must be reading the ledger before each fault, or a
    // failure left from the rewrite above hides the fault's log line.
    wait_until(
        Duration::from_secs(30),
        "both plugins to read the ledger",
        || {
            if PLUGINS.iter().all(|p| reads_the_ledger(&tb, p)) {
                Ok(())
            } else {
                Err("a plugin still fails to read it".into())
            }
        },
    );
    let ledger = tb.ledger();
    let aside = tb.dir.join("ledger.aside");
    let python_lock = "import sqlite3,sys,time\nc=sqlite3.connect(sys.argv[1],isolation_level=None)\nc.execute('PRAGMA locking_mode=EXCLUSIVE')\nc.execute('BEGIN EXCLUSIVE')\nc.execute('SELECT count(*) FROM attempts').fetchall()\nprint('locked',flush=True)\ntime.sleep(float(sys.argv[2]))\n";
    for fault in [
        "missing",
        "a directory",
        "locked by another process",
        "corrupt",
    ] {
        let errors_before = counts(&tb, "keeping the last usage");
        let recovered_before = counts(&tb, "ledger readable again");
        let mut locker = None;
        match fault {
            "missing" => move_ledger(&ledger, &aside),
            "a directory" => {
                move_ledger(&ledger, &aside);
                std::fs::create_dir(&ledger).unwrap();
            }
            "locked by another process" => {
                let mut c = Command::new("python3")
                    .args(["-c", python_lock, ledger.to_str().unwrap(), "12"])
                    .stdout(Stdio::piped())
                    .spawn()
                    .unwrap();
                let mut line = String::new();
                std::io::BufRead::read_line(
                    &mut std::io::BufReader::new(c.stdout.as_mut().unwrap()),
                    &mut line,
                )
                .unwrap();
                assert_eq!(line.trim(), "locked");
                locker = Some(c);
            }
            _ => {
                move_ledger(&ledger, &aside);
                std::fs::write(
                    &ledger,
                    b"SQLite format 3\0this is not a database".repeat(100),
                )
                .unwrap();
            }
        }
        // At least five refresh intervals, and until both plugins have
        // noticed (each refresh thread counts its own ticks, which a loaded
        // machine stretches; at most 40 s): the order holds throughout and
        // the error is logged once.
        let start = Instant::now();
        let logged = |tb: &Testbed| -> Vec<usize> {
            counts(tb, "keeping the last usage")
                .iter()
                .zip(&errors_before)
                .map(|(a, b)| a - b)
                .collect()
        };
        while start.elapsed() < Duration::from_secs(10)
            || (logged(&tb).contains(&0) && start.elapsed() < Duration::from_secs(40))
        {
            assert_eq!(bands(), good, "ledger {fault}: the ranks changed");
            std::thread::sleep(Duration::from_millis(500));
        }
        // One error line per plugin (each keeps its own snapshot) for the whole outage.
        let logged = logged(&tb);
        assert_eq!(logged, [1, 1], "ledger {fault}: {PLUGINS:?} error lines");
        // Repair: the plugin says so once, and ranks from the ledger again.
        match fault {
            "locked by another process" => {
                let mut c = locker.take().unwrap();
                let _ = c.kill();
                let _ = c.wait();
            }
            "a directory" => {
                std::fs::remove_dir(&ledger).unwrap();
                move_ledger(&aside, &ledger);
            }
            _ => {
                let _ = std::fs::remove_file(&ledger);
                move_ledger(&aside, &ledger);
            }
        }
        wait_until(
            Duration::from_secs(20),
            "the recovery to be logged once",
            || {
                let n: Vec<usize> = counts(&tb, "ledger readable again")
                    .iter()
                    .zip(&recovered_before)
                    .map(|(a, b)| a - b)
                    .collect();
                if n == [1, 1] {
                    Ok(())
                } else {
                    Err(format!("{n:?}"))
                }
            },
        );
        assert_eq!(bands(), good);
    }
    tb.cancel_all();
}

// ----- slurmctld SIGKILL -----

fn requeue_count(tb: &Testbed, job: u32) -> u32 {
    let out = tb.ok("scontrol", &["show", "job", "-o", &job.to_string()]);
    out.split_whitespace()
        .find_map(|w| w.strip_prefix("Restarts="))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[test]
fn slurmctld_sigkill_keeps_contracts_priorities_and_preemption_rules() {
    let _one = serial();
    let tb = Testbed::from_env();
    tb.cancel_all();
    tb.reset_ledger(&[("b1", 2, 12 * HOUR, 10 * HOUR, 3600)]);
    // Three protected b1 jobs and one free-tier b1 job, a quarter of the
    // cluster each, fill it; a vision job waits.
    let quarter = tb.total_gpus() / 4;
    let mut protected = Vec::new();
    for _ in 0..3 {
        protected.push(tb.sbatch_gpus(
            quarter,
            &["-A", "b1", "--min-runtime=10:00", "--wrap", "sleep 600"],
        ));
    }
    let free = tb.sbatch_gpus(
        quarter,
        &["-A", "b1", "--min-runtime=0", "--wrap", "sleep 600"],
    );
    for j in protected.iter().chain([&free]) {
        tb.wait_state(*j, "RUNNING", Duration::from_secs(30));
    }
    // Half the cluster: more than the free-tier job frees (any allocated
    // job, b1's own too, may take that one), so it waits.
    let pending = tb.sbatch_gpus(
        2 * quarter,
        &["-A", "b1", "--min-runtime=1:00", "--wrap", "true"],
    );
    // Band 2 once a refresh counts it (b1 holds 3 quarters of its 4).
    let before = wait_until(
        Duration::from_secs(20),
        "a priority for the pending job",
        || {
            let p = priority(&tb, pending);
            if p >> 30 == 2 {
                Ok(p)
            } else {
                Err(p.to_string())
            }
        },
    );
    // slurmctld writes job_state a few seconds after a change (and every
    // few minutes): wait for a write that includes every job above, since
    // what a SIGKILL loses is whatever changed after the last write.
    let state = tb.dir.join("state/job_state");
    let changed = std::time::SystemTime::now();
    wait_until(
        Duration::from_secs(30),
        "slurmctld to save the job state",
        || {
            let m = std::fs::metadata(&state)
                .and_then(|m| m.modified())
                .map_err(|e| e.to_string())?;
            if m > changed {
                Ok(())
            } else {
                Err(format!("{m:?}"))
            }
        },
    );
    kill_and_wait(&pid_of(&tb, "slurmctld"), "-KILL");
    testbed_up(&tb);
    for j in &protected {
        tb.wait_state(*j, "RUNNING", Duration::from_secs(30));
        let c = tb.ok("scontrol", &["show", "job", "-o", &j.to_string()]);
        assert!(
            c.contains("AdminComment=allot:min_runtime=600"),
            "contract lost: {c}"
        );
    }
    let c = tb.ok("scontrol", &["show", "job", "-o", &free.to_string()]);
    assert!(c.contains("AdminComment=allot:min_runtime=0"), "{c}");
    // The pending job's priority is recomputed into the same tier and band.
    wait_until(
        Duration::from_secs(20),
        "the pending job's priority after the restart",
        || {
            let p = priority(&tb, pending);
            if p >> 16 == before >> 16 {
                Ok(())
            } else {
                Err(format!("{p} (before {before})"))
            }
        },
    );
    tb.ok("scancel", &[&pending.to_string()]);
    // Preemption rules: an under-served account's job takes the free-tier
    // job's GPUs at once and leaves the 10-minute contracts alone.
    let b2 = tb.sbatch_gpus(
        quarter,
        &["-A", "b2", "--min-runtime=1:00", "--wrap", "sleep 600"],
    );
    tb.wait_state(b2, "RUNNING", Duration::from_secs(30));
    assert_eq!(requeue_count(&tb, free), 1, "the free-tier job made room");
    let b2b = tb.sbatch_gpus(
        quarter,
        &["-A", "b2", "--min-runtime=1:00", "--wrap", "sleep 600"],
    );
    let end = Instant::now() + Duration::from_secs(8);
    while Instant::now() < end {
        assert_eq!(
            tb.squeue(b2b, "%T"),
            "PENDING",
            "a protected job was preempted"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    for j in &protected {
        assert_eq!(requeue_count(&tb, *j), 0);
    }
    tb.cancel_all();
}

// ----- NVML failing -----

fn node_name(tb: &Testbed) -> String {
    tb.ok("sinfo", &["-h", "-N", "-o", "%N"])
        .lines()
        .next()
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn nvml_failing_intermittently_reports_unknown_and_never_drains() {
    let _one = serial();
    let tb = Testbed::from_env();
    let dir = tb.dir.join("faults-health");
    std::fs::create_dir_all(&dir).unwrap();
    let node = node_name(&tb);
    let init_failed = dir.join("init-failed.json");
    std::fs::write(
        &init_failed,
        r#"{"nvml": "init_failed", "expected_gpus": 8}"#,
    )
    .unwrap();
    // The driver answers but two GPUs cannot be read this time.
    let flaky = dir.join("flaky.json");
    let mut gpus: Vec<String> = (0..8)
        .map(|i| format!(r#"{{"index": {i}, "xids": [], "ecc_uncorrected": 0, "retired_pages_pending": false, "row_remap": {{"pending": false, "failure": false}}}}"#))
        .collect();
    gpus[2] = r#"{"index": 2, "unreadable": "NVML_ERROR_UNKNOWN (fault injected)"}"#.into();
    gpus[5] = r#"{"index": 5, "xids": "unsupported", "ecc_uncorrected": "unsupported"}"#.into();
    std::fs::write(
        &flaky,
        format!(r#"{{"expected_gpus": 8, "gpus": [{}]}}"#, gpus.join(",")),
    )
    .unwrap();
    let healthy = tb
        .root
        .join("accounting-sync/fixtures/health/healthy-8.json");
    let ledger = fresh(&dir, "health.sqlite");
    for round in 0..4 {
        for (fx, want) in [
            (&init_failed, "unknown"),
            (&healthy, "healthy"),
            (&flaky, "unknown"),
        ] {
            let out = allot(
                &tb,
                &[
                    "health",
                    "--drain",
                    "--json",
                    "--node",
                    &node,
                    "--fixture",
                    fx.to_str().unwrap(),
                    "--ledger",
                    ledger.to_str().unwrap(),
                ],
            );
            assert!(
                out.status.success(),
                "round {round}, {}: {}",
                fx.display(),
                text(&out)
            );
            let v: serde_json::Value = serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
            assert_eq!(v["verdict"], want, "{}: {v}", fx.display());
            let st = tb.ok("sinfo", &["-h", "-n", &node, "-o", "%T"]);
            assert!(
                !st.contains("drain"),
                "round {round}: the node was drained ({st})"
            );
        }
    }
}

// ----- who may read the ledger -----

#[test]
fn ledger_is_0640_and_given_to_slurm_user() {
    use std::os::unix::fs::MetadataExt;
    let tb = Testbed::from_env();
    let dir = tb.dir.join("faults-owner");
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("dump.psv");
    big_dump(&input, 20);
    let config = tb.allot_conf().display().to_string();
    let files = |l: &Path| -> Vec<(String, u32, u32)> {
        ["", "-wal", "-shm", ".lock"]
            .iter()
            .map(|s| {
                let m = std::fs::metadata(format!("{}{s}", l.display())).unwrap();
                (s.to_string(), m.uid(), m.mode() & 0o777)
            })
            .collect()
    };
    // Under a strict umask, run as root: the testbed's SlurmUser is root.
    let sync = |l: &Path, path_env: &str| {
        let cmd = format!(
            "umask 077; exec {} sync --config {config} --timezone UTC --from {} --ledger {}",
            tb.allot_bin().display(),
            input.display(),
            l.display()
        );
        let out = Command::new("sh")
            .args(["-c", &cmd])
            .env("PATH", path_env)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
    };
    let path = std::env::var("PATH").unwrap();
    let l = fresh(&dir, "root.sqlite");
    sync(&l, &path);
    for (suffix, uid, mode) in files(&l) {
        assert_eq!((uid, mode), (0, 0o640), "ledger{suffix}");
    }
    // A SlurmUser other than root (scontrol as a real cluster reports it).
    let fake = dir.join("bin");
    std::fs::create_dir_all(&fake).unwrap();
    std::fs::write(
        fake.join("scontrol"),
        "#!/bin/sh\necho 'SlurmUser               = nobody(65534)'\n",
    )
    .unwrap();
    Command::new("chmod")
        .arg("755")
        .arg(fake.join("scontrol"))
        .status()
        .unwrap();
    let l = fresh(&dir, "slurm.sqlite");
    sync(&l, &format!("{}:{path}", fake.display()));
    for (suffix, uid, mode) in files(&l) {
        assert_eq!((uid, mode), (65534, 0o640), "ledger{suffix}");
    }
    // nobody can read it; the plugins' reader opens it.
    let out = Command::new("su")
        .args([
            "-s",
            "/bin/sh",
            "nobody",
            "-c",
            &format!("head -c 16 {}", l.display()),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "SlurmUser reads the ledger: {}",
        text(&out)
    );
    let out = Command::new("su")
        .args(["alice", "-c", &format!("head -c 16 {}", l.display())])
        .output()
        .unwrap();
    assert!(!out.status.success(), "another user read the ledger");
}
