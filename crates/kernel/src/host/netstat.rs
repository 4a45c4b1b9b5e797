//! `/proc/net/netstat` `TcpExt` counters: receive-queue collapses, prunes and drops that
//! show a reader falling behind.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use oscil_model::host::QueueEvents;

use crate::host::proc::{ParseError, ProcFile, ReadError};

const FILE: &str = "/proc/net/netstat";

/// The counters worth reporting over a session.
pub const WATCHED: &[&str] = &[
    "TCPRcvCollapsed",
    "PruneCalled",
    "RcvPruned",
    "OfoPruned",
    "TCPRcvQDrop",
    "TCPBacklogDrop",
];

/// Every `TcpExt` counter by name. Per network namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpExt(pub BTreeMap<String, u64>);

/// Parses the text of `/proc/net/netstat`: a header line of names, then a line of values,
/// both starting with `TcpExt:`.
pub fn parse(text: &str) -> Result<TcpExt, ParseError> {
    let mut lines = text.lines().filter_map(|l| l.strip_prefix("TcpExt:"));
    let names = lines
        .next()
        .ok_or_else(|| ParseError::new(FILE, "no \"TcpExt:\" header line"))?;
    let values = lines
        .next()
        .ok_or_else(|| ParseError::new(FILE, "\"TcpExt:\" header has no value line"))?;
    let names: Vec<&str> = names.split_whitespace().collect();
    let values: Vec<&str> = values.split_whitespace().collect();
    if names.len() != values.len() {
        return Err(ParseError::new(
            FILE,
            format!(
                "TcpExt has {} names but {} values",
                names.len(),
                values.len()
            ),
        ));
    }
    names
        .into_iter()
        .zip(values)
        .map(|(name, value)| {
            let v = value.parse().map_err(|_| {
                ParseError::new(
                    FILE,
                    format!("TcpExt {name}: expected a number, found {value:?}"),
                )
            })?;
            Ok((name.to_string(), v))
        })
        .collect::<Result<_, _>>()
        .map(TcpExt)
}

/// Reads and parses `/proc/net/netstat` of the caller's network namespace.
pub fn read() -> Result<TcpExt, ReadError> {
    open()?.read()
}

/// Opens the file of the caller's network namespace to read it again and again.
pub fn open() -> Result<ProcFile<TcpExt>, ReadError> {
    ProcFile::open(FILE, parse)
}

/// How much each named counter grew from `before` to `after` (saturating at 0). A name
/// missing from either side is left out rather than guessed.
pub fn delta(before: &TcpExt, after: &TcpExt, names: &[&str]) -> BTreeMap<String, u64> {
    names
        .iter()
        .filter_map(|&name| {
            let (b, a) = (before.0.get(name)?, after.0.get(name)?);
            Some((name.to_string(), a.saturating_sub(*b)))
        })
        .collect()
}

/// The receive-queue counters of [`WATCHED`] from a reading; `None` where the kernel lacks one of them.
pub fn queue_events(t: &TcpExt) -> Option<QueueEvents> {
    let get = |name: &str| t.0.get(name).copied();
    Some(QueueEvents {
        collapsed: get("TCPRcvCollapsed")?,
        prune_called: get("PruneCalled")?,
        rcv_pruned: get("RcvPruned")?,
        ofo_pruned: get("OfoPruned")?,
        rcvq_drop: get("TCPRcvQDrop")?,
        backlog_drop: get("TCPBacklogDrop")?,
    })
}

/// A sampler's view of the counters: each tick, what happened since the last one.
#[derive(Debug, Clone, Default)]
pub struct QueueEventsSince {
    last: Option<QueueEvents>,
}

impl QueueEventsSince {
    /// Starts counting from `now` (the sampler's start).
    pub fn new(now: Option<&TcpExt>) -> Self {
        QueueEventsSince {
            last: now.and_then(queue_events),
        }
    }

    /// The events since the last reading; `None` without two readings to compare.
    pub fn next(&mut self, now: Option<&TcpExt>) -> Option<QueueEvents> {
        let now = now.and_then(queue_events);
        let delta = match (now, self.last) {
            (Some(now), Some(last)) => Some(now.since(last)),
            _ => None,
        };
        if now.is_some() {
            self.last = now;
        }
        delta
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_captured_text() {
        let t = parse(include_str!("../../fixtures/netstat.txt")).unwrap();
        assert_eq!(t.0["TW"], 10);
        assert_eq!(t.0["DelayedACKs"], 1);
        assert_eq!(t.0["TCPHPHits"], 12);
        assert_eq!(t.0["TCPOrigDataSent"], 158);
        assert_eq!(t.0["SyncookiesSent"], 0);
        for name in WATCHED {
            assert!(t.0.contains_key(*name), "{name} missing");
        }
        assert!(!t.0.contains_key("InOctets"), "IpExt must not leak in");
    }

    #[test]
    fn queue_events_count_what_happened_between_readings() {
        let reading = |collapsed: u64, drops: u64| {
            let text = format!(
                "TcpExt: TCPRcvCollapsed PruneCalled RcvPruned OfoPruned TCPRcvQDrop TCPBacklogDrop\n\
                 TcpExt: {collapsed} 2 0 1 {drops} 0\n"
            );
            parse(&text).unwrap()
        };
        let mut since = QueueEventsSince::new(Some(&reading(10, 3)));
        let first = since.next(Some(&reading(14, 3))).unwrap();
        assert_eq!(
            (first.collapsed, first.rcvq_drop, first.prune_called),
            (4, 0, 0)
        );
        assert_eq!(since.next(None), None, "an unreadable tick says nothing");
        let second = since.next(Some(&reading(15, 9))).unwrap();
        assert_eq!((second.collapsed, second.rcvq_drop), (1, 6));
        let old_kernel = parse("TcpExt: TCPRcvCollapsed\nTcpExt: 1\n").unwrap();
        assert_eq!(queue_events(&old_kernel), None);
    }

    #[test]
    fn count_mismatch_is_an_error() {
        let e = parse("TcpExt: A B C\nTcpExt: 1 2\n").unwrap_err();
        assert!(e.reason.contains("3 names but 2 values"), "{e}");
        assert!(parse("IpExt: A\nIpExt: 1\n").is_err());
        assert!(parse("TcpExt: A\n").is_err());
    }

    #[test]
    fn delta_is_per_name_saturating_and_skips_missing() {
        let before = parse("TcpExt: PruneCalled RcvPruned TW\nTcpExt: 5 9 1\n").unwrap();
        let after = parse("TcpExt: PruneCalled RcvPruned TW\nTcpExt: 12 3 4\n").unwrap();
        let d = delta(&before, &after, &["PruneCalled", "RcvPruned", "Missing"]);
        assert_eq!(d.len(), 2);
        assert_eq!(d["PruneCalled"], 7);
        assert_eq!(d["RcvPruned"], 0);
    }

    #[test]
    fn reads_this_host() {
        assert!(read().unwrap().0.len() > 50);
    }
}
