//! The Debian packages of `scripts/package`: their control fields and
//! contents (`dpkg-deb`), an install of both with dpkg, and dpkg refusing the
//! plugin package next to another Slurm version.
//!
//! Nothing here changes the machine's own packages: dpkg installs into a
//! private root (`--instdir`) with a private database (`--admindir`) that
//! holds copies of the real entries of the packages depended on (slurmctld
//! at its real version, or at another one), and apt is only asked to
//! simulate (`apt-get install --simulate`) against the real database.
//! Needs no testbed; scripts/test runs it with the other end-to-end tests
//! (scripts/package needs the installed Slurm, as the plugins' build does).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

fn ok(cmd: &mut Command) -> String {
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn both(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("allot-packages-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `scripts/package ARGS --output DIR`: (allot .deb, allot-slurm-plugins .deb).
fn package(args: &[&str], out: &Path) -> (PathBuf, PathBuf) {
    let text = ok(Command::new(root().join("scripts/package"))
        .args(args)
        .arg("--output")
        .arg(out)
        .current_dir(root()));
    let debs: Vec<PathBuf> = text.lines().map(PathBuf::from).collect();
    assert_eq!(debs.len(), 2, "scripts/package printed {text:?}");
    (debs[0].clone(), debs[1].clone())
}

fn field(deb: &Path, name: &str) -> String {
    ok(Command::new("dpkg-deb").arg("-f").arg(deb).arg(name))
        .trim()
        .to_string()
}

fn contents(deb: &Path) -> Vec<String> {
    ok(Command::new("dpkg-deb").arg("-c").arg(deb))
        .lines()
        .filter_map(|l| l.split_whitespace().last().map(str::to_string))
        .collect()
}

/// Package names in a Depends-style field (`a (>= 1), b | c`).
fn names(field: &str) -> Vec<String> {
    field
        .split([',', '|'])
        .filter_map(|d| d.split_whitespace().next())
        .filter(|n| !n.is_empty())
        .map(|n| n.split(':').next().unwrap().to_string())
        .collect()
}

/// A private dpkg database holding the real entries of `packages` (as
/// installed here), with slurmctld's version replaced by `slurmctld`.
fn admindir(dir: &Path, packages: &[String], slurmctld: &str) -> PathBuf {
    let admin = dir.join("admin");
    for sub in ["info", "updates", "triggers"] {
        std::fs::create_dir_all(admin.join(sub)).unwrap();
    }
    std::fs::write(admin.join("available"), "").unwrap();
    let mut status = String::new();
    let mut pkgs = packages.to_vec();
    pkgs.sort();
    pkgs.dedup();
    for p in &pkgs {
        let out = run(Command::new("dpkg-query").args(["-s", p]));
        if !out.status.success() {
            continue; // not installed here: dpkg will say so, as it should
        }
        let stanza = String::from_utf8_lossy(&out.stdout).into_owned();
        for entry in stanza.split("\n\n").filter(|s| !s.trim().is_empty()) {
            let mut e = entry.trim_end().to_string();
            if p == "slurmctld" {
                e = e
                    .lines()
                    .map(|l| {
                        if l.starts_with("Version: ") {
                            format!("Version: {slurmctld}")
                        } else {
                            l.to_string()
                        }
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
            }
            status += &e;
            status += "\n\n";
            let arch = e
                .lines()
                .find_map(|l| l.strip_prefix("Architecture: "))
                .unwrap_or("all");
            // Empty file lists: dpkg then knows these packages own no file.
            std::fs::write(admin.join("info").join(format!("{p}.list")), "").unwrap();
            std::fs::write(admin.join("info").join(format!("{p}:{arch}.list")), "").unwrap();
        }
    }
    std::fs::write(admin.join("status"), status).unwrap();
    admin
}

fn dpkg_private(admin: &Path, inst: &Path, args: &[&str], debs: &[&Path]) -> Output {
    std::fs::create_dir_all(inst).unwrap();
    run(Command::new("dpkg")
        .arg(format!("--admindir={}", admin.display()))
        .arg(format!("--instdir={}", inst.display()))
        .args(["--force-script-chrootless", "--log=/dev/null"])
        .args(args)
        .args(debs))
}

#[test]
fn packages_pin_slurm_and_install() {
    let t0 = std::time::Instant::now();
    let slurm = ok(Command::new("dpkg-query").args(["-W", "-f=${Version}", "slurmctld"]));
    let arch = ok(Command::new("dpkg").arg("--print-architecture"))
        .trim()
        .to_string();
    let version = env!("CARGO_PKG_VERSION");
    let out = scratch("debs");
    let (allot, plugins) = package(&[], &out);
    eprintln!("packages built in {:?}", t0.elapsed());

    // --- control fields -------------------------------------------------
    assert_eq!(field(&allot, "Package"), "allot");
    assert_eq!(field(&allot, "Version"), format!("{version}-1"));
    assert_eq!(field(&allot, "Architecture"), arch);
    let allot_depends = field(&allot, "Depends");
    assert!(
        allot_depends.contains("slurm-client") && allot_depends.contains("libc6"),
        "{allot_depends}"
    );
    assert_eq!(field(&plugins, "Package"), "allot-slurm-plugins");
    assert_eq!(
        field(&plugins, "Version"),
        format!("{version}+slurm{slurm}-1")
    );
    assert_eq!(field(&plugins, "Architecture"), arch);
    let pin = format!("slurmctld (= {slurm})");
    let depends = field(&plugins, "Depends");
    assert!(depends.split(", ").any(|d| d == pin), "Depends: {depends}");
    assert_eq!(field(&plugins, "Pre-Depends"), pin);
    let info = ok(Command::new("dpkg-deb").arg("-I").arg(&plugins));
    assert!(
        info.contains(" Pre-Depends: ") && info.contains(&pin),
        "{info}"
    );

    // --- contents -------------------------------------------------------
    let files = contents(&allot);
    for f in [
        "./usr/bin/allot",
        "./lib/systemd/system/allot-sync.service",
        "./etc/default/allot-sync",
        "./usr/share/doc/allot/README.md",
        "./usr/share/doc/allot/operating.md",
        "./usr/share/doc/allot/examples/allot.toml",
    ] {
        assert!(files.iter().any(|x| x == f), "{f} not in allot: {files:?}");
    }
    let conffiles = ok(Command::new("dpkg-deb")
        .arg("-I")
        .arg(&allot)
        .arg("conffiles"));
    assert_eq!(conffiles.trim(), "/etc/default/allot-sync");
    let plugin_dir = Path::new(
        &ok(Command::new("bash").args([
            "-c",
            "dirname \"$(find /usr/lib -name priority_basic.so -path '*slurm*' | head -n1)\"",
        ]))
        .trim()
        .to_string(),
    )
    .to_path_buf();
    let pfiles = contents(&plugins);
    for so in [
        "priority_allot.so",
        "preempt_allot.so",
        "job_submit_allot.so",
        "allot.so",
    ] {
        let want = format!(".{}", plugin_dir.join(so).display());
        assert!(
            pfiles.contains(&want),
            "{want} not in the plugins: {pfiles:?}"
        );
    }

    // --- install both into a private root, Slurm at its real version -----
    let dir = scratch("install");
    let mut deps = names(&allot_depends);
    deps.extend(names(&depends));
    deps.push("slurmctld".into());
    let admin = admindir(&dir, &deps, &slurm);
    let inst = dir.join("root");
    let o = dpkg_private(&admin, &inst, &["-i"], &[&allot, &plugins]);
    assert!(
        o.status.success(),
        "dpkg -i (matching Slurm) failed:\n{}",
        both(&o)
    );
    let status = ok(Command::new("dpkg-query")
        .arg(format!("--admindir={}", admin.display()))
        .args([
            "-W",
            "-f=${Package} ${Version} ${Status}\n",
            "allot",
            "allot-slurm-plugins",
        ]));
    assert!(
        status.contains(&format!(
            "allot-slurm-plugins {version}+slurm{slurm}-1 install ok installed"
        )),
        "{status}"
    );
    assert!(
        status.contains(&format!("allot {version}-1 install ok installed")),
        "{status}"
    );
    let inside = |p: &Path| inst.join(p.strip_prefix("/").unwrap());
    for so in [
        "priority_allot.so",
        "preempt_allot.so",
        "job_submit_allot.so",
        "allot.so",
    ] {
        let f = inside(&plugin_dir.join(so));
        let head = std::fs::read(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert_eq!(&head[..4], b"\x7fELF", "{}", f.display());
    }
    // The packaged binary runs, and the packaged unit verifies with it.
    let bin = inside(Path::new("/usr/bin/allot"));
    let v = ok(Command::new(&bin).arg("--version"));
    assert_eq!(v.trim(), format!("allot {version}"));
    let unit = std::fs::read_to_string(inside(Path::new("/lib/systemd/system/allot-sync.service")))
        .unwrap();
    let check = scratch("unit");
    std::fs::write(
        check.join("allot-sync.service"),
        unit.replace("/usr/bin/allot", &bin.display().to_string()),
    )
    .unwrap();
    let o = run(Command::new("systemd-analyze")
        .arg("verify")
        .arg(check.join("allot-sync.service")));
    assert!(
        o.status.success() && both(&o).trim().is_empty(),
        "{}",
        both(&o)
    );

    // --- another Slurm: dpkg refuses before unpacking anything ----------
    let other = "24.11.5-1";
    let dir2 = scratch("refuse");
    let admin2 = admindir(&dir2, &deps, other);
    let inst2 = dir2.join("root");
    let o = dpkg_private(&admin2, &inst2, &["-i"], &[&plugins]);
    let text = both(&o);
    assert!(
        !o.status.success(),
        "dpkg installed the plugins next to slurmctld {other}:\n{text}"
    );
    assert!(
        text.contains("pre-dependency problem") && text.contains(&pin) && text.contains(other),
        "{text}"
    );
    eprintln!("dpkg -i next to slurmctld {other}:\n{text}");
    assert!(
        !inside2(&inst2, &plugin_dir.join("priority_allot.so")).exists(),
        "dpkg unpacked the plugin although it refused the package"
    );
    let st = run(Command::new("dpkg-query")
        .arg(format!("--admindir={}", admin2.display()))
        .args(["-W", "-f=${Status}", "allot-slurm-plugins"]));
    let st = String::from_utf8_lossy(&st.stdout).into_owned();
    assert!(
        !st.contains("installed") || st.contains("not-installed"),
        "{st}"
    );

    // --- the real system: apt, simulated, refuses a package pinned to
    // another slurmctld and accepts the one built here ------------------
    let out3 = scratch("variant");
    let (_, pinned_elsewhere) = package(&["--slurm-version", other], &out3);
    assert_eq!(
        field(&pinned_elsewhere, "Pre-Depends"),
        format!("slurmctld (= {other})")
    );
    let sim = |deb: &Path| {
        run(Command::new("apt-get")
            .args(["install", "--simulate", "--no-install-recommends", "-q"])
            .arg(deb)
            .env("DEBIAN_FRONTEND", "noninteractive"))
    };
    let o = sim(&pinned_elsewhere);
    let text = both(&o);
    assert!(
        !o.status.success(),
        "apt would install plugins built for Slurm {other}:\n{text}"
    );
    assert!(text.contains(&format!("slurmctld (= {other})")), "{text}");
    eprintln!("apt-get install --simulate, plugins pinned to {other}:\n{text}");
    let o = sim(&plugins);
    let text = both(&o);
    assert!(
        o.status.success() && text.contains("Inst allot-slurm-plugins"),
        "apt refuses the plugins built for this Slurm:\n{text}"
    );
    eprintln!("packages test done in {:?}", t0.elapsed());
    for d in [out, dir, check, dir2, out3] {
        let _ = std::fs::remove_dir_all(d);
    }
}

fn inside2(inst: &Path, p: &Path) -> PathBuf {
    inst.join(p.strip_prefix("/").unwrap())
}
