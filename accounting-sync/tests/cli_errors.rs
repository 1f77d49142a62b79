//! Bad input to `allot sync --from`, `allot report` and `allot sim`: a clear
//! error naming the field and the fix, a non-zero exit, and no ledger left
//! behind by a failed run (no Slurm needed).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const HEADER: &str =
    "JobID|JobIDRaw|Account|User|Partition|AllocTRES|Submit|Start|End|Elapsed|State|AdminComment\n";

mod common;
use common::example;

fn allot() -> Command {
    let mut c = common::allot();
    c.env("ALLOT_LOG", "warn");
    c
}

/// A fresh directory for one test.
fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("allot-errors-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `allot sync --from DUMP --ledger LEDGER` (UTC) plus `extra`.
fn sync_from(dump: &Path, ledger: &Path, extra: &[&str]) -> Output {
    allot()
        .args(["sync", "--timezone", "UTC", "--config"])
        .arg(example())
        .arg("--ledger")
        .arg(ledger)
        .arg("--from")
        .arg(dump)
        .args(extra)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The ledger file and its companions: none may be left by a failed run.
fn no_ledger_files(ledger: &Path) {
    for suffix in ["", "-wal", "-shm", ".lock"] {
        let p = format!("{}{suffix}", ledger.display());
        assert!(!Path::new(&p).exists(), "{p} left behind");
    }
}

#[test]
fn a_dump_without_jobs_is_an_error_unless_allowed() {
    let d = dir("empty");
    let ledger = d.join("ledger.sqlite");
    let cases = [
        ("header", String::new(), "the dump has a header but no rows"),
        (
            "steps",
            "5101.batch|5101.batch|a1|alice||cpu=1|100|110|3710|01:00:00|COMPLETED|\n\
             5101.0|5101.0|a1|alice||cpu=1|100|110|3710|01:00:00|COMPLETED|\n"
                .to_string(),
            "no job attempt in the dump: 2 rows read, 2 job steps skipped. Nothing imported; save the dump with sacct -X",
        ),
        (
            "bad",
            "x9|x9|a1|alice|gpu|gres/gpu=1|100|110|3710|01:00:00|COMPLETED|\n".to_string(),
            "1 row read, 1 unreadable, holding 1.0 GPU-h (the first: sacct row at line 2 for job x9: field JobIDRaw = \"x9\": not a job number)",
        ),
    ];
    for (name, rows, want) in cases {
        let dump = d.join(format!("{name}.psv"));
        std::fs::write(&dump, format!("{HEADER}{rows}")).unwrap();
        let out = sync_from(&dump, &ledger, &[]);
        let e = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{name}: {e}");
        assert!(e.contains(want), "{name}: {e}");
        assert!(
            e.contains("sacct -a -X -D --parsable2") && e.contains("pass --allow-empty"),
            "{name}: {e}"
        );
        no_ledger_files(&ledger);
    }
    // --allow-empty: an empty ledger on purpose (what the end-to-end
    // tests' reset_ledger(&[]) does).
    let dump = d.join("header.psv");
    let out = sync_from(&dump, &ledger, &["--allow-empty"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(ledger.exists());
    // A dump with one job among steps imports it.
    let dump = d.join("one.psv");
    std::fs::write(
        &dump,
        format!(
            "{HEADER}5101|5101|a1|alice|gpu|gres/gpu=1|100|110|3710|01:00:00|COMPLETED|\n\
             5101.batch|5101.batch|a1|alice||cpu=1|100|110|3710|01:00:00|COMPLETED|\n"
        ),
    )
    .unwrap();
    let out = sync_from(&dump, &ledger, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 new attempts"));
    // --allow-empty needs --from.
    let out = allot().args(["sync", "--allow-empty"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_dump_without_its_header_says_so() {
    let d = dir("noheader");
    let ledger = d.join("ledger.sqlite");
    let dump = d.join("rows.psv");
    std::fs::write(
        &dump,
        "5101|5101|a1|alice|gpu|gres/gpu=1|100|110|3710|01:00:00|COMPLETED|\n",
    )
    .unwrap();
    let out = sync_from(&dump, &ledger, &[]);
    let e = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(
        e.contains("is not a sacct --parsable2 header")
            && e.contains("the first line must be the header")
            && e.contains(
                "save the dump without --noheader: SLURM_TIME_FORMAT=%s sacct -a -X -D --parsable2"
            ),
        "{e}"
    );
    assert!(!e.contains("lacks"), "{e}");
    no_ledger_files(&ledger);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn failed_syncs_leave_no_ledger_behind() {
    let d = dir("nothing-new");
    let ledger = d.join("ledger.sqlite");
    // A missing dump.
    let out = sync_from(&d.join("missing.psv"), &ledger, &[]);
    let e = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(
        e.contains("--from ") && e.contains("missing.psv: cannot open the dump"),
        "{e}"
    );
    no_ledger_files(&ledger);
    // A bad --listen (here through its alias --metrics-listen): its form
    // and an example, before any ledger.
    for bad in ["foo", "127.0.0.1", "127.0.0.1:notaport"] {
        let out = allot()
            .args(["sync", "--follow", "--no-drain", "--sacct", "/bin/true"])
            .arg("--config")
            .arg(example())
            .arg("--ledger")
            .arg(&ledger)
            .args(["--metrics-listen", bad])
            .output()
            .unwrap();
        let e = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{bad}: {e}");
        assert!(
            e.contains(&format!("--listen {bad:?}: not ADDR:PORT"))
                && e.contains("write ADDR:PORT, e.g. 127.0.0.1:9817"),
            "{bad}: {e}"
        );
        no_ledger_files(&ledger);
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn follow_only_flags_are_refused_with_from() {
    let d = dir("follow-only");
    let dump = d.join("header.psv");
    std::fs::write(&dump, HEADER).unwrap();
    let ledger = d.join("ledger.sqlite");
    for (flag, extra) in [
        ("--listen", &["--metrics-listen", "127.0.0.1:0"][..]),
        ("--listen", &["--listen", "127.0.0.1:0"][..]),
        ("--interval", &["--interval", "5m"][..]),
        ("--no-drain", &["--no-drain"][..]),
    ] {
        let out = sync_from(&dump, &ledger, extra);
        let e = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{flag}: {e}");
        assert!(
            e.contains(&format!(
                "{flag} acts only with --follow, and --from imports the dump once and exits: drop {flag}"
            )),
            "{flag}: {e}"
        );
        no_ledger_files(&ledger);
    }
    let _ = std::fs::remove_dir_all(&d);
}

fn report(ledger: &Path, extra: &[&str]) -> Output {
    allot()
        .args(["report", "--capacity", "8", "--config"])
        .arg(example())
        .arg("--ledger")
        .arg(ledger)
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn report_of_a_ledger_without_jobs_is_an_error() {
    let d = dir("report");
    let ledger = d.join("ledger.sqlite");
    let html = d.join("page.html");
    // Never written.
    for extra in [&[][..], &["--html", html.to_str().unwrap()][..]] {
        let out = report(&ledger, extra);
        let e = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{e}");
        assert!(
            e.contains(&format!(
                "no ledger at {} yet (never synced): fill it with `allot sync`",
                ledger.display()
            )) && e.contains("`allot sync --from DUMP`"),
            "{e}"
        );
        assert!(out.stdout.is_empty(), "no table of zeros");
        assert!(!html.exists());
    }
    // Created, no rows.
    let dump = d.join("header.psv");
    std::fs::write(&dump, HEADER).unwrap();
    assert!(sync_from(&dump, &ledger, &["--allow-empty"])
        .status
        .success());
    let out = report(&ledger, &["--html", html.to_str().unwrap()]);
    let e = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(
        e.contains(&format!(
            "the ledger {} has no jobs yet: fill it with `allot sync`",
            ledger.display()
        )),
        "{e}"
    );
    assert!(out.stdout.is_empty() && !html.exists());
    // Jobs, none in the window: zero usage is a real answer, said once.
    std::fs::write(
        &dump,
        format!("{HEADER}5101|5101|a1|alice|gpu|gres/gpu=1|100|110|3710|01:00:00|COMPLETED|\n"),
    )
    .unwrap();
    assert!(sync_from(&dump, &ledger, &[]).status.success());
    let out = report(&ledger, &[]);
    let e = stderr(&out);
    assert!(out.status.success(), "{e}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("Cluster: charged 0.000 GPU-h"));
    assert!(
        e.contains("no GPU use in this window: the ledger") && e.contains("has 1 job attempt(s)"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn sim_names_a_missing_or_foreign_trace() {
    let d = dir("sim");
    // `allot sim --trace TRACE`, which must fail with exit status 1: its
    // stderr.
    let sim_error = |trace: &Path| {
        let out = allot()
            .args(["sim", "--config"])
            .arg(example())
            .arg("--trace")
            .arg(trace)
            .output()
            .unwrap();
        let e = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{e}");
        e
    };
    let missing = d.join("missing.sqlite");
    let e = sim_error(&missing);
    assert!(
        e.contains(&format!("--trace {}: no such file", missing.display())),
        "{e}"
    );
    assert!(!e.contains("--ledger"), "sim has no --ledger: {e}");
    let foreign = d.join("other.sqlite");
    std::fs::write(&foreign, "").unwrap();
    let e = sim_error(&foreign);
    assert!(
        e.contains("not an allot ledger") && !e.contains("--ledger"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&d);
}
