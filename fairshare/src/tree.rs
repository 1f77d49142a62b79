//! The org tree: nested nodes with shares, leaves mapped to Slurm accounts.
//!
//! Rule (docs/configuration.md, `[tree]`): each node has a `share` among its siblings. A node's
//! *normalised share* is `share / sum(siblings' shares, itself included)`;
//! its *allocation* (its claim on the whole cluster) is the product of the
//! normalised shares on the path from the root. Budget over the window =
//! allocation x capacity (GPUs) x window (seconds), in GPU-seconds.
//!
//! Only leaves map to Slurm accounts (one or more; by default the leaf's own
//! name). Interior nodes are budgets, not accounts: a job always runs under a
//! leaf's account.
//!
//! Nodes live in one arena in pre-order (every parent before its children), so
//! a reverse scan is a bottom-up pass.

use std::collections::HashMap;

use crate::error::ConfigError;
use crate::hash::FastMap;

/// The most leaves a tree may have: a job's priority encodes its account's
/// rank in 14 bits (see [`crate::priority`]).
pub const MAX_LEAVES: usize = crate::priority::RANK_MASK as usize;

/// The largest share a node may have. Shares are relative, so this limit
/// never gets in the way; it keeps every product of shares exact.
pub const MAX_SHARE: u32 = 1_000_000;

/// Index of a node in [`Tree::nodes`]. The root is `NodeId(0)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

/// Index of a leaf among [`Tree::leaves`], dense from 0. Valid only for the
/// tree (and engine) that produced it: a config reload renumbers leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeafId(pub u32);

/// A node as written in the config, before validation. The simulator and the
/// tests build trees from these directly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    /// The node's name (its key in `[tree.<name>]`).
    pub name: String,
    /// Its share among its siblings (any whole number; 0 = never served
    /// while a sibling wants the resources).
    pub share: u32,
    /// Slurm accounts of a leaf; `None` means `[name]`. Must be `None` for a
    /// node with children.
    pub accounts: Option<Vec<String>>,
    /// Child nodes, in the order they sort by name.
    pub children: Vec<NodeSpec>,
}

impl NodeSpec {
    /// A leaf whose only account is its name.
    pub fn leaf(name: &str, share: u32) -> Self {
        NodeSpec {
            name: name.to_string(),
            share,
            accounts: None,
            children: Vec::new(),
        }
    }

    /// An interior node with the given children.
    pub fn group(name: &str, share: u32, children: Vec<NodeSpec>) -> Self {
        NodeSpec {
            name: name.to_string(),
            share,
            accounts: None,
            children,
        }
    }
}

/// One node of a validated tree.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// The node's own name; the root is called `root` (as in sshare).
    pub name: String,
    /// Dotted config path, e.g. `tree.nlp.a1`; the root's path is `tree`.
    pub path: String,
    /// Parent node; `None` only for the root.
    pub parent: Option<NodeId>,
    /// Children in name order.
    pub children: Vec<NodeId>,
    /// Depth: root 0, its children 1, ...
    pub depth: u32,
    /// Raw share as configured (the root's is 1).
    pub share: u32,
    /// Share normalised among siblings, in [0, 1] (the root's is 1).
    pub norm_share: f64,
    /// Product of normalised shares from the root: the fraction of the
    /// cluster this node may claim, in [0, 1].
    pub allocation: f64,
    /// Slurm accounts (non-empty for leaves, empty for interior nodes).
    pub accounts: Vec<String>,
    /// The leaf index for a leaf, `None` for interior nodes and the root.
    pub leaf: Option<LeafId>,
}

impl Node {
    /// True for a node that maps to Slurm accounts (has no children).
    pub fn is_leaf(&self) -> bool {
        self.leaf.is_some()
    }
}

/// A validated org tree. Cheap to query; immutable once built.
#[derive(Debug, Clone)]
pub struct Tree {
    nodes: Vec<Node>,
    leaves: Vec<NodeId>,
    account_leaf: FastMap<String, LeafId>,
}

impl Tree {
    /// The root's id.
    pub const ROOT: NodeId = NodeId(0);

