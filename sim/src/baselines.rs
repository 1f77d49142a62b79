//! The baselines' own arithmetic: Slurm's classic fair-share factor.

/// Slurm's classic fair-share factor per leaf from decayed usage:
/// `UE = UN + (UE_parent - UN) x S_sibling_norm` (`UE = UN` below the
/// root), `F = 2^(-UE / S)` with `UN` = usage normalised to the whole
/// cluster, `S` = the leaf's allocation (product of normalised shares).
pub(crate) fn classic_factors(tree: &fairshare::tree::Tree, leaf_usage: &[f64]) -> Vec<f64> {
    let nodes = tree.nodes();
    let mut usage = vec![0.0f64; nodes.len()];
    for (i, &n) in tree.leaves().iter().enumerate() {
        usage[n.0 as usize] = leaf_usage.get(i).copied().unwrap_or(0.0).max(0.0);
    }
    for i in (1..nodes.len()).rev() {
        let p = nodes[i].parent.expect("non-root").0 as usize;
        usage[p] += usage[i];
    }
    let total = usage[0];
    let mut eff = vec![0.0f64; nodes.len()];
    eff[0] = 1.0;
    for i in 1..nodes.len() {
        let n = &nodes[i];
        let un = if total > 0.0 { usage[i] / total } else { 0.0 };
        let parent = n.parent.expect("non-root");
        // As Slurm's _set_usage_efctv: children of the root take UN as is.
        eff[i] = if parent == fairshare::tree::Tree::ROOT {
            un
        } else {
            un + (eff[parent.0 as usize] - un) * n.norm_share
        };
    }
    // No usage at all: every factor is 1 (0 for a share-0 leaf).
    tree.leaves()
        .iter()
        .map(|&n| {
            let node = &nodes[n.0 as usize];
            if total == 0.0 || node.allocation == 0.0 {
                if node.allocation == 0.0 {
                    0.0
                } else {
                    1.0
                }
            } else {
                2f64.powf(-eff[n.0 as usize] / node.allocation)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
