//! What the simulator's tests share: configs, jobs, a replay, and every
//! invariant a report must hold.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::*;
use fairshare::config::Config;

pub(crate) const TWO_TEAMS: &str = r#"
window = "7-0"
[contract]
default_min_runtime = "1:00:00"
[tree.t1]
share = 1
[tree.t2]
share = 1
"#;

pub(crate) fn config(text: &str) -> Arc<Config> {
    Arc::new(Config::from_toml_str(text).unwrap())
}

/// The `[sim]` settings of `config`, which must be valid.
pub(crate) fn sim_of(config: &Config) -> SimSettings {
    SimSettings::from_config(config).unwrap()
}

/// The errors of `TWO_TEAMS` with `sim` as its `[sim]` section, which
/// must be refused.
pub(crate) fn sim_error(sim: &str) -> String {
    crate::settings::from_toml_str(&format!("{TWO_TEAMS}\n[sim]\n{sim}"))
        .unwrap_err()
        .to_string()
}

pub(crate) fn job(id: u64, team: &str, submit: u64, duration: u64, gpus: u32) -> TraceJob {
    TraceJob::plain(id, team, submit, duration, gpus)
}

pub(crate) fn run(
    config: &Arc<Config>,
    jobs: Vec<TraceJob>,
    cluster: ClusterSpec,
    policy: Policy,
) -> SimReport {
    replay(config, jobs, Vec::new(), cluster, policy).0
}

/// [`run`] with node `events`, the invariants checked on the report.
pub(crate) fn run_with_events(
    config: &Arc<Config>,
    jobs: Vec<TraceJob>,
    events: Vec<NodeEvent>,
    cluster: ClusterSpec,
    policy: Policy,
) -> SimReport {
    let (r, w) = replay(config, jobs, events, cluster, policy);
    check_invariants(&r, &w);
    r
}

/// Replays `jobs` and `events` under `policy`: the report and its workload.
fn replay(
    config: &Arc<Config>,
    jobs: Vec<TraceJob>,
    events: Vec<NodeEvent>,
    cluster: ClusterSpec,
    policy: Policy,
) -> (SimReport, Workload) {
    let t = trace::from_jobs(jobs, events);
    let sim = sim_of(config);
    let w = Workload::prepare(&t, config, &sim, cluster);
    let r = simulate(
        &w,
        config.clone(),
        &sim,
        cluster,
        policy,
        &t.events,
        &mut |_| {},
    );
    (r, w)
}

pub(crate) const ONE_NODE: ClusterSpec = ClusterSpec {
    nodes: 1,
    gpus_per_node: 8,
};

pub(crate) const TWO_NODES: ClusterSpec = ClusterSpec {
    nodes: 2,
    gpus_per_node: 8,
};

/// A job whose trace gives a time limit equal to its duration (what the
/// backfill plans with under `backfill_reserve = "all"`).
pub(crate) fn limited(id: u64, team: &str, submit: u64, duration: u64, gpus: u32) -> TraceJob {
    TraceJob {
        time_limit: Some(duration),
        ..job(id, team, submit, duration, gpus)
    }
}

/// Every invariant the issue asks for, on one report.
pub(crate) fn check_invariants(r: &SimReport, w: &Workload) {
    // Delivered GPU time never exceeds capacity, hour by hour.
    for h in 0..r.hourly.hours() {
        let got: u64 = r.hourly.got.iter().map(|g| g[h]).sum();
        assert!(
            got <= r.hourly.capacity[h],
            "hour {h}: {got} > {}",
            r.hourly.capacity[h]
        );
    }
    // No preemption inside a contract.
    for p in &r.preemption_log {
        assert!(p.victim_run_time >= p.victim_min_runtime, "{p:?}");
    }
    // Preemption (fairshare::preempt): a team preempts its own jobs only if
    // they are free tier or the preemptor is short; at one moment (no job
    // arrived or ended in between) no two teams preempt each other's
    // allocated jobs with jobs that are not short, unless a preemption
    // between them pushed its victim's leaf below its entitlement (the net
    // rule: that one may be answered, and each answer raises `covered`).
    type Node = u32;
    let mut edges: BTreeMap<u64, BTreeSet<(Node, Node)>> = BTreeMap::new();
    let mut pushed_below: BTreeSet<(u64, Node, Node)> = BTreeSet::new();
    for p in &r.preemption_log {
        let victim_allocated = p.victim_min_runtime > 0;
        if p.preemptor_team == p.victim_team {
            assert!(!victim_allocated || p.preemptor_short, "{p:?}");
        }
        if p.victim_left_below {
            assert!(victim_allocated, "{p:?}");
            if !p.preemptor_short {
                pushed_below.insert((p.time, p.preemptor_team, p.victim_team));
            }
        }
        if victim_allocated && !p.preemptor_short {
            edges
                .entry(p.time)
                .or_default()
                .insert((p.preemptor_team, p.victim_team));
        }
    }
    for (snap, e) in &edges {
        for &(a, b) in e {
            let answered_net_move =
                pushed_below.contains(&(*snap, a, b)) || pushed_below.contains(&(*snap, b, a));
            assert!(
                answered_net_move || !e.contains(&(b, a)),
                "snapshot {snap}: {a:?} and {b:?} preempt each other"
            );
        }
    }
    // Every GPU-second held is work kept or work lost.
    let work: f64 = w
        .jobs
        .iter()
        .map(|j| f64::from(j.gpus()) * j.duration as f64)
        .sum::<f64>()
        / 3600.0;
    if r.unfinished == 0 {
        assert!(
            (r.gpu_hours - (work + r.lost_gpu_hours)).abs() < 1e-6,
            "{} vs {work} + {}",
            r.gpu_hours,
            r.lost_gpu_hours
        );
    }
    assert!(r.owed_delivered <= 1.0 + 1e-12 && r.occupancy <= 1.0 + 1e-12);
}

/// Teams t1, t2 and t3 of equal shares, `sim` as their `[sim]` section:
/// each team's median wait (seconds) replaying `jobs` (all must finish)
/// FIFO on one 8-GPU node.
pub(crate) fn fifo_waits_of_three_teams(sim: &str, jobs: Vec<TraceJob>) -> Vec<u64> {
    let c = config(&format!(
        "[tree.t1]\nshare = 1\n[tree.t2]\nshare = 1\n[tree.t3]\nshare = 1\n[sim]\n{sim}"
    ));
    let n = jobs.len() as u64;
    let r = run(&c, jobs, ONE_NODE, Policy::Fifo);
    assert_eq!(r.finished, n);
    r.teams.iter().map(|t| t.wait_p50_s).collect()
}
