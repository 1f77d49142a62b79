//! `preempt_allot.so` (`PreemptType=preempt/allot`, `PreemptMode=REQUEUE`
//! or `CANCEL`; any other mode is refused at slurmctld start with one log
//! line: [`slurm_plugin::preempt_mode`]).
//!
//! slurmctld asks, for a pending job that cannot start, which running jobs
//! it may preempt (`preempt_p_preemptable`), then takes the candidates in
//! ascending `PREEMPT_DATA_PRIO` order until the job fits. allot answers
//! with the engine's contract and fair-share rules
//! ([`fairshare::preempt`]) and orders candidates as the engine orders
//! victims: unallocated first, then the most over-served accounts, then
//! those that lose least work, `--no-requeue` jobs last (which are
//! cancelled, not requeued).
//!
//! This plugin is its own dlopen handle: it keeps its own engine snapshot,
//! rebuilt from the same ledger and config on the same interval as the
//! priority plugin's, so both rank accounts identically up to one refresh.
#![allow(non_upper_case_globals)]
// The exported functions take the raw pointers slurmctld passes (the C ABI
// the plugin interface defines); each is wrapped once, at the top, by an
// `unsafe` allot_ffi constructor whose safety contract slurmctld meets.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use std::collections::{HashMap, HashSet};
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use allot_ffi::ctld;
use allot_ffi::job::{JobRecord, JobState};
use allot_ffi::{log, sys};
use fairshare::{Engine, Entitlements, NodeGpus, RunningJob, VictimTally};
use slurm_plugin::jobs;
use slurm_plugin::preempt_mode::{self, Honoured};
use slurm_plugin::snapshot::{now, EngineState};
use slurm_plugin::{guard, start_once};

allot_ffi::slurm_plugin!(name: "allot preempt plugin", kind: "preempt/allot");

const P: &str = "preempt/allot: ";

static STATE: OnceLock<EngineState> = OnceLock::new();
/// slurm.conf's PreemptMode, checked at init.
static MODE: OnceLock<Honoured> = OnceLock::new();

fn info(m: &str) {
    log::info(P, m)
}
fn error(m: &str) {
    log::error(P, m)
}
fn nothing(_: &Engine) {}

/// Loads allot.toml and starts the engine thread (see the priority plugin).
#[no_mangle]
pub extern "C" fn init() -> c_int {
    guard(P, "init", sys::SLURM_ERROR, || {
        if !ctld::in_slurmctld() || STATE.get().is_some() {
            return sys::SLURM_SUCCESS as c_int;
        }
        // A mode allot does not honour stops slurmctld here, with one line,
        // rather than preempting in a way nobody has written down.
        match preempt_mode::check(ctld::preempt_mode()) {
            Ok(mode) => {
                let _ = MODE.set(mode);
            }
            Err(e) => {
                error(&e);
                return sys::SLURM_ERROR;
            }
        }
        let started = start_once(&STATE, error, || EngineState::start(info, error, nothing));
        if started != sys::SLURM_SUCCESS as c_int {
            return started;
        }
        if let Err(e) = start_load_thread() {
            error(&e);
            return sys::SLURM_ERROR;
        }
        sys::SLURM_SUCCESS as c_int
    })
}

/// Stops the threads.
#[no_mangle]
pub extern "C" fn fini() -> c_int {
    guard(P, "fini", sys::SLURM_SUCCESS as c_int, || {
        LIVE_STOP.store(true, Ordering::Relaxed);
        if let Some(s) = STATE.get() {
            s.stop();
        }
        sys::SLURM_SUCCESS as c_int
    })
}

