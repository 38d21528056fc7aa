//! The module as an operator meets it: defaults set by load arguments (and replicas that
//! build the same values whatever theirs are), an AOF file written with the two-dot names of
//! earlier builds replayed under `LEGACY-NAMES` (and refused, loudly, without it), the `INFO
//! tidemark` section, and `COMMAND DOCS`/`COMMAND INFO` for every command.

mod common;

use common::{free_port, q, redis_available, wait_until, Server, TempDir};
use redis::Value;
use tidemark_redis::command::{run, usage, MemKeyspace, COMMANDS};
use tidemark_redis::env::Env;
use tidemark_redis::reply::Reply;

fn words(line: &str) -> Vec<Vec<u8>> {
    line.split_whitespace()
        .map(|w| w.as_bytes().to_vec())
        .collect()
}

fn dump(c: &mut redis::Connection, key: &str) -> Vec<u8> {
    redis::cmd("TM.DUMP").arg(key).query(c).unwrap()
}

/// The fields of a map reply, in RESP2 (a flat array) or RESP3.
fn fields(v: &Value) -> Vec<(String, Value)> {
    let text = |v: &Value| match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        other => format!("{other:?}"),
    };
    match v {
        Value::Array(flat) => flat
            .chunks(2)
            .filter(|kv| kv.len() == 2)
            .map(|kv| (text(&kv[0]), kv[1].clone()))
            .collect(),
        Value::Map(pairs) => pairs.iter().map(|(k, v)| (text(k), v.clone())).collect(),
        _ => Vec::new(),
    }
}

#[test]
fn live_load_arguments_set_defaults_that_replicate_written_out() {
    if !redis_available("live_load_arguments_set_defaults_that_replicate_written_out") {
        return;
    }
    let (dm, dr) = (TempDir::new("defaults-m"), TempDir::new("defaults-r"));
    let args = [
        "EPSILON",
        "0.05",
        "PRECISION",
        "12",
        "PHI",
        "0.2",
        "ALPHA",
        "0.03",
    ];
    let master = Server::try_start_with(free_port(), &dm.0, &args, &[]).expect("master");
    // The replica keeps the built-in defaults.
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
        "TMCOUNT.CREATE c WINDOW 60000",
        "TMDISTINCT.CREATE d WINDOW 60000",
        "TMFREQ.CREATE f WINDOW 60000 BUCKET 1000",
        "TMQUANTILE.CREATE p WINDOW 60000",
        "TMCOUNT.ADD c 1000 7",
        "TMDISTINCT.ADD d 1000 a b",
        "TMFREQ.ADD f 1000 a 3",
        "TMQUANTILE.ADD p 1000 1.5 2 1e6",
    ] {
        q(&mut m, s).unwrap();
    }
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(10_000).query(&mut m).unwrap();
    assert_eq!(acked, 1);
    // The master built them with its defaults, and the replica the same values.
    let mut model = MemKeyspace::default();
    let mut env = Env::at(0);
    env.defaults.epsilon = 0.05;
    env.defaults.precision = 12;
    env.defaults.phi = 0.2;
    env.defaults.alpha = 0.03;
    for s in [
        "TMCOUNT.CREATE c WINDOW 60000",
        "TMDISTINCT.CREATE d WINDOW 60000",
        "TMFREQ.CREATE f WINDOW 60000 BUCKET 1000",
        "TMQUANTILE.CREATE p WINDOW 60000",
        "TMCOUNT.ADD c 1000 7",
        "TMDISTINCT.ADD d 1000 a b",
        "TMFREQ.ADD f 1000 a 3",
        "TMQUANTILE.ADD p 1000 1.5 2 1e6",
    ] {
        run(&mut model, env, &words(s)).reply.unwrap();
    }
    for key in ["c", "d", "f", "p"] {
        let Ok(Reply::Bulk(want)) = run(&mut model, env, &words(&format!("TM.DUMP {key}"))).reply
        else {
            panic!("{key}: no dump")
        };
        assert_eq!(dump(&mut m, key), want, "master {key}");
        assert_eq!(dump(&mut r, key), want, "replica {key}");
    }
    let info: String = redis::cmd("INFO").arg("tidemark").query(&mut m).unwrap();
    for line in [
        "tidemark_epsilon:0.05",
        "tidemark_precision:12",
        "tidemark_phi:0.2",
        "tidemark_alpha:0.03",
        "tidemark_legacy_names:no",
    ] {
        assert!(info.contains(line), "{line} not in {info}");
    }
    // Bad load arguments stop the server with the reason in its log.
    let dir = TempDir::new("badargs");
    assert!(
        Server::try_start_with(free_port(), &dir.0, &["PRECISION", "30"], &[]).is_none(),
        "a module loaded with PRECISION 30"
    );
    let log = std::fs::read_dir(&dir.0)
        .unwrap()
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect::<String>();
    assert!(
        log.contains("PRECISION must be an integer in 4..=18"),
        "{log}"
    );
}

