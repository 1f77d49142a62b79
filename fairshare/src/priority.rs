//! A job's Slurm priority: one `u32` whose order is the policy's, by
//! construction rather than by weighting.
//!
//! # Layout
//! ```text
//!  bits 31..30   bits 29..16               bits 15..0
//! [   band   ] [ account rank, 14 bits ] [ within-account score, 16 bits ]
//! ```
//! 1. **band** ([`Band`]), highest first:
//!    - 3 *short*: an allocated job of at most `short_max_gpus` GPUs whose
//!      time limit is at most `short_max_time` (debug work; off while
//!      `short_max_gpus = 0`). Slurm kills it at its time limit, so it is
//!      short for sure; it is charged like any allocated job;
//!    - 2 *entitled*: an allocated job whose leaf held fewer GPUs than its
//!      entitlement ([`crate::entitlement`]) when the engine snapshot was
//!      taken: the jobs that may preempt ([`crate::preempt`]) come first;
//!    - 1 *allocated*: every other allocated job (minimum runtime > 0);
//!    - 0 *free*: the unallocated free tier, below every allocated job;
//! 2. **account rank**: the Fair Tree rank of the job's leaf over the
//!    sliding window (1..=L, L <= 16383, higher = more under-served; 0 for
//!    an account not in the tree); tied leaves share a rank. Inside a band,
//!    the window decides which team gets idle GPUs first;
//! 3. **within-account score**: `32768 + age_points - nice x nice_weight`,
//!    clamped to 0..=65535, where `age_points = age_weight x min(age,
//!    max_age) / max_age` (integer, rounded down) and age counts from the
//!    job's eligible time. Nice is Slurm's (NICE_OFFSET removed): users may
//!    only raise it (lowering their own job); admins may set it negative.
//!    As in Slurm, nice counts in priority points: a nice above `age_weight`
//!    outweighs any waiting time, a smaller one trades against it. With
//!    `age_weight = 0` the order inside an account is nice only, and Slurm
//!    breaks the remaining ties by job id, i.e. submit order.
//!
//! Because the score is clamped to its 16 bits, no nice value, age or flag
//! a user controls can move a job into another account's rank band: users
//! can never raise a job above another team's. The result is never 0
//! (Slurm reads 0 as "held"): the minimum is 1. No floating point is
//! involved, so there is no NaN and no overflow.

use serde::Serialize;

use crate::contract::Tier;

/// Largest `age_weight`: age can move a job at most half the score range.
pub const MAX_AGE_WEIGHT: u32 = 32_767;

const BAND_SHIFT: u32 = 30;
const RANK_SHIFT: u32 = 16;
/// Largest rank a priority holds (14 bits).
pub const RANK_MASK: u32 = (1 << 14) - 1;
const SCORE_MID: i128 = 32_768;

/// `[priority]` settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PriorityWeights {
    /// Score points a job gains by waiting `max_age` (0..=32767; default 1000).
    pub age_weight: u32,
    /// Age at which the age term stops growing, seconds (> 0; default 7 days).
    pub max_age: u64,
    /// Score points per unit of nice (default 1, as in Slurm).
    pub nice_weight: u32,
    /// Largest job (GPUs) of the short band; 0 = no short band (default).
    pub short_max_gpus: u32,
    /// Longest time limit of the short band, seconds (default 1 h).
    pub short_max_time: u64,
    /// Short-band jobs an account may submit within `sweep_window` before
    /// the next ones are a sweep ([`crate::sweep`]); 0 = no sweeps (default).
    pub sweep_jobs: u32,
    /// The span `sweep_jobs` counts over, seconds (default 15 min).
    pub sweep_window: u64,
}

impl Default for PriorityWeights {
    fn default() -> Self {
        PriorityWeights {
            age_weight: 1000,
            max_age: 7 * 86_400,
            nice_weight: 1,
            short_max_gpus: 0,
            short_max_time: 3600,
            sweep_jobs: 0,
            sweep_window: 900,
        }
    }
}

impl PriorityWeights {
    /// Age points for a job that has been eligible for `age` seconds.
    pub fn age_points(&self, age: u64) -> u32 {
        let max_age = self.max_age.max(1);
        let capped = age.min(max_age);
        // u64 whenever the product fits (always, for ages up to 136 years
        // at the largest weight): a u128 division is a library call.
        match u64::from(self.age_weight).checked_mul(capped) {
            Some(p) => (p / max_age) as u32,
            None => (u128::from(self.age_weight) * u128::from(capped) / u128::from(max_age)) as u32,
        }
    }

    /// The within-account score (see the module doc).
    pub fn score(&self, nice: i64, age: u64) -> u16 {
        let age_points = i128::from(self.age_points(age).min(MAX_AGE_WEIGHT));
        let v = SCORE_MID + age_points - i128::from(nice) * i128::from(self.nice_weight);
        v.clamp(0, i128::from(u16::MAX)) as u16
    }
}

/// A pending job, as priority and explain see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingJob<'a> {
    /// Slurm account.
    pub account: &'a str,
    /// Minimum runtime, seconds (0 = unallocated).
    pub min_runtime: u64,
    /// Slurm nice with NICE_OFFSET removed (negative = raised by an admin).
    pub nice: i64,
    /// When the job became eligible (epoch seconds); age counts from here.
    pub eligible_time: u64,
    /// GPUs it asks for (all nodes).
    pub gpus: u64,
    /// Its time limit, seconds (`None`: none or unknown).
    pub time_limit: Option<u64>,
}