/// May `preemptor` preempt `preemptee` now? (Note the argument order of 22.05.)
#[no_mangle]
pub extern "C" fn preempt_p_preemptable(
    preemptee: *mut sys::job_record_t,
    preemptor: *mut sys::job_record_t,
) -> bool {
    guard(P, "preempt_p_preemptable", false, || {
        let Some(state) = STATE.get() else {
            return false;
        };
        // SAFETY: slurmctld passes two job records it holds locked for the call.
        let (Some(ee), Some(or)) = (unsafe { JobRecord::from_ptr(preemptee) }, unsafe {
            JobRecord::from_ptr(preemptor)
        }) else {
            return false;
        };
        may_preempt(state, &or, &ee)
    })
}

/// The engine's verdict, after the cheap part: only a running (or
/// suspended) job can be preempted. slurmctld 22.05 asks about *every* job,
/// pending ones included, when it looks for victims; answering those from
/// the job state alone, before any engine work, keeps a 10,000-job queue as
/// cheap to schedule as with preempt/qos (docs/benchmarks.md). (Its queue
/// sort asks only about pending pairs: [`preempt_p_job_preempt_check`]
/// answers those without a look.)
fn may_preempt(state: &EngineState, preemptor: &JobRecord<'_>, preemptee: &JobRecord<'_>) -> bool {
    if !matches!(preemptee.state(), JobState::Running | JobState::Suspended) {
        return false;
    }
    let engine = state.engine.get();
    let Ok(mut live) = live().lock() else {
        return false;
    };
    if live.load.is_none() {
        return false;
    }
    let now = now();
    let id = preemptor.job_id();
    let Live {
        load,
        counted,
        facts,
        round,
    } = &mut *live;
    // The preemptor as read for this job, second and snapshot: slurmctld
    // asks about every candidate of one pending job in a row.
    let key = (id, now, std::sync::Arc::as_ptr(&engine) as usize);
    let facts = match facts {
        Some((k, f)) if *k == key => &*f,
        _ => {
            // Another preemptor or snapshot: a new round. The same one a
            // second later (a round may straddle the tick) keeps its round
            // until a candidate repeats.
            if !matches!(facts, Some((k, _)) if (k.0, k.2) == (key.0, key.2)) {
                round.clear();
            }
            &facts
                .insert((key, jobs::PreemptorFacts::of(&engine, preemptor)))
                .1
        }
    };
    // A candidate asked about again starts a new round (slurmctld asks
    // once per running job in a round, and its backfill runs several rounds
    // for one job in a second): the victims allowed so far are forgotten.
    if !round.asked.insert(preemptee.job_id()) {
        round.clear();
        round.asked.insert(preemptee.job_id());
    }
    let p = facts.at(now);
    let r = jobs::running(&engine, preemptee);
    let r_gpus = jobs::allocated_gpus(preemptee).max(1);
    let leaf = engine.leaf_of(p.account);
    // A preemptor already counted is judged without its own move.
    let already = counted.get(&id).copied();
    let load = load.as_mut().expect("checked");
    if let (Some(l), Some(g)) = (leaf, already) {
        load.shift(l, -(g as i64));
    }
    // Judged beside the candidates already allowed in this round, so that
    // any subset slurmctld then preempts keeps rule 4's bound on what the
    // victims' leaves lose together (Engine::preempt_verdict_tallied).
    let verdict = round.judge(&engine, &p, &r, r_gpus, preemptee.nodes(), load, now);
    let allowed = verdict == fairshare::Verdict::Allowed;
    match (leaf, already) {
        (Some(l), Some(g)) => load.shift(l, g as i64),
        (Some(l), None) if allowed => {
            // Charge the move before the next preemptor is judged: its
            // victims are still completing and it is not running yet.
            let g = facts.gpus();
            load.shift(l, g as i64);
            counted.insert(id, g);
        }
        _ => {}
    }
    allowed
}

/// The leaves' running and pending GPUs, counted from the job list by the
/// load thread every second, plus the preemptors allowed since (their
/// GPUs already counted as running on their leaf).
#[derive(Default)]
struct Live {
    load: Option<Entitlements>,
    counted: HashMap<u32, u64>,
    /// The last preemptor read: (job id, second, engine snapshot) and what
    /// was read.
    facts: Option<((u32, u64, usize), jobs::PreemptorFacts)>,
    /// The candidates of that preemptor's current round.
    round: Round,
}

