//! When will a pending job start: the policy's own replay, forked at the
//! present instant and run forward with what is not known drawn from what
//! is.
//!
//! **The rule.** A forecast for a pending job forks the replay at the
//! present `draws` times (the engine, the usage window, the queue in the
//! policy's order, the running jobs with their contracts, elapsed times and
//! requeue points, the nodes out of service: everything as it is). In each
//! fork:
//! - every job not yet ended gets a run time drawn from its account's
//!   history ([`History`]): the ratio run time / time limit of the
//!   account's jobs that ended within the last `history` seconds (every
//!   account's when it has fewer than [`MIN_HISTORY`]), times the job's own
//!   time limit, drawn among the values longer than what the job has
//!   already run (its time limit when none is);
//! - the jobs that will arrive are the recent ones again: each day ahead
//!   repeats one of the last `history / 1 day` days, drawn per day and
//!   fork, its jobs shifted by whole days (the daily cycle and each team's
//!   and band's rates are kept), with run times drawn as above;
//! - the replay goes on until the job starts, or `horizon` has passed.
//!
//! The forecast is the 10th, 50th and 90th percentile of the forks'
//! starts (`quantile`). Nothing reads a job's true run time: the
//! replay's past (the work a job kept, how long it has run) and the time
//! limits are all a fork is given.
//!
//! **The baseline** is what `squeue --start` shows: slurmctld's backfill
//! plan, in which each running job ends at its time limit and nothing else
//! arrives. Here it is one more fork, with every job's run time its time
//! limit and no arrivals (so it sorts and preempts as the policy does,
//! which flatters it).
//!
//! [`backtest`] replays a trace and, at the submission of a sample of its
//! jobs, compares each forecast with the start the replay went on to give
//! the job.

use std::collections::HashMap;

use serde::Serialize;

use crate::run::Sim;
use crate::workload::{SimJob, Workload};

mod backtest;
pub mod limits;
pub mod live;

pub use backtest::{backtest, BacktestOptions, BacktestSummary};

/// Fewer ended jobs than this in an account's history: draw from every
/// account's.
pub const MIN_HISTORY: usize = 8;

/// Ended jobs of its batch a job's run time is drawn from, at least.
pub const MIN_BATCH: usize = 8;

const DAY: u64 = 86_400;
/// A batch's jobs are submitted within the same hour (or the next).
const BATCH: u64 = 3_600;

/// How a forecast is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ForecastOptions {
    /// Forks (draws) per forecast (default 16).
    pub draws: u32,
    /// Seconds of history run times and arrivals are drawn from (default
    /// 7 days; whole days count for arrivals).
    pub history: u64,
    /// Seconds a fork replays at most (default 14 days): a job not started
    /// by then counts as starting then.
    pub horizon: u64,
    /// Seed of the draws.
    pub seed: u64,
}

impl Default for ForecastOptions {
    fn default() -> Self {
        ForecastOptions {
            draws: 16,
            history: 7 * DAY,
            horizon: 14 * DAY,
            seed: 0,
        }
    }
}

/// A start forecast. Times are seconds since the trace's first
/// submission (the replay's clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct StartForecast {
    /// When it was made.
    pub at: u64,
    /// 10th, 50th and 90th percentile of the forks' starts.
    pub p10: u64,
    pub p50: u64,
    pub p90: u64,
    /// The baseline's start (time limits, no arrivals).
    pub baseline: u64,
    /// Forks that reached `horizon` without starting it.
    pub beyond_horizon: u32,
}

/// Run time / time limit of recently ended jobs, each list sorted: per
/// account and time limit, per account, and each of those per day of the
/// history (day 0 the last); and every job's.
pub(crate) struct History {
    days: usize,
    /// Key: (account, time limit, day), `u32::MAX` for "any" account,
    /// `u64::MAX` for "any" limit and `usize::MAX` for "any" day.
    pools: HashMap<(u32, u64, usize), Vec<f64>>,
    /// Batches: (account, time limit, GPUs, hour of submission).
    batches: HashMap<(u32, u64, u32, u64), Dist>,
    all: Vec<f64>,
}

