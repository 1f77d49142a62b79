//! Simulator speed: replays 1,000,000 synthetic jobs on a 2,048-GPU cluster
//! (256 nodes x 8) under the `allot` policy, with preemption, on one core,
//! and prints jobs/s. Goal: >= 100,000 jobs/s.
//!
//! `cargo bench -p allot-sim --bench sim` (set `SIM_BENCH_JOBS` for another
//! size, `SIM_BENCH_POLICY` for another policy, `SIM_BENCH_LOAD` for another
//! offered load, `SIM_BENCH_SIM` for extra `[sim]` keys). Besides the
//! human line it prints `BENCH name=value unit=...` lines for `scripts/bench`.
//!
//! Workload: 32 teams in 4 programs (unequal shares), Poisson arrivals at
//! about 90% offered load, GPUs per job 1 (70%), 2, 4, 8, 16, 32; runtimes
//! log-uniform from 1 minute to 1 day; 20% of the jobs are short 1-GPU
//! free-tier jobs, the rest buy the default 1 h contract.
//!
//! `SIM_BENCH_WORKLOAD=overload`: the policy issue's overload trace
//! instead: 20 teams (shares 1-5), GPUs per job 1/2/4/8/16/32 with weights
//! 80/6/6/5/2/1, runtimes lognormal (mu 7.0, sigma 1.8, seconds, capped at
//! 14 days, +1 s), one arrival every 0-6 s (uniform): about 2x the offered
//! load of 256 x 8 GPUs; 7-day window, 1 h default contracts, 8 h cap.

use std::sync::Arc;
use std::time::Instant;

use allot_sim::{self as sim, trace, ClusterSpec, Policy, TraceJob, Workload};
use fairshare::Config;

#[path = "common/lcg.rs"]
mod lcg;
use lcg::Lcg;

fn main() {
    let n: usize = std::env::var("SIM_BENCH_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let policy = std::env::var("SIM_BENCH_POLICY")
        .ok()
        .and_then(|p| Policy::from_name(&p))
        .unwrap_or(Policy::Allot);
    let mut toml = String::from(
        "window = \"7-0\"\n[contract]\ndefault_min_runtime = \"1:00:00\"\n[sim]\n\
         [[sim.rule]]\nname = \"debug\"\nmax_gpus = 1\nmax_duration = \"20:00\"\nmin_runtime = \"0\"\n",
    );
    // SIM_BENCH_SIM: extra `[sim]` keys, e.g. "backfill_depth = 100".
    if let Ok(extra) = std::env::var("SIM_BENCH_SIM") {
        toml = toml.replacen("[sim]\n", &format!("[sim]\n{extra}\n"), 1);
    }
    for p in 0..4 {
        toml += &format!("[tree.p{p}]\nshare = {}\n", [40, 30, 20, 10][p]);
        for t in 0..8 {
            toml += &format!("[tree.p{p}.t{p}{t}]\nshare = {}\n", 1 + t % 3);
        }
    }
    let config = Arc::new(Config::from_toml_str(&toml).expect("valid bench config"));
    let cluster = ClusterSpec {
        nodes: 256,
        gpus_per_node: 8,
    };
    let mut rng = Lcg(42);
    let mut t = 0.0f64;
    let sizes = [
        (0.70, 1u32),
        (0.80, 2),
        (0.90, 4),
        (0.98, 8),
        (0.995, 16),
        (1.0, 32),
    ];
    // Mean work ~ 2.34 GPUs x ~11,900 s; arrivals for ~90% offered load
    // (at 100% or more the backlog grows without bound over 150 days).
    // SIM_BENCH_LOAD: offered load, default 0.9.
    let load: f64 = std::env::var("SIM_BENCH_LOAD")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.9);
    let rate = load * 2048.0 / (2.34 * 11_900.0);
    let overload = std::env::var("SIM_BENCH_WORKLOAD").as_deref() == Ok("overload");
    let jobs: Vec<TraceJob> = (0..if overload { 0 } else { n })
        .map(|i| {
            t += -(1.0 - rng.next()).ln() / rate;
            let u = rng.next();
            let gpus = sizes.iter().find(|(p, _)| u <= *p).map_or(1, |s| s.1);
            let duration = (60.0 * 1440f64.powf(rng.next())) as u64;
            trace_job(
                i,
                format!("t{}{}", i % 4, (i / 4) % 8),
                t as u64,
                duration,
                gpus,
            )
        })
        .collect();
    let (config, jobs) = if overload {
        overload_workload(n)
    } else {
        (config, jobs)
    };
    let tr = trace::from_jobs(jobs, Vec::new());
    let settings = sim::SimSettings::from_config(&config).expect("valid [sim]");
    let w = Workload::prepare(&tr, &config, &settings, cluster);
    let started = Instant::now();
    let r = sim::simulate(&w, config, &settings, cluster, policy, &[], &mut |_| {});
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{policy}: {} jobs on {} GPUs in {secs:.2} s = {:.0} jobs/s ({} events, {} preemptions, occupancy {:.1}%, {:.1} simulated days)",
        r.jobs,
        cluster.gpus(),
        r.jobs as f64 / secs,
        r.events,
        r.preemptions,
        100.0 * r.occupancy,
        r.span_s as f64 / 86_400.0
    );
    // Machine-readable figures for scripts/bench.
    println!(
        "BENCH sim_jobs_per_s={:.0} unit=jobs/s",
        r.jobs as f64 / secs
    );
    println!(
        "BENCH sim_days_per_wall_s={:.1} unit=days/s",
        r.span_s as f64 / 86_400.0 / secs
    );
    println!("BENCH sim_preemptions={} unit=count", r.preemptions);
}

/// The policy issue's overload trace (module doc) and its config.
fn overload_workload(n: usize) -> (Arc<Config>, Vec<TraceJob>) {
    let mut toml = String::from(
        "window = \"7-0\"\n[contract]\ndefault_min_runtime = \"1:00:00\"\nmax_min_runtime = \"8:00:00\"\n",
    );
    for t in 0..20 {
        toml += &format!("[tree.t{t}]\nshare = {}\n", 1 + t % 5);
    }
    let config = Arc::new(Config::from_toml_str(&toml).expect("valid overload config"));
    let mut rng = Lcg(7);
    let weights = [(80u32, 1u32), (6, 2), (6, 4), (5, 8), (2, 16), (1, 32)];
    let mut t = 0u64;
    let jobs = (0..n)
        .map(|i| {
            t += (rng.next() * 7.0) as u64; // 0..=6 s
            let mut w = (rng.next() * 100.0) as u32;
            let gpus = weights
                .iter()
                .find(|(p, _)| {
                    let hit = w < *p;
                    w = w.saturating_sub(*p);
                    hit
                })
                .map_or(1, |x| x.1);
            // Box-Muller: one standard normal.
            let (u1, u2) = (1.0 - rng.next(), rng.next());
            let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
            let duration = ((7.0 + 1.8 * z).exp().min(14.0 * 86_400.0)) as u64 + 1;
            trace_job(i, format!("t{}", i % 20), t, duration, gpus)
        })
        .collect();
    (config, jobs)
}

/// Job `i` of a synthetic trace: no contract or resumability of its own.
fn trace_job(i: usize, team: String, submit: u64, duration: u64, gpus: u32) -> TraceJob {
    TraceJob::plain(i as u64, team, submit, duration, gpus)
}
