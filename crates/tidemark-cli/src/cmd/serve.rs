//! `tidemark serve`: a store's answers over HTTP — the JSON API, Prometheus `/metrics` with
//! each estimate's bounds, and a live dashboard at `/` (crates/tidemark-serve). It reads the
//! store as `tidemark query` does, beside a run that writes it, and never takes the writer.

use std::net::SocketAddr;
use std::path::PathBuf;

use tidemark_serve::{Options, ServeError, Server};

use crate::cmd::check::store_error;
use crate::UsageError;

/// Arguments of `tidemark serve`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The store written by `tidemark run`.
    #[arg(long, value_name = "FILE", default_value = "tidemark.db")]
    pub db: PathBuf,
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

/// Runs `tidemark serve` until it is stopped.
pub fn run(args: Args) -> anyhow::Result<()> {
    let addr: SocketAddr = args.listen.parse().map_err(|_| {
        UsageError::flag(
            "--listen",
            format!(
                "expected an address and port like 127.0.0.1:9464, got {:?}",
                args.listen
            ),
        )
    })?;
    if !(1..=tidemark_serve::MAX_TOP).contains(&args.top) {
        return Err(UsageError::flag(
            "--top",
            format!(
                "expected 1 to {}, got {}",
                tidemark_serve::MAX_TOP,
                args.top
            ),
        ));
    }
    if !args.db.exists() {
        return Err(UsageError::file(args.db.display(), "no such store"));
    }
    let has_token = args.token_file.is_some();
    let mut options = Options::new(&args.db);
    options.token_file = args.token_file;
    options.top = args.top;
    options.alerts = args.alerts;
    let server = Server::bind(&addr.to_string(), options).map_err(|e| match e {
        ServeError::Bind { .. } => UsageError::flag("--listen", e),
        ServeError::TokenFile { .. } | ServeError::BadToken { .. } => {
            UsageError::flag("--token-file", e)
        }
        ServeError::Store { path, source } => store_error(&path, *source),
        e => anyhow::anyhow!(e),
    })?;
    let bound = server.local_addr()?;
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
    // On standard error, so a script can read the port picked for port 0.
    eprintln!("tidemark: serving {} on http://{bound}/", args.db.display());
    server.run()?;
    Ok(())
}
