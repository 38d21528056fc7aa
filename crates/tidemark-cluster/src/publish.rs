//! Publishing a part's buckets for the module's commands: each key's buckets put into the
//! `tidemark-redis` module's `window` value of the key (`TMWINDOW.PUT`), where any Redis client
//! asks for its windows (`TMWINDOW.GET`), merged over the partitions that hold the key.
//!
//! A part lives on its partition's slot, but a key's buckets may be in several parts, on
//! several masters, and a module command reaches only its own slot: so after a checkpoint
//! lands, the writer puts the buckets it wrote, per key, into the value under the key's own
//! name, [`window_key`] (`tm:<metric>:<key>`). A put replaces what the same partition put for
//! the same start under an earlier version (the writer's claim and the commit), so a put
//! repeated, or put again by the partition's next owner, changes nothing, and a fenced writer's
//! late put changes nothing either (the module's doc: `types/window.rs`).
//!
//! Publication follows the commit and is not part of it: a writer killed between the two
//! leaves the commit unpublished, and a publication the servers refuse (a key of another
//! type in the way, a key published under another config) is said on standard error, never
//! taken for the commit's failure. The fence keeps `published`, the commit count last
//! published; a writer that claims a part published less than it holds puts every bucket the
//! part holds again before it goes on ([`crate::PartitionStore::publishing`]).

use std::collections::{BTreeMap, HashSet};

use tidemark_stream::config::Config;
use tidemark_stream::query;
use tidemark_stream::store::{Meta, StoreError};

use crate::server::Server;

/// How long a publication waits for the replicas of the masters it put to (see
/// [`Publisher::publish`]).
const REPLICAS_WAIT_MS: u64 = 1_000;

/// Puts a pipeline of commands at once.
const PUTS: usize = 1_000;

/// Keys remembered as created: past this many the memory is forgotten (and the next put of
/// each carries the config again).
const KNOWN: usize = 1 << 20;

/// The Redis key of `metric`'s `key` (the key's bytes as the pipeline joins them: fields of a
/// composite key apart by the unit separator).
pub fn window_key(metric: &str, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(4 + metric.len() + key.len());
    k.extend_from_slice(b"tm:");
    k.extend_from_slice(metric.as_bytes());
    k.push(b':');
    k.extend_from_slice(key);
    k
}

/// One bucket written: table, start, key, stored bytes.
pub(crate) type Put<'a> = (&'a str, u64, &'a [u8], &'a [u8]);

/// A key's buckets to put, by (metric's place, key): each start and its stored bytes.
type KeyBuckets<'a> = BTreeMap<(usize, &'a [u8]), Vec<(u64, &'a [u8])>>;

/// What a writer publishes with, and the keys it knows hold its config.
pub(crate) struct Publisher {
    /// The run's config text, as the parts' metadata holds it.
    config: String,
    /// The config's metrics' names (only their tables are published).
    metrics: Vec<String>,
    /// Keys this writer put its config into (their puts leave `CONFIG` out).
    known: HashSet<Vec<u8>>,
}

impl Publisher {
    /// A publisher of the run whose config is `text`.
    pub fn new(text: &str) -> Result<Publisher, StoreError> {
        let config = Config::from_toml(text).map_err(|e| StoreError::Damaged {
            what: format!("the part's config does not parse: {e}"),
        })?;
        Ok(Publisher {
            config: text.to_string(),
            metrics: config.metrics.iter().map(|m| m.name.clone()).collect(),
            known: HashSet::new(),
        })
    }

    /// The run's config text.
    pub fn config(&self) -> &str {
        &self.config
    }

    /// Puts `rows` (any table's: only the metrics' are put) of part `part`, as of commit
    /// `version` (claim epoch, commit count), whose run state is `meta`'s. Then waits (`WAIT`,
    /// up to [`REPLICAS_WAIT_MS`]) until the connected replicas of every master it put to have
    /// the puts: true when they all do. Redis replicates asynchronously, and a failover to a
    /// replica that lacks a put would leave that bucket stale in the module for good (a closed
    /// bucket is not put again): a publication not confirmed is published again, whole.
    pub fn publish<'a>(
        &mut self,
        server: &Server,
        part: &str,
        version: (u64, u64),
        meta: &Meta,
        rows: impl Iterator<Item = Put<'a>>,
    ) -> Result<bool, StoreError> {
        let closed = query::closed_until(meta).map_err(|e| StoreError::Damaged {
            what: format!("part {part}: its run state: {e}"),
        })?;
        let mut keys: KeyBuckets<'_> = BTreeMap::new();
        for (table, start, key, bytes) in rows {
            if let Some(i) = self.metrics.iter().position(|m| m == table) {
                keys.entry((i, key)).or_default().push((start, bytes));
            }
        }
        if self.known.len() > KNOWN {
            self.known.clear();
        }
        // Each key's Redis name, made once.
        let keys: Vec<_> = keys
            .into_iter()
            .map(|((i, key), buckets)| (i, window_key(&self.metrics[i], key), buckets))
            .collect();
        for chunk in keys.chunks(PUTS) {
            let cmds = |known: &HashSet<Vec<u8>>| -> Vec<redis::Cmd> {
                chunk
                    .iter()
                    .map(|(i, name, buckets)| {
                        let metric = &self.metrics[*i];
                        let mut cmd = redis::cmd("TMWINDOW.PUT");
                        cmd.arg(&name[..])
                            .arg(metric)
                            .arg(part)
                            .arg(version.0)
                            .arg(version.1)
                            .arg(closed.get(*i).copied().unwrap_or(0));
                        if !known.contains(name) {
                            cmd.arg("CONFIG").arg(&self.config);
                        }
                        for (start, bytes) in buckets {
                            cmd.arg(*start).arg(*bytes);
                        }
                        cmd
                    })
                    .collect()
            };
            let first = server.pipeline("publish the keys' windows", &cmds(&self.known));
            if first.is_err() {
                // A key this writer created may be gone (deleted, or lost in a failover): the
                // chunk again, every put with the config.
                let again = server.pipeline("publish the keys' windows", &cmds(&HashSet::new()));
                again.map_err(|e| server.error("publish the keys' windows", e))?;
            }
            for (_, name, _) in chunk {
                self.known.insert(name.clone());
            }
        }
        let names: Vec<&[u8]> = keys.iter().map(|(_, name, _)| name.as_slice()).collect();
        for key in server.one_key_per_master(&names)? {
            let (have, connected) = server.replicas_have(key, REPLICAS_WAIT_MS)?;
            if have < connected {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::window_key;

    #[test]
    fn a_window_key_is_the_metric_and_the_key() {
        assert_eq!(window_key("fanout", b"10.0.0.7"), b"tm:fanout:10.0.0.7");
        assert_eq!(window_key("m", b"a\x1fb"), b"tm:m:a\x1fb");
    }
}
