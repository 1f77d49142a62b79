//! preempt/allot's state between slurmctld's calls: the live load, the
//! round of candidates ([`fairshare::preempt::round`]) and the allowed
//! candidates whose preemption is recorded ([`crate::preempt_record`]),
//! fed from Slurm's job records. The cdylib only converts slurmctld's
//! pointers and calls these.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use allot_ffi::job::{JobRecord, JobState};
use fairshare::preempt::round::{Candidate, Rounds};
use fairshare::{Engine, NodeGpus, RunningJob};

use crate::jobs;
use crate::preempt_record::{Candidates, Recorder};
use crate::snapshot::{now, EngineState};

/// The engine's verdict, after the cheap part: only a running (or
/// suspended) job can be preempted. slurmctld 22.05 asks about *every* job,
/// pending ones included, when it looks for victims; answering those from
/// the job state alone, before any engine work, keeps a 10,000-job queue as
/// cheap to schedule as with preempt/qos (docs/benchmarks.md). The round of
/// candidates and the live load are the engine's ([`fairshare::preempt::round`]).
pub fn may_preempt(
    state: &EngineState,
    preemptor: &JobRecord<'_>,
    preemptee: &JobRecord<'_>,
) -> bool {
    if !matches!(preemptee.state(), JobState::Running | JobState::Suspended) {
        return false;
    }
    let engine = state.engine.get();
    let Ok(mut live) = live().lock() else {
        return false;
    };
    let Live {
        rounds,
        facts,
        candidates,
    } = &mut *live;
    if !rounds.has_load() {
        return false;
    }
    let now = now();
    let id = preemptor.job_id();
    let snapshot = std::sync::Arc::as_ptr(&engine) as usize;
    rounds.enter(u64::from(id), snapshot);
    // The preemptor as read for this job, second and snapshot: slurmctld
    // asks about every candidate of one pending job in a row.
    let key = (id, now, snapshot);
    let facts = match facts {
        Some((k, f)) if *k == key => &*f,
        _ => {
            &facts
                .insert((key, jobs::PreemptorFacts::of(&engine, preemptor)))
                .1
        }
    };
    let r = jobs::running(&engine, preemptee);
    let candidate = Candidate {
        id: u64::from(preemptee.job_id()),
        job: &r,
        gpus: jobs::allocated_gpus(preemptee).max(1),
        nodes: preemptee.nodes(),
    };
    let p = facts.preemptor();
    let judged = rounds.judge(&engine, u64::from(id), &p, facts.gpus(), candidate, now);
    let (allowed, grounds) = match judged {
        Some((fairshare::Verdict::Allowed, grounds)) => (true, grounds),
        _ => (false, None),
    };
    candidates.note(
        (id, p.account),
        (preemptee.job_id(), preemptee.account().unwrap_or("")),
        grounds,
    );
    allowed
}

/// slurmctld preempts `victim` now (it asked the victim's grace time:
/// [`crate::preempt_record`]): queues its record for `recorder` if it is
/// an allowed candidate of the preemptor asked about last. No I/O.
pub fn taken(victim: &JobRecord<'_>, recorder: &Recorder) {
    let Ok(mut live) = live().lock() else {
        return;
    };
    if let Some(p) = live.candidates.taken(victim.job_id(), now()) {
        recorder.send(p);
    }
}

/// The rounds and live load ([`Rounds`]), the last preemptor read (job
/// id, second, engine snapshot) and what was read, and its allowed
/// candidates with their grounds ([`Candidates`]).
#[derive(Default)]
struct Live {
    rounds: Rounds,
    facts: Option<((u32, u64, usize), jobs::PreemptorFacts)>,
    candidates: Candidates,
}

static LIVE_CELL: OnceLock<Mutex<Live>> = OnceLock::new();
static LIVE_STOP: AtomicBool = AtomicBool::new(false);

fn live() -> &'static Mutex<Live> {
    LIVE_CELL.get_or_init(Mutex::default)
}

/// Recounts the load every second on its own thread (taking the job read
/// lock, which slurmctld's callbacks cannot: they run inside its own
/// iterations of the job list).
pub fn start_load_thread(
    state: impl Fn() -> Option<&'static EngineState> + Send + 'static,
) -> Result<(), String> {
    std::thread::Builder::new()
        .name("allot-load".into())
        .spawn(move || {
            while !LIVE_STOP.load(Ordering::Relaxed) {
                if let Some(state) = state() {
                    let engine = state.engine.get();
                    if let Some((load, _)) = jobs::load_now(&engine) {
                        if let Ok(mut l) = live().lock() {
                            l.rounds.set_load(load);
                        }
                    }
                }
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
        })
        .map(|_| ())
        .map_err(|e| format!("cannot start the load thread: {e}"))
}

/// Stops the load thread (at its next second).
pub fn stop() {
    LIVE_STOP.store(true, Ordering::Relaxed);
}

/// Victim order (ascending is preempted first): the engine's
/// ([`Engine::victim_order`]: `--no-requeue` last, free tier first, then
/// the most over-served accounts, then least work lost), with the job's
/// allocated GPUs (at least 1) as its allocation.
pub fn victim_order(engine: &Engine, job: &JobRecord<'_>, now: u64) -> u32 {
    let gpus = u32::try_from(jobs::allocated_gpus(job))
        .unwrap_or(u32::MAX)
        .max(1);
    let alloc = [NodeGpus { node: 0, gpus }];
    let running = RunningJob {
        alloc: &alloc,
        ..jobs::running(engine, job)
    };
    engine.victim_order(&running, now)
}
