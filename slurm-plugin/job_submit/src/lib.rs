//! `job_submit_allot.so` (`JobSubmitPlugins=allot`). The rules live in
//! [`slurm_plugin::submit`]; this file converts Slurm's structs and answers.
#![allow(non_upper_case_globals)]
// The exported functions take the raw pointers slurmctld passes (the C ABI
// the plugin interface defines); each is wrapped once, at the top, by an
// `unsafe` allot_ffi constructor whose safety contract slurmctld meets.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use std::ffi::{c_char, c_int};
use std::sync::{Mutex, OnceLock};

use allot_ffi::job::{JobDescMut, JobRecordMut, JobState};
use allot_ffi::{ctld, log, sys};
use fairshare::record::SPANK_ENV;
use fairshare::sweep::SweepCounter;
use slurm_plugin::config::{start_in_slurmctld, ConfigWatcher};
use slurm_plugin::submit::{
    array_tasks, decide_modify, decide_submit, gpus_at_submission, GpuRequest, Modification,
    ModifyDecision, Refusal, Submission,
};
use slurm_plugin::{guard, start_once};

allot_ffi::slurm_plugin!(name: "allot job_submit plugin", kind: "job_submit/allot");

const P: &str = "job_submit/allot: ";
static CONFIG: OnceLock<ConfigWatcher> = OnceLock::new();
/// Each account's recent short-band submissions ([`fairshare::sweep`]); a
/// reconfigure that changes `sweep_jobs` or `sweep_window` starts them again.
static SWEEPS: Mutex<Option<SweepCounter<String>>> = Mutex::new(None);

fn info(m: &str) {
    log::info(P, m)
}
fn error(m: &str) {
    log::error(P, m)
}

/// Loads allot.toml; a bad file stops slurmctld (its error names file and fix).
#[no_mangle]
pub extern "C" fn init() -> c_int {
    guard(P, "init", sys::SLURM_ERROR, || {
        start_once(&CONFIG, error, || start_in_slurmctld(info, error))
    })
}

/// Stops the config thread.
#[no_mangle]
pub extern "C" fn fini() -> c_int {
    guard(P, "fini", sys::SLURM_SUCCESS as c_int, || {
        if let Some(w) = CONFIG.get() {
            w.stop();
        }
        sys::SLURM_SUCCESS as c_int
    })
}

fn spank_value<'a>(d: &allot_ffi::job::JobDesc<'a>) -> Option<&'a str> {
    d.spank_env(SPANK_ENV)
        .or_else(|| d.spank_env(&format!("SPANK_{SPANK_ENV}")))
}

/// Validates account and minimum runtime; records the contract in AdminComment.
#[no_mangle]
pub extern "C" fn job_submit(
    job_desc: *mut sys::job_desc_msg_t,
    _submit_uid: u32,
    err_msg: *mut *mut c_char,
) -> c_int {
    guard(P, "job_submit", sys::SLURM_ERROR, || {
        let Some(config) = CONFIG.get().map(|w| w.get()) else {
            return sys::SLURM_ERROR;
        };
        // SAFETY: slurmctld passes a valid request it owns for this call.
        let Some(mut desc) = (unsafe { JobDescMut::from_ptr(job_desc) }) else {
            return sys::SLURM_ERROR;
        };
        let d = desc.get();
        let default_account = if d.account().is_none() {
            ctld::default_account(d.user_id())
        } else {
            None
        };
        let sub = Submission {
            account: d.account(),
            default_account: default_account.as_deref(),
            partition: d.partition(),
            spank_min_runtime: spank_value(&d),
            comment: d.comment(),
            admin_comment: d.admin_comment(),
            gpus: gpus_at_submission(&GpuRequest {
                per_job: d.tres_per_job(),
                per_node: d.tres_per_node(),
                per_task: d.tres_per_task(),
                per_socket: d.tres_per_socket(),
                nodes: d.min_nodes(),
                tasks: d.num_tasks(),
                tasks_per_node: d.ntasks_per_node(),
                sockets_per_node: d.sockets_per_node(),
            }),
            time_limit: d.time_limit_minutes().map(|m| u64::from(m) * 60),
            tasks: array_tasks(d.array_inx()),
        };
        let Ok(mut sweeps) = SWEEPS.lock() else {
            return sys::SLURM_ERROR;
        };
        let counter = match sweeps.as_mut() {
            Some(c) if c.counts_for(&config.priority) => c,
            _ => sweeps.insert(SweepCounter::of(&config.priority)),
        };
        match decide_submit(&config, &sub, counter, slurm_plugin::snapshot::now()) {
            Ok((_account, _secs, admin_comment)) => {
                desc.set_admin_comment(&admin_comment);
                sys::SLURM_SUCCESS as c_int
            }
            Err(refusal) => {
                if !err_msg.is_null() {
                    // SAFETY: err_msg is slurmctld's out-parameter; it xfrees what we put there.
                    unsafe { *err_msg = allot_ffi::xstr::xstrdup(refusal.message()) };
                }
                match refusal {
                    Refusal::Account(_) => sys::slurm_err_t_ESLURM_INVALID_ACCOUNT as c_int,
                    Refusal::MinRuntime(_) => sys::slurm_err_t_ESLURM_INVALID_TIME_LIMIT as c_int,
                }
            }
        }
    })
}

