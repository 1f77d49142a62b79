//! `allot explain`'s account of a job's preempted attempts: for each, the
//! preemptor, its account, the clause that allowed it and the figures, as
//! preempt/allot recorded them (the ledger's `preemptions`,
//! docs/plugins.md). An attempt without a record (preempted before allot
//! recorded preemptions, or a record lost in a slurmctld crash) gets the
//! old guess instead, labelled as one: the first allocated job of another
//! account that started within 60 s of its end.

use allot_ledger::preemptions::StoredPreemption;
use allot_ledger::{LedgerReader, StoredAttempt};
use fairshare::duration::SlurmDuration;
use fairshare::preempt::{Grounds, Rule};
use serde::Serialize;

/// Seconds after an attempt's end within which the guess looks for a
/// preemptor's start.
const GUESS_WINDOW: i64 = 60;

/// One earlier attempt that ended by preemption, and its preemptor.
#[derive(Debug, Clone, Serialize)]
pub struct Requeue {
    /// 0, 1, ...: the attempt's index.
    pub attempt: u32,
    /// When it ended (epoch s).
    pub ended: i64,
    /// Its state as sacct reports it (`PREEMPTED`, `REQUEUED`, ...).
    pub state: String,
    /// The preemptor's job id, from preempt/allot's record; `None`
    /// without one.
    pub preempted_by: Option<u64>,
    /// The preemptor's account, from the record.
    pub preemptor_account: Option<String>,
    /// The clause that allowed it (`net_gain`, `free_tier`, ...).
    pub rule: Option<String>,
    /// When slurmctld preempted it (epoch s), from the record.
    pub preempted_at: Option<i64>,
    /// The figures it was judged on (docs/ledger.md, `grounds`).
    pub grounds: Option<serde_json::Value>,
    /// Only for an attempt without a record: a guess by time, not a record.
    pub guessed_preemptor: Option<Guess>,
}

/// The guess for an attempt without a record.
#[derive(Debug, Clone, Serialize)]
pub struct Guess {
    /// The guessed preemptor's job id.
    pub job_id: u64,
    /// Its account.
    pub account: String,
    /// When it started (epoch s).
    pub started: i64,
}

/// The record of the preemption that ended `a`: the last one taken while
/// it ran (`start <= time <= end`).
fn record_of<'r>(
    a: &StoredAttempt,
    records: &'r [StoredPreemption],
) -> Option<&'r StoredPreemption> {
    let (start, end) = (a.record.start?, a.record.end?);
    records
        .iter()
        .rev()
        .find(|r| (start..=end).contains(&r.preemption.time))
}

fn guess(
    reader: &LedgerReader,
    a: &StoredAttempt,
    end: i64,
) -> allot_ledger::Result<Option<Guess>> {
    Ok(reader
        .attempts_overlapping(end, end + GUESS_WINDOW)?
        .into_iter()
        .filter(|o| o.record.account != a.record.account && o.record.min_runtime > 0)
        .filter_map(|o| {
            o.record
                .start
                .filter(|s| (end..=end + GUESS_WINDOW).contains(s))
                .map(|s| (s, o))
        })
        .min_by_key(|(s, o)| (*s, o.record.job_id))
        .map(|(s, o)| Guess {
            job_id: o.record.job_id,
            account: o.record.account,
            started: s,
        }))
}

/// The preempted attempts of a job (`attempts`, all of one job), each
/// with its record, or the guess without one.
///
/// # Errors
/// Ledger errors.
pub fn requeues(
    reader: &LedgerReader,
    attempts: &[StoredAttempt],
) -> allot_ledger::Result<Vec<Requeue>> {
    let records = match attempts.first() {
        Some(a) => reader.preemptions_of(a.record.job_id)?,
        None => Vec::new(),
    };
    let mut out = Vec::new();
    for a in attempts.iter().filter(|a| {
        a.record.state.starts_with("PREEMPTED") || a.record.state.starts_with("REQUEUE")
    }) {
        let Some(end) = a.record.end else { continue };
        let record = record_of(a, &records).map(|r| &r.preemption);
        let guessed = match record {
            Some(_) => None,
            None => guess(reader, a, end)?,
        };
        out.push(Requeue {
            attempt: a.attempt,
            ended: end,
            state: a.record.state.clone(),
            preempted_by: record.map(|r| r.preemptor),
            preemptor_account: record.map(|r| r.preemptor_account.clone()),
            rule: record.map(|r| r.rule.clone()),
            preempted_at: record.map(|r| r.time),
            grounds: record.map(|r| r.grounds.clone()),
            guessed_preemptor: guessed,
        });
    }
    Ok(out)
}

/// The figures of a record in a line (`None` when they cannot be read:
/// written by another allot).
pub fn figures(grounds: &serde_json::Value) -> Option<String> {
    let g: Grounds = serde_json::from_value(grounds.clone()).ok()?;
    let leaf = |l: &fairshare::preempt::grounds::LeafFigures| {
        format!(
            "{} held {} of {:.2} GPUs entitled",
            l.leaf, l.running, l.entitled
        )
    };
    let mut s = format!("{}; ", leaf(&g.preemptor_leaf));
    match &g.victim_leaf {
        Some(l) => s.push_str(&format!("victim's leaf {}; ", leaf(l))),
        None => s.push_str("victim's account not in the tree; "),
    }
    if g.rule == Rule::NetGain {
        s.push_str(&format!(
            "the preemptor's {} GPU(s) cover {:.2} GPUs of entitlement, the victims' leaves lose {:.2} (must be < {:.2}); ",
            g.preemptor_gpus,
            g.gain,
            g.lost,
            g.allowance.unwrap_or(0.0)
        ));
    }
    let v = &g.victim;
    s.push_str(&format!(
        "the victim held {} GPU(s), ran {} of its minimum runtime {}, requeued {} of {} times before",
        v.gpus,
        SlurmDuration(v.run_time),
        SlurmDuration(v.min_runtime),
        v.requeues,
        v.max_requeues
    ));
    if v.requeue_period > 0 {
        s.push_str(&format!(
            ", at a requeue point (every {}, open for {})",
            SlurmDuration(v.requeue_period),
            SlurmDuration(v.requeue_window)
        ));
    }
    Some(s)
}

/// The clause in words, from its stored name.
pub fn rule_words(rule: &str) -> &'static str {
    Rule::ALL
        .into_iter()
        .find(|r| r.as_str() == rule)
        .map_or("a clause this allot does not know", Rule::describe)
}

/// One line for `r` (times relative to `now` through `when`).
pub fn render(r: &Requeue, when: impl Fn(i64) -> String) -> String {
    let by = match (&r.preempted_by, &r.rule) {
        (Some(job), Some(rule)) => {
            let mut s = format!(
                "preempted for job {job} of account {} ({}), rule {rule}: {}",
                r.preemptor_account.as_deref().unwrap_or("?"),
                r.preempted_at.map_or(String::new(), &when),
                rule_words(rule)
            );
            if let Some(f) = r.grounds.as_ref().and_then(figures) {
                s.push_str(&format!("\n    {f}"));
            }
            s
        }
        _ => match &r.guessed_preemptor {
            Some(p) => format!(
                "no preemption record; guessed by time (not recorded): job {} of account {} started {}",
                p.job_id,
                p.account,
                when(p.started)
            ),
            None => "no preemption record, and no job of another account started within 60 s".into(),
        },
    };
    format!(
        "  Attempt {} ended {} ({}): {by}",
        r.attempt,
        when(r.ended),
        r.state
    )
}

#[cfg(test)]
mod tests;
