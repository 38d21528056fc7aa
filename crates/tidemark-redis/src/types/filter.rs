//! `filter`: "seen before?" — a quotient filter that doubles in place as it fills (Bender et
//! al. 2012), with a reserve of fingerprint bits (Dayan et al. 2023), or a stack of them;
//! optionally generations by time, so that it forgets. No false negatives (unless `DEL`
//! removes an item that was never added).
//!
//! ```text
//! TMFILTER.CREATE key CAPACITY n FPR r [RESERVE bits | STACKED] [EXPIRE ms]
//! TMFILTER.ADD key item [item ...]
//! TMFILTER.ADDAT key time item [item ...]
//! TMFILTER.EXISTS key item [item ...]
//! TMFILTER.DEL key item
//! ```
//!
//! A filter without `EXPIRE` dumps as its core envelope (family 48 or 49). An expiring one
//! dumps as bundle kind 2: expire ms u64, capacity u64, fpr f64, reserve u8, stacked u8,
//! newest generation u64 (`u64::MAX`: none); one part per live generation, in order.

use std::collections::VecDeque;

use tidemark::codec::{Family, Writer};
use tidemark::hash::ItemHasher;
use tidemark::membership::{QuotientFilter, StackedFilter};

use super::bundle::{self, invalid};
use super::{Access, Call, Clock, Encoded, Keys, LoadError, Spec, TmType, Value};
use crate::args::{show, Time};
use crate::error::CmdError;
use crate::limits::Limits;
use crate::reply::{Replicate, Reply};

/// One filter: in place or stacked.
#[derive(Clone, Debug)]
pub enum FilterCore {
    /// A quotient filter growing in place.
    Quotient(QuotientFilter),
    /// A stack of quotient filters.
    Stacked(StackedFilter),
}

impl FilterCore {
    /// Whether `item` may be present.
    pub fn contains(&self, item: &[u8]) -> bool {
        match self {
            FilterCore::Quotient(f) => f.contains(item),
            FilterCore::Stacked(f) => f.contains(item),
        }
    }

    /// Inserts `item`; `false` when an in-place filter is exhausted.
    pub fn insert(&mut self, item: &[u8]) -> bool {
        match self {
            FilterCore::Quotient(f) => f.insert(item).is_ok(),
            FilterCore::Stacked(f) => {
                f.insert(item);
                true
            }
        }
    }

    /// Removes one copy of `item`'s fingerprint.
    pub fn remove(&mut self, item: &[u8]) -> bool {
        match self {
            FilterCore::Quotient(f) => f.remove(item),
            FilterCore::Stacked(f) => f.remove(item),
        }
    }

    /// Items held.
    pub fn items(&self) -> u64 {
        match self {
            FilterCore::Quotient(f) => f.len(),
            FilterCore::Stacked(f) => f.len(),
        }
    }

    /// The expected false-positive rate now.
    pub fn fpr(&self) -> f64 {
        match self {
            FilterCore::Quotient(f) => f.fpr(),
            FilterCore::Stacked(f) => f.fpr(),
        }
    }

    /// Bytes of the tables.
    pub fn bytes(&self) -> usize {
        let bits = match self {
            FilterCore::Quotient(f) => f.bits(),
            FilterCore::Stacked(f) => f.bits(),
        };
        (bits / 8) as usize + 64
    }

    fn to_bytes(&self) -> Vec<u8> {
        match self {
            FilterCore::Quotient(f) => f.to_bytes(),
            FilterCore::Stacked(f) => f.to_bytes(),
        }
    }
}

/// How a filter is built.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FilterSpec {
    /// The forecast of keys.
    pub capacity: u64,
    /// The false-positive rate at the forecast.
    pub fpr: f64,
    /// Extra fingerprint bits of an in-place filter.
    pub reserve: u32,
    /// A stack instead of one filter growing in place.
    pub stacked: bool,
}

