//! Abuse cases (issue 9): what a researcher could try to jump the queue or
//! keep their GPUs, each refused or without effect, on the real testbed.
//! The users are `alice` (associated with every leaf account) and
//! `mallory` (created here, associated with `a1` only). See
//! docs/hardening.md for what Slurm 22.05 itself enforces and what allot adds.

use std::process::Output;
use std::time::{Duration, Instant};

use allot_e2e::{exclusive, serial, wait_until, Testbed, B1_OVER_SERVED};

const HOUR: i64 = 3600;

fn as_user(tb: &Testbed, user: &str, cmd: &str) -> Output {
    tb.run("su", &[user, "-c", cmd])
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Submits as `user` and returns the job id.
fn sbatch_as(tb: &Testbed, user: &str, args: &str) -> u32 {
    let out = as_user(tb, user, &format!("sbatch --parsable -o /dev/null {args}"));
    assert!(
        out.status.success(),
        "sbatch {args} as {user}: {}",
        text(&out)
    );
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .split(';')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn user_cannot_raise_their_job_above_another_teams() {
    // b1 (alice's team here) used 2 GPUs for 10 h; b2 (equal share) nothing.
    let (_one, tb) = exclusive(B1_OVER_SERVED);
    tb.block_cluster();
    let other = tb.sbatch(&[
        "-A",
        "b2",
        "--gres=gpu:2",
        "--min-runtime=1:00",
        "--wrap",
        "true",
    ]);
    let mine = sbatch_as(
        &tb,
        "alice",
        "-A b1 --gres=gpu:2 --min-runtime=1:00 --wrap true",
    );
    wait_until(Duration::from_secs(20), "b1 to rank below b2", || {
        let (m, o) = (tb.priority(mine), tb.priority(other));
        if m < o {
            Ok(())
        } else {
            Err(format!("mine {m}, other {o}"))
        }
    });

    // scontrol update priority= (higher) as a user: denied by slurmctld.
    let out = as_user(
        &tb,
        "alice",
        &format!("scontrol update jobid={mine} priority=4294967000"),
    );
    assert!(
        !out.status.success(),
        "a user raised their priority: {}",
        text(&out)
    );
    // A negative nice, at submit and on update: refused.
    let out = as_user(
        &tb,
        "alice",
        "sbatch -A b1 --nice=-10 --gres=gpu:2 -o /dev/null --wrap true",
    );
    assert!(
        !out.status.success(),
        "negative nice accepted: {}",
        text(&out)
    );
    assert!(text(&out).to_lowercase().contains("nice"), "{}", text(&out));
    let out = as_user(
        &tb,
        "alice",
        &format!("scontrol update jobid={mine} nice=-10000"),
    );
    assert!(
        !out.status.success(),
        "negative nice update accepted: {}",
        text(&out)
    );
    // --priority at submit: accepted but ignored (slurmctld drops it for non-operators).
    let forced = sbatch_as(
        &tb,
        "alice",
        "-A b1 --priority=4000000000 --gres=gpu:2 --min-runtime=1:00 --wrap true",
    );
    // A large positive nice is allowed but only moves the job inside its account.
    let nice = sbatch_as(
        &tb,
        "alice",
        "-A b1 --nice=100000 --gres=gpu:2 --min-runtime=1:00 --wrap true",
    );

    // Over five refresh intervals (2 s each), nothing alice did puts a b1
    // job above b2's. Each job's priority is recomputed on its own schedule,
    // and a job's band follows the load counted at the last refresh, so one
    // reading may mix two snapshots; what alice's tricks would cause
    // persists, so a reading counts only if it lasts 5 s (seen in two CI
    // runs: b2 in band 1 for one reading while b1 was in band 2).
    let end = Instant::now() + Duration::from_secs(10);
    let mut since: Option<(Instant, String)> = None;
    while Instant::now() < end {
        let o = tb.priority(other);
        let base = tb.priority(mine);
        let wrong = [mine, forced, nice].into_iter().find_map(|j| {
            let p = tb.priority(j);
            if p >= o {
                Some(format!("b1 job {j} ({p}) rose above b2's job ({o})"))
            } else if p >> 16 != base >> 16 {
                Some(format!("job {j} ({p}) left b1's band ({base})"))
            } else {
                None
            }
        });
        match (wrong, &since) {
            (None, _) => since = None,
            (Some(w), None) => since = Some((Instant::now(), w)),
            (Some(w), Some((t, first))) => assert!(
                t.elapsed() < Duration::from_secs(5),
                "for 5 s: {first}; now: {w}"
            ),
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(
        tb.priority(nice) <= tb.priority(mine),
        "positive nice orders inside the account"
    );
    tb.cancel_all();
}

#[test]
fn user_lowered_priority_is_not_frozen() {
    // A user may *lower* their pending job's priority (Slurm 22.05 sets it
    // without direct_set_prio and answers "only admin can make persistent
    // change"); allot's next pass recomputes it, so a job cannot keep a
    // priority computed while its account was under-served.
    let (_one, tb) = exclusive(B1_OVER_SERVED);
    tb.block_cluster();
    let mine = sbatch_as(
        &tb,
        "alice",
        "-A a2 --gres=gpu:2 --min-runtime=1:00 --wrap true",
    );
    // At submit the snapshot predates the job; the next refresh counts it
    // waiting inside what a2 is owed: band 3, owed (fairshare::owed).
    let computed = wait_until(Duration::from_secs(20), "a priority", || {
        let p = tb.priority(mine);
        if p >> 30 == 3 {
            Ok(p)
        } else {
            Err(p.to_string())
        }
    });
    let _ = as_user(
        &tb,
        "alice",
        &format!("scontrol update jobid={mine} priority={}", computed - 1000),
    );
    wait_until(
        Duration::from_secs(20),
        "allot to recompute the lowered priority",
        || {
            // (age adds a point every ~10 minutes: allow for one)
            let p = tb.priority(mine);
            if p + 1 >= computed {
                Ok(())
            } else {
                Err(format!("{p} (computed {computed})"))
            }
        },
    );
    // a2 becomes the most over-served account: the job follows the ledger.
    tb.reset_ledger(&[("a2", 8, 12 * HOUR, 10 * HOUR, 3600)]);
    wait_until(
        Duration::from_secs(20),
        "the priority to follow a2's new usage",
        || {
            let p = tb.priority(mine);
            if p < computed {
                Ok(())
            } else {
                Err(format!("{p} (was {computed})"))
            }
        },
    );
    tb.cancel_all();
}

#[test]
fn contract_cannot_be_changed_or_removed_after_start() {
    let _one = serial();
    let tb = Testbed::from_env();
    let job = sbatch_as(&tb, "alice", "-A a2 --min-runtime=10 --wrap 'sleep 120'");
    tb.wait_state(job, "RUNNING", Duration::from_secs(30));
    assert_eq!(tb.admin_comment(job), "allot:min_runtime=600");
    for cmd in [
        format!("scontrol update jobid={job} comment=min_runtime=0"),
        format!("scontrol update jobid={job} comment=min_runtime=8:00:00"),
        format!("scontrol update jobid={job} admincomment=allot:min_runtime=28800"),
        format!("scontrol update jobid={job} admincomment="),
    ] {
        let out = as_user(&tb, "alice", &cmd);
        assert!(!out.status.success(), "{cmd}: {}", text(&out));
        assert_eq!(
            tb.admin_comment(job),
            "allot:min_runtime=600",
            "after {cmd}"
        );
    }
    // Editing the comment without a min_runtime token is the user's right;
    // it removes nothing (the contract lives in AdminComment).
    let out = as_user(
        &tb,
        "alice",
        &format!("scontrol update jobid={job} comment=just-notes"),
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(tb.admin_comment(job), "allot:min_runtime=600");
    tb.ok("scancel", &[&job.to_string()]);
}

#[test]
fn account_without_association_is_refused() {
    let _one = serial();
    let tb = Testbed::from_env();
    // mallory: a Unix user with an association to a1 only.
    if tb.run("id", &["mallory"]).status.code() != Some(0) {
        tb.ok("useradd", &["-M", "-s", "/bin/bash", "mallory"]);
    }
    let _ = tb.run("sacctmgr", &["-i", "add", "user", "mallory", "account=a1"]);
    let out = tb.ok(
        "sacctmgr",
        &[
            "-n",
            "-P",
            "show",
            "assoc",
            "user=mallory",
            "format=account",
        ],
    );
    assert_eq!(
        out.split_whitespace().collect::<Vec<_>>(),
        ["a1"],
        "mallory's associations"
    );
    let ok = wait_until(
        Duration::from_secs(20),
        "slurmctld to learn mallory's association",
        || {
            let out = as_user(
                &tb,
                "mallory",
                "sbatch --parsable -H -A a1 -o /dev/null --wrap true",
            );
            if out.status.success() {
                Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
            } else {
                Err(text(&out))
            }
        },
    );
    tb.ok("scancel", &[&ok]);
    for acct in ["b1", "a2"] {
        let out = as_user(
            &tb,
            "mallory",
            &format!("sbatch -H -A {acct} -o /dev/null --wrap true"),
        );
        assert!(
            !out.status.success(),
            "-A {acct} without an association was accepted: {}",
            text(&out)
        );
        assert!(text(&out).contains("Invalid account"), "{}", text(&out));
    }
    let _ = tb.run("sacctmgr", &["-i", "delete", "user", "mallory"]);
}

#[test]
fn free_tier_job_cannot_buy_protection_after_start() {
    let (_one, tb) = exclusive(B1_OVER_SERVED);
    // While pending, asking for a contract is allowed: the job becomes an
    // allocated job and pays for it (decision in docs/hardening.md).
    let held = sbatch_as(
        &tb,
        "alice",
        "-H -A b1 --gres=gpu:2 --min-runtime=0 --wrap true",
    );
    assert_eq!(tb.admin_comment(held), "allot:min_runtime=0");
    let out = as_user(
        &tb,
        "alice",
        &format!("scontrol update jobid={held} comment=min_runtime=1:00:00"),
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(tb.admin_comment(held), "allot:min_runtime=3600");
    tb.ok("scancel", &[&held.to_string()]);

    // Four free-tier jobs, a quarter of the cluster each, fill it.
    let quarter = tb.total_gpus() / 4;
    let gpus = tb.gpu_args(quarter).join(" ");
    let free: Vec<u32> = (0..4)
        .map(|_| {
            sbatch_as(
                &tb,
                "alice",
                &format!("-A b1 {gpus} --min-runtime=0 --wrap 'sleep 300'"),
            )
        })
        .collect();
    for j in &free {
        tb.wait_state(*j, "RUNNING", Duration::from_secs(30));
    }
    // Once running: refused, and the record keeps the free tier.
    for j in &free {
        let out = as_user(
            &tb,
            "alice",
            &format!("scontrol update jobid={j} comment=min_runtime=8:00:00"),
        );
        assert!(!out.status.success(), "{}", text(&out));
        assert_eq!(tb.admin_comment(*j), "allot:min_runtime=0");
    }
    // ...and another team's allocated job still preempts one at once.
    let a2 = tb.sbatch_quarter("a2", "5:00");
    tb.wait_state(a2, "RUNNING", Duration::from_secs(30));
    let requeued: u32 = free.iter().map(|j| tb.restarts(*j)).sum();
    assert_eq!(requeued, 1, "one free-tier job made room");
    tb.cancel_all();
}
