//! Scale-out runs publishing their keys' windows into the module (`TMWINDOW.PUT` after each
//! checkpoint, `TMWINDOW.GET` from any client): a key's window asked of the module equals the
//! window `tidemark query --store` answers over the parts (the same run, merged) for every
//! key, metric (count, distinct, frequency, quantile) and window end, on a 3-master cluster with the keys spread over partitions;
//! a part's commits left unpublished (a writer killed between the two, or one that did not
//! publish) are published whole by the next writer that claims it; the value survives a
//! reload; and a careless or hostile put is refused, naming what was wrong.

mod common;

use std::path::{Path, PathBuf};

use common::{redis_available, start_cluster, Server, TempDir};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use redis::Value;
use tidemark_cluster::{window_key, MergedStore, PartitionStore, Server as Redis};
use tidemark_stream::config::Config;
use tidemark_stream::pipeline::{self, RunOptions};
use tidemark_stream::query;
use tidemark_stream::store::Store;

const CONFIG: &str = r#"
[input]
time_field = "ts"
time_format = "epoch_ms"
[state]
checkpoint = "1h"
checkpoint_records = 700
[[metric]]
name = "n"
kind = "count"
key = ["k"]
bucket = "10s"
window = "30s"
retention = "1h"
allowed_lateness = "5s"
late = "merge"
[[metric]]
name = "d"
kind = "distinct"
key = ["k"]
item = ["i"]
precision = 8
bucket = "10s"
window = "30s"
retention = "1h"
allowed_lateness = "5s"
late = "merge"
[[metric]]
name = "f"
kind = "frequency"
key = ["k"]
item = ["i"]
bucket = "10s"
window = "30s"
retention = "1h"
allowed_lateness = "5s"
late = "merge"
epsilon = 0.01
delta = 0.01
phi = 0.05
[[metric]]
name = "q"
kind = "quantile"
key = ["k"]
value = "i"
bucket = "10s"
window = "30s"
retention = "1h"
allowed_lateness = "5s"
late = "merge"
"#;

/// `(time, key, item)`: 8,000 events of 40 keys over about four minutes, by time; one in ten
/// up to 4 s late (merged into its closed bucket).
fn events(seed: u64) -> Vec<(u64, u32, u32)> {
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut t = 100_000u64;
    (0..8_000)
        .map(|_| {
            t += rng.random_range(0..60);
            let back = if rng.random_bool(0.1) {
                rng.random_range(0..4_000)
            } else {
                0
            };
            (
                t - back,
                rng.random_range(0..40u32),
                rng.random_range(0..300u32),
            )
        })
        .collect()
}

fn csv(dir: &Path, name: &str, events: &[(u64, u32, u32)]) -> PathBuf {
    let mut out = String::from("ts,k,i\n");
    for (t, k, i) in events {
        out.push_str(&format!("{t},k{k},{i}\n"));
    }
    let path = dir.join(name);
    std::fs::write(&path, out).unwrap();
    path
}

fn run(config: &Config, store: &mut (dyn Store + Send), file: &Path) {
    pipeline::run(
        config,
        store,
        RunOptions {
            inputs: vec![file.to_path_buf()],
            threads: 1,
            ..RunOptions::default()
        },
        &mut |_| {},
    )
    .unwrap();
}

/// `TMWINDOW.GET`'s reply as `[estimate, low, high]`.
fn triple(v: &Value) -> [f64; 3] {
    let Value::Array(items) = v else {
        panic!("not an estimate: {v:?}")
    };
    let f = |x: &Value| match x {
        Value::BulkString(b) => std::str::from_utf8(b).unwrap().parse::<f64>().unwrap(),
        Value::Double(d) => *d,
        other => panic!("not a double: {other:?}"),
    };
    [f(&items[0]), f(&items[1]), f(&items[2])]
}

/// Asks the module for a key's 30 s window ending at a time (a quantile metric's quantile).
type Get<'a> = dyn FnMut(&[u8], u64, Option<f64>) -> Value + 'a;

