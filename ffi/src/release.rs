//! What differs between the Slurm releases allot supports (22.05, 24.11),
//! one item per difference, each named after the first supported release
//! that has it (`#[cfg(slurm_since = "24.11")]`; build.rs sets the cfg from
//! the installed `slurm_version.h`). Everything else in this crate is the
//! same code for every release. docs/slurm-versions.md lists the
//! differences, with the upstream release that made each where Slurm's NEWS
//! says so.
//!
//! ```
//! // The build's release, as build.rs saw it.
//! let (major, minor) = (allot_ffi::SLURM_VERSION_NUMBER >> 16, allot_ffi::SLURM_VERSION_NUMBER >> 8 & 0xff);
//! assert!([(22, 5), (24, 11)].contains(&(major, minor)));
//! assert_eq!(allot_ffi::release::SINCE_24_11, (major, minor) >= (24, 11));
//! ```

use std::ffi::{c_char, c_void};

use crate::factors::Factors;
use crate::sys;

/// Whether the build's Slurm is 24.11 or later (for tests and docs; code
/// uses the `slurm_since` cfg).
pub const SINCE_24_11: bool = cfg!(slurm_since = "24.11");

// --- job_record_t.details -------------------------------------------------

/// The type of `job_record_t.details`: `struct job_details` in 22.05's
/// slurmctld.h.
#[cfg(not(slurm_since = "24.11"))]
pub type JobDetails = sys::job_details;
/// The type of `job_record_t.details`: since 24.11 job records live in
/// src/common/job_record.h and the details are the typedef `job_details_t`.
#[cfg(slurm_since = "24.11")]
pub type JobDetails = sys::job_details_t;

// --- job_submit's job_modify ---------------------------------------------

/// Exports job_submit's `job_modify` with the release's signature. 22.05:
/// `int job_modify(job_desc_msg_t *, job_record_t *, uint32_t submit_uid)`;
/// `$f(job_desc, job_ptr, submit_uid, None)` answers it.
#[cfg(not(slurm_since = "24.11"))]
#[macro_export]
macro_rules! export_job_modify {
    ($f:path) => {
        /// job_submit's `job_modify` (22.05 signature).
        #[no_mangle]
        pub extern "C" fn job_modify(
            job_desc: *mut $crate::sys::job_desc_msg_t,
            job_ptr: *mut $crate::sys::job_record_t,
            submit_uid: u32,
        ) -> ::std::ffi::c_int {
            $f(job_desc, job_ptr, submit_uid, None)
        }
    };
}

/// Exports job_submit's `job_modify` with the release's signature. 24.11
/// added `char **err_msg`, the message slurmctld shows the user (as
/// job_submit's); `$f(job_desc, job_ptr, submit_uid, Some(err_msg))`
/// answers it.
#[cfg(slurm_since = "24.11")]
#[macro_export]
macro_rules! export_job_modify {
    ($f:path) => {
        /// job_submit's `job_modify` (24.11 signature).
        #[no_mangle]
        pub extern "C" fn job_modify(
            job_desc: *mut $crate::sys::job_desc_msg_t,
            job_ptr: *mut $crate::sys::job_record_t,
            submit_uid: u32,
            err_msg: *mut *mut ::std::ffi::c_char,
        ) -> ::std::ffi::c_int {
            $f(job_desc, job_ptr, submit_uid, Some(err_msg))
        }
    };
}

// --- priority_p_get_priority_factors_list (sprio) ------------------------

/// What slurmctld passed to `priority_p_get_priority_factors_list`, made by
/// [`export_priority_factors_list!`](crate::export_priority_factors_list).
pub struct FactorsRequest {
    /// Only these job ids (22.05 filters in slurmctld; 24.11 in sprio).
    pub(crate) job_ids: Option<Vec<u32>>,
    /// Only these users.
    pub(crate) uids: Option<Vec<u32>>,
    /// Only these partitions.
    pub(crate) partitions: Option<Vec<String>>,
    /// Whether slurmctld already holds the job read lock for the call.
    pub(crate) job_lock_held: bool,
}

