//! Sliding-window occupancy: charged milli-unit-seconds ([`crate::charge`]:
//! 1000 per GPU-second by default) per Slurm account inside
//! `[now - window, now]`, exact integers, updated incrementally.
//!
//! Rule (docs/fair-share.md, occupancy): a charged interval `[start, end)` at `rate` milli-units per
//! second (1000 per GPU by default, see [`crate::charge`]) contributes
//! `rate x |[start, end) ∩ [now - window, now]|`: a job straddling the window
//! edge counts only the overlap, a running job counts up to `now`, and a
//! GPU busy for a full hour inside the window is exactly 3,600,000.
//!
//! How: per account, let `C(t)` be the cumulative charge up to time `t`; it
//! is piecewise linear, its slope changing by `+rate` at each start and
//! `-rate` at each end. Occupancy is `C(now) - C(now - window)`. We keep two
//! cursors per account, value and slope of `C` at the window's front (`now`)
//! and back (`now - window`), and one time-ordered queue of slope changes
//! later than the back. Adding an interval adjusts both cursors directly and
//! queues its future slope changes; moving `now` replays only the changes the
//! two cursors cross, then drops those that slid out of the window. Nothing
//! ever rescans history: `add_*` cost O(log n), `advance_to` O(k log n) for k
//! crossed changes, `occupancy` O(1). Memory is bounded by the intervals that
//! touch the window.
//!
//! Which interval to charge (minimum runtime, unallocated tier) is the
//! contract's business: see [`crate::contract::ContractPolicy::charged_end`].

use std::collections::BTreeMap;

use crate::hash::FastMap;

/// `now` moved backwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("usage clock cannot go back from {now} to {requested} (epoch seconds); rebuild the tracker from the ledger instead")]
pub struct TimeWentBack {
    /// The tracker's current `now`.
    pub now: u64,
    /// The earlier time asked for.
    pub requested: u64,
}

/// Handle of a still-running charged interval, to close it later.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OpenCharge(u64);

/// Value and slope of `C` at time `t` (exact until the next slope change).
#[derive(Debug, Clone, Copy, Default)]
struct Cursor {
    t: u64,
    value: i128,
    slope: i128,
}

impl Cursor {
    fn at(&self, t: u64) -> i128 {
        self.value + self.slope * (i128::from(t) - i128::from(self.t))
    }

    fn move_to(&mut self, t: u64) {
        self.value = self.at(t);
        self.t = t;
    }

    /// Adds `rate` on `[start, end)` as seen from this cursor's time `t`.
    fn add(&mut self, t: u64, rate: i128, start: u64, end: Option<u64>) {
        self.move_to(t);
        let until = end.map_or(t, |e| e.min(t));
        if until > start {
            self.value += rate * i128::from(until - start);
        }
        if start <= t && end.is_none_or(|e| t < e) {
            self.slope += rate;
        }
    }
}

#[derive(Debug, Clone, Default)]
struct Account {
    front: Cursor,
    back: Cursor,
}

#[derive(Debug, Clone, Copy)]
struct Open {
    account: u32,
    rate: u64,
    start: u64,
}

/// Per-account occupancy over a sliding window. See the module doc.
#[derive(Debug, Clone)]
pub struct UsageTracker {
    window: u64,
    now: u64,
    names: Vec<String>,
    ids: FastMap<String, u32>,
    accounts: Vec<Account>,
    /// Slope changes strictly after the window's back, by (time, account).
    changes: BTreeMap<(u64, u32), i128>,
    open: FastMap<u64, Open>,
    next_open: u64,
}

impl UsageTracker {
    /// An empty tracker over `[now - window, now]` (seconds; epoch seconds).
    /// A window of 0 gives occupancy 0 everywhere (the config rejects it).
    pub fn new(window: u64, now: u64) -> Self {
        UsageTracker {
            window,
            now,
            names: Vec::new(),
            ids: FastMap::default(),
            accounts: Vec::new(),
            changes: BTreeMap::new(),
            open: FastMap::default(),
            next_open: 0,
        }
    }

    /// The window's front (epoch seconds).
    pub fn now(&self) -> u64 {
        self.now
    }

    /// The window length, seconds.
    pub fn window(&self) -> u64 {
        self.window
    }

    /// The window's back, `now - window` (never below 0).
    pub fn window_start(&self) -> u64 {
        self.now.saturating_sub(self.window)
    }

    fn account_id(&mut self, account: &str) -> u32 {
        if let Some(&id) = self.ids.get(account) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(account.to_string());
        self.ids.insert(account.to_string(), id);
        self.accounts.push(Account::default());
        id
    }

