//! One start forecast on a busy cluster: 128 nodes x 8 GPUs (1,024), every
//! GPU held by a running job, 10,000 pending jobs, a 7-day history of
//! 30,000 ended jobs. Three forecasts: the job in the middle of the queue,
//! the last submitted, and the last of an account of the smallest share
//! (it sorts behind most others: its forks replay the longest). Each with
//! `[sim] timing = "slurmctld"` (the preset the demo's and a site's
//! forecasts use) and with the default timing (a pass at every event, as
//! the Philly backtest ran). Goal: under 2 s (one forecast with 10,000
//! pending jobs on 1,024 GPUs).
//!
//! `cargo bench -p allot-sim --bench forecast` (`FORECAST_BENCH_PENDING`
//! for another queue). Prints `BENCH forecast_middle_s=... unit=s`,
//! `forecast_last_s`, `forecast_lowest_s` (the preset) and the same with
//! `_ideal_` (`forecast_ideal_middle_s`, ...) for `scripts/bench`.

use std::sync::Arc;
use std::time::Instant;

use allot_sim::forecast::live::{forecast_live, JobNow, Present, PresentJob};
use allot_sim::forecast::ForecastOptions;
use allot_sim::{ClusterSpec, SimSettings};
use fairshare::Config;

#[path = "common/lcg.rs"]
mod lcg;
use lcg::Lcg;

fn main() {
    let pending: usize = std::env::var("FORECAST_BENCH_PENDING")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let mut toml = String::from(
        "window = \"7-0\"\n[contract]\ndefault_min_runtime = \"1:00:00\"\nmax_min_runtime = \"8:00:00\"\n",
    );
    let mut preset = toml.clone() + "[sim]\ntiming = \"slurmctld\"\n";
    let teams = 20;
    for t in 0..teams {
        let node = format!("[tree.t{t}]\nshare = {}\n", 1 + t % 5);
        toml += &node;
        preset += &node;
    }
    let cluster = ClusterSpec {
        nodes: 128,
        gpus_per_node: 8,
    };
    let mut rng = Lcg(7);
    let now: i64 = 2_000_000_000;
    let limits = [3_600u64, 7_200, 14_400, 28_800, 86_400];
    let mut jobs = Vec::new();
    let mut id = 0u64;
    let mut next = |rng: &mut Lcg, now_state: JobNow, submit: i64| {
        id += 1;
        let gpus = [1u32, 1, 1, 2, 4, 8][(rng.next() * 6.0) as usize];
        PresentJob {
            id,
            account: format!("t{}", (rng.next() * teams as f64) as usize),
            gpus,
            submit,
            time_limit: Some(limits[(rng.next() * 5.0) as usize]),
            min_runtime: 3_600,
            now: now_state,
        }
    };
    // History: 30,000 jobs that ended over the last 7 days.
    for _ in 0..30_000 {
        let start = now - (rng.next() * 7.0 * 86_400.0) as i64;
        let mut j = next(&mut rng, JobNow::Pending { restarts: 0 }, start - 600);
        let run = (rng.next() * j.time_limit.unwrap() as f64) as i64 + 60;
        j.now = JobNow::Ended {
            start,
            end: (start + run).min(now),
        };
        jobs.push(j);
    }
    // Running: 1-GPU jobs on every GPU, started within the last 8 hours.
    for _ in 0..1_024 {
        let start = now - (rng.next() * 28_800.0) as i64;
        let mut j = next(&mut rng, JobNow::Running { start, restarts: 0 }, start - 60);
        j.gpus = 1;
        j.time_limit = Some(86_400);
        jobs.push(j);
    }
    // Pending: submitted over the last 12 hours, oldest first.
    for k in 0..pending {
        let submit = now - 43_200 + (k as i64 * 43_200) / pending as i64;
        jobs.push(next(&mut rng, JobNow::Pending { restarts: 0 }, submit));
    }
    let last = jobs.last().expect("jobs").id;
    let middle = last - pending as u64 / 2;
    // t0 has share 1, the smallest.
    let lowest = jobs
        .iter()
        .rev()
        .find(|j| j.account == "t0" && matches!(j.now, JobNow::Pending { .. }))
        .expect("a pending job of t0")
        .id;
    let present = Present {
        now,
        jobs,
        charges: Vec::new(),
        draining: 0,
    };
    let opts = ForecastOptions::default();
    for (key, timing, text) in [("", "slurmctld", &preset), ("ideal_", "ideal", &toml)] {
        let config = Arc::new(Config::from_toml_str(text).expect("valid bench config"));
        let sim = SimSettings::from_config(&config).expect("valid [sim]");
        for (name, target) in [("middle", middle), ("last", last), ("lowest", lowest)] {
            let t = Instant::now();
            let f = forecast_live(&present, target, config.clone(), &sim, cluster, &opts)
                .expect("forecast");
            let s = t.elapsed().as_secs_f64();
            println!(
                "forecast of the {name} job of {pending} pending on 1,024 GPUs, timing {timing}: {s:.2} s ({} draws on {} threads; p50 in {:.1} days)",
                opts.draws,
                std::thread::available_parallelism().map_or(1, |n| n.get()),
                (f.p50 - now) as f64 / 86_400.0
            );
            println!("BENCH forecast_{key}{name}_s={s:.3} unit=s");
        }
    }
}
