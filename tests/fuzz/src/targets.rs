//! The fuzz targets' bodies: one function per parser that takes outside
//! input, each checking the parser's contract (never panic, never loop or
//! allocate without bound, and a property that must hold on every input it
//! accepts).
//!
//! This file is compiled twice: by the cargo-fuzz crate in `tests/fuzz`
//! (libFuzzer, `scripts/fuzz`), and by the stable in-process smoke fuzzer
//! `tests/fuzz/smoke.rs` that `scripts/test` runs (no nightly needed). Keep it
//! free of anything but the workspace crates and std.

use std::sync::{Arc, OnceLock};

use allot_ledger::charge::Charging;
use allot_ledger::sacct::{self, Parser, RowOutcome};
use allot_sync::health::fixture::FixtureSource;
use allot_sync::health::{check_node, Verdict};
use allot_sync::health::{sxid, xid};
use allot_sync::server::http::{parse_head, parse_head_len, Limits};
use fairshare::duration::{format_slurm_duration, parse_slurm_duration};
use fairshare::record::{
    comment_min_runtime, recorded_min_runtime, recorded_sweep, with_recorded_min_runtime,
};
use fairshare::sweep::SweepCounter;
use fairshare::{Config, ContractPolicy, Engine, PendingJob, Tier};
use slurm_plugin::submit::{
    array_tasks, decide_modify, decide_submit, gpus_at_submission, GpuRequest, Modification,
    ModifyDecision, Refusal, Submission,
};

/// A target: a name (the cargo-fuzz binary and corpus directory) and its body.
pub type Target = (&'static str, fn(&[u8]));

/// Every target, in the order `scripts/fuzz` runs them.
pub const TARGETS: &[Target] = &[
    ("duration", duration),
    ("contract_token", contract_token),
    ("submit", submit),
    ("config_toml", config_toml),
    ("tres", tres),
    ("sacct", sacct_rows),
    ("health_fixture", health_fixture),
    ("kernel_log", kernel_log),
    ("trace", trace),
    ("http_request", http_request),
    ("site", site),
];

fn text(data: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(data)
}

/// Splits the input into `n` fields at NUL bytes (missing fields are `None`).
fn fields(data: &[u8], n: usize) -> Vec<Option<String>> {
    let mut out: Vec<Option<String>> = data
        .splitn(n, |b| *b == 0)
        .map(|f| Some(String::from_utf8_lossy(f).into_owned()))
        .collect();
    out.resize(n, None);
    out
}

/// The example tree of `examples/allot.toml` (the testbed's), parsed once.
fn example_config() -> &'static Config {
    static C: OnceLock<Config> = OnceLock::new();
    C.get_or_init(|| {
        Config::from_toml_str(include_str!("../../../examples/allot.toml"))
            .expect("examples/allot.toml is valid")
    })
}

/// Slurm time strings (`--min-runtime`, `min_runtime=` in `--comment`,
/// allot.toml durations, sacct `Elapsed`). Accepted values round-trip
/// through Slurm's display format.
pub fn duration(data: &[u8]) {
    let s = text(data);
    if let Ok(secs) = parse_slurm_duration(&s) {
        let shown = format_slurm_duration(secs);
        assert_eq!(
            parse_slurm_duration(&shown),
            Ok(secs),
            "{s:?} -> {secs} -> {shown:?}"
        );
    }
    if let Ok(Some(secs)) = sacct::parse_elapsed(&s) {
        assert_eq!(
            parse_slurm_duration(&s).ok(),
            Some(secs),
            "Elapsed {s:?} disagrees with the engine"
        );
    }
}

/// The contract tokens: the user's `min_runtime=` in `--comment` and the
/// recorded `allot:min_runtime=` in AdminComment. Recording a contract into
/// any AdminComment text must read back exactly that contract.
pub fn contract_token(data: &[u8]) {
    let f = fields(data, 2);
    let comment = f[0].as_deref().unwrap_or("");
    let n = f[1]
        .as_deref()
        .and_then(|s| s.bytes().next())
        .map_or(3600, |b| u64::from(b) * 97);
    let _ = recorded_min_runtime(comment);
    if let Some(v) = comment_min_runtime(comment) {
        let _ = ContractPolicy::default().min_runtime(Some(v), Some("gpu"), None);
    }
    let recorded = with_recorded_min_runtime(Some(comment), n);
    assert_eq!(
        recorded_min_runtime(&recorded),
        Some(n),
        "{comment:?} + {n}: {recorded:?}"
    );
    // Recording twice changes nothing more.
    assert_eq!(with_recorded_min_runtime(Some(&recorded), n), recorded);
}

