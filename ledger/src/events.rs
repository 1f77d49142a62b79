//! Node health and draining events (schema version 2).
//!
//! Who writes what:
//! - `allot health --drain` appends a [`EventKind::Health`] event when it
//!   drains a node (through [`append_event`]: a plain INSERT outside the
//!   sync's writer lock; SQLite's own locking serialises it with the sync).
//! - `allot sync --follow` records each drain episode it sees
//!   ([`EventKind::Drain`], time = the time Slurm set the drain reason),
//!   every automatic requeue ([`EventKind::Requeue`]), every `--no-requeue`
//!   job it leaves to finish ([`EventKind::Kept`]) and the moment the node
//!   has no job left ([`EventKind::Drained`]).
//!
//! The sync's events carry `since`, the start of their drain episode (epoch
//! seconds), and are recorded at most once per `(kind, node, since, job)`:
//! a restarted sync, or one pass seeing the same state as the last, adds
//! nothing.

use std::path::Path;

use rusqlite::{params, Connection, OpenFlags};
use serde::Serialize;

use super::{Ledger, LedgerError, LedgerReader, Result};

/// Migration 1 -> 2: the `events` table.
pub(super) const MIGRATION_2: &str = r#"
CREATE TABLE events (
    id      INTEGER PRIMARY KEY,
    time    INTEGER NOT NULL,  -- epoch s
    node    TEXT NOT NULL,
    kind    TEXT NOT NULL,     -- health | drain | requeue | kept | drained
    since   INTEGER,           -- epoch s: start of the drain episode (sync's events)
    job_id  INTEGER,           -- requeue, kept
    gpu     INTEGER,           -- health: GPU index
    serial  TEXT,              -- health: GPU serial number
    reason  TEXT NOT NULL
);
CREATE INDEX events_time ON events(time);
CREATE UNIQUE INDEX events_once ON events(kind, node, since, coalesce(job_id, -1))
    WHERE since IS NOT NULL;
"#;

/// What happened to a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EventKind {
    /// `allot health --drain` found a failed GPU and drained the node.
    Health,
    /// The node started draining (health or an admin's drain alike).
    Drain,
    /// A job on the draining node was requeued after its minimum runtime.
    Requeue,
    /// A `--no-requeue` job past its minimum runtime was left to finish.
    Kept,
    /// The draining node had no job left (DRAINED, ready for repair).
    Drained,
}

impl EventKind {
    /// The name stored in the ledger.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Health => "health",
            EventKind::Drain => "drain",
            EventKind::Requeue => "requeue",
            EventKind::Kept => "kept",
            EventKind::Drained => "drained",
        }
    }

    fn parse(s: &str) -> Option<EventKind> {
        Some(match s {
            "health" => EventKind::Health,
            "drain" => EventKind::Drain,
            "requeue" => EventKind::Requeue,
            "kept" => EventKind::Kept,
            "drained" => EventKind::Drained,
            _ => return None,
        })
    }
}

/// One event. Times are seconds since the Unix epoch (UTC).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Event {
    /// When it happened.
    pub time: i64,
    /// Slurm node name.
    pub node: String,
    /// What happened.
    pub kind: EventKind,
    /// Start of the drain episode, for the sync's events; `None` for health
    /// events.
    pub since: Option<i64>,
    /// The job, for requeue and kept events.
    pub job_id: Option<u64>,
    /// GPU index, for health events.
    pub gpu: Option<u32>,
    /// GPU serial number, for health events.
    pub serial: Option<String>,
    /// Human-readable reason (the drain reason, or why a job was requeued).
    pub reason: String,
}

const INSERT: &str =
    "INSERT OR IGNORE INTO events (time, node, kind, since, job_id, gpu, serial, reason) \
                      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";

fn insert(conn: &Connection, e: &Event) -> rusqlite::Result<bool> {
    let n = conn.execute(
        INSERT,
        params![
            e.time,
            e.node,
            e.kind.as_str(),
            e.since,
            e.job_id.map(|v| v as i64),
            e.gpu,
            e.serial,
            e.reason
        ],
    )?;
    Ok(n == 1)
}

impl Ledger {
    /// Records `event`; `false` when the same `(kind, node, since, job)` was
    /// already recorded (events with a `since` are recorded once).
    ///
    /// # Errors
    /// SQLite errors.
    pub fn record_event(&self, event: &Event) -> Result<bool> {
        insert(&self.conn, event).map_err(self.sql())
    }
}

/// Appends `event` to the ledger at `path` without taking the sync's writer
/// lock (for `allot health --drain`, which may run while `allot sync
/// --follow` holds it). The ledger must exist; a version-1 ledger is
/// migrated when no sync holds it, else the event is refused with a message
/// saying to upgrade the running sync.
///
/// # Errors
/// [`LedgerError::Missing`] when there is no ledger at `path`;
/// [`LedgerError::NewerSchema`]; [`LedgerError::Locked`] when a version-1
/// ledger is held by an older `allot sync`; SQLite errors.
pub fn append_event(path: &Path, event: &Event) -> Result<bool> {
    let sql = |source| LedgerError::Sqlite {
        path: path.to_path_buf(),
        error: source,
    };
    let (conn, version) = super::open_existing(path, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
    if version < 2 {
        drop(conn);
        // Migrating needs the writer lock; a sync that holds it and has not
        // migrated is older than this allot.
        let ledger = Ledger::open(path)?;
        return ledger.record_event(event);
    }
    insert(&conn, event).map_err(sql)
}

/// A stored event with its row id (ids grow with insertion order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StoredEvent {
    /// Row id.
    pub id: i64,
    /// The event.
    #[serde(flatten)]
    pub event: Event,
}

