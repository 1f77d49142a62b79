//! Which slurm.conf `PreemptMode`s preempt/allot honours.
//!
//! - `REQUEUE`: a victim is requeued (a `--no-requeue` job is cancelled,
//!   since Slurm cannot requeue it); what allot was built for.
//! - `CANCEL`: every victim is cancelled; slurmctld ends it as `PREEMPTED`,
//!   sacct and so the ledger and reports show it as such. Who may preempt
//!   whom is the same: no victim inside its minimum runtime, fair-share
//!   order, free tier first.
//! - Anything else (`SUSPEND`, `GANG`, `WITHIN`, `OFF`) is refused when
//!   slurmctld loads the plugin, with one log line naming the supported
//!   modes: a suspended job would keep its GPUs' memory and its charged
//!   time would not be running time, and gang scheduling time-slices jobs
//!   the contract promises to leave running.

use allot_ffi::sys;

/// A `PreemptMode` preempt/allot honours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Honoured {
    /// `PreemptMode=REQUEUE`.
    Requeue,
    /// `PreemptMode=CANCEL`.
    Cancel,
}

impl Honoured {
    /// The mode for one victim: `CANCEL` under `CANCEL`; under `REQUEUE`,
    /// `REQUEUE` unless the job cannot be requeued (`--no-requeue`).
    pub fn victim_mode(self, requeueable: bool) -> u16 {
        match self {
            Honoured::Requeue if requeueable => sys::PREEMPT_MODE_REQUEUE as u16,
            _ => sys::PREEMPT_MODE_CANCEL as u16,
        }
    }
}

/// The supported modes, as the refusal names them.
pub const SUPPORTED: &str = "REQUEUE (--no-requeue jobs are cancelled) or CANCEL";

/// `PreemptMode` bits as slurm.conf spells them: `SUSPEND,GANG`.
pub fn mode_name(mode: u16) -> String {
    let mode = u32::from(mode);
    if mode == sys::PREEMPT_MODE_OFF {
        return "OFF".into();
    }
    let mut names = Vec::new();
    let mut rest = mode;
    for (bit, name) in [
        (sys::PREEMPT_MODE_SUSPEND, "SUSPEND"),
        (sys::PREEMPT_MODE_REQUEUE, "REQUEUE"),
        (sys::PREEMPT_MODE_CANCEL, "CANCEL"),
        (sys::PREEMPT_MODE_COND_OFF, "COND_OFF"),
        (sys::PREEMPT_MODE_WITHIN, "WITHIN"),
        (sys::PREEMPT_MODE_GANG, "GANG"),
    ] {
        if mode & bit != 0 {
            names.push(name.to_string());
            rest &= !bit;
        }
    }
    if rest != 0 {
        names.push(format!("0x{rest:x}"));
    }
    names.join(",")
}

/// Whether preempt/allot honours slurm.conf's `PreemptMode` (`mode`, as
/// in `slurm_conf.preempt_mode`).
///
/// # Errors
/// The one log line for slurmctld: the mode found and the supported ones.
pub fn check(mode: u16) -> Result<Honoured, String> {
    match u32::from(mode) {
        sys::PREEMPT_MODE_REQUEUE => Ok(Honoured::Requeue),
        sys::PREEMPT_MODE_CANCEL => Ok(Honoured::Cancel),
        _ => Err(format!(
            "PreemptMode={} is not supported with PreemptType=preempt/allot; supported: {SUPPORTED}. Set PreemptMode=REQUEUE in slurm.conf",
            mode_name(mode)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requeue_and_cancel_are_honoured_the_rest_refused() {
        let m = |bits: u32| bits as u16;
        assert_eq!(check(m(sys::PREEMPT_MODE_REQUEUE)), Ok(Honoured::Requeue));
        assert_eq!(check(m(sys::PREEMPT_MODE_CANCEL)), Ok(Honoured::Cancel));
        assert_eq!(
            check(m(sys::PREEMPT_MODE_SUSPEND | sys::PREEMPT_MODE_GANG)),
            Err("PreemptMode=SUSPEND,GANG is not supported with PreemptType=preempt/allot; supported: REQUEUE (--no-requeue jobs are cancelled) or CANCEL. Set PreemptMode=REQUEUE in slurm.conf".into())
        );
        for (bits, name) in [
            (sys::PREEMPT_MODE_SUSPEND, "SUSPEND"),
            (sys::PREEMPT_MODE_GANG, "GANG"),
            (sys::PREEMPT_MODE_OFF, "OFF"),
            (
                sys::PREEMPT_MODE_REQUEUE | sys::PREEMPT_MODE_GANG,
                "REQUEUE,GANG",
            ),
            (
                sys::PREEMPT_MODE_CANCEL | sys::PREEMPT_MODE_WITHIN,
                "CANCEL,WITHIN",
            ),
        ] {
            let e = check(m(bits)).unwrap_err();
            assert!(
                e.starts_with(&format!("PreemptMode={name} is not supported")),
                "{e}"
            );
        }
    }

    #[test]
    fn each_victim_gets_the_configured_mode() {
        let requeue = sys::PREEMPT_MODE_REQUEUE as u16;
        let cancel = sys::PREEMPT_MODE_CANCEL as u16;
        assert_eq!(Honoured::Requeue.victim_mode(true), requeue);
        assert_eq!(Honoured::Requeue.victim_mode(false), cancel, "--no-requeue");
        assert_eq!(Honoured::Cancel.victim_mode(true), cancel);
        assert_eq!(Honoured::Cancel.victim_mode(false), cancel);
    }
}
