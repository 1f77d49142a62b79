//! The discrete-event loop.
//!
//! Time jumps from one schedulable moment to the next: arrivals,
//! completions, contract expiries (a job becoming preemptible), drain and
//! failure starts and ends, and, while jobs wait under `allot`, the next
//! snapshot refresh (the plugins rebuild their engine every
//! `sync.interval`). All events of one second are applied, then one
//! scheduling pass runs:
//!
//! 1. pending jobs in priority order (the policy's order; under `allot` the
//!    engine's `u32` priority of the snapshot);
//! 2. each job that fits starts (best-fit placement);
//! 3. the first job that does not fit may preempt (`allot` only): the
//!    engine's [`Engine::choose_victims`] picks the victims among the
//!    running jobs a quick filter deems preemptable (other team, past its
//!    contract, ranked below or free tier), the victims are requeued and the
//!    job starts;
//! 4. otherwise it gets a reservation at the earliest time enough GPUs
//!    free up (from running jobs' remaining work) and the pass becomes EASY
//!    backfill: up to `backfill_depth` lower-priority jobs start if they fit
//!    now and either end before the reservation or stay off its nodes.
//!
//! Requeue: a resumable job keeps its work up to its last checkpoint
//! (`checkpoint_interval`), a non-resumable one restarts from zero; the
//! rest is lost GPU time. The requeued job is eligible again after
//! `requeue_delay` (Slurm: `cred_expire + 1`; default 0, at once); while it
//! waits it is pending (its leaf's pending GPUs count it, as the plugins'
//! do) but in no queue.
//! Runtimes come from the trace, so the backfill knows exact end times (an
//! oracle: real users' time limits are longer, making real backfill worse).
//!
//! This module holds the simulator's state ([`Sim`]), the loop and the
//! final report; its parts: `setup` (building a replay), `events` (what
//! each event does), `snapshot` (the policy's view), `pass` (a scheduling
//! pass), `backfill` (the reservation), `preempt` (who may take whose
//! GPUs) and `jobs` (starting and stopping a job).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::sync::Arc;

mod backfill;
mod events;
mod fork;
pub(crate) use fork::Progress;
mod jobs;
mod live;
pub(crate) use live::{AtPresent, Standing};
mod main_loop;
mod pass;
mod preempt;
mod queue;
mod second;
mod setup;
mod snapshot;

use super::cluster::Cluster;
use super::metrics::{Hourly, Metrics};
use super::trace::{NodeEvent, NodeEventKind};
use super::workload::Workload;
use super::{ClusterSpec, Policy, PreemptionRecord, SimReport, SimSettings};
use crate::settings::{
    BackfillCandidates, BackfillHold, BackfillIdle, BackfillPreempt, BackfillReserve, Placement,
    PreemptorStart, ShortPartition, SnapshotPhase, VictimBudget,
};
use backfill::Held;
use fairshare::config::Config;
use fairshare::contract::{protected_until, Contract, RunClock};
use fairshare::drain::{self, NodeJob};
use fairshare::engine::Engine;
use fairshare::entitlement::Entitlements;
use fairshare::fair_tree::FairTree;
use fairshare::preempt::{NodeGpus, Preemptor, RunningJob};
use fairshare::priority::{compose, Band, PendingJob};
use fairshare::usage::{OpenCharge, UsageTracker};
use queue::Queue;

