//! The org tree as code: allot.toml's tree against slurmdbd's account
//! hierarchy (`allot tree plan | apply | import`).
//!
//! # Mapping (allot.toml -> slurmdbd)
//! - Every interior node is a Slurm account of the same name under its
//!   parent's account (`root` for top-level nodes), with `Fairshare` = the
//!   node's share, so sshare and `AccountingStorageEnforce` see allot's tree.
//! - A leaf is the account named like the leaf (created if none of its
//!   accounts has that name), with `Fairshare` = the leaf's share. Its other
//!   accounts hang below it with `Fairshare=1` and the description
//!   [`LEAF_MEMBER`]` <leaf path>`, which is how `import` folds them back
//!   into one leaf (an account created for the leaf is marked
//!   [`LEAF_HOLDER`] and is not one of its accounts).
//! - Accounts slurmdbd has and the tree lacks are listed, never removed:
//!   deleting an account deletes its associations and history links.
//!
//! # Import (slurmdbd -> allot.toml)
//! Accounts with child accounts (other than leaf members) become interior
//! nodes, the others leaves; `Fairshare` becomes the share (`parent` or 0
//! -> 1, with a note). Users are not part of the tree.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use fairshare::tree::{NodeId, Tree};

pub use crate::slurm::sacctmgr::SlurmAccount;

/// Description prefix of an account that belongs to a multi-account leaf.
pub const LEAF_MEMBER: &str = "allot: account of leaf";
/// Description prefix of the account created for a leaf none of whose
/// accounts has its name: it holds the leaf's Fairshare, jobs use its members.
pub const LEAF_HOLDER: &str = "allot: budget of leaf";

/// One change `apply` makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// `sacctmgr add account`.
    Add {
        /// Account.
        account: String,
        /// Parent account.
        parent: String,
        /// Fairshare.
        fairshare: u32,
        /// Description.
        description: String,
    },
    /// Move an account under another parent.
    Reparent {
        /// Account.
        account: String,
        /// Current parent.
        from: String,
        /// New parent.
        to: String,
    },
    /// Change an account's Fairshare.
    SetFairshare {
        /// Account.
        account: String,
        /// Current value (`None` = `parent`).
        from: Option<u32>,
        /// New value.
        to: u32,
    },
    /// Change an account's description.
    SetDescription {
        /// Account.
        account: String,
        /// New description.
        to: String,
    },
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Change::Add {
                account,
                parent,
                fairshare,
                ..
            } => {
                write!(
                    f,
                    "add account {account} under {parent} with Fairshare={fairshare}"
                )
            }
            Change::Reparent { account, from, to } => {
                write!(f, "move account {account} from {from} to {to}")
            }
            Change::SetFairshare { account, from, to } => {
                let from = from.map_or("parent".to_string(), |v| v.to_string());
                write!(f, "set Fairshare of {account} from {from} to {to}")
            }
            Change::SetDescription { account, to } => {
                write!(f, "set description of {account} to {to:?}")
            }
        }
    }
}

impl Change {
    /// The sacctmgr arguments that make this change on `cluster`.
    pub fn sacctmgr_args(&self, cluster: &str) -> Vec<String> {
        let c = format!("cluster={cluster}");
        match self {
            Change::Add {
                account,
                parent,
                fairshare,
                description,
            } => vec![
                "-i".into(),
                "add".into(),
                "account".into(),
                account.clone(),
                format!("parent={parent}"),
                format!("fairshare={fairshare}"),
                format!("description={description}"),
                c,
            ],
            Change::Reparent { account, to, .. } => {
                vec![
                    "-i".into(),
                    "modify".into(),
                    "account".into(),
                    format!("name={account}"),
                    c,
                    "set".into(),
                    format!("parent={to}"),
                ]
            }
            Change::SetFairshare { account, to, .. } => vec![
                "-i".into(),
                "modify".into(),
                "account".into(),
                format!("name={account}"),
                c,
                "set".into(),
                format!("fairshare={to}"),
            ],
            Change::SetDescription { account, to } => vec![
                "-i".into(),
                "modify".into(),
                "account".into(),
                format!("name={account}"),
                "set".into(),
                format!("description={to}"),
            ],
        }
    }
}

