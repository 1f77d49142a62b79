//! Safe read access to slurmctld's job structures.
//!
//! [`JobRecord`] wraps a `job_record_t` (a job slurmctld knows), [`JobDesc`]
//! a `job_desc_msg_t` (a submission or modification request, as job_submit
//! sees it). Both borrow the C struct for the duration of a plugin call:
//! slurmctld holds the job write lock then, so the memory is stable.
//! Strings are returned as `Option<&str>`: `None` for NULL or non-UTF-8.

use std::ffi::{c_char, CStr};

use crate::sys;

/// Reads a possibly NULL C string.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string valid for `'a`.
unsafe fn opt_str<'a>(p: *const c_char) -> Option<&'a str> {
    if p.is_null() {
        None
    } else {
        CStr::from_ptr(p).to_str().ok()
    }
}

/// Accessors of string fields of `self.raw`, each `name: field;` after
/// its doc: `None` for NULL or non-UTF-8.
macro_rules! str_fields {
    ($($(#[$doc:meta])* $name:ident: $field:ident;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(&self) -> Option<&'a str> {
                // SAFETY: slurmctld's strings (of a record, or of a request
                // for the call) are NULL or NUL-terminated and live as long
                // as the struct borrowed for `'a`.
                unsafe { opt_str(self.raw.$field) }
            }
        )*
    };
}

/// Base state of a job (`job_state & JOB_STATE_BASE`), as in slurm.h `enum job_states`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    /// Queued, waiting for resources.
    Pending,
    /// Allocated and running.
    Running,
    /// Allocated, suspended.
    Suspended,
    /// Any finished state (completed, cancelled, failed, timeout, node fail,
    /// preempted, boot fail, deadline, out of memory).
    Finished,
}

/// `JOB_REQUEUE` flag of `job_state` (slurm.h: `SLURM_BIT(10)`).
pub const JOB_REQUEUE_FLAG: u32 = 1 << 10;
/// `JOB_COMPLETING` flag of `job_state` (slurm.h: `SLURM_BIT(15)`).
pub const JOB_COMPLETING_FLAG: u32 = 1 << 15;
/// `JOB_CONFIGURING` flag of `job_state` (slurm.h: `SLURM_BIT(16)`).
pub const JOB_CONFIGURING_FLAG: u32 = 1 << 16;

impl JobState {
    /// Decodes the base state of a `job_state` word.
    pub fn from_raw(job_state: u32) -> JobState {
        match job_state & sys::JOB_STATE_BASE {
            x if x == sys::job_states_JOB_PENDING => JobState::Pending,
            x if x == sys::job_states_JOB_RUNNING => JobState::Running,
            x if x == sys::job_states_JOB_SUSPENDED => JobState::Suspended,
            _ => JobState::Finished,
        }
    }
}

/// Converts Slurm's `nice` field (stored with `NICE_OFFSET` added) to the
/// signed value the user gave (`--nice=-5` -> -5).
pub fn nice_from_raw(raw: u32) -> i64 {
    i64::from(raw) - i64::from(sys::NICE_OFFSET)
}

/// A job slurmctld knows (`job_record_t`), borrowed for one plugin call.
#[derive(Clone, Copy)]
pub struct JobRecord<'a> {
    raw: &'a sys::job_record_t,
}

