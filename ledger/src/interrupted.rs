//! [`InterruptedScan`]: the interrupted attempts of
//! [`LedgerReader::interrupted_attempts`], kept up to date incrementally
//! for the sidecar, which asks on every pass.
//!
//! A pass reads only what can have changed since the last one:
//! - the attempts added since (`id` above the last one seen; the ledger
//!   never deletes an attempt, and an attempt keeps its `id` when updated);
//! - the attempts that were still open at the last pass (few: the running
//!   and pending ones), which may have ended since.
//!
//! A new attempt of a job makes the job's earlier interrupted attempts
//! `requeued`. The one change this does not see is an attempt that had
//! already ended being rewritten (another state, account, times or minimum
//! runtime: a dump imported again with other settings). The writer counts
//! such rewrites in the ledger's `meta` table ([`ENDED_REWRITES`]); when the
//! count moved, the next pass starts over with a full scan.

use std::collections::BTreeSet;

use super::*;

/// `meta` key: how many write batches rewrote an ended attempt in a field
/// [`InterruptedAttempt`] holds. Written by [`Ledger::write_batch`], read
/// by [`InterruptedScan::update`].
pub(crate) const ENDED_REWRITES: &str = "ended_rewrites";

/// The SQL condition of an interrupted attempt's state, on table alias `a`.
pub(crate) const INTERRUPTED_STATE: &str =
    "(a.state = 'PREEMPTED' OR a.state LIKE 'REQUEUE%' OR a.state = 'NODE_FAIL')";

/// The columns [`interrupted_from_row`] reads, on table alias `a`: job id,
/// account, minimum runtime, state, start, end, and (for an ended
/// interrupted attempt) whether a later attempt of the job exists.
pub(crate) fn interrupted_columns() -> String {
    format!(
        "a.job_id, a.account, a.min_runtime, a.state, a.start, a.\"end\", \
         CASE WHEN a.\"end\" IS NOT NULL AND {INTERRUPTED_STATE} THEN \
         EXISTS (SELECT 1 FROM attempts b WHERE b.job_id = a.job_id AND b.submit > a.submit) \
         ELSE 0 END"
    )
}

/// The attempt of [`interrupted_columns`] read from `r` at column `at`.
pub(crate) fn interrupted_from_row(r: &Row<'_>, at: usize) -> rusqlite::Result<InterruptedAttempt> {
    Ok(InterruptedAttempt {
        job_id: r.get::<_, i64>(at)?.max(0) as u64,
        account: r.get(at + 1)?,
        min_runtime: r.get::<_, i64>(at + 2)?.max(0) as u64,
        state: r.get(at + 3)?,
        start: r.get(at + 4)?,
        end: r.get(at + 5)?,
        requeued: r.get(at + 6)?,
    })
}

/// The interrupted attempts of a ledger, updated incrementally: after
/// [`InterruptedScan::update`], [`InterruptedScan::attempts`] equals what
/// [`LedgerReader::interrupted_attempts`] returns, in the same order.
#[derive(Debug, Default)]
pub struct InterruptedScan {
    /// The ledger read (another one: start over).
    path: Option<PathBuf>,
    /// The largest attempt `id` read (0: nothing read yet).
    last_id: i64,
    /// Ids up to `last_id` of the attempts open (no end) when last read.
    open: BTreeSet<i64>,
    /// The writer's [`ENDED_REWRITES`] count at the last pass.
    rewrites: Option<i64>,
    /// The interrupted attempts by (job id, submit time).
    attempts: BTreeMap<(u64, i64), InterruptedAttempt>,
    /// How many attempts the last update read (for the tests).
    pub(crate) rows_read: usize,
}

impl InterruptedScan {
    /// An empty scan: its first [`InterruptedScan::update`] reads every
    /// attempt once.
    pub fn new() -> InterruptedScan {
        InterruptedScan::default()
    }

    /// The interrupted attempts as of the last update, by job id then
    /// submit time.
    pub fn attempts(&self) -> impl Iterator<Item = &InterruptedAttempt> {
        self.attempts.values()
    }

