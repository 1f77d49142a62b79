use super::*;

fn errors(text: &str) -> Vec<ConfigError> {
    Config::from_toml_str(text).unwrap_err().0
}

fn message(text: &str) -> String {
    Config::from_toml_str(text).unwrap_err().to_string()
}

#[test]
fn the_example_config_loads() {
    let c = Config::from_toml_str(include_str!("../../../examples/allot.toml")).unwrap();
    assert_eq!(c.window, 7 * 86_400);
    assert_eq!(c.capacity_gpus, Some(16));
    assert_eq!(c.contract.default_min_runtime, 3600);
    assert_eq!(c.contract.max_min_runtime, 8 * 3600);
    assert_eq!(c.contract.partition_default.get("debug"), Some(&0));
    assert_eq!(c.sync_interval, 60);
    assert_eq!(c.tree.leaves().len(), 5);
    let a1 = c.tree.node(c.tree.find("nlp.a1").unwrap());
    assert_eq!(a1.accounts, ["a1", "a1-interactive"]);
    assert!((a1.allocation - 0.35).abs() < 1e-12);
    assert_eq!(c.tree.leaf_of_account("a1-interactive"), a1.leaf);
    let vision = c.tree.node(c.tree.find("perception.vision").unwrap());
    assert!((vision.allocation - 0.08).abs() < 1e-12);
}

#[test]
fn the_issue_shape_loads_with_defaults() {
    let c = Config::from_toml_str(
        r#"
        window = "7-0"
        capacity_gpus = 64
        [charge]
        "gres/gpu" = 1.0
        [contract]
        default_min_runtime = "1:00:00"
        max_min_runtime = "8:00:00"
        charge_min_runtime = true
        [tree.nlp]
        share = 60
        [tree.nlp.a1]
        share = 35
        accounts = ["a1", "a1-interactive"]
        [tree.nlp.a2]
        share = 25
        [tree.vision]
        share = 40
        "#,
    )
    .unwrap();
    assert_eq!(c.tree.leaves().len(), 3);
    assert_eq!(c.priority, PriorityWeights::default());
    assert_eq!(c.ledger_path, DEFAULT_LEDGER_PATH);
    let minimal = Config::from_toml_str("[tree.x]\nshare = 1").unwrap();
    assert_eq!(minimal.window, DEFAULT_WINDOW);
    assert_eq!(minimal.charge, ChargeWeights::default());
}

#[test]
fn negative_share_names_the_node_and_the_fix() {
    let m = message("[tree.nlp]\nshare = 60\n[tree.nlp.a2]\nshare = -3\n[tree.nlp.a1]\nshare = 1");
    assert_eq!(
        m,
        "tree.nlp.a2: share cannot be negative (found -3); give a whole number > 0 relative to its siblings, or 0 for a node that should never be served"
    );
}

#[test]
fn share_missing_fractional_or_all_zero() {
    assert_eq!(
        errors("[tree.x]\naccounts = [\"x\"]"),
        vec![ConfigError::ShareMissing {
            path: "tree.x".into()
        }]
    );
    assert!(message("[tree.x]\nshare = 2.5")
        .contains("tree.x: share must be a whole number (found 2.5)"));
    assert!(message("[tree.x]\nshare = \"big\"").contains("whole number"));
    assert_eq!(
        errors("[tree.x]\nshare = 0\n[tree.y]\nshare = 0"),
        vec![ConfigError::AllSharesZero {
            path: "tree".into()
        }]
    );
    assert!(message("[tree.x]\nshare = 1\n[tree.x.k]\nshare = 0")
        .starts_with("tree.x: every child has share 0"));
    assert!(Config::from_toml_str("[tree.x]\nshare = 3.0").is_ok());
}

#[test]
fn window_zero_is_rejected() {
    assert_eq!(
        errors("window = \"0\"\n[tree.x]\nshare = 1"),
        vec![ConfigError::WindowZero]
    );
    assert_eq!(
        errors("window = \"0:00:00\"\n[tree.x]\nshare = 1"),
        vec![ConfigError::WindowZero]
    );
}

#[test]
fn unparsable_durations_say_what_to_write() {
    let m = message("window = \"7d\"\n[tree.x]\nshare = 1");
    assert!(m.starts_with("window: invalid Slurm time \"7d\""), "{m}");
    assert!(m.contains("d-hh"), "{m}");
    let m = message("[contract]\nmax_min_runtime = 8\n[tree.x]\nshare = 1");
    assert!(
        m.contains("contract.max_min_runtime: expected a Slurm time string")
            && m.contains("integer 8"),
        "{m}"
    );
}

