use proptest::prelude::*;

use super::*;
use crate::testutil::{example_tree, example_usage, tree_and_usage};
use crate::tree::NodeSpec;

fn lfs(t: &Tree, f: &FairTree, path: &str) -> f64 {
    f.level_fs(t.find(path).unwrap()).0
}

fn leaf(t: &Tree, account: &str) -> LeafId {
    t.leaf_of_account(account).unwrap()
}

/// The worked example (also Slurm's fair_tree page in spirit).
#[test]
fn worked_example() {
    let t = example_tree();
    let f = FairTree::compute(&t, &example_usage());
    for (path, want) in [
        ("a", 0.9),
        ("b", 1.2),
        ("a.a1", 0.7),
        ("a.a2", 2.5),
        ("b.b2", 0.5),
    ] {
        assert!(
            (lfs(&t, &f, path) - want).abs() < 1e-12,
            "{path}: {}",
            lfs(&t, &f, path)
        );
    }
    assert!(lfs(&t, &f, "b.b1").is_infinite());
    let order: Vec<&str> = f
        .order()
        .iter()
        .map(|&l| t.node(t.leaf_node(l)).name.as_str())
        .collect();
    assert_eq!(order, ["b1", "b2", "a2", "a1"]);
    let factors: Vec<f64> = ["b1", "b2", "a2", "a1"]
        .iter()
        .map(|a| f.factor(leaf(&t, a)))
        .collect();
    assert_eq!(factors, [1.0, 0.75, 0.5, 0.25]);
    // EffectvUsage is relative to the parent.
    assert!((f.effective_usage(t.find("a.a1").unwrap()) - 500.0 / 600.0).abs() < 1e-12);
    assert!((f.usage(Tree::ROOT) - 900.0 * 3600.0).abs() < 1e-6);
}

#[test]
fn sibling_leaves_with_equal_level_fs_share_a_rank() {
    let t = Tree::build(&[
        NodeSpec::leaf("x", 1),
        NodeSpec::leaf("y", 1),
        NodeSpec::leaf("z", 1),
    ])
    .unwrap();
    let f = FairTree::compute(&t, &[10.0, 10.0, 20.0]);
    assert_eq!(f.rank(leaf(&t, "x")), 3);
    assert_eq!(f.rank(leaf(&t, "y")), 3);
    assert_eq!(f.rank(leaf(&t, "z")), 1, "the counter still moved: 3, 3, 1");
    // Ratios equal in exact arithmetic tie too (2/4 vs 1/2 of usage).
    let t = Tree::build(&[NodeSpec::leaf("x", 2), NodeSpec::leaf("y", 1)]).unwrap();
    let f = FairTree::compute(&t, &[0.3 * 2.0, 0.3]);
    assert_eq!(f.rank(leaf(&t, "x")), f.rank(leaf(&t, "y")));
}

#[test]
fn tied_sibling_accounts_merge_their_children() {
    let t = Tree::build(&[
        NodeSpec::group(
            "p",
            1,
            vec![NodeSpec::leaf("p1", 1), NodeSpec::leaf("p2", 3)],
        ),
        NodeSpec::group(
            "q",
            1,
            vec![NodeSpec::leaf("q1", 1), NodeSpec::leaf("q2", 1)],
        ),
    ])
    .unwrap();
    // p and q tie (LFS 1); children: p1 .5, p2 1.5, q1 .667, q2 2.
    let f = FairTree::compute(&t, &[1.0, 1.0, 1.5, 0.5]);
    let order: Vec<&str> = f
        .order()
        .iter()
        .map(|&l| t.node(t.leaf_node(l)).name.as_str())
        .collect();
    assert_eq!(order, ["q2", "p2", "q1", "p1"]);
    assert_eq!(f.rank(leaf(&t, "q2")), 4);
    assert_eq!(f.rank(leaf(&t, "p1")), 1);
}

#[test]
fn leaf_tied_with_sibling_account_shares_its_best_rank() {
    let t = Tree::build(&[
        NodeSpec::leaf("l", 1),
        NodeSpec::group(
            "g",
            1,
            vec![NodeSpec::leaf("g1", 1), NodeSpec::leaf("g2", 1)],
        ),
    ])
    .unwrap();
    // l and g both have LFS 1; g1 has no usage (inf), g2 LFS .5.
    let f = FairTree::compute(&t, &[1.0, 0.0, 1.0]);
    assert_eq!(f.rank(leaf(&t, "l")), 3);
    assert_eq!(
        f.rank(leaf(&t, "g1")),
        3,
        "rule 3: same rank as the account's best leaf"
    );
    assert_eq!(f.rank(leaf(&t, "g2")), 1);
}

