//! What preempt/allot records: each preemption slurmctld carries out, with
//! the preemptor, the clause that allowed it and the figures
//! ([`fairshare::preempt::Grounds`]; the record is
//! [`allot_ledger::preemptions::Preemption`]).
//!
//! # Which candidates were taken
//! slurmctld asks `preempt_p_preemptable` about every running job for one
//! pending job (`slurm_find_preemptable_jobs`), then its select plugin
//! takes a subset of those allowed, and `_preempt_jobs` preempts each one
//! taken through `slurm_job_preempt`, all in one `select_nodes` call under
//! the job write lock. `slurm_job_preempt` asks the victim's grace time
//! (`preempt_p_get_data(PREEMPT_DATA_GRACE_TIME)`) exactly once, the first
//! time it preempts that job (it then sets `preempt_time`, and a later call
//! in the grace period returns early); nothing else asks for it (22.05
//! `slurmctld/preempt.c`, 24.11 `interfaces/preempt.c`). So: every allowed
//! candidate of the current preemptor is noted with its grounds
//! ([`Candidates::note`]), and the grace-time question for a noted job is
//! the preemption ([`Candidates::taken`]). Not recorded: a job Slurm
//! preempts for a reservation's `MaxStartDelay` (it reads the job's
//! `warn_time` instead of asking), which allot never allowed.
//!
//! # Durably, off slurmctld's call path
//! The record goes into a bounded in-memory queue ([`Recorder::send`]: no
//! I/O, never waits); the plugin's own thread appends it to the preemption
//! log beside the ledger ([`allot_ledger::preemptions::log_path`]) and
//! syncs it to disk, where `allot sync` reads it. A record is on disk
//! within milliseconds of the preemption; `fini` (slurmctld's shutdown or
//! restart) waits up to [`DRAIN_WAIT`] for the queue to drain. Lost: what
//! was queued when slurmctld crashed or was killed, and records dropped
//! while the queue is full (the log unwritable for [`QUEUE`] preemptions;
//! logged). `allot explain` labels its guess for an attempt without a
//! record.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Mutex;
use std::time::Duration;

use allot_ledger::preemptions::{append_to_log, Preemption};
use fairshare::preempt::Grounds;

/// Records the queue holds while the log is being written (or cannot be).
pub const QUEUE: usize = 4096;

/// How long `fini` waits for the queue to reach the log.
pub const DRAIN_WAIT: Duration = Duration::from_secs(2);

/// The preemption log of the ledger at `ledger` (allot.toml's `[ledger]
/// path`): [`allot_ledger::preemptions::log_path`].
pub fn log_of(ledger: &str) -> PathBuf {
    allot_ledger::preemptions::log_path(std::path::Path::new(ledger))
}

/// An allowed candidate of the current preemptor.
#[derive(Debug, Clone, PartialEq)]
struct Noted {
    victim_account: String,
    preemptor_account: String,
    grounds: Grounds,
}

/// The allowed candidates of the preemptor slurmctld asked about last
/// (module doc), by victim job id.
#[derive(Debug, Default)]
pub struct Candidates {
    preemptor: Option<u32>,
    allowed: HashMap<u32, Noted>,
}

impl Candidates {
    /// Notes the answer for `victim` (of `victim_account`) asked for
    /// `preemptor` (of `preemptor_account`): `grounds` when allowed, `None`
    /// when not (the latest answer counts). Another preemptor than the
    /// last forgets the last one's candidates.
    pub fn note(
        &mut self,
        (preemptor, preemptor_account): (u32, &str),
        (victim, victim_account): (u32, &str),
        grounds: Option<Grounds>,
    ) {
        if self.preemptor != Some(preemptor) {
            self.preemptor = Some(preemptor);
            self.allowed.clear();
        }
        match grounds {
            Some(grounds) => {
                self.allowed.insert(
                    victim,
                    Noted {
                        victim_account: victim_account.to_string(),
                        preemptor_account: preemptor_account.to_string(),
                        grounds,
                    },
                );
            }
            None => {
                self.allowed.remove(&victim);
            }
        }
    }

    /// slurmctld preempts `victim` at `now` (epoch seconds): its record, if
    /// it is an allowed candidate of the current preemptor (then
    /// forgotten, so it is recorded once).
    pub fn taken(&mut self, victim: u32, now: u64) -> Option<Preemption> {
        let n = self.allowed.remove(&victim)?;
        let preemptor = self.preemptor?;
        Some(Preemption::new(
            now as i64,
            (u64::from(victim), &n.victim_account),
            (u64::from(preemptor), &n.preemptor_account),
            &n.grounds,
        ))
    }
}

/// The queue of records and the thread that appends them to the log.
pub struct Recorder {
    tx: Mutex<Option<SyncSender<Preemption>>>,
    done: Mutex<Option<Receiver<()>>>,
    log_error: fn(&str),
    /// True while records are being dropped (the queue full).
    dropping: AtomicBool,
}

