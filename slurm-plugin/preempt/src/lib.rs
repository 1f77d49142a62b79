//! `preempt_allot.so` (`PreemptType=preempt/allot`, `PreemptMode=REQUEUE`).
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

use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex, OnceLock};

use allot_ffi::ctld;
use allot_ffi::job::{job_of_queue_rec, JobRecord, JobState};
use allot_ffi::{log, sys};
use fairshare::{Engine, Entitlements, NodeGpus, RunningJob};
use slurm_plugin::guard;
use slurm_plugin::jobs;
use slurm_plugin::snapshot::{now, EngineState};

allot_ffi::slurm_plugin!(name: "allot preempt plugin", kind: "preempt/allot");

const P: &str = "preempt/allot: ";

static STATE: OnceLock<EngineState> = OnceLock::new();

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
        match EngineState::start(info, error, nothing) {
            Ok(state) => {
                let _ = STATE.set(state);
                sys::SLURM_SUCCESS as c_int
            }
            Err(e) => {
                error(&e);
                sys::SLURM_ERROR
            }
        }
    })
}

/// Stops the threads.
#[no_mangle]
pub extern "C" fn fini() -> c_int {
    guard(P, "fini", sys::SLURM_SUCCESS as c_int, || {
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
/// pending ones included, when it looks for victims, and its queue sort asks
/// twice per comparison; answering those from the job state alone, before
/// any engine work, keeps a 10,000-job queue as cheap to schedule as with
/// preempt/qos (docs/benchmarks.md).
fn may_preempt(state: &EngineState, preemptor: &JobRecord<'_>, preemptee: &JobRecord<'_>) -> bool {
    if !matches!(preemptee.state(), JobState::Running | JobState::Suspended) {
        return false;
    }
    let engine = state.engine.get();
    let Some(load) = load_for(&engine, preemptor.job_id()) else {
        return false;
    };
    let gpus = jobs::allocated_gpus(preemptee).max(1);
    engine.preempt_verdict_with_gpus(
        &jobs::preemptor(&engine, preemptor),
        &jobs::running(&engine, preemptee),
        gpus,
        &load,
        now(),
    ) == fairshare::Verdict::Allowed
}

/// (second, preemptor job id, load) of the last [`load_for`].
static LOAD: Mutex<Option<(u64, u32, Arc<Entitlements>)>> = Mutex::new(None);

/// The leaves' running GPUs and entitlements, counted from the job list
/// once per preemptor and second: slurmctld asks about one preemptor
/// against every running job in turn, and the moves of an accepted
/// preemption (victims requeued, the preemptor running) are in the job
/// list before it asks about the next preemptor.
fn load_for(engine: &Engine, preemptor: u32) -> Option<Arc<Entitlements>> {
    let t = now();
    let mut memo = LOAD.lock().ok()?;
    if let Some((s, id, load)) = memo.as_ref() {
        if (*s, *id) == (t, preemptor) {
            return Some(load.clone());
        }
    }
    let load = Arc::new(jobs::load_held(engine)?);
    *memo = Some((t, preemptor, load.clone()));
    Some(load)
}

/// The queue-record form of [`preempt_p_preemptable`], used by the scheduler.
#[no_mangle]
pub extern "C" fn preempt_p_job_preempt_check(
    preemptor: *mut sys::job_queue_rec_t,
    preemptee: *mut sys::job_queue_rec_t,
) -> bool {
    guard(P, "preempt_p_job_preempt_check", false, || {
        // SAFETY: queue records slurmctld passes for the call.
        let (Some(or), Some(ee)) = (unsafe { job_of_queue_rec(preemptor) }, unsafe {
            job_of_queue_rec(preemptee)
        }) else {
            return false;
        };
        let Some(state) = STATE.get() else {
            return false;
        };
        may_preempt(state, &or, &ee)
    })
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

/// ENABLED, MODE (requeue; cancel for `--no-requeue` jobs), PRIO (victim
/// order) and GRACE_TIME (`[preempt] grace_time`, seconds).
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
                let mode = match job {
                    Some(j) if !j.requeue() => sys::PREEMPT_MODE_CANCEL,
                    _ => sys::PREEMPT_MODE_REQUEUE,
                };
                unsafe { *(data as *mut u16) = mode as u16 }
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