/// Event kinds, in the order they apply within one second.
const COMPLETE: u8 = 0;
const NODE_START: u8 = 1;
const EXPIRY: u8 = 2;
/// Before NODE_END: a drained node's job whose contract ends in the second
/// the drain ends is still requeued (the drain ends because the node is
/// empty: `scontrol update state=resume` once the sidecar requeued it).
const DRAIN_REQUEUE: u8 = 3;
const NODE_END: u8 = 4;
const TICK: u8 = 5;
const BACKFILL: u8 = 6;
/// A time a waiting job asked to be looked at again (a repreempt delay ends): look at the queue again.
const WAKE: u8 = 7;
/// A requeued job's `[sim] requeue_delay` ends: it joins its queue.
const ELIGIBLE: u8 = 8;
/// `[sim] sched_interval`: the main scheduler's next pass is due.
const MAIN: u8 = 9;
/// `[sim] drain_pass_ms`: the sidecar's draining pass looks at drained
/// node `a` (the first pass after its drain began).
const DRAIN_PASS: u8 = 10;
/// `[sim] victim_complete_ms`: the victims of preemptor `a`, COMPLETING
/// since a pass, free their GPUs (`b`: the offset into the second, µs).
const VICTIM_DONE: u8 = 11;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Pending,
    Running,
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StopReason {
    Complete,
    Preempted,
    Drain,
    Fail,
}

#[derive(Debug, Clone)]
struct JobState {
    remaining: u64,
    eligible: u64,
    /// When it was queued: its submission, reset to the instant of each
    /// requeue (slurmctld's `submit_time`, which breaks ties between jobs
    /// of equal priority; the requeue's `begin_time` only delays it).
    order: u64,
    state: State,
    attempt: u32,
    start: u64,
    end: u64,
    first_start: u64,
    alloc: Vec<NodeGpus>,
    open: Option<OpenCharge>,
    unprotected: bool,
    /// When the job last preempted (`repreempt_delay`); u64::MAX: never.
    preempted_at: u64,
    /// Its end's offset into its second, µs (with `sched_interval`: the
    /// offset of the pass that started it plus `attempt_overhead_ms`).
    end_us: u32,
}

impl JobState {
    /// A job not yet submitted: its whole `duration` of work ahead.
    fn new(j: &super::workload::SimJob) -> JobState {
        JobState {
            remaining: j.duration,
            eligible: j.submit,
            order: j.submit,
            state: State::Pending,
            attempt: 0,
            start: 0,
            end: 0,
            first_start: u64::MAX,
            alloc: Vec::new(),
            open: None,
            unprotected: false,
            preempted_at: u64::MAX,
            end_us: 0,
        }
    }
}

struct Reservation {
    shadow: u64,
    nodes: Vec<u32>,
}

/// Classic / Fair Tree decayed usage.
#[derive(Clone)]
struct Decay {
    usage: Vec<f64>,
    factor: Vec<f64>,
    last: u64,
    next: u64,
}

