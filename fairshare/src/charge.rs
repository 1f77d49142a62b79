//! What a job costs per second: TRES billing weights.
//!
//! Rule: a job's *charge rate* is `sum(weight[tres] x count[tres])` charge
//! units per second over the TRES it was allocated, as Slurm's
//! `TRESBillingWeights` computes billing: a double, charged to fair-share
//! usage unrounded (a 1-core job at `cpu = 0.05` costs 0.05 units per
//! second, not 1). With the default weights `{ "gres/gpu" = 1.0 }` one unit
//! is one GPU, so charges are GPU-seconds.
//!
//! The rate is kept as a whole number of **milli-units** per second
//! ([`MILLI_PER_UNIT`] = 1000 per unit; one GPU = 1000), so every sum of
//! charges (the ledger's columns and hourly buckets, the usage window, Fair
//! Tree's input) is exact integer arithmetic, the same in the plugins, the
//! ledger and the simulator. Rounding: the sum is computed in floating point
//! and rounded once to the nearest milli-unit (at most 0.0005 unit per
//! second from Slurm's double, where rounding each TRES's term would add
//! one such error per TRES); a job whose weighted TRES sum to more than 0
//! but under half a milli-unit costs 1 milli-unit, so no job holding a
//! weighted TRES is ever free. A job holding none of them costs 0. Weights
//! written with at most three decimals (`0.05`, `0.125`) are therefore
//! charged exactly (the floating-point error of the sum stays far below
//! half a milli-unit for any real job's counts); whole GPUs are exactly
//! 1000 each, so a GPU-only config ranks as it did with whole units (Fair
//! Tree reads only ratios of usage, and x1000 keeps them bit for bit).
//!
//! GPU counts stay GPU counts: the short band's `short_max_gpus`, the
//! entitlements and the live load ([`crate::entitlement`]) count GPUs held,
//! never charge units.

use std::collections::BTreeMap;

use crate::error::ConfigError;

/// The largest weight (charge units per TRES unit per second): keeps every
/// charge of a real job far inside the ledger's 64-bit integers.
pub const MAX_WEIGHT: f64 = 1_000_000.0;

/// Milli-units per charge unit: [`ChargeWeights::rate`] and every charge
/// summed from it (ledger, usage window, Fair Tree) count milli-units, so
/// one GPU for one second is 1000 with the default weights.
pub const MILLI_PER_UNIT: u64 = 1000;

/// Charge units (GPU-seconds with the default weights) of `milli`
/// milli-unit-seconds, for display: exact sums stay in milli-units.
pub fn units(milli: u64) -> f64 {
    milli as f64 / MILLI_PER_UNIT as f64
}

