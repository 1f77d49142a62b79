//! Nodes, free GPUs and placement.
//!
//! Placement is best fit: a job goes to the usable node(s) with the fewest
//! free GPUs that still hold it (as Slurm's cons_tres packs GPUs), ties
//! broken by a seeded hash of the job so identical seeds place identically.
//! A multi-node job takes `nodes` nodes with `gpus_per_node` free each.
//! A node is *usable* while it is neither drained nor failed; a failed node
//! also leaves the capacity.

use std::collections::BTreeSet;

use fairshare::preempt::NodeGpus;

/// The cluster's state.
#[derive(Debug, Clone)]
pub(crate) struct Cluster {
    pub gpus_per_node: u32,
    pub free: Vec<u32>,
    /// Active drain events per node.
    pub drains: Vec<u32>,
    /// Active failure events per node.
    pub fails: Vec<u32>,
    /// Usable nodes by free GPU count.
    buckets: Vec<BTreeSet<u32>>,
    /// Free GPUs on usable nodes.
    pub free_total: u64,
    /// GPUs on nodes that have not failed (the capacity).
    pub capacity: u64,
    /// Running jobs on each node.
    pub jobs_on: Vec<Vec<u32>>,
    seed: u64,
    /// `[sim] node_cpus` (with `cons_tres`): CPUs per node, one a job; 0:
    /// the node running the most jobs over all nodes.
    pub node_cpus: u32,
    /// `[sim] placement = "cons_tres"`: a one-node job goes to the usable
    /// node running the most jobs, lowest index first.
    pub cons_tres: bool,
}

/// SplitMix64: a fast, well-mixed hash for seeded tie-breaks.
pub(crate) fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

impl Cluster {
    pub fn new(nodes: u32, gpus_per_node: u32, seed: u64) -> Cluster {
        let mut buckets = vec![BTreeSet::new(); gpus_per_node as usize + 1];
        buckets[gpus_per_node as usize] = (0..nodes).collect();
        Cluster {
            gpus_per_node,
            free: vec![gpus_per_node; nodes as usize],
            drains: vec![0; nodes as usize],
            fails: vec![0; nodes as usize],
            buckets,
            free_total: u64::from(nodes) * u64::from(gpus_per_node),
            capacity: u64::from(nodes) * u64::from(gpus_per_node),
            jobs_on: vec![Vec::new(); nodes as usize],
            seed,
            cons_tres: false,
            node_cpus: 0,
        }
    }

    pub fn nodes(&self) -> u32 {
        self.free.len() as u32
    }

    pub fn usable(&self, node: u32) -> bool {
        self.drains[node as usize] == 0 && self.fails[node as usize] == 0
    }

