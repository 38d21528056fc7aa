//! Redis `HYLL` values saved to files, as `distinct --merge` reads them: the value's bytes,
//! or the value and the one newline `redis-cli --raw GET` writes after it; anything else
//! after a value, or redis-cli's quoted output, is refused with how to save one. And the
//! README's union of day files and a Redis value, as written, against a real redis-cli.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{dir, json_lines, lines, ok, s, tidemark};

/// `distinct --json` on `args`: its one row's estimate, asserting exit 0.
fn estimate(args: &[&str], stdin: &str) -> f64 {
    let out = tidemark(&[args, &["--json"]].concat(), stdin);
    ok(&out);
    json_lines(&out)[0]["estimate"].as_f64().unwrap()
}

/// A Redis value of `user-i` for `i` in `range`, saved by `distinct --redis --save` (sparse
/// while small, dense past Redis's 3,000-byte sparse limit), and its estimate.
fn value(d: &Path, name: &str, range: std::ops::Range<u64>) -> (PathBuf, f64) {
    let path = d.join(name);
    let e = estimate(&["distinct", "--redis", "--save", s(&path)], &lines(range));
    (path, e)
}

/// A refusal: exit 2, a message naming `file` and holding each of `words`.
fn refused(args: &[&str], file: &Path, words: &[&str]) {
    let out = tidemark(args, "");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(s(file)), "names the file: {err}");
    for w in words {
        assert!(err.contains(w), "{w:?} in {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_value_followed_by_the_newline_redis_cli_raw_writes_merges_as_the_value() {
    let d = dir("redis-newline");
    for (name, range, encoding) in [("sparse.hyll", 0..300, 1u8), ("dense.hyll", 0..20_000, 0)] {
        let (path, alone) = value(&d, name, range);
        let mut bytes = std::fs::read(&path).unwrap();
        assert_eq!(
            bytes[4], encoding,
            "{name}: the encoding this case is about"
        );
        bytes.push(b'\n');
        let with_newline = d.join(format!("{name}.nl"));
        std::fs::write(&with_newline, &bytes).unwrap();
        assert_eq!(
            estimate(&["distinct", "--merge", s(&with_newline)], ""),
            alone,
            "{name}"
        );
        assert_eq!(
            estimate(&["distinct", "--merge", s(&path), s(&with_newline)], ""),
            alone,
            "{name}: merged with itself"
        );
    }
}

#[test]
fn other_bytes_after_a_value_are_refused_with_how_to_save_one() {
    let d = dir("redis-trailing");
    for (name, range) in [("sparse.hyll", 0..300), ("dense.hyll", 0..20_000)] {
        let (path, _) = value(&d, name, range);
        let bytes = std::fs::read(&path).unwrap();
        for (tag, tail) in [("two", &b"\n\n"[..]), ("crlf", b"\r\n"), ("x", b"x")] {
            let bad = d.join(format!("{name}.{tag}"));
            std::fs::write(&bad, [&bytes[..], tail].concat()).unwrap();
            refused(
                &["distinct", "--merge", s(&bad)],
                &bad,
                &[
                    &format!(
                        "has {} bytes past the end of the Redis HYLL value",
                        tail.len()
                    ),
                    "at most one newline",
                    "redis-cli --raw GET",
                ],
            );
        }
    }
    // A damaged value that is not longer than one says what is wrong, without the advice.
    let (path, _) = value(&d, "short.hyll", 0..300);
    let bytes = std::fs::read(&path).unwrap();
    let cut = d.join("cut.hyll");
    std::fs::write(&cut, &bytes[..bytes.len() - 1]).unwrap();
    let out = tidemark(&["distinct", "--merge", s(&cut)], "");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("corrupted Redis HyperLogLog"), "{err}");
    assert!(!err.contains("redis-cli"), "{err}");
}

#[test]
fn redis_cli_quoted_output_is_refused_with_how_to_save_a_value() {
    let d = dir("redis-quoted");
    // What `redis-cli --no-raw GET` prints for a value: quoted, its bytes escaped.
    let quoted = d.join("quoted.hyll");
    std::fs::write(
        &quoted,
        "\"HYLL\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x80\\x7f\\xff\"\n",
    )
    .unwrap();
    refused(
        &["distinct", "--merge", s(&quoted)],
        &quoted,
        &["in quotes", "redis-cli --raw GET KEY > FILE"],
    );
}

