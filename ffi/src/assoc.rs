//! slurmctld's association manager: the records `sshare` reads.
//!
//! allot publishes its own numbers into them (usage, effective usage,
//! normalised shares, Level FS, fair-share factor) so that `sshare` shows
//! what the priority plugin uses.

use std::ffi::{c_void, CStr};

use crate::long_double::u128_from_f64;
use crate::sys;

/// What `sshare` shows of one association.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShareFigures {
    /// RawUsage (charge units x seconds, i.e. GPU-seconds by default).
    pub usage_raw: f64,
    /// NormUsage: usage as a fraction of the whole cluster's.
    pub usage_norm: f64,
    /// EffectvUsage: usage as a fraction of the parent's.
    pub usage_efctv: f64,
    /// NormShares: share among siblings.
    pub shares_norm: f64,
    /// LevelFS (may be infinite).
    pub level_fs: f64,
    /// FairShare factor.
    pub fs_factor: f64,
}

/// An association record, borrowed under the assoc_mgr write lock.
pub struct AssocMut<'a> {
    raw: &'a mut sys::slurmdb_assoc_rec_t,
}

impl AssocMut<'_> {
    /// Account name.
    pub fn account(&self) -> Option<&str> {
        // SAFETY: NULL or a NUL-terminated string owned by the record.
        unsafe {
            self.raw
                .acct
                .as_ref()
                .and_then(|p| CStr::from_ptr(p).to_str().ok())
        }
    }
    /// User name (`None` for an account association).
    pub fn user(&self) -> Option<&str> {
        // SAFETY: as in `account`.
        unsafe {
            self.raw
                .user
                .as_ref()
                .and_then(|p| CStr::from_ptr(p).to_str().ok())
        }
    }
    /// Writes the figures `sshare` shows. No effect without a usage record.
    pub fn set_figures(&mut self, f: &ShareFigures) {
        // SAFETY: usage is NULL or the record's own usage struct, ours under the lock.
        let Some(u) = (unsafe { self.raw.usage.as_mut() }) else {
            return;
        };
        u.usage_raw = u128_from_f64(f.usage_raw);
        u.usage_norm = u128_from_f64(f.usage_norm);
        u.usage_efctv = u128_from_f64(f.usage_efctv);
        u.level_fs = u128_from_f64(f.level_fs);
        u.shares_norm = f.shares_norm;
        u.fs_factor = f.fs_factor;
    }
}

/// Wraps the association pointer slurmctld passes to
/// `priority_p_set_assoc_usage` (it holds the assoc_mgr lock then).
///
/// # Safety
/// `ptr` is NULL or a valid association record, exclusively ours for the call.
pub unsafe fn assoc_from_ptr<'a>(ptr: *mut c_void) -> Option<AssocMut<'a>> {
    (ptr as *mut sys::slurmdb_assoc_rec_t)
        .as_mut()
        .map(|raw| AssocMut { raw })
}

/// Runs `f` on every association under the assoc_mgr *write* lock.
/// Returns `false` when the process has no association list (a client).
/// Call it only from the plugin's own thread, never while holding
/// slurmctld's locks (lock order: slurmctld locks before assoc_mgr's).
pub fn for_each_assoc_mut(mut f: impl FnMut(&mut AssocMut<'_>)) -> bool {
    // SAFETY: dlsym only reads symbol tables.
    let sym = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"assoc_mgr_assoc_list".as_ptr()) };
    if sym.is_null() {
        return false;
    }
    let mut locks = sys::assoc_mgr_lock_t {
        assoc: sys::lock_level_t_WRITE_LOCK,
        file: sys::lock_level_t_NO_LOCK,
        qos: sys::lock_level_t_NO_LOCK,
        res: sys::lock_level_t_NO_LOCK,
        tres: sys::lock_level_t_NO_LOCK,
        user: sys::lock_level_t_NO_LOCK,
        wckey: sys::lock_level_t_NO_LOCK,
    };
    // SAFETY: the list and its records are valid and ours under the assoc
    // write lock, taken for the whole iteration.
    unsafe {
        sys::assoc_mgr_lock(&mut locks);
        let list = *(sym as *mut crate::List);
        if !list.is_null() {
            let it = sys::list_iterator_create(list);
            loop {
                let p = sys::list_next(it);
                if p.is_null() {
                    break;
                }
                if let Some(mut a) = assoc_from_ptr(p) {
                    f(&mut a);
                }
            }
            sys::list_iterator_destroy(it);
        }
        sys::assoc_mgr_unlock(&mut locks);
    }
    true
}
