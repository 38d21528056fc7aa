//! The command layer against exact models, without Redis: every command's answer is checked
//! against the truth (a `VecDeque` window, a `HashSet`, a `HashMap` of counts) and the
//! structure's guarantee; errors name the argument.

use std::collections::{HashMap, HashSet, VecDeque};

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use tidemark::cardinality::redis::parse_redis;
use tidemark::cardinality::Hll;
use tidemark_redis::command::{
    run, CmdError, Env, MemKeyspace, Outcome, Replicate, Reply, Slot, COMMANDS,
};

fn argv(s: &str) -> Vec<Vec<u8>> {
    s.split_whitespace()
        .map(|a| a.as_bytes().to_vec())
        .collect()
}

const ENV: Env = Env::at(1_000_000);

fn ok(ks: &mut MemKeyspace, s: &str) -> Reply {
    match run(ks, ENV, &argv(s)).reply {
        Ok(r) => r,
        Err(e) => panic!("{s}: {e}"),
    }
}

fn err(ks: &mut MemKeyspace, s: &str) -> String {
    match run(ks, ENV, &argv(s)).reply {
        Ok(r) => panic!("{s}: expected an error, got {r:?}"),
        Err(e) => e.to_string(),
    }
}

fn triple(r: &Reply) -> (f64, f64, f64) {
    match r {
        Reply::Estimate([a, b, c]) => (*a, *b, *c),
        Reply::Array(v) => match v.as_slice() {
            [Reply::Double(a), Reply::Double(b), Reply::Double(c)] => (*a, *b, *c),
            _ => panic!("not an estimate: {r:?}"),
        },
        _ => panic!("not an estimate: {r:?}"),
    }
}

#[test]
fn count_bracket_always_holds_the_true_window_count() {
    for seed in 0..20u64 {
        let mut rng = Pcg64::seed_from_u64(seed);
        let mut ks = MemKeyspace::default();
        let window = rng.random_range(1..5_000u64);
        let eps = [0.5, 0.1, 0.01][seed as usize % 3];
        ok(
            &mut ks,
            &format!("TMCOUNT.CREATE c WINDOW {window} EPSILON {eps}"),
        );
        let mut model: VecDeque<(u64, u64)> = VecDeque::new();
        let mut t = rng.random_range(0..1_000_000u64);
        for _ in 0..2_000 {
            t += rng.random_range(0..window / 4 + 2);
            let n = if rng.random_bool(0.7) {
                1
            } else {
                rng.random_range(0..50u64)
            };
            let r = ok(&mut ks, &format!("TMCOUNT.ADD c {t} {n}"));
            model.push_back((t, n));
            while model.front().is_some_and(|&(s, _)| s + window <= t) {
                model.pop_front();
            }
            let truth: u64 = model.iter().map(|&(_, n)| n).sum();
            let (v, lo, hi) = triple(&r);
            assert!(
                lo <= truth as f64 && truth as f64 <= hi,
                "seed {seed}: {truth} outside [{lo}, {hi}]"
            );
            assert!(
                (v - truth as f64).abs() <= eps / 2.0 * truth as f64 + 0.5,
                "seed {seed}: value {v}, truth {truth}"
            );
            // GET at a later time: the window slides on without events.
            if rng.random_bool(0.05) {
                let at = t + rng.random_range(0..window * 2);
                let truth_at: u64 = model
                    .iter()
                    .filter(|&&(s, _)| s + window > at)
                    .map(|&(_, n)| n)
                    .sum();
                let (_, lo, hi) = triple(&ok(&mut ks, &format!("TMCOUNT.GET c AT {at}")));
                assert!(lo <= truth_at as f64 && truth_at as f64 <= hi);
            }
        }
    }
}

#[test]
fn errors_are_redis_style_and_name_the_argument() {
    let mut ks = MemKeyspace::default();
    ks.keys.insert(b"s".to_vec(), Slot::Str(b"x".to_vec()));
    ok(&mut ks, "TMCOUNT.CREATE c WINDOW 1000");
    ok(&mut ks, "TMDISTINCT.CREATE d WINDOW 60000");
    assert_eq!(
        err(&mut ks, "TMCOUNT.ADD c abc"),
        "ERR TMCOUNT.ADD: time must be a non-negative integer of milliseconds since the epoch (at most 2^52), or * for the server's clock (*<ms>: that clock as stamped), got 'abc'"
    );
    assert_eq!(
        err(&mut ks, "TMCOUNT.ADD nokey 1"),
        "ERR TMCOUNT.ADD: no such key 'nokey'; create it with TMCOUNT.CREATE"
    );
    assert!(err(&mut ks, "TMCOUNT.ADD s 1").starts_with("WRONGTYPE TMCOUNT.ADD: key 's'"));
    assert!(err(&mut ks, "TMCOUNT.ADD d 1")
        .starts_with("WRONGTYPE TMCOUNT.ADD: key 'd' holds a TM distinct value"));
    assert_eq!(
        err(&mut ks, "TMCOUNT.ADD"),
        "ERR wrong number of arguments for 'TMCOUNT.ADD' command"
    );
    assert_eq!(
        err(&mut ks, "TMCOUNT.CREATE c WINDOW 5"),
        "ERR TMCOUNT.CREATE: key 'c' already exists"
    );
    assert!(err(&mut ks, "TMCOUNT.CREATE x WINDOW 0").contains("WINDOW must be a positive integer"));
    assert!(err(&mut ks, "TMCOUNT.CREATE x WINDOW 10 FOO").contains("syntax error at 'FOO'"));
    ok(&mut ks, "TMCOUNT.ADD c 500");
    assert!(err(&mut ks, "TMCOUNT.ADD c 499").contains("before the key's latest time 500"));
    assert!(err(&mut ks, "TMCOUNT.GET c AT 10").contains("AT 10 is before"));
    assert!(err(&mut ks, "TMDISTINCT.CREATE x WINDOW 100000000 SLIDING")
        .contains("at most 67108863 ms"));
    assert!(err(&mut ks, "TMDISTINCT.CREATE x WINDOW 1000000 BUCKET 1")
        .contains("WINDOW/BUCKET must be at most 65536"));
    assert!(err(&mut ks, "TMDISTINCT.CREATE x WINDOW 61").contains("multiple of 60"));
    assert!(err(
        &mut ks,
        "TMFILTER.CREATE x CAPACITY 274877906944 FPR 0.0000001"
    )
    .contains("would need"));
    assert!(err(&mut ks, "TMFREQ.CREATE x WINDOW 4097 BUCKET 1").contains("at most 4096"));
    assert!(err(&mut ks, "TM.NOPE x").starts_with("ERR unknown command"));
    // Messages never carry line breaks or control bytes from the input.
    let e = run(
        &mut ks,
        ENV,
        &[b"TMCOUNT.ADD".to_vec(), b"c".to_vec(), b"1\r\n2".to_vec()],
    )
    .reply
    .unwrap_err();
    assert!(!e.to_string().contains('\n') && !e.to_string().contains('\r'));
    assert!(matches!(e, CmdError::BadArg { arg: "time", .. }));
}

