//! The routes over the fixture's real ledger: what each viewer gets.

use std::path::PathBuf;

use super::auth::Identity;
use super::fixture;
use super::http::{parse_head, Limits, Request, Response};
use super::privacy::{PrivateData, HIDDEN};

fn ledger(name: &str) -> PathBuf {
    fixture::temp_ledger(&format!("site-{name}"))
}

fn req(target: &str) -> Request {
    parse_head(
        format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
        &Limits::default(),
    )
    .unwrap()
    .unwrap()
}

fn body(r: &Response) -> String {
    String::from_utf8_lossy(&r.body).into_owned()
}

fn json(r: &Response) -> serde_json::Value {
    serde_json::from_slice(&r.body).unwrap()
}

#[test]
fn without_private_data_anyone_sees_who_preempted_a_job() {
    let l = ledger("open");
    let site = fixture::site(
        &l,
        PrivateData::default(),
        "train <script>alert(1)</script> & co",
    );
    let r = site.answer(&req("/api/v1/jobs/7"));
    assert_eq!(r.status, 200, "{}", body(&r));
    let v = json(&r);
    assert_eq!(v["requeues"][0]["preempted_by"], 8, "{v}");
    assert_eq!(v["requeues"][0]["rule"], "free_tier", "{v}");
    assert_eq!(v["user"], "alice");
    assert_eq!(v["live"]["state"], "PENDING");
    let states: Vec<&str> = v["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["PREEMPTED", "PENDING"], "{v}");
    // The text is allot explain's own.
    let t = body(&site.answer(&req("/api/v1/jobs/7?format=text")));
    assert!(
        t.starts_with("Job 7 (PENDING), account a1:")
            && t.contains("preempted for job 8 of account b1"),
        "{t}"
    );
    // The page: the same, and the user's markup escaped.
    let p = site.answer(&req("/jobs/7"));
    assert_eq!(
        (p.status, p.content_type.as_str()),
        (200, "text/html; charset=utf-8")
    );
    let page = body(&p);
    assert!(
        page.contains("data-field=\"preempted_by\">job 8</a> of account b1"),
        "{page}"
    );
    assert!(
        page.contains("<b data-field=\"rule\">free_tier</b>"),
        "{page}"
    );
    assert!(
        page.contains("train &lt;script&gt;alert(1)&lt;/script&gt; &amp; co")
            && !page.contains("<script"),
        "{page}"
    );
    // An ended job, the budget page, the report, the lookup box.
    assert_eq!(json(&site.answer(&req("/api/v1/jobs/9")))["user"], "carol");
    let index = body(&site.answer(&req("/")));
    assert!(
        index.contains("action=\"/jobs\"") && index.contains("data-field=\"rank\""),
        "{index}"
    );
    let report = json(&site.answer(&req("/api/v1/report")));
    assert_eq!(report["lines"].as_array().unwrap().len(), 8, "{report}");
    let with_users = json(&site.answer(&req("/api/v1/report?users=1")));
    assert!(with_users["lines"].as_array().unwrap().len() > 8);
    assert_eq!(site.answer(&req("/jobs?id=+7+")).status, 303);
    // An array task as squeue shows it.
    assert_eq!(site.answer(&req("/jobs?id=6_1")).status, 303);
    assert_eq!(json(&site.answer(&req("/api/v1/jobs/6_1")))["job_id"], 7);
    let gone = site.answer(&req("/api/v1/jobs/6_2"));
    assert_eq!(gone.status, 404);
    assert!(body(&gone).contains("JobIDRaw"), "{}", body(&gone));
    // Errors say what is wrong.
    for (target, status) in [
        ("/jobs?id=seven", 400),
        ("/jobs/seven", 400),
        ("/api/v1/jobs/123456", 404),
        ("/etc/passwd", 404),
        ("/api/v1/report?format=xml", 400),
        ("/api/v1/report?users=2", 400),
        ("/jobs?id=6_", 400),
    ] {
        assert_eq!(site.answer(&req(target)).status, status, "{target}");
    }
    let e = json(&site.answer(&req("/api/v1/jobs/123456")));
    let e = e["error"].as_str().unwrap();
    // A job just submitted is not in the last snapshot yet: the 404 says so.
    assert!(
        e.contains("job 123456") && e.contains("s ago") && e.contains("ask again"),
        "{e}"
    );
}

#[test]
fn private_jobs_are_their_owners_and_admins_only() {
    let l = ledger("jobs");
    let private = PrivateData {
        jobs: true,
        ..Default::default()
    };
    let site = fixture::site(&l, private, "j");
    // A browser is anonymous: no job.
    let r = site.answer(&req("/api/v1/jobs/7"));
    assert_eq!(r.status, 403);
    assert!(json(&r)["error"]
        .as_str()
        .unwrap()
        .contains("PrivateData=jobs"));
    assert_eq!(site.answer(&req("/jobs/7")).status, 403);
    // The owner and admins see it; bob does not.
    assert_eq!(
        site.answer_as(&req("/api/v1/jobs/7"), Some(who("alice")))
            .status,
        200
    );
    assert_eq!(
        site.answer_as(&req("/api/v1/jobs/7"), Some(who("root")))
            .status,
        200
    );
    let r = site.answer_as(&req("/api/v1/jobs/7"), Some(who("bob")));
    assert_eq!(r.status, 403);
    assert!(
        json(&r)["error"]
            .as_str()
            .unwrap()
            .contains("user bob sees only their own jobs"),
        "{}",
        body(&r)
    );
    // The budget page is not a job: everyone sees it.
    assert_eq!(site.answer(&req("/")).status, 200);
}

fn who(n: &str) -> Identity {
    Identity::User {
        name: n.into(),
        uid: 1000,
    }
}

#[test]
fn usage_accounts_and_users_hide_other_teams() {
    let l = ledger("usage");
    let site = fixture::site(
        &l,
        PrivateData {
            usage: true,
            accounts: true,
            users: true,
            jobs: false,
        },
        "j",
    );
    // Anonymous: the cluster totals, no team.
    let report = json(&site.answer(&req("/api/v1/report?users=1")));
    assert_eq!(report["lines"].as_array().unwrap().len(), 0, "{report}");
    assert!(report["totals"]["capacity_gpus"].as_u64() == Some(16));
    // Another account's job is refused to a browser.
    let r = site.answer(&req("/api/v1/jobs/7"));
    assert_eq!(r.status, 403);
    assert!(
        json(&r)["error"].as_str().unwrap().contains("is not in"),
        "{}",
        body(&r)
    );
    // alice (a1) sees her path and her own user line; the record keeps
    // the preemptor's job and rule, hides its account and figures.
    let mine = json(&site.answer_as(&req("/api/v1/report?users=1"), Some(who("alice"))));
    let names: Vec<(&str, Option<&str>)> = mine["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l["account"].as_str().unwrap(), l["user"].as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("root", None),
            ("nlp", None),
            ("a1", None),
            ("a1", Some("alice"))
        ],
        "{mine}"
    );
    let v = json(&site.answer_as(&req("/api/v1/jobs/7"), Some(who("alice"))));
    let q = &v["requeues"][0];
    assert_eq!(
        (q["preempted_by"].as_u64(), q["rule"].as_str()),
        (Some(8), Some("free_tier"))
    );
    assert_eq!(q["preemptor_account"], HIDDEN);
    assert!(q["grounds"].is_null(), "{v}");
    // An admin sees all of it.
    let all = json(&site.answer_as(&req("/api/v1/jobs/7"), Some(who("slurm"))));
    assert_eq!(all["requeues"][0]["preemptor_account"], "b1");
    // carol is not in a1: alice's job is another account's.
    assert_eq!(
        site.answer_as(&req("/api/v1/jobs/7"), Some(who("carol")))
            .status,
        403
    );
}

