//! The committer: checkpoints written into the store by a thread of their own, while the
//! run's thread reads on.
//!
//! The run hands the store to the committer, which opens a write transaction in it and holds
//! it open: the buckets the engine closes are sent into it as they close ([`Part::Closed`],
//! written while the run reads on), and at a checkpoint the rest of what the engine produced
//! with the run state that accounts for it ([`Part::Checkpoint`], taken in the run's thread by
//! [`CommitCtx::take`]): the transaction commits, and the committer opens the next one or
//! hands the store back. No two threads ever touch the store: it is the committer's until it
//! hands it back. Exactly once holds as in a one-thread run: a transaction holds the buckets
//! with the position that accounts for them, and a crash before it commits loses both (the
//! next run reads those records again; nothing written ahead is visible before the commit).
//! One checkpoint at a time is in the committer: the run waits for the last one to land
//! before it sends the next, and takes the store back (its last part a checkpoint) before
//! anything else that uses it — a checkpoint that spills keys, the commit before a bad line
//! stops the run, the run's last commit. A failed write is the run's error at that wait; a run
//! that stops without its checkpoint leaves the transaction, which rolls back.
//!
//! An engine with keys in the store rather than in memory (spilled, or not read back since a
//! resume: a resumed run's keys are read back at their next event; [`Engine::reads_store`])
//! reads them through a view of the last checkpoint, which must hold every checkpoint the
//! engine took: the run waits for each of its checkpoints to land and takes a new view before
//! it reads on. Between checkpoints it is as in one thread, where what the engine produced
//! since the last checkpoint is not in the view either: the buckets written ahead, and the
//! promotions of spilled keys' open rows that go with them (before them, as in a commit).
//! A source that acts on each commit (standard input keeps its head, a message source commits
//! its group's offsets, a followed file) is waited for the same way.
//!
//! Memory: at most [`PARTS_IN_FLIGHT`] parts wait, each the buckets closed since the part
//! before (a close's buckets: one a key held); the transaction's written pages are the
//! store's to hold until it commits (redb writes them out past half its page cache), as in a
//! one-thread run's checkpoint. Written ahead, the buckets of a checkpoint are no longer held
//! until it: the fan-out demo's peak fell from 245 to about 160 MiB.
//!
//! [`Engine::reads_store`]: crate::engine::Engine::reads_store

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::{Scope, ScopedJoinHandle};

use super::checkpoint::{CommitCtx, Pending};
use crate::config::Config;
use crate::engine::Ahead;
use crate::store::{OpenCommit, ReadTxn, Store, StoreError, Visit};
use crate::RunError;

/// A store the run's thread may hand to the committer.
pub(super) type SendStore<'r> = &'r mut (dyn Store + Send);

/// Parts the run may have sent that the committer has not taken yet: the run waits past them
/// (a part is about one close's buckets).
pub(super) const PARTS_IN_FLIGHT: usize = 4;

/// What the run sends into the transaction the committer holds open.
pub(super) enum Part {
    /// Buckets closed since the last part (and the promotions of their starts), written
    /// ahead of their checkpoint.
    Closed(Ahead),
    /// The checkpoint: the rest of the engine's outputs and the run state. The transaction
    /// commits; then with `keep` the committer opens the next one and keeps the store, and
    /// without it hands the store back.
    Checkpoint { pending: Box<Pending>, keep: bool },
}

/// The run's view of the store while the committer holds it, for an engine that reads nothing
/// back: none. A view kept open would hold every page the committer's commits free meanwhile
/// (the store reuses a page only once no reader can see it), and such an engine never reads
/// the store, so a read here is a bug, said as such rather than answered from an old view.
pub(super) struct AwayView;

impl AwayView {
    fn refused<T>() -> Result<T, StoreError> {
        Err(StoreError::Contract {
            what: "the run read the store while its committer held it",
        })
    }
}

impl ReadTxn for AwayView {
    fn meta(&self, _: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Self::refused()
    }

    fn get(&self, _: &str, _: u64, _: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Self::refused()
    }

    fn scan(&self, _: &str, _: u64, _: u64, _: &mut Visit<'_>) -> Result<(), StoreError> {
        Self::refused()
    }

    fn page(
        &self,
        _: &str,
        _: u64,
        _: Option<&[u8]>,
        _: usize,
        _: &mut Visit<'_>,
    ) -> Result<usize, StoreError> {
        Self::refused()
    }

    fn next_start(&self, _: &str, _: u64, _: u64) -> Result<Option<u64>, StoreError> {
        Self::refused()
    }
}

/// A checkpoint landed (or failed), and the store if the committer handed it back.
struct Done<'r> {
    store: Option<SendStore<'r>>,
    result: Result<(), RunError>,
}