impl<'a> JobRecord<'a> {
    /// Wraps a pointer slurmctld passed to a plugin. `None` for NULL.
    ///
    /// # Safety
    /// `ptr` is NULL or points to a valid `job_record_t` that stays alive and
    /// unmodified for `'a` (slurmctld holds the job lock during plugin calls).
    pub unsafe fn from_ptr(ptr: *const sys::job_record_t) -> Option<JobRecord<'a>> {
        ptr.as_ref().map(|raw| JobRecord { raw })
    }

    fn details(&self) -> Option<&'a crate::release::JobDetails> {
        // SAFETY: details is NULL or valid while the record is (slurmctld invariant).
        unsafe { self.raw.details.as_ref() }
    }

    /// Slurm job id.
    pub fn job_id(&self) -> u32 {
        self.raw.job_id
    }
    /// Numeric uid of the owner.
    pub fn user_id(&self) -> u32 {
        self.raw.user_id
    }
    /// Submit time, seconds since the epoch (0 if unknown).
    pub fn submit_time(&self) -> i64 {
        self.details().map_or(0, |d| d.submit_time)
    }
    /// Earliest start the user asked for (`--begin`), seconds since the
    /// epoch; 0 if none.
    pub fn begin_time(&self) -> i64 {
        self.details().map_or(0, |d| d.begin_time)
    }
    /// Start time, seconds since the epoch (0 if never started; for a
    /// pending job slurmctld may hold an expected start time here).
    pub fn start_time(&self) -> i64 {
        self.raw.start_time
    }
    /// Seconds the job has spent suspended in total (`tot_sus_time`).
    pub fn total_suspended_secs(&self) -> i64 {
        self.raw.tot_sus_time
    }
    /// Time limit in minutes (`None` for INFINITE or NO_VAL).
    pub fn time_limit_minutes(&self) -> Option<u32> {
        match self.raw.time_limit {
            sys::INFINITE | sys::NO_VAL => None,
            m => Some(m),
        }
    }
    /// Running seconds before the current run stretch (`pre_sus_time`: Slurm
    /// adds each stretch's length here when the job is suspended).
    pub fn pre_suspend_secs(&self) -> i64 {
        self.raw.pre_sus_time
    }
    /// Last suspend or resume time (`suspend_time`), seconds since the epoch; 0 if never.
    pub fn suspend_time(&self) -> i64 {
        self.raw.suspend_time
    }
    /// Raw `job_state` word (base state plus flags).
    pub fn job_state_raw(&self) -> u32 {
        self.raw.job_state
    }
    /// Base state.
    pub fn state(&self) -> JobState {
        JobState::from_raw(self.raw.job_state)
    }
    /// Signed nice value (`--nice`), 0 if unset.
    pub fn nice(&self) -> i64 {
        self.details().map_or(0, |d| nice_from_raw(d.nice))
    }
    /// Whether the job may be requeued (`--requeue`, default per JobRequeue).
    pub fn requeue(&self) -> bool {
        self.details().is_some_and(|d| d.requeue != 0)
    }
    /// Current priority.
    pub fn priority(&self) -> u32 {
        self.raw.priority
    }
    /// Times the job has been requeued (`restart_cnt`, `scontrol show job`'s
    /// `Restarts`): preemptions, drains, node failures, `scontrol requeue`.
    pub fn restarts(&self) -> u32 {
        u32::from(self.raw.restart_cnt)
    }
    /// Non-zero when an operator set the priority directly (`scontrol update priority=`).
    pub fn direct_set_prio(&self) -> bool {
        self.raw.direct_set_prio != 0
    }
    /// Raw `partition` string of the record (for Slurm structs that point
    /// at it without owning it).
    pub fn partition_ptr(&self) -> *mut c_char {
        self.raw.partition
    }

    str_fields! {
        /// Account (association account) charged for the job.
        account: account;
        /// Partition name (a comma-separated list while pending on several).
        partition: partition;
        /// `tres_fmt_req_str`: requested TRES by name (`cpu=1,...,gres/gpu=2`).
        tres_req_str: tres_fmt_req_str;
        /// `tres_fmt_alloc_str`: allocated TRES by name (`cpu=2,...,gres/gpu=2`), set once running.
        tres_alloc_str: tres_fmt_alloc_str;
        /// Requested GPUs per node / per job as given (`gres:gpu:2` style TRES request strings).
        tres_per_node: tres_per_node;
        /// Requested TRES per job (`--gpus`).
        tres_per_job: tres_per_job;
        /// `--comment` text (user-writable).
        comment: comment;
        /// Admin comment (writable by operators and plugins only).
        admin_comment: admin_comment;
        /// Allocated node list (`node[01-04]`), `None` while pending.
        nodes: nodes;
        /// Why the job waits, in words, where slurmctld or a plugin gave
        /// them (`squeue`'s Reason shows it instead of the reason code).
        state_desc: state_desc;
    }

    /// True while the job is held by an administrator or a plugin
    /// (priority 0, reason `WAIT_HELD`: squeue's `JobHeldAdmin`).
    pub fn held_by_admin(&self) -> bool {
        self.raw.priority == 0 && self.raw.state_reason == sys::job_state_reason_WAIT_HELD
    }
}

/// A job submission or modification request (`job_desc_msg_t`).
#[derive(Clone, Copy)]
pub struct JobDesc<'a> {
    raw: &'a sys::job_desc_msg_t,
}