#[test]
fn star_is_resolved_before_replication() {
    let mut ks = MemKeyspace::default();
    ok(&mut ks, "TMCOUNT.CREATE c WINDOW 1000");
    let o: Outcome = run(&mut ks, ENV, &argv("TMCOUNT.ADD c * 3"));
    assert_eq!(
        o.replicate,
        Replicate::WithTime {
            pos: 2,
            time: 1_000_000
        }
    );
    let o = run(&mut ks, ENV, &argv("TMCOUNT.ADD c 1000001"));
    assert_eq!(o.replicate, Replicate::Verbatim);
    // The clock behind the key's latest time: * is the latest time, not an error.
    let o = run(&mut ks, Env::at(5), &argv("TMCOUNT.ADD c *"));
    assert_eq!(
        o.replicate,
        Replicate::WithTime {
            pos: 2,
            time: 1_000_001
        }
    );
    assert_eq!(
        run(&mut ks, ENV, &argv("TMCOUNT.GET c")).replicate,
        Replicate::Nothing
    );
    // An expiring filter's ADD replicates as ADDAT with the time.
    ok(
        &mut ks,
        "TMFILTER.CREATE f CAPACITY 100 FPR 0.01 EXPIRE 60000",
    );
    let o = run(&mut ks, ENV, &argv("TMFILTER.ADD f a b"));
    assert_eq!(
        o.replicate,
        Replicate::Rewritten(argv("TMFILTER.ADDAT f 1000000 a b"))
    );
}

#[test]
fn a_stamped_clock_replicates_as_it_stands() {
    // `*<ms>` is what the module's filter makes of a write's `*`: the clock read at arrival.
    // It resolves like `*` (never before the key's latest time) but needs no rewriting.
    let mut ks = MemKeyspace::default();
    ok(&mut ks, "TMCOUNT.CREATE c WINDOW 1000");
    let o = run(&mut ks, ENV, &argv("TMCOUNT.ADD c *5000 2"));
    assert_eq!(o.replicate, Replicate::Verbatim);
    assert_eq!(triple(&o.reply.unwrap()), (2.0, 2.0, 2.0));
    // Behind the latest time: resolved to it, where an explicit 4000 is refused.
    let o = run(&mut ks, ENV, &argv("TMCOUNT.ADD c *4000"));
    assert_eq!(o.replicate, Replicate::Verbatim);
    assert_eq!(triple(&o.reply.unwrap()), (3.0, 3.0, 3.0));
    assert!(err(&mut ks, "TMCOUNT.ADD c 4000").contains("before the key's latest time 5000"));
    // The window ends at the stamped time, not at the environment's clock (1,000,000).
    assert_eq!(triple(&ok(&mut ks, "TMCOUNT.GET c")), (3.0, 3.0, 3.0));
    ok(&mut ks, "TMCOUNT.ADD c *6001");
    assert_eq!(triple(&ok(&mut ks, "TMCOUNT.GET c")), (1.0, 1.0, 1.0));
    // Distinct and frequency writes take it too.
    ok(&mut ks, "TMDISTINCT.CREATE d WINDOW 60000 BUCKET 1000");
    let o = run(&mut ks, ENV, &argv("TMDISTINCT.ADD d *7000 a b"));
    assert_eq!(o.replicate, Replicate::Verbatim);
    // The ring's latest time is its newest bucket's start: the stamp's, not the environment's.
    let info = format!("{:?}", ok(&mut ks, "TM.INFO d"));
    assert!(info.contains("(\"latest_ms\", Integer(7000))"), "{info}");
    ok(&mut ks, "TMFREQ.CREATE f WINDOW 60000 BUCKET 1000");
    let o = run(&mut ks, ENV, &argv("TMFREQ.ADD f *7000 a 2"));
    assert_eq!(o.replicate, Replicate::Verbatim);
    let info = format!("{:?}", ok(&mut ks, "TM.INFO f"));
    assert!(info.contains("(\"latest_ms\", Integer(7000))"), "{info}");
    ok(
        &mut ks,
        "TMFILTER.CREATE e CAPACITY 100 FPR 0.01 EXPIRE 60000",
    );
    let o = run(&mut ks, ENV, &argv("TMFILTER.ADDAT e *7000 x"));
    assert_eq!(o.replicate, Replicate::Verbatim);
    // Added at the stamp (7000), so forgotten by the environment's clock (1,000,000): had the
    // environment's clock been used, x would still be there.
    assert_eq!(
        ok(&mut ks, "TMFILTER.EXISTS e x"),
        Reply::Array(vec![Reply::Integer(0)])
    );
    // Malformed stamps are bad times, named as such.
    for bad in ["*x", "**", "*-1", "*4503599627370497", "*1.5"] {
        let e = err(&mut ks, &format!("TMCOUNT.ADD c {bad}"));
        assert!(e.contains("time must be"), "{bad}: {e}");
    }
}

