//! Refusals before authentication are counted, not logged one by one: a flood must not
//! flood the log. Every window the daemon prints a few summary lines per network.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// Why a connection was refused before it authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Why {
    /// Too many unauthenticated connections in all (or random early drop).
    Full,
    /// Too many unauthenticated connections from its source.
    SourceFull,
    /// It closed, or said nothing complete, within the pre-authentication deadline.
    Silent,
    /// Its first frames were not a hello and a proof of this protocol version.
    Malformed,
    /// It did not prove the key.
    Unauthenticated,
    /// A data connection naming no session of its address, or with a wrong tag or proof.
    BadData,
    /// Unauthenticated past the grace while the caps were full: a newer connection took its
    /// place.
    Evicted,
}

impl Why {
    /// Refused only because the caps on unauthenticated connections are full: the peer is
    /// told `busy`, as a reader should try again; every other refusal is the generic one.
    pub(crate) fn is_busy(self) -> bool {
        matches!(self, Why::Full | Why::SourceFull)
    }

    const ALL: [Why; 7] = [
        Why::Full,
        Why::SourceFull,
        Why::Silent,
        Why::Malformed,
        Why::Unauthenticated,
        Why::BadData,
        Why::Evicted,
    ];

    pub(crate) fn words(self) -> &'static str {
        match self {
            Why::Full => "over --max-startups",
            Why::SourceFull => "over --per-source-max-startups",
            Why::Silent => "timed out or closed",
            Why::Malformed => "malformed",
            Why::Unauthenticated => "failed authentication",
            Why::BadData => "bad data connection",
            Why::Evicted => "made way for a newer connection",
        }
    }
}

/// The network a summary line names: an IPv4 /16 or an IPv6 /48.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Net {
    V4([u8; 2]),
    V6([u16; 3]),
}

impl Net {
    fn of(ip: IpAddr) -> Net {
        match ip.to_canonical() {
            IpAddr::V4(v4) => {
                let [a, b, _, _] = v4.octets();
                Net::V4([a, b])
            }
            IpAddr::V6(v6) => {
                let s = v6.segments();
                Net::V6([s[0], s[1], s[2]])
            }
        }
    }
}

impl fmt::Display for Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Net::V4([a, b]) => write!(f, "{}/16", Ipv4Addr::new(a, b, 0, 0)),
            Net::V6([a, b, c]) => write!(f, "{}/48", Ipv6Addr::new(a, b, c, 0, 0, 0, 0, 0)),
        }
    }
}

/// One network's refusals in the current window.
#[derive(Debug, Clone)]
struct Tally {
    by_why: [u64; Why::ALL.len()],
    /// The one address they all came from, while there is only one.
    only: Option<IpAddr>,
}

impl Tally {
    fn total(&self) -> u64 {
        self.by_why.iter().sum()
    }
}

/// Networks named in one window at most; the rest are summed in one line.
const MAX_LINES: usize = 5;
/// Networks tracked in one window at most, so the table stays small under any flood.
const MAX_NETS: usize = 4096;

/// The refusals counted since the last summary.
#[derive(Default)]
pub(crate) struct Refusals {
    window: Mutex<(HashMap<Net, Tally>, u64)>,
}

impl Refusals {
    pub(crate) fn note(&self, ip: IpAddr, why: Why) {
        let mut guard = self.window.lock().unwrap_or_else(PoisonError::into_inner);
        let (nets, untracked) = &mut *guard;
        let net = Net::of(ip);
        if !nets.contains_key(&net) && nets.len() >= MAX_NETS {
            *untracked += 1;
            return;
        }
        let tally = nets.entry(net).or_insert(Tally {
            by_why: [0; Why::ALL.len()],
            only: Some(ip),
        });
        tally.by_why[why as usize] += 1;
        if tally.only != Some(ip) {
            tally.only = None;
        }
    }

    /// The summary lines of the window that ends now (`window` long), and a fresh window.
    pub(crate) fn take_summary(&self, window: Duration) -> Vec<String> {
        let mut guard = self.window.lock().unwrap_or_else(PoisonError::into_inner);
        let (nets, untracked) = std::mem::take(&mut *guard);
        drop(guard);
        summarise(nets, untracked, window)
    }
}

/// At most `MAX_LINES` lines for the busiest networks, and one for all the others.
fn summarise(nets: HashMap<Net, Tally>, untracked: u64, window: Duration) -> Vec<String> {
    let mut nets: Vec<(Net, Tally)> = nets.into_iter().collect();
    nets.sort_by(|a, b| b.1.total().cmp(&a.1.total()).then(a.0.cmp(&b.0)));
    let secs = window.as_secs_f64();
    let mut lines: Vec<String> = nets
        .iter()
        .take(MAX_LINES)
        .map(|(net, tally)| {
            let from = tally
                .only
                .map_or_else(|| net.to_string(), |ip| ip.to_string());
            let why: Vec<String> = Why::ALL
                .iter()
                .filter(|w| tally.by_why[**w as usize] > 0)
                .map(|w| format!("{} {}", thousands(tally.by_why[*w as usize]), w.words()))
                .collect();
            format!(
                "{} refused from {from} in the last {secs:.0} s ({})",
                thousands(tally.total()),
                why.join(", ")
            )
        })
        .collect();
    let rest: u64 = nets
        .iter()
        .skip(MAX_LINES)
        .map(|(_, t)| t.total())
        .sum::<u64>()
        + untracked;
    if rest > 0 {
        let others = nets.len().saturating_sub(MAX_LINES);
        lines.push(format!(
            "{} more refused from {} other networks in the last {secs:.0} s",
            thousands(rest),
            if untracked > 0 {
                format!("{others}+")
            } else {
                others.to_string()
            },
        ));
    }
    lines
}

/// `1532` as `1,532`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let groups: Vec<&str> = digits
        .as_bytes()
        .rchunks(3)
        .rev()
        .map(|group| std::str::from_utf8(group).unwrap_or_default())
        .collect();
    groups.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_from_one_network_is_one_line() {
        let refusals = Refusals::default();
        for i in 0..1532u32 {
            let ip = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i * 7));
            let why = if i < 1500 {
                Why::Full
            } else {
                Why::Unauthenticated
            };
            refusals.note(ip, why);
        }
        let lines = refusals.take_summary(Duration::from_secs(10));
        assert_eq!(
            lines,
            ["1,532 refused from 10.0.0.0/16 in the last 10 s (1,500 over --max-startups, 32 failed authentication)"]
        );
        assert!(
            refusals.take_summary(Duration::from_secs(10)).is_empty(),
            "a fresh window"
        );
    }

    #[test]
    fn one_address_is_named_and_many_networks_are_folded() {
        let refusals = Refusals::default();
        let lone: IpAddr = "2001:db8:5::9".parse().unwrap();
        for _ in 0..3 {
            refusals.note(lone, Why::Silent);
        }
        for net in 0..20u32 {
            refusals.note(IpAddr::V4(Ipv4Addr::from(net << 16)), Why::Malformed);
        }
        let lines = refusals.take_summary(Duration::from_secs(10));
        assert_eq!(lines.len(), MAX_LINES + 1, "{lines:?}");
        assert_eq!(
            lines[0],
            "3 refused from 2001:db8:5::9 in the last 10 s (3 timed out or closed)"
        );
        assert_eq!(
            lines[MAX_LINES],
            "16 more refused from 16 other networks in the last 10 s"
        );
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1234567), "1,234,567");
    }
}
