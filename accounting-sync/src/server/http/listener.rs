//! The listener: [`serve`] binds the address, one accept thread hands each
//! connection to a bounded queue (a full queue, or a client over its share
//! of connections, is answered 503 at once), the workers read the head
//! within its deadline, call the handler (a panic is a 500) and write the
//! answer within its own, then linger until the client closes.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::request::{parse_head_len, HttpError, Method, Request};
use super::response::{write_response, Response};
use super::{Handler, Limits};

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
