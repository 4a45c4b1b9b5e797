//! The control protocol between oscil-reader and oscil-daemon.
//!
//! Control messages are JSON objects in frames of a 4-byte big-endian length followed by
//! that many bytes. Decoding is pure (`decode_frame` tells "need more bytes" from
//! "invalid"); `Connection` only moves bytes. A session opens with the handshake of
//! [`crate::auth`] (hello, challenge, proof), then a welcome; a session with markers then
//! makes its clock exchanges (`clock_probe`, `clock_echo`, see `oscil_model::run::clock`) before the
//! reader's start, and the daemon sends `markers` as its writers set them. Data connections
//! open with a fixed 60-byte `DataHello` that names the session and the flow and carries a
//! tag made with the session's data key; the daemon answers a session's hello from the
//! session's address with a fresh 36-byte `DataChallenge`, the reader sends the 32-byte
//! proof for it (`DataKey::proof`), and then the connection carries only payload.
//!
//! A daemon at its limits says so with `busy`: before authentication as the fixed frame
//! [`busy_frame`] (and only when its caps on unauthenticated connections are the reason),
//! after it with the limit that was reached. A reader may try again later.

use std::collections::BTreeMap;

use oscil_model::group::{FlowGroup, Reading};
use oscil_model::host::{HostFacts, ProcessCost};
use oscil_model::pattern::Fraction;
#[cfg(doc)]
use oscil_model::socket::DEFAULT_WRITE_BYTES;
use oscil_model::socket::{OptionsInForce, SocketOptions, Source, WriteMode};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::proof::{DataKey, HexBytes, Nonce, SessionId, Tag};
use oscil_model::files::markers::Marker;
use oscil_model::files::rows::{HostSample, SenderSample, WakeupFigures};
use oscil_model::files::trace::{SenderTrace, TraceRow, TraceSideFacts};
use oscil_model::text::escape_peer;

/// Bumped on any incompatible change; both ends refuse a mismatch. Version 2: the
/// challenge-response handshake, 128-bit session ids and signed data hellos. Version 3: the
/// daemon says `Ready` once it holds every data connection (both clocks start at `Start`),
/// `Stop` names the intervals the reader sampled, and samples may come several to a write.
/// Version 4: every data connection answers a fresh challenge of the daemon (a replayed
/// data hello can no longer take or end a flow), and a daemon at its limits says `busy`.
/// Version 5: the hello may carry groups of flows, each with its own options and writer
/// ([`Hello::groups`]), and the welcome says the options in force per group. A daemon of
/// version 5 still serves a version 4 hello (one group), in version 4's words; a reader
/// speaks 4 unless its session has more than one group, so older daemons serve it. An
/// older daemon refuses a version 5 hello before authentication.
pub const PROTOCOL_VERSION: u32 = 5;

/// The oldest hello a daemon still serves.
pub const OLDEST_PROTOCOL_VERSION: u32 = 4;

/// The first version whose hello carries groups.
pub const GROUPS_PROTOCOL_VERSION: u32 = 5;

/// The version a [`DataHello`] carries: its bytes have not changed since version 4.
const DATA_HELLO_VERSION: u32 = 4;

/// A control frame larger than this ends the session: samples of 200 flows are ~60 KB.
pub const MAX_FRAME_BYTES: usize = 4 << 20;

/// The daemon's limit on what an authenticated reader sends (start, stop).
pub const MAX_READER_FRAME_BYTES: usize = 64 << 10;

/// The daemon's limit on a frame before authentication (a hello is ~300 bytes, one with
/// [`crate::request::MAX_GROUPS`] groups at most ~3 KB): a stranger cannot make it hold
/// more than this per connection.
pub const MAX_PREAUTH_FRAME_BYTES: usize = 4 << 10;