fn distinct_coverage(shape: &str, p: u8) {
    // Brackets are 95% intervals: count how often they hold over independent trials.
    let trials = 120;
    let mut held = 0;
    for seed in 0..trials {
        let mut rng = Pcg64::seed_from_u64(1_000 + seed);
        let mut ks = MemKeyspace::default();
        ok(
            &mut ks,
            &format!("TMDISTINCT.CREATE d WINDOW 60000 {shape} PRECISION {p}"),
        );
        let mut events: Vec<(u64, u64)> = Vec::new();
        let mut t = 10_000_000u64;
        for _ in 0..60 {
            t += 1_000;
            let items: Vec<u64> = (0..40).map(|_| rng.random_range(0..20_000u64)).collect();
            let list: Vec<String> = items.iter().map(|i| format!("u{i}")).collect();
            ok(&mut ks, &format!("TMDISTINCT.ADD d {t} {}", list.join(" ")));
            events.extend(items.iter().map(|&i| (t, i)));
        }
        let w = 30_000u64;
        let truth: HashSet<u64> = events
            .iter()
            .filter(|&&(s, _)| s + w > t)
            .map(|&(_, i)| i)
            .collect();
        let (_, lo, hi) = triple(&ok(&mut ks, &format!("TMDISTINCT.COUNT d WINDOW {w}")));
        if lo <= truth.len() as f64 && truth.len() as f64 <= hi {
            held += 1;
        }
    }
    // 95% nominal; three binomial standard deviations below it over `trials` trials.
    let floor = 0.95 - 3.0 * (0.95f64 * 0.05 / trials as f64).sqrt();
    assert!(
        held as f64 / trials as f64 >= floor,
        "{shape}: bracket held {held}/{trials}"
    );
}

#[test]
fn distinct_ring_bracket_holds_at_its_confidence() {
    distinct_coverage("BUCKET 1000", 8);
}

#[test]
fn distinct_sliding_bracket_holds_at_its_confidence() {
    distinct_coverage("SLIDING", 8);
}

#[test]
fn distinct_small_counts_are_exact_and_unions_and_topf_agree() {
    let mut ks = MemKeyspace::default();
    ok(&mut ks, "TMDISTINCT.CREATE {a}x WINDOW 60000 BUCKET 1000");
    ok(&mut ks, "TMDISTINCT.CREATE {a}y WINDOW 60000 SLIDING");
    ok(&mut ks, "TMDISTINCT.ADD {a}x 1000 a b c");
    ok(&mut ks, "TMDISTINCT.ADD {a}y 1500 c d");
    assert_eq!(
        triple(&ok(&mut ks, "TMDISTINCT.COUNT {a}x")),
        (3.0, 3.0, 3.0)
    );
    let (v, lo, hi) = triple(&ok(&mut ks, "TMDISTINCT.COUNT {a}x {a}y"));
    assert!(
        lo <= 4.0 && 4.0 <= hi && (v - 4.0).abs() < 0.5,
        "{v} [{lo}, {hi}]"
    );
    // A key named again is read once: one key named many times is that key, exactly; a
    // union with repeats is the union without them.
    let many = vec!["{a}x"; 1_000].join(" ");
    assert_eq!(
        triple(&ok(&mut ks, &format!("TMDISTINCT.COUNT {many}"))),
        (3.0, 3.0, 3.0)
    );
    assert_eq!(
        triple(&ok(&mut ks, "TMDISTINCT.COUNT {a}x {a}y {a}x {a}y")),
        (v, lo, hi)
    );
    // A window that starts after the first bucket.
    ok(&mut ks, "TMDISTINCT.ADD {a}x 70000 z");
    assert_eq!(
        triple(&ok(&mut ks, "TMDISTINCT.COUNT {a}x WINDOW 1000")),
        (1.0, 1.0, 1.0)
    );
    // TOPF: a Redis HYLL whose registers are the window's.
    for i in 0..5_000 {
        ok(&mut ks, &format!("TMDISTINCT.ADD {{a}}x 70000 item{i}"));
    }
    ok(&mut ks, "TMDISTINCT.TOPF {a}x {a}h");
    let Some(Slot::Str(bytes)) = ks.keys.get(b"{a}h".as_slice()) else {
        panic!("no string")
    };
    let (regs, _) = parse_redis(bytes).unwrap();
    let mut direct = Hll::redis();
    for i in 0..5_000 {
        direct.insert(format!("item{i}").as_bytes());
    }
    direct.insert(b"z");
    assert_eq!(
        regs,
        direct.registers(),
        "TOPF registers equal a Redis-mode sketch of the window"
    );
    ok(&mut ks, "TMDISTINCT.CREATE p12 WINDOW 60000 PRECISION 12");
    assert!(err(&mut ks, "TMDISTINCT.TOPF p12 h2").contains("PRECISION 14"));
    assert!(err(&mut ks, "TMDISTINCT.COUNT {a}x p12").contains("cannot be united"));
    assert!(err(&mut ks, "TMDISTINCT.ADD {a}x 1 late").contains("refused"));
}

