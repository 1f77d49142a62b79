//! The fuzz targets of `tests/fuzz` run in-process on stable Rust: every seed
//! in `tests/fuzz/seeds/<target>/` (which include each crash fuzzing ever
//! found), then random mutations of them for a few seconds per target.
//! `scripts/test` runs this (no nightly, no cargo-fuzz, no Slurm needed);
//! `scripts/fuzz` runs the same targets under libFuzzer for as long as asked.
//!
//! `ALLOT_FUZZ_SECS` (default 3) bounds each target's time,
//! `ALLOT_FUZZ_SEED` fixes the random seed (printed, so a failure replays).

#[path = "src/targets.rs"]
#[allow(dead_code)]
mod targets;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::time::{Duration, Instant};

/// Tokens that the parsers care about: mutations splice them in.
const DICT: &[&[u8]] = &[
    b":",
    b"-",
    b"=",
    b"|",
    b",",
    b";",
    b" ",
    b"\0",
    b"\n",
    b"\r\n",
    b"[",
    b"]",
    b"\"",
    b"{",
    b"}",
    b"\xc3\xa9",
    b"\xf0\x9f\x98\x80",
    b"\xff",
    b"0",
    b"18446744073709551615",
    b"4294967296",
    b"99999999999999999999",
    b"-1",
    b"1e308",
    b"NaN",
    b"inf",
    b"Unknown",
    b"None",
    b"N/A",
    b"allot:min_runtime=",
    b"min_runtime=",
    b"gres/gpu",
    b"gres/gpu:a100",
    b"mem",
    b"G",
    b"[tree.",
    b"share = ",
    b"accounts = [",
    b"window = ",
    b"[contract]",
    b"[charge]",
    b"\"count\": ",
    b"\"gpus\": [",
    b"\"xids\": [",
    b"\"kernel_log\": [",
    b"\"fabric\": {\"state\": \"not_started\"}",
    b"\"status\": \"SUCCESS\"",
    b"\"driver_gpus\": [",
    b"\"unreadable\": \"NVML: Unknown Error\"",
    b"\"pci_bus_id\": \"00000000:3B:00.0\"",
    b"\"nvml\": \"init_failed\"",
    b"NVRM: Xid (",
    b"PCI:0000:3b:00",
    b" GPU-I:",
    b"): ",
    b"Fatal",
    b"NonFatal",
    b"nvidia-nvswitch3: SXid (PCI:0000:86:00.0): ",
    b"24007, Fatal, ",
    b"Non-fatal",
    b"Severity 1 Engine instance",
    b"Data {0x0, 0x1}",
    b"T",
    b"2024-03-31T02:30:00",
    b"COMPLETED",
    b"_",
    b"+",
    b"%",
    b"GET ",
    b"HEAD ",
    b"HTTP/1.1",
    b"\r\n\r\n",
    b"Content-Length: ",
    b"Transfer-Encoding: ",
    b"%2F",
    b"?",
];

/// The message of the last panic a target raised (the hook is silenced so
/// that expected-to-be-absent panics do not print per input).
static LAST_PANIC: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

thread_local! {
    static IN_TARGET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

fn mutate(rng: &mut Rng, input: &mut Vec<u8>, pool: &[Vec<u8>]) {
    for _ in 0..=rng.below(4) {
        let len = input.len();
        match rng.below(8) {
            0 if len > 0 => {
                let i = rng.below(len);
                input[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                input[i] = rng.next() as u8;
            }
            2 => {
                let i = rng.below(len + 1);
                input.insert(i, rng.next() as u8);
            }
            3 if len > 0 => {
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(16));
                input.drain(i..i + n);
            }
            4 if len > 0 => {
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(32));
                let piece = input[i..i + n].to_vec();
                let at = rng.below(input.len() + 1);
                input.splice(at..at, piece);
            }
            5 | 6 => {
                let tok = DICT[rng.below(DICT.len())];
                let at = rng.below(len + 1);
                input.splice(at..at, tok.iter().copied());
            }
            _ if !pool.is_empty() => {
                let other = &pool[rng.below(pool.len())];
                if !other.is_empty() {
                    let i = rng.below(other.len());
                    let n = 1 + rng.below(other.len() - i);
                    let at = rng.below(len + 1);
                    input.splice(at..at, other[i..i + n].iter().copied());
                }
            }
            _ => {}
        }
    }
    input.truncate(8192);
}

fn seeds(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/seeds")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let out: Vec<Vec<u8>> = files.iter().map(|p| std::fs::read(p).unwrap()).collect();
    assert!(!out.is_empty(), "no seeds in {}", dir.display());
    out
}

fn run_one(name: &str, f: fn(&[u8]), input: &[u8]) {
    IN_TARGET.set(true);
    let failed = catch_unwind(AssertUnwindSafe(|| f(input))).is_err();
    IN_TARGET.set(false);
    if failed {
        let why = LAST_PANIC.lock().unwrap().take().unwrap_or_default();
        panic!(
            "fuzz target {name} failed: {why}\non input {:?} (bytes {:?}); save the bytes to a file and reproduce with scripts/fuzz --repro tests/fuzz/artifacts/{name}/FILE",
            String::from_utf8_lossy(input),
            if input.len() <= 512 { format!("{input:?}") } else { format!("{} bytes: the text above, lossily", input.len()) }
        );
    }
}

#[test]
fn every_target_survives_its_seeds_and_mutations() {
    let secs: f64 = std::env::var("ALLOT_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3.0);
    let seed: u64 = std::env::var("ALLOT_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_a110);
    println!("ALLOT_FUZZ_SEED={seed} ALLOT_FUZZ_SECS={secs}");
    // Panics are expected to be caught and reported once, not printed per input.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if IN_TARGET.get() {
            *LAST_PANIC.lock().unwrap() = Some(info.to_string());
        } else {
            default_hook(info);
        }
    }));
    for (name, f) in targets::TARGETS {
        let mut rng = Rng((seed ^ (name.len() as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1);
        let mut pool = seeds(name);
        for s in &pool {
            run_one(name, *f, s);
        }
        let deadline = Instant::now() + Duration::from_secs_f64(secs);
        let mut execs = 0u64;
        while Instant::now() < deadline {
            for _ in 0..64 {
                let mut input = pool[rng.below(pool.len())].clone();
                mutate(&mut rng, &mut input, &pool);
                run_one(name, *f, &input);
                execs += 1;
                // Keep some mutants as parents: a crude stand-in for coverage feedback.
                if rng.below(16) == 0 && pool.len() < 512 {
                    pool.push(input);
                }
            }
        }
        println!("{name:<16} {execs:>10} execs");
    }
}
