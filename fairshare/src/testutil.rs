//! Shared test helpers: the worked example and random trees for proptest.

use proptest::prelude::*;

use crate::tree::{NodeSpec, Tree};

/// The worked example: A (60) { A1 35, A2 25 }, B (40) { B1 20, B2 20 }.
pub fn example_specs() -> Vec<NodeSpec> {
    vec![
        NodeSpec::group(
            "a",
            60,
            vec![NodeSpec::leaf("a1", 35), NodeSpec::leaf("a2", 25)],
        ),
        NodeSpec::group(
            "b",
            40,
            vec![NodeSpec::leaf("b1", 20), NodeSpec::leaf("b2", 20)],
        ),
    ]
}

/// The worked example's tree ([`example_specs`]).
pub fn example_tree() -> Tree {
    Tree::build(&example_specs()).unwrap()
}

/// The engine of the worked example and its usage at `now`.
pub fn example_engine(now: u64) -> crate::engine::Engine {
    crate::engine::Engine::new(
        std::sync::Arc::new(crate::config::Config::with_tree(example_tree())),
        example_usage(),
        now,
    )
}

/// Its window usage by leaf (a1, a2, b1, b2): 500, 100, 0 and 300 hours
/// (Fair Tree reads only ratios).
pub fn example_usage() -> Vec<f64> {
    [500.0, 100.0, 0.0, 300.0]
        .iter()
        .map(|h| h * 3600.0)
        .collect()
}

/// Usage values including the awkward ones: 0, 1e-40, huge.
pub fn usage_value() -> impl Strategy<Value = f64> {
    prop_oneof![
        3 => Just(0.0),
        1 => Just(1e-40),
        1 => Just(1e300),
        6 => 1.0f64..1e7,
        2 => (1u32..100).prop_map(f64::from),
    ]
}

/// Random top-level node specs: up to 3 levels, shares 0..50 (first child
/// of each node always > 0), unique lowercase names.
pub fn tree_specs() -> impl Strategy<Value = Vec<NodeSpec>> {
    let shape = prop::collection::vec(
        (
            0u32..50,
            prop::collection::vec((0u32..50, prop::collection::vec(0u32..50, 0..4)), 0..4),
        ),
        1..5,
    );
    shape.prop_map(|top| {
        let mut n = 0;
        let mut name = |p: &str| {
            n += 1;
            format!("{p}{n}")
        };
        top.into_iter()
            .enumerate()
            .map(|(i, (share, mids))| {
                let children = mids
                    .into_iter()
                    .enumerate()
                    .map(|(j, (ms, leaves))| {
                        let leaves = leaves
                            .into_iter()
                            .enumerate()
                            .map(|(k, s)| {
                                NodeSpec::leaf(&name("l"), if k == 0 { s.max(1) } else { s })
                            })
                            .collect();
                        NodeSpec::group(&name("m"), if j == 0 { ms.max(1) } else { ms }, leaves)
                    })
                    .collect();
                NodeSpec::group(
                    &name("t"),
                    if i == 0 { share.max(1) } else { share },
                    children,
                )
            })
            .collect()
    })
}

/// A random valid tree with usage for each leaf.
pub fn tree_and_usage() -> impl Strategy<Value = (Tree, Vec<f64>)> {
    tree_specs().prop_flat_map(|specs| {
        let tree = Tree::build(&specs).expect("generated trees are valid");
        let leaves = tree.leaves().len();
        (Just(tree), prop::collection::vec(usage_value(), leaves))
    })
}