impl LedgerReader {
    /// Events with `start <= time < end` (epoch seconds), oldest first, plus
    /// every event of the drain episodes that started in the window (so a
    /// drain and its requeues are reported together). Empty for a
    /// version-1 ledger (no events table yet).
    ///
    /// # Errors
    /// SQLite errors.
    pub fn events(&self, start: i64, end: i64) -> Result<Vec<StoredEvent>> {
        let has_table: bool = self
            .conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'events'",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map_err(self.sql())?
            > 0;
        if !has_table {
            return Ok(Vec::new());
        }
        let mut st = self
            .conn
            .prepare(
                "SELECT id, time, node, kind, since, job_id, gpu, serial, reason FROM events \
                 WHERE (time >= ?1 AND time < ?2) OR (since >= ?1 AND since < ?2) ORDER BY time, id",
            )
            .map_err(self.sql())?;
        let rows = st
            .query_map(params![start, end], |r| {
                let kind: String = r.get(3)?;
                Ok((
                    kind,
                    StoredEvent {
                        id: r.get(0)?,
                        event: Event {
                            time: r.get(1)?,
                            node: r.get(2)?,
                            kind: EventKind::Health,
                            since: r.get(4)?,
                            job_id: r.get::<_, Option<i64>>(5)?.map(|v| v.max(0) as u64),
                            gpu: r.get(6)?,
                            serial: r.get(7)?,
                            reason: r.get(8)?,
                        },
                    },
                ))
            })
            .map_err(self.sql())?;
        let mut out = Vec::new();
        for row in rows {
            let (kind, mut e) = row.map_err(self.sql())?;
            // A kind written by a newer allot is skipped, not misreported.
            let Some(k) = EventKind::parse(&kind) else {
                continue;
            };
            e.event.kind = k;
            out.push(e);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kind: EventKind, time: i64, since: Option<i64>, job: Option<u64>) -> Event {
        Event {
            time,
            node: "gpu-a01".into(),
            kind,
            since,
            job_id: job,
            gpu: None,
            serial: None,
            reason: "maintenance".into(),
        }
    }

    #[test]
    fn sync_events_are_recorded_once_per_episode() {
        let dir = tempdir();
        let path = dir.join("l.sqlite");
        let l = Ledger::open(&path).unwrap();
        assert!(l
            .record_event(&ev(EventKind::Drain, 1000, Some(1000), None))
            .unwrap());
        assert!(!l
            .record_event(&ev(EventKind::Drain, 1000, Some(1000), None))
            .unwrap());
        assert!(l
            .record_event(&ev(EventKind::Requeue, 1005, Some(1000), Some(7)))
            .unwrap());
        assert!(!l
            .record_event(&ev(EventKind::Requeue, 1006, Some(1000), Some(7)))
            .unwrap());
        assert!(l
            .record_event(&ev(EventKind::Requeue, 1040, Some(1000), Some(8)))
            .unwrap());
        // A new episode of the same node records again.
        assert!(l
            .record_event(&ev(EventKind::Drain, 5000, Some(5000), None))
            .unwrap());
        let got = l.reader().unwrap().events(0, 10_000).unwrap();
        let kinds: Vec<_> = got.iter().map(|e| (e.event.kind, e.event.time)).collect();
        assert_eq!(
            kinds,
            vec![
                (EventKind::Drain, 1000),
                (EventKind::Requeue, 1005),
                (EventKind::Requeue, 1040),
                (EventKind::Drain, 5000)
            ]
        );
        // An episode that started in the window brings its later events.
        let got = l.reader().unwrap().events(900, 1001).unwrap();
        assert_eq!(got.len(), 3);
    }

    #[test]
    fn health_appends_beside_a_running_sync() {
        let dir = tempdir();
        let path = dir.join("l.sqlite");
        let sync = Ledger::open(&path).unwrap(); // holds the writer lock
        let mut h = ev(EventKind::Health, 2000, None, None);
        h.gpu = Some(3);
        h.serial = Some("1652221028513".into());
        h.reason = "allot: gpu3 Xid 79 serial=1652221028513".into();
        assert!(append_event(&path, &h).unwrap());
        assert!(
            append_event(&path, &h).unwrap(),
            "health events are not deduplicated"
        );
        let got = sync.reader().unwrap().events(0, 3000).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].event, h);
        let missing = append_event(&dir.join("none.sqlite"), &h).unwrap_err();
        assert!(matches!(missing, LedgerError::Missing { .. }), "{missing}");
    }

    fn tempdir() -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!(
            "allot-events-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