/// Iterates over a NULL-terminated or counted `char **` environment.
///
/// # Safety
/// `env` is NULL or has `count` valid entries (NULL entries are skipped).
unsafe fn env_iter<'a>(env: *mut *mut c_char, count: u32) -> impl Iterator<Item = &'a str> {
    let slice: &'a [*mut c_char] = if env.is_null() {
        &[]
    } else {
        std::slice::from_raw_parts(env, count as usize)
    };
    slice.iter().filter_map(|p| opt_str(*p))
}

impl<'a> JobDesc<'a> {
    /// Wraps a pointer slurmctld passed to job_submit. `None` for NULL.
    ///
    /// # Safety
    /// `ptr` is NULL or points to a valid `job_desc_msg_t` for `'a`.
    pub unsafe fn from_ptr(ptr: *const sys::job_desc_msg_t) -> Option<JobDesc<'a>> {
        ptr.as_ref().map(|raw| JobDesc { raw })
    }
    /// Submitting uid.
    pub fn user_id(&self) -> u32 {
        self.raw.user_id
    }
    /// Time limit in minutes (`None` when not given or INFINITE).
    pub fn time_limit_minutes(&self) -> Option<u32> {
        match self.raw.time_limit {
            sys::INFINITE | sys::NO_VAL => None,
            m => Some(m),
        }
    }
    /// Requested priority (`--priority`, operators only), `None` if unset.
    pub fn priority(&self) -> Option<u32> {
        match self.raw.priority {
            sys::NO_VAL => None,
            p => Some(p),
        }
    }
    /// Signed `--nice`, `None` if unset.
    pub fn nice(&self) -> Option<i64> {
        match self.raw.nice {
            sys::NO_VAL => None,
            n => Some(nice_from_raw(n)),
        }
    }
    /// `--requeue`/`--no-requeue`: `Some(true/false)`, `None` if unset.
    pub fn requeue(&self) -> Option<bool> {
        match self.raw.requeue {
            x if u32::from(x) == sys::NO_VAL16 => None,
            x => Some(x != 0),
        }
    }
    /// Value of `NAME` in the SPANK job-control environment
    /// (`spank_job_control_setenv` in sbatch/srun/salloc puts it there).
    pub fn spank_env(&self, name: &str) -> Option<&'a str> {
        // SAFETY: spank_job_env has spank_job_env_size entries.
        let env = unsafe { env_iter(self.raw.spank_job_env, self.raw.spank_job_env_size) };
        env.filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v)
    }
    /// `--nodes` minimum, `None` when not given.
    pub fn min_nodes(&self) -> Option<u32> {
        match self.raw.min_nodes {
            sys::NO_VAL | 0 => None,
            n => Some(n),
        }
    }
    /// `-n`/`--ntasks` (`num_tasks`), `None` when not given.
    pub fn num_tasks(&self) -> Option<u32> {
        match self.raw.num_tasks {
            sys::NO_VAL | 0 => None,
            n => Some(n),
        }
    }
    /// `--ntasks-per-node`, `None` when not given.
    pub fn ntasks_per_node(&self) -> Option<u16> {
        given16(self.raw.ntasks_per_node)
    }
    /// `--sockets-per-node`, `None` when not given.
    pub fn sockets_per_node(&self) -> Option<u16> {
        given16(self.raw.sockets_per_node)
    }

    str_fields! {
        /// Requested account (`None`: not given; slurmctld may apply the default later).
        account: account;
        /// Requested partition(s).
        partition: partition;
        /// `--comment`.
        comment: comment;
        /// Admin comment in the request (only operators may set it).
        admin_comment: admin_comment;
        /// `--gres` style per-node TRES request (`gres:gpu:2`).
        tres_per_node: tres_per_node;
        /// `--gpus` style per-job TRES request.
        tres_per_job: tres_per_job;
        /// `--gpus-per-task` TRES request (22.05 `gres:gpu:1`; 24.11
        /// `gres/gpu=1`, with `cpu=N` for `--cpus-per-task`).
        tres_per_task: tres_per_task;
        /// `--gpus-per-socket` TRES request (`gres:gpu:1`, `gres/gpu:1`).
        tres_per_socket: tres_per_socket;
        /// `--array` index expression (`0-599%10`), `None` for a single job.
        array_inx: array_inx;
    }
}

/// A `uint16_t` count of a request: `None` for `NO_VAL16` (not given),
/// `INFINITE16` or 0.
fn given16(n: u16) -> Option<u16> {
    // NO_VAL16 is 0xfffe, INFINITE16 0xffff.
    (n != 0 && u32::from(n) < sys::NO_VAL16).then_some(n)
}