#[test]
fn freq_never_underestimates_and_names_every_heavy_item() {
    for seed in 0..6u64 {
        let mut rng = Pcg64::seed_from_u64(seed);
        let mut ks = MemKeyspace::default();
        ok(
            &mut ks,
            "TMFREQ.CREATE f WINDOW 10000 BUCKET 1000 EPSILON 0.01 DELTA 0.01 PHI 0.05",
        );
        let mut events: Vec<(u64, String, u64)> = Vec::new();
        let mut t = 0u64;
        for _ in 0..300 {
            t += rng.random_range(0..200u64);
            let mut cmd = format!("TMFREQ.ADD f {t}");
            for _ in 0..10 {
                // A heavy head and a long tail, so the sketch promotes.
                let item = if rng.random_bool(0.3) {
                    format!("h{}", rng.random_range(0..3))
                } else {
                    format!("t{}", rng.random_range(0..5_000))
                };
                let n = rng.random_range(1..4u64);
                cmd += &format!(" {item} {n}");
                events.push((t, item, n));
            }
            ok(&mut ks, &cmd);
        }
        let newest_bucket = t / 1_000;
        for wb in [1u64, 3, 10] {
            let from = (newest_bucket + 1).saturating_sub(wb);
            let mut truth: HashMap<&str, u64> = HashMap::new();
            for (s, i, n) in &events {
                if s / 1_000 >= from {
                    *truth.entry(i.as_str()).or_default() += n;
                }
            }
            let total: u64 = truth.values().sum();
            let probe: Vec<&str> = truth.keys().take(50).copied().chain(["absent"]).collect();
            let r = ok(
                &mut ks,
                &format!("TMFREQ.QUERY f {} WINDOW {}", probe.join(" "), wb * 1_000),
            );
            let Reply::Array(rows) = r else { panic!() };
            for (item, row) in probe.iter().zip(&rows) {
                let (_, _, hi) = triple(row);
                let tr = truth.get(item).copied().unwrap_or(0) as f64;
                assert!(hi >= tr, "seed {seed}: {item} high {hi} below truth {tr}");
            }
            let Reply::Array(top) = ok(&mut ks, &format!("TMFREQ.TOP f 100 WINDOW {}", wb * 1_000))
            else {
                panic!()
            };
            let named: HashSet<Vec<u8>> = top
                .iter()
                .map(|r| match r {
                    Reply::Array(v) => match &v[0] {
                        Reply::Bulk(b) => b.clone(),
                        _ => panic!(),
                    },
                    _ => panic!(),
                })
                .collect();
            for (item, &c) in &truth {
                if c as f64 >= 0.05 * total as f64 {
                    assert!(
                        named.contains(item.as_bytes()),
                        "seed {seed}: heavy {item} ({c} of {total}) not named"
                    );
                }
            }
        }
    }
}

#[test]
fn filters_have_no_false_negatives_and_forget_by_generation() {
    for kind in ["", "RESERVE 4", "STACKED"] {
        let mut ks = MemKeyspace::default();
        ok(
            &mut ks,
            &format!("TMFILTER.CREATE f CAPACITY 1000 FPR 0.01 {kind}"),
        );
        for chunk in (0..4_000).collect::<Vec<u32>>().chunks(100) {
            let items: Vec<String> = chunk.iter().map(|i| format!("k{i}")).collect();
            ok(&mut ks, &format!("TMFILTER.ADD f {}", items.join(" ")));
        }
        let probe: Vec<String> = (0..4_000).step_by(7).map(|i| format!("k{i}")).collect();
        let Reply::Array(found) = ok(&mut ks, &format!("TMFILTER.EXISTS f {}", probe.join(" ")))
        else {
            panic!()
        };
        assert!(
            found.iter().all(|r| *r == Reply::Integer(1)),
            "{kind}: a false negative"
        );
        let absent: Vec<String> = (0..2_000).map(|i| format!("absent{i}")).collect();
        let Reply::Array(fp) = ok(&mut ks, &format!("TMFILTER.EXISTS f {}", absent.join(" ")))
        else {
            panic!()
        };
        let rate = fp.iter().filter(|r| **r == Reply::Integer(1)).count() as f64 / 2_000.0;
        // 4x the forecast: an in-place filter's rate has grown to about 4%, a stack's ≤ 2%.
        assert!(rate < 0.1, "{kind}: false-positive rate {rate}");
        assert_eq!(ok(&mut ks, "TMFILTER.DEL f k7"), Reply::Integer(1));
    }
    // In place without reserve: full at its last doubling, and says so.
    let mut ks = MemKeyspace::default();
    ok(&mut ks, "TMFILTER.CREATE f CAPACITY 10 FPR 0.1");
    let mut full = None;
    for i in 0..10_000 {
        if let Err(e) = run(&mut ks, ENV, &argv(&format!("TMFILTER.ADD f x{i}"))).reply {
            full = Some(e.to_string());
            break;
        }
    }
    assert!(full.expect("fills up").contains("RESERVE bits or STACKED"));
    // EXPIRE counts from an item's latest add: re-adding keeps it.
    let mut ks = MemKeyspace::default();
    ok(
        &mut ks,
        "TMFILTER.CREATE r CAPACITY 100 FPR 0.001 EXPIRE 4000",
    );
    assert_eq!(
        ok(&mut ks, "TMFILTER.ADDAT r 0 x"),
        Reply::Array(vec![Reply::Integer(1)])
    );
    assert_eq!(
        ok(&mut ks, "TMFILTER.ADDAT r 3500 x"),
        Reply::Array(vec![Reply::Integer(0)])
    );
    let late = run(&mut ks, Env::at(7_400), &argv("TMFILTER.EXISTS r x")).reply;
    assert_eq!(
        late,
        Ok(Reply::Array(vec![Reply::Integer(1)])),
        "re-added at 3500, asked at 7400"
    );
    // EXPIRE: an item is found for EXPIRE ms after its add, forgotten by 1.25 × EXPIRE.
    let mut ks = MemKeyspace::default();
    ok(
        &mut ks,
        "TMFILTER.CREATE g CAPACITY 1000 FPR 0.001 EXPIRE 4000",
    );
    for t in (0..20_000u64).step_by(250) {
        ok(&mut ks, &format!("TMFILTER.ADDAT g {t} at{t}"));
        let env = Env::at(t);
        for back in (0..=4_000u64).step_by(250).filter(|b| *b <= t) {
            let r = run(
                &mut ks,
                env,
                &argv(&format!("TMFILTER.EXISTS g at{}", t - back)),
            )
            .reply
            .unwrap();
            assert_eq!(
                r,
                Reply::Array(vec![Reply::Integer(1)]),
                "at{} missing at {t}",
                t - back
            );
        }
        if t >= 5_250 {
            let old = t - 5_250;
            let r = run(&mut ks, env, &argv(&format!("TMFILTER.EXISTS g at{old}")))
                .reply
                .unwrap();
            // Forgotten: only a false positive (rate ~1e-3) could still say 1.
            if r != Reply::Array(vec![Reply::Integer(0)]) {
                eprintln!("false positive for at{old} at {t}");
            }
        }
    }
}

