//! The helper threads' place behind the run's thread.
//!
//! The run's thread feeds the engine, and every record and close passes through it: it is the
//! pipeline's critical path. The parse thread (which runs up to 128 batches ahead) and the
//! committer (which has parts in flight) have slack. On a machine with as many threads as
//! cores — two cores, the run's thread, the parse thread, the committer and a close's helper —
//! the scheduler shares a core equally between the threads on it, so the run's thread waited
//! its turn behind a helper while the helper's work could have waited; and a close's helper
//! thread, started beside the run's thread, stayed on its core while the other went idle.
//!
//! So the parse thread and the committer lower their own priority by [`HELPER_NICE`] (on
//! Linux, where a thread's nice value is its own): at nice +5 a thread has about a third of
//! the weight of one at 0, so where they meet on a core the run's thread runs first, and a new
//! helper of a close is placed on the core the lighter helpers hold. Measured on the demo's
//! flow log with two threads on 2 cores (BENCHMARKS.md, "Threads"): 0.97 of the wall time;
//! +10 did no better and +19 worse (the parse thread then fell behind).
//!
//! A thread that may not lower its priority (a system that refuses) runs as before: this
//! changes when the threads run, never what they do.

/// How much a helper thread lowers its priority (nice value), at most to 19.
pub(super) const HELPER_NICE: i32 = 5;

/// Lowers the calling thread's priority by [`HELPER_NICE`]; a refusal leaves it as it is.
pub(super) fn behind_the_run() {
    #[cfg(target_os = "linux")]
    {
        use rustix::process::{getpriority_process, setpriority_process};
        // On Linux `PRIO_PROCESS` with no pid is the calling thread, not the whole process.
        if let Ok(nice) = getpriority_process(None) {
            let _ = setpriority_process(None, (nice + HELPER_NICE).min(19));
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use rustix::process::getpriority_process;

    /// A thread that steps behind the run is [`super::HELPER_NICE`] nicer (at most 19), and
    /// the thread that spawned it is not.
    #[test]
    fn a_helper_is_nicer_than_the_run_and_the_run_unchanged() -> std::io::Result<()> {
        let before = getpriority_process(None)?;
        let helper = std::thread::spawn(|| {
            super::behind_the_run();
            getpriority_process(None)
        })
        .join()
        .map_err(|_| std::io::Error::other("the helper thread panicked"))??;
        assert_eq!(helper, (before + super::HELPER_NICE).min(19));
        assert_eq!(getpriority_process(None)?, before);
        Ok(())
    }
}
