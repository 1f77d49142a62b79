//! The ledger: SQLite (WAL) file of job attempts and their charges.
//!
//! - One row per job *attempt*, keyed by (`JobIDRaw`, submit time): a
//!   requeue resubmits, so each attempt has its own submit time. `attempt`
//!   numbers a job's attempts 0, 1, ... by submit time.
//! - Every time is seconds since the Unix epoch (UTC); every charge is in
//!   unit-seconds (GPU-seconds with the default `[charge]` weights).
//! - Per-(account, user) hourly buckets hold, for *closed* attempts, the
//!   unit-seconds inside each hour and the rate active at the hour's first
//!   second. A window query reads the buckets of its whole hours, corrects
//!   its two partial edge hours from the few attempts that start or end in
//!   them, and adds running attempts: exact to the second, and independent
//!   of how much history the ledger holds.
//! - One writer ([`Ledger`]) holds an exclusive `flock` on `<ledger>.lock`;
//!   a second writer is refused at once with [`LedgerError::Locked`].
//!   Readers ([`LedgerReader`]) open the file read-only and never block the
//!   writer (WAL).
//! - The schema version is SQLite's `user_version`; [`Ledger::open`]
//!   applies the missing migrations, a reader refuses a ledger it does not
//!   know.
//!
//! Three quantities are tracked, each a set of intervals `[start, end)` at
//! a rate:
//! - **charged**: `[start, charge_end)` at the charge rate, allocated jobs;
//! - **gpu**: `[start, end)` at the GPU count, every job that ran
//!   (occupancy);
//! - **unallocated**: the same for jobs with minimum runtime 0.
//!
//! The crate (`allot-ledger`) is what the Slurm plugins and the `allot`
//! command share: this module's writer and readers, [`sacct`] (parsing
//! `sacct --parsable2` rows, pure) and [`charge`] (the engine's charging
//! rule applied to one attempt). It links no CLI, plotting or NVML crate.
//!
//! Reading a ledger (what the plugins do):
//!
//! ```no_run
//! use allot_ledger::LedgerReader;
//! let reader = LedgerReader::open("/var/lib/allot/ledger.sqlite".as_ref())?;
//! let now = 1_700_000_000;
//! // Charged GPU-seconds per account over the last 7 days.
//! for (account, gpu_seconds) in reader.charged_by_account(now - 7 * 86_400, now)? {
//!     println!("{account}: {gpu_seconds}");
//! }
//! # Ok::<(), allot_ledger::LedgerError>(())
//! ```
#![deny(missing_docs)]

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OpenFlags, OptionalExtension, Row};
use serde::Serialize;

/// Current schema version (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = 2;

/// Seconds per bucket.
pub const BUCKET_SECS: i64 = 3600;

/// Migrations: `MIGRATIONS[i]` takes the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE attempts (
    id                   INTEGER PRIMARY KEY,
    job_id               INTEGER NOT NULL,  -- JobIDRaw
    submit               INTEGER NOT NULL,  -- epoch s; identifies the attempt
    attempt              INTEGER NOT NULL,  -- 0, 1, ... by submit time
    label                TEXT NOT NULL,     -- JobID as printed: 17, 123_4, 93+1
    array_job            INTEGER,
    array_task           INTEGER,
    het_job              INTEGER,
    het_offset           INTEGER,
    account              TEXT NOT NULL,
    user                 TEXT NOT NULL,
    partition            TEXT,
    gpus                 INTEGER NOT NULL,
    rate                 INTEGER NOT NULL,  -- charge units per second
    start                INTEGER,           -- epoch s; NULL: never started
    "end"                INTEGER,           -- epoch s; NULL: running or pending
    elapsed              INTEGER,           -- s, as sacct reported it
    state                TEXT NOT NULL,
    min_runtime          INTEGER NOT NULL,  -- s; 0 = unallocated
    min_runtime_recorded INTEGER NOT NULL,  -- 1: from the job, 0: config default
    charge_end           INTEGER,           -- epoch s; charged interval [start, charge_end)
    charged              INTEGER NOT NULL,  -- unit-seconds (GPU-seconds); 0 while running
    UNIQUE (job_id, submit)
);
CREATE INDEX attempts_start ON attempts(start) WHERE start IS NOT NULL;
CREATE INDEX attempts_end ON attempts("end") WHERE "end" IS NOT NULL;
CREATE INDEX attempts_charge_end ON attempts(charge_end) WHERE charge_end IS NOT NULL;
CREATE INDEX attempts_open ON attempts(start) WHERE "end" IS NULL;
CREATE TABLE buckets (
    hour             INTEGER NOT NULL,  -- epoch s / 3600
    account          TEXT NOT NULL,
    user             TEXT NOT NULL,
    charged          INTEGER NOT NULL,  -- unit-seconds inside the hour
    charged_active   INTEGER NOT NULL,  -- rate active at the hour's first second
    gpu              INTEGER NOT NULL,  -- GPU-seconds inside the hour
    gpu_active       INTEGER NOT NULL,
    unalloc          INTEGER NOT NULL,  -- GPU-seconds of unallocated jobs
    unalloc_active   INTEGER NOT NULL,
    PRIMARY KEY (hour, account, user)
) WITHOUT ROWID;
"#,
    events::MIGRATION_2,
];

