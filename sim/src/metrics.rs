//! What a replay measured, hour by hour, and the summary built from it.
//!
//! Definitions (per team, then summed for the cluster):
//! - **got(h)**: GPU-seconds the team's jobs held during hour `h` (running,
//!   whatever the tier). A fully busy GPU-hour is exactly 3600.
//! - **demand(h)**: GPU-seconds the team wanted: running plus pending GPUs,
//!   integrated over the hour.
//! - **owed(h)** = min(allocation x capacity(h), demand(h)): the team's
//!   allocation capped hour by hour at what it actually asked for.
//! - **delivered(h)** = min(got(h), owed(h)): what it got, capped the same
//!   way. *Owed delivered* = sum delivered / sum owed.
//! - **occupancy**: sum got / sum capacity (capacity = GPUs of nodes not
//!   failed, from the first submission to the last event).
//! - **unallocated share**: GPU-seconds of free-tier jobs / all got.
//! - **share error(h)**: over the rolling `metric_window` ending at `h`,
//!   half the L1 distance between the teams' shares of what was delivered
//!   and their fair shares of it, where the fair share is the allocation
//!   water-filled against demand (a team that wanted less than its
//!   allocation gets what it wanted; the rest is split among the others in
//!   proportion to their allocations). 0 = perfectly fair, 1 = all wrong.
//! - **lost GPU-hours**: work thrown away by requeues (since the last
//!   checkpoint for resumable jobs, everything for the others).
//! - **entitled(h)**: the org tree's water-fill of capacity(h) against
//!   every team's demand(h) ([`fairshare::entitlement`]: siblings first,
//!   by share, none above its demand); *entitled GPU-hours* = sum over
//!   hours. Unlike owed, a team whose siblings want less than their
//!   allocation is entitled to what they leave. *Excess GPU-hours*: sum
//!   over hours of max(0, got(h) - entitled(h)); its *peak*: the largest
//!   hour's, as GPUs held on average over that hour.
//! - **worst team at the floor**: the lowest owed delivered among teams
//!   owed at least `[sim] worst_floor_gpu_hours`.
//! - **requeues per job**: times a job went back to the queue
//!   (preemption, drain, node failure); max and p99 over every job.
//! - Waits: first start - submit, nearest-rank percentiles.

use serde::Serialize;

use super::workload::{JobClass, Workload};
use super::{
    ClassWaits, GroupReport, Policy, PreemptionRecord, RequeuesPerJob, SimReport, TeamReport,
    WorstTeam,
};
use fairshare::entitlement::{Entitlements, Scratch};
use fairshare::tree::Tree;

/// Hourly series of one replay (GPU-seconds per hour).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Hourly {
    /// Capacity per hour (GPUs of nodes not failed x seconds).
    pub capacity: Vec<u64>,
    /// Per team, GPU-seconds held per hour.
    pub got: Vec<Vec<u64>>,
    /// Per team, GPU-seconds wanted (running + pending) per hour.
    pub demand: Vec<Vec<u64>>,
}

impl Hourly {
    /// Number of hours.
    pub fn hours(&self) -> usize {
        self.capacity.len()
    }

    /// Every `step` hours, each team's share of what was delivered over the
    /// trailing `window` hours (and the fair share it was owed): `(hour,
    /// shares, fair shares)`.
    pub fn rolling_shares(
        &self,
        allocation: &[f64],
        window: usize,
        step: usize,
    ) -> Vec<(usize, Vec<f64>, Vec<f64>)> {
        let teams = self.got.len();
        let window = window.max(1);
        let mut got = vec![0u64; teams];
        let mut dem = vec![0u64; teams];
        let mut cap = 0u64;
        let mut out = Vec::new();
        for h in 0..self.hours() {
            for t in 0..teams {
                got[t] += self.got[t][h];
                dem[t] += self.demand[t][h];
                if h >= window {
                    got[t] -= self.got[t][h - window];
                    dem[t] -= self.demand[t][h - window];
                }
            }
            cap += self.capacity[h];
            if h >= window {
                cap -= self.capacity[h - window];
            }
            if (h + 1) % step.max(1) != 0 && h + 1 != self.hours() {
                continue;
            }
            let total: u64 = got.iter().sum();
            let fair = waterfill(
                cap as f64,
                allocation,
                &dem.iter().map(|&d| d as f64).collect::<Vec<_>>(),
            );
            let fair_total: f64 = fair.iter().sum();
            let shares = got
                .iter()
                .map(|&g| {
                    if total > 0 {
                        g as f64 / total as f64
                    } else {
                        0.0
                    }
                })
                .collect();
            let fair_shares = fair
                .iter()
                .map(|&f| {
                    if fair_total > 0.0 {
                        f / fair_total
                    } else {
                        0.0
                    }
                })
                .collect();
            out.push((h, shares, fair_shares));
        }
        out
    }
}

