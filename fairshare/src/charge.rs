//! What a job costs per second: TRES billing weights.
//!
//! Rule: a job's *charge rate* (charge units per second) is
//! `ceil(sum(weight[tres] x count[tres]))` over the TRES it was allocated,
//! like Slurm's `TRESBillingWeights` (whose billing TRES is also a whole
//! number). With the default weights `{ "gres/gpu" = 1.0 }` one unit is one
//! GPU, so occupancy is in GPU-seconds. Rounding up means no job with a
//! weighted TRES is ever free; a job with none of them costs 0.

use std::collections::BTreeMap;

use crate::config::ConfigError;

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
    /// A negative or non-finite weight, or every weight 0.
    pub fn new(weights: BTreeMap<String, f64>) -> Result<Self, Vec<ConfigError>> {
        let mut errors: Vec<ConfigError> = weights
            .iter()
            .filter(|(_, w)| !w.is_finite() || **w < 0.0)
            .map(|(k, w)| ConfigError::BadWeight {
                path: format!("charge.{k:?}"),
                found: *w,
            })
            .collect();
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
        // `as` saturates for out-of-range floats.
        total.ceil() as u64
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
