//! One partition's part of the state: a [`Store`] whose rows live under one hash tag (their
//! layout: [`crate::rows`]), whose commit is one fenced script on that tag's slot.

use std::collections::BTreeMap;

use tidemark_stream::store::{Meta, ReadTxn, Store, StoreError, Txn};

use crate::publish::Publisher;
use crate::rows::{all_rows, commit_script, At, Keys, Rows};
use crate::server::{retryable, Server, Waits};

/// The longest part name accepted, bytes.
const MAX_PART: usize = 260;

/// The set of every part's name.
pub(crate) const PARTS: &str = "tm:parts";

/// Claims a part: its epoch rises to the claimer's clock (ms, `ARGV[1]`), or by one when that
/// is not above it; returns the new epoch and the commits landed. Taking the clock keeps a
/// new claim above every claim before it even when a failover lost the last ones (a replica
/// promoted before it had them): a publication's version (epoch, commit) then never falls
/// below one a lost claim put (`publish.rs`).
const CLAIM: &str = r#"
local e = tonumber(redis.call('HGET', KEYS[1], 'epoch') or '0')
local now = tonumber(ARGV[1])
if now > e then e = now else e = e + 1 end
redis.call('HSET', KEYS[1], 'epoch', string.format('%d', e))
local s = redis.call('HGET', KEYS[1], 'seq')
return {e, tonumber(s or '0')}
"#;

/// Checks a part's name: what a topic and partition make (`flows:3`), within a hash tag.
fn check_part(part: &str) -> Result<(), StoreError> {
    let ok = !part.is_empty()
        && part.len() <= MAX_PART
        && part
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b));
    if ok {
        return Ok(());
    }
    Err(StoreError::PartName {
        name: part.chars().take(60).collect(),
        expected: "1 to 260 of A-Z a-z 0-9 . _ : -",
    })
}

/// How long a claim waits for the part's master's replicas to have it.
const CLAIM_WAIT_MS: u64 = 2_000;

/// Waits until the replicas of the part's master have the claim (`WAIT`), for up to
/// [`CLAIM_WAIT_MS`]: Redis replicates asynchronously, and a failover to a replica that never
/// received the claim would let the writer before it commit once more under its old claim
/// (it is caught at this writer's next commit, `Behind`, but that commit would be counted
/// before the part starts again). A replica that does not answer in time is said on standard
/// error, and the claim goes on: waiting longer would stall every partition for one slow
/// replica.
fn wait_for_replicas(server: &Server, keys: &Keys, part: &str) {
    match server.replicas_have(keys.fence.as_bytes(), CLAIM_WAIT_MS) {
        Ok((have, connected)) if have >= connected => {}
        Ok((have, connected)) => eprintln!(
            "tidemark: part {part}: {have} of {connected} replicas had the claim after \
             {CLAIM_WAIT_MS} ms; going on (a failover to one that lacks it is caught at the next \
             commit)"
        ),
        Err(e) => eprintln!("tidemark: part {part}: {e}; going on without it"),
    }
}

/// The writer's claim on a part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Claim {
    epoch: u64,
    /// Commits landed, as this writer last saw.
    seq: u64,
}

/// One partition's state on a Redis server or cluster. [`PartitionStore::claim`] makes the
/// part's writer (fencing out the one before); [`PartitionStore::reader`] one that only reads.
pub struct PartitionStore {
    server: Server,
    part: String,
    keys: Keys,
    claim: Option<Claim>,
    /// Whether commits are published for the module's commands (`publish.rs`), and with what
    /// once the run's config is known.
    publish: Option<Option<Publisher>>,
    /// Whether a commit of this writer went unpublished: `published` is then left behind.
    unpublished: bool,
    /// Whether this writer's last publication was not confirmed by the replicas in time: the
    /// next commit publishes the part whole (see [`Publisher::publish`]).
    unconfirmed: bool,
}