/// A batch's run times as a distribution (Kaplan and Meier's estimator,
/// JASA 53, 1958): its ended jobs are observations, its running ones
/// observations cut short (each ran at least this long). The first of a
/// batch to end are its shortest: counted alone they would say its jobs
/// are shorter than they are.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Dist {
    /// Ratios run time / time limit at which jobs ended, ascending.
    values: Vec<f64>,
    /// The share of the batch ended by each (non-decreasing; below 1 when
    /// running jobs outlast every ended one).
    cdf: Vec<f64>,
}

impl Dist {
    /// From the ratios of the ended jobs and (lower bounds) of the running.
    pub(crate) fn kaplan_meier(ended: &[f64], running: &[f64]) -> Dist {
        let mut obs: Vec<(f64, bool)> = ended
            .iter()
            .map(|&v| (v, true))
            .chain(running.iter().map(|&v| (v, false)))
            .collect();
        // At a tie an end counts before a job still running.
        obs.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)));
        let (mut values, mut cdf) = (Vec::new(), Vec::new());
        let (mut at_risk, mut survive, mut i) = (obs.len(), 1.0f64, 0);
        while i < obs.len() {
            let v = obs[i].0;
            let same = obs[i..].iter().take_while(|o| o.0 == v).count();
            let ended = obs[i..i + same].iter().filter(|o| o.1).count();
            if ended > 0 {
                survive *= 1.0 - ended as f64 / at_risk as f64;
                values.push(v);
                cdf.push(1.0 - survive);
            }
            at_risk -= same;
            i += same;
        }
        Dist { values, cdf }
    }

    /// A ratio above `above`, drawn with `u` in [0, 1) from what lies
    /// above it; `None` when the draw falls beyond every ended job (the
    /// share still running past them).
    fn sample(&self, above: f64, u: f64) -> Option<f64> {
        let k = self.values.partition_point(|&v| v <= above);
        let f0 = if k == 0 { 0.0 } else { self.cdf[k - 1] };
        let target = f0 + u * (1.0 - f0);
        (k..self.values.len())
            .find(|&i| self.cdf[i] >= target)
            .map(|i| self.values[i])
    }
}

impl History {
    /// From the jobs of `sim` that ended within `window` seconds before now.
    pub(crate) fn of(sim: &Sim<'_>, window: u64) -> History {
        let w = sim.workload();
        let now = sim.now();
        let days = window.div_ceil(DAY).max(1) as usize;
        let mut pools: HashMap<(u32, u64, usize), Vec<f64>> = HashMap::new();
        type Batch = (Vec<f64>, Vec<f64>);
        let mut batches: HashMap<(u32, u64, u32, u64), Batch> = HashMap::new();
        let mut all = Vec::new();
        for id in 0..sim.arrived() as u32 {
            let Some(end) = sim.ended_at(id) else {
                let p = sim.progress(id);
                if p.running {
                    let j = &w.jobs[id as usize];
                    let limit = j.limit().max(1);
                    batches
                        .entry((j.account, limit, j.gpus(), j.submit / BATCH))
                        .or_default()
                        .1
                        .push((p.kept + p.elapsed) as f64 / limit as f64);
                }
                continue;
            };
            if end + window < now {
                continue;
            }
            let j = &w.jobs[id as usize];
            let limit = j.limit().max(1);
            let r = j.duration as f64 / limit as f64;
            let day = (((now - end) / DAY) as usize).min(days - 1);
            for key in [
                (j.account, limit, day),
                (j.account, limit, usize::MAX),
                (u32::MAX, limit, usize::MAX),
                (j.account, u64::MAX, day),
                (j.account, u64::MAX, usize::MAX),
            ] {
                pools.entry(key).or_default().push(r);
            }
            batches
                .entry((j.account, limit, j.gpus(), j.submit / BATCH))
                .or_default()
                .0
                .push(r);
            all.push(r);
        }
        for v in pools.values_mut().chain(std::iter::once(&mut all)) {
            v.sort_by(f64::total_cmp);
        }
        History {
            days,
            pools,
            batches: batches
                .into_iter()
                .filter(|(_, (ended, _))| ended.len() >= MIN_BATCH)
                .map(|(k, (ended, running))| (k, Dist::kaplan_meier(&ended, &running)))
                .collect(),
            all,
        }
    }

