//! `tidemark run --store redis://… --part P`: a log split by key into parts, each run into its
//! own part of a real Redis server (one part in two runs, the second claiming it again), reads
//! back through `tidemark query --store` as one run of the whole log into a file; and the
//! flags refuse what they cannot do, naming it.

mod common;
#[path = "../../tidemark-cluster/tests/common/mod.rs"]
mod redis_common;

use common::{dir, get, s, serve, tidemark};
use redis_common::{redis_available, Server, TempDir};
use tidemark_stream::flowgen::{FlowLog, FlowSpec};

/// The fan-out detector, late events merged into their stored buckets: whichever part a
/// late flow lands in, every flow is counted, so the parts' buckets are the whole run's.
const CONFIG: &str = r#"
[input]
format = "csv"
time_field = "ts"
time_format = "epoch_s"
[[metric]]
name = "fanout"
kind = "distinct"
key = ["src_ip"]
item = ["dst_ip", "dst_port"]
bucket = "1m"
window = "5m"
precision = 10
retention = "1d"
allowed_lateness = "30s"
late = "merge"
[[metric.alert]]
above = 500
margin = 3.0
"#;

/// The log's lines split in two by source address (its first field after the time).
fn split(csv: &str) -> [String; 2] {
    let mut lines = csv.lines();
    let header = lines.next().unwrap();
    let col = header.split(',').position(|f| f == "src_ip").unwrap();
    let mut parts = [format!("{header}\n"), format!("{header}\n")];
    for l in lines {
        let key = l.split(',').nth(col).unwrap();
        let p = key.bytes().map(usize::from).sum::<usize>() % 2;
        parts[p].push_str(l);
        parts[p].push('\n');
    }
    parts
}

