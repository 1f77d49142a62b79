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

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The longest request target (path and query) accepted, in bytes; longer
/// is answered 414.
pub const MAX_TARGET_BYTES: usize = 2048;

/// The most header lines a request head may have; more is answered 431.
pub const MAX_HEADERS: usize = 64;

/// The `Content-Security-Policy` of every `text/html` response.
pub const HTML_CSP: &str =
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'";

/// How long the accept thread may spend writing a 503 to a connection it
/// cannot queue, in seconds (a fresh socket's send buffer takes the few
/// bytes at once; this only bounds a pathological peer).
pub const BUSY_WRITE_TIMEOUT: Duration = Duration::from_millis(200);

/// After a response, how long a worker waits for the client to close its
/// side (reading and discarding what it still sends, at most
/// [`LINGER_BYTES`]) before closing, in seconds. Closing with unread input
/// would make the kernel reset the connection, and a reset can destroy the
/// response before the client reads it.
pub const LINGER: Duration = Duration::from_millis(250);

/// The most bytes read and discarded while lingering (see [`LINGER`]).
pub const LINGER_BYTES: usize = 64 * 1024;

/// The request methods served. Any other is answered 405 with
/// `Allow: GET, HEAD`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `GET`.
    Get,
    /// `HEAD`: answered like `GET`, without the body.
    Head,
}

/// A parsed request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// GET or HEAD.
    pub method: Method,
    /// The raw path, not percent-decoded, without the query: starts with
    /// `/`, holds no control character.
    pub path: String,
    /// The raw query (after the first `?`, not decoded), if any.
    pub query: Option<String>,
    /// The header lines in order: names lower-cased, values as sent
    /// (decoded as UTF-8, invalid bytes replaced).
    pub headers: Vec<(String, String)>,
}

impl Request {
    /// The value of the first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The value of the first `key=value` pair of the query whose decoded
    /// key is `key`, percent-decoded with `+` read as a space (invalid
    /// UTF-8 replaced, a `%` not followed by two hex digits kept as is). A
    /// key without `=` has the empty value.
    pub fn query_param(&self, key: &str) -> Option<String> {
        self.query_pairs()
            .find(|(k, _)| form_decode(k) == key)
            .map(|(_, v)| form_decode(v))
    }

    /// The query's `key=value` pairs as written (not decoded), in order;
    /// empty pairs left out, a key without `=` with the empty value.
    fn query_pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.query
            .as_deref()
            .unwrap_or("")
            .split('&')
            .filter(|pair| !pair.is_empty())
            .map(|pair| pair.split_once('=').unwrap_or((pair, "")))
    }

    /// Why the query does not fit an endpoint that takes the parameters
    /// `allowed` (each at most once): the first unknown or repeated key, as
    /// a message naming the ones it takes. `None` when it fits (or has no
    /// query).
    pub fn query_misfit(&self, allowed: &[&str]) -> Option<String> {
        let mut seen: Vec<String> = Vec::new();
        for (key, _) in self.query_pairs() {
            let key = form_decode(key);
            let takes = || allowed.join(", ");
            if !allowed.contains(&key.as_str()) {
                return Some(if allowed.is_empty() {
                    format!("{key:?}: this endpoint takes no query parameters")
                } else {
                    format!("{key:?} is not a parameter here: it takes {}", takes())
                });
            }
            if seen.contains(&key) {
                return Some(format!(
                    "{key} is given twice: give each of {} at most once",
                    takes()
                ));
            }
            seen.push(key);
        }
        None
    }
}