/// 22.05: `List priority_p_get_priority_factors_list(priority_factors_request_msg_t *req_msg, uid_t uid)`,
/// called without slurmctld's locks; the request carries sprio's job,
/// user and partition filters, which the plugin applies.
///
/// # Safety
/// `req` is NULL or the request slurmctld passed (valid for the call).
#[cfg(not(slurm_since = "24.11"))]
pub unsafe fn factors_request(req: *const sys::priority_factors_request_msg_t) -> FactorsRequest {
    use crate::xlist::for_each_in;
    use std::ffi::CStr;
    let mut out = FactorsRequest {
        job_ids: None,
        uids: None,
        partitions: None,
        job_lock_held: false,
    };
    if let Some(r) = req.as_ref() {
        if !r.job_id_list.is_null() {
            let mut v = Vec::new();
            for_each_in::<u32>(r.job_id_list, |p| v.push(*p));
            out.job_ids = Some(v);
        }
        if !r.uid_list.is_null() {
            let mut v = Vec::new();
            for_each_in::<u32>(r.uid_list, |p| v.push(*p));
            out.uids = Some(v);
        }
        if !r.partitions.is_null() {
            let s = CStr::from_ptr(r.partitions).to_string_lossy();
            out.partitions = Some(s.split(',').map(str::to_string).collect());
        }
    }
    out
}

/// 24.11: `list_t *priority_p_get_priority_factors_list(uid_t uid)`, called
/// with the job, node and partition read locks held (proc_req.c); sprio
/// filters the answer itself.
#[cfg(slurm_since = "24.11")]
pub fn factors_request() -> FactorsRequest {
    FactorsRequest {
        job_ids: None,
        uids: None,
        partitions: None,
        job_lock_held: true,
    }
}

/// Exports `priority_p_get_priority_factors_list` with the release's
/// signature; `$f: fn(FactorsRequest) -> List` answers it (with
/// [`ctld::priority_factors_list`](crate::ctld::priority_factors_list)).
#[cfg(not(slurm_since = "24.11"))]
#[macro_export]
macro_rules! export_priority_factors_list {
    ($f:path) => {
        /// `sprio`: the factors of pending jobs, adding up to their priority.
        #[no_mangle]
        pub extern "C" fn priority_p_get_priority_factors_list(
            req_msg: *mut $crate::sys::priority_factors_request_msg_t,
            _uid: u32,
        ) -> $crate::List {
            // SAFETY: slurmctld passes the request for this call.
            $f(unsafe { $crate::release::factors_request(req_msg) })
        }
    };
}

/// Exports `priority_p_get_priority_factors_list` with the release's
/// signature; `$f: fn(FactorsRequest) -> List` answers it (with
/// [`ctld::priority_factors_list`](crate::ctld::priority_factors_list)).
#[cfg(slurm_since = "24.11")]
#[macro_export]
macro_rules! export_priority_factors_list {
    ($f:path) => {
        /// `sprio`: the factors of pending jobs, adding up to their priority.
        #[no_mangle]
        pub extern "C" fn priority_p_get_priority_factors_list(_uid: u32) -> $crate::List {
            $f($crate::release::factors_request())
        }
    };
}

/// One pending job's row in sprio's answer, as [`new_factors_object`] reads
/// it: plain values copied from the job record (`job_record_t`) by
/// [`ctld::priority_factors_list`](crate::ctld::priority_factors_list).
pub(crate) struct FactorsRow<'a> {
    /// Slurm job id.
    pub(crate) job_id: u32,
    /// Numeric uid of the owner.
    pub(crate) user_id: u32,
    /// The record's own `partition` string (NULL or NUL-terminated, alive
    /// while the job lock is held): 22.05's object points at it, 24.11's
    /// copies it.
    pub(crate) partition: *mut c_char,
    /// The record's account (`None` for NULL or non-UTF-8): 24.11's object
    /// copies it; 22.05's has no account.
    #[cfg_attr(not(slurm_since = "24.11"), allow(dead_code))]
    pub(crate) account: Option<&'a str>,
    /// The operator-set priority (`direct_set_prio`), shown as such instead
    /// of factors; `None` when the plugin's priority stands.
    pub(crate) direct_prio: Option<u32>,
}

