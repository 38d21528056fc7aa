//! Helpers shared by the CLI's integration tests: run the binary, read its output.
#![allow(dead_code)] // each test file uses its own subset

use std::io::{BufRead, Read, Write};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// How long a command of the tests may take: past it the command is killed and the test
/// fails with what it said, rather than hold the suite (a timeout, not a measure of speed).
pub const COMMAND_LIMIT: std::time::Duration = std::time::Duration::from_secs(600);

/// Runs `tidemark args…` with `stdin` on its standard input.
pub fn tidemark(args: &[&str], stdin: &(impl AsRef<[u8]> + ?Sized)) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tidemark"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    // Written from another thread while others drain stdout and stderr: a command that
    // answers as it reads (alerts) would otherwise fill its pipe and wait on us forever.
    // A command that stops reading early (a usage error) closes its stdin: not our failure.
    let mut input = child.stdin.take().unwrap();
    let bytes = stdin.as_ref().to_vec();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&bytes);
    });
    let out = wait_within(child, &format!("tidemark {args:?}"), COMMAND_LIMIT);
    writer.join().expect("the stdin writer does not panic");
    out
}

/// Waits for `child` to end, reading its standard output and error (when piped) meanwhile;
/// past `limit` kills it and panics with what it said, naming it as `what`.
pub fn wait_within(
    mut child: std::process::Child,
    what: &str,
    limit: std::time::Duration,
) -> Output {
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut all = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut all);
            }
            all
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let pid = child.id();
    let (done, ended) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait());
    });
    let status = match ended.recv_timeout(limit) {
        Ok(status) => status.unwrap(),
        Err(_) => {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            let said = stderr.join().unwrap_or_default();
            panic!(
                "{what} did not end within {limit:?}: killed; it said: {}",
                String::from_utf8_lossy(&said)
            );
        }
    };
    Output {
        status,
        stdout: stdout.join().expect("the stdout reader does not panic"),
        stderr: stderr.join().expect("the stderr reader does not panic"),
    }
}

/// Opens the named pipe `path` for writing, which waits until `child` opens it for reading;
/// fails the test, rather than wait for ever, if the child ends first or 60 s pass (the
/// opening thread is then left blocked: the test is over).
pub fn open_pipe_for(child: &mut std::process::Child, path: &std::path::Path) -> std::fs::File {
    let (opened, open) = std::sync::mpsc::channel();
    let to_open = path.to_path_buf();
    std::thread::spawn(move || {
        let _ = opened.send(std::fs::OpenOptions::new().write(true).open(&to_open));
    });
    let started = std::time::Instant::now();
    loop {
        if let Ok(file) = open.recv_timeout(std::time::Duration::from_millis(50)) {
            return file.expect("the named pipe opens for writing");
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "the run ended ({status}) before it opened {}",
                path.display()
            );
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "the run did not open {} within 60 s",
            path.display()
        );
    }
}

/// Asserts the command succeeded, showing its stderr if not.
pub fn ok(out: &Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Each stdout line, parsed as JSON.
pub fn json_lines(out: &Output) -> Vec<serde_json::Value> {
    String::from_utf8(out.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect()
}

/// A path in this test binary's own temporary directory.
pub fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tidemark-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// `user-i` lines for `i` in `range`.
pub fn lines(range: std::ops::Range<u64>) -> String {
    range.map(|i| format!("user-{i}\n")).collect()
}

/// A fresh directory for one test: `<temp>/tidemark-<tag>-<pid>`, emptied first.
pub fn dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tidemark-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A path as an argument.
pub fn s(p: &std::path::Path) -> &str {
    p.to_str().expect("test paths are UTF-8")
}

/// A running `tidemark serve`, stopped when dropped.
pub struct Served {
    pub child: std::process::Child,
    pub addr: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `tidemark serve --listen 127.0.0.1:0 ARGS` and reads the address it bound.
pub fn serve(args: &[&str]) -> Served {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tidemark"))
        .arg("serve")
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    Served { child, addr }
}

/// GET `path`: (status, body).
pub fn get(addr: &str, path: &str) -> (u16, String) {
    let mut st = std::net::TcpStream::connect(addr).unwrap();
    st.set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    write!(
        st,
        "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    st.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    (
        head.split(' ').nth(1).unwrap().parse().unwrap(),
        body.to_string(),
    )
}
