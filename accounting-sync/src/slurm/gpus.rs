//! How many GPUs a Slurm string names: one rule for each of the two forms
//! Slurm prints, used by every reader here.
//!
//! - **Gres** (sinfo's `%G` and `Gres`, scontrol's `Gres=`): comma-separated
//!   `name[:type][:count]` entries, each maybe followed by socket or index
//!   bindings in parentheses (which may hold commas): `gpu:8(S:0-1)`,
//!   `gpu:a100:4(S:0,1),gpu:v100:2,mps:100`. As Slurm reads its own
//!   configuration, an entry without a count has one: a bare `gpu` is 1 GPU
//!   and so is `gpu:a100`. Every `gpu` entry is summed; other GRES are not
//!   GPUs. An entry whose count is not a number (`gpu:a100:x`) counts
//!   nothing.
//! - **TRES** (squeue's `tres_req_str`, sacct's `AllocTRES`): the engine's
//!   rule, [`fairshare::tres::gpu_count`] (`gres/gpu=N`, else the sum of the
//!   typed `gres/gpu:TYPE=N`), which the plugins and the ledger use too.

/// GPUs of a Gres string; `None` when it has no `gpu` entry at all
/// (`(null)`, `mps:100`).
pub fn in_gres(gres: &str) -> Option<u64> {
    // Drop the bindings in parentheses first: they may contain commas.
    let mut plain = String::with_capacity(gres.len());
    let mut depth = 0u32;
    for c in gres.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ if depth == 0 => plain.push(c),
            _ => {}
        }
    }
    let mut total = None;
    for item in plain.split(',') {
        let parts: Vec<&str> = item.trim().split(':').collect();
        if parts.first() != Some(&"gpu") {
            continue;
        }
        let n = match parts.as_slice() {
            [_] => 1,
            [_, last] => last.parse().unwrap_or(1),
            [.., last] => last.parse().unwrap_or(0),
            [] => 0,
        };
        total = Some(total.unwrap_or(0u64).saturating_add(n));
    }
    total
}

/// GPUs of a TRES string (0 for one that cannot be read: a job whose
/// request Slurm printed oddly holds no GPU as far as allot can tell).
pub fn in_tres(tres: &str) -> u64 {
    fairshare::tres::gpu_count(tres).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gres_forms() {
        assert_eq!(in_gres("gpu:8"), Some(8));
        assert_eq!(in_gres("gpu:8(S:0)"), Some(8));
        assert_eq!(in_gres("gpu:a100:4(S:0-1),gpu:v100:2"), Some(6));
        assert_eq!(in_gres("gpu:tesla:8(S:0,1),mps:100"), Some(8));
        assert_eq!(in_gres("mps:100"), None);
        assert_eq!(in_gres("(null)"), None);
        assert_eq!(in_gres(""), None);
        // Without a count, one, as Slurm reads its configuration. (The
        // budget report's capacity read a bare gpu as 0 and the health
        // check as 1: one rule now.)
        assert_eq!(in_gres("gpu"), Some(1));
        assert_eq!(in_gres("gpu:a100"), Some(1));
        assert_eq!(in_gres("gpu:a100:x"), Some(0));
    }

    #[test]
    fn tres_is_the_engines_rule() {
        assert_eq!(in_tres("cpu=1,gres/gpu=4"), 4);
        assert_eq!(in_tres("gres/gpu:a100=2,gres/gpu:v100=1"), 3);
        assert_eq!(in_tres("cpu=2"), 0);
        assert_eq!(in_tres("gres/gpu=x"), 0);
    }
}