impl PartitionStore {
    /// Claims part `part` on `server` for writing: a writer that claimed it before can no
    /// longer commit. The part's state is read lazily, as the pipeline asks for it.
    pub fn claim(server: &Server, part: &str) -> Result<PartitionStore, StoreError> {
        check_part(part)?;
        let keys = Keys::of(server, part);
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let (epoch, seq): (u64, u64) = server.call("claim the part", |c| {
            redis::cmd("EVAL")
                .arg(CLAIM)
                .arg(1)
                .arg(&keys.fence)
                .arg(now_ms)
                .query(c)
        })?;
        server.call("list the part", |c| {
            redis::cmd("SADD").arg(PARTS).arg(part).query::<i64>(c)
        })?;
        wait_for_replicas(server, &keys, part);
        Ok(PartitionStore {
            server: server.clone(),
            part: part.to_string(),
            keys,
            claim: Some(Claim { epoch, seq }),
            publish: None,
            unpublished: false,
            unconfirmed: false,
        })
    }

    /// Lists parts `names` on `server` before any is claimed (the partitions of a topic):
    /// merged alerts wait for every listed part to close some of a metric, so they never
    /// evaluate a close without a partition whose worker has not started yet.
    pub fn list(server: &Server, names: &[String]) -> Result<(), StoreError> {
        for n in names {
            check_part(n)?;
        }
        if names.is_empty() {
            return Ok(());
        }
        server.call("list the parts", |c| {
            redis::cmd("SADD").arg(PARTS).arg(names).query::<i64>(c)
        })?;
        Ok(())
    }

    /// Part `part` on `server`, to read only.
    pub fn reader(server: &Server, part: &str) -> Result<PartitionStore, StoreError> {
        check_part(part)?;
        Ok(PartitionStore {
            server: server.clone(),
            part: part.to_string(),
            keys: Keys::of(server, part),
            claim: None,
            publish: None,
            unpublished: false,
            unconfirmed: false,
        })
    }

    /// This writer, publishing each commit's buckets for the `tidemark-redis` module's
    /// `TMWINDOW.GET` (`publish.rs`): the module must be loaded on every master. A part whose
    /// last commits were not published (its writer was killed between a commit and its
    /// publication) is published whole first.
    pub fn publishing(mut self) -> Result<PartitionStore, StoreError> {
        let Some(claim) = self.claim else {
            return Err(StoreError::Contract {
                what: "publishing from a part opened to read",
            });
        };
        let info: redis::Value = self.server.call("find the module's TMWINDOW.PUT", |c| {
            redis::cmd("COMMAND")
                .arg("INFO")
                .arg("TMWINDOW.PUT")
                .query(c)
        })?;
        let loaded = match &info {
            redis::Value::Array(v) => v.first().is_some_and(|x| *x != redis::Value::Nil),
            _ => false,
        };
        if !loaded {
            return Err(StoreError::Remote {
                store: self.server.name().to_string(),
                op: "find the module's TMWINDOW.PUT",
                source: "publishing needs the tidemark-redis module loaded on every master \
                         (redis-server --loadmodule libtidemark_redis.so)"
                    .into(),
            });
        }
        let publisher = match self.meta()? {
            None => None,
            Some(meta) => {
                let mut p = Publisher::new(&meta.config)?;
                let published: Option<u64> = self.fence_field("published")?;
                if published.unwrap_or(0) < claim.seq {
                    let rows = self.rows()?;
                    let version = (claim.epoch, claim.seq);
                    match self.publish_all(&mut p, version, &meta, &rows) {
                        Ok(true) => self.mark_published(claim.seq)?,
                        Ok(false) => self.unconfirmed = true,
                        Err(e) => {
                            self.unpublished = true;
                            eprintln!(
                                "tidemark: {}: publishing the part whole failed ({e}); the run \
                                 goes on, and the next writer to claim it tries again",
                                self.keys.label
                            );
                        }
                    }
                }
                Some(p)
            }
        };
        self.publish = Some(publisher);
        Ok(self)
    }