/// Ledger failures. Each message names the file and what to do.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// SQLite failed.
    #[error("ledger {path}: {source}")]
    Sqlite {
        /// The ledger file.
        path: PathBuf,
        /// The SQLite error.
        source: rusqlite::Error,
    },
    /// A file operation failed.
    #[error("ledger {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Another writer holds the lock.
    #[error(
        "another `allot sync` ({holder}) is writing the ledger {path} (lock {lock}); \
         only one writer may run: stop it, or wait for it to finish"
    )]
    Locked {
        /// The ledger file.
        path: PathBuf,
        /// The lock file.
        lock: PathBuf,
        /// What the lock file says about its holder.
        holder: String,
    },
    /// The file was written by a newer allot.
    #[error(
        "ledger {path} has schema version {found}, this allot knows up to {known}; upgrade allot"
    )]
    NewerSchema {
        /// The ledger file.
        path: PathBuf,
        /// Its version.
        found: i64,
        /// The newest this build knows.
        known: i64,
    },
    /// A reader found no (initialised) ledger.
    #[error("no ledger at {path} (schema version {found}); run `allot sync` first, or pass --ledger PATH")]
    Missing {
        /// The path tried.
        path: PathBuf,
        /// Its schema version (0: empty or not a ledger).
        found: i64,
    },
}

/// Result alias.
pub type Result<T> = std::result::Result<T, LedgerError>;

/// One attempt as the writer stores it. Times: seconds since the epoch;
/// charges: unit-seconds (GPU-seconds with default weights).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AttemptRecord {
    /// `JobIDRaw`.
    pub job_id: u64,
    /// Submit time of this attempt (with `job_id`, the key).
    pub submit: i64,
    /// `JobID` as printed.
    pub label: String,
    /// Array job id, for an array task.
    pub array_job: Option<u64>,
    /// Array task index.
    pub array_task: Option<u32>,
    /// Het job leader id, for a het component.
    pub het_job: Option<u64>,
    /// Het component offset.
    pub het_offset: Option<u32>,
    /// Slurm account.
    pub account: String,
    /// User name.
    pub user: String,
    /// Partition.
    pub partition: Option<String>,
    /// Allocated GPUs.
    pub gpus: u64,
    /// Charge units per second (GPUs with default weights).
    pub rate: u64,
    /// Start; `None`: never started.
    pub start: Option<i64>,
    /// End; `None`: running or pending.
    pub end: Option<i64>,
    /// sacct's `Elapsed`, seconds.
    pub elapsed: Option<u64>,
    /// Base state.
    pub state: String,
    /// Minimum runtime, seconds (0 = unallocated).
    pub min_runtime: u64,
    /// True when the minimum runtime was recorded on the job, false when it
    /// is the config's default.
    pub min_runtime_recorded: bool,
    /// End of the charged interval `[start, charge_end)`; `None` while
    /// running, for a job that never started, and when nothing is charged.
    pub charge_end: Option<i64>,
    /// Charged unit-seconds of a finished attempt; 0 while running.
    pub charged: u64,
}

/// A stored attempt: the record plus its attempt index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StoredAttempt {
    /// 0 for the first attempt of the job, 1 after one requeue, ...
    pub attempt: u32,
    /// The record.
    #[serde(flatten)]
    pub record: AttemptRecord,
}

