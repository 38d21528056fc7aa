//! The module inside real `redis-server`s: every command answers as the command layer does
//! (itself tested against exact models), values survive DEBUG RELOAD, restarts from RDB and
//! AOF, DUMP/RESTORE and replication byte for byte, a three-master cluster holds 10,000 keys,
//! and thousands of corrupted TM.LOAD/RESTORE payloads leave the server answering.

mod common;

use common::{crc64, error_text, loud, q, redis_available, same, wait_until, Server, TempDir};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use redis::Value;
use tidemark_redis::command::{run, MemKeyspace};
use tidemark_redis::env::Env;

/// Every command, with explicit times so the server and the model see the same input.
const SCRIPT: &[&str] = &[
    "TMCOUNT.CREATE c WINDOW 10000 EPSILON 0.1",
    "TMCOUNT.ADD c 1000",
    "TMCOUNT.ADD c 1500 40",
    "TMCOUNT.ADD c 9000 7",
    "TMCOUNT.ADD c 12000 3",
    "TMCOUNT.GET c",
    "TMCOUNT.GET c AT 30000",
    "TMCOUNT.ADD c 11000",
    "TMCOUNT.ADD c abc",
    "TMCOUNT.ADD missing 1",
    "TMCOUNT.CREATE c WINDOW 5",
    "TMDISTINCT.CREATE {v}r WINDOW 60000 BUCKET 1000",
    "TMDISTINCT.CREATE {v}s WINDOW 60000 SLIDING PRECISION 12",
    "TMDISTINCT.ADD {v}r 1000 a b c d",
    "TMDISTINCT.ADD {v}r 2000 d e f",
    "TMDISTINCT.ADD {v}s 1500 a z",
    "TMDISTINCT.COUNT {v}r",
    "TMDISTINCT.COUNT {v}r WINDOW 1000",
    "TMDISTINCT.COUNT {v}r AT 61500",
    "TMDISTINCT.COUNT {v}r {v}s",
    "TMDISTINCT.COUNT {v}s WINDOW 100 AT 2000",
    "TMDISTINCT.TOPF {v}r {v}hll",
    "TMDISTINCT.TOPF {v}s {v}hll2",
    "TMDISTINCT.COUNT c",
    "TMFREQ.CREATE f WINDOW 10000 BUCKET 1000 EPSILON 0.01 DELTA 0.01 PHI 0.1",
    "TMFREQ.ADD f 1000 a 5 b c 2",
    "TMFREQ.ADD f 3000 a 1 d 9",
    "TMFREQ.QUERY f a b c d e",
    "TMFREQ.QUERY f a d WINDOW 1000",
    "TMFREQ.TOP f 2",
    "TMFREQ.TOP f 10 WINDOW 2000",
    "TMFREQ.ADD f 100000 x",
    "TMFREQ.ADD f 1 y",
    "TMFILTER.CREATE q CAPACITY 1000 FPR 0.01",
    "TMFILTER.ADD q a b c",
    "TMFILTER.ADD q a x",
    "TMFILTER.EXISTS q a b c x y",
    "TMFILTER.DEL q b",
    "TMFILTER.EXISTS q b",
    "TMFILTER.CREATE st CAPACITY 10 FPR 0.01 STACKED",
    "TMFILTER.CREATE ex CAPACITY 100 FPR 0.01 RESERVE 2 EXPIRE 60000",
    "TMFILTER.ADDAT ex 1000 a b",
    "TMFILTER.ADDAT st 1000 a b",
    "TMFILTER.CREATE bad CAPACITY 0 FPR 0.01",
    "TMQUANTILE.CREATE p WINDOW 10000 BUCKET 1000 ALPHA 0.02",
    "TMQUANTILE.CREATE ps WINDOW 60000 SCHEMA 5 BINS 128",
    "TMQUANTILE.ADD p 1000 12.5 8.25 230 15 -4 0",
    "TMQUANTILE.ADD p 3000 1e-3 4e9 7",
    "TMQUANTILE.ADD ps 1500 1 2 3 5 8 13",
    "TMQUANTILE.ADD p 1000 nan",
    "TMQUANTILE.ADD p 1000 1 1e400",
    "TMQUANTILE.ADD p 1000",
    "TMQUANTILE.QUANTILE p 0 0.25 0.5 0.99 1",
    "TMQUANTILE.QUANTILE p 0.5 WINDOW 1000",
    "TMQUANTILE.QUANTILE p 0.5 0.9 AT 30000",
    "TMQUANTILE.QUANTILE p 1.5",
    "TMQUANTILE.QUANTILE p",
    "TMQUANTILE.CDF p 15",
    "TMQUANTILE.CDF p inf WINDOW 2000",
    "TMQUANTILE.CDF p 15 AT 30000",
    "TMQUANTILE.CDF ps 4",
    "TMQUANTILE.ADD p 100000 1",
    "TMQUANTILE.ADD p 1 1",
    "TMQUANTILE.CREATE bad WINDOW 61",
    "TMQUANTILE.QUANTILE c 0.5",
    "TM.INFO c",
    "TM.INFO {v}r",
    "TM.INFO {v}s",
    "TM.INFO f",
    "TM.INFO q",
    "TM.INFO ex",
    "TM.INFO p",
    "TM.INFO ps",
    "TM.DUMP c",
    "TM.DUMP p",
    "TM.DUMP f",
    "TM.DUMP ex",
    "TMCOUNT.GET",
    "TMCOUNT.GET c EXTRA",
];

