//! The read-only view the plugins and reports use.

use super::*;

/// A read-only view of a ledger, for the plugins and reports. Never blocks
/// the writer; sees the last committed sync.
pub struct LedgerReader {
    pub(crate) conn: Connection,
    pub(crate) path: PathBuf,
    /// What a stored charge is multiplied by to read milli-units: 1000 for
    /// a ledger older than [`MILLI_SCHEMA`] that no writer has migrated
    /// yet (the plugins upgraded before the sidecar), else 1.
    pub(crate) milli: u64,
    /// The attempt columns it selects: [`COLUMNS`], or
    /// [`columns_before_5`] for a ledger no writer has migrated to schema 5
    /// yet (its attempts read without a time limit).
    pub(crate) columns: std::borrow::Cow<'static, str>,
}

impl std::fmt::Debug for LedgerReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LedgerReader")
            .field("path", &self.path)
            .finish()
    }
}

impl LedgerReader {
    /// Opens the ledger at `path` read-only.
    ///
    /// # Errors
    /// [`LedgerError::Missing`] when there is no initialised ledger there,
    /// [`LedgerError::NewerSchema`], SQLite errors.
    pub fn open(path: &Path) -> Result<LedgerReader> {
        let (conn, version) = open_existing(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY
                | OpenFlags::SQLITE_OPEN_NO_MUTEX
                | OpenFlags::SQLITE_OPEN_URI,
        )?;
        if version == 0 {
            return Err(LedgerError::Missing {
                path: path.to_path_buf(),
                found: 0,
            });
        }
        Ok(LedgerReader {
            conn,
            path: path.to_path_buf(),
            columns: if version < 5 {
                columns_before_5().into()
            } else {
                COLUMNS.into()
            },
            milli: if version < MILLI_SCHEMA {
                fairshare::charge::MILLI_PER_UNIT
            } else {
                1
            },
        })
    }

    /// `rec` with its rate and charge in milli-units ([`Self::milli`]).
    fn in_milli(&self, mut rec: AttemptRecord) -> AttemptRecord {
        rec.rate = rec.rate.saturating_mul(self.milli);
        rec.charged = rec.charged.saturating_mul(self.milli);
        rec
    }

