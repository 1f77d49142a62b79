//! `allot forecast`: a pending job's start from slurmctld's present, as
//! [`allot_sim::forecast::live`] draws it. This module gathers the present
//! (squeue's jobs, sacct's history of the usage window, sinfo's nodes in
//! service) and writes the answer; the method and what it assumes are in
//! `docs/forecast.md`.

use std::collections::BTreeMap;
use std::sync::Arc;

use allot_ledger::charge::Charging;
use allot_ledger::sacct::Attempt;
use allot_sim::forecast::live::{
    forecast_live, JobNow, LiveError, LiveForecast, Present, PresentJob,
};
use allot_sim::forecast::ForecastOptions;
use allot_sim::{ClusterSpec, SimSettings};
use fairshare::Config;

use crate::slurm::sacct::attempts_since;
use crate::slurm::sinfo::cluster_now;
use crate::slurm::squeue::LiveJob;
use crate::when::when;

/// What a forecast reads besides slurmctld's jobs: sacct's attempts of
/// the history and usage window and sinfo's nodes in service, as they
/// were at `at` (epoch s).
#[derive(Debug, Clone)]
pub struct Inputs {
    /// When they were taken (epoch s).
    pub at: i64,
    /// When the nodes (`cluster`, `draining`) were taken (epoch s).
    pub nodes_at: i64,
    /// sacct's attempts since `at - max(history, window)` (shared: a
    /// sidecar takes the nodes again more often than the history).
    pub history: Arc<Vec<Attempt>>,
    /// The nodes in service.
    pub cluster: ClusterSpec,
    /// How many of them are draining (they hold jobs and start none).
    pub draining: u32,
}

impl Inputs {
    /// Seconds of sacct's history the inputs cover: `opts.history` (the
    /// run times and arrivals drawn) or `config.window` (the usage the
    /// engine ranks by), whichever is longer.
    pub fn history_span(config: &Config, opts: &ForecastOptions) -> u64 {
        opts.history.max(config.window)
    }

    /// Takes them at `now` (epoch s): sacct's attempts of the last
    /// [`Inputs::history_span`] seconds and sinfo's nodes in service.
    ///
    /// # Errors
    /// sacct or sinfo missing or failing; no node with GPUs in service.
    pub fn take(config: &Config, opts: &ForecastOptions, now: i64) -> anyhow::Result<Inputs> {
        let since = now - Inputs::history_span(config, opts) as i64;
        let (cluster, draining) = cluster_now()?;
        Ok(Inputs {
            at: now,
            nodes_at: now,
            history: Arc::new(attempts_since(since)?),
            cluster,
            draining,
        })
    }
}

/// The start forecast of pending job `job` among slurmctld's `jobs` at
/// `now` (epoch s), from `inputs`, with the engine's `config` and the
/// `[sim]` settings `sim` (the timing preset): what `allot forecast`,
/// `allot explain` of a pending job and the sidecar's job page show.
///
/// # Errors
/// [`LiveError`]: the job unknown or not pending, or not replayable.
pub fn forecast_job(
    config: &Arc<Config>,
    sim: &SimSettings,
    jobs: &BTreeMap<u64, LiveJob>,
    inputs: &Inputs,
    job: u64,
    now: i64,
    opts: &ForecastOptions,
) -> Result<LiveForecast, LiveError> {
    let live = jobs.get(&job);
    if let Some(j) = live {
        if j.state != "PENDING" {
            return Err(LiveError::State(format!(
                "job {job} is not pending ({}): only a pending job has a start forecast",
                j.state
            )));
        }
        if let Some(why) = j.waits_for_other_than_turn() {
            return Err(LiveError::State(format!(
                "job {job} has no start forecast: {why}"
            )));
        }
    }
    let mut present = present(config, jobs, &inputs.history, now);
    present.draining = inputs.draining;
    let mut f = forecast_live(&present, job, config.clone(), sim, inputs.cluster, opts)?;
    // Not before its begin time (a --begin, or a requeue's few seconds).
    if let Some(begin) = live.and_then(|j| j.begins(now)) {
        for t in [&mut f.p10, &mut f.p50, &mut f.p90, &mut f.baseline] {
            *t = (*t).max(begin.min(f.horizon_end));
        }
    }
    Ok(f)
}

