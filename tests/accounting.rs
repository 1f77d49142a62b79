//! Accounting: `allot sync` fills the ledger from the testbed's slurmdbd,
//! `allot report --parsable2` shows per-account GPU-hours equal to totals
//! computed here from raw `sacct -D -X` output, a SIGKILLed sync re-run
//! gives the identical ledger, a dump import equals the live import, and a
//! second writer is refused.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use allot_e2e::{fresh_ledger, wait_until, Testbed};
use allot_ledger::{Ledger, LedgerReader};

/// Minimum runtime of the test config, seconds ("0:20" = mm:ss).
const MIN_RUNTIME: i64 = 20;

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn allot_bin(tb: &Testbed) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| tb.root.join("target"));
    let bin = target.join("debug/allot");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build --workspace` first (scripts/test does)",
        bin.display()
    );
    bin
}

fn allot(tb: &Testbed, args: &[&str]) -> Output {
    Command::new(allot_bin(tb))
        .args(args)
        .output()
        .expect("cannot run allot")
}

fn allot_ok(tb: &Testbed, args: &[&str]) -> String {
    let out = allot(tb, args);
    assert!(
        out.status.success(),
        "allot {args:?} failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// GPUs of an AllocTRES string, computed here without the engine: the
/// untyped `gres/gpu=N`, else the sum of typed entries.
fn gpus(tres: &str) -> i64 {
    let mut untyped = None;
    let mut typed = 0;
    for kv in tres.split(',') {
        if let Some(n) = kv.strip_prefix("gres/gpu=") {
            untyped = Some(n.parse::<i64>().unwrap());
        } else if kv.starts_with("gres/gpu:") {
            typed += kv.rsplit('=').next().unwrap().parse::<i64>().unwrap();
        }
    }
    untyped.unwrap_or(typed)
}

fn recorded(admin_comment: &str) -> Option<i64> {
    admin_comment
        .split([' ', ',', ';'])
        .find_map(|t| t.strip_prefix("allot:min_runtime="))
        .and_then(|v| v.parse().ok())
}

fn dump(path: &Path) -> String {
    LedgerReader::open(path).unwrap().dump().unwrap()
}

#[test]
fn sync_report_and_crash_safety() {
    let tb = Testbed::from_env();
    let dir = tb.dir.join("accounting-test");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let t_start = now() - 5;

    // Accounts: a1, a2 and alice's last leaf account (v3 or vision).
    let assoc = tb.ok(
        "sacctmgr",
        &[
            "-nP",
            "show",
            "assoc",
            "where",
            "user=alice",
            "format=account",
        ],
    );
    let mut accounts: Vec<String> = assoc
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|a| !a.is_empty())
        .collect();
    accounts.sort();
    let third = accounts.last().expect("alice has associations").clone();
    let accounts = ["a1".to_string(), "a2".to_string(), third];
    let config = dir.join("allot.toml");
    let mut toml = format!(
        "window = \"7-0\"\ncapacity_gpus = 8\n[contract]\ndefault_min_runtime = \"0:{MIN_RUNTIME}\"\n\
         [contract.partition.debug]\ndefault_min_runtime = \"0\"\n"
    );
    for a in &accounts {
        toml += &format!("[tree.{a}]\nshare = 1\n");
    }
    std::fs::write(&config, toml).unwrap();
    let config = config.to_str().unwrap().to_string();

    // Jobs: several accounts and users, GPU counts, one free-tier (debug) job.
    let mut jobs = Vec::new();
    let users = ["alice", "bob", "carol"];
    // Job names as users type them: a `|` and a newline, which
    // `--parsable2` prints as they are (a dump with JobName is read below).
    let names = ["acct", "sweep|lr=0.1", "eval\nstep 2"];
    for (i, a) in accounts.iter().enumerate() {
        for k in 0..2 {
            let gres = format!("--gres=gpu:{}", 1 + (i + k) % 3);
            let uid = format!("--uid={}", users[(i + k) % 3]);
            jobs.push(tb.sbatch(&[
                &uid,
                "-A",
                a,
                &gres,
                "-o",
                "/dev/null",
                "-J",
                names[(i + k) % 3],
                "--wrap",
                "sleep 2",
            ]));
        }
    }
    jobs.push(tb.sbatch(&[
        "--uid=bob",
        "-A",
        &accounts[1],
        "-p",
        "debug",
        "--gres=gpu:2",
        "-o",
        "/dev/null",
        "--wrap",
        "sleep 2",
    ]));
    // A job that is requeued while it runs: two attempts.
    let requeued = tb.sbatch(&[
        "--uid=carol",
        "-A",
        &accounts[0],
        "--gres=gpu:1",
        "-o",
        "/dev/null",
        "--wrap",
        "sleep 6",
    ]);
    jobs.push(requeued);
    wait_until(Duration::from_secs(60), "the requeue job to run", || {
        let st = tb.ok("squeue", &["-h", "-j", &requeued.to_string(), "-o", "%T"]);
        if st.trim() == "RUNNING" {
            Ok(())
        } else {
            Err(st)
        }
    });
    std::thread::sleep(Duration::from_secs(2));
    tb.ok("scontrol", &["requeue", &requeued.to_string()]);
    // Requeued jobs wait ~2 minutes for their BeginTime; start it now.
    wait_until(
        Duration::from_secs(30),
        "the requeued job to be pending",
        || {
            let st = tb.ok("squeue", &["-h", "-j", &requeued.to_string(), "-o", "%T"]);
            if st.trim() == "PENDING" {
                Ok(())
            } else {
                Err(st)
            }
        },
    );
    tb.ok(
        "scontrol",
        &["update", &format!("jobid={requeued}"), "StartTime=now"],
    );

    let ids = jobs
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let fields = "JobIDRaw,Account,Partition,AllocTRES,Start,End,State,AdminComment";
    let sacct = |sel: &[&str]| -> Vec<Vec<String>> {
        let out = Command::new("sacct")
            .env("SLURM_TIME_FORMAT", "%s")
            .args(["-a", "-X", "-D", "--parsable2", "--noheader", "-o", fields])
            .args(sel)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.lines()
            .map(|l| l.split('|').map(str::to_string).collect())
            .collect()
    };
    let mine = wait_until(
        Duration::from_secs(120),
        "every job to finish in sacct",
        || {
            let rows = sacct(&["-j", &ids]);
            // Every job ended (the requeued one twice). The free-tier debug
            // job may also be preempted by an allocated job that needs its
            // GPUs (fairshare::preempt), and then has two attempts too.
            let attempts = |j: &u32| rows.iter().filter(|r| r[0] == j.to_string()).count();
            let done = jobs.iter().all(|j| attempts(j) >= 1)
                && attempts(&requeued) >= 2
                && rows.iter().all(|r| r[5] != "Unknown" && r[4] != "Unknown");
            if done {
                Ok(rows)
            } else {
                Err(format!("{rows:?}"))
            }
        },
    );
    assert_eq!(
        mine.iter().filter(|r| r[0] == requeued.to_string()).count(),
        2,
        "two attempts: {mine:?}"
    );
    let last_charge_end = mine
        .iter()
        .map(|r| r[4].parse::<i64>().unwrap() + MIN_RUNTIME.max(30))
        .max()
        .unwrap();
    // Let this test's charged intervals end before the report's window does.
    while now() <= last_charge_end {
        std::thread::sleep(Duration::from_millis(250));
    }

    // Every sync reads the whole testbed history (--since 2000-01-01), so
    // each ledger below holds the same attempts whatever ran before.
    let since = "946684800".to_string();
    let report_start = t_start.to_string();
    let report_end = now();
    let all_rows = sacct(&["-S", "2000-01-01T00:00:00", "-E", "now"]);

    // Independent totals over [t_start, report_end): GPUs x overlap of
    // [start, max(end, start + min runtime)) for allocated jobs their owner
    // ended, [start, end) for those the cluster ended (NODE_FAIL,
    // BOOT_FAIL, REQUEUED, REQUEUE_HOLD, REQUEUE_FED; the testbed resizes
    // nothing), the charged tail cut at the job's next start (running ones
    // up to the window's end), GPUs x overlap of [start, end) as
    // unallocated for minimum runtime 0 (docs/ledger.md).
    let overlap = |s: i64, e: i64| (e.min(report_end) - s.max(t_start)).max(0);
    let next_start = |job: &str, start: i64| {
        all_rows
            .iter()
            .filter(|o| o[0] == job)
            .filter_map(|o| o[4].parse::<i64>().ok())
            .filter(|s| *s > start)
            .min()
    };
    let cluster_ended = |state: &str| {
        matches!(
            state.split_whitespace().next().unwrap_or(""),
            "NODE_FAIL" | "BOOT_FAIL" | "REQUEUED" | "REQUEUE_HOLD" | "REQUEUE_FED" | "RESIZING"
        )
    };
    let mut charged: BTreeMap<String, i64> = BTreeMap::new();
    let mut unalloc: BTreeMap<String, i64> = BTreeMap::new();
    for r in &all_rows {
        let Ok(start) = r[4].parse::<i64>() else {
            continue;
        }; // never started
        let end: Option<i64> = r[5].parse().ok();
        let min = recorded(&r[7]).unwrap_or(if r[2] == "debug" { 0 } else { MIN_RUNTIME });
        let g = gpus(&r[3]);
        // Only attempts inside the window name an account: the testbed's
        // history holds other tests' accounts (b1, b2) that the report,
        // rightly, does not list when they used nothing in the window.
        if min == 0 {
            let u = g * overlap(start, end.unwrap_or(report_end));
            if u > 0 {
                *unalloc.entry(r[1].clone()).or_default() += u;
            }
        } else {
            let ce = end.map_or(report_end, |e| {
                let own = if cluster_ended(&r[6]) {
                    e
                } else {
                    e.max(start + min)
                };
                next_start(&r[0], start).map_or(own, |n| own.min(n).max(e))
            });
            let c = g * overlap(start, ce);
            if c > 0 {
                *charged.entry(r[1].clone()).or_default() += c;
            }
        }
    }
    // The debug job is free tier unless job_submit/allot recorded another contract on it.
    if mine
        .iter()
        .any(|r| r[2] == "debug" && recorded(&r[7]).unwrap_or(0) == 0)
    {
        assert!(
            unalloc.get(&accounts[1]).copied().unwrap_or(0) > 0,
            "the debug job ran unallocated: {mine:?}"
        );
    }

    let ledger_a = fresh_ledger(&dir, "a.sqlite");
    let la = ledger_a.to_str().unwrap();
    let out = allot_ok(
        &tb,
        &[
            "sync", "--config", &config, "--ledger", la, "--since", &since,
        ],
    );
    assert!(out.contains("new attempts"), "{out}");
    // A second pass (from the watermark minus the overlap) changes nothing.
    let out = allot_ok(&tb, &["sync", "--config", &config, "--ledger", la]);
    assert!(out.contains(" 0 new attempts, 0 updated"), "{out}");

    let end_arg = report_end.to_string();
    // `allot report` of ledger a from the report's start, with `more`.
    let report_a = |more: &[&str]| {
        let mut args = vec![
            "report",
            "--config",
            &config,
            "--ledger",
            la,
            "-S",
            &report_start,
        ];
        args.extend_from_slice(more);
        allot_ok(&tb, &args)
    };
    let report = report_a(&["-E", &end_arg, "--parsable2"]);
    let mut lines = report.lines();
    let header: Vec<&str> = lines.next().unwrap().split('|').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("no {name} in {header:?}"))
    };
    let got: BTreeMap<String, (f64, f64)> = lines
        .map(|l| l.split('|').collect::<Vec<_>>())
        .filter(|c| c[col("User")].is_empty())
        .map(|c| {
            (
                c[col("Account")].to_string(),
                (
                    c[col("ChargedGPUh")].parse().unwrap(),
                    c[col("UnallocGPUh")].parse().unwrap(),
                ),
            )
        })
        .collect();
    let every: std::collections::BTreeSet<&String> = charged
        .keys()
        .chain(unalloc.keys())
        .chain(accounts.iter())
        .collect();
    for a in every {
        let want_c = *charged.get(a).unwrap_or(&0) as f64 / 3600.0;
        let want_u = *unalloc.get(a).unwrap_or(&0) as f64 / 3600.0;
        let (c, u) = got
            .get(a)
            .copied()
            .unwrap_or_else(|| panic!("no line for {a} in\n{report}"));
        assert!(
            (c - want_c).abs() < 0.0006,
            "{a}: charged {c} GPU-h, sacct says {want_c}\n{report}"
        );
        assert!(
            (u - want_u).abs() < 0.0006,
            "{a}: unallocated {u} GPU-h, sacct says {want_u}\n{report}"
        );
    }
    assert!(got[&accounts[0]].0 > 0.0);
    let text = report_a(&["--users"]);
    assert!(
        text.contains("carol") && text.contains("Cluster: charged"),
        "{text}"
    );

    // The requeued job: two attempts, numbered 0 and 1.
    let reader = LedgerReader::open(&ledger_a).unwrap();
    let attempts: Vec<u32> = reader
        .all_attempts()
        .unwrap()
        .iter()
        .filter(|a| a.record.job_id == u64::from(requeued))
        .map(|a| a.attempt)
        .collect();
    assert_eq!(attempts, [0, 1]);
    let reference = dump(&ledger_a);

    // A second writer is refused while one holds the ledger.
    {
        let _writer = Ledger::open(&ledger_a).unwrap();
        let out = allot(&tb, &["sync", "--config", &config, "--ledger", la]);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("only one writer"), "{err}");
    }

    // SIGKILL a live sync at various points, then re-run: identical ledger.
    for delay_ms in [5u64, 40, 120] {
        let ledger_b = fresh_ledger(&dir, "b.sqlite");
        let lb = ledger_b.to_str().unwrap();
        let mut child = Command::new(allot_bin(&tb))
            .args([
                "sync",
                "--config",
                &config,
                "--ledger",
                lb,
                "--since",
                &since,
                "--batch-size",
                "1",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        allot_ok(
            &tb,
            &[
                "sync", "--config", &config, "--ledger", lb, "--since", &since,
            ],
        );
        assert_eq!(
            dump(&ledger_b),
            reference,
            "after a SIGKILL at {delay_ms} ms"
        );
    }

    // The same jobs from a saved dump (ISO local times, header line) give
    // the same ledger as the live import.
    let saved_with = |fields: &str| {
        tb.ok(
            "sacct",
            &[
                "-a",
                "-X",
                "-D",
                "--parsable2",
                "-S",
                "2000-01-01T00:00:00",
                "-E",
                "now",
                "-o",
                fields,
            ],
        )
    };
    let saved = saved_with(&allot_ledger::sacct::LIVE_FIELDS.join(","));
    let real_dump = dir.join("real.dump");
    std::fs::write(&real_dump, &saved).unwrap();
    let ledger_c = fresh_ledger(&dir, "c.sqlite");
    let lc = ledger_c.to_str().unwrap();
    allot_ok(
        &tb,
        &[
            "sync",
            "--config",
            &config,
            "--ledger",
            lc,
            "--from",
            real_dump.to_str().unwrap(),
        ],
    );
    assert_eq!(dump(&ledger_c), reference, "dump import == live import");

    // A dump with free text before the fields allot reads (JobName, whose
    // `|` and newline shift and cut rows) and after them (AdminComment):
    // the same ledger, no row unread.
    let named = saved_with(&format!(
        "JobName,{}",
        allot_ledger::sacct::LIVE_FIELDS.join(",")
    ));
    assert!(
        named.contains("sweep|lr=0.1") && named.contains("eval\nstep 2"),
        "sacct prints the names as typed:\n{named}"
    );
    let named_dump = dir.join("named.dump");
    std::fs::write(&named_dump, &named).unwrap();
    let ledger_n = fresh_ledger(&dir, "n.sqlite");
    let out = allot_ok(
        &tb,
        &[
            "sync",
            "--config",
            &config,
            "--ledger",
            ledger_n.to_str().unwrap(),
            "--from",
            named_dump.to_str().unwrap(),
        ],
    );
    assert!(out.contains(" 0 unreadable (logged)"), "{out}");
    assert_eq!(
        dump(&ledger_n),
        reference,
        "a dump with JobName == live import"
    );

    // SIGKILL in the middle of a large dump import, re-run: identical to a
    // clean import.
    let mut big = saved.clone();
    for i in 0..60_000u64 {
        let s = 1_600_000_000 + (i as i64) * 37;
        big += &format!(
            "{}|{}|a1|alice|gpu|cpu=1,gres/gpu={}|{}|{}|{}|00:10:00|COMPLETED|\n",
            5_000_000 + i,
            5_000_000 + i,
            1 + i % 4,
            s - 5,
            s,
            s + 600
        );
    }
    let big_dump = dir.join("big.dump");
    std::fs::write(&big_dump, &big).unwrap();
    let bd = big_dump.to_str().unwrap();
    let ledger_d = fresh_ledger(&dir, "d.sqlite");
    allot_ok(
        &tb,
        &[
            "sync",
            "--config",
            &config,
            "--ledger",
            ledger_d.to_str().unwrap(),
            "--from",
            bd,
        ],
    );
    let clean = dump(&ledger_d);
    let ledger_e = fresh_ledger(&dir, "e.sqlite");
    let le = ledger_e.to_str().unwrap();
    let mut child = Command::new(allot_bin(&tb))
        .args([
            "sync",
            "--config",
            &config,
            "--ledger",
            le,
            "--from",
            bd,
            "--batch-size",
            "2000",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let partial = loop {
        let n = LedgerReader::open(&ledger_e)
            .ok()
            .and_then(|r| r.all_attempts().ok())
            .map_or(0, |a| a.len());
        if n > 0 || Instant::now() > deadline {
            break n;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert!(
        partial > 0 && partial < 60_000,
        "killed mid-import ({partial} attempts, {status})"
    );
    allot_ok(
        &tb,
        &["sync", "--config", &config, "--ledger", le, "--from", bd],
    );
    assert_eq!(
        dump(&ledger_e),
        clean,
        "re-run after SIGKILL == clean import"
    );
}
