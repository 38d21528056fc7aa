//! The routes: the token check, the method check, and each endpoint's parameters, read and
//! bounded before the store is touched.
//!
//! Every answer comes from [`tidemark_stream::query::window_asking`], the function behind
//! `tidemark query`: the server only parses parameters and lays the rows out in the field
//! names of `docs/output.md`, one row per line `tidemark query --json` would print (a
//! frequency metric's heavy items and a quantile metric's quantiles each a row), so an answer
//! here and one from the command line are the same numbers.
//!
//! | path | parameters |
//! | --- | --- |
//! | `/api/v1/query` | `metric`, `key`, `window` (default the metric's), `at`, `quantile` (repeatable, or `0.5,0.99`), `items` |
//! | `/api/v1/top` | `metric`, `n` (1 to 1,000, default 10), `window`, `at`, `quantile`, `items` |
//! | `/api/v1/series` | `metric`, `key`, `window`, `from`, `to` (default the newest window end), `step` (default a bucket; at most 1,440 points, and points × the window's buckets at most 200,000: [`crate::series`]), `quantile`, `items` |
//! | `/api/v1/alerts` | `since`, `metric`, `n` (1 to 1,000, default 100) |
//! | `/api/v1/metrics` | none |
//!
//! Times (`at`, `from`, `to`, `since`) are RFC 3339 or epoch seconds; durations are `30s`,
//! `5m`, `1h`, `7d`. A window must be a multiple of the metric's bucket and at most its
//! retention. An unknown parameter, or one given twice that cannot be, is a 400 naming it.
//!
//! The store does not keep alerts (`tidemark run` prints them as JSON lines): `/api/v1/alerts`
//! reads the file those lines were written to, given as `--alerts`, from its last MiB.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{json, Map, Value};
use tidemark_stream::config::Config;
use tidemark_stream::store::{Meta, RedbStore, Store};
use tidemark_stream::time::{format_rfc3339, parse_rfc3339};

use crate::ask::stored_tables;
pub use crate::ask::{metric_ref, MetricRef, WindowAsk, MAX_QUANTILES};
use crate::error::{ApiError, ServeError};
use crate::health::{file_id, FileId};
pub use crate::health::{Health, InputMark, MetricHealth};
use crate::http::{self, Request, Response};
pub use crate::params::{Params, MAX_N};
pub use crate::render::rows;
use crate::render::{answer_json, metric_json};
pub use crate::series::{MAX_SERIES_BUCKETS, MAX_STEPS};
use crate::Options;

/// The dashboard page, served at `/`.
const DASHBOARD: &str = include_str!("dashboard.html");

/// The most bytes of the alert file read (its end).
const ALERT_TAIL: u64 = 1 << 20;

/// Entries of bucket starts a held store handle remembers having verified (16 bytes each):
/// see [`tidemark_stream::store::VerifiedStarts`].
const VERIFIED_ENTRIES: usize = 1 << 20;
/// `/api/v1/top` answers kept for the current generation of the store.
const TOP_CACHE: usize = 64;
/// How long after a scrape the server keeps `/metrics`' answer computed ahead ([`App::warm`]).
pub const WARM_FOR: std::time::Duration = std::time::Duration::from_secs(300);

/// What every request shares: the store's path, the token, the export limits, the store
/// handle kept between requests and the answers kept until the next checkpoint.
pub struct App {
    db: PathBuf,
    /// A store not in a file, opened anew for each request (`db` is then its name).
    remote: Option<crate::Remote>,
    token: Option<Vec<u8>>,
    top: usize,
    alerts: Option<PathBuf>,
    /// The store opened read-only, kept between requests (see [`App::open`]).
    held: Mutex<Option<Held>>,
    /// `/metrics`' estimate families and health at one generation of the store.
    scrape: Mutex<Option<(Generation, Arc<Scrape>)>>,
    /// `/api/v1/top` answers at one generation, by their parameters.
    tops: Mutex<(Option<Generation>, HashMap<String, Value>)>,
    /// Held while `/metrics`' or `/api/v1/top`'s answer is computed: requests that find it
    /// missing at once (the first after a checkpoint) wait for one computation.
    computing: Mutex<()>,
    /// When `/metrics` was last asked for.
    scraped: Mutex<Option<std::time::Instant>>,
    /// The serving run's own health (`tidemark run --serve`).
    run: Option<Arc<crate::RunHealth>>,
    /// The store's config as last parsed, by its text.
    parsed: Mutex<Option<(String, Arc<Config>)>>,
}

