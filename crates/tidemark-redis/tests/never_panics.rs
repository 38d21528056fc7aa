//! A panic inside a module takes the Redis server down: random argument vectors and random
//! `TM.LOAD` payloads go through the command layer, which must answer every one with a
//! reply or an error. Estimates must keep `low ≤ value ≤ high` (debug assertions are on).

use proptest::prelude::*;
use tidemark::codec;
use tidemark_redis::command::{run, MemKeyspace, Slot, COMMANDS};
use tidemark_redis::env::Env;
use tidemark_redis::reply::Reply;

/// A keyspace with one key of every shape and a plain string.
fn seeded() -> MemKeyspace {
    let mut ks = MemKeyspace::default();
    ks.keys.insert(b"str".to_vec(), Slot::Str(b"x".to_vec()));
    ks.keys.insert(b"other".to_vec(), Slot::Other);
    let env = Env::at(50_000);
    for s in [
        "TMCOUNT.CREATE c WINDOW 1000 EPSILON 0.5",
        "TMCOUNT.ADD c 40000 3",
        "TMDISTINCT.CREATE r WINDOW 6000 BUCKET 1000 PRECISION 4",
        "TMDISTINCT.ADD r 40000 a b c",
        "TMDISTINCT.CREATE s WINDOW 6000 SLIDING PRECISION 4",
        "TMDISTINCT.ADD s 40000 a b c",
        "TMFREQ.CREATE f WINDOW 4000 BUCKET 1000 EPSILON 0.2 DELTA 0.2 PHI 0.3",
        "TMFREQ.ADD f 40000 a 3 b",
        "TMFILTER.CREATE q CAPACITY 4 FPR 0.2",
        "TMFILTER.ADD q a",
        "TMFILTER.CREATE e CAPACITY 4 FPR 0.2 STACKED EXPIRE 1000",
        "TMFILTER.ADD e a",
        "TMQUANTILE.CREATE p WINDOW 4000 BUCKET 1000 ALPHA 0.05 BINS 16",
        "TMQUANTILE.ADD p 40000 1 2.5 -3 0 1e300 -1e-300",
        "TMQUANTILE.ADD p 38000 1e-9 7",
        "TMQUANTILE.CREATE ps WINDOW 4000 BUCKET 4000 SCHEMA -4",
        "TMQUANTILE.ADD ps 40000 5e-324 -1.7e308 1.7e308",
    ] {
        let argv: Vec<Vec<u8>> = s.split(' ').map(|a| a.as_bytes().to_vec()).collect();
        run(&mut ks, env, &argv).reply.expect(s);
    }
    ks
}

/// Arguments a user might plausibly (or maliciously) send.
fn arg() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "c", "r", "s", "f", "q", "e", "str", "other", "new", "*", "WINDOW", "BUCKET",
            "SLIDING", "PRECISION", "EPSILON", "DELTA", "PHI", "CAPACITY", "FPR", "RESERVE",
            "STACKED", "EXPIRE", "AT", "window", "0", "1", "2", "3", "4", "14", "18", "19", "60",
            "1000", "4000", "6000", "40000", "40001", "99999999", "0.5", "0.01", "1e-9", "1.0",
            "-1", "NaN", "inf", "18446744073709551615", "18446744073709551616",
            "4503599627370496", "281474976710656", "",
            "p", "ps", "ALPHA", "SCHEMA", "BINS", "-4", "8", "9", "-5", "0.99", "1e400", "-inf",
            "-0", "5e-324", "1e308", "-1e308", "16777216", "65536", "1e-10",
        ])
        .prop_map(|s| s.as_bytes().to_vec()),
        1 => any::<u64>().prop_map(|n| n.to_string().into_bytes()),
        1 => prop::collection::vec(any::<u8>(), 0..12),
    ]
}

fn name() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        8 => prop::sample::select(COMMANDS.iter().map(|c| c.name).collect::<Vec<_>>())
            .prop_map(|s| s.to_ascii_lowercase().into_bytes()),
        1 => prop::collection::vec(any::<u8>(), 0..10),
    ]
}