    /// Publishes `rows`, every row of the part, with `p` as of `version` (see
    /// [`Publisher::publish`]: true when the replicas confirmed it).
    fn publish_all(
        &self,
        p: &mut Publisher,
        version: (u64, u64),
        meta: &Meta,
        rows: &BTreeMap<At, Vec<u8>>,
    ) -> Result<bool, StoreError> {
        let all = rows
            .iter()
            .map(|((t, s, k), v)| (t.as_str(), *s, k.as_slice(), v.as_slice()));
        p.publish(&self.server, &self.part, version, meta, all)
    }

    /// Records that commits up to `seq` are published.
    fn mark_published(&self, seq: u64) -> Result<(), StoreError> {
        self.server.call("record the publication", |c| {
            redis::cmd("HSET")
                .arg(&self.keys.fence)
                .arg("published")
                .arg(seq)
                .query::<i64>(c)
        })?;
        Ok(())
    }

    /// Publishes a commit's rows, if this writer publishes.
    fn publish_commit(&mut self, rows: &Rows) -> Result<(), StoreError> {
        let (Some(publish), Some(claim)) = (&mut self.publish, self.claim) else {
            return Ok(());
        };
        let text = |name: &str| -> Result<Option<Vec<u8>>, StoreError> { rows.meta(name) };
        let (Some(config), Some(state)) = (text("config")?, text("state")?) else {
            return Ok(());
        };
        let config = String::from_utf8(config).map_err(|_| StoreError::Damaged {
            what: format!("{}: its config is not UTF-8", self.keys.label),
        })?;
        if publish.as_ref().is_none_or(|p| p.config() != config) {
            *publish = Some(Publisher::new(&config)?);
        }
        let meta = Meta {
            config,
            fingerprint: 0,
            state,
        };
        let Some(mut p) = publish.take() else {
            return Ok(());
        };
        let version = (claim.epoch, claim.seq);
        // After a publication the replicas did not confirm, the part whole (this commit's rows
        // among them): whichever put a failover lost is put again.
        let confirmed = if self.unconfirmed {
            self.rows()
                .and_then(|all| self.publish_all(&mut p, version, &meta, &all))
        } else {
            p.publish(&self.server, &self.part, version, &meta, rows.puts())
        };
        self.publish = Some(Some(p));
        if !confirmed? {
            if !self.unconfirmed {
                eprintln!(
                    "tidemark: {}: the replicas did not confirm the keys' windows within a \
                     second; the next commit publishes the part whole",
                    self.keys.label
                );
            }
            self.unconfirmed = true;
            return Ok(());
        }
        self.unconfirmed = false;
        if self.unpublished {
            return Ok(());
        }
        self.mark_published(claim.seq)
    }

    /// Every row of the part, `(table, start, key) → value` (for inspection and tests: it
    /// reads the whole part).
    pub fn rows(&self) -> Result<BTreeMap<At, Vec<u8>>, StoreError> {
        all_rows(&self.server, &self.keys)
    }

    /// The first start `table` holds (its sorted set's least), if any.
    pub(crate) fn first_start(&self, table: &str) -> Result<Option<u64>, StoreError> {
        let first: Vec<String> = self.server.call("read a table's first start", |c| {
            redis::cmd("ZRANGE")
                .arg(self.keys.starts(table))
                .arg(0)
                .arg(0)
                .query(c)
        })?;
        first
            .first()
            .map(|m| self.keys.start_named(table, m))
            .transpose()
    }

    /// The commits the part holds now (its fence's count).
    pub(crate) fn commits_now(&self) -> Result<u64, StoreError> {
        let seq: Option<u64> = self.fence_field("seq")?;
        Ok(seq.unwrap_or(0))
    }

    /// One field of the part's fence (`seq`, `last`, `published`), if set.
    fn fence_field<T: redis::FromRedisValue>(&self, name: &str) -> Result<Option<T>, StoreError> {
        self.server.call("read the fence", |c| {
            redis::cmd("HGET").arg(&self.keys.fence).arg(name).query(c)
        })
    }

    /// The commits this writer has seen land on the part (with those before its claim).
    pub fn commits(&self) -> Option<u64> {
        self.claim.map(|c| c.seq)
    }

