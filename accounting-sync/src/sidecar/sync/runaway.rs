//! Runaway records: slurmdbd keeps a job RUNNING (`End` `Unknown`) that
//! slurmctld has forgotten (a lost end message, a slurmctld restored from
//! an old state); Slurm's own tool for them is `sacctmgr show runawayjobs`.
//!
//! Rules:
//! - An attempt the ledger holds as started and not ended is a runaway when
//!   slurmctld does not know its job (`squeue --json`, read once per pass;
//!   the attempt started more than [`SETTLE_SECS`] ago, so a job that ended
//!   between sacct and squeue is not one), or when it is past its start plus
//!   its time limit by more than [`SETTLE_SECS`] (what `OverTimeLimit` and
//!   `KillWait` allow). A terminal `State` with no `End` reads as the same.
//! - Whatever is found, the ledger charges an open attempt at most up to
//!   its start plus its time limit ([`allot_ledger::AttemptRecord::open_until`]),
//!   so a runaway is never billed for weeks; one without a time limit counts
//!   up to now until its record is fixed, and the warning says so.
//! - Each runaway is warned once per process (a `--follow` sidecar does not
//!   repeat it every pass), with the command that fixes it. Nothing is
//!   changed in slurmdbd: fixing records is the admin's call.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

use allot_ledger::{AttemptRecord, Ledger};

use super::LiveContracts;

/// Seconds an attempt must be past what makes it a runaway before it is
/// called one: a job that ended between sacct and squeue, or one that
/// `OverTimeLimit` and `KillWait` let run a few minutes past its limit.
pub const SETTLE_SECS: i64 = 600;

/// Why an open attempt is a runaway, or `None`: `known` is slurmctld's job
/// list (`None` when it could not be read: then only the time limit
/// counts).
pub fn why(a: &AttemptRecord, known: Option<&dyn Fn(u64) -> bool>, now: i64) -> Option<String> {
    let start = a.start?;
    if a.end.is_some() {
        return None;
    }
    if let Some(until) = a.open_until() {
        if now > until.saturating_add(SETTLE_SECS) {
            return Some(format!(
                "it is past its time limit ({} s) by {} s",
                a.time_limit.unwrap_or(0),
                now - until
            ));
        }
    }
    match known {
        Some(knows) if !knows(a.job_id) && now - start > SETTLE_SECS => {
            Some("slurmctld does not know the job (squeue)".into())
        }
        _ => None,
    }
}

/// Looks for runaways among the ledger's open attempts at `now` (seconds
/// since the epoch), warns each once per process, and returns how many
/// there are.
///
/// # Errors
/// Ledger errors.
pub fn look_for(ledger: &Ledger, live: &mut LiveContracts, now: i64) -> anyhow::Result<u64> {
    let open = ledger.open_attempts()?;
    if open.is_empty() {
        return Ok(0);
    }
    let jobs = live.known();
    let knows = |id: u64| jobs.is_some_and(|j| j.contains_key(&id));
    let known: Option<&dyn Fn(u64) -> bool> = jobs.is_some().then_some(&knows as _);
    static WARNED: OnceLock<Mutex<HashSet<(u64, i64)>>> = OnceLock::new();
    let mut warned = WARNED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let mut n = 0;
    for a in &open {
        let Some(reason) = why(a, known, now) else {
            continue;
        };
        n += 1;
        if warned.insert((a.job_id, a.submit)) {
            tracing::warn!(
                job = %a.label,
                account = %a.account,
                user = %a.user,
                "{}",
                message(a, &reason)
            );
        }
    }
    Ok(n)
}

