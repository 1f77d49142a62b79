//! Tests of the `[sim]` settings: each key's value and its errors.

use super::*;
use crate::testutil::TWO_TEAMS;

/// The `[sim]` settings of `text`, which must be valid.
fn settings(text: &str) -> Result<SimSettings, ConfigErrors> {
    from_toml_str(text).map(|(_, s)| s)
}

/// The errors of `text`, which must be refused.
fn message(text: &str) -> String {
    from_toml_str(text).unwrap_err().to_string()
}
#[test]
fn sim_accounts_map_trace_names_lower_cased() {
    let c = settings("[tree.prod]\nshare = 1\n[sim.accounts]\nLS = \"prod\"\n\"*\" = \"prod\"\n")
        .unwrap();
    let pairs: Vec<(&str, &str)> = c
        .accounts
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(pairs, [("*", "prod"), ("ls", "prod")]);
    let e = message("[tree.prod]\nshare = 1\n[sim.accounts]\nls = \"Prod\"\n");
    assert!(e.contains("sim.accounts.ls"), "{e}");
    assert!(e.contains("lower case"), "{e}");
    // Onto an account the tree lacks: named, with the tree's accounts.
    let e = message("[tree.prod]\nshare = 1\n[sim.accounts]\nzzz = \"nosuch\"\n");
    assert!(
        e.contains("sim.accounts.zzz: \"nosuch\" is not an account of the tree (prod)"),
        "{e}"
    );
}

#[test]
fn a_rule_naming_an_account_the_tree_lacks_is_refused() {
    let e = message(&format!(
        "{TWO_TEAMS}\n[[sim.rule]]\nteams = [\"t1\", \"nosuch\"]\nmin_runtime = \"0\"\n"
    ));
    assert!(
        e.contains("sim.rule[0].teams: \"nosuch\" is not an account of the tree (t1, t2)"),
        "{e}"
    );
}

#[test]
fn sim_requeue_delay_is_a_duration() {
    let c = settings("[tree.x]\nshare = 1\n[sim]\nrequeue_delay = \"0:11\"\n").unwrap();
    assert_eq!(c.requeue_delay, 11);
    let d = settings("[tree.x]\nshare = 1\n").unwrap();
    assert_eq!(d.requeue_delay, 0, "eligible at once unless set");
    let m = message("[tree.x]\nshare = 1\n[sim]\nrequeue_delay = 11\n");
    assert!(
        m.contains("sim.requeue_delay: expected a Slurm time string"),
        "{m}"
    );
    let m = message("[tree.x]\nshare = 1\n[sim]\nrequeue_delay = \"11s\"\n");
    assert!(
        m.starts_with("sim.requeue_delay: invalid Slurm time"),
        "{m}"
    );
}

#[test]
fn sim_backfill_reserve_and_preempt_are_first_or_all() {
    let c = settings(
        "[tree.x]\nshare = 1\n[sim]\nbackfill_reserve = \"all\"\nbackfill_preempt = \"all\"\n",
    )
    .unwrap();
    assert_eq!(c.backfill_reserve, BackfillReserve::All);
    assert_eq!(c.backfill_preempt, BackfillPreempt::All);
    let d = settings("[tree.x]\nshare = 1\n").unwrap();
    assert_eq!(d.backfill_reserve, BackfillReserve::First);
    assert_eq!(d.backfill_preempt, BackfillPreempt::First);
    for key in ["backfill_reserve", "backfill_preempt"] {
        let m = message(&format!(
            "[tree.x]\nshare = 1\n[sim]\n{key} = \"conservative\"\n"
        ));
        assert!(
            m.contains(&format!("sim.{key}")) && m.contains("\"first\"") && m.contains("\"all\""),
            "{m}"
        );
    }
}

