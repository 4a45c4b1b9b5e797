//! Setting the options a test session asks for, and reading back what the kernel made of them.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};

use crate::sys;
use oscil_model::socket::{OptionsInForce, SocketOptions};
use oscil_model::sysctl::Sysctl;

/// A socket option the kernel would not set, with the value asked and the kernel's reason.
#[derive(Debug, thiserror::Error)]
pub enum SockoptError {
    /// `setsockopt` failed.
    #[error("{option} {value} refused by the kernel: {source}")]
    Refused {
        option: &'static str,
        value: String,
        source: io::Error,
    },
    /// The options were set but reading them back failed.
    #[error("reading socket options back: {0}")]
    ReadBack(#[source] io::Error),
}

/// The kernel's longest congestion-control name plus NUL (`TCP_CA_NAME_MAX`).
const TCP_CA_NAME_MAX: usize = 16;

/// Applies every requested option, then reads all of them back. Options are set in a fixed
/// order and the first refusal stops: the socket may then hold the earlier ones.
pub fn apply(fd: impl AsFd, opts: &SocketOptions) -> Result<OptionsInForce, SockoptError> {
    let fd = fd.as_fd();
    if let Some(name) = &opts.congestion {
        sys::set_bytes(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, name.as_bytes()).map_err(
            |source| SockoptError::Refused {
                option: "congestion control",
                value: format!("{name:?}"),
                // ENOENT: the kernel knows no algorithm of that name.
                source: match source.kind() {
                    io::ErrorKind::NotFound => io::Error::new(
                        io::ErrorKind::NotFound,
                        "not available on this host (net.ipv4.tcp_available_congestion_control)",
                    ),
                    _ => source,
                },
            },
        )?;
    }
    if let Some(v) = opts.notsent_lowat_bytes {
        set_u32(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NOTSENT_LOWAT,
            v,
            "TCP_NOTSENT_LOWAT",
        )?;
    }
    let sock = socket2::SockRef::from(&fd);
    if let Some(v) = opts.sndbuf_bytes {
        sock.set_send_buffer_size(v as usize)
            .map_err(|source| refused("SO_SNDBUF", v, source))?;
    }
    if let Some(v) = opts.rcvbuf_bytes {
        sock.set_recv_buffer_size(v as usize)
            .map_err(|source| refused("SO_RCVBUF", v, source))?;
    }
    if let Some(bps) = opts.max_pacing_rate_bps {
        let bytes_per_s = bps / 8;
        sys::set_bytes(
            fd,
            libc::SOL_SOCKET,
            libc::SO_MAX_PACING_RATE,
            &bytes_per_s.to_ne_bytes(),
        )
        .map_err(|source| refused("SO_MAX_PACING_RATE (bit/s)", bps, source))?;
    }
    let mut in_force = read_in_force(fd).map_err(SockoptError::ReadBack)?;
    in_force.notes = notes(opts, &in_force, &BufferLimits::read());
    Ok(in_force)
}

/// Reads the options in force, without changing anything (`notes` is empty).
pub fn read_in_force(fd: impl AsFd) -> io::Result<OptionsInForce> {
    let fd = fd.as_fd();
    let sock = socket2::SockRef::from(&fd);
    let mut name = [0u8; TCP_CA_NAME_MAX];
    let len = sys::get_bytes(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, &mut name)?;
    let name = &name[..len];
    let name = name.split(|&b| b == 0).next().unwrap_or(name);
    let mut pacing = [0u8; 8];
    let len = sys::get_bytes(fd, libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE, &mut pacing)?;
    let pacing_bytes_per_s = match len {
        8 => u64::from_ne_bytes(pacing),
        4 => match u32::from_ne_bytes(pacing[..4].try_into().expect("4 bytes")) {
            u32::MAX => u64::MAX,
            v => u64::from(v),
        },
        n => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("SO_MAX_PACING_RATE returned {n} bytes"),
            ))
        }
    };
    Ok(OptionsInForce {
        notsent_lowat_bytes: get_u32(fd, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT)?,
        sndbuf_bytes: clamp_u32(sock.send_buffer_size()?),
        rcvbuf_bytes: clamp_u32(sock.recv_buffer_size()?),
        congestion: String::from_utf8_lossy(name).into_owned(),
        max_pacing_rate_bps: (pacing_bytes_per_s != u64::MAX).then(|| pacing_bytes_per_s * 8),
        notes: Vec::new(),
    })
}

/// The sysctls that cap `SO_SNDBUF`/`SO_RCVBUF`, when readable.
struct BufferLimits {
    wmem_max_bytes: Option<u32>,
    rmem_max_bytes: Option<u32>,
}

impl BufferLimits {
    fn read() -> Self {
        let read = |sysctl: Sysctl| {
            let value = crate::host::read_typed(sysctl)?.integer()?;
            u32::try_from(value).ok()
        };
        BufferLimits {
            wmem_max_bytes: read(Sysctl::CoreWmemMax),
            rmem_max_bytes: read(Sysctl::CoreRmemMax),
        }
    }
}

