//! Latency of a running `tidemark serve`: `n` requests one after another, then `n` from
//! `clients` threads at once; prints the median and the 99th percentile of each, and requests
//! a second. Each request on a new connection (`close`, the default), or each client's
//! requests on one persistent connection (`keep`), as HTTP/1.1 clients such as Prometheus and
//! Grafana send them.
//!
//! ```text
//! cargo run --release -p tidemark-serve --example serve_bench -- \
//!     127.0.0.1:9464 '/api/v1/query?metric=fanout&key={key}&window=5m' [n] [clients] [keys] [close|keep]
//! ```
//!
//! `{key}` in the path becomes one of the demo's ordinary users (`10.2.a.b`, the first
//! `keys` of them, default 20,000), drawn at random for each request.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// The demo's `i`-th ordinary user.
fn key(i: u64) -> String {
    format!("10.2.{}.{}", i / 250, i % 250 + 1)
}

/// A small xorshift generator: the bench needs no statistical quality, only spread.
struct Rng(u64);

impl Rng {
    fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below.max(1)
    }
}

/// A client's connection: a new one for each request (`None` kept), or one kept.
struct Client<'a> {
    addr: &'a str,
    keep: bool,
    conn: Option<TcpStream>,
    buf: Vec<u8>,
}

impl Client<'_> {
    /// One request: its time, and whether it was answered 200.
    fn one(&mut self, path: &str) -> std::io::Result<(Duration, bool)> {
        let t = Instant::now();
        if !self.keep {
            let mut s = TcpStream::connect(self.addr)?;
            s.set_nodelay(true)?;
            write!(
                s,
                "GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n"
            )?;
            self.buf.clear();
            s.read_to_end(&mut self.buf)?;
            return Ok((t.elapsed(), self.buf.starts_with(b"HTTP/1.1 200")));
        }
        let s = match &mut self.conn {
            Some(s) => s,
            None => {
                let s = TcpStream::connect(self.addr)?;
                s.set_nodelay(true)?;
                self.conn.insert(s)
            }
        };
        write!(s, "GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n")?;
        // The head, then Content-Length bytes of body.
        self.buf.clear();
        let mut chunk = [0u8; 8192];
        let (head_end, length) = loop {
            let n = s.read(&mut chunk)?;
            if n == 0 {
                return Err(std::io::Error::other("the server closed a kept connection"));
            }
            self.buf.extend_from_slice(&chunk[..n]);
            if let Some(at) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&self.buf[..at]).to_ascii_lowercase();
                let length = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .ok_or_else(|| std::io::Error::other("no Content-Length"))?;
                break (at + 4, length);
            }
        };
        while self.buf.len() < head_end + length {
            let n = s.read(&mut chunk)?;
            if n == 0 {
                return Err(std::io::Error::other("the server closed mid-body"));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
        let ok = self.buf.starts_with(b"HTTP/1.1 200");
        if String::from_utf8_lossy(&self.buf[..head_end])
            .to_ascii_lowercase()
            .contains("connection: close")
        {
            self.conn = None;
        }
        Ok((t.elapsed(), ok))
    }
}

fn summary(what: &str, mut times: Vec<Duration>, bad: usize, wall: Duration) {
    times.sort();
    let at = |p: f64| times[((times.len() as f64 * p) as usize).min(times.len() - 1)];
    println!(
        "{what}: n={} median {:.3} ms, p99 {:.3} ms, max {:.3} ms, {:.0} requests/s, non-200 {bad}",
        times.len(),
        at(0.5).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
        at(1.0).as_secs_f64() * 1e3,
        times.len() as f64 / wall.as_secs_f64(),
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(addr), Some(template)) = (args.first(), args.get(1)) else {
        return Err("usage: serve_bench ADDR PATH [n] [clients] [keys] [close|keep]".into());
    };
    let keep = match args.get(5).map(String::as_str) {
        None | Some("close") => false,
        Some("keep") => true,
        Some(other) => return Err(format!("expected close or keep, got {other:?}").into()),
    };
    let client = |addr| Client {
        addr,
        keep,
        conn: None,
        buf: Vec::with_capacity(4096),
    };
    let n: usize = args.get(2).map_or(Ok(1000), |a| a.parse())?;
    let clients: usize = args.get(3).map_or(Ok(32), |a| a.parse())?;
    let keys: u64 = args.get(4).map_or(Ok(20_000), |a| a.parse())?;
    let path = |rng: &mut Rng| template.replace("{key}", &key(rng.next(keys)));
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut first = client(addr.as_str());
    for _ in 0..20 {
        first.one(&path(&mut rng))?;
    }
    let (mut times, mut bad) = (Vec::with_capacity(n), 0);
    let t = Instant::now();
    for _ in 0..n {
        let (d, ok) = first.one(&path(&mut rng))?;
        times.push(d);
        bad += usize::from(!ok);
    }
    summary("sequential", times, bad, t.elapsed());
    let t = Instant::now();
    let per = n.div_ceil(clients.max(1));
    let results: Vec<std::io::Result<(Vec<Duration>, usize)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                let path = &path;
                let client = &client;
                s.spawn(move || {
                    let mut me = client(addr.as_str());
                    let mut rng = Rng(0x2545_f491_4f6c_dd1d ^ ((c as u64 + 1) * 0x1000_0001));
                    let (mut times, mut bad) = (Vec::with_capacity(per), 0);
                    for _ in 0..per {
                        let (d, ok) = me.one(&path(&mut rng))?;
                        times.push(d);
                        bad += usize::from(!ok);
                    }
                    Ok((times, bad))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(std::io::Error::other("a client panicked")))
            })
            .collect()
    });
    let wall = t.elapsed();
    let (mut times, mut bad) = (Vec::new(), 0);
    for r in results {
        let (t, b) = r?;
        times.extend(t);
        bad += b;
    }
    summary(
        &format!(
            "{clients} concurrent ({})",
            if keep {
                "kept connections"
            } else {
                "a connection a request"
            }
        ),
        times,
        bad,
        wall,
    );
    Ok(())
}
