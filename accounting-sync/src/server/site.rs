//! What the sidecar serves (`allot sync --follow --listen ADDR:PORT`),
//! read-only:
//! - `GET /`: the live budget page, with a box to look up a job;
//! - `GET /jobs/<id>`: that job's "why" as a page;
//! - `GET /api/v1/report`: the JSON of `allot report --json` (`?users=1`
//!   adds the user lines; `?format=text|parsable2` the other outputs);
//! - `GET /api/v1/jobs/<id>`: the JSON of `allot explain <id> --json`
//!   (`?format=text`: its text);
//! - `GET /metrics`: Prometheus metrics.
//!
//! Each sync pass [`Site::refresh`]es one [`Snapshot`] ([`super::snapshot`]:
//! the report, the engine, `squeue`'s jobs, PrivateData and who is an
//! admin), so a request never runs a Slurm command: it reads the snapshot
//! and, for a job, its attempts and preemption records in the ledger (two
//! indexed queries). Each route is one function of [`super::routes`];
//! [`Site::answer`] finds the route, the snapshot and the viewer.
//! A pending job's page (and `/api/v1/jobs/<id>?forecast=1`) adds its
//! start forecast, made off the request path ([`super::forecasts`]).
//! Every answer is for its viewer ([`super::privacy`]), attributed by
//! munge ([`super::auth`]).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use allot_ledger::LedgerReader;
use allot_sim::SimSettings;
use fairshare::Config;

use super::auth;
use super::forecasts::Forecasts;
use super::http::{Request, Response};
use super::privacy::Viewer;
use super::routes;
use super::snapshot::Snapshot;
use crate::explain::{self, ExplainError};
use crate::forecast::Inputs;
use crate::sidecar::metrics::SidecarMetrics;
use crate::slurm::squeue::LiveJob;

/// The sidecar's site: the latest snapshot and how to answer.
pub struct Site {
    snapshot: RwLock<Option<Arc<Snapshot>>>,
    ledger: PathBuf,
    munge_socket: Option<String>,
    metrics: Option<Arc<SidecarMetrics>>,
    forecasts: Option<Arc<Forecasts>>,
}

impl Site {
    /// A site with no snapshot yet (answers 503 until the first
    /// [`Site::refresh`]), reading job records from `ledger`, forecasting
    /// pending jobs with the `[sim]` settings `forecasts` on a thread of
    /// its own (`None`: no forecasts).
    pub fn new(
        ledger: PathBuf,
        munge_socket: Option<String>,
        metrics: Option<Arc<SidecarMetrics>>,
        forecasts: Option<SimSettings>,
    ) -> Arc<Site> {
        let site = Arc::new(Site {
            snapshot: RwLock::new(None),
            ledger,
            munge_socket,
            metrics,
            forecasts: forecasts.map(|sim| Arc::new(Forecasts::new(sim))),
        });
        if let Some(f) = &site.forecasts {
            let (f, weak) = (f.clone(), Arc::downgrade(&site));
            let spawned = std::thread::Builder::new()
                .name("allot-forecast".into())
                .spawn(move || f.work(|| weak.upgrade().map(|s| s.current())));
            if let Err(e) = spawned {
                tracing::warn!("site: no forecasts: cannot start their thread: {e}");
            }
        }
        site
    }

    /// Installs the forecasts' `inputs` (a forecast takes them itself
    /// when they are stale; a test gives its own).
    pub fn install_forecast_inputs(&self, inputs: Inputs) {
        if let Some(f) = &self.forecasts {
            f.install(inputs);
        }
    }

    /// Takes a new snapshot ([`Snapshot::take`]) and installs it.
    ///
    /// # Errors
    /// Ledger errors, or a Slurm command that fails (the old snapshot
    /// stays).
    pub fn refresh(
        &self,
        config: &Arc<Config>,
        reader: &LedgerReader,
        capacity: u64,
        now: i64,
        jobs: Option<BTreeMap<u64, LiveJob>>,
    ) -> anyhow::Result<()> {
        self.install(Snapshot::take(config, reader, capacity, now, jobs)?);
        Ok(())
    }

    /// Installs `snap` as the current snapshot.
    pub fn install(&self, snap: Snapshot) {
        *self.snapshot.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(snap));
    }

    fn current(&self) -> Option<Arc<Snapshot>> {
        self.snapshot
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The answer to `req`, for the viewer its munge credential names.
    pub fn answer(&self, req: &Request) -> Response {
        self.answer_as(req, None)
    }

    /// The answer to `req` for `who`, or (`None`) for the viewer its
    /// credential names: the route, then the snapshot (503 before the
    /// first), the viewer (401 for a bad credential) and the API's
    /// parameters (400 for one it does not take).
    pub(crate) fn answer_as(&self, req: &Request, who: Option<auth::Identity>) -> Response {
        let path = req.path.as_str();
        let fail = |status: u16, msg: &str| routes::fail(path, status, msg);
        let route = match path {
            "/metrics" => return routes::metrics(self.metrics.as_deref(), req),
            "/jobs" => return routes::lookup(req),
            "/" => Route::Index,
            "/api/v1/report" => Route::Report,
            _ => {
                let (id, page) = if let Some(id) = path.strip_prefix("/api/v1/jobs/") {
                    (id, false)
                } else if let Some(id) = path.strip_prefix("/jobs/") {
                    (id, true)
                } else {
                    return fail(
                        404,
                        &format!("nothing at {path}; see / for the budget page"),
                    );
                };
                Route::Job { id, page }
            }
        };
        let Some(snap) = self.current() else {
            return fail(
                503,
                "the sidecar has not finished its first sync pass yet; try again in a minute",
            );
        };
        let target = match &req.query {
            Some(q) => format!("{path}?{q}"),
            None => path.to_string(),
        };
        let who = match who.map_or_else(
            || {
                auth::attribute(
                    self.munge_socket.as_deref(),
                    req.header("authorization"),
                    &target,
                )
            },
            Ok,
        ) {
            Ok(w) => w,
            Err(e) => return fail(401, &e.to_string()),
        };
        let viewer = Viewer::new(who, &snap.users);
        // The API takes its parameters exactly: a misspelt or repeated one
        // would otherwise answer something else than was asked, silently.
        let takes: Option<&[&str]> = match &route {
            Route::Report => Some(&["format", "users"]),
            Route::Job { page: false, .. } => Some(&["format", "forecast"]),
            Route::Index | Route::Job { page: true, .. } => None,
        };
        if let Some(why) = takes.and_then(|t| req.query_misfit(t)) {
            return fail(400, &why);
        }
        match route {
            Route::Index => routes::index(&snap, &viewer),
            Route::Report => routes::report(&snap, &viewer, req),
            Route::Job { id, page } => routes::job(
                |id, now| self.explain(&snap, id, now),
                self.forecasts.as_deref(),
                &snap,
                &viewer,
                req,
                id,
                page,
            ),
        }
    }

    /// Job `id` explained at `now` from `snap` and the ledger.
    fn explain(&self, snap: &Snapshot, id: u64, now: i64) -> Result<explain::Output, ExplainError> {
        let reader = LedgerReader::open(&self.ledger)?;
        explain::build(
            &snap.config,
            &snap.engine,
            &reader,
            id,
            snap.jobs.get(&id).cloned(),
            now,
        )
    }
}

/// The routes that need the snapshot.
enum Route<'a> {
    Index,
    Report,
    Job { id: &'a str, page: bool },
}