/// Explains, in words, each place where what is in force differs from what was asked.
fn notes(asked: &SocketOptions, got: &OptionsInForce, limits: &BufferLimits) -> Vec<String> {
    let mut notes = Vec::new();
    let buffers = [
        (
            "SO_SNDBUF",
            Sysctl::CoreWmemMax,
            asked.sndbuf_bytes,
            got.sndbuf_bytes,
            limits.wmem_max_bytes,
        ),
        (
            "SO_RCVBUF",
            Sysctl::CoreRmemMax,
            asked.rcvbuf_bytes,
            got.rcvbuf_bytes,
            limits.rmem_max_bytes,
        ),
    ];
    for (option, sysctl, asked, got, max) in buffers {
        let Some(asked) = asked else { continue };
        let doubled = u64::from(asked) * 2;
        if u64::from(got) == doubled {
            notes.push(format!(
                "{option} {asked} requested, kernel doubled it to {got}"
            ));
        } else if let Some(max) = max.filter(|&m| m < asked) {
            notes.push(format!(
                "{option} {asked} requested, capped at {sysctl}: {max}, kernel doubled that to {got}"
            ));
        } else if u64::from(got) != u64::from(asked) {
            notes.push(format!("{option} {asked} requested, kernel set {got}"));
        }
    }
    if let Some(asked) = asked.notsent_lowat_bytes {
        if asked != got.notsent_lowat_bytes {
            notes.push(format!(
                "TCP_NOTSENT_LOWAT {asked} requested, kernel reports {}",
                got.notsent_lowat_bytes
            ));
        }
    }
    if let Some(asked) = asked.max_pacing_rate_bps {
        if Some(asked) != got.max_pacing_rate_bps {
            let got = got
                .max_pacing_rate_bps
                .map_or_else(|| "unlimited".to_string(), |v| v.to_string());
            notes.push(format!(
                "SO_MAX_PACING_RATE {asked} bit/s requested, kernel holds {got} bit/s (it counts whole bytes per second)"
            ));
        }
    }
    notes
}

fn refused(option: &'static str, value: impl ToString, source: io::Error) -> SockoptError {
    SockoptError::Refused {
        option,
        value: value.to_string(),
        source,
    }
}

fn set_u32(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    v: u32,
    option: &'static str,
) -> Result<(), SockoptError> {
    sys::set_bytes(fd, level, name, &v.to_ne_bytes()).map_err(|source| refused(option, v, source))
}

fn get_u32(fd: BorrowedFd<'_>, level: libc::c_int, name: libc::c_int) -> io::Result<u32> {
    let mut buf = [0u8; 4];
    let len = sys::get_bytes(fd, level, name, &mut buf)?;
    if len != 4 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("getsockopt returned {len} bytes, expected 4"),
        ));
    }
    Ok(u32::from_ne_bytes(buf))
}

fn clamp_u32(v: usize) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::loopback_pair;

    #[test]
    fn notsent_lowat_and_congestion_read_back_as_set() {
        let (client, _server) = loopback_pair();
        let asked = SocketOptions {
            notsent_lowat_bytes: Some(16384),
            congestion: Some("reno".into()),
            ..Default::default()
        };
        let got = apply(&client, &asked).unwrap();
        assert_eq!(got.notsent_lowat_bytes, 16384);
        assert_eq!(got.congestion, "reno");
        assert!(got.notes.is_empty(), "{:?}", got.notes);
        assert_eq!(read_in_force(&client).unwrap().notsent_lowat_bytes, 16384);
    }

    #[test]
    fn nothing_asked_leaves_lowat_unset_and_pacing_unlimited() {
        let (client, _server) = loopback_pair();
        let got = apply(&client, &SocketOptions::default()).unwrap();
        assert_eq!(got.notsent_lowat_bytes, 0);
        assert_eq!(got.max_pacing_rate_bps, None);
        assert!(!got.congestion.is_empty());
    }

    #[test]
    fn unknown_congestion_control_is_refused_naming_it() {
        let (client, _server) = loopback_pair();
        let asked = SocketOptions {
            congestion: Some("nosuchcc".into()),
            ..Default::default()
        };
        let err = apply(&client, &asked).unwrap_err().to_string();
        assert!(err.contains("\"nosuchcc\""), "{err}");
        assert!(err.contains("congestion control"), "{err}");
        assert!(err.contains("not available on this host"), "{err}");
    }

    #[test]
    fn sndbuf_is_doubled_within_wmem_max_and_noted() {
        let limits = BufferLimits::read();
        let wmem_max = limits.wmem_max_bytes.expect("net.core.wmem_max readable");
        let asked_bytes = (wmem_max / 2).max(4608);
        let (client, _server) = loopback_pair();
        let asked = SocketOptions {
            sndbuf_bytes: Some(asked_bytes),
            ..Default::default()
        };
        let got = apply(&client, &asked).unwrap();
        assert_eq!(got.sndbuf_bytes, asked_bytes * 2);
        assert_eq!(
            got.notes,
            vec![format!(
                "SO_SNDBUF {asked_bytes} requested, kernel doubled it to {}",
                asked_bytes * 2
            )]
        );
    }

    #[test]
    fn sndbuf_above_wmem_max_is_capped_and_noted() {
        let limits = BufferLimits::read();
        let wmem_max = limits.wmem_max_bytes.expect("net.core.wmem_max readable");
        let Some(asked_bytes) = wmem_max.checked_mul(2) else {
            eprintln!("skipped: net.core.wmem_max too large to exceed");
            return;
        };
        let (client, _server) = loopback_pair();
        let asked = SocketOptions {
            sndbuf_bytes: Some(asked_bytes),
            ..Default::default()
        };
        let got = apply(&client, &asked).unwrap();
        assert_eq!(got.sndbuf_bytes, wmem_max * 2);
        assert!(
            got.notes[0].contains("capped at net.core.wmem_max"),
            "{:?}",
            got.notes
        );
    }

    #[test]
    fn max_pacing_rate_round_trips_in_bits_per_second() {
        let (client, _server) = loopback_pair();
        let asked = SocketOptions {
            max_pacing_rate_bps: Some(100_000_000),
            ..Default::default()
        };
        let got = apply(&client, &asked).unwrap();
        assert_eq!(got.max_pacing_rate_bps, Some(100_000_000));
        assert!(got.notes.is_empty(), "{:?}", got.notes);
    }
}
