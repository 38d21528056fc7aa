//! The clients Redis users run route every command family of the module: the Rust `redis`
//! crate's cluster client and `redis-cli -c` against a three-master cluster (redis-py's
//! standalone and cluster clients: `tests/python/test_clients.py`, run by
//! `scripts/test-python`). Every value they build is byte for byte the command layer's, and
//! a smart client's commands reach the node owning their key the first time: no node answers
//! one with `MOVED`.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::{error_text, q, redis_available, same, Server, TempDir};
use redis::Value;
use tidemark_redis::command::{run, MemKeyspace};
use tidemark_redis::env::Env;
use tidemark_redis::reply::Reply;

const SCRIPT: &str = include_str!("data/every_family.txt");

/// The script's commands for group `g`.
fn lines(g: u32) -> Vec<String> {
    SCRIPT
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.replace("{g}", &format!("{{g{g}}}")))
        .collect()
}

/// Every key the script makes in group `g`.
fn keys(g: u32) -> Vec<String> {
    ["c", "d", "s", "h", "f", "q", "e", "p", "ps"]
        .iter()
        .map(|k| format!("{{g{g}}}:{k}"))
        .collect()
}

fn words(line: &str) -> Vec<Vec<u8>> {
    line.split_whitespace()
        .map(|w| w.as_bytes().to_vec())
        .collect()
}

/// What the command layer answers to `line`, on the model keyspace.
fn model_reply(model: &mut MemKeyspace, line: &str) -> Result<Reply, String> {
    run(model, Env::at(0), &words(line))
        .reply
        .map_err(|e| e.to_string())
}

fn dump(c: &mut impl redis::ConnectionLike, key: &str) -> Vec<u8> {
    redis::cmd("TM.DUMP").arg(key).query(c).unwrap_or_default()
}

/// Commands a node refused with `MOVED` since its stats were reset.
fn moved(node: &Server) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("errorstats")
        .query(&mut node.conn())
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("errorstat_MOVED:count="))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn live_cluster_clients_route_every_family() {
    if !redis_available("live_cluster_clients_route_every_family") {
        return;
    }
    let dir = TempDir::new("clients");
    let nodes = common::start_cluster(&dir);
    for n in &nodes {
        q(&mut n.conn(), "CONFIG RESETSTAT").unwrap();
    }
    let mut model = MemKeyspace::default();

    // The Rust crate's cluster client: every reply as the command layer's.
    let urls: Vec<String> = nodes.iter().map(Server::url).collect();
    let client = redis::cluster::ClusterClient::new(urls).unwrap();
    let mut c = client.get_connection().unwrap();
    for g in 0..40 {
        for line in lines(g) {
            let want = model_reply(&mut model, &line);
            let got = q(&mut c, &line);
            match (&want, &got) {
                (Ok(w), Ok(v)) => assert!(same(w, v), "{line}: server {v:?}, model {w:?}"),
                (Err(w), Err(e)) => assert_eq!(&error_text(e), w, "{line}"),
                _ => panic!("{line}: server {got:?}, model {want:?}"),
            }
        }
        // TM.LOAD of a value's bytes under another key of the group (same slot).
        let f = format!("{{g{g}}}:f");
        let bytes = dump(&mut c, &f);
        let _: Value = redis::cmd("TM.LOAD")
            .arg(format!("{f}2"))
            .arg(&bytes)
            .query(&mut c)
            .unwrap();
        assert_eq!(dump(&mut c, &format!("{f}2")), bytes);
    }
    for n in &nodes {
        assert_eq!(moved(n), 0, "node {} redirected a command", n.port);
    }

    // redis-cli -c: it follows redirections (it cannot know the slots beforehand).
    let mut input = String::new();
    for g in 40..80 {
        for line in lines(g) {
            model_reply(&mut model, &line).unwrap_or_else(|e| panic!("{line}: {e}"));
            input.push_str(&line);
            input.push('\n');
        }
    }
    let mut cli = Command::new("redis-cli")
        .args(["-c", "-p", &nodes[0].port.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("redis-cli");
    cli.stdin
        .take()
        .expect("redis-cli's stdin")
        .write_all(input.as_bytes())
        .unwrap();
    let out = cli.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        !text.contains("ERR") && !text.contains("WRONGTYPE"),
        "redis-cli -c: {text}"
    );

    // Every value every client built is the command layer's, byte for byte, and groups
    // spread over every master.
    for g in 0..80 {
        for key in keys(g) {
            let want = match model_reply(&mut model, &format!("TM.DUMP {key}")) {
                Ok(Reply::Bulk(b)) => b,
                // The HyperLogLog TOPF wrote: a plain string, compared through GET.
                _ => {
                    let Some(tidemark_redis::command::Slot::Str(s)) =
                        model.keys.get(key.as_bytes())
                    else {
                        panic!("{key}: not in the model")
                    };
                    let got: Vec<u8> = redis::cmd("GET").arg(&key).query(&mut c).unwrap();
                    assert_eq!(&got, s, "{key}");
                    continue;
                }
            };
            assert_eq!(dump(&mut c, &key), want, "{key}");
        }
    }
    for n in &nodes {
        let size: i64 = redis::cmd("DBSIZE").query(&mut n.conn()).unwrap();
        assert!(size > 0, "node {} holds no key: not spread", n.port);
    }
}
