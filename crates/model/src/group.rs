//! Groups of flows in one session, each with its own socket options, writer and reading
//! pattern (`--group`): the one type the reader's config, the session request, the hello,
//! `run.json` and the lab share. A session without groups is one group of all its flows.
//! Flows are numbered in group order: the first group's flows first.

use serde::{Deserialize, Serialize};

use crate::pattern::Fraction;
use crate::socket::{SocketOptions, WriteMode};

/// How a group's flows read: the run's oscillating timetable, or full speed throughout.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reading {
    #[default]
    Oscillating,
    FullSpeed,
}

impl Reading {
    pub const ALL: [Reading; 2] = [Reading::Oscillating, Reading::FullSpeed];

    /// As the command line and `run.json` write it.
    pub fn name(self) -> &'static str {
        match self {
            Reading::Oscillating => "oscillating",
            Reading::FullSpeed => "full-speed",
        }
    }
}

impl std::fmt::Display for Reading {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A reading pattern that is neither of [`Reading::ALL`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("\"{0}\" is not a reading pattern (oscillating or full-speed)")]
pub struct UnknownReading(String);

impl std::str::FromStr for Reading {
    type Err = UnknownReading;

    fn from_str(input: &str) -> Result<Self, UnknownReading> {
        Reading::ALL
            .into_iter()
            .find(|reading| reading.name() == input)
            .ok_or_else(|| UnknownReading(crate::text::escape_peer(input)))
    }
}

/// One group of a session's flows and everything that is its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowGroup {
    pub flows: u32,
    /// The daemon's socket options on the group's data sockets.
    pub sender: SocketOptions,
    /// Bytes per write of the daemon; `None` for its default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_size_bytes: Option<u32>,
    #[serde(default)]
    pub write_mode: WriteMode,
    /// The reader's pattern on the group's flows (the daemon ignores it).
    #[serde(default)]
    pub pattern: Reading,
    /// Share of each flow's peak its slow seconds read (without `slow_rate_bps`).
    pub fraction: Fraction,
    /// The slow phases' absolute rate, the group's flows together, bit/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow_rate_bps: Option<u64>,
}

/// Every group's flows together, without overflow.
pub fn total_flows(groups: &[FlowGroup]) -> u64 {
    groups.iter().map(|g| u64::from(g.flows)).sum()
}

/// A group's share of a rate for all `total` flows together: its flows' part, at least
/// `floor` (the least rate a session may ask).
pub fn share_bps(bps: u64, flows: u32, total: u64, floor: u64) -> u64 {
    let share = u128::from(bps) * u128::from(flows) / u128::from(total.max(1));
    u64::try_from(share).unwrap_or(u64::MAX).max(floor)
}

/// Each flow's group, by flow number: the groups' flows in order.
pub fn group_by_flow(groups: &[FlowGroup]) -> Vec<u32> {
    groups
        .iter()
        .zip(0u32..)
        .flat_map(|(group, index)| std::iter::repeat_n(index, group.flows as usize))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(flows: u32) -> FlowGroup {
        FlowGroup {
            flows,
            sender: SocketOptions::default(),
            write_size_bytes: None,
            write_mode: WriteMode::default(),
            pattern: Reading::default(),
            fraction: Fraction::CLOUDFLARE,
            slow_rate_bps: None,
        }
    }

    #[test]
    fn flows_are_numbered_in_group_order() {
        let groups = [group(2), group(1), group(3)];
        assert_eq!(group_by_flow(&groups), [0, 0, 1, 2, 2, 2]);
        assert_eq!(total_flows(&groups), 6);
    }

    #[test]
    fn reading_patterns_read_back_as_written() {
        for reading in Reading::ALL {
            assert_eq!(reading.name().parse::<Reading>(), Ok(reading));
        }
        assert!("fast".parse::<Reading>().is_err());
        let json = serde_json::to_string(&Reading::FullSpeed).unwrap();
        assert_eq!(json, "\"full-speed\"");
    }
}