#[test]
fn live_every_command_answers_as_the_command_layer() {
    if !redis_available("live_every_command_answers_as_the_command_layer") {
        return;
    }
    let dir = TempDir::new("cmds");
    let server = Server::start(&dir.0, &[]);
    let mut model = MemKeyspace::default();
    for resp3 in [false, true] {
        let mut c = server.conn();
        q(&mut c, "FLUSHALL").unwrap();
        model = MemKeyspace::default();
        if resp3 {
            let _: Value = redis::cmd("HELLO").arg(3).query(&mut c).unwrap();
        }
        for s in SCRIPT {
            let argv: Vec<Vec<u8>> = s
                .split_whitespace()
                .map(|a| a.as_bytes().to_vec())
                .collect();
            let want = run(&mut model, Env::at(0), &argv).reply;
            let got = q(&mut c, s);
            match (&want, &got) {
                (Ok(w), Ok(g)) => {
                    assert!(same(w, g), "resp3 {resp3}: {s}: server {g:?}, model {w:?}")
                }
                (Err(w), Err(g)) => assert_eq!(error_text(g), w.to_string(), "resp3 {resp3}: {s}"),
                _ => panic!("resp3 {resp3}: {s}: server {got:?}, model {want:?}"),
            }
        }
        // TOPF wrote Redis HyperLogLogs that Redis's own commands read.
        let n: i64 = redis::cmd("PFCOUNT").arg("{v}hll").query(&mut c).unwrap();
        assert_eq!(n, 6);
        let _: Value = redis::cmd("PFADD")
            .arg("{v}hll")
            .arg("g")
            .query(&mut c)
            .unwrap();
        let _: Value = redis::cmd("PFMERGE")
            .arg("{v}m")
            .arg("{v}hll")
            .arg("{v}hll2")
            .query(&mut c)
            .unwrap();
        let n: i64 = redis::cmd("PFCOUNT").arg("{v}m").query(&mut c).unwrap();
        assert_eq!(n, 7, "a..g ({{v}}s has precision 12: no TOPF)");
    }
    // Reads leave a WATCH alone; writes (from anyone) invalidate it.
    let mut w = server.conn();
    let mut other = server.conn();
    q(&mut w, "WATCH c").unwrap();
    q(&mut w, "TMCOUNT.GET c").unwrap();
    q(&mut other, "TMCOUNT.GET c AT 99999").unwrap();
    q(&mut other, "TM.INFO c").unwrap();
    q(&mut w, "MULTI").unwrap();
    q(&mut w, "PING").unwrap();
    assert_ne!(
        q(&mut w, "EXEC").unwrap(),
        Value::Nil,
        "a read aborted a WATCH"
    );
    q(&mut w, "WATCH c").unwrap();
    q(&mut other, "TMCOUNT.ADD c 50000").unwrap();
    q(&mut w, "MULTI").unwrap();
    q(&mut w, "PING").unwrap();
    assert_eq!(
        q(&mut w, "EXEC").unwrap(),
        Value::Nil,
        "a write left a WATCH standing"
    );
    // Writes notify keyspace events of class d (module), named after the command.
    let _: Value = redis::cmd("CONFIG")
        .arg("SET")
        .arg("notify-keyspace-events")
        .arg("Ed")
        .query(&mut w)
        .unwrap();
    let mut sub = server.conn();
    let mut pubsub = sub.as_pubsub();
    pubsub.subscribe("__keyevent@0__:tmcount.add").unwrap();
    pubsub
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    q(&mut other, "TMCOUNT.ADD c 60000").unwrap();
    let msg = pubsub.get_message().unwrap();
    assert_eq!(msg.get_payload::<String>().unwrap(), "c");
    drop(pubsub);
    // A module key is not a string, and a string key is not a module key.
    let mut c = server.conn();
    let e = q(&mut c, "GET c").unwrap_err();
    assert_eq!(e.code(), Some("WRONGTYPE"));
    // The keys are declared: COMMAND GETKEYS finds them, options excluded.
    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg("GETKEYS")
        .arg("TMDISTINCT.COUNT")
        .arg("a")
        .arg("b")
        .arg("WINDOW")
        .arg("60000")
        .query(&mut c)
        .unwrap();
    assert_eq!(keys, ["a", "b"]);
    drop(model);
}

