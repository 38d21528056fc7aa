//! The quotient filters' plates (Bender et al. 2012; Dayan et al. 2023): resizable fingerprint
//! tables against growth.
//!
//! A forecast of 2,000 keys at 1% (p = 18, q = 12). Designs: reserves 0, 5 and 7; the
//! (experimental, modelled) lengthening table at 1 and 2 bits a doubling; the stack
//! (×2 capacity, ×½ rate a layer). Keys are the integers 0.. as 8 little-endian bytes;
//! absent queries are seeded random integers with the top bit set (never inserted).

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use tidemark::membership::{LengtheningFilter, QuotientFilter, StackedFilter};

use tidemark_cli::output::{Output, Record};

const FORECAST: u64 = 2_000;
const FPR: f64 = 0.01;
/// Absent queries per measured point: the binomial σ of a rate f is √(f/10^6), 0.1% of
/// f = 1%, so each printed rate is good to its second significant digit.
const QUERIES: u64 = 1_000_000;
const GROWTHS: [u64; 9] = [1, 2, 4, 8, 16, 32, 64, 128, 256];

#[derive(Clone, Copy)]
enum Design {
    Reserve(u32),
    Lengthen(u32),
    Stack,
}

impl Design {
    const ALL: [Design; 6] = [
        Design::Reserve(0),
        Design::Reserve(5),
        Design::Reserve(7),
        Design::Lengthen(1),
        Design::Lengthen(2),
        Design::Stack,
    ];

    fn name(self) -> String {
        match self {
            Design::Reserve(b) => format!("reserve {b}"),
            Design::Lengthen(s) => format!("lengthen {s}"),
            Design::Stack => "stack".to_string(),
        }
    }

    fn build(self) -> anyhow::Result<Table> {
        Ok(match self {
            Design::Reserve(b) => Table::Quotient(QuotientFilter::with_reserve(FORECAST, FPR, b)?),
            Design::Lengthen(s) => Table::Lengthening(LengtheningFilter::new(FORECAST, FPR, s)?),
            Design::Stack => Table::Stacked(StackedFilter::new(FORECAST, FPR)?),
        })
    }

    /// The design's target (rate, bits) at a growth, where the design gives one.
    fn target_figures(self, growth: u64) -> (Option<f64>, Option<u64>) {
        match (self, growth) {
            (Design::Reserve(0), 1) => (Some(0.0069), None),
            (Design::Reserve(0), 8) => (Some(0.057), None),
            (Design::Reserve(0), 32) => (Some(0.211), None),
            (Design::Reserve(5), 256) => (Some(0.058), Some(6_291_456)),
            (Design::Reserve(7), 256) => (Some(0.015), Some(8_388_608)),
            (Design::Lengthen(1), 32) => (Some(0.036), None),
            (Design::Lengthen(2), 16) => (Some(0.015), None),
            (Design::Lengthen(2), 32) => (Some(0.016), Some(2_228_224)),
            (Design::Stack, 32) => (Some(0.0103), Some(2_133_931)),
            _ => (None, None),
        }
    }
}

enum Table {
    Quotient(QuotientFilter),
    Lengthening(LengtheningFilter),
    Stacked(StackedFilter),
}

impl Table {
    /// Inserts a key; false when the table refuses it.
    fn insert(&mut self, key: &[u8]) -> bool {
        match self {
            Table::Quotient(f) => f.insert(key).is_ok(),
            Table::Lengthening(t) => t.insert(key).is_ok(),
            Table::Stacked(s) => {
                s.insert(key);
                true
            }
        }
    }

    fn contains(&self, key: &[u8]) -> bool {
        match self {
            Table::Quotient(f) => f.contains(key),
            Table::Lengthening(t) => t.contains(key),
            Table::Stacked(s) => s.contains(key),
        }
    }

    fn fpr(&self) -> f64 {
        match self {
            Table::Quotient(f) => f.fpr(),
            Table::Lengthening(t) => t.fpr(),
            Table::Stacked(s) => s.fpr(),
        }
    }

    fn bits(&self) -> u64 {
        match self {
            Table::Quotient(f) => f.bits(),
            Table::Lengthening(t) => t.bits(),
            Table::Stacked(s) => s.bits(),
        }
    }
}

fn key(i: u64) -> [u8; 8] {
    i.to_le_bytes()
}

fn absent(rng: &mut Pcg64) -> [u8; 8] {
    (rng.random::<u64>() | 1 << 63).to_le_bytes()
}

/// The 1-based number of the key a design refuses, inserting 0.. (None: never, within
/// 2^24 keys).
fn dies_at(design: Design) -> anyhow::Result<Option<u64>> {
    if let Design::Stack = design {
        return Ok(None);
    }
    let mut t = design.build()?;
    Ok((0..1u64 << 24).find(|&i| !t.insert(&key(i))).map(|i| i + 1))
}

/// A rate in percent, rounded to 0.001% so the table shows it.
fn pct(rate: f64) -> f64 {
    (rate * 100_000.0).round() / 1_000.0
}

