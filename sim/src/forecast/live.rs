//! The start forecast of a job of a live cluster: its present (slurmctld's
//! running and pending jobs, the jobs that ended within the history, the
//! usage window's charges) made a replay ([`crate::run::Standing`]), then
//! forecast as in the backtest ([`super::forecast`]). Times here are
//! seconds since the epoch.

use std::collections::HashMap;
use std::sync::Arc;

use fairshare::config::Config;
use serde::Serialize;

use super::{baseline_start, draw_starts, summarize_starts, ForecastOptions, ForkBuffer, History};
use crate::run::{AtPresent, Sim, Standing};
use crate::settings::{BackfillPreempt, BackfillReserve};
use crate::trace::{Trace, TraceJob};
use crate::{ClusterSpec, SimSettings, Workload};

/// Where a job stands now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobNow {
    /// Ended (history): ran from `start` to `end`, epoch seconds.
    Ended { start: i64, end: i64 },
    /// Running since `start` (epoch s), requeued `restarts` times before.
    Running { start: i64, restarts: u32 },
    /// Pending, requeued `restarts` times before.
    Pending { restarts: u32 },
}

/// A job of the present: slurmctld's (running, pending) or the history's
/// (ended).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PresentJob {
    /// Slurm job id.
    pub id: u64,
    /// Its account.
    pub account: String,
    /// GPUs it holds or asks for.
    pub gpus: u32,
    /// Submit time, epoch seconds.
    pub submit: i64,
    /// Time limit, seconds (`None`: unlimited; the forecast's horizon
    /// stands for it).
    pub time_limit: Option<u64>,
    /// Its minimum runtime as slurmctld holds it, seconds (0 = free tier).
    pub min_runtime: u64,
    pub now: JobNow,
}

/// A cluster's present.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Present {
    /// Epoch seconds.
    pub now: i64,
    pub jobs: Vec<PresentJob>,
    /// Charged intervals of the usage window besides the running jobs':
    /// (account, rate in milli-units a second, start, end), epoch seconds.
    pub charges: Vec<(String, u64, i64, i64)>,
    /// Nodes of the cluster draining now (slurmctld's DRAINING: they still
    /// hold jobs, start none): the replay drains that many of its nodes
    /// from now on, never resumed ([`crate::run::Sim`]'s `at_present`).
    pub draining: u32,
}

/// A live job's start forecast, epoch seconds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LiveForecast {
    pub job: u64,
    /// When it was made.
    pub at: i64,
    pub p10: i64,
    pub p50: i64,
    pub p90: i64,
    /// The baseline (time limits, no arrivals: what `squeue --start` plans).
    pub baseline: i64,
    pub draws: u32,
    /// Forks that reached the horizon without starting it.
    pub beyond_horizon: u32,
    /// The horizon's end (epoch s): a percentile equal to it means "not
    /// within the horizon", not a start then.
    pub horizon_end: i64,
    /// Ended jobs its run times are drawn from, and jobs of the history
    /// its arrivals repeat.
    pub history_jobs: u64,
    /// Running and pending jobs replayed.
    pub running: u64,
    pub pending: u64,
    /// Nodes drained from now on (`Present::draining`, at most the
    /// cluster's).
    pub draining: u32,
    /// Running jobs that had run longer than every run time of the history
    /// they could be drawn from, in the fork with most: each runs to its
    /// time limit there, so where they decide the start, p10-p90 is
    /// narrower than the real spread (a point where every fork agrees).
    pub outlived_history: u32,
}

/// Why a live forecast cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LiveError {
    #[error("job {0} is not pending")]
    NotPending(u64),
    #[error("job {0} is not among slurmctld's jobs")]
    Unknown(u64),
    #[error("job {0} cannot be replayed: {1}")]
    LeftOut(u64, String),
    #[error("{0}")]
    State(String),
}