/// The warning for one runaway: what, what it is charged, the fix.
pub fn message(a: &AttemptRecord, reason: &str) -> String {
    let charged = match a.open_until() {
        Some(until) => format!(
            "it is charged up to its start plus its time limit ({until}, epoch seconds), not up to now"
        ),
        None => "it has no time limit, so it is charged up to now until the record is fixed".into(),
    };
    format!(
        "runaway record: slurmdbd still has job {} (account {}, user {}) running since {} (epoch seconds), but {reason}; {charged}. Fix the record in slurmdbd: sacctmgr show runawayjobs (it lists them and offers to fix them), then the next sync charges its real end",
        a.label,
        a.account,
        a.user,
        a.start.unwrap_or(0)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sidecar::sync::{sync_once, SyncOptions};
    use allot_ledger::charge::Charging;

    const T0: i64 = 1_700_000_000;
    const WEEK: i64 = 7 * 86_400;

    fn open(job: u64, start: i64, time_limit: Option<u64>) -> AttemptRecord {
        AttemptRecord {
            job_id: job,
            submit: start,
            label: job.to_string(),
            account: "a1".into(),
            user: "alice".into(),
            gpus: 8,
            rate: 8000,
            start: Some(start),
            state: "RUNNING".into(),
            min_runtime: 3600,
            time_limit,
            ..Default::default()
        }
    }

    #[test]
    fn an_open_attempt_is_a_runaway_past_its_limit_or_unknown_to_slurmctld() {
        let known = |id: u64| id == 1;
        let knows: Option<&dyn Fn(u64) -> bool> = Some(&known);
        let now = T0 + WEEK;
        // Past its 2-hour limit, known to slurmctld or not.
        let r = why(&open(1, T0, Some(7200)), knows, now).unwrap();
        assert!(r.contains("past its time limit (7200 s)"), "{r}");
        assert!(why(&open(2, T0, Some(7200)), None, now).is_some());
        // No limit: slurmctld's word decides, once it has settled.
        let r = why(&open(3, T0, None), knows, now).unwrap();
        assert!(r.contains("slurmctld does not know"), "{r}");
        assert_eq!(why(&open(1, T0, None), knows, now), None);
        assert_eq!(
            why(&open(3, now - 60, None), knows, now),
            None,
            "just started"
        );
        assert_eq!(why(&open(3, T0, None), None, now), None, "squeue unread");
        // Inside its limit and known: running.
        assert_eq!(why(&open(1, now - 3600, Some(7200)), knows, now), None);
        let m = message(&open(2, T0, Some(7200)), "x");
        assert!(
            m.contains("sacctmgr show runawayjobs")
                && m.contains("up to its start plus its time limit"),
            "{m}"
        );
        assert!(message(&open(2, T0, None), "x").contains("charged up to now until"));
    }

    /// Issue 53, item 1, through a live pass: a job slurmdbd has RUNNING
    /// for a week with a 2-hour limit. Before: 8 GPUs x 7 days = 1,344
    /// GPU-h charged, no warning; now 16 GPU-h and one runaway counted.
    #[test]
    fn a_live_pass_counts_a_runaway_and_charges_it_to_its_limit() {
        let dir = std::env::temp_dir().join(format!("allot-runaway-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sacct = dir.join("sacct");
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(
            &sacct,
            format!(
                "#!/bin/sh\necho '9|9|a1|alice|gpu|gres/gpu=8|{T0}|{T0}|Unknown|7-00:00:00|RUNNING|120|allot:min_runtime=3600'\n"
            ),
        )
        .unwrap();
        std::fs::set_permissions(&sacct, std::fs::Permissions::from_mode(0o755)).unwrap();
        let opts = SyncOptions {
            sacct: sacct.display().to_string(),
            overlap: 3600,
            first_start: T0 - 3600,
            batch: 100,
        };
        let mut ledger = Ledger::open(&dir.join("ledger.sqlite")).unwrap();
        let charging = Charging::new(fairshare::ContractPolicy::default(), Default::default());
        let now = T0 + WEEK;
        let stats = sync_once(
            &mut ledger,
            &charging,
            &opts,
            now,
            &mut LiveContracts::off(),
        )
        .unwrap();
        assert_eq!(stats.runaways, 1);
        assert!(
            stats.summary().contains("; 1 runaway record (warned"),
            "{}",
            stats.summary()
        );
        let u = ledger.reader().unwrap().usage(T0, now).unwrap();
        let a1 = u[&("a1".to_string(), "alice".to_string())];
        assert_eq!((a1.gpu_seconds, a1.charged), (8 * 7200, 8 * 7200 * 1000));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