pub(crate) struct Sim<'w> {
    w: &'w Workload,
    config: Arc<Config>,
    /// The `[sim]` settings.
    sim: &'w SimSettings,
    policy: Policy,
    cluster: Cluster,
    jobs: Vec<JobState>,
    /// Per queue: pending jobs by (queued time, index), each with its
    /// shape, so that a pass reads the jobs it looks at from the queue alone.
    queues: Vec<Queue>,
    /// Per job: its slot in its queue ([`queue`]).
    queue_pos: Vec<u32>,
    pending: usize,
    running_by_end: BTreeSet<(u64, u32)>,
    /// Running jobs by the end the backfill plans with: start + time limit
    /// where the trace gives one, else their end. Kept only when some job
    /// of the trace has a time limit (`plans_by_limit`); else it would be
    /// `running_by_end` ([`Sim::by_plan`]).
    running_by_plan: BTreeSet<(u64, u32)>,
    plans_by_limit: bool,
    events: BinaryHeap<Reverse<(u64, u8, u32, u32)>>,
    node_events: Vec<NodeEvent>,
    next_arrival: usize,
    now: u64,
    // allot
    tracker: UsageTracker,
    /// `ledger_lag`: charged starts and ends of the last `ledger_lag`
    /// seconds, oldest first, that a snapshot may not know of yet.
    ledger_recent: std::collections::VecDeque<LedgerEvent>,
    engine: Option<Engine>,
    next_refresh: u64,
    snapshot: u32,
    team_rank: Vec<u32>,
    /// Per team: below its entitlement at the snapshot (the priority band).
    team_below: Vec<bool>,
    rate: Vec<u64>,
    /// Per team: running allocated jobs past their contract, by
    /// ([`fewest`] of its requeues, start, id): walked backwards, the
    /// engine's victim order (fewest requeues, then youngest).
    unprot: Vec<BTreeMap<(u32, u64, u32), Holding>>,
    unprot_gpus: Vec<u64>,
    /// Per team: running free-tier jobs, by (0, start, id).
    free_tier: Vec<BTreeMap<(u32, u64, u32), Holding>>,
    free_tier_gpus: Vec<u64>,
    /// Per leaf: GPUs of allocated jobs running and pending (entitlement).
    leaf_running: Vec<u64>,
    leaf_pending: Vec<u64>,
    /// Bumped whenever a leaf's running or pending GPUs or the capacity
    /// change; the entitlements computed at one version are reused.
    load_version: u64,
    load_cache: std::cell::RefCell<LoadCache>,
    epoch: u64,
    /// The job whose preemption attempt last failed, at which epoch and
    /// requeue-point round ([`Sim::attempt_key`]): it is not tried again
    /// until a job starts or stops, or the round changes.
    failed_attempt: Option<(u32, u64, u64)>,
    /// Times of pending WAKE events (one event per time).
    wakes: std::collections::BTreeSet<u64>,
    tick_at: u64,
    bf_at: u64,
    /// Second of the next MAIN event queued (u64::MAX: none).
    main_at: u64,
    /// With `sched_interval`: when the main pass runs.
    main_loop: main_loop::MainLoop,
    /// The last second a job was submitted, started, stopped or requeued,
    /// or a node changed (slurmctld's `last_job_update` and
    /// `last_node_update`): with `backfill_idle = "skip"` a backfill pass
    /// runs only up to `backfill_interval` after it.
    last_change: u64,
    backfill_now: bool,
    /// Simulated time after which the run stops (see [`horizon`]).
    horizon: u64,
    // baselines
    decay: Decay,
    slices: Vec<u64>,
    /// Per queue: (snapshot, head job, its key).
    head_cache: Vec<(u32, u32, u64)>,
    /// The buffer of [`Sim::mark_owed`] (the owed band of the pending
    /// allocated jobs, recomputed on the live load before every pass, is
    /// kept in the engine: [`fairshare::Engine::with_owed`]).
    owed_buf: Vec<fairshare::owed::Queued>,
    /// Buffers of [`Sim::pass`], kept between passes: the heap of queue
    /// heads.
    pass_heap: Vec<PassEntry>,
    /// Per queue: [`Sim::queue_floor`] at this pass.
    pass_floors: Vec<Option<u64>>,
    /// `preemptor_start = "next_pass"`: per preemption in this pass, the
    /// preemptor and the GPUs held for it (its victims', still completing,
    /// and the rest of its placement) until the pass ends.
    completing: Vec<(u32, Vec<NodeGpus>)>,
    /// `victim_complete_ms`: per preemption of this pass, the preemptor
    /// and its victims' GPUs, held for them once the pass ends.
    victims_freed: Vec<(u32, Vec<NodeGpus>)>,
    /// `victim_complete_ms`: victims' GPUs still busy (COMPLETING): when
    /// they come back (µs since second 0), the preemptor they are held
    /// under, and the GPUs.
    victims_busy: Vec<(u64, u32, Vec<NodeGpus>)>,
    /// Buffer of [`Sim::second_with_passes`]: this second's job ends and
    /// node events (offset µs, kind, a, b), applied at their offsets among
    /// its passes.
    pass_ends: Vec<(u64, u8, u32, u32)>,
    /// Events that a handler times later in the second being replayed
    /// (offset µs, kind, a, b): [`Sim::second_with_passes`] applies them
    /// at their offsets (a drain's first draining pass, `drain_pass_ms`).
    timed_later: Vec<(u64, u8, u32, u32)>,
    /// With `sched_interval`: whether this second's backfill pass left a
    /// job blocked.
    bf_blocked: bool,
    /// The offset (µs) into its second of the pass running now, with
    /// `sched_interval` ([`Sim::second_with_passes`]).
    pass_us: Option<u64>,
    /// Buffers of [`Sim::try_preempt`], kept between calls.
    scratch: std::cell::RefCell<PreemptScratch>,
    m: Metrics,
}

