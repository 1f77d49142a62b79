use super::live::{forecast_live, JobNow, LiveError, Present, PresentJob};
use super::*;
use crate::testutil::{config, job, sim_of, TWO_TEAMS};
use crate::{trace, ClusterSpec, Policy, Workload};

const ONE_NODE: ClusterSpec = ClusterSpec {
    nodes: 1,
    gpus_per_node: 8,
};

#[test]
fn quantiles_are_type_6_between_draws() {
    let x: Vec<u64> = (1..=16).map(|i| i * 10).collect();
    // Rank p (n + 1): 1.7 -> 17, 8.5 -> 85, 15.3 -> 153.
    assert_eq!(quantile(&x, 0.1), 17);
    assert_eq!(quantile(&x, 0.5), 85);
    assert_eq!(quantile(&x, 0.9), 153);
    // Clamped to the draws at the ends.
    assert_eq!(quantile(&[5], 0.1), 5);
    assert_eq!(quantile(&[5, 9], 0.9), 9);
}

/// A trace with time limits (run time x 1.5, rounded up) of both teams,
/// busy enough that jobs wait.
fn busy_trace() -> trace::Trace {
    let mut jobs = Vec::new();
    for i in 0..240u64 {
        let team = if i % 3 == 0 { "t2" } else { "t1" };
        let dur = 600 + (i * 7_919) % 5_400;
        let mut j = job(i, team, i * 400, dur, [1, 2, 4, 8][(i % 4) as usize]);
        j.time_limit = Some(dur * 3 / 2);
        jobs.push(j);
    }
    trace::from_jobs(jobs, Vec::new())
}

#[test]
fn a_backtest_leaves_the_replay_as_it_was_and_beats_its_baseline() {
    let c = config(TWO_TEAMS);
    let s = sim_of(&c);
    let t = busy_trace();
    let w = Workload::prepare(&t, &c, &s, ONE_NODE);
    let plain = crate::simulate(&w, c.clone(), &s, ONE_NODE, Policy::Allot, &[], &mut |_| {});
    let opts = BacktestOptions {
        jobs: 60,
        forecast: ForecastOptions {
            draws: 4,
            ..ForecastOptions::default()
        },
        ..BacktestOptions::default()
    };
    let (r, f) = backtest(&w, c, &s, ONE_NODE, Policy::Allot, &[], &opts, &mut |_| {});
    // A fork never changes the replay it is taken from.
    assert_eq!(r, plain);
    assert_eq!(f.sampled_every, 4);
    assert!(f.jobs >= 20 && f.scored >= 10, "{f:?}");
    assert!(
        f.mae_ratio.unwrap() < f.baseline_mae_ratio.unwrap(),
        "{f:?}"
    );
    assert!((0.0..=1.0).contains(&f.coverage_80.unwrap()));
}

fn present_job(id: u64, submit: i64, limit: u64, now: JobNow) -> PresentJob {
    PresentJob {
        id,
        account: "t1".into(),
        gpus: 8,
        submit,
        time_limit: Some(limit),
        min_runtime: 3_600,
        now,
    }
}

/// One 8-GPU node: a job running for 100 s of its 600-s limit, a pending
/// one behind it, and a history in which every job ran to its limit.
fn present() -> Present {
    let now = 1_000_000;
    let mut jobs: Vec<PresentJob> = (0..10)
        .map(|i| {
            let start = now - 86_400 + i * 600;
            present_job(
                100 + i as u64,
                start,
                600,
                JobNow::Ended {
                    start,
                    end: start + 600,
                },
            )
        })
        .collect();
    jobs.push(present_job(
        1,
        now - 100,
        600,
        JobNow::Running {
            start: now - 100,
            restarts: 0,
        },
    ));
    jobs.push(present_job(
        2,
        now - 50,
        600,
        JobNow::Pending { restarts: 0 },
    ));
    Present {
        now,
        jobs,
        charges: Vec::new(),
        draining: 0,
    }
}