/// Percent-decodes `s` with `+` as a space (`application/x-www-form-urlencoded`).
fn form_decode(s: &str) -> String {
    fn hex(b: u8) -> Option<u8> {
        match b {
            b'0'..=b'9' => Some(b - b'0'),
            b'a'..=b'f' => Some(b - b'a' + 10),
            b'A'..=b'F' => Some(b - b'A' + 10),
            _ => None,
        }
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let digit = |j: usize| b.get(j).and_then(|c| hex(*c));
                if let (Some(h), Some(l)) = (digit(i + 1), digit(i + 2)) {
                    out.push(h << 4 | l);
                    i += 3;
                    continue;
                }
                out.push(b'%');
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A response to write: status, `Content-Type`, body and extra headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The status code (100 to 999; anything else is written as 500).
    pub status: u16,
    /// The `Content-Type` header's value.
    pub content_type: String,
    /// The body (not sent to HEAD requests; its length is always the
    /// `Content-Length`).
    pub body: Vec<u8>,
    /// Extra headers. `Content-Length`, `Content-Type` and `Connection`
    /// here are ignored (the server writes its own); one named
    /// `Cache-Control` or `Content-Security-Policy` replaces the default.
    /// Headers whose name or value holds CR, LF or NUL are dropped.
    pub headers: Vec<(String, String)>,
}

impl Response {
    fn new(status: u16, content_type: &str, body: Vec<u8>) -> Response {
        Response {
            status,
            content_type: content_type.to_string(),
            body,
            headers: Vec::new(),
        }
    }

    /// A `text/plain; charset=utf-8` response.
    pub fn text(status: u16, body: impl Into<String>) -> Response {
        Response::new(
            status,
            "text/plain; charset=utf-8",
            body.into().into_bytes(),
        )
    }

    /// A `text/html; charset=utf-8` response (sent with [`HTML_CSP`]).
    pub fn html(status: u16, body: String) -> Response {
        Response::new(status, "text/html; charset=utf-8", body.into_bytes())
    }

    /// An `application/json` response.
    pub fn json(status: u16, body: String) -> Response {
        Response::new(status, "application/json", body.into_bytes())
    }

    /// A `303 See Other` to `location` (a CR, LF or NUL in it drops the
    /// header; see [`Response::headers`]).
    pub fn redirect(location: &str) -> Response {
        Response::text(303, format!("see {location}\n")).with_header("Location", location)
    }

    /// This response with the header `name: value` added.
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Response {
        self.headers.push((name.into(), value.into()));
        self
    }
}

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

/// Why a request was refused before (or instead of) the handler; each has
/// its status ([`HttpError::status`]) and response ([`HttpError::response`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    /// Not an HTTP/1.x request head, or a target that is not an absolute
    /// path free of control characters: 400.
    #[error("malformed request: {0}")]
    Malformed(String),
    /// The request target is longer than [`MAX_TARGET_BYTES`]: 414.
    #[error("request target over {MAX_TARGET_BYTES} bytes")]
    UriTooLong,
    /// The head is larger than [`Limits::max_head_bytes`] or has more than
    /// [`MAX_HEADERS`] header lines: 431.
    #[error("request head too large")]
    HeadTooLarge,
    /// A method other than GET or HEAD: 405, with `Allow: GET, HEAD`.
    #[error("method {0} not allowed: only GET and HEAD")]
    MethodNotAllowed(String),
    /// A request with a body (`Content-Length` above 0, or any
    /// `Transfer-Encoding`): 413.
    #[error("request bodies are not accepted")]
    BodyNotAllowed,
    /// The head did not arrive within [`Limits::read_timeout`]: 408.
    #[error("request head not received in time")]
    Timeout,
    /// Every worker busy and the queue full: 503.
    #[error("server busy")]
    Busy,
}

impl HttpError {
    /// The status code that answers this error.
    pub fn status(&self) -> u16 {
        match self {
            HttpError::Malformed(_) => 400,
            HttpError::UriTooLong => 414,
            HttpError::HeadTooLarge => 431,
            HttpError::MethodNotAllowed(_) => 405,
            HttpError::BodyNotAllowed => 413,
            HttpError::Timeout => 408,
            HttpError::Busy => 503,
        }
    }

    /// The plain-text response that answers this error (405 adds
    /// `Allow: GET, HEAD`; 503 adds `Retry-After: 1`).
    pub fn response(&self) -> Response {
        let r = Response::text(self.status(), format!("{self}\n"));
        match self {
            HttpError::MethodNotAllowed(_) => r.with_header("Allow", "GET, HEAD"),
            HttpError::Busy => r.with_header("Retry-After", "1"),
            _ => r,
        }
    }
}

/// Parses a request head from the start of `bytes`: `Ok(None)` while it is
/// incomplete (read more bytes and call again with all of them), the
/// request once the blank line that ends it is in. Bytes after the head
/// are ignored.
///
/// # Errors
/// The refusals of [`HttpError`] except `Timeout` and `Busy`: a head over
/// `limits.max_head_bytes` bytes (including an incomplete one already that
/// long) is `HeadTooLarge`.
pub fn parse_head(bytes: &[u8], limits: &Limits) -> Result<Option<Request>, HttpError> {
    Ok(parse_head_len(bytes, limits)?.map(|(req, _)| req))
}

