//! EASY backfill's reservation for the first blocked job.

use super::*;

impl Sim<'_> {
    /// EASY backfill's reservation for job `id`: the earliest time enough
    /// nodes will have its GPUs free, and those nodes.
    pub(super) fn reservation(&self, id: u32) -> Option<Reservation> {
        let sj = &self.w.jobs[id as usize];
        let (n, g) = (sj.nodes as usize, sj.gpus_per_node);
        if self.cluster.usable_count() < n {
            return None;
        }
        let mut nodes: Vec<u32> = self.cluster.fitting(g).take(n).collect();
        let mut scratch = self.scratch.borrow_mut();
        let extra = &mut scratch.per_node;
        let mut touched: Vec<u32> = Vec::new();
        let mut found = None;
        'walk: for &(end, r) in &self.running_by_end {
            for a in &self.jobs[r as usize].alloc {
                if !self.cluster.usable(a.node) {
                    continue;
                }
                let e = &mut extra[a.node as usize];
                if *e == 0 {
                    touched.push(a.node);
                }
                let before = self.cluster.free[a.node as usize] + *e;
                *e += a.gpus;
                if before < g && before + a.gpus >= g {
                    nodes.push(a.node);
                }
            }
            if nodes.len() >= n {
                found = Some(end);
                break 'walk;
            }
        }
        for t in touched {
            extra[t as usize] = 0;
        }
        found.map(|shadow| {
            nodes.sort_unstable();
            Reservation { shadow, nodes }
        })
    }
}
