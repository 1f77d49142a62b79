//! Which job preempted which, and why (schema version 4).
//!
//! preempt/allot records each preemption slurmctld carries out: the
//! preemptor, the victim, the clause of the rules that allowed it and the
//! figures it was judged on ([`fairshare::preempt::Grounds`]). slurmctld
//! asks the plugin about candidates it does not take, so a "yes" is not a
//! preemption; it asks a victim's grace time (`PREEMPT_DATA_GRACE_TIME`)
//! only in `slurm_job_preempt`, once per victim it preempts, right after
//! the round of candidates of its preemptor and under the same job lock:
//! that call is the record (docs/plugins.md).
//!
//! The plugin never writes the ledger (`allot sync` is its only writer) and
//! never does I/O on slurmctld's call path: it queues the record, and its
//! own thread appends it as one JSON line to the *preemption log*
//! [`log_path`] (`<ledger>.preemptions`, beside the ledger, mode 0640)
//! with [`append_to_log`], synced to disk. `allot sync` reads the log from
//! where it stopped ([`Ledger::import_preemption_log`]; the byte offset is
//! `meta.preemptions_offset`) into the `preemptions` table. A record is
//! stored once whatever is read twice (key: victim, time, preemptor), so a
//! log that was rotated or truncated (shorter than the offset) is simply
//! read again from its start.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use rusqlite::{params, Connection};
use serde::{Deserialize, Serialize};

use super::{meta_i64, set_meta, Ledger, LedgerError, LedgerReader, Result};

/// Migration 3 -> 4: the `preemptions` table (`IF NOT EXISTS`: a ledger
/// whose version was set back, as tests of older migrations do, keeps it).
pub(super) const MIGRATION_4: &str = r#"
CREATE TABLE IF NOT EXISTS preemptions (
    id                INTEGER PRIMARY KEY,
    time              INTEGER NOT NULL,  -- epoch s: slurmctld preempted the victim
    victim            INTEGER NOT NULL,  -- Slurm job id
    victim_account    TEXT NOT NULL,
    preemptor         INTEGER NOT NULL,  -- Slurm job id
    preemptor_account TEXT NOT NULL,
    rule              TEXT NOT NULL,     -- free_tier | short_own_leaf | victim_not_in_tree | short_slack | net_gain
    grounds           TEXT NOT NULL,     -- JSON: the figures (fairshare::preempt::Grounds)
    UNIQUE (victim, time, preemptor)
);
CREATE INDEX IF NOT EXISTS preemptions_time ON preemptions(time);
"#;

/// The preemption log of the ledger at `ledger`: `<ledger>.preemptions`.
pub fn log_path(ledger: &Path) -> PathBuf {
    let mut s = ledger.as_os_str().to_owned();
    s.push(".preemptions");
    PathBuf::from(s)
}

/// One preemption slurmctld carried out, as preempt/allot records it (one
/// JSON line of the log) and the ledger stores it. Times: seconds since
/// the epoch (slurmctld's clock).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Preemption {
    /// When slurmctld preempted the victim (asked its grace time).
    pub time: i64,
    /// The victim's Slurm job id.
    pub victim: u64,
    /// The victim's account.
    pub victim_account: String,
    /// The preemptor's Slurm job id.
    pub preemptor: u64,
    /// The preemptor's account.
    pub preemptor_account: String,
    /// The clause that allowed it ([`fairshare::preempt::Rule`]'s name:
    /// `net_gain`, `free_tier`, ...).
    pub rule: String,
    /// The figures it was judged on ([`fairshare::preempt::Grounds`] as
    /// JSON; kept as written, so a newer plugin's fields are not lost).
    pub grounds: serde_json::Value,
}

impl Preemption {
    /// The record of `victim` (of `victim_account`) preempted at `time`
    /// (epoch seconds) for `preemptor` (of `preemptor_account`) on
    /// `grounds`.
    pub fn new(
        time: i64,
        (victim, victim_account): (u64, &str),
        (preemptor, preemptor_account): (u64, &str),
        grounds: &fairshare::preempt::Grounds,
    ) -> Preemption {
        Preemption {
            time,
            victim,
            victim_account: victim_account.to_string(),
            preemptor,
            preemptor_account: preemptor_account.to_string(),
            rule: grounds.rule.as_str().to_string(),
            grounds: serde_json::to_value(grounds).unwrap_or(serde_json::Value::Null),
        }
    }
}

/// Appends `records` to the preemption log at `path` (created mode 0640),
/// one JSON line each, and syncs the file to disk. For preempt/allot's
/// own thread, never slurmctld's call path.
///
/// # Errors
/// [`LedgerError::Io`] when the log cannot be opened, written or synced
/// (its directory must be writable by slurmctld's user).
pub fn append_to_log(path: &Path, records: &[Preemption]) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let io = |source| LedgerError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut buf = Vec::new();
    for r in records {
        serde_json::to_writer(&mut buf, r).map_err(|e| io(e.into()))?;
        buf.push(b'\n');
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o640)
        .open(path)
        .map_err(io)?;
    f.write_all(&buf).map_err(io)?;
    f.sync_data().map_err(io)
}

/// What one [`Ledger::import_preemption_log`] read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogImport {
    /// Records stored for the first time.
    pub new: u64,
    /// Lines that are not a record (logged and skipped).
    pub unreadable: u64,
}

