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

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};
use std::ops::Bound;
use std::sync::Arc;

mod backfill;
mod pass;
mod preempt;

use super::cluster::Cluster;
use super::metrics::{Hourly, Metrics};
use super::trace::{NodeEvent, NodeEventKind};
use super::workload::Workload;
use super::{ClusterSpec, Policy, PreemptionRecord, SimReport};
use backfill::Held;
use fairshare::config::sim::{BackfillReserve, Placement};
use fairshare::config::Config;
use fairshare::contract::{protected_until, Contract, RunClock};
use fairshare::drain::{self, NodeJob};
use fairshare::engine::Engine;
use fairshare::entitlement::Entitlements;
use fairshare::fair_tree::FairTree;
use fairshare::preempt::{NodeGpus, Preemptor, RunningJob};
use fairshare::priority::{compose, Band, PendingJob};
use fairshare::usage::{OpenCharge, UsageTracker};

/// Event kinds, in the order they apply within one second.
const COMPLETE: u8 = 0;
const NODE_START: u8 = 1;
const NODE_END: u8 = 2;
const EXPIRY: u8 = 3;
const DRAIN_REQUEUE: u8 = 4;
const TICK: u8 = 5;
const BACKFILL: u8 = 6;
/// A short job's `[preempt] short_wait` ends: look at the queue again.
const WAKE: u8 = 7;
/// A requeued job's `[sim] requeue_delay` ends: it joins its queue.
const ELIGIBLE: u8 = 8;

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
    state: State,
    attempt: u32,
    start: u64,
    end: u64,
    first_start: u64,
    alloc: Vec<NodeGpus>,
    open: Option<OpenCharge>,
    unprotected: bool,
}

struct Reservation {
    shadow: u64,
    nodes: Vec<u32>,
}

/// Classic / Fair Tree decayed usage.
struct Decay {
    usage: Vec<f64>,
    factor: Vec<f64>,
    last: u64,
    next: u64,
}

pub(crate) struct Sim<'w> {
    w: &'w Workload,
    config: Arc<Config>,
    policy: Policy,
    cluster: Cluster,
    jobs: Vec<JobState>,
    queues: Vec<BTreeSet<(u64, u32)>>,
    pending: usize,
    running_by_end: BTreeSet<(u64, u32)>,
    /// Running jobs by the end the backfill plans with: start + time limit
    /// where the trace gives one, else their end.
    running_by_plan: BTreeSet<(u64, u32)>,
    events: BinaryHeap<Reverse<(u64, u8, u32, u32)>>,
    node_events: Vec<NodeEvent>,
    next_arrival: usize,
    now: u64,
    // allot
    tracker: UsageTracker,
    engine: Option<Engine>,
    next_refresh: u64,
    snapshot: u32,
    team_rank: Vec<u32>,
    /// Per team: below its entitlement at the snapshot (the priority band).
    team_below: Vec<bool>,
    rate: Vec<u64>,
    /// Per team: running allocated jobs past their contract, by (start, id).
    unprot: Vec<BTreeSet<(u64, u32)>>,
    unprot_gpus: Vec<u64>,
    /// Per team: running free-tier jobs.
    free_tier: Vec<BTreeSet<(u64, u32)>>,
    free_tier_gpus: Vec<u64>,
    /// Per leaf: GPUs of allocated jobs running and pending (entitlement).
    leaf_running: Vec<u64>,
    leaf_pending: Vec<u64>,
    /// Bumped whenever a leaf's running or pending GPUs or the capacity
    /// change; the entitlements computed at one version are reused.
    load_version: u64,
    load_cache: std::cell::RefCell<Option<(u64, std::rc::Rc<Entitlements>)>>,
    epoch: u64,
    failed_attempt: Option<(u32, u64)>,
    /// Times of pending WAKE events (one event per time).
    wakes: std::collections::BTreeSet<u64>,
    tick_at: u64,
    bf_at: u64,
    backfill_now: bool,
    /// Simulated time after which the run stops (see [`horizon`]).
    horizon: u64,
    // baselines
    decay: Decay,
    slices: Vec<u64>,
    /// Per queue: (snapshot, head job, its key).
    head_cache: Vec<(u32, u32, u64)>,
    /// Buffers of [`Sim::pass`], kept between passes: the heap of queue
    /// heads, and per queue the jobs read ahead once the pass is blocked.
    pass_heap: Vec<PassEntry>,
    pass_ahead: Vec<std::collections::VecDeque<(u64, u32, Shape)>>,
    /// Buffers of [`Sim::try_preempt`], kept between calls.
    scratch: std::cell::RefCell<PreemptScratch>,
    m: Metrics,
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
}