/// `sim` with the backfill the forecast replays: EASY, a hold for the first
/// job a pass cannot start and a preemption tried for it alone
/// (`backfill_reserve` and `backfill_preempt` "first"), whatever `sim` says.
///
/// Why: with `backfill_reserve = "all"` and `backfill_preempt = "all"` (the
/// `slurmctld` preset, as Slurm's sched/backfill works) every job a pass
/// looks at, up to `backfill_depth`, gets its own will-run plan over the
/// running jobs and the holds before it, and a preemption test. A forecast
/// replays days of those passes in each of its forks: on 1,024 GPUs with
/// 150-300 jobs pending one forecast took 18 s to more than 5 minutes
/// (`cargo bench -p allot-sim --bench forecast`, docs/benchmarks.md), and
/// it grows with the queue. EASY's pass stops at the first job that cannot
/// start or preempt, plus the jobs backfilled around its one hold, so its
/// cost follows the jobs that start. What the forecast gives up is the
/// order in which the jobs behind the first wait for nodes; on the demo's
/// testbed its forecasts were as close with EASY as with the full backfill
/// (docs/forecast.md). Every other key (pass intervals, requeue delay,
/// resolution, ...) stays as `sim` sets it.
pub fn easy_backfill(sim: &SimSettings) -> SimSettings {
    SimSettings {
        backfill_reserve: BackfillReserve::First,
        backfill_preempt: BackfillPreempt::First,
        ..sim.clone()
    }
}