/// Keys of every type with some history; `*` times included.
fn fill(c: &mut redis::Connection) -> Vec<&'static str> {
    for s in [
        "TMCOUNT.CREATE c WINDOW 60000",
        "TMCOUNT.ADD c * 5",
        "TMCOUNT.ADD c *",
        "TMDISTINCT.CREATE r WINDOW 3600000",
        "TMDISTINCT.CREATE s WINDOW 3600000 SLIDING",
        "TMFREQ.CREATE f WINDOW 60000 BUCKET 1000",
        "TMFILTER.CREATE q CAPACITY 1000 FPR 0.01",
        "TMFILTER.CREATE st CAPACITY 100 FPR 0.01 STACKED",
        "TMFILTER.CREATE e CAPACITY 1000 FPR 0.01 EXPIRE 60000",
        // Quiet longer than their windows: a slot still holds a bucket the ring no longer
        // reaches (such keys made an RDB file the module could not load).
        "TMDISTINCT.CREATE rq WINDOW 1200 BUCKET 20",
        "TMDISTINCT.ADD rq 1000000 a",
        "TMDISTINCT.ADD rq 1005000 b",
        "TMFREQ.CREATE fq WINDOW 1000 BUCKET 10",
        "TMFREQ.ADD fq 1000000 x 1",
        "TMFREQ.ADD fq 1005000 y 1",
        "TMQUANTILE.CREATE p WINDOW 3600000",
        "TMQUANTILE.CREATE pq WINDOW 1200 BUCKET 20 SCHEMA 3 BINS 64",
        "TMQUANTILE.ADD pq 1000000 1 2",
        "TMQUANTILE.ADD pq 1005000 3",
    ] {
        q(c, s).unwrap();
    }
    for i in 0..300 {
        q(c, &format!("TMDISTINCT.ADD r * u{i} v{}", i % 17)).unwrap();
        q(c, &format!("TMDISTINCT.ADD s * u{i}")).unwrap();
        q(c, &format!("TMFREQ.ADD f * i{} {}", i % 13, i % 3 + 1)).unwrap();
        q(c, &format!("TMFILTER.ADD q k{i}")).unwrap();
        q(c, &format!("TMFILTER.ADD st k{i}")).unwrap();
        q(c, &format!("TMFILTER.ADD e k{i}")).unwrap();
        q(
            c,
            &format!("TMQUANTILE.ADD p * {i} {} -{i}.5", 1.0 / (i + 1) as f64),
        )
        .unwrap();
        if i % 50 == 0 {
            // Fills the ring's window cache, which its bytes do not hold.
            q(c, "TMQUANTILE.QUANTILE p 0.5").unwrap();
        }
    }
    vec!["c", "r", "s", "f", "q", "st", "e", "rq", "fq", "p", "pq"]
}

fn dumps(c: &mut redis::Connection, keys: &[&str]) -> Vec<Vec<u8>> {
    keys.iter()
        .map(|k| redis::cmd("TM.DUMP").arg(*k).query::<Vec<u8>>(c).unwrap())
        .collect()
}

