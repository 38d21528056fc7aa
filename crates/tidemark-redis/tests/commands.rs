//! The command layer against exact models, without Redis: every command's answer is checked
//! against the truth (a `VecDeque` window, a `HashSet`, a `HashMap` of counts) and the
//! structure's guarantee; errors name the argument.

use std::collections::{HashMap, HashSet, VecDeque};

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use tidemark::cardinality::redis::parse_redis;
use tidemark::cardinality::Hll;
use tidemark_redis::command::{run, MemKeyspace, Outcome, Slot, COMMANDS};
use tidemark_redis::env::Env;
use tidemark_redis::error::CmdError;
use tidemark_redis::reply::Replicate;
use tidemark_redis::reply::Reply;

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
    // A quantile key's ADD: the same.
    ok(&mut ks, "TMQUANTILE.CREATE p WINDOW 60000");
    let o = run(&mut ks, ENV, &argv("TMQUANTILE.ADD p * 1.5 2"));
    assert_eq!(o.reply, Ok(Reply::Integer(2)));
    assert_eq!(
        o.replicate,
        Replicate::WithTime {
            pos: 2,
            time: 1_000_000
        }
    );
    let o = run(&mut ks, Env::at(5), &argv("TMQUANTILE.ADD p * 3"));
    assert_eq!(
        o.replicate,
        Replicate::WithTime {
            pos: 2,
            time: 1_000_000
        },
        "the ring's latest time: its newest bucket's start"
    );
    let o = run(&mut ks, ENV, &argv("TMQUANTILE.ADD p 1000001 3"));
    assert_eq!(o.replicate, Replicate::Verbatim);
    for read in ["TMQUANTILE.QUANTILE p 0.5 AT *", "TMQUANTILE.CDF p 2"] {
        assert_eq!(run(&mut ks, ENV, &argv(read)).replicate, Replicate::Nothing);
    }
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
    ok(&mut ks, "TMQUANTILE.CREATE p WINDOW 60000 BUCKET 1000");
    let o = run(&mut ks, ENV, &argv("TMQUANTILE.ADD p *7000 0.25"));
    assert_eq!(o.replicate, Replicate::Verbatim);
    assert_eq!(info_field(&mut ks, "p", "latest_ms"), Reply::Integer(7000));
    // Behind the latest time: resolved to it (into the newest bucket), not refused.
    ok(&mut ks, "TMQUANTILE.ADD p *10 0.5");
    assert_eq!(
        ok(&mut ks, "TMQUANTILE.QUANTILE p 1 WINDOW 1000"),
        Reply::Array(vec![Reply::estimate(0.5, 0.5, 0.5)])
    );
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
        "TMQUANTILE.CREATE p WINDOW 60000 BUCKET 1000",
        "TMQUANTILE.ADD p 1000 1 2.5 -3 0",
        "TMQUANTILE.ADD p 9000 1e6",
        "TMQUANTILE.CREATE ps WINDOW 60000 SCHEMA 3 BINS 64",
        "TMQUANTILE.ADD ps 1000 1 2 3",
    ] {
        ok(&mut ks, s);
    }
    for key in ["c", "r", "s", "f", "q", "e", "p", "ps"] {
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
    let limit = tidemark_redis::limits::Limits::MAX_FREQ_ITEM;
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
    env.defaults.alpha = 0.02;
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
    let o = run(&mut ks, env, &argv("TMQUANTILE.CREATE p WINDOW 60000"));
    assert_eq!(
        o.replicate,
        Replicate::Rewritten(argv(
            "TMQUANTILE.CREATE p WINDOW 60000 BUCKET 1000 ALPHA 0.02 BINS 4096"
        ))
    );
    let o = run(
        &mut ks,
        env,
        &argv("TMQUANTILE.CREATE ps WINDOW 60000 BUCKET 2000 SCHEMA -2 BINS 100"),
    );
    assert_eq!(
        o.replicate,
        Replicate::Rewritten(argv(
            "TMQUANTILE.CREATE ps WINDOW 60000 BUCKET 2000 SCHEMA -2 BINS 100"
        ))
    );
    // What replicates builds, on a server with the built-in defaults, the same bytes.
    let mut replica = MemKeyspace::default();
    for key in ["c", "d", "s", "f", "p", "ps"] {
        let mut master_dump = ok(&mut ks, &format!("TM.DUMP {key}"));
        let o = match key {
            "c" => "TMCOUNT.CREATE c WINDOW 1000 EPSILON 0.05",
            "d" => "TMDISTINCT.CREATE d WINDOW 60000 BUCKET 1000 PRECISION 10",
            "s" => "TMDISTINCT.CREATE s WINDOW 60000 SLIDING PRECISION 10",
            "p" => "TMQUANTILE.CREATE p WINDOW 60000 BUCKET 1000 ALPHA 0.02 BINS 4096",
            "ps" => "TMQUANTILE.CREATE ps WINDOW 60000 BUCKET 2000 SCHEMA -2 BINS 100",
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
        "TMQUANTILE.CREATE p WINDOW 60000 BUCKET 1000 BINS 32",
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
        ok(
            &mut ks,
            &format!(
                "TMQUANTILE.ADD p {} {} -{i}",
                1000 + i * 50,
                1.5f64.powi(i as i32 % 90)
            ),
        );
        if i % 10 == 0 {
            // Reads fill the ring's window cache, which the bytes do not hold.
            ok(&mut ks, "TMQUANTILE.QUANTILE p 0.5");
        }
    }
    for key in ["q", "c", "r", "s", "f", "e", "p"] {
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

/// A field of `TM.INFO key`.
fn info_field(ks: &mut MemKeyspace, key: &str, field: &str) -> Reply {
    let Reply::Map(m) = ok(ks, &format!("TM.INFO {key}")) else {
        panic!("TM.INFO is a map")
    };
    m.into_iter()
        .find(|(k, _)| *k == field)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("TM.INFO {key} has no {field}"))
}

/// The exact model of a quantile key: every value with its bucket; a window is the values
/// whose bucket is among the `w` ending with the bucket of its end.
struct QuantileModel {
    bucket_ms: u64,
    buckets: u64,
    newest: Option<u64>,
    events: Vec<(u64, f64)>,
}

impl QuantileModel {
    /// Whether the ring takes a value at `t`: its bucket is still held.
    fn takes(&self, t: u64) -> bool {
        self.newest
            .is_none_or(|nb| t / self.bucket_ms + self.buckets > nb)
    }

    fn add(&mut self, t: u64, values: &[f64]) {
        let b = t / self.bucket_ms;
        self.newest = Some(self.newest.map_or(b, |nb| nb.max(b)));
        self.events.extend(values.iter().map(|&v| (b, v)));
    }

    /// The window's values, sorted.
    fn window(&self, window_ms: u64, at: u64) -> Vec<f64> {
        let (w, end) = (window_ms / self.bucket_ms, at / self.bucket_ms);
        let mut v: Vec<f64> = self
            .events
            .iter()
            .filter(|&&(b, _)| b <= end && b + w > end)
            .map(|&(_, v)| v)
            .collect();
        v.sort_by(f64::total_cmp);
        v
    }
}

/// A value of a heavy-tailed stream: latencies over nine decades, some negative, some zero,
/// some repeated.
fn stream_value(rng: &mut Pcg64) -> f64 {
    match rng.random_range(0..20) {
        0 => 0.0,
        1 | 2 => -(rng.random_range(-3.0f64..6.0)).exp(),
        3 | 4 => rng.random_range(1..20u32) as f64,
        _ => rng.random_range(-4.0f64..16.0).exp(),
    }
}

#[test]
fn quantiles_are_within_alpha_and_brackets_hold_the_nearest_rank_value() {
    use tidemark::quantile::nearest_rank;
    for (seed, shape) in [
        "WINDOW 60000",
        "WINDOW 10000 BUCKET 500 ALPHA 0.05",
        "WINDOW 30000 BUCKET 1000 SCHEMA 2",
        "WINDOW 8000 BUCKET 1000 ALPHA 0.001 BINS 16384",
        "WINDOW 5000 BUCKET 5000 SCHEMA 7",
    ]
    .into_iter()
    .enumerate()
    {
        let seed = seed as u64;
        let mut rng = Pcg64::seed_from_u64(300 + seed);
        let mut ks = MemKeyspace::default();
        ok(&mut ks, &format!("TMQUANTILE.CREATE k {shape}"));
        let Reply::Double(alpha) = info_field(&mut ks, "k", "alpha") else {
            panic!("alpha is a double")
        };
        let (Reply::Integer(bucket_ms), Reply::Integer(buckets)) = (
            info_field(&mut ks, "k", "bucket_ms"),
            info_field(&mut ks, "k", "buckets"),
        ) else {
            panic!("integers")
        };
        let (bucket_ms, buckets) = (bucket_ms as u64, buckets as u64);
        let window_ms = bucket_ms * buckets;
        let mut model = QuantileModel {
            bucket_ms,
            buckets,
            newest: None,
            events: Vec::new(),
        };
        let mut t = 1_700_000_000_000u64;
        let (mut checked, mut refused) = (0u32, 0u32);
        for step in 0..1_500 {
            t += rng.random_range(0..bucket_ms / 2 + 1);
            // Now and then a late value: into its own bucket while the ring holds it.
            let at = if rng.random_bool(0.1) {
                t.saturating_sub(rng.random_range(0..window_ms * 3 / 2))
            } else {
                t
            };
            let values: Vec<f64> = (0..rng.random_range(1..6))
                .map(|_| stream_value(&mut rng))
                .collect();
            let list: Vec<String> = values.iter().map(|v| v.to_string()).collect();
            let cmd = format!("TMQUANTILE.ADD k {at} {}", list.join(" "));
            let got = run(&mut ks, ENV, &argv(&cmd)).reply;
            if model.takes(at) {
                assert_eq!(got, Ok(Reply::Integer(values.len() as i64)), "{cmd}");
                model.add(at, &values);
            } else {
                let e = got.expect_err(&cmd).to_string();
                assert!(e.contains("older than the ring"), "{e}");
                refused += 1;
            }
            if step % 7 != 0 {
                continue;
            }
            let latest = model.newest.unwrap_or(0) * bucket_ms;
            let w = bucket_ms * rng.random_range(1..=buckets);
            let (end, at_arg) = if rng.random_bool(0.3) {
                let end = latest + rng.random_range(0..window_ms);
                (end, format!(" AT {end}"))
            } else {
                (latest, String::new())
            };
            let truth = model.window(w, end);
            let qs = [0.0, 0.01, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0, rng.random()];
            let list: Vec<String> = qs.iter().map(|q| q.to_string()).collect();
            let r = ok(
                &mut ks,
                &format!(
                    "TMQUANTILE.QUANTILE k {} WINDOW {w}{at_arg}",
                    list.join(" ")
                ),
            );
            let Reply::Array(rows) = r else {
                panic!("an array: {r:?}")
            };
            assert_eq!(rows.len(), qs.len());
            for (&q, row) in qs.iter().zip(&rows) {
                if truth.is_empty() {
                    assert_eq!(*row, Reply::Null, "an empty window has no quantile");
                    continue;
                }
                let x = truth[nearest_rank(q, truth.len() as u64) as usize - 1];
                let (v, lo, hi) = triple(row);
                assert!(
                    lo <= x && x <= hi,
                    "{shape}, q {q}: {x} outside [{lo}, {hi}]"
                );
                assert!(
                    (v - x).abs() <= alpha * x.abs() * (1.0 + 1e-12),
                    "{shape}, q {q}: estimate {v}, truth {x}, alpha {alpha}"
                );
                checked += 1;
            }
            // The CDF at a value of the window and at one beside it.
            let probe = if truth.is_empty() || rng.random_bool(0.3) {
                stream_value(&mut rng)
            } else {
                truth[rng.random_range(0..truth.len())]
            };
            let r = ok(
                &mut ks,
                &format!("TMQUANTILE.CDF k {probe} WINDOW {w}{at_arg}"),
            );
            if truth.is_empty() {
                assert_eq!(r, Reply::Null);
            } else {
                let frac =
                    truth.iter().filter(|&&v| v <= probe).count() as f64 / truth.len() as f64;
                let (v, lo, hi) = triple(&r);
                assert!(
                    lo <= frac && frac <= hi && lo <= v && v <= hi,
                    "{shape}: CDF({probe}) = {frac} outside [{lo}, {hi}]"
                );
            }
        }
        assert!(
            checked > 1_000 && refused > 0,
            "{shape}: {checked} checked, {refused} refused"
        );
        // The count in TM.INFO is the whole ring's window ending at the latest time.
        let latest = model.newest.unwrap_or(0) * bucket_ms;
        assert_eq!(
            info_field(&mut ks, "k", "count"),
            Reply::Integer(model.window(window_ms, latest).len() as i64)
        );
    }
}

/// Under a small `BINS` a store collapses its lowest bins: the answers in the collapsed bin
/// lose the α bound, never the bracket, and `TM.INFO` says how many buckets collapsed.
#[test]
fn quantile_brackets_hold_when_bins_collapse() {
    use tidemark::quantile::nearest_rank;
    let mut rng = Pcg64::seed_from_u64(77);
    let mut ks = MemKeyspace::default();
    ok(
        &mut ks,
        "TMQUANTILE.CREATE k WINDOW 10000 BUCKET 1000 ALPHA 0.02 BINS 16",
    );
    let mut values: Vec<(u64, f64)> = Vec::new();
    let mut wide = 0;
    for i in 0..400u64 {
        let t = 1_000_000 + i * 50;
        let v = rng.random_range(-7.0f64..9.0).exp();
        ok(&mut ks, &format!("TMQUANTILE.ADD k {t} {v}"));
        values.push((t / 1000, v));
        let end = t / 1000;
        let mut truth: Vec<f64> = values
            .iter()
            .filter(|&&(b, _)| b + 10 > end)
            .map(|&(_, v)| v)
            .collect();
        truth.sort_by(f64::total_cmp);
        for q in [0.01, 0.1, 0.5, 0.9] {
            let Reply::Array(rows) = ok(&mut ks, &format!("TMQUANTILE.QUANTILE k {q}")) else {
                panic!()
            };
            let x = truth[nearest_rank(q, truth.len() as u64) as usize - 1];
            let (_, lo, hi) = triple(&rows[0]);
            assert!(lo <= x && x <= hi, "q {q}: {x} outside [{lo}, {hi}]");
            if hi / lo > 1.02 / 0.98 * 1.000_001 {
                wide += 1;
            }
        }
    }
    assert!(wide > 0, "no answer fell in a collapsed bin");
    let Reply::Integer(c) = info_field(&mut ks, "k", "collapsed_buckets") else {
        panic!()
    };
    assert!(c > 0, "collapsed_buckets {c}");
}

/// The ring keeps its window merged and slides it by merges and exact subtractions; a key
/// loaded from its bytes has no such cache. Both answer every query the same, to the bit, so
/// a replica, a reload or a `RESTORE` answers as the key it copies.
#[test]
fn quantile_answers_do_not_depend_on_the_window_cache() {
    for (seed, shape) in [
        "WINDOW 20000 BUCKET 1000",
        "WINDOW 20000 BUCKET 1000 ALPHA 0.05 BINS 24",
        "WINDOW 6000 BUCKET 200 SCHEMA 0 BINS 8",
    ]
    .into_iter()
    .enumerate()
    {
        let mut rng = Pcg64::seed_from_u64(900 + seed as u64);
        let mut ks = MemKeyspace::default();
        ok(&mut ks, &format!("TMQUANTILE.CREATE k {shape}"));
        let Reply::Integer(bucket_ms) = info_field(&mut ks, "k", "bucket_ms") else {
            panic!()
        };
        let bucket_ms = bucket_ms as u64;
        let mut t = 5_000_000u64;
        let mut answered = 0;
        for step in 0..2_000 {
            t += rng.random_range(0..bucket_ms);
            let at = if rng.random_bool(0.15) {
                t.saturating_sub(rng.random_range(0..bucket_ms * 25))
            } else {
                t
            };
            let values: Vec<String> = (0..rng.random_range(1..4))
                .map(|_| stream_value(&mut rng).to_string())
                .collect();
            let _ = run(
                &mut ks,
                ENV,
                &argv(&format!("TMQUANTILE.ADD k {at} {}", values.join(" "))),
            );
            // Queries of a few windows, so the cache slides, is rebuilt, and takes late values.
            let w = bucket_ms * [1, 5, 10, 30][rng.random_range(0..4)];
            let w = w.min(if shape.starts_with("WINDOW 6000") {
                6000
            } else {
                20000
            });
            let tail = match rng.random_range(0..4) {
                0 => format!(" WINDOW {w} AT {}", t + rng.random_range(0..bucket_ms * 3)),
                1 => String::new(),
                _ => format!(" WINDOW {w}"),
            };
            let queries = [
                format!("TMQUANTILE.QUANTILE {{}} 0 0.05 0.5 0.95 1{tail}"),
                format!("TMQUANTILE.CDF {{}} {}{tail}", stream_value(&mut rng)),
            ];
            let live: Vec<_> = queries
                .iter()
                .map(|q| run(&mut ks, ENV, &argv(&q.replace("{}", "k"))).reply)
                .collect();
            answered += live
                .iter()
                .filter(|r| matches!(r, Ok(x) if *x != Reply::Null))
                .count();
            if step % 3 != 0 {
                continue;
            }
            let Reply::Bulk(bytes) = ok(&mut ks, "TM.DUMP k") else {
                panic!()
            };
            let mut fresh = MemKeyspace::default();
            let load = vec![b"TM.LOAD".to_vec(), b"k".to_vec(), bytes];
            run(&mut fresh, ENV, &load).reply.unwrap();
            for (q, want) in queries.iter().zip(&live) {
                let got = run(&mut fresh, ENV, &argv(&q.replace("{}", "k"))).reply;
                assert_eq!(&got, want, "{shape}, step {step}: {q}");
            }
        }
        assert!(answered > 3_000, "{shape}: {answered} answers");
        let collapsed = info_field(&mut ks, "k", "collapsed_buckets");
        if shape.contains("BINS") {
            assert_ne!(collapsed, Reply::Integer(0), "{shape}: no bucket collapsed");
        }
    }
}

#[test]
fn quantile_errors_name_the_argument_and_refused_adds_add_nothing() {
    let mut ks = MemKeyspace::default();
    ks.keys.insert(b"s".to_vec(), Slot::Str(b"x".to_vec()));
    for (cmd, says) in [
        ("TMQUANTILE.CREATE q BUCKET 1000", "WINDOW ms is required"),
        ("TMQUANTILE.CREATE q WINDOW 61", "multiple of 60"),
        (
            "TMQUANTILE.CREATE q WINDOW 1000 BUCKET 300",
            "WINDOW (1000 ms) must be a multiple of BUCKET (300 ms)",
        ),
        (
            "TMQUANTILE.CREATE q WINDOW 60000 ALPHA 0",
            "ALPHA must be a relative accuracy in [1e-9, 1), got '0'",
        ),
        ("TMQUANTILE.CREATE q WINDOW 60000 ALPHA 1", "got '1'"),
        ("TMQUANTILE.CREATE q WINDOW 60000 ALPHA nan", "got 'nan'"),
        (
            "TMQUANTILE.CREATE q WINDOW 60000 SCHEMA 9",
            "SCHEMA must be an integer in -4..=8",
        ),
        ("TMQUANTILE.CREATE q WINDOW 60000 SCHEMA -5", "got '-5'"),
        ("TMQUANTILE.CREATE q WINDOW 60000 SCHEMA 1.5", "got '1.5'"),
        (
            "TMQUANTILE.CREATE q WINDOW 60000 ALPHA 0.01 SCHEMA 3",
            "give one of ALPHA and SCHEMA",
        ),
        ("TMQUANTILE.CREATE q WINDOW 60000 BINS 0", "BINS must be"),
        (
            "TMQUANTILE.CREATE q WINDOW 60000 BINS 16777217",
            "BINS must be",
        ),
        (
            "TMQUANTILE.CREATE q WINDOW 60000 BINS",
            "BINS needs a value",
        ),
        (
            "TMQUANTILE.CREATE q WINDOW 60000 ALPHA",
            "ALPHA needs a value",
        ),
        (
            "TMQUANTILE.CREATE q WINDOW 60000 SCHEMA",
            "SCHEMA needs a value",
        ),
        (
            "TMQUANTILE.CREATE q WINDOW 60000 ALPHA 0.1 ALPHA 0.2",
            "ALPHA is given twice",
        ),
        (
            "TMQUANTILE.CREATE q WINDOW 60000 SLIDING",
            "syntax error at 'SLIDING'",
        ),
        (
            "TMQUANTILE.CREATE q WINDOW 100000 BUCKET 1",
            "WINDOW/BUCKET must be at most 65536",
        ),
        (
            "TMQUANTILE.CREATE q WINDOW 20000 BUCKET 1",
            "above the 1073741824 byte limit",
        ),
        (
            "TMQUANTILE.CREATE q WINDOW 60000 BINS 16777216",
            "above the 1073741824 byte limit",
        ),
    ] {
        let e = err(&mut ks, cmd);
        assert!(e.contains(says), "{cmd}: {e}");
        assert!(
            !ks.keys.contains_key(b"q".as_slice()),
            "{cmd} created a key"
        );
    }
    // The bounds are the module's limits: refused as such (INFO tidemark counts them).
    let e = run(
        &mut ks,
        ENV,
        &argv("TMQUANTILE.CREATE q WINDOW 100000 BUCKET 1"),
    )
    .reply
    .unwrap_err();
    assert!(e.is_limit(), "{e}");
    // A fine small BINS with many buckets is within the bound.
    ok(
        &mut ks,
        "TMQUANTILE.CREATE big WINDOW 65536 BUCKET 1 BINS 512",
    );

    ok(&mut ks, "TMQUANTILE.CREATE q WINDOW 10000 BUCKET 1000");
    ok(&mut ks, "TMCOUNT.CREATE c WINDOW 1000");
    assert_eq!(
        err(&mut ks, "TMQUANTILE.CREATE q WINDOW 60000"),
        "ERR TMQUANTILE.CREATE: key 'q' already exists"
    );
    for (cmd, says) in [
        (
            "TMQUANTILE.ADD q 1000 1 abc 3",
            "ERR TMQUANTILE.ADD: value 2 must be a finite number (NaN, inf and numbers beyond +-1.8e308 are refused), got 'abc'",
        ),
        ("TMQUANTILE.ADD q 1000 NaN", "value 1 must be a finite number"),
        ("TMQUANTILE.ADD q 1000 1 2 inf", "value 3 must be a finite number"),
        ("TMQUANTILE.ADD q 1000 -inf", "got '-inf'"),
        ("TMQUANTILE.ADD q 1000 5 1e400", "value 2 must be a finite number"),
        ("TMQUANTILE.ADD q 1000 -1e309", "got '-1e309'"),
        ("TMQUANTILE.ADD q 1000 0x10", "got '0x10'"),
        ("TMQUANTILE.ADD q abc 1", "time must be a non-negative integer"),
        ("TMQUANTILE.ADD q 1000", "wrong number of arguments"),
        (
            "TMQUANTILE.ADD nokey 1000 1",
            "no such key 'nokey'; create it with TMQUANTILE.CREATE",
        ),
        ("TMQUANTILE.ADD s 1000 1", "WRONGTYPE TMQUANTILE.ADD: key 's'"),
        ("TMQUANTILE.ADD c 1000 1", "holds a TM count value"),
        ("TMCOUNT.GET q", "WRONGTYPE TMCOUNT.GET: key 'q' holds a TM quantile value"),
        (
            "TMQUANTILE.QUANTILE q 0.5 1.5",
            "ERR TMQUANTILE.QUANTILE: q 2 must be a number in [0, 1], got '1.5'",
        ),
        ("TMQUANTILE.QUANTILE q -0.1", "q 1 must be a number in [0, 1]"),
        ("TMQUANTILE.QUANTILE q nan", "got 'nan'"),
        ("TMQUANTILE.QUANTILE q WINDOW 1000", "give at least one q"),
        ("TMQUANTILE.QUANTILE q", "wrong number of arguments"),
        ("TMQUANTILE.QUANTILE q 0.5 WINDOW", "WINDOW needs a value"),
        ("TMQUANTILE.QUANTILE q 0.5 AT", "AT needs a value"),
        ("TMQUANTILE.QUANTILE q 0.5 WINDOW 1000 WINDOW 1000", "WINDOW is given twice"),
        ("TMQUANTILE.QUANTILE q 0.5 WINDOW 1500", "multiple of the bucket (1000 ms)"),
        ("TMQUANTILE.QUANTILE q 0.5 WINDOW 20000", "up to the key's window (10000 ms)"),
        ("TMQUANTILE.QUANTILE q 0.5 EXTRA", "q 2 must be a number"),
        ("TMQUANTILE.QUANTILE q 0.5 AT 1 EXTRA", "syntax error at 'EXTRA'"),
        ("TMQUANTILE.CDF q NaN", "value must be a number"),
        ("TMQUANTILE.CDF q x", "got 'x'"),
        ("TMQUANTILE.CDF q", "wrong number of arguments"),
        ("TMQUANTILE.CDF q 1 WINDOW 0", "WINDOW must be a positive integer"),
    ] {
        let e = err(&mut ks, cmd);
        assert!(e.contains(says), "{cmd}: {e}");
    }
    // Nothing of a refused ADD was added, not even the values before the bad one.
    assert_eq!(
        ok(&mut ks, "TMQUANTILE.QUANTILE q 0.5"),
        Reply::Array(vec![Reply::Null])
    );
    assert_eq!(ok(&mut ks, "TMQUANTILE.CDF q 1"), Reply::Null);
    assert_eq!(info_field(&mut ks, "q", "latest_ms"), Reply::Null);
    // Numbers as Redis reads them: signs, exponents, a leading dot; -0 and 1e-400 are zero.
    assert_eq!(
        ok(&mut ks, "TMQUANTILE.ADD q 5000 +2 -3.5e2 .5 -0 1e-400 7"),
        Reply::Integer(6)
    );
    assert_eq!(
        ok(&mut ks, "TMQUANTILE.QUANTILE q 0 1"),
        Reply::Array(vec![
            Reply::estimate(-350.0, -350.0, -350.0),
            Reply::estimate(7.0, 7.0, 7.0)
        ])
    );
    let (v, lo, hi) = triple(&ok(&mut ks, "TMQUANTILE.CDF q 0"));
    assert!(lo <= 3.0 / 6.0 && 3.0 / 6.0 <= hi && lo <= v && v <= hi);
    assert_eq!(
        ok(&mut ks, "TMQUANTILE.CDF q inf"),
        Reply::estimate(1.0, 1.0, 1.0)
    );
    assert_eq!(
        ok(&mut ks, "TMQUANTILE.CDF q -inf"),
        Reply::estimate(0.0, 0.0, 0.0)
    );
    // Times: a late value goes to its own bucket; one older than the ring is refused.
    ok(&mut ks, "TMQUANTILE.ADD q 14000 1");
    ok(&mut ks, "TMQUANTILE.ADD q 5000 1");
    let e = err(&mut ks, "TMQUANTILE.ADD q 4999 1");
    assert!(
        e.contains("time 4999 is older than the ring, which starts at 5000"),
        "{e}"
    );
    let e = err(&mut ks, "TMQUANTILE.QUANTILE q 0.5 AT 13999");
    assert!(
        e.contains("AT 13999 is before the key's latest time 14000"),
        "{e}"
    );
    // The window of the last bucket holds only the 1 at 14000; ten buckets on, nothing.
    assert_eq!(
        ok(&mut ks, "TMQUANTILE.QUANTILE q 0.5 WINDOW 1000"),
        Reply::Array(vec![Reply::estimate(1.0, 1.0, 1.0)])
    );
    assert_eq!(
        ok(&mut ks, "TMQUANTILE.QUANTILE q 0.5 0.9 AT 24000"),
        Reply::Array(vec![Reply::Null, Reply::Null])
    );
    // A bare DDSketch (no window) is not a value a key holds.
    let mut s = tidemark::quantile::DdSketch::new(0.01).unwrap();
    s.insert(1.0).unwrap();
    let load = vec![b"TM.LOAD".to_vec(), b"bare".to_vec(), s.to_bytes()];
    let e = run(&mut ks, ENV, &load).reply.unwrap_err().to_string();
    assert!(e.contains("is not a value a TM key holds"), "{e}");
}

/// A ring the core takes but a `CREATE` would refuse (more buckets, more bytes) is refused by
/// `TM.LOAD` too, naming the bound; a ring the CLI's library writes loads and answers.
#[test]
fn quantile_load_checks_the_bounds_a_create_checks() {
    use tidemark::quantile::{DdSketch, QuantileRing};
    let mut ks = MemKeyspace::default();
    for (ring, says) in [
        (
            QuantileRing::new(0.01, 1, 1_000_000).unwrap(),
            "beyond what TMQUANTILE.CREATE allows",
        ),
        (
            QuantileRing::of(
                DdSketch::new(0.01)
                    .unwrap()
                    .with_bin_limit(1 << 24)
                    .unwrap(),
                1000,
                60,
            )
            .unwrap(),
            "beyond what TMQUANTILE.CREATE allows",
        ),
        (
            QuantileRing::new(0.01, 1 << 40, 1_000).unwrap(),
            "window longer than 2^48 ms",
        ),
    ] {
        let load = vec![b"TM.LOAD".to_vec(), b"k".to_vec(), ring.to_bytes()];
        let e = run(&mut ks, ENV, &load).reply.unwrap_err();
        assert!(e.to_string().contains(says), "{e}");
    }
    let mut ring = QuantileRing::new(0.02, 1000, 60).unwrap();
    for i in 1..=100u32 {
        ring.insert(i as f64, 7_000).unwrap();
    }
    let load = vec![b"TM.LOAD".to_vec(), b"k".to_vec(), ring.to_bytes()];
    assert_eq!(run(&mut ks, ENV, &load).reply, Ok(Reply::Ok));
    let Reply::Array(rows) = ok(&mut ks, "TMQUANTILE.QUANTILE k 0.5") else {
        panic!()
    };
    let (v, lo, hi) = triple(&rows[0]);
    assert!((v - 50.0).abs() <= 0.02 * 50.0 && lo <= 50.0 && 50.0 <= hi);
    assert_eq!(info_field(&mut ks, "k", "latest_ms"), Reply::Integer(7_000));
    let Reply::Bulk(bytes) = ok(&mut ks, "TM.DUMP k") else {
        panic!()
    };
    assert_eq!(bytes, ring.to_bytes(), "a key dumps as the ring's envelope");
}

/// The frequency example of docs/redis.md, as printed there: three items added (an integer
/// after an item is its count), and the two largest named with exact brackets.
#[test]
fn the_users_guide_frequency_example_answers_as_printed() {
    let guide = include_str!("../../../docs/redis.md");
    for line in [
        "> TMFREQ.CREATE ports WINDOW 300000 BUCKET 10000",
        "> TMFREQ.ADD ports * 22 5 443 80 8080 1",
        "> TMFREQ.TOP ports 2",
    ] {
        assert!(
            guide.contains(line),
            "docs/redis.md no longer shows {line:?}"
        );
    }
    let mut ks = MemKeyspace::default();
    ok(&mut ks, "TMFREQ.CREATE ports WINDOW 300000 BUCKET 10000");
    assert_eq!(
        ok(&mut ks, "TMFREQ.ADD ports * 22 5 443 80 8080 1"),
        Reply::Integer(3)
    );
    let number = |r: &Reply| match r {
        Reply::Double(f) => *f,
        Reply::Integer(i) => *i as f64,
        Reply::Bulk(b) => String::from_utf8_lossy(b).parse().unwrap(),
        other => panic!("not a number: {other:?}"),
    };
    let Reply::Array(top) = ok(&mut ks, "TMFREQ.TOP ports 2") else {
        panic!("TOP answers an array")
    };
    let rows: Vec<(Vec<u8>, [f64; 3])> = top
        .iter()
        .map(|row| match row {
            Reply::Array(v) => match &v[..] {
                [Reply::Bulk(item), e, lo, hi] => {
                    (item.clone(), [number(e), number(lo), number(hi)])
                }
                other => panic!("a row of item, estimate, low, high: {other:?}"),
            },
            other => panic!("a row: {other:?}"),
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            (b"443".to_vec(), [80.0, 80.0, 80.0]),
            (b"22".to_vec(), [5.0, 5.0, 5.0]),
        ]
    );
}