pub use fairshare::entitlement::waterfill;

/// Counters and hourly accumulators, fed by the event loop.
#[derive(Clone)]
pub(crate) struct Metrics {
    last: Vec<u64>,
    running: Vec<u64>,
    pending: Vec<u64>,
    got: Vec<Vec<u64>>,
    demand: Vec<Vec<u64>>,
    cap: Vec<u64>,
    cap_last: u64,
    raw: Vec<f64>,
    pub events: u64,
    pub starts: u64,
    pub finished: u64,
    pub free_tier_gpu_s: u64,
    pub lost_gpu_s: u64,
    pub team_lost_gpu_s: Vec<u64>,
    /// Per team: charge of its ended attempts (`allot`), milli-unit-seconds
    /// ([`fairshare::charge::MILLI_PER_UNIT`] per GPU-second).
    pub team_charged_s: Vec<u64>,
    pub team_preempted: Vec<u64>,
    pub drain_requeues: u64,
    pub fail_requeues: u64,
    pub ignored_node_events: usize,
    pub stopped_at_horizon: bool,
    pub preemptions: Vec<PreemptionRecord>,
    /// Under `allot`: each job's priority at its submission.
    pub submit_priorities: Vec<crate::PriorityRecord>,
    /// Every ended attempt.
    pub attempts: Vec<crate::AttemptRecord>,
}

/// Adds `rate` per second over `[from, to)` into hour buckets.
fn add_span(buckets: &mut Vec<u64>, from: u64, to: u64, rate: u64) {
    if rate == 0 || to <= from {
        return;
    }
    let last_hour = ((to - 1) / 3600) as usize;
    if buckets.len() <= last_hour {
        buckets.resize(last_hour + 1, 0);
    }
    let mut t = from;
    while t < to {
        let h = t / 3600;
        let edge = ((h + 1) * 3600).min(to);
        buckets[h as usize] += rate * (edge - t);
        t = edge;
    }
}

impl Metrics {
    pub fn new(teams: usize, _capacity: u64, ignored_node_events: usize) -> Metrics {
        Metrics {
            last: vec![0; teams],
            running: vec![0; teams],
            pending: vec![0; teams],
            got: vec![Vec::new(); teams],
            demand: vec![Vec::new(); teams],
            cap: Vec::new(),
            cap_last: 0,
            raw: vec![0.0; teams],
            events: 0,
            starts: 0,
            finished: 0,
            free_tier_gpu_s: 0,
            lost_gpu_s: 0,
            team_lost_gpu_s: vec![0; teams],
            team_charged_s: vec![0; teams],
            team_preempted: vec![0; teams],
            drain_requeues: 0,
            fail_requeues: 0,
            ignored_node_events,
            stopped_at_horizon: false,
            preemptions: Vec::new(),
            submit_priorities: Vec::new(),
            attempts: Vec::new(),
        }
    }

    /// A copy for a fork of the replay ([`crate::run`]'s `Sim::fork`):
    /// every figure so far, but none of the logs (preemptions, priorities,
    /// attempts), which a fork does not report and which would make every
    /// fork of a long replay copy them.
    pub fn for_fork(&self) -> Metrics {
        Metrics {
            last: self.last.clone(),
            running: self.running.clone(),
            pending: self.pending.clone(),
            got: self.got.clone(),
            demand: self.demand.clone(),
            cap: self.cap.clone(),
            cap_last: self.cap_last,
            raw: self.raw.clone(),
            events: self.events,
            starts: self.starts,
            finished: self.finished,
            free_tier_gpu_s: self.free_tier_gpu_s,
            lost_gpu_s: self.lost_gpu_s,
            team_lost_gpu_s: self.team_lost_gpu_s.clone(),
            team_charged_s: self.team_charged_s.clone(),
            team_preempted: self.team_preempted.clone(),
            drain_requeues: self.drain_requeues,
            fail_requeues: self.fail_requeues,
            ignored_node_events: self.ignored_node_events,
            stopped_at_horizon: self.stopped_at_horizon,
            preemptions: Vec::new(),
            submit_priorities: Vec::new(),
            attempts: Vec::new(),
        }
    }