/// Queues per team: free tier, allocated, short band. Inside one queue
/// every job has the same priority but for its age, so the queue's order
/// (eligible time, index) is its priority order.
const QUEUES_PER_TEAM: usize = 3;

/// A pending job's GPUs per node, nodes and remaining run time (seconds).
type Shape = (u32, u32, u64);

/// An entry of a scheduling pass's heap: priority key, eligible time, job
/// index, queue, and the job's shape when it was read ahead.
type PassEntry = (u64, Reverse<u64>, Reverse<u32>, u32, Option<Shape>);

fn queue_of(team: u32, min_runtime: u64, short: bool) -> usize {
    let kind = if min_runtime == 0 {
        0
    } else if short {
        2
    } else {
        1
    };
    team as usize * QUEUES_PER_TEAM + kind
}

impl<'w> Sim<'w> {
    pub fn new(
        w: &'w Workload,
        config: Arc<Config>,
        cluster: ClusterSpec,
        policy: Policy,
        events: &[NodeEvent],
    ) -> Sim<'w> {
        let teams = w.teams.len();
        let capacity = cluster.gpus();
        let charge = config.charge.clone();
        let rate = (1..=cluster.gpus().min(1 << 20) as u32)
            .map(|g| charge.rate([("gres/gpu", u64::from(g))]))
            .collect::<Vec<_>>();
        let mut slices = vec![0u64; teams];
        if policy == Policy::Static {
            // Largest remainder: slices sum to the capacity.
            let exact: Vec<f64> = w
                .teams
                .iter()
                .map(|t| t.allocation * capacity as f64)
                .collect();
            for (s, e) in slices.iter_mut().zip(&exact) {
                *s = e.floor() as u64;
            }
            let mut order: Vec<usize> = (0..teams).collect();
            order.sort_by(|&a, &b| {
                (exact[b] - exact[b].floor())
                    .total_cmp(&(exact[a] - exact[a].floor()))
                    .then(a.cmp(&b))
            });
            let mut left = capacity - slices.iter().sum::<u64>().min(capacity);
            for i in order {
                if left == 0 {
                    break;
                }
                if w.teams[i].allocation > 0.0 {
                    slices[i] += 1;
                    left -= 1;
                }
            }
        }
        let mut node_events: Vec<NodeEvent> = events
            .iter()
            .copied()
            .filter(|e| e.node < cluster.nodes && e.duration > 0)
            .collect();
        node_events.sort_by_key(|e| (e.at, e.node));
        let mut heap = BinaryHeap::new();
        for (i, e) in node_events.iter().enumerate() {
            heap.push(Reverse((e.at, NODE_START, i as u32, 0)));
        }
        let window = config.window;
        let seed = config.sim.seed;
        let ignored_events = events.len() - node_events.len();
        Sim {
            w,
            policy,
            cluster: {
                let mut c = Cluster::new(cluster.nodes, cluster.gpus_per_node, seed);
                c.cons_tres = config.sim.placement == Placement::ConsTres;
                c
            },
            jobs: w
                .jobs
                .iter()
                .map(|j| JobState {
                    remaining: j.duration,
                    eligible: j.submit,
                    state: State::Pending,
                    attempt: 0,
                    start: 0,
                    end: 0,
                    first_start: u64::MAX,
                    alloc: Vec::new(),
                    open: None,
                    unprotected: false,
                })
                .collect(),
            queues: vec![BTreeSet::new(); teams * QUEUES_PER_TEAM],
            pending: 0,
            running_by_end: BTreeSet::new(),
            running_by_plan: BTreeSet::new(),
            events: heap,
            node_events,
            next_arrival: 0,
            now: 0,
            tracker: UsageTracker::new(window, 0),
            engine: None,
            next_refresh: 0,
            snapshot: 0,
            team_rank: vec![0; teams],
            team_below: vec![false; teams],
            rate,
            unprot: vec![BTreeSet::new(); teams],
            unprot_gpus: vec![0; teams],
            free_tier: vec![BTreeSet::new(); teams],
            free_tier_gpus: vec![0; teams],
            leaf_running: vec![0; config.tree.leaves().len()],
            leaf_pending: vec![0; config.tree.leaves().len()],
            load_version: 0,
            load_cache: std::cell::RefCell::new(None),
            epoch: 0,
            failed_attempt: None,
            wakes: std::collections::BTreeSet::new(),
            tick_at: u64::MAX,
            bf_at: u64::MAX,
            backfill_now: false,
            horizon: horizon(w, cluster),
            decay: Decay {
                usage: vec![0.0; teams],
                factor: vec![1.0; teams],
                last: 0,
                next: 0,
            },
            slices,
            head_cache: vec![(u32::MAX, u32::MAX, 0); teams * QUEUES_PER_TEAM],
            pass_heap: Vec::new(),
            pass_ahead: vec![std::collections::VecDeque::new(); teams * QUEUES_PER_TEAM],
            scratch: std::cell::RefCell::new(PreemptScratch {
                per_node: vec![0; cluster.nodes as usize],
                ..PreemptScratch::default()
            }),
            m: Metrics::new(teams, capacity, ignored_events),
            config,
        }
    }

    fn rate_of(&self, gpus: u32) -> u64 {
        self.rate
            .get(gpus as usize - 1)
            .copied()
            .unwrap_or_else(|| self.config.charge.rate([("gres/gpu", u64::from(gpus))]))
    }

    /// Runs to the end; `progress` gets the number of finished jobs now and
    /// then.
    pub fn run(mut self, progress: &mut dyn FnMut(u64)) -> SimReport {
        let mut since_progress = 0u32;
        loop {
            let next_arrival = self.w.jobs.get(self.next_arrival).map(|j| j.submit);
            let next_event = self.events.peek().map(|Reverse(e)| e.0);
            let t = match (next_arrival, next_event) {
                (None, None) => break,
                (a, e) => a.unwrap_or(u64::MAX).min(e.unwrap_or(u64::MAX)),
            };
            if t > self.horizon {
                // A preemption livelock (see `horizon`): stop and report.
                self.m.stopped_at_horizon = true;
                break;
            }
            self.set_now(t);
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
                if self.misses_pass(id) {
                    // Submitted after this second's pass: seen in the next.
                    self.count_pending(id);
                    self.events.push(Reverse((t + 1, ELIGIBLE, id, 0)));
                } else {
                    self.enqueue(id);
                }
            }
            let backfill = std::mem::take(&mut self.backfill_now);
            let blocked = self.pass(backfill);
            if blocked && self.bf_at == u64::MAX {
                let iv = self.config.sim.backfill_interval.max(1);
                self.bf_at = (t / iv + 1) * iv;
                self.events.push(Reverse((self.bf_at, BACKFILL, 0, 0)));
            }
            if blocked
                && self.policy == Policy::Allot
                && !self.running_by_end.is_empty()
                && self.tick_at > self.next_refresh
            {
                self.tick_at = self.next_refresh;
                self.events.push(Reverse((self.next_refresh, TICK, 0, 0)));
            }
            since_progress += 1;
            if since_progress >= 8192 {
                since_progress = 0;
                progress(self.m.finished);
            }
        }
        progress(self.m.finished);
        self.finish()
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

    fn handle(&mut self, kind: u8, a: u32, b: u32) {
        let now = self.now;
        match kind {
            COMPLETE => {
                let j = &self.jobs[a as usize];
                if j.state == State::Running && j.attempt == b {
                    self.stop(a, StopReason::Complete);
                }
            }
            EXPIRY => {
                let j = &self.jobs[a as usize];
                // Short jobs are never preempted (fairshare::preempt).
                if j.state == State::Running
                    && j.attempt == b
                    && !j.unprotected
                    && !self.is_short(a)
                {
                    let team = self.w.jobs[a as usize].team as usize;
                    let start = j.start;
                    self.jobs[a as usize].unprotected = true;
                    self.unprot[team].insert((start, a));
                    self.unprot_gpus[team] += u64::from(self.w.jobs[a as usize].gpus());
                    self.epoch += 1;
                }
            }
            DRAIN_REQUEUE => {
                let j = &self.jobs[a as usize];
                let on_drained = j
                    .alloc
                    .iter()
                    .any(|n| self.cluster.drains[n.node as usize] > 0);
                if j.state == State::Running && j.attempt == b && on_drained {
                    self.stop(a, StopReason::Drain);
                }
            }
            ELIGIBLE => {
                let j = &self.jobs[a as usize];
                if j.state == State::Pending && j.attempt == b {
                    self.join_queue(a);
                }
            }
            TICK => self.tick_at = u64::MAX,
            WAKE => {
                self.wakes.remove(&now);
                // Attempts that failed while a short job waited may now hold.
                self.epoch += 1;
            }
            BACKFILL => {
                self.bf_at = u64::MAX;
                self.backfill_now = true;
            }
            NODE_START => {
                let e = self.node_events[a as usize];
                self.m.accrue_capacity(now, self.cluster.capacity);
                match e.kind {
                    NodeEventKind::Drain => {
                        self.cluster.change(e.node, 1, 0);
                        if self.policy == Policy::Allot {
                            // The sidecar's rule (fairshare::drain): requeue
                            // what its contract no longer protects, look
                            // again when the next contract ends.
                            let on_node: Vec<NodeJob> = self.cluster.jobs_on[e.node as usize]
                                .iter()
                                .map(|&id| NodeJob {
                                    job_id: u64::from(id),
                                    contract: Contract {
                                        min_runtime: self.w.jobs[id as usize].min_runtime,
                                        clock: RunClock::started(self.jobs[id as usize].start),
                                    },
                                    requeueable: true,
                                })
                                .collect();
                            let plan = drain::plan(&on_node, now);
                            for id in plan.requeue {
                                self.stop(id as u32, StopReason::Drain);
                            }
                            for (id, until) in plan.wait {
                                let j = &self.jobs[id as usize];
                                if let Some(until) = until.filter(|&u| u < j.end) {
                                    self.events.push(Reverse((
                                        until,
                                        DRAIN_REQUEUE,
                                        id as u32,
                                        j.attempt,
                                    )));
                                }
                            }
                        }
                    }
                    NodeEventKind::Fail => {
                        self.cluster.change(e.node, 0, 1);
                        for id in self.cluster.jobs_on[e.node as usize].clone() {
                            self.stop(id, StopReason::Fail);
                        }
                    }
                }
                self.events
                    .push(Reverse((now + e.duration, NODE_END, a, 0)));
                self.epoch += 1;
                self.load_version += 1;
            }
            NODE_END => {
                let e = self.node_events[a as usize];
                self.m.accrue_capacity(now, self.cluster.capacity);
                match e.kind {
                    NodeEventKind::Drain => self.cluster.change(e.node, -1, 0),
                    NodeEventKind::Fail => self.cluster.change(e.node, 0, -1),
                }
                self.epoch += 1;
                self.load_version += 1;
            }
            _ => unreachable!("unknown event kind"),
        }
    }

    fn enqueue(&mut self, id: u32) {
        self.count_pending(id);
        self.join_queue(id);
    }

    /// True if job `id` arrives in the last `pass_miss_ms` of its second
    /// (by a seeded sub-second submit phase), after slurmctld's pass.
    fn misses_pass(&self, id: u32) -> bool {
        let miss = self.config.sim.pass_miss_ms;
        miss > 0
            && super::cluster::mix(self.config.sim.seed ^ (u64::from(id) << 32) ^ (1 << 31)) % 1000
                >= 1000 - miss
    }

    /// Puts pending job `id` in its queue, where passes see it.
    fn join_queue(&mut self, id: u32) {
        let sj = &self.w.jobs[id as usize];
        let q = queue_of(sj.team, sj.min_runtime, self.is_short(id));
        let j = &self.jobs[id as usize];
        self.queues[q].insert((j.eligible, id));
        self.pending += 1;
    }

    /// Marks job `id` pending: its leaf's pending GPUs count it.
    fn count_pending(&mut self, id: u32) {
        let sj = &self.w.jobs[id as usize];
        self.jobs[id as usize].state = State::Pending;
        self.load_version += 1;
        if sj.min_runtime > 0 {
            self.leaf_pending[self.w.teams[sj.team as usize].leaf.0 as usize] +=
                u64::from(sj.gpus());
        }
        self.m
            .change_team(sj.team as usize, self.now, 0, i64::from(sj.gpus()));
    }

    /// Rebuilds the policy's view (engine snapshot or decayed usage) when due.
    fn refresh(&mut self) {
        let now = self.now;
        match self.policy {
            Policy::Allot if now >= self.next_refresh || self.engine.is_none() => {
                let engine = Engine::from_tracker(self.config.clone(), &self.tracker)
                    .with_load((*self.entitlements()).clone());
                for (t, team) in self.w.teams.iter().enumerate() {
                    self.team_rank[t] = engine.fair_tree().rank(team.leaf);
                    self.team_below[t] = engine.load().is_some_and(|l| l.below(team.leaf));
                }
                self.engine = Some(engine);
                let iv = self.config.sync_interval.max(1);
                self.next_refresh = (now / iv + 1) * iv;
                self.snapshot += 1;
                self.epoch += 1;
            }
            Policy::Classic | Policy::FairTree if now >= self.decay.next => {
                let s = &self.config.sim;
                let raw = self.m.take_raw_usage(now);
                let k = 0.5f64.powf((now - self.decay.last) as f64 / s.half_life as f64);
                for (u, r) in self.decay.usage.iter_mut().zip(raw) {
                    *u = *u * k + r;
                }
                self.decay.last = now;
                self.decay.next = (now / s.calc_period + 1) * s.calc_period;
                let tree = &self.config.tree;
                self.decay.factor = if self.policy == Policy::FairTree {
                    let ft = FairTree::compute(tree, &self.decay.usage);
                    self.w.teams.iter().map(|t| ft.factor(t.leaf)).collect()
                } else {
                    crate::baselines::classic_factors(tree, &self.decay.usage)
                };
            }
            _ => {}
        }
    }

    /// The leaves' allocated GPUs running and pending now, and their
    /// entitlements to the capacity now.
    fn entitlements(&self) -> std::rc::Rc<Entitlements> {
        let mut cache = self.load_cache.borrow_mut();
        if let Some((v, e)) = &*cache {
            if *v == self.load_version {
                return e.clone();
            }
        }
        let e = std::rc::Rc::new(Entitlements::compute(
            &self.config.tree,
            self.cluster.capacity,
            &self.leaf_running,
            &self.leaf_pending,
        ));
        *cache = Some((self.load_version, e.clone()));
        e
    }

    fn start(&mut self, id: u32, alloc: Vec<NodeGpus>) {
        let now = self.now;
        let short = self.is_short(id);
        let sj = &self.w.jobs[id as usize];
        let team = sj.team as usize;
        let gpus = sj.gpus();
        let j = &mut self.jobs[id as usize];
        self.queues[queue_of(sj.team, sj.min_runtime, short)].remove(&(j.eligible, id));
        self.pending -= 1;
        self.load_version += 1;
        if sj.min_runtime > 0 {
            let l = self.w.teams[team].leaf.0 as usize;
            self.leaf_pending[l] -= u64::from(gpus);
            self.leaf_running[l] += u64::from(gpus);
        }
        self.cluster.take(id, &alloc);
        j.state = State::Running;
        j.start = now;
        // Slurm stamps start and end in whole seconds: an attempt whose
        // work starts `attempt_overhead_ms` after a start at a seeded
        // sub-second phase is recorded one second longer when the two
        // cross a second.
        let overhead = self.config.sim.attempt_overhead_ms;
        let extra = if overhead == 0 {
            0
        } else {
            let phase = super::cluster::mix(
                self.config.sim.seed ^ (u64::from(id) << 32) ^ u64::from(j.attempt),
            ) % 1000;
            (phase + overhead) / 1000
        };
        j.end = now + j.remaining + extra;
        j.alloc = alloc;
        j.unprotected = false;
        if j.first_start == u64::MAX {
            j.first_start = now;
        }
        self.running_by_end.insert((j.end, id));
        let plan_end = sj.time_limit.map_or(j.end, |t| now + t);
        self.running_by_plan.insert((plan_end, id));
        self.events.push(Reverse((j.end, COMPLETE, id, j.attempt)));
        if self.policy == Policy::Allot {
            if sj.min_runtime > 0 {
                j.open = Some(self.tracker.add_running(
                    &self.w.accounts[sj.account as usize],
                    self.rate[(gpus as usize - 1).min(self.rate.len() - 1)],
                    now,
                ));
                // Protection ends when the contract says (fairshare::contract).
                let contract = Contract {
                    min_runtime: sj.min_runtime,
                    clock: RunClock::started(now),
                };
                if let Some(until) = protected_until(&contract, now).filter(|&u| u < j.end) {
                    self.events.push(Reverse((until, EXPIRY, id, j.attempt)));
                }
            } else {
                j.unprotected = true;
                self.free_tier[team].insert((now, id));
                self.free_tier_gpus[team] += u64::from(gpus);
                self.epoch += 1;
            }
        }
        self.m
            .change_team(team, now, i64::from(gpus), -i64::from(gpus));
        self.m.starts += 1;
    }

    fn stop(&mut self, id: u32, why: StopReason) {
        let now = self.now;
        let sj = &self.w.jobs[id as usize];
        let team = sj.team as usize;
        let gpus = sj.gpus();
        let j = &mut self.jobs[id as usize];
        let run = now - j.start;
        if sj.min_runtime > 0 {
            self.leaf_running[self.w.teams[team].leaf.0 as usize] -= u64::from(gpus);
        }
        self.load_version += 1;
        self.cluster.release(id, &j.alloc);
        self.running_by_end.remove(&(j.end, id));
        let plan_end = sj.time_limit.map_or(j.end, |t| j.start + t);
        self.running_by_plan.remove(&(plan_end, id));
        if j.unprotected {
            if sj.min_runtime == 0 {
                self.free_tier[team].remove(&(j.start, id));
                self.free_tier_gpus[team] -= u64::from(gpus);
            } else {
                self.unprot[team].remove(&(j.start, id));
                self.unprot_gpus[team] -= u64::from(gpus);
            }
            j.unprotected = false;
        }
        if let Some(open) = j.open.take() {
            let end = self
                .config
                .contract
                .charged_end(j.start, now, sj.min_runtime)
                .unwrap_or(now);
            self.tracker.close(open, end);
        }
        self.m.change_team(team, now, -i64::from(gpus), 0);
        if sj.min_runtime == 0 {
            self.m.free_tier_gpu_s += u64::from(gpus) * run;
        }
        self.epoch += 1;
        if why == StopReason::Complete {
            j.state = State::Done;
            j.remaining = 0;
            j.alloc = Vec::new();
            self.m.finished += 1;
            return;
        }
        let ckpt = self.config.sim.checkpoint_interval;
        let saved = match (sj.resumable, ckpt) {
            (false, _) => 0,
            (true, 0) => run,
            (true, c) => run / c * c,
        }
        .min(j.remaining.saturating_sub(1));
        let lost = run - saved;
        j.remaining -= saved;
        j.attempt += 1;
        let delay = self.config.sim.requeue_delay;
        j.eligible = now + delay;
        j.alloc = Vec::new();
        let lost_gs = u64::from(gpus) * lost;
        self.m.lost_gpu_s += lost_gs;
        self.m.team_lost_gpu_s[team] += lost_gs;
        match why {
            StopReason::Preempted => self.m.team_preempted[team] += 1,
            StopReason::Drain => self.m.drain_requeues += 1,
            StopReason::Fail => self.m.fail_requeues += 1,
            StopReason::Complete => unreachable!(),
        }
        if delay == 0 {
            self.enqueue(id);
        } else {
            self.count_pending(id);
            let attempt = self.jobs[id as usize].attempt;
            self.events
                .push(Reverse((now + delay, ELIGIBLE, id, attempt)));
        }
    }

    fn finish(mut self) -> SimReport {
        let end = self.now;
        self.m.accrue_capacity(end, self.cluster.capacity);
        for t in 0..self.w.teams.len() {
            self.m.change_team(t, end, 0, 0);
        }
        let waits: Vec<(usize, u64)> = self
            .w
            .jobs
            .iter()
            .zip(&self.jobs)
            .filter(|(_, j)| j.first_start != u64::MAX)
            .map(|(s, j)| (s.class as usize, j.first_start - s.submit))
            .collect();
        let team_waits: Vec<(usize, u64)> = self
            .w
            .jobs
            .iter()
            .zip(&self.jobs)
            .filter(|(_, j)| j.first_start != u64::MAX)
            .map(|(s, j)| (s.team as usize, j.first_start - s.submit))
            .collect();
        let unfinished = self.jobs.iter().filter(|j| j.state != State::Done).count() as u64;
        let mut team_jobs = vec![0u64; self.w.teams.len()];
        for s in &self.w.jobs {
            team_jobs[s.team as usize] += 1;
        }
        let hourly: Hourly = self.m.hourly();
        super::metrics::report(super::metrics::ReportInput {
            policy: self.policy,
            w: self.w,
            config: &self.config,
            m: self.m,
            hourly,
            end,
            waits,
            team_waits,
            team_jobs,
            unfinished,
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
