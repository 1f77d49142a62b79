//! Where a plugin finds `allot.toml`, and the snapshot it reads it through.
//!
//! slurmctld calls must never do I/O: the config is read at `init()` and by
//! a background thread (on a change of the file's mtime or length, or when
//! `scontrol reconfigure` pokes it), and every call reads the current
//! immutable snapshot. A file that fails to load keeps the last good
//! config running; the error is logged once per distinct error.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use fairshare::Config;

/// `ALLOT_CONF` if set, else `allot.toml` beside `slurm_conf` (the path of
/// slurm.conf), else `/etc/slurm/allot.toml`.
pub fn config_path(env_allot_conf: Option<&str>, slurm_conf: Option<&str>) -> PathBuf {
    if let Some(p) = env_allot_conf.filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    slurm_conf
        .and_then(|c| Path::new(c).parent())
        .map(|d| d.join("allot.toml"))
        .unwrap_or_else(|| PathBuf::from("/etc/slurm/allot.toml"))
}

/// Reads and validates `path`. The error names the file and every problem
/// (each with its node path / line and the fix).
pub fn load(path: &Path) -> Result<Config, String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        format!(
            "{}: cannot read: {e}; set ALLOT_CONF or put allot.toml beside slurm.conf",
            path.display()
        )
    })?;
    Config::from_toml_str(&text)
        .map_err(|e| format!("{}: {}", path.display(), e.to_string().replace('\n', "; ")))
}

/// Starts the watcher for the allot.toml of the running slurmctld
/// (`$ALLOT_CONF`, else beside its slurm.conf), checking every 5 s. The
/// error names the file and every problem, and says to restart.
pub fn start_in_slurmctld(
    log_info: fn(&str),
    log_error: fn(&str),
) -> Result<ConfigWatcher, String> {
    let path = config_path(
        std::env::var("ALLOT_CONF").ok().as_deref(),
        allot_ffi::ctld::slurm_conf_path().as_deref(),
    );
    let w = ConfigWatcher::start(path, Duration::from_secs(5), log_info, log_error)
        .map_err(|e| format!("{e}; fix the file and restart slurmctld"))?;
    log_info(&format!("loaded {}", w.path().display()));
    Ok(w)
}

/// What tells the reload thread the file changed: its mtime and its length.
/// The mtime alone misses a second write within the same timestamp tick
/// (file times are coarse, a few ms) when a check fell between the two
/// writes: an end-to-end test's restore of the file followed at once by the
/// next test's edit can leave the job_submit plugin (polled, never poked)
/// on the restored file.
fn stamp(path: &Path) -> Option<(SystemTime, u64)> {
    std::fs::metadata(path)
        .and_then(|m| Ok((m.modified()?, m.len())))
        .ok()
}

