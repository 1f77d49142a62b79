//! The sidecar's HTML: a job's "why" page (`/jobs/<id>`), the lookup box
//! and viewer line of the live budget page (`/`), and the error page.
//! Every string a user controls (job, account, user and partition names,
//! comments, rules read back from the ledger) goes through
//! [`esc`]; the pages load nothing (no script, inline CSS), and the
//! listener sends a Content-Security-Policy that forbids any.

use std::fmt::Write as _;

use fairshare::duration::SlurmDuration;

use super::privacy::Viewer;
use crate::explain::preempted::{figures, rule_words};
use crate::explain::Output;
use crate::reports::budget_page::esc;
use crate::when::when;

const STYLE: &str = "body{font-family:sans-serif;max-width:980px;margin:2em auto;color:#222}\
table{border-collapse:collapse;margin:1em 0}td,th{border-bottom:1px solid #ddd;padding:4px 10px;text-align:left}\
.note{color:#555;font-size:90%}.box{margin:1em 0;padding:0.5em 1em;border-left:4px solid #4a90d9;background:#f6f9fd}\
.warn{border-left-color:#d9534f;background:#fdf6f6}form{margin:1em 0}input{font-size:110%;padding:2px 6px}";

fn head(title: &str) -> String {
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body>",
        esc(title)
    )
}

/// The lookup box and the viewer line the live budget page shows under
/// its introduction.
pub fn lookup_box(viewer: &Viewer) -> String {
    format!(
        "<form class=\"box\" method=\"get\" action=\"/jobs\"><label>Why is my job waiting, or why was it preempted? Job id: \
         <input name=\"id\" inputmode=\"numeric\" pattern=\"[0-9]+\" required size=\"10\"></label> <input type=\"submit\" value=\"Explain\"></form>\
         <p class=\"note\" data-field=\"viewer\">{}</p>",
        viewer_line(viewer)
    )
}

fn viewer_line(viewer: &Viewer) -> String {
    let private = viewer.private.describe();
    match (viewer.who.name(), viewer.admin) {
        (_, true) => format!("You see everything (an admin). PrivateData={}.", esc(&private)),
        (Some(n), false) => format!(
            "You are {} (munge). PrivateData={}: you see what Slurm shows you.",
            esc(n),
            esc(&private)
        ),
        (None, false) if private == "none" => {
            "Anonymous (a browser). PrivateData=none: every team's figures are public.".into()
        }
        (None, false) => format!(
            "Anonymous (a browser). PrivateData={}: what it covers is hidden here; run <code>allot report</code> or <code>allot explain JOB</code> on a login node to see your own.",
            esc(&private)
        ),
    }
}

/// A page that says why nothing is shown (`status`: 400, 401, 403, 404,
/// 503).
pub fn error_page(status: u16, message: &str) -> String {
    let title = match status {
        400 => "Bad request",
        401 => "Not attributed",
        403 => "Not yours to see",
        404 => "Not found",
        _ => "Not available",
    };
    format!(
        "{}<h1>{title}</h1><p class=\"box warn\" data-field=\"error\">{}</p><p><a href=\"/\">Budget page</a></p></body></html>\n",
        head(title),
        esc(message)
    )
}

fn row(h: &mut String, k: &str, field: &str, v: &str) {
    let _ = write!(
        h,
        "<tr><th>{}</th><td data-field=\"{field}\">{}</td></tr>",
        esc(k),
        esc(v)
    );
}