/// A charged job's start or end, kept for `ledger_lag`: its time, account
/// index, charge rate (milli-units a second, [`fairshare::charge`]), and for an end the time its charge
/// ends (`None` for a start).
#[derive(Debug, Clone, Copy)]
struct LedgerEvent {
    at: u64,
    account: u32,
    rate: u64,
    charged_end: Option<u64>,
}

/// The entitlements at one `load_version`, recomputed in place (no
/// allocation) when the load has changed and nobody holds the last ones.
struct LoadCache {
    /// The load version and snapshot it was computed at.
    version: Option<(u64, u64)>,
    value: std::sync::Arc<Entitlements>,
    scratch: fairshare::entitlement::Scratch,
}

/// Buffers of [`Sim::try_preempt`] (and `per_node` of the backfill
/// reservation), kept between calls so a failed attempt (most of them)
/// allocates nothing.
#[derive(Default)]
struct PreemptScratch {
    /// Per node: GPUs the candidates so far would free (all 0 between
    /// uses).
    per_node: Vec<u32>,
    /// Per team: GPUs it may lose to this preemptor.
    gives: Vec<u64>,
    /// Teams that may lose some, by surplus (largest first), then index.
    teams: Vec<(Reverse<u64>, usize)>,
    /// Nodes whose `per_node` counter was touched.
    touched: Vec<u32>,
    /// (node, candidate job) pairs.
    pairs: Vec<(u32, u32)>,
    /// (GPUs still missing, node) of nodes where the preemptor would fit.
    fitting: Vec<(u32, u32)>,
    /// Per node: GPUs of the team being tallied taken there so far (all 0
    /// between teams).
    spent: Vec<u64>,
    /// Nodes whose `spent` counter was touched.
    spent_touched: Vec<u32>,
}

/// Queues per team: free tier, allocated, debug work, sweeps, jobs that
/// used their requeues. Inside one queue every job has the same priority
/// but for its age and the owed band ([`fairshare::owed`]: a prefix of the
/// team's jobs in the team's own order, so of each queue), so the queue's order
/// (queued time, index) is its priority order, ties broken as slurmctld
/// breaks them (submit time, then job id; a requeue resets the submit
/// time). A job's age counts from when it is eligible, `requeue_delay`
/// after its queued time for a requeued job only: with a delay its age
/// points can lag, by one, those of a job queued up to that many seconds
/// after it, and it is still taken first.
const QUEUES_PER_TEAM: usize = 5;
/// The kind (queue of a team) of allocated jobs that used their requeues.
const EXHAUSTED: usize = 4;

/// A pending job's GPUs per node, nodes and remaining run time (seconds).
type Shape = (u32, u32, u64);

/// What a preemption candidate holds, kept beside it in `unprot` and
/// `free_tier` so that tallying candidates reads no job state: its GPUs, and
/// its one node (`node: None` for a job on several nodes: read its `alloc`).
#[derive(Debug, Clone, Copy)]
struct Holding {
    gpus: u32,
    node: Option<NodeGpus>,
}

impl Holding {
    fn of(alloc: &[NodeGpus]) -> Holding {
        Holding {
            gpus: alloc.iter().map(|a| a.gpus).sum(),
            node: match alloc {
                [one] => Some(*one),
                _ => None,
            },
        }
    }
}

