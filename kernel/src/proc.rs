//! Errors shared by the `/proc` readers.

use std::io;

/// Text from `/proc` that does not have the expected shape.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {reason}")]
pub struct ParseError {
    /// The file the text came from, e.g. `/proc/net/sockstat`.
    pub file: &'static str,
    /// What was expected and what was found.
    pub reason: String,
}

impl ParseError {
    pub(crate) fn new(file: &'static str, reason: impl Into<String>) -> Self {
        ParseError {
            file,
            reason: reason.into(),
        }
    }
}

/// Reading a `/proc` file failed, or its text did not parse.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be read.
    #[error("reading {file}: {source}")]
    Io {
        file: &'static str,
        source: io::Error,
    },
    /// The file was read but its text has an unexpected shape.
    #[error(transparent)]
    Parse(#[from] ParseError),
}

pub(crate) fn read_file(file: &'static str) -> Result<String, ReadError> {
    std::fs::read_to_string(file).map_err(|source| ReadError::Io { file, source })
}
