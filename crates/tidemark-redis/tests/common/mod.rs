//! Starting real `redis-server`s with the module loaded, on free loopback ports, in temporary
//! directories; killing them at the end. Without redis-server the live tests skip loudly,
//! unless `TIDEMARK_REQUIRE_REDIS=1`, when they fail.
#![allow(dead_code)] // each test file uses its own subset

use std::io::Write;

use redis::Value;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tidemark_redis::reply::Reply;

/// Writes to the real standard error, which cargo's output capture does not swallow.
pub fn loud(msg: &str) {
    match std::fs::OpenOptions::new().write(true).open("/dev/stderr") {
        Ok(mut f) => {
            let _ = writeln!(f, "{msg}");
        }
        Err(_) => eprintln!("{msg}"),
    }
}

/// Whether the live tests can run; panics when they must and cannot.
pub fn redis_available(test: &str) -> bool {
    let ok = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        if std::env::var("TIDEMARK_REQUIRE_REDIS").as_deref() == Ok("1") {
            panic!("TIDEMARK_REQUIRE_REDIS=1 but redis-server is not installed");
        }
        loud(&format!(
            "\n!!! SKIPPING {test}: redis-server not found (apt-get install redis-server, \
             or set TIDEMARK_REQUIRE_REDIS=1 to make this a failure) !!!\n"
        ));
    }
    ok
}

/// The module: `libtidemark_redis.so` beside the test binary's `deps/` folder (cargo builds
/// the package's cdylib before its integration tests), or under `CARGO_TARGET_DIR`.
pub fn module_path() -> PathBuf {
    // `cargo test` leaves the freshly built cdylib in `deps/` beside the test binary (it is
    // copied up to the profile folder only by `cargo build`): take the newest candidate.
    let mut candidates = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        if let Some(deps) = exe.parent() {
            candidates.push(deps.join("libtidemark_redis.so"));
            if let Some(profile_dir) = deps.parent() {
                candidates.push(profile_dir.join("libtidemark_redis.so"));
            }
        }
    }
    if let Ok(dir) = std::env::var("CARGO_TARGET_DIR") {
        for p in ["debug/deps", "debug", "release"] {
            candidates.push(Path::new(&dir).join(p).join("libtidemark_redis.so"));
        }
    }
    candidates
        .iter()
        .filter_map(|p| Some((std::fs::metadata(p).ok()?.modified().ok()?, p)))
        .max_by_key(|(t, _)| *t)
        .map(|(_, p)| p.clone())
        .unwrap_or_else(|| panic!("the module was not built; looked in {candidates:?}"))
}

/// A free loopback port (the listener is dropped before the server binds it).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// A free port for a cluster node: its bus port (port + 10,000) must be free too and below
/// 65,536, which ephemeral ports (up to 60,999) do not promise.
pub fn free_cluster_port() -> u16 {
    let seed = std::process::id() as u64 ^ free_port() as u64;
    for i in 0..10_000u64 {
        let p =
            20_000 + ((seed.wrapping_mul(2_654_435_761).wrapping_add(i * 7_919)) % 25_000) as u16;
        let a = TcpListener::bind(("127.0.0.1", p));
        let b = TcpListener::bind(("127.0.0.1", p + 10_000));
        if a.is_ok() && b.is_ok() {
            return p;
        }
    }
    panic!("no free port pair for a cluster node");
}

/// A temporary directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "tidemark-redis-{tag}-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&p).expect("temp dir");
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running redis-server with the module; killed on drop.
pub struct Server {
    pub port: u16,
    pub dir: PathBuf,
    child: Child,
}

impl Server {
    /// Starts a server in `dir` with extra arguments (`--appendonly yes`, …).
    pub fn start(dir: &Path, extra: &[&str]) -> Server {
        Server::start_on(free_port(), dir, extra)
    }

    /// Sends the server's process `signal` (`STOP`, `CONT`: a server that stops answering
    /// for a while, as a paused or overloaded one does).
    pub fn signal(&self, signal: &str) {
        let ok = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -{signal} of redis-server {}", self.port);
    }

    pub fn start_on(port: u16, dir: &Path, extra: &[&str]) -> Server {
        Server::try_start_on(port, dir, extra)
            .unwrap_or_else(|| panic!("redis-server on {port} did not start"))
    }

    /// Starts a server on `port`, or `None` if it exits (the port was taken since it was
    /// found free: another test's client may hold it) or does not answer within 20 s.
    pub fn try_start_on(port: u16, dir: &Path, extra: &[&str]) -> Option<Server> {
        Server::try_start_with(port, dir, &[], extra)
    }

    /// [`Server::try_start_on`] with the module loaded with `module_args`.
    pub fn try_start_with(
        port: u16,
        dir: &Path,
        module_args: &[&str],
        extra: &[&str],
    ) -> Option<Server> {
        let log = std::fs::File::create(dir.join(format!("redis-{port}.log"))).expect("log file");
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .arg("--loadmodule")
            .arg(module_path())
            .args(module_args)
            .arg("--dir")
            .arg(dir)
            .args([
                "--save",
                "",
                "--enable-debug-command",
                "yes",
                "--protected-mode",
                "no",
            ])
            .args(extra)
            .stdout(log)
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        let mut s = Server {
            port,
            dir: dir.to_path_buf(),
            child,
        };
        s.ready().then_some(s)
    }