    fn queue(&mut self, t: u64, account: u32, delta: i128) {
        if t <= self.window_start() {
            return; // both cursors already include it
        }
        let entry = self.changes.entry((t, account)).or_insert(0);
        *entry += delta;
        if *entry == 0 {
            self.changes.remove(&(t, account));
        }
    }

    fn apply(&mut self, account: u32, rate: i128, start: u64, end: Option<u64>) {
        let (front, back) = (self.now, self.window_start());
        let a = &mut self.accounts[account as usize];
        a.front.add(front, rate, start, end);
        a.back.add(back, rate, start, end);
        self.queue(start, account, rate);
        if let Some(e) = end {
            self.queue(e, account, -rate);
        }
    }

    /// Charges `rate` milli-units per second to `account` over `[start, end)`
    /// (epoch seconds). An interval with `end <= start` charges nothing.
    /// Intervals may lie in the past, straddle the window, or reach into the
    /// future (a minimum runtime not yet served): each second counts once
    /// the window covers it.
    pub fn add_closed(&mut self, account: &str, rate: u64, start: u64, end: u64) {
        if end <= start || rate == 0 {
            return;
        }
        let id = self.account_id(account);
        self.apply(id, i128::from(rate), start, Some(end));
    }

    /// Charges `rate` milli-units per second to `account` from `start` on, until
    /// [`close`](Self::close) is called: a running job.
    pub fn add_running(&mut self, account: &str, rate: u64, start: u64) -> OpenCharge {
        let id = self.account_id(account);
        self.apply(id, i128::from(rate), start, None);
        let handle = self.next_open;
        self.next_open += 1;
        self.open.insert(
            handle,
            Open {
                account: id,
                rate,
                start,
            },
        );
        OpenCharge(handle)
    }

    /// Ends a running charge at `end` (epoch seconds; clamped to its start).
    /// Pass the *charged* end, e.g. from
    /// [`ContractPolicy::charged_end`](crate::contract::ContractPolicy::charged_end).
    /// Returns false for a handle already closed or from another tracker.
    pub fn close(&mut self, handle: OpenCharge, end: u64) -> bool {
        let Some(o) = self.open.remove(&handle.0) else {
            return false;
        };
        // Closing [start, inf) at `end` = adding -rate on [end, inf).
        self.apply(o.account, -i128::from(o.rate), end.max(o.start), None);
        true
    }

    /// Moves the window's front to `now` (epoch seconds), replaying only the
    /// slope changes the two cursors cross.
    ///
    /// # Errors
    /// [`TimeWentBack`] if `now` is earlier than the current front; the
    /// tracker is unchanged.
    pub fn advance_to(&mut self, now: u64) -> Result<(), TimeWentBack> {
        if now < self.now {
            return Err(TimeWentBack {
                now: self.now,
                requested: now,
            });
        }
        if now == self.now {
            return Ok(());
        }
        let old_front = self.now;
        for (&(t, a), &delta) in self.changes.range((old_front + 1, 0)..=(now, u32::MAX)) {
            let c = &mut self.accounts[a as usize].front;
            c.move_to(t);
            c.slope += delta;
        }
        self.now = now;
        let back = self.window_start();
        while let Some(entry) = self.changes.first_entry() {
            let (t, a) = *entry.key();
            if t > back {
                break;
            }
            let delta = entry.remove();
            let c = &mut self.accounts[a as usize].back;
            c.move_to(t);
            c.slope += delta;
        }
        Ok(())
    }

    /// Charged milli-unit-seconds (1000 per GPU-second by default) of `account` inside
    /// `[now - window, now]`; 0 for an account never charged. Saturates at
    /// `u64::MAX`.
    pub fn occupancy(&self, account: &str) -> u64 {
        self.ids.get(account).map_or(0, |&id| self.occupancy_of(id))
    }

    fn occupancy_of(&self, id: u32) -> u64 {
        let a = &self.accounts[id as usize];
        let v = a.front.at(self.now) - a.back.at(self.window_start());
        u64::try_from(v.max(0)).unwrap_or(u64::MAX)
    }

    /// Every account ever charged, with its occupancy now.
    pub fn occupancies(&self) -> impl Iterator<Item = (&str, u64)> + '_ {
        self.names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), self.occupancy_of(i as u32)))
    }

    /// Running charges not yet closed.
    pub fn open_charges(&self) -> usize {
        self.open.len()
    }
}

#[cfg(test)]
mod tests;
