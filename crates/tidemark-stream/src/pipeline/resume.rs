//! Resuming: the committed state restored, and squared with this run's inputs before any is
//! read.
//!
//! A store with a committed state gives the engine its snapshot back (its open buckets, count
//! histograms and alert streaks; keys spilled stay in the store, read back as they come) and
//! the run state its positions. Those are then fitted to what this run was told: a version-2
//! state's position (an index into the input list as spelled) becomes file marks when the list
//! is the same; `restart` forgets the named files' marks, so they are read from their start;
//! standard input after a completed run (or with `restart`) is new data. Each file is then
//! resumed at its own mark when it is opened ([`file_start`]).

use std::path::PathBuf;

use super::line::OpenFile;
use super::sources::{open_path, Opened};
use super::state::RunState;
use super::{engine_error, input, RunOptions};
use crate::config::Config;
use crate::engine::Engine;
use crate::state_rows::StoreRows;
use crate::store::Store;
use crate::RunError;

/// The engine and run state a run starts from: the committed ones (and `true`), or new ones
/// for a store never committed to. A store written under another config is refused.
pub(super) fn restore(
    config: &Config,
    store: &mut dyn Store,
    fingerprint: u64,
) -> Result<(Engine, RunState, bool), RunError> {
    let Some(meta) = store.meta().map_err(RunError::Store)? else {
        let engine = Engine::new(config).map_err(RunError::Engine)?;
        return Ok((engine, RunState::default(), false));
    };
    if meta.fingerprint != fingerprint {
        return Err(RunError::ConfigMismatch {
            stored: meta.fingerprint,
            given: fingerprint,
        });
    }
    let state = RunState::from_bytes(&meta.state).map_err(RunError::State)?;
    let view = store.view().map_err(RunError::Store)?;
    let engine = Engine::restore(config, &state.engine, &mut StoreRows::new(&*view, config))
        .map_err(engine_error)?;
    Ok((engine, state, true))
}

/// Fits the restored state to this run's inputs (see the module doc) and marks the run
/// unfinished. Returns whether standard input must not be the stream the last run read to its
/// end: that run completed, and this one does not restart.
pub(super) fn prepare(state: &mut RunState, opts: &RunOptions<'_>) -> Result<bool, RunError> {
    convert_legacy(state, &opts.inputs)?;
    // `restart` reads the named files from their start: their marks are forgotten once, here,
    // so that a file named twice (or by another path, or found again by --follow) counts once.
    if opts.restart {
        for p in &opts.inputs {
            if let Ok(meta) = std::fs::metadata(p) {
                let (dev, ino) = input::identity(&meta, p);
                state.forget_file(dev, ino);
            }
        }
    }
    let completed_before = state.completed;
    if opts.inputs.is_empty() && (state.completed || opts.restart) {
        state.stdin = (0, 0); // new data on standard input
    }
    state.completed = false;
    Ok(completed_before && !opts.restart)
}

/// Where a regular file's reading starts, (offset, lines before it): at its mark when it was
/// read before and its consumed bytes are still the ones read, else at its start. A file whose
/// consumed bytes changed is refused ([`RunError::InputChanged`]), except as the followed
/// path's new file after a rotation (`after_rotation`).
pub(super) fn file_start(
    f: &mut OpenFile,
    name: &str,
    state: &RunState,
    after_rotation: bool,
) -> Result<(u64, u64), RunError> {
    let Some(mark) = state.file(f.dev, f.ino) else {
        return Ok((0, 0));
    };
    let changed = input::changed(mark, &mut f.probe, f.size).map_err(|e| RunError::Input {
        file: name.to_string(),
        message: e.to_string(),
    })?;
    match changed {
        None => Ok((mark.offset, mark.line)),
        // The path's new file after a rotation, on the inode of a file read before: that file
        // was deleted and its inode reused (logrotate's routine), so the mark is stale and
        // this is a new file.
        Some(_) if after_rotation => Ok((0, 0)),
        Some(what) => Err(RunError::InputChanged {
            file: name.to_string(),
            what,
        }),
    }
}

/// The fingerprint a version-2 state kept of its input list: the names as spelled.
fn legacy_inputs_id(inputs: &[PathBuf]) -> u64 {
    let mut names = String::new();
    for p in inputs {
        names.push_str(&p.display().to_string());
        names.push('\0');
    }
    if inputs.is_empty() {
        names.push_str("<stdin>");
    }
    xxhash_rust::xxh3::xxh3_64(names.as_bytes())
}

/// Converts a version-2 state's position (an index into the list of names as spelled) into
/// file marks, if this run names the same list.
fn convert_legacy(state: &mut RunState, inputs: &[PathBuf]) -> Result<(), RunError> {
    let Some(lp) = state.legacy.take() else {
        return Ok(());
    };
    if lp.inputs != legacy_inputs_id(inputs) {
        return Ok(()); // another list: version 2 read it from its start, and so do we
    }
    if inputs.is_empty() {
        if !state.completed {
            state.stdin = (lp.offset, lp.line);
        }
        return Ok(());
    }
    for (i, p) in inputs.iter().enumerate() {
        let i = i as u64;
        if i > lp.file {
            break;
        }
        let Opened::File(mut f) = open_path(p)? else {
            continue;
        };
        let (offset, line) = if i < lp.file {
            // Version 2 skipped a finished file whole.
            (f.size, 0)
        } else {
            (lp.offset.min(f.size), lp.line)
        };
        let mark = f.mark(offset, line)?;
        state.set_file(mark);
    }
    Ok(())
}