/// job_submit/allot and the SPANK option value: account, partition,
/// `--min-runtime` (as the SPANK plugin accepted it), `--comment`,
/// AdminComment, then a modification of the same job.
pub fn submit(data: &[u8]) {
    let config = example_config();
    let f = fields(data, 7);
    let spank = f[2]
        .as_deref()
        .filter(|v| parse_slurm_duration(v).is_ok())
        .map(str::trim);
    let s = Submission {
        account: f[0].as_deref(),
        default_account: Some("a1"),
        partition: f[1].as_deref(),
        spank_min_runtime: spank,
        comment: f[3].as_deref(),
        admin_comment: f[4].as_deref(),
        // The TRES and array parsers read the same untrusted text.
        gpus: gpus_at_submission(&GpuRequest {
            per_job: f[3].as_deref(),
            per_node: f[4].as_deref(),
            per_task: f[5].as_deref(),
            per_socket: f[6].as_deref(),
            nodes: Some(2),
            tasks: Some(3),
            tasks_per_node: None,
            sockets_per_node: Some(2),
        }),
        time_limit: Some(600),
        tasks: array_tasks(f[5].as_deref()),
    };
    // A limit of one job: an array of more tasks is a sweep if short.
    let mut sweeps = SweepCounter::new(1, 900);
    match decide_submit(config, &s, &mut sweeps, 0) {
        Ok((account, secs, admin)) => {
            let short = config
                .priority
                .is_short(Tier::of(secs), s.gpus, s.time_limit);
            assert_eq!(
                recorded_sweep(&admin),
                short && s.tasks > 1,
                "sweep mark of {admin:?} ({} GPUs, {} tasks)",
                s.gpus,
                s.tasks
            );
            assert!(
                config.tree.leaf_of_account(&account).is_some(),
                "accepted an account outside the tree"
            );
            assert!(
                secs <= config.contract.max_min_runtime,
                "accepted {secs} s above the cap"
            );
            assert!(secs <= 600, "accepted {secs} s above the 600 s time limit");
            assert_eq!(
                recorded_min_runtime(&admin),
                Some(secs),
                "recorded {admin:?} for {secs}"
            );
            let pending = f[6].as_deref().is_some_and(|p| p.len() % 2 == 0);
            let m = Modification {
                comment: f[5].as_deref(),
                admin_comment: f[6].as_deref(),
                current_admin_comment: Some(&admin),
                partition: s.partition,
                time_limit: s.time_limit,
                pending,
            };
            match decide_modify(config, &m) {
                ModifyDecision::SetJobAdminComment(c) | ModifyDecision::SetAdminComment(c) => {
                    let new =
                        recorded_min_runtime(&c).expect("a modification must keep a contract");
                    assert!(new <= config.contract.max_min_runtime && new <= 600);
                    if !pending {
                        assert_eq!(new, secs, "a running job's contract changed");
                    }
                }
                ModifyDecision::Unchanged => {
                    if !pending {
                        if let Some(admin) = m.admin_comment {
                            // An operator's new AdminComment already carries the contract.
                            assert_eq!(recorded_min_runtime(admin), Some(secs));
                        }
                    }
                }
                ModifyDecision::NotPending(_) => assert!(!pending),
                ModifyDecision::Invalid(_) => {}
            }
        }
        Err(Refusal::MinRuntime(m)) => {
            // A value the SPANK option accepted is never refused as unparsable.
            if spank.is_some() {
                assert!(
                    m.contains("above the cluster's cap")
                        || m.contains("above the job's time limit of 00:10:00"),
                    "SPANK accepted {spank:?}, job_submit said {m}"
                );
            }
        }
        Err(Refusal::Account(_)) => {}
    }
}