/// Rate and bits against growth (1× to 256× the forecast) for every design, with the key at
/// which each table dies and the design's target figures beside the measured ones.
pub fn growth(out: &mut Output) -> anyhow::Result<()> {
    let mut rng = Pcg64::seed_from_u64(4);
    for design in Design::ALL {
        let died = dies_at(design)?;
        let mut t = design.build()?;
        let mut inserted = 0u64;
        let mut alive = true;
        for g in GROWTHS {
            let target = FORECAST * g;
            while alive && inserted < target {
                alive = t.insert(&key(inserted));
                if alive {
                    inserted += 1;
                }
            }
            let (measured, expected, bits) = if alive {
                let hits = (0..QUERIES)
                    .filter(|_| t.contains(&absent(&mut rng)))
                    .count();
                (
                    Some(hits as f64 / QUERIES as f64),
                    Some(t.fpr()),
                    Some(t.bits()),
                )
            } else {
                (None, None, None)
            };
            let (target_fpr, target_bits) = design.target_figures(g);
            out.emit(
                &Record::new()
                    .field("design", design.name())
                    .field("growth", g)
                    .field("keys", target)
                    .field("alive", alive)
                    .field_opt("fpr_pct", measured.map(pct))
                    .field_opt("expected_pct", expected.map(pct))
                    .field_opt("target_pct", target_fpr.map(pct))
                    .field_opt("bits", bits)
                    .field_opt("target_bits", target_bits)
                    .field_opt("dies_at_key", died),
            )?;
        }
    }
    Ok(())
}

/// Each generation's share of a lengthening table's rate at 32× the forecast (64,000
/// keys), measured over 10^6 absent queries, for 1 and 2 bits a doubling.
pub fn generations(out: &mut Output) -> anyhow::Result<()> {
    for step in [1u32, 2] {
        let mut rng = Pcg64::seed_from_u64(40 + step as u64);
        let mut t = LengtheningFilter::new(FORECAST, FPR, step)?;
        for i in 0..FORECAST * 32 {
            t.insert(&key(i))?;
        }
        let gens = t.generations();
        let mut hits = vec![0u64; gens];
        let mut any = 0u64;
        for _ in 0..QUERIES {
            let k = absent(&mut rng);
            let mut hit = false;
            for (g, h) in hits.iter_mut().enumerate() {
                if t.matches_generation(&k, g) {
                    *h += 1;
                    hit = true;
                }
            }
            any += hit as u64;
        }
        for (g, &h) in hits.iter().enumerate() {
            out.emit(
                &Record::new()
                    .field("step", step)
                    .field("generation", g as u64)
                    .field("keys", t.generation_counts()[g])
                    .field(
                        "key_share_pct",
                        pct(t.generation_counts()[g] as f64 / t.len() as f64),
                    )
                    .field("fingerprint_bits", t.generation_bits(g))
                    .field("fpr_pct", pct(h as f64 / QUERIES as f64))
                    .field("expected_pct", pct(t.generation_fpr(g)))
                    .field(
                        "rate_share_pct",
                        pct(if any == 0 { 0.0 } else { h as f64 / any as f64 }),
                    ),
            )?;
        }
    }
    Ok(())
}

/// The design's open question, priced: over a thousandfold growth past a forecast of 2,000 at
/// 1%, a table that is rebuilt whenever its rate passes 2% (the stack's bound) or it refuses
/// a key — a new table for the size reached, at 1% and no reserve, fed every key from the
/// store — against a stack that never rebuilds and
/// a reserve of 10 bits (2^10 ≥ 1,000) that never needs to. Reported at 1×, 10×, 100× and
/// 1,000×: measured rate, bits held, rebuilds so far and keys re-read from the store.
pub fn rebuild(out: &mut Output) -> anyhow::Result<()> {
    const CHECKPOINTS: [u64; 4] = [1, 10, 100, 1_000];
    let mut rng = Pcg64::seed_from_u64(44);
    for design in ["rebuild", "stack", "reserve 10"] {
        let mut qf = match design {
            "rebuild" => Some(QuotientFilter::new(FORECAST, FPR)?),
            "reserve 10" => Some(QuotientFilter::with_reserve(FORECAST, FPR, 10)?),
            _ => None,
        };
        let mut stack = StackedFilter::new(FORECAST, FPR)?;
        let (mut rebuilds, mut reread) = (0u64, 0u64);
        let mut inserted = 0u64;
        for g in CHECKPOINTS {
            while inserted < FORECAST * g {
                let k = key(inserted);
                match qf.as_mut() {
                    Some(f) => {
                        let refused = f.insert(&k).is_err();
                        // Rebuild on a refusal, or once the rate passes the stack's bound 2ε
                        // so that the two are compared at a like rate. The store holds every
                        // key so far, this one included.
                        if refused || (design == "rebuild" && f.fpr() > 2.0 * FPR) {
                            let r = f.rebuild((0..=inserted).map(key), FPR, 0)?;
                            rebuilds += 1;
                            reread += r.keys_reread;
                            *f = r.filter;
                        }
                    }
                    None => stack.insert(&k),
                }
                inserted += 1;
            }
            let (hits, bits) = match qf.as_ref() {
                Some(f) => (
                    (0..QUERIES)
                        .filter(|_| f.contains(&absent(&mut rng)))
                        .count(),
                    f.bits(),
                ),
                None => (
                    (0..QUERIES)
                        .filter(|_| stack.contains(&absent(&mut rng)))
                        .count(),
                    stack.bits(),
                ),
            };
            let expected = qf.as_ref().map_or(stack.fpr(), QuotientFilter::fpr);
            out.emit(
                &Record::new()
                    .field("design", design)
                    .field("growth", g)
                    .field("keys", inserted)
                    .field("fpr_pct", pct(hits as f64 / QUERIES as f64))
                    .field("expected_pct", pct(expected))
                    .field("bits", bits)
                    .field("rebuilds", rebuilds)
                    .field("keys_reread", reread),
            )?;
        }
    }
    Ok(())
}