    fn ready(&mut self) -> bool {
        let start = Instant::now();
        loop {
            if self.child.try_wait().ok().flatten().is_some() {
                return false;
            }
            if let Ok(mut c) = self.try_conn() {
                if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                    // Loading a large AOF/RDB answers LOADING; wait for it to finish.
                    let info: String = redis::cmd("INFO")
                        .arg("persistence")
                        .query(&mut c)
                        .unwrap_or_default();
                    if info.contains("loading:0") {
                        return true;
                    }
                }
            }
            if start.elapsed() > Duration::from_secs(20) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn try_conn(&self) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))?.get_connection()
    }

    pub fn conn(&self) -> redis::Connection {
        self.try_conn().expect("connect")
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Stops the server (SHUTDOWN NOSAVE when `save` is false).
    pub fn stop(mut self, save: bool) {
        if let Ok(mut c) = self.try_conn() {
            let _: redis::RedisResult<()> = redis::cmd("SHUTDOWN")
                .arg(if save { "SAVE" } else { "NOSAVE" })
                .query(&mut c);
        }
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `f` until it is true, up to `secs` seconds (for state changes, never for speed).
pub fn wait_until(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(secs),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs one command given as whitespace-separated words.
pub fn q(c: &mut impl redis::ConnectionLike, s: &str) -> redis::RedisResult<redis::Value> {
    let mut words = s.split_whitespace();
    let mut cmd = redis::cmd(words.next().unwrap_or(""));
    for w in words {
        cmd.arg(w);
    }
    cmd.query(c)
}

/// Redis's CRC-64 (Jones polynomial, reflected, init 0), as DUMP payloads end with.
pub fn crc64(data: &[u8]) -> u64 {
    const POLY: u64 = 0x95ac_9329_ac4b_c9b5;
    let mut crc = 0u64;
    for &b in data {
        crc ^= b as u64;
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
        }
    }
    crc
}

/// Three cluster masters with the module, on free port pairs in `dir`, joined by
/// `redis-cli --cluster create` and answering `cluster_state:ok`.
pub fn start_cluster(dir: &TempDir) -> Vec<Server> {
    // Each node on a free port pair; a port taken between the look and the start (another
    // test's client) is given up for another.
    let mut nodes: Vec<Server> = Vec::new();
    for _ in 0..20 {
        if nodes.len() == 3 {
            break;
        }
        let p = free_cluster_port();
        if nodes.iter().any(|n| n.port == p) {
            continue;
        }
        let d = dir.0.join(p.to_string());
        std::fs::create_dir_all(&d).unwrap();
        let extra = [
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            "5000",
        ];
        if let Some(n) = Server::try_start_on(p, &d, &extra) {
            nodes.push(n);
        }
    }
    assert_eq!(nodes.len(), 3, "three cluster nodes started");
    let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
    let addrs: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    // Bounded (coreutils' `timeout`): its wait for the nodes to agree has no limit of its own.
    let out = std::process::Command::new("timeout")
        .args(["120", "redis-cli", "--cluster", "create"])
        .args(&addrs)
        .args(["--cluster-replicas", "0", "--cluster-yes"])
        .output()
        .expect("redis-cli --cluster create");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    for n in &nodes {
        let mut c = n.conn();
        wait_until(30, "cluster_state:ok", || {
            let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut c).unwrap();
            info.contains("cluster_state:ok")
        });
    }
    nodes
}

/// The same reply, allowing for RESP2 (doubles as bulk strings, maps as flat arrays) or
/// RESP3.
pub fn same(r: &Reply, v: &Value) -> bool {
    match (r, v) {
        (Reply::Ok, Value::Okay) => true,
        (Reply::Integer(a), Value::Int(b)) => a == b,
        (Reply::Double(a), Value::Double(b)) => a == b || (a.is_nan() && b.is_nan()),
        (Reply::Double(a), Value::BulkString(b)) => {
            std::str::from_utf8(b)
                .ok()
                .and_then(|s| s.parse::<f64>().ok())
                == Some(*a)
        }
        (Reply::Bulk(a), Value::BulkString(b)) => a == b,
        (Reply::Null, Value::Nil) => true,
        (Reply::Estimate(e), Value::Array(b)) => {
            same(
                &Reply::Array(e.iter().map(|x| Reply::Double(*x)).collect()),
                v,
            ) && b.len() == 3
        }
        (Reply::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y))
        }
        (Reply::Map(m), Value::Array(flat)) => {
            // In the command layer's order.
            flat.len() == 2 * m.len()
                && m.iter().zip(flat.chunks(2)).all(|((k, v), kv)| {
                    same(&Reply::Bulk(k.as_bytes().to_vec()), &kv[0]) && same(v, &kv[1])
                })
        }
        (Reply::Map(m), Value::Map(pairs)) => {
            m.len() == pairs.len()
                && m.iter().all(|(k, v)| {
                    pairs.iter().any(|(pk, pv)| {
                        matches!(pk, Value::SimpleString(s) if s == k)
                            || matches!(pk, Value::BulkString(b) if b == k.as_bytes())
                    } && same(v, pv))
                })
        }
        _ => false,
    }
}

pub fn error_text(e: &redis::RedisError) -> String {
    format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or(""))
}
