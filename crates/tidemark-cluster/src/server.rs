//! The connection to Redis: one server, or a cluster found from its seed nodes.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::cluster::{ClusterClient, ClusterConnection};
use redis::{
    Client, Connection, ConnectionAddr, ConnectionInfo, ConnectionLike, RedisConnectionInfo,
    RedisError,
};
use tidemark_stream::store::StoreError;

/// How long a connection attempt may take before the call fails (and is tried again).
const TIMEOUT: Duration = Duration::from_secs(5);

/// How long a reply may take: a checkpoint's script of a million rows runs about a second
/// (docs/scale-out.md), and a reply given up on leaves the call's outcome to be asked.
const REPLY_TIMEOUT: Duration = Duration::from_secs(60);

/// The longest `redis://` list accepted (seed nodes).
const MAX_SEEDS: usize = 64;

/// How to reach the server: what a connection is made from again after it broke.
enum Dial {
    One(Client),
    Cluster(ClusterClient),
}

enum Conn {
    One(Connection),
    Cluster(ClusterConnection),
}

impl Conn {
    fn like(&mut self) -> &mut dyn ConnectionLike {
        match self {
            Conn::One(c) => c,
            Conn::Cluster(c) => c,
        }
    }
}

/// How long a call retries a server it cannot reach (or a cluster failing over) by default.
const PATIENCE: Duration = Duration::from_secs(60);

/// A Redis server or cluster, shared by the stores on it (one connection, used by one call at
/// a time; the pipeline calls a store from one thread at a time).
///
/// A call that fails because the server cannot be reached, or a cluster is failing over, is
/// tried again, after waits from 100 ms doubling to 5 s, for up to the server's patience (60 s
/// unless [`Server::with_patience`]), each wait said on standard error; then it fails.
#[derive(Clone)]
pub struct Server {
    /// The address as given, for messages.
    name: Arc<str>,
    dial: Arc<Dial>,
    conn: Arc<Mutex<Option<Conn>>>,
    patience: Duration,
}

