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
//! Each sync pass [`Site::refresh`]es one [`Snapshot`] (the report, the
//! engine, `squeue`'s jobs, PrivateData and who is an admin), so a request
//! never runs a Slurm command: it reads the snapshot and, for a job, its
//! attempts and preemption records in the ledger (two indexed queries).
//! A pending job's page (and `/api/v1/jobs/<id>?forecast=1`) adds its
//! start forecast, made off the request path ([`super::forecasts`]).
//! Every answer is for its viewer ([`super::privacy`]), attributed by
//! munge ([`super::auth`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use allot_ledger::LedgerReader;
use allot_sim::SimSettings;
use fairshare::{Config, Engine};

use super::auth;
use super::forecasts::{Answer, Forecasts};
use super::http::{Request, Response};
use super::pages;
use super::privacy::{SlurmUsers, Viewer};
use crate::explain::{self, ExplainError};
use crate::forecast::Inputs;
use crate::reports::budget::{self, Report};
use crate::reports::budget_page::{self, Daily};
use crate::sidecar::metrics::SidecarMetrics;
use crate::slurm::sacctmgr;
use crate::slurm::scontrol::{self, ShowConfig};
use crate::slurm::squeue::{self, LiveJob};

/// Days of daily use on the live budget page.
const PAGE_DAYS: u32 = 14;

/// What the sidecar knew at its last pass.
pub struct Snapshot {
    /// When it was taken (epoch s).
    pub at: i64,
    /// The configuration.
    pub config: Arc<Config>,
    /// The engine over the window's charged usage.
    pub engine: Engine,
    /// The budget report over the window, with user lines.
    pub report: Report,
    /// Daily use for the page.
    pub daily: Daily,
    /// Every job slurmctld has, by id.
    pub jobs: BTreeMap<u64, LiveJob>,
    /// PrivateData, admins, associations.
    pub users: SlurmUsers,
}

/// The sidecar's site: the latest snapshot and how to answer.
pub struct Site {
    snapshot: RwLock<Option<Arc<Snapshot>>>,
    ledger: PathBuf,
    munge_socket: Option<String>,
    metrics: Option<Arc<SidecarMetrics>>,
    forecasts: Option<Arc<Forecasts>>,
}

/// Who is who, from Slurm: `scontrol show config` (PrivateData,
/// SlurmUser) and slurmdbd (admin levels, associations).
///
/// # Errors
/// A Slurm command that fails.
pub fn slurm_users() -> anyhow::Result<SlurmUsers> {
    let show = scontrol::show_config()?;
    Ok(SlurmUsers {
        private: show.private_data(),
        admins: admins(&show)?,
        accounts: sacctmgr::associations()?,
    })
}

