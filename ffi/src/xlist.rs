//! Walking Slurm's `List` (`xlist`): the one loop that slurmctld's job list
//! ([`ctld`](crate::ctld)) and sprio's request filters
//! ([`release`](crate::release)) both use.

use crate::sys;

/// Iterates over an xlist, handing each element to `f`.
///
/// # Safety
/// `list` is NULL or a valid Slurm List whose elements are `T` and stay
/// valid (the caller holds the lock that protects them).
pub(crate) unsafe fn for_each_in<T>(list: crate::List, mut f: impl FnMut(*mut T)) {
    if list.is_null() {
        return;
    }
    let it = sys::list_iterator_create(list);
    loop {
        let p = sys::list_next(it) as *mut T;
        if p.is_null() {
            break;
        }
        f(p);
    }
    sys::list_iterator_destroy(it);
}