/// For every metric, key and a window end every 20 s: the module's answer is the merged
/// parts' (`tidemark query --store`'s).
fn assert_module_answers_as_the_parts(
    get: &mut Get<'_>,
    merged: &MergedStore,
    events: &[(u64, u32, u32)],
) {
    let end = events.iter().map(|e| e.0).max().unwrap();
    let mut asked = 0;
    for metric in ["n", "d", "f", "q"] {
        let quantile = (metric == "q").then_some(0.9);
        let qs = [0.9];
        let ask = query::Ask {
            quantiles: quantile.map(|_| &qs[..]),
        };
        for at in (110_000..end - 10_000).step_by(20_000) {
            for k in 0..40 {
                let key = format!("k{k}");
                let want = query::window_asking(
                    merged,
                    metric,
                    30_000,
                    Some(at),
                    Some(key.as_bytes()),
                    None,
                    &ask,
                )
                .unwrap();
                let w = want.rows[0].estimate;
                let got = triple(&get(&window_key(metric, key.as_bytes()), at, quantile));
                assert_eq!(got, [w.value, w.low, w.high], "{metric} {key} at {at}");
                asked += 1;
            }
        }
    }
    assert!(asked > 1_000, "{asked}");
}

#[test]
fn keys_spread_over_partitions_answer_from_the_module_as_the_merged_parts() {
    let test = "keys_spread_over_partitions_answer_from_the_module_as_the_merged_parts";
    if !redis_available(test) {
        return;
    }
    let dir = TempDir::new("published");
    let nodes = start_cluster(&dir);
    let seeds: Vec<String> = nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect();
    let redis = Redis::connect(&format!("redis://{}", seeds.join(","))).unwrap();
    let config = Config::from_toml(CONFIG).unwrap();
    let events = events(5);
    // Three partitions by arrival, not by key: every key is in every partition, so its
    // window is a merge of three parts' buckets on other masters than its own.
    for p in 0..3 {
        let mine: Vec<_> = events
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 3 == p)
            .map(|(_, e)| *e)
            .collect();
        let name = format!("flows:{p}");
        if p == 2 {
            // Written without publishing, then appended to by a publishing writer: its claim
            // publishes the part whole before it goes on.
            let half = mine.len() / 2;
            let mut first = PartitionStore::claim(&redis, &name).unwrap();
            run(&config, &mut first, &csv(&dir.0, "p2a.csv", &mine[..half]));
            let mut next = PartitionStore::claim(&redis, &name)
                .unwrap()
                .publishing()
                .unwrap();
            // The same file grown: the run resumes after the lines the part holds.
            let rest = std::fs::read_to_string(csv(&dir.0, "p2b.csv", &mine[half..])).unwrap();
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(dir.0.join("p2a.csv"))
                .unwrap();
            std::io::Write::write_all(&mut f, rest.split_once('\n').unwrap().1.as_bytes()).unwrap();
            drop(f);
            run(&config, &mut next, &dir.0.join("p2a.csv"));
            continue;
        }
        let mut store = PartitionStore::claim(&redis, &name)
            .unwrap()
            .publishing()
            .unwrap();
        run(
            &config,
            &mut store,
            &csv(&dir.0, &format!("p{p}.csv"), &mine),
        );
    }
    let merged = MergedStore::open(&redis).unwrap();
    let client = redis::cluster::ClusterClient::new(
        seeds
            .iter()
            .map(|s| format!("redis://{s}"))
            .collect::<Vec<String>>(),
    )
    .unwrap();
    let mut c = client.get_connection().unwrap();
    // The published keys are spread over every master.
    for n in &nodes {
        let mut nc = n.conn();
        let keys: Vec<String> = redis::cmd("KEYS").arg("tm:d:*").query(&mut nc).unwrap();
        assert!(!keys.is_empty(), "a master holds published keys");
    }
    let mut get = |key: &[u8], at: u64, q: Option<f64>| -> Value {
        let mut cmd = redis::cmd("TMWINDOW.GET");
        cmd.arg(key).arg("WINDOW").arg(30_000).arg("AT").arg(at);
        if let Some(q) = q {
            cmd.arg("QUANTILE").arg(q);
        }
        cmd.query(&mut c).unwrap()
    };
    assert_module_answers_as_the_parts(&mut get, &merged, &events);
    // TM.INFO says what the value is.
    let info: Vec<Value> = redis::cmd("TM.INFO")
        .arg(window_key("d", b"k3"))
        .query(&mut c)
        .unwrap();
    let text = format!("{info:?}");
    assert!(
        text.contains("window") && text.contains("partitions"),
        "{text}"
    );
}

