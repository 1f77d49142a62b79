//! SVG plots of `allot sim --plot DIR`:
//! - `share-<run>.svg`: each team's share of the GPU time delivered over the
//!   trailing metric window, day by day (dashed: its fair share of it);
//! - `wait-cdf-<class>.svg`: the distribution of queue waits per job class,
//!   one line per run (log time axis);
//! - `share-error.svg`: the hourly share error of every run;
//! - `occupancy.svg` and `pending.svg`: GPUs held and GPUs waited for, day
//!   by day, one line per run.

use std::path::{Path, PathBuf};

use allot_sim::{JobClass, SimReport};
use anyhow::Context;
use plotters::prelude::*;

fn file_safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn err<E: std::fmt::Display>(path: &Path) -> impl Fn(E) -> anyhow::Error + '_ {
    move |e| anyhow::anyhow!("cannot draw {}: {e}", path.display())
}

/// Draws `pts` as a line of `color`, `width` wide, named `label` in the
/// legend.
fn line<CT: CoordTranslate<From = (f64, f64)>>(
    chart: &mut ChartContext<'_, SVGBackend<'_>, CT>,
    path: &Path,
    pts: Vec<(f64, f64)>,
    color: RGBAColor,
    width: u32,
    label: &str,
) -> anyhow::Result<()> {
    chart
        .draw_series(LineSeries::new(pts, color.stroke_width(width)))
        .map_err(err(path))?
        .label(label)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
    Ok(())
}

/// Draws the legend at `position` and writes the file.
fn finish<'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, CT>,
    root: &DrawingArea<SVGBackend<'a>, plotters::coord::Shift>,
    path: &Path,
    position: SeriesLabelPosition,
) -> anyhow::Result<()> {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(position)
        .draw()
        .map_err(err(path))?;
    root.present().map_err(err(path))?;
    Ok(())
}

/// Writes every plot; returns the files written.
pub fn write_all(
    dir: &Path,
    runs: &[(String, &SimReport)],
    teams: &[String],
    allocation: &[f64],
    metric_window: u64,
) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut files = Vec::new();
    let window_h = metric_window.div_ceil(3600) as usize;
    for (label, r) in runs {
        let path = dir.join(format!("share-{}.svg", file_safe(label)));
        share_plot(&path, label, r, teams, allocation, window_h)?;
        files.push(path);
    }
    for class in JobClass::ALL {
        let path = dir.join(format!("wait-cdf-{}.svg", class.name()));
        wait_cdf(&path, class, runs)?;
        files.push(path);
    }
    let path = dir.join("share-error.svg");
    error_plot(&path, runs, allocation, window_h)?;
    files.push(path);
    files.extend(load_plots(dir, runs)?);
    Ok(files)
}

fn share_plot(
    path: &Path,
    label: &str,
    r: &SimReport,
    teams: &[String],
    allocation: &[f64],
    window_h: usize,
) -> anyhow::Result<()> {
    let series = r.hourly.rolling_shares(allocation, window_h, 24);
    let days = (r.hourly.hours() as f64 / 24.0).max(1.0);
    let root = SVGBackend::new(path, (1100, 550)).into_drawing_area();
    root.fill(&WHITE).map_err(err(path))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{label}: share of delivered GPU time (trailing {window_h} h)"),
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(45)
        .right_y_label_area_size(0)
        .build_cartesian_2d(0f64..days, 0f64..1f64)
        .map_err(err(path))?;
    chart
        .configure_mesh()
        .x_desc("days since first submission")
        .y_desc("share")
        .draw()
        .map_err(err(path))?;
    for (t, name) in teams.iter().enumerate() {
        if r.teams[t].gpu_hours == 0.0 {
            continue;
        }
        let color = Palette99::pick(t).to_rgba();
        let pts: Vec<(f64, f64)> = series
            .iter()
            .map(|(h, s, _)| ((*h + 1) as f64 / 24.0, s[t]))
            .collect();
        line(&mut chart, path, pts, color, 2, name)?;
        let fair: Vec<(f64, f64)> = series
            .iter()
            .map(|(h, _, f)| ((*h + 1) as f64 / 24.0, f[t]))
            .collect();
        chart
            .draw_series(DashedLineSeries::new(
                fair,
                4,
                4,
                color.mix(0.6).stroke_width(1),
            ))
            .map_err(err(path))?;
    }
    finish(&mut chart, &root, path, SeriesLabelPosition::UpperRight)
}