/// [`parse_head`], also giving the head's length in bytes (where the body,
/// if one were accepted, would start).
///
/// # Errors
/// As [`parse_head`].
pub fn parse_head_len(
    bytes: &[u8],
    limits: &Limits,
) -> Result<Option<(Request, usize)>, HttpError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut raw = httparse::Request::new(&mut headers);
    let len = match raw.parse(bytes) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            return if bytes.len() >= limits.max_head_bytes {
                Err(HttpError::HeadTooLarge)
            } else {
                Ok(None)
            };
        }
        Err(httparse::Error::TooManyHeaders) => return Err(HttpError::HeadTooLarge),
        Err(e) => {
            // An error past the size limit is the size's fault first.
            return Err(if bytes.len() > limits.max_head_bytes {
                HttpError::HeadTooLarge
            } else {
                HttpError::Malformed(e.to_string())
            });
        }
    };
    if len > limits.max_head_bytes {
        return Err(HttpError::HeadTooLarge);
    }
    // Complete: httparse has set the method, target and version.
    let method = match raw.method.unwrap_or("") {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        other => {
            let shown: String = other.chars().take(32).collect();
            return Err(HttpError::MethodNotAllowed(shown));
        }
    };
    let target = raw.path.unwrap_or("");
    if target.len() > MAX_TARGET_BYTES {
        return Err(HttpError::UriTooLong);
    }
    if !target.starts_with('/') {
        return Err(HttpError::Malformed(
            "the request target must be a path starting with /".into(),
        ));
    }
    if target.chars().any(char::is_control) {
        return Err(HttpError::Malformed(
            "control character in the request target".into(),
        ));
    }
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p.to_string(), Some(q.to_string())),
        None => (target.to_string(), None),
    };
    let mut out = Vec::with_capacity(raw.headers.len());
    for h in raw.headers.iter() {
        let name = h.name.to_ascii_lowercase();
        let value = String::from_utf8_lossy(h.value).into_owned();
        if name == "transfer-encoding" {
            return Err(HttpError::BodyNotAllowed);
        }
        if name == "content-length" {
            match value.trim().parse::<u64>() {
                Ok(0) => {}
                Ok(_) => return Err(HttpError::BodyNotAllowed),
                Err(_) => return Err(HttpError::Malformed("invalid Content-Length".into())),
            }
        }
        out.push((name, value));
    }
    Ok(Some((
        Request {
            method,
            path,
            query,
            headers: out,
        },
        len,
    )))
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        414 => "URI Too Long",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        _ => "",
    }
}

/// A header name or value safe to write: no CR, LF or NUL (and a name that
/// is a non-empty token without `:` or spaces).
fn header_ok(name: &str, value: &str) -> bool {
    let bad = |c: char| matches!(c, '\r' | '\n' | '\0');
    !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_graphic() && b != b':')
        && !value.chars().any(bad)
}

/// Writes `resp` as an HTTP/1.1 response with `Connection: close` and the
/// default headers (see the module documentation); `head_only` leaves the
/// body out (for HEAD), the headers unchanged.
///
/// # Errors
/// Those of `w`.
pub fn write_response(w: &mut impl Write, resp: &Response, head_only: bool) -> io::Result<()> {
    let status = if (100..=999).contains(&resp.status) {
        resp.status
    } else {
        500
    };
    let content_type = if header_ok("Content-Type", &resp.content_type) {
        resp.content_type.as_str()
    } else {
        "application/octet-stream"
    };
    let has = |name: &str| {
        resp.headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case(name))
    };
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         X-Content-Type-Options: nosniff\r\nConnection: close\r\n",
        reason(status),
        resp.body.len()
    );
    if !has("cache-control") {
        head.push_str("Cache-Control: no-store\r\n");
    }
    if content_type.to_ascii_lowercase().starts_with("text/html") && !has("content-security-policy")
    {
        head.push_str("Content-Security-Policy: ");
        head.push_str(HTML_CSP);
        head.push_str("\r\n");
    }
    for (k, v) in &resp.headers {
        let ours = [
            "content-length",
            "content-type",
            "connection",
            "x-content-type-options",
        ];
        if ours.iter().any(|o| k.eq_ignore_ascii_case(o)) {
            continue;
        }
        if !header_ok(k, v) {
            tracing::debug!(header = %k.escape_debug(), "http: dropped a header with CR, LF or NUL");
            continue;
        }
        head.push_str(k);
        head.push_str(": ");
        head.push_str(v);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    if head_only || resp.body.is_empty() {
        w.write_all(head.as_bytes())?;
    } else {
        let mut all = head.into_bytes();
        all.extend_from_slice(&resp.body);
        w.write_all(&all)?;
    }
    w.flush()
}

