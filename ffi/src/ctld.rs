//! What a plugin can ask of the process it is loaded into (slurmctld, or a
//! client command such as sshare that loads the priority plugin).
//!
//! Data symbols that only slurmctld defines (`acct_db_conn`,
//! `accounting_enforce`, `job_list`) are looked up with `dlsym` at call
//! time, never linked: a client that loads the plugin lacks them.

use std::ffi::{c_void, CStr};

use crate::sys;

/// Address of a global data symbol of the host process, if it has one.
fn data_symbol(name: &CStr) -> Option<*mut c_void> {
    // SAFETY: dlsym with RTLD_DEFAULT only reads the loaded objects' symbol tables.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    (!p.is_null()).then_some(p)
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
    unsafe { CStr::from_ptr(p) }.to_str().ok().map(str::to_string)
}

/// The default account of `uid` from slurmctld's association manager
/// (what Slurm would use for a job submitted without `--account`), as
/// job_submit/lua's `default_account`. `None` outside slurmctld or when the
/// user has no association.
pub fn default_account(uid: u32) -> Option<String> {
    let conn = data_symbol(c"acct_db_conn")?;
    let enforce = data_symbol(c"accounting_enforce")?;
    let mut user = sys::slurmdb_user_rec_t { uid, ..Default::default() };
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
        CStr::from_ptr(user.default_acct).to_str().ok().map(str::to_string)
    }
}