/// Who sees everything whatever `PrivateData` says: root, SlurmUser (of
/// `show`, `scontrol show config`) and slurmdbd's users of AdminLevel
/// Operator or Administrator.
///
/// # Errors
/// sacctmgr cannot run or fails.
pub fn admins(show: &ShowConfig) -> anyhow::Result<BTreeSet<String>> {
    let mut admins: BTreeSet<String> = ["root".to_string()].into();
    admins.extend(show.slurm_user().map(|(name, _)| name));
    admins.extend(sacctmgr::operators()?);
    Ok(admins)
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

    /// Takes a new snapshot at `now` (epoch s) for `capacity` GPUs: the
    /// report and engine from `reader`, the users from Slurm, and
    /// slurmctld's `jobs` (as the sync pass read them; `None`: squeue is
    /// asked here).
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
        let jobs = match jobs {
            Some(jobs) => jobs,
            None => squeue::jobs_now()?,
        };
        let mut report = budget::build(
            reader,
            config.clone(),
            capacity,
            now - config.window as i64,
            now,
            true,
        )?;
        live_counts(&mut report, &config.tree, &jobs);
        let snap = Snapshot {
            at: now,
            config: config.clone(),
            engine: explain::engine_now(config, reader, now, Some(&jobs))?,
            report,
            daily: budget_page::daily(reader, config, now, PAGE_DAYS)?,
            jobs,
            users: slurm_users()?,
        };
        self.install(snap);
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
    /// credential names.
    pub(crate) fn answer_as(&self, req: &Request, who: Option<auth::Identity>) -> Response {
        let path = req.path.as_str();
        let api = path.starts_with("/api/");
        let fail = |status: u16, msg: &str| {
            if api {
                Response::json(
                    status,
                    serde_json::json!({ "error": msg, "status": status }).to_string(),
                )
            } else {
                Response::html(status, pages::error_page(status, msg))
            }
        };
        if path == "/metrics" {
            return match &self.metrics {
                Some(m) => {
                    let (body, kind) = m.exposition(req.header("accept"));
                    Response {
                        content_type: kind.to_string(),
                        ..Response::text(200, body)
                    }
                }
                None => fail(404, "no metrics here"),
            };
        }
        if path == "/jobs" {
            let id = req.query_param("id").unwrap_or_default();
            let id = id.trim();
            let plain = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
            return match id.split_once('_') {
                None if plain(id) => Response::redirect(&format!("/jobs/{id}")),
                Some((a, t)) if plain(a) && plain(t) => Response::redirect(&format!("/jobs/{id}")),
                _ => fail(
                    400,
                    "give a job id as squeue prints it: a number (4242) or an array task (4242_7)",
                ),
            };
        }
        enum Route {
            Index,
            Report,
            Job { id: String, page: bool },
        }
        let route = match path {
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
                Route::Job {
                    id: id.to_string(),
                    page,
                }
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
        let format = req.query_param("format");
        match route {
            Route::Index => {
                let r = viewer.redact_report(&snap.config.tree, without_users(&snap.report));
                Response::html(
                    200,
                    budget_page::render_page(
                        &r,
                        &snap.config,
                        &snap.daily,
                        snap.at,
                        Some(&pages::lookup_box(&viewer)),
                    ),
                )
            }
            Route::Report => {
                let full = match req.query_param("users").as_deref() {
                    Some("1" | "true" | "yes") => snap.report.clone(),
                    None | Some("0" | "false" | "no") => without_users(&snap.report),
                    Some(v) => return fail(400, &format!("users={v}: write users=1 or users=0")),
                };
                let r = viewer.redact_report(&snap.config.tree, full);
                match format.as_deref() {
                    None | Some("json") => Response::json(200, pretty(&r)),
                    Some("text") => Response::text(200, budget::render_text(&r)),
                    Some("parsable2") => Response::text(200, budget::render_parsable(&r)),
                    Some(f) => fail(400, &format!("format={f}: write json, text or parsable2")),
                }
            }
            Route::Job { id, page } => {
                let id = match explain::resolve(&id, &snap.jobs) {
                    Ok(id) => id,
                    Err(e) if e.contains("not in slurmctld") => return fail(404, &e),
                    Err(e) => return fail(400, &e),
                };
                let now = jiff::Timestamp::now().as_second();
                let o = match self.explain(&snap, id, now) {
                    Ok(o) => o,
                    Err(ExplainError::Unknown(_)) => {
                        // The snapshot's jobs are slurmctld's as of its last
                        // pass: a job submitted since is not among them yet.
                        return fail(
                            404,
                            &format!(
                                "job {id} is neither in slurmctld as of the sidecar's last look \
                                 ({} s ago) nor in the ledger; a job submitted since then shows \
                                 at its next look: ask again in a few seconds",
                                (now - snap.at).max(0)
                            ),
                        );
                    }
                    Err(e) => return fail(503, &format!("cannot read the ledger: {e}")),
                };
                if let Err(why) = viewer.may_see_job(&o) {
                    return fail(403, &why);
                }
                let mut o = viewer.redact_job(o);
                let asked = match req.query_param("forecast").as_deref() {
                    None => page,
                    Some("1" | "true" | "yes") => true,
                    Some("0" | "false" | "no") => false,
                    Some(v) => {
                        return fail(
                            400,
                            &format!("forecast={v}: write forecast=1 or forecast=0"),
                        )
                    }
                };
                match &self.forecasts {
                    Some(f) if asked && o.is_pending() => {
                        match f.ask(id, o.live.as_ref().map_or(0, |l| l.restarts), snap.at) {
                            Answer::Made(f) => o.forecast = Some(viewer.redact_forecast(f)),
                            Answer::Failed(e) => o.forecast_error = Some(e),
                            Answer::Pending(e) => {
                                o.forecast_error = Some(e);
                                o.forecast_pending = true;
                            }
                        }
                    }
                    _ => {}
                }
                if page {
                    Response::html(200, pages::job_page(&o, now, &viewer))
                } else {
                    match format.as_deref() {
                        None | Some("json") => Response::json(200, pretty(&o)),
                        Some("text") => Response::text(200, explain::render(&o, now)),
                        Some(f) => fail(400, &format!("format={f}: write json or text")),
                    }
                }
            }
        }
    }

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

/// The report's running and pending jobs as slurmctld has them now
/// (squeue), rather than as the last sync saw them in sacct: each node
/// line counts its subtree's accounts, each user line its user's jobs in
/// its leaf, each line of an account outside the tree that account's.
pub fn live_counts(r: &mut Report, tree: &fairshare::Tree, jobs: &BTreeMap<u64, LiveJob>) {
    let mut by: BTreeMap<(&str, &str), (u64, u64)> = BTreeMap::new();
    for j in jobs.values() {
        let c = by.entry((j.account.as_str(), j.user.as_str())).or_default();
        match j.state.as_str() {
            "RUNNING" | "COMPLETING" | "SUSPENDED" => c.0 += 1,
            "PENDING" | "REQUEUED" => c.1 += 1,
            _ => {}
        }
    }
    let count = |accounts: &[String], user: Option<&str>| {
        by.iter()
            .filter(|((a, u), _)| accounts.iter().any(|x| x == a) && user.is_none_or(|w| w == *u))
            .fold((0, 0), |s, (_, c)| (s.0 + c.0, s.1 + c.1))
    };
    let order = budget::node_order(tree);
    let outside: Vec<String> = by
        .keys()
        .map(|(a, _)| a.to_string())
        .filter(|a| tree.leaf_of_account(a).is_none())
        .collect();
    let mut nodes = order.iter();
    let mut leaf_accounts: Vec<String> = Vec::new();
    for l in &mut r.lines {
        let (running, pending) = match l.user.as_deref() {
            None => match nodes.next() {
                Some(id) => {
                    leaf_accounts = budget::subtree_accounts(tree, *id);
                    count(&leaf_accounts, None)
                }
                None => count(&outside, None),
            },
            Some("") => count(std::slice::from_ref(&l.account), None),
            Some(u) => count(&leaf_accounts, Some(u)),
        };
        l.running = running;
        l.pending = pending;
    }
}

fn without_users(r: &Report) -> Report {
    Report {
        // Accounts outside the tree keep their lines (an empty user).
        lines: r
            .lines
            .iter()
            .filter(|l| l.user.as_deref().is_none_or(str::is_empty))
            .cloned()
            .collect(),
        totals: r.totals.clone(),
    }
}

fn pretty(v: &impl serde::Serialize) -> String {
    let mut s =
        serde_json::to_string_pretty(v).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    s.push('\n');
    s
}
