//! The sidecar, `allot sync --follow`, as one type: a [`Sidecar`] holds the
//! ledger, the options and what serves the researchers and Prometheus
//! ([`Listener`]), and [`Sidecar::pass`] is the whole pass, in order:
//!
//! 1. **sync** (when due): sacct's attempts into the ledger, open attempts
//!    taking their contract from squeue ([`super::sync::sync_once`]);
//! 2. **metrics**: the pass counted, and after a good one the ledger's
//!    figures ([`super::metrics`]);
//! 3. **snapshot**: after a good sync, the site's new [`Snapshot`]
//!    (report, engine, squeue's jobs of step 1, who is who);
//! 4. **drain**: the jobs of draining nodes requeued as their contracts
//!    are served ([`super::drain_pass`]), its figures to the metrics.
//!
//! [`Sidecar::run`] repeats it: the sync on the clock every interval (a
//! failed one retried sooner, with backoff), the drain every pass and again
//! as soon as a protected job's contract on a draining node ends.
//!
//! [`Snapshot`]: crate::server::snapshot::Snapshot

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use allot_ledger::charge::Charging;
use allot_ledger::{Ledger, LedgerReader};
use allot_sim::SimSettings;
use anyhow::Context;
use fairshare::Config;

use super::drain_pass::DrainWatcher;
use super::metrics::{listen_addr, SidecarMetrics};
use super::sync::{sync_once, Backoff, ImportStats, LiveContracts, SyncOptions};
use crate::server::http;
use crate::server::site::Site;

/// Seconds since the epoch, now.
fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// The cluster's GPUs: `capacity_gpus` of allot.toml, else sinfo's.
fn capacity(config: &Config) -> anyhow::Result<u64> {
    match config.capacity_gpus {
        Some(c) => Ok(c),
        None => crate::slurm::sinfo::total_gpus()
            .context("capacity unknown: set capacity_gpus in allot.toml or pass --capacity"),
    }
}

/// `--listen`: the metrics, the site and the server that answers for both.
pub struct Listener {
    metrics: Arc<SidecarMetrics>,
    site: Arc<Site>,
    _server: http::Server,
}

impl Listener {
    /// Binds `addr` (a taken port is an error before anything else runs),
    /// serving the site over the ledger at `ledger`, forecasting with the
    /// `[sim]` settings `sim`.
    ///
    /// # Errors
    /// `addr` unreadable or taken.
    pub fn start(
        addr: &str,
        config: &Config,
        sim: &SimSettings,
        ledger: &Path,
    ) -> anyhow::Result<Listener> {
        let metrics = Arc::new(SidecarMetrics::new());
        let site = Site::new(
            ledger.to_path_buf(),
            config.munge_socket.clone(),
            Some(metrics.clone()),
            Some(sim.clone()),
        );
        let answer = site.clone();
        let server = http::serve(
            listen_addr(addr)?,
            http::Limits::default(),
            Arc::new(move |req: &http::Request| answer.answer(req)),
            "allot-http",
        )
        .map_err(|e| {
            anyhow::anyhow!(
                "--listen {addr}: cannot listen: {e}; is another program on that port? \
                 Pick another ADDR:PORT, e.g. 127.0.0.1:9817, or port 0 for a free one"
            )
        })?;
        let bound = server.local_addr();
        tracing::info!(
            "serving http://{bound}/ (budget page, jobs, API) and http://{bound}/metrics"
        );
        Ok(Listener {
            metrics,
            site,
            _server: server,
        })
    }
}

/// What one [`Sidecar::pass`] did.
#[derive(Debug, Default)]
pub struct Pass {
    /// The sync's result, when it was due.
    pub synced: Option<Result<ImportStats, String>>,
    /// When a protected job's contract on a draining node ends (epoch s):
    /// the drain looks again then.
    pub next_look: Option<i64>,
}

/// The sidecar: what `allot sync --follow` runs.
pub struct Sidecar {
    config: Arc<Config>,
    path: PathBuf,
    ledger: Ledger,
    charging: Charging,
    opts: SyncOptions,
    interval: u64,
    drain: Option<DrainWatcher>,
    listener: Option<Listener>,
}

impl Sidecar {
    /// A sidecar over `ledger` (opened at `path`) syncing with `opts`
    /// every `interval` seconds, draining unless `drain` is false, serving
    /// through `listener` where given.
    pub fn new(
        config: Config,
        path: &Path,
        ledger: Ledger,
        opts: SyncOptions,
        interval: u64,
        drain: bool,
        listener: Option<Listener>,
    ) -> Sidecar {
        let charging = Charging::from_config(&config);
        Sidecar {
            drain: drain.then(|| DrainWatcher::new(config.contract.clone())),
            config: Arc::new(config),
            path: path.to_path_buf(),
            ledger,
            charging,
            opts,
            interval,
            listener,
        }
    }