/// The run's end of the committer thread.
pub(super) struct Committer<'s, 'r> {
    stores: Option<SyncSender<SendStore<'r>>>,
    parts: Option<SyncSender<Part>>,
    done: Receiver<Done<'r>>,
    thread: Option<ScopedJoinHandle<'s, ()>>,
}

/// The committer thread: for each store handed to it, transactions fed by parts until a
/// checkpoint without `keep`.
fn serve<'r>(
    ctx: &CommitCtx<'_>,
    stores: Receiver<SendStore<'r>>,
    parts: Receiver<Part>,
    tell: SyncSender<Done<'r>>,
) {
    for store in stores {
        loop {
            let mut keep = false;
            let result = store.write(&mut |t| {
                let mut commit = OpenCommit::begin(&*t)?;
                loop {
                    match parts.recv() {
                        Ok(Part::Closed(ahead)) => ctx.put_ahead(t, &mut commit, &ahead)?,
                        Ok(Part::Checkpoint { pending, keep: k }) => {
                            keep = k;
                            return ctx.apply(t, commit, &pending);
                        }
                        // The run is gone without its checkpoint: roll back.
                        Err(_) => return Err(StoreError::Abandoned),
                    }
                }
            });
            let failed = result.is_err();
            let result = result.map_err(RunError::Store);
            if keep && !failed {
                if tell
                    .send(Done {
                        store: None,
                        result,
                    })
                    .is_err()
                {
                    return;
                }
                continue;
            }
            // A failure ends the thread too: its parts' channel closes, so a run sending
            // into it hears at once rather than waiting on a full channel.
            let store = Some(store);
            if tell.send(Done { store, result }).is_err() || failed {
                return;
            }
            break;
        }
    }
}

impl<'s, 'r: 's> Committer<'s, 'r> {
    /// Starts the committer thread in `scope`, writing checkpoints of `config`; `None` when
    /// the system cannot start a thread (the run then commits in its own).
    pub(super) fn start(scope: &'s Scope<'s, '_>, config: &'r Config) -> Option<Committer<'s, 'r>> {
        let (stores, take) = sync_channel::<SendStore<'r>>(1);
        let (parts, receive) = sync_channel::<Part>(PARTS_IN_FLIGHT);
        // Room for the landing of the checkpoint in flight, which the run takes only before its
        // next, and for a failure of the transaction after it: a committer that failed never
        // waits to say so, so it never holds up a run waiting to send it a part.
        let (tell, done) = sync_channel::<Done<'r>>(2);
        let thread = std::thread::Builder::new()
            .name("tidemark-commit".into())
            .spawn_scoped(scope, move || {
                super::priority::behind_the_run();
                serve(&CommitCtx::new(config), take, receive, tell)
            })
            .ok()?;
        Some(Committer {
            stores: Some(stores),
            parts: Some(parts),
            done,
            thread: Some(thread),
        })
    }

    /// Hands the store to the committer, which opens a transaction in it for the parts that
    /// follow.
    pub(super) fn open(&mut self, store: SendStore<'r>) -> Result<(), RunError> {
        let stores = self.stores.as_ref().ok_or_else(stopped)?;
        stores.send(store).map_err(|_| stopped())
    }

    /// Sends a part into the open transaction; a committer that failed says why.
    pub(super) fn send(&mut self, part: Part) -> Result<(), RunError> {
        let parts = self.parts.as_ref().ok_or_else(stopped)?;
        if parts.send(part).is_ok() {
            return Ok(());
        }
        // The thread ended after a failed write, whose error it told last (after the landing
        // of the checkpoint before it, if the run had not heard of that one yet).
        loop {
            self.wait()?;
        }
    }

    /// Waits for the checkpoint sent last to land: the store if the committer handed it back,
    /// or the write's error.
    pub(super) fn wait(&mut self) -> Result<Option<SendStore<'r>>, RunError> {
        let Ok(done) = self.done.recv() else {
            // The thread is gone without a word: a panic, joined here so that the run
            // returns its error rather than the scope raising the panic again.
            if let Some(thread) = self.thread.take() {
                let _ = thread.join();
            }
            return Err(stopped());
        };
        done.result?;
        Ok(done.store)
    }
}

impl Drop for Committer<'_, '_> {
    fn drop(&mut self) {
        // The thread ends with its channels (an open transaction rolls back); the scope
        // joins it.
        self.stores = None;
        self.parts = None;
    }
}