/// A running server. Dropping it (or [`Server::shutdown`]) stops
/// accepting: keep it for as long as it should serve. Connections already
/// taken are finished by their workers, which then end.
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl Server {
    /// The bound address (with the port picked when asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting and waits for the accept thread to end.
    pub fn shutdown(mut self) {
        self.stop_accepting();
    }

    fn stop_accepting(&mut self) {
        let Some(accept) = self.accept.take() else {
            return;
        };
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocked accept() with a connection of our own.
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        match TcpStream::connect_timeout(&wake, Duration::from_secs(1)) {
            Ok(_) => {
                let _ = accept.join();
            }
            // The thread ends at the next connection it accepts.
            Err(e) => tracing::debug!(%wake, "http: cannot wake the accept thread: {e}"),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop_accepting();
    }
}

/// Binds `addr` (before returning: a taken port is an error here) and
/// serves it with `handler` from one accept thread (`{thread_name}-accept`)
/// and `limits.workers` worker threads (`{thread_name}-{i}`), within
/// `limits`.
///
/// # Errors
/// The address cannot be bound, or a thread cannot be started.
pub fn serve(
    addr: SocketAddr,
    limits: Limits,
    handler: Handler,
    thread_name: &str,
) -> io::Result<Server> {
    let listener = TcpListener::bind(addr)?;
    let bound = listener.local_addr()?;
    let limits = Arc::new(limits);
    let (tx, rx) = sync_channel::<(TcpStream, Slot)>(limits.max_queued);
    let clients: Clients = Arc::default();
    let rx = Arc::new(Mutex::new(rx));
    for i in 0..limits.workers.max(1) {
        let (rx, limits, handler) = (Arc::clone(&rx), Arc::clone(&limits), Arc::clone(&handler));
        std::thread::Builder::new()
            .name(format!("{thread_name}-{i}"))
            .spawn(move || worker(&rx, &limits, &handler))?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = Arc::clone(&stop);
    let accept = std::thread::Builder::new()
        .name(format!("{thread_name}-accept"))
        .spawn(move || {
            for conn in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    break;
                }
                let stream = match conn {
                    Ok(s) => s,
                    Err(e) => {
                        // Out of descriptors and the like: do not spin.
                        tracing::debug!("http: accept: {e}");
                        std::thread::sleep(Duration::from_millis(50));
                        continue;
                    }
                };
                let Some(slot) = Slot::take(&clients, &stream, limits.max_per_client) else {
                    busy(stream);
                    continue;
                };
                match tx.try_send((stream, slot)) {
                    Ok(()) => {}
                    Err(TrySendError::Full((stream, slot))) => {
                        drop(slot);
                        busy(stream);
                    }
                    Err(TrySendError::Disconnected(_)) => break,
                }
            }
        })?;
    Ok(Server {
        addr: bound,
        stop,
        accept: Some(accept),
    })
}

/// Open connections per client address.
type Clients = Arc<Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>;

/// One open connection of a client address, counted until dropped.
struct Slot {
    clients: Clients,
    ip: Option<std::net::IpAddr>,
}

impl Slot {
    /// A slot for `stream`'s client, `None` when it has `max` open already.
    fn take(clients: &Clients, stream: &TcpStream, max: usize) -> Option<Slot> {
        let ip = stream.peer_addr().ok().map(|a| a.ip());
        if let Some(ip) = ip {
            let mut c = clients.lock().unwrap_or_else(|e| e.into_inner());
            let n = c.entry(ip).or_insert(0);
            if *n >= max.max(1) {
                return None;
            }
            *n += 1;
        }
        Some(Slot {
            clients: Arc::clone(clients),
            ip,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(ip) = self.ip {
            let mut c = self.clients.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(n) = c.get_mut(&ip) {
                *n -= 1;
                if *n == 0 {
                    c.remove(&ip);
                }
            }
        }
    }
}

/// Connections refused busy since the last warning, and when it was
/// (epoch s): a warning at most once a minute says how many.
static REFUSED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static LAST_WARNING: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

/// Answers 503 on the accept thread and closes, without reading the request.
fn busy(mut stream: TcpStream) {
    let peer = stream.peer_addr().ok();
    let refused = REFUSED.fetch_add(1, Ordering::Relaxed) + 1;
    let now = jiff::Timestamp::now().as_second();
    let last = LAST_WARNING.load(Ordering::Relaxed);
    if now - last >= 60
        && LAST_WARNING
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        REFUSED.store(0, Ordering::Relaxed);
        tracing::warn!(
            refused,
            last = ?peer,
            "http: refused connections (503): every worker busy, or too many open from one client; slow or many clients?"
        );
    }
    let _ = stream.set_write_timeout(Some(BUSY_WRITE_TIMEOUT));
    let resp = HttpError::Busy.response();
    if let Err(e) = write_response(&mut stream, &resp, false) {
        tracing::debug!(?peer, "http: writing 503: {e}");
    }
    let _ = stream.shutdown(Shutdown::Write);
    // Discard what already arrived so the close is not a reset; never wait.
    if stream.set_nonblocking(true).is_ok() {
        let mut sink = [0u8; 4096];
        for _ in 0..4 {
            if !matches!(stream.read(&mut sink), Ok(n) if n > 0) {
                break;
            }
        }
    }
}

fn worker(rx: &Mutex<Receiver<(TcpStream, Slot)>>, limits: &Limits, handler: &Handler) {
    loop {
        let next = rx.lock().unwrap_or_else(|e| e.into_inner()).recv();
        let Ok((stream, _slot)) = next else {
            return; // the accept thread ended
        };
        // Nothing below should panic; if it does, the worker still lives.
        if catch_unwind(AssertUnwindSafe(|| connection(stream, limits, handler))).is_err() {
            tracing::error!("http: a connection's handling panicked");
        }
    }
}

/// A nonzero timeout (std refuses zero).
fn nonzero(d: Duration) -> Duration {
    d.max(Duration::from_millis(1))
}

/// Reads the head within the deadline; `Ok(None)`: the client closed
/// before sending anything, or an I/O error (logged).
fn read_head(
    stream: &mut TcpStream,
    limits: &Limits,
) -> Result<Option<(Request, usize)>, HttpError> {
    let deadline = Instant::now() + limits.read_timeout;
    let mut buf: Vec<u8> = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(HttpError::Timeout);
        }
        if let Err(e) = stream.set_read_timeout(Some(nonzero(left))) {
            tracing::debug!("http: set_read_timeout: {e}");
            return Ok(None);
        }
        // parse_head refuses a partial head of max_head_bytes, so room > 0.
        let room = limits.max_head_bytes.saturating_sub(buf.len()).max(1);
        let want = room.min(chunk.len());
        match stream.read(&mut chunk[..want]) {
            Ok(0) if buf.is_empty() => return Ok(None),
            Ok(0) => {
                return Err(HttpError::Malformed(
                    "connection closed inside the request head".into(),
                ))
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(HttpError::Timeout)
            }
            Err(e) => {
                tracing::debug!("http: reading the request head: {e}");
                return Ok(None);
            }
        }
        if let Some(done) = parse_head_len(&buf, limits)? {
            return Ok(Some(done));
        }
    }
}