/// Replaces an xmalloc'ed string field with an `xstrdup` of `text`.
///
/// # Safety
/// `field` is NULL or an xmalloc'ed string that the caller may free.
unsafe fn replace_xstr(field: &mut *mut c_char, text: &str) {
    sys::slurm_xfree(field as *mut *mut c_char as *mut *mut std::ffi::c_void);
    *field = crate::xstr::xstrdup(text);
}

/// A job record a plugin may change during a call that holds the job write
/// lock (job_modify).
pub struct JobRecordMut<'a> {
    raw: &'a mut sys::job_record_t,
}

impl<'a> JobRecordMut<'a> {
    /// Wraps a mutable pointer slurmctld passed with the job write lock held.
    ///
    /// # Safety
    /// `ptr` is NULL or a valid `job_record_t` exclusively ours for `'a`.
    pub unsafe fn from_ptr(ptr: *mut sys::job_record_t) -> Option<JobRecordMut<'a>> {
        ptr.as_mut().map(|raw| JobRecordMut { raw })
    }

    /// Read access.
    pub fn get(&self) -> JobRecord<'_> {
        JobRecord { raw: self.raw }
    }

    /// Sets the job's priority (the caller holds the job write lock: the
    /// plugin's recalculation thread, or a callback that may write).
    pub fn set_priority(&mut self, priority: u32) {
        self.raw.priority = priority;
    }

    /// Holds the pending job as `scontrol hold` does (priority 0, reason
    /// `WAIT_HELD`), with `why` as the reason `squeue` shows. The caller
    /// holds the job write lock.
    pub fn hold(&mut self, why: &str) {
        self.raw.priority = 0;
        self.raw.state_reason = sys::job_state_reason_WAIT_HELD;
        // SAFETY: job_record strings are xmalloc'ed and ours under the write lock.
        unsafe { replace_xstr(&mut self.raw.state_desc, why) }
    }

    /// Releases a job [`JobRecordMut::hold`] held: `priority`, no reason
    /// (the scheduler gives it its next one). The caller holds the job
    /// write lock.
    pub fn release(&mut self, priority: u32) {
        self.raw.priority = priority.max(1);
        self.raw.state_reason = sys::job_state_reason_WAIT_NO_REASON;
        // SAFETY: as above; xfree sets the field to NULL.
        unsafe {
            sys::slurm_xfree(
                &mut self.raw.state_desc as *mut *mut c_char as *mut *mut std::ffi::c_void,
            )
        }
    }

    /// Sets the job's AdminComment directly. In 22.05 `update_job` refuses
    /// an AdminComment in a non-operator's request even when a job_submit
    /// plugin put it there, so job_modify writes the record itself.
    /// Only callable inside slurmctld.
    pub fn set_admin_comment(&mut self, text: &str) {
        // SAFETY: job_record strings are xmalloc'ed and ours under the write lock.
        unsafe { replace_xstr(&mut self.raw.admin_comment, text) }
    }
}

/// A job request job_submit may change (`job_desc_msg_t *`).
pub struct JobDescMut<'a> {
    raw: &'a mut sys::job_desc_msg_t,
}