/// The account hierarchy allot.toml's tree asks for, parents before
/// children (see the module doc for the mapping).
pub fn desired(tree: &Tree) -> Vec<SlurmAccount> {
    let mut out = Vec::new();
    let account_of = |id: NodeId| -> String {
        if id == Tree::ROOT {
            "root".to_string()
        } else {
            tree.node(id).name.clone()
        }
    };
    for (i, n) in tree.nodes().iter().enumerate().skip(1) {
        let parent = account_of(n.parent.expect("non-root node has a parent"));
        let own = account_of(NodeId(i as u32));
        let holder = n.is_leaf() && !n.accounts.contains(&own);
        out.push(SlurmAccount {
            name: own.clone(),
            parent: Some(parent),
            fairshare: Some(n.share),
            description: if holder {
                format!("{LEAF_HOLDER} {}", n.path)
            } else {
                format!("allot: {}", n.path)
            },
        });
        for acct in n.accounts.iter().filter(|a| **a != own) {
            out.push(SlurmAccount {
                name: acct.clone(),
                parent: Some(own.clone()),
                fairshare: Some(1),
                description: format!("{LEAF_MEMBER} {}", n.path),
            });
        }
    }
    out
}

/// The changes that make `existing` match `want`, and the existing
/// accounts the tree does not mention (left alone).
pub fn plan(want: &[SlurmAccount], existing: &[SlurmAccount]) -> (Vec<Change>, Vec<String>) {
    let have: BTreeMap<&str, &SlurmAccount> =
        existing.iter().map(|a| (a.name.as_str(), a)).collect();
    let mut changes = Vec::new();
    for w in want {
        let parent = w.parent.clone().unwrap_or_else(|| "root".into());
        let fairshare = w.fairshare.unwrap_or(1);
        match have.get(w.name.as_str()) {
            None => changes.push(Change::Add {
                account: w.name.clone(),
                parent,
                fairshare,
                description: w.description.clone(),
            }),
            Some(h) => {
                let from = h.parent.clone().unwrap_or_else(|| "root".into());
                if from != parent {
                    changes.push(Change::Reparent {
                        account: w.name.clone(),
                        from,
                        to: parent,
                    });
                }
                if h.fairshare != Some(fairshare) {
                    changes.push(Change::SetFairshare {
                        account: w.name.clone(),
                        from: h.fairshare,
                        to: fairshare,
                    });
                }
                if h.description != w.description {
                    changes.push(Change::SetDescription {
                        account: w.name.clone(),
                        to: w.description.clone(),
                    });
                }
            }
        }
    }
    let wanted: BTreeSet<&str> = want.iter().map(|a| a.name.as_str()).collect();
    let extra = existing
        .iter()
        .map(|a| a.name.clone())
        .filter(|n| n != "root" && !wanted.contains(n.as_str()))
        .collect();
    (changes, extra)
}

fn toml_key(name: &str) -> String {
    if !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        name.to_string()
    } else {
        format!("{name:?}")
    }
}