#[test]
fn min_above_max_is_rejected() {
    let m = message("[contract]\ndefault_min_runtime = \"9:00:00\"\n[tree.x]\nshare = 1");
    assert!(m.contains("contract.default_min_runtime: 09:00:00 is longer than contract.max_min_runtime (08:00:00)"), "{m}");
    let m = message(
        "[contract]\nmax_min_runtime = \"2:00:00\"\n[contract.partition.long]\ndefault_min_runtime = \"4:00:00\"\n[tree.x]\nshare = 1",
    );
    assert!(
        m.contains("contract.partition.long.default_min_runtime"),
        "{m}"
    );
}

#[test]
fn duplicate_accounts_name_both_leaves() {
    let m =
        message("[tree.x]\nshare = 1\naccounts = [\"a\"]\n[tree.y]\nshare = 1\naccounts = [\"a\"]");
    assert!(
        m.contains("\"a\" is in two leaves, tree.x and tree.y"),
        "{m}"
    );
    // A node named like another leaf's account collides too.
    let m = message("[tree.x]\nshare = 1\naccounts = [\"y\"]\n[tree.y]\nshare = 1");
    assert!(m.contains("tree.x and tree.y"), "{m}");
}

#[test]
fn unknown_keys_are_errors_with_the_path() {
    let m = message("[tree.x]\nshare = 1\nshares = 2");
    assert!(m.starts_with("tree.x: unknown key `shares`"), "{m}");
    let m = message("windw = \"7-0\"\n[tree.x]\nshare = 1");
    assert!(m.contains("unknown field `windw`"), "{m}");
    let m = message("[contract]\ndefault = \"1\"\n[tree.x]\nshare = 1");
    assert!(m.contains("unknown field `default`"), "{m}");
    let m = message("[contract.partition.debug]\nmax = \"1\"\n[tree.x]\nshare = 1");
    assert!(m.contains("unknown field `max`"), "{m}");
    let m = message("[tree]\nshare = 3\n[tree.x]\nshare = 1");
    assert!(m.contains("tree.share: the root takes no keys"), "{m}");
}

#[test]
fn empty_subtrees_and_accounts() {
    assert_eq!(errors("window = \"7-0\""), vec![ConfigError::EmptyTree]);
    assert_eq!(errors("[tree]"), vec![ConfigError::EmptyTree]);
    assert_eq!(
        errors("[tree.x]\nshare = 1\naccounts = []"),
        vec![ConfigError::EmptyAccounts {
            path: "tree.x".into()
        }]
    );
    assert!(
        message("[tree.x]\nshare = 1\naccounts = [\"x\"]\n[tree.x.y]\nshare = 1")
            .contains("tree.x: a node with children")
    );
    assert!(message("[tree.x]\nshare = 1\naccounts = \"x\"")
        .contains("tree.x.accounts: expected a list"));
}

#[test]
fn every_error_is_reported_at_once() {
    let e = errors("window = \"0\"\n[contract]\nmax_min_runtime = \"x\"\n[tree.a]\nshare = -1\n[tree.b]\nfoo = 1\nshare = 1");
    assert_eq!(e.len(), 4, "{e:?}");
}

#[test]
fn other_ranges() {
    assert!(
        message("capacity_gpus = 0\n[tree.x]\nshare = 1").contains("capacity_gpus: must be > 0")
    );
    assert!(
        message("[priority]\nage_weight = 40000\n[tree.x]\nshare = 1")
            .contains("priority.age_weight")
    );
    assert!(
        message("[priority]\nmax_age = \"0\"\n[tree.x]\nshare = 1").contains("priority.max_age")
    );
    assert!(message("[sync]\ninterval = \"0\"\n[tree.x]\nshare = 1").contains("sync.interval"));
    assert!(
        message("[charge]\n\"gres/gpu\" = 0\n[tree.x]\nshare = 1").contains("every weight is 0")
    );
    assert!(message("[tree.x]\nshare = 2000000").contains("too large"));
    assert!(message("window = \"999999999-0\"\n[tree.x]\nshare = 1").contains("window: "));
    assert!(message("[ledger]\npath = \"\"\n[tree.x]\nshare = 1").contains("ledger.path: empty"));
    assert!(message("[charge]\n\"gres/gpus\" = 1\n[tree.x]\nshare = 1").contains("GPUs are"));
    assert!(message("[tree.x\nshare = 1").contains("TOML parse error"));
}