#[test]
fn dump_and_load_round_trip_every_type() {
    let mut ks = MemKeyspace::default();
    for s in [
        "TMCOUNT.CREATE c WINDOW 60000",
        "TMCOUNT.ADD c 1000 5",
        "TMDISTINCT.CREATE r WINDOW 60000",
        "TMDISTINCT.ADD r 1000 a b c",
        "TMDISTINCT.CREATE s WINDOW 60000 SLIDING",
        "TMDISTINCT.ADD s 1000 a b c",
        "TMFREQ.CREATE f WINDOW 60000 BUCKET 1000",
        "TMFREQ.ADD f 1000 a 3 b",
        "TMFILTER.CREATE q CAPACITY 100 FPR 0.01",
        "TMFILTER.ADD q a b",
        "TMFILTER.CREATE e CAPACITY 100 FPR 0.01 STACKED EXPIRE 60000",
        "TMFILTER.ADDAT e 1000 a b",
    ] {
        ok(&mut ks, s);
    }
    for key in ["c", "r", "s", "f", "q", "e"] {
        let Reply::Bulk(bytes) = ok(&mut ks, &format!("TM.DUMP {key}")) else {
            panic!()
        };
        let mut loaded = MemKeyspace::default();
        let load = vec![b"TM.LOAD".to_vec(), b"k".to_vec(), bytes.clone()];
        assert_eq!(run(&mut loaded, ENV, &load).reply, Ok(Reply::Ok));
        let Reply::Bulk(again) = ok(&mut loaded, "TM.DUMP k") else {
            panic!()
        };
        assert_eq!(again, bytes, "{key}: dump → load → dump changed the bytes");
        // One flipped byte anywhere is refused, never loaded as something else.
        for i in (0..bytes.len()).step_by(7) {
            let mut bad = bytes.clone();
            bad[i] ^= 0x5a;
            let load = vec![b"TM.LOAD".to_vec(), b"k2".to_vec(), bad];
            assert!(
                run(&mut loaded, ENV, &load).reply.is_err(),
                "{key}: flipped byte {i} loaded"
            );
        }
    }
    // The CLI's bytes load too: an exponential histogram saved by the library.
    let mut h = tidemark::window::ExpHistogram::ticks(1_000, 0.1).unwrap();
    h.record_value(10, 7).unwrap();
    let load = vec![b"TM.LOAD".to_vec(), b"cli".to_vec(), h.to_bytes()];
    assert_eq!(run(&mut ks, ENV, &load).reply, Ok(Reply::Ok));
    assert_eq!(triple(&ok(&mut ks, "TMCOUNT.GET cli")), (7.0, 7.0, 7.0));
    // A filter as `tidemark filter build --save` writes it.
    let mut f = tidemark::membership::QuotientFilter::with_reserve(1_000, 0.01, 2).unwrap();
    f.insert(b"a").unwrap();
    let load = vec![b"TM.LOAD".to_vec(), b"qf".to_vec(), f.to_bytes()];
    assert_eq!(run(&mut ks, ENV, &load).reply, Ok(Reply::Ok));
    assert_eq!(
        ok(&mut ks, "TMFILTER.EXISTS qf a"),
        Reply::Array(vec![Reply::Integer(1)])
    );
    // A plain HyperLogLog is no key type: refused, by name.
    let load = vec![
        b"TM.LOAD".to_vec(),
        b"h".to_vec(),
        Hll::new(12).unwrap().to_bytes(),
    ];
    let e = run(&mut ks, ENV, &load).reply.unwrap_err().to_string();
    assert!(e.contains("is not a value a TM key holds"), "{e}");
}