/// The page of job `o` at `now` (epoch s), for `viewer` (already
/// redacted for it).
pub fn job_page(o: &Output, now: i64, viewer: &Viewer) -> String {
    let e = &o.explanation;
    let state = o
        .live
        .as_ref()
        .map_or("ENDED", |l| l.state.as_str())
        .to_string();
    let mut h = head(&format!("Job {}", o.job_id));
    let _ = write!(
        h,
        "<h1>Job <span data-field=\"job_id\">{}</span>: <span data-field=\"state\">{}</span></h1>\
         <p class=\"box\" data-field=\"summary\">{}</p><table>",
        o.job_id,
        esc(&state),
        esc(&e.summary)
    );
    row(&mut h, "Account", "account", &e.account);
    row(&mut h, "User", "user", &o.user);
    if let Some(l) = &o.live {
        row(&mut h, "Name", "name", &l.name);
        row(&mut h, "Partition", "partition", &l.partition);
        row(&mut h, "GPUs", "gpus", &l.gpus.to_string());
        row(
            &mut h,
            "Requeued",
            "restarts",
            &format!("{} time(s)", l.restarts),
        );
    }
    row(
        &mut h,
        "Team's place",
        "rank",
        &match &e.leaf {
            Some(leaf) => format!(
                "{leaf}: rank {} of {} teams (fair-share factor {:.4})",
                e.rank, e.leaves, e.fair_share
            ),
            None => "its account is not in allot.toml: it ranks below every team".into(),
        },
    );
    row(&mut h, "Band", "tier", &format!("{:?}", e.tier));
    if let Some(p) = &e.priority {
        row(
            &mut h,
            "Priority",
            "priority",
            &format!(
                "{} (tier {:?}, team rank {}, age {} s, nice {})",
                p.priority, p.tier, p.rank, p.age, p.nice
            ),
        );
    }
    let forecast = match (&o.forecast, &o.forecast_error) {
        (Some(f), _) => Some(crate::forecast::times(f, now)),
        (None, Some(why)) if o.forecast_pending => Some(why.clone()),
        (None, Some(why)) => Some(format!("none: {why}")),
        (None, None) => None,
    };
    if let Some(f) = forecast {
        row(&mut h, "Forecast start", "forecast", &f);
    }
    if let Some(p) = &e.protection {
        row(
            &mut h,
            "Protected until",
            "protected_until",
            &match p.until {
                _ if p.min_runtime == 0 => {
                    "never: a free-tier job (minimum runtime 0) may be preempted at any time".into()
                }
                Some(u) => format!(
                    "{} (minimum runtime {}, ran {})",
                    when(u as i64, now),
                    SlurmDuration(p.min_runtime),
                    SlurmDuration(p.run_time)
                ),
                None => "while suspended, its protection clock stands still".into(),
            },
        );
    }
    if let Some(p) = &e.preemptible {
        row(
            &mut h,
            "Next requeue point",
            "next_requeue_point",
            &p.from.map_or("none while suspended".into(), |t| {
                if t as i64 <= now {
                    "now: it may be requeued if a team below its entitlement needs the GPUs".into()
                } else {
                    when(t as i64, now)
                }
            }),
        );
        row(
            &mut h,
            "Requeues left",
            "requeues_left",
            &p.requeues_left
                .map_or("no bound (free tier)".into(), |n| n.to_string()),
        );
    }
    h += "</table>";
    if !e.levels.is_empty() {
        h += "<h2>Its team in the org tree</h2><table><tr><th>Node</th><th>Share of siblings</th><th>Usage (GPU-s)</th><th>Level FS</th><th>Place</th></tr>";
        for l in &e.levels {
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{:.2}%</td><td>{:.0}</td><td>{}</td><td>{} of {}</td></tr>",
                esc(&l.node),
                100.0 * l.norm_share,
                l.usage,
                esc(&l.level_fs.to_string()),
                l.place,
                l.siblings
            );
        }
        h += "</table>";
    }
    if !o.attempts.is_empty() {
        h += "<h2>Its attempts</h2><table data-field=\"attempts\"><tr><th>Attempt</th><th>Started</th><th>Ended</th><th>How it ended</th><th>GPUs</th><th>Charged (GPU-h)</th></tr>";
        for a in &o.attempts {
            let t = |x: Option<i64>| x.map_or("-".to_string(), |x| when(x, now));
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.3}</td></tr>",
                a.attempt,
                esc(&t(a.start)),
                esc(&t(a.end)),
                esc(&a.state),
                a.gpus,
                a.charged_gpu_seconds / 3600.0
            );
        }
        h += "</table>";
    }
    h += "<h2>Its attempts that were preempted</h2>";
    if o.requeues.is_empty() {
        h += "<p data-field=\"requeues\">None.</p>";
    } else {
        h += "<table data-field=\"requeues\"><tr><th>Attempt</th><th>Ended</th><th>State</th><th>Preempted for</th><th>Rule</th><th>Figures</th></tr>";
        for r in &o.requeues {
            let (by, rule) = match (&r.preempted_by, &r.rule) {
                (Some(j), Some(rule)) => (
                    format!(
                        "<a href=\"/jobs/{j}\" data-field=\"preempted_by\">job {j}</a> of account {}",
                        esc(r.preemptor_account.as_deref().unwrap_or("?"))
                    ),
                    format!(
                        "<b data-field=\"rule\">{}</b>: {}",
                        esc(rule),
                        esc(rule_words(rule))
                    ),
                ),
                _ => (
                    match &r.guessed_preemptor {
                        Some(g) => format!(
                            "no record; guessed by time: job {} of account {}",
                            g.job_id,
                            esc(&g.account)
                        ),
                        None => "no record".into(),
                    },
                    String::new(),
                ),
            };
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{by}</td><td>{rule}</td><td>{}</td></tr>",
                r.attempt,
                esc(&when(r.ended, now)),
                esc(&r.state),
                esc(&r.grounds.as_ref().and_then(figures).unwrap_or_default())
            );
        }
        h += "</table>";
    }
    let _ = writeln!(
        h,
        "<p class=\"note\">{} JSON: <a href=\"/api/v1/jobs/{id}\">/api/v1/jobs/{id}</a>; the same as <code>allot explain {id}</code>. <a href=\"/\">Budget page</a></p></body></html>",
        viewer_line(viewer),
        id = o.job_id
    );
    h
}
