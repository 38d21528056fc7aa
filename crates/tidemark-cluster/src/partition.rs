//! One partition's part of the state: a [`Store`] whose rows live under one hash tag (their
//! layout: [`crate::rows`]), whose commit is one fenced script on that tag's slot.

use std::collections::BTreeMap;

use tidemark_stream::store::{ReadTxn, Store, StoreError, Txn};

use crate::rows::{all_rows, commit_script, At, Keys, Rows};
use crate::server::{retryable, Server, Waits};

/// The longest part name accepted, bytes.
const MAX_PART: usize = 260;

/// The set of every part's name.
pub(crate) const PARTS: &str = "tm:parts";

/// Claims a part: its epoch rises by one; returns the new epoch and the commits landed.
const CLAIM: &str = r#"
local e = redis.call('HINCRBY', KEYS[1], 'epoch', 1)
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
    keys: Keys,
    claim: Option<Claim>,
}

impl PartitionStore {
    /// Claims part `part` on `server` for writing: a writer that claimed it before can no
    /// longer commit. The part's state is read lazily, as the pipeline asks for it.
    pub fn claim(server: &Server, part: &str) -> Result<PartitionStore, StoreError> {
        check_part(part)?;
        let keys = Keys::of(server, part);
        let (epoch, seq): (u64, u64) = server.call("claim the part", |c| {
            redis::cmd("EVAL")
                .arg(CLAIM)
                .arg(1)
                .arg(&keys.fence)
                .query(c)
        })?;
        server.call("list the part", |c| {
            redis::cmd("SADD").arg(PARTS).arg(part).query::<i64>(c)
        })?;
        Ok(PartitionStore {
            server: server.clone(),
            keys,
            claim: Some(Claim { epoch, seq }),
        })
    }

    /// Part `part` on `server`, to read only.
    pub fn reader(server: &Server, part: &str) -> Result<PartitionStore, StoreError> {
        check_part(part)?;
        Ok(PartitionStore {
            server: server.clone(),
            keys: Keys::of(server, part),
            claim: None,
        })
    }

    /// Every row of the part, `(table, start, key) → value` (for inspection and tests: it
    /// reads the whole part).
    pub fn rows(&self) -> Result<BTreeMap<At, Vec<u8>>, StoreError> {
        all_rows(&self.server, &self.keys)
    }

    /// The commits the part holds now (its fence's count).
    pub(crate) fn commits_now(&self) -> Result<u64, StoreError> {
        let seq: Option<u64> = self.server.call("read the fence", |c| {
            redis::cmd("HGET").arg(&self.keys.fence).arg("seq").query(c)
        })?;
        Ok(seq.unwrap_or(0))
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
        let last: Option<String> = self.server.call("read the fence", |c| {
            redis::cmd("HGET")
                .arg(&self.keys.fence)
                .arg("last")
                .query(c)
        })?;
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
        self.commit(&t)
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
