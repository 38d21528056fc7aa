//! The checkpoint: everything the engine produced since the last one, committed to the store in
//! one transaction with the run state that accounts for it; when one is due; and the spill of
//! quiet keys that follows one past the memory budget.
//!
//! The batch holds the closed buckets, the late merges (gathered per bucket and key), the
//! rollups, the retention deletes, the changed keys' state rows, and the run state — the
//! inputs' positions just after the last record fed (each [`super::line::LineSource`] has
//! written its own), the counters and the engine's snapshot. The engine's deferred events are
//! added first, so the positions never run ahead of the records counted.

use std::time::{Duration, Instant};

use super::state::RunState;
use super::{engine_error, AlertOut};
use crate::config::Config;
use crate::engine::{Ahead, Alert, ClosedBucket, Engine, MetricShape, Outputs, StateTable};
use crate::state_rows::{StoreRows, TableNames};
use crate::store::{
    Batch, BucketRef, CombineError, Meta, OpenCommit, PromoteRef, ReadTxn, RollupRef, StateRef,
    Store, StoreError, SweepRef, Txn,
};
use crate::{EngineError, RunError};

/// What every checkpoint of a run writes beside the engine's outputs: the config, and the
/// names of the metrics' tables.
pub(super) struct CommitCtx<'a> {
    pub config: &'a Config,
    /// The config's fingerprint: a store written under another config is refused.
    pub fingerprint: u64,
    /// Per metric: its name.
    pub names: Vec<String>,
    /// Per metric: its rollup's name (empty without one).
    rollup_names: Vec<String>,
    /// Per metric: its tables' names.
    pub tables: TableNames,
}

/// A checkpoint taken from the engine, to be written: its outputs and the store's metadata
/// (the config and the run state that accounts for them).
pub(super) struct Pending {
    pub(super) out: Outputs,
    meta: Meta,
}

/// The checkpoint interval: records since the last checkpoint, and when it was.
pub(super) struct Interval {
    pub since: u64,
    last: Instant,
    every: Duration,
}

impl Interval {
    pub fn new(every: Duration) -> Interval {
        Interval {
            since: 0,
            last: Instant::now(),
            every,
        }
    }

    /// Whether the wall-clock interval has passed since the last checkpoint.
    pub fn elapsed(&self) -> bool {
        self.last.elapsed() >= self.every
    }

    /// Whether a run waiting for input has something to commit, and the interval passed.
    pub fn idle_due(&self) -> bool {
        self.since > 0 && self.elapsed()
    }

    pub fn restart(&mut self) {
        self.since = 0;
        self.last = Instant::now();
    }
}

