//! `allot sim`'s text output: the run table, the per-team table, the
//! legend.

use super::*;

/// `1234` s as `20.6m`, `3.4h`, `2.1d`.
pub(super) fn human_secs(s: u64) -> String {
    let s = s as f64;
    if s < 60.0 {
        format!("{s:.0}s")
    } else if s < 3600.0 {
        format!("{:.1}m", s / 60.0)
    } else if s < 86_400.0 {
        format!("{:.1}h", s / 3600.0)
    } else {
        format!("{:.1}d", s / 86_400.0)
    }
}

pub(super) fn print_text(
    args: &Args,
    format: &str,
    trace: &Trace,
    w: &Workload,
    variants: &[Variant],
    outs: &[RunOut],
) {
    let span = trace.jobs.last().map_or(0, |j| j.submit);
    println!(
        "trace {} ({format}): {} jobs, {} node events, submissions over {}",
        args.trace.display(),
        trace.jobs.len(),
        trace.events.len(),
        human_secs(span)
    );
    let mut seen: BTreeMap<&str, u64> = BTreeMap::new();
    for j in &w.jobs {
        *seen.entry(&w.accounts[j.account as usize]).or_default() += 1;
    }
    println!(
        "teams: {} accounts mapped onto {} leaves of the tree",
        seen.len(),
        w.teams.len()
    );
    for m in &w.mapped {
        println!("  {} -> {}: {} jobs ({})", m.name, m.account, m.jobs, m.by);
    }
    for l in &w.left_out {
        println!(
            "  left out: {} jobs ({:.0} GPU-h): {}",
            l.jobs, l.gpu_hours, l.reason
        );
    }
    println!("contract rules applied:");
    for r in &w.rules {
        println!(
            "  {:<12} {:>8} jobs {:>10.0} GPU-h  {}",
            r.rule, r.jobs, r.gpu_hours, r.sets
        );
    }
    if variants.len() > 1 {
        println!(
            "(rules shown for the first configuration; a sweep of contract keys changes them)"
        );
    }
    println!();
    let cfg_w = outs
        .iter()
        .map(|o| o.config.len())
        .max()
        .unwrap_or(0)
        .max(6);
    // The sweep column only when a configuration has sweeps (fairshare::sweep).
    let sweeps = outs
        .iter()
        .any(|o| o.report.waits[JobClass::Sweep as usize].jobs > 0);
    let sweep_w = if sweeps { 21 } else { 0 };
    let header = format!(
        "{:<cfg_w$} {:<8} {:>6} {:>6} {:>7} {:>6} {:>6} {:>20} {:>20} {:>20}{:>sweep_w$} {:>7} {:>8} {:>6} {:>9}",
        "config", "policy", "owed%", "occ%", "unalc%", "err%", "err90%", "wait debug p50/90/99", "wait batch p50/90/99",
        "wait large p50/90/99", if sweeps { "wait sweep p50/90/99" } else { "" }, "preempt", "lost GPUh", "unfin", "jobs/s"
    );
    println!("{header}");
    println!("{}", "-".repeat(header.len()));
    for o in outs {
        let r = &o.report;
        let wait = |c: JobClass| {
            let x = &r.waits[c as usize];
            if x.jobs == 0 {
                return "-".to_string();
            }
            format!(
                "{}/{}/{}",
                human_secs(x.p50_s),
                human_secs(x.p90_s),
                human_secs(x.p99_s)
            )
        };
        println!(
            "{:<cfg_w$} {:<8} {:>6.1} {:>6.1} {:>7} {:>6.1} {:>6.1} {:>20} {:>20} {:>20}{:>sweep_w$} {:>7} {:>8.0} {:>6} {:>9.0}",
            o.config,
            r.policy.name(),
            100.0 * r.owed_delivered,
            100.0 * r.occupancy,
            if r.policy == Policy::Allot { format!("{:.1}", 100.0 * r.unallocated_share) } else { "-".into() },
            100.0 * r.share_error_mean,
            100.0 * r.share_error_p90,
            wait(JobClass::Debug),
            wait(JobClass::Batch),
            wait(JobClass::Large),
            if sweeps { format!(" {}", wait(JobClass::Sweep)) } else { String::new() },
            r.preemptions,
            r.lost_gpu_hours,
            r.unfinished,
            o.jobs_per_s,
        );
    }
    let floor = format!("worst>={}GPUh owed%", variants[0].sim.worst_floor_gpu_hours);
    let floor_w = floor.len().max(22);
    let header = format!(
        "{:<cfg_w$} {:<8} {:>7} {:>9} {:>22} {:>floor_w$} {:>7} {:>9} {:>9} {:>9} {:>15}",
        "config",
        "policy",
        "weekly%",
        "teams>=95",
        "worst team owed%",
        floor,
        "lost%",
        "pre/kGPUh",
        "reversals",
        "occ-end%",
        "requeues max/99"
    );
    println!("\n{header}");
    println!("{}", "-".repeat(header.len()));
    for o in outs {
        let r = &o.report;
        let worst = r
            .worst_team
            .as_ref()
            .map_or("-".to_string(), |(n, v)| format!("{n} {:.1}", 100.0 * v));
        let worst_floor = r.worst_team_floor.as_ref().map_or("-".to_string(), |w| {
            format!("{} {:.1}", w.name, 100.0 * w.owed_delivered)
        });
        println!(
            "{:<cfg_w$} {:<8} {:>7.1} {:>9} {:>22} {:>floor_w$} {:>7.2} {:>9.1} {:>9} {:>9.1} {:>15}",
            o.config,
            r.policy.name(),
            100.0 * r.owed_delivered_weekly,
            format!("{}/{}", r.teams_at_95, r.teams.len()),
            worst,
            worst_floor,
            100.0 * r.lost_of_delivered,
            r.preemptions_per_1000_gpu_hours,
            r.reversals,
            100.0 * r.occupancy_to_end,
            format!("{}/{}", r.requeues_per_job.max, r.requeues_per_job.p99),
        );
    }
    if outs.len() <= 8 {
        println!("\nowed GPU-hours delivered, per team (%; alloc = allocation, owed = GPU-h owed under the first run)");
        let labels: Vec<String> = outs.iter().map(run_label).collect();
        let cw = labels.iter().map(String::len).max().unwrap_or(6).max(6);
        let mut h = format!("{:<14} {:>6} {:>9}", "team", "alloc%", "owed GPUh");
        for l in &labels {
            h += &format!(" {l:>cw$}");
        }
        println!("{h}");
        for (t, team) in w.teams.iter().enumerate() {
            let mut line = format!(
                "{:<14} {:>6.1} {:>9.0}",
                team.name,
                100.0 * team.allocation,
                outs[0].report.teams[t].owed_gpu_hours
            );
            for o in outs {
                line += &format!(" {:>cw$.1}", 100.0 * o.report.teams[t].owed_delivered);
            }
            println!("{line}");
        }
        println!();
        for line in team_waits_table(w, outs) {
            println!("{line}");
        }
    }
    if outs.iter().any(|o| o.forecast.is_some()) {
        println!("\nstart forecast backtest (forecast at submission vs the replay's start; scored: waited >= 10 min)");
        println!(
            "{:<cfg_w$} {:<8} {:>6} {:>6} {:>10} {:>13} {:>9} {:>11} {:>10}",
            "config",
            "policy",
            "jobs",
            "scored",
            "mae_ratio",
            "baseline_mae",
            "cover80%",
            "early/late",
            "wait p50"
        );
        for o in outs {
            let Some(f) = &o.forecast else { continue };
            // n/a where no job was compared or scored (no ratio of none).
            let fixed = |v: Option<f64>, scale: f64, digits: usize| {
                v.map_or("n/a".to_string(), |v| format!("{:.digits$}", scale * v))
            };
            println!(
                "{:<cfg_w$} {:<8} {:>6} {:>6} {:>10} {:>13} {:>9} {:>11} {:>10}",
                o.config,
                o.report.policy.name(),
                f.jobs,
                f.scored,
                fixed(f.mae_ratio, 1.0, 3),
                fixed(f.baseline_mae_ratio, 1.0, 3),
                fixed(f.coverage_80, 100.0, 1),
                format!("{}/{}", f.early, f.late),
                f.median_wait_s.map_or("n/a".to_string(), human_secs),
            );
        }
        println!("mae_ratio = median |forecast p50 - actual start| / actual wait; baseline = time limits, no arrivals (squeue --start); cover80% = actual starts within p10-p90. See docs/forecast.md.");
    }
    println!(
        "\nowed% = owed GPU-hours delivered (weekly%: counted per week); occ% = occupancy from the first to the last submission (occ-end%: to the last event); lost% = GPU-h lost to requeues / delivered; pre/kGPUh = preemptions per 1,000 delivered GPU-h; reversals = preemptions answered by the victim's team within the preemptor's contract; worst>=N GPUh = the worst team among those owed at least [sim] worst_floor_gpu_hours; requeues max/99 = times the most requeued job went back to the queue, and the p99 over jobs; unalc% = free-tier share of GPU time; err% = mean (and p90) hourly share error over a {} window; waits = first start - submit. See docs/simulator.md.",
        human_secs(variants[0].sim.metric_window)
    );
}

/// The per-team wait table: each team's p90 wait in each run, beside the
/// same team's under classic on the same configuration (`-` where classic
/// was not replayed).
pub(super) fn team_waits_table(w: &Workload, outs: &[RunOut]) -> Vec<String> {
    let labels: Vec<String> = outs.iter().map(run_label).collect();
    let cw = labels.iter().map(String::len).max().unwrap_or(6).max(13);
    let mut lines =
        vec!["wait p90 per team, this run / classic on the same configuration".to_string()];
    let mut h = format!("{:<14}", "team");
    for l in &labels {
        h += &format!(" {l:>cw$}");
    }
    lines.push(h);
    for (t, team) in w.teams.iter().enumerate() {
        let mut line = format!("{:<14}", team.name);
        for o in outs {
            let r = &o.report.teams[t];
            let classic = r.classic_wait_p90_s.map_or("-".to_string(), human_secs);
            line += &format!(
                " {:>cw$}",
                format!("{} / {classic}", human_secs(r.wait_p90_s))
            );
        }
        lines.push(line);
    }
    lines
}
