//! What the engine benchmark and the `limits` example share: a
//! deterministic generator and the synthetic org tree they rank.

use fairshare::NodeSpec;

/// Deterministic pseudo-random numbers (no extra dependency).
pub fn lcg(state: &mut u64) -> u64 {
    *state = state
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    *state >> 33
}

/// 10 programs (`p0`...) x 10 groups (`p0g0`...) x `leaves` leaf accounts
/// (`p0g0{leaf}0`...), every share drawn from `seed` in 1..=100.
pub fn synthetic_tree(seed: &mut u64, leaves: usize, leaf: &str) -> Vec<NodeSpec> {
    (0..10)
        .map(|p| {
            let groups = (0..10)
                .map(|g| {
                    let leaves = (0..leaves)
                        .map(|l| {
                            NodeSpec::leaf(
                                &format!("p{p}g{g}{leaf}{l}"),
                                1 + (lcg(seed) % 100) as u32,
                            )
                        })
                        .collect();
                    NodeSpec::group(&format!("p{p}g{g}"), 1 + (lcg(seed) % 100) as u32, leaves)
                })
                .collect();
            NodeSpec::group(&format!("p{p}"), 1 + (lcg(seed) % 100) as u32, groups)
        })
        .collect()
}
