//! `priority_allot.so` (`PriorityType=priority/allot`).
//!
//! Priorities follow the order of docs/design.md (section 1) through [`fairshare::priority`]: the
//! allocated tier above the free tier, then the account's Fair Tree rank
//! over the sliding window, then nice and age inside the account. A
//! background thread rebuilds the engine from the ledger every
//! `sync.interval` and re-prioritises pending jobs under the job write lock
//! (as multifactor's decay thread does); `priority_p_set` only reads the
//! current snapshot. `sprio` shows the factors so that its PRIORITY column
//! equals the job's priority: QOS = tier (2^31), FAIRSHARE = rank x 65536,
//! AGE = age points, SITE and NICE = the rest of the within-account score.
#![allow(non_upper_case_globals)]
// The exported functions take the raw pointers slurmctld passes (the C ABI
// the plugin interface defines); each is wrapped once, at the top, by an
// `unsafe` allot_ffi constructor whose safety contract slurmctld meets.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

use allot_ffi::ctld;
use allot_ffi::factors::Factors;
use allot_ffi::job::{JobRecord, JobState};
use allot_ffi::{assoc, log, long_double, sys};
use fairshare::Engine;
use slurm_plugin::snapshot::EngineState;
use slurm_plugin::{guard, jobs, shares, start_once};

allot_ffi::slurm_plugin!(name: "allot priority plugin", kind: "priority/allot");

const P: &str = "priority/allot: ";

static STATE: OnceLock<EngineState> = OnceLock::new();

fn info(m: &str) {
    log::info(P, m)
}
fn error(m: &str) {
    log::error(P, m)
}

/// After each rebuild (on the engine thread): re-prioritises every pending,
/// non-held job whose priority an operator has not set, then publishes the
/// tree's figures into the association manager for `sshare`. A job that
/// has used its requeues is held while its team holds its entitlement and
/// released once it is below ([`fairshare::contract::waits_for_share`]);
/// holds made by users, operators or other plugins are left alone.
fn recalculate(engine: &Engine) {
    ctld::for_each_job_mut(|j| {
        let job = j.get();
        if job.state() != JobState::Pending || job.direct_set_prio() {
            return;
        }
        let ours = job.held_by_admin()
            && job
                .state_desc()
                .is_some_and(|d| d.starts_with(jobs::SHARE_HOLD));
        if job.priority() == 0 && !ours {
            return;
        }
        // The job's contract (AdminComment) is read once, for both.
        let pending = jobs::pending(engine, &job);
        match jobs::waits_for_share(engine, &pending, job.restarts()) {
            Some(why) if !ours => j.hold(&why),
            Some(_) => {}
            None => {
                let p = engine.priority(&pending);
                if ours {
                    j.release(p);
                } else {
                    j.set_priority(p);
                }
            }
        }
    });
    // After the slurmctld locks are released (lock order: slurmctld, then assoc_mgr).
    assoc::for_each_assoc_mut(|a| {
        if let Some(f) = a
            .account()
            .and_then(|acct| shares::figures(engine, acct, a.user()))
        {
            a.set_figures(&f);
        }
    });
}