/// Usage of one (account, user) inside a window, unit-seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// Charged unit-seconds (GPU-seconds by default).
    pub charged: u64,
    /// GPU-seconds actually held (every job that ran).
    pub gpu_seconds: u64,
    /// GPU-seconds held by unallocated (free-tier) jobs.
    pub unallocated: u64,
}

impl Usage {
    /// Adds `o` field by field.
    pub fn add(&mut self, o: &Usage) {
        self.charged += o.charged;
        self.gpu_seconds += o.gpu_seconds;
        self.unallocated += o.unallocated;
    }
}

/// Jobs still open as of the last sync.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct OpenCounts {
    /// Attempts running (started, not ended).
    pub running: u64,
    /// Attempts pending (not started, not ended).
    pub pending: u64,
}

/// Counts of one write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchStats {
    /// New attempts.
    pub inserted: u64,
    /// Attempts whose record changed.
    pub updated: u64,
    /// Attempts already stored as they are.
    pub unchanged: u64,
}

const COLUMNS: &str = "job_id, submit, label, array_job, array_task, het_job, het_offset, account, user, \
     partition, gpus, rate, start, \"end\", elapsed, state, min_runtime, min_runtime_recorded, charge_end, charged";

fn record_from_row(r: &Row<'_>, at: usize) -> rusqlite::Result<AttemptRecord> {
    let u = |i: usize| -> rusqlite::Result<u64> { Ok(r.get::<_, i64>(at + i)?.max(0) as u64) };
    let ou = |i: usize| -> rusqlite::Result<Option<u64>> {
        Ok(r.get::<_, Option<i64>>(at + i)?.map(|v| v.max(0) as u64))
    };
    Ok(AttemptRecord {
        job_id: u(0)?,
        submit: r.get(at + 1)?,
        label: r.get(at + 2)?,
        array_job: ou(3)?,
        array_task: ou(4)?.map(|v| v as u32),
        het_job: ou(5)?,
        het_offset: ou(6)?.map(|v| v as u32),
        account: r.get(at + 7)?,
        user: r.get(at + 8)?,
        partition: r.get(at + 9)?,
        gpus: u(10)?,
        rate: u(11)?,
        start: r.get(at + 12)?,
        end: r.get(at + 13)?,
        elapsed: ou(14)?,
        state: r.get(at + 15)?,
        min_runtime: u(16)?,
        min_runtime_recorded: r.get::<_, i64>(at + 17)? != 0,
        charge_end: r.get(at + 18)?,
        charged: u(19)?,
    })
}

/// A segment `[start, end)` (end `None` = still open) at `rate`.
#[derive(Debug, Clone, Copy)]
struct Segment {
    start: i64,
    end: Option<i64>,
    rate: i64,
}

/// The three segments of a record: charged, gpu, unallocated.
fn segments(r: &AttemptRecord) -> [Option<Segment>; 3] {
    let Some(start) = r.start else {
        return [None; 3];
    };
    let closed = r.end.is_some();
    let charged = (r.min_runtime > 0 && r.rate > 0).then_some(Segment {
        start,
        end: if closed { r.charge_end } else { None },
        rate: r.rate as i64,
    });
    let gpu = (r.gpus > 0).then_some(Segment {
        start,
        end: r.end,
        rate: r.gpus as i64,
    });
    let unalloc = if r.min_runtime == 0 { gpu } else { None };
    // A closed attempt whose charged end is missing charges nothing.
    let charged = charged.filter(|s| !(closed && s.end.is_none()));
    [charged, gpu, unalloc]
}

fn len(s: i64, e: i64) -> i64 {
    (e - s).max(0)
}

/// A batch's per-hour bucket deltas `[q0, act0, q1, act1, q2, act2]`, by
/// account, user and hour: found by `&str`, so a segment allocates no key
/// once its (account, user) pair is in (one String per hour and segment
/// was most of the writer's allocation).
type Deltas = HashMap<String, HashMap<String, BTreeMap<i64, [i64; 6]>>>;