/// allot.toml: any text either loads or is refused with errors; a loaded
/// config builds an engine whose priorities keep the tier order.
pub fn config_toml(data: &[u8]) {
    let s = text(data);
    let Ok(config) = Config::from_toml_str(&s) else {
        return;
    };
    let accounts: Vec<String> = config
        .tree
        .accounts()
        .map(|(a, _)| a.to_string())
        .take(64)
        .collect();
    let usage: Vec<(String, f64)> = accounts
        .iter()
        .enumerate()
        .map(|(i, a)| (a.clone(), (i as f64) * 3600.0 * 7.0))
        .collect();
    let now = 1_700_000_000;
    let (engine, _) = Engine::from_account_usage(
        Arc::new(config),
        usage.iter().map(|(a, u)| (a.as_str(), *u)),
        now,
    );
    for a in &accounts {
        let fs = engine
            .fair_share(a)
            .expect("an account of the tree has a fair-share");
        assert!(fs > 0.0 && fs <= 1.0, "fair-share {fs} of {a}");
        let job = |min_runtime, nice| PendingJob {
            id: 0,
            account: a,
            min_runtime,
            nice,
            eligible_time: now - 3600,
            gpus: 1,
            time_limit: None,
            sweep: false,
        };
        let low_alloc = engine.priority(&job(1, 1_000_000));
        let high_free = engine.priority(&job(0, -1_000_000));
        assert!(
            low_alloc > high_free,
            "an allocated job must sort above every free-tier job"
        );
        let _ = engine.priority_factors(&job(3600, 0));
        let _ = Tier::of(0);
    }
}

/// TRES strings (sacct `AllocTRES`, slurmctld's `tres_fmt_alloc_str`).
pub fn tres(data: &[u8]) {
    let s = text(data);
    let gpus = fairshare::tres::gpu_count(&s);
    let counts = fairshare::tres::counts(&s);
    let rate = fairshare::charge::ChargeWeights::default()
        .rate_of_counts(&counts, gpus.clone().unwrap_or(0));
    // Weighted rates are summed in f64 and counted in milli-units: exact
    // below 2^53 milli-units per second (a count above that is not a
    // cluster; the fuzzer found 2.4e16 GPUs rounding up by one).
    if let Some(g) = gpus
        .as_ref()
        .ok()
        .copied()
        .filter(|g| *g < (1 << 53) / 1000)
    {
        assert_eq!(rate, 1000 * g, "default weights charge GPUs only");
    }
    let _ = example_config()
        .charge
        .rate_of_counts(&counts, gpus.unwrap_or(0));
}

/// sacct `--parsable2` bytes: the first line is a `--from` dump header, the
/// rest rows read as `allot sync` reads them ([`Parser::rows`]: free text
/// with `|`, newlines and bytes that are not UTF-8); the same rows are also
/// read as live rows (epoch times). Rows cover their lines in order, none
/// twice; an error names its line; every row parsed is charged as `allot
/// sync` would.
pub fn sacct_rows(data: &[u8]) {
    // Raw bytes, as a dump is read: the header line, then rows (free text
    // may hold `|`, newlines and bytes that are not UTF-8).
    let (header, body) = match data.iter().position(|b| *b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &data[data.len()..]),
    };
    let charging = Charging::from_config(example_config());
    let live = Parser::live(jiff::tz::TimeZone::UTC);
    let dump = Parser::from_header_line(&String::from_utf8_lossy(header), paris()).ok();
    let lines = body.iter().filter(|b| **b == b'\n').count() as u64 + 1;
    for p in dump.iter().chain(std::iter::once(&live)) {
        let mut next = 2u64; // rows cover their lines in order, none twice
        for row in p.rows(body, 2).take(256) {
            let row = row.expect("reading from memory never fails");
            assert!(
                row.line >= next,
                "row at line {} overlaps the one before",
                row.line
            );
            assert!(row.lines >= 1 && row.lines as usize <= sacct::MAX_JOINED_LINES);
            next = row.line + row.lines;
            assert!(next <= lines + 2, "a row past the end: {row:?}");
            let _ = p.held_gpu_seconds(&row.text); // never panics
            match p.parse_row(&row) {
                Ok(RowOutcome::Attempt(a)) => {
                    let r = charging.record(&a);
                    if let (Some(s), Some(ce)) = (r.start, r.charge_end) {
                        assert!(ce >= s, "charged end {ce} before start {s}");
                    }
                    if r.min_runtime == 0 {
                        assert_eq!(r.charged, 0, "a free-tier attempt was charged");
                    }
                }
                Ok(_) => {}
                Err(e) => assert_eq!(e.line, Some(row.line), "an error names its line"),
            }
        }
    }
}