fn wait_cdf(path: &Path, class: JobClass, runs: &[(String, &SimReport)]) -> anyhow::Result<()> {
    let max = runs
        .iter()
        .filter_map(|(_, r)| r.wait_samples[class as usize].last().copied())
        .max()
        .unwrap_or(1)
        .max(60) as f64
        + 1.0;
    let root = SVGBackend::new(path, (900, 550)).into_drawing_area();
    root.fill(&WHITE).map_err(err(path))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("queue wait CDF, {} jobs", class.name()),
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(45)
        .build_cartesian_2d((1f64..max).log_scale(), 0f64..1f64)
        .map_err(err(path))?;
    chart
        .configure_mesh()
        .x_desc("wait + 1 (seconds, log)")
        .y_desc("fraction of jobs")
        .draw()
        .map_err(err(path))?;
    for (i, (label, r)) in runs.iter().enumerate() {
        let w = &r.wait_samples[class as usize];
        if w.is_empty() {
            continue;
        }
        // At most ~500 points per line.
        let step = (w.len() / 500).max(1);
        let n = w.len() as f64;
        let mut pts: Vec<(f64, f64)> = (0..w.len())
            .step_by(step)
            .map(|k| (w[k] as f64 + 1.0, (k + 1) as f64 / n))
            .collect();
        pts.push((*w.last().expect("non-empty") as f64 + 1.0, 1.0));
        let color = Palette99::pick(i).to_rgba();
        line(&mut chart, path, pts, color, 2, label)?;
    }
    finish(&mut chart, &root, path, SeriesLabelPosition::LowerRight)
}

fn error_plot(
    path: &Path,
    runs: &[(String, &SimReport)],
    allocation: &[f64],
    window_h: usize,
) -> anyhow::Result<()> {
    let series = runs
        .iter()
        .map(|(label, r)| {
            let pts = r
                .hourly
                .rolling_shares(allocation, window_h, 6)
                .into_iter()
                .filter(|(_, s, f)| s.iter().sum::<f64>() > 0.0 && f.iter().sum::<f64>() > 0.0)
                .map(|(h, s, f)| {
                    (
                        (h + 1) as f64 / 24.0,
                        0.5 * s.iter().zip(&f).map(|(a, b)| (a - b).abs()).sum::<f64>(),
                    )
                })
                .collect();
            (label.clone(), pts)
        })
        .collect();
    time_series(
        path,
        &format!(
            "share error over time (trailing {window_h} h; 0 = every team got its fair share)"
        ),
        "share error",
        series,
    )
}

/// Per run, day by day: the mean GPUs jobs held (`busy`) or waited for
/// (`pending`: demand minus held, all teams).
fn daily_gpus(r: &SimReport, pending: bool) -> Vec<(f64, f64)> {
    let h = &r.hourly;
    (0..h.hours())
        .step_by(24)
        .map(|d0| {
            let d1 = (d0 + 24).min(h.hours());
            let sum: u64 = (d0..d1)
                .map(|i| {
                    let got: u64 = h.got.iter().map(|t| t[i]).sum();
                    let dem: u64 = h.demand.iter().map(|t| t[i]).sum();
                    if pending {
                        dem.saturating_sub(got)
                    } else {
                        got
                    }
                })
                .sum();
            (d0 as f64 / 24.0, sum as f64 / 3600.0 / (d1 - d0) as f64)
        })
        .collect()
}

/// `occupancy.svg` and `pending.svg`: GPUs held and GPUs waited for, day by
/// day, one line per run (with the capacity on the first): where one policy
/// leaves GPUs idle while work waits, its busy line dips while its pending
/// line stays up.
fn load_plots(dir: &Path, runs: &[(String, &SimReport)]) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for (name, pending, caption) in [
        (
            "occupancy.svg",
            false,
            "GPUs held, daily mean (dashed: capacity)",
        ),
        (
            "pending.svg",
            true,
            "GPUs waited for (demand - held), daily mean",
        ),
    ] {
        let path = dir.join(name);
        let mut series: Vec<(String, Vec<(f64, f64)>)> = runs
            .iter()
            .map(|(label, r)| (label.clone(), daily_gpus(r, pending)))
            .collect();
        if let (false, Some((_, r))) = (pending, runs.first()) {
            let cap = (0..r.hourly.hours())
                .step_by(24)
                .map(|d0| {
                    let d1 = (d0 + 24).min(r.hourly.hours());
                    let c: u64 = r.hourly.capacity[d0..d1].iter().sum();
                    (d0 as f64 / 24.0, c as f64 / 3600.0 / (d1 - d0) as f64)
                })
                .collect();
            series.push(("capacity".to_string(), cap));
        }
        time_series(&path, caption, "GPUs", series)?;
        files.push(path);
    }
    Ok(files)
}

/// One line chart over days since the first submission; the y axis from 0
/// to the largest value (at least 1).
fn time_series(
    path: &Path,
    caption: &str,
    y_desc: &str,
    series: Vec<(String, Vec<(f64, f64)>)>,
) -> anyhow::Result<()> {
    let days = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.0))
        .fold(1.0f64, f64::max);
    let top = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.1))
        .fold(0.0f64, f64::max)
        .max(1.0);
    let root = SVGBackend::new(path, (1100, 550)).into_drawing_area();
    root.fill(&WHITE).map_err(err(path))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d(0f64..days, 0f64..top * 1.05)
        .map_err(err(path))?;
    chart
        .configure_mesh()
        .x_desc("days since first submission")
        .y_desc(y_desc)
        .draw()
        .map_err(err(path))?;
    for (i, (label, pts)) in series.into_iter().enumerate() {
        let color = if label == "capacity" {
            BLACK.to_rgba()
        } else {
            Palette99::pick(i).to_rgba()
        };
        line(&mut chart, path, pts, color, 1, &label)?;
    }
    finish(&mut chart, &root, path, SeriesLabelPosition::UpperRight)
}
