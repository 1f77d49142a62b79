//! The candidates of one pending job, judged together, as slurmctld asks
//! preempt/allot about them: one running job at a time.
//!
//! # Rule
//! slurmctld asks `preempt_p_preemptable(candidate, preemptor)` once per
//! running job in a *round* (one attempt to place the preemptor), then
//! preempts any subset of the candidates allowed. Rule 4 of
//! [`super::verdict`] bounds what the victims' leaves lose *together*, so
//! each candidate is judged beside those already allowed in its round
//! ([`Engine::decide_beside`]), and an allowed one joins them:
//! - a round is one preemptor and one engine snapshot; the same preemptor
//!   asked again a second later keeps its round (a round may straddle a
//!   tick), and a candidate asked about again starts a new one (slurmctld
//!   asks once per running job in a round, and its backfill runs several
//!   rounds for one job in a second): the victims allowed so far are
//!   forgotten;
//! - which allowed victims count together: slurmctld (select/cons_tres)
//!   preempts only jobs on the nodes the preemptor starts on, so for a
//!   one-node preemptor a candidate on one node is judged beside that
//!   node's allowed victims and those spanning several nodes, and a
//!   spanning one beside every node's. Asked in job-list order, a
//!   round-robin layout would otherwise spend the allowance on jobs of
//!   different nodes and let the preemptor fit nowhere. A preemptor of
//!   several nodes is judged beside every victim of its round;
//! - the load a round is judged on is the leaves' running and pending GPUs
//!   counted from the job list (every second in the plugin), plus every
//!   preemptor allowed since: its GPUs count as running on its leaf, since
//!   its victims are still completing and it is not running yet. A
//!   preemptor already counted is judged without its own move.
//!
//! # Termination
//! Whatever subset of a round's allowed candidates slurmctld takes, the
//! victims' leaves lose together no more than rule 4 lets them
//! ([`VictimTally`] is conservative: a candidate allowed early counts even
//! if slurmctld then takes another), so every preemption is one
//! [`Engine::choose_victims`] could have made and the argument of
//! [`super::verdict`] (what strictly increases) holds for the plugin too.

use std::collections::{HashMap, HashSet};

use super::grounds::{Decision, Grounds};
use super::{Preemptor, RunningJob, Verdict, VictimTally};
use crate::engine::Engine;
use crate::entitlement::Entitlements;

/// Which allowed victims a candidate is judged beside, for a preemptor of
/// `preemptor_nodes` nodes and a candidate running on one node `N` (a node
/// name for the plugin, a node index for the simulator) or on several.
/// The plugin judges each candidate by it ([`Round`]); the simulator's
/// per-node victim budget (`[sim] victim_budget = "node"`) walks its
/// candidates by it, so both count the same victims together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope<N> {
    /// A preemptor of several nodes: beside every victim of the round.
    All,
    /// A one-node preemptor, a candidate on this one node: beside that
    /// node's victims and the spanning ones.
    Node(N),
    /// A one-node preemptor, a candidate on several nodes (or unknown):
    /// beside each node's victims and the spanning ones, the worst deciding.
    Spanning,
}

impl<N> Scope<N> {
    /// The scope of a candidate on `one_node` (`None`: on several nodes,
    /// or unknown) for a preemptor of `preemptor_nodes` nodes.
    pub fn of_node(preemptor_nodes: u32, one_node: Option<N>) -> Scope<N> {
        if preemptor_nodes > 1 {
            return Scope::All;
        }
        match one_node {
            Some(node) => Scope::Node(node),
            None => Scope::Spanning,
        }
    }
}

impl<'n> Scope<&'n str> {
    /// The scope of a candidate running on `candidate_nodes`, Slurm's node
    /// list (`gpu03`, `gpu[01-02]`, `gpu01,gpu02`; `None` when unknown).
    pub fn of(preemptor_nodes: u32, candidate_nodes: Option<&'n str>) -> Scope<&'n str> {
        Scope::of_node(
            preemptor_nodes,
            candidate_nodes.filter(|n| !n.contains([',', '['])),
        )
    }
}

/// One round of candidates of one preemptor: the jobs asked about and the
/// victims allowed so far, by where they run (module doc).
#[derive(Debug, Clone, Default)]
pub struct Round {
    asked: HashSet<u64>,
    /// Several-node preemptor: all victims allowed.
    all: VictimTally,
    /// One-node preemptor: victims allowed on each node.
    per_node: HashMap<String, VictimTally>,
    /// One-node preemptor: victims allowed that span several nodes.
    spanning: VictimTally,
}

impl Round {
    /// Forgets every candidate asked about and every victim allowed.
    pub fn clear(&mut self) {
        self.asked.clear();
        self.all.clear();
        self.per_node.clear();
        self.spanning.clear();
    }

    /// Notes that `candidate` is asked about; one asked already starts a
    /// new round first.
    pub fn ask(&mut self, candidate: u64) {
        if !self.asked.insert(candidate) {
            self.clear();
            self.asked.insert(candidate);
        }
    }