fn paris() -> jiff::tz::TimeZone {
    static TZ: OnceLock<jiff::tz::TimeZone> = OnceLock::new();
    TZ.get_or_init(|| jiff::tz::TimeZone::get("Europe/Paris").unwrap_or(jiff::tz::TimeZone::UTC))
        .clone()
}

/// `allot health --fixture` JSON: parsed and judged; a fixture whose NVML
/// failed to initialise is never judged failed (never drains). The kernel
/// log reaches every GPU whose PCI address is known, one whose handle NVML
/// cannot open too (issue 53): a critical Xid logged at a GPU's address
/// fails that GPU.
pub fn health_fixture(data: &[u8]) {
    let s = text(data);
    let Ok(mut fx) = FixtureSource::parse(&s) else {
        return;
    };
    if fx.nvml_status().is_err() {
        return; // `allot health` reports the node unknown without reading GPUs
    }
    let report = check_node("node", &mut fx, Some(8));
    if report.gpus.is_empty() && report.found == 0 {
        assert_ne!(
            report.verdict,
            Verdict::Healthy,
            "no GPU found of 8 expected"
        );
    }
    // A GPU whose fabric registration is recorded not started or in
    // progress (its NVSwitch fabric unusable) is failed.
    for i in fabric_not_ready(&s) {
        if let Some(g) = report.gpus.iter().find(|g| g.index == i) {
            assert_eq!(g.verdict, Verdict::Failed, "gpu{i}'s fabric is not ready");
        }
    }
    let (log, sxids) = fixture_kernel_log(&s);
    if sxids
        .iter()
        .any(|e| sxid::classify(e) == sxid::SxidClass::Reset)
    {
        assert!(
            matches!(report.nvswitch, allot_sync::health::Check::Failed(_))
                && report.verdict == Verdict::Failed,
            "a fatal SXid in {sxids:?}, but nvswitch {:?}, node {:?}",
            report.nvswitch,
            report.verdict
        );
    }
    for g in &report.gpus {
        let Some(key) = g.pci_bus_id.as_deref().and_then(xid::pci_key) else {
            continue;
        };
        let at = xid::xids_at(&log, key);
        if at
            .iter()
            .any(|x| xid::classify(x) == xid::XidClass::Critical)
        {
            assert_eq!(
                g.verdict,
                Verdict::Failed,
                "gpu{} at {key:?} has {at:?} in the kernel log",
                g.index
            );
        }
    }
}

