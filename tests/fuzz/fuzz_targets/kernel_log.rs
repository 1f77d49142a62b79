#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| allot_fuzz::kernel_log(data));