#[test]
fn a_published_value_survives_a_reload_and_refuses_bad_puts() {
    let test = "a_published_value_survives_a_reload_and_refuses_bad_puts";
    if !redis_available(test) {
        return;
    }
    let dir = TempDir::new("published-one");
    let server = Server::start(&dir.0, &[]);
    let replica_dir = dir.0.join("replica");
    std::fs::create_dir_all(&replica_dir).unwrap();
    let master = server.port.to_string();
    let replica = Server::start(&replica_dir, &["--replicaof", "127.0.0.1", &master]);
    let redis = Redis::connect(&server.url()).unwrap();
    let config = Config::from_toml(CONFIG).unwrap();
    let events = events(6);
    // A key of another type where a published value would go: the run is not failed by it
    // (its commits landed), the key is said on stderr and left as it is.
    let mut c = server.conn();
    let _: () = redis::cmd("SET")
        .arg(window_key("n", b"k9"))
        .arg("a user's string")
        .query(&mut c)
        .unwrap();
    let mut store = PartitionStore::claim(&redis, "flows:0")
        .unwrap()
        .publishing()
        .unwrap();
    run(&config, &mut store, &csv(&dir.0, "all.csv", &events));
    let s: String = redis::cmd("GET")
        .arg(window_key("n", b"k9"))
        .query(&mut c)
        .unwrap();
    assert_eq!(s, "a user's string");
    let (published, seq): (Option<u64>, u64) = redis::cmd("HMGET")
        .arg("{tm:flows:0}:fence")
        .arg("published")
        .arg("seq")
        .query(&mut c)
        .unwrap();
    assert!(
        published.unwrap_or(0) < seq,
        "a commit not published leaves `published` behind: {published:?} of {seq}"
    );
    let _: () = redis::cmd("DEL")
        .arg(window_key("n", b"k9"))
        .query(&mut c)
        .unwrap();
    // The next claimer publishes the part whole.
    PartitionStore::claim(&redis, "flows:0")
        .unwrap()
        .publishing()
        .unwrap();
    let published: Option<u64> = redis::cmd("HGET")
        .arg("{tm:flows:0}:fence")
        .arg("published")
        .query(&mut c)
        .unwrap();
    assert_eq!(published, Some(seq), "published whole by the next claimer");
    let store = PartitionStore::reader(&redis, "flows:0").unwrap();
    let k9: Value = redis::cmd("TMWINDOW.GET")
        .arg(window_key("n", b"k9"))
        .arg("AT")
        .arg(200_000)
        .query(&mut c)
        .unwrap();
    let want = query::window(
        &MergedStore::open(&redis).unwrap(),
        "n",
        30_000,
        Some(200_000),
        Some(b"k9"),
        None,
    )
    .unwrap();
    let w = want.rows[0].estimate;
    assert_eq!(triple(&k9), [w.value, w.low, w.high]);
    let key = window_key("d", b"k7");
    // Puts replicate: the replica answers as the master.
    let synced: i64 = redis::cmd("WAIT").arg(1).arg(10_000).query(&mut c).unwrap();
    assert_eq!(synced, 1);
    let on_replica: Value = redis::cmd("TMWINDOW.GET")
        .arg(&key)
        .arg("AT")
        .arg(200_000)
        .query(&mut replica.conn())
        .unwrap();
    // The default end is the latest a partition holding the key has closed.
    let latest: Vec<Value> = redis::cmd("TM.INFO").arg(&key).query(&mut c).unwrap();
    let latest = latest
        .iter()
        .position(|v| *v == Value::BulkString(b"latest_ms".to_vec()))
        .and_then(|i| match &latest[i + 1] {
            Value::Int(n) => Some(*n),
            _ => None,
        })
        .unwrap();
    let default: Value = redis::cmd("TMWINDOW.GET").arg(&key).query(&mut c).unwrap();
    let at_latest: Value = redis::cmd("TMWINDOW.GET")
        .arg(&key)
        .arg("AT")
        .arg(latest)
        .query(&mut c)
        .unwrap();
    assert_eq!(default, at_latest);
    let ask = |c: &mut redis::Connection| -> Value {
        redis::cmd("TMWINDOW.GET")
            .arg(&key)
            .arg("AT")
            .arg(200_000)
            .query(c)
            .unwrap()
    };
    let before = ask(&mut c);
    assert_eq!(on_replica, before, "the replica answers as the master");
    let _: () = redis::cmd("DEBUG").arg("RELOAD").query(&mut c).unwrap();
    assert_eq!(ask(&mut c), before, "the same answer after an RDB reload");
    let merged = MergedStore::open(&redis).unwrap();
    let want = query::window(&merged, "d", 30_000, Some(200_000), Some(b"k7"), None).unwrap();
    let w = want.rows[0].estimate;
    assert_eq!(triple(&before), [w.value, w.low, w.high]);

    // Careless and hostile puts: each refused, naming what was wrong, the key unchanged.
    let err = |args: &[&[u8]], c: &mut redis::Connection| -> String {
        let mut cmd = redis::cmd("TMWINDOW.PUT");
        for a in args {
            cmd.arg(*a);
        }
        cmd.query::<Value>(c).unwrap_err().to_string()
    };
    let cases: Vec<(Vec<&[u8]>, &str)> = vec![
        // A key never published, and no config to make it.
        (
            vec![b"tm:d:new", b"d", b"flows:0", b"1", b"1", b"0", b"0", b"x"],
            "no such key",
        ),
        // Another metric than the key's.
        (
            vec![&key, b"n", b"flows:0", b"1", b"1", b"0", b"0", b"x"],
            "holds metric 'd'",
        ),
        // Bytes that are no bucket of the metric.
        (
            vec![&key, b"d", b"flows:0", b"1", b"1", b"0", b"0", b"garbage"],
            "the bucket at 0",
        ),
        // A start that is no bucket start, and one past 2^52.
        (
            vec![&key, b"d", b"flows:0", b"1", b"1", b"0", b"5", b"x"],
            "not a bucket start",
        ),
        (
            vec![
                &key,
                b"d",
                b"flows:0",
                b"1",
                b"1",
                b"0",
                b"9007199254740993",
                b"x",
            ],
            "start",
        ),
        // No buckets at all; a partition name of 261 bytes.
        (
            vec![&key, b"d", b"flows:0", b"1", b"1", b"0"],
            "wrong number of arguments",
        ),
        (
            vec![&key, b"d", &[b'p'; 261], b"1", b"1", b"0", b"0", b"x"],
            "partition name",
        ),
        // A config that does not parse, for a new key.
        (
            vec![
                b"tm:d:new",
                b"d",
                b"flows:0",
                b"1",
                b"1",
                b"0",
                b"CONFIG",
                b"[[",
                b"0",
                b"x",
            ],
            "CONFIG does not parse",
        ),
    ];
    for (args, says) in cases {
        let e = err(&args, &mut c);
        assert!(e.contains(says), "{says}: {e}");
    }
    // A new key's put refused for its bucket creates no key.
    let e = err(
        &[
            b"tm:d:new",
            b"d",
            b"flows:0",
            b"1",
            b"1",
            b"0",
            b"CONFIG",
            CONFIG.as_bytes(),
            b"0",
            b"x",
        ],
        &mut c,
    );
    assert!(e.contains("the bucket at 0"), "{e}");
    let exists: i64 = redis::cmd("EXISTS").arg("tm:d:new").query(&mut c).unwrap();
    assert_eq!(exists, 0, "a refused put created no key");
    assert_eq!(ask(&mut c), before, "refused puts changed nothing");
    // Another key's bucket put at k7's start by a writer fenced out long ago (an older
    // claim) changes nothing; put by a later claim, it replaces k7's.
    let rows = store.rows().unwrap();
    let (start, other) = rows
        .iter()
        .find(|((t, s, k), _)| t == "d" && k == b"k8" && (170_000..200_000).contains(s))
        .map(|((_, s, _), v)| (*s, v.clone()))
        .unwrap();
    let mine = &rows[&("d".to_string(), start, b"k7".to_vec())];
    assert_ne!(mine, &other, "k8's bucket at {start} differs from k7's");
    let put = |epoch: &str, c: &mut redis::Connection| {
        redis::cmd("TMWINDOW.PUT")
            .arg(&key)
            .arg("d")
            .arg("flows:0")
            .arg(epoch)
            .arg(1)
            .arg(190_000)
            .arg(start)
            .arg(&other)
            .query::<Value>(c)
            .unwrap();
    };
    put("1", &mut c);
    assert_eq!(
        ask(&mut c),
        before,
        "a fenced writer's late put changed nothing"
    );
    put("18446744073709551615", &mut c);
    assert_ne!(
        ask(&mut c),
        before,
        "a later claim's put replaces the bucket"
    );
    let e = redis::cmd("TMWINDOW.GET")
        .arg(&key)
        .arg("WINDOW")
        .arg(15_000)
        .query::<Value>(&mut c)
        .unwrap_err()
        .to_string();
    assert!(e.contains("window"), "{e}");
}

