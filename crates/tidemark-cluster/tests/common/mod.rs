//! Real `redis-server`s (no module: the parts are plain hashes and sorted sets; the module
//! only where a test publishes for its commands) on free loopback ports in temporary
//! directories, killed at the end. Without redis-server the tests
//! skip loudly, unless `TIDEMARK_REQUIRE_REDIS=1`, when they fail.
#![allow(dead_code)] // each test file uses its own subset

use std::io::Write;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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

/// A temporary directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("tidemark-cluster-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A port whose cluster bus port (port + 10,000) is free too, below 65,536.
fn free_port_pair() -> u16 {
    let seed = std::process::id() as u64
        ^ TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port() as u64)
            .unwrap_or(7);
    for i in 0..10_000u64 {
        let p =
            20_000 + ((seed.wrapping_mul(2_654_435_761).wrapping_add(i * 7_919)) % 25_000) as u16;
        if TcpListener::bind(("127.0.0.1", p)).is_ok()
            && TcpListener::bind(("127.0.0.1", p + 10_000)).is_ok()
        {
            return p;
        }
    }
    panic!("no free port pair");
}

/// A running `redis-server`.
pub struct Server {
    pub port: u16,
    child: Child,
}

impl Server {
    /// A server on a free port in `dir`, with `extra` arguments; `None` if it does not answer.
    pub fn start(dir: &TempDir, extra: &[&str]) -> Option<Server> {
        let port = free_port_pair();
        let d = dir.0.join(port.to_string());
        std::fs::create_dir_all(&d).unwrap();
        Server::start_on(port, &d, extra)
    }

    /// A server on `port` with its files in `dir`.
    pub fn start_on(port: u16, dir: &std::path::Path, extra: &[&str]) -> Option<Server> {
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .arg("--dir")
            .arg(dir)
            .args(["--save", "", "--protected-mode", "no"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        let mut s = Server { port, child };
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(20) {
            if s.child.try_wait().ok().flatten().is_some() {
                return None;
            }
            if s.conn()
                .is_some_and(|mut c| redis::cmd("PING").query::<String>(&mut c).is_ok())
            {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    pub fn conn(&self) -> Option<redis::Connection> {
        redis::Client::open(self.url()).ok()?.get_connection().ok()
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills the process at once (no save), as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Three cluster masters, joined by `redis-cli --cluster create` and answering
/// `cluster_state:ok`.
pub fn start_cluster(dir: &TempDir) -> Vec<Server> {
    start_cluster_with(dir, 0, 5000)
}

/// Three masters with `replicas` replicas each, nodes timing out after `timeout_ms`.
pub fn start_cluster_with(dir: &TempDir, replicas: usize, timeout_ms: u64) -> Vec<Server> {
    start_cluster_loading(dir, replicas, timeout_ms, None)
}

/// The `tidemark-redis` module as `cargo test --workspace` leaves it beside the test binaries
/// (`deps/`), if it was built.
pub fn module_path() -> Option<PathBuf> {
    let deps = std::env::current_exe().ok()?.parent()?.to_path_buf();
    let so = deps.join("libtidemark_redis.so");
    so.exists().then_some(so)
}

/// [`start_cluster_with`], every node loading `module` if given.
pub fn start_cluster_loading(
    dir: &TempDir,
    replicas: usize,
    timeout_ms: u64,
    module: Option<&std::path::Path>,
) -> Vec<Server> {
    let timeout = timeout_ms.to_string();
    let module = module.map(|m| m.to_string_lossy().into_owned());
    let load: Vec<&str> = module
        .as_deref()
        .map_or(vec![], |m| vec!["--loadmodule", m]);
    let extra = [
        &load[..],
        &[
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            &timeout,
            // A replica may take over whatever its last contact with its master (by default one
            // idle for ten timeouts may not, and a test's replicas are often idle).
            "--cluster-replica-validity-factor",
            "0",
        ][..],
    ]
    .concat();
    let want = 3 * (1 + replicas);
    let mut nodes: Vec<Server> = Vec::new();
    for _ in 0..40 {
        if nodes.len() == want {
            break;
        }
        if let Some(n) = Server::start(dir, &extra) {
            if !nodes.iter().any(|m| m.port == n.port) {
                nodes.push(n);
            }
        }
    }
    assert_eq!(nodes.len(), want, "the cluster's nodes started");
    let addrs: Vec<String> = nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect();
    // Bounded (coreutils' `timeout`): its wait for the nodes to agree has no limit of its own.
    let out = Command::new("timeout")
        .args(["120", "redis-cli", "--cluster", "create"])
        .args(&addrs)
        .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
        .output()
        .expect("redis-cli --cluster create");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    for n in &nodes {
        let start = Instant::now();
        loop {
            let ok = n.conn().is_some_and(|mut c| {
                redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query::<String>(&mut c)
                    .is_ok_and(|i| i.contains("cluster_state:ok"))
            });
            // A master counts once its replicas have synchronised with it.
            let synced = || {
                n.conn().is_some_and(|mut c| {
                    let info: String = redis::cmd("INFO")
                        .arg("replication")
                        .query(&mut c)
                        .unwrap_or_default();
                    !info.contains("role:master")
                        || info.matches("state=online").count() >= replicas
                })
            };
            if ok && synced() {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "cluster_state:ok"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    nodes
}

/// The port of the master serving `key`'s slot, as `node` sees the cluster.
pub fn master_of(node: &Server, key: &str) -> u16 {
    let mut c = node.conn().expect("a connection");
    let slot: i64 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query(&mut c)
        .unwrap();
    let ranges: Vec<redis::Value> = redis::cmd("CLUSTER").arg("SLOTS").query(&mut c).unwrap();
    for r in ranges {
        let redis::Value::Array(items) = r else {
            continue;
        };
        let (
            Some(redis::Value::Int(lo)),
            Some(redis::Value::Int(hi)),
            Some(redis::Value::Array(m)),
        ) = (items.first(), items.get(1), items.get(2))
        else {
            continue;
        };
        if (*lo..=*hi).contains(&slot) {
            if let Some(redis::Value::Int(port)) = m.get(1) {
                return *port as u16;
            }
        }
    }
    panic!("no master serves slot {slot}");
}