/// The reader's opening message on the control connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    pub version: u32,
    /// Name and version of the reader, for the daemon's log.
    pub software: String,
    /// The reader's fresh nonce: the daemon's proof covers it (see [`crate::auth`]).
    pub nonce: Nonce,
    pub flows: u32,
    /// Socket options the daemon sets on every data connection of the session.
    pub options: SocketOptions,
    pub interval_us: u64,
    /// How long the reader means to run; the daemon ends the session a little after.
    pub duration_us: u64,
    /// Bytes the daemon offers the kernel per write; `None` asks for [`DEFAULT_WRITE_BYTES`].
    #[serde(default)]
    pub write_size_bytes: Option<u32>,
    /// How the daemon's writers write; absent (an older reader) or `until-eagain` is the
    /// writer every daemon has. A daemon says in its welcome which one it runs.
    #[serde(default, skip_serializing_if = "WriteMode::is_until_eagain")]
    pub write_mode: WriteMode,
    /// Mark every flow's stream this often (µs, at least `interval_us`); `None`: no markers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub marker_every_us: Option<u64>,
    /// The reader will open the idle probe connection (`oscil_model::files::probe`) beside the flows.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub probe: bool,
    /// Trace the data sockets per ACK (`--trace`): the daemon then sends `trace` messages
    /// and says what it traced in `Ended`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub trace: bool,
    /// The session's groups of flows, in flow order (version 5); empty: one group of
    /// `flows` with `options`, `write_size_bytes` and `write_mode`. With groups, `flows` is
    /// their total and the daemon takes every group's options from here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<FlowGroup>,
}

impl Hello {
    /// The session's groups: as asked, or the one group of a hello without any (its
    /// reading fields, which the daemon does not use, at their defaults).
    pub fn groups(&self) -> Vec<FlowGroup> {
        if !self.groups.is_empty() {
            return self.groups.clone();
        }
        vec![FlowGroup {
            flows: self.flows,
            sender: self.options.clone(),
            write_size_bytes: self.write_size_bytes,
            write_mode: self.write_mode,
            pattern: Reading::default(),
            fraction: Fraction::CLOUDFLARE,
            slow_rate_bps: None,
        }]
    }
}

/// The largest write size a session may ask for: the daemon holds one such buffer per
/// session.
pub const MAX_WRITE_BYTES: u32 = 16 << 20;

/// The daemon's acceptance of a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Welcome {
    pub version: u32,
    pub software: String,
    /// Names the session on its data connections.
    pub session_id: SessionId,
    pub host: HostFacts,
    /// The options read back from a socket after applying the request.
    pub options_in_force: OptionsInForce,
    /// The daemon awaits and echoes the idle probe's connection (`oscil_model::files::probe`); said only
    /// to a hello that asked, so a reader that finds it absent (an older daemon) opens none.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub probe: bool,
    /// The writer the daemon runs, as the hello asked; a daemon older than the setting
    /// never says, and is taken to write until `EAGAIN`.
    #[serde(default, skip_serializing_if = "WriteMode::is_until_eagain")]
    pub write_mode: WriteMode,
    /// Per group of a hello with groups, in order, the options read back after applying
    /// that group's request (`options_in_force` is the first group's); empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups_in_force: Vec<OptionsInForce>,
}

/// The daemon's answer to a hello: its nonce and, when it has a key, its proof.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Challenge {
    pub version: u32,
    pub nonce: Nonce,
    /// `None` when the daemon has no key.
    pub mac: Option<Tag>,
}