    /// How many interrupted attempts the scan holds.
    pub fn len(&self) -> usize {
        self.attempts.len()
    }

    /// True when the scan holds no interrupted attempt.
    pub fn is_empty(&self) -> bool {
        self.attempts.is_empty()
    }

    /// Brings the scan up to what `reader` sees now, reading only the
    /// attempts added since the last update and those open then (all of
    /// them after an ended attempt was rewritten, or on another ledger file),
    /// in one read transaction.
    ///
    /// # Errors
    /// SQLite errors (the scan then starts over at the next update).
    pub fn update(&mut self, reader: &LedgerReader) -> Result<()> {
        let result = self.read(reader);
        if result.is_err() {
            *self = InterruptedScan::default();
        }
        result
    }

    fn read(&mut self, reader: &LedgerReader) -> Result<()> {
        let sql = reader.sql();
        let tx = reader.conn.unchecked_transaction().map_err(&sql)?;
        let rewrites = meta_i64(&tx, ENDED_REWRITES).map_err(&sql)?.unwrap_or(0);
        let max_id: i64 = tx
            .query_row("SELECT coalesce(max(id), 0) FROM attempts", [], |r| {
                r.get(0)
            })
            .map_err(&sql)?;
        if self.rewrites != Some(rewrites)
            || max_id < self.last_id
            || self.path.as_deref() != Some(reader.path.as_path())
        {
            *self = InterruptedScan::default();
            self.path = Some(reader.path.clone());
        }
        self.rewrites = Some(rewrites);
        self.rows_read = 0;
        // id, job id, submit, whether it is open, and the attempt when it
        // ended interrupted (with whether a later attempt exists).
        let select = format!(
            "SELECT a.id, a.submit, a.\"end\" IS NULL, \
             a.\"end\" IS NOT NULL AND {INTERRUPTED_STATE}, {} FROM attempts a",
            interrupted_columns()
        );
        let row = |r: &Row<'_>| -> rusqlite::Result<Scanned> {
            let attempt = if r.get::<_, bool>(3)? {
                Some(interrupted_from_row(r, 4)?)
            } else {
                None
            };
            Ok(Scanned {
                id: r.get(0)?,
                job_id: r.get::<_, i64>(4)?.max(0) as u64,
                submit: r.get(1)?,
                open: r.get(2)?,
                attempt,
            })
        };
        // The attempts open at the last pass: ended since, or still open.
        let mut by_id = tx
            .prepare_cached(&format!("{select} WHERE a.id = ?1"))
            .map_err(&sql)?;
        for id in std::mem::take(&mut self.open) {
            if let Some(s) = by_id.query_row([id], row).optional().map_err(&sql)? {
                self.take(s, false);
            }
        }
        // The attempts added since.
        let mut added = tx
            .prepare_cached(&format!("{select} WHERE a.id > ?1 ORDER BY a.id"))
            .map_err(&sql)?;
        let rows = added.query_map([self.last_id], row).map_err(&sql)?;
        for s in rows {
            let s = s.map_err(&sql)?;
            self.last_id = self.last_id.max(s.id);
            self.take(s, true);
        }
        Ok(())
    }

    /// Files one attempt read from the ledger; `new`: added since the last
    /// pass, so the job's earlier interrupted attempts now have a later one.
    fn take(&mut self, s: Scanned, new: bool) {
        self.rows_read += 1;
        if new {
            for (_, a) in self
                .attempts
                .range_mut((s.job_id, i64::MIN)..(s.job_id, s.submit))
            {
                a.requeued = true;
            }
        }
        if s.open {
            self.open.insert(s.id);
        }
        match s.attempt {
            Some(a) => {
                self.attempts.insert((s.job_id, s.submit), a);
            }
            None => {
                self.attempts.remove(&(s.job_id, s.submit));
            }
        }
    }
}

/// One attempt as [`InterruptedScan`] reads it.
struct Scanned {
    id: i64,
    job_id: u64,
    submit: i64,
    open: bool,
    attempt: Option<InterruptedAttempt>,
}