/// Allocates one sprio object with Slurm's allocator and fills it. 22.05:
/// the factors are fields of `priority_factors_object_t`; the destructor
/// frees only the TRES arrays, so `partition` points at the job's string.
///
/// # Safety
/// Inside slurmctld, with the job lock held (the strings `row` points at
/// must outlive the packing of the reply, as multifactor's do).
#[cfg(not(slurm_since = "24.11"))]
pub(crate) unsafe fn new_factors_object(row: &FactorsRow<'_>, f: Option<&Factors>) -> *mut c_void {
    let o = xcalloc::<sys::priority_factors_object_t>();
    let r = &mut *o;
    r.job_id = row.job_id;
    r.user_id = row.user_id;
    r.partition = row.partition;
    r.nice = sys::NICE_OFFSET;
    r.priority_site = sys::NICE_OFFSET;
    if let Some(prio) = row.direct_prio {
        r.direct_prio = f64::from(prio);
    } else if let Some(f) = f {
        r.priority_age = f.age;
        r.priority_fs = f.fair_share;
        r.priority_qos = f.qos;
        r.priority_part = f.partition;
        r.priority_site = f.site_raw();
        r.nice = f.nice_raw();
    }
    o as *mut c_void
}

/// Allocates one sprio object with Slurm's allocator and fills it. 24.11:
/// the factors moved into `priority_factors_t *prio_factors` (NULL for an
/// operator-set priority), the object names account and QOS, and
/// `slurm_destroy_priority_factors_object` frees account, partition and QOS,
/// so they are `xstrdup`ed.
///
/// # Safety
/// Inside slurmctld, with the job lock held (`row.partition` is NULL or a
/// NUL-terminated string valid for the call).
#[cfg(slurm_since = "24.11")]
pub(crate) unsafe fn new_factors_object(row: &FactorsRow<'_>, f: Option<&Factors>) -> *mut c_void {
    let o = xcalloc::<sys::priority_factors_object_t>();
    let r = &mut *o;
    r.job_id = row.job_id;
    r.user_id = row.user_id;
    let dup = |s: Option<&str>| s.map_or(std::ptr::null_mut(), crate::xstr::xstrdup);
    // As the record's accessor reads it: NULL or non-UTF-8 gives no string.
    let partition = (!row.partition.is_null())
        .then(|| std::ffi::CStr::from_ptr(row.partition).to_str().ok())
        .flatten();
    r.partition = dup(partition);
    r.account = dup(row.account);
    if let Some(prio) = row.direct_prio {
        r.direct_prio = f64::from(prio);
    } else {
        let p = xcalloc::<sys::priority_factors_t>();
        let pf = &mut *p;
        pf.nice = sys::NICE_OFFSET;
        pf.priority_site = sys::NICE_OFFSET;
        if let Some(f) = f {
            pf.priority_age = f.age;
            pf.priority_fs = f.fair_share;
            pf.priority_qos = f.qos;
            pf.priority_part = f.partition;
            pf.priority_site = f.site_raw();
            pf.nice = f.nice_raw();
        }
        r.prio_factors = p;
    }
    o as *mut c_void
}

/// A zeroed `T` from Slurm's allocator (freed by Slurm's destructors).
unsafe fn xcalloc<T>() -> *mut T {
    sys::slurm_xcalloc(
        1,
        std::mem::size_of::<T>(),
        true,
        false,
        c"allot".as_ptr(),
        0,
        c"new_factors_object".as_ptr(),
    ) as *mut T
}
