//! A run's state kept per partition in real Redis servers: a part holds what a file holds,
//! parts resumed under new claims answer as one run over every record, a writer whose part
//! was claimed again (or whose last commit a failover lost) writes nothing, and a commit
//! waits out a server that comes back.

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{master_of, redis_available, start_cluster, start_cluster_with, Server, TempDir};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use tidemark_cluster::{MergedStore, PartitionStore, Server as Redis, StoreError};
use tidemark_stream::config::Config;
use tidemark_stream::pipeline::{self, AlertOut, RunOptions, RunReport};
use tidemark_stream::query;
use tidemark_stream::store::{MemStore, Store};

/// Count (with a rollup and late merges) and distinct metrics with alerts; checkpoints every
/// 1,500 records, never by wall time (so that runs on a slow server checkpoint where runs on
/// a fast one do).
fn config(state: &str) -> Config {
    config_kept(state, "1h")
}

/// [`config`], buckets kept for `retention`.
fn config_kept(state: &str, retention: &str) -> Config {
    Config::from_toml(&format!(
        r#"
[input]
time_field = "ts"
time_format = "epoch_ms"
[state]
checkpoint = "1h"
checkpoint_records = 1500
{state}
[[metric]]
name = "n"
kind = "count"
key = ["k"]
bucket = "10s"
window = "30s"
retention = "{retention}"
allowed_lateness = "5s"
late = "merge"
rollup = "1m"
[[metric.alert]]
above = 12

[[metric]]
name = "d"
kind = "distinct"
key = ["k"]
item = ["i"]
precision = 8
bucket = "10s"
window = "30s"
retention = "{retention}"
allowed_lateness = "5s"
late = "merge"
[[metric.alert]]
above = 20
margin = 0
"#
    ))
    .unwrap()
}

/// `(time, key, item)` events of 600 keys over about ten minutes, by time; with `late`, one
/// in ten up to 20 s late.
fn events(seed: u64, late: bool) -> Vec<(u64, u32, u32)> {
    events_n(seed, late, 20_000)
}

/// [`events`], `n` of them (over about `n` × 30 ms).
fn events_n(seed: u64, late: bool, n: usize) -> Vec<(u64, u32, u32)> {
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut t = 0u64;
    (0..n)
        .map(|_| {
            t += rng.random_range(0..60);
            let back = if late && rng.random_bool(0.1) {
                rng.random_range(0..20_000)
            } else {
                0
            };
            let (k, i) = if rng.random_bool(0.05) {
                (rng.random_range(0..4u32), rng.random_range(0..100u32))
            } else {
                (rng.random_range(4..600u32), rng.random_range(0..3u32))
            };
            (t.saturating_sub(back), k, i)
        })
        .collect()
}

fn csv(events: &[(u64, u32, u32)]) -> String {
    let mut out = String::from("ts,k,i\n");
    for (t, k, i) in events {
        out.push_str(&format!("{t},k{k},i{i}\n"));
    }
    out
}

fn run(
    config: &Config,
    store: &mut (dyn Store + Send),
    file: &Path,
    keep_open: bool,
) -> (RunReport, Vec<String>) {
    let mut alerts = Vec::new();
    let r = pipeline::run(
        config,
        store,
        RunOptions {
            inputs: vec![file.to_path_buf()],
            keep_open,
            threads: 1,
            ..RunOptions::default()
        },
        &mut |a: &AlertOut| {
            alerts.push(format!(
                "{} {} {} {:?}",
                a.metric, a.key, a.alert.bucket, a.alert.phase
            ))
        },
    )
    .unwrap();
    (r, alerts)
}

