//! The listener and its bounded worker pool.
//!
//! One thread accepts; a fixed number of workers (64 by default) each take a connection from a
//! queue of bounded length (64 by default) and answer its requests, each read within the
//! head's limits, for as long as the client keeps the connection and sends the next request
//! within [`KEEP_IDLE`] — and no connection waits in the queue: a worker whose connection is
//! idle closes it within [`IDLE_SLICE`] of one arriving there. When every worker is busy and
//! the queue is full, the accepting thread answers 503 itself (a few bytes the socket's buffer
//! takes at once) and closes: load past the pool's bound is refused, never queued without
//! limit. A worker is held at most the head's deadline by a silent or trickling client, and a
//! response's write at most its own timeout, so the pool cannot be stalled for long by anyone.
//!
//! Persistent connections are what HTTP/1.1 clients use (Prometheus, Grafana, browsers): a
//! request on one costs no connection set-up or tear-down, about half of a one-key answer's
//! CPU when every request came on a connection of its own.
//!
//! The server keeps one read-only handle of the store between requests (see
//! [`crate::api::App`]): it never holds the writer's lock, so a `tidemark run` can start,
//! stop and resume beside it. A thread computes `/metrics`' answer ahead after each
//! checkpoint while something scrapes ([`crate::api::App::warm`]).

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::api::App;
use crate::error::ServeError;
use crate::http::{self, Conn, Limits, ReadError, Response};
use crate::Options;

/// A bound server, ready to [`Server::run`].
pub struct Server {
    listener: TcpListener,
    app: Arc<App>,
    workers: usize,
    queue: usize,
    limits: Limits,
}

impl Server {
    /// Binds `addr` (port 0 picks a free port) and checks `options`: the store exists and
    /// opens, the token file reads.
    pub fn bind(addr: &str, options: Options) -> Result<Server, ServeError> {
        let app = App::new(&options)?;
        let listener = TcpListener::bind(addr).map_err(|source| ServeError::Bind {
            addr: addr.to_string(),
            source,
        })?;
        Ok(Server {
            listener,
            app: Arc::new(app),
            workers: options.workers.max(1),
            queue: options.queue,
            limits: options.limits,
        })
    }

    /// The address it listens on (with the port picked for port 0).
    pub fn local_addr(&self) -> Result<SocketAddr, ServeError> {
        self.listener
            .local_addr()
            .map_err(|source| ServeError::Bind {
                addr: "the bound socket".to_string(),
                source,
            })
    }

    /// Serves until the process ends.
    pub fn run(self) -> Result<(), ServeError> {
        let (tx, rx): (SyncSender<TcpStream>, Receiver<TcpStream>) = mpsc::sync_channel(self.queue);
        let rx = Arc::new(Mutex::new(rx));
        // Connections accepted and not yet taken by a worker.
        let waiting = Arc::new(AtomicUsize::new(0));
        for i in 0..self.workers {
            let rx = Arc::clone(&rx);
            let app = Arc::clone(&self.app);
            let waiting = Arc::clone(&waiting);
            let limits = self.limits;
            std::thread::Builder::new()
                .name(format!("tidemark-serve-{i}"))
                .spawn(move || work(&rx, &app, &limits, &waiting))
                .map_err(|source| ServeError::Spawn { source })?;
        }
        // `/metrics`' answer is computed ahead after each checkpoint (while something
        // scrapes), so that a scrape finds it ready.
        let app = Arc::clone(&self.app);
        std::thread::Builder::new()
            .name("tidemark-serve-warm".into())
            .spawn(move || loop {
                std::thread::sleep(WARM_EVERY);
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| app.warm()));
            })
            .map_err(|source| ServeError::Spawn { source })?;
        for conn in self.listener.incoming() {
            let stream = match conn {
                Ok(s) => s,
                // Out of file descriptors, or a connection reset before it was taken: wait a
                // moment rather than spin, and go on.
                Err(_) => {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
            };
            waiting.fetch_add(1, Ordering::SeqCst);
            match tx.try_send(stream) {
                Ok(()) => {}
                Err(TrySendError::Full(stream)) => {
                    waiting.fetch_sub(1, Ordering::SeqCst);
                    refuse(stream, &self.limits)
                }
                // Every worker has ended, which only a bug could do: refuse rather than hang.
                Err(TrySendError::Disconnected(stream)) => {
                    waiting.fetch_sub(1, Ordering::SeqCst);
                    refuse(stream, &self.limits)
                }
            }
        }
        Ok(())
    }
}

