//! The plugins never write outside the paths in allot.toml (issue 9): no
//! code that slurmctld or a Slurm client loads creates, writes, renames or
//! removes a file. This is a static check of the sources of the four
//! plugins, their shared glue and the bindings (test modules excluded); the
//! ledger itself is opened read-only (`LedgerReader`, SQLITE_OPEN_READ_ONLY).
//! docs/hardening.md gives the whole argument.

use std::path::{Path, PathBuf};

const WRITE_APIS: &[&str] = &[
    "File::create",
    "OpenOptions",
    "fs::write",
    "create_dir",
    "remove_file",
    "remove_dir",
    "fs::rename",
    "fs::copy",
    "set_permissions",
    "hard_link",
    "symlink",
    "Ledger::open(",
    "SQLITE_OPEN_READ_WRITE",
    "SQLITE_OPEN_CREATE",
    "fopen",
    "libc::open",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n != "tests" && n != "target") {
                rust_files(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn plugin_code_has_no_file_writes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in [
        "src",
        "priority/src",
        "preempt/src",
        "job_submit/src",
        "spank/src",
        "../ffi/src",
    ] {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(files.len() >= 6, "found {files:?}");
    let mut found = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        // Unit tests (after `#[cfg(test)]`) may write temporary files.
        let code = text.split("#[cfg(test)]").next().unwrap();
        for (n, line) in code.lines().enumerate() {
            let line = line.split("//").next().unwrap();
            for api in WRITE_APIS {
                if line.contains(api) {
                    found.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "plugin code that writes files:\n{}",
        found.join("\n")
    );
}