/// Why a filter's shape is refused.
#[derive(Clone, Debug, PartialEq)]
pub enum Refused {
    /// A parameter outside its domain.
    Param(String),
    /// A table past the module's bound.
    Limit(String),
}

impl Refused {
    fn for_command(self, cmd: &'static str) -> CmdError {
        match self {
            Refused::Param(msg) => CmdError::Param { cmd, msg },
            Refused::Limit(msg) => CmdError::Limit { cmd, msg },
        }
    }
}

impl FilterSpec {
    /// What a filter holds now: its capacity and rate as they have grown (so a master, its
    /// replica and a reloaded copy, which share the filter's bytes, say the same).
    fn of(core: &FilterCore) -> FilterSpec {
        match core {
            FilterCore::Quotient(f) => FilterSpec {
                capacity: f.max_keys().max(1),
                fpr: f.fpr(),
                reserve: f.reserve(),
                stacked: false,
            },
            FilterCore::Stacked(f) => FilterSpec {
                capacity: f.capacity(),
                fpr: f.target_fpr(),
                reserve: 0,
                stacked: true,
            },
        }
    }

    /// The bytes the first table takes, checked against the limit; builds nothing.
    pub fn check(&self) -> Result<u64, Refused> {
        if self.capacity == 0 || self.capacity > 1 << 38 {
            return Err(Refused::Param(format!(
                "CAPACITY must be in 1..=2^38, got {}",
                self.capacity
            )));
        }
        if !(self.fpr > 0.0 && self.fpr < 1.0) {
            return Err(Refused::Param(format!(
                "FPR must be in (0, 1), got {}",
                self.fpr
            )));
        }
        // q = ⌈log2(4n/3)⌉ slots bits, p = ⌈log2(n/ε)⌉ + reserve fingerprint bits.
        let mut q = 0u32;
        while (3u128 << q) < self.capacity as u128 * 4 {
            q += 1;
        }
        let p =
            ((self.capacity as f64) / self.fpr).log2().ceil().max(0.0) as u64 + self.reserve as u64;
        let slot_bits = p.saturating_sub(q as u64) + 3;
        let bytes = (1u64 << q).saturating_mul(slot_bits) / 8;
        if bytes > Limits::MAX_FILTER_BYTES {
            return Err(Refused::Limit(format!(
                "the filter's table would need {bytes} bytes, above the {} byte limit",
                Limits::MAX_FILTER_BYTES
            )));
        }
        Ok(bytes)
    }

    /// Builds one filter.
    pub fn build(&self) -> Result<FilterCore, Refused> {
        self.check()?;
        if self.stacked {
            StackedFilter::new(self.capacity, self.fpr)
                .map(FilterCore::Stacked)
                .map_err(|e| Refused::Param(e.to_string()))
        } else {
            QuotientFilter::with_reserve(self.capacity, self.fpr, self.reserve)
                .map(FilterCore::Quotient)
                .map_err(|e| Refused::Param(e.to_string()))
        }
    }
}

/// A filter, or generations of filters by time when it forgets.
#[derive(Clone, Debug)]
pub struct Filter {
    /// How each generation is built.
    pub spec: FilterSpec,
    /// `Some(ms)`: items older than `ms` are forgotten.
    pub expire_ms: Option<u64>,
    /// `(generation, filter)`, oldest first; one generation numbered 0 when nothing expires.
    pub gens: VecDeque<(u64, FilterCore)>,
    /// The newest generation written (expiring filters).
    pub newest_gen: Option<u64>,
}

impl Filter {
    fn single(core: FilterCore) -> Filter {
        Filter {
            spec: FilterSpec::of(&core),
            expire_ms: None,
            gens: VecDeque::from([(0, core)]),
            newest_gen: None,
        }
    }

    /// A fresh filter (spec already checked).
    pub fn new(spec: FilterSpec, expire_ms: Option<u64>) -> Result<Filter, Refused> {
        let gens = match expire_ms {
            None => VecDeque::from([(0, spec.build()?)]),
            Some(_) => VecDeque::new(),
        };
        Ok(Filter {
            spec,
            expire_ms,
            gens,
            newest_gen: None,
        })
    }

