//! The sysctls the project knows, each written out once: its dotted name, the host of a run
//! it acts on, and the type of its value. Host facts record them, the lab sets, reads back
//! and restores some of them, the report and the recommendation read them.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// `net.ipv4.tcp_notsent_lowat`'s value that sets no threshold: the kernel's default.
pub const NOTSENT_LOWAT_UNLIMITED: u64 = u32::MAX as u64;

/// A sysctl the project reads or sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Sysctl {
    TcpWmem,
    TcpRmem,
    TcpMem,
    TcpNotsentLowat,
    TcpAdvWinScale,
    TcpCongestionControl,
    TcpAvailableCongestionControl,
    TcpAllowedCongestionControl,
    TcpLimitOutputBytes,
    TcpModerateRcvbuf,
    TcpAutocorking,
    TcpChildEhashEntries,
    CoreRmemMax,
    CoreWmemMax,
    CoreDefaultQdisc,
    TcpShrinkWindow,
    TcpRcvbufLowRtt,
}

/// The host of a run whose behaviour a sysctl shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The daemon's host (the data's sender).
    Sender,
    /// The reader's host.
    Receiver,
    /// Either end, or the host as a whole.
    Both,
}

/// What a sysctl's value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Three whole numbers: `min default max` (bytes, or pages for `tcp_mem`).
    Triple,
    /// One whole number, possibly negative (`tcp_adv_win_scale`).
    Integer,
    /// One name (`cubic`).
    Name,
    /// Names separated by spaces (`reno cubic bbr`).
    Names,
}

/// Each sysctl with its name, side and kind: the one table the project keeps.
const TABLE: &[(Sysctl, &str, Side, Kind)] = &[
    (
        Sysctl::TcpWmem,
        "net.ipv4.tcp_wmem",
        Side::Sender,
        Kind::Triple,
    ),
    (
        Sysctl::TcpRmem,
        "net.ipv4.tcp_rmem",
        Side::Receiver,
        Kind::Triple,
    ),
    (Sysctl::TcpMem, "net.ipv4.tcp_mem", Side::Both, Kind::Triple),
    (
        Sysctl::TcpNotsentLowat,
        "net.ipv4.tcp_notsent_lowat",
        Side::Sender,
        Kind::Integer,
    ),
    (
        Sysctl::TcpAdvWinScale,
        "net.ipv4.tcp_adv_win_scale",
        Side::Receiver,
        Kind::Integer,
    ),
    (
        Sysctl::TcpCongestionControl,
        "net.ipv4.tcp_congestion_control",
        Side::Sender,
        Kind::Name,
    ),
    (
        Sysctl::TcpAvailableCongestionControl,
        "net.ipv4.tcp_available_congestion_control",
        Side::Both,
        Kind::Names,
    ),
    (
        Sysctl::TcpAllowedCongestionControl,
        "net.ipv4.tcp_allowed_congestion_control",
        Side::Both,
        Kind::Names,
    ),
    (
        Sysctl::TcpLimitOutputBytes,
        "net.ipv4.tcp_limit_output_bytes",
        Side::Sender,
        Kind::Integer,
    ),
    (
        Sysctl::TcpModerateRcvbuf,
        "net.ipv4.tcp_moderate_rcvbuf",
        Side::Receiver,
        Kind::Integer,
    ),
    (
        Sysctl::TcpAutocorking,
        "net.ipv4.tcp_autocorking",
        Side::Sender,
        Kind::Integer,
    ),
    (
        Sysctl::TcpChildEhashEntries,
        "net.ipv4.tcp_child_ehash_entries",
        Side::Both,
        Kind::Integer,
    ),
    (
        Sysctl::CoreRmemMax,
        "net.core.rmem_max",
        Side::Receiver,
        Kind::Integer,
    ),
    (
        Sysctl::CoreWmemMax,
        "net.core.wmem_max",
        Side::Sender,
        Kind::Integer,
    ),
    (
        Sysctl::CoreDefaultQdisc,
        "net.core.default_qdisc",
        Side::Both,
        Kind::Name,
    ),
    // Absent where the kernel lacks them, which host facts then say: whether the receiver
    // may shrink its advertised window (6.5; Debian's 6.1 has it too), and the receive
    // buffer's autotuning knob for low-RTT paths (newer than 6.18: on no kernel of the
    // matrix).
    (
        Sysctl::TcpShrinkWindow,
        "net.ipv4.tcp_shrink_window",
        Side::Receiver,
        Kind::Integer,
    ),
    (
        Sysctl::TcpRcvbufLowRtt,
        "net.ipv4.tcp_rcvbuf_low_rtt",
        Side::Receiver,
        Kind::Integer,
    ),
];