/// Puts the master has taken since its stats were reset.
fn puts(c: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(c).unwrap();
    let line = info
        .lines()
        .map(str::to_ascii_lowercase)
        .find(|l| l.starts_with("cmdstat_tmwindow.put:calls="));
    line.map_or(0, |l| {
        l["cmdstat_tmwindow.put:calls=".len()..]
            .split(',')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    })
}

/// One run publishing over a master with a replica; with `pause`, the replica stops answering
/// (SIGSTOP) before the run and comes back after the first checkpoint that published. The
/// bytes the master took and the fence's `published` and `seq` after it.
fn run_with_a_replica(dir: &TempDir, pause: bool) -> (u64, Option<u64>, u64) {
    let server = Server::start(&dir.0, &[]);
    let replica_dir = dir.0.join(format!("replica-{pause}"));
    std::fs::create_dir_all(&replica_dir).unwrap();
    let replica = Server::start(
        &replica_dir,
        &["--replicaof", "127.0.0.1", &server.port.to_string()],
    );
    let mut c = server.conn();
    // The replica is in sync before the run.
    let synced: i64 = redis::cmd("WAIT").arg(1).arg(10_000).query(&mut c).unwrap();
    assert_eq!(synced, 1);
    let redis = Redis::connect(&server.url()).unwrap();
    let config = Config::from_toml(CONFIG).unwrap();
    let events = events(8);
    let file = csv(&dir.0, &format!("replica-{pause}.csv"), &events[..3_000]);
    let mut store = PartitionStore::claim(&redis, "flows:0")
        .unwrap()
        .publishing()
        .unwrap();
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut c).unwrap();
    if pause {
        replica.signal("STOP");
    }
    let mut paused = pause;
    let mut on_checkpoint = |_: &tidemark_stream::pipeline::Checkpointed| {
        // Asked in both runs alike: the bytes it sends count the same in each.
        let put = puts(&mut server.conn()) > 0;
        if paused && put {
            replica.signal("CONT");
            paused = false;
        }
    };
    pipeline::run(
        &config,
        &mut store,
        RunOptions {
            inputs: vec![file],
            threads: 1,
            on_checkpoint: Some(&mut on_checkpoint),
            ..RunOptions::default()
        },
        &mut |_| {},
    )
    .unwrap();
    let (published, seq): (Option<u64>, u64) = redis::cmd("HMGET")
        .arg("{tm:flows:0}:fence")
        .arg("published")
        .arg("seq")
        .query(&mut c)
        .unwrap();
    // Every key's window on the replica is the master's.
    let synced: i64 = redis::cmd("WAIT").arg(1).arg(10_000).query(&mut c).unwrap();
    assert_eq!(synced, 1);
    let mut r = replica.conn();
    for k in 0..40 {
        let key = window_key("d", format!("k{k}").as_bytes());
        let get = |c: &mut redis::Connection| -> Value {
            redis::cmd("TMWINDOW.GET")
                .arg(&key)
                .arg("AT")
                .arg(200_000)
                .query(c)
                .unwrap()
        };
        assert_eq!(get(&mut r), get(&mut c), "k{k} on the replica");
    }
    let info: String = redis::cmd("INFO").arg("stats").query(&mut c).unwrap();
    let bytes = info
        .lines()
        .find_map(|l| l.strip_prefix("total_net_input_bytes:"))
        .map(|n| n.trim().parse().unwrap())
        .unwrap();
    (bytes, published, seq)
}

#[test]
fn a_publication_its_replica_did_not_confirm_is_published_whole_at_the_next_commit() {
    let test = "a_publication_its_replica_did_not_confirm_is_published_whole_at_the_next_commit";
    if !redis_available(test) {
        return;
    }
    let dir = TempDir::new("published-unconfirmed");
    let (steady, published, seq) = run_with_a_replica(&dir, false);
    assert_eq!(published, Some(seq), "every publication confirmed");
    let (paused, published, seq) = run_with_a_replica(&dir, true);
    assert!(seq >= 3, "{seq} commits");
    eprintln!("{paused} bytes into the master against {steady} without the pause");
    // The first publication waited a second for the stopped replica and was not confirmed;
    // the next commit put the part whole (its first commit's keys again), and was.
    assert!(
        paused > steady + 10_000,
        "the part published whole again: {paused} bytes into the master against {steady}"
    );
    assert_eq!(published, Some(seq), "the later publications confirmed");
}
