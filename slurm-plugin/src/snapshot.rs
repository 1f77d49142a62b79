//! The engine snapshot the priority and preempt plugins read.
//!
//! A background thread rebuilds a [`fairshare::Engine`] every
//! `sync.interval`, on the clock half a second after the ledger's poll
//! ([`fairshare::timer`]), and when poked (`scontrol reconfigure`, a job's
//! end: at most once a second), from the
//! current config and the ledger's charged milli-GPU-seconds per account
//! over the window (exact integers, [`fairshare::charge`]), then swaps it in atomically. Plugin calls only load the
//! current `Arc<Engine>`: no I/O, no waiting on the thread. A ledger that
//! cannot be read keeps the last usage; the error is logged once per
//! change of state (no log flood), and so is the recovery.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use arc_swap::ArcSwap;
use fairshare::{Config, Engine};

use crate::config::ConfigWatcher;

/// Seconds since the epoch, now, on slurmctld's own clock
/// ([`allot_ffi::ctld::time_now`]: the `time(2)` that stamps job start
/// and end times, so a running time judged here never exceeds the Elapsed
/// slurmctld records for it).
pub fn now() -> u64 {
    allot_ffi::ctld::time_now()
}

/// Milliseconds since the epoch on the wall clock (the clock `time(2)`
/// reads, to the millisecond).
fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Reads charged milli-unit-seconds (1000 per GPU-second by default) per
/// account in `[start, end]` (epoch seconds).
pub type UsageLoader = fn(&Config, u64, u64) -> Result<Vec<(String, f64)>, String>;

/// Builds an engine from `config`, `usage` and `now`; unknown accounts in
/// the usage are ignored (they have no budget to rank).
pub fn build(config: Arc<Config>, usage: &[(String, f64)], now: u64) -> Engine {
    Engine::from_account_usage(config, usage.iter().map(|(a, u)| (a.as_str(), *u)), now).0
}

struct Shared {
    engine: ArcSwap<Engine>,
    stop: AtomicBool,
    poke: AtomicBool,
}

