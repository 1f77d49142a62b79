//! What a plugin can ask of the process it is loaded into (slurmctld, or a
//! client command such as sshare that loads the priority plugin).
//!
//! Data symbols that only slurmctld defines (`acct_db_conn`,
//! `accounting_enforce`, `job_list`) are looked up with `dlsym` at call
//! time, never linked: a client that loads the plugin lacks them.

use std::ffi::{c_void, CStr};

use crate::factors::Factors;
use crate::sys;
use crate::xlist::for_each_in;

/// Address of a global data symbol of the host process, if it has one.
fn data_symbol(name: &CStr) -> Option<*mut c_void> {
    // SAFETY: dlsym with RTLD_DEFAULT only reads the loaded objects' symbol tables.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    (!p.is_null()).then_some(p)
}

/// slurmctld's clock: seconds since the epoch from `time(2)`, the call
/// that stamps every job's `start_time` and `end_time`.
///
/// Not `SystemTime::now()`: glibc's `time` reads the kernel's coarse
/// clock, which lags the precise one (`clock_gettime(CLOCK_REALTIME)`)
/// for up to a timer tick after each second boundary. A plugin reading
/// the precise clock there sees a second slurmctld has not reached, and
/// a job it judged at 60 s of running time is recorded with an Elapsed
/// of 59 s. Reading the same clock keeps every running time a plugin
/// computes at most what slurmctld then records.
pub fn time_now() -> u64 {
    // SAFETY: time(2) with a null argument writes nothing.
    let t = unsafe { libc::time(std::ptr::null_mut()) };
    u64::try_from(t).unwrap_or(0)
}

/// Whether this process is slurmctld (it defines `job_list`).
pub fn in_slurmctld() -> bool {
    data_symbol(c"job_list").is_some()
}

/// Path of the slurm.conf this process read (`slurm_conf.slurm_conf`).
/// Only callable inside a Slurm process (the global lives in libslurmfull).
pub fn slurm_conf_path() -> Option<String> {
    // SAFETY: slurm_conf is initialised before any plugin is loaded; the
    // path string is set once at startup. Read through a raw pointer
    // (no reference to the mutable static is formed).
    let p = unsafe { (*std::ptr::addr_of!(sys::slurm_conf)).slurm_conf };
    if p.is_null() {
        return None;
    }
    // SAFETY: NUL-terminated string owned by slurm_conf.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .ok()
        .map(str::to_string)
}

/// slurm.conf's `PreemptMode` as slurmctld parsed it
/// (`slurm_conf.preempt_mode`: `PREEMPT_MODE_*` bits, e.g. `REQUEUE`,
/// `CANCEL`, `SUSPEND | GANG`). Only callable inside a Slurm process.
pub fn preempt_mode() -> u16 {
    // SAFETY: slurm_conf is read before any plugin is loaded and not
    // changed while a plugin's init runs; a plain integer read through a
    // raw pointer (no reference to the mutable static is formed).
    unsafe { (*std::ptr::addr_of!(sys::slurm_conf)).preempt_mode }
}

/// The default account of `uid` from slurmctld's association manager
/// (what Slurm would use for a job submitted without `--account`), as
/// job_submit/lua's `default_account`. `None` outside slurmctld or when the
/// user has no association.
pub fn default_account(uid: u32) -> Option<String> {
    let conn = data_symbol(c"acct_db_conn")?;
    let enforce = data_symbol(c"accounting_enforce")?;
    let mut user = sys::slurmdb_user_rec_t {
        uid,
        ..Default::default()
    };
    // SAFETY: conn points to slurmctld's `void *acct_db_conn`, enforce to its
    // `uint16_t accounting_enforce`; assoc_mgr_fill_in_user only fills `user`
    // (locked=false: it takes the assoc_mgr read lock itself). default_acct
    // then points into the assoc_mgr's cache; it is copied at once.
    unsafe {
        let rc = sys::assoc_mgr_fill_in_user(
            *(conn as *mut *mut c_void),
            &mut user,
            i32::from(*(enforce as *const u16)),
            std::ptr::null_mut(),
            false,
        );
        if rc != sys::SLURM_SUCCESS as i32 || user.default_acct.is_null() {
            return None;
        }
        CStr::from_ptr(user.default_acct)
            .to_str()
            .ok()
            .map(str::to_string)
    }
}

/// slurmctld lock levels for (conf, job, node, part, fed).
fn lock_levels(job_write: bool) -> sys::slurmctld_lock_t {
    sys::slurmctld_lock_t {
        conf: sys::lock_level_t_NO_LOCK,
        job: if job_write {
            sys::lock_level_t_WRITE_LOCK
        } else {
            sys::lock_level_t_READ_LOCK
        },
        node: sys::lock_level_t_READ_LOCK,
        part: sys::lock_level_t_READ_LOCK,
        fed: sys::lock_level_t_NO_LOCK,
    }
}

/// Takes the slurmctld locks (job read or write; node and partition read,
/// as multifactor's recalculation does) and hands every job record to `f`.
/// `false` outside slurmctld.
fn lock_and_iterate(job_write: bool, f: impl FnMut(*mut sys::job_record_t)) -> bool {
    let Some(list_sym) = data_symbol(c"job_list") else {
        return false;
    };
    let levels = lock_levels(job_write);
    // SAFETY: job_list is slurmctld's `List job_list`; its records are valid
    // while the job lock is held, which we take for the whole iteration.
    unsafe {
        sys::lock_slurmctld(levels);
        for_each_in::<sys::job_record_t>(*(list_sym as *mut crate::List), f);
        sys::unlock_slurmctld(levels);
    }
    true
}