#[test]
fn info_names_type_parameters_and_bracket() {
    let mut ks = MemKeyspace::default();
    ok(&mut ks, "TMFREQ.CREATE f WINDOW 60000 BUCKET 1000");
    let Reply::Map(m) = ok(&mut ks, "TM.INFO f") else {
        panic!()
    };
    let keys: Vec<&str> = m.iter().map(|(k, _)| *k).collect();
    for k in [
        "type",
        "window_ms",
        "bucket_ms",
        "epsilon",
        "delta",
        "phi",
        "hash",
        "bracket",
        "serialized_bytes",
    ] {
        assert!(keys.contains(&k), "{k} missing from {keys:?}");
    }
}

#[test]
fn load_refuses_a_ring_larger_than_create_allows_before_allocating_it() {
    // A valid envelope of a 10^6-bucket ring (the core's limit) is beyond the module's 65,536.
    let ring = tidemark::cardinality::RingWindow::new(14, 1, 1_000_000).unwrap();
    let mut ks = MemKeyspace::default();
    let load = vec![b"TM.LOAD".to_vec(), b"k".to_vec(), ring.to_bytes()];
    let e = run(&mut ks, ENV, &load).reply.unwrap_err().to_string();
    assert!(e.contains("65,536 ring buckets"), "{e}");
}

/// Found by an adversarial review: an expiring filter's bound covers its generations' tables
/// together (six small commands held 2.1 GB); an empty expiring filter's `fpr_now` is +0, not
/// -0; TOPF onto a TM key says the destination is not a string.
#[test]
fn filter_generations_are_bounded_together_and_small_replies_read_right() {
    let mut ks = MemKeyspace::default();
    let e = err(
        &mut ks,
        "TMFILTER.CREATE e CAPACITY 100000000 FPR 0.0000001 EXPIRE 4",
    );
    assert!(e.contains("5 generations") && e.contains("limit"), "{e}");
    assert!(!ks.keys.contains_key(b"e".as_slice()), "nothing created");
    ok(
        &mut ks,
        "TMFILTER.CREATE x CAPACITY 1000 FPR 0.01 EXPIRE 60000",
    );
    let Reply::Map(m) = ok(&mut ks, "TM.INFO x") else {
        panic!("a map")
    };
    let fpr_now = m.iter().find(|(k, _)| *k == "fpr_now").map(|(_, v)| v);
    assert!(
        matches!(fpr_now, Some(Reply::Double(v)) if *v == 0.0 && v.is_sign_positive()),
        "{fpr_now:?}"
    );
    ok(&mut ks, "TMDISTINCT.CREATE v WINDOW 60000");
    ok(&mut ks, "TMDISTINCT.ADD v 1000 a");
    let e = err(&mut ks, "TMDISTINCT.TOPF v v");
    assert!(
        e.starts_with("WRONGTYPE") && e.contains("another type than a string"),
        "{e}"
    );
}

/// A frequency key tells items apart by name while it counts exactly: an item longer than it
/// keeps is refused (naming the item and its length), never cut so that two long items merge.
#[test]
fn frequency_items_longer_than_a_key_keeps_are_refused_not_cut() {
    let mut ks = MemKeyspace::default();
    ok(&mut ks, "TMFREQ.CREATE f WINDOW 10000 BUCKET 1000");
    let limit = tidemark_redis::types::Limits::MAX_FREQ_ITEM;
    let long = |tail: u8, len: usize| {
        let mut v = vec![b'x'; len - 1];
        v.push(tail);
        v
    };
    let add = |item: Vec<u8>| {
        vec![
            b"TMFREQ.ADD".to_vec(),
            b"f".to_vec(),
            b"0".to_vec(),
            b"short".to_vec(),
            item,
            b"3".to_vec(),
        ]
    };
    let e = run(&mut ks, ENV, &add(long(b'A', limit + 1)))
        .reply
        .unwrap_err();
    assert!(matches!(e, CmdError::Limit { .. }), "{e}");
    assert!(
        e.to_string()
            .contains(&format!("item 2 is {} bytes", limit + 1)),
        "{e}"
    );
    // Nothing of a refused command is counted, not even its first item.
    let q = |ks: &mut MemKeyspace, item: Vec<u8>| {
        run(ks, ENV, &[b"TMFREQ.QUERY".to_vec(), b"f".to_vec(), item]).reply
    };
    assert_eq!(
        q(&mut ks, b"short".to_vec()).unwrap(),
        Reply::Array(vec![Reply::estimate(0.0, 0.0, 0.0)])
    );
    // At the limit it counts, and an item one byte different is another item.
    run(&mut ks, ENV, &add(long(b'A', limit))).reply.unwrap();
    assert_eq!(
        q(&mut ks, long(b'A', limit)).unwrap(),
        Reply::Array(vec![Reply::estimate(3.0, 3.0, 3.0)])
    );
    assert_eq!(
        q(&mut ks, long(b'B', limit)).unwrap(),
        Reply::Array(vec![Reply::estimate(0.0, 0.0, 0.0)])
    );
    assert!(matches!(
        q(&mut ks, long(b'B', limit + 1)),
        Err(CmdError::Limit { .. })
    ));
}

