//! `allot tree plan|apply|import` against the testbed's slurmdbd, and
//! `allot explain` on a job that preempt/allot requeued (issue 5), with the
//! preemptor and the rule preempt/allot recorded (issue 40).

use std::time::Duration;

use allot_e2e::{exclusive, serial, Testbed, B1_OVER_SERVED};
use fairshare::Config;

fn allot(tb: &Testbed, args: &[&str]) -> String {
    let conf = tb.allot_conf();
    let mut all: Vec<&str> = args.to_vec();
    if args[0] != "tree" || args[1] != "import" {
        all.extend_from_slice(&["--config", conf.to_str().unwrap()]);
    }
    tb.ok(tb.allot_bin().to_str().unwrap(), &all)
}

/// (path, share, sorted accounts) of every node.
fn shape(c: &Config) -> Vec<(String, u32, Vec<String>)> {
    let mut v: Vec<_> = c
        .tree
        .nodes()
        .iter()
        .map(|n| {
            let mut a = n.accounts.clone();
            a.sort();
            (n.path.clone(), n.share, a)
        })
        .collect();
    v.sort();
    v
}

#[test]
fn tree_apply_then_plan_is_empty_and_import_round_trips() {
    let _one = serial();
    let tb = Testbed::from_env();
    allot(&tb, &["tree", "apply"]);
    let plan = allot(&tb, &["tree", "plan"]);
    assert!(plan.contains("No changes"), "{plan}");
    // slurmdbd now holds allot's shares: sshare's RawShares column.
    let raw = tb.ok(
        "sshare",
        &[
            "-P",
            "-n",
            "-A",
            "nlp,a1,b2",
            "-o",
            "Account,User,RawShares",
        ],
    );
    for (acct, share) in [("nlp", "60"), ("a1", "35"), ("b2", "16")] {
        assert!(
            raw.lines()
                .any(|l| l.trim_start() == format!("{acct}||{share}")),
            "{acct} {share} in\n{raw}"
        );
    }
    let imported = allot(&tb, &["tree", "import"]);
    let back = Config::from_toml_str(&imported).unwrap_or_else(|e| panic!("{e}\n{imported}"));
    let original =
        Config::from_toml_str(&std::fs::read_to_string(tb.allot_conf()).unwrap()).unwrap();
    let got = shape(&back);
    for node in shape(&original) {
        assert!(
            got.contains(&node),
            "{node:?} missing from the import:\n{imported}"
        );
    }
}

#[test]
fn explain_names_the_preemptor_of_a_requeued_job() {
    let (_one, tb) = exclusive(B1_OVER_SERVED);
    // Four quarters of the cluster.
    let victims = tb.run_quarters("b1", &["0:05"; 4]);
    let b2 = tb.sbatch_quarter("b2", "0:01");
    tb.wait_state(b2, "RUNNING", Duration::from_secs(60));
    let requeued = allot_e2e::wait_until(
        Duration::from_secs(30),
        "the requeued attempt in sacct",
        || {
            victims
                .iter()
                .copied()
                .find(|j| tb.sacct(*j, "State").iter().any(|r| r[0] == "PREEMPTED"))
                .ok_or_else(|| "no PREEMPTED attempt yet".to_string())
        },
    );
    allot(&tb, &["sync"]);
    // preempt/allot recorded the preemption: the preemptor and the rule,
    // not a guess.
    let out = allot(&tb, &["explain", &requeued.to_string(), "--no-forecast"]);
    assert!(
        out.contains(&format!("preempted for job {b2} of account b2 (")),
        "{out}"
    );
    assert!(out.contains("rule net_gain"), "{out}");
    assert!(!out.contains("guessed"), "{out}");
    assert!(out.contains("account b1"), "{out}");
    let json = allot(
        &tb,
        &["explain", &requeued.to_string(), "--json", "--no-forecast"],
    );
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let r = &v["requeues"][0];
    assert_eq!(r["preempted_by"], u64::from(b2), "{json}");
    assert_eq!(r["preemptor_account"], "b2", "{json}");
    assert_eq!(r["rule"], "net_gain", "{json}");
    assert_eq!(
        r["grounds"]["victim_leaf"]["leaf"], "tree.perception.b1",
        "{json}"
    );
    assert!(r["guessed_preemptor"].is_null(), "{json}");
    let out = allot(&tb, &["explain", &b2.to_string(), "--no-forecast"]);
    assert!(
        out.contains("(RUNNING)") && out.contains("Contract: minimum runtime 00:00:01"),
        "{out}"
    );
    tb.cancel_all();
}
