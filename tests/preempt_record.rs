//! preempt/allot records each preemption slurmctld carries out, and only
//! those (issue 40): a "yes" to a candidate slurmctld does not take is not
//! a preemption. Four free-tier quarters of b1 are each an allowed
//! candidate of a1's pending quarter; slurmctld takes one. The record
//! names a1's job, the rule `free_tier` and the figures, survives a
//! slurmctld restart (it is in the preemption log beside the ledger), and
//! `allot sync` stores it for `allot explain`.

use std::time::Duration;

use allot_e2e::{exclusive, wait_until};

#[test]
fn only_the_candidate_slurmctld_takes_is_recorded_with_its_rule() {
    let (_one, tb) = exclusive(&[]);
    let log = {
        let mut s = tb.ledger().into_os_string();
        s.push(".preemptions");
        std::path::PathBuf::from(s)
    };
    let recorded = |preemptor: u32| -> Vec<serde_json::Value> {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|r| r["preemptor"] == u64::from(preemptor))
            .collect()
    };
    let free = tb.run_quarters("b1", &["0"; 4]);
    let p = tb.sbatch_quarter("a1", "1:00");
    tb.wait_state(p, "RUNNING", Duration::from_secs(60));
    let taken = wait_until(Duration::from_secs(30), "one victim requeued", || {
        let t: Vec<u32> = free
            .iter()
            .copied()
            .filter(|j| tb.restarts(*j) > 0)
            .collect();
        if t.is_empty() {
            Err("none yet".into())
        } else {
            Ok(t)
        }
    });
    assert_eq!(taken.len(), 1, "a quarter frees a quarter: {taken:?}");
    let victim = taken[0];
    let records = wait_until(Duration::from_secs(10), "the record in the log", || {
        let r = recorded(p);
        if r.is_empty() {
            Err(format!("nothing for job {p} in {}", log.display()))
        } else {
            Ok(r)
        }
    });
    assert_eq!(records.len(), 1, "one preemption, one record: {records:?}");
    let r = &records[0];
    assert_eq!(r["victim"], u64::from(victim), "{r}");
    assert_eq!(
        (
            r["victim_account"].as_str(),
            r["preemptor_account"].as_str()
        ),
        (Some("b1"), Some("a1"))
    );
    assert_eq!(r["rule"], "free_tier", "{r}");
    assert_eq!(r["grounds"]["victim"]["min_runtime"], 0, "{r}");
    assert_eq!(
        r["grounds"]["preemptor_gpus"],
        u64::from(tb.total_gpus() / 4),
        "{r}"
    );
    // The record is on disk: a restarted slurmctld loses nothing of it.
    tb.restart_slurmctld();
    tb.allot_ok(&["sync", "--config", tb.allot_conf().to_str().unwrap()]);
    let explain = |job: u32| -> serde_json::Value {
        let out = tb.allot_ok(&[
            "explain",
            &job.to_string(),
            "--no-forecast",
            "--json",
            "--config",
            tb.allot_conf().to_str().unwrap(),
        ]);
        serde_json::from_str(&out).unwrap()
    };
    wait_until(
        Duration::from_secs(30),
        "the victim's preempted attempt in the ledger",
        || {
            tb.allot_ok(&["sync", "--config", tb.allot_conf().to_str().unwrap()]);
            let v = explain(victim);
            match v["requeues"].as_array() {
                Some(a) if !a.is_empty() => Ok(()),
                _ => Err(v.to_string()),
            }
        },
    );
    let v = explain(victim);
    let q = &v["requeues"][0];
    assert_eq!(q["preempted_by"], u64::from(p), "{v}");
    assert_eq!(q["preemptor_account"], "a1", "{v}");
    assert_eq!(q["rule"], "free_tier", "{v}");
    assert!(q["guessed_preemptor"].is_null(), "{v}");
    for j in free.iter().filter(|j| **j != victim) {
        assert_eq!(
            tb.squeue(*j, "%T"),
            "RUNNING",
            "job {j} was allowed, not taken"
        );
        assert_eq!(explain(*j)["requeues"], serde_json::json!([]), "job {j}");
    }
    tb.cancel_all();
}
