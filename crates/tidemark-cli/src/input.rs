//! Input: lines from files, or from stdin when no file is given, with their location.

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::PathBuf;

use crate::UsageError;

/// Where a line came from.
#[derive(Clone, Debug)]
pub struct Loc {
    /// The file's name as given, or `<stdin>`.
    pub file: String,
    /// 1-based line number.
    pub line: u64,
}

impl Loc {
    /// A usage error at this line.
    pub fn error(&self, message: impl std::fmt::Display) -> anyhow::Error {
        UsageError::Line {
            file: self.file.clone(),
            line: self.line,
            message: message.to_string(),
        }
        .into()
    }
}

/// Calls `f` on every line of every file in order (stdin if `files` is empty), without the
/// line ending. Stops at the first error `f` returns.
pub fn for_each_line(
    files: &[PathBuf],
    mut f: impl FnMut(&Loc, &str) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    if files.is_empty() {
        let stdin = io::stdin();
        return read_lines(stdin.lock(), "<stdin>", &mut f);
    }
    for path in files {
        let name = path.display().to_string();
        let file = File::open(path).map_err(|e| UsageError::file(&name, e))?;
        read_lines(BufReader::new(file), &name, &mut f)?;
    }
    Ok(())
}

fn read_lines(
    mut reader: impl BufRead,
    name: &str,
    f: &mut impl FnMut(&Loc, &str) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut buf = Vec::new();
    let mut loc = Loc {
        file: name.to_string(),
        line: 0,
    };
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .map_err(|e| UsageError::file(name, e))?;
        if n == 0 {
            return Ok(());
        }
        loc.line += 1;
        let mut bytes = &buf[..];
        if let Some(rest) = bytes.strip_suffix(b"\n") {
            bytes = rest;
        }
        if let Some(rest) = bytes.strip_suffix(b"\r") {
            bytes = rest;
        }
        let line = std::str::from_utf8(bytes).map_err(|e| loc.error(format!("not UTF-8: {e}")))?;
        f(&loc, line)?;
    }
}