#[test]
fn sweeps_need_the_short_band() {
    let m = message("[priority]\nsweep_jobs = 16\n[tree.x]\nshare = 1");
    assert!(
        m.contains("priority.sweep_jobs") && m.contains("set short_max_gpus"),
        "{m}"
    );
    let m = message(
        "[priority]\nshort_max_gpus = 2\nsweep_jobs = 16\nsweep_window = \"0\"\n[tree.x]\nshare = 1",
    );
    assert!(
        m.contains("priority.sweep_window: must be longer than 0"),
        "{m}"
    );
    let c = Config::from_toml_str(
        "[priority]\nshort_max_gpus = 2\nsweep_jobs = 16\nsweep_window = \"1:00:00\"\n[tree.x]\nshare = 1",
    )
    .unwrap();
    assert_eq!((c.priority.sweep_jobs, c.priority.sweep_window), (16, 3600));
    // Off by default.
    let c = Config::from_toml_str("[tree.x]\nshare = 1").unwrap();
    assert_eq!(c.priority.sweep_jobs, 0);
}

#[test]
fn requeue_points_need_a_period_longer_than_the_window() {
    let c = Config::from_toml_str(
        "[contract]\nrequeue_period = \"30:00\"\nrequeue_window = \"5:00\"\n[tree.x]\nshare = 1",
    )
    .unwrap();
    assert_eq!(
        (c.contract.requeue.period, c.contract.requeue.window),
        (1800, 300)
    );
    let off = Config::from_toml_str("[tree.x]\nshare = 1").unwrap();
    assert_eq!(off.contract.requeue.period, 0);
    let m = message("[contract]\nrequeue_window = \"5:00\"\n[tree.x]\nshare = 1");
    assert!(
        m.contains("contract.requeue_window: requeue_window needs requeue_period"),
        "{m}"
    );
    for (period, window) in [("30:00", "30:00"), ("30:00", "0"), ("5:00", "10:00")] {
        let m = message(&format!(
            "[contract]\nrequeue_period = \"{period}\"\nrequeue_window = \"{window}\"\n[tree.x]\nshare = 1"
        ));
        assert!(
            m.contains(
                "contract.requeue_window: must be longer than 0 and shorter than requeue_period"
            ),
            "{m}"
        );
    }
    let m = message("[contract]\nrequeue_period = 30\n[tree.x]\nshare = 1");
    assert!(
        m.contains("contract.requeue_period: expected a Slurm time string"),
        "{m}"
    );
}

#[test]
fn the_lane_is_gone_and_the_requeue_bound() {
    let c = Config::from_toml_str(
        "[priority]\nshort_max_gpus = 2\n[contract]\nmax_requeues = 5\n[tree.x]\nshare = 1",
    )
    .unwrap();
    assert_eq!(c.contract.max_requeues, 5);
    let d = Config::from_toml_str("[tree.x]\nshare = 1").unwrap();
    assert_eq!(d.contract.max_requeues, 3);
    // The debug lane's keys name themselves and say to delete the line.
    for (section, key) in [
        ("priority", "short_allowance = 8"),
        ("priority", "short_yield = \"4:00\""),
        ("preempt", "short_wait = \"3:00\""),
    ] {
        let m = message(&format!("[{section}]\n{key}\n[tree.x]\nshare = 1"));
        let name = key.split(' ').next().unwrap();
        assert!(
            m.contains(&format!("{section}.{name}: is gone")) && m.contains("delete the line"),
            "{m}"
        );
    }
    for bad in ["-1", "\"3\"", "1.5"] {
        let m = message(&format!(
            "[contract]\nmax_requeues = {bad}\n[tree.x]\nshare = 1"
        ));
        assert!(
            m.contains("contract.max_requeues") && m.contains("max_requeues = 3"),
            "{m}"
        );
    }
    // Every problem at once.
    let e = errors("window = \"0\"\n[contract]\nmax_requeues = -1\n[priority]\nshort_yield = \"4:00\"\n[tree.x]\nshare = 1");
    assert_eq!(e.len(), 3, "{e:?}");
}

#[test]
fn the_server_url_is_http_host_port() {
    let tree = "[tree.a]\nshare = 1\n";
    let c = Config::from_toml_str(&format!(
        "[server]\nurl = \"http://head:9817/\"\nmunge_socket = \"/run/m.sock\"\n{tree}"
    ))
    .unwrap();
    assert_eq!(c.server_url.as_deref(), Some("http://head:9817"));
    assert_eq!(c.munge_socket.as_deref(), Some("/run/m.sock"));
    assert_eq!(Config::from_toml_str(tree).unwrap().server_url, None);
    for bad in [
        "https://head:9817",
        "http://head",
        "http://head:0",
        "http://head:9817/api",
        "head:9817",
        "http://exa mple:9817",
        "http://user:pw@head:9817",
        "http://head:9817#f",
    ] {
        let m = message(&format!("[server]\nurl = \"{bad}\"\n{tree}"));
        assert!(
            m.contains("server.url") && m.contains("http://HOST:PORT"),
            "{bad}: {m}"
        );
    }
    assert!(
        message(&format!("[server]\nmunge_socket = \"\"\n{tree}")).contains("server.munge_socket")
    );
}