/// How a session ended, as one side saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ended {
    /// Why the daemon stopped sending: "reader asked to stop", "session length limit", ...
    pub reason: String,
    /// TcpExt counters that moved during the session on the daemon's host.
    pub tcpext_delta: BTreeMap<String, u64>,
    /// Per flow, the writer's POLLOUT wake-ups (absent from daemons before issue 11).
    #[serde(default)]
    pub wakeups: Vec<WakeupFigures>,
    /// The daemon process's CPU and context switches over the session; `None` when
    /// `/proc` did not tell.
    #[serde(default)]
    pub cost: Option<ProcessCost>,
    /// What the daemon traced, or why it could not; only when the hello asked for a trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceSideFacts>,
    /// How the daemon's sampler read its sockets; absent from daemons before it said
    /// (they used sock_diag) and when sampling never started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled_by: Option<Source>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ReaderMessage {
    Hello(Hello),
    /// The reader's proof of the key, sent only after the daemon proved it.
    Proof {
        mac: Option<Tag>,
    },
    /// One clock exchange (`crate::clock`), after `Ready` and before `Start`: the reader's
    /// `CLOCK_REALTIME` as it sent this, echoed back.
    ClockProbe {
        t1_unix_ns: u64,
    },
    /// Sent after `Ready` (and any clock exchanges): the daemon starts streaming and its
    /// clock, the reader its pattern and its clock, so that both sides' `t_s` count from the
    /// same moment (give or take the one-way delay).
    Start,
    Stop {
        reason: String,
        /// How many sampling intervals the reader's samples covered (its last one partial, if
        /// a tenth of it had passed): the daemon's last sample covers up to the same one, so
        /// both sides have the same ticks. `None` when the reader does not say (the daemon
        /// then samples the interval in progress).
        #[serde(default)]
        intervals: Option<u64>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum DaemonMessage {
    Challenge(Challenge),
    Welcome(Welcome),
    /// Every data connection of the session is in: the reader may send `Start`. Before it,
    /// a reader that sent `Start` as soon as its own connects returned started its clock
    /// while the daemon was still taking in the last of 1,000 connections (170 ms later),
    /// and the sender's record lost two ticks.
    Ready,
    Refused {
        reason: String,
    },
    /// The daemon is at a limit that frees up by itself (sessions, flows, or connections
    /// not yet authenticated): try again later. Before authentication it carries no
    /// detail; after it, the limit that was reached.
    Busy {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
    /// One interval's samples: every flow of the session and the host.
    Samples {
        host: HostSample,
        flows: Vec<SenderSample>,
    },
    /// The answer to a `ClockProbe`: its `t1`, and the daemon's `CLOCK_REALTIME` as it took
    /// the probe (`t2`) and as it answered (`t3`).
    ClockEcho {
        t1_unix_ns: u64,
        t2_unix_ns: u64,
        t3_unix_ns: u64,
    },
    /// Markers the writers set since the last such message (sessions with markers only).
    Markers {
        markers: Vec<Marker>,
    },
    /// Trace rows the daemon read since the last such message (sessions whose hello asked
    /// for a trace only).
    Trace {
        rows: Vec<TraceRow<SenderTrace>>,
    },
    Ended(Ended),
}

/// Why bytes on the control connection are not a message.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The length prefix exceeds the connection's limit.
    #[error("control frame of {len} bytes exceeds the limit of {limit} bytes")]
    TooLarge { len: usize, limit: usize },
    /// The frame is not a JSON message of the expected kind; the parser's words, which may
    /// quote the peer, are escaped and cut.
    #[error("control frame is not a valid message: {0}")]
    Invalid(String),
    /// Reading or writing the connection failed.
    #[error("control connection: {0}")]
    Io(#[from] std::io::Error),
}

impl From<serde_json::Error> for FrameError {
    fn from(e: serde_json::Error) -> Self {
        FrameError::Invalid(escape_peer(&e.to_string()))
    }
}

/// The daemon's whole answer to a connection it turns away because its caps on
/// unauthenticated connections are full: `{"type":"busy"}`, the same bytes every time.
pub fn busy_frame() -> Vec<u8> {
    encode_frame(&DaemonMessage::Busy { detail: None })
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

/// How much a read asks for beyond the rest of the current frame.
const READ_AHEAD_BYTES: usize = 4 << 10;

/// A control connection, or one half of it: buffers reads, writes whole frames. The buffer
/// grows only as frames need it, so a connection that has sent little holds little.
pub struct Connection<S> {
    stream: S,
    buf: Vec<u8>,
    max_frame_bytes: usize,
}

impl<S> Connection<S> {
    pub fn new(stream: S) -> Self {
        Connection {
            stream,
            buf: Vec::new(),
            max_frame_bytes: MAX_FRAME_BYTES,
        }
    }

    /// Lowers (or raises) the largest frame `read` accepts.
    pub fn with_max_frame_bytes(mut self, max_bytes: usize) -> Self {
        self.max_frame_bytes = max_bytes;
        self
    }

    /// Bytes already read from the stream (while telling a connection's kind) that start
    /// the first frame.
    pub fn with_read_ahead(mut self, bytes: &[u8]) -> Self {
        self.buf.extend_from_slice(bytes);
        self
    }

    pub fn get_ref(&self) -> &S {
        &self.stream
    }

    /// Bytes still missing from the frame that starts the buffer (at least one).
    fn missing_bytes(&self) -> usize {
        let whole = match self.buf.get(..4) {
            Some(prefix) => 4 + u32::from_be_bytes(prefix.try_into().expect("4 bytes")) as usize,
            None => 4,
        };
        whole.saturating_sub(self.buf.len()).max(1)
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
            // Cancel-safe: `read_buf` extends the buffer only by what it read.
            self.buf.reserve(self.missing_bytes().max(READ_AHEAD_BYTES));
            let n = self.stream.read_buf(&mut self.buf).await?;
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
        }
    }
}

impl<S: AsyncWrite + Unpin> Connection<S> {
    pub async fn write<M: Serialize>(&mut self, message: &M) -> Result<(), FrameError> {
        self.write_batch(std::slice::from_ref(message)).await
    }

    /// Writes `messages` as consecutive frames in one write: samples taken every 10 ms go out
    /// a batch at a time, not a system call and a wake-up of the reader each.
    pub async fn write_batch<M: Serialize>(&mut self, messages: &[M]) -> Result<(), FrameError> {
        let frames: Vec<u8> = messages.iter().flat_map(encode_frame).collect();
        self.stream.write_all(&frames).await?;
        self.stream.flush().await?;
        Ok(())
    }
}

/// The first bytes on a data connection: which session and which flow it belongs to, and a
/// tag made with the session's data key, so nobody without it can take a flow's place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataHello {
    pub session_id: SessionId,
    pub flow: u32,
    pub mac: Tag,
}

impl DataHello {
    pub const LEN: usize = 60;
    /// The first four bytes of every data connection.
    pub const MAGIC: [u8; 4] = *b"OSCD";

    /// The hello of `flow`, signed with the session's data key.
    pub fn signed(key: &DataKey, session_id: SessionId, flow: u32) -> Self {
        DataHello {
            session_id,
            flow,
            mac: key.tag(&session_id, flow),
        }
    }

    /// True when the tag was made with `key` (compared in constant time).
    pub fn is_signed_by(&self, key: &DataKey) -> bool {
        self.mac.ct_eq(&key.tag(&self.session_id, self.flow))
    }

    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut out = [0u8; Self::LEN];
        out[..4].copy_from_slice(&Self::MAGIC);
        out[4..8].copy_from_slice(&DATA_HELLO_VERSION.to_be_bytes());
        out[8..24].copy_from_slice(&self.session_id.0);
        out[24..28].copy_from_slice(&self.flow.to_be_bytes());
        out[28..].copy_from_slice(&self.mac.0);
        out
    }

    /// `None` when the bytes are not an oscil data hello of version 4's form.
    pub fn decode(bytes: &[u8; Self::LEN]) -> Option<Self> {
        let (magic, rest) = bytes.split_first_chunk::<4>()?;
        let (version, rest) = rest.split_first_chunk::<4>()?;
        let (session_id, rest) = rest.split_first_chunk::<16>()?;
        let (flow, mac) = rest.split_first_chunk::<4>()?;
        if *magic != Self::MAGIC || u32::from_be_bytes(*version) != DATA_HELLO_VERSION {
            return None;
        }
        Some(DataHello {
            session_id: HexBytes(*session_id),
            flow: u32::from_be_bytes(*flow),
            mac: HexBytes(mac.try_into().ok()?),
        })
    }
}

