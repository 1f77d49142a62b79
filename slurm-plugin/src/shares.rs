//! What `sshare` shows, from allot's engine: each Slurm association gets
//! its org-tree node's figures (RawUsage = charged GPU-seconds in the
//! window, as Slurm's billing-seconds: the engine's milli-units / 1000;
//! EffectvUsage = share of the parent's usage, NormShares = share among
//! siblings, LevelFS, FairShare = the leaf's factor).
//!
//! Mapping: an account association takes the tree node of the same name
//! (a leaf through its accounts, an interior node by its name, `root` the
//! root); a user association takes its account's leaf figures (allot ranks
//! teams, not users). Associations of accounts outside the tree are left
//! as Slurm has them.

use allot_ffi::assoc::ShareFigures;
use fairshare::tree::{NodeId, Tree};
use fairshare::Engine;

fn node_named(tree: &Tree, name: &str) -> Option<NodeId> {
    if name == "root" {
        return Some(Tree::ROOT);
    }
    if let Some(leaf) = tree.leaf_of_account(name) {
        return Some(tree.leaf_node(leaf));
    }
    tree.nodes()
        .iter()
        .position(|n| !n.is_leaf() && n.name == name)
        .map(|i| NodeId(i as u32))
}

/// The figures of the association of `account` (and `user`, if a user
/// association); `None` when the account is not in the tree, or a user
/// association's account is not a leaf account.
pub fn figures(engine: &Engine, account: &str, user: Option<&str>) -> Option<ShareFigures> {
    let tree = engine.tree();
    let node = match user {
        Some(_) => tree.leaf_node(tree.leaf_of_account(account)?),
        None => node_named(tree, account)?,
    };
    let fair = engine.fair_tree();
    let total = fair.usage(Tree::ROOT);
    let n = tree.node(node);
    Some(ShareFigures {
        usage_raw: fair.usage(node) / fairshare::charge::MILLI_PER_UNIT as f64,
        usage_norm: if total > 0.0 {
            fair.usage(node) / total
        } else {
            0.0
        },
        usage_efctv: fair.effective_usage(node),
        shares_norm: n.norm_share,
        level_fs: if node == Tree::ROOT {
            0.0
        } else {
            fair.level_fs(node).0
        },
        fs_factor: n.leaf.map_or(0.0, |l| fair.factor(l)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn figures_follow_the_tree() {
        let c = fairshare::Config::from_toml_str(
            "[tree.p]\nshare = 60\n[tree.p.a]\nshare = 1\naccounts = [\"a\", \"a-int\"]\n[tree.p.b]\nshare = 1\n[tree.q]\nshare = 40\n",
        )
        .unwrap();
        let (e, _) =
            Engine::from_account_usage(Arc::new(c), [("a", 300_000.0), ("b", 100_000.0)], 1_000);
        let a = figures(&e, "a-int", Some("alice")).unwrap();
        assert_eq!(
            (a.usage_raw, a.usage_efctv, a.shares_norm),
            (300.0, 0.75, 0.5)
        );
        let p = figures(&e, "p", None).unwrap();
        assert_eq!(
            (
                p.usage_raw,
                p.usage_norm,
                p.usage_efctv,
                p.shares_norm,
                p.fs_factor
            ),
            (400.0, 1.0, 1.0, 0.6, 0.0)
        );
        assert!(figures(&e, "q", None).unwrap().level_fs.is_infinite());
        assert_eq!(figures(&e, "root", None).unwrap().usage_raw, 400.0);
        assert!(figures(&e, "physics", None).is_none());
        assert!(
            figures(&e, "p", Some("alice")).is_none(),
            "users sit under leaf accounts only"
        );
        let b = figures(&e, "b", None).unwrap();
        assert!(b.fs_factor > a.fs_factor, "b used less than a");
    }
}