impl Server {
    /// Connects to `redis://[[user]:password@]host:port[,host:port…]`: one address is a
    /// server, or the seed of a cluster if it answers `CLUSTER INFO`; several are a cluster's
    /// seeds. Messages name the address with the password left out.
    pub fn connect(url: &str) -> Result<Server, StoreError> {
        let address = parse_url(url).map_err(|what| StoreError::Remote {
            store: redacted(url),
            op: "read the store's address",
            source: what.into(),
        })?;
        let shown = address.shown();
        let name: Arc<str> = Arc::from(shown.as_str());
        let failed = |op: &'static str, e: RedisError| StoreError::Remote {
            store: shown.clone(),
            op,
            source: Box::new(e),
        };
        let seeds = address.infos();
        let cluster = || {
            let mut b = ClusterClient::builder(seeds.clone())
                .connection_timeout(TIMEOUT)
                .response_timeout(REPLY_TIMEOUT);
            if let Some((user, password)) = &address.auth {
                b = b.password(password.clone());
                if !user.is_empty() {
                    b = b.username(user.clone());
                }
            }
            b.build()
        };
        let dial = if seeds.len() > 1 {
            Dial::Cluster(cluster().map_err(|e| failed("reach the cluster", e))?)
        } else {
            let client = Client::open(seeds[0].clone()).map_err(|e| failed("connect", e))?;
            let mut c = client
                .get_connection_with_timeout(TIMEOUT)
                .map_err(|e| failed("connect", e))?;
            let info: Result<String, _> = redis::cmd("CLUSTER").arg("INFO").query(&mut c);
            match info {
                Ok(text)
                    if text.contains("cluster_enabled:1") || text.contains("cluster_state") =>
                {
                    Dial::Cluster(cluster().map_err(|e| failed("reach the cluster", e))?)
                }
                // "cluster support disabled": a single server.
                _ => Dial::One(client),
            }
        };
        let server = Server {
            name,
            dial: Arc::new(dial),
            conn: Arc::new(Mutex::new(None)),
            patience: PATIENCE,
        };
        server.call("connect", |c| redis::cmd("PING").query::<String>(c))?;
        Ok(server)
    }

    /// The address as given, the password left out.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How long a call retries a server it cannot reach.
    pub fn patience(&self) -> Duration {
        self.patience
    }

    /// This server, its calls retried for up to `patience` (see the type's doc).
    pub fn with_patience(mut self, patience: Duration) -> Server {
        self.patience = patience;
        self
    }

    /// The same server with a connection of its own (for a thread that should not wait on
    /// another's calls).
    pub fn another(&self) -> Server {
        Server {
            name: Arc::clone(&self.name),
            dial: Arc::clone(&self.dial),
            conn: Arc::new(Mutex::new(None)),
            patience: self.patience,
        }
    }

    /// Runs `f` on the connection (made first if there is none), retrying a server it cannot
    /// reach for the server's patience.
    pub(crate) fn call<T>(
        &self,
        op: &'static str,
        mut f: impl FnMut(&mut dyn ConnectionLike) -> redis::RedisResult<T>,
    ) -> Result<T, StoreError> {
        self.retrying(op, |c| f(c.like()))
            .map_err(|e| self.error(op, e))
    }

    /// Runs `f` on the connection until it succeeds, fails in a way no retry mends, or the
    /// server's patience is spent (each wait said on standard error); the last error as the
    /// client gave it.
    fn retrying<T>(
        &self,
        op: &'static str,
        mut f: impl FnMut(&mut Conn) -> redis::RedisResult<T>,
    ) -> redis::RedisResult<T> {
        let mut waits = Waits::new(self.patience);
        loop {
            match self.try_conn(&mut f) {
                Ok(v) => return Ok(v),
                Err(e) if retryable(&e) && waits.wait(&self.name, op, &e) => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// One try of `f`, the client's error as it is (a script's refusal is read from it). A
    /// failure of the connection drops it, so that the next call dials again.
    pub(crate) fn try_call<T>(
        &self,
        f: impl FnOnce(&mut dyn ConnectionLike) -> redis::RedisResult<T>,
    ) -> redis::RedisResult<T> {
        self.try_conn(|c| f(c.like()))
    }

    /// [`Server::try_call`] with the connection as it is (a pipeline is one client's or the
    /// cluster client's).
    fn try_conn<T>(
        &self,
        f: impl FnOnce(&mut Conn) -> redis::RedisResult<T>,
    ) -> redis::RedisResult<T> {
        // A panic while the lock was held leaves a connection that may be mid-reply: drop it.
        let mut slot = match self.conn.lock() {
            Ok(g) => g,
            Err(poisoned) => {
                let mut g = poisoned.into_inner();
                *g = None;
                g
            }
        };
        if slot.is_none() {
            *slot = Some(self.dial()?);
        }
        let Some(conn) = slot.as_mut() else {
            return Err(RedisError::from((
                redis::ErrorKind::IoError,
                "no connection",
            )));
        };
        let result = f(conn);
        if let Err(e) = &result {
            if e.is_io_error() || e.is_connection_dropped() || e.is_timeout() {
                *slot = None;
            }
        }
        result
    }

    /// Runs `cmd` on the master serving `key`'s slot (a command without a key of its own, such
    /// as `WAIT` or `INFO`, that must reach that master), retrying as [`Server::call`] does.
    pub(crate) fn on_master_of<T: redis::FromRedisValue>(
        &self,
        op: &'static str,
        key: &[u8],
        cmd: &redis::Cmd,
    ) -> Result<T, StoreError> {
        use redis::cluster_routing::{
            get_slot, Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr,
        };
        self.retrying(op, |conn| match conn {
            Conn::One(c) => cmd.query::<T>(c),
            Conn::Cluster(c) => {
                let route = Route::new(get_slot(key), SlotAddr::Master);
                let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route));
                redis::from_owned_redis_value(c.route_command(cmd, routing)?)
            }
        })
        .map_err(|e| self.error(op, e))
    }

    /// How many of the replicas connected to the master serving `key`'s slot have every
    /// write that master took before this call, waiting up to `timeout_ms` for them:
    /// `(have, connected)`. The master's replication offset is read first (`INFO
    /// replication`), `WAIT` makes the replicas acknowledge, and the replicas counted are those
    /// whose acknowledged offset reached it: `WAIT`'s own count covers only its connection's
    /// writes, and a connection made again since the writes has none.
    pub(crate) fn replicas_have(
        &self,
        key: &[u8],
        timeout_ms: u64,
    ) -> Result<(u64, u64), StoreError> {
        let info = || -> Result<String, StoreError> {
            self.on_master_of(
                "read a master's replicas",
                key,
                redis::cmd("INFO").arg("replication"),
            )
        };
        let before = info()?;
        let field = |text: &str, name: &str| -> u64 {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or(0)
        };
        let connected = field(&before, "connected_slaves:");
        if connected == 0 {
            return Ok((0, 0));
        }
        let target = field(&before, "master_repl_offset:");
        let _: u64 = self.on_master_of(
            "wait for a master's replicas",
            key,
            redis::cmd("WAIT").arg(connected).arg(timeout_ms),
        )?;
        // `slave<n>:ip=…,port=…,state=online,offset=<acknowledged>,lag=…`
        let after = info()?;
        let have = after
            .lines()
            .filter(|l| l.starts_with("slave") && l.contains("state=online"))
            .filter_map(|l| {
                l.split(',')
                    .find_map(|f| f.strip_prefix("offset="))
                    .and_then(|o| o.trim().parse::<u64>().ok())
            })
            .filter(|&o| o >= target)
            .count() as u64;
        Ok((have, connected))
    }

    /// Of `keys`, one served by each master that serves any (a server alone serves them all):
    /// where to ask each master once about all of them.
    pub(crate) fn one_key_per_master<'k>(
        &self,
        keys: &[&'k [u8]],
    ) -> Result<Vec<&'k [u8]>, StoreError> {
        let Some(&first) = keys.first() else {
            return Ok(Vec::new());
        };
        let op = "read the cluster's slots";
        let slots: redis::Value = match self.retrying(op, |conn| match conn {
            Conn::One(_) => Ok(redis::Value::Nil),
            Conn::Cluster(c) => redis::cmd("CLUSTER").arg("SLOTS").query(c),
        }) {
            Ok(v) => v,
            Err(e) => return Err(self.error(op, e)),
        };
        let redis::Value::Array(ranges) = slots else {
            return Ok(vec![first]);
        };
        // Each range: its first and last slot, then its master (host, port, …).
        let mut masters: Vec<(u16, u16, String)> = Vec::with_capacity(ranges.len());
        for r in &ranges {
            let redis::Value::Array(f) = r else { continue };
            let (Some(redis::Value::Int(lo)), Some(redis::Value::Int(hi)), Some(m)) =
                (f.first(), f.get(1), f.get(2))
            else {
                continue;
            };
            // The master by its node id (its address may be unknown to the cluster: `?`).
            let redis::Value::Array(m) = m else { continue };
            let Some(redis::Value::BulkString(id)) = m.get(2) else {
                continue;
            };
            masters.push((
                *lo as u16,
                *hi as u16,
                String::from_utf8_lossy(id).into_owned(),
            ));
        }
        // Per master asked (by id, or the slot when no range covers it), the key asked through.
        let mut chosen: Vec<(Result<&str, u16>, &'k [u8])> = Vec::new();
        for &k in keys {
            let slot = redis::cluster_routing::get_slot(k);
            // A slot no range covers (the cluster is changing, or a reply not understood) is
            // asked through a key of its own: never taken for another master's.
            let master = masters
                .iter()
                .find(|(lo, hi, _)| (*lo..=*hi).contains(&slot))
                .map(|(_, _, m)| m.as_str());
            let asked = |c: &(Result<&str, u16>, &[u8])| match (c.0, master) {
                (Ok(c), Some(m)) => c == m,
                (Err(s), None) => s == slot,
                _ => false,
            };
            if !chosen.iter().any(asked) {
                chosen.push((master.ok_or(slot), k));
            }
        }
        Ok(chosen.into_iter().map(|(_, k)| k).collect())
    }

    /// Sends `cmds` as one pipeline (on a cluster, each to its key's master), their replies
    /// ignored, retrying a server it cannot reach for the server's patience. A command the
    /// server refuses fails the call (`ExtensionError` and the like: not retried).
    pub(crate) fn pipeline(&self, op: &'static str, cmds: &[redis::Cmd]) -> Result<(), RedisError> {
        self.retrying(op, |conn| match conn {
            Conn::One(c) => {
                let mut p = redis::pipe();
                for cmd in cmds {
                    p.add_command(cmd.clone()).ignore();
                }
                p.query::<()>(c)
            }
            Conn::Cluster(c) => {
                let mut p = redis::cluster::cluster_pipe();
                for cmd in cmds {
                    p.add_command(cmd.clone()).ignore();
                }
                p.query::<()>(c)
            }
        })
    }

    fn dial(&self) -> redis::RedisResult<Conn> {
        match &*self.dial {
            Dial::One(client) => {
                let c = client.get_connection_with_timeout(TIMEOUT)?;
                c.set_read_timeout(Some(REPLY_TIMEOUT))?;
                c.set_write_timeout(Some(TIMEOUT))?;
                Ok(Conn::One(c))
            }
            Dial::Cluster(client) => Ok(Conn::Cluster(client.get_connection()?)),
        }
    }

    pub(crate) fn error(&self, op: &'static str, e: RedisError) -> StoreError {
        StoreError::Remote {
            store: self.name.to_string(),
            op,
            source: Box::new(e),
        }
    }
}