/// `/metrics`' estimate families, and the health they go with.
type Scrape = (String, Health);

/// A store handle kept between requests, and the file it was opened on.
struct Held {
    store: Arc<RedbStore>,
    file: FileId,
}

/// What answers computed from the store hold for: the metadata's seal (which every checkpoint
/// changes with the run state) and the file's identity, length and modification time (which
/// every commit changes). An answer kept is served while all are unchanged.
#[derive(Clone, Debug, PartialEq)]
struct Generation {
    seal: Option<u64>,
    file: FileId,
    len: u64,
    modified: Option<std::time::SystemTime>,
}

/// A lock whose holder panicked: what it guards (a cache, a handle) is whole at every step.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl App {
    /// Checks the options: the token file reads and holds one token, the store opens.
    pub fn new(options: &Options) -> Result<App, ServeError> {
        let token = match &options.token_file {
            None => None,
            Some(path) => Some(read_token(path)?),
        };
        let failed = |path: PathBuf| {
            move |source| ServeError::Store {
                path,
                source: Box::new(source),
            }
        };
        let store = match &options.remote {
            // Opened now to fail early on a server that cannot be read.
            Some(r) => {
                (r.open)().map_err(failed(PathBuf::from(&r.name)))?;
                None
            }
            // Opened now to fail early on a missing or foreign file; kept if opened
            // read-only.
            None => {
                Some(RedbStore::open_existing(&options.db).map_err(failed(options.db.clone()))?)
            }
        };
        let app = App {
            db: options.db.clone(),
            remote: options.remote.clone(),
            token,
            top: options.top.clamp(1, crate::MAX_TOP),
            alerts: options.alerts.clone(),
            held: Mutex::new(None),
            scrape: Mutex::new(None),
            tops: Mutex::new((None, HashMap::new())),
            computing: Mutex::new(()),
            scraped: Mutex::new(None),
            run: options.run.clone(),
            parsed: Mutex::new(None),
        };
        if let (Some(store), Ok(m)) = (store, std::fs::metadata(&options.db)) {
            app.hold(store, file_id(&m));
        }
        Ok(app)
    }

    /// Keeps `store` for later requests if it is open read-only (one opened as the writer —
    /// to repair a file an interrupted run left — is let go, so that a run can open it).
    fn hold(&self, store: RedbStore, file: FileId) -> Arc<RedbStore> {
        let store = Arc::new(store.remember_verified(VERIFIED_ENTRIES));
        if store.is_read_only() {
            *lock(&self.held) = Some(Held {
                store: Arc::clone(&store),
                file,
            });
        }
        store
    }

    /// The response to `request`.
    pub fn handle(&self, request: &Request) -> Response {
        let pairs = match http::parse_query(&request.query) {
            Ok(p) => p,
            Err((name, what)) => return error(&ApiError::bad(&name, what)),
        };
        if let Some(token) = &self.token {
            let sent = request
                .authorization
                .as_deref()
                .and_then(|a| a.strip_prefix("Bearer "))
                .map(str::trim)
                .or_else(|| {
                    pairs
                        .iter()
                        .find(|(n, _)| n == "access_token")
                        .map(|(_, v)| v.as_str())
                });
            if !sent.is_some_and(|s| same(s.as_bytes(), token)) {
                return error(&ApiError::status(
                    401,
                    "this server needs its token: Authorization: Bearer TOKEN",
                ))
                .with_header("WWW-Authenticate", "Bearer realm=\"tidemark\"");
            }
        }
        if request.method != "GET" && request.method != "HEAD" {
            return error(&ApiError::status(
                405,
                format!("{} is not served: GET or HEAD only", request.method),
            ))
            .with_header("Allow", "GET, HEAD");
        }
        let params = Params { pairs };
        let result = match request.path.as_str() {
            "/" | "/index.html" => {
                return Response {
                    status: 200,
                    content_type: "text/html; charset=utf-8",
                    body: DASHBOARD.as_bytes().to_vec(),
                    headers: vec![(
                        "Content-Security-Policy",
                        "default-src 'none'; script-src 'unsafe-inline'; \
                         style-src 'unsafe-inline'; connect-src 'self'; img-src data:"
                            .to_string(),
                    )],
                }
            }
            "/metrics" => self.prometheus(&params).map(|text| Response {
                status: 200,
                content_type: "text/plain; version=0.0.4; charset=utf-8",
                body: text.into_bytes(),
                headers: Vec::new(),
            }),
            "/api/v1/query" => self.query(&params).map(ok),
            "/api/v1/top" => self.top(&params).map(ok),
            "/api/v1/series" => self
                .open()
                .and_then(|s| crate::series::series(&*s.store, &s.config, &params))
                .map(ok),
            "/api/v1/alerts" => self.alerts(&params).map(ok),
            "/api/v1/metrics" => self.metrics(&params).map(ok),
            other => Err(ApiError::status(
                404,
                format!(
                    "no such path: {other:?} (/, /metrics, /api/v1/query, /api/v1/top, \
                     /api/v1/series, /api/v1/alerts, /api/v1/metrics)"
                ),
            )),
        };
        result.unwrap_or_else(|e| error(&e))
    }

    /// The store, read-only, for one request: the handle kept from the last request (a
    /// read-only handle follows the writer's commits, and keeps redb's page cache and what
    /// keyed reads verified), or a new one when there is none, when the file at the path is
    /// another (replaced), or when the kept one failed.
    fn open(&self) -> Result<Stored, ApiError> {
        let unreadable = |e: &dyn std::fmt::Display| {
            ApiError::unavailable(format!("the store cannot be read: {e}"))
        };
        let (store, meta): (Arc<dyn Store + Send + Sync>, _) = match &self.remote {
            Some(r) => {
                let store: Arc<dyn Store + Send + Sync> =
                    Arc::from((r.open)().map_err(|e| unreadable(&e))?);
                let meta = store.meta().map_err(|e| unreadable(&e))?;
                (store, meta)
            }
            None => {
                let (store, meta) = self.open_file()?;
                (store, meta)
            }
        };
        let meta = meta.ok_or_else(|| {
            ApiError::unavailable("the store holds no checkpoint yet: no run has committed")
        })?;
        // Parsed once while the stored text is the same.
        let config = {
            let mut parsed = lock(&self.parsed);
            match &*parsed {
                Some((text, c)) if *text == meta.config => Arc::clone(c),
                _ => {
                    let c = Arc::new(Config::from_toml(&meta.config).map_err(|e| {
                        ApiError::unavailable(format!("the store's config is damaged: {e}"))
                    })?);
                    *parsed = Some((meta.config.clone(), Arc::clone(&c)));
                    c
                }
            }
        };
        Ok(Stored {
            store,
            config,
            state: meta.state,
        })
    }

    /// The file's store: the handle kept, or a new one (see [`App::open`]).
    fn open_file(&self) -> Result<(Arc<RedbStore>, Option<Meta>), ApiError> {
        let unreadable = |e: &dyn std::fmt::Display| {
            ApiError::unavailable(format!("the store cannot be read: {e}"))
        };
        let file = std::fs::metadata(&self.db).map_err(|e| unreadable(&e))?;
        let id = file_id(&file);
        let kept = lock(&self.held)
            .as_ref()
            .filter(|h| h.file == id)
            .map(|h| Arc::clone(&h.store));
        Ok(match kept.map(|s| (s.meta(), s)) {
            Some((Ok(meta), store)) => (store, meta),
            // None kept, or the kept one failed: open anew.
            _ => {
                *lock(&self.held) = None;
                let store = RedbStore::open_existing(&self.db).map_err(|e| unreadable(&e))?;
                let store = self.hold(store, id);
                let meta = store.meta().map_err(|e| unreadable(&e))?;
                (store, meta)
            }
        })
    }

    /// The store's generation now (read before an answer is computed: an answer computed
    /// across a commit is kept under the older generation, and computed again at the next
    /// request).
    fn generation(&self, s: &Stored) -> Result<Generation, ApiError> {
        let seal = s
            .store
            .generation()
            .map_err(|e| ApiError::unavailable(format!("the store cannot be read: {e}")))?;
        if self.remote.is_some() {
            // No file: the seal (of every part) alone changes with each commit.
            return Ok(Generation {
                seal,
                file: FileId::default(),
                len: 0,
                modified: None,
            });
        }
        let file = std::fs::metadata(&self.db)
            .map_err(|e| ApiError::unavailable(format!("the store cannot be read: {e}")))?;
        Ok(Generation {
            seal,
            file: file_id(&file),
            len: file.len(),
            modified: file.modified().ok(),
        })
    }

    fn query(&self, p: &Params) -> Result<Value, ApiError> {
        p.only(&["metric", "key", "window", "at", "quantile", "items"])?;
        let s = self.open()?;
        let w = WindowAsk::read(p, &s.config)?;
        let key = p.required("key")?;
        let answer = w.run(&*s.store, Some(key.as_bytes()), None, w.at)?;
        Ok(answer_json(&w, &answer))
    }

    fn top(&self, p: &Params) -> Result<Value, ApiError> {
        p.only(&["metric", "n", "window", "at", "quantile", "items"])?;
        let s = self.open()?;
        let w = WindowAsk::read(p, &s.config)?;
        let n = p.count("n", 10)?;
        // A scan of every key of the window: kept until the next checkpoint, by parameters.
        let generation = self.generation(&s)?;
        let asked = format!(
            "{}\n{}\n{:?}\n{n}\n{:?}\n{:?}",
            w.metric.name, w.window, w.at, w.quantiles, w.items
        );
        let kept = |g: &Generation| {
            let tops = lock(&self.tops);
            (tops.0.as_ref() == Some(g))
                .then(|| tops.1.get(&asked).cloned())
                .flatten()
        };
        if let Some(v) = kept(&generation) {
            return Ok(v);
        }
        let _one = lock(&self.computing);
        let generation = self.generation(&s)?;
        if let Some(v) = kept(&generation) {
            return Ok(v);
        }
        let answer = w.run(&*s.store, None, Some(n as usize), w.at)?;
        let v = answer_json(&w, &answer);
        let mut tops = lock(&self.tops);
        if tops.0.as_ref() != Some(&generation) || tops.1.len() >= TOP_CACHE {
            *tops = (Some(generation), HashMap::new());
        }
        tops.1.insert(asked, v.clone());
        Ok(v)
    }

    fn alerts(&self, p: &Params) -> Result<Value, ApiError> {
        p.only(&["since", "metric", "n"])?;
        let since = p.time("since")?.unwrap_or(0);
        let n = p.count("n", 100)? as usize;
        let metric = p.one("metric")?;
        let Some(path) = &self.alerts else {
            return Err(ApiError::status(
                404,
                "no alert log: the store does not keep alerts; `tidemark run` prints them as \
                 JSON lines, and `tidemark serve --alerts FILE` serves the file they go to",
            ));
        };
        let (text, cut) = tail(path, ALERT_TAIL).map_err(|e| {
            ApiError::unavailable(format!("cannot read the alert log {}: {e}", path.display()))
        })?;
        let mut alerts: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|a| {
                let at = a.get("at").and_then(Value::as_str).map(parse_rfc3339);
                let name = a.get("metric").and_then(Value::as_str);
                matches!(at, Some(Ok(t)) if t >= since) && metric.is_none_or(|m| name == Some(m))
            })
            .collect();
        let dropped = alerts.len().saturating_sub(n);
        alerts.drain(..dropped);
        Ok(json!({
            "source": path.display().to_string(),
            // Whether older alerts may be missing: the file is read from its last MiB, and
            // the newest `n` kept.
            "truncated": cut || dropped > 0,
            "alerts": alerts,
        }))
    }

    fn metrics(&self, p: &Params) -> Result<Value, ApiError> {
        p.only(&[])?;
        let s = self.open()?;
        let health = Health::of_state(&s.config, &s.state)?;
        let tables = stored_tables(&s.config);
        let metrics: Vec<Value> = s
            .config
            .metrics
            .iter()
            .enumerate()
            .map(|(i, m)| metric_json(m, tables.get(i), &health.metrics[i]))
            .collect();
        let mut o = Map::new();
        o.insert("records".into(), health.records.into());
        o.insert("bad_lines".into(), health.bad_lines.into());
        if let Some(t) = health.max_time {
            o.insert("event_time_max".into(), format_rfc3339(t).into());
        }
        o.insert("top".into(), self.top.into());
        o.insert("metrics".into(), metrics.into());
        Ok(Value::Object(o))
    }

    fn prometheus(&self, p: &Params) -> Result<String, ApiError> {
        p.only(&[])?;
        *lock(&self.scraped) = Some(std::time::Instant::now());
        let s = self.open()?;
        let computed = self.scrape_parts(&s)?;
        let (estimates, health) = &*computed;
        let mut out = estimates.clone();
        let file = self
            .remote
            .is_none()
            .then(|| std::fs::metadata(&self.db).ok())
            .flatten();
        crate::prom::health_families(&mut out, &s.config, health, file.as_ref());
        if let Some(run) = &self.run {
            run.families(&mut out);
        }
        Ok(out)
    }

    /// `/metrics`' estimates (a scan of each metric's window) and health (the run state
    /// decoded), kept until the next checkpoint; the file's size and age are read at each
    /// scrape. Computed once however many scrapes ask at once.
    fn scrape_parts(&self, s: &Stored) -> Result<Arc<Scrape>, ApiError> {
        let kept = |g: &Generation| {
            lock(&self.scrape)
                .as_ref()
                .filter(|(k, _)| k == g)
                .map(|(_, c)| Arc::clone(c))
        };
        if let Some(c) = kept(&self.generation(s)?) {
            return Ok(c);
        }
        let _one = lock(&self.computing);
        let generation = self.generation(s)?;
        if let Some(c) = kept(&generation) {
            return Ok(c);
        }
        let estimates = crate::prom::estimates(&*s.store, &s.config, self.top)?;
        // The run state as of now, not of before the generation was read.
        let state = s
            .store
            .meta()
            .map_err(|e| ApiError::unavailable(format!("the store cannot be read: {e}")))?
            .map(|m| m.state);
        let health = Health::of_state(&s.config, state.as_deref().unwrap_or(&s.state))?;
        let c = Arc::new((estimates, health));
        *lock(&self.scrape) = Some((generation, Arc::clone(&c)));
        Ok(c)
    }

    /// Computes `/metrics`' answer ahead of the next scrape when the store has moved on since
    /// the last (a checkpoint), if anything scraped in the last [`WARM_FOR`]: the server's
    /// warming thread calls it every 100 ms, so a scrape finds the answer ready rather than
    /// scanning each metric's window itself.
    pub fn warm(&self) {
        let recent = lock(&self.scraped).is_some_and(|t| t.elapsed() < WARM_FOR);
        if recent {
            if let Ok(s) = self.open() {
                let _ = self.scrape_parts(&s);
            }
        }
    }
}

