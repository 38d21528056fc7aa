//! HTTP/1.1 on a `TcpStream`, as little of it as a read-only JSON server needs: GET and HEAD,
//! no request body, and persistent connections ([`Conn`]: the next request read from where
//! the last one's head ended, as HTTP/1.1 clients such as Prometheus and Grafana send them,
//! unless the client says `Connection: close`, speaks HTTP/1.0 without `keep-alive`, or sends
//! a body: then the connection closes after the answer, so a body is never taken for the
//! next request).
//!
//! Every limit is enforced while reading, before anything is kept: the request line and
//! headers together at most [`Limits::head_bytes`] (8 KiB by default, the size nginx and
//! most servers allow), at most [`Limits::headers`] header lines, and the whole head within
//! [`Limits::head_time`] of the connection being taken up — a client trickling a byte every
//! few seconds is cut off there, not at each read's timeout. A request past a limit gets 431
//! (too large) or 408 (too slow) and the connection is closed.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// The bounds on one request.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Bytes of the request line and headers, the blank line included.
    pub head_bytes: usize,
    /// Header lines.
    pub headers: usize,
    /// Time from taking up the connection to the end of the head.
    pub head_time: Duration,
    /// Time a write of the response may block.
    pub write_time: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            head_bytes: 8 * 1024,
            headers: 64,
            head_time: Duration::from_secs(5),
            write_time: Duration::from_secs(10),
        }
    }
}

/// A request's head, parsed.
#[derive(Debug)]
pub struct Request {
    /// The method, as sent (`GET`).
    pub method: String,
    /// The path, percent-decoded is left to the router (`/api/v1/query`).
    pub path: String,
    /// The query string after `?`, undecoded (empty when none).
    pub query: String,
    /// The `Authorization` header's value, if sent (once).
    pub authorization: Option<String>,
    /// Whether the connection may carry another request after this one's answer.
    pub keep_alive: bool,
}

/// Why no request could be read.
#[derive(Debug)]
pub enum ReadError {
    /// The head passed [`Limits::head_bytes`] or [`Limits::headers`]: 431.
    TooLarge {
        /// Which limit.
        what: &'static str,
    },
    /// The head is not HTTP/1.x: 400.
    Malformed {
        /// What is wrong.
        what: &'static str,
    },
    /// The head did not arrive within [`Limits::head_time`]: 408.
    Slow,
    /// The client closed the connection or the socket failed: nothing to answer.
    Gone,
}

/// A connection and the bytes read past the last request's head (a pipelined next request).
pub struct Conn {
    /// The socket.
    pub stream: TcpStream,
    buf: Vec<u8>,
    /// Bytes of `buf` holding the start of the next request.
    len: usize,
}

impl Conn {
    /// A connection just accepted.
    pub fn new(stream: TcpStream) -> Conn {
        Conn {
            stream,
            buf: Vec::new(),
            len: 0,
        }
    }

    /// Whether bytes of a next request were read already.
    pub fn has_pending(&self) -> bool {
        self.len > 0
    }

    /// Reads one request head, within `limits` (the head's time counted from now).
    pub fn read_request(&mut self, limits: &Limits) -> Result<Request, ReadError> {
        let deadline = Instant::now() + limits.head_time;
        self.buf.resize(limits.head_bytes, 0);
        let mut len = self.len;
        let mut scanned: usize = 0;
        let end = loop {
            // Only bytes not yet looked at (and the three before) can complete the blank line.
            let from = scanned.saturating_sub(3);
            if let Some(at) = find_blank_line(&self.buf[from..len]) {
                break from + at;
            }
            scanned = len;
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ReadError::Slow);
            }
            // Each read waits at most until the head's deadline.
            if self.stream.set_read_timeout(Some(left)).is_err() {
                return Err(ReadError::Gone);
            }
            if len == self.buf.len() {
                return Err(ReadError::TooLarge {
                    what: "request line and headers longer than 8 KiB",
                });
            }
            match self.stream.read(&mut self.buf[len..]) {
                Ok(0) => return Err(ReadError::Gone),
                Ok(n) => len += n,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(ReadError::Slow)
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return Err(ReadError::Gone),
            }
        };
        let request = parse_head(&self.buf[..end], limits);
        // The head ends with its blank line (2 bytes, or 4 for CRLF CRLF); what follows is
        // the next request's.
        let blank = if self.buf[end..len].starts_with(b"\r\n\r\n") {
            4
        } else {
            2
        };
        let rest = end + blank;
        self.buf.copy_within(rest..len, 0);
        self.len = len - rest;
        request
    }
}