    /// One pass (the module doc's four steps), the sync only when `sync`
    /// is true (it is due). Failures are logged and reported, never
    /// returned: the sidecar goes on.
    pub fn pass(&mut self, sync: bool) -> Pass {
        let mut pass = Pass::default();
        if sync {
            let started = Instant::now();
            let mut live = LiveContracts::from_squeue();
            let result = sync_once(
                &mut self.ledger,
                &self.charging,
                &self.opts,
                now(),
                &mut live,
            );
            let ok = result.is_ok();
            if let Some(l) = &self.listener {
                self.metrics(l, ok, started.elapsed());
                if ok {
                    self.snapshot(l, live.into_jobs());
                }
            }
            pass.synced = Some(result.map_err(|e| format!("{e:#}")));
        }
        if let Some(w) = &mut self.drain {
            match w.pass(&self.ledger, now()) {
                Ok(r) => {
                    if let Some(l) = &self.listener {
                        l.metrics.record_drain_pass(&r);
                    }
                    pass.next_look = r.next_look;
                }
                Err(e) => tracing::error!(
                    "draining pass failed, retrying in {} s: {e:#}",
                    self.interval
                ),
            }
        }
        pass
    }

    /// Step 2: counts the sync and, when it succeeded, refreshes the
    /// ledger's metrics (a failure to read them is logged).
    fn metrics(&self, l: &Listener, ok: bool, took: Duration) {
        let t = now();
        let watermark = if ok {
            self.ledger.watermark().ok().flatten()
        } else {
            None
        };
        l.metrics.record_pass(ok, took, t, watermark);
        if !ok {
            return;
        }
        let updated = capacity(&self.config).and_then(|cap| {
            self.ledger
                .reader()
                .and_then(|r| {
                    l.metrics
                        .update_from_ledger(&r, self.config.clone(), cap, t)
                })
                .map_err(|e| anyhow::anyhow!("cannot read the ledger: {e}"))
        });
        if let Err(e) = updated {
            tracing::warn!("metrics: {e:#}");
        }
    }

    /// Step 3: the site's new snapshot, with slurmctld's `jobs` if the
    /// sync read them; on a failure the pages keep the last one.
    fn snapshot(
        &self,
        l: &Listener,
        jobs: Option<std::collections::BTreeMap<u64, crate::slurm::squeue::LiveJob>>,
    ) {
        let refreshed = capacity(&self.config).and_then(|cap| {
            let reader = LedgerReader::open(&self.path)?;
            l.site.refresh(&self.config, &reader, cap, now(), jobs)
        });
        if let Err(e) = refreshed {
            tracing::warn!("site: the pages keep the last snapshot: {e:#}");
        }
    }

    /// Passes forever: the sync at the next whole multiple of the interval
    /// since the epoch (the plugins rebuild their engine half a second
    /// after it, from this pass; `fairshare::timer`), a failed one retried
    /// after 1 s, 2 s, 4 s ... up to the interval (the watermark stays, so
    /// the pass that succeeds catches up on everything); the drain every
    /// pass and again as soon as a protected job's contract ends.
    pub fn run(mut self) -> ! {
        tracing::info!(ledger = %self.path.display(), interval_s = self.interval, drain = self.drain.is_some(), "following sacct");
        let mut next_sync = Instant::now();
        let mut backoff = Backoff::new(Duration::from_secs(self.interval));
        loop {
            let pass = self.pass(Instant::now() >= next_sync);
            match &pass.synced {
                Some(Ok(stats)) => {
                    tracing::info!("{}", stats.summary());
                    backoff.reset();
                    next_sync = next_tick(self.interval);
                }
                Some(Err(e)) => {
                    let delay = backoff.next_delay();
                    tracing::error!("sync pass failed, retrying in {} s: {e}", delay.as_secs());
                    next_sync = Instant::now() + delay;
                }
                None => {}
            }
            let mut wake = next_sync;
            if let Some(t) = pass.next_look {
                let secs = (t - now()).max(0) as u64;
                wake = wake.min(Instant::now() + Duration::from_secs(secs));
            }
            std::thread::sleep(
                wake.saturating_duration_since(Instant::now())
                    .max(Duration::from_millis(200)),
            );
        }
    }
}

/// When the next sync of `--follow` is due: on the clock, at the next whole
/// multiple of `interval` seconds since the epoch (fairshare::timer).
fn next_tick(interval: u64) -> Instant {
    let now_ms = jiff::Timestamp::now().as_millisecond().max(0) as u64;
    let at = fairshare::timer::next_tick_ms(now_ms, interval, fairshare::timer::SYNC_OFFSET_MS);
    Instant::now() + Duration::from_millis(at - now_ms)
}
