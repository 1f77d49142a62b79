//! The ledger: SQLite (WAL) file of job attempts and their charges.
//!
//! - One row per job *attempt*, keyed by (`JobIDRaw`, submit time): a
//!   requeue resubmits, so each attempt has its own submit time. `attempt`
//!   numbers a job's attempts 0, 1, ... by submit time.
//! - Every time is seconds since the Unix epoch (UTC); every charge rate is
//!   in milli-units per second and every charge in milli-unit-seconds
//!   ([`fairshare::charge`]: 1000 per GPU-second with the default
//!   `[charge]` weights), so fractional TRES weights sum exactly. Schema
//!   version 3 moved the stored `rate` and `charged` columns (attempts and
//!   buckets) from whole units to milli-units by multiplying them by 1000
//!   ([`MIGRATION_3`]); a reader of an older ledger not yet migrated scales
//!   what it reads the same way.
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
//! // Charged GPU-seconds per account over the last 7 days (milli-units).
//! for (account, milli) in reader.charged_by_account(now - 7 * 86_400, now)? {
//!     println!("{account}: {}", fairshare::charge::units(milli));
//! }
//! # Ok::<(), allot_ledger::LedgerError>(())
//! ```

#![deny(missing_docs)]

/// True when this build links its own copy of SQLite (feature
/// `bundled-sqlite`, which the `allot` binary enables). The Slurm plugins
/// refuse to load then: two copies of SQLite in one slurmctld release each
/// other's POSIX locks, and one truncated the WAL index the other had
/// mapped (slurmctld died of SIGBUS; docs/ledger.md).
pub const BUNDLED_SQLITE: bool = cfg!(feature = "bundled-sqlite");

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OpenFlags, OptionalExtension, Row};
use serde::Serialize;

/// Current schema version (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = 5;

/// The first schema version whose charges are milli-units (see the crate
/// doc); older ones stored whole units.
pub(crate) const MILLI_SCHEMA: i64 = 3;

/// Schema 2 -> 3: charge rates and charges from whole units to milli-units
/// (x [`fairshare::charge::MILLI_PER_UNIT`]). Saturates near `i64::MAX`,
/// as the writer does: SQLite turns an overflowing product into a float.
pub const MIGRATION_3: &str = r#"
UPDATE attempts SET
    rate    = max(min(rate, 9223372036854775), -9223372036854775) * 1000,
    charged = max(min(charged, 9223372036854775), -9223372036854775) * 1000;
UPDATE buckets SET
    charged        = max(min(charged, 9223372036854775), -9223372036854775) * 1000,
    charged_active = max(min(charged_active, 9223372036854775), -9223372036854775) * 1000;
"#;

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
    MIGRATION_3,
    preemptions::MIGRATION_4,
    MIGRATION_5,
];

/// Ledger failures. Each message names the file and what to do.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// SQLite failed. (The SQLite error is in the message, not a
    /// `source`: a chain would print it twice.)
    #[error("ledger {path}: {error}{}", sqlite_fix(path, error))]
    Sqlite {
        /// The ledger file.
        path: PathBuf,
        /// The SQLite error.
        error: rusqlite::Error,
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

/// What to do about SQLite error `e` on `path`, where the error alone does
/// not say ("" where it does).
fn sqlite_fix(path: &std::path::Path, e: &rusqlite::Error) -> &'static str {
    use rusqlite::ErrorCode;
    match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => {
            "; it is not an allot ledger: pass --ledger the file `allot sync` writes ([ledger] path in allot.toml)"
        }
        Some(ErrorCode::SystemIoFailure | ErrorCode::CannotOpen) if path.is_dir() => {
            "; it is a directory: pass --ledger the ledger file in it ([ledger] path in allot.toml)"
        }
        _ => "",
    }
}

/// Result alias.
pub type Result<T> = std::result::Result<T, LedgerError>;

/// One attempt as the writer stores it. Times: seconds since the epoch;
/// charges: unit-seconds (GPU-seconds with default weights).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
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
    /// Charge milli-units per second (1000 per GPU with default weights).
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
    /// Charged milli-unit-seconds of a finished attempt (1000 per
    /// GPU-second by default); 0 while running.
    pub charged: u64,
    /// Time limit, seconds (`TimelimitRaw`); `None` when unlimited or not
    /// known. Caps what an attempt still open is charged
    /// ([`AttemptRecord::open_until`]).
    pub time_limit: Option<u64>,
}

impl AttemptRecord {
    /// The last instant (seconds since the epoch) an attempt still open is
    /// charged and counted up to: its start plus its time limit. A job
    /// cannot run past its limit, so an open record past it is a runaway
    /// (slurmdbd kept it RUNNING after slurmctld forgot it, or a terminal
    /// `State` with no `End`): it is charged to here, not to now. `None`:
    /// not started, or no limit known (counted up to now).
    pub fn open_until(&self) -> Option<i64> {
        let limit = i64::try_from(self.time_limit?).ok()?;
        self.start?.checked_add(limit)
    }
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
    /// Charged milli-unit-seconds (1000 per GPU-second by default).
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

/// Open attempts of one account and tier, with their GPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct OpenGpus {
    /// Attempts running (started, not ended).
    pub running: u64,
    /// Attempts pending (not started, not ended).
    pub pending: u64,
    /// GPUs held by the running attempts.
    pub running_gpus: u64,
    /// GPUs asked for by the pending attempts.
    pub pending_gpus: u64,
}

