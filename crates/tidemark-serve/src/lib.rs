//! tidemark's HTTP server: a store's answers as a JSON API, as Prometheus metrics with their
//! bounds, and as a live dashboard with error bars.
//!
//! - `GET /api/v1/query`, `/api/v1/top`, `/api/v1/series`, `/api/v1/alerts`,
//!   `/api/v1/metrics`: JSON, in the field names of `docs/output.md` (rows with `estimate`,
//!   `low`, `high`, `confidence`, `method`); errors as `{"error": …, "parameter": …}` with
//!   400 for a bad parameter (named), 401 without the token, 404 for an unknown metric or
//!   path, 405 for a method other than GET or HEAD, 503 while the store cannot be read
//!   ([`api`]).
//! - `GET /metrics`: the Prometheus text exposition format: each metric's current window for
//!   its top keys, estimate and bracket, and the pipeline's health as the store records it
//!   ([`prom`]).
//! - `GET /`: a self-contained dashboard (HTML, inline script, SVG: nothing fetched from
//!   elsewhere) over the same JSON API.
//!
//! # Why a small synchronous server
//!
//! Every answer is a read of an embedded file that takes a millisecond or so, with no waiting
//! on other services; a few hundred lines on `std::net` with a bounded pool of threads serve
//! that, with each limit (head size, header count, time to send the head, workers, queue)
//! written where it is enforced. An async stack (tokio with hyper or axum) would bring some
//! hundred crates and most of a minute of build time on the two-core machines this builds on,
//! for concurrency this server does not need and must bound anyway. The Prometheus format is
//! written by hand ([`prom`]) for the same reason: its values are read from the store on each
//! scrape, so a registry of live metric objects (`prometheus-client`) would hold nothing.
//!
//! # Read-only, beside the writer
//!
//! The server never holds the store's writer: it opens the file read-only, as `tidemark
//! query` does (one handle kept between requests, following the writer's commits, opened
//! anew if the file at the path is replaced), and answers through the stream crate's own
//! query functions ([`tidemark_stream::query`]), so a `tidemark run` writes the store while
//! it is served, and each answer is the last checkpoint's.
//!
//! # What a request costs
//!
//! A one-key answer (`/api/v1/query`) reads that key's entry
//! at each bucket start of the window, not every key's; each start is verified against its
//! digest once (read whole) and then checked against what was verified
//! ([`tidemark_stream::store::VerifiedStarts`]), so the first read of a start after it
//! closes costs a scan of that start and later ones a lookup. `/metrics` and `/api/v1/top`
//! rank every key of the window, a scan; their answers are kept until the next checkpoint
//! (the store's seal, and the file's identity, length and modification time, unchanged), and
//! computed once however many requests ask at once. While something scrapes, a thread
//! computes `/metrics`' answer ahead after each checkpoint, so scrapes find it ready.
//! `/api/v1/series` reads its key's buckets once for all its points, and is refused (400)
//! beyond [`series::MAX_SERIES_BUCKETS`] bucket merges, its points × its window's buckets
//! ([`series`]).
//!
//! # Safety
//!
//! It binds to loopback unless told otherwise. With a token (`--token-file`), every path
//! (the dashboard and `/metrics` too) needs `Authorization: Bearer TOKEN` (or, for a browser
//! opening the dashboard, `?access_token=TOKEN`, which the page then sends as the header),
//! compared in constant time. Requests are bounded in size and time ([`http::Limits`]) and
//! in number ([`Options::workers`], [`Options::queue`]); every query parameter is bounded.

pub mod api;
mod ask;
mod error;
mod health;
pub mod http;
mod live;
mod params;
pub mod prom;
mod render;
pub mod series;
mod server;

use std::path::PathBuf;

use tidemark_stream::store::{Store, StoreError};

pub use error::{ApiError, ServeError};
pub use live::RunHealth;
pub use server::{Server, KEEP_IDLE};

/// Opens a store not kept in a file (the parts of `tidemark run --store`), once per request:
/// a store in parts lists its parts again each time.
pub type OpenStore =
    std::sync::Arc<dyn Fn() -> Result<Box<dyn Store + Send + Sync>, StoreError> + Send + Sync>;

/// A store not kept in a file: its name in messages, and how to open it.
#[derive(Clone)]
pub struct Remote {
    /// Its name (the address it is read from).
    pub name: String,
    /// How to open it.
    pub open: OpenStore,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote").field("name", &self.name).finish()
    }
}

/// How the server runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// The store (`tidemark run --db`).
    pub db: PathBuf,
    /// Instead of `db`, a store not in a file.
    pub remote: Option<Remote>,
    /// A file holding the bearer token every request must carry (`None`: no token).
    pub token_file: Option<PathBuf>,
    /// Keys per metric in `/metrics` (the largest window estimates).
    pub top: usize,
    /// The alert lines `tidemark run` printed (JSON lines), which `/api/v1/alerts` reads: the
    /// store does not keep alerts.
    pub alerts: Option<PathBuf>,
    /// Worker threads: requests answered at once.
    pub workers: usize,
    /// Connections waiting for a worker beyond which new ones get 503.
    pub queue: usize,
    /// Bounds on each request.
    pub limits: http::Limits,
    /// The health of the run serving its own store (`tidemark run --serve`), which `/metrics`
    /// adds to what the store records.
    pub run: Option<std::sync::Arc<RunHealth>>,
}

/// The most keys `/metrics` exports per metric (`--top`).
pub const MAX_TOP: usize = 10_000;

impl Options {
    /// Defaults for serving `db`: no token, 100 keys a metric, 64 workers, 64 waiting.
    pub fn new(db: impl Into<PathBuf>) -> Options {
        Options {
            db: db.into(),
            token_file: None,
            top: 100,
            alerts: None,
            workers: 64,
            queue: 64,
            limits: http::Limits::default(),
            run: None,
            remote: None,
        }
    }
}