const OFFSET: &str = "preemptions_offset";

fn insert(conn: &Connection, p: &Preemption) -> rusqlite::Result<bool> {
    let n = conn.execute(
        "INSERT OR IGNORE INTO preemptions \
         (time, victim, victim_account, preemptor, preemptor_account, rule, grounds) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            p.time,
            p.victim as i64,
            p.victim_account,
            p.preemptor as i64,
            p.preemptor_account,
            p.rule,
            p.grounds.to_string()
        ],
    )?;
    Ok(n == 1)
}

impl Ledger {
    /// Stores `p`; `false` when it was stored already.
    ///
    /// # Errors
    /// SQLite errors.
    pub fn record_preemption(&self, p: &Preemption) -> Result<bool> {
        insert(&self.conn, p).map_err(self.sql())
    }

    /// Reads the preemption log ([`log_path`] of this ledger) from where
    /// the last call stopped, stores its complete lines and moves the
    /// offset past them, in one transaction. A line still being written
    /// (no newline yet) waits for the next call; a line that is not a
    /// record is logged and skipped. No log yet: nothing to do.
    ///
    /// # Errors
    /// [`LedgerError::Io`] when the log exists but cannot be read; SQLite
    /// errors.
    pub fn import_preemption_log(&mut self) -> Result<LogImport> {
        let log = log_path(&self.path);
        let io = |source| LedgerError::Io {
            path: log.clone(),
            source,
        };
        let mut f = match std::fs::File::open(&log) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(LogImport::default()),
            Err(e) => return Err(io(e)),
        };
        let len = f.metadata().map_err(io)?.len();
        let mut offset = meta_i64(&self.conn, OFFSET)
            .map_err(self.sql())?
            .unwrap_or(0) as u64;
        if offset > len {
            // Rotated or truncated: read it all again (records are stored once).
            offset = 0;
        }
        f.seek(SeekFrom::Start(offset)).map_err(io)?;
        let mut buf = Vec::new();
        f.take(len - offset).read_to_end(&mut buf).map_err(io)?;
        let complete = buf.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let mut out = LogImport::default();
        let path = self.path.clone();
        let sql = move |source| LedgerError::Sqlite {
            path: path.clone(),
            error: source,
        };
        let tx = self.conn.transaction().map_err(&sql)?;
        for (n, line) in buf[..complete].split(|&b| b == b'\n').enumerate() {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<Preemption>(line) {
                Ok(p) => out.new += u64::from(insert(&tx, &p).map_err(&sql)?),
                Err(e) => {
                    out.unreadable += 1;
                    tracing::warn!(log = %log.display(), after_byte = offset, line = n + 1, error = %e, "skipping a preemption log line that is not a record");
                }
            }
        }
        set_meta(&tx, OFFSET, (offset + complete as u64) as i64).map_err(&sql)?;
        tx.commit().map_err(&sql)?;
        Ok(out)
    }
}

/// A stored preemption with its row id.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredPreemption {
    /// Row id.
    pub id: i64,
    /// The record.
    #[serde(flatten)]
    pub preemption: Preemption,
}

impl LedgerReader {
    fn has_preemptions(&self) -> Result<bool> {
        Ok(self
            .conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'preemptions'",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map_err(self.sql())?
            > 0)
    }

    /// Every recorded preemption of job `victim`, oldest first. Empty for a
    /// ledger older than version 4.
    ///
    /// # Errors
    /// SQLite errors.
    pub fn preemptions_of(&self, victim: u64) -> Result<Vec<StoredPreemption>> {
        if !self.has_preemptions()? {
            return Ok(Vec::new());
        }
        let mut st = self
            .conn
            .prepare(
                "SELECT id, time, victim, victim_account, preemptor, preemptor_account, rule, grounds \
                 FROM preemptions WHERE victim = ?1 ORDER BY time, id",
            )
            .map_err(self.sql())?;
        let rows = st
            .query_map([victim as i64], |r| {
                let grounds: String = r.get(7)?;
                Ok(StoredPreemption {
                    id: r.get(0)?,
                    preemption: Preemption {
                        time: r.get(1)?,
                        victim: r.get::<_, i64>(2)?.max(0) as u64,
                        victim_account: r.get(3)?,
                        preemptor: r.get::<_, i64>(4)?.max(0) as u64,
                        preemptor_account: r.get(5)?,
                        rule: r.get(6)?,
                        grounds: serde_json::from_str(&grounds).unwrap_or(serde_json::Value::Null),
                    },
                })
            })
            .map_err(self.sql())?;
        rows.collect::<rusqlite::Result<_>>().map_err(self.sql())
    }

    /// Recorded preemptions per clause (`rule`), in name order. Empty for a
    /// ledger older than version 4.
    ///
    /// # Errors
    /// SQLite errors.
    pub fn preemptions_by_rule(&self) -> Result<Vec<(String, u64)>> {
        if !self.has_preemptions()? {
            return Ok(Vec::new());
        }
        let mut st = self
            .conn
            .prepare("SELECT rule, count(*) FROM preemptions GROUP BY rule ORDER BY rule")
            .map_err(self.sql())?;
        let rows = st
            .query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)?.max(0) as u64)))
            .map_err(self.sql())?;
        rows.collect::<rusqlite::Result<_>>().map_err(self.sql())
    }
}

#[cfg(test)]
mod tests;
