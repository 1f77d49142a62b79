//! A bounded, read-only HTTP/1.1 server: GET and HEAD only, one request per
//! connection (`Connection: close`), no request bodies.
//!
//! [`serve`] binds a `TcpListener` and starts one accept thread and
//! [`Limits::workers`] worker threads. The accept thread hands each
//! connection to a bounded queue ([`Limits::max_queued`]); when the queue
//! is full it answers 503 at once and closes, so the connections held by
//! the process never exceed `workers + max_queued + 1`. A worker reads the
//! request head (at most [`Limits::max_head_bytes`] bytes, all of it within
//! [`Limits::read_timeout`]), parses it with `httparse` ([`parse_head`]),
//! calls the [`Handler`] (a panic answers 500; the worker lives on) and
//! writes the [`Response`] (all of it within [`Limits::write_timeout`]).
//! Read and write errors are logged at debug level and never end a worker.
//!
//! Every response carries `Content-Length`, `Content-Type`,
//! `Cache-Control: no-store`, `X-Content-Type-Options: nosniff` and
//! `Connection: close`; HTML adds a `Content-Security-Policy` that allows
//! no scripts, inline styles, `data:` images and forms to the same origin.

//!
//! By job: [`request`] (reading and refusing a request head), [`response`]
//! (writing an answer), [`listener`] (the accept thread, the bounded queue,
//! the workers, the deadlines and the lingering close). docs/hardening.md
//! says why the server is written here rather than taken from a library.

use std::sync::Arc;
use std::time::Duration;

pub mod listener;
pub mod request;
pub mod response;

pub use listener::{serve, Server, BUSY_WRITE_TIMEOUT, LINGER, LINGER_BYTES};
pub use request::{
    parse_head, parse_head_len, HttpError, Method, Request, MAX_HEADERS, MAX_TARGET_BYTES,
};
pub use response::{write_response, Response, HTML_CSP};

/// The server's bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// The largest request head (request line and headers, up to and with
    /// the blank line), in bytes; larger is answered 431. Default 8192.
    pub max_head_bytes: usize,
    /// Worker threads, each serving one connection at a time (at least 1).
    /// Default 8.
    pub workers: usize,
    /// Accepted connections waiting for a worker; one more is answered 503
    /// and closed. Default 64.
    pub max_queued: usize,
    /// Connections one client address may have open (queued or being
    /// served); one more is answered 503 at once, so a single slow client
    /// cannot hold every worker. Default 4.
    pub max_per_client: usize,
    /// The whole request head must arrive within this time from the moment
    /// a worker takes the connection, or it is answered 408 (a client
    /// trickling bytes still ends then). Default 5 s.
    pub read_timeout: Duration,
    /// The whole response must be written within this time, or the
    /// connection is dropped. Default 10 s.
    pub write_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_head_bytes: 8192,
            workers: 16,
            max_queued: 64,
            max_per_client: 4,
            read_timeout: Duration::from_secs(5),
            write_timeout: Duration::from_secs(10),
        }
    }
}

/// What answers each request. It must not block for long: a worker waits
/// on it, and a panic in it is answered 500.
pub type Handler = Arc<dyn Fn(&Request) -> Response + Send + Sync>;

#[cfg(test)]
mod tests;