fn write(dir: &TempDir, name: &str, text: &str) -> PathBuf {
    let p = dir.0.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Every row of a part but the store's own (`#` digests): `(table, start, key) → bytes`.
fn part_rows(part: &PartitionStore) -> BTreeMap<(String, u64, Vec<u8>), Vec<u8>> {
    let mut rows = part.rows().unwrap();
    rows.retain(|(table, _, _), _| !table.starts_with('#'));
    rows
}

#[test]
fn a_part_holds_what_a_file_holds_with_spilled_keys_read_back() {
    if !redis_available("a_part_holds_what_a_file_holds_with_spilled_keys_read_back") {
        return;
    }
    let dir = TempDir::new("same");
    let server = Server::start(&dir, &[]).expect("redis-server");
    // A budget small enough that quiet keys spill at checkpoints and are read back from the
    // part (through the engine's view) at their next event; late events merged into buckets
    // already stored.
    let config = config_kept("max_memory = \"64KiB\"", "2m");
    let file = write(&dir, "in.csv", &csv(&events(7, true)));
    let mut mem = MemStore::default();
    let (want, want_alerts) = run(&config, &mut mem, &file, false);
    assert!(want.spills > 0 && want.merged > 0, "{want:?}");
    // Buckets past their retention were deleted (the log spans ten minutes).
    assert!(
        mem.buckets
            .keys()
            .filter(|(t, _, _)| t == "n")
            .all(|(_, s, _)| *s >= 300_000),
        "expired"
    );
    let redis = Redis::connect(&server.url()).unwrap();
    let mut part = PartitionStore::claim(&redis, "flows:0").unwrap();
    let (got, got_alerts) = run(&config, &mut part, &file, false);
    assert_eq!(got, want);
    assert_eq!(got_alerts, want_alerts);
    assert_eq!(part_rows(&part), mem.buckets);
    assert_eq!(part.meta().unwrap(), mem.meta().unwrap());
    let commits = part.commits().unwrap();
    assert!(commits >= 13, "a commit per 1,500 records: {commits}");
}

/// Partition `p` of 3 by key: events of one key go to one partition, in time order.
fn partition(events: &[(u64, u32, u32)], p: u32, parts: u32) -> Vec<(u64, u32, u32)> {
    events
        .iter()
        .copied()
        .filter(|e| e.1 % parts == p)
        .collect()
}

/// Runs every partition of `events` into its part on `redis`, partition 1 in two runs (the
/// first leaving its buckets open, as a worker stopped by a rebalance does), the second under
/// a new claim that fences the first writer out.
fn run_parts(
    redis: &Redis,
    dir: &TempDir,
    config: &Config,
    events: &[(u64, u32, u32)],
    parts: u32,
) {
    for p in 0..parts {
        let mine = partition(events, p, parts);
        let name = format!("flows:{p}");
        let mut store = PartitionStore::claim(redis, &name).unwrap();
        if p != 1 {
            let file = write(dir, &format!("p{p}.csv"), &csv(&mine));
            run(config, &mut store, &file, false);
            continue;
        }
        let half = mine.len() / 2;
        let file = write(dir, "p1.csv", &csv(&mine[..half]));
        run(config, &mut store, &file, true);
        let mut next = PartitionStore::claim(redis, &name).unwrap();
        // The writer before is fenced out: nothing it writes lands.
        let err = store
            .write(&mut |t| t.set_meta("state", b"stale"))
            .unwrap_err();
        assert!(matches!(err, StoreError::Fenced { .. }), "{err}");
        let rest = csv(&mine[half..]);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap();
        f.write_all(rest.split_once('\n').unwrap().1.as_bytes())
            .unwrap();
        drop(f);
        let (r, _) = run(config, &mut next, &file, false);
        assert!(
            r.resumed && r.records_this_run == (mine.len() - half) as u64,
            "{r:?}"
        );
    }
}

/// Window answers of `merged` equal `want`'s for every metric, key and window end.
fn assert_same_answers(merged: &MergedStore, want: &MemStore, events: &[(u64, u32, u32)]) {
    let end = events.iter().map(|e| e.0).max().unwrap();
    let mut asked = 0;
    for metric in ["n", "d", "n@1m"] {
        let window = if metric == "n@1m" { 120_000 } else { 30_000 };
        for at in (20_000..end + 60_000).step_by(70_000) {
            let a = query::window(merged, metric, window, Some(at), None, None).unwrap();
            let b = query::window(want, metric, window, Some(at), None, None).unwrap();
            assert_eq!(a, b, "{metric} at {at}");
            asked += b.rows.len();
            let one = query::window(merged, metric, window, Some(at), Some(b"k1"), None).unwrap();
            let w = query::window(want, metric, window, Some(at), Some(b"k1"), None).unwrap();
            assert_eq!(one, w, "{metric} k1 at {at}");
        }
    }
    assert!(asked > 1_000, "the windows hold keys: {asked}");
}

#[test]
fn parts_resumed_under_new_claims_answer_as_one_run() {
    if !redis_available("parts_resumed_under_new_claims_answer_as_one_run") {
        return;
    }
    let dir = TempDir::new("parts");
    let server = Server::start(&dir, &[]).expect("redis-server");
    let config = config("");
    let events = events(11, false);
    let mut want = MemStore::default();
    run(
        &config,
        &mut want,
        &write(&dir, "all.csv", &csv(&events)),
        false,
    );
    let redis = Redis::connect(&server.url()).unwrap();
    run_parts(&redis, &dir, &config, &events, 3);
    let merged = MergedStore::open(&redis).unwrap();
    assert_eq!(merged.parts(), 3);
    assert_same_answers(&merged, &want, &events);
}

#[test]
fn parts_on_a_cluster_spread_over_its_masters_and_answer_as_one_run() {
    if !redis_available("parts_on_a_cluster_spread_over_its_masters_and_answer_as_one_run") {
        return;
    }
    let dir = TempDir::new("cluster");
    let nodes = start_cluster(&dir);
    let config = config("");
    let events = events(12, false);
    let mut want = MemStore::default();
    run(
        &config,
        &mut want,
        &write(&dir, "all.csv", &csv(&events)),
        false,
    );
    let seeds: Vec<String> = nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect();
    let redis = Redis::connect(&format!("redis://{}", seeds.join(","))).unwrap();
    run_parts(&redis, &dir, &config, &events, 6);
    let holding = nodes
        .iter()
        .filter(|n| {
            let mut c = n.conn().unwrap();
            redis::cmd("DBSIZE").query::<u64>(&mut c).unwrap() > 0
        })
        .count();
    assert_eq!(holding, 3, "six parts' slots fall on every master");
    // One seed is enough to find the cluster.
    let one = Redis::connect(&format!("redis://{}", seeds[1])).unwrap();
    let merged = MergedStore::open(&one).unwrap();
    assert_eq!(merged.parts(), 6);
    assert_same_answers(&merged, &want, &events);
}

#[test]
fn a_commit_the_server_lost_fences_its_writer_and_nothing_lands() {
    if !redis_available("a_commit_the_server_lost_fences_its_writer_and_nothing_lands") {
        return;
    }
    let dir = TempDir::new("lost");
    let server = Server::start(&dir, &[]).expect("redis-server");
    let redis = Redis::connect(&server.url()).unwrap();
    let mut part = PartitionStore::claim(&redis, "t:0").unwrap();
    part.write(&mut |t| t.put("m", 5, b"a", b"one").map(|_| ()))
        .unwrap();
    assert_eq!(part.commits(), Some(1));
    // A failover to a replica that had not received the commit: the part is one commit
    // behind what its writer saw.
    let mut c = server.conn().unwrap();
    redis::cmd("HSET")
        .arg("{tm:t:0}:fence")
        .arg("seq")
        .arg(0)
        .query::<u64>(&mut c)
        .unwrap();
    let err = part
        .write(&mut |t| t.put("m", 6, b"a", b"two").map(|_| ()))
        .unwrap_err();
    assert!(
        matches!(
            &err,
            StoreError::Behind {
                holds: 0,
                saw: 1,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(part.get("m", b"a", 6).unwrap(), None, "nothing landed");
    assert_eq!(part.get("m", b"a", 5).unwrap(), Some(b"one".to_vec()));
    // A failover that lost this writer's claim (the part's epoch below the writer's): the
    // writer is behind, not fenced out, and claims again.
    let mut part = PartitionStore::claim(&redis, "t:0").unwrap();
    let epoch: u64 = redis::cmd("HGET")
        .arg("{tm:t:0}:fence")
        .arg("epoch")
        .query(&mut c)
        .unwrap();
    redis::cmd("HSET")
        .arg("{tm:t:0}:fence")
        .arg("epoch")
        .arg(epoch - 1)
        .query::<u64>(&mut c)
        .unwrap();
    let err = part
        .write(&mut |t| t.put("m", 7, b"a", b"three").map(|_| ()))
        .unwrap_err();
    assert!(matches!(&err, StoreError::Behind { .. }), "{err}");
    assert_eq!(part.get("m", b"a", 7).unwrap(), None, "nothing landed");
}

#[test]
fn a_commit_waits_for_a_server_that_comes_back_and_lands_once() {
    if !redis_available("a_commit_waits_for_a_server_that_comes_back_and_lands_once") {
        return;
    }
    let dir = TempDir::new("back");
    let persist = ["--appendonly", "yes", "--appendfsync", "always"];
    let mut server = Server::start(&dir, &persist).expect("redis-server");
    let (port, files) = (server.port, dir.0.join(server.port.to_string()));
    let redis = Redis::connect(&server.url()).unwrap();
    let mut part = PartitionStore::claim(&redis, "t:1")
        .unwrap()
        .with_patience(Duration::from_secs(30));
    part.write(&mut |t| t.put("m", 1, b"a", b"one").map(|_| ()))
        .unwrap();
    // Killed (its log on disk), back on the same port a second later.
    server.kill();
    let back = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1_000));
        Server::start_on(port, &files, &persist).expect("redis-server again")
    });
    part.write(&mut |t| t.put("m", 2, b"a", b"two").map(|_| ()))
        .unwrap();
    let server = back.join().unwrap();
    assert_eq!(part.commits(), Some(2));
    assert_eq!(part.get("m", b"a", 2).unwrap(), Some(b"two".to_vec()));
    let mut c = server.conn().unwrap();
    let seq: u64 = redis::cmd("HGET")
        .arg("{tm:t:1}:fence")
        .arg("seq")
        .query(&mut c)
        .unwrap();
    assert_eq!(seq, 2, "the commit landed once");
    // A server that stays away fails the commit once the patience is spent, naming it.
    drop(server);
    let mut part = part.with_patience(Duration::from_millis(500));
    let err = part
        .write(&mut |t| t.put("m", 3, b"a", b"three").map(|_| ()))
        .unwrap_err();
    assert!(matches!(err, StoreError::Remote { .. }), "{err}");
    assert!(err.to_string().contains(&port.to_string()), "{err}");
}