/// The waits between a call's tries, and whether another try is due.
pub(crate) struct Waits {
    began: Instant,
    next: Duration,
    patience: Duration,
}

impl Waits {
    pub(crate) fn new(patience: Duration) -> Waits {
        Waits {
            began: Instant::now(),
            next: Duration::from_millis(100),
            patience,
        }
    }

    /// Sleeps before the next try, having said why; false (at once) when the patience is spent.
    pub(crate) fn wait(&mut self, server: &str, op: &str, e: &RedisError) -> bool {
        let spent = self.began.elapsed();
        if spent >= self.patience {
            return false;
        }
        let wait = self.next.min(self.patience - spent);
        eprintln!(
            "tidemark: waiting for {server} to {op} ({e}); trying again in {} ms, for up to \
             {} s in all",
            wait.as_millis(),
            self.patience.as_secs()
        );
        std::thread::sleep(wait);
        self.next = (self.next * 2).min(Duration::from_secs(5));
        true
    }
}

/// Errors after which the same call may be tried again: the server unreachable, a reply that
/// did not come, a cluster moving slots or failing over.
pub(crate) fn retryable(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_timeout()
        || e.is_cluster_error()
        // A script running long (another part's checkpoint on the same master).
        || e.code() == Some("BUSY")
        || matches!(
            e.kind(),
            redis::ErrorKind::TryAgain
                | redis::ErrorKind::ClusterDown
                | redis::ErrorKind::MasterDown
                | redis::ErrorKind::BusyLoadingError
                | redis::ErrorKind::ReadOnly
        )
}

