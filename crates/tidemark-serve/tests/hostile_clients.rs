//! The server against clients that misbehave, over real TCP: heads too large or too many,
//! silent and trickling connections, more connections than the pool takes, other methods,
//! a missing or wrong token, and a store that holds nothing yet. None of them gets a panic
//! or stalls the others.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use tidemark_serve::{Options, Server};
use tidemark_stream::store::RedbStore;

/// A store file that holds nothing yet (no run has committed).
fn empty_store(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tidemark-serve-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("empty.db");
    drop(RedbStore::open(&db).unwrap());
    db
}

/// Starts a server on a free port of loopback.
fn start(options: Options) -> SocketAddr {
    let server = Server::bind("127.0.0.1:0", options).unwrap();
    let addr = server.local_addr().unwrap();
    std::thread::spawn(move || server.run());
    addr
}

/// Sends `raw` and reads the whole response: (status, head, body).
fn exchange(addr: SocketAddr, raw: &[u8]) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    // The server may answer and close before it has read everything sent: not our failure.
    let _ = s.write_all(raw);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    parse(&out)
}

fn parse(out: &[u8]) -> (u16, String, String) {
    let text = String::from_utf8_lossy(out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

fn get(addr: SocketAddr, path: &str, auth: Option<&str>) -> (u16, String, String) {
    let auth = auth
        .map(|a| format!("Authorization: {a}\r\n"))
        .unwrap_or_default();
    exchange(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: t\r\n{auth}Connection: close\r\n\r\n").as_bytes(),
    )
}

fn error_of(body: &str) -> serde_json::Value {
    serde_json::from_str(body).expect("an error body is JSON")
}

#[test]
fn oversized_and_malformed_heads_are_refused_and_the_server_goes_on() {
    let addr = start(Options::new(empty_store("oversized")));
    let long = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(9000));
    let (status, _, body) = exchange(addr, long.as_bytes());
    assert_eq!(status, 431, "{body}");
    let many: String = (0..65).map(|i| format!("X-H{i}: v\r\n")).collect();
    let (status, _, _) = exchange(addr, format!("GET / HTTP/1.1\r\n{many}\r\n").as_bytes());
    assert_eq!(status, 431);
    for bad in [
        &b"GARBAGE\r\n\r\n"[..],
        b"GET / HTTP/2.0\r\n\r\n",
        b"GET /\xff HTTP/1.1\r\n\r\n",
        b"\r\n\r\n",
    ] {
        let (status, _, body) = exchange(addr, bad);
        assert_eq!(status, 400, "{:?}: {body}", String::from_utf8_lossy(bad));
        assert!(error_of(&body)["error"].is_string());
    }
    // A bad percent-escape names its parameter.
    let (status, _, body) = get(addr, "/api/v1/top?metric=%zz", None);
    assert_eq!(status, 400);
    assert_eq!(error_of(&body)["parameter"], "metric");
    // Still serving.
    let (status, head, body) = get(addr, "/", None);
    assert_eq!(status, 200);
    assert!(head.contains("text/html"));
    assert!(body.contains("<svg") || body.contains("svg"));
}

#[test]
fn methods_paths_and_an_empty_store_get_their_codes() {
    let addr = start(Options::new(empty_store("codes")));
    let (status, head, body) = exchange(addr, b"POST /api/v1/query HTTP/1.1\r\n\r\n");
    assert_eq!(status, 405, "{body}");
    assert!(head.contains("Allow: GET, HEAD"));
    let (status, _, _) = get(addr, "/api/v2/nothing", None);
    assert_eq!(status, 404);
    // HEAD: the head of GET's answer, no body.
    let (status, head, body) = exchange(addr, b"HEAD / HTTP/1.1\r\n\r\n");
    assert_eq!(status, 200);
    assert!(head.contains("Content-Length: "));
    assert!(body.is_empty());
    // Nothing committed yet: the store cannot answer, 503 on every reading path.
    for path in [
        "/metrics",
        "/api/v1/metrics",
        "/api/v1/query?metric=m&key=k",
        "/api/v1/top?metric=m",
        "/api/v1/series?metric=m&key=k",
    ] {
        let (status, _, body) = get(addr, path, None);
        assert_eq!(status, 503, "{path}: {body}");
        assert!(error_of(&body)["error"]
            .as_str()
            .unwrap()
            .contains("no checkpoint"));
    }
    // Parameters are checked before the store is read.
    let (status, _, body) = get(addr, "/api/v1/metrics?x=1", None);
    assert_eq!(status, 400);
    assert_eq!(error_of(&body)["parameter"], "x");
    // No alert log was given.
    let (status, _, _) = get(addr, "/api/v1/alerts", None);
    assert_eq!(status, 404);
}

#[test]
fn the_token_is_required_on_every_path() {
    let db = empty_store("token");
    let token = db.with_file_name("token");
    std::fs::write(&token, "s3cret-token\n").unwrap();
    let mut options = Options::new(&db);
    options.token_file = Some(token);
    let addr = start(options);
    for path in ["/", "/metrics", "/api/v1/metrics", "/nowhere"] {
        let (status, head, _) = get(addr, path, None);
        assert_eq!(status, 401, "{path}");
        assert!(head.contains("WWW-Authenticate: Bearer"));
        let (status, _, _) = get(addr, path, Some("Bearer s3cret-toke"));
        assert_eq!(status, 401, "{path}");
        let (status, _, _) = get(addr, path, Some("Bearer s3cret-token-"));
        assert_eq!(status, 401, "{path}");
        let (status, _, _) = get(addr, path, Some("Basic s3cret-token"));
        assert_eq!(status, 401, "{path}");
    }
    let (status, _, _) = get(addr, "/", Some("Bearer s3cret-token"));
    assert_eq!(status, 200);
    let (status, _, _) = get(addr, "/?access_token=s3cret-token", None);
    assert_eq!(status, 200);
    // Past the token, the store's own answer (nothing committed yet).
    let (status, _, _) = get(addr, "/api/v1/metrics", Some("Bearer s3cret-token"));
    assert_eq!(status, 503);
}

#[test]
fn a_bad_token_file_stops_the_server_from_starting() {
    let db = empty_store("badtoken");
    for (text, what) in [("", "holds no token"), ("a b\n", "more than one word")] {
        let token = db.with_file_name("token");
        std::fs::write(&token, text).unwrap();
        let mut options = Options::new(&db);
        options.token_file = Some(token);
        let err = Server::bind("127.0.0.1:0", options).err().unwrap();
        assert!(err.to_string().contains(what), "{err}");
    }
    let mut options = Options::new(&db);
    options.token_file = Some(db.with_file_name("absent"));
    let err = Server::bind("127.0.0.1:0", options).err().unwrap();
    assert!(err.to_string().contains("cannot read token file"), "{err}");
    let err = Server::bind("127.0.0.1:0", Options::new(db.with_file_name("nope.db")))
        .err()
        .unwrap();
    assert!(err.to_string().contains("nope.db"), "{err}");
}

#[test]
fn a_silent_client_does_not_block_others_and_is_cut_off() {
    let mut options = Options::new(empty_store("silent"));
    options.workers = 2;
    options.limits.head_time = Duration::from_secs(2);
    let addr = start(options);
    let mut silent = TcpStream::connect(addr).unwrap();
    // A trickler too: a byte now and then, never a whole head.
    let mut trickle = TcpStream::connect(addr).unwrap();
    let _ = trickle.write_all(b"GET / HT");
    std::thread::sleep(Duration::from_millis(200));
    // Both workers are held, but only until the head's deadline: another client is answered
    // after it, well before any of the old per-read timeouts would add up.
    let started = Instant::now();
    let (status, _, _) = get(addr, "/", None);
    assert_eq!(status, 200);
    assert!(started.elapsed() < Duration::from_secs(10));
    let _ = trickle.write_all(b"T");
    let mut out = Vec::new();
    silent
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let _ = silent.read_to_end(&mut out);
    assert_eq!(parse(&out).0, 408);
    out.clear();
    trickle
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let _ = trickle.read_to_end(&mut out);
    assert_eq!(parse(&out).0, 408);
}

#[test]
fn connections_past_the_pool_and_its_queue_get_503() {
    let mut options = Options::new(empty_store("pool"));
    options.workers = 2;
    options.queue = 1;
    options.limits.head_time = Duration::from_secs(3);
    let addr = start(options);
    // Two silent connections hold both workers; a third waits in the queue.
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(TcpStream::connect(addr).unwrap());
        std::thread::sleep(Duration::from_millis(150));
    }
    let started = Instant::now();
    let (status, head, body) = get(addr, "/", None);
    assert_eq!(status, 503, "{body}");
    assert!(head.contains("Retry-After"));
    assert!(error_of(&body)["error"].as_str().unwrap().contains("busy"));
    // Refused at once, not after the held ones time out.
    assert!(started.elapsed() < Duration::from_secs(2));
    // Once the silent ones are cut off, the pool serves again.
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (status, _, _) = get(addr, "/", None);
        if status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "the pool never came back");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Reads one response from a kept connection: (status, head), the body read to its