/// An ended attempt whose state says the job was interrupted
/// ([`LedgerReader::interrupted_attempts`], [`InterruptedScan`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InterruptedAttempt {
    /// `JobIDRaw`.
    pub job_id: u64,
    /// Slurm account.
    pub account: String,
    /// Minimum runtime, seconds (0 = free tier).
    pub min_runtime: u64,
    /// Base state: `PREEMPTED`, `REQUEUED`, `REQUEUE_HOLD`, `REQUEUE_FED`
    /// or `NODE_FAIL`.
    pub state: String,
    /// Start; `None`: never started.
    pub start: Option<i64>,
    /// End.
    pub end: i64,
    /// True when the ledger holds a later attempt of the same job.
    pub requeued: bool,
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
    /// Rows not written because another row settles their attempt: a
    /// second row of one attempt in the batch (the later one is written),
    /// or a row that has an ended attempt running again (logged).
    pub superseded: u64,
    /// Of `updated`, ended attempts whose accounting slurmdbd now prints
    /// differently (`Start`, `End`, GPUs, account, user or state: an
    /// admin's correction, which Slurm 25.11 allows): the charge follows
    /// the correction, each logged.
    pub corrected: u64,
}

const COLUMNS: &str = "job_id, submit, label, array_job, array_task, het_job, het_offset, account, user, \
     partition, gpus, rate, start, \"end\", elapsed, state, min_runtime, min_runtime_recorded, charge_end, charged, \
     time_limit";

/// [`COLUMNS`] as a reader of a ledger older than schema 5 selects them:
/// `NULL` for the time limit no writer has stored yet.
fn columns_before_5() -> String {
    let base = COLUMNS
        .strip_suffix("time_limit")
        .expect("COLUMNS ends with time_limit");
    format!("{base}NULL")
}

/// Schema 5: each attempt's time limit (sacct's `TimelimitRaw`, seconds;
/// NULL when unlimited or unknown). An attempt still open is charged at
/// most up to its start plus its time limit: a runaway record (slurmdbd
/// keeps a job RUNNING that slurmctld has forgotten) is not charged for
/// weeks ([`AttemptRecord::open_until`]).
pub const MIGRATION_5: &str = "ALTER TABLE attempts ADD COLUMN time_limit INTEGER;";

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
        time_limit: ou(20)?,
    })
}

/// The schema version of an open ledger connection (`user_version`; 0:
/// empty or not a ledger).
///
/// # Errors
/// [`LedgerError::NewerSchema`] when it is newer than this build knows;
/// SQLite errors.
pub(crate) fn schema_version(conn: &Connection, path: &Path) -> Result<i64> {
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(|source| LedgerError::Sqlite {
            path: path.to_path_buf(),
            error: source,
        })?;
    if version > SCHEMA_VERSION {
        return Err(LedgerError::NewerSchema {
            path: path.to_path_buf(),
            found: version,
            known: SCHEMA_VERSION,
        });
    }
    Ok(version)
}

/// Opens the existing ledger file at `path` with `flags` (waiting up to 5 s
/// on a lock) and reads its schema version ([`schema_version`]).
///
/// # Errors
/// [`LedgerError::Missing`] when there is no file at `path`,
/// [`LedgerError::NewerSchema`], SQLite errors.
pub(crate) fn open_existing(path: &Path, flags: OpenFlags) -> Result<(Connection, i64)> {
    let sql = |source| LedgerError::Sqlite {
        path: path.to_path_buf(),
        error: source,
    };
    if !path.exists() {
        return Err(LedgerError::Missing {
            path: path.to_path_buf(),
            found: 0,
        });
    }
    let conn = Connection::open_with_flags(path, flags).map_err(sql)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(sql)?;
    let version = schema_version(&conn, path)?;
    Ok((conn, version))
}

pub(crate) fn meta_i64(conn: &Connection, key: &str) -> rusqlite::Result<Option<i64>> {
    conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| {
        r.get::<_, String>(0)
    })
    .optional()
    .map(|v| v.and_then(|s| s.parse().ok()))
}

pub(crate) fn set_meta(conn: &Connection, key: &str, value: i64) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        params![key, value.to_string()],
    )
    .map(|_| ())
}

mod buckets;
mod interrupted;
mod reader;
mod writer;

use buckets::*;
pub use interrupted::InterruptedScan;
pub use reader::LedgerReader;
pub use writer::{lock_path, set_owner, Ledger};

pub mod charge;
pub mod events;
pub mod preemptions;
pub mod recycled;
pub mod sacct;

#[cfg(test)]
mod tests;