/// An entry of a scheduling pass's heap: priority key, eligible time, job
/// index, queue, and the job's shape and slot in its queue.
type PassEntry = (u64, Reverse<u64>, Reverse<u32>, u32, Shape, usize);

/// The first part of a candidate's key in `unprot`: higher for fewer
/// requeues, so that the backwards walk meets the jobs requeued fewest
/// times first, as [`fairshare::Engine::victim_key`] orders them.
fn fewest(requeues: u32) -> u32 {
    u32::MAX - requeues
}

/// The queue of a job of `team` with `min_runtime`, debug work or part of
/// a sweep of short jobs (`sweep`), or an allocated job that used its
/// requeues (`exhausted`, under `allot`: [`Sim::is_exhausted`]).
fn queue_of(team: u32, min_runtime: u64, debug: bool, sweep: bool, exhausted: bool) -> usize {
    let kind = if min_runtime == 0 {
        0
    } else if exhausted {
        EXHAUSTED
    } else if debug {
        2
    } else if sweep {
        3
    } else {
        1
    };
    team as usize * QUEUES_PER_TEAM + kind
}

impl<'w> Sim<'w> {
    /// Runs to the end; `progress` gets the number of finished jobs now and
    /// then.
    pub fn run(mut self, progress: &mut dyn FnMut(u64)) -> SimReport {
        let mut since_progress = 0u32;
        while self.step() {
            since_progress += 1;
            if since_progress >= 8192 {
                since_progress = 0;
                progress(self.m.finished);
            }
        }
        progress(self.m.finished);
        self.finish()
    }

    /// The next instant with something to do: its events and arrivals, then
    /// its scheduling pass. False when nothing is left (or the horizon is
    /// reached), and nothing was done.
    pub(crate) fn step(&mut self) -> bool {
        {
            let next_arrival = self.w.jobs.get(self.next_arrival).map(|j| j.submit);
            let next_event = self.events.peek().map(|Reverse(e)| e.0);
            let t = match (next_arrival, next_event) {
                (None, None) => return false,
                (a, e) => a.unwrap_or(u64::MAX).min(e.unwrap_or(u64::MAX)),
            };
            if t > self.horizon {
                // A preemption livelock (see `horizon`): stop and report.
                self.m.stopped_at_horizon = true;
                return false;
            }
            self.set_now(t);
            let sched = self.sim.sched_interval;
            if sched == 0 {
                // The main pass runs at every event, after the second's
                // events and arrivals.
                while let Some(&Reverse((et, kind, a, b))) = self.events.peek() {
                    if et != t {
                        break;
                    }
                    self.events.pop();
                    self.m.events += 1;
                    self.handle(kind, a, b);
                }
                while let Some(j) = self.w.jobs.get(self.next_arrival) {
                    if j.submit != t {
                        break;
                    }
                    let id = self.next_arrival as u32;
                    self.next_arrival += 1;
                    self.m.events += 1;
                    // Submitted after this second's pass: seen in the next.
                    let seen = if self.misses_pass(id) { t + 1 } else { t };
                    self.log_submit_priority(id);
                    self.enqueue_at(id, seen);
                }
            } else {
                self.second_with_passes(t);
            }
            let backfill = std::mem::take(&mut self.backfill_now);
            // With `sched_interval` the second's passes have run.
            let blocked = if sched == 0 {
                self.pass(backfill)
            } else {
                self.bf_blocked
            };
            // With `sched_interval` the backfill runs every
            // `backfill_interval` while anything is pending, blocked or not.
            if (blocked || (sched > 0 && self.pending > 0)) && self.bf_at == u64::MAX {
                self.bf_at = if sched > 0 {
                    self.backfill_pass_at(t).1
                } else {
                    let iv = self.sim.backfill_interval.max(1);
                    (t / iv + 1) * iv
                };
                self.events.push(Reverse((self.bf_at, BACKFILL, 0, 0)));
            }
            if sched > 0 && self.pending > 0 && self.main_at == u64::MAX {
                self.main_at = self.main_pass_at(t).1;
                self.events.push(Reverse((self.main_at, MAIN, 0, 0)));
            }
            if blocked
                && self.policy == Policy::Allot
                && !self.running_by_end.is_empty()
                && self.tick_at > self.next_refresh
            {
                self.tick_at = self.next_refresh;
                self.events.push(Reverse((self.next_refresh, TICK, 0, 0)));
            }
        }
        true
    }

