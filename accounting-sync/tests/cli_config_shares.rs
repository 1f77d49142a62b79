//! `allot check-config` and `allot shares` end to end (no Slurm needed).

use std::path::PathBuf;

mod common;
use common::{allot, example};

fn temp(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("allot-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn check_config_prints_the_tree() {
    let out = allot().arg("check-config").arg(example()).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = String::from_utf8(out.stdout).unwrap();
    assert!(
        s.contains("  a1 ") && s.contains("35.00%") && s.contains("a1, a1-interactive"),
        "{s}"
    );
}

#[test]
fn check_config_lists_every_error_and_fails() {
    let bad = temp(
        "bad.toml",
        "window = \"0\"\n[tree.nlp]\nshare = 60\n[tree.nlp.a2]\nshare = -3\n",
    );
    let out = allot().args(["check-config"]).arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let e = String::from_utf8(out.stderr).unwrap();
    assert!(e.contains("2 errors"), "{e}");
    assert!(
        e.contains("tree.nlp.a2: share cannot be negative (found -3)"),
        "{e}"
    );
    assert!(e.contains("window: must be longer than 0"), "{e}");
}

#[test]
fn config_path_comes_from_the_environment() {
    let out = allot()
        .arg("check-config")
        .env("ALLOT_CONF", example())
        .output()
        .unwrap();
    assert!(out.status.success());
    let dir = example().parent().unwrap().to_path_buf();
    let out = allot()
        .arg("check-config")
        .env("SLURM_CONF", dir.join("slurm.conf"))
        .output()
        .unwrap();
    assert!(out.status.success(), "allot.toml beside $SLURM_CONF");
}

#[test]
fn shares_parsable2_and_bad_rows() {
    let usage = temp(
        "usage.csv",
        "account,gpu_seconds\na1,1800000\na2,360000\nb2,1080000\n",
    );
    let out = allot()
        .args(["shares", "--parsable2", "--config"])
        .arg(example())
        .arg("--usage")
        .arg(&usage)
        .output()
        .unwrap();
    assert!(out.status.success());
    let s = String::from_utf8(out.stdout).unwrap();
    assert!(s.starts_with("Account|Share|NormShares|RawUsage|EffectvUsage|LevelFS|FairShare\nroot||1.000000|3240000|"), "{s}");
    assert!(
        s.contains("\n  b1|16|0.400000|0|0.000000|inf|1.000000\n"),
        "{s}"
    );
    let bad = temp("bad.csv", "a1,1\na2,lots\n");
    let out = allot()
        .args(["shares", "--config"])
        .arg(example())
        .arg("--usage")
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 2: gpu_seconds must be a number"));
}

#[test]
fn check_config_takes_the_slurmctld_timing_preset() {
    let base = std::fs::read_to_string(example()).unwrap();
    let good = temp(
        "timing.toml",
        &format!("{base}\n[sim]\ntiming = \"slurmctld\"\nsched_interval = \"0:00:02\"\n"),
    );
    let out = allot().arg("check-config").arg(&good).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bad = temp(
        "bad-timing.toml",
        &format!("{base}\n[sim]\ntiming = \"slurm\"\n"),
    );
    let out = allot().arg("check-config").arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let e = String::from_utf8(out.stderr).unwrap();
    assert!(
        e.contains("sim.timing: \"slurm\" is not a timing preset; write \"ideal\"")
            && e.contains("\"slurmctld\""),
        "{e}"
    );
}