/// A `redis://` address read: the seeds, each `redis://host:port`, and the credentials if
/// the address gives them.
#[derive(Debug, PartialEq, Eq)]
struct Address {
    /// `redis://host:port`, as messages show them.
    seeds: Vec<String>,
    /// The same, as host and port.
    hosts: Vec<(String, u16)>,
    /// `(user, password)`; an empty user is the server's default user (`AUTH password`).
    auth: Option<(String, String)>,
}

impl Address {
    /// What the client dials: each seed with the credentials.
    fn infos(&self) -> Vec<ConnectionInfo> {
        self.hosts
            .iter()
            .map(|(host, port)| ConnectionInfo {
                addr: ConnectionAddr::Tcp(host.clone(), *port),
                redis: RedisConnectionInfo {
                    username: self
                        .auth
                        .as_ref()
                        .map(|(u, _)| u.clone())
                        .filter(|u| !u.is_empty()),
                    password: self.auth.as_ref().map(|(_, p)| p.clone()),
                    ..RedisConnectionInfo::default()
                },
            })
            .collect()
    }

    /// The address as messages show it: the password left out.
    fn shown(&self) -> String {
        let hosts: Vec<&str> = self
            .seeds
            .iter()
            .map(|s| s.trim_start_matches("redis://"))
            .collect();
        match &self.auth {
            Some((user, _)) => format!("redis://{user}:***@{}", hosts.join(",")),
            None => format!("redis://{}", hosts.join(",")),
        }
    }
}

