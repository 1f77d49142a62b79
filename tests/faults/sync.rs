//! Faults around `allot sync`: killed at random points, run twice at once,
//! slurmdbd down; and who may read the ledger it writes.

use super::*;

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
    let reference = fresh_ledger(&dir, "reference.sqlite");
    let t0 = Instant::now();
    assert!(spawn(&mut import(&reference)).wait().unwrap().success());
    let full = t0.elapsed();
    let want = dump(&reference);

    let mut seed = (epoch() as u64) | 1;
    println!("seed {seed}, an uninterrupted import takes {full:?}");
    let ledger = fresh_ledger(&dir, "killed.sqlite");
    for run in 0..12 {
        // Up to three kills in a row before the run that completes.
        for _ in 0..=(rng(&mut seed) % 3) {
            let delay = Duration::from_micros(rng(&mut seed) % (full.as_micros() as u64 + 1));
            let mut child = spawn(&mut import(&ledger));
            std::thread::sleep(delay);
            let _ = child.kill(); // SIGKILL
            let _ = child.wait();
        }
        assert!(
            spawn(&mut import(&ledger)).wait().unwrap().success(),
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
    let ledger = fresh_ledger(&dir, "concurrent.sqlite");
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

#[test]
fn slurmdbd_down_sync_retries_with_backoff_and_catches_up() {
    let _one = serial();
    let tb = Testbed::from_env();
    let dir = tb.dir.join("faults-sync");
    std::fs::create_dir_all(&dir).unwrap();
    let ledger = fresh_ledger(&dir, "dbd.sqlite");
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
    let l = fresh_ledger(&dir, "root.sqlite");
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
    let l = fresh_ledger(&dir, "slurm.sqlite");
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
