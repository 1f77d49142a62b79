//! What a job costs per second: TRES billing weights.
//!
//! Rule: a job's *charge rate* (charge units per second) is
//! `ceil(sum(weight[tres] x count[tres]))` over the TRES it was allocated,
//! like Slurm's `TRESBillingWeights` (whose billing TRES is also a whole
//! number). With the default weights `{ "gres/gpu" = 1.0 }` one unit is one
//! GPU, so occupancy is in GPU-seconds. Rounding up means no job with a
//! weighted TRES is ever free; a job with none of them costs 0.

use std::collections::BTreeMap;

use crate::error::ConfigError;

/// The largest weight (charge units per TRES unit per second): keeps every
/// charge of a real job far inside the ledger's 64-bit integers.
pub const MAX_WEIGHT: f64 = 1_000_000.0;

/// Why `name` is not a Slurm TRES name, if it is not (Slurm's TRES are
/// `cpu`, `mem`, `energy`, `node`, `billing`, `vmem`, `pages` and
/// `gres/`, `license/`, `bb/`, `fs/`, `ic/` followed by a name; all
/// lower-case, see slurm.conf(5) AccountingStorageTRES).
pub fn tres_name_problem(name: &str) -> Option<String> {
    const PLAIN: &[&str] = &["cpu", "mem", "energy", "node", "billing", "vmem", "pages"];
    const TYPED: &[&str] = &["gres", "license", "bb", "fs", "ic"];
    let forms = "write cpu, mem, energy, node, billing, vmem, pages, gres/NAME[:TYPE] (GPUs: gres/gpu), license/NAME, bb/NAME, fs/NAME or ic/NAME";
    if name != name.to_ascii_lowercase() {
        return Some(format!(
            "TRES names are lower-case in Slurm; write {:?}",
            name.to_ascii_lowercase()
        ));
    }
    match name.split_once('/') {
        None if PLAIN.contains(&name) => None,
        None => Some(format!("not a Slurm TRES; {forms}")),
        Some((kind, rest)) if TYPED.contains(&kind) && !rest.is_empty() => {
            let typo = kind == "gres"
                && rest.starts_with("gpu")
                && rest != "gpu"
                && !rest.starts_with("gpu:");
            typo.then(|| {
                "not a GPU TRES; GPUs are \"gres/gpu\" (a type: \"gres/gpu:TYPE\")".to_string()
            })
        }
        Some(_) => Some(format!("not a Slurm TRES; {forms}")),
    }
}

/// TRES name -> weight (charge units per unit of that TRES per second).
#[derive(Debug, Clone, PartialEq)]
pub struct ChargeWeights {
    weights: BTreeMap<String, f64>,
}

impl Default for ChargeWeights {
    /// `{ "gres/gpu" = 1.0 }`: charge units are GPUs.
    fn default() -> Self {
        ChargeWeights {
            weights: BTreeMap::from([("gres/gpu".to_string(), 1.0)]),
        }
    }
}

impl ChargeWeights {
    /// Validates weights.
    ///
    /// # Errors
    /// A negative or non-finite weight, one above [`MAX_WEIGHT`], a name
    /// that is not a Slurm TRES (`gres/gpus`, `GRES/GPU`: a typo would make
    /// GPUs free), or every weight 0.
    pub fn new(weights: BTreeMap<String, f64>) -> Result<Self, Vec<ConfigError>> {
        let mut errors: Vec<ConfigError> = weights
            .iter()
            .filter(|(_, w)| !w.is_finite() || **w < 0.0)
            .map(|(k, w)| ConfigError::BadWeight {
                path: format!("charge.{k:?}"),
                found: *w,
            })
            .collect();
        for (k, w) in &weights {
            let path = format!("charge.{k:?}");
            if let Some(message) = tres_name_problem(k) {
                errors.push(ConfigError::Invalid { path, message });
            } else if w.is_finite() && *w > MAX_WEIGHT {
                errors.push(ConfigError::Invalid {
                    path,
                    message: format!(
                        "{w} is too large (at most {MAX_WEIGHT} units per TRES unit per second)"
                    ),
                });
            }
        }
        if errors.is_empty() && !weights.values().any(|w| *w > 0.0) {
            errors.push(ConfigError::ChargeAllZero);
        }
        if errors.is_empty() {
            Ok(ChargeWeights { weights })
        } else {
            Err(errors)
        }
    }

    /// The weights, by TRES name.
    pub fn weights(&self) -> &BTreeMap<String, f64> {
        &self.weights
    }

