//! What the server supplies that a command's arguments do not: its clock, and the defaults a
//! `CREATE` takes for a parameter it is not given.

use crate::args::Time;
use crate::error::CmdError;
use crate::limits::Limits;

/// What the server supplies that the arguments do not: its clock, and the defaults it was
/// loaded with.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Env {
    /// The server's clock, ms since the epoch (`*`).
    pub now_ms: u64,
    /// What a `CREATE` takes for a parameter it is not given.
    pub defaults: Defaults,
}

impl Env {
    /// The clock at `now_ms`, with the built-in defaults.
    pub const fn at(now_ms: u64) -> Env {
        Env {
            now_ms,
            defaults: Defaults::BUILT_IN,
        }
    }

    /// The time `time` stands for on a key whose latest time is `latest`: `*` and `*<ms>`
    /// never fall before it.
    pub fn resolve(&self, time: Time, latest: Option<u64>) -> u64 {
        match time {
            Time::At(t) => t,
            Time::Now => self
                .now_ms
                .min(Limits::MAX_TIME_MS)
                .max(latest.unwrap_or(0)),
            Time::Clock(ms) => ms.max(latest.unwrap_or(0)),
        }
    }

    /// Where a window asked `AT at` (none: the key's latest time) ends on a key whose latest
    /// time is `latest`: never before it, which a window's buckets no longer hold.
    pub fn window_end(
        &self,
        cmd: &'static str,
        at: Option<Time>,
        latest: Option<u64>,
    ) -> Result<u64, CmdError> {
        let now = match at {
            None => latest.unwrap_or(0),
            Some(a) => self.resolve(a, latest),
        };
        match latest.filter(|l| now < *l) {
            Some(l) => Err(CmdError::Time {
                cmd,
                msg: format!("AT {now} is before the key's latest time {l}"),
            }),
            None => Ok(now),
        }
    }
}

/// Parameters a `CREATE` is not given.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Defaults {
    /// ε of counters (`TMCOUNT.CREATE`) and frequency keys (`TMFREQ.CREATE`).
    pub epsilon: f64,
    /// The precision of distinct keys.
    pub precision: u8,
    /// δ of frequency keys.
    pub delta: f64,
    /// φ of frequency keys.
    pub phi: f64,
    /// α, the relative accuracy of quantile keys (`TMQUANTILE.CREATE` without `ALPHA` or
    /// `SCHEMA`).
    pub alpha: f64,
}

impl Defaults {
    /// What a module loaded without arguments uses: Redis's own HyperLogLog precision (14), a
    /// 1% relative error, a 1% failure probability, heavy items at 5%, quantiles within 1%.
    pub const BUILT_IN: Defaults = Defaults {
        epsilon: 0.01,
        precision: 14,
        delta: 0.01,
        phi: 0.05,
        alpha: tidemark::quantile::DEFAULT_ALPHA,
    };
}

impl Default for Defaults {
    fn default() -> Self {
        Defaults::BUILT_IN
    }
}