/// The offset of the `\r\n\r\n` (or bare `\n\n`) that ends a head, at its first byte.
fn find_blank_line(bytes: &[u8]) -> Option<usize> {
    bytes.windows(2).enumerate().find_map(|(i, w)| {
        let blank = w == b"\n\n" || (w == b"\r\n" && bytes[i + 2..].starts_with(b"\r\n"));
        blank.then_some(i)
    })
}

fn parse_head(head: &[u8], limits: &Limits) -> Result<Request, ReadError> {
    let malformed = |what| ReadError::Malformed { what };
    let head = std::str::from_utf8(head).map_err(|_| malformed("a head that is not UTF-8"))?;
    let mut lines = head.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let line = lines.next().ok_or(malformed("no request line"))?;
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(malformed(
            "a request line that is not METHOD TARGET VERSION",
        ));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(malformed("a version other than HTTP/1.x"));
    }
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(malformed("a method that is not a token of capitals"));
    }
    if !target.starts_with('/') {
        return Err(malformed("a target that is not a path"));
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut authorization = None;
    // HTTP/1.1 keeps a connection unless told to close; HTTP/1.0 closes unless told to keep.
    let mut keep_alive = version == "HTTP/1.1";
    let mut count = 0;
    for l in lines {
        if l.is_empty() {
            continue;
        }
        count += 1;
        if count > limits.headers {
            return Err(ReadError::TooLarge {
                what: "more than 64 header lines",
            });
        }
        let (name, value) = l
            .split_once(':')
            .ok_or(malformed("a header line without a colon"))?;
        if name.eq_ignore_ascii_case("connection") {
            for option in value.split(',').map(str::trim) {
                if option.eq_ignore_ascii_case("close") {
                    keep_alive = false;
                } else if option.eq_ignore_ascii_case("keep-alive") && version == "HTTP/1.0" {
                    keep_alive = true;
                }
            }
        }
        // A body is not read: the connection closes after the answer rather than read the
        // body as the next request.
        let bodied = name.eq_ignore_ascii_case("transfer-encoding")
            || (name.eq_ignore_ascii_case("content-length") && value.trim() != "0");
        if bodied {
            keep_alive = false;
        }
        if name.eq_ignore_ascii_case("authorization") {
            if authorization.is_some() {
                return Err(malformed("two Authorization headers"));
            }
            authorization = Some(value.trim().to_string());
        }
    }
    Ok(Request {
        method: method.to_string(),
        path: path.to_string(),
        query: query.to_string(),
        authorization,
        keep_alive,
    })
}

/// A response to write.
#[derive(Debug)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The body's media type.
    pub content_type: &'static str,
    /// The body.
    pub body: Vec<u8>,
    /// Headers beyond the fixed ones (`Allow`, `WWW-Authenticate`).
    pub headers: Vec<(&'static str, String)>,
}

impl Response {
    /// A JSON body.
    pub fn json(status: u16, value: &serde_json::Value) -> Response {
        let mut body = value.to_string().into_bytes();
        body.push(b'\n');
        Response {
            status,
            content_type: "application/json",
            body,
            headers: Vec::new(),
        }
    }

    /// A header more.
    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Response {
        self.headers.push((name, value.into()));
        self
    }
}

/// The reason phrase of the codes this server sends.
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "",
    }
}