    /// Validates top-level node specs and builds the tree.
    ///
    /// # Errors
    /// Every problem found, each naming the node path and the fix: no nodes,
    /// all siblings at share 0, an empty or invalid `accounts`, accounts on a
    /// node with children, an account in two leaves, too many leaves.
    pub fn build(top: &[NodeSpec]) -> Result<Tree, Vec<ConfigError>> {
        let mut errors = Vec::new();
        if top.is_empty() {
            return Err(vec![ConfigError::EmptyTree]);
        }
        let root = Node {
            name: "root".into(),
            path: "tree".into(),
            parent: None,
            children: Vec::new(),
            depth: 0,
            share: 1,
            norm_share: 1.0,
            allocation: 1.0,
            accounts: Vec::new(),
            leaf: None,
        };
        let mut tree = Tree {
            nodes: vec![root],
            leaves: Vec::new(),
            account_leaf: FastMap::default(),
        };
        let mut first_seen: HashMap<String, String> = HashMap::new();
        tree.add_children(Self::ROOT, top, &mut first_seen, &mut errors);
        if tree.leaves.len() > MAX_LEAVES {
            errors.push(ConfigError::TooManyLeaves {
                count: tree.leaves.len(),
                max: MAX_LEAVES,
            });
        }
        if errors.is_empty() {
            Ok(tree)
        } else {
            Err(errors)
        }
    }

    fn add_children(
        &mut self,
        parent: NodeId,
        specs: &[NodeSpec],
        first_seen: &mut HashMap<String, String>,
        errors: &mut Vec<ConfigError>,
    ) {
        let parent_path = self.nodes[parent.0 as usize].path.clone();
        let total: u64 = specs.iter().map(|s| u64::from(s.share)).sum();
        if total == 0 {
            errors.push(ConfigError::AllSharesZero {
                path: parent_path.clone(),
            });
        }
        for spec in specs {
            let path = format!("{parent_path}.{}", spec.name);
            let (p_alloc, depth) = {
                let p = &self.nodes[parent.0 as usize];
                (p.allocation, p.depth + 1)
            };
            if spec.share > MAX_SHARE {
                errors.push(ConfigError::ShareTooLarge {
                    path: path.clone(),
                    found: spec.share.into(),
                });
            }
            let norm_share = if total == 0 {
                0.0
            } else {
                f64::from(spec.share) / total as f64
            };
            let id = NodeId(self.nodes.len() as u32);
            let is_leaf = spec.children.is_empty();
            let mut accounts = Vec::new();
            let mut leaf = None;
            if is_leaf {
                accounts = spec
                    .accounts
                    .clone()
                    .unwrap_or_else(|| vec![spec.name.clone()]);
                if accounts.is_empty() {
                    errors.push(ConfigError::EmptyAccounts { path: path.clone() });
                }
                let l = LeafId(self.leaves.len() as u32);
                for account in &accounts {
                    if let Err(reason) = check_account_name(account) {
                        errors.push(ConfigError::BadAccountName {
                            path: path.clone(),
                            name: account.clone(),
                            reason,
                        });
                    } else if let Some(first) = first_seen.get(account) {
                        errors.push(ConfigError::DuplicateAccount {
                            account: account.clone(),
                            first: first.clone(),
                            second: path.clone(),
                        });
                    } else {
                        first_seen.insert(account.clone(), path.clone());
                        self.account_leaf.insert(account.clone(), l);
                    }
                }
                self.leaves.push(id);
                leaf = Some(l);
            } else if spec.accounts.is_some() {
                errors.push(ConfigError::AccountsOnInterior { path: path.clone() });
            }
            self.nodes.push(Node {
                name: spec.name.clone(),
                path,
                parent: Some(parent),
                children: Vec::new(),
                depth,
                share: spec.share,
                norm_share,
                allocation: p_alloc * norm_share,
                accounts,
                leaf,
            });
            self.nodes[parent.0 as usize].children.push(id);
            if !is_leaf {
                self.add_children(id, &spec.children, first_seen, errors);
            }
        }
    }

