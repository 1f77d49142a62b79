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
//! Each preemption slurmctld carries out is recorded, with its preemptor,
//! the clause that allowed it and the figures, in the preemption log
//! beside the ledger ([`slurm_plugin::preempt_record`]).
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
use std::sync::OnceLock;

use allot_ffi::ctld;
use allot_ffi::job::JobRecord;
use allot_ffi::{log, sys};
use fairshare::Engine;
use slurm_plugin::preempt_live;
use slurm_plugin::preempt_mode::{self, Honoured};
use slurm_plugin::preempt_record::{self, Recorder};
use slurm_plugin::snapshot::{now, EngineState};
use slurm_plugin::{guard, start_once};

allot_ffi::slurm_plugin!(name: "allot preempt plugin", kind: "preempt/allot");

const P: &str = "preempt/allot: ";

static STATE: OnceLock<EngineState> = OnceLock::new();
/// The queue of preemption records and its thread ([`preempt_record`]).
static RECORDER: OnceLock<Recorder> = OnceLock::new();
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
        if let Err(e) = preempt_live::start_load_thread(|| STATE.get()) {
            error(&e);
            return sys::SLURM_ERROR;
        }
        // The log beside the ledger; allot.toml is not reloaded for it.
        let ledger = STATE.get().map(|s| s.config.get().ledger_path.clone());
        let log = preempt_record::log_of(&ledger.unwrap_or_default());
        let started = start_once(&RECORDER, error, || Recorder::start(log, info, error));
        if started != sys::SLURM_SUCCESS as c_int {
            return started;
        }
        sys::SLURM_SUCCESS as c_int
    })
}

/// Stops the threads.
#[no_mangle]
pub extern "C" fn fini() -> c_int {
    guard(P, "fini", sys::SLURM_SUCCESS as c_int, || {
        preempt_live::stop();
        if let Some(r) = RECORDER.get() {
            r.stop();
        }
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
        preempt_live::may_preempt(state, &or, &ee)
    })
}

/// The queue-record form of [`preempt_p_preemptable`]: always `false`,
/// without reading either record.
///
/// slurmctld (22.05 and 24.11) calls it only from `sort_job_queue2`, the
/// comparator of every main and backfill queue sort, twice per comparison,
/// and a scheduler queue holds pending jobs only (`build_job_queue`
/// appends a job only while `IS_JOB_PENDING`). A pending job is never a
/// preemptee ([`preempt_live::may_preempt`]'s first rule), so the answer is `false` for
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

/// ENABLED, MODE (slurm.conf's: requeue, with cancel for `--no-requeue`
/// jobs; or cancel), PRIO (victim order) and GRACE_TIME (`[preempt]
/// grace_time`, seconds). slurmctld asks GRACE_TIME once per job it
/// preempts, as it preempts it: that question queues the preemption's
/// record ([`preempt_record`]).
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
                    (Some(s), Some(j)) => preempt_live::victim_order(&s.engine.get(), &j, now()),
                    _ => 0,
                };
                unsafe { *(data as *mut u32) = prio }
            }
            sys::slurm_preempt_data_type_t_PREEMPT_DATA_GRACE_TIME => {
                // Asked only as slurmctld preempts the job: the record.
                if let (Some(j), Some(r)) = (job, RECORDER.get()) {
                    preempt_live::taken(&j, r);
                }
                let grace = state.map_or(0, |s| s.config.get().preempt_grace_time);
                unsafe { *(data as *mut u32) = grace.min(u64::from(u32::MAX)) as u32 }
            }
            _ => return sys::SLURM_ERROR,
        }
        sys::SLURM_SUCCESS as c_int
    })
}
