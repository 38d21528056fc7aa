//! The run's alert rules evaluated once for the whole run, on the parts merged: one worker at
//! a time holds the **alert duty**, a lease on the server.
//!
//! A part's engine sees its partition's share of a key; a metric keyed otherwise than the
//! topic alerts correctly only on the merged state. The worker holding the duty evaluates
//! every close that every part has closed ([`MergedStore::closed_until`]) with
//! [`MergedAlerts`] (the engine's own rule code over the merged windows), hands each close's
//! lines to its caller, and only then stores the evaluation's state, under the duty's lease,
//! in one script. So:
//!
//! - **once per episode across the cluster**: one holder evaluates; a second worker finds the
//!   duty held and waits, and a holder whose lease lapsed (a pause, a partition of the network)
//!   is refused when it stores its state, and stops;
//! - **at least once**: lines are handed out before their close's state is stored, so a holder
//!   killed in between leaves the close to its successor, which raises its lines again — the
//!   same lines, with the same identity (metric, key, subject, phase, window: the `id` of
//!   `tidemark run`'s alert lines), by which a consumer drops the repeats.
//!
//! # Keys (hash tag `{tm:alerts}`: one slot)
//!
//! | key | type | holds |
//! | --- | --- | --- |
//! | `{tm:alerts}:duty` | string, expiring | the holder's name (the worker's and a random word), for its lease ([`DUTY_LEASE`]) |
//! | `{tm:alerts}:state` | string | the evaluation's state ([`MergedAlerts::to_bytes`]) |
//!
//! The evaluation waits for every listed part to have closed some of each metric, and for the
//! slowest part: a partition that receives no events holds the run's alerts back (as it holds
//! back the merged queries' default window end).

use std::time::{Duration, Instant};

use tidemark_stream::config::Config;
use tidemark_stream::merged_alerts::MergedAlerts;
use tidemark_stream::pipeline::AlertOut;
use tidemark_stream::store::StoreError;

use crate::merged::MergedStore;
use crate::server::Server;

/// How long the duty stays with a holder that stops renewing it (killed, paused, cut off):
/// another worker takes it after this.
pub const DUTY_LEASE: Duration = Duration::from_secs(5);

/// Closes evaluated without a line between two stores of the state.
const QUIET_CLOSES: u32 = 256;

/// The duty's key.
const DUTY: &str = "{tm:alerts}:duty";
/// The evaluation's state.
const STATE: &str = "{tm:alerts}:state";

/// Keeps the duty if held by `ARGV[1]` (1), or takes it if free (2), renewing the lease
/// (`ARGV[2]` ms); 0 while another holds it.
const TAKE: &str = r#"
local h = redis.call('GET', KEYS[1])
if h == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if h == false then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 2
end
return 0
"#;

/// Stores the state `ARGV[3]` if `ARGV[1]` still holds the duty, renewing its lease.
const SAVE: &str = r#"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"#;

/// Gives the duty up if `ARGV[1]` holds it.
const RELEASE: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
"#;

/// What a round of the alert duty did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DutyRound {
    /// Whether this worker held the duty at the round's end.
    pub held: bool,
    /// Closes evaluated.
    pub closes: u64,
    /// Lines handed out.
    pub lines: u64,
}

/// What asking for the duty found.
enum Lease {
    /// This worker held it, and still does.
    Kept,
    /// It was free, and this worker took it.
    Taken,
    /// Another worker holds it.
    Held,
}

/// A worker's side of the alert duty (see the module doc).
pub struct AlertDuty {
    server: Server,
    config: Config,
    holder: String,
    /// The evaluation, while this worker holds the duty (read from the server when taken).
    state: Option<MergedAlerts>,
    lease: Duration,
}

impl AlertDuty {
    /// The duty for a run of `config` on `server` (its own connection); `holder` names this
    /// worker in the lease.
    pub fn new(server: &Server, config: &Config, holder: &str) -> AlertDuty {
        AlertDuty {
            server: server.another(),
            config: config.clone(),
            holder: format!("{holder} {:016x}", unique()),
            state: None,
            lease: DUTY_LEASE,
        }
    }

    /// This duty with a lease of `lease` instead of [`DUTY_LEASE`] (every worker of a run
    /// should use the same).
    pub fn with_lease(mut self, lease: Duration) -> AlertDuty {
        self.lease = lease;
        self
    }