#[test]
fn sim_sched_and_resolution_offsets_need_their_interval_above_them() {
    let c = settings("[tree.x]\nshare = 1\n[sim]\nsched_interval = \"0:02\"\nsched_offset = 1\n")
        .unwrap();
    assert_eq!((c.sched_interval, c.sched_offset), (2, 1));
    for bad in [
        "sched_offset = 1\n",
        "sched_interval = \"0:02\"\nsched_offset = 2\n",
    ] {
        let m = message(&format!("[tree.x]\nshare = 1\n[sim]\n{bad}"));
        assert!(
            m.contains("sim.sched_offset") && m.contains("sched_interval"),
            "{m}"
        );
    }
    let m = message(
        "[tree.x]\nshare = 1\n[sim]\nbackfill_resolution = \"1:00\"\nresolution_offset = 60\n",
    );
    assert!(
        m.contains("sim.resolution_offset") && m.contains("backfill_resolution"),
        "{m}"
    );
}

#[test]
fn sim_typos_list_the_keys_once_and_a_single_rule_table_is_named() {
    let e = message("[tree.x]\nshare = 1\n[sim]\nclustr = \"2x8\"\n");
    assert!(
        e.contains("unknown field `clustr`; [sim] takes timing, cluster,"),
        "{e}"
    );
    assert!(!e.contains("expected one of"), "{e}");
    let e = message("[tree.x]\nshare = 1\n[sim]\nnode_cpus = 4\n");
    assert!(
        e.contains("sim.node_cpus: needs placement = \"cons_tres\""),
        "{e}"
    );
    assert!(
        settings("[tree.x]\nshare = 1\n[sim]\nplacement = \"cons_tres\"\nnode_cpus = 4\n").is_ok()
    );
    let e = message("[tree.x]\nshare = 1\n[sim.rule]\nmin_runtime = \"0\"\n");
    assert!(
        e.contains("sim.rule: is a single table; write each rule as [[sim.rule]]"),
        "{e}"
    );
}

#[test]
fn sim_placement_is_best_fit_or_cons_tres() {
    let c = settings("[tree.x]\nshare = 1\n[sim]\nplacement = \"cons_tres\"\n").unwrap();
    assert_eq!(c.placement, Placement::ConsTres);
    let d = settings("[tree.x]\nshare = 1\n").unwrap();
    assert_eq!(d.placement, Placement::BestFit);
    let m = message("[tree.x]\nshare = 1\n[sim]\nplacement = \"first_fit\"\n");
    assert!(
        m.contains("sim.placement") && m.contains("\"cons_tres\""),
        "{m}"
    );
}

#[test]
fn sim_section_errors_name_the_key() {
    let e = from_toml_str(&format!("{TWO_TEAMS}\n[sim]\nclustr = \"4x8\"\n")).unwrap_err();
    assert!(
        e.0[0]
            .to_string()
            .starts_with("sim: unknown field `clustr`"),
        "{}",
        e.0[0]
    );
    let e = from_toml_str(&format!("{TWO_TEAMS}\n[sim]\ncluster = \"4*8\"\n[[sim.rule]]\nmin_runtime = \"9:00:00\"\n[[sim.rule]]\nmax_gpus = 1\n"))
        .unwrap_err();
    let msgs: Vec<String> = e.0.iter().map(|e| e.to_string()).collect();
    assert!(
        msgs[0].starts_with("sim.cluster: cluster \"4*8\": write NODESxGPUS"),
        "{msgs:?}"
    );
    assert!(
        msgs[1].starts_with("sim.rule[0].min_runtime: 09:00:00 is longer than"),
        "{msgs:?}"
    );
    assert!(msgs[2].starts_with("sim.rule[1]: sets nothing"), "{msgs:?}");
    let e = from_toml_str(&format!("{TWO_TEAMS}\n[[sim.rule]]\nmin_gpus = 4\nmax_gpus = 1\nmin_duration = \"2:00:00\"\nmax_duration = \"1:00:00\"\nresumable = false\n"))
        .unwrap_err();
    let msgs: Vec<String> = e.0.iter().map(|e| e.to_string()).collect();
    assert_eq!(
        msgs,
        [
            "sim.rule[0].min_gpus: 4 is above max_gpus = 1: the rule matches no job; swap or fix them",
            "sim.rule[0].min_duration: 02:00:00 is above max_duration = 01:00:00: the rule matches no job; swap or fix them",
        ]
    );
    // Checked against the engine's config: the short band must be on.
    let m = message(&format!(
        "{TWO_TEAMS}\n[sim]\nshort_partition = \"shared\"\n"
    ));
    assert!(m.starts_with("sim.short_partition: \"shared\" says"), "{m}");
}

