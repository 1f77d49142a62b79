//! Researchers see why (issue 40), as a researcher does: alice, a plain
//! user who cannot read the ledger, asks the sidecar (`[server] url`)
//! through munge. Her free-tier job is preempted by bob's allocated job;
//! `allot explain --json` names bob's job and the rule, `allot -v` says it
//! asked the sidecar as alice, the page `/jobs/<id>` says the same; with
//! `PrivateData=jobs` in slurm.conf, bob's `allot explain` of her job is
//! refused (and a browser's page), while hers still answers.
//!
//! Before PrivateData, headless Chromium (Debian's `chromium`) renders the
//! budget page and the job's page: their DOM (`--dump-dom`) holds what the
//! pages should show, and their screenshots go to `$ALLOT_SCREENSHOTS`
//! (docs/screenshots/ is regenerated so) or the testbed dir. Chromium is
//! needed on the host (scripts/testbed install brings it); in a Slurm root
//! (`ALLOT_SLURM_ROOT`, scripts/slurm-root) that step is skipped and says
//! so: the host's run takes the screenshots.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use allot_e2e::{exclusive, free_port, wait_until, Killed, Testbed};

/// slurm.conf with an extra line until dropped (then reconfigured back).
struct SlurmConfRestore<'a> {
    tb: &'a Testbed,
    good: String,
}

impl Drop for SlurmConfRestore<'_> {
    fn drop(&mut self) {
        let conf = std::env::var("SLURM_CONF").unwrap();
        std::fs::write(&conf, &self.good).unwrap();
        let _ = self.tb.run("scontrol", &["reconfigure"]);
    }
}

/// `GET path` on 127.0.0.1:port, anonymously (a browser): (status, body).
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    get_with(port, path, "")
}

/// `GET path` with `headers` (each line ending in CRLF): (status, body).
fn get_with(port: u16, path: &str, headers: &str) -> Option<(u16, String)> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let (head, body) = out.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, body.to_string()))
}

