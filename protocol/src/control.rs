//! The control protocol between oscil-reader and oscil-daemon.
//!
//! Control messages are JSON objects in frames of a 4-byte big-endian length followed by
//! that many bytes. Decoding is pure (`decode_frame` tells "need more bytes" from
//! "invalid"); `Connection` only moves bytes. Data connections open with a fixed
//! 20-byte `DataHello` that names the session and the flow, then carry only payload.

use std::collections::BTreeMap;

use oscil_kernel::{HostFacts, OptionsInForce, SocketOptions};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::records::{HostSample, SenderSample};

/// Bumped on any incompatible change; both ends refuse a mismatch.
pub const PROTOCOL_VERSION: u32 = 1;

/// A control frame larger than this ends the session: samples of 200 flows are ~60 KB.
pub const MAX_FRAME_BYTES: usize = 4 << 20;

/// The daemon's limit on what a reader sends (a hello, start, stop): small, so a stranger
/// cannot make it hold megabytes before the hello is even checked.
pub const MAX_READER_FRAME_BYTES: usize = 64 << 10;

/// The reader's opening message on the control connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    pub version: u32,
    /// Name and version of the reader, for the daemon's log.
    pub software: String,
    /// The pre-shared key, when the daemon has one (replaced by a challenge-response).
    pub token: Option<String>,
    pub flows: u32,
    /// Socket options the daemon sets on every data connection of the session.
    pub options: SocketOptions,
    pub interval_us: u64,
    /// How long the reader means to run; the daemon ends the session a little after.
    pub duration_us: u64,
}

/// The daemon's acceptance of a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Welcome {
    pub version: u32,
    pub software: String,
    /// Names the session on its data connections.
    pub session_id: u64,
    pub host: HostFacts,
    /// The options read back from a socket after applying the request.
    pub options_in_force: OptionsInForce,
}