    /// Usable nodes with at least `gpus` free.
    pub fn fitting(&self, gpus: u32) -> impl Iterator<Item = u32> + '_ {
        self.buckets[gpus.min(self.gpus_per_node) as usize..]
            .iter()
            .flat_map(|b| b.iter().copied())
    }

    /// Number of usable nodes.
    pub fn usable_count(&self) -> usize {
        self.buckets.iter().map(BTreeSet::len).sum()
    }

    fn set_free(&mut self, node: u32, free: u32) {
        let n = node as usize;
        if self.usable(node) {
            self.buckets[self.free[n] as usize].remove(&node);
            self.buckets[free as usize].insert(node);
            self.free_total = self.free_total + u64::from(free) - u64::from(self.free[n]);
        }
        self.free[n] = free;
    }

    /// Takes GPUs for job `id`.
    pub fn take(&mut self, id: u32, alloc: &[NodeGpus]) {
        for a in alloc {
            let f = self.free[a.node as usize] - a.gpus;
            self.set_free(a.node, f);
            self.jobs_on[a.node as usize].push(id);
        }
    }

    /// Gives back job `id`'s GPUs.
    pub fn release(&mut self, id: u32, alloc: &[NodeGpus]) {
        for a in alloc {
            let f = self.free[a.node as usize] + a.gpus;
            self.set_free(a.node, f);
            let on = &mut self.jobs_on[a.node as usize];
            if let Some(i) = on.iter().position(|&j| j == id) {
                on.swap_remove(i);
            }
        }
    }

    /// Marks a node (un)usable: `drain`/`fail` deltas of +1 or -1.
    pub fn change(&mut self, node: u32, drain: i32, fail: i32) {
        let n = node as usize;
        let was_usable = self.usable(node);
        let was_up = self.fails[n] == 0;
        self.drains[n] = (self.drains[n] as i32 + drain).max(0) as u32;
        self.fails[n] = (self.fails[n] as i32 + fail).max(0) as u32;
        let (usable, up) = (self.usable(node), self.fails[n] == 0);
        if was_usable && !usable {
            self.buckets[self.free[n] as usize].remove(&node);
            self.free_total -= u64::from(self.free[n]);
        } else if !was_usable && usable {
            self.buckets[self.free[n] as usize].insert(node);
            self.free_total += u64::from(self.free[n]);
        }
        let g = u64::from(self.gpus_per_node);
        match (was_up, up) {
            (true, false) => self.capacity -= g,
            (false, true) => self.capacity += g,
            _ => {}
        }
    }

    /// Best-fit placement of `nodes` x `per_node` GPUs, avoiding the
    /// (sorted) `avoid` nodes. `salt` varies the tie-break per job.
    pub fn place(
        &self,
        nodes: u32,
        per_node: u32,
        avoid: &[u32],
        salt: u64,
    ) -> Option<Vec<NodeGpus>> {
        if u64::from(nodes) * u64::from(per_node) > self.free_total {
            return None;
        }
        let ok = |n: &u32| avoid.binary_search(n).is_err();
        if nodes == 1 && self.cons_tres && self.node_cpus > 0 {
            return self.cons_tres_runs(per_node, &ok).map(|node| {
                vec![NodeGpus {
                    node,
                    gpus: per_node,
                }]
            });
        }
        if nodes == 1 && self.cons_tres {
            // Slurm's select/cons_tres takes, of the nodes that fit, the one
            // with the fewest CPUs available (strictly fewer: the lowest
            // index wins a tie); one CPU a job, so the most jobs running.
            return self
                .fitting(per_node)
                .filter(ok)
                .min_by_key(|&n| (std::cmp::Reverse(self.jobs_on[n as usize].len()), n))
                .map(|node| {
                    vec![NodeGpus {
                        node,
                        gpus: per_node,
                    }]
                });
        }
        if nodes == 1 {
            let start = (mix(self.seed ^ salt) % u64::from(self.nodes())) as u32;
            for b in &self.buckets[per_node as usize..] {
                if b.is_empty() {
                    continue;
                }
                let pick = b
                    .range(start..)
                    .find(|n| ok(n))
                    .or_else(|| b.range(..start).find(|n| ok(n)));
                if let Some(&node) = pick {
                    return Some(vec![NodeGpus {
                        node,
                        gpus: per_node,
                    }]);
                }
            }
            return None;
        }
        let chosen: Vec<NodeGpus> = self
            .fitting(per_node)
            .filter(ok)
            .take(nodes as usize)
            .map(|node| NodeGpus {
                node,
                gpus: per_node,
            })
            .collect();
        (chosen.len() == nodes as usize).then_some(chosen)
    }
}

impl Cluster {
    /// select/cons_tres's node for a one-node job (22.05 job_test.c,
    /// `_eval_nodes`), with `node_cpus` CPUs a node and one a job: the
    /// nodes the job fits on (usable, `per_node` GPUs and a CPU free, `ok`)
    /// form runs of consecutive indices; of those runs the one with the
    /// fewest CPUs available in all (the first on a tie), and in it the
    /// node with the fewest (the first on a tie). A lone node beside full
    /// ones is thus preferred to a busier node beside another free one.
    fn cons_tres_runs(&self, per_node: u32, ok: &impl Fn(&u32) -> bool) -> Option<u32> {
        let avail = |n: u32| {
            self.node_cpus
                .saturating_sub(self.jobs_on[n as usize].len() as u32)
        };
        let fits =
            |n: u32| self.usable(n) && self.free[n as usize] >= per_node && ok(&n) && avail(n) > 0;
        cons_tres_run_pick(self.nodes(), fits, avail)
    }
}

