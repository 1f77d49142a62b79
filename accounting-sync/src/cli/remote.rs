//! Where `allot explain` and `allot report` get their answers: the ledger
//! when this user can read it (an admin, SlurmUser), else the sidecar
//! named by `[server] url` in allot.toml, asked as this user through munge
//! (allot_sync::server::auth). `allot -v` says which.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use allot_ledger::LedgerReader;
use allot_sync::server::auth;
use fairshare::Config;

use super::common::LedgerArg;

/// `allot -v`: say on stderr where answers come from.
pub static VERBOSE: AtomicBool = AtomicBool::new(false);

pub(super) fn verbose(msg: impl FnOnce() -> String) {
    if VERBOSE.load(Ordering::Relaxed) {
        eprintln!("allot: {}", msg());
    }
}

/// Where the answers come from.
pub enum Source {
    /// The ledger, read here.
    Ledger(LedgerReader),
    /// The sidecar.
    Server(Client),
}

/// Picks the source: `--ledger` or a readable ledger, else the sidecar of
/// `[server] url`.
///
/// # Errors
/// The ledger cannot be read and no `[server] url` is set (the message
/// says both and the fix); a ledger error.
pub fn source(config: &Config, ledger: &LedgerArg) -> anyhow::Result<Source> {
    let path = ledger.path(config);
    let readable = std::fs::File::open(&path);
    match (&readable, &config.server_url, &ledger.ledger) {
        (Err(e), Some(url), None) => {
            verbose(|| {
                format!(
                    "the ledger {} is not readable by you ({e}); asking the sidecar at {url}",
                    path.display()
                )
            });
            Ok(Source::Server(Client {
                url: url.clone(),
                munge_socket: config.munge_socket.clone(),
            }))
        }
        (Err(e), None, None) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            anyhow::bail!(
                "cannot read the ledger {} ({e}): it is SlurmUser's. Ask the sidecar instead: set [server] url = \"http://HOST:PORT\" in allot.toml (the address of `allot sync --listen`; docs/researchers.md), or ask an admin",
                path.display()
            )
        }
        _ => {
            verbose(|| format!("reading the ledger {}", path.display()));
            Ok(Source::Ledger(LedgerReader::open(&path)?))
        }
    }
}

/// The sidecar, asked over HTTP.
pub struct Client {
    url: String,
    munge_socket: Option<String>,
}

impl Client {
    /// The sidecar's address (`[server] url`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `GET path` (with its query), as this user: the body of a 200
    /// answer.
    ///
    /// # Errors
    /// The sidecar is unreachable, or answers an error (its message: for
    /// instance what PrivateData hides).
    pub fn get(&self, path: &str) -> anyhow::Result<String> {
        let mut req = ureq::get(&format!("{}{path}", self.url)).timeout(Duration::from_secs(30));
        // Without a credential the sidecar answers as to a browser: say so
        // always, and again beside a refusal.
        let anonymous = match auth::encode(self.munge_socket.as_deref(), path) {
            Ok(cred) => {
                verbose(|| format!("GET {}{path} as {} (munge)", self.url, whoami()));
                req = req.set("Authorization", &format!("{}{cred}", auth::SCHEME));
                None
            }
            Err(e) => {
                // Once per command, however many requests it makes.
                static WARNED: std::sync::Once = std::sync::Once::new();
                WARNED.call_once(|| {
                    eprintln!("allot: warning: asking the sidecar anonymously, so PrivateData hides what it covers: {e:#}");
                });
                Some(format!("{e:#}"))
            }
        };
        match req.call() {
            Ok(r) => Ok(clean(&r.into_string()?)),
            Err(ureq::Error::Status(code, r)) => {
                let body = r.into_string().unwrap_or_default();
                let msg = serde_json::from_str::<serde_json::Value>(&body)
                    .ok()
                    .and_then(|v| v["error"].as_str().map(str::to_string))
                    .unwrap_or(body);
                let hint = anonymous.map_or(String::new(), |e| {
                    format!(" (you asked anonymously: {e})")
                });
                anyhow::bail!(
                    "the sidecar at {} answered {code}: {}{hint}",
                    self.url,
                    clean(msg.trim())
                )
            }
            Err(e) => anyhow::bail!(
                "cannot reach the sidecar at {} ([server] url in allot.toml): {e}; is `allot sync --follow --listen` running there?",
                self.url
            ),
        }
    }
}

/// `s` without terminal control characters (a server that is not the
/// sidecar could send any).
fn clean(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_control() || *c == '\n' || *c == '\t')
        .collect()
}

fn whoami() -> String {
    // SAFETY: getuid cannot fail.
    auth::user_name(unsafe { libc::getuid() })
}