impl Sysctl {
    /// Every sysctl the project knows, in the table's order.
    pub fn all() -> impl Iterator<Item = Sysctl> {
        TABLE.iter().map(|entry| entry.0)
    }

    fn entry(self) -> &'static (Sysctl, &'static str, Side, Kind) {
        TABLE
            .iter()
            .find(|entry| entry.0 == self)
            .expect("every sysctl is in the table")
    }

    /// The dotted name, `net.ipv4.tcp_wmem`.
    pub fn name(self) -> &'static str {
        self.entry().1
    }

    pub fn side(self) -> Side {
        self.entry().2
    }

    pub fn kind(self) -> Kind {
        self.entry().3
    }

    /// The sysctl of a dotted name, if the project knows it.
    pub fn from_name(name: &str) -> Option<Sysctl> {
        TABLE
            .iter()
            .find(|entry| entry.1 == name)
            .map(|entry| entry.0)
    }

    /// Its file under `/proc/sys`.
    pub fn proc_path(self) -> String {
        format!("/proc/sys/{}", self.name().replace('.', "/"))
    }

    /// Its value from the kernel's text (white space between the numbers of a triple or
    /// the names of a list is any white space, as `/proc` and `sysctl -n` give it).
    pub fn parse(self, text: &str) -> Result<SysctlValue, SysctlValueError> {
        let bad = || SysctlValueError {
            sysctl: self,
            text: text.chars().take(80).collect(),
        };
        let words: Vec<&str> = text.split_whitespace().collect();
        match (self.kind(), words.as_slice()) {
            (Kind::Triple, [a, b, c]) => {
                let mut triple = [0u64; 3];
                for (slot, word) in triple.iter_mut().zip([a, b, c]) {
                    *slot = word.parse().map_err(|_| bad())?;
                }
                Ok(SysctlValue::Triple(triple))
            }
            (Kind::Integer, [n]) => n.parse().map(SysctlValue::Integer).map_err(|_| bad()),
            (Kind::Name, [name]) => Ok(SysctlValue::Name((*name).to_owned())),
            (Kind::Names, names) => Ok(SysctlValue::Names(
                names.iter().map(|n| (*n).to_owned()).collect(),
            )),
            _ => Err(bad()),
        }
    }
}

impl fmt::Display for Sysctl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A sysctl's value, typed by its [`Kind`]; shown (and written to the kernel) as the
/// kernel writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SysctlValue {
    Triple([u64; 3]),
    Integer(i64),
    Name(String),
    Names(Vec<String>),
}

impl SysctlValue {
    /// A triple's numbers.
    pub fn triple(&self) -> Option<[u64; 3]> {
        match self {
            SysctlValue::Triple(t) => Some(*t),
            _ => None,
        }
    }

    pub fn integer(&self) -> Option<i64> {
        match self {
            SysctlValue::Integer(n) => Some(*n),
            _ => None,
        }
    }

    pub fn name(&self) -> Option<&str> {
        match self {
            SysctlValue::Name(name) => Some(name),
            _ => None,
        }
    }
}

impl fmt::Display for SysctlValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SysctlValue::Triple([a, b, c]) => write!(f, "{a} {b} {c}"),
            SysctlValue::Integer(n) => write!(f, "{n}"),
            SysctlValue::Name(name) => f.write_str(name),
            SysctlValue::Names(names) => f.write_str(&names.join(" ")),
        }
    }
}

/// Text that is not a value of the sysctl's kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{sysctl} = {text:?} is not a value of its kind")]
pub struct SysctlValueError {
    pub sysctl: Sysctl,
    pub text: String,
}

impl Serialize for Sysctl {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Sysctl {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        Sysctl::from_name(&name).ok_or_else(|| {
            serde::de::Error::custom(format!("{name:?} is not a sysctl oscil knows"))
        })
    }
}