/// The answer to `target` once its forecast is made (the site makes it
/// off the request path and answers "being computed" meanwhile).
fn made(site: &super::site::Site, target: &str, user: Option<&str>) -> serde_json::Value {
    for _ in 0..60 {
        let v = json(&site.answer_as(&req(target), user.map(who)));
        if v["forecast_pending"] != true {
            return v;
        }
        assert!(
            v["forecast_error"]
                .as_str()
                .unwrap()
                .contains("being computed"),
            "{v}"
        );
    }
    panic!("no forecast for {target} in 60 tries");
}

#[test]
fn a_pending_jobs_page_has_its_forecast_and_the_api_gives_it_on_request() {
    let l = ledger("forecast");
    let site = fixture::site_with_forecasts(&l, PrivateData::default(), "j");
    // Not asked for: explain's JSON alone (what stays fast).
    let v = json(&site.answer(&req("/api/v1/jobs/7")));
    assert!(v.get("forecast").is_none(), "{v}");
    let v = made(&site, "/api/v1/jobs/7?forecast=1", None);
    let f = &v["forecast"];
    assert_eq!(f["job"], 7, "{v}");
    assert_eq!(f["at"], fixture::NOW, "{v}");
    let t = |k: &str| f[k].as_i64().unwrap();
    assert!(
        fixture::NOW <= t("p10") && t("p10") <= t("p50") && t("p50") <= t("p90"),
        "{v}"
    );
    assert_eq!(f["pending"], 1, "{v}");
    // Made once per snapshot: the same answer again.
    let again = json(&site.answer(&req("/api/v1/jobs/7?forecast=yes")));
    assert_eq!(&again["forecast"], f);
    // The page shows it unasked; the text says it.
    let page = body(&site.answer(&req("/jobs/7")));
    assert!(
        page.contains("<th>Forecast start</th><td data-field=\"forecast\">")
            && page.contains("(p10 / p50 / p90; squeue --start"),
        "{page}"
    );
    let text = body(&site.answer(&req("/api/v1/jobs/7?format=text&forecast=1")));
    assert!(text.contains("  Forecast start: "), "{text}");
    // An ended job has none; a bad value is refused.
    let ended = json(&site.answer(&req("/api/v1/jobs/9?forecast=1")));
    assert!(ended.get("forecast").is_none(), "{ended}");
    assert_eq!(site.answer(&req("/api/v1/jobs/7?forecast=2")).status, 400);
    // A misspelt or repeated parameter is refused, naming what the route takes.
    let r = site.answer(&req("/api/v1/jobs/7?forcast=1"));
    assert_eq!(r.status, 400);
    assert!(
        body(&r).contains("forcast\\\" is not a parameter here: it takes format, forecast"),
        "{}",
        body(&r)
    );
    let r = site.answer(&req("/api/v1/jobs/7?forecast=1&forecast=0"));
    assert_eq!(r.status, 400);
    assert!(body(&r).contains("forecast is given twice"), "{}", body(&r));
    assert_eq!(site.answer(&req("/api/v1/report?user=1")).status, 400);
    // Pages take what a browser adds.
    assert_eq!(site.answer(&req("/jobs/7?utm=x")).status, 200);
}

#[test]
fn under_private_jobs_a_forecast_hides_how_many_jobs_it_replays() {
    let l = ledger("forecast-private");
    let private = PrivateData {
        jobs: true,
        ..Default::default()
    };
    let site = fixture::site_with_forecasts(&l, private, "j");
    let v = made(&site, "/api/v1/jobs/7?forecast=1", Some("alice"));
    assert_eq!(v["forecast"]["pending"], 0, "{v}");
    assert!(
        v["forecast"]["p50"].as_i64().unwrap() >= fixture::NOW,
        "{v}"
    );
    let r = site.answer_as(&req("/api/v1/jobs/7?forecast=1"), Some(who("root")));
    assert_eq!(json(&r)["forecast"]["pending"], 1);
}