/// Writes through a stream with one deadline for all the writes.
struct DeadlineWriter<'a> {
    stream: &'a TcpStream,
    deadline: Instant,
}

impl Write for DeadlineWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "response not written in time",
            ));
        }
        self.stream.set_write_timeout(Some(nonzero(left)))?;
        let mut s = self.stream;
        s.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn connection(mut stream: TcpStream, limits: &Limits, handler: &Handler) {
    let peer = stream.peer_addr().ok();
    let (resp, head_only) = match read_head(&mut stream, limits) {
        Ok(None) => return,
        Ok(Some((req, _))) => {
            let head_only = req.method == Method::Head;
            match catch_unwind(AssertUnwindSafe(|| handler(&req))) {
                Ok(resp) => (resp, head_only),
                Err(_) => {
                    tracing::error!(?peer, path = %req.path, "http: the handler panicked");
                    (
                        Response::text(500, "internal error: the handler panicked\n"),
                        head_only,
                    )
                }
            }
        }
        Err(e) => {
            tracing::debug!(?peer, "http: refused: {e}");
            (e.response(), false)
        }
    };
    let mut w = DeadlineWriter {
        stream: &stream,
        deadline: Instant::now() + limits.write_timeout,
    };
    if let Err(e) = write_response(&mut w, &resp, head_only) {
        tracing::debug!(?peer, "http: writing the response: {e}");
        return;
    }
    // Close gracefully: FIN, then discard what the client still sends
    // until it closes too, for a short while.
    let _ = stream.shutdown(Shutdown::Write);
    let linger_end = Instant::now() + LINGER;
    let mut sink = [0u8; 4096];
    let mut discarded = 0;
    while discarded < LINGER_BYTES {
        let left = linger_end.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(nonzero(left))).is_err() {
            break;
        }
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => discarded += n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn short() -> Limits {
        Limits {
            read_timeout: Duration::from_millis(300),
            write_timeout: Duration::from_secs(1),
            ..Limits::default()
        }
    }

    fn echo() -> Handler {
        Arc::new(|req: &Request| match req.path.as_str() {
            "/panic" => panic!("asked to"),
            "/page" => Response::html(200, "<p>hi</p>".into()),
            _ => Response::text(
                200,
                format!(
                    "{:?} {} {:?} q={:?}\n",
                    req.method,
                    req.path,
                    req.query,
                    req.query_param("x")
                ),
            ),
        })
    }

    fn start(limits: Limits) -> Server {
        serve("127.0.0.1:0".parse().unwrap(), limits, echo(), "test-http").unwrap()
    }

    /// Sends `raw`, reads the whole answer: (status, head, body).
    fn exchange(addr: SocketAddr, raw: &[u8]) -> (u16, String, Vec<u8>) {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        // A peer that closed early (413, 431) may refuse the rest.
        let _ = s.write_all(raw);
        read_answer(&mut s)
    }

    fn read_answer(s: &mut TcpStream) -> (u16, String, Vec<u8>) {
        let mut all = Vec::new();
        s.read_to_end(&mut all).unwrap();
        let split = all
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("a complete head")
            + 4;
        let head = String::from_utf8(all[..split].to_vec()).unwrap();
        let status = head[9..12].parse().unwrap();
        (status, head, all[split..].to_vec())
    }

    fn has(head: &str, line: &str) -> bool {
        head.lines().any(|l| l.eq_ignore_ascii_case(line))
    }

    #[test]
    fn get_is_answered_with_the_default_headers() {
        let server = start(short());
        let (status, head, body) = exchange(
            server.local_addr(),
            b"GET /a/b?x=1%2F2+3 HTTP/1.1\r\nHost: x\r\n\r\n",
        );
        assert_eq!(status, 200, "{head}");
        let body = String::from_utf8(body).unwrap();
        assert_eq!(body, "Get /a/b Some(\"x=1%2F2+3\") q=Some(\"1/2 3\")\n");
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert!(
            has(&head, &format!("Content-Length: {}", body.len())),
            "{head}"
        );
        assert!(
            has(&head, "Content-Type: text/plain; charset=utf-8"),
            "{head}"
        );
        assert!(has(&head, "Cache-Control: no-store"), "{head}");
        assert!(has(&head, "X-Content-Type-Options: nosniff"), "{head}");
        assert!(has(&head, "Connection: close"), "{head}");
        assert!(!head.contains("Content-Security-Policy"), "{head}");
        let (status, head, _) = exchange(server.local_addr(), b"GET /page HTTP/1.0\r\n\r\n");
        assert_eq!(status, 200);
        assert!(
            has(&head, &format!("Content-Security-Policy: {HTML_CSP}")),
            "{head}"
        );
    }

    #[test]
    fn head_gets_the_headers_without_the_body() {
        let server = start(short());
        let (_, get_head, get_body) = exchange(server.local_addr(), b"GET /page HTTP/1.1\r\n\r\n");
        let (status, head, body) = exchange(server.local_addr(), b"HEAD /page HTTP/1.1\r\n\r\n");
        assert_eq!(status, 200);
        assert!(body.is_empty());
        assert_eq!(head, get_head);
        assert!(has(&head, &format!("Content-Length: {}", get_body.len())));
    }

    #[test]
    fn post_is_405_with_allow() {
        let server = start(short());
        let (status, head, _) =
            exchange(server.local_addr(), b"POST / HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(status, 405, "{head}");
        assert!(has(&head, "Allow: GET, HEAD"), "{head}");
        let (status, _, _) = exchange(server.local_addr(), b"get / HTTP/1.1\r\n\r\n");
        assert_eq!(status, 405, "methods are case-sensitive");
    }

    #[test]
    fn a_body_is_413() {
        let server = start(short());
        let (status, _, _) = exchange(
            server.local_addr(),
            b"GET / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello",
        );
        assert_eq!(status, 413);
        let (status, _, _) = exchange(
            server.local_addr(),
            b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        );
        assert_eq!(status, 413);
        let (status, _, _) = exchange(
            server.local_addr(),
            b"GET / HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
        );
        assert_eq!(status, 200);
    }

    #[test]
    fn a_10_kib_header_is_431() {
        let server = start(short());
        let mut raw = b"GET / HTTP/1.1\r\nX-Big: ".to_vec();
        raw.resize(raw.len() + 10 * 1024, b'a');
        raw.extend_from_slice(b"\r\n\r\n");
        let (status, _, _) = exchange(server.local_addr(), &raw);
        assert_eq!(status, 431);
    }

    #[test]
    fn garbage_is_400() {
        let server = start(short());
        let (status, _, _) = exchange(
            server.local_addr(),
            b"\x16\x03\x01\x02\x00\x01\x00\xff\r\n\r\n",
        );
        assert_eq!(status, 400);
        let (status, _, _) = exchange(server.local_addr(), b"GET http://x/ HTTP/1.1\r\n\r\n");
        assert_eq!(status, 400);
        let (status, _, _) = exchange(server.local_addr(), b"GET / HTTP/1.1\r\nHost\r\n\r\n");
        assert_eq!(status, 400);
    }

    #[test]
    fn a_stalled_head_is_408_within_the_timeout() {
        let server = start(short());
        let t = Instant::now();
        let (status, _, _) = exchange(server.local_addr(), b"GET / HT");
        let took = t.elapsed();
        assert_eq!(status, 408);
        assert!(took >= Duration::from_millis(250), "{took:?}");
        assert!(took < Duration::from_millis(1500), "{took:?}");
    }

    #[test]
    fn a_trickled_head_still_ends_at_the_deadline() {
        let server = start(short());
        let mut s = TcpStream::connect(server.local_addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let t = Instant::now();
        s.write_all(b"GET /").unwrap();
        let mut w = s.try_clone().unwrap();
        // One byte every 20 ms: each read succeeds well within any
        // per-read timeout; only the whole-head deadline ends it.
        let trickle = std::thread::spawn(move || {
            while t.elapsed() < Duration::from_secs(2) {
                if w.write_all(b"a").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let (status, _, _) = read_answer(&mut s);
        let took = t.elapsed();
        assert_eq!(status, 408);
        assert!(took < Duration::from_millis(1500), "{took:?}");
        drop(s);
        trickle.join().unwrap();
    }

    #[test]
    fn a_panicking_handler_is_500_and_the_worker_lives_on() {
        let server = start(Limits {
            workers: 1,
            ..short()
        });
        let (status, _, _) = exchange(server.local_addr(), b"GET /panic HTTP/1.1\r\n\r\n");
        assert_eq!(status, 500);
        let (status, _, _) = exchange(server.local_addr(), b"GET / HTTP/1.1\r\n\r\n");
        assert_eq!(status, 200);
    }

    #[test]
    fn a_full_queue_is_503_at_once() {
        let server = start(Limits {
            workers: 1,
            max_queued: 1,
            max_per_client: 100,
            read_timeout: Duration::from_millis(800),
            ..short()
        });
        let addr = server.local_addr();
        // Holds the one worker until its read timeout.
        let mut stalled = TcpStream::connect(addr).unwrap();
        stalled.write_all(b"GET / HT").unwrap();
        std::thread::sleep(Duration::from_millis(100));
        // Waits in the queue.
        let mut queued = TcpStream::connect(addr).unwrap();
        queued.write_all(b"GET /q HTTP/1.1\r\n\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let t = Instant::now();
        for _ in 0..3 {
            let (status, head, _) = exchange(addr, b"GET / HTTP/1.1\r\n\r\n");
            assert_eq!(status, 503, "{head}");
            assert!(has(&head, "Retry-After: 1"), "{head}");
        }
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "{:?}",
            t.elapsed()
        );
        // Once the stalled client times out, the queued one is served.
        stalled
            .set_read_timeout(Some(Duration::from_secs(3)))
            .unwrap();
        assert_eq!(read_answer(&mut stalled).0, 408);
        queued
            .set_read_timeout(Some(Duration::from_secs(3)))
            .unwrap();
        assert_eq!(read_answer(&mut queued).0, 200);
    }

    #[test]
    fn one_client_holds_at_most_max_per_client_connections() {
        let server = start(Limits {
            workers: 4,
            max_per_client: 2,
            read_timeout: Duration::from_millis(800),
            ..short()
        });
        let addr = server.local_addr();
        // Two slow connections of this client hold two of four workers.
        let slow: Vec<TcpStream> = (0..2)
            .map(|_| {
                let mut s = TcpStream::connect(addr).unwrap();
                s.write_all(b"GET / HT").unwrap();
                s
            })
            .collect();
        std::thread::sleep(Duration::from_millis(100));
        // A third is refused at once though workers are free...
        let (status, _, _) = exchange(addr, b"GET / HTTP/1.1\r\n\r\n");
        assert_eq!(status, 503);
        // ... and served again once the slow ones are answered (408).
        for mut s in slow {
            s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            assert_eq!(read_answer(&mut s).0, 408);
        }
        std::thread::sleep(Duration::from_millis(300));
        let (status, _, _) = exchange(addr, b"GET / HTTP/1.1\r\n\r\n");
        assert_eq!(status, 200);
    }

    #[test]
    fn a_taken_port_is_an_error_and_shutdown_stops_accepting() {
        let server = start(short());
        let addr = server.local_addr();
        assert!(serve(addr, short(), echo(), "test-http").is_err());
        server.shutdown();
        assert!(TcpStream::connect(addr).is_err());
    }

    #[test]
    fn query_params_are_decoded() {
        let req = parse_head(
            b"GET /p?a=1&b=x%2Fy+z&c&d=%zz&e=%C3%A9&f=50%&a=2&%6B=k&g=%ff HTTP/1.1\r\n\r\n",
            &Limits::default(),
        )
        .unwrap()
        .unwrap();
        assert_eq!(req.path, "/p");
        assert_eq!(req.query_param("a").as_deref(), Some("1"));
        assert_eq!(req.query_param("b").as_deref(), Some("x/y z"));
        assert_eq!(req.query_param("c").as_deref(), Some(""));
        assert_eq!(req.query_param("d").as_deref(), Some("%zz"));
        assert_eq!(req.query_param("e").as_deref(), Some("é"));
        assert_eq!(req.query_param("f").as_deref(), Some("50%"));
        assert_eq!(req.query_param("k").as_deref(), Some("k"));
        assert_eq!(req.query_param("g").as_deref(), Some("\u{fffd}"));
        assert_eq!(req.query_param("missing"), None);
        let bare = parse_head(b"GET /p HTTP/1.1\r\n\r\n", &Limits::default())
            .unwrap()
            .unwrap();
        assert_eq!(bare.query, None);
        assert_eq!(bare.query_param("a"), None);
        // An endpoint's parameters: unknown and repeated keys are named.
        assert_eq!(bare.query_misfit(&[]), None);
        let misfit = |q: &[u8], allowed: &[&str]| {
            parse_head(q, &Limits::default())
                .unwrap()
                .unwrap()
                .query_misfit(allowed)
        };
        assert_eq!(misfit(b"GET /p?a=1&&b HTTP/1.1\r\n\r\n", &["a", "b"]), None);
        assert_eq!(
            misfit(b"GET /p?a=1&forcast=1 HTTP/1.1\r\n\r\n", &["a", "b"]).unwrap(),
            "\"forcast\" is not a parameter here: it takes a, b"
        );
        assert_eq!(
            misfit(b"GET /p?a=1&%61=0 HTTP/1.1\r\n\r\n", &["a", "b"]).unwrap(),
            "a is given twice: give each of a, b at most once"
        );
        assert_eq!(
            misfit(b"GET /p?x HTTP/1.1\r\n\r\n", &[]).unwrap(),
            "\"x\": this endpoint takes no query parameters"
        );
    }

    #[test]
    fn parse_head_checks_target_headers_and_size() {
        let l = Limits::default();
        let p = |b: &[u8]| parse_head(b, &l);
        assert_eq!(p(b""), Ok(None));
        assert_eq!(p(b"GET / HTTP/1.1\r\nHost: a\r\n"), Ok(None));
        let req = p(b"HEAD /x HTTP/1.1\r\nHoSt: a\r\nX-A:  b \r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(req.method, Method::Head);
        assert_eq!(req.header("host"), Some("a"));
        assert_eq!(req.header("X-A"), Some("b"));
        assert_eq!(req.headers[0].0, "host");
        assert_eq!(p(b"GET * HTTP/1.1\r\n\r\n").unwrap_err().status(), 400);
        assert_eq!(p(b"GET /\x7f HTTP/1.1\r\n\r\n").unwrap_err().status(), 400);
        assert_eq!(
            p("GET /\u{85} HTTP/1.1\r\n\r\n".as_bytes())
                .unwrap_err()
                .status(),
            400
        );
        assert_eq!(p(b"GET /\0 HTTP/1.1\r\n\r\n").unwrap_err().status(), 400);
        let long = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(MAX_TARGET_BYTES));
        assert_eq!(p(long.as_bytes()).unwrap_err().status(), 414);
        assert_eq!(
            p(b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n")
                .unwrap_err()
                .status(),
            400
        );
        let many = format!(
            "GET / HTTP/1.1\r\n{}\r\n",
            "A: b\r\n".repeat(MAX_HEADERS + 1)
        );
        assert_eq!(p(many.as_bytes()).unwrap_err().status(), 431);
        let mut big = b"GET /".to_vec();
        big.resize(l.max_head_bytes, b'a');
        assert_eq!(p(&big).unwrap_err(), HttpError::HeadTooLarge);
        // No prefix of a head is a request.
        let full = b"GET /a?b=c HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n";
        for k in 0..full.len() {
            assert_eq!(p(&full[..k]), Ok(None), "prefix {k}");
        }
        assert_eq!(parse_head_len(full, &l).unwrap().unwrap().1, full.len());
    }

    #[test]
    fn unsafe_response_headers_are_dropped() {
        let resp = Response::redirect("/x\r\nSet-Cookie: a=b")
            .with_header("X-Ok", "1")
            .with_header("Content-Length", "99")
            .with_header("Cache-Control", "max-age=60");
        let mut out = Vec::new();
        write_response(&mut out, &resp, true).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HTTP/1.1 303 See Other\r\n"), "{text}");
        assert!(!text.contains("Set-Cookie"), "{text}");
        assert!(!text.contains("Location"), "{text}");
        assert!(text.contains("X-Ok: 1\r\n"), "{text}");
        assert!(!text.contains("no-store"), "{text}");
        assert!(text.contains("Cache-Control: max-age=60\r\n"), "{text}");
        assert!(!text.contains("99"), "{text}");
        assert!(text.ends_with("\r\n\r\n"), "{text}");
        let ok = Response::redirect("/y?a=1");
        let mut out = Vec::new();
        write_response(&mut out, &ok, false).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("Location: /y?a=1\r\n"), "{text}");
        assert!(text.ends_with("\r\n\r\nsee /y?a=1\n"), "{text}");
    }
}
