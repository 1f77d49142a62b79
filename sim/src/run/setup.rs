//! Building a replay: per-GPU-count charge rates, the static policy's slices,
//! the per-team and per-leaf state, the node events and metrics of a [`Sim`].

use super::*;

impl<'w> Sim<'w> {
    pub fn new(
        w: &'w Workload,
        config: Arc<Config>,
        sim: &'w SimSettings,
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
        let seed = sim.seed;
        let ignored_events = events.len() - node_events.len();
        Sim {
            w,
            sim,
            policy,
            cluster: {
                let mut c = Cluster::new(cluster.nodes, cluster.gpus_per_node, seed);
                c.cons_tres = sim.placement == Placement::ConsTres;
                c.node_cpus = sim.node_cpus;
                c
            },
            jobs: w.jobs.iter().map(JobState::new).collect(),
            queues: vec![Queue::default(); teams * QUEUES_PER_TEAM],
            queue_pos: vec![0; w.jobs.len()],
            pending: 0,
            running_by_end: BTreeSet::new(),
            running_by_plan: BTreeSet::new(),
            plans_by_limit: w.jobs.iter().any(|j| j.time_limit.is_some()),
            events: heap,
            node_events,
            next_arrival: 0,
            now: 0,
            tracker: UsageTracker::new(window, 0),
            ledger_recent: Default::default(),
            engine: None,
            next_refresh: 0,
            snapshot: 0,
            team_rank: vec![0; teams],
            team_below: vec![false; teams],
            rate,
            unprot: vec![BTreeMap::new(); teams],
            unprot_gpus: vec![0; teams],
            free_tier: vec![BTreeMap::new(); teams],
            free_tier_gpus: vec![0; teams],
            leaf_running: vec![0; config.tree.leaves().len()],
            leaf_pending: vec![0; config.tree.leaves().len()],
            load_version: 0,
            load_cache: std::cell::RefCell::new(LoadCache {
                version: None,
                value: std::sync::Arc::new(Entitlements::compute(&config.tree, 0, &[], &[])),
                scratch: Default::default(),
            }),
            epoch: 0,
            failed_attempt: None,
            wakes: std::collections::BTreeSet::new(),
            tick_at: u64::MAX,
            bf_at: u64::MAX,
            main_at: u64::MAX,
            main_loop: main_loop(sim),
            last_change: 0,
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
            owed_buf: Vec::new(),
            pass_heap: Vec::new(),
            completing: Vec::new(),
            victims_freed: Vec::new(),
            victims_busy: Vec::new(),
            pass_ends: Vec::new(),
            timed_later: Vec::new(),
            bf_blocked: false,
            pass_us: None,
            pass_floors: Vec::new(),
            scratch: std::cell::RefCell::new(PreemptScratch {
                per_node: vec![0; cluster.nodes as usize],
                spent: vec![0; cluster.nodes as usize],
                ..PreemptScratch::default()
            }),
            m: Metrics::new(teams, capacity, ignored_events),
            config,
        }
    }

    pub(super) fn rate_of(&self, gpus: u32) -> u64 {
        self.rate
            .get(gpus as usize - 1)
            .copied()
            .unwrap_or_else(|| self.config.charge.rate([("gres/gpu", u64::from(gpus))]))
    }
}

/// The main pass's loop (`super::main_loop`) from the `[sim]` settings.
fn main_loop(s: &crate::SimSettings) -> super::main_loop::MainLoop {
    let first = s.sched_offset * 1_000_000 + s.main_phase_ms * 1000;
    let drift = s.main_drift_us.unwrap_or(s.pass_drift_us);
    super::main_loop::MainLoop::new(
        &s.main_passes_us,
        first,
        1_000_000 + drift,
        s.sched_interval,
    )
}