impl CommitCtx<'_> {
    /// The checkpoints of a run of `config`.
    pub fn new(config: &Config) -> CommitCtx<'_> {
        CommitCtx {
            config,
            fingerprint: config.fingerprint(),
            names: config.metrics.iter().map(|m| m.name.clone()).collect(),
            rollup_names: config
                .metrics
                .iter()
                .map(|m| m.rollup_name().unwrap_or_default())
                .collect(),
            tables: TableNames::of(config),
        }
    }

    /// Adds the engine's deferred records (keys spilled read back through `view`, the last
    /// checkpoint's).
    pub fn drain(&self, engine: &mut Engine, view: &dyn ReadTxn) -> Result<(), RunError> {
        engine
            .drain(&mut StoreRows::with(view, &self.tables))
            .map_err(engine_error)
    }

    /// Sends alerts out, each with its metric's name and its key as text.
    pub fn emit(&self, alerts: Vec<Alert>, on_alert: &mut dyn FnMut(&AlertOut)) {
        for alert in alerts {
            on_alert(&AlertOut::new(&self.names[alert.metric], alert));
        }
    }

    /// Commits everything up to the records fed: the engine's deferred events are added
    /// first (keys spilled read back through `view`, the last checkpoint's).
    pub fn commit(
        &self,
        store: &mut dyn Store,
        view: &dyn ReadTxn,
        engine: &mut Engine,
        state: &mut RunState,
        on_alert: &mut dyn FnMut(&AlertOut),
    ) -> Result<(), RunError> {
        let pending = self.take(engine, view, state, on_alert)?;
        self.write(store, &pending)
    }

    /// What a commit writes, taken from the engine (its deferred records added first, keys
    /// spilled read back through `view`) with the run state; the alerts go out.
    pub fn take(
        &self,
        engine: &mut Engine,
        view: &dyn ReadTxn,
        state: &mut RunState,
        on_alert: &mut dyn FnMut(&AlertOut),
    ) -> Result<Pending, RunError> {
        self.drain(engine, view)?;
        let mut out: Outputs = engine.take_outputs();
        self.emit(std::mem::take(&mut out.alerts), on_alert);
        state.engine = engine.snapshot();
        let meta = Meta {
            config: self.config.text().to_string(),
            fingerprint: self.fingerprint,
            state: state.to_bytes(),
        };
        Ok(Pending { out, meta })
    }

    /// Writes what [`CommitCtx::take`] took into `store`, in one transaction.
    pub fn write(&self, store: &mut dyn Store, pending: &Pending) -> Result<(), RunError> {
        store
            .write(&mut |t| {
                let commit = OpenCommit::begin(&*t)?;
                self.apply(t, commit, pending)
            })
            .map_err(RunError::Store)
    }

    /// A closed bucket as the store writes it.
    fn bucket_ref<'b>(&'b self, b: &'b ClosedBucket) -> BucketRef<'b> {
        BucketRef {
            metric: if b.rollup {
                &self.rollup_names[b.metric]
            } else {
                &self.names[b.metric]
            },
            key: &b.key,
            start: b.start,
            bytes: &b.bytes,
        }
    }

    /// Writes promotions, then closed buckets, into `commit`, ahead of the checkpoint they
    /// belong to.
    pub fn put_ahead(
        &self,
        t: &mut dyn Txn,
        commit: &mut OpenCommit,
        ahead: &Ahead,
    ) -> Result<(), StoreError> {
        commit.promote(t, &self.promote_refs(&ahead.promote))?;
        let puts: Vec<BucketRef<'_>> = ahead.closed.iter().map(|b| self.bucket_ref(b)).collect();
        commit.put(t, &puts)
    }

    /// Promotions of `(metric, start)` as the store takes them.
    fn promote_refs(&self, promote: &[(usize, u64)]) -> Vec<PromoteRef<'_>> {
        promote
            .iter()
            .map(|&(m, start)| PromoteRef {
                from: self.tables.name(m, StateTable::Open),
                into: &self.names[m],
                start,
            })
            .collect()
    }

    /// Applies what [`CommitCtx::take`] took to `commit` (which may hold closed buckets
    /// written ahead of it), inside its transaction `t`.
    pub fn apply(
        &self,
        t: &mut dyn Txn,
        commit: OpenCommit,
        pending: &Pending,
    ) -> Result<(), StoreError> {
        let (out, meta) = (&pending.out, &pending.meta);
        let puts: Vec<BucketRef<'_>> = out.closed.iter().map(|b| self.bucket_ref(b)).collect();
        let merges: Vec<BucketRef<'_>> =
            out.late_merges.iter().map(|b| self.bucket_ref(b)).collect();
        let mut expire: Vec<(&str, u64)> = out
            .expire_before
            .iter()
            .enumerate()
            .filter_map(|(i, e)| e.map(|before| (self.names[i].as_str(), before)))
            .collect();
        expire.extend(
            out.expire_rollups_before
                .iter()
                .enumerate()
                .filter_map(|(i, e)| e.map(|before| (self.rollup_names[i].as_str(), before))),
        );
        let config = self.config;
        // The engine rolls up only the metrics the config gives a rollup.
        let rollups: Vec<RollupRef<'_>> = out
            .rollups
            .iter()
            .filter_map(|r| {
                Some(RollupRef {
                    metric: &self.names[r.metric],
                    into: &self.rollup_names[r.metric],
                    from: r.from,
                    to: r.to,
                    width: config.metrics[r.metric].rollup?,
                })
            })
            .collect();
        // Each metric's shape and its rollup's, built once for the commit: a shape builds and
        // encodes its metric's empty summary (a whole Count-Min for a frequency metric).
        let shapes: Vec<(MetricShape, Option<MetricShape>)> = config
            .metrics
            .iter()
            .map(|m| (MetricShape::of(m), MetricShape::rollup_of(m)))
            .collect();
        let shape_of = |name: &str| match MetricShape::metric_of(config, name)? {
            (i, false) => Some(&shapes[i].0),
            (i, true) => shapes[i].1.as_ref(),
        };
        let no_metric = |metric: &str| CombineError::NoMetric {
            metric: metric.to_string(),
        };
        let roll = |metric: &str, period: u64, parts: &[(u64, Vec<u8>)]| {
            let (i, _) = config.metric(metric).ok_or_else(|| no_metric(metric))?;
            let (own, rolled) = &shapes[i];
            let into = rolled.as_ref().ok_or_else(|| no_metric(metric))?;
            Ok(own.roll(into, period, parts)?.to_stored())
        };
        let merge = |metric: &str, start: u64, old: Option<&[u8]>, add: &[u8]| {
            let shape = shape_of(metric).ok_or_else(|| no_metric(metric))?;
            let mut a = match old {
                Some(old) => shape.decode(old, start).map_err(CombineError::Decode)?,
                None => shape.empty(start),
            };
            let b = shape.decode(add, start).map_err(CombineError::Decode)?;
            a.merge(&b).map_err(CombineError::Merge)?;
            Ok(a.to_stored())
        };
        let tables = &self.tables;
        let promote = self.promote_refs(&out.promote);
        let sweep: Vec<SweepRef<'_>> = out
            .sweep_before
            .iter()
            .enumerate()
            .filter_map(|(m, b)| {
                b.map(|before| SweepRef {
                    index: tables.name(m, StateTable::Expiry),
                    rows: tables.name(m, StateTable::Key),
                    before,
                })
            })
            .collect();
        let rows: Vec<StateRef<'_>> = out
            .state
            .iter()
            .map(|r| StateRef {
                table: tables.name(r.metric, r.table),
                start: r.start,
                key: &r.key,
                bytes: r.bytes.as_deref(),
            })
            .collect();
        let open_before: Vec<(&str, u64)> = out
            .open_before
            .iter()
            .enumerate()
            .filter_map(|(m, b)| b.map(|before| (tables.name(m, StateTable::Open), before)))
            .collect();
        commit.finish(
            &mut *t,
            &Batch {
                promote,
                sweep,
                open_before,
                state: rows,
                puts,
                merges,
                merge: &merge,
                rollups,
                roll: &roll,
                expire,
                meta,
            },
        )
    }
}

/// Spills the engine's quiet keys down to a sixth of the budget (right after a checkpoint);
/// returns the memory past which the next spill starts, or fails when the keys that cannot
/// spill pass half the budget. The budget is the process's, not the keys' alone: a bucket
/// close encodes every key's closed bucket, a checkpoint every changed key's rows, and the
/// allocator keeps what they freed — measured, about as much again as the keys, so the keys
/// are held to a third.
pub(super) fn spill(engine: &mut Engine, budget: u64) -> Result<u64, RunError> {
    engine.spill((budget / 6) as usize).map_err(engine_error)?;
    let held = engine.memory() as u64;
    if held > budget / 2 {
        let keys = (0..engine.metric_count())
            .map(|m| engine.live_keys(m) as u64)
            .sum();
        return Err(RunError::Engine(EngineError::Budget { held, budget, keys }));
    }
    // Keys that could not spill stay: wait for a twelfth of the budget more before the next
    // spill, rather than spilling at every check.
    Ok((budget / 3).max(held + budget / 12))
}
