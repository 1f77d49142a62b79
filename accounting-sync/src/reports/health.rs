//! `allot report --health`: health events, drains, automatic requeues and
//! how long each drained node took to empty, from the ledger's events.

use serde::Serialize;

use allot_ledger::events::{EventKind, StoredEvent};

/// One drain episode of one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Drain {
    /// Node name.
    pub node: String,
    /// When the drain started (epoch s; the time Slurm set the reason).
    pub since: i64,
    /// The drain reason.
    pub reason: String,
    /// Jobs requeued automatically.
    pub requeued: Vec<u64>,
    /// `--no-requeue` jobs left to finish.
    pub kept: Vec<u64>,
    /// When the node had no job left (epoch s), if it has happened.
    pub drained_at: Option<i64>,
    /// `drained_at - since`, seconds: how long the node took to empty.
    pub emptied_after: Option<i64>,
}

/// The whole health report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HealthReport {
    /// Every event, oldest first.
    pub events: Vec<StoredEvent>,
    /// Drain episodes, oldest first.
    pub drains: Vec<Drain>,
}

/// Groups `events` (oldest first) into drain episodes.
pub fn build(events: Vec<StoredEvent>) -> HealthReport {
    let mut drains: Vec<Drain> = Vec::new();
    for e in &events {
        let e = &e.event;
        let Some(since) = e.since else { continue };
        let i = match drains
            .iter()
            .position(|d| d.node == e.node && d.since == since)
        {
            Some(i) => i,
            None => {
                drains.push(Drain {
                    node: e.node.clone(),
                    since,
                    reason: String::new(),
                    requeued: Vec::new(),
                    kept: Vec::new(),
                    drained_at: None,
                    emptied_after: None,
                });
                drains.len() - 1
            }
        };
        let d = &mut drains[i];
        match e.kind {
            EventKind::Drain => d.reason = e.reason.clone(),
            EventKind::Requeue => d.requeued.extend(e.job_id),
            EventKind::Kept => d.kept.extend(e.job_id),
            EventKind::Drained => {
                d.drained_at = Some(e.time);
                d.emptied_after = Some(e.time - since);
            }
            EventKind::Health => {}
        }
    }
    drains.sort_by_key(|d| (d.since, d.node.clone()));
    HealthReport { events, drains }
}

fn when(t: i64) -> String {
    jiff::Timestamp::from_second(t)
        .map(|ts| {
            ts.to_zoned_datetime(jiff::tz::TimeZone::system())
                .strftime("%Y-%m-%dT%H:%M:%S")
                .to_string()
        })
        .unwrap_or_else(|_| t.to_string())
}

/// The text report: the events table, then one line per drain.
pub fn render_text(r: &HealthReport) -> String {
    let mut out = String::from("Health and drain events\n");
    out.push_str(&format!(
        "{:<19}  {:<12} {:<8} {:>8} {:>4}  {}\n",
        "Time", "Node", "Event", "JobID", "GPU", "Reason"
    ));
    for e in &r.events {
        let e = &e.event;
        out.push_str(&format!(
            "{:<19}  {:<12} {:<8} {:>8} {:>4}  {}\n",
            when(e.time),
            e.node,
            e.kind.as_str(),
            e.job_id.map_or("-".into(), |j| j.to_string()),
            e.gpu.map_or("-".into(), |g| g.to_string()),
            e.reason
        ));
    }
    if r.events.is_empty() {
        out.push_str("(none)\n");
    }
    out.push_str("\nDrains\n");
    out.push_str(&format!(
        "{:<12} {:<19}  {:>8} {:>5}  {:<14}  {}\n",
        "Node", "Since", "Requeued", "Kept", "EmptiedAfter", "Reason"
    ));
    for d in &r.drains {
        let emptied = d
            .emptied_after
            .map_or("still draining".to_string(), |s| format!("{s} s"));
        out.push_str(&format!(
            "{:<12} {:<19}  {:>8} {:>5}  {:<14}  {}\n",
            d.node,
            when(d.since),
            d.requeued.len(),
            d.kept.len(),
            emptied,
            d.reason
        ));
    }
    if r.drains.is_empty() {
        out.push_str("(none)\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use allot_ledger::events::Event;

    fn ev(id: i64, kind: EventKind, time: i64, job: Option<u64>, reason: &str) -> StoredEvent {
        StoredEvent {
            id,
            event: Event {
                time,
                node: "n1".into(),
                kind,
                since: (kind != EventKind::Health).then_some(1000),
                job_id: job,
                gpu: (kind == EventKind::Health).then_some(3),
                serial: None,
                reason: reason.into(),
            },
        }
    }

    #[test]
    fn episodes_and_time_to_empty() {
        let r = build(vec![
            ev(
                1,
                EventKind::Health,
                999,
                None,
                "allot: gpu3 Xid 79 serial=X",
            ),
            ev(
                2,
                EventKind::Drain,
                1000,
                None,
                "allot: gpu3 Xid 79 serial=X",
            ),
            ev(
                3,
                EventKind::Requeue,
                1006,
                Some(17),
                "minimum runtime 5 s served (ran 6 s)",
            ),
            ev(
                4,
                EventKind::Requeue,
                1041,
                Some(18),
                "minimum runtime 40 s served (ran 41 s)",
            ),
            ev(
                5,
                EventKind::Drained,
                1043,
                None,
                "allot: gpu3 Xid 79 serial=X",
            ),
        ]);
        assert_eq!(r.drains.len(), 1);
        let d = &r.drains[0];
        assert_eq!(d.requeued, vec![17, 18]);
        assert_eq!(d.emptied_after, Some(43));
        assert_eq!(d.reason, "allot: gpu3 Xid 79 serial=X");
        let text = render_text(&r);
        assert!(
            text.contains(" requeue        17    -  minimum runtime 5 s served (ran 6 s)"),
            "{text}"
        );
        assert!(
            text.contains("       2     0  43 s            allot: gpu3 Xid 79"),
            "{text}"
        );
    }

    #[test]
    fn an_ongoing_drain_says_so() {
        let r = build(vec![ev(1, EventKind::Drain, 1000, None, "maintenance")]);
        assert!(render_text(&r).contains("still draining"));
        assert_eq!(build(Vec::new()).drains, Vec::new());
    }
}
