//! `window`: one key of a pipeline's metric, as the workers of a scale-out run publish it
//! (`tidemark run --store`, docs/scale-out.md), answering its windows to any Redis client.
//!
//! A scale-out run keeps each Kafka partition's state on a slot of its own, so one key's
//! buckets may be spread over as many partitions as saw the key, on as many masters. A module
//! command reaches only its own slot, so after each checkpoint lands the worker also puts the
//! key's buckets of that checkpoint here, under the key's own name (`tm:<metric>:<key>`, on
//! the key's slot): per bucket start, one entry per partition, **replacing** what that
//! partition put for that start under an earlier version — the writer's claim (epoch) and the
//! commit it publishes. Replacing makes a put idempotent: a put repeated after a crash, or by
//! the partition's next owner, leaves the value as one put would; a partition's later put of a
//! start (a late event merged into it) takes the earlier's place; and a put of a writer fenced
//! out, arriving late, is ignored where a later owner put.
//! A window is then the merge of every entry whose start is inside it, by the pipeline's own
//! code ([`tidemark_stream::query::key_window`]), so its answer is `tidemark query`'s:
//!
//! ```text
//! window(key, [at − W, at)) = merge { entry(start, partition) : at − W ≤ start < at }
//! ```
//!
//! Each entry is a bucket in the store's form ([`tidemark_stream::stored`]), checked against
//! the metric as it is put. Each partition's put says where it has closed its buckets
//! (`closed`): the default window ends at the latest of the key's partitions' (a partition
//! that saw the key once long ago does not hold later windows back; pass `AT` for an end every
//! partition has passed), and entries before the metric's retention counted back from the
//! latest are dropped at each put, so a key holds at most its retention's buckets per
//! partition.
//!
//! Puts replicate as they were sent. Redis replicates asynchronously: a failover of the key's
//! master can lose its last puts, and a bucket no later put rewrites then stays as it was
//! (the parts, and `tidemark query --store`, are not affected).
//!
//! The value holds the run's config (its text, parsed once per server for every key that
//! shares it), so the key answers alone.
//!
//! ```text
//! TMWINDOW.PUT key metric part epoch commit closed [CONFIG text] start bytes [start bytes ...]
//! TMWINDOW.GET key [WINDOW ms] [AT ms] [QUANTILE q]
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};

use tidemark::codec::{Reader, Writer};
use tidemark_stream::config::{Config, MetricConfig};
use tidemark_stream::engine::MetricShape;
use tidemark_stream::query::{self, Ask};

use super::{bundle, Access, Call, Clock, Encoded, Keys, LoadError, Spec, TmType};
use crate::args::show;
use crate::error::CmdError;
use crate::limits::Limits;
use crate::reply::{Replicate, Reply};

/// The longest config text a key takes, bytes.
const MAX_CONFIG: usize = 1 << 20;
/// The most partitions one key's entries come from.
const MAX_PARTS: usize = 4_096;
/// The longest partition name, bytes (a topic name and a number).
const MAX_PART_NAME: usize = 260;
/// The most bytes of entries one key holds (each entry a bucket of the metric's).
const MAX_ENTRY_BYTES: usize = 256 << 20;

/// A run's config, parsed, shared by every key published under it.
#[derive(Debug)]
pub struct Job {
    /// The config's text, as the run was given it.
    text: String,
    /// The config.
    config: Config,
    /// Its metrics' shapes (what reads a stored bucket), made once.
    shapes: Vec<MetricShape>,
}

/// The configs parsed on this server, by text: a worker's put carries its config only while
/// the key is new, and every key of a run shares one.
static JOBS: Mutex<Vec<(u64, Weak<Job>)>> = Mutex::new(Vec::new());

