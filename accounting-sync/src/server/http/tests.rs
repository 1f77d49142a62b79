//! The server against real sockets on 127.0.0.1: the answers, the bounds
//! and the refusals.

use super::*;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

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
    let (status, head, _) = exchange(server.local_addr(), b"POST / HTTP/1.1\r\nHost: x\r\n\r\n");
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
