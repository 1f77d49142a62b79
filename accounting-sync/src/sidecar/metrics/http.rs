//! Serving `/metrics`: the `--listen` address (alias `--metrics-listen`)
//! and the exposition in the format the scraper asks for; the listener is
//! [`crate::server::http`], the route [`crate::server::site`].

use super::*;

/// The address of `--listen` (alias `--metrics-listen`): `ADDR:PORT` (an IP address or a
/// host name, and a port; `[::1]:9817` for IPv6), checked before anything
/// else is done.
///
/// # Errors
/// Not of that form, or a host name that does not resolve; the message
/// shows the form with an example.
pub fn listen_addr(addr: &str) -> anyhow::Result<SocketAddr> {
    use std::net::ToSocketAddrs;
    let fix = "write ADDR:PORT, e.g. 127.0.0.1:9817 (port 0 picks a free one)";
    let mut found = addr
        .to_socket_addrs()
        .map_err(|e| anyhow::anyhow!("--listen {addr:?}: not ADDR:PORT ({e}); {fix}"))?;
    found
        .next()
        .ok_or_else(|| anyhow::anyhow!("--listen {addr:?}: no address found; {fix}"))
}

impl SidecarMetrics {
    /// The metrics now, and their content type: OpenMetrics when `accept`
    /// (the request's Accept header) asks for it, else Prometheus' text
    /// format 0.0.4.
    pub fn exposition(&self, accept: Option<&str>) -> (String, &'static str) {
        let body = self.encode(jiff::Timestamp::now().as_second());
        if accept.is_some_and(|a| a.contains("application/openmetrics-text")) {
            (body, CONTENT_TYPE)
        } else {
            (to_text_format(&body), TEXT_CONTENT_TYPE)
        }
    }
}