/// Values of several sysctls, by sysctl: saved as `{"net.ipv4.tcp_wmem": "4096 16384
/// 4194304"}`, each value in the kernel's text. Reading one back, a name this build does
/// not know (a newer writer's) is left out; a known name's value must be of its kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SysctlValues(pub BTreeMap<Sysctl, SysctlValue>);

impl SysctlValues {
    pub fn get(&self, sysctl: Sysctl) -> Option<&SysctlValue> {
        self.0.get(&sysctl)
    }
}

impl FromIterator<(Sysctl, SysctlValue)> for SysctlValues {
    fn from_iter<I: IntoIterator<Item = (Sysctl, SysctlValue)>>(iter: I) -> Self {
        SysctlValues(iter.into_iter().collect())
    }
}

impl Serialize for SysctlValues {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(k, v)| (k.name(), v.to_string())))
    }
}

impl<'de> Deserialize<'de> for SysctlValues {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = BTreeMap::<String, String>::deserialize(deserializer)?;
        text.iter()
            .filter_map(|(name, value)| Some((Sysctl::from_name(name)?, value)))
            .map(|(sysctl, value)| {
                sysctl
                    .parse(value)
                    .map(|v| (sysctl, v))
                    .map_err(serde::de::Error::custom)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_written_once_and_found_again() {
        let mut names: Vec<&str> = Sysctl::all().map(Sysctl::name).collect();
        let count = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), count, "a name twice in the table");
        for sysctl in Sysctl::all() {
            assert_eq!(Sysctl::from_name(sysctl.name()), Some(sysctl));
        }
        assert_eq!(Sysctl::from_name("net.ipv4.tcp_no_such"), None);
        assert_eq!(
            Sysctl::TcpNotsentLowat.proc_path(),
            "/proc/sys/net/ipv4/tcp_notsent_lowat"
        );
    }

    /// The text as `/proc/sys` gives it on this kernel (tabs in triples, a newline).
    #[test]
    fn values_are_read_by_kind_from_the_kernels_text() {
        let wmem = Sysctl::TcpWmem.parse("4096\t16384\t4194304\n").unwrap();
        assert_eq!(wmem, SysctlValue::Triple([4096, 16384, 4194304]));
        assert_eq!(wmem.to_string(), "4096 16384 4194304");
        let adv = Sysctl::TcpAdvWinScale.parse("-2\n").unwrap();
        assert_eq!(adv.integer(), Some(-2));
        let cc = Sysctl::TcpAvailableCongestionControl.parse("reno cubic bbr\n");
        assert_eq!(cc.unwrap().to_string(), "reno cubic bbr");
        assert!(Sysctl::TcpWmem.parse("4096 16384").is_err());
        assert!(Sysctl::TcpNotsentLowat.parse("lots").is_err());
        assert_eq!(
            Sysctl::TcpCongestionControl
                .parse("a b")
                .unwrap_err()
                .to_string(),
            "net.ipv4.tcp_congestion_control = \"a b\" is not a value of its kind"
        );
    }

    #[test]
    fn saved_values_keep_the_kernels_text_and_skip_names_not_known() {
        let values: SysctlValues = [
            (
                Sysctl::TcpRmem,
                SysctlValue::Triple([8192, 262144, 536870912]),
            ),
            (Sysctl::TcpNotsentLowat, SysctlValue::Integer(131072)),
        ]
        .into_iter()
        .collect();
        let json = serde_json::to_string(&values).unwrap();
        assert_eq!(
            json,
            r#"{"net.ipv4.tcp_rmem":"8192 262144 536870912","net.ipv4.tcp_notsent_lowat":"131072"}"#
        );
        assert_eq!(serde_json::from_str::<SysctlValues>(&json).unwrap(), values);
        let newer = r#"{"net.ipv4.tcp_notsent_lowat":"131072","net.ipv4.tcp_future":"1"}"#;
        let read: SysctlValues = serde_json::from_str(newer).unwrap();
        assert_eq!(read.0.len(), 1);
        let bad = r#"{"net.ipv4.tcp_rmem":"8192"}"#;
        assert!(serde_json::from_str::<SysctlValues>(bad).is_err());
    }
}
