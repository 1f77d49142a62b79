//! The writer: creating the file (0640, SlurmUser's), the lock that keeps
//! one sync at a time, schema migrations and the batch writer.

use super::interrupted::ENDED_REWRITES;
use super::*;
use crate::charge::Charging;
use rusqlite::{params_from_iter, ToSql};

fn create_private(path: &Path) -> Result<()> {
    match OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o640)
        .open(path)
    {
        // 0640 whatever the umask (077 would leave SlurmUser's group out).
        Ok(_) => {
            std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o640))
                .map_err(|source| LedgerError::Io {
                    path: path.to_path_buf(),
                    source,
                })
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(source) => Err(LedgerError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Gives the ledger's files (the database, its `-wal`, `-shm` and `.lock`)
/// to `uid:gid`, mode 0640: `allot sync` run as root hands them to Slurm's
/// `SlurmUser` so that slurmctld's plugins can read them and other users
/// cannot. Missing files are skipped; files already owned so are left alone.
///
/// # Errors
/// chown or chmod failing.
pub fn set_owner(path: &Path, uid: u32, gid: u32) -> std::io::Result<()> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    for suffix in ["", "-wal", "-shm", ".lock"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let p = PathBuf::from(p);
        let meta = match std::fs::metadata(&p) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        if (meta.uid(), meta.gid()) != (uid, gid) {
            std::os::unix::fs::chown(&p, Some(uid), Some(gid))?;
        }
        if meta.mode() & 0o777 != 0o640 {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640))?;
        }
    }
    Ok(())
}

/// The lock file beside a ledger: `<ledger>.lock`.
pub fn lock_path(ledger: &Path) -> PathBuf {
    let mut s = ledger.as_os_str().to_owned();
    s.push(".lock");
    PathBuf::from(s)
}

/// The single writer of a ledger. Holds the writer lock until dropped.
pub struct Ledger {
    pub(crate) conn: Connection,
    pub(crate) path: PathBuf,
    pub(crate) _lock: File,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger").field("path", &self.path).finish()
    }
}