/// The node [`Cluster::place`]'s `cons_tres` rule takes of `nodes` nodes
/// for a one-node job, given which fit it (`fits`) and the CPUs each has
/// available (`avail`): of the runs of consecutive nodes that fit, the one
/// with the fewest CPUs available in all (the first on a tie), and in it
/// the node with the fewest (the first on a tie). The backfill's will-run
/// test asks it of the nodes as they would be once some jobs ended.
pub(crate) fn cons_tres_run_pick(
    nodes: u32,
    fits: impl Fn(u32) -> bool,
    avail: impl Fn(u32) -> u32,
) -> Option<u32> {
    // (CPUs available in the run, its node with the fewest).
    let mut best: Option<(u32, u32)> = None;
    let mut run: Option<(u32, u32)> = None;
    for n in 0..=nodes {
        if n < nodes && fits(n) {
            run = Some(match run {
                None => (avail(n), n),
                Some((total, pick)) => (
                    total + avail(n),
                    if avail(n) < avail(pick) { n } else { pick },
                ),
            });
        } else if let Some(r) = run.take() {
            if best.is_none_or(|b| r.0 < b.0) {
                best = Some(r);
            }
        }
    }
    best.map(|b| b.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Node 0 runs one 6-GPU job (2 GPUs free), node 1 two 1-GPU jobs (6
    /// free): best fit puts a 2-GPU job on node 0, cons_tres (most jobs
    /// running, as Slurm's fewest available CPUs) on node 1; with equal
    /// jobs cons_tres takes the lowest index.
    #[test]
    fn cons_tres_takes_the_node_running_most_jobs() {
        let mut c = Cluster::new(2, 8, 0);
        c.take(1, &[NodeGpus { node: 0, gpus: 6 }]);
        c.take(2, &[NodeGpus { node: 1, gpus: 1 }]);
        c.take(3, &[NodeGpus { node: 1, gpus: 1 }]);
        assert_eq!(c.place(1, 2, &[], 7).unwrap()[0].node, 0);
        c.cons_tres = true;
        assert_eq!(c.place(1, 2, &[], 7).unwrap()[0].node, 1);
        assert_eq!(c.place(1, 2, &[1], 7).unwrap()[0].node, 0, "avoided");
        let mut e = Cluster::new(3, 8, 0);
        e.cons_tres = true;
        assert_eq!(
            e.place(1, 8, &[], 7).unwrap()[0].node,
            0,
            "a tie: lowest index"
        );
    }

    /// With `node_cpus` (16 here), cons_tres's runs of consecutive nodes:
    /// nodes 0 and 1 run three and four 1-GPU jobs, node 2 is full, node 3
    /// runs two. Runs: {0, 1} with 13 + 12 CPUs available, {3} with 14: a
    /// 1-GPU job goes to node 3, though nodes 0 and 1 run more jobs; with
    /// node 3 avoided, to node 1 (fewer CPUs available than node 0).
    #[test]
    fn cons_tres_takes_the_tightest_run_of_consecutive_nodes() {
        let mut c = Cluster::new(4, 8, 0);
        c.cons_tres = true;
        let mut id = 0;
        for (node, jobs) in [(0, 3), (1, 4), (3, 2)] {
            for _ in 0..jobs {
                id += 1;
                c.take(id, &[NodeGpus { node, gpus: 1 }]);
            }
        }
        c.take(99, &[NodeGpus { node: 2, gpus: 8 }]);
        assert_eq!(c.place(1, 1, &[], 7).unwrap()[0].node, 1, "most jobs");
        c.node_cpus = 16;
        assert_eq!(c.place(1, 1, &[], 7).unwrap()[0].node, 3);
        assert_eq!(c.place(1, 1, &[3], 7).unwrap()[0].node, 1);
        assert_eq!(c.place(1, 8, &[], 7), None, "nowhere 8 GPUs free");
    }
}
