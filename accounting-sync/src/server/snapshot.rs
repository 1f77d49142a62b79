//! What the sidecar knew at its last pass: the [`Snapshot`] every request
//! reads (the report, the engine, slurmctld's jobs, who is who), taken
//! once a pass by [`Snapshot::take`], so that no request runs a Slurm
//! command.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use allot_ledger::LedgerReader;
use fairshare::{Config, Engine};

use super::privacy::SlurmUsers;
use crate::explain;
use crate::reports::budget::{self, Report};
use crate::reports::budget_page::{self, Daily};
use crate::slurm::sacctmgr;
use crate::slurm::scontrol::{self, ShowConfig};
use crate::slurm::squeue::{self, LiveJob};

/// Days of daily use on the live budget page.
const PAGE_DAYS: u32 = 14;

/// What the sidecar knew at its last pass.
pub struct Snapshot {
    /// When it was taken (epoch s).
    pub at: i64,
    /// The configuration.
    pub config: Arc<Config>,
    /// The engine over the window's charged usage.
    pub engine: Engine,
    /// The budget report over the window, with user lines.
    pub report: Report,
    /// Daily use for the page.
    pub daily: Daily,
    /// Every job slurmctld has, by id.
    pub jobs: BTreeMap<u64, LiveJob>,
    /// PrivateData, admins, associations.
    pub users: SlurmUsers,
}

impl Snapshot {
    /// Takes one at `now` (epoch s) for `capacity` GPUs: the report and
    /// engine from `reader`, the users from Slurm, and slurmctld's `jobs`
    /// (as the sync pass read them; `None`: squeue is asked here).
    ///
    /// # Errors
    /// Ledger errors, or a Slurm command that fails.
    pub fn take(
        config: &Arc<Config>,
        reader: &LedgerReader,
        capacity: u64,
        now: i64,
        jobs: Option<BTreeMap<u64, LiveJob>>,
    ) -> anyhow::Result<Snapshot> {
        let jobs = match jobs {
            Some(jobs) => jobs,
            None => squeue::jobs_now()?,
        };
        let mut report = budget::build(
            reader,
            config.clone(),
            capacity,
            now - config.window as i64,
            now,
            true,
        )?;
        live_counts(&mut report, &config.tree, &jobs);
        Ok(Snapshot {
            at: now,
            config: config.clone(),
            engine: explain::engine_now(config, reader, now, Some(&jobs))?,
            report,
            daily: budget_page::daily(reader, config, now, PAGE_DAYS)?,
            jobs,
            users: slurm_users()?,
        })
    }
}

/// Who is who, from Slurm: `scontrol show config` (PrivateData,
/// SlurmUser) and slurmdbd (admin levels, associations).
///
/// # Errors
/// A Slurm command that fails.
pub fn slurm_users() -> anyhow::Result<SlurmUsers> {
    let show = scontrol::show_config()?;
    Ok(SlurmUsers {
        private: show.private_data(),
        admins: admins(&show)?,
        accounts: sacctmgr::associations()?,
    })
}

/// Who sees everything whatever `PrivateData` says: root, SlurmUser (of
/// `show`, `scontrol show config`) and slurmdbd's users of AdminLevel
/// Operator or Administrator.
///
/// # Errors
/// sacctmgr cannot run or fails.
pub fn admins(show: &ShowConfig) -> anyhow::Result<BTreeSet<String>> {
    let mut admins: BTreeSet<String> = ["root".to_string()].into();
    admins.extend(show.slurm_user().map(|(name, _)| name));
    admins.extend(sacctmgr::operators()?);
    Ok(admins)
}

/// The report's running and pending jobs as slurmctld has them now
/// (squeue), rather than as the last sync saw them in sacct: each node
/// line counts its subtree's accounts, each user line its user's jobs in
/// its leaf, each line of an account outside the tree that account's.
pub fn live_counts(r: &mut Report, tree: &fairshare::Tree, jobs: &BTreeMap<u64, LiveJob>) {
    let mut by: BTreeMap<(&str, &str), (u64, u64)> = BTreeMap::new();
    for j in jobs.values() {
        let c = by.entry((j.account.as_str(), j.user.as_str())).or_default();
        match j.state.as_str() {
            "RUNNING" | "COMPLETING" | "SUSPENDED" => c.0 += 1,
            "PENDING" | "REQUEUED" => c.1 += 1,
            _ => {}
        }
    }
    let count = |accounts: &[String], user: Option<&str>| {
        by.iter()
            .filter(|((a, u), _)| accounts.iter().any(|x| x == a) && user.is_none_or(|w| w == *u))
            .fold((0, 0), |s, (_, c)| (s.0 + c.0, s.1 + c.1))
    };
    let order = budget::node_order(tree);
    let outside: Vec<String> = by
        .keys()
        .map(|(a, _)| a.to_string())
        .filter(|a| tree.leaf_of_account(a).is_none())
        .collect();
    let mut nodes = order.iter();
    let mut leaf_accounts: Vec<String> = Vec::new();
    for l in &mut r.lines {
        let (running, pending) = match l.user.as_deref() {
            None => match nodes.next() {
                Some(id) => {
                    leaf_accounts = budget::subtree_accounts(tree, *id);
                    count(&leaf_accounts, None)
                }
                None => count(&outside, None),
            },
            Some("") => count(std::slice::from_ref(&l.account), None),
            Some(u) => count(&leaf_accounts, Some(u)),
        };
        l.running = running;
        l.pending = pending;
    }
}