/// The current config, swapped atomically by a background reload thread.
pub struct ConfigWatcher {
    path: PathBuf,
    current: Arc<ArcSwap<Config>>,
    stop: Arc<AtomicBool>,
    poke: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl ConfigWatcher {
    /// Loads `path` (an error here is the caller's to report: a bad file at
    /// startup must stop slurmctld) and starts a thread that checks the
    /// file every `every` and reloads it on change or [`poke`](Self::poke).
    /// `log_error` receives a reload failure once per distinct message;
    /// `log_info` a successful reload.
    pub fn start(
        path: PathBuf,
        every: Duration,
        log_info: fn(&str),
        log_error: fn(&str),
    ) -> Result<ConfigWatcher, String> {
        let config = load(&path)?;
        let current = Arc::new(ArcSwap::from_pointee(config));
        let stop = Arc::new(AtomicBool::new(false));
        let poke = Arc::new(AtomicBool::new(false));
        let thread = {
            let (path, current, stop, poke) =
                (path.clone(), current.clone(), stop.clone(), poke.clone());
            std::thread::Builder::new()
                .name("allot-config".into())
                .spawn(move || {
                    let mut seen = stamp(&path);
                    let mut last_error: Option<String> = None;
                    let tick = Duration::from_millis(100);
                    let mut waited = Duration::ZERO;
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(tick);
                        waited += tick;
                        let poked = poke.swap(false, Ordering::Relaxed);
                        if !poked && waited < every {
                            continue;
                        }
                        waited = Duration::ZERO;
                        let now = stamp(&path);
                        if !poked && now == seen {
                            continue;
                        }
                        seen = now;
                        match load(&path) {
                            Ok(c) => {
                                current.store(Arc::new(c));
                                last_error = None;
                                log_info(&format!("reloaded {}", path.display()));
                            }
                            Err(e) => {
                                if last_error.as_ref() != Some(&e) {
                                    log_error(&format!("{e}; keeping the last good configuration"));
                                    last_error = Some(e);
                                }
                            }
                        }
                    }
                })
                .map_err(|e| format!("cannot start the config thread: {e}"))?
        };
        Ok(ConfigWatcher {
            path,
            current,
            stop,
            poke,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// The current config (a cheap atomic load; no I/O, no waiting).
    pub fn get(&self) -> Arc<Config> {
        self.current.load_full()
    }

    /// Asks the thread to reload now (`scontrol reconfigure`).
    pub fn poke(&self) {
        self.poke.store(true, Ordering::Relaxed);
    }

    /// Path being watched.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops the thread (plugin `fini()`).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.lock().ok().and_then(|mut t| t.take()) {
            let _ = t.join();
        }
    }
}

impl Drop for ConfigWatcher {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    const GOOD: &str = "window = \"7-0\"\n[tree.a]\nshare = 60\n[tree.b]\nshare = 40\n";

    #[test]
    fn path_resolution() {
        assert_eq!(
            config_path(Some("/x/a.toml"), Some("/etc/slurm/slurm.conf")),
            PathBuf::from("/x/a.toml")
        );
        assert_eq!(
            config_path(None, Some("/tb/etc/slurm.conf")),
            PathBuf::from("/tb/etc/allot.toml")
        );
        assert_eq!(
            config_path(Some(""), None),
            PathBuf::from("/etc/slurm/allot.toml")
        );
    }

    #[test]
    fn load_names_the_file() {
        let dir = std::env::temp_dir().join(format!("allot-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("bad.toml");
        std::fs::write(&p, "window = \"0\"\n[tree.a]\nshare = 1\n").unwrap();
        let e = load(&p).unwrap_err();
        assert!(
            e.starts_with(&p.display().to_string()) && e.contains("window"),
            "{e}"
        );
        assert!(load(&dir.join("missing.toml"))
            .unwrap_err()
            .contains("cannot read"));
    }

    static ERRORS: AtomicUsize = AtomicUsize::new(0);
    static INFOS: AtomicUsize = AtomicUsize::new(0);

    #[test]
    fn bad_reload_keeps_last_good_and_logs_once() {
        let dir = std::env::temp_dir().join(format!("allot-watch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("allot.toml");
        std::fs::write(&p, GOOD).unwrap();
        let w = ConfigWatcher::start(
            p.clone(),
            Duration::from_secs(3600),
            |_| {
                INFOS.fetch_add(1, Ordering::SeqCst);
            },
            |_| {
                ERRORS.fetch_add(1, Ordering::SeqCst);
            },
        )
        .unwrap();
        assert!(w.get().tree.leaf_of_account("a").is_some());
        std::fs::write(&p, "window = \"0\"\n").unwrap();
        for _ in 0..2 {
            w.poke();
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while w.poke.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            std::thread::sleep(Duration::from_millis(150));
        }
        assert_eq!(
            ERRORS.load(Ordering::SeqCst),
            1,
            "one log line per distinct error"
        );
        assert!(
            w.get().tree.leaf_of_account("b").is_some(),
            "last good config kept"
        );
        std::fs::write(&p, GOOD.replace("[tree.b]", "[tree.c]")).unwrap();
        w.poke();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while w.get().tree.leaf_of_account("c").is_none() {
            assert!(
                std::time::Instant::now() < deadline,
                "reload did not happen"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(INFOS.load(Ordering::SeqCst), 1);
        w.stop();
    }
}
