//! What Slurm says, and the one place allot asks it.
//!
//! Every Slurm command the `allot` binary starts is run here, by one
//! runner ([`command::Slurm`]: a timeout on every run, output read whole or
//! streamed, one message style for the three ways a run fails), and its
//! output is read here, one module a command:
//! - [`squeue`]: slurmctld's jobs (`--json`: [`squeue::LiveJob`]) and a
//!   draining node's jobs;
//! - [`sacct`]: slurmdbd's job attempts (the rows are read by
//!   [`allot_ledger::sacct`], the one parser of sacct rows);
//! - [`sinfo`]: draining nodes, the nodes in service, the cluster's GPUs;
//! - [`scontrol`]: slurmctld's configuration (`PrivateData`, `SlurmUser`,
//!   `ClusterName`), a node's record, draining a node, requeueing a job;
//! - [`sacctmgr`]: accounts (the org tree's sync), associations and
//!   operators (the sidecar's privacy);
//! - [`gpus`]: the one rule for the GPUs in a Gres or TRES string.
//!
//! Callers (explain, forecast, the sync pass, the drain pass, the sidecar's
//! snapshot, `allot tree`, `allot health`, `allot report`'s capacity) ask
//! for facts, never for a command line: no file outside this module names
//! a Slurm command beside `Command::new` (scripts/check-limits does not
//! check that; `grep -rn 'Command::new' accounting-sync/src` does).

pub mod command;
pub mod gpus;
pub mod sacct;
pub mod sacctmgr;
pub mod scontrol;
pub mod sinfo;
pub mod squeue;

pub use command::Slurm;