/// Runs `f` on every job slurmctld knows, under the job *read* lock.
/// Returns `false` outside slurmctld.
///
/// Never call it from a slurmctld callback that already holds the job lock
/// (priority_p_set, preemptable, ...): only from the plugin's own thread or
/// a callback documented as unlocked (get_priority_factors_list).
pub fn for_each_job(mut f: impl FnMut(&crate::job::JobRecord<'_>)) -> bool {
    // SAFETY: the record is valid under the read lock for the callback.
    lock_and_iterate(false, |p| {
        if let Some(j) = unsafe { crate::job::JobRecord::from_ptr(p) } {
            f(&j)
        }
    })
}

/// Runs `f` on every job without taking slurmctld's job lock: only from a
/// callback that already holds it and is *not* made from inside an
/// iteration of job_list itself (24.11's sprio call is such a callback;
/// `preempt_p_preemptable` is not: the list's own lock is held then, and
/// taking it again is fatal, list.c "Resource deadlock avoided").
/// Returns `false` outside slurmctld.
fn for_each_job_held(mut f: impl FnMut(&crate::job::JobRecord<'_>)) -> bool {
    let Some(list_sym) = data_symbol(c"job_list") else {
        return false;
    };
    // SAFETY: job_list is slurmctld's `List job_list`; the caller holds the
    // job lock, so its records stay valid for the iteration.
    unsafe {
        for_each_in::<sys::job_record_t>(*(list_sym as *mut crate::List), |p| {
            if let Some(j) = crate::job::JobRecord::from_ptr(p) {
                f(&j)
            }
        });
    }
    true
}

/// Runs `f` on every job under the job *write* lock, so it may update them
/// (the priority recalculation). Same calling rules as [`for_each_job`].
pub fn for_each_job_mut(mut f: impl FnMut(&mut crate::job::JobRecordMut<'_>)) -> bool {
    // SAFETY: the record is exclusively ours under the write lock.
    lock_and_iterate(true, |p| {
        if let Some(mut j) = unsafe { crate::job::JobRecordMut::from_ptr(p) } {
            f(&mut j)
        }
    })
}

/// Builds the List answered to `sprio` (`priority_p_get_priority_factors_list`,
/// exported with [`export_priority_factors_list!`](crate::export_priority_factors_list)):
/// one object per pending, non-held job that passes the request's job-id,
/// user and partition filters (22.05; 24.11's sprio filters itself), with
/// the factors `factors` computes. Operators' direct priorities are shown as
/// such. Takes the job read lock unless slurmctld holds it for the call
/// (24.11). Returns NULL when no job qualifies.
pub fn priority_factors_list(
    req: crate::release::FactorsRequest,
    factors: impl Fn(&crate::job::JobRecord<'_>) -> Option<Factors>,
) -> crate::List {
    // SAFETY: list_create with Slurm's own destructor for these objects.
    let ret = unsafe { sys::list_create(Some(sys::slurm_destroy_priority_factors_object)) };
    let mut count = 0;
    let mut each = |job: &crate::job::JobRecord<'_>| {
        if job.state() != crate::job::JobState::Pending || job.priority() == 0 {
            return;
        }
        if req
            .job_ids
            .as_ref()
            .is_some_and(|w| !w.contains(&job.job_id()))
            || req
                .uids
                .as_ref()
                .is_some_and(|w| !w.contains(&job.user_id()))
        {
            return;
        }
        let part = job.partition().unwrap_or("");
        if req
            .partitions
            .as_ref()
            .is_some_and(|w| !part.split(',').any(|p| w.iter().any(|x| x == p)))
        {
            return;
        }
        let f = if job.direct_set_prio() {
            None
        } else {
            factors(job)
        };
        let row = crate::release::FactorsRow {
            job_id: job.job_id(),
            user_id: job.user_id(),
            partition: job.partition_ptr(),
            account: job.account(),
            direct_prio: job.direct_set_prio().then(|| job.priority()),
        };
        // SAFETY: inside slurmctld under the job read lock (ours or the
        // caller's), so the record's strings outlive the reply; the object
        // is Slurm-allocated and owned by `ret`.
        unsafe { sys::list_append(ret, crate::release::new_factors_object(&row, f.as_ref())) };
        count += 1;
    };
    if req.job_lock_held {
        // slurmctld holds the job read lock for this call (24.11 proc_req.c).
        if !for_each_job_held(|j| each(j)) {
            // SAFETY: `ret` is ours and empty.
            unsafe { sys::list_destroy(ret) };
            return std::ptr::null_mut();
        }
    } else {
        for_each_job(|j| each(j));
    }
    if count == 0 {
        // SAFETY: `ret` is ours.
        unsafe { sys::list_destroy(ret) };
        return std::ptr::null_mut();
    }
    ret
}

#[cfg(test)]
mod tests {
    use std::time::{SystemTime, UNIX_EPOCH};

    #[test]
    fn slurmctlds_clock_never_runs_ahead_of_the_precise_one() {
        for _ in 0..10_000 {
            let coarse = super::time_now();
            let precise = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_secs();
            assert!(
                coarse <= precise && precise - coarse <= 1,
                "{coarse} vs {precise}"
            );
        }
    }
}