    /// `job`'s batch (its account, time limit and GPUs, submitted within
    /// the same hour or the one before), when at least [`MIN_BATCH`] of it
    /// have ended: a job runs most like its own array's or sweep's.
    fn batch(&self, job: &SimJob, limit: u64) -> Option<&Dist> {
        let hour = job.submit / BATCH;
        [hour, hour.wrapping_sub(1)]
            .iter()
            .find_map(|&h| self.batches.get(&(job.account, limit, job.gpus(), h)))
    }

    /// The ratios a job without a batch ([`History::batch`]) draws from in
    /// a fork that drew `day` for its account: the first with at least
    /// [`MIN_HISTORY`] of those of its account and limit that day, of its
    /// account and limit, of every account's jobs with its limit, of its
    /// account that day, of its account, and every job's. A job is most
    /// like its own account's jobs of the same limit (one script,
    /// resubmitted), and those of one day run alike (one experiment), so a
    /// fork's run times of one account move together, as real ones do.
    fn pool(&self, account: u32, limit: u64, day: usize) -> &[f64] {
        [
            (account, limit, day),
            (account, limit, usize::MAX),
            (u32::MAX, limit, usize::MAX),
            (account, u64::MAX, day),
            (account, u64::MAX, usize::MAX),
        ]
        .iter()
        .filter_map(|k| self.pools.get(k))
        .find(|v| v.len() >= MIN_HISTORY)
        .map_or(&self.all, |v| v)
    }
}

/// The pools of one fork: per account, the day of history it draws from.
struct ForkPools<'h> {
    history: &'h History,
    day_draw: Vec<usize>,
    seed: u64,
    /// Jobs drawn with some run already (running ones) that had run longer
    /// than every value they could be drawn from: they get their time
    /// limit ([`ForkPools::draw`]).
    outlived: std::cell::Cell<u32>,
}

impl<'h> ForkPools<'h> {
    fn new(history: &'h History, accounts: usize, seed: &[u64]) -> ForkPools<'h> {
        let mut rng = Draws::new(seed);
        ForkPools {
            seed: rng.0,
            outlived: std::cell::Cell::new(0),
            history,
            day_draw: (0..accounts)
                .map(|_| rng.below(history.days as u64) as usize)
                .collect(),
        }
    }

    /// A run time for `job` (seconds of work in all), longer than `done`:
    /// its account's ratio times its time limit, among the ratios that give
    /// more than `done` (the time limit when none does). The jobs of one
    /// batch (one account, one time limit, submitted within the same hour:
    /// an array, a sweep, a script resubmitted) take the same place in
    /// their pool: in real traces they run alike, and drawn apart their
    /// errors would cancel out, making the forecast surer than it is.
    fn draw(&self, job: &SimJob, done: u64) -> u64 {
        let limit = job.limit().max(1);
        let u = Draws::new(&[self.seed, u64::from(job.account), limit, job.submit / BATCH]).unit();
        let r = match self.history.batch(job, limit) {
            Some(batch) => batch.sample(done as f64 / limit as f64, u),
            None => {
                let pool =
                    self.history
                        .pool(job.account, limit, self.day_draw[job.account as usize]);
                let from = pool.partition_point(|&r| (r * limit as f64) as u64 <= done);
                (from < pool.len()).then(|| {
                    pool[from
                        + ((u * (pool.len() - from) as f64) as usize).min(pool.len() - from - 1)]
                })
            }
        };
        match r {
            Some(r) => ((r * limit as f64).ceil() as u64).max(done + 1),
            None => {
                if done > 0 {
                    self.outlived.set(self.outlived.get() + 1);
                }
                limit.max(done + 1)
            }
        }
    }
}

/// A small deterministic generator (SplitMix64 over [`crate::cluster::mix`]).
struct Draws(u64);

impl Draws {
    fn new(parts: &[u64]) -> Draws {
        Draws(
            parts
                .iter()
                .fold(0x5eed, |h, &p| crate::cluster::mix(h ^ p)),
        )
    }