    /// `r`'s verdict beside the victims allowed in this round (it holds
    /// `gpus` GPUs in total and runs on `nodes`, Slurm's node list), with
    /// the clause that allowed it and the covered entitlement the victims'
    /// leaves lose together ([`Decision`]; for a candidate spanning nodes,
    /// the most any node's victims lose); an allowed one joins them.
    #[allow(clippy::too_many_arguments)]
    pub fn decide(
        &mut self,
        engine: &Engine,
        p: &Preemptor<'_>,
        r: &RunningJob<'_>,
        gpus: u64,
        nodes: Option<&str>,
        load: &Entitlements,
        now: u64,
    ) -> Decision {
        let scope = Scope::of(p.nodes, nodes);
        let decision = match scope {
            Scope::All => engine.decide_beside(p, r, gpus, &self.all, load, now),
            Scope::Node(node) => {
                let beside = match self.per_node.get(node) {
                    Some(here) => here.with(&self.spanning),
                    None => self.spanning.clone(),
                };
                engine.decide_beside(p, r, gpus, &beside, load, now)
            }
            Scope::Spanning => {
                // Beside every node's victims: the worst of them decides.
                let mut worst = engine.decide_beside(p, r, gpus, &self.spanning, load, now);
                for t in self.per_node.values() {
                    let d = engine.decide_beside(p, r, gpus, &t.with(&self.spanning), load, now);
                    if d.verdict != Verdict::Allowed {
                        worst = d;
                        break;
                    }
                    worst.lost = worst.lost.max(d.lost);
                }
                worst
            }
        };
        if let Some(leaf) = decision.charged {
            match scope {
                Scope::All => self.all.add(leaf, gpus),
                Scope::Node(node) => self
                    .per_node
                    .entry(node.to_owned())
                    .or_default()
                    .add(leaf, gpus),
                Scope::Spanning => self.spanning.add(leaf, gpus),
            }
        }
        decision
    }
}

/// What preempt/allot holds between calls: the live load, the preemptors
/// allowed since it was counted, and the current round (module doc).
#[derive(Debug, Clone, Default)]
pub struct Rounds {
    load: Option<Entitlements>,
    /// Preemptors allowed since the load was counted, and their GPUs.
    counted: HashMap<u64, u64>,
    /// The round's preemptor and engine snapshot (any id that changes with
    /// the snapshot).
    key: Option<(u64, usize)>,
    round: Round,
}

/// A candidate as slurmctld asks about it, for [`Rounds::judge`].
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a, 'r> {
    /// Its Slurm job id.
    pub id: u64,
    /// The running job as the engine sees it.
    pub job: &'r RunningJob<'a>,
    /// GPUs it holds on all nodes (at least 1).
    pub gpus: u64,
    /// Its node list (`gpu03`, `gpu[01-02]`), `None` if unknown.
    pub nodes: Option<&'r str>,
}

impl Rounds {
    /// A freshly counted load: the preemptors allowed before are in it.
    pub fn set_load(&mut self, load: Entitlements) {
        self.load = Some(load);
        self.counted.clear();
    }

    /// True once a load has been counted (before that nothing is allowed).
    pub fn has_load(&self) -> bool {
        self.load.is_some()
    }

    /// Notes the round of preemptor `preemptor` (Slurm job id) on engine
    /// snapshot `snapshot`: another preemptor or snapshot starts a new one.
    pub fn enter(&mut self, preemptor: u64, snapshot: usize) {
        if self.key != Some((preemptor, snapshot)) {
            self.round.clear();
            self.key = Some((preemptor, snapshot));
        }
    }

    /// May preemptor `id` (`p`, wanting `p_gpus` GPUs in total) preempt
    /// candidate `c` at `now` (epoch seconds)? Judged on the live load
    /// without the preemptor's own move and beside the round's allowed
    /// victims; an allowed preemptor's GPUs then count on its leaf. With
    /// the verdict, for an allowed candidate, the clause and the figures
    /// it was judged on ([`Grounds`]: the load as judged). `None` before a
    /// load was counted. Call [`Rounds::enter`] first.
    pub fn judge(
        &mut self,
        engine: &Engine,
        id: u64,
        p: &Preemptor<'_>,
        p_gpus: u64,
        c: Candidate<'_, '_>,
        now: u64,
    ) -> Option<(Verdict, Option<Grounds>)> {
        let load = self.load.as_mut()?;
        self.round.ask(c.id);
        let leaf = engine.leaf_of(p.account);
        let already = self.counted.get(&id).copied();
        if let (Some(l), Some(g)) = (leaf, already) {
            load.shift(l, -(g as i64));
        }
        let d = self
            .round
            .decide(engine, p, c.job, c.gpus, c.nodes, load, now);
        let grounds = d
            .rule
            .and_then(|rule| engine.grounds(rule, d.lost, p, c.job, c.gpus, load, now));
        match (leaf, already) {
            (Some(l), Some(g)) => load.shift(l, g as i64),
            (Some(l), None) if d.verdict == Verdict::Allowed => {
                load.shift(l, p_gpus as i64);
                self.counted.insert(id, p_gpus);
            }
            _ => {}
        }
        Some((d.verdict, grounds))
    }
}

#[cfg(test)]
mod tests;