/// `url` for a message: anything before an '@' (credentials) left out.
fn redacted(url: &str) -> String {
    let shown = match url.rsplit_once('@') {
        Some((before, after)) => {
            let scheme = before.split_once("://").map_or("", |(s, _)| s);
            format!("{scheme}://***@{after}")
        }
        None => url.to_string(),
    };
    shown.chars().take(200).collect()
}

/// Reads `redis://[[user]:password@]host:port[,host:port…]` (the password as written, no
/// percent-decoding; every seed takes the same credentials).
fn parse_url(url: &str) -> Result<Address, String> {
    let Some(rest) = url.strip_prefix("redis://") else {
        let scheme = url.split("://").next().unwrap_or("");
        let tls = if scheme == "rediss" {
            " (TLS, rediss://, is not supported yet)"
        } else {
            ""
        };
        return Err(format!(
            "expected redis://[[user]:password@]host:port[,host:port…]{tls}, got {:?}",
            url.split('@')
                .next_back()
                .unwrap_or("")
                .chars()
                .take(80)
                .collect::<String>()
        ));
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    // The credentials end at the last '@' (a password may hold one; a host cannot).
    let (auth, rest) = match rest.rsplit_once('@') {
        None => (None, rest),
        Some((userinfo, hosts)) => {
            let (user, password) = userinfo.split_once(':').unwrap_or(("", userinfo));
            if password.is_empty() {
                return Err("the address gives a user but no password (user:password@)".into());
            }
            (Some((user.to_string(), password.to_string())), hosts)
        }
    };
    let seeds: Vec<&str> = rest.split(',').collect();
    if seeds.len() > MAX_SEEDS {
        return Err(format!(
            "{} addresses, more than the {MAX_SEEDS} seeds accepted",
            seeds.len()
        ));
    }
    let hosts = seeds
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let bad = |why: &str| format!("address {} ({s:?}): {why}", i + 1);
            let (host, port) = s
                .rsplit_once(':')
                .ok_or_else(|| bad("expected host:port"))?;
            if host.is_empty() || host.contains(['/', '@', ' ', ':']) {
                return Err(bad("expected a host name or address before the port"));
            }
            let port: u16 = port
                .parse()
                .ok()
                .filter(|&p| p > 0)
                .ok_or_else(|| bad("expected a port from 1 to 65535"))?;
            Ok((host.to_string(), port))
        })
        .collect::<Result<Vec<(String, u16)>, String>>()?;
    Ok(Address {
        seeds: hosts
            .iter()
            .map(|(h, p)| format!("redis://{h}:{p}"))
            .collect(),
        hosts,
        auth,
    })
}

#[cfg(test)]
mod tests {
    use super::parse_url;

    #[test]
    fn addresses_are_read_one_by_one_and_a_bad_one_is_named() {
        let a = parse_url("redis://a:1,10.0.0.2:6380/").unwrap();
        assert_eq!(a.seeds, ["redis://a:1", "redis://10.0.0.2:6380"]);
        assert_eq!(a.auth, None);
        let err = parse_url("redis://a:1,b:0").unwrap_err();
        assert!(err.contains("address 2") && err.contains("port"), "{err}");
        assert!(parse_url("http://a:1").unwrap_err().contains("redis://"));
        assert!(parse_url("rediss://a:1").unwrap_err().contains("TLS"));
        assert!(parse_url("redis://:1").unwrap_err().contains("host"));
        let many = format!("redis://{}", vec!["h:1"; 65].join(","));
        assert!(parse_url(&many).unwrap_err().contains("65 addresses"));
    }

    #[test]
    fn credentials_are_read_and_never_shown() {
        let a = parse_url("redis://app:s3cr@t@h:1,g:2").unwrap();
        assert_eq!(a.auth, Some(("app".into(), "s3cr@t".into())));
        assert_eq!(a.seeds, ["redis://h:1", "redis://g:2"]);
        assert_eq!(a.shown(), "redis://app:***@h:1,g:2");
        let a = parse_url("redis://:pw@h:1").unwrap();
        assert_eq!(a.auth, Some((String::new(), "pw".into())));
        assert!(!a.shown().contains("pw"));
        assert!(parse_url("redis://app:@h:1")
            .unwrap_err()
            .contains("no password"));
        // A refused address never echoes the password.
        let err = parse_url("http://u:hunter2@h:1").unwrap_err();
        assert!(!err.contains("hunter2"), "{err}");
    }
}