    pub(crate) fn sql(&self) -> impl Fn(rusqlite::Error) -> LedgerError + '_ {
        move |source| LedgerError::Sqlite {
            path: self.path.clone(),
            error: source,
        }
    }

    /// The sync watermark (seconds since the epoch), `None` before the
    /// first sync.
    ///
    /// # Errors
    /// SQLite errors.
    pub fn watermark(&self) -> Result<Option<i64>> {
        meta_i64(&self.conn, "watermark").map_err(self.sql())
    }

    /// Charged milli-unit-seconds (1000 per GPU-second with default
    /// weights) per account
    /// inside `[start, end)` (seconds since the epoch). Running attempts
    /// count up to `end`: pass `end <= now`.
    ///
    /// # Errors
    /// SQLite errors.
    pub fn charged_by_account(&self, start: i64, end: i64) -> Result<BTreeMap<String, u64>> {
        let mut out = BTreeMap::new();
        for ((account, _), u) in self.usage(start, end)? {
            *out.entry(account).or_insert(0) += u.charged;
        }
        Ok(out)
    }

    /// [`Usage`] per (account, user) inside `[start, end)` (seconds since
    /// the epoch), exact to the second. Running attempts count up to `end`
    /// (pass `end <= now`); a charged interval that reaches past `end` (a
    /// minimum runtime not yet served) counts only up to `end`. Pairs with
    /// no usage at all are left out.
    ///
    /// # Errors
    /// SQLite errors.
    pub fn usage(&self, start: i64, end: i64) -> Result<BTreeMap<(String, String), Usage>> {
        let cols = &*self.columns;
        let mut acc: HashMap<(String, String), [i128; 3]> = HashMap::new();
        if end > start {
            let hs = start.div_euclid(BUCKET_SECS);
            let he = end.div_euclid(BUCKET_SECS);
            {
                let mut st = self
                    .conn
                    .prepare_cached(
                        "SELECT account, user, sum(charged), sum(gpu), sum(unalloc) FROM buckets \
                         WHERE hour >= ?1 AND hour < ?2 GROUP BY account, user",
                    )
                    .map_err(self.sql())?;
                let mut rows = st.query(params![hs, he]).map_err(self.sql())?;
                while let Some(r) = rows.next().map_err(self.sql())? {
                    let e = acc
                        .entry((r.get(0).map_err(self.sql())?, r.get(1).map_err(self.sql())?))
                        .or_default();
                    for (f, v) in e.iter_mut().enumerate() {
                        *v += i128::from(r.get::<_, i64>(2 + f).map_err(self.sql())?);
                    }
                }
            }
            self.partial(hs, start, -1, &mut acc)?;
            self.partial(he, end, 1, &mut acc)?;
            // Running attempts.
            let mut st = self
                .conn
                .prepare_cached(&format!(
                    "SELECT {cols} FROM attempts WHERE \"end\" IS NULL AND start IS NOT NULL AND start < ?1"
                ))
                .map_err(self.sql())?;
            let rows = st
                .query_map([end], |r| record_from_row(r, 0))
                .map_err(self.sql())?;
            for rec in rows {
                let rec = rec.map_err(self.sql())?;
                let e = acc
                    .entry((rec.account.clone(), rec.user.clone()))
                    .or_default();
                // Up to `end`, but never past start + time limit (a runaway).
                let until = rec.open_until().map_or(end, |u| u.min(end));
                for (f, s) in segments(&rec).into_iter().enumerate() {
                    if let Some(s) = s {
                        e[f] += i128::from(s.rate) * i128::from(len(s.start.max(start), until));
                    }
                }
            }
        }
        let clamp = |v: i128| u64::try_from(v.max(0)).unwrap_or(u64::MAX);
        Ok(acc
            .into_iter()
            .map(|(k, v)| {
                (
                    k,
                    Usage {
                        charged: clamp(v[0]).saturating_mul(self.milli),
                        gpu_seconds: clamp(v[1]),
                        unallocated: clamp(v[2]),
                    },
                )
            })
            .filter(|(_, u)| *u != Usage::default())
            .collect())
    }

    /// Adds `sign x` the closed-segment usage inside `[hour start, t)`.
    fn partial(
        &self,
        hour: i64,
        t: i64,
        sign: i128,
        acc: &mut HashMap<(String, String), [i128; 3]>,
    ) -> Result<()> {
        let h0 = hour * BUCKET_SECS;
        let cols = &*self.columns;
        if t <= h0 {
            return Ok(());
        }
        {
            let mut st = self
                .conn
                .prepare_cached(
                    "SELECT account, user, charged_active, gpu_active, unalloc_active FROM buckets WHERE hour = ?1",
                )
                .map_err(self.sql())?;
            let mut rows = st.query([hour]).map_err(self.sql())?;
            while let Some(r) = rows.next().map_err(self.sql())? {
                let e = acc
                    .entry((r.get(0).map_err(self.sql())?, r.get(1).map_err(self.sql())?))
                    .or_default();
                for (f, v) in e.iter_mut().enumerate() {
                    *v += sign
                        * i128::from(r.get::<_, i64>(2 + f).map_err(self.sql())?)
                        * i128::from(t - h0);
                }
            }
        }
        // Segments starting inside (h0, t): + rate x overlap.
        // Segments active at h0 ending inside (h0, t): - rate x (t - end).
        let queries = [
            format!("SELECT {cols} FROM attempts WHERE start > ?1 AND start < ?2 AND \"end\" IS NOT NULL"),
            format!("SELECT {cols} FROM attempts WHERE \"end\" > ?1 AND \"end\" < ?2 AND start <= ?1"),
            format!("SELECT {cols} FROM attempts WHERE charge_end > ?1 AND charge_end < ?2 AND start <= ?1"),
        ];
        for (q, text) in queries.iter().enumerate() {
            let mut st = self.conn.prepare_cached(text).map_err(self.sql())?;
            let rows = st
                .query_map(params![h0, t], |r| record_from_row(r, 0))
                .map_err(self.sql())?;
            for rec in rows {
                let rec = rec.map_err(self.sql())?;
                let segs = segments(&rec);
                let e = acc
                    .entry((rec.account.clone(), rec.user.clone()))
                    .or_default();
                for (f, s) in segs.into_iter().enumerate() {
                    let Some(Segment {
                        start: s0,
                        end: Some(e0),
                        rate,
                    }) = s
                    else {
                        continue;
                    };
                    if e0 <= s0 {
                        continue;
                    }
                    let rate = i128::from(rate);
                    match q {
                        0 => e[f] += sign * rate * i128::from(len(s0, e0.min(t))),
                        // Query 1 covers the gpu and unallocated segments (end = job end),
                        // query 2 the charged one (end = charge_end).
                        1 if f != 0 && e0 > h0 && e0 < t => {
                            e[f] -= sign * rate * i128::from(t - e0)
                        }
                        2 if f == 0 && e0 > h0 && e0 < t => {
                            e[f] -= sign * rate * i128::from(t - e0)
                        }
                        _ => {}
                    }
                }
            }
        }
        Ok(())
    }

    /// Attempts with any segment (charged or held) overlapping
    /// `[start, end)` (seconds since the epoch), running ones included,
    /// ordered by start. For building an engine's usage tracker.
    ///
    /// # Errors
    /// SQLite errors.
    pub fn attempts_overlapping(&self, start: i64, end: i64) -> Result<Vec<StoredAttempt>> {
        let cols = &*self.columns;
        let max_seg = meta_i64(&self.conn, "max_segment")
            .map_err(self.sql())?
            .unwrap_or(0);
        let mut st = self
            .conn
            .prepare_cached(&format!(
                "SELECT attempt, {cols} FROM attempts WHERE start >= ?1 AND start < ?2 \
                 AND (\"end\" IS NULL OR \"end\" > ?3 OR charge_end > ?3) \
                 UNION SELECT attempt, {cols} FROM attempts WHERE \"end\" IS NULL AND start IS NOT NULL AND start < ?2 \
                 ORDER BY start, job_id, submit"
            ))
            .map_err(self.sql())?;
        let rows = st
            .query_map(params![start.saturating_sub(max_seg), end, start], |r| {
                Ok(StoredAttempt {
                    attempt: r.get::<_, i64>(0)? as u32,
                    record: self.in_milli(record_from_row(r, 1)?),
                })
            })
            .map_err(self.sql())?;
        rows.collect::<rusqlite::Result<_>>().map_err(self.sql())
    }

    /// Running and pending attempts per account, as of the last sync.
    ///
    /// # Errors
    /// SQLite errors.
    pub fn open_counts(&self) -> Result<BTreeMap<String, OpenCounts>> {
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT account, sum(start IS NOT NULL), sum(start IS NULL) FROM attempts \
                 WHERE \"end\" IS NULL GROUP BY account",
            )
            .map_err(self.sql())?;
        let rows = st
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    OpenCounts {
                        running: r.get::<_, i64>(1)? as u64,
                        pending: r.get::<_, i64>(2)? as u64,
                    },
                ))
            })
            .map_err(self.sql())?;
        rows.collect::<rusqlite::Result<_>>().map_err(self.sql())
    }

    /// Open attempts and their GPUs per (account, free tier), as of the
    /// last sync: free tier = minimum runtime 0. For the sidecar's metrics.
    ///
    /// # Errors
    /// SQLite errors.
    pub fn open_gpus(&self) -> Result<BTreeMap<(String, bool), OpenGpus>> {
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT account, min_runtime = 0, sum(start IS NOT NULL), sum(start IS NULL), \
                 sum(CASE WHEN start IS NOT NULL THEN gpus ELSE 0 END), \
                 sum(CASE WHEN start IS NULL THEN gpus ELSE 0 END) FROM attempts \
                 WHERE \"end\" IS NULL GROUP BY account, min_runtime = 0",
            )
            .map_err(self.sql())?;
        let rows = st
            .query_map([], |r| {
                Ok((
                    (r.get::<_, String>(0)?, r.get::<_, bool>(1)?),
                    OpenGpus {
                        running: r.get::<_, i64>(2)?.max(0) as u64,
                        pending: r.get::<_, i64>(3)?.max(0) as u64,
                        running_gpus: r.get::<_, i64>(4)?.max(0) as u64,
                        pending_gpus: r.get::<_, i64>(5)?.max(0) as u64,
                    },
                ))
            })
            .map_err(self.sql())?;
        rows.collect::<rusqlite::Result<_>>().map_err(self.sql())
    }

    /// Ended attempts whose state says the job was interrupted
    /// (`PREEMPTED`, `REQUEUED`/`REQUEUE_HOLD`/`REQUEUE_FED`, `NODE_FAIL`),
    /// by job id then submit time, each with whether a later attempt of
    /// the same job is in the ledger (the job went back to the queue). For
    /// the sidecar's requeue and preemption metrics. Reads every interrupted
    /// attempt: [`crate::InterruptedScan`] keeps the same list up to date
    /// reading only what changed.
    ///
    /// # Errors
    /// SQLite errors.
    pub fn interrupted_attempts(&self) -> Result<Vec<InterruptedAttempt>> {
        let mut st = self
            .conn
            .prepare_cached(&format!(
                "SELECT {} FROM attempts a WHERE a.\"end\" IS NOT NULL AND {} \
                 ORDER BY a.job_id, a.submit",
                super::interrupted::interrupted_columns(),
                super::interrupted::INTERRUPTED_STATE
            ))
            .map_err(self.sql())?;
        let rows = st
            .query_map([], |r| super::interrupted::interrupted_from_row(r, 0))
            .map_err(self.sql())?;
        rows.collect::<rusqlite::Result<_>>().map_err(self.sql())
    }

    /// How many attempts (rows of the `attempts` table) the ledger holds.
    ///
    /// # Errors
    /// SQLite errors.
    pub fn attempt_count(&self) -> Result<u64> {
        self.conn
            .query_row("SELECT count(*) FROM attempts", [], |r| r.get::<_, i64>(0))
            .map(|n| n.max(0) as u64)
            .map_err(self.sql())
    }

    /// The attempts of the job with raw job id `job_id`, oldest first: of
    /// the latest job with that id when Slurm reused it (an older job of a
    /// recycled id is another job, maybe another user's:
    /// [`crate::recycled`]). For `allot explain`.
    ///
    /// # Errors
    /// SQLite errors.
    pub fn attempts_of_job(&self, job_id: u64) -> Result<Vec<StoredAttempt>> {
        let cols = &*self.columns;
        let mut st = self
            .conn
            .prepare(&format!(
                "SELECT attempt, {cols} FROM attempts WHERE job_id = ?1 ORDER BY submit"
            ))
            .map_err(self.sql())?;
        let rows = st
            .query_map([job_id as i64], |r| {
                Ok(StoredAttempt {
                    attempt: r.get::<_, i64>(0)? as u32,
                    record: self.in_milli(record_from_row(r, 1)?),
                })
            })
            .map_err(self.sql())?;
        let mut all: Vec<StoredAttempt> =
            rows.collect::<rusqlite::Result<_>>().map_err(self.sql())?;
        let starts = crate::recycled::job_starts(&all, |a| {
            (a.record.user.as_str(), a.record.submit, a.record.end)
        });
        Ok(all.split_off(starts.last().copied().unwrap_or(0)))
    }

    /// Every attempt, by job id then attempt index: for dumps and tests.
    ///
    /// # Errors
    /// SQLite errors.
    pub fn all_attempts(&self) -> Result<Vec<StoredAttempt>> {
        let cols = &*self.columns;
        let mut st = self
            .conn
            .prepare(&format!(
                "SELECT attempt, {cols} FROM attempts ORDER BY job_id, submit"
            ))
            .map_err(self.sql())?;
        let rows = st
            .query_map([], |r| {
                Ok(StoredAttempt {
                    attempt: r.get::<_, i64>(0)? as u32,
                    record: self.in_milli(record_from_row(r, 1)?),
                })
            })
            .map_err(self.sql())?;
        rows.collect::<rusqlite::Result<_>>().map_err(self.sql())
    }

    /// A deterministic text dump of attempts and non-empty buckets (not the
    /// watermark): two ledgers holding the same data dump identically.
    ///
    /// # Errors
    /// SQLite errors.
    pub fn dump(&self) -> Result<String> {
        let mut out = String::new();
        for a in self.all_attempts()? {
            out.push_str(&serde_json::to_string(&a).expect("serialisable"));
            out.push('\n');
        }
        let mut st = self
            .conn
            .prepare("SELECT * FROM buckets WHERE charged != 0 OR charged_active != 0 OR gpu != 0 OR gpu_active != 0 OR unalloc != 0 OR unalloc_active != 0 ORDER BY hour, account, user")
            .map_err(self.sql())?;
        let mut rows = st.query([]).map_err(self.sql())?;
        while let Some(r) = rows.next().map_err(self.sql())? {
            let h: i64 = r.get(0).map_err(self.sql())?;
            let a: String = r.get(1).map_err(self.sql())?;
            let u: String = r.get(2).map_err(self.sql())?;
            let v: Vec<i64> = (3..9)
                .map(|i| r.get(i))
                .collect::<rusqlite::Result<_>>()
                .map_err(self.sql())?;
            out.push_str(&format!("bucket {h} {a} {u} {v:?}\n"));
        }
        Ok(out)
    }
}
