//! What a session asks of its sockets and what the kernel made of it: the options, the
//! `tcp_info` field groups a kernel may lack, the sender's time counters, and how a
//! sampler read its sockets.

use serde::{Deserialize, Serialize};

/// What a session asked for; `None` leaves the kernel's default in place.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SocketOptions {
    /// `TCP_NOTSENT_LOWAT`.
    pub notsent_lowat_bytes: Option<u32>,
    /// `SO_SNDBUF` as asked; the kernel doubles it (and setting it stops autotuning).
    pub sndbuf_bytes: Option<u32>,
    /// `SO_RCVBUF` as asked; the kernel doubles it (and setting it stops autotuning).
    pub rcvbuf_bytes: Option<u32>,
    /// `TCP_CONGESTION`, e.g. "cubic".
    pub congestion: Option<String>,
    /// `SO_MAX_PACING_RATE`, in bits per second (the kernel takes bytes per second).
    pub max_pacing_rate_bps: Option<u64>,
    /// Send with `sendfile` from a file instead of copying with `write` (see
    /// `oscil_kernel::socket::sendfile`). Not a socket option: the sender's way of writing, asked with
    /// the options so that `run.json` records it. Absent in older hellos, hence the default.
    #[serde(default)]
    pub zerocopy: bool,
}

/// One line for logs: `notsent_lowat=16384 congestion=cubic`, or `kernel defaults`.
impl std::fmt::Display for SocketOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if let Some(v) = self.notsent_lowat_bytes {
            parts.push(format!("notsent_lowat={v}"));
        }
        if let Some(v) = self.sndbuf_bytes {
            parts.push(format!("sndbuf={v}"));
        }
        if let Some(v) = self.rcvbuf_bytes {
            parts.push(format!("rcvbuf={v}"));
        }
        if let Some(v) = &self.congestion {
            parts.push(format!("congestion={v}"));
        }
        if let Some(v) = self.max_pacing_rate_bps {
            parts.push(format!("max_pacing_rate={v}bit"));
        }
        if self.zerocopy {
            parts.push("zerocopy".into());
        }
        if parts.is_empty() {
            f.write_str("kernel defaults")
        } else {
            f.write_str(&parts.join(" "))
        }
    }
}

/// The options in force on a socket, as read back with `getsockopt`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OptionsInForce {
    /// 0 means the socket follows `net.ipv4.tcp_notsent_lowat`.
    pub notsent_lowat_bytes: u32,
    pub sndbuf_bytes: u32,
    pub rcvbuf_bytes: u32,
    pub congestion: String,
    /// `None` means unlimited.
    pub max_pacing_rate_bps: Option<u64>,
    /// In words, where the kernel changed what was asked.
    pub notes: Vec<String>,
}

/// The fields `struct tcp_info` gained after its first form (104 bytes, Linux 2.6), in
/// the order the kernel appended them, each group with the release that brought it
/// (include/uapi/linux/tcp.h's history). A kernel returns the structure as long as it
/// knows it: a group past that length is absent, never zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FieldGroup {
    /// `tcpi_pacing_rate`, `tcpi_max_pacing_rate`.
    PacingRate,
    /// `tcpi_bytes_acked`, `tcpi_bytes_received`.
    ByteCounts,
    /// `tcpi_notsent_bytes`, `tcpi_min_rtt`.
    Notsent,
    /// `tcpi_delivery_rate`.
    DeliveryRate,
    /// `tcpi_busy_time`, `tcpi_rwnd_limited`, `tcpi_sndbuf_limited`.
    Chrono,
    /// `tcpi_delivered`, `tcpi_delivered_ce`.
    Delivered,
    /// `tcpi_bytes_sent`, `tcpi_bytes_retrans`.
    BytesSent,
    /// `tcpi_snd_wnd`.
    SndWnd,
    /// `tcpi_rcv_wnd`.
    RcvWnd,
}

impl FieldGroup {
    pub const ALL: [FieldGroup; 9] = [
        FieldGroup::PacingRate,
        FieldGroup::ByteCounts,
        FieldGroup::Notsent,
        FieldGroup::DeliveryRate,
        FieldGroup::Chrono,
        FieldGroup::Delivered,
        FieldGroup::BytesSent,
        FieldGroup::SndWnd,
        FieldGroup::RcvWnd,
    ];

    /// Bytes of `tcp_info` a kernel must return to hold the whole group: where the
    /// group's last field ends in `struct tcp_info` (include/uapi/linux/tcp.h, an ABI that
    /// only grows; oscil-kernel's tests hold these to libc's offsets).
    pub fn end_bytes(self) -> usize {
        match self {
            FieldGroup::PacingRate => 120,
            FieldGroup::ByteCounts => 136,
            FieldGroup::Notsent => 152,
            FieldGroup::DeliveryRate => 168,
            FieldGroup::Chrono => 192,
            FieldGroup::Delivered => 200,
            FieldGroup::BytesSent => 216,
            FieldGroup::SndWnd => 232,
            FieldGroup::RcvWnd => 236,
        }
    }

