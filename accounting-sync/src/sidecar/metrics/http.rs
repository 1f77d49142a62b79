//! Serving `/metrics`: the `--metrics-listen` address and the small HTTP
//! server on a background thread.

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

    /// Serves `/metrics` on `addr` from a background thread (the port is
    /// bound before this returns, so a taken port is an error here).
    ///
    /// # Errors
    /// The address cannot be bound.
    pub fn serve(self: &Arc<Self>, addr: &str) -> anyhow::Result<SocketAddr> {
        let server = tiny_http::Server::http(listen_addr(addr)?).map_err(|e| {
            anyhow::anyhow!(
                "--metrics-listen {addr}: cannot listen: {e}; is another program on that port? \
                 Pick another ADDR:PORT, e.g. 127.0.0.1:9817, or port 0 for a free one"
            )
        })?;
        let bound = server
            .server_addr()
            .to_ip()
            .ok_or_else(|| anyhow::anyhow!("--metrics-listen {addr}: not an IP address"))?;
        let me = Arc::clone(self);
        std::thread::Builder::new()
            .name("allot-metrics".into())
            .spawn(move || {
                for req in server.incoming_requests() {
                    let _ = me.answer(req);
                }
            })?;
        Ok(bound)
    }

    pub(super) fn answer(&self, req: tiny_http::Request) -> std::io::Result<()> {
        use tiny_http::{Header, Method, Response};
        let header = |k: &str, v: &str| Header::from_bytes(k, v).expect("valid header");
        let path = req.url().split('?').next().unwrap_or("");
        if !matches!(req.method(), Method::Get | Method::Head) {
            return req.respond(Response::from_string("only GET\n").with_status_code(405));
        }
        match path {
            "/metrics" => {
                let body = self.encode(jiff::Timestamp::now().as_second());
                let openmetrics = req.headers().iter().any(|h| {
                    h.field.equiv("Accept")
                        && h.value.as_str().contains("application/openmetrics-text")
                });
                let (body, kind) = if openmetrics {
                    (body, CONTENT_TYPE)
                } else {
                    (to_text_format(&body), TEXT_CONTENT_TYPE)
                };
                req.respond(Response::from_string(body).with_header(header("Content-Type", kind)))
            }
            "/" => req.respond(
                Response::from_string("allot sync: metrics at /metrics\n")
                    .with_header(header("Content-Type", "text/plain; charset=utf-8")),
            ),
            _ => req.respond(Response::from_string("not found\n").with_status_code(404)),
        }
    }
}