impl Recorder {
    /// Starts the thread appending to `log` (created mode 0640 at the
    /// first record). Write failures are logged with `log_error` once per
    /// change of state, and the recovery with `log_info`.
    ///
    /// # Errors
    /// The thread cannot be started.
    pub fn start(
        log: PathBuf,
        log_info: fn(&str),
        log_error: fn(&str),
    ) -> Result<Recorder, String> {
        let (tx, rx) = sync_channel::<Preemption>(QUEUE);
        let (done_tx, done) = sync_channel::<()>(1);
        std::thread::Builder::new()
            .name("allot-record".into())
            .spawn(move || {
                let mut failing: Option<String> = None;
                let mut batch = Vec::new();
                // Ends once every sender is gone and the queue is empty.
                while let Ok(first) = rx.recv() {
                    batch.push(first);
                    batch.extend(rx.try_iter());
                    match append_to_log(&log, &batch) {
                        Ok(()) => {
                            if failing.take().is_some() {
                                log_info(&format!("preemption log {} writable again", log.display()));
                            }
                        }
                        Err(e) => {
                            let e = format!(
                                "cannot record {} preemption(s): {e}; allot explain will guess their preemptor (the ledger's directory must be writable by SlurmUser)",
                                batch.len()
                            );
                            if failing.as_ref() != Some(&e) {
                                log_error(&e);
                                failing = Some(e);
                            }
                        }
                    }
                    batch.clear();
                }
                let _ = done_tx.send(());
            })
            .map_err(|e| format!("cannot start the preemption record thread: {e}"))?;
        Ok(Recorder {
            tx: Mutex::new(Some(tx)),
            done: Mutex::new(Some(done)),
            log_error,
            dropping: AtomicBool::new(false),
        })
    }

    /// Queues `p` for the log; never waits. A full queue drops it: the
    /// first drop of a run of them is logged, with the job ids.
    pub fn send(&self, p: Preemption) {
        let Ok(tx) = self.tx.lock() else { return };
        let Some(tx) = tx.as_ref() else { return };
        match tx.try_send(p) {
            Ok(()) => self.dropping.store(false, Ordering::Relaxed),
            Err(TrySendError::Full(p)) => {
                if !self.dropping.swap(true, Ordering::Relaxed) {
                    (self.log_error)(&format!(
                        "preemption of job {} for job {} not recorded, nor any other until the \
                         log takes records again: {QUEUE} records wait for it",
                        p.victim, p.preemptor
                    ))
                }
            }
            Err(TrySendError::Disconnected(_)) => {}
        }
    }

    /// Closes the queue and waits up to [`DRAIN_WAIT`] for the thread to
    /// write what it holds (plugin `fini`).
    pub fn stop(&self) {
        if let Ok(mut tx) = self.tx.lock() {
            tx.take();
        }
        if let Some(done) = self.done.lock().ok().and_then(|mut d| d.take()) {
            match done.recv_timeout(DRAIN_WAIT) {
                Ok(()) | Err(RecvTimeoutError::Disconnected) | Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairshare::preempt::grounds::Rule;

    fn grounds(rule: Rule) -> Grounds {
        Grounds::example(rule, "tree.b", "tree.a")
    }

    #[test]
    fn only_an_allowed_candidate_of_the_last_preemptor_is_recorded_once() {
        let mut c = Candidates::default();
        c.note((100, "b"), (1, "a"), Some(grounds(Rule::NetGain)));
        c.note((100, "b"), (2, "a"), Some(grounds(Rule::FreeTier)));
        c.note((100, "b"), (3, "a"), None);
        // Asked again and refused: the latest answer counts.
        c.note((100, "b"), (2, "a"), None);
        assert_eq!(c.taken(3, 1000), None, "refused");
        assert_eq!(c.taken(2, 1000), None, "refused the second time");
        let p = c.taken(1, 1000).expect("allowed and taken");
        assert_eq!(
            (p.time, p.victim, p.victim_account.as_str(), p.preemptor),
            (1000, 1, "a", 100)
        );
        assert_eq!(
            (p.preemptor_account.as_str(), p.rule.as_str()),
            ("b", "net_gain")
        );
        assert_eq!(p.grounds["victim_leaf"]["running"], 16);
        assert_eq!(c.taken(1, 1001), None, "recorded once");
        // Another preemptor's round forgets the last one's candidates.
        c.note((100, "b"), (5, "a"), Some(grounds(Rule::NetGain)));
        c.note((101, "c"), (6, "a"), Some(grounds(Rule::NetGain)));
        assert_eq!(c.taken(5, 1002), None);
        assert_eq!(c.taken(6, 1002).map(|p| p.preemptor), Some(101));
    }

    #[test]
    fn the_thread_writes_every_record_before_stop_returns() {
        let dir = std::env::temp_dir().join(format!("allot-record-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let ledger = dir.join("ledger.sqlite");
        let log = allot_ledger::preemptions::log_path(&ledger);
        let r = Recorder::start(log, |_| {}, |m| panic!("{m}")).unwrap();
        let mut c = Candidates::default();
        for v in 1..=50 {
            c.note((100, "b"), (v, "a"), Some(grounds(Rule::NetGain)));
            r.send(c.taken(v, 1000 + u64::from(v)).unwrap());
        }
        r.stop();
        r.send(Preemption::new(
            2000,
            (1, "a"),
            (100, "b"),
            &grounds(Rule::NetGain),
        ));
        // What allot sync reads of it.
        let mut l = allot_ledger::Ledger::open(&ledger).unwrap();
        let got = l.import_preemption_log().unwrap();
        assert_eq!(
            (got.new, got.unreadable),
            (50, 0),
            "every record, none after stop"
        );
        let last = l.reader().unwrap().preemptions_of(50).unwrap();
        assert_eq!(last[0].preemption.time, 1050);
        assert_eq!(last[0].preemption.grounds["gain"], 4.0);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
