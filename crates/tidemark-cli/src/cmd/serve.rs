//! `tidemark serve`: a store's answers over HTTP — the JSON API, Prometheus `/metrics` with
//! each estimate's bounds, and a live dashboard at `/` (crates/tidemark-serve). It reads the
//! store as `tidemark query` does, beside a run that writes it, and never takes the writer.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tidemark_serve::{Options, Remote, RunHealth, ServeError, Server};
use tidemark_stream::store::Store;

use crate::cmd::check::store_error;
use crate::UsageError;

/// Arguments of `tidemark serve`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The store written by `tidemark run`.
    #[arg(long, value_name = "FILE", default_value = "tidemark.db")]
    pub db: PathBuf,
    /// Serve the parts that `tidemark run --store` workers keep in Redis instead of a file:
    /// `redis://host:port[,host:port…]`, read merged (as `tidemark query --store`).
    #[arg(long, value_name = "URL", conflicts_with = "db")]
    pub store: Option<String>,
    #[command(flatten)]
    pub flags: Flags,
}

/// How to serve: the flags `tidemark serve` and `tidemark run --serve` share.
#[derive(clap::Args, Debug)]
pub struct Flags {
    /// Address and port to listen on (loopback unless told otherwise; port 0 picks one).
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:9464")]
    pub listen: String,
    /// A file holding a bearer token that every request must carry
    /// (`Authorization: Bearer TOKEN`; a browser opens the dashboard at `/?access_token=TOKEN`).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Keys per metric in /metrics: the largest window estimates (1 to 10,000).
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub top: usize,
    /// The alert lines `tidemark run` printed (JSON lines, redirected to a file), which
    /// /api/v1/alerts and the dashboard read: the store itself keeps no alerts.
    #[arg(long, value_name = "FILE")]
    pub alerts: Option<PathBuf>,
}

/// `flag`'s address and port.
fn address(flag: &'static str, text: &str) -> anyhow::Result<SocketAddr> {
    text.parse().map_err(|_| {
        UsageError::flag(
            flag,
            format!("expected an address and port like 127.0.0.1:9464, got {text:?}"),
        )
    })
}

/// Says where the server listens, on standard error (where a script reads the port picked
/// for port 0), with a note when it is reachable from other machines.
fn announce(db: &Path, bound: SocketAddr, has_token: bool) {
    if !bound.ip().is_loopback() {
        eprintln!(
            "tidemark: note: listening on {bound}, reachable from other machines{}",
            if has_token {
                ""
            } else {
                ", without a token (--token-file)"
            }
        );
    }
    eprintln!("tidemark: serving {} on http://{bound}/", db.display());
}

/// A server on `db` with `flags`, bound (`listen_flag` names the flag of the address in
/// errors; `run` is the counts of a run it serves beside), and whether it asks for a token.
fn bind(
    db: &Path,
    flags: Flags,
    listen_flag: &'static str,
    run: Option<Arc<RunHealth>>,
    remote: Option<Remote>,
) -> anyhow::Result<(Server, bool)> {
    let top_flag = if listen_flag == "--serve" {
        "--serve-top"
    } else {
        "--top"
    };
    let token_flag = if listen_flag == "--serve" {
        "--serve-token-file"
    } else {
        "--token-file"
    };
    let addr = address(listen_flag, &flags.listen)?;
    if !(1..=tidemark_serve::MAX_TOP).contains(&flags.top) {
        return Err(UsageError::flag(
            top_flag,
            format!(
                "expected 1 to {}, got {}",
                tidemark_serve::MAX_TOP,
                flags.top
            ),
        ));
    }
    let has_token = flags.token_file.is_some();
    let mut options = Options::new(db);
    options.token_file = flags.token_file;
    options.top = flags.top;
    options.alerts = flags.alerts;
    options.run = run;
    options.remote = remote;
    let server = Server::bind(&addr.to_string(), options).map_err(|e| match e {
        ServeError::Bind { .. } => UsageError::flag(listen_flag, e),
        ServeError::TokenFile { .. } | ServeError::BadToken { .. } => {
            UsageError::flag(token_flag, e)
        }
        ServeError::Store { path, source } => store_error(&path, *source),
        e => anyhow::anyhow!(e),
    })?;
    Ok((server, has_token))
}

/// Starts the server of `tidemark run --serve ADDR` in a thread of its own: the same server
/// as `tidemark serve` on the run's store (read-only, beside the run's writer), whose
/// `/metrics` adds the run's own counts from the returned snapshot, which the run adds to as
/// it goes (atomics: a client never holds the run up).
pub fn beside_run(flags: Flags, db: &Path) -> anyhow::Result<Arc<RunHealth>> {
    let health = Arc::new(RunHealth::new());
    let (server, has_token) = bind(db, flags, "--serve", Some(Arc::clone(&health)), None)?;
    announce(db, server.local_addr()?, has_token);
    std::thread::Builder::new()
        .name("tidemark-serve".into())
        .spawn(move || {
            if let Err(e) = server.run() {
                eprintln!("tidemark: the server stopped (the run goes on): {e}");
            }
        })?;
    Ok(health)
}

/// Runs `tidemark serve` until it is stopped.
pub fn run(args: Args) -> anyhow::Result<()> {
    if let Some(url) = &args.store {
        let server =
            tidemark_cluster::Server::connect(url).map_err(|e| UsageError::flag("--store", e))?;
        let remote = Remote {
            name: url.clone(),
            open: Arc::new(move || {
                let parts = tidemark_cluster::MergedStore::open(&server)?;
                Ok(Box::new(parts) as Box<dyn Store + Send + Sync>)
            }),
        };
        let name = PathBuf::from(url);
        let (server, has_token) = bind(&name, args.flags, "--listen", None, Some(remote))?;
        announce(&name, server.local_addr()?, has_token);
        server.run()?;
        return Ok(());
    }
    if !args.db.exists() {
        return Err(UsageError::file(args.db.display(), "no such store"));
    }
    let (server, has_token) = bind(&args.db, args.flags, "--listen", None, None)?;
    announce(&args.db, server.local_addr()?, has_token);
    server.run()?;
    Ok(())
}