/// GPU-hours (charge unit-hours) of `milli` milli-unit-seconds, for display.
pub fn unit_hours(milli: u64) -> f64 {
    milli as f64 / (MILLI_PER_UNIT * 3600) as f64
}

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

    /// Charge **milli-units** per second (1000 per GPU with the default
    /// weights) for a job holding `tres` (name, count) pairs, e.g.
    /// `[("gres/gpu", 4), ("cpu", 32)]`, rounded as the module states.
    /// Unweighted TRES cost nothing. Saturates at `i64::MAX` (the ledger's
    /// columns are signed); never NaN.
    pub fn rate<'a>(&self, tres: impl IntoIterator<Item = (&'a str, u64)>) -> u64 {
        let total: f64 = tres
            .into_iter()
            .map(|(name, count)| self.weights.get(name).copied().unwrap_or(0.0) * count as f64)
            .sum();
        if total <= 0.0 {
            return 0;
        }
        // `as` saturates for out-of-range floats.
        ((total * MILLI_PER_UNIT as f64).round() as u64).clamp(1, i64::MAX as u64)
    }

    /// Charge milli-units per second of a job's numeric TRES `counts` (as
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
        assert_eq!(w.rate([("gres/gpu", 4), ("cpu", 64)]), 4000);
        assert_eq!(w.rate([("cpu", 64)]), 0);
    }

    /// The docs' weights: a GPU, 0.05 per core, 0.125 per GPU shard.
    fn docs_weights() -> ChargeWeights {
        ChargeWeights::new(BTreeMap::from([
            ("gres/gpu".into(), 1.0),
            ("cpu".into(), 0.05),
            ("gres/shard".into(), 0.125),
        ]))
        .unwrap()
    }

    /// Four 1-hour jobs: (team, TRES). Rounding the rate up to whole
    /// units charged them 2, 1, 1 and 1 GPU-h.
    const FOUR_JOBS: [(&str, &[(&str, u64)]); 4] = [
        ("vision", &[("gres/gpu", 1), ("cpu", 8)]),
        ("hpc", &[("cpu", 1)]),
        ("hpc", &[("cpu", 20)]),
        ("hpc", &[("gres/shard", 1), ("cpu", 1)]),
    ];

    #[test]
    fn fractional_weights_are_charged_unrounded() {
        let w = docs_weights();
        let rates: Vec<u64> = FOUR_JOBS
            .iter()
            .map(|(_, tres)| w.rate(tres.iter().copied()))
            .collect();
        // 1.4, 0.05, 1.0 and 0.175 units per second, in milli-units.
        assert_eq!(rates, [1400, 50, 1000, 175]);
        let hours: Vec<f64> = rates.iter().map(|r| unit_hours(r * 3600)).collect();
        assert_eq!(hours, [1.4, 0.05, 1.0, 0.175]);
    }

    #[test]
    fn fractional_weights_rank_the_teams_by_what_they_used() {
        // Two equal teams: vision ran the 1.4 GPU-h job, hpc the three CPU
        // jobs (0.05 + 1.0 + 0.175 = 1.225 GPU-h). Whole units charged
        // vision 2 and hpc 3, ranking vision first; vision used more.
        let specs = [
            crate::tree::NodeSpec::leaf("vision", 50),
            crate::tree::NodeSpec::leaf("hpc", 50),
        ];
        let config = std::sync::Arc::new(crate::Config::with_tree(
            crate::tree::Tree::build(&specs).unwrap(),
        ));
        let w = docs_weights();
        let mut used = BTreeMap::<&str, u64>::new();
        for (team, tres) in FOUR_JOBS {
            *used.entry(team).or_default() += w.rate(tres.iter().copied()) * 3600;
        }
        assert_eq!(used["vision"], 1400 * 3600);
        assert_eq!(used["hpc"], 1225 * 3600);
        let (engine, unknown) =
            crate::Engine::from_account_usage(config, used.iter().map(|(a, u)| (*a, *u as f64)), 0);
        assert!(unknown.is_empty());
        assert_eq!(
            (engine.rank("hpc"), engine.rank("vision")),
            (Some(2), Some(1)),
            "the team that used less ranks first"
        );
    }

    #[test]
    fn rounding_to_milli_units() {
        let w = ChargeWeights::new(BTreeMap::from([
            ("gres/gpu".into(), 1.0),
            ("cpu".into(), 0.1),
            ("mem".into(), 0.000_001), // per MB
        ]))
        .unwrap();
        assert_eq!(w.rate([("gres/gpu", 2), ("cpu", 16)]), 3600); // 2 + 1.6
        assert_eq!(w.rate([("cpu", 1)]), 100);
        // 1.2 milli-units rounds to 1, 1.6 to 2; 0.1 (under half a
        // milli-unit) still costs 1: a weighted TRES is never free.
        assert_eq!(w.rate([("mem", 1200)]), 1);
        assert_eq!(w.rate([("mem", 1600)]), 2);
        assert_eq!(w.rate([("mem", 100)]), 1);
        assert_eq!(w.rate([("mem", 0), ("license/x", 5)]), 0);
        // The sum is rounded once: 3 x 0.4 milli-units cost 1, not 0 + 0 + 0.
        let three = ChargeWeights::new(BTreeMap::from([
            ("cpu".into(), 0.000_4),
            ("gres/gpu".into(), 0.000_4),
            ("gres/shard".into(), 0.000_4),
        ]))
        .unwrap();
        assert_eq!(
            three.rate([("cpu", 1), ("gres/gpu", 1), ("gres/shard", 1)]),
            1
        );
        assert_eq!(
            (units(1400 * 3600), unit_hours(175 * 3600)),
            (5040.0, 0.175)
        );
    }

    #[test]
    fn rate_of_a_tres_string() {
        let w = ChargeWeights::default();
        assert_eq!(
            w.rate_of_tres("cpu=2,mem=16G,node=1,billing=2,gres/gpu:a100=2,gres/gpu=2"),
            2000
        );
        assert_eq!(w.rate_of_tres("gres/gpu:a100=2,gres/gpu:v100=1"), 3000);
        assert_eq!(w.rate_of_tres(""), 0);
        let typed = ChargeWeights::new(BTreeMap::from([
            ("gres/gpu".into(), 1.0),
            ("gres/gpu:a100".into(), 1.0),
        ]))
        .unwrap();
        assert_eq!(
            typed.rate_of_tres("gres/gpu:a100=2,gres/gpu=2"),
            4000,
            "a weighted type is charged on top"
        );
        assert_eq!(
            docs_weights().rate_of_tres("cpu=1,mem=4G,node=1,billing=1,gres/shard=1"),
            175
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