    /// The generation length, ms: ⌈EXPIRE / (G − 1)⌉ (1 when nothing expires).
    pub fn gen_ms(&self) -> u64 {
        self.expire_ms
            .map_or(1, |e| e.div_ceil(Limits::GENERATIONS - 1).max(1))
    }

    /// Whether generation `g` is still live when the clock reads `now`.
    fn live(&self, g: u64, now: u64) -> bool {
        match self.expire_ms {
            None => true,
            Some(_) => g.saturating_add(Limits::GENERATIONS - 1) >= now / self.gen_ms(),
        }
    }

    /// The generations a query at `now` consults.
    pub fn live_gens(&self, now: u64) -> impl Iterator<Item = &FilterCore> {
        self.gens
            .iter()
            .filter(move |(g, _)| self.live(*g, now))
            .map(|(_, f)| f)
    }

    /// The filter an insert at `now` goes to, creating its generation and dropping dead
    /// ones. `None` only if building a generation fails (the spec was checked, so never).
    pub fn target(&mut self, now: u64) -> Option<&mut FilterCore> {
        if self.expire_ms.is_none() {
            return self.gens.front_mut().map(|(_, f)| f);
        }
        // A late event goes to the newest generation: it lives a little longer, never less.
        let g = (now / self.gen_ms()).max(self.newest_gen.unwrap_or(0));
        while self
            .gens
            .front()
            .is_some_and(|(old, _)| !self.live(*old, g.saturating_mul(self.gen_ms())))
        {
            self.gens.pop_front();
        }
        if self.gens.back().is_none_or(|(b, _)| *b != g) {
            let f = self.spec.build().ok()?;
            self.gens.push_back((g, f));
        }
        self.newest_gen = Some(g);
        self.gens.back_mut().map(|(_, f)| f)
    }

    /// What `TM.INFO` reports of the shape: the creation parameters of an expiring filter's
    /// generations (its bytes keep them), the grown filter's own otherwise.
    fn shown_spec(&self) -> FilterSpec {
        match (self.expire_ms, self.gens.front()) {
            (None, Some((_, core))) => FilterSpec::of(core),
            _ => self.spec,
        }
    }
}

impl TmType for Filter {
    const NAME: &'static str = "filter";

    fn heap_bytes(&self) -> usize {
        core::mem::size_of::<Filter>() + self.gens.iter().map(|(_, f)| f.bytes()).sum::<usize>()
    }

    fn to_bytes(&self) -> Vec<u8> {
        match (self.expire_ms, self.gens.front()) {
            (None, Some((_, f))) => f.to_bytes(),
            (None, None) => unreachable!("a filter that never expires keeps its one generation"),
            (Some(expire), _) => {
                let mut w = Writer::new();
                w.u64(expire)
                    .u64(self.spec.capacity)
                    .f64(self.spec.fpr)
                    .u8(self.spec.reserve as u8)
                    .u8(self.spec.stacked as u8)
                    .u64(self.newest_gen.unwrap_or(u64::MAX));
                let parts: Vec<(u64, Vec<u8>)> =
                    self.gens.iter().map(|(g, f)| (*g, f.to_bytes())).collect();
                bundle::encode(bundle::KIND_FILTER, w.bytes(), &parts)
            }
        }
    }

    fn latest(&self) -> Option<u64> {
        self.newest_gen.map(|g| g.saturating_mul(self.gen_ms()))
    }

