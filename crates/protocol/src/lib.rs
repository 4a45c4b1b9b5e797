//! What oscil's reader and daemon say to each other: the control protocol and its
//! handshake, the key, the sample records, the reading pattern's timetable, the clock
//! exchange and the markers, and the text a peer may send.

pub mod absent;
pub mod auth;
pub mod clock;
pub mod control;
pub mod error_text;
pub mod key;
pub mod markers;
pub mod pattern;
pub mod probe;
pub mod proof;
pub mod records;
pub mod request;
pub mod text;
pub mod trace;

pub use pattern::{PatternConfig, PhaseSpan, SlowRate, SlowRule};
pub use records::{HostSample, Phase, ReaderSample, SenderSample, Side};