/// Writes `response` (its head alone for a HEAD request); unless `keep_alive`, says so and
/// closes the connection's writing side.
pub fn write_response(
    stream: &mut TcpStream,
    response: &Response,
    head_only: bool,
    keep_alive: bool,
    limits: &Limits,
) -> std::io::Result<()> {
    stream.set_write_timeout(Some(limits.write_time))?;
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: {}\r\n\
         Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n",
        response.status,
        reason(response.status),
        response.content_type,
        response.body.len(),
        if keep_alive { "keep-alive" } else { "close" }
    );
    for (name, value) in &response.headers {
        head.push_str(name);
        head.push_str(": ");
        head.push_str(value);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    if head_only {
        stream.write_all(head.as_bytes())?;
    } else {
        let mut all = head.into_bytes();
        all.extend_from_slice(&response.body);
        stream.write_all(&all)?;
    }
    stream.flush()?;
    if !keep_alive {
        // Unread request bytes at close would make the kernel reset the connection and the
        // client could lose the response: say we are done writing, then let it go.
        let _ = stream.shutdown(std::net::Shutdown::Write);
    }
    Ok(())
}

/// A query string's `name=value` pairs, percent-decoded (`+` is a space), in order.
/// A pair that does not decode to UTF-8 is an error naming it.
pub fn parse_query(query: &str) -> Result<Vec<(String, String)>, (String, &'static str)> {
    let mut out = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let name = decode(name).ok_or_else(|| (name.to_string(), "bad percent-encoding"))?;
        let value = decode(value).ok_or_else(|| (name.clone(), "bad percent-encoding"))?;
        out.push((name, value));
    }
    Ok(out)
}

/// Percent-decodes `text` (`+` as a space); `None` for a bad escape or bytes not UTF-8.
fn decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3)?;
                let hex = std::str::from_utf8(hex).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_strings_decode() {
        let q = parse_query("metric=fan%2Dout&key=10.0.0.1%2C80&quantile=0.5&quantile=0.99&a+b=c")
            .unwrap();
        assert_eq!(q[0], ("metric".into(), "fan-out".into()));
        assert_eq!(q[1], ("key".into(), "10.0.0.1,80".into()));
        assert_eq!(q[3], ("quantile".into(), "0.99".into()));
        assert_eq!(q[4], ("a b".into(), "c".into()));
        assert_eq!(parse_query("key=%zz").unwrap_err().0, "key");
        assert_eq!(parse_query("key=%ff").unwrap_err().0, "key");
        assert_eq!(parse_query("key=%4").unwrap_err().0, "key");
    }

    #[test]
    fn heads_parse_within_limits() {
        let l = Limits::default();
        let r = parse_head(
            b"GET /api/v1/top?n=3 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\n",
            &l,
        )
        .unwrap();
        assert_eq!((r.method.as_str(), r.path.as_str()), ("GET", "/api/v1/top"));
        assert_eq!(r.query, "n=3");
        assert_eq!(r.authorization.as_deref(), Some("Bearer t"));
        for bad in [
            &b"GET /\r\n"[..],
            b"GET / HTTP/2\r\n",
            b"get / HTTP/1.1\r\n",
            b"GET x HTTP/1.1\r\n",
            b"GET / HTTP/1.1\r\nno colon\r\n",
            b"GET / HTTP/1.1\r\nAuthorization: a\r\nauthorization: b\r\n",
        ] {
            assert!(matches!(
                parse_head(bad, &l),
                Err(ReadError::Malformed { .. })
            ));
        }
        let many: String = (0..65).map(|i| format!("X-{i}: y\r\n")).collect();
        let head = format!("GET / HTTP/1.1\r\n{many}");
        assert!(matches!(
            parse_head(head.as_bytes(), &l),
            Err(ReadError::TooLarge { .. })
        ));
    }

    #[test]
    fn the_blank_line_is_found_at_its_start() {
        assert_eq!(find_blank_line(b"GET / HTTP/1.1\r\n\r\n"), Some(14));
        assert_eq!(find_blank_line(b"GET / HTTP/1.1\n\n"), Some(14));
        assert_eq!(find_blank_line(b"GET / HTTP/1.1\r\nA: b\r\n"), None);
    }
}