/// An allot.toml tree (the `[tree.*]` tables, with a header comment) for
/// slurmdbd's hierarchy, plus warnings for what did not map cleanly.
pub fn import(existing: &[SlurmAccount], cluster: &str) -> (String, Vec<String>) {
    let mut children: BTreeMap<&str, Vec<&SlurmAccount>> = BTreeMap::new();
    for a in existing.iter().filter(|a| a.name != "root") {
        children
            .entry(a.parent.as_deref().unwrap_or("root"))
            .or_default()
            .push(a);
    }
    let mut warnings = Vec::new();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Org tree imported from slurmdbd (cluster {cluster}) by `allot tree import`."
    );
    let _ = writeln!(
        out,
        "# Shares are the accounts' Fairshare values; review them, then `allot check-config`."
    );
    fn walk(
        name: &str,
        path: &str,
        children: &BTreeMap<&str, Vec<&SlurmAccount>>,
        out: &mut String,
        warnings: &mut Vec<String>,
    ) {
        let kids = children.get(name).cloned().unwrap_or_default();
        for k in kids {
            let sub: Vec<&SlurmAccount> =
                children.get(k.name.as_str()).cloned().unwrap_or_default();
            let members: Vec<&str> = sub
                .iter()
                .filter(|s| s.description.starts_with(LEAF_MEMBER))
                .map(|s| s.name.as_str())
                .collect();
            let is_leaf = sub.len() == members.len();
            let key = format!("{path}.{}", toml_key(&k.name));
            let share = match k.fairshare {
                Some(s) if s > 0 => s,
                _ => {
                    warnings.push(format!(
                        "account {}: Fairshare is {}; imported as share = 1",
                        k.name,
                        k.fairshare.map_or("parent".into(), |v| v.to_string())
                    ));
                    1
                }
            };
            let _ = writeln!(out, "\n[{key}]\nshare = {share}");
            if is_leaf {
                if !members.is_empty() {
                    let mut all = Vec::new();
                    if !k.description.starts_with(LEAF_HOLDER) {
                        all.push(k.name.as_str());
                    }
                    all.extend(members);
                    let list = all
                        .iter()
                        .map(|a| format!("{a:?}"))
                        .collect::<Vec<_>>()
                        .join(", ");
                    let _ = writeln!(out, "accounts = [{list}]");
                }
            } else {
                if !members.is_empty() {
                    warnings.push(format!("account {}: has sub-accounts, so its leaf members {members:?} became nodes", k.name));
                }
                walk(&k.name, &key, children, out, warnings);
            }
        }
    }
    walk("root", "tree", &children, &mut out, &mut warnings);
    (out, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairshare::Config;

    const TOML: &str = r#"
        [tree.nlp]
        share = 60
        [tree.nlp.a1]
        share = 35
        accounts = ["a1", "a1-interactive"]
        [tree.nlp.a2]
        share = 25
        [tree.vision]
        share = 40
        accounts = ["v-train", "v-eval"]
    "#;

    fn tree() -> Tree {
        Config::from_toml_str(TOML).unwrap().tree
    }

    fn acct(name: &str, parent: &str, fs: Option<u32>, desc: &str) -> SlurmAccount {
        SlurmAccount {
            name: name.into(),
            parent: (!parent.is_empty()).then(|| parent.into()),
            fairshare: fs,
            description: desc.into(),
        }
    }

    #[test]
    fn desired_hierarchy() {
        let d = desired(&tree());
        let names: Vec<(&str, &str, u32)> = d
            .iter()
            .map(|a| {
                (
                    a.name.as_str(),
                    a.parent.as_deref().unwrap(),
                    a.fairshare.unwrap(),
                )
            })
            .collect();
        assert_eq!(
            names,
            [
                ("nlp", "root", 60),
                ("a1", "nlp", 35),
                ("a1-interactive", "a1", 1),
                ("a2", "nlp", 25),
                ("vision", "root", 40),
                ("v-train", "vision", 1),
                ("v-eval", "vision", 1),
            ]
        );
        assert_eq!(d[2].description, "allot: account of leaf tree.nlp.a1");
        assert_eq!(d[4].description, "allot: budget of leaf tree.vision");
    }

    #[test]
    fn plan_lists_changes_and_leaves_strangers_alone() {
        let existing = vec![
            acct("root", "", None, "root"),
            acct("nlp", "root", Some(1), "nlp"),
            acct("a1", "nlp", Some(35), "allot: tree.nlp.a1"),
            acct("a1-interactive", "nlp", Some(1), ""),
            acct("physics", "root", Some(5), ""),
        ];
        let (changes, extra) = plan(&desired(&tree()), &existing);
        let text: Vec<String> = changes.iter().map(|c| c.to_string()).collect();
        assert!(
            text.contains(&"set Fairshare of nlp from 1 to 60".to_string()),
            "{text:?}"
        );
        assert!(
            text.contains(&"move account a1-interactive from nlp to a1".to_string()),
            "{text:?}"
        );
        assert!(
            text.contains(&"add account a2 under nlp with Fairshare=25".to_string()),
            "{text:?}"
        );
        assert!(
            !text.iter().any(|t| t.starts_with("set Fairshare of a1 ")),
            "a1 already right: {text:?}"
        );
        assert_eq!(extra, ["physics"]);
    }

    #[test]
    fn applied_plan_is_empty_and_import_round_trips() {
        let want = desired(&tree());
        let mut existing = vec![acct("root", "", None, "")];
        existing.extend(want.iter().cloned());
        assert!(plan(&want, &existing).0.is_empty());
        let (text, warnings) = import(&existing, "c1");
        assert!(warnings.is_empty(), "{warnings:?}");
        let back = Config::from_toml_str(&text)
            .unwrap_or_else(|e| panic!("{e}\n{text}"))
            .tree;
        let shape = |t: &Tree| -> Vec<(String, u32, Vec<String>)> {
            let mut v: Vec<_> = t
                .nodes()
                .iter()
                .map(|n| {
                    (n.path.clone(), n.share, {
                        let mut a = n.accounts.clone();
                        a.sort();
                        a
                    })
                })
                .collect();
            v.sort();
            v
        };
        assert_eq!(shape(&back), shape(&tree()));
    }

    #[test]
    fn import_of_a_foreign_hierarchy() {
        let existing = vec![
            acct("root", "", None, ""),
            acct("phys", "root", Some(3), ""),
            acct("hep", "phys", None, ""),
            acct("astro", "phys", Some(2), ""),
            acct("bio", "root", Some(1), ""),
        ];
        let (text, warnings) = import(&existing, "c1");
        let c = Config::from_toml_str(&text).unwrap();
        assert!(c.tree.leaf_of_account("hep").is_some() && c.tree.leaf_of_account("bio").is_some());
        assert_eq!(
            warnings,
            ["account hep: Fairshare is parent; imported as share = 1"]
        );
    }
}