/// How a session ended, as one side saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ended {
    /// Why the daemon stopped sending: "reader asked to stop", "session length limit", ...
    pub reason: String,
    /// TcpExt counters that moved during the session on the daemon's host.
    pub tcpext_delta: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ReaderMessage {
    Hello(Hello),
    /// All data connections are open: the daemon starts streaming and its clock.
    Start,
    Stop {
        reason: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum DaemonMessage {
    Welcome(Welcome),
    Refused {
        reason: String,
    },
    /// One interval's samples: every flow of the session and the host.
    Samples {
        host: HostSample,
        flows: Vec<SenderSample>,
    },
    Ended(Ended),
}

/// Why bytes on the control connection are not a message.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The length prefix exceeds the connection's limit.
    #[error("control frame of {len} bytes exceeds the limit of {limit} bytes")]
    TooLarge { len: usize, limit: usize },
    /// The frame is not a JSON message of the expected kind.
    #[error("control frame is not a valid message: {0}")]
    Invalid(#[from] serde_json::Error),
    #[error("control connection: {0}")]
    Io(#[from] std::io::Error),
}

/// Encodes one message as a frame.
pub fn encode_frame<M: Serialize>(message: &M) -> Vec<u8> {
    let body = serde_json::to_vec(message).expect("control messages always serialize");
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
    frame.extend_from_slice(&body);
    frame
}

/// Decodes the first frame in `buf`, of at most `max_bytes`: `Ok(None)` when more bytes are
/// needed, otherwise the message and how many bytes it used.
pub fn decode_frame<M: DeserializeOwned>(
    buf: &[u8],
    max_bytes: usize,
) -> Result<Option<(M, usize)>, FrameError> {
    let Some(prefix) = buf.get(..4) else {
        return Ok(None);
    };
    let len = u32::from_be_bytes(prefix.try_into().expect("4 bytes")) as usize;
    if len > max_bytes {
        return Err(FrameError::TooLarge {
            len,
            limit: max_bytes,
        });
    }
    let Some(body) = buf.get(4..4 + len) else {
        return Ok(None);
    };
    Ok(Some((serde_json::from_slice(body)?, 4 + len)))
}

/// A control connection, or one half of it: buffers reads, writes whole frames.
pub struct Connection<S> {
    stream: S,
    buf: Vec<u8>,
    max_frame_bytes: usize,
}

impl<S> Connection<S> {
    pub fn new(stream: S) -> Self {
        Connection {
            stream,
            buf: Vec::with_capacity(64 << 10),
            max_frame_bytes: MAX_FRAME_BYTES,
        }
    }

    /// Lowers (or raises) the largest frame `read` accepts.
    pub fn with_max_frame_bytes(mut self, max_bytes: usize) -> Self {
        self.max_frame_bytes = max_bytes;
        self
    }

    pub fn get_ref(&self) -> &S {
        &self.stream
    }
}

impl<S: AsyncRead + Unpin> Connection<S> {
    /// Reads the next message; `Ok(None)` when the peer closed cleanly between frames.
    pub async fn read<M: DeserializeOwned>(&mut self) -> Result<Option<M>, FrameError> {
        loop {
            if let Some((message, used)) = decode_frame(&self.buf, self.max_frame_bytes)? {
                self.buf.drain(..used);
                return Ok(Some(message));
            }
            let mut chunk = [0u8; 16 << 10];
            let n = self.stream.read(&mut chunk).await?;
            if n == 0 {
                return if self.buf.is_empty() {
                    Ok(None)
                } else {
                    Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "peer closed in the middle of a frame",
                    )
                    .into())
                };
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

impl<S: AsyncWrite + Unpin> Connection<S> {
    pub async fn write<M: Serialize>(&mut self, message: &M) -> Result<(), FrameError> {
        self.stream.write_all(&encode_frame(message)).await?;
        self.stream.flush().await?;
        Ok(())
    }
}

/// The first bytes on a data connection: which session and which flow it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataHello {
    pub session_id: u64,
    pub flow: u32,
}

impl DataHello {
    pub const LEN: usize = 20;
    /// The first four bytes of every data connection.
    pub const MAGIC: [u8; 4] = *b"OSCD";

    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut out = [0u8; Self::LEN];
        out[..4].copy_from_slice(&Self::MAGIC);
        out[4..8].copy_from_slice(&PROTOCOL_VERSION.to_be_bytes());
        out[8..16].copy_from_slice(&self.session_id.to_be_bytes());
        out[16..20].copy_from_slice(&self.flow.to_be_bytes());
        out
    }

    /// `None` when the bytes are not an oscil data hello of this protocol version.
    pub fn decode(bytes: &[u8; Self::LEN]) -> Option<Self> {
        let word = |range: std::ops::Range<usize>| bytes[range].try_into().expect("sized");
        if bytes[..4] != Self::MAGIC || u32::from_be_bytes(word(4..8)) != PROTOCOL_VERSION {
            return None;
        }
        Some(DataHello {
            session_id: u64::from_be_bytes(bytes[8..16].try_into().expect("8 bytes")),
            flow: u32::from_be_bytes(word(16..20)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_needs_more_bytes_until_complete() {
        let frame = encode_frame(&ReaderMessage::Stop {
            reason: "done".into(),
        });
        for cut in 0..frame.len() {
            let partial: Option<(ReaderMessage, usize)> =
                decode_frame(&frame[..cut], MAX_FRAME_BYTES).unwrap();
            assert!(
                partial.is_none(),
                "decoded from {cut} of {} bytes",
                frame.len()
            );
        }
        let (message, used): (ReaderMessage, usize) =
            decode_frame(&frame, MAX_FRAME_BYTES).unwrap().unwrap();
        assert_eq!(used, frame.len());
        assert_eq!(
            message,
            ReaderMessage::Stop {
                reason: "done".into()
            }
        );
    }

    #[test]
    fn frame_on_the_wire_is_length_then_json() {
        let frame = encode_frame(&ReaderMessage::Start);
        assert_eq!(&frame[..4], &[0, 0, 0, 16]);
        assert_eq!(&frame[4..], br#"{"type":"start"}"#);
    }

    #[test]
    fn oversized_and_invalid_frames_are_errors() {
        let huge = ((MAX_FRAME_BYTES + 1) as u32).to_be_bytes();
        assert!(matches!(
            decode_frame::<ReaderMessage>(&huge, MAX_FRAME_BYTES),
            Err(FrameError::TooLarge { .. })
        ));
        let mut garbage = 5u32.to_be_bytes().to_vec();
        garbage.extend_from_slice(b"hello");
        assert!(matches!(
            decode_frame::<ReaderMessage>(&garbage, MAX_FRAME_BYTES),
            Err(FrameError::Invalid(_))
        ));
    }

    #[test]
    fn data_hello_round_trips_and_rejects_strangers() {
        let hello = DataHello {
            session_id: 0x0102_0304_0506_0708,
            flow: 7,
        };
        let bytes = hello.encode();
        assert_eq!(&bytes[..4], b"OSCD");
        assert_eq!(DataHello::decode(&bytes), Some(hello));
        let mut http = [0u8; DataHello::LEN];
        http[..16].copy_from_slice(b"GET / HTTP/1.1\r\n");
        assert_eq!(DataHello::decode(&http), None);
    }
}
