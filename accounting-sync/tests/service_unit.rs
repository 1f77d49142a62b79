//! packaging/allot-sync.service: `systemd-analyze verify` finds nothing to
//! say about it (an unknown key is only a warning there, so any output
//! fails), `systemd-analyze security --offline` rates it OK, and it keeps
//! the properties docs/operating.md promises. Needs Debian's `systemd`
//! package (scripts/testbed install brings it); systemd need not run.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

fn unit_text() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../packaging/allot-sync.service"
    ))
    .unwrap()
}

/// The unit with ExecStart on the binary under test (verify checks that the
/// program exists), written as `name` in a fresh directory.
fn unit_copy(name: &str, edit: impl Fn(String) -> String) -> PathBuf {
    // One directory per call: the tests run in parallel and each removes
    // its directory first (one shared name made them remove each other's).
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("allot-unit-{}-{call}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    let text = unit_text().replace("/usr/bin/allot", env!("CARGO_BIN_EXE_allot"));
    std::fs::write(&p, edit(text)).unwrap();
    p
}

fn systemd_analyze(args: &[&str], unit: &Path) -> (bool, String) {
    let out = Command::new("systemd-analyze")
        .args(args)
        .arg(unit)
        .output()
        .expect(
            "systemd-analyze not found: apt-get install systemd (scripts/testbed install does)",
        );
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text += &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[test]
fn systemd_analyze_verify_is_silent() {
    let unit = unit_copy("allot-sync.service", |t| t);
    let (ok, out) = systemd_analyze(&["verify"], &unit);
    assert!(
        ok && out.trim().is_empty(),
        "systemd-analyze verify:\n{out}"
    );
    // The check sees a mistake: a misspelt key is a warning, exit 0.
    let bad = unit_copy("allot-sync.service", |t| {
        t.replace("NoNewPrivileges=yes", "NoNewPrivilegs=yes")
    });
    let (_, out) = systemd_analyze(&["verify"], &bad);
    assert!(out.contains("Unknown key"), "{out}");
    // ... and a missing program is an error.
    let gone = unit_copy("allot-sync.service", |t| {
        t.replace(env!("CARGO_BIN_EXE_allot"), "/nonexistent/allot")
    });
    let (ok, out) = systemd_analyze(&["verify"], &gone);
    assert!(!ok, "{out}");
}

#[test]
fn hardening_is_rated_ok() {
    let unit = unit_copy("allot-sync.service", |t| t);
    let (_, out) = systemd_analyze(&["security", "--offline=true", "--no-pager"], &unit);
    let level: f64 = out
        .lines()
        .find_map(|l| l.split_once("Overall exposure level for allot-sync.service: "))
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no exposure level in:\n{out}"));
    // 0 = fully locked down, 10 = unprotected; "OK" is below 2.
    assert!(level < 2.0, "exposure {level}:\n{out}");
}

#[test]
fn unit_keeps_its_promises() {
    let t = unit_text();
    let has = |line: &str| t.lines().any(|l| l.trim() == line);
    for line in [
        "User=slurm",
        "ExecStart=/usr/bin/allot sync --follow $ALLOT_SYNC_OPTS",
        "EnvironmentFile=-/etc/default/allot-sync",
        "Restart=on-failure",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "ProtectHome=yes",
        "PrivateTmp=yes",
        "StateDirectory=allot",
        "WantedBy=multi-user.target",
    ] {
        assert!(has(line), "missing {line:?}");
    }
    // The sidecar reads allot.toml once and has no SIGHUP handler, so the
    // unit offers no reload (systemd would kill it with SIGHUP).
    assert!(
        !t.contains("ExecReload"),
        "no reload: the sidecar does not handle SIGHUP"
    );
    let src =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/cli/sync.rs")).unwrap();
    assert!(
        !src.contains("SIGHUP"),
        "the sidecar handles SIGHUP now: add ExecReload to the unit"
    );
    // Under ProtectSystem=strict only StateDirectory= (/var/lib/allot) is
    // writable: the example config's ledger must be there.
    let example = std::fs::read_to_string(common::example()).unwrap();
    assert!(example.contains("path = \"/var/lib/allot/ledger.sqlite\""));
    // /etc/slurm (slurm.conf, allot.toml) stays readable.
    assert!(!t.contains("InaccessiblePaths") && !t.contains("TemporaryFileSystem"));
    // The options file parses as `allot sync --follow $ALLOT_SYNC_OPTS`
    // would take its commented example.
    let default = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../packaging/allot-sync.default"
    ))
    .unwrap();
    let example_opts = default
        .lines()
        .find_map(|l| l.strip_prefix("#ALLOT_SYNC_OPTS=\""))
        .and_then(|l| l.strip_suffix('"'))
        .expect("a commented ALLOT_SYNC_OPTS example");
    common::ok(
        common::allot()
            .args(["sync", "--follow"])
            .args(example_opts.split_whitespace())
            .arg("--help"),
    );
}