/// Loads allot.toml (a bad file stops slurmctld: the log names the file,
/// line and fix) and starts the engine thread. In a client (sshare/sprio
/// load the plugin too) nothing is started.
#[no_mangle]
pub extern "C" fn init() -> c_int {
    guard(P, "init", sys::SLURM_ERROR, || {
        if !ctld::in_slurmctld() {
            return sys::SLURM_SUCCESS as c_int;
        }
        start_once(&STATE, error, || {
            EngineState::start(info, error, recalculate)
        })
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

/// The priority of a new or requeued job. An operator-set priority
/// (`scontrol update priority=`, direct_set_prio) is kept as Slurm does.
#[no_mangle]
pub extern "C" fn priority_p_set(last_prio: u32, job_ptr: *mut sys::job_record_t) -> u32 {
    guard(P, "priority_p_set", last_prio.max(1), || {
        // SAFETY: slurmctld passes the job it is creating/requeuing, locked.
        let Some(job) = (unsafe { JobRecord::from_ptr(job_ptr) }) else {
            return 1;
        };
        if job.direct_set_prio() {
            return job.priority();
        }
        let Some(state) = STATE.get() else { return 1 };
        let engine = state.engine.get();
        engine.priority(&jobs::pending(&engine, &job))
    })
}

/// `scontrol reconfigure`: reload allot.toml and rebuild the engine now.
#[no_mangle]
pub extern "C" fn priority_p_reconfig(_assoc_clear: bool) {
    guard(P, "priority_p_reconfig", (), || {
        if let Some(s) = STATE.get() {
            s.config.poke();
            s.engine.poke();
        }
    })
}

/// slurmctld asks for an association's usage figures (sshare does, for user
/// associations, under the assoc_mgr lock): answer allot's from the snapshot.
#[no_mangle]
pub extern "C" fn priority_p_set_assoc_usage(assoc_ptr: *mut c_void) {
    guard(P, "priority_p_set_assoc_usage", (), || {
        let Some(state) = STATE.get() else { return };
        // SAFETY: slurmctld passes an association it holds locked for the call.
        let Some(mut a) = (unsafe { assoc::assoc_from_ptr(assoc_ptr) }) else {
            return;
        };
        let engine = state.engine.get();
        if let Some(f) = a
            .account()
            .and_then(|acct| shares::figures(&engine, acct, a.user()))
        {
            a.set_figures(&f);
        }
    })
}

/// Usage is charged by `allot sync` from slurmdbd, not at job end: nothing to do.
/// A job ended: its team's room changed, and with it the owed band of the
/// pending jobs ([`fairshare::owed`]). Only a flag is set here (slurmctld
/// holds its locks while it calls this); the engine thread rebuilds and
/// re-prioritises within 100 ms, once however many jobs end meanwhile.
#[no_mangle]
pub extern "C" fn priority_p_job_end(_job_ptr: *mut sys::job_record_t) {
    guard(P, "priority_p_job_end", (), || {
        if let Some(s) = STATE.get() {
            s.engine.poke();
        }
    })
}

allot_ffi::export_priority_factors_list!(sprio_factors);

/// `sprio`: the factors of pending jobs, adding up to their priority
/// (`priority_p_get_priority_factors_list`, whose signature differs by
/// release: allot_ffi::release).
fn sprio_factors(req: allot_ffi::release::FactorsRequest) -> allot_ffi::List {
    guard(
        P,
        "priority_p_get_priority_factors_list",
        std::ptr::null_mut(),
        move || {
            let Some(state) = STATE.get() else {
                return std::ptr::null_mut();
            };
            let engine = state.engine.get();
            ctld::priority_factors_list(req, |job| {
                let f = engine.priority_factors(&jobs::pending(&engine, job));
                let age = f64::from(f.age_points);
                // score = site + age - nice (see the crate doc).
                let nice = f.nice * i64::from(engine.config().priority.nice_weight);
                Some(Factors {
                    // The band: bits 31..30 (crate doc of fairshare::priority).
                    qos: f64::from(f.band as u32) * 1_073_741_824.0,
                    fair_share: f64::from(f.rank) * 65_536.0,
                    age,
                    partition: 0.0,
                    site: i64::from(f.score) - i64::from(f.age_points) + nice,
                    nice,
                })
            })
        },
    )
}

/// 24.11 asks every priority plugin, after recovering job state, how much to
/// raise all priorities (`priority_p_recover(prio_boost)`; priority/basic
/// raises them so they never reach zero). allot computes every priority
/// from the engine, so nothing is raised. 22.05 never calls it.
#[no_mangle]
pub extern "C" fn priority_p_recover(_prio_boost: u32) -> u32 {
    0
}

/// 24.11 calls `priority_p_thread_start()` once the configuration is read
/// (multifactor starts its decay thread there). allot's engine thread starts
/// in `init`, which 24.11 calls after slurmctld daemonised, so nothing is
/// left to do. 22.05 never calls it.
#[no_mangle]
pub extern "C" fn priority_p_thread_start() {}

/// `priority_p_calc_fs_factor(long double usage_efctv, long double shares_norm)`:
/// only sshare calls it, and only with `PriorityFlags=NO_FAIR_TREE`. Rust
/// has no `long double`; on x86-64 the two 80-bit arguments are passed on
/// the stack exactly like one 32-byte struct (SysV ABI, MEMORY class), so
/// we take that struct and convert each value ourselves. Answers Slurm's
/// classic factor `2^(-usage_efctv / shares_norm)`.
#[cfg(target_arch = "x86_64")]
#[no_mangle]
pub extern "C" fn priority_p_calc_fs_factor(args: LongDoublePair) -> f64 {
    guard(P, "priority_p_calc_fs_factor", 0.0, || {
        classic_fs_factor(
            long_double::to_f64(args.usage_efctv),
            long_double::to_f64(args.shares_norm),
        )
    })
}

/// The two x87 extended-precision arguments of `priority_p_calc_fs_factor`.
#[repr(C)]
pub struct LongDoublePair {
    usage_efctv: [u8; 16],
    shares_norm: [u8; 16],
}

/// Slurm's classic fair-share factor (priority/multifactor without Fair Tree).
fn classic_fs_factor(usage_efctv: f64, shares_norm: f64) -> f64 {
    if shares_norm.is_nan() || shares_norm <= 0.0 || !usage_efctv.is_finite() {
        return 0.0;
    }
    2f64.powf(-usage_efctv / shares_norm).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classic_factor() {
        assert_eq!(classic_fs_factor(0.0, 0.5), 1.0);
        assert_eq!(classic_fs_factor(0.5, 0.5), 0.5);
        assert_eq!(classic_fs_factor(1.0, 0.0), 0.0);
    }
}