/// `TMDISTINCT.TOPF` changes only its destination (its source's `WATCH`es stand), and only
/// over a missing key or a string that is a Redis HyperLogLog, as `PFMERGE` writes.
#[test]
fn topf_writes_only_its_destination_and_only_over_a_hyperloglog() {
    let mut ks = MemKeyspace::default();
    ok(&mut ks, "TMDISTINCT.CREATE d WINDOW 60000");
    ok(&mut ks, "TMDISTINCT.ADD d 1000 a b c");
    ks.written.clear();
    ok(&mut ks, "TMDISTINCT.TOPF d h");
    assert_eq!(
        ks.written,
        vec![b"h".to_vec()],
        "only the destination is written"
    );
    // Over its own HyperLogLog again: fine.
    ok(&mut ks, "TMDISTINCT.TOPF d h");
    // Over a plain string that is no HyperLogLog: refused, the string left as it was.
    ks.keys
        .insert(b"s".to_vec(), Slot::Str(b"not a HyperLogLog".to_vec()));
    let e = err(&mut ks, "TMDISTINCT.TOPF d s");
    assert!(
        e.starts_with("WRONGTYPE") && e.contains("not a valid HyperLogLog"),
        "{e}"
    );
    assert!(
        matches!(ks.keys.get(b"s".as_slice()), Some(Slot::Str(v)) if v == b"not a HyperLogLog")
    );
    // A string that starts like one but has a dense header and the wrong length: refused.
    let mut fake = b"HYLL".to_vec();
    fake.resize(100, 0);
    ks.keys.insert(b"s".to_vec(), Slot::Str(fake));
    assert!(err(&mut ks, "TMDISTINCT.TOPF d s").starts_with("WRONGTYPE"));
    // A sparse HyperLogLog (encoding 1) is one.
    let mut sparse = b"HYLL".to_vec();
    sparse.push(1);
    sparse.resize(20, 0);
    ks.keys.insert(b"s".to_vec(), Slot::Str(sparse));
    ok(&mut ks, "TMDISTINCT.TOPF d s");
}

/// Each option once: a repeated one is refused, not silently the last. A value missing after
/// an option is named. In `TMFREQ.ADD` an integer after an item is its count, signed or not.
#[test]
fn options_are_given_once_and_missing_values_are_named() {
    let mut ks = MemKeyspace::default();
    for (cmd, says) in [
        (
            "TMDISTINCT.CREATE d WINDOW 60000 PRECISION 4 PRECISION 5",
            "PRECISION is given twice",
        ),
        (
            "TMCOUNT.CREATE c WINDOW 1000 WINDOW 2000",
            "WINDOW is given twice",
        ),
        (
            "TMFREQ.CREATE f WINDOW 60000 BUCKET 1000 PHI 0.1 PHI 0.2",
            "PHI is given twice",
        ),
        (
            "TMFILTER.CREATE q CAPACITY 10 FPR 0.1 EXPIRE 10 EXPIRE 20",
            "EXPIRE is given twice",
        ),
        (
            "TMDISTINCT.CREATE d WINDOW 60000 BUCKET 1000 BUCKET 2000",
            "BUCKET is given twice",
        ),
    ] {
        let e = err(&mut ks, cmd);
        assert!(e.contains(says), "{cmd}: {e}");
        assert!(ks.keys.is_empty(), "{cmd} created a key");
    }
    ok(&mut ks, "TMDISTINCT.CREATE d WINDOW 60000");
    ok(&mut ks, "TMFREQ.CREATE f WINDOW 60000 BUCKET 1000");
    for (cmd, says) in [
        ("TMDISTINCT.COUNT d WINDOW", "WINDOW needs a value"),
        ("TMDISTINCT.COUNT d AT", "AT needs a value"),
        (
            "TMDISTINCT.COUNT d WINDOW 60000 WINDOW 1000",
            "WINDOW is given twice",
        ),
        ("TMCOUNT.CREATE c WINDOW", "WINDOW needs a value"),
        ("TMFREQ.QUERY f a WINDOW", "WINDOW needs a value"),
        (
            "TMFREQ.QUERY f WINDOW 10000",
            "at least one item before WINDOW",
        ),
        ("TMFREQ.ADD f 1000 a -1", "count must be a positive integer"),
        ("TMFREQ.ADD f 1000 a 0", "count must be a positive integer"),
        ("TMFREQ.ADD f 1000 a +2", "count must be a positive integer"),
    ] {
        let e = err(&mut ks, cmd);
        assert!(e.contains(says), "{cmd}: {e}");
    }
    // Nothing was counted by the refused adds.
    assert_eq!(
        ok(&mut ks, "TMFREQ.QUERY f a"),
        Reply::Array(vec![Reply::estimate(0.0, 0.0, 0.0)])
    );
    // A word that is no integer is the next item.
    assert_eq!(ok(&mut ks, "TMFREQ.ADD f 1000 a 2 b x1"), Reply::Integer(3));
    assert_eq!(
        ok(&mut ks, "TMFREQ.QUERY f a b x1 WINDOW 60000"),
        Reply::Array(vec![
            Reply::estimate(2.0, 2.0, 2.0),
            Reply::estimate(1.0, 1.0, 1.0),
            Reply::estimate(1.0, 1.0, 1.0),
        ])
    );
}

