//! The CLI's error kinds and exit codes.

use std::fmt;
use std::process::ExitCode;

/// Bad input or arguments: exit code 2, with a message that says where.
#[derive(Debug)]
pub enum UsageError {
    /// A flag's value is invalid.
    Flag {
        /// The flag, as typed (`--window`).
        flag: &'static str,
        /// What was wrong.
        message: String,
    },
    /// An input line is invalid.
    Line {
        /// The file (`<stdin>` for standard input).
        file: String,
        /// 1-based line number.
        line: u64,
        /// What was wrong.
        message: String,
    },
    /// A saved summary file that is not what was expected; the message is a predicate on
    /// the file ("is a directory, not a saved summary file").
    Saved {
        /// The file.
        file: String,
        /// What is wrong with it, as a predicate.
        message: String,
    },
    /// A file cannot be read or is not what was expected.
    File {
        /// The file.
        file: String,
        /// What was wrong.
        message: String,
    },
}

impl UsageError {
    /// An invalid flag value.
    pub fn flag(flag: &'static str, message: impl fmt::Display) -> anyhow::Error {
        UsageError::Flag {
            flag,
            message: message.to_string(),
        }
        .into()
    }

    /// A saved summary file that is not what was expected, said as a predicate: the message
    /// reads "FILE is …".
    pub fn saved(file: impl fmt::Display, message: impl fmt::Display) -> anyhow::Error {
        UsageError::Saved {
            file: file.to_string(),
            message: message.to_string(),
        }
        .into()
    }

    /// An invalid file.
    pub fn file(file: impl fmt::Display, message: impl fmt::Display) -> anyhow::Error {
        UsageError::File {
            file: file.to_string(),
            message: message.to_string(),
        }
        .into()
    }
}

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UsageError::Flag { flag, message } => write!(f, "invalid {flag}: {message}"),
            UsageError::Line {
                file,
                line,
                message,
            } => write!(f, "{file}:{line}: {message}"),
            UsageError::Saved { file, message } => write!(f, "{file} {message}"),
            UsageError::File { file, message } => write!(f, "{file}: {message}"),
        }
    }
}

impl std::error::Error for UsageError {}

/// Prints the error as `program: error: …` and picks the exit code: 2 for usage errors, 1 for
/// the rest.
pub fn report(program: &str, err: &anyhow::Error) -> ExitCode {
    // A reader that stopped early (`tidemark … | head`) is not a failure of ours.
    let broken_pipe = err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    });
    if broken_pipe {
        return ExitCode::SUCCESS;
    }
    eprintln!("{program}: error: {err:#}");
    if err.downcast_ref::<UsageError>().is_some() {
        ExitCode::from(2)
    } else {
        ExitCode::from(1)
    }
}