#[test]
fn a_server_with_a_password_is_reached_with_it_and_messages_never_show_it() {
    if !redis_available("a_server_with_a_password_is_reached_with_it_and_messages_never_show_it") {
        return;
    }
    let dir = TempDir::new("auth");
    let server = Server::start(&dir, &[]).expect("redis-server");
    let port = server.port;
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("s3cr@t")
        .query::<()>(&mut server.conn().unwrap())
        .unwrap();
    // The default user by password, then a user of the server's ACL by name and password.
    let redis = Redis::connect(&format!("redis://:s3cr@t@127.0.0.1:{port}")).unwrap();
    assert!(!redis.name().contains("s3cr"), "{}", redis.name());
    let mut part = PartitionStore::claim(&redis, "t:1").unwrap();
    part.write(&mut |t| t.put("m", 1, b"a", b"one").map(|_| ()))
        .unwrap();
    redis::cmd("ACL")
        .arg("SETUSER")
        .arg("app")
        .arg("on")
        .arg(">pw2")
        .arg("~*")
        .arg("+@all")
        .query::<()>(&mut {
            let mut c = redis::Client::open(format!("redis://:s3cr%40t@127.0.0.1:{port}"))
                .unwrap()
                .get_connection()
                .unwrap();
            redis::cmd("PING").query::<String>(&mut c).unwrap();
            c
        })
        .unwrap();
    let app = Redis::connect(&format!("redis://app:pw2@127.0.0.1:{port}")).unwrap();
    let part = PartitionStore::reader(&app, "t:1").unwrap();
    assert_eq!(part.get("m", b"a", 1).unwrap(), Some(b"one".to_vec()));
    // A wrong password, or none, is refused, naming the server but never the password.
    for url in [
        format!("redis://:wrong-pw@127.0.0.1:{port}"),
        format!("redis://127.0.0.1:{port}"),
    ] {
        let err = match Redis::connect(&url) {
            Ok(r) => PartitionStore::claim(&r.with_patience(Duration::from_millis(200)), "t:1")
                .err()
                .expect("refused"),
            Err(e) => e,
        };
        let text = err.to_string();
        assert!(text.contains(&port.to_string()), "{text}");
        assert!(
            !text.contains("wrong-pw") && !text.contains("s3cr"),
            "{text}"
        );
    }
}

