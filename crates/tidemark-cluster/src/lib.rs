//! tidemark past one machine: a pipeline's state kept in Redis (a single server or a Redis
//! Cluster), **one part per input partition**, and read back merged.
//!
//! # The design: state per partition
//!
//! A worker that reads partition `p` of a topic runs the pipeline as it runs on one machine —
//! one engine, its open buckets in memory, a checkpoint every few seconds — with a
//! [`PartitionStore`] in place of the file. Every row the checkpoint writes (closed buckets,
//! their digests, the keys' state rows, the run state holding `p`'s next offset) goes into
//! Redis keys that share one hash tag, `{tm:<part>}`, so that they live on one cluster slot,
//! and the whole checkpoint is **one Lua script** on that slot: it lands whole or not at all,
//! and a replica receives it whole. A partition's state and its position are therefore exactly
//! once, as a file's are: the next owner resumes at the offset the state accounts for.
//!
//! Ownership is **fenced**. A worker given the partition claims it (the part's `epoch` rises
//! by one) and writes only while the epoch is still its own and the part's commit count
//! (`seq`) is the one it last saw: a worker the group moved the partition away from, still
//! running, is refused ([`StoreError::Fenced`]) rather than overwriting its successor; and a
//! commit that a failover lost (Redis replicates asynchronously: a promoted replica may lack
//! the last script) shows as a `seq` behind the writer's ([`StoreError::Behind`]), so the
//! writer starts the partition again from what the server holds instead of building on a
//! state that is gone.
//!
//! Reading a part back is lazy: the engine asks for a key's rows when the key's next event
//! comes (the pipeline's own read-back path), each a hash lookup on the part's slot.
//!
//! # Keys (per part `P`, hash tag `{tm:P}`)
//!
//! | key | type | holds |
//! | --- | --- | --- |
//! | `{tm:P}:s:<n>:<table>:<start>` | hash | a table's rows at one start, by key (the layout: `rows.rs`) |
//! | `{tm:P}:t:<n>:<table>` | sorted set | the table's starts |
//! | `{tm:P}:tables` | set | the part's tables |
//! | `{tm:P}:meta` | hash | the run's metadata: config, fingerprint, run state with `P`'s offset |
//! | `{tm:P}:fence` | hash | `epoch` (the owner's claim), `seq` (commits landed), `last` (the claim and count of the last commit), `published` (the commits published) |
//! | `tm:parts` | set | every part's name, for readers ([`MergedStore`]) |
//! | `{tm:alerts}:duty`, `{tm:alerts}:state` | string | the alert duty's lease and its evaluation's state ([`AlertDuty`]) |
//!
//! # Publishing for the module's commands
//!
//! A writer made with [`PartitionStore::publishing`] also puts, after each commit, the
//! buckets it wrote into one `tidemark-redis` module value per key, `tm:<metric>:<key>`, on
//! the key's own slot, where `TMWINDOW.GET` answers the key's windows merged over every
//! partition (`publish.rs`, and the module's `types/window.rs`).
//!
//! # Alerts on the merged state
//!
//! [`AlertDuty`]: one worker at a time (a lease) evaluates the run's alert rules on the parts
//! merged, at each close every part has closed, and hands a close's lines out before it stores
//! the evaluation's state: once per episode across the workers, at least once (`alerts.rs`).
//!
//! # Reading merged
//!
//! [`MergedStore`] answers queries over every part: a key's buckets are the union of its
//! parts' (a bucket a key has in two partitions is two parts, merged as the summaries merge),
//! and the default query time is the earliest of the parts' watermarks, where every part has
//! closed its buckets.
//!
//! ```no_run
//! use tidemark_cluster::{MergedStore, Server};
//! use tidemark_stream::query;
//!
//! let server = Server::connect("redis://127.0.0.1:7000,127.0.0.1:7001")?;
//! let merged = MergedStore::open(&server)?;
//! let answer = query::window(&merged, "fanout", 300_000, None, None, Some(10))
//!     .map_err(|e| std::io::Error::other(e.to_string()))?;
//! println!("{} keys", answer.rows.len());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod alerts;
mod merged;
mod partition;
mod publish;
mod rows;
mod server;

pub use alerts::{AlertDuty, DutyRound, DUTY_LEASE};
pub use merged::MergedStore;
pub use partition::PartitionStore;
pub use publish::window_key;
pub use server::Server;
pub use tidemark_stream::store::StoreError;