    fn accrue(&mut self, t: usize, now: u64) {
        let from = self.last[t];
        if now > from {
            add_span(&mut self.got[t], from, now, self.running[t]);
            add_span(
                &mut self.demand[t],
                from,
                now,
                self.running[t] + self.pending[t],
            );
            self.raw[t] += (self.running[t] * (now - from)) as f64;
            self.last[t] = now;
        }
    }

    /// Team `t`'s running and pending GPUs change by the deltas at `now`.
    pub fn change_team(&mut self, t: usize, now: u64, d_running: i64, d_pending: i64) {
        self.accrue(t, now);
        self.running[t] = (self.running[t] as i64 + d_running) as u64;
        self.pending[t] = (self.pending[t] as i64 + d_pending) as u64;
    }

    /// GPUs team `t` holds now.
    pub fn running_gpus(&self, t: usize) -> u64 {
        self.running[t]
    }

    /// Capacity held `capacity` GPUs since the last call; account it to `now`.
    pub fn accrue_capacity(&mut self, now: u64, capacity: u64) {
        add_span(&mut self.cap, self.cap_last, now, capacity);
        self.cap_last = now.max(self.cap_last);
    }

    /// GPU-seconds each team ran since the last call (for decayed usage).
    pub fn take_raw_usage(&mut self, now: u64) -> Vec<f64> {
        for t in 0..self.last.len() {
            self.accrue(t, now);
        }
        std::mem::replace(&mut self.raw, vec![0.0; self.last.len()])
    }

    /// The hourly series, padded to one length.
    pub fn hourly(&mut self) -> Hourly {
        let h = self
            .got
            .iter()
            .chain(&self.demand)
            .map(Vec::len)
            .chain([self.cap.len()])
            .max()
            .unwrap_or(0);
        let pad = |v: &Vec<u64>| {
            let mut v = v.clone();
            v.resize(h, 0);
            v
        };
        Hourly {
            capacity: pad(&self.cap),
            got: self.got.iter().map(pad).collect(),
            demand: self.demand.iter().map(pad).collect(),
        }
    }
}

/// Nearest-rank percentile of sorted values (0 when empty).
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

pub(crate) struct ReportInput<'a> {
    pub policy: Policy,
    pub w: &'a Workload,
    pub sim: &'a crate::SimSettings,
    pub m: Metrics,
    pub hourly: Hourly,
    pub end: u64,
    pub waits: Vec<(usize, u64)>,
    pub team_waits: Vec<(usize, u64)>,
    pub team_jobs: Vec<u64>,
    pub unfinished: u64,
    /// The org tree the teams are leaves of (for `entitled_gpu_hours`).
    pub tree: &'a Tree,
    /// Per job: times it was requeued.
    pub requeues: Vec<u32>,
}

/// Per team (in `teams`' order, each on its leaf) and hour, GPU-seconds
/// entitled: the tree's water-fill of the hour's capacity against each
/// leaf's demand of the hour (GPU-seconds; the water-fill is linear in its
/// unit).
pub(crate) fn entitled_gpu_s(tree: &Tree, teams: &[super::Team], hourly: &Hourly) -> Vec<Vec<f64>> {
    let leaves = tree.leaves().len();
    let mut out = vec![Vec::with_capacity(hourly.hours()); teams.len()];
    let mut pending = vec![0u64; leaves];
    let mut e = Entitlements::compute(tree, 0, &[], &[]);
    let mut scratch = Scratch::default();
    for (h, &capacity) in hourly.capacity.iter().enumerate() {
        pending.iter_mut().for_each(|p| *p = 0);
        for (t, team) in teams.iter().enumerate() {
            pending[team.leaf.0 as usize] += hourly.demand[t][h];
        }
        e.recompute(tree, capacity, &[], &pending, &mut scratch);
        for (out, team) in out.iter_mut().zip(teams) {
            out.push(e.entitled(team.leaf));
        }
    }
    out
}