/// Headless Chromium (Debian's `chromium`) on `url`: saves a screenshot
/// as `png` (checked: a PNG over 10 KB) and returns the DOM it rendered
/// (`--dump-dom`). Panics, naming the package, when chromium is missing.
fn chromium(url: &str, png: &Path, profile: &Path) -> String {
    let run = |what: &[String]| -> Output {
        Command::new("chromium")
            .args([
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--window-size=1200,1400",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .args(what)
            .arg(url)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "chromium not runnable ({e}): install Debian's package `chromium` \
                     (apt-get install chromium; scripts/testbed install does on the host)"
                )
            })
    };
    let _ = std::fs::remove_file(png);
    let out = run(&[format!("--screenshot={}", png.display())]);
    let bytes = std::fs::read(png).unwrap_or_else(|e| {
        panic!(
            "chromium wrote no screenshot of {url} to {} ({e}): {}",
            png.display(),
            text(&out)
        )
    });
    assert!(
        bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        "{} is not a PNG",
        png.display()
    );
    assert!(
        bytes.len() > 10 * 1024,
        "{} is only {} bytes: a blank page?",
        png.display(),
        bytes.len()
    );
    let out = run(&["--dump-dom".to_string()]);
    assert!(
        out.status.success(),
        "chromium --dump-dom {url}: {}",
        text(&out)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The budget page and job `victim`'s page (preempted by `bob`) as a
/// browser renders them, with screenshots.
fn screenshots(tb: &Testbed, port: u16, victim: u32, bob: u32) {
    if let Ok(v) = std::env::var("ALLOT_SLURM_ROOT") {
        eprintln!(
            "screenshots skipped in the Slurm {v} root: the host's run takes them \
             (headless chromium)"
        );
        return;
    }
    let dir = std::env::var_os("ALLOT_SCREENSHOTS").map_or_else(|| tb.dir.clone(), PathBuf::from);
    std::fs::create_dir_all(&dir).unwrap();
    let profile = tb.dir.join("chromium-profile");
    let base = format!("http://127.0.0.1:{port}");

    let dom = chromium(
        &format!("{base}/jobs/{victim}"),
        &dir.join("job-page.png"),
        &profile,
    );
    assert!(
        dom.contains(&format!("data-field=\"preempted_by\">job {bob}</a>"))
            && dom.contains("<b data-field=\"rule\">free_tier</b>"),
        "the job page in a browser: {dom}"
    );
    // The name is text: serialised back escaped, no <b> element of its own.
    assert!(
        dom.contains("alice's &lt;b&gt;job&lt;/b&gt; &amp; \"notes\"")
            && !dom.contains("<b>job</b>"),
        "the job's name as text in a browser: {dom}"
    );

    let dom = chromium(&format!("{base}/"), &dir.join("budget-page.png"), &profile);
    assert!(
        dom.contains("<form class=\"box\" method=\"get\" action=\"/jobs\">")
            && dom.contains("<input name=\"id\""),
        "the lookup form in a browser: {dom}"
    );
    assert!(
        dom.contains("data-field=\"rank\">1</td>"),
        "a ranking row in a browser: {dom}"
    );
    let _ = std::fs::remove_dir_all(&profile);
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The last preempted attempt in `allot explain --json` output that has a
/// preemption record.
fn recorded(v: &serde_json::Value) -> Option<&serde_json::Value> {
    v["requeues"]
        .as_array()?
        .iter()
        .rev()
        .find(|r| !r["preempted_by"].is_null())
}

#[test]
fn alice_sees_who_preempted_her_job_and_bob_is_refused_under_private_data() {
    let (_one, tb) = exclusive(&[]);
    let ledger = tb.ledger();
    // alice cannot read the ledger: it is SlurmUser's, 0640.
    let peek = Command::new("su")
        .args(["alice", "-c", &format!("head -c 16 {}", ledger.display())])
        .output()
        .unwrap();
    assert!(!peek.status.success(), "alice read the ledger");

    // The sidecar with the listener, and allot.toml naming it for users.
    let port = free_port();
    let conf = tb.dir.join("etc/allot-server.toml");
    let base = std::fs::read_to_string(tb.allot_conf()).unwrap();
    std::fs::write(
        &conf,
        format!(
            "{base}\n[server]\nurl = \"http://127.0.0.1:{port}\"\nmunge_socket = \"{}\"\n",
            tb.dir.join("munge/munge.socket").display()
        ),
    )
    .unwrap();
    Command::new("chmod")
        .arg("644")
        .arg(&conf)
        .status()
        .unwrap();
    let log = std::fs::File::create(tb.dir.join("sidecar-researchers.log")).unwrap();
    let _sidecar = Killed(
        Command::new(tb.allot_bin())
            .args(["sync", "--follow", "--interval", "1s", "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("--config")
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let conf = conf.to_str().unwrap().to_string();

    // alice's free-tier quarters fill the cluster; bob's allocated
    // quarter preempts one of them.
    let quarter = tb.total_gpus() / 4;
    let alice: Vec<u32> = (0..4)
        .map(|_| {
            tb.sbatch_gpus(
                quarter,
                &[
                    "--uid=alice",
                    "-A",
                    "b1",
                    "--min-runtime=0",
                    // A time limit bounds the forecast's replay (the
                    // history has no run times yet).
                    "--time=10:00",
                    "-J",
                    "alice's <b>job</b> & \"notes\"",
                    "-o",
                    "/dev/null",
                    "--wrap",
                    "sleep 300",
                ],
            )
        })
        .collect();
    for j in &alice {
        tb.wait_state(*j, "RUNNING", Duration::from_secs(60));
    }
    let bob = tb.sbatch_gpus(
        quarter,
        &[
            "--uid=bob",
            "-A",
            "a1",
            "--min-runtime=1:00",
            "--time=10:00",
            "-o",
            "/dev/null",
            "--wrap",
            "sleep 300",
        ],
    );
    tb.wait_state(bob, "RUNNING", Duration::from_secs(60));
    let victim = wait_until(
        Duration::from_secs(30),
        "one of alice's jobs requeued",
        || {
            alice
                .iter()
                .copied()
                .find(|j| tb.restarts(*j) > 0)
                .ok_or_else(|| "none yet".to_string())
        },
    );

    // alice, through the sidecar: the preemptor and the rule.
    let explained = wait_until(
        Duration::from_secs(60),
        "alice's explain names the preemptor",
        || {
            let out = tb.allot_as("alice", &format!("explain {victim} --json --config {conf}"));
            if !out.status.success() {
                return Err(text(&out));
            }
            let v: serde_json::Value =
                serde_json::from_slice(&out.stdout).map_err(|e| format!("{e}: {}", text(&out)))?;
            // The last preempted attempt (a testbed whose slurmctld state
            // was reset may reuse the id of a job still in sacct).
            // ... and the sidecar's snapshot of slurmctld after the
            // requeue (a pass reads squeue before sacct), once slurmctld
            // holds it pending again (COMPLETING first).
            if recorded(&v).is_none()
                || v["live"]["restarts"].as_u64() < Some(1)
                || v["live"]["state"] != "PENDING"
            {
                return Err(v.to_string());
            }
            Ok(v)
        },
    );
    let q = recorded(&explained).unwrap();
    assert_eq!(q["preempted_by"], u64::from(bob), "{explained}");
    assert_eq!(q["preemptor_account"], "a1", "{explained}");
    assert_eq!(q["rule"], "free_tier", "{explained}");
    assert_eq!(explained["user"], "alice", "{explained}");
    // Requeued, it waits again: its start forecast, replayed by the
    // sidecar from every job (alice's own squeue would not show them all).
    assert_eq!(explained["live"]["state"], "PENDING", "{explained}");
    let f = &explained["forecast"];
    let t = |k: &str| f[k].as_i64().unwrap_or_else(|| panic!("{k}: {explained}"));
    assert!(
        t("at") <= t("p10") && t("p10") <= t("p50") && t("p50") <= t("p90"),
        "{explained}"
    );
    assert!(f["running"].as_u64() >= Some(3), "{explained}");
    // `-v` says where the answer came from.
    let out = tb.allot_as("alice", &format!("-v explain {victim} --config {conf}"));
    assert!(out.status.success(), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not readable by you") && err.contains("as alice (munge)"),
        "{err}"
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(&format!("preempted for job {bob} of account a1"))
            && said.contains("rule free_tier")
            && said.contains("  Forecast start: "),
        "{said}"
    );
    // ... the same account of the attempt as root's, read from the ledger.
    let root_text = tb.allot_ok(&["explain", &victim.to_string(), "--config", &conf]);
    let attempts = |s: &str| -> Vec<String> {
        // Relative times ("5 s ago") may tick between the two runs.
        s.lines()
            .filter(|l| l.trim_start().starts_with("Attempt") || l.starts_with("    "))
            .filter(|l| !l.contains("Level FS"))
            .map(|l| l.split(" ago").last().unwrap_or(l).to_string())
            .collect()
    };
    assert!(!attempts(&said).is_empty(), "{said}");
    assert_eq!(attempts(&said), attempts(&root_text));

    // The page says the same, escaped.
    let (status, page) = get(port, &format!("/jobs/{victim}")).expect("the page");
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains(&format!("data-field=\"preempted_by\">job {bob}</a>"))
            && page.contains("<b data-field=\"rule\">free_tier</b>")
            && page.contains("<td data-field=\"forecast\">")
            && !page.contains("<td data-field=\"forecast\">none"),
        "{page}"
    );
    assert!(
        page.contains("alice&#39;s &lt;b&gt;job&lt;/b&gt; &amp; &quot;notes&quot;")
            && !page.contains("<b>job</b>"),
        "the job's name, escaped: {page}"
    );
    // A credential of alice's is good once, for its own request only.
    let path = format!("/api/v1/jobs/{victim}");
    let sock = tb.dir.join("munge/munge.socket");
    let cred = Command::new("su")
        .args([
            "alice",
            "-c",
            &format!("munge -S {} -s 'allot GET {path}'", sock.display()),
        ])
        .output()
        .unwrap();
    assert!(cred.status.success(), "{}", text(&cred));
    let header = format!(
        "Authorization: Munge {}\r\n",
        String::from_utf8_lossy(&cred.stdout).trim()
    );
    assert_eq!(get_with(port, &path, &header).unwrap().0, 200);
    let (status, body) = get_with(port, &path, &header).unwrap();
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("Replayed credential"), "{body}");
    let (status, body) = get_with(port, "/api/v1/report", &header).unwrap();
    assert_eq!(status, 401, "{body}");
    let (status, _) = get(port, "/").expect("the budget page");
    assert_eq!(status, 200);
    // ... and in a browser, with screenshots (anonymous sees all here).
    screenshots(&tb, port, victim, bob);

    // PrivateData=jobs: bob may not see alice's job; alice still may.
    let slurm_conf = std::env::var("SLURM_CONF").unwrap();
    let good = std::fs::read_to_string(&slurm_conf).unwrap();
    let _restore = SlurmConfRestore {
        tb: &tb,
        good: good.clone(),
    };
    std::fs::write(&slurm_conf, format!("{good}PrivateData=jobs\n")).unwrap();
    tb.ok("scontrol", &["reconfigure"]);
    let refused = wait_until(
        Duration::from_secs(30),
        "bob refused once the sidecar read PrivateData",
        || {
            let out = tb.allot_as("bob", &format!("explain {victim} --json --config {conf}"));
            if out.status.success() {
                Err(text(&out))
            } else {
                Ok(text(&out))
            }
        },
    );
    assert!(
        refused.contains("403") && refused.contains("PrivateData=jobs"),
        "{refused}"
    );
    let out = tb.allot_as("alice", &format!("explain {victim} --json --config {conf}"));
    assert!(out.status.success(), "{}", text(&out));
    // `allot forecast` reads squeue and sacct itself, which now show alice
    // her own jobs only: refused (it would forecast an emptier cluster),
    // pointing to `allot explain`, which asks the sidecar.
    let out = tb.allot_as("alice", &format!("forecast {victim} --config {conf}"));
    let said = text(&out);
    assert!(
        !out.status.success()
            && said.contains("PrivateData=jobs")
            && said.contains("allot explain"),
        "{said}"
    );
    let (status, page) = get(port, &format!("/jobs/{victim}")).expect("the page");
    assert_eq!(status, 403, "a browser is anonymous: {page}");
    tb.cancel_all();
}

/// What the budget page and report charge a team while its job runs:
/// sacct shows a job's AdminComment only once it has ended, so `allot
/// sync` reads a running attempt's contract from slurmctld instead, and a
/// free-tier job is not charged as an allocated one while it runs, nor a
/// long contract as the default. (Here rather than in `accounting`, whose
/// tests run beside each other: these jobs would change their ledgers.)
#[test]
fn a_running_attempt_has_the_contract_slurmctld_holds() {
    let (_one, tb) = exclusive(&[]);
    let job = |min: &str| {
        tb.sbatch_gpus(
            1,
            &[
                "-A",
                "a2",
                &format!("--min-runtime={min}"),
                "-t",
                "3:00:00",
                "-o",
                "/dev/null",
                "--wrap",
                "sleep 300",
            ],
        )
    };
    let (free, long) = (job("0"), job("2:00:00"));
    for j in [free, long] {
        tb.wait_state(j, "RUNNING", Duration::from_secs(60));
    }
    // slurmdbd learns of a start a moment after slurmctld: sync until
    // sacct lists both attempts.
    for (j, want) in [(free, 0), (long, 7200)] {
        let got = wait_until(
            Duration::from_secs(30),
            "the running attempt in the ledger",
            || {
                tb.allot_ok(&["sync", "--config", tb.allot_conf().to_str().unwrap()]);
                let reader = allot_ledger::LedgerReader::open(&tb.ledger()).unwrap();
                let a = reader.attempts_of_job(u64::from(j)).unwrap();
                match a.last().map(|a| &a.record) {
                    Some(r) if r.state == "RUNNING" => Ok((r.min_runtime, r.min_runtime_recorded)),
                    other => Err(format!("{other:?}")),
                }
            },
        );
        assert_eq!(got, (want, true), "job {j}");
    }
    tb.cancel_all();
}
