//! A site over a small real ledger, without Slurm: for the unit tests of
//! the routes and the `site` fuzz target (tests/fuzz). Not part of the
//! sidecar.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use allot_ledger::charge::Charging;
use allot_ledger::preemptions::Preemption;
use allot_ledger::Ledger;
use fairshare::preempt::{Grounds, Rule};
use fairshare::Config;

use super::privacy::{PrivateData, SlurmUsers};
use super::site::Site;
use super::snapshot::Snapshot;
use crate::explain;
use crate::reports::{budget, budget_page};
use crate::slurm::squeue::LiveJob;

/// When the fixture's snapshot is taken (epoch s).
pub const NOW: i64 = 10_000;

/// Job 7 (a1, alice; task 6_1 of an array in slurmctld) was preempted at 1000 by job 8 (b1, bob) under
/// `free_tier` and is pending again; job 9 (b2, carol) ended.
const DUMP: &str =
    "JobID|JobIDRaw|Account|User|Partition|AllocTRES|Submit|Start|End|Elapsed|State|AdminComment\n\
    7|7|a1|alice|gpu|gres/gpu=4|100|100|1000|00:15:00|PREEMPTED|\n\
    7|7|a1|alice|gpu|gres/gpu=4|1001|Unknown|Unknown|00:00:00|PENDING|\n\
    8|8|b1|bob|gpu|gres/gpu=4|900|1010|5000|01:06:30|COMPLETED|\n\
    9|9|b2|carol|gpu|gres/gpu=4|2900|3010|5000|00:33:10|COMPLETED|\n";

/// A fresh directory `allot-NAME-PID` under the temporary directory, with
/// the fixture's ledger in it: its path.
///
/// # Panics
/// On any file or ledger error (a fixture).
pub fn temp_ledger(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("allot-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("fixture directory");
    let path = dir.join("ledger.sqlite");
    write_ledger(&path);
    path
}

/// A ledger at `path` (which must not exist) holding the attempts of
/// `dump` (a `sacct --parsable2` dump with its header, UTC times), charged
/// with the default contract and weights.
///
/// # Panics
/// On any ledger error (a fixture).
pub fn ledger_of_dump(path: &Path, dump: &str) -> Ledger {
    let mut ledger = Ledger::open(path).expect("fixture ledger");
    let charging = Charging::new(fairshare::ContractPolicy::default(), Default::default());
    crate::sidecar::sync::import_dump(
        &mut ledger,
        &charging,
        dump.as_bytes(),
        jiff::tz::TimeZone::UTC,
        100,
    )
    .expect("fixture dump");
    ledger
}

/// Writes the fixture's ledger at `path` (which must not exist).
///
/// # Panics
/// On any ledger error (a fixture).
pub fn write_ledger(path: &Path) {
    ledger_of_dump(path, DUMP)
        .record_preemption(&Preemption::new(
            1000,
            (7, "a1"),
            (8, "b1"),
            &Grounds::example(Rule::FreeTier, "tree.perception.b1", "tree.nlp.a1"),
        ))
        .expect("fixture record");
}

/// The site over the ledger at `ledger` (from [`write_ledger`]) with
/// examples/allot.toml, `private` and job 7 pending in slurmctld under
/// the name `name`, as alice.
///
/// # Panics
/// On any ledger error (a fixture).
pub fn site(ledger: &Path, private: PrivateData, name: &str) -> Arc<Site> {
    site_of(ledger, private, name, false)
}

/// [`site`] making start forecasts, from no history on 2 nodes x 8 GPUs.
///
/// # Panics
/// As [`site`].
pub fn site_with_forecasts(ledger: &Path, private: PrivateData, name: &str) -> Arc<Site> {
    site_of(ledger, private, name, true)
}

fn site_of(ledger: &Path, private: PrivateData, name: &str, forecasts: bool) -> Arc<Site> {
    let config = Arc::new(
        Config::from_toml_str(include_str!("../../../examples/allot.toml")).expect("example"),
    );
    let reader = allot_ledger::LedgerReader::open(ledger).expect("fixture reader");
    let mut jobs = BTreeMap::new();
    jobs.insert(
        7,
        LiveJob {
            name: name.to_string(),
            state: "PENDING".into(),
            account: "a1".into(),
            user: "alice".into(),
            partition: "gpu".into(),
            submit: 1001,
            eligible: 1001,
            restarts: 1,
            gpus: 4,
            array: Some((6, 1)),
            ..LiveJob::default()
        },
    );
    let accounts = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    let users = SlurmUsers {
        private,
        admins: ["root".to_string(), "slurm".to_string()].into(),
        accounts: [
            ("alice".to_string(), accounts(&["a1"])),
            ("bob".to_string(), accounts(&["b1"])),
            ("carol".to_string(), accounts(&["b2"])),
        ]
        .into(),
    };
    let site = Site::new(
        ledger.to_path_buf(),
        None,
        None,
        forecasts.then(allot_sim::SimSettings::default),
    );
    // No sacct here: the history is empty, the cluster 2 x 8 GPUs.
    site.install_forecast_inputs(crate::forecast::Inputs {
        at: NOW,
        nodes_at: NOW,
        history: Default::default(),
        cluster: allot_sim::ClusterSpec {
            nodes: 2,
            gpus_per_node: 8,
        },
        draining: 0,
    });
    site.install(Snapshot {
        at: NOW,
        engine: explain::engine_now(&config, &reader, NOW, Some(&jobs)).expect("engine"),
        report: budget::build(&reader, config.clone(), 16, NOW - 86_400, NOW, true)
            .expect("report"),
        daily: budget_page::daily(&reader, &config, NOW, 2).expect("daily"),
        config,
        jobs,
        users,
    });
    site
}