    /// The Linux release that brought the group.
    pub fn since(self) -> &'static str {
        match self {
            FieldGroup::PacingRate => "3.15",
            FieldGroup::ByteCounts => "4.1",
            FieldGroup::Notsent => "4.6",
            FieldGroup::DeliveryRate => "4.9",
            FieldGroup::Chrono => "4.10",
            FieldGroup::Delivered => "4.18",
            FieldGroup::BytesSent => "4.19",
            FieldGroup::SndWnd => "5.4",
            FieldGroup::RcvWnd => "6.2",
        }
    }

    /// The kernel's names of the group's fields.
    pub fn fields(self) -> &'static [&'static str] {
        match self {
            FieldGroup::PacingRate => &["tcpi_pacing_rate", "tcpi_max_pacing_rate"],
            FieldGroup::ByteCounts => &["tcpi_bytes_acked", "tcpi_bytes_received"],
            FieldGroup::Notsent => &["tcpi_notsent_bytes", "tcpi_min_rtt"],
            FieldGroup::DeliveryRate => &["tcpi_delivery_rate"],
            FieldGroup::Chrono => &["tcpi_busy_time", "tcpi_rwnd_limited", "tcpi_sndbuf_limited"],
            FieldGroup::Delivered => &["tcpi_delivered", "tcpi_delivered_ce"],
            FieldGroup::BytesSent => &["tcpi_bytes_sent", "tcpi_bytes_retrans"],
            FieldGroup::SndWnd => &["tcpi_snd_wnd"],
            FieldGroup::RcvWnd => &["tcpi_rcv_wnd"],
        }
    }

    /// Whether a structure of `len` bytes holds the group.
    pub fn held_by(self, len: usize) -> bool {
        len >= self.end_bytes()
    }

    /// The groups a structure of `len` bytes lacks.
    pub fn absent_from(len: usize) -> Vec<FieldGroup> {
        FieldGroup::ALL
            .into_iter()
            .filter(|g| !g.held_by(len))
            .collect()
    }
}

/// Where a sender's time went since the connection began (the kernel's "chrono" counters,
/// in jiffies, shown in microseconds): busy with data to send, and of that, held back by
/// the peer's receive window or by its own send buffer. The rest of busy is the network
/// (cwnd, pacing); the time not busy, the application (nothing to send).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Chrono {
    pub busy_us: u64,
    pub rwnd_limited_us: u64,
    pub sndbuf_limited_us: u64,
}

impl Chrono {
    /// The time spent between `before` and `self`.
    pub fn since(self, before: Chrono) -> Chrono {
        Chrono {
            busy_us: self.busy_us.saturating_sub(before.busy_us),
            rwnd_limited_us: self.rwnd_limited_us.saturating_sub(before.rwnd_limited_us),
            sndbuf_limited_us: self
                .sndbuf_limited_us
                .saturating_sub(before.sndbuf_limited_us),
        }
    }
}

/// How a sampler reads its sockets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum Source {
    /// sock_diag: one netlink round trip for every socket, the namespace's memory from a
    /// dump.
    SockDiag,
    /// `getsockopt` (`TCP_INFO`, `SO_MEMINFO`) on each socket, because sock_diag was refused
    /// (`why`, in the kernel's words) or `OSCIL_SAMPLE_BY` asked for it. The namespace's
    /// memory is then the sum of the watched sockets: other sockets of the namespace
    /// are not seen.
    Getsockopt { why: String },
}

/// The daemon's write size unless a session asks for another: 256 KiB, the fastest of 64,
/// 128 and 256 KiB on loopback (scripts/bench-loopback); smaller writes show more of the
/// send queue's fine structure (`--write-size`).
pub const DEFAULT_WRITE_BYTES: u32 = 256 << 10;

/// The reader's write size with `--zerocopy` unless it asks for another: each `sendfile`
/// then hands over 128 KiB of the payload file's pages, as `iperf3 -Z` does, which keeps
/// what the receiver copies from in its L2 cache. Over loopback, one flow, cubic: 57.7
/// Gbit/s and 0.262 CPU s/GB, against 51.2 and 0.266 with 256 KiB (docs/PERFORMANCE.md).
pub const DEFAULT_ZEROCOPY_WRITE_BYTES: u32 = 128 << 10;

/// How a flow's writer offers the kernel its payload. Both are real servers' writers; the
/// send buffer bounds the second much more tightly than the first (link/README.md), because
/// the kernel checks `SO_SNDBUF` only when a write opens a new skb, and `poll` says writable
/// only once the queue is down to two thirds of the buffer (and `TCP_NOTSENT_LOWAT`'s unsent
/// bytes to half of it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WriteMode {
    /// Write again and again until the kernel answers `EAGAIN`, then wait for POLLOUT
    /// (nginx, and oscil's writer before the setting existed).
    #[default]
    UntilEagain,
    /// One write per POLLOUT: after each write the writer asks `poll` again and writes only
    /// when it says writable, as an event loop does (the seed's 16 KiB writer).
    PerWake,
}

impl WriteMode {
    pub const ALL: [WriteMode; 2] = [WriteMode::UntilEagain, WriteMode::PerWake];

    /// As the command line and `run.json` write it.
    pub fn name(self) -> &'static str {
        match self {
            WriteMode::UntilEagain => "until-eagain",
            WriteMode::PerWake => "per-wake",
        }
    }

    pub fn is_until_eagain(&self) -> bool {
        *self == WriteMode::UntilEagain
    }
}

impl std::fmt::Display for WriteMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `until-eagain` or `per-wake`, as typed.
impl std::str::FromStr for WriteMode {
    type Err = UnknownWriteMode;

    fn from_str(input: &str) -> Result<Self, UnknownWriteMode> {
        WriteMode::ALL
            .into_iter()
            .find(|mode| mode.name() == input)
            .ok_or_else(|| UnknownWriteMode(crate::text::escape_peer(input)))
    }
}

/// A write mode that is neither of [`WriteMode::ALL`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("\"{0}\" is not a write mode (until-eagain or per-wake)")]
pub struct UnknownWriteMode(String);

/// A kernel congestion control's name: up to 15 letters, digits, `_` or `-`.
pub fn is_congestion_name(name: &str) -> bool {
    (1..16).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}