/// Over hours, GPU-seconds `got` held above `entitled` (0 in an hour it
/// held no more), and the most of any one hour.
pub(crate) fn excess_gpu_s(got: &[u64], entitled: &[f64]) -> (f64, f64) {
    got.iter()
        .zip(entitled)
        .map(|(&g, &e)| (g as f64 - e).max(0.0))
        .fold((0.0, 0.0), |(sum, peak), x| (sum + x, f64::max(peak, x)))
}

/// Per group of the tree (interior node below the root), its teams' got and
/// entitlement hour by hour, summed over its teams ([`GroupReport`]).
pub(crate) fn groups(
    tree: &Tree,
    teams: &[super::Team],
    hourly: &Hourly,
    entitled: &[Vec<f64>],
) -> Vec<GroupReport> {
    let root = fairshare::tree::Tree::ROOT;
    let lineage: Vec<Vec<fairshare::tree::NodeId>> = teams
        .iter()
        .map(|t| tree.lineage(tree.leaf_node(t.leaf)))
        .collect();
    let mut out = Vec::new();
    for (i, node) in tree.nodes().iter().enumerate() {
        let id = fairshare::tree::NodeId(i as u32);
        if id == root || node.children.is_empty() {
            continue;
        }
        let members: Vec<usize> = (0..teams.len())
            .filter(|&t| lineage[t].contains(&id))
            .collect();
        let got: Vec<u64> = (0..hourly.hours())
            .map(|h| members.iter().map(|&t| hourly.got[t][h]).sum())
            .collect();
        let ent: Vec<f64> = (0..hourly.hours())
            .map(|h| members.iter().map(|&t| entitled[t][h]).sum())
            .collect();
        let (excess, peak) = excess_gpu_s(&got, &ent);
        out.push(GroupReport {
            name: node
                .path
                .strip_prefix("tree.")
                .unwrap_or(&node.path)
                .to_string(),
            teams: members.iter().map(|&t| teams[t].name.clone()).collect(),
            gpu_hours: got.iter().sum::<u64>() as f64 / 3600.0,
            entitled_gpu_hours: ent.iter().sum::<f64>() / 3600.0,
            excess_gpu_hours: excess / 3600.0,
            excess_peak_gpus: peak / 3600.0,
        });
    }
    out
}

/// The team with the lowest owed% among those owed at least `floor`
/// GPU-hours (and more than 0).
pub(crate) fn worst_team_above(teams: &[TeamReport], floor: f64) -> Option<WorstTeam> {
    teams
        .iter()
        .filter(|t| t.owed_gpu_hours > 0.0 && t.owed_gpu_hours >= floor)
        .min_by(|a, b| a.owed_delivered.total_cmp(&b.owed_delivered))
        .map(|t| WorstTeam {
            name: t.name.clone(),
            owed_delivered: t.owed_delivered,
            owed_gpu_hours: t.owed_gpu_hours,
        })
}

/// Max and p99 (nearest rank) of the jobs' requeue counts.
pub(crate) fn requeues_per_job(mut requeues: Vec<u32>) -> RequeuesPerJob {
    requeues.sort_unstable();
    let sorted: Vec<u64> = requeues.iter().map(|&r| u64::from(r)).collect();
    RequeuesPerJob {
        max: requeues.last().copied().unwrap_or(0),
        p99: percentile(&sorted, 99.0) as u32,
    }
}

