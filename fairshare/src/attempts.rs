//! Which intervals a job's attempts are charged: who ended each attempt,
//! resized runs, and attempts that never overlap (issue 39, items 1 and 4).
//!
//! Rules, from what Slurm records (sacct's `State` of each attempt; Slurm's
//! job state codes, <https://slurm.schedmd.com/job_state_codes.html>):
//! - **Ended by its owner** ([`EndedBy::Owner`]): `COMPLETED`, `FAILED`
//!   (non-zero exit), `OUT_OF_MEMORY` (the job outgrew its memory request),
//!   `TIMEOUT` and `DEADLINE` (the limits the job was submitted with),
//!   `CANCELLED` (by any uid: sacct's `CANCELLED by UID` names the owner or
//!   an administrator acting on the job; allot itself never cancels a job
//!   inside its minimum runtime), `SPECIAL_EXIT` (an exit code the owner's
//!   job chose), `PREEMPTED` (allot's own preemption, which preempt/allot
//!   allows only past the minimum runtime or in the free tier), and any
//!   state not listed here (`UNKNOWN` from a dump without `State`). Charged
//!   as the contract says ([`crate::ContractPolicy::charged_end`]): `rate x
//!   max(runtime, minimum runtime)`, the minimum runtime counted from the
//!   start of the run (below).
//! - **Ended by the cluster** ([`EndedBy::Cluster`]): `NODE_FAIL` (an
//!   allocated node failed), `BOOT_FAIL` (a node could not be booted or
//!   the launch failed), `REQUEUED` and `REQUEUE_HOLD` (Slurm requeued the
//!   attempt: a launch or prolog failure, a node lost at launch, an
//!   administrator's or allot's drain `scontrol requeue`, and on some
//!   releases a preemption with `PreemptMode=REQUEUE`), `REQUEUE_FED`
//!   (a federation sibling's requeue). Charged its runtime only, `[start,
//!   end)`: the job did not choose to stop, so it is not billed the
//!   protection it did not get. allot's own requeues (drain, preemption)
//!   come at or past the minimum runtime, where runtime only and the
//!   contract's charge are the same: those charges do not change.
//! - **Resized** ([`EndedBy::Resize`]): `RESIZING`. Slurm ends the record
//!   of a resized job as `RESIZING` at the resize time and starts a new
//!   record of the same job id there (submit = start = the resize time).
//!   The records are *segments of one run*: each segment is charged its
//!   own rate over its own time, a segment that ended `RESIZING` its
//!   runtime only, and the run's last segment carries the minimum runtime
//!   counted from the run's first start (once per run).
//! - **No overlap**: the charged intervals of one job's attempts never
//!   overlap. A later attempt's start cuts the earlier attempt's charged
//!   tail (the part past its end): `charge_end = max(end, min(charge_end,
//!   next start))`. The attempt's own runtime is never cut.
//!
//! A sacct record names no "who" for a requeue: an owner's own `scontrol
//! requeue` reads as `REQUEUED` too, and is charged as the cluster's. The
//! job's next attempt is charged its own minimum runtime from its start.

use crate::ContractPolicy;

/// Who ended an attempt, from its sacct base state ([`ended_by`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndedBy {
    /// The job itself or its owner (module doc): charged by the contract.
    Owner,
    /// The cluster (node failure, boot failure, requeue): charged its
    /// runtime only.
    Cluster,
    /// A resize: the run goes on in the job's next record.
    Resize,
}

/// Who ended an attempt whose sacct `State` is `state` (the base state, or
/// the whole field: `CANCELLED by 0` reads as `CANCELLED`; case-insensitive).
pub fn ended_by(state: &str) -> EndedBy {
    let base = state.split_whitespace().next().unwrap_or("");
    match base.to_ascii_uppercase().as_str() {
        "NODE_FAIL" | "BOOT_FAIL" | "REQUEUED" | "REQUEUE_HOLD" | "REQUEUE_FED" => EndedBy::Cluster,
        "RESIZING" => EndedBy::Resize,
        _ => EndedBy::Owner,
    }
}

/// One attempt of a job as the charge needs it. Times: seconds since the
/// epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttemptSpan {
    /// Start; `None`: never started.
    pub start: Option<u64>,
    /// End; `None`: running or pending.
    pub end: Option<u64>,
    /// Who ended it ([`ended_by`] of its state).
    pub ended_by: EndedBy,
    /// Its minimum runtime, seconds (0 = unallocated: charged nothing).
    pub min_runtime: u64,
}