#[test]
fn a_master_killed_mid_run_fails_over_and_the_part_answers_as_one_run() {
    if !redis_available("a_master_killed_mid_run_fails_over_and_the_part_answers_as_one_run") {
        return;
    }
    let dir = TempDir::new("failover");
    // Three masters with a replica each; a master unreachable for a second is failed over.
    let mut nodes = start_cluster_with(&dir, 1, 1000);
    let config = config("");
    let events = events_n(13, true, 60_000);
    let file = write(&dir, "in.csv", &csv(&events));
    let mut want = MemStore::default();
    let (want_report, _) = run(&config, &mut want, &file, false);
    let seeds: Vec<String> = nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect();
    let redis = Redis::connect(&format!("redis://{}", seeds.join(",")))
        .unwrap()
        .with_patience(Duration::from_secs(60));
    let master = master_of(&nodes[0], "{tm:flows:0}:rows");
    let index = nodes.iter().position(|n| n.port == master).unwrap();
    let mut victim = nodes.remove(index);
    // The master of the part's slot is killed once the part holds 10 commits.
    let killer = std::thread::spawn(move || {
        let started = std::time::Instant::now();
        while fence_seq(&victim) < 10 && started.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(2));
        }
        victim.kill();
        started.elapsed()
    });
    // As a worker does: a run whose part lost commits in the failover starts again from what
    // the part holds, under a new claim.
    let mut restarts = 0;
    let report = loop {
        let mut part = PartitionStore::claim(&redis, "flows:0").unwrap();
        let r = pipeline::run(
            &config,
            &mut part,
            RunOptions {
                inputs: vec![file.clone()],
                threads: 1,
                ..RunOptions::default()
            },
            &mut |_: &AlertOut| {},
        );
        match r {
            Ok(r) => break r,
            Err(tidemark_stream::RunError::Store(StoreError::Behind { .. })) if restarts < 5 => {
                restarts += 1;
            }
            Err(e) => panic!("{e}"),
        }
    };
    let killed_after = killer.join().unwrap();
    assert!(
        killed_after < Duration::from_secs(60),
        "the master was killed mid-run"
    );
    assert_eq!(report.records, want_report.records, "{report:?}");
    let merged = MergedStore::open(&redis).unwrap();
    assert_same_answers(&merged, &want, &events);
    eprintln!("failover: master killed after {killed_after:?}, {restarts} restarts");
}

/// The commits the part `flows:0`'s fence holds, read from `server` directly (0 if it cannot
/// be read).
fn fence_seq(server: &Server) -> u64 {
    server
        .conn()
        .and_then(|mut c| {
            redis::cmd("HGET")
                .arg("{tm:flows:0}:fence")
                .arg("seq")
                .query::<Option<u64>>(&mut c)
                .ok()
                .flatten()
        })
        .unwrap_or(0)
}
