//! The forecast's backtest: a replay of a trace that, at the submission of
//! a sample of its jobs, forecasts each one's start from that moment's
//! state ([`super::forecast`], which reads only the past) and compares it
//! with the start the replay then gives the job.

use std::sync::Arc;

use fairshare::config::Config;
use serde::Serialize;

use super::{forecast, ForecastOptions, ForkBuffer, StartForecast};
use crate::run::Sim;
use crate::{ClusterSpec, NodeEvent, Policy, SimReport, SimSettings, Workload};

/// What a backtest samples and scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BacktestOptions {
    /// How each forecast is drawn.
    pub forecast: ForecastOptions,
    /// Jobs to sample at most (every n-th job of the trace; default 1,000).
    pub jobs: u32,
    /// The error and coverage count jobs that waited at least this long,
    /// seconds (default 600).
    pub min_wait: u64,
}

impl Default for BacktestOptions {
    fn default() -> Self {
        BacktestOptions {
            forecast: ForecastOptions::default(),
            jobs: 1_000,
            min_wait: 600,
        }
    }
}

/// A backtest's figures (the `forecast` object of `allot sim --json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BacktestSummary {
    /// Forecasts compared: sampled jobs still pending after their
    /// submission's pass that the replay started.
    pub jobs: u64,
    /// Of those, jobs that waited at least `min_wait_s`: the ones scored.
    pub scored: u64,
    /// Median over scored jobs of |forecast p50 - actual start| / actual
    /// wait; `None` (JSON null) when no job was scored.
    pub mae_ratio: Option<f64>,
    /// The same for the baseline (time limits, no arrivals: `squeue --start`).
    pub baseline_mae_ratio: Option<f64>,
    /// Share of scored jobs whose actual start lies within p10-p90, [0, 1];
    /// `None` when no job was scored.
    pub coverage_80: Option<f64>,
    /// The same over every job compared (`None`: none was).
    pub coverage_80_all: Option<f64>,
    /// Median actual wait of the scored jobs, seconds (`None`: none).
    pub median_wait_s: Option<u64>,
    /// Scored jobs whose actual start was before p10 / after p90.
    pub early: u64,
    pub late: u64,
    /// Sampled jobs the replay never started (not compared).
    pub never_started: u64,
    /// Every n-th job of the trace was sampled.
    pub sampled_every: u64,
    pub min_wait_s: u64,
    /// Forks per forecast.
    pub draws: u32,
    /// Forks that reached the horizon without the job starting.
    pub beyond_horizon: u64,
    /// Wall-clock seconds spent forecasting.
    pub forecast_wall_s: f64,
}

/// Replays `w` as [`crate::simulate`] does and backtests the forecast on
/// it: the replay's report (the same as without the backtest: a fork never
/// changes the replay it is taken from) and the backtest's figures. Every
/// job needs a time limit (a trace without them gets [`super::limits`]'s
/// first); a job without one plans with its run time.
#[allow(clippy::too_many_arguments)]
pub fn backtest(
    w: &Workload,
    config: Arc<Config>,
    sim: &SimSettings,
    cluster: ClusterSpec,
    policy: Policy,
    events: &[NodeEvent],
    opts: &BacktestOptions,
    progress: &mut dyn FnMut(u64),
) -> (SimReport, BacktestSummary) {
    let mut base = Sim::new(w, config, sim, cluster, policy, events);
    let n = w.jobs.len();
    let every = n.div_ceil(opts.jobs.max(1) as usize).max(1);
    let mut buf = ForkBuffer::new(w);
    let mut next = 0usize;
    let mut made: Vec<(u32, StartForecast)> = Vec::new();
    let mut forecasting = std::time::Duration::ZERO;
    let mut steps = 0u32;
    while base.step() {
        while next < n && base.arrived() > next {
            let id = next as u32;
            next += every;
            // At its submission, once its pass has run, and still pending.
            if base.now() == w.jobs[id as usize].submit && base.first_start(id).is_none() {
                let t = std::time::Instant::now();
                made.push((id, forecast(&base, id, &opts.forecast, &mut buf)));
                forecasting += t.elapsed();
            }
        }
        steps += 1;
        if steps.is_multiple_of(8192) {
            progress(base.finished());
        }
    }
    let actual: Vec<Option<u64>> = made.iter().map(|&(id, _)| base.first_start(id)).collect();
    let report = base.finish();
    progress(report.finished);
    let s = summarize(w, &made, &actual, opts, every as u64, forecasting);
    (report, s)
}

/// The figures from forecasts and the actual starts (`None`: never), of
/// every `every`-th job, made in `wall` time.
fn summarize(
    w: &Workload,
    made: &[(u32, StartForecast)],
    actual: &[Option<u64>],
    opts: &BacktestOptions,
    every: u64,
    wall: std::time::Duration,
) -> BacktestSummary {
    let (mut rel, mut base_rel, mut waits) = (Vec::new(), Vec::new(), Vec::new());
    let (mut jobs, mut covered_all, mut covered, mut early, mut late, mut never, mut beyond) =
        (0u64, 0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    for (&(id, f), a) in made.iter().zip(actual) {
        beyond += u64::from(f.beyond_horizon);
        let Some(a) = *a else {
            never += 1;
            continue;
        };
        jobs += 1;
        let inside = f.p10 <= a && a <= f.p90;
        covered_all += u64::from(inside);
        let wait = a - w.jobs[id as usize].submit;
        if wait < opts.min_wait {
            continue;
        }
        covered += u64::from(inside);
        early += u64::from(a < f.p10);
        late += u64::from(a > f.p90);
        rel.push(f.p50.abs_diff(a) as f64 / wait as f64);
        base_rel.push(f.baseline.abs_diff(a) as f64 / wait as f64);
        waits.push(wait);
    }
    let scored = rel.len() as u64;
    let share = |k: u64, of: u64| (of > 0).then(|| k as f64 / of as f64);
    BacktestSummary {
        jobs,
        scored,
        mae_ratio: median_f(&mut rel),
        baseline_mae_ratio: median_f(&mut base_rel),
        coverage_80: share(covered, scored),
        coverage_80_all: share(covered_all, jobs),
        median_wait_s: {
            waits.sort_unstable();
            waits.get(waits.len().saturating_sub(1) / 2).copied()
        },
        early,
        late,
        never_started: never,
        sampled_every: every,
        min_wait_s: opts.min_wait,
        draws: opts.forecast.draws,
        beyond_horizon: beyond,
        forecast_wall_s: wall.as_secs_f64(),
    }
}

/// The median (the mean of the two middle values of an even count);
/// `None` for none.
fn median_f(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        Some(v[m])
    } else {
        Some((v[m - 1] + v[m]) / 2.0)
    }
}
