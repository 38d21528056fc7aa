//! `count`: a sliding-window counter, an exponential histogram over the last `WINDOW` ms
//! (Datar, Gionis, Indyk, Motwani 2002). Its bracket is guaranteed: the true count of the
//! window is always in `[low, high]`, and the estimate is within ε/2 of it.
//!
//! ```text
//! TMCOUNT.CREATE key WINDOW ms [EPSILON e]
//! TMCOUNT.ADD key time [n]
//! TMCOUNT.GET key [AT time]
//! ```

use tidemark::codec::Family;
use tidemark::window::{ExpHistogram, Window};
use tidemark::{Bracket, Estimate};

use super::{Access, Call, Clock, Encoded, Keys, LoadError, Spec, TmType};
use crate::error::CmdError;
use crate::limits::Limits;
use crate::reply::{bracket_text, Replicate, Reply};

/// A sliding-window counter: an exponential histogram over the last `window` ms.
#[derive(Clone, Debug)]
pub struct Counter {
    /// The histogram (a ticks span, one tick a millisecond).
    pub hist: ExpHistogram,
}

impl Counter {
    /// The window, ms.
    pub fn window(&self) -> u64 {
        self.hist.window().length()
    }

    /// The window's estimate ending at `at` (≥ the latest time).
    pub fn estimate_at(&self, at: u64) -> Estimate {
        if at <= self.hist.now() {
            return self.hist.estimate();
        }
        let mut h = self.hist.clone();
        // `at` is at or after the clock: advancing cannot fail on a ticks window.
        match h.advance_to(at) {
            Ok(()) => h.estimate(),
            Err(_) => self.hist.estimate(),
        }
    }
}

impl TmType for Counter {
    const NAME: &'static str = "count";

    /// The histogram and its heap (one ring buffer of k + 2 timestamps per bucket size it has
    /// used, 4 bytes a timestamp for windows of at most 2^32 ms).
    fn heap_bytes(&self) -> usize {
        core::mem::size_of::<ExpHistogram>() + self.hist.heap_bytes()
    }

    fn to_bytes(&self) -> Vec<u8> {
        self.hist.to_bytes()
    }

    fn latest(&self) -> Option<u64> {
        (self.hist.stats().buckets > 0 || self.hist.now() > 0).then(|| self.hist.now())
    }

