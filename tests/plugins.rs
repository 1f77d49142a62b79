//! priority/allot and preempt/allot on the real testbed (issue 4, must
//! show 1, 2, 4 and 5). The testbed has nodes of 8 GPUs (4 by default);
//! allot.toml is examples/allot.toml (b1 and b2 have equal shares) with
//! the cluster's GPUs as capacity and a 2 s refresh. Job sizes are fractions
//! of the cluster (`Testbed::total_gpus`), so each test makes the same
//! decisions on any shape. Each test seeds the ledger with `allot sync
//! --from` and takes the whole cluster, so they run one at a time.

use std::time::{Duration, Instant};

use allot_e2e::{exclusive, serial, wait_until, Testbed, B1_OVER_SERVED};

/// (band, rank, score) of a priority (fairshare::priority's layout).
fn decode(p: u64) -> (u64, u64, u64) {
    (p >> 30, (p >> 16) & 0x3fff, p & 0xffff)
}

/// sprio's PRIORITY and FAIRSHARE columns of a pending job.
fn sprio(tb: &Testbed, job: u32) -> Option<(u64, u64)> {
    let out = tb.ok("sprio", &["-h", "-j", &job.to_string(), "-o", "%Y %F"]);
    let mut it = out.split_whitespace().map(|v| v.parse::<u64>().unwrap());
    Some((it.next()?, it.next()?))
}

