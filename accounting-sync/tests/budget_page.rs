//! `allot report --html FILE`: a self-contained page whose numbers equal
//! `allot report --json` for the same ledger, and (with Debian's chromium
//! installed) a headless screenshot of it that is not blank.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{allot, ok};

fn setup(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let config = dir.join("allot.toml");
    std::fs::write(
        &config,
        common::example_with_ledger(&dir.join("ledger.sqlite")),
    )
    .unwrap();
    // Finished jobs of four teams over the last three days (one free-tier).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let mut dump = String::from(
        "JobID|JobIDRaw|Account|User|Partition|AllocTRES|Submit|Start|End|Elapsed|State|AdminComment\n",
    );
    for (i, (acct, gpus, ago, hours, comment)) in [
        ("a1", 4, 2 * 86_400, 5, ""),
        ("a1", 2, 86_400, 3, ""),
        ("a2", 1, 50_000, 8, ""),
        ("b1", 3, 30_000, 2, ""),
        ("vision", 2, 20_000, 4, "allot:min_runtime=0"),
    ]
    .iter()
    .enumerate()
    {
        let s = now - ago;
        let e = s + hours * 3600;
        dump += &format!(
            "{j}|{j}|{acct}|alice|gpu|gres/gpu={gpus}|{s}|{s}|{e}|0{hours}:00:00|COMPLETED|{comment}\n",
            j = i + 1
        );
    }
    let d = dir.join("dump.psv");
    std::fs::write(&d, dump).unwrap();
    ok(allot()
        .args(["sync", "--timezone", "UTC", "--config"])
        .arg(&config)
        .arg("--from")
        .arg(&d));
    config
}

/// The text of the element carrying `data-node="node" data-field="field"`.
fn field(html: &str, node: Option<&str>, field: &str) -> String {
    let key = match node {
        Some(n) => format!("data-node=\"{n}\" data-field=\"{field}\">"),
        None => format!("data-field=\"{field}\">"),
    };
    let i = html
        .find(&key)
        .unwrap_or_else(|| panic!("no {key} in the page"))
        + key.len();
    html[i..i + html[i..].find('<').unwrap()].to_string()
}

#[test]
fn page_numbers_equal_the_report_and_it_renders() {
    let dir = std::env::temp_dir().join(format!("allot-page-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config = setup(&dir);
    let page = dir.join("budget.html");
    ok(allot()
        .args(["report", "--windows", "2", "--config"])
        .arg(&config)
        .arg("--html")
        .arg(&page));
    let html = std::fs::read_to_string(&page).unwrap();
    // Self-contained: nothing to fetch, no script.
    for bad in ["http://", "https://", "<script", " src=", "<link"] {
        assert!(!html.contains(bad), "the page has {bad:?}");
    }
    let report: serde_json::Value = serde_json::from_str(&ok(allot()
        .args(["report", "--json", "--config"])
        .arg(&config)))
    .unwrap();
    let lines = report["lines"].as_array().unwrap();
    for l in lines {
        let node = l["account"].as_str().unwrap();
        let f = |k: &str| l[k].as_f64().unwrap();
        assert_eq!(
            field(&html, Some(node), "charged_gpu_h"),
            format!("{:.3}", f("charged_gpu_h")),
            "{node}"
        );
        assert_eq!(
            field(&html, Some(node), "allocation_gpu_h"),
            format!("{:.3}", f("allocation_gpu_h")),
            "{node}"
        );
        assert_eq!(
            field(&html, Some(node), "used_pct"),
            format!("{:.2}%", f("used_pct")),
            "{node}"
        );
        if let Some(fs) = l["fair_share"].as_f64() {
            assert_eq!(
                field(&html, Some(node), "fair_share"),
                format!("{fs:.6}"),
                "{node}"
            );
        }
    }
    // The ranking: leaves by fair-share factor, highest first.
    let mut leaves: Vec<(&str, f64)> = lines
        .iter()
        .filter_map(|l| Some((l["account"].as_str()?, l["fair_share"].as_f64()?)))
        .collect();
    leaves.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap());
    for (rank, (node, _)) in leaves.iter().enumerate() {
        assert_eq!(
            field(&html, Some(node), "rank"),
            (rank + 1).to_string(),
            "{node}"
        );
    }
    // The free tier: vision's 2 GPUs x 4 h.
    let root = &lines[0];
    assert_eq!(
        field(&html, Some("root"), "unallocated_gpu_h"),
        format!("{:.3}", root["unallocated_gpu_h"].as_f64().unwrap())
    );
    assert_eq!(field(&html, Some("root"), "unallocated_gpu_h"), "8.000");
    assert_eq!(field(&html, None, "capacity_gpus"), "16");
    // Two windows of daily bars per node, one <rect> a day plus the frame.
    assert_eq!(html.matches("<svg").count(), lines.len());

    // A headless browser renders it: a screenshot that is not blank.
    if Command::new("chromium").arg("--version").output().is_err() {
        eprintln!("chromium not installed (Debian's chromium): the screenshot is skipped");
        return;
    }
    let png = dir.join("budget.png");
    let out = Command::new("chromium")
        .args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
        ])
        .arg("--window-size=1100,1800")
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(
        png.exists(),
        "no screenshot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Not blank: the decompressed scanlines hold many bytes that are neither
    // white (0xff), zero nor a filter type, i.e. ink.
    let ink = Command::new("python3")
        .arg("-c")
        .arg(
            "import sys,zlib\n\
             d=open(sys.argv[1],'rb').read(); i=8; idat=b''\n\
             while i<len(d):\n\
             \tn=int.from_bytes(d[i:i+4],'big'); t=d[i+4:i+8]\n\
             \tif t==b'IDAT': idat+=d[i+8:i+8+n]\n\
             \ti+=12+n\n\
             raw=zlib.decompress(idat)\n\
             print(sum(1 for b in raw if b not in (0,1,2,3,4,255)))",
        )
        .arg(&png)
        .output()
        .unwrap();
    let ink: u64 = String::from_utf8_lossy(&ink.stdout)
        .trim()
        .parse()
        .unwrap_or(0);
    assert!(
        ink > 10_000,
        "the screenshot looks blank ({ink} inked bytes)"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
