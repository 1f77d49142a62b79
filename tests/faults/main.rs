//! Fault injection (issue 9) on the real testbed: each test breaks one
//! thing an admin will see break, and asserts what they expect afterwards.
//! The fault model and each assertion are listed in docs/hardening.md.
//!
//! This file holds what the tests share (running `allot`, fresh ledger
//! paths, a large `--from` dump, stopping and restarting daemons); the
//! tests are in `sync` (allot sync and the ledger it writes), `slurmctld`
//! (the plugins: a broken ledger, slurmctld SIGKILLed) and `health`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use allot_e2e::{epoch, exclusive, fresh_ledger, serial, wait_until, Testbed, B1_OVER_SERVED};
use allot_ledger::LedgerReader;

mod health;
mod slurmctld;
mod sync;

/// Runs `allot` with `args` as `Command::output` does (stdin null, stdout
/// and stderr captured), started through [`spawn`].
fn allot(tb: &Testbed, args: &[&str]) -> Output {
    spawn(
        Command::new(tb.allot_bin())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .wait_with_output()
    .expect("run allot")
}

/// Spawns `c`, retrying while the kernel refuses the exec with `ETXTBSY`
/// (at most 100 times, 10 ms apart). Linux refuses to exec a file that any
/// process holds open for writing, and a child forked by another test thread
/// carries the writer descriptors open at that instant (`O_CLOEXEC` closes
/// them only at its own exec: rust-lang/rust#114554). CI saw one such refusal
/// in `sync_killed_at_random_points_always_ends_identical`, which spawns
/// `allot` about fifty times while other tests write and run scripts; every
/// `allot` these tests start goes through here ([`allot`] too). A
/// refused exec ran nothing, so retrying repeats no side effect.
fn spawn(c: &mut Command) -> std::process::Child {
    let mut tries = 0;
    loop {
        match c.spawn() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            r => return r.unwrap_or_else(|e| panic!("spawn {c:?}: {e}")),
        }
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn dump(path: &Path) -> String {
    LedgerReader::open(path).unwrap().dump().unwrap()
}

/// A small xorshift: the tests print their seed so a failure replays.
fn rng(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// A `--from` dump of `n` attempts over the last week: several accounts and
/// users, requeued attempts, running and pending jobs, free-tier jobs.
fn big_dump(path: &Path, n: usize) {
    let now = epoch();
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    writeln!(
        f,
        "JobID|JobIDRaw|Account|User|Partition|AllocTRES|Submit|Start|End|State|AdminComment"
    )
    .unwrap();
    let accounts = ["a1", "a1-interactive", "a2", "b1", "b2", "vision"];
    for i in 0..n {
        let id = 500_000 + i / 2; // two attempts per job id (a requeue)
        let submit = now - 7 * 86_400 + (i as i64) * 30;
        let (start, end, state) = match i % 10 {
            0 => (String::from("Unknown"), String::from("Unknown"), "PENDING"),
            1 => ((submit + 5).to_string(), String::from("Unknown"), "RUNNING"),
            2 => (
                (submit + 5).to_string(),
                (submit + 600).to_string(),
                "REQUEUED",
            ),
            _ => (
                (submit + 5).to_string(),
                (submit + 5 + 60 * (i as i64 % 97)).to_string(),
                "COMPLETED",
            ),
        };
        let min = [0, 600, 3600, 28_800][i % 4];
        writeln!(
            f,
            "{id}|{id}|{}|u{}|gpu|cpu=2,gres/gpu={},node=1|{submit}|{start}|{end}|{state}|allot:min_runtime={min}",
            accounts[i % accounts.len()],
            i % 7,
            1 + i % 8
        )
        .unwrap();
    }
}

fn pid_of(tb: &Testbed, daemon: &str) -> String {
    std::fs::read_to_string(tb.dir.join(format!("run/{daemon}.pid")))
        .unwrap()
        .trim()
        .to_string()
}

fn kill_and_wait(pid: &str, signal: &str) {
    Command::new("kill").args([signal, pid]).status().unwrap();
    wait_until(
        Duration::from_secs(20),
        &format!("pid {pid} to exit"),
        || {
            if Path::new("/proc").join(pid).exists() {
                Err("alive".into())
            } else {
                Ok(())
            }
        },
    );
}

fn testbed_up(tb: &Testbed) {
    let st = Command::new(tb.root.join("scripts/testbed"))
        .arg("up")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "scripts/testbed up");
}
