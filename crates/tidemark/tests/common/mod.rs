//! Seeded streams shared by the frequency tests.
#![allow(dead_code)]

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

/// A Zipf(s) sampler over `0..n` by inverse CDF (rank r has weight 1/(r+1)^s).
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    pub fn new(n: usize, s: f64) -> Zipf {
        let mut acc = 0.0;
        let mut cdf = Vec::with_capacity(n);
        for r in 0..n {
            acc += 1.0 / ((r + 1) as f64).powf(s);
            cdf.push(acc);
        }
        for c in &mut cdf {
            *c /= acc;
        }
        Zipf { cdf }
    }

    pub fn sample(&self, rng: &mut Pcg64) -> u64 {
        let u: f64 = rng.random();
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1) as u64
    }
}

/// The distributions the acceptance criteria name: Zipf s = 0.8, 1.1, 1.5 and uniform.
#[derive(Clone, Copy, Debug)]
pub enum Dist {
    Zipf(f64),
    Uniform,
}

pub const DISTS: [Dist; 4] = [
    Dist::Zipf(0.8),
    Dist::Zipf(1.1),
    Dist::Zipf(1.5),
    Dist::Uniform,
];

/// `len` items of `dist` over `0..n`, seeded. Zipf ranks are scattered over the universe by
/// a fixed odd multiplier so that heavy items are not all small integers.
pub fn stream(dist: Dist, n: usize, len: usize, seed: u64) -> Vec<u64> {
    let mut rng = Pcg64::seed_from_u64(seed);
    match dist {
        Dist::Uniform => (0..len).map(|_| rng.random_range(0..n as u64)).collect(),
        Dist::Zipf(s) => {
            let z = Zipf::new(n, s);
            (0..len)
                .map(|_| (z.sample(&mut rng).wrapping_mul(2_654_435_761)) % n as u64)
                .collect()
        }
    }
}

/// Exact counts.
pub fn counts(items: &[u64]) -> std::collections::HashMap<u64, i64> {
    let mut m = std::collections::HashMap::new();
    for &x in items {
        *m.entry(x).or_insert(0) += 1;
    }
    m
}

/// The acceptance bound for the mean of independent per-trial failure fractions whose
/// expectation is at most `p`: `p` plus four standard errors of the mean, the standard
/// deviation measured across the trials (trials use fresh seeds, so they are independent;
/// queries within one trial share the hash functions and are not, which is why the spread is
/// measured per trial rather than assumed binomial over all queries). The standard error is
/// floored at the binomial one for `p` over the trials' queries, so a run whose trials all
/// agree is not held to a zero-width bound. Returns `(mean, bound)`.
pub fn rate_bound(fractions: &[f64], p: f64, queries_per_trial: usize) -> (f64, f64) {
    let n = fractions.len() as f64;
    let mean = fractions.iter().sum::<f64>() / n;
    let var = fractions.iter().map(|f| (f - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let measured = (var / n).sqrt();
    let binomial = (p * (1.0 - p) / (n * queries_per_trial as f64)).sqrt();
    (mean, p + 4.0 * measured.max(binomial))
}

/// The counter index of `item` in each row of `cm`, found without reading the sketch's hash
/// functions: an empty twin (same dimensions, model and hasher) takes one update of `item`,
/// and the rows' non-zero counters are its columns. Row-major, so index `r·w + c`.
pub fn probe_columns(cm: &tidemark::frequency::CountMin, item: &[u8]) -> Vec<usize> {
    let mut twin =
        tidemark::frequency::CountMin::with_dimensions(cm.width(), cm.depth(), cm.model())
            .unwrap()
            .with_hasher(cm.hasher());
    twin.update(item, 1).unwrap();
    let cols: Vec<usize> = twin
        .counters()
        .iter()
        .enumerate()
        .filter(|(_, &c)| c != 0)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(cols.len(), cm.depth(), "one counter a row");
    cols
}

/// Each row's counter for `item`: the values the min and the median are taken over.
pub fn row_values(cm: &tidemark::frequency::CountMin, item: &[u8]) -> Vec<i64> {
    probe_columns(cm, item)
        .into_iter()
        .map(|i| cm.counters()[i])
        .collect()
}

/// `params` and `payload` in a valid envelope of `family` (magic, version, lengths and
/// checksum right): random bodies built this way reach the family decoder, where random
/// bytes would die at the 4-byte magic with probability 1 − 2^−32.
pub fn envelope(
    family: tidemark::codec::Family,
    flags: u8,
    params: &[u8],
    payload: &[u8],
) -> Vec<u8> {
    tidemark::codec::encode(
        family,
        flags,
        tidemark::hash::ItemHasher::default(),
        params,
        payload,
    )
}

/// A valid encoding with its body edited — each `(at, v)` writes `v` at `at` modulo the
/// length of the parameters followed by the payload — and `cut` bytes cut off the payload's
/// end, sealed again in a valid envelope (same family, flags and hasher; lengths and checksum
/// recomputed), so the family decoder's own checks see the damage.
pub fn reseal_body(valid: &[u8], edits: &[(usize, u8)], cut: usize) -> Vec<u8> {
    let env = tidemark::codec::decode(valid).expect("a valid encoding");
    let mut params = env.params.to_vec();
    let mut payload = env.payload.to_vec();
    for &(at, v) in edits {
        let n = params.len() + payload.len();
        if n == 0 {
            break;
        }
        let i = at % n;
        if i < params.len() {
            params[i] = v;
        } else {
            payload[i - params.len()] = v;
        }
    }
    payload.truncate(payload.len().saturating_sub(cut));
    tidemark::codec::encode(env.family, env.flags, env.hasher, &params, &payload)
}

/// The family parameters of a valid encoding.
pub fn params_of(valid: &[u8]) -> Vec<u8> {
    tidemark::codec::decode(valid)
        .expect("a valid encoding")
        .params
        .to_vec()
}
