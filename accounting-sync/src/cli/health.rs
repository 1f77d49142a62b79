//! `allot health`: check every GPU of this node (Slurm's
//! HealthCheckProgram); with `--drain`, drain the node on a failure. See
//! `allot_sync::health` and docs/health.md.
//!
//! Exit status: 0 healthy, unknown, or no NVML on this node; 1 a check
//! failed, or the command itself failed (bad fixture: message on stderr).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use allot_ledger::events::{append_event, Event, EventKind};
use allot_sync::health::fixture::FixtureSource;
use allot_sync::health::nvml::NvmlSource;
use allot_sync::health::{self, node, GpuSource, NodeReport, SourceError};

use super::common::{self, init_logging, ConfigArg};

/// Arguments of `allot health`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub config: ConfigArg,
    /// On a failed check, drain this node (`scontrol update state=drain
    /// reason="allot: gpu3 Xid 79 serial=..."`) and record the event in the
    /// ledger when it is reachable
    #[arg(long)]
    pub drain: bool,
    /// JSON output
    #[arg(long)]
    pub json: bool,
    /// Read a recorded GPU state (JSON, docs/health.md) instead of NVML
    #[arg(long, value_name = "FILE")]
    pub fixture: Option<PathBuf>,
    /// Slurm node name [default: $SLURMD_NODENAME, else the fixture's node,
    /// else the short host name]
    #[arg(long, value_name = "NAME")]
    pub node: Option<String>,
    /// GPUs the node should have [default: the fixture's expected_gpus; live:
    /// Gres=gpu:N of `scontrol show node`]
    #[arg(long, value_name = "N")]
    pub expected_gpus: Option<u32>,
    /// NVML initialisation attempts before reporting "unknown" (pauses of
    /// 0.5 s, 1 s, 2 s, ... between them)
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub init_attempts: u32,
    /// Ledger for the drain event [default: `[ledger] path` of allot.toml]
    #[arg(long, value_name = "PATH")]
    pub ledger: Option<PathBuf>,
}

fn print(report: &NodeReport, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else {
        print!("{}", health::render_text(report));
    }
    Ok(())
}

/// Runs the subcommand.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    init_logging();
    let fixture = args
        .fixture
        .as_deref()
        .map(FixtureSource::load)
        .transpose()?;
    let node_name = args
        .node
        .clone()
        .or_else(|| {
            std::env::var("SLURMD_NODENAME")
                .ok()
                .filter(|s| !s.is_empty())
        })
        .or_else(|| fixture.as_ref().and_then(|f| f.node.clone()))
        .unwrap_or_else(node::local_node_name);
    // Slurm's view of the node: the expected GPU count when live, the
    // drain state when draining. A fixture replay never asks Slurm for the
    // count.
    let slurm = (fixture.is_none() || args.drain).then(|| node::show_node(&node_name));
    let expected = args
        .expected_gpus
        .or_else(|| fixture.as_ref().and_then(|f| f.expected_gpus))
        .or(match (&fixture, &slurm) {
            (None, Some(Ok(info))) => info.gres_gpus,
            _ => None,
        });

    let opened: Result<Box<dyn GpuSource>, SourceError> = match fixture {
        Some(f) => f.nvml_status().map(|()| Box::new(f) as Box<dyn GpuSource>),
        None => NvmlSource::open(args.init_attempts, Duration::from_millis(500))
            .map(|s| Box::new(s) as Box<dyn GpuSource>),
    };
    let report = match opened {
        Ok(mut source) => health::check_node(&node_name, source.as_mut(), expected),
        // NVML failing to start on a node Slurm gives GPUs, for a cause
        // that lasts (driver/library version mismatch): failed, drained.
        Err(e @ SourceError::InitFailed { .. })
            if health::init_failed_node(&node_name, expected, &e)
                .verdict
                .drains() =>
        {
            health::init_failed_node(&node_name, expected, &e)
        }
        Err(e) => return source_error(&node_name, expected, e, args.json),
    };
    print(&report, args.json)?;
    if !report.verdict.drains() {
        return Ok(ExitCode::SUCCESS);
    }
    if args.drain {
        drain(args, &report, slurm);
    }
    Ok(ExitCode::from(1))
}

/// No NVML: say so, exit 0. NVML failing to initialise: "unknown", exit 0
/// (never drained).
fn source_error(
    node: &str,
    expected: Option<u32>,
    e: SourceError,
    json: bool,
) -> anyhow::Result<ExitCode> {
    match e {
        SourceError::Absent(_) => {
            if json {
                let v = serde_json::json!({ "node": node, "verdict": "no_nvml", "note": e.to_string() });
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                println!("node {node}: {e}");
            }
        }
        SourceError::InitFailed { .. } => {
            let r = health::unknown_node(node, expected, &e.to_string());
            print(&r, json)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn drain(args: &Args, report: &NodeReport, slurm: Option<Result<node::NodeInfo, String>>) {
    let Some(reason) = health::drain_reason(report) else {
        return;
    };
    if let Some(Ok(info)) = &slurm {
        if info.draining() {
            tracing::info!(node = %report.node, state = %info.state, "already draining or drained; not drained again ({reason})");
            return;
        }
    }
    if let Err(e) = node::drain(&report.node, &reason) {
        tracing::error!(node = %report.node, "cannot drain: {e}");
        return;
    }
    tracing::warn!(node = %report.node, "drained: {reason}");
    let (gpu, serial, _) = health::first_failure(report).unwrap_or((None, None, String::new()));
    let event = Event {
        time: jiff::Timestamp::now().as_second(),
        node: report.node.clone(),
        kind: EventKind::Health,
        since: None,
        job_id: None,
        gpu,
        serial,
        reason,
    };
    let path = match &args.ledger {
        Some(p) => p.clone(),
        None => match common::load(&args.config.path()) {
            Ok(c) => PathBuf::from(c.ledger_path),
            Err(e) => {
                tracing::info!(
                    "drain event not recorded in the ledger (no allot.toml here: {e:#})"
                );
                return;
            }
        },
    };
    match append_event(&path, &event) {
        Ok(_) => tracing::info!(ledger = %path.display(), "drain event recorded"),
        Err(e) => tracing::info!("drain event not recorded in the ledger: {e}"),
    }
}