impl Ledger {
    /// Opens (creating it, mode 0640, if needed) the ledger at `path` for
    /// writing: takes the writer lock, switches to WAL, applies missing
    /// migrations.
    ///
    /// # Errors
    /// [`LedgerError::Locked`] when another writer runs; I/O, SQLite and
    /// [`LedgerError::NewerSchema`] errors.
    pub fn open(path: &Path) -> Result<Ledger> {
        let lock = lock_path(path);
        let io = |p: &Path| {
            let p = p.to_path_buf();
            move |source| LedgerError::Io { path: p, source }
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io(dir))?;
        }
        let mut lock_file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o640)
            .open(&lock)
            .map_err(io(&lock))?;
        // SAFETY: flock on a file descriptor we own; no memory is shared.
        let rc = unsafe { libc::flock(lock_file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let holder = std::fs::read_to_string(&lock)
                .unwrap_or_default()
                .trim()
                .to_string();
            let holder = if holder.is_empty() {
                "unknown pid".to_string()
            } else {
                holder
            };
            return Err(LedgerError::Locked {
                path: path.to_path_buf(),
                lock,
                holder,
            });
        }
        lock_file.set_len(0).map_err(io(&lock))?;
        writeln!(lock_file, "pid {}", std::process::id()).map_err(io(&lock))?;

        create_private(path)?;
        let sql = |source| LedgerError::Sqlite {
            path: path.to_path_buf(),
            error: source,
        };
        let conn = Connection::open(path).map_err(sql)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(sql)?;
        // Keep `-wal` and `-shm` when the writer closes: a reader without
        // write access to the directory (slurmctld's user) can open a WAL
        // database read-only only while both files exist.
        let mut persist: libc::c_int = 1;
        // SAFETY: a valid open connection handle, the "main" schema name as
        // a NUL-terminated string, and a pointer to an int, as
        // SQLITE_FCNTL_PERSIST_WAL requires.
        let rc = unsafe {
            rusqlite::ffi::sqlite3_file_control(
                conn.handle(),
                c"main".as_ptr(),
                rusqlite::ffi::SQLITE_FCNTL_PERSIST_WAL,
                (&mut persist as *mut libc::c_int).cast(),
            )
        };
        if rc != rusqlite::ffi::SQLITE_OK {
            tracing::warn!(path = %path.display(), rc, "cannot keep the WAL files; read-only readers fail while no writer runs");
        }
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(sql)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(sql)?;
        let mut ledger = Ledger {
            conn,
            path: path.to_path_buf(),
            _lock: lock_file,
        };
        ledger.migrate()?;
        Ok(ledger)
    }

    pub(crate) fn sql(&self) -> impl Fn(rusqlite::Error) -> LedgerError + '_ {
        move |source| LedgerError::Sqlite {
            path: self.path.clone(),
            error: source,
        }
    }

    fn migrate(&mut self) -> Result<()> {
        let path = self.path.clone();
        let sql = move |source| LedgerError::Sqlite {
            path: path.clone(),
            error: source,
        };
        let version = schema_version(&self.conn, &self.path)?;
        for (i, m) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            let tx = self.conn.transaction().map_err(&sql)?;
            tx.execute_batch(m).map_err(&sql)?;
            tx.pragma_update(None, "user_version", i as i64 + 1)
                .map_err(&sql)?;
            tx.commit().map_err(&sql)?;
            tracing::info!(path = %self.path.display(), version = i + 1, "ledger schema migrated");
        }
        Ok(())
    }

    /// The ledger file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The sync watermark: seconds since the epoch up to which sacct has
    /// been read, `None` before the first sync.
    ///
    /// # Errors
    /// SQLite errors.
    pub fn watermark(&self) -> Result<Option<i64>> {
        meta_i64(&self.conn, "watermark").map_err(self.sql())
    }

    /// Job ids (`JobIDRaw`) with an attempt still open (running or pending).
    ///
    /// # Errors
    /// SQLite errors.
    pub fn open_job_ids(&self) -> Result<Vec<u64>> {
        let mut st = self
            .conn
            .prepare("SELECT DISTINCT job_id FROM attempts WHERE \"end\" IS NULL ORDER BY job_id")
            .map_err(self.sql())?;
        let ids = st
            .query_map([], |r| r.get::<_, i64>(0))
            .map_err(self.sql())?;
        ids.map(|r| r.map(|v| v as u64))
            .collect::<rusqlite::Result<_>>()
            .map_err(self.sql())
    }

    /// The attempts still open that started (running, as the ledger last
    /// read them), by job id.
    ///
    /// # Errors
    /// SQLite errors.
    pub fn open_attempts(&self) -> Result<Vec<AttemptRecord>> {
        let mut st = self
            .conn
            .prepare(&format!(
                "SELECT {COLUMNS} FROM attempts WHERE \"end\" IS NULL AND start IS NOT NULL ORDER BY job_id, submit"
            ))
            .map_err(self.sql())?;
        let rows = st
            .query_map([], |r| record_from_row(r, 0))
            .map_err(self.sql())?;
        rows.collect::<rusqlite::Result<_>>().map_err(self.sql())
    }

    /// Writes `records` in one transaction: new attempts are inserted,
    /// changed ones updated, identical ones left alone, and the buckets
    /// follow. Each job's attempts are charged together by `charging`
    /// ([`Charging::charge_job`]): with the attempts of the job the ledger
    /// already holds, so an attempt's charged tail is cut at its job's next
    /// start and a resized run pays its minimum runtime once, whichever
    /// batch brings which attempt; a stored attempt whose charge changes
    /// so is rewritten (counted `updated`). With `watermark`, the watermark
    /// is moved in the same transaction (never backwards), so a crash loses
    /// nothing: the next run starts from the last committed watermark.
    ///
    /// # Errors
    /// SQLite errors (the transaction is rolled back).
    pub fn write_batch(
        &mut self,
        records: &[AttemptRecord],
        watermark: Option<i64>,
        charging: &Charging,
    ) -> Result<BatchStats> {
        let path = self.path.clone();
        let sql = move |source| LedgerError::Sqlite {
            path: path.clone(),
            error: source,
        };
        let tx = if self.conn.is_autocommit() {
            BatchTx::Own(
                self.conn
                    .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                    .map_err(&sql)?,
            )
        } else {
            // Inside `all_or_nothing`: a savepoint of its transaction.
            BatchTx::Inside(self.conn.savepoint().map_err(&sql)?)
        };
        let mut stats = BatchStats::default();
        let mut deltas = Deltas::new();
        let mut max_seg = meta_i64(&tx, "max_segment").map_err(&sql)?.unwrap_or(0);
        // Whether an ended attempt changed in a field an InterruptedScan
        // holds: it then starts over (interrupted.rs).
        let mut ended_rewritten = false;
        // The batch's records by job, in first-seen order.
        let mut jobs: Vec<(u64, Vec<&AttemptRecord>)> = Vec::new();
        {
            let mut at: HashMap<u64, usize> = HashMap::new();
            for rec in records {
                let i = *at.entry(rec.job_id).or_insert_with(|| {
                    jobs.push((rec.job_id, Vec::new()));
                    jobs.len() - 1
                });
                jobs[i].1.push(rec);
            }
        }
        {
            // Every attempt of the job in one index seek.
            let mut same_job = tx
                .prepare_cached(&format!(
                    "SELECT id, {COLUMNS}, attempt FROM attempts WHERE job_id = ?1"
                ))
                .map_err(&sql)?;
            let mut insert = tx
                .prepare_cached(&format!(
                    "INSERT INTO attempts (attempt, {COLUMNS}) VALUES \
                     (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22)"
                ))
                .map_err(&sql)?;
            let mut update = tx
                .prepare_cached(
                    "UPDATE attempts SET label=?2, array_job=?3, array_task=?4, het_job=?5, het_offset=?6, \
                     account=?7, user=?8, partition=?9, gpus=?10, rate=?11, start=?12, \"end\"=?13, elapsed=?14, \
                     state=?15, min_runtime=?16, min_runtime_recorded=?17, charge_end=?18, charged=?19, time_limit=?20 WHERE id=?1",
                )
                .map_err(&sql)?;
            let mut renumber = tx
                .prepare_cached("UPDATE attempts SET attempt = ?2 WHERE id = ?1")
                .map_err(&sql)?;
            for (job_id, incoming) in &jobs {
                // The job's attempts, stored and incoming (an incoming one
                // replaces the stored one of its submit time).
                let mut all: Vec<JobAttempt> = Vec::new();
                let mut rows = same_job.query(params![*job_id as i64]).map_err(&sql)?;
                while let Some(r) = rows.next().map_err(&sql)? {
                    let old = record_from_row(r, 1).map_err(&sql)?;
                    all.push(JobAttempt {
                        id: Some(r.get::<_, i64>(0).map_err(&sql)?),
                        number: Some(r.get::<_, i64>(22).map_err(&sql)?),
                        new: old.clone(),
                        old: Some(old),
                        incoming: false,
                    });
                }
                drop(rows);
                for rec in incoming {
                    match all.iter_mut().find(|a| a.new.submit == rec.submit) {
                        // An attempt that ended does not run again: a row
                        // that has it running (or pending) was read before
                        // the one that ended it (an older dump imported after
                        // a newer one, or a dump listing the job twice), and
                        // would charge it up to now.
                        Some(a) if a.new.end.is_some() && rec.end.is_none() => {
                            tracing::warn!(
                                job = rec.job_id,
                                submit = rec.submit,
                                ended = a.new.end,
                                state = %rec.state,
                                "a row has this attempt still running, but it ended (in the ledger or an earlier row); \
                                 the ended record is kept: was an older dump imported after a newer one?"
                            );
                            stats.superseded += 1;
                        }
                        Some(a) => {
                            if let Some(what) = a
                                .old
                                .as_ref()
                                .filter(|o| o.end.is_some() && !a.incoming)
                                .and_then(|o| correction(o, rec))
                            {
                                // An ended attempt is never reopened (above),
                                // but its record may be corrected.
                                tracing::info!(
                                    job = rec.job_id,
                                    submit = rec.submit,
                                    "slurmdbd's record of this ended attempt changed ({what}); its charge follows the correction"
                                );
                                stats.corrected += 1;
                            }
                            if a.incoming {
                                // Two rows of one attempt in the batch: the
                                // later one is written.
                                if a.new != **rec {
                                    tracing::warn!(
                                        job = rec.job_id,
                                        submit = rec.submit,
                                        "the input lists this attempt twice, with different fields; the later row is kept"
                                    );
                                }
                                stats.superseded += 1;
                            }
                            a.new = (*rec).clone();
                            a.incoming = true;
                        }
                        None => {
                            if let Some(other) = all.iter().find(|a| overlap(&a.new, rec)) {
                                // Attempts of one job follow each other; two
                                // that overlap are one attempt read twice with
                                // shifted clocks (a dump imported again with
                                // another --timezone), charged twice.
                                tracing::warn!(
                                    job = rec.job_id,
                                    submit = rec.submit,
                                    other_submit = other.new.submit,
                                    "this attempt overlaps another attempt of the same job in time; \
                                     was the same history imported with another --timezone? Both are kept"
                                );
                            }
                            all.push(JobAttempt {
                                id: None,
                                number: None,
                                new: (*rec).clone(),
                                old: None,
                                incoming: true,
                            });
                        }
                    }
                }
                all.sort_by_key(|a| a.new.submit);
                let mut charged: Vec<AttemptRecord> = all.iter().map(|a| a.new.clone()).collect();
                // Each job of the id (a recycled id names several:
                // recycled.rs) is charged and numbered on its own.
                let starts =
                    crate::recycled::job_starts(&charged, |r| (r.user.as_str(), r.submit, r.end));
                let mut numbers = vec![0i64; charged.len()];
                for (k, &from) in starts.iter().enumerate() {
                    let to = starts.get(k + 1).copied().unwrap_or(charged.len());
                    charging.charge_job(&mut charged[from..to]);
                    for (i, n) in numbers[from..to].iter_mut().enumerate() {
                        *n = i as i64;
                    }
                }
                for ((a, rec), number) in all.iter().zip(&charged).zip(numbers) {
                    match (&a.old, a.id) {
                        (Some(o), Some(id)) => {
                            if a.number != Some(number) {
                                renumber.execute(params![id, number]).map_err(&sql)?;
                            }
                            if o == rec {
                                if a.incoming {
                                    stats.unchanged += 1;
                                }
                                continue;
                            }
                            ended_rewritten |= o.end.is_some()
                                && (o.account != rec.account
                                    || o.min_runtime != rec.min_runtime
                                    || o.state != rec.state
                                    || o.start != rec.start
                                    || o.end != rec.end);
                            for (f, s) in segments(o).into_iter().enumerate() {
                                if let Some(s) = s {
                                    bucket_deltas(&mut deltas, &o.account, &o.user, f, s, -1);
                                }
                            }
                            with_columns(rec, |cols| {
                                let key: [&dyn ToSql; 1] = [&id];
                                update.execute(params_from_iter(key.iter().chain(cols)))
                            })
                            .map_err(&sql)?;
                            stats.updated += 1;
                        }
                        _ => {
                            with_columns(rec, |cols| {
                                let key: [&dyn ToSql; 3] =
                                    [&number, &(rec.job_id as i64), &rec.submit];
                                insert.execute(params_from_iter(key.iter().chain(cols)))
                            })
                            .map_err(&sql)?;
                            stats.inserted += 1;
                        }
                    }
                    for (f, s) in segments(rec).into_iter().enumerate() {
                        if let Some(s) = s {
                            if let Some(e) = s.end {
                                max_seg = max_seg.max(e - s.start);
                            }
                            bucket_deltas(&mut deltas, &rec.account, &rec.user, f, s, 1);
                        }
                    }
                }
            }
            let mut bump = tx
                .prepare_cached(
                    "INSERT INTO buckets VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) \
                     ON CONFLICT (hour, account, user) DO UPDATE SET \
                     charged = charged + excluded.charged, charged_active = charged_active + excluded.charged_active, \
                     gpu = gpu + excluded.gpu, gpu_active = gpu_active + excluded.gpu_active, \
                     unalloc = unalloc + excluded.unalloc, unalloc_active = unalloc_active + excluded.unalloc_active",
                )
                .map_err(&sql)?;
            let mut drop_empty = tx
                .prepare_cached(
                    "DELETE FROM buckets WHERE hour = ?1 AND account = ?2 AND user = ?3 AND charged = 0 \
                     AND charged_active = 0 AND gpu = 0 AND gpu_active = 0 AND unalloc = 0 AND unalloc_active = 0",
                )
                .map_err(&sql)?;
            let buckets = deltas.iter().flat_map(|(a, users)| {
                users
                    .iter()
                    .flat_map(move |(u, hours)| hours.iter().map(move |(h, d)| (h, a, u, d)))
            });
            for (h, a, u, d) in buckets {
                if d.iter().all(|v| *v == 0) {
                    continue;
                }
                bump.execute(params![h, a, u, d[0], d[1], d[2], d[3], d[4], d[5]])
                    .map_err(&sql)?;
                if d.iter().any(|v| *v < 0) {
                    drop_empty.execute(params![h, a, u]).map_err(&sql)?;
                }
            }
        }
        set_meta(&tx, "max_segment", max_seg).map_err(&sql)?;
        if ended_rewritten {
            let n = meta_i64(&tx, ENDED_REWRITES).map_err(&sql)?.unwrap_or(0);
            set_meta(&tx, ENDED_REWRITES, n + 1).map_err(&sql)?;
        }
        if let Some(w) = watermark {
            let old = meta_i64(&tx, "watermark")
                .map_err(&sql)?
                .unwrap_or(i64::MIN);
            set_meta(&tx, "watermark", w.max(old)).map_err(&sql)?;
        }
        tx.commit().map_err(&sql)?;
        Ok(stats)
    }

    /// Runs `f` as one transaction: every batch it writes
    /// ([`Ledger::write_batch`]) is committed together when it returns
    /// `Ok`, and none is when it returns an error (or panics: the
    /// connection then closes with the transaction open, which SQLite rolls
    /// back). A dump import runs in it, so an import is all or nothing.
    /// Readers on other connections see the ledger as it was until the
    /// commit.
    ///
    /// # Errors
    /// `f`'s error; SQLite errors beginning or committing (rolled back).
    pub fn all_or_nothing<T, E: From<LedgerError>>(
        &mut self,
        f: impl FnOnce(&mut Ledger) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        self.conn
            .execute_batch("BEGIN IMMEDIATE")
            .map_err(self.sql())?;
        match f(self) {
            Ok(v) => match self.conn.execute_batch("COMMIT").map_err(self.sql()) {
                Ok(()) => Ok(v),
                Err(e) => {
                    self.rollback();
                    Err(e.into())
                }
            },
            Err(e) => {
                self.rollback();
                Err(e)
            }
        }
    }

    fn rollback(&mut self) {
        if !self.conn.is_autocommit() {
            if let Err(e) = self.conn.execute_batch("ROLLBACK") {
                tracing::warn!(path = %self.path.display(), "cannot roll back: {e}; the connection's close rolls back");
            }
        }
    }

    /// A reader on the same file (for a report right after a sync).
    ///
    /// # Errors
    /// As [`LedgerReader::open`].
    pub fn reader(&self) -> Result<LedgerReader> {
        LedgerReader::open(&self.path)
    }
}