    fn info(&self, m: &mut Vec<(&'static str, Reply)>) {
        m.push((
            "structure",
            Reply::text("exponential histogram (Datar, Gionis, Indyk, Motwani 2002)"),
        ));
        m.push(("window_ms", Reply::Integer(self.window() as i64)));
        m.push(("k", Reply::Integer(self.hist.k() as i64)));
        m.push(("epsilon", Reply::Double(1.0 / self.hist.k() as f64)));
        m.push(("buckets", Reply::Integer(self.hist.bucket_count() as i64)));
        m.push(("hash", Reply::text("none")));
        m.push((
            "latest_ms",
            self.latest()
                .map_or(Reply::Null, |t| Reply::Integer(t as i64)),
        ));
        m.push((
            "bracket",
            Reply::text(
                bracket_text(Bracket::Guaranteed) + "; value is within epsilon/2 of the truth",
            ),
        ));
    }

    fn decode(encoded: &mut Encoded<'_>) -> Option<Result<Self, LoadError>> {
        let Encoded::Envelope(Family::ExpHistogram, bytes) = encoded else {
            return None;
        };
        Some(
            ExpHistogram::from_bytes(bytes)
                .map_err(LoadError::Decode)
                .and_then(|hist| match hist.window() {
                    Window::Ticks(w) if w > Limits::MAX_WINDOW_MS => {
                        Err(LoadError::Limit("window longer than 2^48 ms"))
                    }
                    Window::Ticks(_) if hist.now() > Limits::MAX_TIME_MS => {
                        Err(LoadError::Limit("a latest time beyond 2^52 ms"))
                    }
                    Window::Ticks(_) => Ok(Counter { hist }),
                    Window::Arrivals(_) => Err(LoadError::Unsupported(
                        "an arrivals-window histogram (a key counts milliseconds)",
                    )),
                }),
        )
    }
}

/// `TMCOUNT.CREATE`.
pub const CREATE: Spec = Spec {
    name: "TMCOUNT.CREATE",
    legacy: Some("TM.COUNT.CREATE"),
    access: Access::Write,
    fast: false,
    keys: Keys::First,
    clock: Clock::No,
    usage: "key WINDOW ms [EPSILON e]",
    summary:
        "Creates a sliding-window counter over the last WINDOW ms, within EPSILON/2 of the truth",
    complexity: "O(1)",
    run: create,
};

/// `TMCOUNT.ADD`.
pub const ADD: Spec = Spec {
    name: "TMCOUNT.ADD",
    legacy: Some("TM.COUNT.ADD"),
    access: Access::Write,
    fast: true,
    keys: Keys::First,
    clock: Clock::TimeArg,
    usage: "key time [n]",
    summary: "Counts n events (default 1) at time (ms, or * for the server's clock); replies the window's [estimate, low, high]",
    complexity: "O(1) amortized",
    run: add,
};

/// `TMCOUNT.GET`.
pub const GET: Spec = Spec {
    name: "TMCOUNT.GET",
    legacy: Some("TM.COUNT.GET"),
    access: Access::Read,
    fast: true,
    keys: Keys::First,
    clock: Clock::No,
    usage: "key [AT time]",
    summary: "The count of the window ending at the latest time (or AT a later one): [estimate, low, high], guaranteed",
    complexity: "O(log n)",
    run: get,
};

fn create(call: &mut Call<'_, '_>) -> Result<Reply, CmdError> {
    let a = &mut call.args;
    let key = a.take()?;
    let (mut window, mut epsilon) = (None, call.env.defaults.epsilon);
    let mut seen = a.options();
    while a.left() > 0 {
        if a.option(&mut seen, "WINDOW")? {
            window = Some(a.ms("WINDOW")?);
        } else if a.option(&mut seen, "EPSILON")? {
            epsilon = a.epsilon("EPSILON")?;
        } else {
            a.done()?;
        }
    }
    let cmd = call.name();
    let window = window.ok_or(CmdError::Param {
        cmd,
        msg: "WINDOW ms is required".into(),
    })?;
    call.keys.vacant(key)?;
    let hist = ExpHistogram::ticks(window, epsilon).map_err(|e| CmdError::Param {
        cmd,
        msg: e.to_string(),
    })?;
    call.keys.store(key, super::Value::Count(Counter { hist }));
    call.rep = Replicate::create(
        cmd,
        key,
        &[
            "WINDOW".into(),
            window.to_string(),
            "EPSILON".into(),
            epsilon.to_string(),
        ],
    );
    Ok(Reply::Ok)
}

fn add(call: &mut Call<'_, '_>) -> Result<Reply, CmdError> {
    let a = &mut call.args;
    let key = a.take()?;
    let time = a.time("time")?;
    let n = if a.left() > 0 {
        a.u64(
            "n",
            "a non-negative integer (at most 2^40)",
            Limits::MAX_COUNT_ADD,
        )?
    } else {
        1
    };
    a.done()?;
    let (cmd, env) = (call.name(), call.env);
    let c = call.keys.write::<Counter>(key)?;
    let t = env.resolve(time, c.latest());
    if c.hist.upper_bound().saturating_add(n) > Limits::MAX_COUNT_TOTAL {
        return Err(CmdError::Limit {
            cmd,
            msg: "the window's count would pass 2^62".into(),
        });
    }
    c.hist.record_value(t, n).map_err(|_| CmdError::Time {
        cmd,
        msg: format!(
            "time {t} is before the key's latest time {}: a counter takes events in time order",
            c.hist.now()
        ),
    })?;
    let reply = c.hist.estimate().into();
    call.replicate_time(time, t);
    Ok(reply)
}

fn get(call: &mut Call<'_, '_>) -> Result<Reply, CmdError> {
    let a = &mut call.args;
    let key = a.take()?;
    let at = if a.keyword("AT") {
        Some(a.time("AT")?)
    } else {
        None
    };
    a.done()?;
    let (cmd, env) = (call.name(), call.env);
    let c = call.keys.read::<Counter>(key)?;
    let latest = c.latest();
    let at = at.map_or(c.hist.now(), |a| env.resolve(a, latest));
    if latest.is_some_and(|l| at < l) {
        return Err(CmdError::Time {
            cmd,
            msg: format!(
                "AT {at} is before the key's latest time {}: the window can only end at or after it",
                c.hist.now()
            ),
        });
    }
    Ok(c.estimate_at(at).into())
}