/// The indexes of a fixture's GPUs whose `fabric` state is not started or
/// in progress (by name or NVML's number), read by their probes (neither
/// lost nor unreadable).
fn fabric_not_ready(s: &str) -> Vec<u32> {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(s) else {
        return Vec::new();
    };
    let Some(gpus) = v.get("gpus").and_then(|g| g.as_array()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (pos, g) in gpus.iter().enumerate() {
        if g.get("lost").is_some() || g.get("unreadable").is_some() {
            continue;
        }
        let state = g.get("fabric").and_then(|f| f.get("state"));
        let not_ready = match state {
            Some(serde_json::Value::String(s)) => s == "not_started" || s == "in_progress",
            Some(n) => matches!(n.as_u64(), Some(1 | 2)),
            None => false,
        };
        let index = g
            .get("index")
            .and_then(|i| i.as_u64())
            .unwrap_or(pos as u64);
        if not_ready {
            if let Ok(i) = u32::try_from(index) {
                out.push(i);
            }
        }
    }
    out
}

/// The Xids and SXids of a fixture's `kernel_log` lines (none without
/// one).
fn fixture_kernel_log(s: &str) -> (Vec<(xid::PciKey, xid::XidEvent)>, Vec<sxid::SxidEvent>) {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(s) else {
        return (Vec::new(), Vec::new());
    };
    let Some(lines) = v.get("kernel_log").and_then(|l| l.as_array()) else {
        return (Vec::new(), Vec::new());
    };
    let text: String = lines
        .iter()
        .filter_map(|l| l.as_str())
        .map(|l| format!("{l}\n"))
        .collect();
    (xid::xids_in(&text), sxid::sxids_in(&text))
}

/// The kernel log `allot health` reads from /dev/kmsg
/// (`allot_sync::health::xid`, `::sxid`): at most one Xid and one SXid per
/// line; an Xid read from a line reads back the same (GPU address, number,
/// severity word, MIG instance) from the line allot would write for it,
/// and an SXid the same (switch, address, number, severity word); a MIG
/// GPU instance (`GPU-I:07`) added after an Xid line's PCI address changes
/// nothing but the instance (issue 53: such lines were dropped, and the
/// Xid read healthy); an SXid the catalogue resolves with a reset needs
/// one whatever its line says.
pub fn kernel_log(data: &[u8]) {
    let s = text(data);
    assert!(xid::xids_in(&s).len() <= s.lines().count());
    assert!(sxid::sxids_in(&s).len() <= s.lines().count());
    for line in s.lines().take(256) {
        let Some(e) = sxid::parse_sxid_line(line) else {
            continue;
        };
        let canon = sxid_line(&e);
        assert_eq!(
            sxid::parse_sxid_line(&canon).as_ref(),
            Some(&e),
            "{line:?} rewritten as {canon:?}"
        );
        if sxid::RESET_SXIDS.contains(&e.sxid) {
            assert_eq!(sxid::classify(&e), sxid::SxidClass::Reset, "{line:?}");
        }
    }
    for line in s.lines().take(256) {
        let Some((key, x)) = xid::parse_xid_line(line) else {
            continue;
        };
        let canon = xid_line(key, &x);
        assert_eq!(
            xid::parse_xid_line(&canon),
            Some((key, x.clone())),
            "{line:?} rewritten as {canon:?}"
        );
        let mig = with_gpu_instance(line, "07");
        let (k2, x2) = xid::parse_xid_line(&mig)
            .unwrap_or_else(|| panic!("{line:?} with a GPU instance ({mig:?}) was dropped"));
        assert_eq!(
            (k2, x2.xid, &x2.severity, x2.gpu_instance.as_deref()),
            (key, x.xid, &x.severity, Some("07")),
            "{mig:?}"
        );
    }
}

/// The kernel line of an Xid, as the driver writes it.
fn xid_line(key: xid::PciKey, x: &xid::XidEvent) -> String {
    let mut s = format!("NVRM: Xid (PCI:{:04x}:{:02x}:{:02x}", key.0, key.1, key.2);
    if let Some(i) = &x.gpu_instance {
        s.push_str(&format!(" GPU-I:{i}"));
    }
    s.push_str(&format!("): {}, pid=1, name=fuzz", x.xid));
    if let Some(w) = &x.severity {
        s.push_str(&format!(", UNIT {w} XC0"));
    }
    s
}

/// The kernel line of an SXid, as the NVSwitch driver writes it.
fn sxid_line(e: &sxid::SxidEvent) -> String {
    let mut s = format!("nvidia-{}: SXid (PCI:{}): {}", e.switch, e.pci, e.sxid);
    if let Some(w) = &e.severity {
        s.push_str(&format!(", {w}"));
    }
    s.push_str(", Link 1 fuzz (First)");
    s
}

/// `line` with ` GPU-I:INST` right after the PCI address of its first
/// `NVRM: Xid (` parenthesis (a line that has one).
fn with_gpu_instance(line: &str, inst: &str) -> String {
    let start = line.find("NVRM: Xid (").expect("an Xid line") + "NVRM: Xid (".len();
    let inner = &line[start..];
    let lead = inner.len() - inner.trim_start().len();
    let end = start
        + lead
        + inner[lead..]
            .find(|c: char| c.is_whitespace() || c == ')')
            .unwrap_or(inner.len() - lead);
    format!("{} GPU-I:{inst}{}", &line[..end], &line[end..])
}

/// `allot sim` traces (allot CSV, Philly, Helios, Alibaba; the header
/// decides) and `--cluster` specs: jobs come out sorted, the first
/// submission at 0, none without GPUs.
pub fn trace(data: &[u8]) {
    let s = text(data);
    let _ = allot_sim::ClusterSpec::parse(&s);
    let Ok(t) = allot_sim::trace::parse(&s, None) else {
        return;
    };
    assert!(
        t.jobs.windows(2).all(|w| w[0].submit <= w[1].submit),
        "jobs out of order"
    );
    assert!(t.jobs.iter().all(|j| j.gpus > 0), "a job without GPUs");
    if let Some(first) = t.jobs.first() {
        if t.events.is_empty() {
            assert_eq!(
                first.submit, 0,
                "times are normalised to the first submission"
            );
        }
    }
}

/// The sidecar's HTTP request heads (`allot_sync::server::http::parse_head`,
/// default limits): an accepted request has a path that starts with `/`, no
/// control character in its target, lower-cased header names and a head
/// within the size limit that parses alone to the same request; no prefix
/// shorter than the head is a request (a reader feeding the bytes as they
/// arrive never answers early).
pub fn http_request(data: &[u8]) {
    let limits = Limits::default();
    let full = parse_head_len(data, &limits);
    assert_eq!(
        parse_head(data, &limits),
        full.clone().map(|r| r.map(|(req, _)| req)),
        "parse_head and parse_head_len disagree"
    );
    // Prefixes shorter than `end` must not be a request.
    let end = match &full {
        Ok(Some((req, len))) => {
            assert!(req.path.starts_with('/'), "path {:?}", req.path);
            let mut target = req
                .path
                .chars()
                .chain(req.query.iter().flat_map(|q| q.chars()));
            assert!(
                !target.any(char::is_control),
                "control character in {:?} {:?}",
                req.path,
                req.query
            );
            assert!(req
                .headers
                .iter()
                .all(|(k, _)| !k.bytes().any(|b| b.is_ascii_uppercase())));
            assert!(
                *len <= data.len() && *len <= limits.max_head_bytes,
                "head of {len} bytes"
            );
            assert_eq!(
                parse_head(&data[..*len], &limits),
                Ok(Some(req.clone())),
                "the head alone parses differently"
            );
            *len
        }
        _ => data.len() + 1,
    };
    let below = end.min(data.len() + 1);
    // Every prefix up to 1024 bytes; beyond, 1024 spread evenly plus the 64
    // just before the end (every prefix of an 8 KiB input would be 32 MiB of
    // parsing per input).
    let check = |k: usize| {
        assert!(
            !matches!(parse_head(&data[..k], &limits), Ok(Some(_))),
            "a request after {k} of {end} bytes"
        );
    };
    if below <= 1024 {
        (0..below).for_each(check);
    } else {
        (0..1024).map(|i| i * below / 1024).for_each(check);
        (below.saturating_sub(64)..below).for_each(check);
    }
}

/// The sidecar's routes and pages (`allot_sync::server::site`) over a
/// fixed real ledger: the input is a request head, then after a NUL the
/// name of the pending job 7 (what a user controls), then after another
/// NUL which PrivateData flags are set. Every request that parses gets an
/// answer of a known status; no page ever carries a `<script`, the job's
/// page shows its name escaped, and a JSON answer is JSON.
pub fn site(data: &[u8]) {
    use allot_sync::server::{fixture, privacy::PrivateData};
    static LEDGER: OnceLock<std::path::PathBuf> = OnceLock::new();
    let ledger = LEDGER.get_or_init(|| fixture::temp_ledger("fuzz-site"));
    let mut parts = data.splitn(3, |b| *b == 0);
    let head = parts.next().unwrap_or_default();
    let name = String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    let flags = parts
        .next()
        .unwrap_or_default()
        .first()
        .copied()
        .unwrap_or(0);
    let private = PrivateData {
        jobs: flags & 1 != 0,
        usage: flags & 2 != 0,
        accounts: flags & 4 != 0,
        users: flags & 8 != 0,
    };
    let Ok(Some(req)) = parse_head(head, &Limits::default()) else {
        return;
    };
    let r = fixture::site(ledger, private, &name).answer(&req);
    assert!(
        [200, 303, 400, 401, 403, 404].contains(&r.status),
        "status {} for {:?}",
        r.status,
        req.path
    );
    let body = String::from_utf8_lossy(&r.body);
    if r.content_type.starts_with("text/html") {
        assert!(!body.contains("<script"), "a script on a page");
        if req.path == "/jobs/7" && r.status == 200 {
            let shown = allot_sync::reports::budget_page::esc(&name);
            assert!(body.contains(shown.as_str()), "the name not shown escaped");
        }
    }
    if r.content_type.starts_with("application/json") {
        serde_json::from_str::<serde_json::Value>(&body).expect("JSON");
    }
}