#[test]
fn sim_worst_floor_gpu_hours_is_a_whole_number_of_gpu_hours() {
    let c = settings("[tree.x]\nshare = 1\n[sim]\nworst_floor_gpu_hours = 250\n").unwrap();
    assert_eq!(c.worst_floor_gpu_hours, 250);
    let d = settings("[tree.x]\nshare = 1\n").unwrap();
    assert_eq!(d.worst_floor_gpu_hours, 100, "100 GPU-h unless set");
    assert_eq!(
        settings("[tree.x]\nshare = 1\n[sim]\nworst_floor_gpu_hours = 0\n")
            .unwrap()
            .worst_floor_gpu_hours,
        0
    );
    for bad in ["-5", "12.5", "\"100\""] {
        let m = message(&format!(
            "[tree.x]\nshare = 1\n[sim]\nworst_floor_gpu_hours = {bad}\n"
        ));
        assert!(
            m.starts_with("sim.worst_floor_gpu_hours: ")
                && m.contains("not a whole number of GPU-hours"),
            "{m}"
        );
    }
}

/// `[sim]` with `timing = "slurmctld"` and the short band on, plus `keys`.
fn slurmctld_preset(keys: &str) -> Result<SimSettings, ConfigErrors> {
    settings(&format!(
        "[tree.x]\nshare = 1\n[priority]\nshort_max_gpus = 2\nshort_max_time = \"1:00:00\"\n[sim]\ntiming = \"slurmctld\"\n{keys}"
    ))
}

#[test]
fn sim_timing_slurmctld_fills_slurm_defaults_and_the_measured_latencies() {
    let s = slurmctld_preset("").unwrap();
    // slurm.conf's, at Slurm 22.05's defaults (seconds).
    assert_eq!(
        (s.sched_interval, s.backfill_interval, s.backfill_depth),
        (60, 30, 500)
    );
    assert_eq!(
        (s.backfill_resolution, s.requeue_delay, s.repreempt_delay),
        (60, 121, 40)
    );
    assert_eq!(s.will_run_window, 30);
    assert_eq!(s.backfill_reserve, BackfillReserve::All);
    assert_eq!(s.backfill_hold, BackfillHold::Nodes);
    assert_eq!(s.backfill_candidates, BackfillCandidates::Free);
    assert_eq!(s.backfill_idle, BackfillIdle::Skip);
    assert_eq!(s.backfill_preempt, BackfillPreempt::All);
    assert_eq!(s.preemptor_start, PreemptorStart::NextPass);
    assert_eq!(s.placement, Placement::ConsTres);
    assert_eq!(s.short_partition, ShortPartition::Shared);
    assert_eq!(s.victim_budget, VictimBudget::Node);
    assert_eq!(s.snapshot_phase, SnapshotPhase::Clock);
    assert_eq!(s.ledger_lag, 1);
    assert_eq!((s.attempt_overhead_ms, s.attempt_jitter_ms), (74, 37));
    assert_eq!(
        (s.victim_complete_ms, s.drain_pass_ms),
        (Some(42), Some(347))
    );
    // Nothing of one run: both passes mid-second, no drift, no offsets.
    let d = SimSettings::default();
    assert_eq!((s.main_phase_ms, s.pass_miss_ms), (500, 500));
    assert_eq!(
        (s.sched_offset, s.pass_drift_us),
        (d.sched_offset, d.pass_drift_us)
    );
    assert_eq!((s.main_drift_us, s.main_passes_us.len()), (None, 0));
    assert_eq!(
        (
            s.sync_offset,
            s.resolution_offset,
            s.will_run_offset,
            s.node_cpus
        ),
        (0, 0, 0, 0)
    );
    // "ideal", like no timing at all, leaves every default.
    let ideal = settings("[tree.x]\nshare = 1\n[sim]\ntiming = \"ideal\"\n").unwrap();
    assert_eq!(ideal, d);
    // Without the short band, short_partition is left out, not an error.
    let s = settings("[tree.x]\nshare = 1\n[sim]\ntiming = \"slurmctld\"\n").unwrap();
    assert_eq!(
        (s.short_partition, s.sched_interval),
        (ShortPartition::Apart, 60)
    );
}

