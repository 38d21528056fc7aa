//! The committer: checkpoints written into the store by a thread of their own, while the
//! run's thread reads on.
//!
//! A checkpoint is taken from the engine in the run's thread ([`CommitCtx::take`]: the
//! closed buckets, state rows and run state, the alerts sent) and handed to the committer
//! with the store itself: the store is the committer's until it hands it back with the
//! result, so no two threads ever touch it. Exactly once holds as in a one-thread run:
//! the transaction holds the buckets with the position that accounts for them, and a crash
//! before it lands loses both (the next run reads those records again). One checkpoint at a
//! time is in the committer: the run waits for the last one to land before it hands over the
//! next, and before anything else that uses the store — a checkpoint that spills keys, the
//! commit before a bad line stops the run, the run's last commit. A failed write is the
//! run's error at that wait.
//!
//! Only an engine that never reads the store may read on while a checkpoint is being
//! written: one with keys spilled (or not read back since a resume) reads them from the
//! last committed view, which must then hold the checkpoint before it ([`Engine::reads_store`]).
//! Those runs, and sources that act on each commit (a message source commits its group's
//! offsets), commit in the run's thread as before.
//!
//! [`Engine::reads_store`]: crate::engine::Engine::reads_store

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::{Scope, ScopedJoinHandle};

use super::checkpoint::{CommitCtx, Pending};
use crate::config::Config;
use crate::store::Store;
use crate::RunError;

/// A store the run's thread may hand to the committer.
pub(super) type SendStore<'r> = &'r mut (dyn Store + Send);

/// A checkpoint to write, with the store to write it into.
struct Job<'r> {
    store: SendStore<'r>,
    pending: Pending,
}

/// The store handed back, and whether the write landed.
struct Done<'r> {
    store: SendStore<'r>,
    result: Result<(), RunError>,
}

/// The run's end of the committer thread.
pub(super) struct Committer<'s, 'r> {
    jobs: Option<SyncSender<Job<'r>>>,
    done: Receiver<Done<'r>>,
    thread: Option<ScopedJoinHandle<'s, ()>>,
}

impl<'s, 'r: 's> Committer<'s, 'r> {
    /// Starts the committer thread in `scope`, writing checkpoints of `config`; `None` when
    /// the system cannot start a thread (the run then commits in its own).
    pub(super) fn start(scope: &'s Scope<'s, '_>, config: &'r Config) -> Option<Committer<'s, 'r>> {
        let (jobs, take) = sync_channel::<Job<'r>>(1);
        let (tell, done) = sync_channel::<Done<'r>>(1);
        let thread = std::thread::Builder::new()
            .name("tidemark-commit".into())
            .spawn_scoped(scope, move || {
                let ctx = CommitCtx::new(config);
                for job in take {
                    let result = ctx.write(job.store, &job.pending);
                    // Dropped before the store goes back: its memory is freed on this core.
                    drop(job.pending);
                    let store = job.store;
                    if tell.send(Done { store, result }).is_err() {
                        return;
                    }
                }
            })
            .ok()?;
        Some(Committer {
            jobs: Some(jobs),
            done,
            thread: Some(thread),
        })
    }

    /// Hands `pending` and the store to the committer.
    pub(super) fn hand_over(
        &mut self,
        store: SendStore<'r>,
        pending: Pending,
    ) -> Result<(), RunError> {
        let jobs = self.jobs.as_ref().ok_or_else(stopped)?;
        jobs.send(Job { store, pending }).map_err(|_| stopped())
    }

    /// Waits for the checkpoint handed over to land: the store back, or the write's error.
    pub(super) fn wait(&mut self) -> Result<SendStore<'r>, RunError> {
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
        // The thread ends with its jobs; the scope joins it.
        self.jobs = None;
    }
}

fn stopped() -> RunError {
    RunError::Thread { name: "committer" }
}
