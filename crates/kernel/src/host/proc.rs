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

/// A `/proc` file kept open and read again from its start each time: whoever holds one
/// needs no new descriptor to read it, so a flood of connections that exhausts the process's
/// descriptors cannot make a running sampler fail.
pub struct ProcFile<T> {
    file: std::fs::File,
    name: &'static str,
    parse: fn(&str) -> Result<T, ParseError>,
    /// The last text read, kept so that a sampler's reads allocate nothing.
    text: String,
}

impl<T> ProcFile<T> {
    pub(crate) fn open(
        name: &'static str,
        parse: fn(&str) -> Result<T, ParseError>,
    ) -> Result<Self, ReadError> {
        let file =
            std::fs::File::open(name).map_err(|source| ReadError::Io { file: name, source })?;
        Ok(ProcFile {
            file,
            name,
            parse,
            text: String::new(),
        })
    }

    /// Reads the file's current text (the kernel makes it anew on each read from the start)
    /// and parses it.
    pub fn read(&mut self) -> Result<T, ReadError> {
        use std::io::{Read, Seek, SeekFrom};
        self.text.clear();
        self.file
            .seek(SeekFrom::Start(0))
            .and_then(|_| self.file.read_to_string(&mut self.text))
            .map_err(|source| ReadError::Io {
                file: self.name,
                source,
            })?;
        Ok((self.parse)(&self.text)?)
    }
}