fn ok(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn sorted_lines(text: &str) -> Vec<String> {
    let mut v: Vec<String> = text.lines().map(str::to_string).collect();
    v.sort();
    v
}

#[test]
fn parts_in_redis_answer_as_one_run_into_a_file() {
    if !redis_available("parts_in_redis_answer_as_one_run_into_a_file") {
        return;
    }
    let tmp = TempDir::new("cli-parts");
    let server = Server::start(&tmp, &[]).expect("redis-server");
    let d = dir("scale-out");
    let config = d.join("c.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let log = FlowLog::generate(&FlowSpec {
        minutes: 12,
        users: 600,
        scanners: 2,
        seed: 9,
        ..FlowSpec::default()
    })
    .to_csv();
    let whole = d.join("whole.csv");
    std::fs::write(&whole, &log).unwrap();
    let db = d.join("whole.db");
    let want_alerts = ok(&tidemark(
        &[
            "run",
            "--quiet",
            "--close",
            "--config",
            s(&config),
            "--db",
            s(&db),
            s(&whole),
        ],
        "",
    ));
    assert!(!want_alerts.is_empty(), "the scanners alert");
    let url = server.url();
    let [p0, p1] = split(&log);
    let mut got_alerts = String::new();
    let f0 = d.join("p0.csv");
    std::fs::write(&f0, &p0).unwrap();
    got_alerts += &ok(&tidemark(
        &[
            "run",
            "--quiet",
            "--close",
            "--config",
            s(&config),
            "--store",
            &url,
            "--part",
            "flows:0",
            s(&f0),
        ],
        "",
    ));
    // Part 1 in two runs, its buckets left open between them.
    let f1 = d.join("p1.csv");
    let cut = p1.len() / 2 + p1[p1.len() / 2..].find('\n').unwrap() + 1;
    std::fs::write(&f1, &p1[..cut]).unwrap();
    got_alerts += &ok(&tidemark(
        &[
            "run",
            "--quiet",
            "--config",
            s(&config),
            "--store",
            &url,
            "--part",
            "flows:1",
            s(&f1),
        ],
        "",
    ));
    std::fs::write(&f1, &p1).unwrap();
    got_alerts += &ok(&tidemark(
        &[
            "run",
            "--quiet",
            "--close",
            "--config",
            s(&config),
            "--store",
            &url,
            "--part",
            "flows:1",
            s(&f1),
        ],
        "",
    ));
    assert_eq!(sorted_lines(&got_alerts), sorted_lines(&want_alerts));
    for at in ["1700000400", "1700000700"] {
        let q = |store: &[&str]| {
            let mut args = vec![
                "query", "--metric", "fanout", "--window", "5m", "--json", "--at", at,
            ];
            args.extend_from_slice(store);
            ok(&tidemark(&args, ""))
        };
        let want = q(&["--db", s(&db)]);
        assert!(want.lines().count() > 100, "{want}");
        assert_eq!(q(&["--store", &url]), want, "at {at}");
        let top = |store: &[&str]| {
            let mut args = vec![
                "query", "--metric", "fanout", "--window", "5m", "--top", "3", "--at", at,
            ];
            args.extend_from_slice(store);
            ok(&tidemark(&args, ""))
        };
        assert_eq!(top(&["--store", &url]), top(&["--db", s(&db)]));
    }
    // `serve --store` answers as `serve --db` of the whole run.
    let (parts, file) = (serve(&["--store", &url]), serve(&["--db", s(&db)]));
    for path in [
        "/api/v1/top?metric=fanout&n=5&window=5m&at=1700000700",
        "/api/v1/query?metric=fanout&key=10.9.0.1&window=5m&at=1700000400",
        "/api/v1/series?metric=fanout&key=10.9.0.1&window=5m&from=1700000300&to=1700000700",
    ] {
        let want = get(&file.addr, path);
        assert!(
            want.0 == 200 && want.1.contains("estimate"),
            "{path}: {want:?}"
        );
        assert_eq!(get(&parts.addr, path), want, "{path}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn store_flags_refuse_what_they_cannot_do_and_say_which() {
    let d = dir("scale-out-flags");
    let config = d.join("c.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let input = d.join("in.csv");
    std::fs::write(&input, "ts,src_ip,dst_ip,dst_port\n").unwrap();
    let err = |args: &[&str]| {
        let out = tidemark(args, "");
        assert!(!out.status.success(), "{args:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let run = |store: &str, part: &str| {
        err(&[
            "run",
            "--config",
            s(&config),
            "--store",
            store,
            "--part",
            part,
            s(&input),
        ])
    };
    let e = run("http://127.0.0.1:1", "p");
    assert!(e.contains("--store") && e.contains("redis://"), "{e}");
    let e = run("redis://127.0.0.1:0", "p");
    assert!(e.contains("--store") && e.contains("port"), "{e}");
    // Nothing listens there (port 1 is never a Redis server's).
    let e = run("redis://127.0.0.1:1", "p");
    assert!(e.contains("--store") && e.contains("127.0.0.1:1"), "{e}");
    let e = err(&[
        "run",
        "--config",
        s(&config),
        "--store",
        "redis://h:1",
        s(&input),
    ]);
    assert!(e.contains("--part"), "{e}");
    let e = err(&["run", "--config", s(&config), "--part", "p", s(&input)]);
    assert!(e.contains("--store"), "{e}");
    let e = err(&[
        "query",
        "--store",
        "redis://h",
        "--metric",
        "m",
        "--window",
        "5m",
    ]);
    assert!(e.contains("--store") && e.contains("host:port"), "{e}");
    if redis_available("store_flags_refuse_what_they_cannot_do_and_say_which") {
        let tmp = TempDir::new("cli-flags");
        let server = Server::start(&tmp, &[]).expect("redis-server");
        let e = run(&server.url(), "a b");
        assert!(e.contains("--part") && e.contains("A-Z a-z 0-9"), "{e}");
        let e = run(&server.url(), &"x".repeat(261));
        assert!(e.contains("--part"), "{e}");
        // No part written yet: the query says the store is empty.
        let e = err(&[
            "query",
            "--store",
            &server.url(),
            "--metric",
            "fanout",
            "--window",
            "5m",
        ]);
        assert!(e.contains(&server.url()), "{e}");
        // Publishing needs the module on the server: said before anything is read.
        let e = err(&[
            "run",
            "--config",
            s(&config),
            "--store",
            &server.url(),
            "--part",
            "p",
            "--publish",
            s(&input),
        ]);
        assert!(
            e.contains("--publish") && e.contains("tidemark-redis module"),
            "{e}"
        );
    }
    let e = err(&["run", "--config", s(&config), "--publish", s(&input)]);
    assert!(e.contains("--publish") && e.contains("--store"), "{e}");
    let _ = std::fs::remove_dir_all(&d);
}