fn check(r: &Reply) {
    match r {
        Reply::Array(v) => {
            if let [Reply::Double(a), Reply::Double(b), Reply::Double(c)] = v.as_slice() {
                assert!(
                    b <= a && a <= c,
                    "estimate out of its bracket: {a} [{b}, {c}]"
                );
            }
            v.iter().for_each(check);
        }
        Reply::Estimate([a, b, c]) => {
            assert!(
                b <= a && a <= c,
                "estimate out of its bracket: {a} [{b}, {c}]"
            );
        }
        Reply::Map(m) => m.iter().for_each(|(_, v)| check(v)),
        _ => {}
    }
}

proptest! {
    // 3,000 cases each by default; PROPTEST_CASES=n for a longer run.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(3_000),
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_argument_vectors_never_panic(
        cmds in prop::collection::vec((name(), prop::collection::vec(arg(), 0..9)), 1..6),
        now in prop_oneof![Just(0u64), Just(50_000u64), any::<u64>()],
    ) {
        let mut ks = seeded();
        for (name, args) in cmds {
            let mut argv = vec![name];
            argv.extend(args);
            let out = run(&mut ks, Env::at(now), &argv);
            match out.reply {
                Ok(r) => check(&r),
                Err(e) => {
                    let msg = e.to_string();
                    prop_assert!(msg.starts_with("ERR ") || msg.starts_with("WRONGTYPE "), "{msg}");
                    prop_assert!(msg.bytes().all(|b| (0x20..0x7f).contains(&b)), "not printable ASCII: {msg}");
                }
            }
        }
    }

    #[test]
    fn mutated_load_payloads_never_panic(
        key in prop::sample::select(vec!["c", "r", "s", "f", "q", "e", "p", "ps"]),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
        reseal in any::<bool>(),
    ) {
        let mut ks = seeded();
        let dump = vec![b"TM.DUMP".to_vec(), key.as_bytes().to_vec()];
        let Ok(Reply::Bulk(mut bytes)) = run(&mut ks, Env::at(0), &dump).reply else {
            panic!("dump failed");
        };
        for (i, v) in flips {
            let i = i.index(bytes.len());
            bytes[i] = v;
        }
        if truncate {
            bytes.truncate(cut.index(bytes.len() + 1));
        }
        // Re-seal the checksum so the mutation reaches the family's own checks.
        if reseal && bytes.len() > 8 && (bytes.starts_with(b"TDMK") || bytes.starts_with(b"TMRB")) {
            let n = bytes.len() - 8;
            let sum = codec::checksum_of(&bytes[..n]);
            bytes[n..].copy_from_slice(&sum.to_le_bytes());
        }
        let load = vec![b"TM.LOAD".to_vec(), b"k".to_vec(), bytes];
        if run(&mut ks, Env::at(0), &load).reply.is_ok() {
            // Whatever loaded must answer every query without panicking.
            for q in ["TM.INFO k", "TM.DUMP k", "TMCOUNT.GET k", "TMDISTINCT.COUNT k",
                      "TMFREQ.TOP k 5", "TMFREQ.QUERY k a", "TMFILTER.EXISTS k a",
                      "TMCOUNT.ADD k 50000", "TMDISTINCT.ADD k 50000 z", "TMFREQ.ADD k 50000 z",
                      "TMFILTER.ADD k z", "TMDISTINCT.TOPF k h",
                      "TMQUANTILE.QUANTILE k 0 0.5 1", "TMQUANTILE.CDF k 1",
                      "TMQUANTILE.ADD k 50000 3 -1e300", "TMQUANTILE.QUANTILE k 0.5 AT 99999999",
                      "TMQUANTILE.CDF k -inf WINDOW 1000"] {
                let argv: Vec<Vec<u8>> = q.split(' ').map(|a| a.as_bytes().to_vec()).collect();
                if let Ok(r) = run(&mut ks, Env::at(50_000), &argv).reply {
                    check(&r);
                }
            }
        }
    }
}