/// The daemon's answer to a data hello that names one of its sessions: a fresh nonce the
/// reader must sign on this very connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataChallenge {
    pub nonce: Nonce,
}

impl DataChallenge {
    pub const LEN: usize = 36;
    pub const MAGIC: [u8; 4] = *b"OSCC";

    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut out = [0u8; Self::LEN];
        out[..4].copy_from_slice(&Self::MAGIC);
        out[4..].copy_from_slice(&self.nonce.0);
        out
    }

    /// `None` unless the bytes start with the challenge's magic.
    pub fn decode(bytes: &[u8; Self::LEN]) -> Option<Self> {
        let (magic, nonce) = bytes.split_first_chunk::<4>()?;
        (*magic == Self::MAGIC).then(|| DataChallenge {
            nonce: HexBytes(nonce.try_into().expect("32 bytes")),
        })
    }
}

/// The connecting side of a data connection's opening (the reader's, or the daemon's under
/// `--connect`): the hello, the other end's challenge, the proof. Afterwards the connection
/// carries only payload.
pub async fn open_data_connection<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    key: &DataKey,
    session_id: SessionId,
    flow: u32,
) -> std::io::Result<()> {
    stream
        .write_all(&DataHello::signed(key, session_id, flow).encode())
        .await?;
    let mut bytes = [0u8; DataChallenge::LEN];
    stream.read_exact(&mut bytes).await?;
    let challenge = DataChallenge::decode(&bytes).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "the daemon's answer to the data hello is not a challenge",
        )
    })?;
    let proof = key.proof(&session_id, flow, &challenge.nonce);
    stream.write_all(&proof.0).await?;
    stream.flush().await
}