/// One attempt of a job being written: as stored (`old`, with its row id
/// and number) and as it will be (`new`, from the batch when `incoming`).
struct JobAttempt {
    id: Option<i64>,
    number: Option<i64>,
    old: Option<AttemptRecord>,
    new: AttemptRecord,
    incoming: bool,
}

/// True when two attempts' run times `[start, end)` overlap (an open end
/// runs on).
fn overlap(a: &AttemptRecord, b: &AttemptRecord) -> bool {
    match (a.start, a.end, b.start) {
        (Some(s), Some(e), Some(bs)) => bs < e && b.end.is_none_or(|be| be > s),
        _ => false,
    }
}

/// Calls `f` with an attempt's columns after its key (`label` ..
/// `charged`), in the order of the writer's INSERT and UPDATE statements.
/// What slurmdbd changed in an ended attempt's record, as `End 100 -> 200,
/// GPUs 2 -> 4`; `None` when nothing it prints changed (the charge
/// alone may change with the config's rules, which is no correction).
fn correction(old: &AttemptRecord, new: &AttemptRecord) -> Option<String> {
    let mut what = Vec::new();
    let mut diff = |name: &str, a: String, b: String| {
        if a != b {
            what.push(format!("{name} {a} -> {b}"));
        }
    };
    let t = |v: Option<i64>| v.map_or("Unknown".to_string(), |v| v.to_string());
    diff("Start", t(old.start), t(new.start));
    diff("End", t(old.end), t(new.end));
    diff("GPUs", old.gpus.to_string(), new.gpus.to_string());
    diff("Account", old.account.clone(), new.account.clone());
    diff("User", old.user.clone(), new.user.clone());
    diff("State", old.state.clone(), new.state.clone());
    (!what.is_empty()).then(|| what.join(", "))
}