/// A 200 with a JSON body.
fn ok(v: Value) -> Response {
    Response::json(200, &v)
}

/// An error's response.
fn error(e: &ApiError) -> Response {
    Response::json(e.status, &e.body())
}

/// Whether two byte strings are equal, in time that depends on the expected one's length
/// alone (not on where they first differ).
fn same(sent: &[u8], expected: &[u8]) -> bool {
    let mut diff = sent.len() ^ expected.len();
    for (i, &b) in expected.iter().enumerate() {
        diff |= usize::from(sent.get(i).copied().unwrap_or(0) ^ b);
    }
    diff == 0
}

/// The token in `path`: its one line, white space around it dropped.
fn read_token(path: &Path) -> Result<Vec<u8>, ServeError> {
    let text = std::fs::read_to_string(path).map_err(|source| ServeError::TokenFile {
        path: path.to_path_buf(),
        source,
    })?;
    let token = text.trim();
    let bad = |what| ServeError::BadToken {
        path: path.to_path_buf(),
        what,
    };
    if token.is_empty() {
        return Err(bad("holds no token (it is empty or white space)"));
    }
    if token.contains(['\n', '\r']) || token.bytes().any(|b| b.is_ascii_whitespace()) {
        return Err(bad(
            "holds more than one word: a token is one line, no spaces",
        ));
    }
    Ok(token.as_bytes().to_vec())
}

/// The last `limit` bytes of a file (from a line start), and whether earlier bytes were cut.
fn tail(path: &Path, limit: u64) -> std::io::Result<(String, bool)> {
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    let start = len.saturating_sub(limit);
    f.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    f.take(limit).read_to_end(&mut bytes)?;
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if start > 0 {
        // The first line is likely cut: skip it.
        let at = text.find('\n').map_or(text.len(), |i| i + 1);
        text.drain(..at);
    }
    Ok((text, start > 0))
}

/// An opened store and what its metadata says.
struct Stored {
    store: Arc<dyn Store + Send + Sync>,
    config: Arc<Config>,
    state: Vec<u8>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"secret", b"secret"));
        assert!(!same(b"secre", b"secret"));
        assert!(!same(b"secrets", b"secret"));
        assert!(!same(b"", b"secret"));
        assert!(!same(b"secreT", b"secret"));
    }
}