    /// Takes the duty (or renews it) and, held, evaluates every close every part has closed,
    /// handing each close's lines to `emit` before its state is stored.
    pub fn round(&mut self, emit: &mut dyn FnMut(&AlertOut)) -> Result<DutyRound, StoreError> {
        let mut round = DutyRound::default();
        match self.take()? {
            Lease::Kept => {}
            // Taken afresh: another worker may have held it since this one last did, so the
            // state is read again (and the buckets kept with it dropped).
            Lease::Taken => self.state = None,
            Lease::Held => {
                self.state = None;
                return Ok(round);
            }
        }
        round.held = true;
        let merged = MergedStore::open(&self.server)?;
        let Some(closed) = merged.closed_until()? else {
            return Ok(round);
        };
        let mut state = match self.state.take() {
            Some(s) => s,
            None => self.load()?,
        };
        // A metric starts once every part has closed some of it, at its first bucket stored
        // or where the parts have all closed it, whichever is earlier: a part may still hold
        // buckets before the others' first, not stored yet.
        let unstarted: Vec<usize> = state.unstarted(&self.config).collect();
        for i in unstarted {
            let m = &self.config.metrics[i];
            let Some(&until) = closed.get(i).filter(|&&c| c > 0) else {
                continue;
            };
            if let Some(first) = merged.first_start(&m.name)? {
                state.start_at(i, first.min(until - until % m.bucket));
            }
        }
        let mut unsaved = 0;
        while let Some(due) = state.next_due(&self.config, &closed) {
            let lines =
                state
                    .evaluate(&self.config, &merged, due)
                    .map_err(|e| StoreError::Damaged {
                        what: format!(
                            "{}: evaluating the alerts of {} at {}: {e}",
                            self.server.name(),
                            self.config.metrics[due.metric].name,
                            due.end
                        ),
                    })?;
            for line in &lines {
                emit(line);
            }
            round.closes += 1;
            round.lines += lines.len() as u64;
            unsaved += 1;
            // Stored after every close that raised lines (what makes them at least once), and
            // every few hundred closes of a quiet stretch; a crash before that evaluates the
            // stretch again, raising nothing.
            if (!lines.is_empty() || unsaved >= QUIET_CLOSES)
                && !self.store(&state, &mut unsaved)?
            {
                round.held = false;
                return Ok(round);
            }
        }
        round.held = unsaved == 0 || self.store(&state, &mut unsaved)?;
        if round.held {
            self.state = Some(state);
        }
        Ok(round)
    }

    /// The last rounds of a worker that ends: rounds until one holds the duty and finds
    /// nothing more to evaluate, or `wait` passes while another holds it; then the duty is
    /// given up, for the next worker to take at once.
    pub fn finish(
        &mut self,
        emit: &mut dyn FnMut(&AlertOut),
        wait: Duration,
    ) -> Result<DutyRound, StoreError> {
        let started = Instant::now();
        let mut total = DutyRound::default();
        loop {
            let r = match self.round(emit) {
                Ok(r) => r,
                Err(e) => {
                    // Given up at once, for another worker to go on.
                    let _ = self.release();
                    return Err(e);
                }
            };
            total.closes += r.closes;
            total.lines += r.lines;
            if (r.held && r.closes == 0) || started.elapsed() >= wait {
                total.held = r.held;
                break;
            }
            if !r.held {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        self.release()?;
        Ok(total)
    }

    /// Gives the duty up (if held), so that another worker takes it without waiting for the
    /// lease to lapse.
    pub fn release(&mut self) -> Result<(), StoreError> {
        self.state = None;
        self.server.call("give the alert duty up", |c| {
            redis::cmd("EVAL")
                .arg(RELEASE)
                .arg(1)
                .arg(DUTY)
                .arg(&self.holder)
                .query::<i64>(c)
        })?;
        Ok(())
    }

    fn take(&self) -> Result<Lease, StoreError> {
        let took: i64 = self.server.call("take the alert duty", |c| {
            redis::cmd("EVAL")
                .arg(TAKE)
                .arg(1)
                .arg(DUTY)
                .arg(&self.holder)
                .arg(self.lease.as_millis() as u64)
                .query(c)
        })?;
        Ok(match took {
            1 => Lease::Kept,
            2 => Lease::Taken,
            _ => Lease::Held,
        })
    }

    /// Stores `state` under the lease, counting the closes unsaved back to 0. False when the
    /// lease lapsed and another worker took the duty: it evaluates from the state last stored
    /// (lines since may come twice, with their ids).
    fn store(&self, state: &MergedAlerts, unsaved: &mut u32) -> Result<bool, StoreError> {
        *unsaved = 0;
        let bytes = state.to_bytes();
        let saved: i64 = self.server.call("store the alerts' state", |c| {
            redis::cmd("EVAL")
                .arg(SAVE)
                .arg(2)
                .arg(DUTY)
                .arg(STATE)
                .arg(&self.holder)
                .arg(self.lease.as_millis() as u64)
                .arg(&bytes)
                .query(c)
        })?;
        Ok(saved == 1)
    }

    /// The state last stored, or a fresh one.
    fn load(&self) -> Result<MergedAlerts, StoreError> {
        let bytes: Option<Vec<u8>> = self.server.call("read the alerts' state", |c| {
            redis::cmd("GET").arg(STATE).query(c)
        })?;
        match bytes {
            None => Ok(MergedAlerts::new(&self.config)),
            Some(b) => MergedAlerts::restore(&self.config, &b).map_err(|e| StoreError::Damaged {
                what: format!(
                    "{}: {STATE} (a run's alert state, of this run's config?): {e}",
                    self.server.name()
                ),
            }),
        }
    }
}

/// A word no other worker's lease holds: the process, the clock and a stack address mixed.
fn unique() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let here = &nanos as *const u64 as u64;
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for v in [u64::from(std::process::id()), nanos, here] {
        h = (h ^ v).wrapping_mul(0x0100_0000_01b3).rotate_left(29);
    }
    h
}