#[test]
fn zero_share_is_lowest_even_without_usage() {
    let t = Tree::build(&[
        NodeSpec::leaf("x", 0),
        NodeSpec::leaf("y", 1),
        NodeSpec::leaf("z", 0),
    ])
    .unwrap();
    let f = FairTree::compute(&t, &[0.0, 1e9, 5.0]);
    assert_eq!(lfs(&t, &f, "x"), 0.0);
    assert_eq!(f.rank(leaf(&t, "y")), 3);
    assert_eq!(f.rank(leaf(&t, "x")), 2);
    assert_eq!(
        f.rank(leaf(&t, "z")),
        2,
        "zero-share siblings tie at Level FS 0"
    );
    assert!(f.factor(leaf(&t, "z")) > 0.0);
}

#[test]
fn tiny_usage_is_finite_and_below_no_usage() {
    let t = Tree::build(&[
        NodeSpec::leaf("x", 1),
        NodeSpec::leaf("y", 1),
        NodeSpec::leaf("z", 1),
    ])
    .unwrap();
    let f = FairTree::compute(&t, &[1e-40, 0.0, 1000.0]);
    let x = lfs(&t, &f, "x");
    assert!(x.is_finite() && x > 1e40, "{x}");
    let order: Vec<&str> = f
        .order()
        .iter()
        .map(|&l| t.node(t.leaf_node(l)).name.as_str())
        .collect();
    assert_eq!(order, ["y", "x", "z"]);
    // Alone with an unused sibling, tiny usage is all of the parent's usage.
    let f = FairTree::compute(&t, &[1e-40, 0.0, 0.0]);
    assert!((lfs(&t, &f, "x") - 1.0 / 3.0).abs() < 1e-12);
    // Underflow of U: clamped to the largest finite value, still below "none".
    let f = FairTree::compute(&t, &[1e-300, 0.0, 1e300]);
    assert_eq!(lfs(&t, &f, "x"), f64::MAX);
    assert!(lfs(&t, &f, "y").is_infinite());
}

#[test]
fn bad_usage_values_are_sanitised() {
    let t = Tree::build(&[NodeSpec::leaf("x", 1), NodeSpec::leaf("y", 1)]).unwrap();
    let f = FairTree::compute(&t, &[f64::NAN, -5.0]);
    assert!(lfs(&t, &f, "x").is_infinite() && lfs(&t, &f, "y").is_infinite());
    let f = FairTree::compute(&t, &[f64::INFINITY, 1.0]);
    assert!(lfs(&t, &f, "x").is_finite());
}

fn leaves_under(t: &Tree, id: NodeId) -> Vec<LeafId> {
    let n = t.node(id);
    match n.leaf {
        Some(l) => vec![l],
        None => n
            .children
            .iter()
            .flat_map(|&c| leaves_under(t, c))
            .collect(),
    }
}

proptest! {
    #[test]
    fn factors_are_finite_and_in_unit_interval((tree, usage) in tree_and_usage()) {
        let f = FairTree::compute(&tree, &usage);
        prop_assert_eq!(f.order().len(), tree.leaves().len());
        for i in 0..tree.leaves().len() {
            let x = f.factor(LeafId(i as u32));
            prop_assert!(x.is_finite() && x > 0.0 && x <= 1.0, "factor {}", x);
        }
        prop_assert_eq!(f.factor(f.order()[0]), 1.0);
        for (i, n) in tree.nodes().iter().enumerate().skip(1) {
            let l = f.level_fs(NodeId(i as u32)).0;
            prop_assert!(!l.is_nan() && l >= 0.0);
            if f.usage(NodeId(i as u32)) > 0.0 && n.share > 0 {
                prop_assert!(l.is_finite(), "{} has usage, so a finite Level FS", n.path);
            }
        }
    }

    #[test]
    fn under_served_subtree_sorts_above_over_served_sibling((tree, usage) in tree_and_usage()) {
        let f = FairTree::compute(&tree, &usage);
        for n in tree.nodes() {
            for &x in &n.children {
                for &y in &n.children {
                    let (lx, ly) = (f.level_fs(x).0, f.level_fs(y).0);
                    // x under its share (U < S), y over (U > S).
                    if lx > 1.0 && ly < 1.0 {
                        let worst_x = leaves_under(&tree, x).iter().map(|&l| f.rank(l)).min().unwrap();
                        let best_y = leaves_under(&tree, y).iter().map(|&l| f.rank(l)).max().unwrap();
                        prop_assert!(worst_x > best_y, "{} must rank above {}", tree.node(x).path, tree.node(y).path);
                    }
                }
            }
        }
    }

    #[test]
    fn ranks_follow_the_walk_order((tree, usage) in tree_and_usage()) {
        let f = FairTree::compute(&tree, &usage);
        let ranks: Vec<u32> = f.order().iter().map(|&l| f.rank(l)).collect();
        prop_assert!(ranks.windows(2).all(|w| w[0] >= w[1]), "{:?}", ranks);
        prop_assert!(ranks.iter().all(|&r| r >= 1 && r as usize <= tree.leaves().len()));
    }
}
