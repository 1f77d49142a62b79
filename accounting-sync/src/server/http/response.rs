//! Writing an answer: a [`Response`] (status, type, body, extra headers)
//! goes out as HTTP/1.1 with `Content-Length`, `Content-Type`,
//! `Cache-Control: no-store`, `X-Content-Type-Options: nosniff`,
//! `Connection: close` and, for HTML, [`HTML_CSP`] ([`write_response`]).
//! Headers that could split the response (CR, LF, NUL) are dropped.

use std::io::{self, Write};

/// The `Content-Security-Policy` of every `text/html` response.
pub const HTML_CSP: &str =
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'";

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
