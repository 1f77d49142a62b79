//! One function a route of the sidecar's site ([`super::site`] finds the
//! route, the snapshot and the viewer first):
//! - [`metrics`]: `GET /metrics`;
//! - [`lookup`]: `GET /jobs?id=ID`, the page's job box (a redirect);
//! - [`index`]: `GET /`, the live budget page;
//! - [`report`]: `GET /api/v1/report`;
//! - [`job`]: `GET /jobs/ID` (a page) and `GET /api/v1/jobs/ID` (JSON or
//!   text), with a pending job's forecast.
//!
//! A refusal is [`fail`]: JSON under `/api/`, an HTML page elsewhere.

use super::forecasts::{Answer, Forecasts};
use super::http::{Request, Response};
use super::pages;
use super::privacy::Viewer;
use super::snapshot::Snapshot;
use crate::explain::{self, ExplainError};
use crate::reports::budget::{self, Report};
use crate::reports::budget_page;
use crate::sidecar::metrics::SidecarMetrics;

/// A refusal of a request for `path`: `{"error", "status"}` under
/// `/api/`, an HTML error page elsewhere.
pub fn fail(path: &str, status: u16, msg: &str) -> Response {
    if path.starts_with("/api/") {
        Response::json(
            status,
            serde_json::json!({ "error": msg, "status": status }).to_string(),
        )
    } else {
        Response::html(status, pages::error_page(status, msg))
    }
}

/// `/metrics`: the Prometheus exposition, in the format `Accept` asks for;
/// 404 where the site has no metrics.
pub fn metrics(metrics: Option<&SidecarMetrics>, req: &Request) -> Response {
    match metrics {
        Some(m) => {
            let (body, kind) = m.exposition(req.header("accept"));
            Response {
                content_type: kind.to_string(),
                ..Response::text(200, body)
            }
        }
        None => fail(&req.path, 404, "no metrics here"),
    }
}

/// `/jobs?id=ID`: to the job's page, for an id as squeue prints it (4242
/// or 4242_7); 400 for anything else.
pub fn lookup(req: &Request) -> Response {
    let id = req.query_param("id").unwrap_or_default();
    let id = id.trim();
    let plain = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match id.split_once('_') {
        None if plain(id) => Response::redirect(&format!("/jobs/{id}")),
        Some((a, t)) if plain(a) && plain(t) => Response::redirect(&format!("/jobs/{id}")),
        _ => fail(
            &req.path,
            400,
            "give a job id as squeue prints it: a number (4242) or an array task (4242_7)",
        ),
    }
}

/// `/`: the live budget page, as `viewer` may see it.
pub fn index(snap: &Snapshot, viewer: &Viewer) -> Response {
    let r = viewer.redact_report(&snap.config.tree, without_users(&snap.report));
    Response::html(
        200,
        budget_page::render_page(
            &r,
            &snap.config,
            &snap.daily,
            snap.at,
            Some(&pages::lookup_box(viewer)),
        ),
    )
}

/// `/api/v1/report`: the budget report as `viewer` may see it, with user
/// lines for `users=1`, as JSON, text or parsable2 (`format`).
pub fn report(snap: &Snapshot, viewer: &Viewer, req: &Request) -> Response {
    let fail = |status: u16, msg: &str| fail(&req.path, status, msg);
    let full = match req.query_param("users").as_deref() {
        Some("1" | "true" | "yes") => snap.report.clone(),
        None | Some("0" | "false" | "no") => without_users(&snap.report),
        Some(v) => return fail(400, &format!("users={v}: write users=1 or users=0")),
    };
    let r = viewer.redact_report(&snap.config.tree, full);
    match req.query_param("format").as_deref() {
        None | Some("json") => Response::json(200, pretty(&r)),
        Some("text") => Response::text(200, budget::render_text(&r)),
        Some("parsable2") => Response::text(200, budget::render_parsable(&r)),
        Some(f) => fail(400, &format!("format={f}: write json, text or parsable2")),
    }
}

/// `/jobs/ID` (`page`) and `/api/v1/jobs/ID`: why job `id` (as squeue
/// prints it) is where it is, as `viewer` may see it; a pending job's
/// forecast on the page and with `forecast=1` (where the site has
/// `forecasts`). `explain` explains a job id at a time (epoch s) from the
/// snapshot and the ledger.
pub fn job(
    explain: impl Fn(u64, i64) -> Result<explain::Output, ExplainError>,
    forecasts: Option<&Forecasts>,
    snap: &Snapshot,
    viewer: &Viewer,
    req: &Request,
    id: &str,
    page: bool,
) -> Response {
    let fail = |status: u16, msg: &str| fail(&req.path, status, msg);
    let id = match explain::resolve(id, &snap.jobs) {
        Ok(id) => id,
        Err(e) if e.contains("not in slurmctld") => return fail(404, &e),
        Err(e) => return fail(400, &e),
    };
    let now = jiff::Timestamp::now().as_second();
    let o = match explain(id, now) {
        Ok(o) => o,
        Err(ExplainError::Unknown(_)) => {
            // The snapshot's jobs are slurmctld's as of its last pass: a
            // job submitted since is not among them yet.
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
    match forecasts {
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
        return Response::html(200, pages::job_page(&o, now, viewer));
    }
    match req.query_param("format").as_deref() {
        None | Some("json") => Response::json(200, pretty(&o)),
        Some("text") => Response::text(200, explain::render(&o, now)),
        Some(f) => fail(400, &format!("format={f}: write json or text")),
    }
}

/// The report without its user lines (accounts outside the tree keep
/// theirs: an empty user).
fn without_users(r: &Report) -> Report {
    Report {
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
