//! What a viewer may see: Slurm's `PrivateData` applied to the sidecar's
//! pages, its API and, through it, users' `allot` commands
//! (docs/researchers.md, "Privacy").
//!
//! The rule, flag by flag, for anyone who is not an admin (root,
//! SlurmUser, or AdminLevel Operator or Administrator in slurmdbd):
//! - `jobs`: a job is shown only to its owner (`squeue` shows other users'
//!   jobs to nobody else either);
//! - `usage`: usage figures only of the viewer's own associations: the
//!   budget report keeps the lines of the org-tree nodes above the
//!   viewer's accounts and drops the others; a job of another account is
//!   refused, and a preemption record keeps its rule and preemptor's job
//!   but not the figures (they are other leaves' usage);
//! - `accounts`: the same lines and jobs hidden (their names are account
//!   definitions), and another account's name in a record reads
//!   `(hidden)`;
//! - `users`: other users' lines of `--users` and their names are dropped.
//!
//! An anonymous viewer (a browser: it cannot present a munge credential)
//! has no account and owns no job, so each flag set hides all it covers.
//! Stricter than Slurm in one way: an account coordinator sees what any
//! member sees, not its members' private jobs.

use std::collections::{BTreeMap, BTreeSet};

use fairshare::Tree;

use super::auth::Identity;
use crate::explain::Output;
use crate::reports::budget::{self, subtree_accounts, Report};
pub use crate::slurm::scontrol::PrivateData;

/// What slurmctld and slurmdbd say about users, read once a pass.
#[derive(Debug, Clone, Default)]
pub struct SlurmUsers {
    /// `PrivateData`.
    pub private: PrivateData,
    /// Admins: SlurmUser and root, and AdminLevel Operator or Administrator.
    pub admins: BTreeSet<String>,
    /// Each user's accounts (their associations).
    pub accounts: BTreeMap<String, BTreeSet<String>>,
}

/// The viewer of one request.
#[derive(Debug, Clone)]
pub struct Viewer {
    /// Who it is.
    pub who: Identity,
    /// Sees everything.
    pub admin: bool,
    /// Its accounts.
    pub accounts: BTreeSet<String>,
    /// The site's flags.
    pub private: PrivateData,
}

/// Shown for a name the viewer may not see.
pub const HIDDEN: &str = "(hidden)";

impl Viewer {
    /// The viewer `who`, with what `users` says of it.
    pub fn new(who: Identity, users: &SlurmUsers) -> Viewer {
        let (admin, accounts) = match who.name() {
            Some(n) => (
                users.admins.contains(n),
                users.accounts.get(n).cloned().unwrap_or_default(),
            ),
            None => (false, BTreeSet::new()),
        };
        Viewer {
            who,
            admin,
            accounts,
            private: users.private,
        }
    }

    /// Everything, to everyone (no flag, or an admin).
    fn sees_all(&self) -> bool {
        self.admin || self.private == PrivateData::default()
    }

    fn owns(&self, user: &str) -> bool {
        self.who.name() == Some(user)
    }

    fn in_account(&self, account: &str) -> bool {
        self.accounts.contains(account)
    }

    /// Whether this viewer may see job `o`; `Err` says which flag hides it.
    ///
    /// # Errors
    /// The `PrivateData` flag that hides the job from this viewer.
    pub fn may_see_job(&self, o: &Output) -> Result<(), String> {
        if self.sees_all() || self.owns(&o.user) {
            return Ok(());
        }
        let who = self.who.name().map_or(
            "an anonymous viewer (no munge credential)".to_string(),
            |n| format!("user {n}"),
        );
        if self.private.jobs {
            return Err(match self.who.name() {
                Some(_) => format!(
                    "PrivateData=jobs: job {} belongs to another user, and {who} sees only their own jobs",
                    o.job_id
                ),
                None => format!(
                    "PrivateData=jobs: job {} is shown only to its owner, and {who} owns none; run `allot explain {}` on a login node",
                    o.job_id, o.job_id
                ),
            });
        }
        if (self.private.usage || self.private.accounts) && !self.in_account(&o.explanation.account)
        {
            return Err(format!(
                "PrivateData={}: job {} is of an account {who} is not in",
                self.private.describe(),
                o.job_id
            ));
        }
        Ok(())
    }

    /// `o` as this viewer may see it (after [`Viewer::may_see_job`]).
    pub fn redact_job(&self, mut o: Output) -> Output {
        if self.sees_all() {
            return o;
        }
        for r in &mut o.requeues {
            if self.private.accounts {
                let accounts = r
                    .preemptor_account
                    .iter_mut()
                    .chain(r.guessed_preemptor.iter_mut().map(|g| &mut g.account));
                for a in accounts.filter(|a| !self.accounts.contains(a.as_str())) {
                    *a = HIDDEN.into();
                }
            }
            if self.private.usage || self.private.accounts {
                r.grounds = None;
            }
        }
        if self.private.users && !self.owns(&o.user) {
            o.user = HIDDEN.into();
            if let Some(l) = &mut o.live {
                l.user = HIDDEN.into();
            }
        }
        o
    }

    /// Forecast `f` of a job this viewer may see, as it may see it: under
    /// `jobs`, without the counts of other users' jobs behind it (0), which
    /// squeue would not show it; its job's times stay.
    pub fn redact_forecast(
        &self,
        mut f: allot_sim::forecast::live::LiveForecast,
    ) -> allot_sim::forecast::live::LiveForecast {
        if !self.sees_all() && self.private.jobs {
            f.running = 0;
            f.pending = 0;
            f.history_jobs = 0;
            f.outlived_history = 0;
        }
        f
    }

    /// `r` (built over `tree`) as this viewer may see it: under `usage` or
    /// `accounts`, only the lines of the nodes above its accounts (and
    /// those accounts' lines outside the tree); under `users`, only its
    /// own user lines. The totals are the cluster's and stay.
    pub fn redact_report(&self, tree: &Tree, mut r: Report) -> Report {
        if self.sees_all() {
            return r;
        }
        let by_line = budget::node_order(tree);
        let hide_lines = self.private.usage || self.private.accounts;
        let mut keep = Vec::with_capacity(r.lines.len());
        let mut node_lines = 0usize;
        let mut last_node_visible = true;
        for l in r.lines.drain(..) {
            let visible = match (&l.user, by_line.get(node_lines)) {
                // A node of the tree.
                (None, Some(id)) => {
                    node_lines += 1;
                    let mine = subtree_accounts(tree, *id)
                        .iter()
                        .any(|a| self.in_account(a));
                    last_node_visible = !hide_lines || mine;
                    last_node_visible
                }
                // The "(not in allot.toml)" line.
                (None, None) => {
                    last_node_visible = !hide_lines;
                    last_node_visible
                }
                // A user line under a leaf (or an account outside the tree,
                // with an empty user).
                (Some(u), _) => {
                    let account_ok = if u.is_empty() {
                        !hide_lines || self.in_account(&l.account)
                    } else {
                        last_node_visible
                    };
                    account_ok && (u.is_empty() || !self.private.users || self.owns(u))
                }
            };
            if visible {
                keep.push(l);
            }
        }
        r.lines = keep;
        r
    }
}
