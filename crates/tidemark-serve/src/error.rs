//! The server's errors: what stops it from starting ([`ServeError`]), and what one request
//! answers instead of a result ([`ApiError`], a status code and a JSON body naming the bad
//! parameter).

use core::fmt;
use std::path::PathBuf;

/// The server cannot start.
#[derive(Debug)]
#[non_exhaustive]
pub enum ServeError {
    /// The listening address cannot be bound.
    Bind {
        /// The address asked for.
        addr: String,
        /// The system's error.
        source: std::io::Error,
    },
    /// The token file cannot be read.
    TokenFile {
        /// The file.
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
    /// The token file holds no token (nothing but white space), or more than a line of one.
    BadToken {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        what: &'static str,
    },
    /// The store to serve is not there, or cannot be opened.
    Store {
        /// The file.
        path: PathBuf,
        /// Why it cannot be opened (boxed: the error is large, and rare).
        source: Box<tidemark_stream::store::StoreError>,
    },
    /// A thread of the worker pool cannot be started.
    Spawn {
        /// The system's error.
        source: std::io::Error,
    },
}

impl fmt::Display for ServeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServeError::Bind { addr, source } => write!(f, "cannot listen on {addr}: {source}"),
            ServeError::TokenFile { path, source } => {
                write!(f, "cannot read token file {}: {source}", path.display())
            }
            ServeError::BadToken { path, what } => {
                write!(f, "token file {} {what}", path.display())
            }
            ServeError::Store { path, source } => {
                write!(f, "cannot serve store {}: {source}", path.display())
            }
            ServeError::Spawn { source } => write!(f, "cannot start a worker thread: {source}"),
        }
    }
}

impl std::error::Error for ServeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ServeError::Bind { source, .. }
            | ServeError::TokenFile { source, .. }
            | ServeError::Spawn { source } => Some(source),
            ServeError::Store { source, .. } => Some(source.as_ref()),
            ServeError::BadToken { .. } => None,
        }
    }
}

/// A request that gets an error instead of an answer: its status, a sentence, and the query
/// parameter at fault if one is.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// The HTTP status code.
    pub status: u16,
    /// What went wrong, for a person.
    pub message: String,
    /// The parameter at fault (`window`, `n`), if one is.
    pub parameter: Option<String>,
}

impl ApiError {
    /// 400: a parameter is missing, repeated, unknown or out of its bounds.
    pub fn bad(parameter: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            status: 400,
            message: message.into(),
            parameter: Some(parameter.to_string()),
        }
    }

    /// 404 for a metric the store does not have.
    pub fn no_metric(message: impl Into<String>) -> ApiError {
        ApiError {
            status: 404,
            message: message.into(),
            parameter: Some("metric".to_string()),
        }
    }

    /// An error about no parameter.
    pub fn status(status: u16, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            parameter: None,
        }
    }

    /// 503: the store cannot be read now (absent, locked, damaged, nothing committed yet).
    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError::status(503, message)
    }

    /// The JSON body: `{"error": "...", "parameter": "..."}` (`parameter` absent when none).
    pub fn body(&self) -> serde_json::Value {
        let mut o = serde_json::Map::new();
        o.insert("error".into(), self.message.clone().into());
        if let Some(p) = &self.parameter {
            o.insert("parameter".into(), p.clone().into());
        }
        serde_json::Value::Object(o)
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.parameter {
            Some(p) => write!(f, "{} (parameter {p}): {}", self.status, self.message),
            None => write!(f, "{}: {}", self.status, self.message),
        }
    }
}

impl std::error::Error for ApiError {}
