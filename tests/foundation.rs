//! Foundation: the testbed runs real Slurm with GPU GRES and accounting, and
//! the bindings match the installed Slurm.

use std::time::Duration;

use allot_e2e::{wait_until, Testbed};

#[test]
fn sbatch_two_gpus_is_accounted_in_sacct() {
    let tb = Testbed::from_env();
    let job = tb.sbatch(&[
        "--gres=gpu:2",
        "-A",
        "a1",
        "-J",
        "foundation-gpu",
        "--wrap",
        "sleep 1",
    ]);
    let rows = wait_until(
        Duration::from_secs(60),
        "the job to complete in sacct",
        || {
            let rows = tb.sacct(job, "JobID,State,AllocTRES,Account");
            match rows.first() {
                Some(r) if r[1] == "COMPLETED" => Ok(rows),
                other => Err(format!("{other:?}")),
            }
        },
    );
    assert_eq!(rows.len(), 1, "one attempt: {rows:?}");
    let r = &rows[0];
    assert_eq!(r[0], job.to_string());
    assert_eq!(r[3], "a1");
    assert!(
        r[2].split(',').any(|t| t == "gres/gpu=2"),
        "AllocTRES {:?} lacks gres/gpu=2",
        r[2]
    );
    assert_eq!(fairshare::tres::gpu_count(&r[2]).unwrap(), 2);
}

#[test]
fn bindings_match_the_running_slurm_version() {
    let tb = Testbed::from_env();
    // "slurm-wlm 22.05.8" (Debian) or "slurm 22.05.8".
    let out = tb.ok("sinfo", &["--version"]);
    let reported = out.split_whitespace().last().unwrap();
    let mut parts = reported.split('.').map(|p| p.parse::<u32>().unwrap());
    let (ma, mi, mc) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
    );
    assert_eq!(
        allot_ffi::SLURM_VERSION_NUMBER,
        (ma << 16) | (mi << 8) | mc,
        "sinfo says {reported}"
    );
    assert_eq!(allot_ffi::SLURM_VERSION, reported);
}

#[test]
fn testbed_has_eight_gpus_and_two_partitions() {
    let tb = Testbed::from_env();
    let gres = tb.ok("sinfo", &["-h", "-N", "-o", "%G"]);
    assert!(
        gres.lines().all(|l| l.trim() == "gpu:8"),
        "sinfo %G: {gres:?}"
    );
    let parts = tb.ok("sinfo", &["-h", "-o", "%R"]);
    let mut parts: Vec<&str> = parts.lines().map(str::trim).collect();
    parts.sort();
    assert_eq!(parts, ["debug", "gpu"]);
}