/// A `CREATE` takes the server's defaults for what it is not given, and replicates with
/// every parameter written out: a replica loaded with other defaults builds the same value.
#[test]
fn create_takes_the_servers_defaults_and_replicates_them_written_out() {
    let mut ks = MemKeyspace::default();
    let mut env = ENV;
    env.defaults.epsilon = 0.05;
    env.defaults.precision = 10;
    env.defaults.phi = 0.2;
    let o = run(&mut ks, env, &argv("TMCOUNT.CREATE c WINDOW 1000"));
    assert_eq!(o.reply, Ok(Reply::Ok));
    assert_eq!(
        o.replicate,
        Replicate::Rewritten(argv("TMCOUNT.CREATE c WINDOW 1000 EPSILON 0.05"))
    );
    let o = run(&mut ks, env, &argv("TMDISTINCT.CREATE d WINDOW 60000"));
    assert_eq!(
        o.replicate,
        Replicate::Rewritten(argv(
            "TMDISTINCT.CREATE d WINDOW 60000 BUCKET 1000 PRECISION 10"
        ))
    );
    let o = run(
        &mut ks,
        env,
        &argv("TMDISTINCT.CREATE s WINDOW 60000 SLIDING"),
    );
    assert_eq!(
        o.replicate,
        Replicate::Rewritten(argv(
            "TMDISTINCT.CREATE s WINDOW 60000 SLIDING PRECISION 10"
        ))
    );
    let o = run(
        &mut ks,
        env,
        &argv("TMFREQ.CREATE f WINDOW 60000 BUCKET 1000 DELTA 0.1"),
    );
    assert_eq!(
        o.replicate,
        Replicate::Rewritten(argv(
            "TMFREQ.CREATE f WINDOW 60000 BUCKET 1000 EPSILON 0.05 DELTA 0.1 PHI 0.2"
        ))
    );
    // What replicates builds, on a server with the built-in defaults, the same bytes.
    let mut replica = MemKeyspace::default();
    for key in ["c", "d", "s", "f"] {
        let mut master_dump = ok(&mut ks, &format!("TM.DUMP {key}"));
        let o = match key {
            "c" => "TMCOUNT.CREATE c WINDOW 1000 EPSILON 0.05",
            "d" => "TMDISTINCT.CREATE d WINDOW 60000 BUCKET 1000 PRECISION 10",
            "s" => "TMDISTINCT.CREATE s WINDOW 60000 SLIDING PRECISION 10",
            _ => "TMFREQ.CREATE f WINDOW 60000 BUCKET 1000 EPSILON 0.05 DELTA 0.1 PHI 0.2",
        };
        ok(&mut replica, o);
        let replica_dump = ok(&mut replica, &format!("TM.DUMP {key}"));
        assert_eq!(
            replica_dump,
            std::mem::replace(&mut master_dump, Reply::Null),
            "{key}"
        );
    }
}

/// `TM.INFO` reads what the value's bytes hold, so a replica, a reload, `RESTORE`, `COPY` and
/// `TM.LOAD` answer as the value they copy does, however its buffers grew.
#[test]
fn info_is_the_same_for_a_value_and_its_bytes_loaded_back() {
    let mut ks = MemKeyspace::default();
    for s in [
        "TMFILTER.CREATE q CAPACITY 20 FPR 0.01 RESERVE 4",
        "TMCOUNT.CREATE c WINDOW 600000",
        "TMDISTINCT.CREATE r WINDOW 60000 BUCKET 1000",
        "TMDISTINCT.CREATE s WINDOW 60000 SLIDING",
        "TMFREQ.CREATE f WINDOW 60000 BUCKET 1000",
        "TMFILTER.CREATE e CAPACITY 20 FPR 0.01 EXPIRE 60000",
    ] {
        ok(&mut ks, s);
    }
    // The filter doubles in place several times; the others grow their buffers.
    for i in 0..700u64 {
        ok(&mut ks, &format!("TMFILTER.ADD q k{i}"));
        ok(
            &mut ks,
            &format!("TMCOUNT.ADD c {} {}", 1000 + i * 3, i % 5),
        );
        ok(&mut ks, &format!("TMDISTINCT.ADD r {} u{i}", 1000 + i * 50));
        ok(&mut ks, &format!("TMDISTINCT.ADD s {} u{i}", 1000 + i * 50));
        ok(
            &mut ks,
            &format!("TMFREQ.ADD f {} i{}", 1000 + i * 50, i % 40),
        );
        ok(&mut ks, &format!("TMFILTER.ADDAT e {} k{i}", 1000 + i * 50));
    }
    for key in ["q", "c", "r", "s", "f", "e"] {
        let info = ok(&mut ks, &format!("TM.INFO {key}"));
        let Reply::Bulk(bytes) = ok(&mut ks, &format!("TM.DUMP {key}")) else {
            panic!("a dump is bytes")
        };
        let load = vec![b"TM.LOAD".to_vec(), b"copy".to_vec(), bytes];
        run(&mut ks, ENV, &load).reply.unwrap();
        assert_eq!(ok(&mut ks, "TM.INFO copy"), info, "{key}");
    }
    // The grown filter says what it holds now: more than the 20 it was made for.
    let Reply::Map(m) = ok(&mut ks, "TM.INFO q") else {
        panic!("a map")
    };
    let capacity = m
        .iter()
        .find(|(k, _)| *k == "capacity")
        .map(|(_, v)| v.clone());
    assert!(
        matches!(capacity, Some(Reply::Integer(n)) if n >= 700),
        "{capacity:?}"
    );
}

/// The user's guide quotes every command's usage line as the command list has it (the list
/// is what `COMMAND DOCS` shows), so the two cannot drift apart.
#[test]
fn the_users_guide_quotes_every_commands_usage_line() {
    let guide = include_str!("../../../docs/redis.md");
    for c in COMMANDS {
        let line = format!("{} {}", c.name, c.usage);
        assert!(
            guide.lines().any(|l| l.trim() == line),
            "docs/redis.md lacks the line `{line}`"
        );
    }
}