#[test]
fn live_values_survive_reload_restarts_restore_and_copy() {
    if !redis_available("live_values_survive_reload_restarts_restore_and_copy") {
        return;
    }
    let dir = TempDir::new("persist");
    let server = Server::start(&dir.0, &["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = server.conn();
    let keys = fill(&mut c);
    let before = dumps(&mut c, &keys);

    q(&mut c, "DEBUG RELOAD").unwrap();
    assert_eq!(dumps(&mut c, &keys), before, "DEBUG RELOAD");

    // Keys named many times are opened once each: the same answer as each named once.
    let once: Value = q(&mut c, "TMDISTINCT.COUNT r rq").unwrap();
    let mut many = redis::cmd("TMDISTINCT.COUNT");
    for _ in 0..1_000 {
        many.arg("r").arg("rq");
    }
    assert_eq!(many.query::<Value>(&mut c).unwrap(), once);

    for k in &keys {
        let usage: i64 = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(*k)
            .query(&mut c)
            .unwrap();
        assert!(usage > 0, "{k}: MEMORY USAGE {usage}");
        // DUMP/RESTORE and COPY of every type.
        let payload: Vec<u8> = redis::cmd("DUMP").arg(*k).query(&mut c).unwrap();
        let _: Value = redis::cmd("RESTORE")
            .arg(format!("{k}.r"))
            .arg(0)
            .arg(payload)
            .query(&mut c)
            .unwrap();
        let _: Value = redis::cmd("COPY")
            .arg(*k)
            .arg(format!("{k}.c"))
            .query(&mut c)
            .unwrap();
    }
    // A payload of a newer encoding version is refused (and the server goes on).
    let payload: Vec<u8> = redis::cmd("DUMP").arg("c").query(&mut c).unwrap();
    // [type 7 (module, v2)] [0x81 + module id, 8 bytes big-endian: name · 2^10 + encver] …
    assert_eq!(&payload[..2], &[7, 0x81]);
    let id = u64::from_be_bytes(payload[2..10].try_into().unwrap());
    assert_eq!(id & 0x3ff, 1, "encoding version 1");
    let mut newer = payload.clone();
    newer[2..10].copy_from_slice(&((id & !0x3ff) | 2).to_be_bytes());
    let n = newer.len() - 8;
    let crc = crc64(&newer[..n]);
    newer[n..].copy_from_slice(&crc.to_le_bytes());
    let e = redis::cmd("RESTORE")
        .arg("newer")
        .arg(0)
        .arg(newer)
        .query::<Value>(&mut c)
        .unwrap_err();
    assert!(e.to_string().contains("Bad data format"), "{e}");
    assert_eq!(q(&mut c, "EXISTS newer").unwrap(), Value::Int(0));
    let restored: Vec<String> = keys.iter().map(|k| format!("{k}.r")).collect();
    let copied: Vec<String> = keys.iter().map(|k| format!("{k}.c")).collect();
    let r: Vec<&str> = restored.iter().map(String::as_str).collect();
    let cp: Vec<&str> = copied.iter().map(String::as_str).collect();
    assert_eq!(dumps(&mut c, &r), before, "DUMP/RESTORE");
    assert_eq!(dumps(&mut c, &cp), before, "COPY");

    // Restart from the AOF as written (commands, with * stamped).
    drop(c);
    server.stop(false);
    let server = Server::start(&dir.0, &["--appendonly", "yes"]);
    let mut c = server.conn();
    assert_eq!(dumps(&mut c, &keys), before, "restart from the AOF log");

    // Rewrite the AOF (TM.LOAD per key), restart from it.
    q(&mut c, "BGREWRITEAOF").unwrap();
    wait_until(30, "the AOF rewrite", || {
        let info: String = redis::cmd("INFO").arg("persistence").query(&mut c).unwrap();
        info.contains("aof_rewrite_in_progress:0")
            && info.contains("aof_rewrite_scheduled:0")
            && info.contains("aof_last_bgrewrite_status:ok")
    });
    drop(c);
    server.stop(false);
    let server = Server::start(&dir.0, &["--appendonly", "yes"]);
    let mut c = server.conn();
    assert_eq!(
        dumps(&mut c, &keys),
        before,
        "restart from the rewritten AOF"
    );

    // Restart from an RDB snapshot, AOF off.
    q(&mut c, "SAVE").unwrap();
    drop(c);
    server.stop(false);
    let _ = std::fs::remove_dir_all(dir.0.join("appendonlydir"));
    let server = Server::start(&dir.0, &["--appendonly", "no"]);
    let mut c = server.conn();
    assert_eq!(dumps(&mut c, &keys), before, "restart from the RDB");
}

/// The words of every command in the slow log (all of them, at a threshold of 0 µs), oldest
/// first.
fn slowlog_commands(c: &mut redis::Connection) -> Vec<Vec<String>> {
    let Value::Array(entries) = q(c, "SLOWLOG GET 1000").unwrap() else {
        panic!("SLOWLOG GET is an array");
    };
    let mut out: Vec<Vec<String>> = entries
        .iter()
        .filter_map(|e| match e {
            Value::Array(fields) => match fields.get(3) {
                Some(Value::Array(words)) => Some(
                    words
                        .iter()
                        .map(|w| match w {
                            Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                            other => format!("{other:?}"),
                        })
                        .collect(),
                ),
                _ => None,
            },
            _ => None,
        })
        .collect();
    out.reverse();
    out
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[test]
fn live_star_is_stamped_as_it_arrives() {
    if !redis_available("live_star_is_stamped_as_it_arrives") {
        return;
    }
    let dir = TempDir::new("stamp");
    let server = Server::start(&dir.0, &[]);
    let mut c = server.conn();
    for s in [
        "TMCOUNT.CREATE c WINDOW 60000",
        "TMCOUNT.CREATE * WINDOW 60000",
        "TMDISTINCT.CREATE d WINDOW 60000 BUCKET 1000",
        "TMFREQ.CREATE f WINDOW 60000 BUCKET 1000",
        "TMFILTER.CREATE e CAPACITY 100 FPR 0.01 EXPIRE 60000",
        "TMFILTER.CREATE g CAPACITY 100 FPR 0.01",
        "TMQUANTILE.CREATE p WINDOW 60000",
        "CONFIG SET slowlog-log-slower-than 0",
        "SLOWLOG RESET",
    ] {
        q(&mut c, s).unwrap();
    }
    let before = now_ms();
    for s in [
        "tmcount.add c * 2",
        "TMCOUNT.ADD * *",
        "TMDISTINCT.ADD d * a b",
        "TmFreq.Add f * a 3",
        "TMFILTER.ADDAT e * x",
        "TMFILTER.ADD g *",
        "TMQUANTILE.ADD p * 2.5",
        "TMQUANTILE.QUANTILE p 0.5 AT *",
        "TMCOUNT.GET c AT *",
        "MULTI",
        "TMCOUNT.ADD c *",
        "EXEC",
    ] {
        q(&mut c, s).unwrap();
    }
    let after = now_ms();
    let log = slowlog_commands(&mut c);
    let stamped = |w: &str| {
        w.strip_prefix('*')
            .and_then(|ms| ms.parse::<u64>().ok())
            .is_some_and(|ms| (before..=after).contains(&ms))
    };
    let find = |name: &str| -> Vec<&Vec<String>> {
        log.iter()
            .filter(|w| w[0].eq_ignore_ascii_case(name))
            .collect()
    };
    // Every timed write's `*` is the clock at arrival, whatever the name's case; inside MULTI
    // too (the EXEC'd command is logged with its stamped arguments).
    let adds = find("TMCOUNT.ADD");
    assert_eq!(adds.len(), 3, "{log:?}");
    assert!(adds.iter().all(|w| stamped(&w[2])), "{adds:?}");
    // A key named `*` is a key: only the time is stamped.
    assert!(adds.iter().any(|w| w[1] == "*"), "{adds:?}");
    for name in [
        "TMDISTINCT.ADD",
        "TMFREQ.ADD",
        "TMFILTER.ADDAT",
        "TMQUANTILE.ADD",
    ] {
        let w = find(name);
        assert!(w.len() == 1 && stamped(&w[0][2]), "{name}: {w:?}");
    }
    // An item `*` and a read's `AT *` are left as sent.
    assert_eq!(find("TMFILTER.ADD")[0][2], "*");
    assert_eq!(find("TMCOUNT.GET")[0][3], "*");
    assert_eq!(find("TMQUANTILE.QUANTILE")[0][4], "*");
    // The stamped counts are in the window: 2 + 1 at c, 1 at `*`.
    let Value::Array(e) = q(&mut c, "TMCOUNT.GET c").unwrap() else {
        panic!("an estimate is an array");
    };
    assert_eq!(e[0], Value::BulkString(b"3".to_vec()));
}

#[test]
fn live_replica_answers_the_same() {
    if !redis_available("live_replica_answers_the_same") {
        return;
    }
    let dir_m = TempDir::new("master");
    let dir_r = TempDir::new("replica");
    let master = Server::start(&dir_m.0, &[]);
    let replica = Server::start(&dir_r.0, &[]);
    let mut m = master.conn();
    let mut r = replica.conn();
    // Some state before the replica attaches (full sync, through RDB), some after (the
    // command stream, with * stamped).
    let keys = fill(&mut m);
    let _: Value = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(master.port)
        .query(&mut r)
        .unwrap();
    wait_until(30, "the replica link", || {
        let info: String = redis::cmd("INFO").arg("replication").query(&mut r).unwrap();
        info.contains("master_link_status:up")
    });
    for i in 0..200 {
        q(&mut m, &format!("TMCOUNT.ADD c * {i}")).unwrap();
        q(&mut m, &format!("TMDISTINCT.ADD r * late{i}")).unwrap();
        q(&mut m, &format!("TMFREQ.ADD f * late{}", i % 5)).unwrap();
        q(&mut m, &format!("TMFILTER.ADD e late{i}")).unwrap();
        q(&mut m, &format!("TMQUANTILE.ADD p * {i}.25 1e{}", i % 30)).unwrap();
    }
    q(&mut m, "TMFILTER.DEL q k1").unwrap();
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(10_000).query(&mut m).unwrap();
    assert_eq!(acked, 1);
    assert_eq!(dumps(&mut r, &keys), dumps(&mut m, &keys), "replica bytes");
    for s in [
        "TMCOUNT.GET c",
        "TMDISTINCT.COUNT r",
        "TMDISTINCT.COUNT s WINDOW 60000",
        "TMFREQ.TOP f 3",
        "TMFILTER.EXISTS e late3 k1 nope",
        "TMQUANTILE.QUANTILE p 0 0.5 0.99 1",
        "TMQUANTILE.CDF p 100 WINDOW 60000",
    ] {
        assert_eq!(q(&mut r, s).unwrap(), q(&mut m, s).unwrap(), "{s}");
    }
    // A replica refuses writes, as for any Redis write command.
    let e = q(&mut r, "TMCOUNT.ADD c *").unwrap_err();
    assert_eq!(e.code(), Some("READONLY"));
}

#[test]
fn live_cluster_spreads_and_reads_back_10000_keys() {
    if !redis_available("live_cluster_spreads_and_reads_back_10000_keys") {
        return;
    }
    let dir = TempDir::new("cluster");
    let nodes = common::start_cluster(&dir);
    let urls: Vec<String> = nodes.iter().map(Server::url).collect();
    let client = redis::cluster::ClusterClient::new(urls).unwrap();
    let mut c = client.get_connection().unwrap();
    for i in 0..10_000u64 {
        let _: Value = redis::cmd("TMCOUNT.CREATE")
            .arg(format!("key:{i}"))
            .arg("WINDOW")
            .arg(60_000)
            .query(&mut c)
            .unwrap();
        let _: Value = redis::cmd("TMCOUNT.ADD")
            .arg(format!("key:{i}"))
            .arg(1_000)
            .arg(i % 7 + 1)
            .query(&mut c)
            .unwrap();
    }
    for i in 0..10_000u64 {
        let v: Vec<f64> = redis::cmd("TMCOUNT.GET")
            .arg(format!("key:{i}"))
            .query(&mut c)
            .unwrap();
        let n = (i % 7 + 1) as f64;
        assert_eq!(v, [n, n, n], "key:{i}");
    }
    let mut total = 0;
    for n in &nodes {
        let size: i64 = redis::cmd("DBSIZE").query(&mut n.conn()).unwrap();
        assert!(
            size > 2_000,
            "node {} holds {size} keys: not spread",
            n.port
        );
        total += size;
    }
    assert_eq!(total, 10_000);
    // Multi-key commands need one slot: hash tags make it so; otherwise Redis refuses.
    for k in ["{u}a", "{u}b", "x1", "x2"] {
        let _: Value = redis::cmd("TMDISTINCT.CREATE")
            .arg(k)
            .arg("WINDOW")
            .arg(60_000)
            .query(&mut c)
            .unwrap();
        let _: Value = redis::cmd("TMDISTINCT.ADD")
            .arg(k)
            .arg(1_000)
            .arg(k)
            .query(&mut c)
            .unwrap();
    }
    let v: Vec<f64> = redis::cmd("TMDISTINCT.COUNT")
        .arg("{u}a")
        .arg("{u}b")
        .query(&mut c)
        .unwrap();
    assert!(v[1] <= 2.0 && 2.0 <= v[2], "union {v:?}");
    // x1 and x2 hash to different slots (checked by the server itself).
    let mut direct = nodes[0].conn();
    let e = q(&mut direct, "TMDISTINCT.COUNT x1 x2").unwrap_err();
    assert!(matches!(e.code(), Some("CROSSSLOT") | Some("MOVED")), "{e}");
    drop(nodes);
}

#[test]
fn live_mutated_load_and_restore_payloads_leave_the_server_answering() {
    if !redis_available("live_mutated_load_and_restore_payloads_leave_the_server_answering") {
        return;
    }
    let dir = TempDir::new("mutate");
    let mut server = Server::start(&dir.0, &[]);
    let mut c = server.conn();
    let keys = fill(&mut c);
    // The CRC is Redis's: an intact payload's last eight bytes are the CRC of the rest.
    let intact: Vec<u8> = redis::cmd("DUMP").arg("c").query(&mut c).unwrap();
    let n = intact.len() - 8;
    assert_eq!(crc64(&intact[..n]).to_le_bytes().as_slice(), &intact[n..]);
    let mut rng = Pcg64::seed_from_u64(14);
    let (mut sent, mut accepted) = (0u32, 0u32);
    for round in 0..3_000u32 {
        let k = keys[round as usize % keys.len()];
        let restore = round % 2 == 1;
        let result = if !restore {
            let mut bytes: Vec<u8> = redis::cmd("TM.DUMP").arg(k).query(&mut c).unwrap();
            for _ in 0..rng.random_range(1..4) {
                let i = rng.random_range(0..bytes.len());
                bytes[i] = rng.random();
            }
            if rng.random_bool(0.2) {
                bytes.truncate(rng.random_range(0..bytes.len()));
            }
            // Re-seal half of them so the mutation reaches the decoders behind the checksum.
            if rng.random_bool(0.5) && bytes.len() > 8 {
                let n = bytes.len() - 8;
                let sum = tidemark::codec::checksum_of(&bytes[..n]);
                bytes[n..].copy_from_slice(&sum.to_le_bytes());
            }
            let _ = std::fs::write("/tmp/tm-last-load.bin", &bytes);
            redis::cmd("TM.LOAD")
                .arg("fuzz")
                .arg(bytes)
                .query::<Value>(&mut c)
        } else {
            // A DUMP payload: the value, two bytes of RDB version, the CRC-64. Mutate inside
            // the module's own bytes (or cut the value short), then fix the CRC so Redis
            // hands it to the module.
            let payload: Vec<u8> = redis::cmd("DUMP")
                .arg(k)
                .query(&mut c)
                .unwrap_or_else(|e| panic!("DUMP {k} after round {round}: {e}"));
            let ours: Vec<u8> = redis::cmd("TM.DUMP").arg(k).query(&mut c).unwrap();
            let body_len = payload.len() - 10;
            let start = payload
                .windows(4)
                .position(|w| w == &ours[..4])
                .unwrap_or(0);
            let mut body = payload[..body_len].to_vec();
            let version = payload[body_len..body_len + 2].to_vec();
            if rng.random_bool(0.15) {
                body.truncate(rng.random_range(1..body.len()));
            } else {
                for _ in 0..rng.random_range(1..4) {
                    let i = rng.random_range(start..(start + ours.len()).min(body.len()));
                    body[i] = rng.random();
                }
            }
            body.extend_from_slice(&version);
            let crc = crc64(&body);
            body.extend_from_slice(&crc.to_le_bytes());
            redis::cmd("RESTORE")
                .arg("fuzz")
                .arg(0)
                .arg(body)
                .arg("REPLACE")
                .query::<Value>(&mut c)
        };
        sent += 1;
        if let Err(e) = &result {
            if e.code().is_none() {
                panic!("round {round}: {e}");
            }
        }
        if result.is_ok() {
            accepted += 1;
            // What was accepted must answer.
            let _ = q(&mut c, "TM.INFO fuzz");
            let _ = q(&mut c, "TM.DUMP fuzz");
        }
        if round % 100 == 0 {
            assert_eq!(
                q(&mut c, "PING").unwrap(),
                Value::SimpleString("PONG".into()),
                "round {round}"
            );
        }
    }
    assert!(server.alive(), "the server died");
    assert_eq!(
        q(&mut c, "PING").unwrap(),
        Value::SimpleString("PONG".into())
    );
    loud(&format!("live mutation test: {sent} mutated payloads, {accepted} accepted as valid values, server up"));
}

/// `TM.INFO` answers the same on a master, its replica, and after `DEBUG RELOAD`,
/// `RESTORE`, `COPY` and `TM.LOAD`, for a filter that grew in place and values whose buffers
/// grew; `DEBUG DIGEST-VALUE` tells different values apart; `TMDISTINCT.TOPF` leaves its
/// source's `WATCH` standing and refuses a destination that is no HyperLogLog.
#[test]
fn live_info_digests_and_topf_answer_as_redis_users_expect() {
    if !redis_available("live_info_digests_and_topf_answer_as_redis_users_expect") {
        return;
    }
    let (dm, dr) = (TempDir::new("info-m"), TempDir::new("info-r"));
    let master = Server::start(&dm.0, &[]);
    let replica = Server::start(&dr.0, &[]);
    let (mut m, mut r) = (master.conn(), replica.conn());
    let _: Value = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(master.port)
        .query(&mut r)
        .unwrap();
    wait_until(30, "the replica link", || {
        let info: String = redis::cmd("INFO").arg("replication").query(&mut r).unwrap();
        info.contains("master_link_status:up")
    });
    for s in [
        "TMFILTER.CREATE q CAPACITY 20 FPR 0.01 RESERVE 4",
        "TMCOUNT.CREATE c WINDOW 600000",
        "TMDISTINCT.CREATE d WINDOW 60000 BUCKET 1000",
        "TMQUANTILE.CREATE p WINDOW 60000 BUCKET 1000 BINS 32",
    ] {
        q(&mut m, s).unwrap();
    }
    for i in 0..700 {
        q(
            &mut m,
            &format!(
                "TMQUANTILE.ADD p {} {} -{i}",
                1000 + i * 50,
                1.5f64.powi(i % 90)
            ),
        )
        .unwrap();
        if i % 10 == 0 {
            q(&mut m, "TMQUANTILE.QUANTILE p 0.5").unwrap();
        }
        q(&mut m, &format!("TMFILTER.ADD q k{i}")).unwrap();
        q(&mut m, &format!("TMCOUNT.ADD c {} {}", 1000 + i * 3, i % 5)).unwrap();
        q(&mut m, &format!("TMDISTINCT.ADD d {} u{i}", 1000 + i * 50)).unwrap();
    }
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(10_000).query(&mut m).unwrap();
    assert_eq!(acked, 1);
    let info = |c: &mut redis::Connection, k: &str| q(c, &format!("TM.INFO {k}")).unwrap();
    let keys = ["q", "c", "d", "p"];
    let want: Vec<Value> = keys.iter().map(|k| info(&mut m, k)).collect();
    let on_replica: Vec<Value> = keys.iter().map(|k| info(&mut r, k)).collect();
    assert_eq!(on_replica, want, "replica");
    for k in keys {
        let payload: Vec<u8> = redis::cmd("DUMP").arg(k).query(&mut m).unwrap();
        let _: Value = redis::cmd("RESTORE")
            .arg(format!("{k}.r"))
            .arg(0)
            .arg(payload)
            .query(&mut m)
            .unwrap();
        q(&mut m, &format!("COPY {k} {k}.c")).unwrap();
        let bytes: Vec<u8> = redis::cmd("TM.DUMP").arg(k).query(&mut m).unwrap();
        let _: Value = redis::cmd("TM.LOAD")
            .arg(format!("{k}.l"))
            .arg(bytes)
            .query(&mut m)
            .unwrap();
    }
    q(&mut m, "DEBUG RELOAD").unwrap();
    for (k, w) in keys.iter().zip(&want) {
        for copy in [
            k.to_string(),
            format!("{k}.r"),
            format!("{k}.c"),
            format!("{k}.l"),
        ] {
            assert_eq!(&info(&mut m, &copy), w, "{copy}");
        }
    }
    // Digests: a copy digests as its value; another value (one more event) does not.
    let digest = |c: &mut redis::Connection, k: &str| -> String {
        redis::cmd("DEBUG")
            .arg("DIGEST-VALUE")
            .arg(k)
            .query::<Vec<String>>(c)
            .unwrap()
            .remove(0)
    };
    for k in keys {
        assert_eq!(digest(&mut m, k), digest(&mut m, &format!("{k}.c")), "{k}");
        assert_eq!(digest(&mut m, k), digest(&mut r, k), "{k} on the replica");
    }
    let before = digest(&mut m, "c.c");
    q(&mut m, "TMCOUNT.ADD c.c 999999").unwrap();
    assert_ne!(digest(&mut m, "c.c"), before);
    assert_ne!(digest(&mut m, "q"), digest(&mut m, "d"));

    // TOPF: a WATCH on its source stands; one on its destination falls.
    let mut w = master.conn();
    q(&mut w, "WATCH d").unwrap();
    q(&mut m, "TMDISTINCT.TOPF d h").unwrap();
    q(&mut w, "MULTI").unwrap();
    q(&mut w, "PING").unwrap();
    assert_ne!(
        q(&mut w, "EXEC").unwrap(),
        Value::Nil,
        "TOPF aborted its source's WATCH"
    );
    q(&mut w, "WATCH h").unwrap();
    q(&mut m, "TMDISTINCT.TOPF d h").unwrap();
    q(&mut w, "MULTI").unwrap();
    q(&mut w, "PING").unwrap();
    assert_eq!(
        q(&mut w, "EXEC").unwrap(),
        Value::Nil,
        "TOPF left its destination's WATCH"
    );
    // Over a string that is no HyperLogLog: WRONGTYPE, as PFMERGE answers, and it stays.
    q(&mut m, "SET s plain").unwrap();
    let e = q(&mut m, "TMDISTINCT.TOPF d s").unwrap_err();
    assert_eq!(e.code(), Some("WRONGTYPE"));
    let e = q(&mut m, "PFMERGE s h").unwrap_err();
    assert_eq!(e.code(), Some("WRONGTYPE"), "as PFMERGE");
    let s: String = redis::cmd("GET").arg("s").query(&mut m).unwrap();
    assert_eq!(s, "plain");
}
