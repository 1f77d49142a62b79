//! The sidecar's start forecasts of pending jobs, made off the request
//! path: a request asks for a job's forecast and waits at most
//! [`WAIT`]; one worker thread replays one job at a time (each replay
//! uses every core), from the latest snapshot's jobs and the inputs
//! (sacct's history, sinfo's nodes), which that thread takes when a
//! forecast needs them and they are [`INPUTS_TTL`] old: a sidecar nobody
//! asks for a forecast never reads them. A forecast serves for [`TTL`]; at
//! most [`QUEUE`] jobs wait for one, so requests cannot pile replays up.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

use allot_sim::forecast::live::LiveForecast;
use allot_sim::forecast::ForecastOptions;
use allot_sim::SimSettings;
use fairshare::Config;

use super::snapshot::Snapshot;
use crate::forecast::{self, Inputs};

/// Seconds the inputs serve before a forecast takes them again: the history a
/// forecast draws run times and arrivals from spans days, so minutes of
/// staleness move it little, while reading a week of sacct every pass
/// would load slurmdbd.
pub const INPUTS_TTL: i64 = 300;

/// Seconds sinfo's nodes serve: a node drained or resumed changes a
/// forecast at once, and sinfo is one cheap call to slurmctld.
pub const NODES_TTL: i64 = 30;

/// Seconds a forecast serves (against the snapshots' clock).
pub const TTL: i64 = 60;

/// How long a request waits for a forecast before it answers without one
/// ("being computed").
pub const WAIT: Duration = Duration::from_secs(3);

/// Jobs waiting for a forecast at most.
pub const QUEUE: usize = 64;

/// What a request gets.
#[derive(Debug, Clone)]
pub enum Answer {
    /// The forecast.
    Made(LiveForecast),
    /// It cannot be made (the message says why).
    Failed(String),
    /// Not ready within [`WAIT`]: ask again.
    Pending(String),
}

#[derive(Default)]
struct State {
    /// By job id: the snapshot time (epoch s) it was made from, the job's
    /// attempt then (its requeues), and it.
    made: BTreeMap<u64, (i64, u64, Result<LiveForecast, String>)>,
    queue: VecDeque<u64>,
}

/// The forecaster of one site.
pub struct Forecasts {
    sim: SimSettings,
    opts: ForecastOptions,
    inputs: RwLock<Option<Arc<Inputs>>>,
    state: Mutex<State>,
    changed: Condvar,
}

impl Forecasts {
    /// A forecaster replaying with the `[sim]` settings `sim` (the timing
    /// preset), without inputs yet.
    pub fn new(sim: SimSettings) -> Forecasts {
        Forecasts {
            opts: ForecastOptions {
                seed: sim.seed,
                ..ForecastOptions::default()
            },
            sim,
            inputs: RwLock::new(None),
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        }
    }

    /// Installs `inputs` (a forecast takes them itself when they are
    /// stale; a test gives its own).
    pub fn install(&self, inputs: Inputs) {
        *self.inputs.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(inputs));
    }

    /// The forecast of pending job `id`, requeued `attempt` times, as of
    /// snapshot time `at` (epoch s): one made within [`TTL`] before it for
    /// the same attempt, or a new one, waited for at most [`WAIT`].
    pub fn ask(&self, id: u64, attempt: u64, at: i64) -> Answer {
        let deadline = Instant::now() + WAIT;
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some((made, of, r)) = s.made.get(&id) {
                if at.saturating_sub(*made) < TTL && *of == attempt {
                    return match r {
                        Ok(f) => Answer::Made(f.clone()),
                        Err(e) => Answer::Failed(e.clone()),
                    };
                }
            }
            if !s.queue.contains(&id) {
                if s.queue.len() >= QUEUE {
                    return Answer::Pending(format!(
                        "the sidecar is busy with {QUEUE} other forecasts; ask again in a minute"
                    ));
                }
                s.queue.push_back(id);
                self.changed.notify_all();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Answer::Pending(
                    "being computed; ask again (reload) in a few seconds".into(),
                );
            }
            s = self
                .changed
                .wait_timeout(s, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// The worker: makes the queued forecasts one at a time from the
    /// site's latest snapshot, which `current` gives (`None` once the site
    /// is gone, when the worker ends).
    pub fn work(&self, current: impl Fn() -> Option<Option<Arc<Snapshot>>>) {
        loop {
            let id = {
                let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
                loop {
                    if let Some(id) = s.queue.front().copied() {
                        break id;
                    }
                    s = self
                        .changed
                        .wait_timeout(s, Duration::from_secs(1))
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                    if s.queue.is_empty() && current().is_none() {
                        return;
                    }
                }
            };
            let (at, attempt, r) = match current() {
                None => return,
                Some(None) => (i64::MIN, 0, Err("no snapshot yet".to_string())),
                Some(Some(snap)) => (
                    snap.at,
                    snap.jobs.get(&id).map_or(0, |j| j.restarts),
                    self.make(&snap, id),
                ),
            };
            let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
            s.queue.retain(|q| *q != id);
            s.made
                .retain(|_, (made, _, _)| at.saturating_sub(*made) < TTL);
            s.made.insert(id, (at, attempt, r));
            self.changed.notify_all();
        }
    }

    fn make(&self, snap: &Snapshot, id: u64) -> Result<LiveForecast, String> {
        let inputs = self.inputs_at(&snap.config, snap.at)?;
        forecast::forecast_job(
            &snap.config,
            &self.sim,
            &snap.jobs,
            &inputs,
            id,
            snap.at,
            &self.opts,
        )
        .map_err(|e| e.to_string())
    }

    /// The inputs for a forecast at `at` (epoch s): the ones held; their
    /// history with sinfo's nodes taken again when the nodes are
    /// [`NODES_TTL`] old; or new ones when the history is [`INPUTS_TTL`]
    /// old or missing. If sacct or sinfo fails, the held ones serve, with
    /// a warning.
    fn inputs_at(&self, config: &Config, at: i64) -> Result<Arc<Inputs>, String> {
        let held = self
            .inputs
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let fresh = held
            .as_ref()
            .filter(|i| at.saturating_sub(i.at) < INPUTS_TTL);
        let taken = match fresh {
            Some(i) if at.saturating_sub(i.nodes_at) < NODES_TTL => return Ok(i.clone()),
            // The history serves on; the nodes are taken again.
            Some(i) => crate::slurm::sinfo::cluster_now().map(|(cluster, draining)| Inputs {
                nodes_at: at,
                cluster,
                draining,
                ..(**i).clone()
            }),
            None => Inputs::take(config, &self.opts, at),
        };
        match taken {
            Ok(i) => {
                let i = Arc::new(i);
                *self.inputs.write().unwrap_or_else(|p| p.into_inner()) = Some(i.clone());
                Ok(i)
            }
            Err(e) => {
                tracing::warn!("site: forecasts keep their last inputs: {e:#}");
                held.ok_or_else(|| format!("cannot read sacct's history or sinfo's nodes: {e:#}"))
            }
        }
    }
}