/// One command as RESP, as an AOF file holds it.
fn resp(line: &str) -> Vec<u8> {
    let w: Vec<&str> = line.split_whitespace().collect();
    let mut out = format!("*{}\r\n", w.len()).into_bytes();
    for a in w {
        out.extend(format!("${}\r\n{a}\r\n", a.len()).into_bytes());
    }
    out
}

#[test]
fn live_an_aof_of_the_two_dot_names_replays_under_legacy_names() {
    if !redis_available("live_an_aof_of_the_two_dot_names_replays_under_legacy_names") {
        return;
    }
    let dir = TempDir::new("legacy");
    let port = free_port();
    let aof = ["--appendonly", "yes", "--appendfsync", "always"];
    // A fresh AOF (base and an empty increment), then the commands an earlier build wrote.
    let s = Server::try_start_with(port, &dir.0, &[], &aof).expect("server");
    s.stop(false);
    let old = [
        "TM.COUNT.CREATE c WINDOW 60000",
        "TM.COUNT.ADD c *1000 5",
        "TM.DISTINCT.CREATE d WINDOW 60000 BUCKET 1000",
        "TM.DISTINCT.ADD d *1000 a b c",
        "TM.FREQ.CREATE f WINDOW 10000 BUCKET 1000",
        "TM.FREQ.ADD f *2000 a 4 b",
        "TM.FILTER.CREATE q CAPACITY 100 FPR 0.01",
        "TM.FILTER.ADD q x y",
        "TM.FILTER.DEL q y",
    ];
    let incr = std::fs::read_dir(dir.0.join("appendonlydir"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .expect("an incremental AOF file");
    let mut log = std::fs::read(&incr).unwrap();
    for line in old {
        log.extend(resp(line));
    }
    std::fs::write(&incr, log).unwrap();

    // Without LEGACY-NAMES the server refuses the file (and says which command).
    let port2 = free_port();
    assert!(
        Server::try_start_with(port2, &dir.0, &[], &["--appendonly", "yes"]).is_none(),
        "a server replayed two-dot names it does not know"
    );
    let said = std::fs::read_to_string(dir.0.join(format!("redis-{port2}.log"))).unwrap();
    assert!(said.contains("TM.COUNT.CREATE"), "{said}");

    // With it, the values are those the command layer builds from the same commands.
    let s = Server::try_start_with(
        free_port(),
        &dir.0,
        &["LEGACY-NAMES"],
        &["--appendonly", "yes"],
    )
    .expect("a server with LEGACY-NAMES");
    let mut c = s.conn();
    let mut model = MemKeyspace::default();
    for line in old {
        run(&mut model, Env::at(0), &words(line)).reply.unwrap();
    }
    for key in ["c", "d", "f", "q"] {
        let Ok(Reply::Bulk(want)) =
            run(&mut model, Env::at(0), &words(&format!("TM.DUMP {key}"))).reply
        else {
            panic!("{key}")
        };
        assert_eq!(dump(&mut c, key), want, "{key}");
    }
    // Both names answer while it is loaded; a rewrite leaves no old name in the file.
    q(&mut c, "TM.COUNT.ADD c *3000").unwrap();
    q(&mut c, "TMCOUNT.ADD c *4000").unwrap();
    let info: String = redis::cmd("INFO").arg("tidemark").query(&mut c).unwrap();
    assert!(info.contains("tidemark_legacy_names:yes"), "{info}");
    q(&mut c, "BGREWRITEAOF").unwrap();
    wait_until(30, "the AOF rewrite", || {
        let info: String = redis::cmd("INFO").arg("persistence").query(&mut c).unwrap();
        info.contains("aof_rewrite_in_progress:0")
            && info.contains("aof_rewrite_scheduled:0")
            && info.contains("aof_last_bgrewrite_status:ok")
    });
    let before: Vec<Vec<u8>> = ["c", "d", "f", "q"]
        .iter()
        .map(|k| dump(&mut c, k))
        .collect();
    drop(c);
    s.stop(false);
    let s = Server::try_start_with(free_port(), &dir.0, &[], &["--appendonly", "yes"])
        .expect("after the rewrite, a server without LEGACY-NAMES");
    let mut c = s.conn();
    let after: Vec<Vec<u8>> = ["c", "d", "f", "q"]
        .iter()
        .map(|k| dump(&mut c, k))
        .collect();
    assert_eq!(after, before);
}

#[test]
fn live_info_counts_keys_bytes_and_refusals_per_type() {
    if !redis_available("live_info_counts_keys_bytes_and_refusals_per_type") {
        return;
    }
    let dir = TempDir::new("info");
    let s = Server::start(&dir.0, &[]);
    let mut c = s.conn();
    let stat = |c: &mut redis::Connection, ty: &str| -> (i64, i64) {
        let info: String = redis::cmd("INFO").arg("tidemark").query(c).unwrap();
        let line = info
            .lines()
            .find_map(|l| l.strip_prefix(&format!("tidemark_{ty}:")))
            .unwrap_or_else(|| panic!("no {ty} in {info}"))
            .trim()
            .to_string();
        let num = |name: &str| {
            line.split(',')
                .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
                .and_then(|n| n.parse().ok())
                .unwrap_or(-1)
        };
        (num("keys"), num("bytes"))
    };
    for i in 0..50 {
        q(&mut c, &format!("TMCOUNT.CREATE c{i} WINDOW 600000")).unwrap();
        q(
            &mut c,
            &format!("TMDISTINCT.CREATE d{i} WINDOW 60000 BUCKET 1000 PRECISION 10"),
        )
        .unwrap();
        q(
            &mut c,
            &format!("TMFREQ.CREATE f{i} WINDOW 10000 BUCKET 1000"),
        )
        .unwrap();
        q(
            &mut c,
            &format!("TMFILTER.CREATE q{i} CAPACITY 100 FPR 0.01"),
        )
        .unwrap();
        q(
            &mut c,
            &format!("TMQUANTILE.CREATE p{i} WINDOW 10000 BUCKET 1000"),
        )
        .unwrap();
    }
    // Writes that grow the values in place: the counts follow them.
    for t in 0..400u64 {
        for i in 0..50 {
            q(
                &mut c,
                &format!("TMCOUNT.ADD c{i} {} {}", 1000 + t * 97, t % 9),
            )
            .unwrap();
            q(
                &mut c,
                &format!("TMDISTINCT.ADD d{i} {} u{t}", 1000 + t * 97),
            )
            .unwrap();
            q(
                &mut c,
                &format!("TMFREQ.ADD f{i} {} i{}", 1000 + t * 11, t % 60),
            )
            .unwrap();
            q(&mut c, &format!("TMFILTER.ADD q{i} k{t}")).unwrap();
            q(
                &mut c,
                &format!(
                    "TMQUANTILE.ADD p{i} {} {} {}",
                    1000 + t * 11,
                    t,
                    0.5 + t as f64
                ),
            )
            .unwrap();
        }
    }
    for (ty, prefix) in [
        ("count", "c"),
        ("distinct", "d"),
        ("freq", "f"),
        ("filter", "q"),
        ("quantile", "p"),
    ] {
        let (keys, bytes) = stat(&mut c, ty);
        assert_eq!(keys, 50, "{ty}");
        let usage: i64 = (0..50)
            .map(|i| {
                redis::cmd("MEMORY")
                    .arg("USAGE")
                    .arg(format!("{prefix}{i}"))
                    .query::<i64>(&mut c)
                    .unwrap()
            })
            .sum();
        // The section counts what the module allocated for the keys; MEMORY USAGE is each
        // value's own reckoning of the same buffers (plus Redis's key overhead): they agree
        // to within a quarter, never by chance to the byte.
        let ratio = bytes as f64 / usage as f64;
        assert!(
            (0.75..=1.25).contains(&ratio),
            "{ty}: INFO {bytes}, MEMORY USAGE {usage}"
        );
    }
    // Gone keys take their bytes with them, to the byte.
    q(&mut c, "FLUSHALL").unwrap();
    for ty in ["count", "distinct", "freq", "filter", "quantile"] {
        assert_eq!(stat(&mut c, ty), (0, 0), "{ty}");
    }
    // Refusals for the module's bounds are counted; other errors are not.
    let refused = |c: &mut redis::Connection| -> i64 {
        let info: String = redis::cmd("INFO").arg("tidemark").query(c).unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("tidemark_refused_for_limits:"))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(-1)
    };
    let before = refused(&mut c);
    assert!(q(&mut c, "TMDISTINCT.CREATE x WINDOW 1000000 BUCKET 1").is_err());
    assert!(q(&mut c, "TMCOUNT.CREATE x WINDOW abc").is_err());
    assert_eq!(refused(&mut c), before + 1);
}

#[test]
fn live_every_command_is_documented_for_command_docs_and_info() {
    if !redis_available("live_every_command_is_documented_for_command_docs_and_info") {
        return;
    }
    let dir = TempDir::new("docs");
    let s = Server::start(&dir.0, &[]);
    let mut c = s.conn();
    for spec in COMMANDS {
        let docs: Value = redis::cmd("COMMAND")
            .arg("DOCS")
            .arg(spec.name)
            .query(&mut c)
            .unwrap();
        let entry = fields(&docs);
        let (_, doc) = entry
            .first()
            .unwrap_or_else(|| panic!("{}: no docs", spec.name));
        let doc = fields(doc);
        let get = |k: &str| doc.iter().find(|(f, _)| f == k).map(|(_, v)| v.clone());
        assert_eq!(
            get("summary"),
            Some(Value::BulkString(spec.summary.as_bytes().to_vec())),
            "{}",
            spec.name
        );
        let args = usage::parse(spec.usage).unwrap();
        match get("arguments") {
            Some(Value::Array(a)) => assert_eq!(a.len(), args.len(), "{}", spec.name),
            other => panic!("{}: arguments {other:?}", spec.name),
        }
        // COMMAND INFO: name, arity, flags, first key, last key, step, …
        let Value::Array(info) = redis::cmd("COMMAND")
            .arg("INFO")
            .arg(spec.name)
            .query::<Value>(&mut c)
            .unwrap()
        else {
            panic!("{}: COMMAND INFO", spec.name)
        };
        let Some(Value::Array(row)) = info.first() else {
            panic!("{}: COMMAND INFO {info:?}", spec.name)
        };
        assert_eq!(
            row.get(1),
            Some(&Value::Int(usage::arity(&args) as i64)),
            "{}",
            spec.name
        );
        assert_eq!(row.get(3), Some(&Value::Int(1)), "{}: first key", spec.name);
    }
    // A call too short for its arity is Redis's own arity error.
    let e = q(&mut c, "TMCOUNT.ADD k").unwrap_err();
    assert!(e.to_string().contains("wrong number of arguments"), "{e}");
}