/// The current engine plus the thread that keeps it fresh.
pub struct EngineSnapshot {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl EngineSnapshot {
    /// Builds the first engine (reading the ledger once, at init) and
    /// starts the refresh thread. `after_swap` runs on the thread after
    /// every rebuild (the priority plugin re-prioritises pending jobs there).
    pub fn start(
        config: Arc<ConfigWatcher>,
        load: UsageLoader,
        log_info: fn(&str),
        log_error: fn(&str),
        after_swap: fn(&Engine),
    ) -> Result<EngineSnapshot, String> {
        let cfg = config.get();
        let t = now();
        let mut usage = match load(&cfg, t.saturating_sub(cfg.window), t) {
            Ok(u) => u,
            Err(e) => {
                log_error(&format!(
                    "{e}; ranking with no usage until the ledger can be read"
                ));
                Vec::new()
            }
        };
        let shared = Arc::new(Shared {
            engine: ArcSwap::from_pointee(build(cfg, &usage, t)),
            stop: AtomicBool::new(false),
            poke: AtomicBool::new(false),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("allot-engine".into())
            .spawn(move || {
                let mut failing: Option<String> = None;
                // On the clock (fairshare::timer): both plugins rebuild at
                // the same instants, half a second after the ledger's poll.
                let due = |iv| {
                    fairshare::timer::next_tick_ms(
                        wall_ms(),
                        iv,
                        fairshare::timer::REBUILD_OFFSET_MS,
                    )
                };
                let mut next = due(config.get().sync_interval);
                let mut last = 0u64;
                while !s.stop.load(Ordering::Relaxed) {
                    let cfg = config.get();
                    let iv = cfg.sync_interval;
                    let left = next.saturating_sub(wall_ms());
                    if left > iv.max(1) * 1000 {
                        // The clock stepped back, or the interval shrank.
                        next = due(iv);
                        continue;
                    }
                    // A poke (reconfigure, a job's end) rebuilds at once,
                    // at most once a second: ends come in bursts.
                    let poked = wall_ms() >= last + 1000 && s.poke.swap(false, Ordering::Relaxed);
                    if !poked && left > 0 {
                        // Short steps: a stop or a poke is seen within 100 ms.
                        std::thread::sleep(Duration::from_millis(left.min(100)));
                        continue;
                    }
                    last = wall_ms();
                    let t = now();
                    match load(&cfg, t.saturating_sub(cfg.window), t) {
                        Ok(u) => {
                            if failing.take().is_some() {
                                log_info("ledger readable again");
                            }
                            usage = u;
                        }
                        Err(e) => {
                            if failing.as_ref() != Some(&e) {
                                log_error(&format!("{e}; keeping the last usage"));
                                failing = Some(e);
                            }
                        }
                    }
                    let mut engine = build(cfg, &usage, t);
                    // The priority band reads the leaves' entitlements now
                    // and the owed band of the pending jobs on them.
                    if let Some((load, owed)) = crate::jobs::load_now(&engine) {
                        engine = engine.with_load(load).with_owed(owed);
                    }
                    let engine = Arc::new(engine);
                    s.engine.store(engine.clone());
                    after_swap(&engine);
                    next = due(iv);
                }
            })
            .map_err(|e| format!("cannot start the engine thread: {e}"))?;
        Ok(EngineSnapshot {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// The current engine (an atomic load).
    pub fn get(&self) -> Arc<Engine> {
        self.shared.engine.load_full()
    }

    /// Rebuild now (reconfigure).
    pub fn poke(&self) {
        self.shared.poke.store(true, Ordering::Relaxed);
    }

    /// Stops the thread.
    pub fn stop(&self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.lock().ok().and_then(|mut t| t.take()) {
            let _ = t.join();
        }
    }
}

impl Drop for EngineSnapshot {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What the priority and preempt plugins each hold (each .so is its own
/// dlopen handle): the config watcher and the engine snapshot built from
/// the ledger.
pub struct EngineState {
    /// allot.toml, reloaded in the background.
    pub config: Arc<ConfigWatcher>,
    /// The current engine, rebuilt every `sync.interval`.
    pub engine: EngineSnapshot,
}

impl EngineState {
    /// Loads allot.toml ([`crate::config::start_in_slurmctld`]) and starts
    /// the engine thread over the ledger; `after_swap` runs after each rebuild.
    pub fn start(
        log_info: fn(&str),
        log_error: fn(&str),
        after_swap: fn(&Engine),
    ) -> Result<EngineState, String> {
        if allot_ledger::BUNDLED_SQLITE {
            return Err(
                "built with its own copy of SQLite (a workspace build with the `allot` \
                        binary's feature bundled-sqlite): two copies in slurmctld corrupt each \
                        other's locks; build and install the plugins alone with \
                        scripts/install-plugins"
                    .into(),
            );
        }
        let config = Arc::new(crate::config::start_in_slurmctld(log_info, log_error)?);
        let engine = EngineSnapshot::start(
            config.clone(),
            ledger_usage,
            log_info,
            log_error,
            after_swap,
        )?;
        Ok(EngineState { config, engine })
    }

    /// Stops both threads (plugin `fini()`).
    pub fn stop(&self) {
        self.engine.stop();
        self.config.stop();
    }
}

/// [`UsageLoader`] reading the SQLite ledger that `allot sync` writes (the
/// path from allot.toml's `[ledger] path`).
pub fn ledger_usage(config: &Config, start: u64, end: u64) -> Result<Vec<(String, f64)>, String> {
    let path = std::path::Path::new(&config.ledger_path);
    let reader = allot_ledger::LedgerReader::open(path).map_err(|e| e.to_string())?;
    let by_account = reader
        .charged_by_account(start as i64, end as i64)
        .map_err(|e| e.to_string())?;
    Ok(by_account.into_iter().map(|(a, s)| (a, s as f64)).collect())
}