/// How long a worker keeps an idle persistent connection for its next request.
pub const KEEP_IDLE: Duration = Duration::from_secs(5);

/// How often a worker holding an idle connection looks whether another waits in the queue.
pub const IDLE_SLICE: Duration = Duration::from_millis(50);

/// How often the warming thread looks for a new checkpoint (a file's metadata and one read of
/// the store's seal).
const WARM_EVERY: Duration = Duration::from_millis(100);

/// Answers 503 to a connection the pool has no room for.
fn refuse(mut stream: TcpStream, limits: &Limits) {
    let body = serde_json::json!({
        "error": "the server is busy: every worker is answering and the queue is full; retry"
    });
    let response = Response::json(503, &body).with_header("Retry-After", "1");
    let quick = Limits {
        write_time: Duration::from_millis(100),
        ..*limits
    };
    let _ = http::write_response(&mut stream, &response, false, false, &quick);
}

/// A worker: takes connections off the queue until it closes.
fn work(rx: &Mutex<Receiver<TcpStream>>, app: &App, limits: &Limits, waiting: &AtomicUsize) {
    loop {
        let next = match rx.lock() {
            Ok(guard) => guard.recv(),
            // A worker that panicked while holding the lock cannot have left the receiver
            // half-changed: take it back.
            Err(poisoned) => poisoned.into_inner().recv(),
        };
        let Ok(stream) = next else { return };
        waiting.fetch_sub(1, Ordering::SeqCst);
        let mut conn = Conn::new(stream);
        // A bug in a handler must not take a worker away for good: the connection is
        // dropped (closed) and the worker goes on.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            while serve_one(&mut conn, app, limits) && next_request(&conn, waiting) {}
        }));
    }
}

/// Whether the client of an idle persistent connection sends its next request within
/// [`KEEP_IDLE`], while no other connection waits for a worker.
fn next_request(conn: &Conn, waiting: &AtomicUsize) -> bool {
    if conn.has_pending() {
        return true;
    }
    if conn.stream.set_read_timeout(Some(IDLE_SLICE)).is_err() {
        return false;
    }
    let idle = Instant::now();
    let mut byte = [0u8; 1];
    loop {
        match conn.stream.peek(&mut byte) {
            Ok(0) => return false,
            Ok(_) => return true,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(_) => return false,
        }
        if waiting.load(Ordering::SeqCst) > 0 || idle.elapsed() >= KEEP_IDLE {
            return false;
        }
    }
}

/// Reads one request from `conn`, answers it; whether the connection may carry another.
fn serve_one(conn: &mut Conn, app: &App, limits: &Limits) -> bool {
    let _ = conn.stream.set_nodelay(true);
    let (response, head_only, keep_alive) = match conn.read_request(limits) {
        Ok(request) => (
            app.handle(&request),
            request.method == "HEAD",
            request.keep_alive,
        ),
        Err(ReadError::Gone) => return false,
        Err(ReadError::Slow) => (
            Response::json(
                408,
                &serde_json::json!({"error": "the request's head did not arrive in time"}),
            ),
            false,
            false,
        ),
        Err(ReadError::TooLarge { what }) => (
            Response::json(431, &serde_json::json!({ "error": what })),
            false,
            false,
        ),
        Err(ReadError::Malformed { what }) => (
            Response::json(
                400,
                &serde_json::json!({ "error": format!("not an HTTP/1.1 request: {what}") }),
            ),
            false,
            false,
        ),
    };
    http::write_response(&mut conn.stream, &response, head_only, keep_alive, limits).is_ok()
        && keep_alive
}