fn stopped() -> RunError {
    RunError::Thread { name: "committer" }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::engine::{ClosedBucket, Engine};
    use crate::pipeline::state::RunState;
    use crate::store::MemStore;

    const CONFIG: &str = "[input]\nformat = \"csv\"\ntime_field = \"t\"\n\
        time_format = \"epoch_ms\"\n[[metric]]\nname = \"n\"\nkind = \"count\"\n\
        key = [\"k\"]\nbucket = \"1s\"\nwindow = \"1s\"\nretention = \"1h\"\n";

    /// Events of keys `a` and `b` at 0.005 s and of `a` at 1.5 s, event time then at 3 s:
    /// buckets (0, a), (0, b) and (1000, a) closed.
    fn fed(config: &Config) -> Engine {
        let mut e = Engine::new(config).unwrap();
        e.observe(5);
        e.add(0, 5, b"a", 1);
        e.add(0, 5, b"b", 2);
        e.observe(1_500);
        e.add(0, 1_500, b"a", 3);
        e.observe(3_000);
        e
    }

    /// The (start, key) of every stored bucket of metric `n`.
    fn stored(store: &MemStore) -> BTreeSet<(u64, Vec<u8>)> {
        let mut rows = BTreeSet::new();
        store
            .scan("n", 0, u64::MAX, &mut |key, start, _| {
                rows.insert((start, key.to_vec()));
            })
            .unwrap();
        rows
    }

    fn closed_set(buckets: &[(u64, &[u8])]) -> BTreeSet<(u64, Vec<u8>)> {
        buckets.iter().map(|(s, k)| (*s, k.to_vec())).collect()
    }

    /// The checkpoint of everything `e` produced since the last one.
    fn pending(config: &Config, store: &MemStore, e: &mut Engine) -> Pending {
        let view = store.view().unwrap();
        let mut state = RunState::default();
        CommitCtx::new(config)
            .take(e, &*view, &mut state, &mut |_| {})
            .unwrap()
    }

    #[test]
    fn buckets_written_ahead_commit_with_their_checkpoint_in_one_transaction() {
        let config = Config::from_toml(CONFIG).unwrap();
        let mut store = MemStore::default();
        let mut e = fed(&config);
        let first = pending(
            &config,
            &MemStore::default(),
            &mut Engine::new(&config).unwrap(),
        );
        std::thread::scope(|scope| {
            let mut c = Committer::start(scope, &config).unwrap();
            c.open(&mut store).unwrap();
            let ahead = e.take_ahead();
            assert_eq!(ahead.closed.len(), 3);
            c.send(Part::Closed(ahead)).unwrap();
            // A first checkpoint with nothing of its own keeps the store: the buckets are
            // in it.
            c.send(Part::Checkpoint {
                pending: Box::new(first),
                keep: true,
            })
            .unwrap();
            assert!(c.wait().unwrap().is_none(), "kept for the next transaction");
            e.observe(9_000);
            e.add(0, 9_000, b"c", 4);
            e.flush();
            let view_store = MemStore::default();
            c.send(Part::Checkpoint {
                pending: Box::new(pending(&config, &view_store, &mut e)),
                keep: false,
            })
            .unwrap();
            assert!(c.wait().unwrap().is_some(), "handed back");
        });
        let want = closed_set(&[(0, b"a"), (0, b"b"), (1_000, b"a"), (9_000, b"c")]);
        assert_eq!(stored(&store), want);
        assert!(store.meta().unwrap().is_some(), "the run state committed");
    }

    #[test]
    fn a_transaction_left_without_its_checkpoint_rolls_back_every_part() {
        let config = Config::from_toml(CONFIG).unwrap();
        let mut store = MemStore::default();
        let mut e = fed(&config);
        std::thread::scope(|scope| {
            let mut c = Committer::start(scope, &config).unwrap();
            c.open(&mut store).unwrap();
            c.send(Part::Closed(e.take_ahead())).unwrap();
            // The run stops here (an error, a signal): no checkpoint comes.
            drop(c);
        });
        assert!(stored(&store).is_empty(), "nothing written ahead is left");
        assert!(store.meta().unwrap().is_none());
    }

    #[test]
    fn a_failed_write_is_the_run_s_error_at_its_next_part_or_wait() {
        // A checkpoint the store refuses (its merge of a late bucket fails: the bytes are not
        // a bucket) rolls back; the run hears the store's error, not a lost thread.
        let config = Config::from_toml(CONFIG).unwrap();
        let mut store = MemStore::default();
        let mut e = fed(&config);
        let mut bad = pending(&config, &MemStore::default(), &mut e);
        bad.out.late_merges.push(ClosedBucket {
            metric: 0,
            key: b"a".to_vec().into(),
            start: 0,
            bytes: vec![1, 2, 3],
            rollup: false,
        });
        std::thread::scope(|scope| {
            let mut c = Committer::start(scope, &config).unwrap();
            c.open(&mut store).unwrap();
            c.send(Part::Checkpoint {
                pending: Box::new(bad),
                keep: true,
            })
            .unwrap();
            let err = c.wait().err().unwrap();
            assert!(matches!(err, RunError::Store(_)), "{err}");
            // The thread ends after its failure: waiting again names the committer.
            let err = c.wait().err().unwrap();
            assert!(matches!(err, RunError::Thread { .. }), "{err}");
        });
        assert!(
            stored(&store).is_empty(),
            "the failed transaction rolled back"
        );
    }

    /// A store whose open table holds a stale row of key `a` at start 0 (another bucket's
    /// bytes, as a key spilled before its last events would have left).
    fn with_stale_open_row(stale: &[u8]) -> MemStore {
        let mut store = MemStore::default();
        store
            .write(&mut |t| t.put("~open/n", 0, b"a", stale).map(|_| ()))
            .unwrap();
        store
    }

    #[test]
    fn a_part_promotes_its_starts_before_its_buckets_so_a_stale_open_row_never_wins() {
        let config = Config::from_toml(CONFIG).unwrap();
        let mut e = fed(&config);
        let mut ahead = e.take_ahead();
        let fresh = |a: &Ahead, start: u64, key: &[u8]| {
            let b = a.closed.iter().find(|b| b.start == start && *b.key == *key);
            b.map(|b| b.bytes.clone()).unwrap()
        };
        // The stale row: key `a`'s bucket 0 as another run's two events made it.
        let mut other = Engine::new(&config).unwrap();
        other.observe(5);
        other.add(0, 5, b"a", 1);
        other.add(0, 6, b"a", 9);
        other.observe(3_000);
        let (a0, stale) = (fresh(&ahead, 0, b"a"), fresh(&other.take_ahead(), 0, b"a"));
        assert_ne!(a0, stale, "the stale row must differ from the bucket");
        let mut store = with_stale_open_row(&stale);
        ahead.promote.push((0, 0));
        std::thread::scope(|scope| {
            let mut c = Committer::start(scope, &config).unwrap();
            c.open(&mut store).unwrap();
            c.send(Part::Closed(ahead)).unwrap();
            let last = pending(&config, &MemStore::default(), &mut e);
            c.send(Part::Checkpoint {
                pending: Box::new(last),
                keep: false,
            })
            .unwrap();
            assert!(c.wait().unwrap().is_some(), "handed back");
        });
        assert_eq!(store.get("n", b"a", 0).unwrap(), Some(a0), "the bucket won");
        let mut open = 0;
        store
            .scan("~open/n", 0, u64::MAX, &mut |_, _, _| open += 1)
            .unwrap();
        assert_eq!(open, 0, "the promotion moved the open row");
    }

    #[test]
    fn a_promotion_of_a_start_whose_buckets_were_written_ahead_is_refused() {
        let config = Config::from_toml(CONFIG).unwrap();
        let mut e = fed(&config);
        let ahead = e.take_ahead();
        let b0 = ahead
            .closed
            .iter()
            .find(|b| b.start == 0)
            .unwrap()
            .bytes
            .clone();
        let mut store = with_stale_open_row(&b0);
        let late = Ahead {
            promote: vec![(0, 0)],
            closed: Vec::new(),
        };
        std::thread::scope(|scope| {
            let mut c = Committer::start(scope, &config).unwrap();
            c.open(&mut store).unwrap();
            c.send(Part::Closed(ahead)).unwrap();
            // The committer may fail before the run's next send: the error comes from one
            // or the other.
            let err = c.send(Part::Closed(late)).err().or_else(|| c.wait().err());
            assert!(
                matches!(err, Some(RunError::Store(StoreError::Contract { .. }))),
                "{err:?}"
            );
        });
        assert!(stored(&store).is_empty(), "rolled back");
        assert!(store.get("~open/n", b"a", 0).unwrap().is_some(), "kept");
    }

    #[test]
    fn promotions_after_buckets_written_ahead_are_refused_and_the_view_reads_nothing() {
        // Written ahead, promotions go in the part with the buckets of their starts, before
        // them; a batch with promotions after buckets written ahead is refused (its stale
        // open rows would overwrite the buckets).
        let config = Config::from_toml(CONFIG).unwrap();
        let mut store = MemStore::default();
        let mut e = fed(&config);
        let mut promoting = pending(
            &config,
            &MemStore::default(),
            &mut Engine::new(&config).unwrap(),
        );
        promoting.out.promote.push((0, 0));
        std::thread::scope(|scope| {
            let mut c = Committer::start(scope, &config).unwrap();
            c.open(&mut store).unwrap();
            c.send(Part::Closed(e.take_ahead())).unwrap();
            c.send(Part::Checkpoint {
                pending: Box::new(promoting),
                keep: false,
            })
            .unwrap();
            let err = c.wait().err().unwrap();
            assert!(
                matches!(err, RunError::Store(StoreError::Contract { .. })),
                "{err}"
            );
        });
        assert!(stored(&store).is_empty(), "rolled back");
        let away = AwayView;
        assert!(matches!(
            away.get("n", 0, b"a"),
            Err(StoreError::Contract { .. })
        ));
    }
}