    fn info(&self, m: &mut Vec<(&'static str, Reply)>) {
        let spec = self.shown_spec();
        m.push((
            "structure",
            Reply::text(if spec.stacked {
                "stacked quotient filters"
            } else {
                "quotient filter growing in place (Bender et al. 2012)"
            }),
        ));
        m.push(("capacity", Reply::Integer(spec.capacity as i64)));
        m.push(("fpr", Reply::Double(spec.fpr)));
        m.push(("reserve", Reply::Integer(spec.reserve as i64)));
        m.push((
            "expire_ms",
            self.expire_ms
                .map_or(Reply::Null, |e| Reply::Integer(e as i64)),
        ));
        m.push(("generations", Reply::Integer(self.gens.len() as i64)));
        m.push((
            "items",
            Reply::Integer(self.gens.iter().map(|(_, g)| g.items()).sum::<u64>() as i64),
        ));
        m.push((
            "fpr_now",
            // Folded from +0 (an empty sum of floats is -0).
            Reply::Double(self.gens.iter().fold(0.0, |a, (_, g)| a + g.fpr())),
        ));
        m.push((
            "hash",
            Reply::text(format!("{}", ItemHasher::default().id())),
        ));
        m.push(("bracket", Reply::text("no false negatives (unless an item was deleted that was never added); false positives at about fpr_now")));
    }

    fn decode(encoded: &mut Encoded<'_>) -> Option<Result<Self, LoadError>> {
        let d = LoadError::Decode;
        match encoded {
            Encoded::Envelope(Family::QuotientFilter, bytes) => Some(
                QuotientFilter::from_bytes(bytes)
                    .map(|f| Filter::single(FilterCore::Quotient(f)))
                    .map_err(d),
            ),
            Encoded::Envelope(Family::StackedFilter, bytes) => Some(
                StackedFilter::from_bytes(bytes)
                    .map(|f| Filter::single(FilterCore::Stacked(f)))
                    .map_err(d),
            ),
            Encoded::Bundle(bundle::KIND_FILTER, r) => Some(decode_generations(r)),
            _ => None,
        }
    }
}

fn decode_generations(r: &mut tidemark::codec::Reader<'_>) -> Result<Filter, LoadError> {
    let d = LoadError::Decode;
    let expire = r.u64("expire ms").map_err(d)?;
    let capacity = r.u64("capacity").map_err(d)?;
    let fpr = r.f64("fpr").map_err(d)?;
    let reserve = r.u8("reserve").map_err(d)? as u32;
    let stacked = r.bool("stacked").map_err(d)?;
    let newest = r.u64("newest generation").map_err(d)?;
    if expire == 0 || expire > Limits::MAX_WINDOW_MS {
        return Err(invalid(r, "expire ms", "in 1..=2^48", expire));
    }
    let spec = FilterSpec {
        capacity,
        fpr,
        reserve,
        stacked,
    };
    let refused = |_| LoadError::Limit("filter parameters a TMFILTER.CREATE would refuse");
    spec.check().map_err(refused)?;
    let mut f = Filter::new(spec, Some(expire)).map_err(refused)?;
    f.newest_gen = (newest != u64::MAX).then_some(newest);
    bundle::read_parts(
        r,
        Limits::GENERATIONS,
        "at most 5 generations",
        |r, g, part| {
            let core = if stacked {
                FilterCore::Stacked(StackedFilter::from_bytes(part).map_err(d)?)
            } else {
                FilterCore::Quotient(QuotientFilter::from_bytes(part).map_err(d)?)
            };
            let newest = f
                .newest_gen
                .ok_or_else(|| invalid(r, "generation", "none without a newest", g))?;
            let ordered = f.gens.back().is_none_or(|(prev, _)| *prev < g);
            if g > newest || !ordered {
                return Err(invalid(
                    r,
                    "generation",
                    "increasing, at most the newest",
                    g,
                ));
            }
            f.gens.push_back((g, core));
            Ok(())
        },
    )?;
    Ok(f)
}

/// `TMFILTER.CREATE`.
pub const CREATE: Spec = Spec {
    name: "TMFILTER.CREATE",
    legacy: Some("TM.FILTER.CREATE"),
    access: Access::Write,
    fast: false,
    keys: Keys::First,
    clock: Clock::No,
    usage: "key CAPACITY n FPR r [RESERVE bits | STACKED] [EXPIRE ms]",
    summary: "Creates a filter for about CAPACITY items at rate FPR that doubles in place (or stacks); with EXPIRE it forgets",
    complexity: "O(CAPACITY) to allocate its table",
    run: create,
};

/// `TMFILTER.ADD`.
pub const ADD: Spec = Spec {
    name: "TMFILTER.ADD",
    legacy: Some("TM.FILTER.ADD"),
    access: Access::Write,
    fast: false,
    keys: Keys::First,
    clock: Clock::Always,
    usage: "key item [item ...]",
    summary: "Adds items; per item 1 if it was new, 0 if (probably) seen before",
    complexity: "O(1) per item, amortized",
    run: add,
};

/// `TMFILTER.ADDAT`.
pub const ADDAT: Spec = Spec {
    name: "TMFILTER.ADDAT",
    legacy: Some("TM.FILTER.ADDAT"),
    access: Access::Write,
    fast: false,
    keys: Keys::First,
    clock: Clock::TimeArg,
    usage: "key time item [item ...]",
    summary: "TMFILTER.ADD at an explicit time (what an ADD on an EXPIRE filter replicates as)",
    complexity: "O(1) per item, amortized",
    run: add_at,
};

/// `TMFILTER.EXISTS`.
pub const EXISTS: Spec = Spec {
    name: "TMFILTER.EXISTS",
    legacy: Some("TM.FILTER.EXISTS"),
    access: Access::Read,
    fast: false,
    keys: Keys::First,
    clock: Clock::Always,
    usage: "key item [item ...]",
    summary: "Per item 1 if (probably) present, 0 if certainly absent",
    complexity: "O(1) per item",
    run: exists,
};

/// `TMFILTER.DEL`.
pub const DEL: Spec = Spec {
    name: "TMFILTER.DEL",
    legacy: Some("TM.FILTER.DEL"),
    access: Access::Remove,
    fast: false,
    keys: Keys::First,
    clock: Clock::No,
    usage: "key item",
    summary: "Removes one fingerprint of item: 1 if one was removed",
    complexity: "O(1)",
    run: del,
};

fn create(call: &mut Call<'_, '_>) -> Result<Reply, CmdError> {
    let a = &mut call.args;
    let key = a.take()?;
    let (mut capacity, mut fpr, mut reserve, mut stacked, mut expire) =
        (None, None, None, false, None);
    let mut seen = a.options();
    while a.left() > 0 {
        if a.option(&mut seen, "CAPACITY")? {
            capacity =
                Some(a.positive("CAPACITY", "a positive integer (at most 2^38)", 1 << 38)?);
        } else if a.option(&mut seen, "FPR")? {
            fpr = Some(a.fraction("FPR")?);
        } else if a.option(&mut seen, "RESERVE")? {
            reserve = Some(a.u64("RESERVE", "an integer of bits in 0..=32", 32)? as u32);
        } else if a.option(&mut seen, "STACKED")? {
            stacked = true;
        } else if a.option(&mut seen, "EXPIRE")? {
            expire = Some(a.ms("EXPIRE")?);
        } else {
            a.done()?;
        }
    }
    let cmd = call.name();
    let param = |msg: &str| CmdError::Param {
        cmd,
        msg: msg.to_string(),
    };
    if stacked && reserve.is_some() {
        return Err(param("give one of RESERVE bits and STACKED"));
    }
    let capacity = capacity.ok_or_else(|| param("CAPACITY n is required"))?;
    let fpr = fpr.ok_or_else(|| param("FPR r is required"))?;
    call.keys.vacant(key)?;
    let spec = FilterSpec {
        capacity,
        fpr,
        reserve: reserve.unwrap_or(0),
        stacked,
    };
    let table = spec.check().map_err(|r| r.for_command(cmd))?;
    // An expiring filter holds a table a generation: the bound covers them all.
    if expire.is_some() && table.saturating_mul(Limits::GENERATIONS) > Limits::MAX_FILTER_BYTES {
        return Err(CmdError::Limit {
            cmd,
            msg: format!(
                "with EXPIRE its {} generations' tables would need {} bytes, above the {} byte limit",
                Limits::GENERATIONS,
                table.saturating_mul(Limits::GENERATIONS),
                Limits::MAX_FILTER_BYTES
            ),
        });
    }
    // Build one generation to check the shape even when generations start lazily.
    spec.build().map_err(|r| r.for_command(cmd))?;
    let f = Filter::new(spec, expire).map_err(|r| r.for_command(cmd))?;
    call.keys.store(key, Value::Filter(f));
    call.rep = Replicate::Verbatim;
    Ok(Reply::Ok)
}

fn add(call: &mut Call<'_, '_>) -> Result<Reply, CmdError> {
    insert(call, false)
}

fn add_at(call: &mut Call<'_, '_>) -> Result<Reply, CmdError> {
    insert(call, true)
}

fn insert(call: &mut Call<'_, '_>, timed: bool) -> Result<Reply, CmdError> {
    let a = &mut call.args;
    let key = a.take()?;
    let time = if timed { Some(a.time("time")?) } else { None };
    let items = a.rest_nonempty()?;
    let (cmd, env) = (call.name(), call.env);
    let f = call.keys.write::<Filter>(key)?;
    let expiring = f.expire_ms.is_some();
    let t = env.resolve(time.unwrap_or(Time::Now), f.latest());
    let mut out = Vec::with_capacity(items.len());
    let mut result = Ok(());
    for item in items {
        let present = f.live_gens(t).any(|g| g.contains(item));
        if present && !expiring {
            out.push(Reply::Integer(0));
            continue;
        }
        // An expiring filter remembers an item for EXPIRE ms after its *latest* add: one
        // seen only in an older generation is written again into the current one.
        let inserted = f.target(t).map(|g| g.contains(item) || g.insert(item));
        match inserted {
            Some(true) => out.push(Reply::Integer(!present as i64)),
            _ => {
                let added = out.iter().filter(|r| **r == Reply::Integer(1)).count();
                result = Err(CmdError::Full {
                    cmd,
                    key: show(key),
                    added,
                });
                break;
            }
        }
    }
    // Replicas replay the same items on the same state and stop at the same place.
    match (time, expiring) {
        (None, true) => {
            let mut v: Vec<Vec<u8>> = vec![
                ADDAT.name.as_bytes().to_vec(),
                key.to_vec(),
                t.to_string().into_bytes(),
            ];
            v.extend(items.iter().map(|i| i.to_vec()));
            call.rep = Replicate::Rewritten(v);
        }
        (Some(tm), _) => call.replicate_time(tm, t),
        (None, false) => call.rep = Replicate::Verbatim,
    }
    result.map(|()| Reply::Array(out))
}

fn exists(call: &mut Call<'_, '_>) -> Result<Reply, CmdError> {
    let a = &mut call.args;
    let key = a.take()?;
    let items = a.rest_nonempty()?;
    let env = call.env;
    let f = call.keys.read::<Filter>(key)?;
    let now = env.resolve(Time::Now, f.latest());
    Ok(Reply::Array(
        items
            .iter()
            .map(|i| Reply::Integer(f.live_gens(now).any(|g| g.contains(i)) as i64))
            .collect(),
    ))
}

fn del(call: &mut Call<'_, '_>) -> Result<Reply, CmdError> {
    let a = &mut call.args;
    let key = a.take()?;
    let item = a.take()?;
    a.done()?;
    let f = call.keys.write::<Filter>(key)?;
    let mut removed = false;
    for (_, g) in f.gens.iter_mut() {
        if g.contains(item) {
            removed |= g.remove(item);
        }
    }
    if removed {
        call.rep = Replicate::Verbatim;
    }
    Ok(Reply::Integer(removed as i64))
}
