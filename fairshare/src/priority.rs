//! A job's Slurm priority: one `u32` whose order is the policy's, by
//! construction rather than by weighting.
//!
//! # Layout
//! ```text
//!  bits 31..30   bits 29..16               bits 15..0
//! [   band   ] [ account rank, 14 bits ] [ within-account score, 16 bits ]
//! ```
//! 1. **band** ([`Band`]), highest first, set by what the job's team is
//!    owed now and never by the job's shape (the rule, and why no shape or
//!    split over accounts gets around it: [`crate::owed`]):
//!    - 3 *owed*: an allocated job in its team's owed prefix (its team's
//!      pending jobs, debug work first, that fit in what the team and every
//!      group above it are entitled to now and do not hold), or the claim
//!      of a team below its window share whose head job is larger than its
//!      static share;
//!    - 2 *crossing*: the job that takes the rest of its team's entitlement
//!      and a little more;
//!    - 1 *allocated*: every other allocated job (minimum runtime > 0);
//!    - 0 *free*: the unallocated free tier, below every allocated job;
//! 2. **account rank**: the Fair Tree rank of the job's leaf over the
//!    sliding window (1..=L, L <= 16383, higher = more under-served; 0 for
//!    an account not in the tree); tied leaves share a rank. Inside a band,
//!    the window decides which team gets idle GPUs first;
//! 3. **within-account score**: debug work first, then `s = 32768 +
//!    age_points - nice x nice_weight` clamped to 0..=65535: `32768 + s /
//!    2` for debug work, `s / 2` for every other job (inside one account a
//!    debug job goes before batch work, whatever the band), where `age_points = age_weight x min(age,
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

    /// The within-account score (see the module doc) of a job with `nice`,
    /// eligible for `age` seconds; `debug` for debug work
    /// ([`PriorityWeights::is_debug`]), which goes first inside its account.
    pub fn score(&self, nice: i64, age: u64, debug: bool) -> u16 {
        let age_points = i128::from(self.age_points(age).min(MAX_AGE_WEIGHT));
        let v = SCORE_MID + age_points - i128::from(nice) * i128::from(self.nice_weight);
        let half = (v.clamp(0, i128::from(u16::MAX)) / 2) as u16;
        if debug {
            half | 0x8000
        } else {
            half
        }
    }
}

/// A pending job, as priority and explain see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingJob<'a> {
    /// Slurm job id (any unique id): the owed band is per job
    /// ([`crate::owed::OwedBands`]).
    pub id: u64,
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
    /// True if job_submit marked it part of a sweep ([`crate::sweep`]).
    pub sweep: bool,
}

/// The top two bits of a priority (module doc), lowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Band {
    /// The unallocated free tier.
    Free,
    /// An allocated job beyond what its team is owed now.
    Allocated,
    /// The job that takes the rest of its team's entitlement
    /// ([`crate::owed`], rule 1).
    Crossing,
    /// An allocated job its team is owed now, or a claim ([`crate::owed`]).
    Owed,
}

impl PriorityWeights {
    /// True if a job of `tier`, `gpus` GPUs and `time_limit` seconds has
    /// the short shape: allocated, at most `short_max_gpus` GPUs, a time
    /// limit of at most `short_max_time` (it ends within that for sure).
    /// It orders work inside its team only ([`crate::owed`]).
    pub fn is_short(&self, tier: Tier, gpus: u64, time_limit: Option<u64>) -> bool {
        tier == Tier::Allocated
            && self.short_max_gpus > 0
            && gpus <= u64::from(self.short_max_gpus)
            && time_limit.is_some_and(|t| t <= self.short_max_time)
    }

    /// True for debug work: the short shape ([`PriorityWeights::is_short`])
    /// and not part of a sweep.
    pub fn is_debug(&self, tier: Tier, gpus: u64, time_limit: Option<u64>, sweep: bool) -> bool {
        !sweep && self.is_short(tier, gpus, time_limit)
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
        let bands = [Band::Free, Band::Allocated, Band::Crossing, Band::Owed];
        for w in bands.windows(2) {
            assert!(compose(w[1], 0, 0) > compose(w[0], RANK_MASK, u16::MAX));
        }
        assert!(compose(Band::Allocated, 5, 0) > compose(Band::Allocated, 4, u16::MAX));
        assert_eq!(compose(Band::Free, 0, 0), 1, "never 0 (held)");
        assert_eq!(
            compose(Band::Allocated, 40_000, 0),
            compose(Band::Allocated, RANK_MASK, 0)
        );
        assert_eq!(compose(Band::Owed, RANK_MASK, u16::MAX), u32::MAX);
    }

    #[test]
    fn score_orders_debug_then_nice_then_age_and_clamps() {
        let w = PriorityWeights::default();
        let s = |nice, age| w.score(nice, age, false);
        assert_eq!(s(0, 0), 16_384);
        assert_eq!(s(0, 7 * 86_400), 16_384 + 500);
        assert_eq!(s(0, 70 * 86_400), 16_384 + 500, "age stops at max_age");
        assert_eq!(w.age_points(7 * 86_400 / 2), 500);
        assert!(s(10, 0) < s(0, 0));
        assert_eq!(
            s(i64::MIN, 0),
            u16::MAX / 2,
            "admin boost clamps inside the band"
        );
        assert_eq!(s(i64::MAX, u64::MAX), 0);
        let heavy = PriorityWeights {
            nice_weight: u32::MAX,
            ..w
        };
        assert_eq!(heavy.score(i64::MAX, 0, false), 0);
        // Debug work goes first inside its account, whatever nice and age.
        assert!(w.score(i64::MAX, 0, true) > w.score(i64::MIN, u64::MAX, false));
        assert_eq!(w.score(i64::MIN, 0, true), u16::MAX);
        assert!(w.score(10, 0, true) < w.score(0, 0, true));
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
