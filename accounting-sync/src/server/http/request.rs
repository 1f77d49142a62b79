//! Reading a request head: [`parse_head`] takes the bytes read so far and
//! gives the [`Request`], asks for more, or refuses it ([`HttpError`], each
//! with its status and answer). Bounded: the target, the header count and
//! the head's size; GET and HEAD only, no body.

use super::response::Response;
use super::Limits;

/// The longest request target (path and query) accepted, in bytes; longer
/// is answered 414.
pub const MAX_TARGET_BYTES: usize = 2048;

/// The most header lines a request head may have; more is answered 431.
pub const MAX_HEADERS: usize = 64;

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
