//! Faults the plugins in slurmctld meet: a broken ledger (missing, a
//! directory, locked, garbage) and slurmctld SIGKILLed.

use super::*;

// ----- the priority plugin and a broken ledger -----

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
    let (_one, tb) = exclusive(B1_OVER_SERVED);
    tb.block_cluster();
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
    let bands = || (tb.priority(b1) >> 16, tb.priority(b2) >> 16);
    // b1 is the only account with usage, so once the priority plugin has
    // read the new ledger b1 ranks last of all (rank 1, under the band
    // bits: owed, or crossing, fairshare::owed); before that every account
    // ties and b2 > b1 holds by name order alone.
    let good = wait_until(Duration::from_secs(30), "b1 to rank last, below b2", || {
        let (p1, p2) = bands();
        if p1 & 0x3fff == 1 && p1 >> 14 >= 2 && p2 > p1 {
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

#[test]
fn slurmctld_sigkill_keeps_contracts_priorities_and_preemption_rules() {
    let (_one, tb) = exclusive(B1_OVER_SERVED);
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
    // Band 2 (crossing what b1 is owed) or 3 once a refresh counts it.
    let before = wait_until(
        Duration::from_secs(20),
        "a priority for the pending job",
        || {
            let p = tb.priority(pending);
            if p >> 30 >= 2 {
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
            let p = tb.priority(pending);
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
    assert_eq!(tb.restarts(free), 1, "the free-tier job made room");
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
        assert_eq!(tb.restarts(*j), 0);
    }
    tb.cancel_all();
}