    /// This part, its calls retried for up to `patience` (see [`Server`]).
    pub fn with_patience(mut self, patience: std::time::Duration) -> PartitionStore {
        self.server = self.server.clone().with_patience(patience);
        self
    }

    /// Sends a transaction's writes in one script, tried again while the server cannot be
    /// reached (for its patience); before each new try the fence says whether the last one
    /// landed after all, so that a commit lands once.
    fn commit(&mut self, rows: &Rows) -> Result<(), StoreError> {
        let Some(claim) = self.claim else {
            return Err(StoreError::Contract {
                what: "a write to a part opened to read",
            });
        };
        let script = commit_script(&self.keys, claim.epoch, claim.seq, rows)?;
        let mut waits = Waits::new(self.server.patience());
        loop {
            let e = match self.server.try_call(|c| script.query::<u64>(c)) {
                Ok(seq) => {
                    self.claim = Some(Claim { seq, ..claim });
                    return Ok(());
                }
                Err(e) => e,
            };
            match e.code() {
                Some("TMFENCED") => {
                    return Err(StoreError::Fenced {
                        store: self.keys.label.clone(),
                        what: e.detail().unwrap_or("fenced").to_string(),
                    })
                }
                Some("TMBEHIND") => {
                    // A try before this one may have landed after it was given up on.
                    if self.landed(claim)? {
                        return Ok(());
                    }
                    return Err(StoreError::Behind {
                        store: self.keys.label.clone(),
                        holds: e.detail().and_then(|d| d.trim().parse().ok()).unwrap_or(0),
                        saw: claim.seq,
                    });
                }
                _ => {}
            }
            if !(retryable(&e) && waits.wait(self.server.name(), "commit a checkpoint", &e)) {
                return Err(self.server.error("commit a checkpoint", e));
            }
            if self.landed(claim)? {
                return Ok(());
            }
        }
    }

    /// Whether this writer's commit after `claim` landed (the fence's `last` names the claim
    /// and commit count of the last commit): then the claim moves on to it.
    fn landed(&mut self, claim: Claim) -> Result<bool, StoreError> {
        let last: Option<String> = self.fence_field("last")?;
        let mine = format!("{}:{}", claim.epoch, claim.seq + 1);
        if last.as_deref() == Some(mine.as_str()) {
            self.claim = Some(Claim {
                seq: claim.seq + 1,
                ..claim
            });
            return Ok(true);
        }
        Ok(false)
    }
}

impl Store for PartitionStore {
    fn read(
        &self,
        f: &mut dyn FnMut(&dyn ReadTxn) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        f(&Rows::new(&self.server, &self.keys))
    }

    fn view(&self) -> Result<Box<dyn ReadTxn>, StoreError> {
        Ok(Box::new(Rows::view(&self.server, &self.keys)))
    }

    fn write(
        &mut self,
        f: &mut dyn FnMut(&mut dyn Txn) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        if self.claim.is_none() {
            return Err(StoreError::Contract {
                what: "a write to a part opened to read",
            });
        }
        let mut t = Rows::new(&self.server, &self.keys);
        f(&mut t)?;
        self.commit(&t)?;
        // The commit landed: a publication that fails is said, never reported as the
        // commit's failure (the run goes on from what it stored). The part's `published`
        // then stays behind, so its next claimer publishes it whole.
        if let Err(e) = self.publish_commit(&t) {
            self.unpublished = true;
            eprintln!(
                "tidemark: {}: its keys' windows were not published ({e}); the part holds the \
                 commit, and the next writer to claim it publishes the part whole",
                self.keys.label
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_name_fits_a_hash_tag() {
        assert!(check_part("flows:3").is_ok());
        // Kafka's longest topic name (249) with a partition number fits.
        assert!(check_part(&format!("{}:99999", "t".repeat(249))).is_ok());
        for bad in ["", "a}b", "a{b", "a b", &"x".repeat(261)] {
            assert!(check_part(bad).is_err(), "{bad:?}");
        }
    }
}