    /// All nodes in pre-order (the root first, every parent before its
    /// children). Index with [`NodeId`].
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// One node.
    ///
    /// # Panics
    /// If `id` is not from this tree.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.0 as usize]
    }

    /// The leaves' node ids, indexed by [`LeafId`].
    pub fn leaves(&self) -> &[NodeId] {
        &self.leaves
    }

    /// The node of a leaf.
    ///
    /// # Panics
    /// If `leaf` is not from this tree.
    pub fn leaf_node(&self, leaf: LeafId) -> NodeId {
        self.leaves[leaf.0 as usize]
    }

    /// The leaf a Slurm account maps to, or `None` for an account not in
    /// the tree.
    pub fn leaf_of_account(&self, account: &str) -> Option<LeafId> {
        self.account_leaf.get(account).copied()
    }

    /// Every Slurm account in the tree with its leaf, in no set order.
    pub fn accounts(&self) -> impl Iterator<Item = (&str, LeafId)> {
        self.account_leaf.iter().map(|(a, l)| (a.as_str(), *l))
    }

    /// The node with a dotted path (`tree.nlp.a1`, or `nlp.a1`).
    pub fn find(&self, path: &str) -> Option<NodeId> {
        let full = if path == "tree" || path.starts_with("tree.") {
            path.to_string()
        } else {
            format!("tree.{path}")
        };
        self.nodes
            .iter()
            .position(|n| n.path == full)
            .map(|i| NodeId(i as u32))
    }

    /// The path from the root's child down to `id` (the root excluded,
    /// `id` included).
    pub fn lineage(&self, id: NodeId) -> Vec<NodeId> {
        let mut out = Vec::new();
        let mut cur = Some(id);
        while let Some(c) = cur {
            if c == Self::ROOT {
                break;
            }
            out.push(c);
            cur = self.node(c).parent;
        }
        out.reverse();
        out
    }
}

fn check_account_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("empty; Slurm account names are non-empty");
    }
    if name
        .chars()
        .any(|c| c.is_whitespace() || c == ',' || c == '|' || c == '\'' || c == '"')
    {
        return Err("contains whitespace, a comma, a quote or '|'; Slurm cannot store it");
    }
    if name.chars().any(|c| c.is_uppercase()) {
        return Err("contains upper case; Slurm lower-cases account names, write it in lower case");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::example_specs as example;

    #[test]
    fn allocation_is_product_of_normalised_shares() {
        let t = Tree::build(&example()).unwrap();
        let a1 = t.node(t.find("a.a1").unwrap());
        assert!((a1.norm_share - 35.0 / 60.0).abs() < 1e-12);
        assert!((a1.allocation - 0.35).abs() < 1e-12);
        let b2 = t.node(t.find("tree.b.b2").unwrap());
        assert!((b2.allocation - 0.2).abs() < 1e-12);
        let total: f64 = t.leaves().iter().map(|&n| t.node(n).allocation).sum();
        assert!((total - 1.0).abs() < 1e-12);
        assert_eq!(t.leaves().len(), 4);
        assert_eq!(t.leaf_of_account("b1"), Some(LeafId(2)));
        assert_eq!(t.leaf_of_account("zz"), None);
        assert_eq!(t.lineage(t.find("a.a2").unwrap()).len(), 2);
    }

    #[test]
    fn duplicate_account_names_both_leaves() {
        let mut spec = example();
        spec[1].children[0].accounts = Some(vec!["a1".into()]);
        let errs = Tree::build(&spec).unwrap_err();
        let msg = errs[0].to_string();
        assert!(
            msg.contains("tree.a.a1") && msg.contains("tree.b.b1"),
            "{msg}"
        );
    }

    #[test]
    fn structural_errors() {
        assert_eq!(Tree::build(&[]).unwrap_err(), vec![ConfigError::EmptyTree]);
        let zero = vec![NodeSpec::leaf("x", 0), NodeSpec::leaf("y", 0)];
        assert!(
            matches!(&Tree::build(&zero).unwrap_err()[0], ConfigError::AllSharesZero { path } if path == "tree")
        );
        let mut empty = example();
        empty[0].children[1].accounts = Some(vec![]);
        assert!(
            matches!(&Tree::build(&empty).unwrap_err()[0], ConfigError::EmptyAccounts { path } if path == "tree.a.a2")
        );
        let mut interior = example();
        interior[0].accounts = Some(vec!["a".into()]);
        assert!(matches!(
            &Tree::build(&interior).unwrap_err()[0],
            ConfigError::AccountsOnInterior { .. }
        ));
        let bad = vec![NodeSpec {
            accounts: Some(vec!["Big Team".into()]),
            ..NodeSpec::leaf("x", 1)
        }];
        assert!(matches!(
            &Tree::build(&bad).unwrap_err()[0],
            ConfigError::BadAccountName { .. }
        ));
    }

    #[test]
    fn zero_share_sibling_is_allowed() {
        let spec = vec![NodeSpec::leaf("x", 0), NodeSpec::leaf("y", 3)];
        let t = Tree::build(&spec).unwrap();
        assert_eq!(t.node(t.find("x").unwrap()).allocation, 0.0);
        assert_eq!(t.node(t.find("y").unwrap()).allocation, 1.0);
    }
}
