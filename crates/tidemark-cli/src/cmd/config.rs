//! `tidemark config`: the reference of every pipeline config key, and the check of a config
//! file without running it.

use std::path::PathBuf;
use tidemark_cli::{out, outln};

use tidemark_stream::config::{Config, REFERENCE};

use crate::UsageError;

/// Arguments of `tidemark config`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Validate this config file (exit 2 naming the key that is wrong) instead of printing
    /// the reference.
    #[arg(long, value_name = "FILE")]
    pub check: Option<PathBuf>,
}

/// Runs `tidemark config`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let Some(path) = args.check else {
        out!("{REFERENCE}");
        return Ok(());
    };
    let name = path.display().to_string();
    let text = crate::input::read_config(&path)?;
    let config = Config::from_toml(&text).map_err(|e| UsageError::file(&name, e))?;
    let metrics: Vec<String> = config
        .metrics
        .iter()
        .map(|m| format!("{} ({})", m.name, m.kind.name()))
        .collect();
    outln!(
        "{name}: a valid config: {} metric{}: {}",
        metrics.len(),
        if metrics.len() == 1 { "" } else { "s" },
        metrics.join(", ")
    );
    Ok(())
}