allot_ffi::export_job_modify!(job_modify_impl);

/// Hands a refusal's text to slurmctld when the release lets job_modify
/// say why (24.11's `err_msg`; 22.05 only logs it).
fn tell(err_msg: Option<*mut *mut c_char>, msg: &str) {
    if let Some(p) = err_msg.filter(|p| !p.is_null()) {
        // SAFETY: err_msg is slurmctld's out-parameter; it xfrees what we put there.
        unsafe {
            if (*p).is_null() {
                *p = allot_ffi::xstr::xstrdup(msg);
            }
        }
    }
}

/// The minimum runtime may change only while pending; operators' AdminComment
/// edits keep the recorded contract.
fn job_modify_impl(
    job_desc: *mut sys::job_desc_msg_t,
    job_ptr: *mut sys::job_record_t,
    _submit_uid: u32,
    err_msg: Option<*mut *mut c_char>,
) -> c_int {
    guard(P, "job_modify", sys::SLURM_ERROR, || {
        let Some(config) = CONFIG.get().map(|w| w.get()) else {
            return sys::SLURM_ERROR;
        };
        // SAFETY: slurmctld passes the request and the job (write-locked) for this call.
        let (Some(mut desc), Some(mut job_mut)) =
            (unsafe { JobDescMut::from_ptr(job_desc) }, unsafe {
                JobRecordMut::from_ptr(job_ptr)
            })
        else {
            return sys::SLURM_ERROR;
        };
        let d = desc.get();
        let job = job_mut.get();
        let m = Modification {
            comment: d.comment(),
            admin_comment: d.admin_comment(),
            current_admin_comment: job.admin_comment(),
            partition: job.partition(),
            time_limit: d
                .time_limit_minutes()
                .or(job.time_limit_minutes())
                .map(|m| u64::from(m) * 60),
            pending: job.state() == JobState::Pending,
        };
        let job_id = job.job_id();
        match decide_modify(&config, &m) {
            ModifyDecision::Unchanged => sys::SLURM_SUCCESS as c_int,
            ModifyDecision::SetJobAdminComment(c) => {
                info(&format!(
                    "JobId={job_id}: minimum runtime changed while pending: {c}"
                ));
                job_mut.set_admin_comment(&c);
                sys::SLURM_SUCCESS as c_int
            }
            ModifyDecision::SetAdminComment(c) => {
                desc.set_admin_comment(&c);
                sys::SLURM_SUCCESS as c_int
            }
            ModifyDecision::NotPending(msg) => {
                info(&format!("JobId={job_id}: {msg}"));
                tell(err_msg, &msg);
                sys::slurm_err_t_ESLURM_JOB_NOT_PENDING as c_int
            }
            ModifyDecision::Invalid(msg) => {
                info(&format!("JobId={job_id}: {msg}"));
                tell(err_msg, &msg);
                sys::slurm_err_t_ESLURM_INVALID_TIME_LIMIT as c_int
            }
        }
    })
}