/// One round of candidates of one preemptor: the jobs asked about, and the
/// victims allowed so far, by where they run. slurmctld (select/cons_tres)
/// preempts only jobs on the nodes the preemptor starts on, so for a
/// one-node preemptor the victims that matter together are those of one
/// node and those spanning several: a candidate is judged beside its node's
/// allowed victims and the spanning ones (a spanning one beside every
/// node's). Asked in job-list order, a round-robin layout would otherwise
/// spend the allowance on jobs of different nodes and let the preemptor fit
/// nowhere. A preemptor of several nodes is judged beside every victim.
#[derive(Default)]
struct Round {
    asked: HashSet<u32>,
    /// Several-node preemptor: all victims allowed.
    all: VictimTally,
    /// One-node preemptor: victims allowed on each node.
    per_node: HashMap<String, VictimTally>,
    /// One-node preemptor: victims allowed that span several nodes.
    spanning: VictimTally,
}

impl Round {
    fn clear(&mut self) {
        self.asked.clear();
        self.all.clear();
        self.per_node.clear();
        self.spanning.clear();
    }

    /// `r`'s verdict beside the victims allowed in this round; an allowed
    /// one joins them. `nodes`: its node list (`gpu03`, `gpu[01-02]`).
    #[allow(clippy::too_many_arguments)]
    fn judge(
        &mut self,
        engine: &Engine,
        p: &fairshare::Preemptor<'_>,
        r: &RunningJob<'_>,
        gpus: u64,
        nodes: Option<&str>,
        load: &Entitlements,
        now: u64,
    ) -> fairshare::Verdict {
        if p.nodes > 1 {
            return engine.preempt_verdict_tallied(p, r, gpus, &mut self.all, load, now);
        }
        let one = nodes.filter(|n| !n.contains([',', '[']));
        let (verdict, charged) = match one {
            Some(node) => {
                let beside = match self.per_node.get(node) {
                    Some(here) => here.with(&self.spanning),
                    None => self.spanning.clone(),
                };
                engine.verdict_beside(p, r, gpus, &beside, load, now)
            }
            None => {
                // Beside every node's victims: the worst of them decides.
                let mut worst = engine.verdict_beside(p, r, gpus, &self.spanning, load, now);
                for t in self.per_node.values() {
                    let v = engine.verdict_beside(p, r, gpus, &t.with(&self.spanning), load, now);
                    if v.0 != fairshare::Verdict::Allowed {
                        worst = v;
                        break;
                    }
                }
                worst
            }
        };
        if let Some(leaf) = charged {
            match one {
                Some(node) => self
                    .per_node
                    .entry(node.to_owned())
                    .or_default()
                    .add(leaf, gpus),
                None => self.spanning.add(leaf, gpus),
            }
        }
        verdict
    }
}

static LIVE_CELL: OnceLock<Mutex<Live>> = OnceLock::new();
static LIVE_STOP: AtomicBool = AtomicBool::new(false);

fn live() -> &'static Mutex<Live> {
    LIVE_CELL.get_or_init(Mutex::default)
}

