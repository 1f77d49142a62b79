use super::*;
use crate::{MIGRATIONS, SCHEMA_VERSION};

fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "allot-preemptions-{tag}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn record(victim: u64, time: i64, preemptor: u64) -> Preemption {
    Preemption {
        time,
        victim,
        victim_account: "a1".into(),
        preemptor,
        preemptor_account: "b1".into(),
        rule: "net_gain".into(),
        grounds: serde_json::json!({"rule": "net_gain", "gain": 4.0, "lost": 0.0}),
    }
}

#[test]
fn a_version_3_ledger_gains_the_table_and_keeps_its_attempts() {
    let dir = tempdir("migrate");
    let path = dir.join("l.sqlite");
    {
        // A ledger as allot wrote it before version 4: migrations 1 to 3,
        // one attempt.
        let conn = Connection::open(&path).unwrap();
        for m in &MIGRATIONS[..3] {
            conn.execute_batch(m).unwrap();
        }
        conn.pragma_update(None, "user_version", 3).unwrap();
        conn.execute(
            "INSERT INTO attempts (job_id, submit, attempt, label, account, user, gpus, rate, \
             start, \"end\", state, min_runtime, min_runtime_recorded, charged) \
             VALUES (17, 1000, 0, '17', 'a1', 'alice', 4, 4, 1000, 5000, 'PREEMPTED', 3600, 1, 16000)",
            [],
        )
        .unwrap();
    }
    let old = LedgerReader::open(&path).unwrap();
    assert_eq!(
        old.preemptions_of(17).unwrap(),
        vec![],
        "no table yet: none"
    );
    assert_eq!(old.preemptions_by_rule().unwrap(), vec![]);
    drop(old);
    let l = Ledger::open(&path).unwrap();
    assert_eq!(
        crate::schema_version(&l.conn, &path).unwrap(),
        SCHEMA_VERSION
    );
    let r = l.reader().unwrap();
    assert_eq!(r.attempts_of_job(17).unwrap().len(), 1, "attempts kept");
    assert!(l.record_preemption(&record(17, 4990, 18)).unwrap());
    assert!(!l.record_preemption(&record(17, 4990, 18)).unwrap(), "once");
    let got = r.preemptions_of(17).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].preemption, record(17, 4990, 18));
    assert_eq!(
        r.preemptions_by_rule().unwrap(),
        vec![("net_gain".into(), 1)]
    );
}

#[test]
fn the_log_is_read_from_where_it_stopped_and_each_record_stored_once() {
    let dir = tempdir("log");
    let path = dir.join("l.sqlite");
    let mut l = Ledger::open(&path).unwrap();
    let log = log_path(&path);
    assert_eq!(log, dir.join("l.sqlite.preemptions"));
    assert_eq!(
        l.import_preemption_log().unwrap(),
        LogImport::default(),
        "no log yet"
    );
    append_to_log(&log, &[record(1, 100, 9), record(2, 100, 9)]).unwrap();
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&log).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode & 0o007, 0, "not world-readable: {mode:o}");
    // A line being written (no newline yet) and a line that is no record.
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    f.write_all(b"not json\n{\"time\": 3").unwrap();
    let got = l.import_preemption_log().unwrap();
    assert_eq!(
        got,
        LogImport {
            new: 2,
            unreadable: 1
        }
    );
    assert_eq!(
        l.import_preemption_log().unwrap(),
        LogImport::default(),
        "read once"
    );
    // The rest of the line arrives, then another record.
    let rest = serde_json::to_string(&record(3, 300, 10)).unwrap();
    f.write_all(&rest.as_bytes()[rest.find(',').unwrap()..])
        .unwrap();
    f.write_all(b"\n").unwrap();
    append_to_log(&log, &[record(4, 400, 10)]).unwrap();
    let got = l.import_preemption_log().unwrap();
    assert_eq!(
        got,
        LogImport {
            new: 2,
            unreadable: 0
        }
    );
    let r = l.reader().unwrap();
    assert_eq!(r.preemptions_of(3).unwrap()[0].preemption.preemptor, 10);
    // Rotated: a shorter log is read from its start; known records stay once.
    std::fs::remove_file(&log).unwrap();
    append_to_log(&log, &[record(4, 400, 10), record(5, 500, 11)]).unwrap();
    let got = l.import_preemption_log().unwrap();
    assert_eq!(
        got,
        LogImport {
            new: 1,
            unreadable: 0
        }
    );
    assert_eq!(
        r.preemptions_by_rule().unwrap(),
        vec![("net_gain".into(), 5)]
    );
}