#[test]
fn a_live_forecast_replays_the_present() {
    let c = config(TWO_TEAMS);
    let s = sim_of(&c);
    let opts = ForecastOptions {
        draws: 4,
        ..ForecastOptions::default()
    };
    let f = forecast_live(&present(), 2, c.clone(), &s, ONE_NODE, &opts).unwrap();
    // Every job runs to its limit: the running one ends at now + 500, and
    // the pending one starts then, in every draw and in the baseline.
    let end = present().now + 500;
    assert_eq!((f.p10, f.p50, f.p90, f.baseline), (end, end, end, end));
    assert_eq!((f.running, f.pending, f.history_jobs), (1, 1, 10));
    assert_eq!(
        forecast_live(&present(), 1, c.clone(), &s, ONE_NODE, &opts),
        Err(LiveError::NotPending(1))
    );
    assert_eq!(
        forecast_live(&present(), 7, c.clone(), &s, ONE_NODE, &opts),
        Err(LiveError::Unknown(7))
    );
    let mut p = present();
    p.jobs.push(present_job(
        3,
        p.now - 10,
        600,
        JobNow::Running {
            start: p.now - 10,
            restarts: 0,
        },
    ));
    let e = forecast_live(&p, 2, c, &s, ONE_NODE, &opts).unwrap_err();
    assert!(e.to_string().contains("does not fit a 1x8 cluster"), "{e}");
}

#[test]
fn a_draining_node_starts_nothing_from_now_on() {
    let c = config(TWO_TEAMS);
    let s = sim_of(&c);
    let opts = ForecastOptions {
        draws: 4,
        horizon: 86_400,
        ..ForecastOptions::default()
    };
    // The one node drains: its running job ends at its limit and the
    // pending job never starts within the horizon.
    let mut p = present();
    p.draining = 1;
    let f = forecast_live(&p, 2, c.clone(), &s, ONE_NODE, &opts).unwrap();
    let end = p.now + 86_400;
    assert_eq!((f.p10, f.p50, f.p90, f.baseline), (end, end, end, end));
    assert_eq!((f.beyond_horizon, f.draining), (4, 1));
    // Two nodes, one holding the running job, and a second 8-GPU job
    // pending behind job 2. The node that drains is the busy one: job 2
    // starts now on the idle node, and job 3 there when job 2 ends (every
    // job runs to its 600-s limit), not when the running job does.
    let two = ClusterSpec {
        nodes: 2,
        gpus_per_node: 8,
    };
    p.jobs.push(present_job(
        3,
        p.now - 40,
        600,
        JobNow::Pending { restarts: 0 },
    ));
    let f = forecast_live(&p, 2, c.clone(), &s, two, &opts).unwrap();
    assert_eq!((f.p10, f.p90), (p.now, p.now));
    let f = forecast_live(&p, 3, c.clone(), &s, two, &opts).unwrap();
    assert_eq!((f.p10, f.p90), (p.now + 600, p.now + 600));
    // Without the drain job 3 starts as the running job ends.
    p.draining = 0;
    let f = forecast_live(&p, 3, c, &s, two, &opts).unwrap();
    assert_eq!(f.p50, p.now + 500);
}

#[test]
fn a_batch_counts_its_running_jobs_as_at_least_this_long() {
    // Ended at 0.1 and 0.2, two still running past 0.5: half the batch
    // ends by 0.2, and the other half beyond every end seen.
    let d = Dist::kaplan_meier(&[0.1, 0.2], &[0.5, 0.6]);
    assert_eq!(d.sample(0.0, 0.0), Some(0.1));
    assert_eq!(d.sample(0.0, 0.4), Some(0.2));
    assert_eq!(d.sample(0.0, 0.9), None, "runs to its limit");
    assert_eq!(d.sample(0.2, 0.0), None, "nothing ended above 0.2");
    // Without running jobs it is the ended jobs' own distribution.
    let d = Dist::kaplan_meier(&[0.2, 0.4], &[]);
    assert_eq!(d.sample(0.0, 0.49), Some(0.2));
    assert_eq!(d.sample(0.0, 0.51), Some(0.4));
    // One running at 0.3 between them: the end at 0.4 carries its share.
    let d = Dist::kaplan_meier(&[0.2, 0.4], &[0.3]);
    assert_eq!(d.sample(0.25, 0.0), Some(0.4));
    assert_eq!(d.sample(0.0, 0.3), Some(0.2));
    assert_eq!(d.sample(0.0, 0.34), Some(0.4));
}
