//! `allot shares --usage usage.csv [--parsable2]`: what Fair Tree would make
//! of a given usage, printed like `sshare -l`: every node of the tree with
//! `Account|Share|NormShares|RawUsage|EffectvUsage|LevelFS|FairShare`.
//! How admins test a tree change before installing it.
//!
//! Columns: Share = raw share; NormShares = share normalised among siblings;
//! RawUsage = GPU-seconds of the subtree (rounded); EffectvUsage = usage as
//! a fraction of the parent's; LevelFS = NormShares / EffectvUsage (`inf`
//! without usage); FairShare = the leaf's factor rank / leaves (leaves only).
//! Account names are indented one space per level, as sshare does (in both
//! forms).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use fairshare::{Engine, NodeId, Tree};

use super::common::{self, walk, ConfigArg};
use super::usage_csv;

/// Arguments of `allot shares`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub config: ConfigArg,
    /// CSV of `account,gpu_seconds` rows (header optional)
    #[arg(long, value_name = "FILE")]
    pub usage: PathBuf,
    /// Output `|`-separated fields without a trailing `|` (as sshare -P)
    #[arg(long, short = 'P')]
    pub parsable2: bool,
}

/// Runs the subcommand.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let config = common::load(&args.config.path())?;
    let text = std::fs::read_to_string(&args.usage)
        .with_context(|| format!("cannot read {}", args.usage.display()))?;
    let rows =
        usage_csv::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", args.usage.display()))?;
    let (engine, unknown) = Engine::from_account_usage(
        Arc::new(config),
        rows.iter().map(|r| (r.account.as_str(), r.gpu_seconds)),
        0,
    );
    for account in unknown {
        let line = rows
            .iter()
            .find(|r| r.account == account)
            .map_or(0, |r| r.line);
        eprintln!(
            "allot: warning: {}:{line}: account {account:?} is not in the tree; its usage is ignored",
            args.usage.display()
        );
    }
    print!("{}", render(&engine, args.parsable2));
    Ok(ExitCode::SUCCESS)
}

const HEADER: [&str; 7] = [
    "Account",
    "Share",
    "NormShares",
    "RawUsage",
    "EffectvUsage",
    "LevelFS",
    "FairShare",
];

/// The table for every node, root first, children in name order.
pub fn render(engine: &Engine, parsable2: bool) -> String {
    let tree = engine.tree();
    let mut rows: Vec<[String; 7]> = Vec::new();
    walk(tree, Tree::ROOT, &mut |id| rows.push(row(engine, id)));
    let mut out = String::new();
    if parsable2 {
        out += &HEADER.join("|");
        out.push('\n');
        for r in rows {
            out += &r.join("|");
            out.push('\n');
        }
        return out;
    }
    let name_w = rows.iter().map(|r| r[0].len()).max().unwrap_or(0).max(20);
    let widths = [name_w, 10, 11, 14, 13, 12, 10];
    let line = |cells: &[String]| {
        let mut s = format!("{:<w$}", cells[0], w = widths[0]);
        for (c, w) in cells[1..].iter().zip(&widths[1..]) {
            s += &format!(" {c:>w$}");
        }
        s.trim_end().to_string() + "\n"
    };
    out += &line(&HEADER.map(String::from));
    out += &line(&widths.map(|w| "-".repeat(w)));
    for r in rows {
        out += &line(&r);
    }
    out
}

fn row(engine: &Engine, id: NodeId) -> [String; 7] {
    let tree = engine.tree();
    let fair = engine.fair_tree();
    let n = tree.node(id);
    let root = id == Tree::ROOT;
    [
        format!("{}{}", " ".repeat(n.depth as usize), n.name),
        if root {
            String::new()
        } else {
            n.share.to_string()
        },
        format!("{:.6}", n.norm_share),
        format!("{:.0}", fair.usage(id)),
        format!("{:.6}", fair.effective_usage(id)),
        if root {
            String::new()
        } else {
            fair.level_fs(id).to_string()
        },
        n.leaf
            .map_or(String::new(), |l| format!("{:.6}", fair.factor(l))),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairshare::Config;

    const EXAMPLE: &str = r#"
        [tree.a]
        share = 60
        [tree.a.a1]
        share = 35
        [tree.a.a2]
        share = 25
        [tree.b]
        share = 40
        [tree.b.b1]
        share = 20
        [tree.b.b2]
        share = 20
    "#;

    #[test]
    fn worked_example_parsable() {
        let config = Arc::new(Config::from_toml_str(EXAMPLE).unwrap());
        let usage = [
            ("a1", 500.0 * 3600.0),
            ("a2", 100.0 * 3600.0),
            ("b2", 300.0 * 3600.0),
        ];
        let (engine, _) = Engine::from_account_usage(config, usage, 0);
        let out = render(&engine, true);
        let want = "\
Account|Share|NormShares|RawUsage|EffectvUsage|LevelFS|FairShare
root||1.000000|3240000|1.000000||
 a|60|0.600000|2160000|0.666667|0.900000|
  a1|35|0.583333|1800000|0.833333|0.700000|0.250000
  a2|25|0.416667|360000|0.166667|2.500000|0.500000
 b|40|0.400000|1080000|0.333333|1.200000|
  b1|20|0.500000|0|0.000000|inf|1.000000
  b2|20|0.500000|1080000|1.000000|0.500000|0.750000
";
        assert_eq!(out, want);
        let plain = render(&engine, false);
        assert!(
            plain.lines().next().unwrap().starts_with("Account "),
            "{plain}"
        );
        assert!(plain.contains("\n  b1 "), "{plain}");
    }
}