/// Adds `sign x` a closed segment to the per-hour deltas.
fn bucket_deltas(
    out: &mut Deltas,
    account: &str,
    user: &str,
    family: usize,
    seg: Segment,
    sign: i64,
) {
    let Some(end) = seg.end else { return };
    if end <= seg.start || seg.rate == 0 {
        return;
    }
    if !out.contains_key(account) {
        out.insert(account.to_string(), HashMap::new());
    }
    let users = out.get_mut(account).expect("inserted above");
    if !users.contains_key(user) {
        users.insert(user.to_string(), BTreeMap::new());
    }
    let hours = users.get_mut(user).expect("inserted above");
    let first = seg.start.div_euclid(BUCKET_SECS);
    let last = (end - 1).div_euclid(BUCKET_SECS);
    for h in first..=last {
        let h0 = h * BUCKET_SECS;
        let inside = len(seg.start.max(h0), end.min(h0 + BUCKET_SECS));
        let d = hours.entry(h).or_insert([0; 6]);
        // Saturating: a rate near i64::MAX (absurd weights x counts) must not
        // wrap into a negative charge.
        d[2 * family] =
            d[2 * family].saturating_add(sign.saturating_mul(seg.rate).saturating_mul(inside));
        if seg.start <= h0 {
            d[2 * family + 1] = d[2 * family + 1].saturating_add(sign.saturating_mul(seg.rate));
        }
    }
}

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
    conn: Connection,
    path: PathBuf,
    _lock: File,
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
            source,
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

    fn sql(&self) -> impl Fn(rusqlite::Error) -> LedgerError + '_ {
        move |source| LedgerError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    fn migrate(&mut self) -> Result<()> {
        let path = self.path.clone();
        let sql = move |source| LedgerError::Sqlite {
            path: path.clone(),
            source,
        };
        let version: i64 = self
            .conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(&sql)?;
        if version > SCHEMA_VERSION {
            return Err(LedgerError::NewerSchema {
                path: self.path.clone(),
                found: version,
                known: SCHEMA_VERSION,
            });
        }
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

    /// Writes `records` in one transaction: new attempts are inserted,
    /// changed ones updated, identical ones left alone, and the buckets
    /// follow. With `watermark`, the watermark is moved in the same
    /// transaction (never backwards), so a crash loses nothing: the next run
    /// starts from the last committed watermark.
    ///
    /// # Errors
    /// SQLite errors (the transaction is rolled back).
    pub fn write_batch(
        &mut self,
        records: &[AttemptRecord],
        watermark: Option<i64>,
    ) -> Result<BatchStats> {
        let path = self.path.clone();
        let sql = move |source| LedgerError::Sqlite {
            path: path.clone(),
            source,
        };
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(&sql)?;
        let mut stats = BatchStats::default();
        let mut deltas = Deltas::new();
        let mut max_seg = meta_i64(&tx, "max_segment").map_err(&sql)?.unwrap_or(0);
        {
            // Every attempt of the job in one index seek: the one with this
            // submit time (if any), how many came before (this attempt's
            // number) and whether any came after (their numbers shift).
            let mut same_job = tx
                .prepare_cached(&format!(
                    "SELECT id, {COLUMNS} FROM attempts WHERE job_id = ?1"
                ))
                .map_err(&sql)?;
            let mut insert = tx
                .prepare_cached(&format!(
                    "INSERT INTO attempts (attempt, {COLUMNS}) VALUES \
                     (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)"
                ))
                .map_err(&sql)?;
            let mut update = tx
                .prepare_cached(
                    "UPDATE attempts SET label=?2, array_job=?3, array_task=?4, het_job=?5, het_offset=?6, \
                     account=?7, user=?8, partition=?9, gpus=?10, rate=?11, start=?12, \"end\"=?13, elapsed=?14, \
                     state=?15, min_runtime=?16, min_runtime_recorded=?17, charge_end=?18, charged=?19 WHERE id=?1",
                )
                .map_err(&sql)?;
            let mut shift = tx
                .prepare_cached(
                    "UPDATE attempts SET attempt = attempt + 1 WHERE job_id = ?1 AND submit > ?2",
                )
                .map_err(&sql)?;
            for rec in records {
                let (mut old, mut attempt, mut later) = (None, 0i64, false);
                let mut overlapping = None;
                let mut rows = same_job.query(params![rec.job_id as i64]).map_err(&sql)?;
                while let Some(r) = rows.next().map_err(&sql)? {
                    let submit: i64 = r.get(2).map_err(&sql)?;
                    if submit != rec.submit && overlapping.is_none() {
                        // Columns 13 and 14: start and end (see COLUMNS).
                        let span = (r.get::<_, Option<i64>>(13), r.get::<_, Option<i64>>(14));
                        if let (Ok(Some(s)), Ok(Some(e))) = span {
                            if rec
                                .start
                                .is_some_and(|rs| rs < e && rec.end.is_none_or(|re| re > s))
                            {
                                overlapping = Some(submit);
                            }
                        }
                    }
                    match submit.cmp(&rec.submit) {
                        std::cmp::Ordering::Less => attempt += 1,
                        std::cmp::Ordering::Greater => later = true,
                        std::cmp::Ordering::Equal => {
                            old = Some((
                                r.get::<_, i64>(0).map_err(&sql)?,
                                record_from_row(r, 1).map_err(&sql)?,
                            ))
                        }
                    }
                }
                drop(rows);
                if let (None, Some(other)) = (&old, overlapping) {
                    // Attempts of one job follow each other; two that overlap
                    // are one attempt read twice with shifted clocks (a dump
                    // imported again with another --timezone), charged twice.
                    tracing::warn!(
                        job = rec.job_id,
                        submit = rec.submit,
                        other_submit = other,
                        "this attempt overlaps another attempt of the same job in time; \
                         was the same history imported with another --timezone? Both are kept"
                    );
                }
                match &old {
                    Some((_, o)) if o == rec => {
                        stats.unchanged += 1;
                        continue;
                    }
                    Some((id, o)) => {
                        for (f, s) in segments(o).into_iter().enumerate() {
                            if let Some(s) = s {
                                bucket_deltas(&mut deltas, &o.account, &o.user, f, s, -1);
                            }
                        }
                        update
                            .execute(params![
                                id,
                                rec.label,
                                rec.array_job.map(|v| v as i64),
                                rec.array_task,
                                rec.het_job.map(|v| v as i64),
                                rec.het_offset,
                                rec.account,
                                rec.user,
                                rec.partition,
                                rec.gpus as i64,
                                rec.rate as i64,
                                rec.start,
                                rec.end,
                                rec.elapsed.map(|v| v as i64),
                                rec.state,
                                rec.min_runtime as i64,
                                rec.min_runtime_recorded as i64,
                                rec.charge_end,
                                rec.charged as i64,
                            ])
                            .map_err(&sql)?;
                        stats.updated += 1;
                    }
                    None => {
                        if later {
                            shift
                                .execute(params![rec.job_id as i64, rec.submit])
                                .map_err(&sql)?;
                        }
                        insert
                            .execute(params![
                                attempt,
                                rec.job_id as i64,
                                rec.submit,
                                rec.label,
                                rec.array_job.map(|v| v as i64),
                                rec.array_task,
                                rec.het_job.map(|v| v as i64),
                                rec.het_offset,
                                rec.account,
                                rec.user,
                                rec.partition,
                                rec.gpus as i64,
                                rec.rate as i64,
                                rec.start,
                                rec.end,
                                rec.elapsed.map(|v| v as i64),
                                rec.state,
                                rec.min_runtime as i64,
                                rec.min_runtime_recorded as i64,
                                rec.charge_end,
                                rec.charged as i64,
                            ])
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
        if let Some(w) = watermark {
            let old = meta_i64(&tx, "watermark")
                .map_err(&sql)?
                .unwrap_or(i64::MIN);
            set_meta(&tx, "watermark", w.max(old)).map_err(&sql)?;
        }
        tx.commit().map_err(&sql)?;
        Ok(stats)
    }

    /// A reader on the same file (for a report right after a sync).
    ///
    /// # Errors
    /// As [`LedgerReader::open`].
    pub fn reader(&self) -> Result<LedgerReader> {
        LedgerReader::open(&self.path)
    }
}

fn meta_i64(conn: &Connection, key: &str) -> rusqlite::Result<Option<i64>> {
    conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| {
        r.get::<_, String>(0)
    })
    .optional()
    .map(|v| v.and_then(|s| s.parse().ok()))
}

fn set_meta(conn: &Connection, key: &str, value: i64) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        params![key, value.to_string()],
    )
    .map(|_| ())
}

/// A read-only view of a ledger, for the plugins and reports. Never blocks
/// the writer; sees the last committed sync.
pub struct LedgerReader {
    conn: Connection,
    path: PathBuf,
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
        let sql = |source| LedgerError::Sqlite {
            path: path.to_path_buf(),
            source,
        };
        if !path.exists() {
            return Err(LedgerError::Missing {
                path: path.to_path_buf(),
                found: 0,
            });
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY
                | OpenFlags::SQLITE_OPEN_NO_MUTEX
                | OpenFlags::SQLITE_OPEN_URI,
        )
        .map_err(sql)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(sql)?;
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(sql)?;
        if version == 0 {
            return Err(LedgerError::Missing {
                path: path.to_path_buf(),
                found: 0,
            });
        }
        if version > SCHEMA_VERSION {
            return Err(LedgerError::NewerSchema {
                path: path.to_path_buf(),
                found: version,
                known: SCHEMA_VERSION,
            });
        }
        Ok(LedgerReader {
            conn,
            path: path.to_path_buf(),
        })
    }

    fn sql(&self) -> impl Fn(rusqlite::Error) -> LedgerError + '_ {
        move |source| LedgerError::Sqlite {
            path: self.path.clone(),
            source,
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

    /// Charged unit-seconds (GPU-seconds with default weights) per account
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
                    "SELECT {COLUMNS} FROM attempts WHERE \"end\" IS NULL AND start IS NOT NULL AND start < ?1"
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
                for (f, s) in segments(&rec).into_iter().enumerate() {
                    if let Some(s) = s {
                        e[f] += i128::from(s.rate) * i128::from(len(s.start.max(start), end));
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
                        charged: clamp(v[0]),
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
            format!("SELECT {COLUMNS} FROM attempts WHERE start > ?1 AND start < ?2 AND \"end\" IS NOT NULL"),
            format!("SELECT {COLUMNS} FROM attempts WHERE \"end\" > ?1 AND \"end\" < ?2 AND start <= ?1"),
            format!("SELECT {COLUMNS} FROM attempts WHERE charge_end > ?1 AND charge_end < ?2 AND start <= ?1"),
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
        let max_seg = meta_i64(&self.conn, "max_segment")
            .map_err(self.sql())?
            .unwrap_or(0);
        let mut st = self
            .conn
            .prepare_cached(&format!(
                "SELECT attempt, {COLUMNS} FROM attempts WHERE start >= ?1 AND start < ?2 \
                 AND (\"end\" IS NULL OR \"end\" > ?3 OR charge_end > ?3) \
                 UNION SELECT attempt, {COLUMNS} FROM attempts WHERE \"end\" IS NULL AND start IS NOT NULL AND start < ?2 \
                 ORDER BY start, job_id, submit"
            ))
            .map_err(self.sql())?;
        let rows = st
            .query_map(params![start.saturating_sub(max_seg), end, start], |r| {
                Ok(StoredAttempt {
                    attempt: r.get::<_, i64>(0)? as u32,
                    record: record_from_row(r, 1)?,
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

    /// The attempts of one job (all array tasks / het components with that
    /// raw job id), oldest first. For `allot explain`.
    ///
    /// # Errors
    /// SQLite errors.
    pub fn attempts_of_job(&self, job_id: u64) -> Result<Vec<StoredAttempt>> {
        let mut st = self
            .conn
            .prepare(&format!(
                "SELECT attempt, {COLUMNS} FROM attempts WHERE job_id = ?1 ORDER BY submit"
            ))
            .map_err(self.sql())?;
        let rows = st
            .query_map([job_id as i64], |r| {
                Ok(StoredAttempt {
                    attempt: r.get::<_, i64>(0)? as u32,
                    record: record_from_row(r, 1)?,
                })
            })
            .map_err(self.sql())?;
        rows.collect::<rusqlite::Result<_>>().map_err(self.sql())
    }

    /// Every attempt, by job id then attempt index: for dumps and tests.
    ///
    /// # Errors
    /// SQLite errors.
    pub fn all_attempts(&self) -> Result<Vec<StoredAttempt>> {
        let mut st = self
            .conn
            .prepare(&format!(
                "SELECT attempt, {COLUMNS} FROM attempts ORDER BY job_id, submit"
            ))
            .map_err(self.sql())?;
        let rows = st
            .query_map([], |r| {
                Ok(StoredAttempt {
                    attempt: r.get::<_, i64>(0)? as u32,
                    record: record_from_row(r, 1)?,
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

pub mod charge;
pub mod events;
pub mod sacct;

#[cfg(test)]
mod tests;