/// The charged ends of one job's attempts, given in submit order (epoch
/// seconds): `[start, charged_end)` is each attempt's charged interval.
/// `None` for an attempt that never started, still runs, or is unallocated
/// (minimum runtime 0). Rules: module doc.
pub fn charged_ends(policy: &ContractPolicy, attempts: &[AttemptSpan]) -> Vec<Option<u64>> {
    let mut out = Vec::with_capacity(attempts.len());
    // Start of the run the current attempt belongs to: the first start of
    // a chain of records ended RESIZING.
    let mut run_start: Option<u64> = None;
    for (i, a) in attempts.iter().enumerate() {
        let continues = i > 0 && attempts[i - 1].ended_by == EndedBy::Resize;
        if !continues {
            run_start = None;
        }
        let (Some(start), Some(end)) = (a.start, a.end) else {
            run_start = run_start.or(a.start);
            out.push(None);
            continue;
        };
        let from = *run_start.get_or_insert(start);
        let end = end.max(start);
        let own = match a.ended_by {
            EndedBy::Owner => policy
                .charged_end(from, end, a.min_runtime)
                .map(|e| e.max(end)),
            EndedBy::Cluster | EndedBy::Resize => (a.min_runtime > 0).then_some(end),
        };
        let next_start = attempts[i + 1..].iter().filter_map(|b| b.start).min();
        out.push(own.map(|e| match next_start {
            Some(n) => e.min(n).max(end),
            None => e,
        }));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: u64 = 3600;
    const T: u64 = 1_700_000_000;

    fn span(start: u64, end: u64, state: &str) -> AttemptSpan {
        AttemptSpan {
            start: Some(start),
            end: Some(end),
            ended_by: ended_by(state),
            min_runtime: H,
        }
    }

    #[test]
    fn who_ended_each_state() {
        for s in [
            "NODE_FAIL",
            "BOOT_FAIL",
            "REQUEUED",
            "REQUEUE_HOLD",
            "requeue_fed",
        ] {
            assert_eq!(ended_by(s), EndedBy::Cluster, "{s}");
        }
        for s in [
            "COMPLETED",
            "FAILED",
            "OUT_OF_MEMORY",
            "TIMEOUT",
            "DEADLINE",
            "CANCELLED by 0",
            "CANCELLED by 1001",
            "PREEMPTED",
            "SPECIAL_EXIT",
            "UNKNOWN",
        ] {
            assert_eq!(ended_by(s), EndedBy::Owner, "{s}");
        }
        assert_eq!(ended_by("RESIZING"), EndedBy::Resize);
    }

    #[test]
    fn cluster_ended_attempts_pay_their_runtime_and_never_overlap() {
        let p = ContractPolicy::default(); // 1 h default, charged
                                           // NODE_FAIL after 3:59, the requeued attempt runs 2 h from 60 s later.
        let ends = charged_ends(
            &p,
            &[
                span(T, T + 239, "NODE_FAIL"),
                span(T + 299, T + 299 + 2 * H, "COMPLETED"),
            ],
        );
        assert_eq!(ends, vec![Some(T + 239), Some(T + 299 + 2 * H)]);
        // BOOT_FAIL at 0 s: nothing charged.
        assert_eq!(charged_ends(&p, &[span(T, T, "BOOT_FAIL")]), vec![Some(T)]);
        // A requeue loop of 0-1 s attempts, the last held.
        let ends = charged_ends(
            &p,
            &[
                span(T, T + 1, "REQUEUED"),
                span(T + 62, T + 63, "REQUEUED"),
                span(T + 124, T + 124, "REQUEUED"),
                span(T + 186, T + 187, "REQUEUE_HOLD"),
            ],
        );
        assert_eq!(
            ends,
            vec![Some(T + 1), Some(T + 63), Some(T + 124), Some(T + 187)]
        );
    }

    #[test]
    fn owner_ended_attempts_keep_the_contract_and_a_later_start_cuts_the_tail() {
        let p = ContractPolicy::default();
        // Cancelled at 10 min: the hour is charged.
        assert_eq!(
            charged_ends(&p, &[span(T, T + 600, "CANCELLED")]),
            vec![Some(T + H)]
        );
        // Completed at 10 min, requeued by hand (scontrol requeue of a
        // finished job) and started again 20 min later: the first attempt's
        // hour is cut at the second's start.
        let ends = charged_ends(
            &p,
            &[
                span(T, T + 600, "COMPLETED"),
                span(T + 1800, T + 1800 + 600, "COMPLETED"),
            ],
        );
        assert_eq!(ends, vec![Some(T + 1800), Some(T + 1800 + H)]);
        // A preemption past the contract: its runtime, as before.
        assert_eq!(
            charged_ends(&p, &[span(T, T + 2 * H, "PREEMPTED")]),
            vec![Some(T + 2 * H)]
        );
        // Unallocated, running and pending attempts: nothing.
        let free = AttemptSpan {
            min_runtime: 0,
            ..span(T, T + 600, "NODE_FAIL")
        };
        let running = AttemptSpan {
            end: None,
            ..span(T, T, "RUNNING")
        };
        assert_eq!(charged_ends(&p, &[free, running]), vec![None, None]);
    }

    #[test]
    fn a_resized_run_pays_each_segment_and_the_contract_once() {
        let p = ContractPolicy::default();
        // 16 GPUs for 20 min, then 8 GPUs for 100 min.
        let ends = charged_ends(
            &p,
            &[
                span(T, T + 1200, "RESIZING"),
                span(T + 1200, T + 7200, "COMPLETED"),
            ],
        );
        assert_eq!(ends, vec![Some(T + 1200), Some(T + 7200)]);
        // A run shorter than its contract: the last segment carries the
        // rest of the hour counted from the run's start, not its own.
        let ends = charged_ends(
            &p,
            &[
                span(T, T + 1200, "RESIZING"),
                span(T + 1200, T + 1800, "RESIZING"),
                span(T + 1800, T + 2400, "CANCELLED"),
            ],
        );
        assert_eq!(ends, vec![Some(T + 1200), Some(T + 1800), Some(T + H)]);
        // Without charged minimum runtimes: runtime only.
        let runtime_only = ContractPolicy {
            charge_min_runtime: false,
            ..ContractPolicy::default()
        };
        assert_eq!(
            charged_ends(&runtime_only, &[span(T, T + 600, "COMPLETED")]),
            vec![Some(T + 600)]
        );
    }
}
