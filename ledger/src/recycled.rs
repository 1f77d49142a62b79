//! Recycled job ids: one `JobIDRaw`, two jobs.
//!
//! Slurm numbers jobs from `FirstJobId` to `MaxJobId` and starts again
//! when it wraps (or when slurmctld restarts without its saved state);
//! slurmdbd keeps the old records, so `sacct -D` can list two different
//! jobs, of different users and years apart, under one id. The records of
//! one id are, in submit order, attempts of one job or the start of
//! another. Rule ([`same_job`]): a record continues the job of the record
//! before it when it was submitted by the same user (either unknown counts
//! as the same) no later than [`REUSED_AFTER_SECS`] after that record
//! ended, or when that record has not ended. Why this tells them apart: a
//! requeue resubmits the job at once (its next record's `Submit` is the
//! requeue time, its previous record's `End`), and a resize starts its
//! next record at the resize (its previous `End`); an id is reused only
//! after its job ended and only once the counter came round, which takes
//! far longer than a day on any cluster that can wrap it, or after a
//! restart that lost state, when the next job of that id is another user's
//! or comes later in all but a rare case.
//!
//! The writer charges and numbers each job of an id on its own,
//! [`crate::LedgerReader::attempts_of_job`] returns the latest job of the
//! id (an older job of a recycled id is never shown as its attempt: under
//! `PrivateData` it may be another user's), and `allot sim` replays each
//! as a job of its own.

/// Seconds after a record's end within which a record of the same id and
/// user continues its job.
pub const REUSED_AFTER_SECS: i64 = 86_400;

/// True when a record of `next_user` submitted at `next_submit` (seconds
/// since the epoch) continues the job of the record before it of the same
/// id (`prev_user`, ended at `prev_end`; `None`: not ended). Module docs.
pub fn same_job(prev_user: &str, prev_end: Option<i64>, next_user: &str, next_submit: i64) -> bool {
    let users_differ = !prev_user.is_empty() && !next_user.is_empty() && prev_user != next_user;
    !users_differ && prev_end.is_none_or(|end| next_submit <= end.saturating_add(REUSED_AFTER_SECS))
}

/// Splits the records of one id, sorted by submit, into jobs: the index
/// of each job's first record (always starting with 0 for a non-empty
/// slice). `key` gives a record's (user, submit, end).
pub fn job_starts<T>(sorted: &[T], key: impl Fn(&T) -> (&str, i64, Option<i64>)) -> Vec<usize> {
    let mut starts = Vec::new();
    for (i, rec) in sorted.iter().enumerate() {
        let new_job = match i.checked_sub(1).map(|p| key(&sorted[p])) {
            None => true,
            Some((user, _, end)) => {
                let (next_user, submit, _) = key(rec);
                !same_job(user, end, next_user, submit)
            }
        };
        if new_job {
            starts.push(i);
        }
    }
    starts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requeues_and_resizes_continue_a_reused_id_does_not() {
        // A requeue: the next record is submitted at the previous end.
        assert!(same_job("alice", Some(1000), "alice", 1000));
        assert!(same_job(
            "alice",
            Some(1000),
            "alice",
            1000 + REUSED_AFTER_SECS
        ));
        // Still open (pending or running): nothing reuses its id.
        assert!(same_job("alice", None, "alice", 10_000_000));
        // Another user, or years later: another job.
        assert!(!same_job("alice", Some(1000), "bob", 1001));
        assert!(!same_job(
            "alice",
            Some(1000),
            "alice",
            1000 + 3 * 365 * 86_400
        ));
        // A dump without User: the time alone decides.
        assert!(same_job("", Some(1000), "bob", 1500));
        assert!(!same_job("", Some(1000), "", 1001 + REUSED_AFTER_SECS));
    }

    #[test]
    fn records_split_where_a_job_starts() {
        let recs = [
            ("alice", 0, Some(100)),
            ("alice", 100, Some(200)),             // requeued
            ("bob", 90_000_000, Some(90_000_100)), // the id, years later
            ("bob", 90_000_100, None),             // bob's job requeued, running
        ];
        assert_eq!(job_starts(&recs, |r| (r.0, r.1, r.2)), vec![0, 2]);
        assert_eq!(
            job_starts(&recs[..0], |r| (r.0, r.1, r.2)),
            Vec::<usize>::new()
        );
    }
}