    /// A scheduling pass at `t` (seconds since the first submission).
    fn wake(&mut self, t: u64) {
        if self.wakes.insert(t) {
            self.events.push(Reverse((t, WAKE, 0, 0)));
        }
    }

    fn set_now(&mut self, t: u64) {
        debug_assert!(t >= self.now);
        self.now = t;
        if self.policy == Policy::Allot {
            self.tracker
                .advance_to(t)
                .expect("simulated time only moves forward");
        }
    }

    pub(crate) fn finish(mut self) -> SimReport {
        let end = self.now;
        self.m.accrue_capacity(end, self.cluster.capacity);
        for t in 0..self.w.teams.len() {
            self.m.change_team(t, end, 0, 0);
        }
        // (key of the job, first start - submit) of every job that started.
        let waits_by = |key: fn(&super::workload::SimJob) -> usize| -> Vec<(usize, u64)> {
            self.w
                .jobs
                .iter()
                .zip(&self.jobs)
                .filter(|(_, j)| j.first_start != u64::MAX)
                .map(|(s, j)| (key(s), j.first_start - s.submit))
                .collect()
        };
        let waits = waits_by(|s| s.class as usize);
        let team_waits = waits_by(|s| s.team as usize);
        let unfinished = self.jobs.iter().filter(|j| j.state != State::Done).count() as u64;
        // The attempts still running (a replay stopped at its horizon).
        for (s, j) in self.w.jobs.iter().zip(&self.jobs) {
            if j.state == State::Running {
                let record = jobs::attempt_record(s, j, None, crate::AttemptEnd::Running);
                self.m.attempts.push(record);
            }
        }
        let mut team_jobs = vec![0u64; self.w.teams.len()];
        for s in &self.w.jobs {
            team_jobs[s.team as usize] += 1;
        }
        let hourly: Hourly = self.m.hourly();
        super::metrics::report(super::metrics::ReportInput {
            policy: self.policy,
            w: self.w,
            sim: self.sim,
            m: self.m,
            hourly,
            end,
            waits,
            team_waits,
            team_jobs,
            unfinished,
            tree: &self.config.tree,
            requeues: self.jobs.iter().map(|j| j.attempt).collect(),
        })
    }
}

/// When a replay gives up: the last submission plus twice the time the
/// cluster needs for all the work, plus twice the longest job, plus 7 days.
/// Only a preemption livelock gets there (e.g. non-resumable jobs whose
/// contracts are much shorter than their runtime, requeued back and forth as
/// the ranks of two teams swap across snapshots: each requeue throws their
/// work away); the report then says `stopped_at_horizon` and counts the
/// jobs left unfinished.
fn horizon(w: &Workload, cluster: ClusterSpec) -> u64 {
    let last = w.jobs.iter().map(|j| j.submit).max().unwrap_or(0);
    let work: u128 = w
        .jobs
        .iter()
        .map(|j| u128::from(j.gpus()) * u128::from(j.duration))
        .sum();
    let drain = (work / u128::from(cluster.gpus().max(1))) as u64;
    let longest = w.jobs.iter().map(|j| j.duration).max().unwrap_or(0);
    last.saturating_add(drain.saturating_mul(2))
        .saturating_add(longest.saturating_mul(2))
        .saturating_add(7 * 86_400)
}
