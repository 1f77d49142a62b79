//! Workloads: contract rules and the plugins' contracts.

use std::collections::BTreeMap;

use crate::testutil::*;
use crate::*;

#[test]
fn rules_assign_contracts_and_are_reported() {
    let c = config(&format!(
        "{TWO_TEAMS}\n[sim]\n[[sim.rule]]\nname = \"debug\"\nmax_gpus = 1\nmax_duration = \"30:00\"\nmin_runtime = \"0\"\n\
         [[sim.rule]]\nteams = [\"t2\"]\nmin_runtime = \"runtime\"\nresumable = false\n"
    ));
    let mut jobs = vec![
        job(1, "t1", 0, 600, 1),
        job(2, "t2", 0, 7200, 2),
        job(3, "t1", 0, 7200, 2),
        job(4, "ghost", 0, 60, 1),
    ];
    jobs[2].min_runtime = Some(99_999_999);
    let t = trace::from_jobs(jobs, vec![]);
    let w = Workload::prepare(&t, &c, &sim_of(&c), ONE_NODE);
    let by_id: BTreeMap<u64, &SimJob> = w.jobs.iter().map(|j| (j.id, j)).collect();
    assert_eq!(by_id[&1].min_runtime, 0);
    assert_eq!((by_id[&2].min_runtime, by_id[&2].resumable), (7200, false));
    assert_eq!(
        by_id[&3].min_runtime,
        8 * 3600,
        "a recorded contract is capped"
    );
    let rules: Vec<(&str, u64)> = w.rules.iter().map(|r| (r.rule.as_str(), r.jobs)).collect();
    assert_eq!(rules, vec![("trace", 1), ("debug", 1), ("rule 2", 1)]);
    // A rule whose conditions match no job is listed with 0 jobs.
    let c = config(&format!(
        "{TWO_TEAMS}\n[sim]\n[[sim.rule]]\nname = \"huge\"\nmin_gpus = 64\nmin_runtime = \"0\"\n"
    ));
    let w = Workload::prepare(&t, &c, &sim_of(&c), ONE_NODE);
    let rules: Vec<(&str, u64)> = w.rules.iter().map(|r| (r.rule.as_str(), r.jobs)).collect();
    assert_eq!(rules, vec![("trace", 1), ("huge", 0), ("default", 2)]);
    assert_eq!(w.left_out[0].reason, "unknown account ghost");
    assert_eq!(w.left_out[0].jobs, 1);
}

#[test]
fn contracts_without_a_rule_are_the_plugins_contracts() {
    // The workload looked a partition list ("debug,gpu") up whole, where the
    // plugins take the first partition's default: one resolver now.
    let c = config(&format!(
        "{TWO_TEAMS}\n[contract.partition.debug]\ndefault_min_runtime = \"0\"\n"
    ));
    let mut jobs = vec![
        job(1, "t1", 0, 600, 1),
        job(2, "t1", 0, 600, 1),
        job(3, "t2", 0, 600, 1),
        job(4, "t2", 0, 600, 1),
    ];
    jobs[0].partition = Some("debug,gpu".into());
    jobs[1].partition = Some("gpu,debug".into());
    jobs[2].min_runtime = Some(99 * 3600); // a record above the 8 h cap
    let w = Workload::prepare(&trace::from_jobs(jobs, vec![]), &c, &sim_of(&c), ONE_NODE);
    let min: Vec<u64> = w.jobs.iter().map(|j| j.min_runtime).collect();
    assert_eq!(min, vec![0, 3600, 8 * 3600, 3600]);
}

#[test]
fn contracts_are_at_most_the_traces_time_limits() {
    // Issue 39: a 10-minute job of a 10-minute limit was given (and charged)
    // the 1 h default; a record or a rule above the limit counts as the limit.
    let c = config(&format!(
        "{TWO_TEAMS}\n[sim]\n[[sim.rule]]\nteams = [\"t2\"]\nmin_runtime = \"2:00:00\"\n"
    ));
    let mut jobs = vec![
        limited(1, "t1", 0, 600, 1),
        limited(2, "t1", 0, 600, 1),
        limited(3, "t2", 0, 1800, 1),
        job(4, "t1", 0, 600, 1),
        limited(5, "t1", 0, 600, 1),
    ];
    jobs[1].min_runtime = Some(4 * 3600); // recorded above its 10-minute limit
    jobs[4].time_limit = Some(300); // a limit below the runtime reads as the runtime
    let w = Workload::prepare(&trace::from_jobs(jobs, vec![]), &c, &sim_of(&c), ONE_NODE);
    let min: Vec<(u64, u64)> = w.jobs.iter().map(|j| (j.id, j.min_runtime)).collect();
    assert_eq!(
        min,
        vec![(1, 600), (2, 600), (3, 1800), (4, 3600), (5, 600)]
    );
}
