//! The symbols slurmctld reads from every plugin.
//!
//! Slurm finds a plugin by its file name and then checks three symbols:
//! `plugin_name` and `plugin_type` (NUL-terminated `char[]`, *not* pointers)
//! and `plugin_version` (`uint32_t`, whose low 24 bits must equal the
//! running Slurm's `SLURM_VERSION_NUMBER`).

/// Copies `s` into a NUL-terminated byte array of length `N = s.len() + 1`
/// at compile time. Used by [`slurm_plugin!`](crate::slurm_plugin).
///
/// # Panics
/// At compile time, if `N != s.len() + 1` or `s` contains a NUL byte.
pub const fn cstr_array<const N: usize>(s: &str) -> [u8; N] {
    let b = s.as_bytes();
    assert!(b.len() + 1 == N, "cstr_array: N must be s.len() + 1");
    let mut out = [0u8; N];
    let mut i = 0;
    while i < b.len() {
        assert!(b[i] != 0, "plugin strings must not contain NUL");
        out[i] = b[i];
        i += 1;
    }
    out
}

/// Emits `plugin_name`, `plugin_type` and `plugin_version` for a Slurm plugin.
///
/// ```
/// allot_ffi::slurm_plugin!(name: "allot priority plugin", kind: "priority/allot");
/// assert_eq!(&plugin_type[..], b"priority/allot\0");
/// assert_eq!(plugin_version, allot_ffi::SLURM_VERSION_NUMBER);
/// ```
#[macro_export]
macro_rules! slurm_plugin {
    (name: $name:literal, kind: $kind:literal) => {
        /// Human-readable plugin name (NUL-terminated), read by slurmctld.
        #[no_mangle]
        #[used]
        pub static plugin_name: [u8; $name.len() + 1] = $crate::plugin::cstr_array($name);
        /// `major/minor` plugin type (NUL-terminated), e.g. `priority/allot`.
        #[no_mangle]
        #[used]
        pub static plugin_type: [u8; $kind.len() + 1] = $crate::plugin::cstr_array($kind);
        /// Must equal the running Slurm's SLURM_VERSION_NUMBER.
        #[no_mangle]
        #[used]
        pub static plugin_version: u32 = $crate::SLURM_VERSION_NUMBER;
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cstr_array_is_nul_terminated() {
        const A: [u8; 15] = cstr_array("priority/allot");
        assert_eq!(&A, b"priority/allot\0");
    }

    #[test]
    #[should_panic]
    fn wrong_length_panics() {
        let _: [u8; 3] = cstr_array("abc");
    }
}