fn with_columns<R>(rec: &AttemptRecord, f: impl FnOnce(&[&dyn ToSql]) -> R) -> R {
    let (array_job, het_job) = (
        rec.array_job.map(|v| v as i64),
        rec.het_job.map(|v| v as i64),
    );
    let (gpus, rate, elapsed) = (
        rec.gpus as i64,
        rec.rate as i64,
        rec.elapsed.map(|v| v as i64),
    );
    let (min_runtime, recorded, charged, time_limit) = (
        rec.min_runtime as i64,
        i64::from(rec.min_runtime_recorded),
        rec.charged as i64,
        rec.time_limit.map(|v| v.min(i64::MAX as u64) as i64),
    );
    f(&[
        &rec.label,
        &array_job,
        &rec.array_task,
        &het_job,
        &rec.het_offset,
        &rec.account,
        &rec.user,
        &rec.partition,
        &gpus,
        &rate,
        &rec.start,
        &rec.end,
        &elapsed,
        &rec.state,
        &min_runtime,
        &recorded,
        &rec.charge_end,
        &charged,
        &time_limit,
    ])
}

/// The transaction of one batch: its own (`BEGIN IMMEDIATE`), or a
/// savepoint inside [`Ledger::all_or_nothing`]'s.
enum BatchTx<'c> {
    Own(rusqlite::Transaction<'c>),
    Inside(rusqlite::Savepoint<'c>),
}

impl std::ops::Deref for BatchTx<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        match self {
            BatchTx::Own(t) => t,
            BatchTx::Inside(s) => s,
        }
    }
}

impl BatchTx<'_> {
    fn commit(self) -> rusqlite::Result<()> {
        match self {
            BatchTx::Own(t) => t.commit(),
            BatchTx::Inside(s) => s.commit(),
        }
    }
}