/// Content-Length.
fn read_one(s: &mut TcpStream) -> (u16, String) {
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") {
        assert_eq!(s.read(&mut byte).unwrap(), 1, "closed mid-head: {got:?}");
        got.push(byte[0]);
    }
    let (status, head, _) = parse(&got);
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .unwrap()
        .parse()
        .unwrap();
    let mut body = vec![0u8; length];
    s.read_exact(&mut body).unwrap();
    (status, head)
}

/// Whether the server closed `s` (reads end) within its read timeout.
fn closed(s: &mut TcpStream) -> bool {
    let mut rest = Vec::new();
    matches!(s.read_to_end(&mut rest), Ok(0))
}

#[test]
fn persistent_connections_carry_requests_and_yield_to_waiting_ones() {
    let mut options = Options::new(empty_store("keep"));
    options.workers = 1;
    let addr = start(options);
    let mut a = TcpStream::connect(addr).unwrap();
    a.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    // Two requests sent at once: both answered, in order, on the one connection.
    a.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\nGET /nope HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let (status, head) = read_one(&mut a);
    assert_eq!(status, 200);
    assert!(head.contains("Connection: keep-alive"), "{head}");
    assert_eq!(read_one(&mut a).0, 404);
    // A third after a pause, on the same connection.
    std::thread::sleep(Duration::from_millis(300));
    a.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    assert_eq!(read_one(&mut a).0, 200);
    // The one worker holds `a`, idle: a new client waits only until the worker sees it.
    let started = Instant::now();
    let (status, _, _) = get(addr, "/", None);
    assert_eq!(status, 200);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(
        closed(&mut a),
        "the idle connection was given up for the waiting one"
    );

    // The client's word, HTTP/1.0, and a body each close the connection after the answer.
    for raw in [
        &b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"[..],
        b"GET / HTTP/1.0\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 27\r\n\r\nGET /nope HTTP/1.1\r\n\r\n",
        b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    ] {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.write_all(raw).unwrap();
        let (status, head) = read_one(&mut s);
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(raw));
        assert!(head.contains("Connection: close"), "{head}");
        assert!(closed(&mut s), "{}", String::from_utf8_lossy(raw));
    }
    // HTTP/1.0 asking to keep the connection keeps it.
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET / HTTP/1.0\r\n\r\n")
        .unwrap();
    assert!(read_one(&mut s).1.contains("Connection: keep-alive"));
    assert!(read_one(&mut s).1.contains("Connection: close"));
    assert!(closed(&mut s));
}

#[test]
fn an_idle_persistent_connection_is_closed_after_its_idle_time() {
    let addr = start(Options::new(empty_store("keep-idle")));
    let mut a = TcpStream::connect(addr).unwrap();
    a.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    a.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    assert_eq!(read_one(&mut a).0, 200);
    let idle = Instant::now();
    assert!(closed(&mut a));
    let waited = idle.elapsed();
    assert!(
        waited >= tidemark_serve::KEEP_IDLE - Duration::from_millis(100)
            && waited < tidemark_serve::KEEP_IDLE + Duration::from_secs(5),
        "{waited:?}"
    );
}