/// The accepting side of a data connection's opening, once its hello was read and found to
/// name a session and carry that session's tag: a fresh challenge on this very connection
/// (so a hello seen on the path and replayed proves nothing), and the proof for it checked
/// in constant time; `Ok(false)` is a wrong proof. The daemon accepts data connections so,
/// and so does a reader that listens (`--listen`).
pub async fn challenge_data_connection<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    hello: &DataHello,
    key: &DataKey,
) -> std::io::Result<bool> {
    let nonce = Nonce::random()?;
    stream.write_all(&DataChallenge { nonce }.encode()).await?;
    let mut proof = [0u8; 32];
    stream.read_exact(&mut proof).await?;
    let expected = key.proof(&hello.session_id, hello.flow, &nonce);
    Ok(HexBytes(proof).ct_eq(&expected))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{DaemonHandshake, ReaderHandshake};
    use crate::proof::HexBytes;

    /// A data key from a real handshake without a pre-shared key.
    fn auth_key() -> DataKey {
        let hello = Hello {
            version: PROTOCOL_VERSION,
            software: "t".into(),
            nonce: HexBytes([1; 32]),
            flows: 1,
            options: SocketOptions::default(),
            interval_us: 1,
            duration_us: 1,
            write_size_bytes: None,
            write_mode: Default::default(),
            marker_every_us: None,
            probe: false,
            trace: false,
            groups: Vec::new(),
        };
        let (reader, first) = ReaderHandshake::new(None, hello);
        let (daemon, challenge) = DaemonHandshake::new(None, HexBytes([2; 32]))
            .on_hello(first)
            .unwrap();
        let (proof, key) = reader.on_challenge(challenge).unwrap();
        daemon.on_proof(proof).unwrap();
        key
    }

    #[test]
    fn a_hello_with_the_most_groups_fits_the_first_frame() {
        let longest = FlowGroup {
            flows: crate::request::MAX_FLOWS,
            sender: SocketOptions {
                notsent_lowat_bytes: Some(u32::MAX),
                sndbuf_bytes: Some(u32::MAX),
                rcvbuf_bytes: Some(u32::MAX),
                congestion: Some("c".repeat(crate::request::MAX_CONGESTION_NAME_BYTES)),
                max_pacing_rate_bps: Some(u64::MAX),
                zerocopy: true,
            },
            write_size_bytes: Some(MAX_WRITE_BYTES),
            write_mode: WriteMode::PerWake,
            pattern: Reading::FullSpeed,
            fraction: Fraction::new(0.012345678901234567).unwrap(),
            slow_rate_bps: Some(u64::MAX),
        };
        let hello = Hello {
            version: PROTOCOL_VERSION,
            software: concat!("oscil-reader ", env!("CARGO_PKG_VERSION"), "-some-build").into(),
            nonce: HexBytes([0xff; 32]),
            flows: u32::MAX,
            options: longest.sender.clone(),
            interval_us: u64::MAX,
            duration_us: u64::MAX,
            write_size_bytes: Some(MAX_WRITE_BYTES),
            write_mode: WriteMode::PerWake,
            marker_every_us: Some(u64::MAX),
            probe: true,
            trace: true,
            groups: vec![longest; crate::request::MAX_GROUPS],
        };
        let frame = encode_frame(&ReaderMessage::Hello(hello));
        assert!(
            frame.len() <= MAX_PREAUTH_FRAME_BYTES,
            "{} bytes",
            frame.len()
        );
    }

    #[test]
    fn frame_needs_more_bytes_until_complete() {
        let frame = encode_frame(&ReaderMessage::Stop {
            reason: "done".into(),
            intervals: Some(40),
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
                reason: "done".into(),
                intervals: Some(40),
            }
        );
        // A stop that does not say leaves the count out.
        let (bare, _): (ReaderMessage, usize) = decode_frame(
            &encode_frame(&serde_json::json!({"type": "stop", "reason": "x"})),
            MAX_FRAME_BYTES,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            bare,
            ReaderMessage::Stop {
                reason: "x".into(),
                intervals: None
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
        let key = auth_key();
        let hello = DataHello::signed(&key, HexBytes([0xa5; 16]), 7);
        let bytes = hello.encode();
        assert_eq!(&bytes[..4], b"OSCD");
        assert_eq!(&bytes[4..8], &DATA_HELLO_VERSION.to_be_bytes());
        assert_eq!(&bytes[8..24], &[0xa5; 16]);
        assert_eq!(&bytes[24..28], &[0, 0, 0, 7]);
        let decoded = DataHello::decode(&bytes).unwrap();
        assert_eq!(decoded, hello);
        assert!(decoded.is_signed_by(&key));
        // Another flow number under the same tag is not signed.
        let mut moved = bytes;
        moved[27] = 8;
        assert!(!DataHello::decode(&moved).unwrap().is_signed_by(&key));
        let mut http = [0u8; DataHello::LEN];
        http[..16].copy_from_slice(b"GET / HTTP/1.1\r\n");
        assert_eq!(DataHello::decode(&http), None);
    }

    #[test]
    fn busy_is_one_fixed_short_frame() {
        assert_eq!(busy_frame(), b"\0\0\0\x0f{\"type\":\"busy\"}");
        let (told, _): (DaemonMessage, usize) = decode_frame(&busy_frame(), MAX_FRAME_BYTES)
            .unwrap()
            .unwrap();
        assert_eq!(told, DaemonMessage::Busy { detail: None });
    }

    #[tokio::test]
    async fn a_data_proof_answers_one_challenge_only() {
        let key = auth_key();
        let session = HexBytes([3; 16]);
        let (mut reader, mut daemon) = tokio::io::duplex(256);
        let opening = tokio::spawn(async move {
            open_data_connection(&mut reader, &key, session, 5)
                .await
                .map(|()| key)
        });
        let mut hello = [0u8; DataHello::LEN];
        daemon.read_exact(&mut hello).await.unwrap();
        assert_eq!(DataHello::decode(&hello).unwrap().flow, 5);
        let challenge = DataChallenge {
            nonce: HexBytes([9; 32]),
        };
        assert_eq!(DataChallenge::decode(&challenge.encode()), Some(challenge));
        daemon.write_all(&challenge.encode()).await.unwrap();
        let mut proof = [0u8; 32];
        daemon.read_exact(&mut proof).await.unwrap();
        let key = opening.await.unwrap().unwrap();
        assert!(HexBytes(proof).ct_eq(&key.proof(&session, 5, &challenge.nonce)));
        // The same bytes answer no other challenge, flow or session.
        assert!(!HexBytes(proof).ct_eq(&key.proof(&session, 5, &HexBytes([8; 32]))));
        assert!(!HexBytes(proof).ct_eq(&key.proof(&session, 4, &challenge.nonce)));
        assert!(!HexBytes(proof).ct_eq(&key.proof(&HexBytes([4; 16]), 5, &challenge.nonce)));
    }
}