/// Recounts the load every second on its own thread (taking the job read
/// lock, which slurmctld's callbacks cannot: they run inside its own
/// iterations of the job list).
fn start_load_thread() -> Result<(), String> {
    std::thread::Builder::new()
        .name("allot-load".into())
        .spawn(|| {
            while !LIVE_STOP.load(Ordering::Relaxed) {
                if let Some(state) = STATE.get() {
                    let engine = state.engine.get();
                    if let Some(load) = jobs::load_now(&engine) {
                        if let Ok(mut l) = live().lock() {
                            l.load = Some(load);
                            l.counted.clear();
                        }
                    }
                }
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
        })
        .map(|_| ())
        .map_err(|e| format!("cannot start the load thread: {e}"))
}

/// The queue-record form of [`preempt_p_preemptable`]: always `false`,
/// without reading either record.
///
/// slurmctld (22.05 and 24.11) calls it only from `sort_job_queue2`, the
/// comparator of every main and backfill queue sort, twice per comparison,
/// and a scheduler queue holds pending jobs only (`build_job_queue`
/// appends a job only while `IS_JOB_PENDING`). A pending job is never a
/// preemptee ([`may_preempt`]'s first rule), so the answer is `false` for
/// every pair; allot's priority, not this check, puts preemptors first.
/// Reading the two job records for that answer cost a cache miss per call:
/// at 50,000 pending jobs about 1.6 million calls per sort, 7.2% of
/// slurmctld's samples (docs/benchmarks.md). Nothing here can panic, so
/// there is no guard.
#[no_mangle]
pub extern "C" fn preempt_p_job_preempt_check(
    _preemptor: *mut sys::job_queue_rec_t,
    _preemptee: *mut sys::job_queue_rec_t,
) -> bool {
    false
}

/// Victim order (ascending is preempted first): the engine's
/// ([`Engine::victim_order`]: `--no-requeue` last, free tier first, then
/// the most over-served accounts, then least work lost), with the job's
/// allocated GPUs (at least 1) as its allocation.
fn victim_order(engine: &Engine, job: &JobRecord<'_>) -> u32 {
    let gpus = u32::try_from(jobs::allocated_gpus(job))
        .unwrap_or(u32::MAX)
        .max(1);
    let alloc = [NodeGpus { node: 0, gpus }];
    let running = RunningJob {
        alloc: &alloc,
        ..jobs::running(engine, job)
    };
    engine.victim_order(&running, now())
}

/// ENABLED, MODE (slurm.conf's: requeue, with cancel for `--no-requeue`
/// jobs; or cancel), PRIO (victim order) and GRACE_TIME (`[preempt]
/// grace_time`, seconds).
#[no_mangle]
pub extern "C" fn preempt_p_get_data(
    job_ptr: *mut sys::job_record_t,
    data_type: u32,
    data: *mut c_void,
) -> c_int {
    guard(P, "preempt_p_get_data", sys::SLURM_ERROR, || {
        if data.is_null() {
            return sys::SLURM_ERROR;
        }
        let state = STATE.get();
        // SAFETY: slurmctld passes the job (locked) for the call.
        let job = unsafe { JobRecord::from_ptr(job_ptr) };
        // SAFETY (each arm): `data` points to the type slurmctld documents
        // for that data_type (bool, u16, u32, u32).
        match data_type {
            sys::slurm_preempt_data_type_t_PREEMPT_DATA_ENABLED => unsafe {
                *(data as *mut bool) = true
            },
            sys::slurm_preempt_data_type_t_PREEMPT_DATA_MODE => {
                let honoured = MODE.get().copied().unwrap_or(Honoured::Requeue);
                let mode = honoured.victim_mode(job.is_none_or(|j| j.requeue()));
                unsafe { *(data as *mut u16) = mode }
            }
            sys::slurm_preempt_data_type_t_PREEMPT_DATA_PRIO => {
                let prio = match (state, job) {
                    (Some(s), Some(j)) => victim_order(&s.engine.get(), &j),
                    _ => 0,
                };
                unsafe { *(data as *mut u32) = prio }
            }
            sys::slurm_preempt_data_type_t_PREEMPT_DATA_GRACE_TIME => {
                let grace = state.map_or(0, |s| s.config.get().preempt_grace_time);
                unsafe { *(data as *mut u32) = grace.min(u64::from(u32::MAX)) as u32 }
            }
            _ => return sys::SLURM_ERROR,
        }
        sys::SLURM_SUCCESS as c_int
    })
}