/// Asserts that `job` stays in `state` for `period` (polled).
fn stays(tb: &Testbed, job: u32, state: &str, period: Duration) {
    let end = Instant::now() + period;
    while Instant::now() < end {
        assert_eq!(tb.squeue(job, "%T"), state, "job {job} left {state}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn under_served_account_starts_first_and_sprio_agrees() {
    // b1 used 2 GPUs for 10 hours in the window; b2 (equal share) nothing.
    let (_one, tb) = exclusive(B1_OVER_SERVED);
    let all = tb.total_gpus();
    // Hold the whole cluster, protected for 10 minutes.
    let blocker = tb.sbatch_gpus(
        all,
        &["-A", "vision", "--min-runtime=10:00", "--wrap", "sleep 300"],
    );
    tb.wait_state(blocker, "RUNNING", Duration::from_secs(30));
    // b1 submits first (older), b2 second: fair-share must beat age.
    let j1 = tb.sbatch_gpus(
        all,
        &["-A", "b1", "--min-runtime=0:05", "--wrap", "sleep 2"],
    );
    let j2 = tb.sbatch_gpus(
        all,
        &["-A", "b2", "--min-runtime=0:05", "--wrap", "sleep 2"],
    );
    // At submit the snapshot's load predates the jobs (band 1); the next
    // refresh (2 s) counts them pending and re-prioritises.
    let (p1, p2) = wait_until(Duration::from_secs(20), "b2 to rank above b1", || {
        let (p1, p2) = (tb.priority(j1), tb.priority(j2));
        if p2 > p1 && decode(p2).0 >= 2 {
            Ok((p1, p2))
        } else {
            Err(format!("b1 {p1}, b2 {p2}"))
        }
    });
    let (t1, r1, _) = decode(p1);
    let (t2, r2, _) = decode(p2);
    // b2, first by the window's rank, is owed GPUs now (a share of what
    // vision, its sibling above its own entitlement, holds) and asks for
    // more: its job crosses its room (band 2), or claims (band 3: b2 is
    // below its window share). It takes the room of their group
    // (perception), so b1's job is band 1 (fairshare::owed); b1 never
    // claims (it used more than its share).
    assert!(t2 >= 2, "b2's job crosses its room or claims");
    assert!(t1 < t2, "b1's job below b2's band");
    assert!(r2 > r1, "rank b2 {r2} > b1 {r1}");
    // sprio shows the same priority, its FAIRSHARE column the rank band.
    for (job, p, r) in [(j1, p1, r1), (j2, p2, r2)] {
        let (sp, fs) = wait_until(
            Duration::from_secs(10),
            "sprio to agree with squeue",
            || {
                let s = sprio(&tb, job).ok_or("not in sprio")?;
                let now = tb.priority(job);
                if s.0 == now {
                    Ok(s)
                } else {
                    Err(format!("sprio {s:?} squeue {now}"))
                }
            },
        );
        assert!(sp >= p, "priority only grows with age: {sp} vs {p}");
        assert_eq!(fs, r * 65_536, "FAIRSHARE = rank x 65536");
    }
    // The engine's own view (allot report, from the same ledger) ranks b2 first too.
    let report = tb.ok(
        tb.allot_bin().to_str().unwrap(),
        &[
            "report",
            "--parsable2",
            "--config",
            tb.allot_conf().to_str().unwrap(),
        ],
    );
    let fs = |acct: &str| -> f64 {
        let line = report
            .lines()
            .find(|l| l.split('|').next().map(str::trim) == Some(acct))
            .unwrap_or_else(|| panic!("{acct} not in report:\n{report}"));
        let header: Vec<&str> = report.lines().next().unwrap().split('|').collect();
        let col = header.iter().position(|h| *h == "FairShare").unwrap();
        line.split('|').nth(col).unwrap().parse().unwrap()
    };
    assert!(
        fs("b2") > fs("b1"),
        "report: b2 {} b1 {}",
        fs("b2"),
        fs("b1")
    );
    // Free the cluster: b2's job must start first although b1's is older.
    tb.ok("scancel", &[&blocker.to_string()]);
    tb.wait_state(j2, "RUNNING", Duration::from_secs(30));
    assert_eq!(tb.squeue(j1, "%T"), "PENDING");
    tb.cancel_all();
}

#[test]
fn expired_contract_is_requeued_for_an_under_served_account_and_not_before() {
    let (_one, tb) = exclusive(B1_OVER_SERVED);
    // b1 fills the cluster with four quarters of it: one job with an 8 s
    // contract, three with 10 minutes.
    let jobs = tb.run_quarters("b1", &["0:08", "10:00", "10:00", "10:00"]);
    let (short, long) = (jobs[0], jobs[1..].to_vec());
    let started = allot_e2e::epoch();
    let b2 = tb.sbatch_quarter("b2", "0:01");
    tb.wait_state(b2, "RUNNING", Duration::from_secs(60));
    // The contract is measured on Slurm's clock (whole seconds from the
    // short job's StartTime), not from when this test saw it running: the
    // preempted attempt must have run its 8 s.
    let elapsed = wait_until(
        Duration::from_secs(30),
        "the preempted attempt in sacct",
        || {
            let rows = tb.attempt_states(short);
            rows.iter()
                .find(|(state, _)| state.starts_with("PREEMPTED") || state.starts_with("REQUEUED"))
                .and_then(|(_, e)| *e)
                .ok_or(format!("{rows:?}"))
        },
    );
    assert!(
        elapsed >= 8,
        "b1's short job was preempted after {elapsed}s, inside its 8 s contract (b2 ran {}s after the test saw b1 running)",
        allot_e2e::epoch() - started
    );
    assert_eq!(tb.restarts(short), 1, "the short-contract job was requeued");
    assert_ne!(tb.squeue(short, "%T"), "RUNNING");
    for j in &long {
        assert_eq!(
            tb.squeue(*j, "%T"),
            "RUNNING",
            "job {j} inside its 10 min contract was left alone"
        );
        assert_eq!(tb.restarts(*j), 0);
    }
    tb.cancel_all();
}

#[test]
fn past_its_contract_a_job_is_requeued_only_at_a_requeue_point() {
    let (_one, tb) = exclusive(B1_OVER_SERVED);
    // Requeue points every minute of running time, open for 15 s
    // (fairshare::contract): a job past its 20 s contract may be preempted
    // only from 60 s to 75 s of running time, then from 120 s.
    let _restore = tb.conf_with(
        "contract",
        "requeue_period = \"1:00\"\nrequeue_window = \"0:15\"\n",
    );
    let conf = tb.allot_conf();
    let jobs = tb.run_quarters("b1", &["0:20"; 4]);
    let why = tb.allot_ok(&[
        "explain",
        &jobs[0].to_string(),
        "--no-forecast",
        "--config",
        conf.to_str().unwrap(),
    ]);
    assert!(
        why.contains("(then in the first 00:00:15 of every 00:01:00 of running time)"),
        "{why}"
    );
    let b2 = tb.sbatch_quarter("b2", "0:01");
    tb.wait_state(b2, "RUNNING", Duration::from_secs(120));
    // The victim ran past its contract for 40 s untouched and went at its
    // point: Slurm's Elapsed of the preempted attempt, whole seconds, plus a
    // few for the scheduling pass and the requeue.
    let victims: Vec<(u32, u64)> = jobs
        .iter()
        .filter(|j| tb.restarts(**j) > 0)
        .map(|j| {
            let e = wait_until(Duration::from_secs(30), "the preempted attempt", || {
                let rows = tb.attempt_states(*j);
                rows.iter()
                    .find(|(s, _)| s.starts_with("PREEMPTED") || s.starts_with("REQUEUED"))
                    .and_then(|(_, e)| *e)
                    .ok_or(format!("{rows:?}"))
            });
            (*j, e)
        })
        .collect();
    assert_eq!(
        victims.len(),
        1,
        "one quarter for b2's quarter: {victims:?}"
    );
    let (j, elapsed) = victims[0];
    assert!(
        elapsed >= 60 && elapsed % 60 < 15 + 5,
        "job {j} was preempted after {elapsed} s, not at a requeue point (60-75 s)"
    );
    tb.cancel_all();
}

#[test]
fn free_tier_is_preempted_at_once_by_any_allocated_job_its_own_included() {
    let (_one, tb) = exclusive(B1_OVER_SERVED);
    // Four free-tier jobs, a quarter of the cluster each, fill it.
    let free = tb.run_quarters("b1", &["0"; 4]);
    // The same account's allocated job takes one of its own free-tier jobs'
    // GPUs at once: a team's free work never blocks its allocated work.
    let t0 = allot_e2e::epoch();
    let own = tb.sbatch_quarter("b1", "5:00");
    tb.wait_state(own, "RUNNING", Duration::from_secs(30));
    // Another account's allocated job likewise.
    let a2 = tb.sbatch_quarter("a2", "5:00");
    tb.wait_state(a2, "RUNNING", Duration::from_secs(30));
    assert!(
        allot_e2e::epoch() - t0 < 40,
        "free-tier preemption is immediate"
    );
    let requeued: u32 = free.iter().map(|j| tb.restarts(*j)).sum();
    assert_eq!(requeued, 2, "exactly one free-tier job made room for each");
    tb.cancel_all();
}

#[test]
fn a_sweep_is_marked_at_submission_and_takes_what_its_team_is_owed() {
    let (_one, tb) = exclusive(B1_OVER_SERVED);
    // sweep_jobs = 2: an account's third short job within 15 minutes is a
    // sweep (fairshare::sweep).
    let _restore = tb.conf_with("priority", "sweep_jobs = 2\n");
    let conf = tb.allot_conf();
    // b1 fills the cluster with one-GPU jobs unprotected after 5 seconds.
    let all = tb.total_gpus();
    let b1: Vec<u32> = (0..all)
        .map(|_| {
            tb.sbatch_gpus(
                1,
                &["-A", "b1", "--min-runtime=0:05", "--wrap", "sleep 300"],
            )
        })
        .collect();
    for j in &b1 {
        tb.wait_state(*j, "RUNNING", Duration::from_secs(60));
    }
    std::thread::sleep(Duration::from_secs(6));
    // a2 submits four short jobs (1 GPU, 10 minutes) at once: two debug
    // jobs, then a sweep of two.
    let short: Vec<u32> = (0..4)
        .map(|_| tb.sbatch_gpus(1, &["-A", "a2", "--time=10:00", "--wrap", "sleep 300"]))
        .collect();
    let marks: Vec<bool> = short
        .iter()
        .map(|j| tb.admin_comment(*j).split(' ').any(|t| t == "allot:sweep"))
        .collect();
    assert_eq!(marks, [false, false, true, true], "job_submit's marks");
    // a2 holds nothing of its entitlement: all four are its owed work (band
    // 3) once the plugin has counted them (its next rebuild): the shape
    // orders them inside a2 only (fairshare::owed), and each takes a GPU of
    // b1's jobs past their contract.
    for j in &short {
        wait_until(Duration::from_secs(20), "a2's job in the owed band", || {
            let (band, _, _) = decode(tb.priority(*j));
            if band == 3 || tb.squeue(*j, "%T") == "RUNNING" {
                Ok(())
            } else {
                Err(format!("job {j} in band {band}"))
            }
        });
    }
    for j in &short {
        tb.wait_state(*j, "RUNNING", Duration::from_secs(60));
    }
    let requeued: u32 = b1.iter().map(|j| tb.restarts(*j)).sum();
    assert_eq!(
        requeued, 4,
        "one b1 job for each of a2's jobs, sweep or not"
    );
    // allot explain says what the sweep is.
    let why = tb.ok(
        tb.allot_bin().to_str().unwrap(),
        &[
            "explain",
            &short[2].to_string(),
            "--no-forecast",
            "--config",
            conf.to_str().unwrap(),
        ],
    );
    assert!(why.contains("part of a sweep (allot:sweep)"), "{why}");
    assert!(
        why.contains("ordered as batch work inside its team"),
        "{why}"
    );
    tb.cancel_all();
}

#[test]
fn contracts_hold_across_a_slurmctld_restart() {
    let (_one, tb) = exclusive(B1_OVER_SERVED);
    let jobs = tb.run_quarters("b1", &["10:00"; 4]);
    // Stop slurmctld (SIGTERM: it saves its state, as `systemctl restart`
    // does) and start it again (testbed up starts what is missing). The
    // SIGKILL case belongs to the hardening tests.
    tb.restart_slurmctld();
    for j in &jobs {
        tb.wait_state(*j, "RUNNING", Duration::from_secs(30));
        let c = tb.ok("scontrol", &["show", "job", "-o", &j.to_string()]);
        assert!(
            c.contains("allot:min_runtime=600"),
            "contract survived the restart: {c}"
        );
    }
    // An under-served account still cannot break the 10 minute contracts.
    let b2 = tb.sbatch_quarter("b2", "0:01");
    stays(&tb, b2, "PENDING", Duration::from_secs(10));
    for j in &jobs {
        assert_eq!(tb.restarts(*j), 0);
    }
    tb.cancel_all();
}

#[test]
fn malformed_config_on_reconfigure_keeps_the_old_tree() {
    let _one = serial();
    let tb = Testbed::from_env();
    tb.cancel_all();
    let conf = tb.allot_conf();
    let good = std::fs::read_to_string(&conf).unwrap();
    let log = tb.dir.join("log/slurmctld.log");
    let before = std::fs::read_to_string(&log).unwrap().len();
    std::fs::write(
        &conf,
        good.replace(
            "[tree.perception.b2]\nshare = 16",
            "[tree.perception.b2]\nshare = -3",
        ),
    )
    .unwrap();
    if allot_ffi::release::SINCE_24_11 {
        // 24.11 reconfigures by starting a new slurmctld: its plugins refuse
        // the file, the reconfigure fails and the running one goes on.
        let out = tb.run("scontrol", &["reconfigure"]);
        assert!(
            !out.status.success(),
            "reconfigure with a malformed allot.toml succeeded"
        );
    } else {
        tb.ok("scontrol", &["reconfigure"]);
    }
    let logged = wait_until(
        Duration::from_secs(20),
        "the error in slurmctld's log",
        || {
            let text = std::fs::read_to_string(&log).unwrap();
            let new = &text[before.min(text.len())..];
            match new.lines().find(|l| {
                l.contains("tree.perception.b2: share cannot be negative")
                    && l.contains("keeping the last good configuration")
            }) {
                Some(l) => Ok(l.to_string()),
                None => Err(new.lines().rev().take(3).collect::<Vec<_>>().join(" / ")),
            }
        },
    );
    assert!(
        logged.contains("allot.toml") && logged.contains("keeping the last good configuration"),
        "{logged}"
    );
    // Still scheduling with the old tree: b2 is still an account with a budget.
    let job = tb.sbatch(&[
        "-A",
        "b2",
        "--gres=gpu:1",
        "--min-runtime=0:05",
        "--wrap",
        "true",
    ]);
    wait_until(Duration::from_secs(60), "the job to complete", || {
        let r = tb.sacct(job, "State");
        match r.first() {
            Some(s) if s[0] == "COMPLETED" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    });
    std::fs::write(&conf, good).unwrap();
    tb.ok("scontrol", &["reconfigure"]);
}

#[test]
fn sshare_shows_allots_usage_and_fair_share() {
    // b1: 2 GPUs for 10 h inside the window = 72000 GPU-seconds; b2 nothing.
    let (_one, tb) = exclusive(B1_OVER_SERVED);
    let rows = wait_until(
        Duration::from_secs(20),
        "sshare to show the ledger's usage",
        || {
            let out = tb.ok(
                "sshare",
                &[
                    "-P",
                    "-n",
                    "-a",
                    "-A",
                    "b1,b2",
                    "-o",
                    "Account,User,NormShares,RawUsage,EffectvUsage,FairShare,LevelFS",
                ],
            );
            let rows: Vec<Vec<String>> = out
                .lines()
                .map(|l| l.split('|').map(|f| f.trim().to_string()).collect())
                .collect();
            let b1 = rows
                .iter()
                .find(|r| r[0] == "b1" && r[1].is_empty())
                .cloned()
                .ok_or_else(|| out.clone())?;
            if b1[3] == "72000" {
                Ok(rows)
            } else {
                Err(out)
            }
        },
    );
    let get = |acct: &str, user: &str| {
        rows.iter()
            .find(|r| r[0] == acct && r[1] == user)
            .unwrap_or_else(|| panic!("{acct}/{user} not in {rows:?}"))
    };
    let (b1, b2) = (get("b1", ""), get("b2", ""));
    assert_eq!(b1[2], "0.400000", "NormShares: 16 of 16+16+8");
    assert_eq!(
        (b1[4].as_str(), b2[3].as_str(), b2[4].as_str()),
        ("1.000000", "0", "0.000000")
    );
    assert_eq!(b2[6], "inf", "no usage: Level FS infinite");
    // User rows carry their account's fair-share factor: b2 above b1.
    let (u1, u2) = (get("b1", "alice"), get("b2", "alice"));
    assert!(
        u2[5].parse::<f64>().unwrap() > u1[5].parse::<f64>().unwrap(),
        "{u1:?} {u2:?}"
    );
}

/// How many of `jobs` run (each an eighth of the cluster in the test below).
fn running_jobs(tb: &Testbed, jobs: &[u32]) -> usize {
    jobs.iter()
        .filter(|j| tb.squeue(**j, "%T") == "RUNNING")
        .count()
}

/// The entitlement rule on slurmctld (fairshare::preempt): jobs of an eighth
/// of the cluster each (1 GPU on one 8-GPU node, 4 on the default 4 x 8).
/// b1 fills the cluster with 8 such jobs on 1-minute contracts and 12 more
/// waiting; b2 (equal share) submits 20. Once the contracts end, b2 is
/// entitled to half the GPUs (vision, the third leaf of perception, wants
/// nothing), so exactly enough of b1's jobs are requeued for b2 to hold 4
/// jobs, never pushing b1 below its 4; then nothing moves, however many
/// scheduling passes follow.
#[test]
fn one_minute_contracts_converge_to_the_entitlement_with_bounded_preemption() {
    let _one = serial();
    let tb = Testbed::from_env();
    tb.cancel_all();
    tb.reset_ledger(&[]);
    let eighth = tb.total_gpus() / 8;
    let submit = |account: &str| {
        tb.sbatch_gpus(
            eighth,
            &["-A", account, "--min-runtime=1:00", "--wrap", "sleep 600"],
        )
    };
    let b1: Vec<u32> = (0..20).map(|_| submit("b1")).collect();
    wait_until(
        Duration::from_secs(60),
        "b1 to fill the cluster",
        || match running_jobs(&tb, &b1) {
            8 => Ok(()),
            n => Err(format!("{n} running")),
        },
    );
    let b2: Vec<u32> = (0..20).map(|_| submit("b2")).collect();
    // b1's contracts end 60 s after they started; allow a few passes more.
    let held = wait_until(Duration::from_secs(150), "b2 to hold its 4 jobs", || {
        let (r1, r2) = (running_jobs(&tb, &b1), running_jobs(&tb, &b2));
        if r2 >= 4 {
            Ok((r1, r2))
        } else {
            Err(format!("b1 {r1}, b2 {r2}"))
        }
    });
    assert_eq!(held.1, 4, "b2 got its entitlement, no more: {held:?}");
    let requeues = |jobs: &[u32]| jobs.iter().map(|j| tb.restarts(*j)).sum::<u32>();
    let first = requeues(&b1);
    assert!(
        (4..=6).contains(&first),
        "4 jobs moved with 4-6 requeues (a pass may pick a victim for a job whose previous victim is still completing): {first}"
    );
    // Bounded: 30 s of further passes (15 main, 30 backfill) move nothing,
    // and b2's jobs pass their own 1-minute contracts inside it without b1
    // taking them back (b1 holds its entitlement).
    let end = Instant::now() + Duration::from_secs(75);
    while Instant::now() < end {
        std::thread::sleep(Duration::from_secs(3));
        assert_eq!(running_jobs(&tb, &b2), 4, "b2 stays at its entitlement");
    }
    assert_eq!(requeues(&b1), first, "no preemption after convergence");
    assert_eq!(requeues(&b2), 0, "b1 never preempted b2 back");
    assert_eq!(running_jobs(&tb, &b1), 4, "b1 keeps its entitlement");
    tb.cancel_all();
}

/// The plugins slurmctld loaded share the system's one SQLite: each imports
/// `libsqlite3.so.0` and defines no `sqlite3_` symbol of its own, and the
/// running slurmctld maps one SQLite library. Two copies in one process
/// release each other's POSIX locks; slurmctld 24.11 died of SIGBUS in
/// `walFindFrame` that way (docs/ledger.md).
#[test]
fn the_plugins_share_the_systems_one_sqlite() {
    let tb = Testbed::from_env();
    let config = tb.ok("scontrol", &["show", "config"]);
    let dirs = config
        .lines()
        .find_map(|l| {
            l.strip_prefix("PluginDir")
                .map(|v| v.trim_start_matches([' ', '=']).trim().to_string())
        })
        .expect("PluginDir in scontrol show config");
    for name in ["priority_allot.so", "preempt_allot.so"] {
        let path = dirs
            .split(':')
            .map(|d| std::path::Path::new(d).join(name))
            .find(|p| p.exists())
            .unwrap_or_else(|| panic!("{name} in none of PluginDir {dirs}"));
        let path = path.to_str().unwrap();
        let dynamic = tb.ok("readelf", &["-d", path]);
        assert!(
            dynamic.contains("[libsqlite3.so.0]"),
            "{path} does not import the system's libsqlite3.so.0:\n{dynamic}"
        );
        let defined = tb.ok("nm", &["-D", "--defined-only", path]);
        let own: Vec<&str> = defined
            .lines()
            .filter(|l| l.contains(" sqlite3_"))
            .collect();
        assert!(own.is_empty(), "{path} carries its own SQLite: {own:?}");
    }
    let pid_file = config
        .lines()
        .find_map(|l| l.strip_prefix("SlurmctldPidFile"))
        .map(|v| v.trim_start_matches([' ', '=']).trim().to_string())
        .expect("SlurmctldPidFile in scontrol show config");
    let pid = std::fs::read_to_string(&pid_file).expect("slurmctld's pid file");
    let maps =
        std::fs::read_to_string(format!("/proc/{}/maps", pid.trim())).expect("slurmctld's maps");
    let mut libs: Vec<&str> = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| p.contains("libsqlite3"))
        .collect();
    libs.sort();
    libs.dedup();
    assert!(
        libs.len() <= 1,
        "slurmctld maps several SQLite libraries: {libs:?}"
    );
}
