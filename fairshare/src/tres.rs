//! Slurm TRES strings: `cpu=2,mem=8G,node=1,billing=2,gres/gpu:a100=2,gres/gpu=2`.
//!
//! This is the format of slurmctld's `tres_fmt_alloc_str` and of sacct's
//! `AllocTRES`/`ReqTRES` columns. Slurm lists a typed GRES (`gres/gpu:a100=2`)
//! *and* its untyped total (`gres/gpu=2`) for the same GPUs, so the GPU count
//! is the untyped entry when present, else the sum of the typed entries.

/// Why a TRES string could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid TRES string {input:?}: {reason}; expected name=count pairs separated by ',' (e.g. cpu=2,gres/gpu=2)")]
pub struct TresError {
    /// The text as given.
    pub input: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Iterates over `(name, count)` pairs of a TRES string. Counts may carry a
/// memory suffix (`mem=8G`), which is returned as text; only GRES and
/// numeric TRES are interpreted by [`gpu_count`].
pub fn pairs(input: &str) -> impl Iterator<Item = Result<(&str, &str), TresError>> {
    input
        .split(',')
        .filter(|p| !p.trim().is_empty())
        .map(move |p| {
            p.split_once('=')
                .map(|(k, v)| (k.trim(), v.trim()))
                .ok_or_else(|| TresError {
                    input: input.to_string(),
                    reason: format!("entry {p:?} has no '='"),
                })
        })
}

/// Most GPUs one job can hold: a million, orders of magnitude above any
/// cluster, so that a decade of one attempt's charge stays far inside
/// `i64` milli-units (1e6 GPUs x 3.2e8 s x 1000 = 3.2e17 < 9.2e18). Slurm's
/// "no value" sentinels (NO_VAL 4294967294, NO_VAL64 18446744073709551614)
/// and corrupt rows lie above it.
pub const MAX_JOB_GPUS: u64 = 1_000_000;

/// Number of GPUs in a TRES string (`gres/gpu`): the untyped `gres/gpu=N`
/// entry when present, else the sum of typed `gres/gpu:TYPE=N` entries, else 0.
/// An empty string is 0 GPUs.
///
/// # Errors
/// A GPU entry whose count is not an unsigned integer or is above
/// [`MAX_JOB_GPUS`], or an entry without `=`.
pub fn gpu_count(input: &str) -> Result<u64, TresError> {
    let mut untyped = None;
    let mut typed = 0u64;
    for pair in pairs(input) {
        let (name, count) = pair?;
        let is_untyped = name == "gres/gpu";
        if !is_untyped && !name.starts_with("gres/gpu:") {
            continue;
        }
        let n: u64 = count.parse().map_err(|_| TresError {
            input: input.to_string(),
            reason: format!("{name} count {count:?} is not an unsigned integer"),
        })?;
        if n > MAX_JOB_GPUS {
            return Err(TresError {
                input: input.to_string(),
                reason: format!(
                    "{name} count {n} is more GPUs than a job can hold (at most {MAX_JOB_GPUS}; 4294967294 and 18446744073709551614 are Slurm's \"no value\")"
                ),
            });
        }
        if is_untyped {
            untyped = Some(n);
        } else {
            typed = typed.saturating_add(n);
        }
    }
    Ok(untyped.unwrap_or(typed))
}

/// Numeric TRES pairs of an `AllocTRES` string: counts that are integers,
/// and `mem`-style counts with a K/M/G/T/P suffix converted to megabytes.
/// Entries with other counts are left out.
pub fn counts(s: &str) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for pair in pairs(s) {
        let Ok((name, count)) = pair else { continue };
        let n = count.parse::<u64>().ok().or_else(|| {
            // The unit is the last *character*: a byte index could split a
            // multi-byte one (`mem=7é` panicked here; found by fuzzing).
            let unit = count.chars().next_back()?;
            let num = &count[..count.len() - unit.len_utf8()];
            let mb = match unit {
                'K' => 1.0 / 1024.0,
                'M' => 1.0,
                'G' => 1024.0,
                'T' => 1024.0 * 1024.0,
                'P' => 1024.0 * 1024.0 * 1024.0,
                _ => return None,
            };
            num.parse::<f64>().ok().map(|v| (v * mb).ceil() as u64)
        });
        if let Some(n) = n {
            out.push((name.to_string(), n));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_and_untyped_is_not_double_counted() {
        assert_eq!(gpu_count("gres/gpu:a100=2,gres/gpu=2").unwrap(), 2);
        assert_eq!(
            gpu_count("cpu=4,mem=16G,node=1,billing=4,gres/gpu=8").unwrap(),
            8
        );
    }

    #[test]
    fn typed_only_sums_typed_entries() {
        assert_eq!(gpu_count("gres/gpu:a100=2,gres/gpu:v100=1").unwrap(), 3);
    }

    #[test]
    fn no_gpus() {
        assert_eq!(gpu_count("").unwrap(), 0);
        assert_eq!(gpu_count("cpu=2,mem=1G,node=1").unwrap(), 0);
        assert_eq!(gpu_count("cpu=2,gres/gpumem=4").unwrap(), 0);
    }

    #[test]
    fn counts_convert_memory_to_megabytes() {
        let c = counts("billing=2,cpu=2,gres/gpu:a100=2,gres/gpu=2,mem=8G,node=1,energy=x");
        assert!(c.contains(&("mem".to_string(), 8192)));
        assert!(c.contains(&("gres/gpu:a100".to_string(), 2)));
        assert!(!c.iter().any(|(n, _)| n == "energy"));
    }

    #[test]
    fn multibyte_count_suffix_is_not_a_unit() {
        // Regression (fuzz target `tres`): slicing the unit off by bytes
        // panicked inside a multi-byte character.
        assert_eq!(counts("=7\u{f4}\n"), vec![]);
        assert_eq!(counts("mem=7\u{e9},cpu=2"), vec![("cpu".to_string(), 2)]);
        assert_eq!(counts("mem=\u{1F600}"), vec![]);
        assert!(gpu_count("gres/gpu=7\u{e9}").is_err());
    }

    #[test]
    fn bad_counts_are_errors() {
        assert!(gpu_count("gres/gpu=two").is_err());
        // Slurm's sentinels and absurd counts are not GPUs.
        for n in ["18446744073709551614", "4294967294", "99999999999999"] {
            let e = gpu_count(&format!("cpu=1,gres/gpu={n}")).unwrap_err();
            assert!(e.reason.contains("more GPUs than a job can hold"), "{e}");
        }
        assert_eq!(gpu_count("gres/gpu=1000000").unwrap(), 1_000_000);
        assert!(gpu_count("gres/gpu").is_err());
        assert!(gpu_count("gres/gpu=-1").is_err());
    }
}