pub(crate) fn report(i: ReportInput<'_>) -> SimReport {
    let hourly = i.hourly;
    let teams = i.w.teams.len();
    let alloc: Vec<f64> = i.w.teams.iter().map(|t| t.allocation).collect();
    let mut owed = vec![0.0f64; teams];
    let mut delivered = vec![0.0f64; teams];
    let mut got = vec![0u64; teams];
    for h in 0..hourly.hours() {
        let cap = hourly.capacity[h] as f64;
        for t in 0..teams {
            let o = (alloc[t] * cap).min(hourly.demand[t][h] as f64);
            owed[t] += o;
            delivered[t] += (hourly.got[t][h] as f64).min(o);
            got[t] += hourly.got[t][h];
        }
    }
    let cap_total: u64 = hourly.capacity.iter().sum();
    let got_total: u64 = got.iter().sum();
    // Occupancy over the submissions' span (hours of the first to the last
    // submission, both whole).
    let first_h = i.w.jobs.iter().map(|j| j.submit).min().unwrap_or(0) / 3600;
    let last_h = i.w.jobs.iter().map(|j| j.submit).max().unwrap_or(0) / 3600;
    let span = |v: &Vec<u64>| -> u64 {
        v.iter()
            .enumerate()
            .filter(|(h, _)| (first_h..=last_h).contains(&(*h as u64)))
            .map(|(_, x)| x)
            .sum()
    };
    let span_cap = span(&hourly.capacity);
    let span_got: u64 = hourly.got.iter().map(span).sum();
    // Owed and delivered per week.
    let (mut owed_w, mut delivered_w) = (0.0f64, 0.0f64);
    for w0 in (0..hourly.hours()).step_by(168) {
        let w1 = (w0 + 168).min(hourly.hours());
        let cap: u64 = hourly.capacity[w0..w1].iter().sum();
        for (t, a) in alloc.iter().enumerate() {
            let dem: u64 = hourly.demand[t][w0..w1].iter().sum();
            let g: u64 = hourly.got[t][w0..w1].iter().sum();
            let o = (a * cap as f64).min(dem as f64);
            owed_w += o;
            delivered_w += (g as f64).min(o);
        }
    }
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    // Share error, hourly over the rolling metric window.
    let window = (i.sim.metric_window.div_ceil(3600)) as usize;
    let errors: Vec<f64> = hourly
        .rolling_shares(&alloc, window, 1)
        .into_iter()
        .filter(|(_, s, f)| s.iter().sum::<f64>() > 0.0 && f.iter().sum::<f64>() > 0.0)
        .map(|(_, s, f)| 0.5 * s.iter().zip(&f).map(|(a, b)| (a - b).abs()).sum::<f64>())
        .collect();
    let mut sorted_err = errors.clone();
    sorted_err.sort_by(f64::total_cmp);
    let mean_err = if errors.is_empty() {
        0.0
    } else {
        errors.iter().sum::<f64>() / errors.len() as f64
    };
    let p90_err = if sorted_err.is_empty() {
        0.0
    } else {
        sorted_err[((0.9 * sorted_err.len() as f64).ceil() as usize).clamp(1, sorted_err.len()) - 1]
    };
    let mut class_waits: Vec<Vec<u64>> = vec![Vec::new(); JobClass::ALL.len()];
    for (c, w) in &i.waits {
        class_waits[*c].push(*w);
    }
    for v in &mut class_waits {
        v.sort_unstable();
    }
    let mut team_waits: Vec<Vec<u64>> = vec![Vec::new(); teams];
    for (t, w) in &i.team_waits {
        team_waits[*t].push(*w);
    }
    for v in &mut team_waits {
        v.sort_unstable();
    }
    let waits = JobClass::ALL
        .iter()
        .map(|&c| {
            let v = &class_waits[c as usize];
            ClassWaits {
                class: c,
                jobs: v.len() as u64,
                p50_s: percentile(v, 50.0),
                p90_s: percentile(v, 90.0),
                p99_s: percentile(v, 99.0),
            }
        })
        .collect();
    let entitled = entitled_gpu_s(i.tree, &i.w.teams, &hourly);
    let team_reports: Vec<TeamReport> = (0..teams)
        .map(|t| TeamReport {
            name: i.w.teams[t].name.clone(),
            allocation: alloc[t],
            jobs: i.team_jobs[t],
            gpu_hours: got[t] as f64 / 3600.0,
            owed_gpu_hours: owed[t] / 3600.0,
            delivered_gpu_hours: delivered[t] / 3600.0,
            // Owed nothing (no allocation, or no demand): nothing fell
            // short, as the worst team (owed > 0 only) already reads it.
            owed_delivered: if owed[t] > 0.0 {
                delivered[t] / owed[t]
            } else {
                1.0
            },
            share: ratio(got[t] as f64, got_total as f64),
            occupancy: ratio(got[t] as f64, cap_total as f64),
            preempted: i.m.team_preempted[t],
            lost_gpu_hours: i.m.team_lost_gpu_s[t] as f64 / 3600.0,
            wait_p50_s: percentile(&team_waits[t], 50.0),
            wait_p90_s: percentile(&team_waits[t], 90.0),
            classic_wait_p90_s: None,
            entitled_gpu_hours: entitled[t].iter().sum::<f64>() / 3600.0,
            excess_gpu_hours: excess_gpu_s(&hourly.got[t], &entitled[t]).0 / 3600.0,
            excess_peak_gpus: excess_gpu_s(&hourly.got[t], &entitled[t]).1 / 3600.0,
            charged_gpu_hours: i.m.team_charged_s[t] as f64
                / (3600.0 * fairshare::charge::MILLI_PER_UNIT as f64),
        })
        .collect();
    let owed_sum: f64 = owed.iter().sum();
    let delivered_sum: f64 = delivered.iter().sum();
    let teams_at_95 = team_reports
        .iter()
        .filter(|t: &&TeamReport| t.owed_delivered >= 0.95)
        .count() as u64;
    let worst_team = team_reports
        .iter()
        .filter(|t| t.owed_gpu_hours > 0.0)
        .min_by(|a, b| a.owed_delivered.total_cmp(&b.owed_delivered))
        .map(|t| (t.name.clone(), t.owed_delivered));
    let worst_team_floor = worst_team_above(&team_reports, i.sim.worst_floor_gpu_hours as f64);
    let lost_gpu_hours = i.m.lost_gpu_s as f64 / 3600.0;
    SimReport {
        policy: i.policy,
        jobs: i.w.jobs.len() as u64,
        finished: i.m.finished,
        unfinished: i.unfinished,
        span_s: i.end,
        events: i.m.events,
        capacity_gpu_hours: cap_total as f64 / 3600.0,
        gpu_hours: got_total as f64 / 3600.0,
        owed_gpu_hours: owed_sum / 3600.0,
        delivered_gpu_hours: delivered_sum / 3600.0,
        owed_delivered: ratio(delivered_sum, owed_sum),
        owed_delivered_weekly: ratio(delivered_w, owed_w),
        teams_at_95,
        worst_team,
        worst_team_floor,
        requeues_per_job: requeues_per_job(i.requeues),
        occupancy: ratio(span_got as f64, span_cap as f64),
        occupancy_to_end: ratio(got_total as f64, cap_total as f64),
        unallocated_share: ratio(i.m.free_tier_gpu_s as f64, got_total as f64),
        waits,
        preemptions: i.m.preemptions.len() as u64,
        drain_requeues: i.m.drain_requeues,
        fail_requeues: i.m.fail_requeues,
        lost_gpu_hours,
        lost_of_delivered: ratio(lost_gpu_hours, delivered_sum / 3600.0),
        preemptions_per_1000_gpu_hours: ratio(
            i.m.preemptions.len() as f64 * 1000.0,
            delivered_sum / 3600.0,
        ),
        reversals: reversals(&i.m.preemptions),
        share_error_mean: mean_err,
        share_error_p90: p90_err,
        ignored_node_events: i.m.ignored_node_events as u64,
        stopped_at_horizon: i.m.stopped_at_horizon,
        teams: team_reports,
        groups: groups(i.tree, &i.w.teams, &hourly, &entitled),
        hourly,
        wait_samples: class_waits,
        preemption_log: i.m.preemptions,
        submit_priorities: i.m.submit_priorities,
        attempt_log: i.m.attempts,
    }
}

/// [`SimReport::reversals`]: `log` is in time order.
fn reversals(log: &[PreemptionRecord]) -> u64 {
    let mut n = 0;
    for (i, a) in log.iter().enumerate() {
        if a.preemptor_short || a.preemptor_team == a.victim_team {
            continue;
        }
        let until = a.time.saturating_add(a.preemptor_min_runtime);
        let answered = log[i + 1..].iter().take_while(|b| b.time < until).any(|b| {
            !b.preemptor_short
                && b.preemptor_team == a.victim_team
                && b.victim_team == a.preemptor_team
        });
        n += u64::from(answered);
    }
    n
}

#[cfg(test)]
mod tests;