    /// Charge units per second for a job holding `tres` (name, count) pairs,
    /// e.g. `[("gres/gpu", 4), ("cpu", 32)]`. Unweighted TRES cost nothing.
    /// Saturates at `u64::MAX`; never NaN.
    pub fn rate<'a>(&self, tres: impl IntoIterator<Item = (&'a str, u64)>) -> u64 {
        let total: f64 = tres
            .into_iter()
            .map(|(name, count)| self.weights.get(name).copied().unwrap_or(0.0) * count as f64)
            .sum();
        // `as` saturates for out-of-range floats; at most i64::MAX so the
        // ledger's signed columns never wrap.
        (total.ceil() as u64).min(i64::MAX as u64)
    }

    /// Charge units per second of a job's numeric TRES `counts` (as
    /// [`crate::tres::counts`] reads them; `mem` in MB) holding `gpus` GPUs
    /// ([`crate::tres::gpu_count`]): GPUs count once through `gres/gpu`; a
    /// typed entry such as `gres/gpu:a100` is charged on top only when a
    /// weight names it.
    pub fn rate_of_counts<S: AsRef<str>>(&self, counts: &[(S, u64)], gpus: u64) -> u64 {
        let others = counts
            .iter()
            .map(|(n, c)| (n.as_ref(), *c))
            .filter(|(name, _)| {
                *name != "gres/gpu"
                    && (!name.starts_with("gres/gpu:") || self.weights.contains_key(*name))
            });
        self.rate(others.chain(std::iter::once(("gres/gpu", gpus))))
    }

    /// [`rate_of_counts`](Self::rate_of_counts) of a Slurm TRES string
    /// (`tres_fmt_alloc_str`, sacct's `AllocTRES`). Unreadable entries
    /// charge nothing.
    pub fn rate_of_tres(&self, tres: &str) -> u64 {
        self.rate_of_counts(
            &crate::tres::counts(tres),
            crate::tres::gpu_count(tres).unwrap_or(0),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tres_name_typos_and_huge_weights_are_refused() {
        let errs = |k: &str, w: f64| {
            ChargeWeights::new(BTreeMap::from([
                (k.to_string(), w),
                ("gres/gpu".into(), 1.0),
            ]))
            .err()
            .map(|e| e[0].to_string())
        };
        let gpus = errs("gres/gpus", 1.0).unwrap();
        assert!(gpus.contains("GPUs are \"gres/gpu\""), "{gpus}");
        assert!(errs("GRES/GPU", 1.0).unwrap().contains("\"gres/gpu\""));
        assert!(errs("gpu", 1.0).unwrap().contains("not a Slurm TRES"));
        assert!(errs("gres/", 1.0).unwrap().contains("not a Slurm TRES"));
        assert!(errs("cpu", 1e15).unwrap().contains("too large"));
        for ok in [
            "cpu",
            "mem",
            "billing",
            "gres/gpu:a100",
            "gres/shard",
            "license/matlab",
        ] {
            assert_eq!(errs(ok, 0.5), None, "{ok}");
        }
        // Huge counts saturate below i64::MAX: the ledger's columns are signed.
        let w = ChargeWeights::new(BTreeMap::from([("mem".into(), MAX_WEIGHT)])).unwrap();
        assert_eq!(w.rate([("mem", u64::MAX)]), i64::MAX as u64);
    }

    #[test]
    fn default_charges_gpus() {
        let w = ChargeWeights::default();
        assert_eq!(w.rate([("gres/gpu", 4), ("cpu", 64)]), 4);
        assert_eq!(w.rate([("cpu", 64)]), 0);
    }

    #[test]
    fn weighted_billing_rounds_up() {
        let w = ChargeWeights::new(BTreeMap::from([
            ("gres/gpu".into(), 1.0),
            ("cpu".into(), 0.1),
        ]))
        .unwrap();
        assert_eq!(w.rate([("gres/gpu", 2), ("cpu", 16)]), 4); // 2 + 1.6 -> 4
        assert_eq!(w.rate([("cpu", 1)]), 1);
    }

    #[test]
    fn rate_of_a_tres_string() {
        let w = ChargeWeights::default();
        assert_eq!(
            w.rate_of_tres("cpu=2,mem=16G,node=1,billing=2,gres/gpu:a100=2,gres/gpu=2"),
            2
        );
        assert_eq!(w.rate_of_tres("gres/gpu:a100=2,gres/gpu:v100=1"), 3);
        assert_eq!(w.rate_of_tres(""), 0);
        let typed = ChargeWeights::new(BTreeMap::from([
            ("gres/gpu".into(), 1.0),
            ("gres/gpu:a100".into(), 1.0),
        ]))
        .unwrap();
        assert_eq!(
            typed.rate_of_tres("gres/gpu:a100=2,gres/gpu=2"),
            4,
            "a weighted type is charged on top"
        );
    }

    #[test]
    fn bad_weights() {
        assert!(
            ChargeWeights::new(BTreeMap::from([("cpu".into(), -1.0)])).unwrap_err()[0]
                .to_string()
                .contains("charge.\"cpu\"")
        );
        assert_eq!(
            ChargeWeights::new(BTreeMap::from([("cpu".into(), 0.0)])).unwrap_err(),
            vec![ConfigError::ChargeAllZero]
        );
    }
}