    fn unit(&mut self) -> f64 {
        self.0 = crate::cluster::mix(self.0);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }

    fn below(&mut self, n: u64) -> u64 {
        ((self.unit() * n as f64) as u64).min(n.saturating_sub(1))
    }
}

/// A workload buffer for forks of one replay: the replay's jobs submitted
/// so far (`prefix` of them, copied once) and one draw's arrivals after them.
pub(crate) struct ForkBuffer {
    w: Workload,
    prefix: usize,
}

impl ForkBuffer {
    /// An empty buffer for forks of replays of `w`.
    pub(crate) fn new(w: &Workload) -> ForkBuffer {
        ForkBuffer {
            w: Workload {
                jobs: Vec::with_capacity(w.jobs.len()),
                teams: w.teams.clone(),
                accounts: w.accounts.clone(),
                rules: Vec::new(),
                left_out: Vec::new(),
                trace_gpu_hours: 0.0,
                mapped: Vec::new(),
                cluster: w.cluster,
                largest_too_large: 0,
            },
            prefix: 0,
        }
    }
}

/// Fills `buf` with `base`'s jobs submitted so far (copying only those it
/// does not hold yet), and nothing after them.
fn copy_prefix(base: &Sim<'_>, buf: &mut ForkBuffer) {
    let arrived = base.arrived();
    let kept = buf.prefix.min(arrived);
    buf.w.jobs.truncate(kept);
    buf.w
        .jobs
        .extend_from_slice(&base.workload().jobs[kept..arrived]);
    buf.prefix = arrived;
}

/// Fills `buf` with `base`'s jobs submitted so far followed by the
/// arrivals of draw `draw` (`horizon` ahead), their run times drawn from
/// `pools`.
fn draw_workload(
    base: &Sim<'_>,
    buf: &mut ForkBuffer,
    pools: &ForkPools<'_>,
    opts: &ForecastOptions,
    draw: u32,
) {
    copy_prefix(base, buf);
    let (w, arrived) = (base.workload(), base.arrived());
    let now = base.now();
    let past_days = (opts.history / DAY).min(now / DAY);
    if past_days == 0 {
        return;
    }
    let days = opts.horizon.div_ceil(DAY);
    for d in 0..days {
        let mut rng = Draws::new(&[opts.seed, arrived as u64, u64::from(draw), d, 1]);
        let k = 1 + rng.below(past_days);
        // The source day (now - k days, now - (k - 1) days], shifted by
        // (k + d) days: (now + d days, now + (d + 1) days].
        let (lo, hi) = (now - k * DAY, now - (k - 1) * DAY);
        let first = w.jobs[..arrived].partition_point(|j| j.submit <= lo);
        let last = w.jobs[..arrived].partition_point(|j| j.submit <= hi);
        for j in &w.jobs[first..last] {
            let mut a = j.clone();
            a.submit = j.submit + (k + d) * DAY;
            a.duration = pools.draw(&a, 0);
            buf.w.jobs.push(a);
        }
    }
}

/// The start of `job` in a fork of `base` over `w` with run times from
/// `work`: seconds since the first submission, capped at now + horizon
/// (`None`: not started by then).
fn run_fork(
    base: &Sim<'_>,
    w: &Workload,
    job: u32,
    horizon: u64,
    mut work: impl FnMut(u32, crate::run::Progress) -> Option<u64>,
) -> Option<u64> {
    let mut fork = base.fork(w);
    // The jobs submitted so far; the draw's arrivals have theirs.
    fork.retime(|id, p| {
        if id as usize >= base.arrived() {
            None
        } else {
            work(id, p)
        }
    });
    let until = base.now() + horizon;
    loop {
        if let Some(s) = fork.first_start(job) {
            return Some(s);
        }
        if fork.now() > until || !fork.step() {
            return None;
        }
    }
}

/// Forecasts pending job `job` of `base` (see the module doc). `buf` is
/// kept between calls on the same replay.
pub(crate) fn forecast(
    base: &Sim<'_>,
    job: u32,
    opts: &ForecastOptions,
    buf: &mut ForkBuffer,
) -> StartForecast {
    let history = History::of(base, opts.history);
    let starts = draw_starts(base, &history, job, opts, buf, 0..opts.draws.max(1), &mut 0);
    let baseline = baseline_start(base, job, opts, buf);
    summarize_starts(base.now(), opts, starts, baseline)
}

/// The starts of `job` in the forks `draws` of `base`, with run times from
/// `history` (`None`: not by the horizon). `outlived` becomes at least the
/// number of jobs, in any of these forks, that had run longer than every
/// run time they could be drawn from (each then runs to its time limit).
pub(crate) fn draw_starts(
    base: &Sim<'_>,
    history: &History,
    job: u32,
    opts: &ForecastOptions,
    buf: &mut ForkBuffer,
    draws: impl Iterator<Item = u32>,
    outlived: &mut u32,
) -> Vec<Option<u64>> {
    let accounts = base.workload().accounts.len();
    draws
        .map(|draw| {
            let pools = ForkPools::new(
                history,
                accounts,
                &[opts.seed, u64::from(job), u64::from(draw), 3],
            );
            draw_workload(base, buf, &pools, opts, draw);
            let w = &buf.w;
            let start = run_fork(base, w, job, opts.horizon, |id, p| {
                Some(pools.draw(&w.jobs[id as usize], p.kept + p.elapsed))
            });
            *outlived = (*outlived).max(pools.outlived.get());
            start
        })
        .collect()
}

/// The baseline's start of `job`: every job runs to its time limit and
/// nothing arrives (the horizon's end when not by then).
pub(crate) fn baseline_start(
    base: &Sim<'_>,
    job: u32,
    opts: &ForecastOptions,
    buf: &mut ForkBuffer,
) -> u64 {
    copy_prefix(base, buf);
    let w = &buf.w;
    run_fork(base, w, job, opts.horizon, |id, p| {
        Some(p.kept + w.jobs[id as usize].limit().max(p.elapsed + 1))
    })
    .unwrap_or(base.now() + opts.horizon)
}

/// The forecast made at `now` from the forks' `starts` and the baseline's.
pub(crate) fn summarize_starts(
    now: u64,
    opts: &ForecastOptions,
    starts: Vec<Option<u64>>,
    baseline: u64,
) -> StartForecast {
    let cap = now + opts.horizon;
    let beyond = starts.iter().filter(|s| s.is_none()).count() as u32;
    let mut starts: Vec<u64> = starts.into_iter().map(|s| s.unwrap_or(cap)).collect();
    starts.sort_unstable();
    let q = |p: f64| quantile(&starts, p);
    StartForecast {
        at: now,
        p10: q(0.1),
        p50: q(0.5),
        p90: q(0.9),
        baseline,
        beyond_horizon: beyond,
    }
}

/// The `p` quantile of ascending `x` (not empty) as the draws estimate
/// it: rank p (n + 1), between two draws by linear interpolation, clamped
/// to the first and last (Hyndman and Fan's type 6). A new value from the
/// distribution the n draws come from falls below it with probability p,
/// so p10-p90 holds 80% even of few draws (nearest rank would hold
/// (n - 2) / (n + 1): 76% of 16).
fn quantile(x: &[u64], p: f64) -> u64 {
    let h = (p * (x.len() + 1) as f64).clamp(1.0, x.len() as f64);
    let lo = h.floor() as usize;
    let hi = lo.min(x.len() - 1);
    let (a, b) = (x[lo - 1] as f64, x[hi] as f64);
    (a + (h - lo as f64) * (b - a)).round() as u64
}

#[cfg(test)]
mod tests;
