//! Serving researchers' pages and JSON from the sidecar: a small, bounded,
//! read-only HTTP/1.1 server ([`http`]) on std's `TcpListener` and
//! `httparse`, with limits on connections, head size and time.
pub mod http;