/// Forecasts pending job `job` of `present` on `cluster` (the nodes in
/// service, `present.draining` of them draining), with the engine's
/// `config` and `[sim]` settings `sim`.
///
/// # Errors
/// [`LiveError`]: the job unknown, not pending or not replayable (its
/// account not in the tree, larger than the cluster); the running jobs
/// not fitting the cluster.
pub fn forecast_live(
    present: &Present,
    job: u64,
    config: Arc<Config>,
    sim: &SimSettings,
    cluster: ClusterSpec,
    opts: &ForecastOptions,
) -> Result<LiveForecast, LiveError> {
    let target = present
        .jobs
        .iter()
        .find(|j| j.id == job && !matches!(j.now, JobNow::Ended { .. }))
        .ok_or(LiveError::Unknown(job))?;
    if !matches!(target.now, JobNow::Pending { .. }) {
        return Err(LiveError::NotPending(job));
    }
    let origin = present
        .jobs
        .iter()
        .map(|j| match j.now {
            JobNow::Ended { start, .. } | JobNow::Running { start, .. } => j.submit.min(start),
            JobNow::Pending { .. } => j.submit,
        })
        .chain(present.charges.iter().map(|c| c.2))
        .chain(std::iter::once(present.now - opts.history as i64))
        .min()
        .unwrap_or(present.now);
    let at = |t: i64| (t - origin).max(0) as u64;
    let mut order: Vec<&PresentJob> = present.jobs.iter().collect();
    order.sort_by_key(|j| (j.submit, j.id));
    let jobs: Vec<TraceJob> = order
        .iter()
        .map(|j| {
            let limit = j.time_limit.unwrap_or(opts.horizon).max(1);
            let duration = match j.now {
                JobNow::Ended { start, end } => (end - start).max(1) as u64,
                // Unknown: a fork draws it.
                _ => limit,
            };
            TraceJob {
                id: j.id,
                team: j.account.clone(),
                partition: None,
                submit: at(j.submit),
                duration,
                gpus: j.gpus,
                min_runtime: Some(j.min_runtime),
                resumable: Some(false),
                time_limit: Some(limit.max(duration)),
                submit_ms: None,
                line: 0,
            }
        })
        .collect();
    let trace = Trace {
        jobs,
        events: Vec::new(),
        origin: 0,
        errors: Vec::new(),
        skipped: Vec::new(),
        classes_only: false,
        format: None,
    };
    let easy = easy_backfill(sim);
    let sim = &easy;
    let w = Workload::prepare(&trace, &config, sim, cluster);
    let by_id: HashMap<u64, &PresentJob> = present.jobs.iter().map(|j| (j.id, j)).collect();
    let index = w.jobs.iter().position(|j| j.id == job).ok_or_else(|| {
        let why = w
            .left_out
            .iter()
            .find(|l| l.account.as_deref() == Some(target.account.to_lowercase().as_str()))
            .map(|l| l.reason.clone())
            .unwrap_or_else(|| {
                if u64::from(target.gpus) > cluster.gpus() {
                    format!(
                        "it asks for {} GPUs and the nodes in service have {} ({} x {})",
                        target.gpus,
                        cluster.gpus(),
                        cluster.nodes,
                        cluster.gpus_per_node
                    )
                } else {
                    format!(
                        "its {} GPUs do not fit the nodes in service ({} x {})",
                        target.gpus, cluster.nodes, cluster.gpus_per_node
                    )
                }
            });
        LiveError::LeftOut(job, why)
    })? as u32;
    let (mut history, mut running, mut pending) = (0u64, 0u64, 0u64);
    let standing: Vec<Standing> = w
        .jobs
        .iter()
        .map(|sj| match by_id[&sj.id].now {
            JobNow::Ended { start, end } => {
                history += 1;
                Standing::Ended {
                    start: at(start),
                    end: at(end),
                }
            }
            JobNow::Running { start, restarts } => {
                running += 1;
                Standing::Running {
                    start: at(start),
                    attempt: restarts,
                }
            }
            JobNow::Pending { restarts } => {
                pending += 1;
                Standing::Pending { attempt: restarts }
            }
        })
        .collect();
    let charges: Vec<(String, u64, u64, u64)> = present
        .charges
        .iter()
        .map(|(a, rate, s, e)| (a.clone(), *rate, at(*s), at(*e)))
        .collect();
    // The baseline and the draws run on every core, each thread on its own
    // replay of the present (a replay is not shared between threads),
    // taking the next one as it finishes one (the baseline, often the
    // longest, first).
    let now = at(present.now);
    let draws = opts.draws.max(1);
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(draws as usize + 1);
    let draining = present.draining.min(cluster.nodes);
    let at_present = AtPresent {
        now,
        standing: &standing,
        charges: &charges,
        draining,
    };
    let build = || Sim::at_present(&w, config.clone(), sim, cluster, &at_present);
    let next = std::sync::atomic::AtomicU32::new(0);
    let (mut starts, mut baseline, mut outlived) = (Vec::new(), now + opts.horizon, 0u32);
    std::thread::scope(|s| -> Result<(), LiveError> {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let (build, w, next) = (&build, &w, &next);
                type Done = (Vec<Option<u64>>, Option<u64>, u32);
                s.spawn(move || -> Result<Done, String> {
                    let base = build()?;
                    let history = History::of(&base, opts.history);
                    let mut buf = ForkBuffer::new(w);
                    let (mut starts, mut baseline, mut outlived) = (Vec::new(), None, 0u32);
                    loop {
                        let unit = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        match unit {
                            0 => baseline = Some(baseline_start(&base, index, opts, &mut buf)),
                            u if u <= draws => starts.extend(draw_starts(
                                &base,
                                &history,
                                index,
                                opts,
                                &mut buf,
                                std::iter::once(u - 1),
                                &mut outlived,
                            )),
                            _ => return Ok((starts, baseline, outlived)),
                        }
                    }
                })
            })
            .collect();
        for worker in workers {
            let (s, b, o) = worker
                .join()
                .map_err(|_| LiveError::State("a forecast thread panicked".into()))?
                .map_err(LiveError::State)?;
            starts.extend(s);
            outlived = outlived.max(o);
            if let Some(b) = b {
                baseline = b;
            }
        }
        Ok(())
    })?;
    let f = summarize_starts(now, opts, starts, baseline);
    let epoch = |t: u64| t as i64 + origin;
    Ok(LiveForecast {
        job,
        at: present.now,
        p10: epoch(f.p10),
        p50: epoch(f.p50),
        p90: epoch(f.p90),
        baseline: epoch(f.baseline),
        horizon_end: epoch(now + opts.horizon),
        draws: opts.draws,
        beyond_horizon: f.beyond_horizon,
        history_jobs: history,
        running,
        pending,
        draining,
        outlived_history: outlived,
    })
}