impl<'a> JobDescMut<'a> {
    /// Wraps a mutable pointer slurmctld passed to job_submit/job_modify.
    ///
    /// # Safety
    /// `ptr` is NULL or points to a valid `job_desc_msg_t`, exclusively
    /// ours for `'a`, whose strings were allocated with Slurm's xmalloc.
    pub unsafe fn from_ptr(ptr: *mut sys::job_desc_msg_t) -> Option<JobDescMut<'a>> {
        ptr.as_mut().map(|raw| JobDescMut { raw })
    }

    /// Read access.
    pub fn get(&self) -> JobDesc<'_> {
        JobDesc { raw: self.raw }
    }

    /// Replaces the request's AdminComment (the old string is `xfree`d, the
    /// new one `xstrdup`ed). slurmctld validated AdminComment against the
    /// submitter before calling job_submit, so a plugin may set it.
    /// Only callable inside a Slurm process.
    pub fn set_admin_comment(&mut self, text: &str) {
        // SAFETY: the field is NULL or an xmalloc'ed string we own through `&mut`.
        unsafe { replace_xstr(&mut self.raw.admin_comment, text) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_offset_round_trip() {
        assert_eq!(nice_from_raw(sys::NICE_OFFSET), 0);
        assert_eq!(nice_from_raw(sys::NICE_OFFSET - 5), -5);
        assert_eq!(nice_from_raw(sys::NICE_OFFSET + 100), 100);
    }

    #[test]
    fn state_decoding_ignores_flags() {
        assert_eq!(
            JobState::from_raw(sys::job_states_JOB_RUNNING | JOB_CONFIGURING_FLAG),
            JobState::Running
        );
        assert_eq!(
            JobState::from_raw(sys::job_states_JOB_PENDING | JOB_REQUEUE_FLAG),
            JobState::Pending
        );
        assert_eq!(
            JobState::from_raw(sys::job_states_JOB_COMPLETE),
            JobState::Finished
        );
    }

    #[test]
    fn accessors_read_a_record() {
        let account = c"a1".as_ptr() as *mut c_char;
        let tres = c"cpu=2,mem=1G,node=1,gres/gpu:a100=2,gres/gpu=2".as_ptr() as *mut c_char;
        let mut details = crate::release::JobDetails {
            submit_time: 1_700_000_000,
            nice: sys::NICE_OFFSET - 3,
            requeue: 1,
            ..Default::default()
        };
        let rec = sys::job_record_t {
            job_id: 42,
            account,
            tres_fmt_alloc_str: tres,
            job_state: sys::job_states_JOB_RUNNING,
            time_limit: sys::INFINITE,
            details: &mut details,
            ..Default::default()
        };
        // SAFETY: rec and everything it points to outlive `job`.
        let job = unsafe { JobRecord::from_ptr(&rec) }.unwrap();
        assert_eq!(job.job_id(), 42);
        assert_eq!(job.account(), Some("a1"));
        assert_eq!(
            job.tres_alloc_str(),
            Some("cpu=2,mem=1G,node=1,gres/gpu:a100=2,gres/gpu=2")
        );
        assert_eq!(job.state(), JobState::Running);
        assert_eq!(job.time_limit_minutes(), None);
        assert_eq!(job.submit_time(), 1_700_000_000);
        assert_eq!(job.nice(), -3);
        assert!(job.requeue());
        assert_eq!(job.comment(), None);
        assert!(unsafe { JobRecord::from_ptr(std::ptr::null()) }.is_none());
    }

    #[test]
    fn desc_gpu_request_fields() {
        // `sbatch -n 8 --gpus-per-task=1` on 24.11; NO_VAL16 and INFINITE16
        // are "not given".
        let per_task = c"gres/gpu=1".as_ptr() as *mut c_char;
        let per_socket = c"gres/gpu:2".as_ptr() as *mut c_char;
        let raw = sys::job_desc_msg_t {
            tres_per_task: per_task,
            tres_per_socket: per_socket,
            num_tasks: 8,
            min_nodes: sys::NO_VAL,
            ntasks_per_node: sys::NO_VAL16 as u16,
            sockets_per_node: u16::MAX,
            ..Default::default()
        };
        // SAFETY: raw and its strings outlive `d`.
        let d = unsafe { JobDesc::from_ptr(&raw) }.unwrap();
        assert_eq!(d.tres_per_task(), Some("gres/gpu=1"));
        assert_eq!(d.tres_per_socket(), Some("gres/gpu:2"));
        assert_eq!(d.num_tasks(), Some(8));
        assert_eq!(d.min_nodes(), None);
        assert_eq!(d.ntasks_per_node(), None);
        assert_eq!(d.sockets_per_node(), None);
        let raw = sys::job_desc_msg_t {
            num_tasks: sys::NO_VAL,
            ntasks_per_node: 4,
            sockets_per_node: 2,
            ..raw
        };
        // SAFETY: as above.
        let d = unsafe { JobDesc::from_ptr(&raw) }.unwrap();
        assert_eq!(
            (d.num_tasks(), d.ntasks_per_node(), d.sockets_per_node()),
            (None, Some(4), Some(2))
        );
    }

    #[test]
    fn spank_env_lookup() {
        let mut env = [
            c"FOO=1".as_ptr() as *mut c_char,
            c"ALLOT_MIN_RUNTIME=4:00:00".as_ptr() as *mut c_char,
        ];
        let desc = sys::job_desc_msg_t {
            spank_job_env: env.as_mut_ptr(),
            spank_job_env_size: 2,
            ..Default::default()
        };
        // SAFETY: desc and env outlive the wrapper.
        let d = unsafe { JobDesc::from_ptr(&desc) }.unwrap();
        assert_eq!(d.spank_env("ALLOT_MIN_RUNTIME"), Some("4:00:00"));
        assert_eq!(d.spank_env("FO"), None);
    }
}