/// A config text's hash, to find its job without comparing every text a server holds.
fn text_hash(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

impl Job {
    /// The job of `text`: the one parsed already if a key holds it, else parsed now.
    fn of(text: &str) -> Result<Arc<Job>, String> {
        let hash = text_hash(text);
        let mut jobs = JOBS.lock().unwrap_or_else(|p| p.into_inner());
        jobs.retain(|(_, j)| j.strong_count() > 0);
        if let Some(j) = jobs
            .iter()
            .filter(|(h, _)| *h == hash)
            .filter_map(|(_, j)| j.upgrade())
            .find(|j| j.text == text)
        {
            return Ok(j);
        }
        let config = Config::from_toml(text).map_err(|e| e.to_string())?;
        let job = Arc::new(Job {
            text: text.to_string(),
            shapes: config.metrics.iter().map(MetricShape::of).collect(),
            config,
        });
        jobs.push((hash, Arc::downgrade(&job)));
        Ok(job)
    }
}

/// A put's version: the writer's claim on its partition and the commit it publishes. A
/// partition's next owner claims with a higher epoch, so a put of a writer fenced out, late,
/// never replaces what a later owner put.
type Version = (u64, u64);

/// One partition that put entries.
#[derive(Clone, Debug)]
struct Part {
    /// Its name (`topic:partition`).
    name: Vec<u8>,
    /// Where it has closed the metric's buckets, ms: as its latest put said.
    closed: u64,
    /// The version of the put that said so.
    version: Version,
}

/// The bytes before each entry's bucket in a [`Start`]: partition u16, epoch u64, commit
/// u64, length u32.
const ENTRY_HEAD: usize = 2 + 8 + 8 + 4;

/// One start's entries, packed in one buffer, each `partition u16, epoch u64, commit u64,
/// length u32` (little-endian) and the bucket's stored bytes. A bucket is often tens of bytes
/// (a p = 10 HyperLogLog of a few items): an allocation per entry would cost more than the
/// entry.
#[derive(Clone, Debug, Default)]
struct Start(Vec<u8>);

impl Start {
    /// The entries: partition, version, bytes.
    fn iter(&self) -> impl Iterator<Item = (u16, Version, &[u8])> {
        let mut rest = &self.0[..];
        std::iter::from_fn(move || {
            let le8 = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
            let head = rest.get(..ENTRY_HEAD)?;
            let part = u16::from_le_bytes([head[0], head[1]]);
            let version = (le8(&head[2..10]), le8(&head[10..18]));
            let len = u32::from_le_bytes([head[18], head[19], head[20], head[21]]) as usize;
            let bytes = rest.get(ENTRY_HEAD..ENTRY_HEAD + len)?;
            rest = &rest[ENTRY_HEAD + len..];
            Some((part, version, bytes))
        })
    }

    fn push(out: &mut Vec<u8>, part: u16, version: Version, bytes: &[u8]) {
        out.extend_from_slice(&part.to_le_bytes());
        out.extend_from_slice(&version.0.to_le_bytes());
        out.extend_from_slice(&version.1.to_le_bytes());
        out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        out.extend_from_slice(bytes);
    }

    /// Sets partition `part`'s entry, unless a put of a later version set it.
    fn put(&mut self, part: u16, version: Version, bytes: &[u8]) {
        let mut out = Vec::with_capacity(self.0.len() + ENTRY_HEAD + bytes.len());
        let mut placed = false;
        for (p, v, b) in self.iter() {
            if p != part {
                Start::push(&mut out, p, v, b);
            } else if v > version {
                return;
            } else {
                Start::push(&mut out, part, version, bytes);
                placed = true;
            }
        }
        if !placed {
            Start::push(&mut out, part, version, bytes);
        }
        self.0 = out;
    }
}

/// One key's buckets, per start and partition.
#[derive(Clone, Debug)]
pub struct Published {
    job: Arc<Job>,
    /// The metric's place in the config.
    metric: usize,
    /// The partitions that put entries, in the order they first did.
    parts: Vec<Part>,
    /// The entries by start: each a partition's place in `parts`, the put's version and the
    /// bucket's stored bytes.
    entries: BTreeMap<u64, Start>,
    /// The bytes the entries' buffers hold.
    entry_bytes: usize,
}

impl Published {
    fn metric(&self) -> &MetricConfig {
        &self.job.config.metrics[self.metric]
    }

    /// The earliest and latest closed bucket end of the key's partitions.
    fn closed(&self) -> Option<(u64, u64)> {
        let min = self.parts.iter().map(|p| p.closed).min()?;
        let max = self.parts.iter().map(|p| p.closed).max()?;
        Some((min, max))
    }

    /// Drops the entries before the retention horizon counted back from the latest closed end.
    fn expire(&mut self) {
        let Some((_, newest)) = self.closed() else {
            return;
        };
        let m = self.metric();
        let horizon = query::retention_horizon(newest - newest % m.bucket, m.retention, m.bucket);
        let keep = self.entries.split_off(&horizon);
        let dropped: usize = self.entries.values().map(|s| s.0.len()).sum();
        self.entry_bytes -= dropped;
        self.entries = keep;
    }

    /// Sets partition `part`'s entry at `start`, unless a put of a later version set it.
    fn put(&mut self, part: u16, version: Version, start: u64, bytes: &[u8]) {
        let at = self.entries.entry(start).or_default();
        let before = at.0.len();
        at.put(part, version, bytes);
        self.entry_bytes = self.entry_bytes - before + at.0.len();
    }

    /// The place of partition `name`, added if new.
    fn part(&mut self, name: &[u8]) -> Option<u16> {
        if let Some(i) = self.parts.iter().position(|p| p.name == name) {
            return Some(i as u16);
        }
        if self.parts.len() >= MAX_PARTS {
            return None;
        }
        self.parts.push(Part {
            name: name.to_vec(),
            closed: 0,
            version: (0, 0),
        });
        Some((self.parts.len() - 1) as u16)
    }

    /// Checks `bytes` as a bucket of the metric starting at `start`.
    fn check(
        m: &MetricConfig,
        shape: &MetricShape,
        start: u64,
        bytes: &[u8],
    ) -> Result<(), String> {
        if start > Limits::MAX_TIME_MS || start % m.bucket != 0 {
            return Err(format!(
                "start {start} is not a bucket start of metric '{}' ({} ms buckets, at most 2^52)",
                m.name, m.bucket
            ));
        }
        shape.decode(bytes, start).map(drop).map_err(|e| {
            format!(
                "the bucket at {start} is not one of metric '{}': {e}",
                m.name
            )
        })
    }
}

impl TmType for Published {
    const NAME: &'static str = "window";

    /// The starts' buffers and their map nodes (about 48 bytes a start: key, vector, a
    /// node's share and the allocator's header), and the partitions' names; the config is
    /// shared by every key of its run.
    fn heap_bytes(&self) -> usize {
        let starts: usize = self.entries.values().map(|s| 48 + s.0.capacity()).sum();
        let parts: usize = self.parts.iter().map(|p| 40 + p.name.len()).sum();
        core::mem::size_of::<Published>() + starts + parts
    }

    fn to_bytes(&self) -> Vec<u8> {
        let mut params = Writer::new();
        let text = self.job.text.as_bytes();
        let name = self.metric().name.as_bytes();
        params.u32(text.len() as u32).raw(text);
        params.u16(name.len() as u16).raw(name);
        params.u16(self.parts.len() as u16);
        for p in &self.parts {
            params.u16(p.name.len() as u16).raw(&p.name);
            params.u64(p.closed).u64(p.version.0).u64(p.version.1);
        }
        let mut parts = Vec::new();
        for (start, at) in &self.entries {
            for (part, (epoch, seq), bytes) in at.iter() {
                let mut w = Writer::with_capacity(18 + bytes.len());
                w.u16(part).u64(epoch).u64(seq).raw(bytes);
                parts.push((*start, w.into_bytes()));
            }
        }
        bundle::encode(bundle::KIND_WINDOW, params.bytes(), &parts)
    }

    fn latest(&self) -> Option<u64> {
        self.closed().map(|(_, max)| max)
    }

    fn info(&self, m: &mut Vec<(&'static str, Reply)>) {
        let metric = self.metric();
        m.push((
            "structure",
            Reply::text("a pipeline metric's key: buckets per start and partition, as scale-out workers publish them"),
        ));
        m.push(("metric", Reply::text(metric.name.clone())));
        m.push(("kind", Reply::text(metric.kind.name())));
        m.push(("bucket_ms", Reply::Integer(metric.bucket as i64)));
        m.push(("window_ms", Reply::Integer(metric.window as i64)));
        m.push(("retention_ms", Reply::Integer(metric.retention as i64)));
        m.push(("partitions", Reply::Integer(self.parts.len() as i64)));
        m.push(("starts", Reply::Integer(self.entries.len() as i64)));
        m.push((
            "entries",
            Reply::Integer(
                self.entries
                    .values()
                    .map(|s| s.iter().count())
                    .sum::<usize>() as i64,
            ),
        ));
        let closed = self.closed();
        m.push((
            "closed_ms",
            closed.map_or(Reply::Null, |(min, _)| Reply::Integer(min as i64)),
        ));
        m.push((
            "latest_ms",
            closed.map_or(Reply::Null, |(_, max)| Reply::Integer(max as i64)),
        ));
    }

    fn decode(encoded: &mut Encoded<'_>) -> Option<Result<Self, LoadError>> {
        let Encoded::Bundle(bundle::KIND_WINDOW, r) = encoded else {
            return None;
        };
        Some(decode(r))
    }
}

/// Reads a window bundle's parameters and entries, each checked as a put checks it.
fn decode(r: &mut Reader<'_>) -> Result<Published, LoadError> {
    let d = LoadError::Decode;
    let text_len = r
        .u32_in("config length", ..=MAX_CONFIG as u32, "at most 1 MiB")
        .map_err(d)?;
    let text = r.bytes(u64::from(text_len), "config").map_err(d)?;
    let text =
        std::str::from_utf8(text).map_err(|_| bundle::invalid(r, "config", "UTF-8 text", 0))?;
    let job = Job::of(text)
        .map_err(|_| LoadError::Unsupported("a window under a config that does not parse"))?;
    let name_len = r.u16("metric name length").map_err(d)?;
    let name = r.bytes(u64::from(name_len), "metric name").map_err(d)?;
    let metric = job
        .config
        .metrics
        .iter()
        .position(|m| m.name.as_bytes() == name)
        .ok_or(LoadError::Unsupported(
            "a window of a metric its config does not have",
        ))?;
    let count = r
        .u16_in("partitions", ..=MAX_PARTS as u16, "at most 4,096")
        .map_err(d)? as usize;
    let mut parts = Vec::with_capacity(count);
    for _ in 0..count {
        let len = r
            .u16_in(
                "partition name length",
                ..=MAX_PART_NAME as u16,
                "at most 260",
            )
            .map_err(d)?;
        let name = r
            .bytes(u64::from(len), "partition name")
            .map_err(d)?
            .to_vec();
        if name.is_empty() || parts.iter().any(|p: &Part| p.name == name) {
            return Err(LoadError::Unsupported(
                "a window with an empty or repeated partition name",
            ));
        }
        let closed = r.u64("closed").map_err(d)?;
        if closed > Limits::MAX_TIME_MS {
            return Err(LoadError::Limit("a closed time beyond 2^52 ms"));
        }
        let version = (r.u64("epoch").map_err(d)?, r.u64("commit").map_err(d)?);
        parts.push(Part {
            name,
            closed,
            version,
        });
    }
    let mut value = Published {
        job,
        metric,
        parts,
        entries: BTreeMap::new(),
        entry_bytes: 0,
    };
    let job = Arc::clone(&value.job);
    let (m, shape) = (&job.config.metrics[value.metric], &job.shapes[value.metric]);
    bundle::read_parts(r, u32::MAX.into(), "entries", |r, start, entry| {
        let mut e = Reader::new(entry);
        let part = e.u16("entry partition").map_err(d)?;
        if usize::from(part) >= value.parts.len() {
            return Err(bundle::invalid(
                r,
                "entry partition",
                "a partition of the key",
                part.into(),
            ));
        }
        let version = (
            e.u64("entry epoch").map_err(d)?,
            e.u64("entry commit").map_err(d)?,
        );
        let bytes = &entry[e.offset()..];
        Published::check(m, shape, start, bytes).map_err(|_| {
            LoadError::Unsupported("an entry that is no bucket of the key's metric")
        })?;
        if value.entry_bytes + bytes.len() > MAX_ENTRY_BYTES {
            return Err(LoadError::Limit("entries beyond 256 MiB"));
        }
        value.put(part, version, start, bytes);
        Ok(())
    })?;
    value.expire();
    Ok(value)
}

/// `TMWINDOW.PUT`.
pub const PUT: Spec = Spec {
    name: "TMWINDOW.PUT",
    legacy: None,
    access: Access::Write,
    fast: false,
    keys: Keys::First,
    clock: Clock::No,
    usage: "key metric part epoch commit closed [CONFIG text] start bytes [start bytes ...]",
    summary: "Puts a partition's buckets of a pipeline metric's key, each replacing what that partition put for its start under an earlier (epoch, commit) (a scale-out worker's publication); CONFIG, the run's config, creates the key",
    complexity: "O(n log s): n buckets put, s starts held",
    run: put,
};

/// `TMWINDOW.GET`.
pub const GET: Spec = Spec {
    name: "TMWINDOW.GET",
    legacy: None,
    access: Access::Read,
    fast: false,
    keys: Keys::First,
    clock: Clock::No,
    usage: "key [WINDOW ms] [AT ms] [QUANTILE q]",
    summary: "The window of WINDOW ms (default: the metric's) ending at AT (default: the latest point a partition holding the key has closed its buckets), merged over the partitions: [estimate, low, high], as tidemark query answers it",
    complexity: "O(b): b buckets in the window",
    run: get,
};

fn put(call: &mut Call<'_, '_>) -> Result<Reply, CmdError> {
    let a = &mut call.args;
    let key = a.take()?;
    let metric = a.take()?;
    let part = a.take()?;
    let epoch = a.u64(
        "epoch",
        "a non-negative integer (the writer's claim)",
        u64::MAX,
    )?;
    let commit = a.u64(
        "commit",
        "a non-negative integer (the commit published)",
        u64::MAX,
    )?;
    let version = (epoch, commit);
    let closed = a.u64(
        "closed",
        "a non-negative integer of milliseconds since the epoch (at most 2^52)",
        Limits::MAX_TIME_MS,
    )?;
    let config = if a.keyword("CONFIG") {
        Some(a.take()?)
    } else {
        None
    };
    let mut buckets = Vec::new();
    while a.left() > 0 {
        let start = a.u64(
            "start",
            "a bucket start, ms since the epoch (at most 2^52)",
            Limits::MAX_TIME_MS,
        )?;
        buckets.push((start, a.take()?));
    }
    let cmd = call.name();
    let param = |msg: String| CmdError::Param { cmd, msg };
    if buckets.is_empty() {
        return Err(param(
            "no buckets: start bytes [start bytes ...] follow".into(),
        ));
    }
    if part.is_empty() || part.len() > MAX_PART_NAME {
        return Err(param(format!(
            "partition name '{}' must be 1 to {MAX_PART_NAME} bytes",
            show(part)
        )));
    }
    let exists = !matches!(call.keys.vacant(key), Ok(()));
    let put = Put {
        cmd,
        key,
        part,
        version,
        closed,
        buckets: &buckets,
    };
    let held = if exists {
        let v = call.keys.write::<Published>(key)?;
        if v.metric().name.as_bytes() != metric {
            return Err(param(format!(
                "key '{}' holds metric '{}', not '{}'",
                show(key),
                v.metric().name,
                show(metric)
            )));
        }
        if config.is_some_and(|c| c != v.job.text.as_bytes()) {
            return Err(param(format!(
                "key '{}' was published under another config (a run's keys share one config; delete the key to publish another run's)",
                show(key)
            )));
        }
        put.apply(v)?;
        v.entries.len()
    } else {
        let text = config.ok_or(CmdError::NoSuchKey {
            cmd,
            key: show(key),
        })?;
        if text.len() > MAX_CONFIG {
            return Err(param(format!(
                "CONFIG is {} bytes, at most 1 MiB",
                text.len()
            )));
        }
        let text = std::str::from_utf8(text)
            .map_err(|_| param("CONFIG must be the run's config, UTF-8 TOML".into()))?;
        let job = Job::of(text).map_err(|e| param(format!("CONFIG does not parse: {e}")))?;
        let name = std::str::from_utf8(metric).unwrap_or("");
        let metric = job
            .config
            .metrics
            .iter()
            .position(|m| m.name == name)
            .ok_or_else(|| {
                param(format!(
                    "CONFIG has no metric '{}' (it has {})",
                    show(metric),
                    job.config
                        .metrics
                        .iter()
                        .map(|m| m.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?;
        // The new value is built and checked whole before it is stored: a refused put
        // creates no key.
        let mut v = Published {
            job,
            metric,
            parts: Vec::new(),
            entries: BTreeMap::new(),
            entry_bytes: 0,
        };
        put.apply(&mut v)?;
        let held = v.entries.len();
        call.keys.store(key, super::Value::Window(v));
        held
    };
    call.rep = Replicate::Verbatim;
    Ok(Reply::Integer(held as i64))
}

/// One put's arguments, read.
struct Put<'a> {
    cmd: &'static str,
    key: &'a [u8],
    part: &'a [u8],
    version: Version,
    closed: u64,
    buckets: &'a [(u64, &'a [u8])],
}

impl Put<'_> {
    /// Checks every bucket and bound, then (only then) changes `value`.
    fn apply(&self, value: &mut Published) -> Result<(), CmdError> {
        let cmd = self.cmd;
        let job = Arc::clone(&value.job);
        let (m, shape) = (&job.config.metrics[value.metric], &job.shapes[value.metric]);
        let mut adding = 0usize;
        for (start, bytes) in self.buckets {
            Published::check(m, shape, *start, bytes)
                .map_err(|msg| CmdError::Param { cmd, msg })?;
            adding += ENTRY_HEAD + bytes.len();
        }
        if value.entry_bytes + adding > MAX_ENTRY_BYTES {
            return Err(CmdError::Limit {
                cmd,
                msg: format!(
                    "key '{}' would hold more than 256 MiB of buckets",
                    show(self.key)
                ),
            });
        }
        let Some(p) = value.part(self.part) else {
            return Err(CmdError::Limit {
                cmd,
                msg: format!(
                    "key '{}' has buckets of {MAX_PARTS} partitions already",
                    show(self.key)
                ),
            });
        };
        let at = &mut value.parts[usize::from(p)];
        if self.version >= at.version {
            at.closed = self.closed;
            at.version = self.version;
        }
        for (start, bytes) in self.buckets {
            value.put(p, self.version, *start, bytes);
        }
        value.expire();
        Ok(())
    }
}

fn get(call: &mut Call<'_, '_>) -> Result<Reply, CmdError> {
    let a = &mut call.args;
    let key = a.take()?;
    let (mut window, mut at, mut quantile) = (None, None, None);
    let mut seen = a.options();
    while a.left() > 0 {
        if a.option(&mut seen, "WINDOW")? {
            window = Some(a.ms("WINDOW")?);
        } else if a.option(&mut seen, "AT")? {
            at = Some(a.u64(
                "AT",
                "a non-negative integer of milliseconds since the epoch (at most 2^52)",
                Limits::MAX_TIME_MS,
            )?);
        } else if a.option(&mut seen, "QUANTILE")? {
            quantile = Some(a.fraction("QUANTILE")?);
        } else {
            a.done()?;
        }
    }
    let cmd = call.name();
    let v = call.keys.read::<Published>(key)?;
    let m = v.metric();
    let (closed, newest) = v.closed().unwrap_or((0, 0));
    // The default end: the latest any partition holding the key has closed (a partition
    // that saw the key once long ago must not hold every later window back).
    let at = at.unwrap_or(newest);
    let window = window.unwrap_or(m.window);
    // Only the starts the window can cover are read: by start, and within a start by
    // partition name, the order `tidemark query --store` merges the parts in.
    let reach = at.saturating_sub(window.saturating_add(m.bucket));
    let mut buckets: Vec<(u64, &[u8], &[u8])> = v
        .entries
        .range(reach..=at)
        .flat_map(|(s, at)| {
            at.iter()
                .map(|(p, _, b)| (*s, &v.parts[usize::from(p)].name[..], b))
        })
        .collect();
    buckets.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    let buckets: Vec<(u64, &[u8])> = buckets.into_iter().map(|(s, _, b)| (s, b)).collect();
    let qs = quantile.map(|q| [q]);
    let ask = Ask {
        quantiles: qs.as_ref().map(|q| &q[..]),
    };
    let answer = query::key_window(m, key, &buckets, closed, newest, window, Some(at), &ask)
        .map_err(|e| CmdError::Param {
            cmd,
            msg: e.to_string(),
        })?;
    Ok(answer
        .rows
        .first()
        .map_or(Reply::Null, |r| r.estimate.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_are_shared_while_a_key_holds_them() -> Result<(), String> {
        let text = "[input]\ntime_field = \"t\"\n[[metric]]\nname = \"n\"\nkind = \"count\"\nkey = []\nbucket = \"1m\"\nwindow = \"5m\"\n";
        let a = Job::of(text)?;
        let b = Job::of(text)?;
        assert!(Arc::ptr_eq(&a, &b));
        Ok(())
    }
}
