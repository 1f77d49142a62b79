//! Tests of `allot sim`: sweeps, trace formats, the tables.

use super::input::sacct_trace;
use super::*;

/// Why `sweep_variants` refuses `specs` over config `c` and cluster `cl`.
fn sweep_err(c: &toml::Table, cl: ClusterSpec, specs: &[&str]) -> String {
    let specs: Vec<String> = specs.iter().map(|s| s.to_string()).collect();
    sweep_variants(c, cl, &specs).err().unwrap().to_string()
}

#[test]
fn sweep_grid_and_errors() {
    let c: toml::Table = toml::from_str("[tree.a]\nshare = 1\n").unwrap();
    let cl = ClusterSpec {
        nodes: 1,
        gpus_per_node: 8,
    };
    let v = sweep_variants(&c, cl, &["window=1-0,3-0".into(), "cluster=2x8,4x8".into()]).unwrap();
    let labels: Vec<&str> = v.iter().map(|v| v.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "window=1-0 cluster=2x8",
            "window=1-0 cluster=4x8",
            "window=3-0 cluster=2x8",
            "window=3-0 cluster=4x8"
        ]
    );
    assert_eq!(v[2].config.window, 3 * 86_400);
    assert_eq!(v[3].cluster.nodes, 4);
    let e = sweep_err(&c, cl, &["windw=1-0"]);
    assert!(e.contains("unknown key"), "{e}");
    let e = sweep_err(&c, cl, &["window=0"]);
    assert!(e.contains("longer than 0"), "{e}");
    let e = sweep_err(&c, cl, &["window=1-0", "window=2-0"]);
    assert!(e.contains("--sweep window is given twice"), "{e}");
    let e = sweep_err(&c, cl, &["seed=1,1"]);
    assert!(e.contains("1 is given twice; list each value once"), "{e}");
    let e = sweep_err(&c, cl, &["window=1-0,,2-0"]);
    assert!(e.contains("value 2 is empty"), "{e}");
    // A swept value is checked as the config checks it: sync_interval
    // against [sim] sync_offset too.
    let with_offset: toml::Table =
        toml::from_str("[sim]\nsync_offset = 30\n[tree.a]\nshare = 1\n").unwrap();
    assert!(sweep_variants(&with_offset, cl, &["sync_interval=1:00".into()]).is_ok());
    let e = sweep_err(&with_offset, cl, &["sync_interval=0:30"]);
    assert!(e.contains("sim.sync_offset"), "{e}");
    assert!(
        parse_policies(&["allot,fifo".into(), "fifo".into()]).unwrap()
            == vec![Policy::Allot, Policy::Fifo]
    );
    assert!(parse_policies(&["slurm".into()]).is_err());
    assert_eq!(human_secs(5400), "1.5h");
}

