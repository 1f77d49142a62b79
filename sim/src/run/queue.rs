//! One queue of pending jobs, in (queued time, job index) order: a sorted
//! vector whose removed entries are marked gone and dropped in bulk. The
//! queued time is slurmctld's `submit_time`, its tie-break between jobs of
//! equal priority: the submission, reset to the instant of a requeue.
//!
//! Why not a B-tree: a job joins a queue when it arrives or is requeued,
//! both at the current second, so it almost always goes at the end; and a
//! pass walks a queue in order from the job it just took, which a vector
//! does from that job's slot (kept per job index) without a search from the
//! root. Jobs leave from anywhere (the backfill starts them out of order):
//! their slot is marked gone, and the gone slots are dropped when they
//! outnumber the live ones, on the next insert (never while a pass walks
//! the queue between two inserts, so the slot of the job a pass just took
//! stays where it was; a stale slot is found again by binary search).

use super::Shape;

/// A queued job: queued since (seconds: its order), eligible since
/// (seconds: its age), job index, shape (GPUs per node, nodes, remaining
/// run time in seconds).
#[derive(Debug, Clone, Copy)]
pub(super) struct Slot {
    pub order: u64,
    pub eligible: u64,
    pub id: u32,
    pub shape: Shape,
    gone: bool,
}

impl Slot {
    fn key(&self) -> (u64, u32) {
        (self.order, self.id)
    }
}

#[derive(Debug, Clone, Default)]
pub(super) struct Queue {
    slots: Vec<Slot>,
    /// Every slot before it is gone.
    head: usize,
    live: usize,
}

impl Queue {
    /// Adds job `id`, queued at `order`; `pos[id]` gets its slot (and the
    /// slots of jobs moved by the insert or a compaction get theirs).
    pub fn insert(&mut self, pos: &mut [u32], order: u64, eligible: u64, id: u32, shape: Shape) {
        if self.slots.len() - self.live > self.live.max(32) {
            self.slots.retain(|s| !s.gone);
            self.head = 0;
            for (i, s) in self.slots.iter().enumerate() {
                pos[s.id as usize] = i as u32;
            }
        }
        let key = (order, id);
        let mut i = self.slots.len();
        while i > 0 && self.slots[i - 1].key() > key {
            i -= 1;
        }
        // Gone slots stay in order too (binary searches read them).
        self.head = self.head.min(i);
        self.slots.insert(
            i,
            Slot {
                order,
                eligible,
                id,
                shape,
                gone: false,
            },
        );
        for (k, s) in self.slots.iter().enumerate().skip(i) {
            pos[s.id as usize] = k as u32;
        }
        self.live += 1;
    }

    /// Removes job `id`, queued at `order` (it must be queued here).
    pub fn remove(&mut self, pos: &[u32], order: u64, id: u32) {
        let i = self
            .locate(pos, order, id)
            .expect("a queued job has a slot");
        debug_assert!(!self.slots[i].gone, "job {id} removed twice");
        self.slots[i].gone = true;
        self.live -= 1;
        if self.live == 0 {
            self.slots.clear();
            self.head = 0;
        } else {
            while self.slots[self.head].gone {
                self.head += 1;
            }
        }
    }

    /// The first job (lowest queued time, then index) and its slot.
    /// The live slots in order.
    pub fn iter(&self) -> impl Iterator<Item = &Slot> {
        self.slots[self.head..].iter().filter(|s| !s.gone)
    }

    pub fn first(&self) -> Option<(usize, &Slot)> {
        (self.live > 0).then(|| (self.head, &self.slots[self.head]))
    }

    /// The first live job after (`order`, `id`) and its slot. `hint` is
    /// where that job's slot was (from [`Queue::first`] or this); the job
    /// need not be queued any more, and a slot moved since is found by
    /// binary search.
    pub fn next_after(&self, hint: usize, order: u64, id: u32) -> Option<(usize, &Slot)> {
        let from = match self.slots.get(hint) {
            Some(s) if s.key() == (order, id) => hint + 1,
            _ => self.slots.partition_point(|s| s.key() <= (order, id)),
        };
        let from = from.max(self.head);
        self.slots[from..]
            .iter()
            .position(|s| !s.gone)
            .map(|k| (from + k, &self.slots[from + k]))
    }

    /// The slot of (`order`, `id`), live or gone, if it is still here.
    fn locate(&self, pos: &[u32], order: u64, id: u32) -> Option<usize> {
        let i = pos[id as usize] as usize;
        match self.slots.get(i) {
            Some(s) if s.key() == (order, id) => Some(i),
            _ => {
                let i = self.slots.partition_point(|s| s.key() < (order, id));
                // The last slot of that key: a job requeued within the
                // second it started has a gone slot before its live one.
                let j = self.slots.partition_point(|s| s.key() <= (order, id));
                (j > i).then(|| j - 1)
            }
        }
    }
}

#[cfg(test)]
mod tests;