#[test]
fn sim_timing_keys_written_in_sim_win_over_the_preset() {
    // The testbed's slurm.conf: sched_interval=2, bf_interval=1,
    // cred_expire=10, KillWait=2 + MessageTimeout=10.
    let s = slurmctld_preset(
        "sched_interval = \"0:02\"\nbackfill_interval = \"0:01\"\nrequeue_delay = \"0:11\"\nrepreempt_delay = \"0:12\"\nplacement = \"best_fit\"\nattempt_overhead_ms = 0\nsched_offset = 1\n",
    )
    .unwrap();
    assert_eq!(
        (
            s.sched_interval,
            s.backfill_interval,
            s.requeue_delay,
            s.repreempt_delay
        ),
        (2, 1, 11, 12)
    );
    assert_eq!(
        (s.placement, s.attempt_overhead_ms),
        (Placement::BestFit, 0)
    );
    assert_eq!(
        s.sched_offset, 1,
        "checked against the written sched_interval"
    );
    // The rest still come from the preset.
    assert_eq!((s.backfill_resolution, s.attempt_jitter_ms), (60, 37));
    // A key the preset fills is checked as if written: one written
    // against it names itself.
    let m = message("[tree.x]\nshare = 1\n[sim]\ntiming = \"slurmctld\"\nsched_offset = 60\n");
    assert!(
        m.contains("sim.sched_offset") && m.contains("now 60 s"),
        "{m}"
    );
    // A key written against another the preset sets takes the keys that
    // need that one out of the preset, rather than failing on them.
    let s = slurmctld_preset(
        "preemptor_start = \"at_once\"\nbackfill_hold = \"gpus\"\nsched_interval = \"0\"\n",
    )
    .unwrap();
    assert_eq!(
        (s.victim_complete_ms, s.drain_pass_ms, s.will_run_window),
        (None, None, 0)
    );
    assert_eq!((s.main_phase_ms, s.pass_miss_ms), (0, 0));
    assert_eq!(
        (s.preemptor_start, s.backfill_hold, s.sched_interval),
        (PreemptorStart::AtOnce, BackfillHold::Gpus, 0)
    );
    assert_eq!(
        (s.backfill_reserve, s.requeue_delay),
        (BackfillReserve::All, 121)
    );
}

#[test]
fn sim_timing_names_a_preset() {
    for bad in ["\"slurm\"", "\"\"", "1"] {
        let m = message(&format!("[tree.x]\nshare = 1\n[sim]\ntiming = {bad}\n"));
        assert!(
            m.starts_with(&format!("sim.timing: {bad} is not a timing preset"))
                && m.contains("\"ideal\"")
                && m.contains("\"slurmctld\""),
            "{m}"
        );
    }
    // A bad name fills nothing.
    let m = message("[tree.x]\nshare = 1\n[sim]\ntiming = \"slurm\"\nsched_offset = 1\n");
    assert!(m.contains("sim.sched_offset"), "{m}");
}