#[test]
fn the_shipped_demo_runs_and_plots() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = std::env::temp_dir().join(format!("allot-sim-plots-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let args = Args {
        config: ConfigArg {
            config: Some(root.join("examples/sim-philly.toml")),
        },
        trace: root.join("examples/traces/philly-slice.csv"),
        format: None,
        cluster: Some("16x8".into()),
        policies: vec!["allot".into(), "fairtree".into()],
        sweeps: vec!["window=1-0,7-0".into()],
        json: true,
        plot: Some(dir.clone()),
        preemptions: Some(dir.join("preemptions.jsonl")),
        priorities: Some(dir.join("priorities.jsonl")),
        attempts: Some(dir.join("attempts.jsonl")),
        skip_bad_rows: false,
        forecast_backtest: false,
        forecast_jobs: 1000,
        forecast_draws: 16,
        threads: Some(2),
    };
    assert_eq!(run(&args).unwrap(), ExitCode::SUCCESS);
    for f in [
        "share-allot_window_1-0.svg",
        "wait-cdf-debug.svg",
        "share-error.svg",
    ] {
        let text = std::fs::read_to_string(dir.join(f)).unwrap();
        assert!(text.starts_with("<svg"), "{f}");
    }
    // One line per preemption of each allot run, none of fairtree's.
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(dir.join("preemptions.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!lines.is_empty());
    for l in &lines {
        assert!(
            l["run"].as_str().unwrap().starts_with("allot window="),
            "{l}"
        );
        assert!(l["time"].is_u64() && l["victim"].is_u64(), "{l}");
        assert!(l["preemptor_team_name"].is_string(), "{l}");
    }
    // One line per job of each allot run at its submission: its band
    // (0-3) and its team's rank.
    let jobs = std::fs::read_to_string(root.join("examples/traces/philly-slice.csv"))
        .unwrap()
        .lines()
        .count()
        - 1;
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(dir.join("priorities.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2 * jobs);
    for l in &lines {
        assert!(
            l["run"].as_str().unwrap().starts_with("allot window="),
            "{l}"
        );
        assert!(l["band"].as_u64().unwrap() <= 3, "{l}");
        assert!(l["rank"].is_u64() && l["team_name"].is_string(), "{l}");
    }
    // Every run's attempts: each job completed once, after one attempt
    // per preemption of it (numbered from 0); none ends before it starts.
    let attempts: Vec<serde_json::Value> = std::fs::read_to_string(dir.join("attempts.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let preemptions: Vec<serde_json::Value> =
        std::fs::read_to_string(dir.join("preemptions.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    let preempted = |run: &str, job: u64| {
        let victims = preemptions
            .iter()
            .filter(|p| p["run"] == run && p["victim"] == job);
        victims.count() as u64
    };
    let runs: std::collections::BTreeSet<&str> = attempts
        .iter()
        .map(|a| a["run"].as_str().unwrap())
        .collect();
    assert_eq!(runs.len(), 4, "{runs:?}");
    for run in runs {
        let of_run: Vec<_> = attempts.iter().filter(|a| a["run"] == run).collect();
        let done: Vec<_> = of_run
            .iter()
            .filter(|a| a["ended"] == "completed")
            .collect();
        assert_eq!(done.len(), jobs, "{run}");
        for a in &done {
            let job = a["job"].as_u64().unwrap();
            assert_eq!(a["attempt"].as_u64().unwrap(), preempted(run, job), "{a}");
        }
        for a in &of_run {
            assert!(
                a["start"].as_u64().unwrap() <= a["end"].as_u64().unwrap(),
                "{a}"
            );
            assert!(
                ["completed", "preempted"].contains(&a["ended"].as_str().unwrap()),
                "{a}"
            );
            assert!(
                a["team_name"].is_string() && a["gpus"].as_u64().unwrap() >= 1,
                "{a}"
            );
        }
        let requeued = of_run.iter().filter(|a| a["ended"] == "preempted").count();
        let logged = preemptions.iter().filter(|p| p["run"] == run).count();
        assert_eq!(requeued, logged, "{run}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sacct_dumps_become_jobs() {
    let text = "JobIDRaw|JobID|Account|User|Partition|AllocTRES|Submit|Start|End|Elapsed|State|AdminComment\n\
                10|10|a1|u|gpu|gres/gpu=2|1700000000|1700000100|1700003700|01:00:00|COMPLETED|allot:min_runtime=600\n\
                11|11|a1|u|gpu|gres/gpu=1|1700000050|Unknown|Unknown|00:00:00|PENDING|\n";
    let t = sacct_trace(text.as_bytes()).unwrap();
    assert_eq!(t.jobs.len(), 1, "{:?}", t.errors);
    assert_eq!(
        (t.jobs[0].gpus, t.jobs[0].duration, t.jobs[0].min_runtime),
        (2, 3600, Some(600))
    );
    assert_eq!(t.skipped, vec![("never started".to_string(), 1)]);
}

/// The replay reads a dump as `allot sync` does: a Latin-1 job name and a
/// `|` and a newline in names stop nothing, and an error names its line.
#[test]
fn sacct_dumps_with_free_text_replay_every_job() {
    let text: &[u8] = b"JobIDRaw|JobName|Account|AllocTRES|Submit|Start|End|State\n\
        10|r\xe9sum\xe9|a1|gres/gpu=2|1700000000|1700000000|1700003600|COMPLETED\n\
        11|sweep|lr=0.1|a1|gres/gpu=2|1700000000|1700000000|1700003600|COMPLETED\n\
        12|eval\nstep|a1|gres/gpu=2|1700000000|1700000000|1700003600|COMPLETED\n\
        13|x|a1|gpu|1700000000|1700000000|1700003600|COMPLETED\n";
    let t = sacct_trace(text).unwrap();
    assert_eq!(t.jobs.len(), 3, "{:?}", t.errors);
    assert_eq!(t.errors.len(), 1);
    assert_eq!(
        (t.errors[0].line, t.errors[0].column.as_deref()),
        (6, Some("AllocTRES"))
    );
}

/// A job id Slurm reused (issue 53, item 2): alice's job 700 (requeued
/// once) and bob's job 700 three years later replay as two jobs, not as one
/// job of alice's with bob's run time added.
#[test]
fn sacct_dumps_replay_a_recycled_id_as_two_jobs() {
    let text = "JobIDRaw|User|Account|AllocTRES|Submit|Start|End|State\n\
                700|alice|a1|gres/gpu=2|1600000000|1600000000|1600000600|REQUEUED\n\
                700|alice|a1|gres/gpu=2|1600000600|1600000700|1600004300|COMPLETED\n\
                700|bob|b1|gres/gpu=4|1700000000|1700000000|1700000100|COMPLETED\n";
    let t = sacct_trace(text.as_bytes()).unwrap();
    assert!(t.errors.is_empty(), "{:?}", t.errors);
    let mut jobs: Vec<(u64, &str, u32, u64)> = t
        .jobs
        .iter()
        .map(|j| (j.id, j.team.as_str(), j.gpus, j.duration))
        .collect();
    jobs.sort_unstable();
    assert_eq!(
        jobs,
        [(700, "a1", 2, 4200), (700 + (1 << 32), "b1", 4, 100)]
    );
}

/// A resized job (issue 39): 16 GPUs for 20 min, then 8 for 100 min.
/// Slurm ends the first record RESIZING and starts the second at the
/// resize (submit = start). Replayed as its two segments, 18.667 GPU-h
/// (before: one 16-GPU job of 2 h, 32 GPU-h), the contract once per run.
#[test]
fn sacct_dumps_replay_a_resized_job_as_its_segments() {
    let text = "JobIDRaw|JobID|Account|User|Partition|AllocTRES|Submit|Start|End|Elapsed|State|AdminComment\n\
                300|300|a1|u|gpu|gres/gpu=16|1700000000|1700000100|1700001300|00:20:00|RESIZING|allot:min_runtime=3600\n\
                300|300|a1|u|gpu|gres/gpu=8|1700001300|1700001300|1700007300|01:40:00|COMPLETED|allot:min_runtime=3600\n";
    let t = sacct_trace(text.as_bytes()).unwrap();
    assert!(t.errors.is_empty(), "{:?}", t.errors);
    let shape: Vec<_> = t
        .jobs
        .iter()
        .map(|j| (j.submit, j.gpus, j.duration, j.min_runtime))
        .collect();
    // The second segment: submitted at the resize, 40 min of the hour left.
    assert_eq!(
        shape,
        vec![(0, 16, 1200, Some(3600)), (1300, 8, 6000, Some(2400))]
    );
    let gpu_s: u64 = t.jobs.iter().map(|j| u64::from(j.gpus) * j.duration).sum();
    assert_eq!(gpu_s, 67_200, "18.667 GPU-h");
}

#[test]
fn sacct_dumps_with_steps_replay_their_jobs() {
    let text = "JobIDRaw|JobID|Account|User|Partition|AllocTRES|Submit|Start|End|Elapsed|State|AdminComment\n\
                5101|5101|a1|u|gpu|gres/gpu=2|1700000000|1700000100|1700003700|01:00:00|COMPLETED|\n\
                5101.batch|5101.batch|a1|u||gres/gpu=2|1700000100|1700000100|1700003700|01:00:00|COMPLETED|\n\
                5104.0|5104.0|a1|u||gres/gpu=2|1700000100|1700000100|1700003700|01:00:00|COMPLETED|\n\
                5104.extern|5104.extern|a1|u||gres/gpu=2|1700000100|1700000100|1700003700|01:00:00|COMPLETED|\n\
                7104.batch|7100_3.batch|a1|u||gres/gpu=1|1700000100|1700000100|1700003700|01:00:00|COMPLETED|\n";
    let t = sacct_trace(text.as_bytes()).unwrap();
    assert!(t.errors.is_empty(), "{:?}", t.errors);
    assert_eq!(t.jobs.len(), 1);
    assert_eq!(
        t.skipped,
        vec![("job steps (their jobs' rows are read)".to_string(), 4)]
    );
}

#[test]
fn sacct_dumps_of_several_clusters_are_refused() {
    let text = "Cluster|JobIDRaw|JobID|Account|User|Partition|AllocTRES|Submit|Start|End|Elapsed|State|AdminComment\n\
                alpha|700|700|a1|u|gpu|gres/gpu=2|1700000000|1700000100|1700003700|01:00:00|COMPLETED|\n\
                alpha|701|701|a1|u|gpu|gres/gpu=2|1700000000|1700000100|1700003700|01:00:00|COMPLETED|\n\
                beta|700|700|b1|v|gpu|gres/gpu=1|1700000000|1700000100|1700003700|01:00:00|COMPLETED|\n\
                beta|701|701|b1|v|gpu|gres/gpu=4|1700000000|1700000100|1700003700|01:00:00|COMPLETED|\n";
    let e = sacct_trace(text.as_bytes()).unwrap_err().to_string();
    assert!(
        e.contains("2 clusters: alpha (2 rows), beta (2 rows)") && e.contains("sacct -M <cluster>"),
        "{e}"
    );
    // One cluster's rows replay as before.
    let one: String = text
        .lines()
        .filter(|l| !l.starts_with("beta"))
        .map(|l| format!("{l}\n"))
        .collect();
    let t = sacct_trace(one.as_bytes()).unwrap();
    assert_eq!(t.jobs.len(), 2, "{:?}", t.errors);
}

#[test]
fn sacct_dumps_with_utc_offsets_replay_their_instants() {
    // Start 23:30+0100 = 22:30Z, End 18:30-05:00 = 23:30Z: a 1 h run
    // (dropping the offsets, End would fall 5 h before Start). Submit Z:
    // 22:00Z, 30 min before the start.
    let text = "JobIDRaw|JobID|Account|User|Partition|AllocTRES|Submit|Start|End|Elapsed|State|AdminComment\n\
                10|10|a1|u|gpu|gres/gpu=2|2026-01-10T22:00:00Z|2026-01-10T23:30:00+0100|2026-01-10T18:30:00-05:00|01:00:00|COMPLETED|\n";
    let t = sacct_trace(text.as_bytes()).unwrap();
    assert!(t.errors.is_empty(), "{:?}", t.errors);
    assert_eq!((t.jobs.len(), t.jobs[0].duration), (1, 3600));
}

/// The workload `args`' trace and config give on one node of 8 GPUs.
fn prepared(args: &Args) -> Workload {
    let (trace, _) = load_trace(&args.trace, None).unwrap();
    let cfg = config_path::load_all(&args.config.path()).unwrap();
    Workload::prepare(
        &trace,
        &cfg.config,
        &cfg.sim,
        ClusterSpec::parse("1x8").unwrap(),
    )
}

fn sim_args(dir: &Path, config: &str, trace: &str) -> Args {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("allot.toml"), config).unwrap();
    std::fs::write(dir.join("trace.csv"), trace).unwrap();
    Args {
        config: ConfigArg {
            config: Some(dir.join("allot.toml")),
        },
        trace: dir.join("trace.csv"),
        format: None,
        cluster: Some("1x8".into()),
        policies: vec!["allot".into()],
        sweeps: vec![],
        json: true,
        plot: None,
        preemptions: None,
        priorities: None,
        attempts: None,
        skip_bad_rows: false,
        forecast_backtest: false,
        forecast_jobs: 1000,
        forecast_draws: 16,
        threads: Some(1),
    }
}

/// `--forecast-backtest` on a trace without time limits (the user-limit
/// model gives them) runs and answers.
#[test]
fn the_forecast_backtest_runs_on_a_trace_without_limits() {
    let dir = std::env::temp_dir().join(format!("allot-fb-{}", std::process::id()));
    let trace: String = std::iter::once("submit,duration,gpus,team\n".to_string())
        .chain((0..60).map(|i| {
            format!(
                "{},{},{},{}\n",
                i * 300,
                1800 + i * 97 % 3600,
                1 + i % 4,
                ["a", "b"][i as usize % 2]
            )
        }))
        .collect();
    let args = Args {
        forecast_backtest: true,
        forecast_jobs: 20,
        forecast_draws: 4,
        ..sim_args(&dir, "[tree.a]\nshare = 1\n[tree.b]\nshare = 1\n", &trace)
    };
    assert_eq!(run(&args).unwrap(), ExitCode::SUCCESS);
}

/// A backtest in which no job queues compared nothing: an error naming
/// the run and the fix, not a row of zeros.
#[test]
fn a_forecast_backtest_that_compares_nothing_fails() {
    let dir = std::env::temp_dir().join(format!("allot-fb0-{}", std::process::id()));
    // Ten 1-GPU jobs an hour apart on 8 GPUs: none waits.
    let trace: String = std::iter::once("submit,duration,gpus,team\n".to_string())
        .chain((0..10).map(|i| format!("{},600,1,a\n", i * 3600)))
        .collect();
    let args = Args {
        forecast_backtest: true,
        forecast_jobs: 10,
        forecast_draws: 2,
        ..sim_args(&dir, "[tree.a]\nshare = 1\n", &trace)
    };
    let e = run(&args).unwrap_err().to_string();
    assert!(
        e.contains("compared no forecast in run allot")
            && e.contains("Every job was sampled: give a trace whose jobs queue"),
        "{e}"
    );
}

#[test]
fn mixed_case_trace_accounts_match_and_unmatched_traces_fail() {
    let dir = std::env::temp_dir().join(format!("allot-sim-case-{}", std::process::id()));
    let helios = "job_id,user,vc,gpu_num,submit_time,duration\n\
                  1,u,vcAB,2,0,3600\n2,u,vcCd,2,60,3600\n3,u,vcEF,1,120,3600\n";
    // vcAB and vcCd are the accounts vcab and vccd; vcEF (1 of 5 GPU-h) is left out.
    let args = sim_args(
        &dir,
        "capacity_gpus = 8\n[tree.vcab]\nshare = 1\n[tree.vccd]\nshare = 1\n",
        helios,
    );
    assert_eq!(run(&args).unwrap(), ExitCode::SUCCESS);
    let w = prepared(&args);
    assert_eq!(w.jobs.len(), 2);
    assert_eq!(w.accounts, ["vcab", "vccd"]);
    assert_eq!(
        w.unmatched(false),
        None,
        "1 GPU-h of 5 left out is not most"
    );
    // A tree that knows none of them: refused with one line, no table.
    let args = sim_args(&dir, "capacity_gpus = 8\n[tree.other]\nshare = 1\n", helios);
    let e = run(&args).unwrap_err().to_string();
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.contains("100% of the trace's GPU-hours (5 of 5) are in accounts the tree does not know: vcab, vccd, vcef"),
        "{e}"
    );
    assert!(e.contains("[sim.accounts] vcab = \"<account>\""), "{e}");
    // A name that is a group of the tree is said to be one.
    let args = sim_args(
        &dir,
        "capacity_gpus = 8\n[tree.vcab]\nshare = 1\n[tree.vcab.x]\nshare = 1\n",
        helios,
    );
    let e = run(&args).unwrap_err().to_string();
    assert!(
        e.contains("(vcab is a group of the tree, not a leaf: jobs are charged to a leaf, so map each onto one of its leaves)"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn alibaba_pods_map_onto_one_team_or_by_class() {
    let dir = std::env::temp_dir().join(format!("allot-sim-ali-{}", std::process::id()));
    let pods = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n\
                openb-pod-0001,6000,12288,1,1000,,LS,Running,0,3600,0\n\
                openb-pod-0002,6000,12288,2,1000,,BE,Running,10,3610,10\n\
                openb-pod-0003,6000,12288,1,500,,Burstable,Running,20,3620,20\n";
    // A one-team tree: every pod is that team's.
    let args = sim_args(&dir, "capacity_gpus = 8\n[tree.team]\nshare = 1\n", pods);
    assert_eq!(run(&args).unwrap(), ExitCode::SUCCESS);
    let w = prepared(&args);
    assert_eq!(w.jobs.len(), 3);
    assert_eq!(w.accounts, ["team"]);
    let mapped: Vec<(&str, &str, u64, &str)> = w
        .mapped
        .iter()
        .map(|m| (m.name.as_str(), m.account.as_str(), m.jobs, m.by))
        .collect();
    let one = "the one team: the trace has no tenants";
    assert_eq!(
        mapped,
        [
            ("be", "team", 1, one),
            ("burstable", "team", 1, one),
            ("ls", "team", 1, one)
        ]
    );
    // Two teams and no mapping: refused, naming the classes.
    let two = "capacity_gpus = 8\n[tree.prod]\nshare = 1\n[tree.research]\nshare = 1\n";
    let args = sim_args(&dir, two, pods);
    let e = run(&args).unwrap_err().to_string();
    assert!(
        e.contains("100% of the trace's GPU-hours (4 of 4) are in QoS classes (the trace has no tenants) the tree does not know: be, burstable, ls"),
        "{e}"
    );
    // Mapped by class, with `*` for the rest.
    let args = sim_args(
        &dir,
        &format!("{two}[sim.accounts]\nLS = \"prod\"\n\"*\" = \"research\"\n"),
        pods,
    );
    assert_eq!(run(&args).unwrap(), ExitCode::SUCCESS);
    let w = prepared(&args);
    let per_account: Vec<(u64, u32)> = w.jobs.iter().map(|j| (j.id, j.account)).collect();
    assert_eq!(w.accounts, ["prod", "research"]);
    assert!(w.mapped.iter().all(|m| m.by == "[sim.accounts]"));
    assert_eq!(w.mapped.iter().map(|m| m.jobs).sum::<u64>(), 3);
    assert_eq!(per_account, [(1, 0), (2, 1), (3, 1)]);
    // Every pod larger than the cluster: refused too, not a table of zeros.
    let mut args = sim_args(&dir, "capacity_gpus = 8\n[tree.team]\nshare = 1\n", pods);
    args.cluster = Some("1x1".into());
    let pods2 = pods
        .replace(",1,1000,,LS", ",2,1000,,LS")
        .replace(",1,500,,", ",2,500,,");
    std::fs::write(&args.trace, pods2).unwrap();
    let e = run(&args).unwrap_err().to_string();
    assert!(
        e.contains(
            "3 jobs larger than the cluster (1x1) hold 100% of the trace's GPU-hours (6 of 6)"
        ) && e.ends_with("e.g. --cluster 2x1 or [sim] cluster = \"2x1\""),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Runs of `jobs` on one 8-GPU node under `policies`, labelled `config`.
fn runs_of(config: &str, jobs: Vec<TraceJob>, policies: &[Policy]) -> (Workload, Vec<RunOut>) {
    let (c, s) = sim::settings::from_toml_str(
        "window = \"7-0\"\n[contract]\ndefault_min_runtime = \"1:00:00\"\n[tree.t1]\nshare = 1\n[tree.t2]\nshare = 1\n",
    )
    .unwrap();
    let c = Arc::new(c);
    let cl = ClusterSpec {
        nodes: 1,
        gpus_per_node: 8,
    };
    let t = trace::from_jobs(jobs, Vec::new());
    let w = Workload::prepare(&t, &c, &s, cl);
    let outs = policies
        .iter()
        .map(|&p| RunOut {
            config: config.into(),
            cluster: cl.to_string(),
            report: sim::simulate(&w, c.clone(), &s, cl, p, &t.events, &mut |_| {}),
            forecast: None,
            wall_s: 0.0,
            jobs_per_s: 0.0,
        })
        .collect();
    (w, outs)
}

/// t1 holds the node with two 4-GPU jobs for 2 h from 0; t2's 4-GPU job
/// at 600 s waits for one of them under FIFO and classic (1:40 h), and
/// preempts one under allot once its 1-h contract is served (50 min).
#[test]
fn each_team_wait_p90_sits_beside_its_classic_one() {
    let jobs = || {
        vec![
            TraceJob::plain(1, "t1", 0, 7200, 4),
            TraceJob::plain(2, "t1", 0, 7200, 4),
            TraceJob::plain(3, "t2", 600, 3600, 4),
        ]
    };
    let (w, mut outs) = runs_of("", jobs(), &[Policy::Allot, Policy::Fifo, Policy::Classic]);
    let (_, other) = runs_of("window=1-0", jobs(), &[Policy::Allot]);
    outs.extend(other);
    fill_classic_waits(&mut outs);
    let t2: Vec<(u64, Option<u64>)> = outs
        .iter()
        .map(|o| {
            let t = &o.report.teams[1];
            (t.wait_p90_s, t.classic_wait_p90_s)
        })
        .collect();
    assert_eq!(
        t2,
        [
            (3000, Some(6600)),
            (6600, Some(6600)),
            (6600, Some(6600)),
            // Another configuration without a classic run: none.
            (3000, None),
        ]
    );
    let json = serde_json::to_value(&outs[3]).unwrap();
    assert!(json["teams"][1]["classic_wait_p90_s"].is_null(), "{json}");
    // Hour 0: t2 wants 4 GPUs for 50 min, all of it; hour 1: 4 GPUs.
    let entitled = json["teams"][1]["entitled_gpu_hours"].as_f64().unwrap();
    assert!(
        (entitled - (4.0 * 50.0 / 60.0 + 4.0)).abs() < 1e-9,
        "{entitled}"
    );
    assert_eq!(json["requeues_per_job"]["max"], 1);
    assert!(json["worst_team_floor"].is_null());
    // No debug job (all are 4 GPUs): its waits are null, as the table's `-`.
    let debug = &json["waits"][JobClass::Debug as usize];
    assert_eq!(debug["jobs"], 0, "{debug}");
    for p in ["p50_s", "p90_s", "p99_s"] {
        assert!(debug[p].is_null(), "{debug}");
    }
    let batch = &json["waits"][JobClass::Batch as usize];
    assert_eq!(
        (batch["jobs"].as_u64(), batch["p50_s"].as_u64()),
        (Some(3), Some(0)),
        "{batch}"
    );
    let table = table::team_waits_table(&w, &outs);
    assert!(
        table[1].starts_with("team") && table[1].contains("allot window=1-0"),
        "{table:?}"
    );
    assert_eq!(
        table[3].split_whitespace().collect::<Vec<_>>(),
        ["t2", "50.0m", "/", "1.8h", "1.8h", "/", "1.8h", "1.8h", "/", "1.8h", "50.0m", "/", "-"]
    );
}

#[test]
fn the_trace_line_names_the_format_after_a_bom_or_comments() {
    let dir = std::env::temp_dir().join(format!("allot-sim-fmt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cases = [
        (
            "# exported by hand\nsubmit,duration,gpus,team\n0,60,1,a\n",
            None,
            "allot",
        ),
        (
            "\u{feff}job_id,user,vc,gpu_num,submit_time,duration\n1,u,a,1,0,60\n",
            None,
            "helios",
        ),
        (
            "timestamp,duration,num_gpus,gpu_time,cluster\n0,60,1,60,a\n",
            Some("philly"),
            "philly",
        ),
    ];
    for (i, (text, format, want)) in cases.into_iter().enumerate() {
        let path = dir.join(format!("t{i}.csv"));
        std::fs::write(&path, text).unwrap();
        let (t, name) = load_trace(&path, format).unwrap();
        assert_eq!((name.as_str(), t.jobs.len()), (want, 1), "{text:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Jobs larger than the cluster that hold most of the trace's GPU-hours
/// (alone, or with the unknown accounts' jobs) refuse the replay, naming
/// the jobs, their share and a cluster that holds them; at half or less it
/// runs and lists them.
#[test]
fn a_replay_that_leaves_most_of_the_work_out_fails() {
    let dir = std::env::temp_dir().join(format!("allot-sim-big-{}", std::process::id()));
    let tree = "capacity_gpus = 8\n[tree.a]\nshare = 1\n[tree.b]\nshare = 1\n";
    // 16 GPUs x 3 h = 48 of 64 GPU-h on one 8-GPU node: 75%.
    let trace = "submit,duration,gpus,team\n0,10800,16,a\n60,7200,4,b\n120,28800,1,a\n";
    let args = sim_args(&dir, tree, trace);
    let e = run(&args).unwrap_err().to_string();
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.contains(
            "trace.csv: 1 job larger than the cluster (1x8) holds 75% of the trace's GPU-hours (48 of 64); \
             a replay of the rest would compare policies on a sliver of the workload: replay a cluster \
             that holds the largest job (16 GPUs), e.g. --cluster 2x8 or [sim] cluster = \"2x8\""
        ),
        "{e}"
    );
    // The cluster it names replays it.
    let mut big = sim_args(&dir, tree, trace);
    big.cluster = Some("2x8".into());
    assert_eq!(run(&big).unwrap(), ExitCode::SUCCESS);
    // 16 of 32 GPU-h: half is not most; replayed, the job listed as left out.
    let half = "submit,duration,gpus,team\n0,3600,16,a\n60,7200,4,b\n120,28800,1,a\n";
    let args = sim_args(&dir, tree, half);
    assert_eq!(run(&args).unwrap(), ExitCode::SUCCESS);
    let w = prepared(&args);
    assert_eq!(w.oversized(), None);
    assert_eq!(
        w.left_out
            .iter()
            .map(|l| (l.reason.as_str(), l.jobs, l.gpu_hours))
            .collect::<Vec<_>>(),
        [("larger than the cluster (1x8)", 1, 16.0)]
    );
    // With b unknown to the tree: 16 + 8 of 32 GPU-h left out, refused.
    let args = sim_args(&dir, "capacity_gpus = 8\n[tree.a]\nshare = 1\n", half);
    let e = run(&args).unwrap_err().to_string();
    assert!(
        e.contains(
            "1 job larger than the cluster (1x8) holds 50% of the trace's GPU-hours (16 of 32), \
                    and jobs of accounts the tree does not know 25% more;"
        ),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The log files are created before the replay: a log on the trace's path
/// is refused with the trace untouched, and a log that cannot be created
/// fails the run before it replays, leaving the other logs as they were.
#[test]
fn log_files_are_checked_before_the_replay() {
    let dir = std::env::temp_dir().join(format!("allot-sim-logs-{}", std::process::id()));
    let trace = "id,team,submit,duration,gpus\n1,a,0,600,1\n2,b,60,600,1\n";
    let base = sim_args(&dir, "[tree.a]\nshare = 1\n[tree.b]\nshare = 1\n", trace);
    let args = Args {
        attempts: Some(dir.join("trace.csv")),
        ..sim_args(&dir, "[tree.a]\nshare = 1\n[tree.b]\nshare = 1\n", trace)
    };
    let e = run(&args).unwrap_err().to_string();
    assert!(
        e.contains("--attempts") && e.contains("--trace is that file too"),
        "{e}"
    );
    assert_eq!(std::fs::read_to_string(&base.trace).unwrap(), trace);
    // Two logs on one path (spelled two ways) are refused too.
    let args = Args {
        preemptions: Some(dir.join("log.jsonl")),
        attempts: Some(dir.join(".").join("log.jsonl")),
        ..sim_args(&dir, "[tree.a]\nshare = 1\n[tree.b]\nshare = 1\n", trace)
    };
    let e = run(&args).unwrap_err().to_string();
    assert!(e.contains("--preemptions is that file too"), "{e}");
    // A log in a missing directory: the run fails naming it; the file
    // given before it keeps its contents.
    std::fs::write(dir.join("kept.jsonl"), "kept\n").unwrap();
    let args = Args {
        preemptions: Some(dir.join("kept.jsonl")),
        attempts: Some(dir.join("missing").join("a.jsonl")),
        ..sim_args(&dir, "[tree.a]\nshare = 1\n[tree.b]\nshare = 1\n", trace)
    };
    let e = format!("{:#}", run(&args).unwrap_err());
    assert!(
        e.contains("--attempts")
            && e.contains("missing/a.jsonl")
            && e.contains("directory you can write"),
        "{e}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("kept.jsonl")).unwrap(),
        "kept\n"
    );
    // Both writable: both written, one attempt per job.
    let args = Args {
        preemptions: Some(dir.join("kept.jsonl")),
        attempts: Some(dir.join("a.jsonl")),
        ..base
    };
    assert_eq!(run(&args).unwrap(), ExitCode::SUCCESS);
    assert_eq!(std::fs::read_to_string(dir.join("kept.jsonl")).unwrap(), "");
    let attempts = std::fs::read_to_string(dir.join("a.jsonl")).unwrap();
    assert_eq!(attempts.lines().count(), 2, "{attempts}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A team with no jobs is owed nothing: nothing fell short for it, so its
/// owed% reads 100% (counted among teams at 95%), and the worst team is
/// the one that was owed something.
#[test]
fn a_team_owed_nothing_reads_fully_served() {
    let jobs = vec![
        TraceJob::plain(1, "t1", 0, 7200, 8),
        TraceJob::plain(2, "t1", 60, 7200, 8),
    ];
    let (_, outs) = runs_of("", jobs, &[Policy::Allot, Policy::Classic]);
    for o in &outs {
        let r = &o.report;
        let t2 = r.teams.iter().find(|t| t.name == "t2").unwrap();
        assert_eq!((t2.owed_gpu_hours, t2.owed_delivered), (0.0, 1.0), "{r:?}");
        assert_eq!(r.teams_at_95, 2);
        assert_eq!(r.worst_team.as_ref().map(|w| w.0.as_str()), Some("t1"));
    }
}