/// The forecast's times relative to `now` (epoch s), in one line:
/// `p10 / p50 / p90: in 5:00 / in 12:00 / in 40:00 (squeue --start's
/// kind of plan: in 3:00)`; a time already past (the forecast was made
/// a little earlier, at the sidecar's last pass) reads `now`, and one at
/// the horizon's end "not within N days".
pub fn times(f: &LiveForecast, now: i64) -> String {
    let t = |x: i64| {
        if x >= f.horizon_end {
            not_within(f)
        } else if x <= now {
            "now".to_string()
        } else {
            when(x, now)
        }
    };
    format!(
        "{} / {} / {} (p10 / p50 / p90; squeue --start's kind of plan: {})",
        t(f.p10),
        t(f.p50),
        t(f.p90),
        t(f.baseline)
    )
}

/// Tasks of one job array's pending record a replay takes at most.
const MAX_TASKS: u64 = (1 << 20) - 1;

/// The present: slurmctld's running and pending jobs (`jobs`, from
/// [`crate::slurm::squeue::jobs_now`]) and sacct's attempts (`history`) of the
/// last `window` seconds before `now` (epoch s): the ended ones are the
/// history run times and arrivals are drawn from, and their charges fill
/// the usage window. Pending jobs that are held or wait for a dependency
/// are left out ([`LiveJob::waits_for_other_than_turn`]); a job array's
/// record of pending tasks is one job per task.
pub fn present(
    config: &Config,
    jobs: &BTreeMap<u64, LiveJob>,
    history: &[Attempt],
    now: i64,
) -> Present {
    let mut out = Present {
        now,
        ..Present::default()
    };
    let charging = Charging::from_config(config);
    for (&id, j) in jobs {
        let now_state = match j.state.as_str() {
            "RUNNING" | "SUSPENDED" | "COMPLETING" if j.start > 0 => JobNow::Running {
                start: j.start as i64,
                restarts: j.restarts as u32,
            },
            "PENDING" => JobNow::Pending {
                restarts: j.restarts as u32,
            },
            _ => continue,
        };
        if j.gpus == 0 {
            continue;
        }
        let pending = matches!(now_state, JobNow::Pending { .. });
        // Held or dependent: slurmctld does not start it as GPUs free
        // up, so it takes no place in the replay.
        if pending && j.waits_for_other_than_turn().is_some() {
            continue;
        }
        // A job array's record of tasks not started yet stands for each of
        // them: the record's id is the first, the others get ids of their
        // own (the high bit set).
        let tasks = if pending { j.tasks().min(MAX_TASKS) } else { 1 };
        for k in 0..tasks {
            out.jobs.push(PresentJob {
                id: if k == 0 {
                    id
                } else {
                    (1 << 63) | (id << 20) | k
                },
                account: j.account.clone(),
                gpus: u32::try_from(j.gpus).unwrap_or(u32::MAX),
                submit: j.submit as i64,
                time_limit: j.time_limit,
                min_runtime: j.min_runtime(&config.contract),
                now: now_state,
            });
        }
    }
    for a in history {
        let (Some(start), Some(end)) = (a.start, a.end) else {
            continue;
        };
        // The attempt slurmctld holds as running or pending is its own
        // entry above; a job that ended within MinJobAge is still in
        // squeue (COMPLETED, ...) and its attempts are history.
        let current = jobs.get(&a.job_id).is_some_and(|j| {
            j.submit as i64 == a.submit
                && matches!(
                    j.state.as_str(),
                    "RUNNING" | "SUSPENDED" | "COMPLETING" | "PENDING"
                )
        });
        if current || a.gpus == 0 || end <= start {
            continue;
        }
        let r = charging.record(a);
        if let Some(charge_end) = r.charge_end {
            out.charges
                .push((a.account.clone(), r.rate, start, charge_end));
        }
        out.jobs.push(PresentJob {
            // An earlier attempt of a job requeued since: its own entry.
            id: a.job_id ^ ((a.submit as u64) << 40),
            account: a.account.clone(),
            gpus: u32::try_from(a.gpus).unwrap_or(u32::MAX),
            submit: a.submit,
            time_limit: a.time_limit,
            min_runtime: r.min_runtime,
            now: JobNow::Ended { start, end },
        });
    }
    out
}

