//! A quantile metric end to end: records with a numeric field through the pipeline into the
//! store, every window's quantiles against the exact nearest-rank quantiles of its values
//! (each within α, each bracket holding the truth: the guarantee is deterministic, so every
//! answer is checked), alert rules on a quantile against the exact windows, and the values a
//! careless or hostile writer puts in the field.

mod common;

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use tidemark_stream::config::Config;
use tidemark_stream::pipeline::{self, RunOptions};
use tidemark_stream::query::{self, Ask, Label};
use tidemark_stream::store::MemStore;
use tidemark_stream::RunError;

const T0: u64 = 1_700_000_040; // epoch seconds, on a minute
const MINUTES: u64 = 30;
const ALPHA: f64 = 0.01;

const CONFIG: &str = r#"
[input]
time_field = "ts"

[[metric]]
name = "latency"
kind = "quantile"
key = ["endpoint"]
value = "ms"
bucket = "1m"
window = "5m"
quantiles = [0.5, 0.99]

[[metric.alert]]
quantile = 0.99
above = 400
on = "low"

[[metric.alert]]
quantile = 0.99
above = 400
on = "high"
"#;

/// A standard normal deviate (Box–Muller).
fn normal(rng: &mut Pcg64) -> f64 {
    let u: f64 = rng.random_range(f64::MIN_POSITIVE..1.0);
    let v: f64 = rng.random();
    (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

/// The records: per second, a few requests to each of four endpoints — lognormal latencies,
/// a slow one whose tail crosses 400 ms in some minutes, a bimodal one (cache hits and
/// misses), and one of values around zero of both signs.
fn records() -> Vec<(u64, &'static str, f64)> {
    let mut rng = Pcg64::seed_from_u64(36);
    let mut out = Vec::new();
    for s in 0..MINUTES * 60 {
        let t = T0 + s;
        let minute = s / 60;
        for _ in 0..rng.random_range(1..4) {
            out.push((t, "/api", (3.0 + 0.6 * normal(&mut rng)).exp()));
            // Every fourth minute the slow endpoint's tail is far heavier.
            let sigma = if minute % 4 == 1 { 1.5 } else { 0.4 };
            out.push((t, "/slow", (4.5 + sigma * normal(&mut rng)).exp()));
            let hit = rng.random_bool(0.8);
            let mix = if hit {
                1.0 + 0.2 * normal(&mut rng)
            } else {
                5.5 + 0.3 * normal(&mut rng)
            };
            out.push((t, "/mix", mix.exp()));
            let z = (normal(&mut rng) * 50.0).round() / 4.0;
            out.push((t, "/signed", z));
        }
    }
    out
}

fn csv(records: &[(u64, &str, f64)]) -> String {
    let mut text = String::from("ts,endpoint,ms\n");
    for (t, k, v) in records {
        text.push_str(&format!("{t},{k},{v}\n"));
    }
    text
}

/// The value of nearest rank ⌈q·n⌉ of `sorted`.
fn exact(sorted: &[f64], q: f64) -> f64 {
    let n = sorted.len() as u64;
    sorted[tidemark::quantile::nearest_rank(q, n) as usize - 1]
}

/// The values of each key in the window `[end − 5 min, end)`, sorted.
fn window_values(records: &[(u64, &str, f64)], end_ms: u64) -> BTreeMap<String, Vec<f64>> {
    let mut by_key: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for &(t, k, v) in records {
        let ms = t * 1000;
        if ms + 300_000 >= end_ms && ms < end_ms {
            by_key.entry(k.to_string()).or_default().push(v);
        }
    }
    for v in by_key.values_mut() {
        v.sort_by(f64::total_cmp);
    }
    by_key
}

#[test]
fn every_window_answers_within_alpha_of_the_exact_quantiles() {
    let recs = records();
    let store = common::run_text(CONFIG, &csv(&recs), "quantile-windows");
    let qs = [0.5, 0.9, 0.99, 0.999, 1.0];
    let mut checked = 0u64;
    for minute in 1..=MINUTES {
        let end = (T0 + minute * 60) * 1000;
        let truth = window_values(&recs, end);
        let answer = query::window_asking(
            &store,
            "latency",
            300_000,
            Some(end),
            None,
            None,
            &Ask {
                quantiles: Some(&qs),
            },
        )
        .unwrap();
        assert_eq!(answer.part, Some("quantile"));
        assert_eq!(answer.rows.len(), truth.len(), "keys at {end}");
        for row in &answer.rows {
            let values = &truth[&row.key];
            assert_eq!(
                row.events,
                Some(values.len() as u64),
                "{} at {end}",
                row.key
            );
            assert_eq!(row.parts.len(), qs.len());
            for ((label, e), &q) in row.parts.iter().zip(&qs) {
                assert_eq!(*label, Label::Number(q));
                let x = exact(values, q);
                assert!(
                    (e.value - x).abs() <= ALPHA * x.abs() * (1.0 + 1e-12),
                    "{} q={q} at {end}: {} is not within α of {x}",
                    row.key,
                    e.value
                );
                assert!(e.contains(x), "{} q={q} at {end}: {e} misses {x}", row.key);
                checked += 1;
            }
            // A row ranks by the highest quantile asked.
            assert_eq!(row.estimate, row.parts.last().unwrap().1);
        }
    }
    assert_eq!(checked, MINUTES * 4 * qs.len() as u64);
}

#[test]
fn quantiles_asked_outside_zero_to_one_or_too_many_are_refused_by_name() {
    let recs = records();
    let store = common::run_text(CONFIG, &csv(&recs), "quantile-asks");
    let end = (T0 + 10 * 60) * 1000;
    let ask = |qs: &[f64]| {
        query::window_asking(
            &store,
            "latency",
            300_000,
            Some(end),
            None,
            None,
            &Ask {
                quantiles: Some(qs),
            },
        )
    };
    let seventeen = [0.5; 17];
    for (qs, says) in [
        (
            &[0.5, 0.0][..],
            "quantile 0 is not in (0, 1] (0.99 is the p99)",
        ),
        (
            &[1.5][..],
            "quantile 1.5 is not in (0, 1] (0.99 is the p99)",
        ),
        (
            &[-0.1][..],
            "quantile -0.1 is not in (0, 1] (0.99 is the p99)",
        ),
        (
            &[f64::NAN][..],
            "quantile NaN is not in (0, 1] (0.99 is the p99)",
        ),
        (&[][..], "0 quantiles asked: a row answers 1 to 16"),
        (&seventeen[..], "17 quantiles asked: a row answers 1 to 16"),
    ] {
        match ask(qs) {
            Err(e @ query::QueryError::BadQuantiles { .. }) => {
                assert_eq!(e.to_string(), says, "{qs:?}")
            }
            other => panic!("{qs:?}: {other:?}"),
        }
    }
    // The bounds themselves are quantiles a row answers.
    assert!(ask(&[1.0, 1e-9]).is_ok());
}

#[test]
fn rules_on_a_quantile_fire_on_the_exact_windows() {
    let recs = records();
    let dir = std::env::temp_dir().join(format!("tidemark-quantile-alerts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("in.csv");
    std::fs::write(&path, csv(&recs)).unwrap();
    let mut alerts = Vec::new();
    let mut store = MemStore::default();
    pipeline::run(
        &Config::from_toml(CONFIG).unwrap(),
        &mut store,
        RunOptions {
            inputs: vec![path],
            ..RunOptions::default()
        },
        &mut |a| {
            alerts.push((
                a.key.clone(),
                a.alert.rule,
                a.alert.window_end,
                a.alert.estimate,
            ))
        },
    )
    .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let p99 = |key: &str, end: u64| exact(&window_values(&recs, end)[key], 0.99);
    for (key, _, end, e) in &alerts {
        let x = p99(key, *end);
        assert!(e.contains(x), "{key} at {end}: {e} misses the p99 {x}");
    }
    // Each rule fires at the first close of each run of closes whose window's p99 is past
    // 400 at its end (`low`, `high`), and nowhere else; and a p99 truly above 400 is always
    // past it at the high end, never below it at the low end.
    let (mut fired_low, mut truly_above) = (0, 0);
    for key in ["/api", "/slow", "/mix", "/signed"] {
        let mut was = [false, false];
        for minute in 1..=MINUTES {
            let end = (T0 + minute * 60) * 1000;
            let a = query::window_asking(
                &store,
                "latency",
                300_000,
                Some(end),
                Some(key.as_bytes()),
                None,
                &Ask {
                    quantiles: Some(&[0.99]),
                },
            )
            .unwrap();
            let e = a.rows[0].parts[0].1;
            let x = p99(key, end);
            assert!(e.contains(x), "{key} at {end}: {e} misses {x}");
            if x > 400.0 {
                truly_above += 1;
                assert!(e.high > 400.0);
            } else {
                assert!(e.low <= 400.0);
            }
            for (rule, past) in [(0, e.low > 400.0), (1, e.high > 400.0)] {
                let fired = alerts
                    .iter()
                    .any(|(k, r, w, _)| k == key && *r == rule && *w == end);
                assert_eq!(fired, past && !was[rule], "{key} rule {rule} at {end}: {e}");
                fired_low += usize::from(fired && rule == 0);
                was[rule] = past;
            }
        }
    }
    assert!(
        fired_low > 0 && truly_above > 0,
        "the slow endpoint crosses: {fired_low} {truly_above}"
    );
}

/// One bad record among good ones: its error names the field and the line; with
/// `skip_bad` it is counted and every other value is kept.
#[test]
fn a_value_that_is_not_a_finite_number_is_a_bad_line() {
    let dir = std::env::temp_dir().join(format!("tidemark-quantile-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = Config::from_toml(CONFIG).unwrap();
    for (bad, says) in [
        ("slow", "expected a number"),
        ("", "empty"),
        ("NaN", "not a number"),
        ("nan", "not a number"),
        ("inf", "infinite"),
        ("-infinity", "infinite"),
        ("1e400", "infinite"),
        ("0x10", "expected a number"),
        ("12ms", "expected a number"),
    ] {
        let path = dir.join("in.csv");
        let text = format!(
            "ts,endpoint,ms\n{T0},/a,12.5\n{},/a,{bad}\n{},/a,7\n",
            T0 + 1,
            T0 + 2
        );
        std::fs::write(&path, &text).unwrap();
        let mut store = MemStore::default();
        let run = |store: &mut MemStore, skip_bad| {
            pipeline::run(
                &config,
                store,
                RunOptions {
                    inputs: vec![path.clone()],
                    skip_bad,
                    ..RunOptions::default()
                },
                &mut |_| {},
            )
        };
        match run(&mut store, false) {
            Err(RunError::BadLine { line, message, .. }) => {
                assert_eq!(line, 3, "{bad:?}");
                assert!(
                    message.contains("\"ms\"") && message.contains(says),
                    "{bad:?}: {message}"
                );
            }
            other => panic!("{bad:?}: {other:?}"),
        }
        let mut store = MemStore::default();
        let report = run(&mut store, true).unwrap();
        assert_eq!((report.records, report.bad_lines), (2, 1), "{bad:?}");
        let a = query::window(&store, "latency", 300_000, None, Some(b"/a"), None).unwrap();
        assert_eq!(a.rows[0].events, Some(2), "{bad:?}");
    }
    // JSON Lines: a number, or a string holding one; anything else names the field.
    let json = CONFIG.replace(
        "time_field = \"ts\"",
        "time_field = \"ts\"\nformat = \"jsonl\"",
    );
    let config = Config::from_toml(&json).unwrap();
    for (value, ok) in [
        ("12.5", true),
        ("\"12.5\"", true),
        ("1e400", false),
        ("null", false),
        ("[1]", false),
        ("true", false),
    ] {
        let path = dir.join("in.jsonl");
        std::fs::write(
            &path,
            format!("{{\"ts\":{T0},\"endpoint\":\"/a\",\"ms\":{value}}}\n"),
        )
        .unwrap();
        let mut store = MemStore::default();
        let r = pipeline::run(
            &config,
            &mut store,
            RunOptions {
                inputs: vec![path],
                ..RunOptions::default()
            },
            &mut |_| {},
        );
        match r {
            Ok(_) => assert!(ok, "{value} was accepted"),
            // (The JSON reader refuses a number past the float's range itself, naming its
            // column.)
            Err(RunError::BadLine { message, .. }) => assert!(
                !ok && (message.contains("\"ms\"") || message.contains("out of range")),
                "{value}: {message}"
            ),
            Err(e) => panic!("{value}: {e}"),
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
