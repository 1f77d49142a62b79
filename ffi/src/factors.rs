//! One job's priority factors as `sprio` shows them: what a plugin computes
//! ([`ctld::priority_factors_list`](crate::ctld::priority_factors_list) asks
//! for them per job) and what each release's sprio object is filled from
//! ([`release`](crate::release)).

use crate::sys;

/// The factors of one job as sprio shows them. sprio's PRIORITY column is
/// `age + assoc + fs + js + part + qos + (site - NICE_OFFSET) - (nice -
/// NICE_OFFSET)` (`get_priority_from_factors` in 22.05 and 24.11), so a
/// plugin that fills these so that they add up shows its real priority there.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Factors {
    /// AGE column.
    pub age: f64,
    /// FAIRSHARE column.
    pub fair_share: f64,
    /// QOS column.
    pub qos: f64,
    /// PARTITION column.
    pub partition: f64,
    /// SITE column (signed; NICE_OFFSET is added here).
    pub site: i64,
    /// NICE column (signed; NICE_OFFSET is added here).
    pub nice: i64,
}

impl Factors {
    /// `priority_site` as Slurm stores it (NICE_OFFSET added, clamped to u32).
    pub(crate) fn site_raw(&self) -> u32 {
        (i64::from(sys::NICE_OFFSET) + self.site).clamp(0, i64::from(u32::MAX)) as u32
    }
    /// `nice` as Slurm stores it (NICE_OFFSET added, clamped to u32).
    pub(crate) fn nice_raw(&self) -> u32 {
        (i64::from(sys::NICE_OFFSET) + self.nice).clamp(0, i64::from(u32::MAX)) as u32
    }
}