/// The top two bits of a priority (module doc), lowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Band {
    /// The unallocated free tier.
    Free,
    /// An allocated job whose leaf holds its entitlement.
    Allocated,
    /// An allocated job whose leaf is below its entitlement.
    Entitled,
    /// A short allocated job (debug work).
    Short,
}

impl PriorityWeights {
    /// True if a job of `tier`, `gpus` GPUs and `time_limit` seconds is in
    /// the short band.
    pub fn is_short(&self, tier: Tier, gpus: u64, time_limit: Option<u64>) -> bool {
        tier == Tier::Allocated
            && self.short_max_gpus > 0
            && gpus <= u64::from(self.short_max_gpus)
            && time_limit.is_some_and(|t| t <= self.short_max_time)
    }

    /// The band of a job of `tier`, `gpus` GPUs and `time_limit` seconds
    /// whose leaf is (`below`) or is not below its entitlement.
    pub fn band(&self, tier: Tier, gpus: u64, time_limit: Option<u64>, below: bool) -> Band {
        if tier == Tier::Unallocated {
            Band::Free
        } else if self.is_short(tier, gpus, time_limit) {
            Band::Short
        } else if below {
            Band::Entitled
        } else {
            Band::Allocated
        }
    }
}

/// Puts the three fields together. `rank` above 16383 is clamped.
pub fn compose(band: Band, rank: u32, score: u16) -> u32 {
    let band_bits = (band as u32) << BAND_SHIFT;
    (band_bits | (rank.min(RANK_MASK) << RANK_SHIFT) | u32::from(score)).max(1)
}

/// The factors behind one priority, for `sprio` and `allot explain`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PriorityFactors {
    /// Tier.
    pub tier: Tier,
    /// Band (bits 31..30).
    pub band: Band,
    /// Fair Tree rank of the account's leaf (bits 29..16); 0 if unknown.
    pub rank: u32,
    /// Fair-share factor rank / L, in (0, 1]; 0 for an unknown account.
    pub fair_share: f64,
    /// Seconds since eligible.
    pub age: u64,
    /// Age points included in the score.
    pub age_points: u32,
    /// Nice as given.
    pub nice: i64,
    /// Within-account score (bits 15..0).
    pub score: u16,
    /// The priority Slurm gets.
    pub priority: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn band_dominates_rank_dominates_score() {
        let bands = [Band::Free, Band::Allocated, Band::Entitled, Band::Short];
        for w in bands.windows(2) {
            assert!(compose(w[1], 0, 0) > compose(w[0], RANK_MASK, u16::MAX));
        }
        assert!(compose(Band::Allocated, 5, 0) > compose(Band::Allocated, 4, u16::MAX));
        assert_eq!(compose(Band::Free, 0, 0), 1, "never 0 (held)");
        assert_eq!(
            compose(Band::Allocated, 40_000, 0),
            compose(Band::Allocated, RANK_MASK, 0)
        );
        assert_eq!(compose(Band::Short, RANK_MASK, u16::MAX), u32::MAX);
    }

    #[test]
    fn short_band_needs_both_limits_and_an_allocated_job() {
        let w = PriorityWeights {
            short_max_gpus: 2,
            ..PriorityWeights::default()
        };
        let a = Tier::Allocated;
        assert_eq!(w.band(a, 2, Some(3600), false), Band::Short);
        assert_eq!(w.band(a, 3, Some(3600), true), Band::Entitled);
        assert_eq!(w.band(a, 1, Some(3601), false), Band::Allocated);
        assert_eq!(w.band(a, 1, None, false), Band::Allocated);
        assert_eq!(w.band(Tier::Unallocated, 1, Some(60), true), Band::Free);
        let off = PriorityWeights::default();
        assert_eq!(off.band(a, 1, Some(60), false), Band::Allocated);
    }

    #[test]
    fn score_orders_nice_then_age_and_clamps() {
        let w = PriorityWeights::default();
        assert_eq!(w.score(0, 0), 32_768);
        assert_eq!(w.score(0, 7 * 86_400), 32_768 + 1000);
        assert_eq!(
            w.score(0, 70 * 86_400),
            32_768 + 1000,
            "age stops at max_age"
        );
        assert_eq!(w.age_points(7 * 86_400 / 2), 500);
        assert!(w.score(10, 0) < w.score(0, 0));
        assert_eq!(
            w.score(i64::MIN, 0),
            u16::MAX,
            "admin boost clamps inside the band"
        );
        assert_eq!(w.score(i64::MAX, u64::MAX), 0);
        let heavy = PriorityWeights {
            nice_weight: u32::MAX,
            ..w
        };
        assert_eq!(heavy.score(i64::MAX, 0), 0);
    }

    #[test]
    fn age_points_agree_with_the_exact_formula_at_any_size() {
        // The u64 fast path and the u128 fallback give weight x age / max
        // age, rounded down, for ages within and beyond the u64 product.
        for (weight, max_age, age) in [
            (1000, 604_800, 0),
            (1000, 604_800, 302_400),
            (1000, 604_800, u64::MAX),
            (u32::MAX, u64::MAX, u64::MAX - 1),
            (u32::MAX, u64::MAX / 2, u64::MAX / 3),
            (7, 3, 2),
        ] {
            let w = PriorityWeights {
                age_weight: weight,
                max_age,
                ..PriorityWeights::default()
            };
            let capped = age.min(max_age);
            let exact = u128::from(weight) * u128::from(capped) / u128::from(max_age);
            assert_eq!(
                u128::from(w.age_points(age)),
                exact,
                "{weight} {max_age} {age}"
            );
        }
    }
}