#[test]
fn a_native_sketch_and_a_redis_value_are_refused_with_the_flag_that_makes_them_merge() {
    let d = dir("redis-hashes");
    let native = d.join("day1.tdmk");
    ok(&tidemark(
        &["distinct", "--precision", "12", "--save", s(&native)],
        &lines(0..100),
    ));
    let (redis, _) = value(&d, "value.hyll", 50..150);
    refused(
        &["distinct", "--merge", s(&native), s(&redis)],
        &redis,
        &["different hashes", "--redis"],
    );
}

/// A redis-server on a Unix socket in `d` (no port to collide on), killed when dropped.
struct Server {
    child: std::process::Child,
    socket: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts one, or says on stderr why the test runs without one and returns `None`.
    fn start(d: &Path) -> Option<Server> {
        let found = ["redis-server", "redis-cli"].iter().all(|bin| {
            Command::new(bin)
                .arg("--version")
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        });
        if !found {
            assert_ne!(
                std::env::var("TIDEMARK_REQUIRE_REDIS").as_deref(),
                Ok("1"),
                "TIDEMARK_REQUIRE_REDIS=1 but redis-server or redis-cli is not installed"
            );
            // Past the harness's capture, so that the skip is seen.
            let _ = writeln!(
                std::io::stderr().lock(),
                "\nSKIPPED the redis-cli part of {}: redis-server or redis-cli not found on \
                 PATH (set TIDEMARK_REQUIRE_REDIS=1 to make this a failure)",
                std::thread::current().name().unwrap_or("a test")
            );
            return None;
        }
        let socket = d.join("redis.sock");
        let child = Command::new("redis-server")
            .args(["--port", "0", "--unixsocket", s(&socket)])
            .args(["--save", "", "--appendonly", "no", "--dir", s(d)])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        let server = Server { child, socket };
        let started = Instant::now();
        while server.cli(&["PING"]).stdout != b"PONG\n" {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "redis-server did not answer on {}",
                server.socket.display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(server)
    }

    /// `redis-cli --raw ARGS…` on this server: its output as a pipe takes it.
    fn cli(&self, args: &[&str]) -> std::process::Output {
        Command::new("redis-cli")
            .args(["-s", s(&self.socket), "--raw"])
            .args(args)
            .output()
            .expect("redis-cli runs")
    }
}

#[test]
fn the_readme_union_of_day_files_and_a_redis_value_works_as_written() {
    let d = dir("redis-readme");
    let day = |n: u32, range: std::ops::Range<u64>| {
        let input = d.join(format!("users-day{n}.txt"));
        std::fs::write(&input, lines(range)).unwrap();
        // As the README writes it.
        let save = d.join(format!("day{n}.hyll"));
        ok(&tidemark(
            &["distinct", "--redis", "--save", s(&save), s(&input)],
            "",
        ));
        save
    };
    let (day1, day2) = (day(1, 0..4_000), day(2, 3_000..9_000));
    let saved = d.join("redis-value.hyll");
    // The Redis value: from a real server through `redis-cli --raw GET KEY > FILE` where one
    // runs; else the same bytes and newline, from tidemark's own Redis export.
    let visitors = 8_000..20_000u64;
    match Server::start(&d) {
        Some(server) => {
            let items: Vec<String> = visitors.clone().map(|i| format!("user-{i}")).collect();
            for chunk in items.chunks(1_000) {
                let args: Vec<&str> = ["PFADD", "visitors"]
                    .into_iter()
                    .chain(chunk.iter().map(String::as_str))
                    .collect();
                assert!(server.cli(&args).status.success());
            }
            let get = server.cli(&["GET", "visitors"]);
            assert!(get.status.success());
            assert!(get.stdout.starts_with(b"HYLL") && get.stdout.ends_with(b"\n"));
            std::fs::write(&saved, &get.stdout).unwrap();
        }
        None => {
            let (bare, _) = value(&d, "bare.hyll", visitors.clone());
            let mut bytes = std::fs::read(bare).unwrap();
            bytes.push(b'\n');
            std::fs::write(&saved, bytes).unwrap();
        }
    }
    // The union is the sketch of every item: Redis mode counts it as PFCOUNT would.
    let union = estimate(&["distinct", "--merge", s(&day1), s(&day2), s(&saved)], "");
    assert_eq!(union, estimate(&["distinct", "--redis"], &lines(0..20_000)));
}