/// "not within 14 days": a percentile at the horizon's end, where the
/// forks that had not started the job by then count.
fn not_within(f: &LiveForecast) -> String {
    let secs = (f.horizon_end - f.at).max(0);
    if secs % 86_400 == 0 {
        format!("not within {} days", secs / 86_400)
    } else {
        format!(
            "not within {}",
            when(f.horizon_end, f.at).trim_start_matches("in ")
        )
    }
}

/// `n` and the noun, plural unless `n` is 1: `1 node`, `4 nodes`.
fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// The forecast as text, relative to `now` (epoch s), with what it assumes.
pub fn render(f: &LiveForecast, cluster: ClusterSpec, history_days: u64) -> String {
    let t = |x: i64| {
        if x >= f.horizon_end {
            not_within(f)
        } else {
            when(x, f.at)
        }
    };
    format!(
        "job {}: forecast start (p10 / p50 / p90): {} / {} / {}\n\
         squeue --start's kind of plan (every job runs to its time limit, nothing new arrives): {}\n\
         assumes: {} of allot's policy from slurmctld's {} running and {} pending jobs on \
         {} x {} GPUs in service{} (running jobs placed where the simulator would place them); \
         run times drawn from {} that ended in the last {} days (run time / time limit, by \
         account and time limit){}; arrivals repeating recent days{}{}\n",
        f.job,
        t(f.p10),
        t(f.p50),
        t(f.p90),
        t(f.baseline),
        count(u64::from(f.draws), "replay"),
        f.running,
        f.pending,
        count(u64::from(cluster.nodes), "node"),
        cluster.gpus_per_node,
        if f.draining > 0 {
            format!(
                ", {} of them draining (no job starts there again; its jobs leave at their \
                 requeue points)",
                f.draining
            )
        } else {
            String::new()
        },
        count(f.history_jobs, "job"),
        history_days,
        if f.history_jobs < allot_sim::forecast::MIN_HISTORY as u64 {
            format!(
                " (fewer than {}: too few run times to draw from, so p10-p90 is narrower than \
                 the real spread; with none, every job runs to its time limit)",
                allot_sim::forecast::MIN_HISTORY
            )
        } else {
            String::new()
        },
        if f.beyond_horizon > 0 {
            format!(
                "; {} of {} replays had not started it within the horizon",
                f.beyond_horizon, f.draws
            )
        } else {
            String::new()
        },
        if f.outlived_history > 0 {
            format!(
                "; {} had run longer than any like job of the history, and each runs to its time \
                 limit in every replay: where that decides the start, p10-p90 is narrower than \
                 the real spread",
                if f.outlived_history == 1 {
                    "1 running job".to_string()
                } else {
                    format!("{} running jobs", f.outlived_history)
                }
            )
        } else {
            String::new()
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use allot_ledger::sacct::{Parser, RowOutcome};

    fn attempt(line: &str) -> Attempt {
        match Parser::live(jiff::tz::TimeZone::UTC).parse(line) {
            Ok(RowOutcome::Attempt(a)) => *a,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn a_job_that_ended_within_min_job_age_is_history() {
        let config: Config =
            Config::from_toml_str(include_str!("../../examples/allot.toml")).unwrap();
        // Job 5 ended and squeue still lists it (COMPLETED, MinJobAge);
        // job 6 was requeued: its first attempt ended, its second pends.
        let history = [
            "5|5|a1|alice|gpu|gres/gpu=2|100|110|130|00:00:20|COMPLETED|1|",
            "6|6|a1|alice|gpu|gres/gpu=2|100|110|140|00:00:30|REQUEUED|1|",
            "6|6|a1|alice|gpu|gres/gpu=2|141|Unknown|Unknown|00:00:00|PENDING|1|",
        ]
        .map(attempt);
        let live = |state: &str, submit: u64| LiveJob {
            state: state.into(),
            account: "a1".into(),
            submit,
            gpus: 2,
            time_limit: Some(60),
            ..LiveJob::default()
        };
        let jobs = BTreeMap::from([(5, live("COMPLETED", 100)), (6, live("PENDING", 141))]);
        let p = present(&config, &jobs, &history, 200);
        let ended: Vec<(i64, i64)> = p
            .jobs
            .iter()
            .filter_map(|j| match j.now {
                JobNow::Ended { start, end } => Some((start, end)),
                _ => None,
            })
            .collect();
        assert_eq!(ended, [(110, 130), (110, 140)], "{:?}", p.jobs);
        assert_eq!(
            p.jobs
                .iter()
                .filter(|j| matches!(j.now, JobNow::Pending { .. }))
                .count(),
            1
        );
    }

    #[test]
    fn held_dependent_and_later_jobs_are_left_out_and_array_records_are_their_tasks() {
        let config: Config =
            Config::from_toml_str(include_str!("../../examples/allot.toml")).unwrap();
        let live = |reason: &str, pending: &str| LiveJob {
            state: "PENDING".into(),
            account: "a1".into(),
            submit: 100,
            eligible: if reason == "BeginTime" { 5_000 } else { 100 },
            gpus: 2,
            time_limit: Some(60),
            reason: reason.into(),
            array_pending: pending.into(),
            ..LiveJob::default()
        };
        let jobs = BTreeMap::from([
            (1, live("Priority", "")),
            (2, live("JobHeldUser", "")),
            (3, live("Dependency", "")),
            (4, live("BeginTime", "")),
            (5, live("Resources", "0-5")),
        ]);
        let p = present(&config, &jobs, &[], 200);
        let ids: Vec<u64> = p.jobs.iter().map(|j| j.id).collect();
        assert_eq!(ids.len(), 2 + 6, "{ids:?}");
        assert_eq!(&ids[..3], &[1, 4, 5]);
        assert!(ids[3..].iter().all(|&i| i >> 63 == 1), "{ids:?}");
        // Their own forecast says why there is none.
        let inputs = Inputs {
            at: 200,
            nodes_at: 200,
            history: Default::default(),
            cluster: ClusterSpec {
                nodes: 1,
                gpus_per_node: 8,
            },
            draining: 0,
        };
        let sim = SimSettings::default();
        let config = Arc::new(config);
        let opts = ForecastOptions {
            draws: 2,
            ..ForecastOptions::default()
        };
        for (job, why) in [(2, "held"), (3, "dependency")] {
            let e = forecast_job(&config, &sim, &jobs, &inputs, job, 200, &opts)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("has no start forecast") && e.contains(why),
                "{e}"
            );
        }
        // A job that may not begin before 5,000 (a --begin, or the few
        // seconds slurmctld waits before a requeued job) starts no sooner.
        let f = forecast_job(&config, &sim, &jobs, &inputs, 4, 200, &opts).unwrap();
        assert!(f.p10 >= 5_000 && f.baseline >= 5_000, "{f:?}");
        let mut done = jobs.clone();
        done.get_mut(&1).unwrap().state = "COMPLETED".into();
        let e = forecast_job(&config, &sim, &done, &inputs, 1, 200, &opts)
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not pending (COMPLETED)"), "{e}");
    }

    #[test]
    fn a_start_beyond_the_horizon_reads_not_within() {
        let f = LiveForecast {
            job: 9,
            at: 1000,
            p10: 1100,
            p50: 1000 + 14 * 86_400,
            p90: 1000 + 14 * 86_400,
            baseline: 1000 + 14 * 86_400,
            horizon_end: 1000 + 14 * 86_400,
            draws: 1,
            beyond_horizon: 1,
            history_jobs: 3,
            running: 1,
            pending: 1,
            draining: 1,
            outlived_history: 1,
        };
        let line = times(&f, 1000);
        assert!(
            line.starts_with("in 00:01:40 / not within 14 days / not within 14 days"),
            "{line}"
        );
        let text = render(
            &f,
            ClusterSpec {
                nodes: 1,
                gpus_per_node: 8,
            },
            7,
        );
        assert!(text.contains("not within 14 days"), "{text}");
        assert!(
            text.contains("1 running job had run longer than any like job"),
            "{text}"
        );
        assert!(text.contains("1 replay of allot's policy"), "{text}");
        assert!(
            text.contains("on 1 node x 8 GPUs in service, 1 of them draining"),
            "{text}"
        );
        assert!(
            text.contains("3 jobs that ended") && text.contains("fewer than 8"),
            "{text}"
        );
    }
}
