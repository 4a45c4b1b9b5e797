//! What a side's kernel or host could not give, found by that side and said once: in
//! `run.json`'s `absent`, the reader's summary and `-J`, and the report's warnings. A
//! column the kernel cannot fill stays empty (`None`), never 0; this says why, in words.
//! The trace's own gaps (a tracepoint the kernel lacks) stay in `run.json`'s `trace`,
//! where the tracer records them.

use serde::{Deserialize, Serialize};

use crate::files::rows::Side;
use crate::host::{HostFacts, HostLoadSource};
use crate::socket::{FieldGroup, Source};
use crate::text::escape_peer;

/// One thing a side could not give.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Absence {
    pub side: Side,
    /// What is missing, by the kernel's own names (`tcpi_rcv_wnd`, `sock_diag`).
    pub what: String,
    /// The columns left empty, or narrowed, because of it (`reader.csv rcv_wnd`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub columns: Vec<String>,
    /// The Linux release that brought it, where the kernel's age is the reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// The same in words, for the terminal and the report.
    pub note: String,
}

impl Side {
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Reader => "reader",
            Side::Sender => "sender",
        }
    }
}

/// The columns of a side's CSV that a `tcp_info` field group fills; none for a group that
/// side does not record.
fn columns_of(side: Side, group: FieldGroup) -> &'static [&'static str] {
    match (side, group) {
        (Side::Reader, FieldGroup::ByteCounts) => &["reader.csv delivered_bytes"],
        (Side::Reader, FieldGroup::RcvWnd) => &["reader.csv rcv_wnd"],
        (Side::Reader, _) => &[],
        (Side::Sender, FieldGroup::PacingRate) => &["sender.csv pacing_rate_bps"],
        (Side::Sender, FieldGroup::ByteCounts) => &["sender.csv acked_bytes"],
        (Side::Sender, FieldGroup::Notsent) => {
            &["sender.csv notsent_bytes", "sender.csv min_rtt_us"]
        }
        (Side::Sender, FieldGroup::DeliveryRate) => &["sender.csv delivery_rate_bps"],
        (Side::Sender, FieldGroup::Chrono) => &[
            "sender.csv busy_us",
            "sender.csv rwnd_limited_us",
            "sender.csv sndbuf_limited_us",
        ],
        (Side::Sender, FieldGroup::SndWnd) => &["sender.csv snd_wnd"],
        (Side::Sender, FieldGroup::Delivered) => &["sender.csv delivered_ce_segs"],
        (Side::Sender, FieldGroup::BytesSent | FieldGroup::RcvWnd) => &[],
    }
}

/// What each side's `tcp_info` lacks that its CSV would hold, from both hosts' facts (a
/// daemon before this was recorded says nothing of its kernel, and nothing is claimed).
pub fn of_kernels(reader: &HostFacts, sender: Option<&HostFacts>) -> Vec<Absence> {
    let sender_has_snd_wnd = sender.is_some_and(|s| {
        s.tcp_info_bytes.is_some() && !s.tcp_info_absent.contains(&FieldGroup::SndWnd)
    });
    let mut absent = Vec::new();
    for (side, host) in [(Side::Reader, Some(reader)), (Side::Sender, sender)] {
        let Some(host) = host else { continue };
        let Some(bytes) = host.tcp_info_bytes else {
            continue;
        };
        for &group in &host.tcp_info_absent {
            let columns = columns_of(side, group);
            if columns.is_empty() {
                continue;
            }
            let mut note = format!(
                "the {}'s kernel ({}) returns {bytes} bytes of tcp_info, without {} (Linux {} and later): {} {} empty",
                side.as_str(),
                // The sender's release came from the daemon.
                escape_peer(&host.kernel_release),
                group.fields().join(", "),
                group.since(),
                columns.join(", "),
                if columns.len() == 1 { "is" } else { "are" },
            );
            if group == FieldGroup::RcvWnd {
                note += if sender_has_snd_wnd {
                    "; the report draws the window the sender saw advertised (sender.csv snd_wnd) instead"
                } else {
                    "; nor does the sender's kernel give the window it saw advertised (tcpi_snd_wnd, Linux 5.4): no receive window can be drawn"
                };
            }
            absent.push(Absence {
                side,
                what: group.fields().join(", "),
                columns: columns.iter().map(|c| c.to_string()).collect(),
                since: Some(group.since().to_string()),
                note,
            });
        }
    }
    absent
}

/// The columns BBR's own state fills (`TCP_CC_INFO`), empty on a flow not on BBR.
pub const BBR_COLUMNS: [&str; 4] = [
    "sender.csv bbr_bw_bps",
    "sender.csv bbr_min_rtt_us",
    "sender.csv bbr_pacing_gain",
    "sender.csv bbr_cwnd_gain",
];

/// What the sender's congestion control does not say of itself: BBR's state where the
/// flows ran another (`congestion`, as the daemon read it back from its socket).
pub fn of_congestion(congestion: &str) -> Option<Absence> {
    (congestion != "bbr").then(|| Absence {
        side: Side::Sender,
        what: "TCP_CC_INFO (tcp_bbr_info)".into(),
        columns: BBR_COLUMNS.iter().map(|c| c.to_string()).collect(),
        since: None,
        note: format!(
            "the sender's flows ran {}, not bbr: only BBR gives a bandwidth estimate and min RTT of its own (TCP_CC_INFO), so {} are empty",
            // The name came from the daemon.
            escape_peer(congestion),
            BBR_COLUMNS.join(", "),
        ),
    })
}

/// What a side's sampler could not see, from how it read its sockets: nothing with
/// sock_diag; with getsockopt, the rest of its namespace.
pub fn of_sampling(side: Side, source: &Source) -> Option<Absence> {
    let Source::Getsockopt { why } = source else {
        return None;
    };
    Some(Absence {
        side,
        what: "sock_diag".into(),
        columns: vec!["host.csv tcp_mem_ns_bytes".into()],
        since: None,
        note: format!(
            "the {} sampled its sockets with getsockopt (TCP_INFO, SO_MEMINFO), not sock_diag ({}): host.csv tcp_mem_ns_bytes sums only the session's data sockets, not the rest of its namespace",
            side.as_str(),
            // The sender's reason came from the daemon.
            escape_peer(why),
        ),
    })
}

/// A source of the host's own load a side's sampler could not read: with the side's
/// reason where it gave one (the reader's own), or, for a daemon's rows that carry none,
/// that they do not (a daemon before the columns, or a host that could not give them).
pub fn of_host_load(side: Side, source: HostLoadSource, why: Option<&str>) -> Absence {
    let columns = source.columns();
    let why = why.map_or_else(
        || "its rows carry none: a daemon before these columns, or its host could not give them (the daemon's log says why)".to_string(),
        // An OS error's text, escaped as any text that reaches a note.
        escape_peer,
    );
    Absence {
        side,
        what: source.what().into(),
        columns: columns.iter().map(|c| c.to_string()).collect(),
        since: None,
        note: format!(
            "the {} could not read the {} ({why}): {} {} empty",
            side.as_str(),
            source.what(),
            columns.join(", "),
            if columns.len() == 1 { "is" } else { "are" },
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(release: &str, tcp_info_bytes: Option<usize>) -> HostFacts {
        HostFacts {
            hostname: "h".into(),
            kernel_release: release.into(),
            page_size_bytes: 4096,
            sysctls: Default::default(),
            wall_clock_unix_ms: 1,
            clock: "CLOCK_MONOTONIC".into(),
            netns_inode: None,
            boot_id: None,
            tcp_info_bytes: tcp_info_bytes.map(|n| n as u32),
            tcp_info_absent: tcp_info_bytes.map_or_else(Vec::new, FieldGroup::absent_from),
        }
    }

    #[test]
    fn a_6_1_reader_lacks_only_its_window_and_says_what_stands_in() {
        // 232 bytes: what 5.10 and 6.1 return (read in the kernel matrix's guests).
        let absent = of_kernels(
            &host("6.1.0-50", Some(232)),
            Some(&host("6.1.0-50", Some(232))),
        );
        assert_eq!(absent.len(), 1, "{absent:?}");
        let rcv = &absent[0];
        assert_eq!(
            (rcv.side, rcv.what.as_str()),
            (Side::Reader, "tcpi_rcv_wnd")
        );
        assert_eq!(rcv.columns, ["reader.csv rcv_wnd"]);
        assert_eq!(rcv.since.as_deref(), Some("6.2"));
        assert!(
            rcv.note.contains("6.1.0-50") && rcv.note.contains("232 bytes"),
            "{}",
            rcv.note
        );
        assert!(
            rcv.note.contains("sender.csv snd_wnd) instead"),
            "{}",
            rcv.note
        );
    }

    #[test]
    fn below_5_4_neither_window_is_there_and_the_note_says_so() {
        // 224 bytes: 4.19 (RHEL 8's 4.18 may carry more, backported).
        let absent = of_kernels(&host("4.19", Some(224)), Some(&host("4.19", Some(224))));
        let whats: Vec<(Side, &str)> = absent.iter().map(|a| (a.side, a.what.as_str())).collect();
        assert_eq!(
            whats,
            [
                (Side::Reader, "tcpi_rcv_wnd"),
                (Side::Sender, "tcpi_snd_wnd")
            ]
        );
        assert!(
            absent[0].note.contains("no receive window can be drawn"),
            "{}",
            absent[0].note
        );
    }

    #[test]
    fn sampling_by_getsockopt_says_why_and_what_the_memory_sum_misses() {
        assert_eq!(of_sampling(Side::Sender, &Source::SockDiag), None);
        let refused = Source::Getsockopt {
            why: "sock_diag refused: Operation not supported (os error 95)".into(),
        };
        let absent = of_sampling(Side::Reader, &refused).unwrap();
        assert_eq!(absent.what, "sock_diag");
        assert_eq!(absent.columns, ["host.csv tcp_mem_ns_bytes"]);
        assert!(absent.note.contains("os error 95") && absent.note.contains("reader"));
    }

    #[test]
    fn a_flow_not_on_bbr_names_bbrs_columns_and_a_bbr_flow_nothing() {
        assert_eq!(of_congestion("bbr"), None);
        let cubic = of_congestion("cubic").unwrap();
        assert_eq!(cubic.side, Side::Sender);
        assert_eq!(cubic.columns.len(), 4);
        assert!(cubic
            .columns
            .iter()
            .all(|c| c.starts_with("sender.csv bbr_")));
        assert!(cubic.note.contains("ran cubic"), "{}", cubic.note);
        // A peer's name is escaped before it reaches a note.
        assert!(!of_congestion("x\x1b[2J").unwrap().note.contains('\x1b'));
    }

    #[test]
    fn a_host_load_source_names_its_columns_and_why() {
        let qdisc = of_host_load(
            Side::Reader,
            HostLoadSource::Qdisc,
            Some("rtnetlink: No such device (os error 19)"),
        );
        assert_eq!(qdisc.columns.len(), 4);
        assert!(qdisc
            .columns
            .iter()
            .all(|c| c.starts_with("host.csv qdisc_")));
        assert!(
            qdisc
                .note
                .starts_with("the reader could not read the rtnetlink qdisc")
                && qdisc.note.contains("os error 19"),
            "{}",
            qdisc.note
        );
        let cpu = of_host_load(Side::Sender, HostLoadSource::Cpu, None);
        assert!(cpu.note.contains("its rows carry none"), "{}", cpu.note);
        assert_eq!(
            cpu.columns,
            ["host.csv cpu_busy_max_pct", "host.csv cpu_busy_mean_pct"]
        );
    }

    #[test]
    fn a_4_17_sender_lacks_the_ce_count() {
        // 192 bytes: the chrono counters (4.10) but not tcpi_delivered_ce (4.18).
        let absent = of_kernels(&host("6.12", Some(248)), Some(&host("4.17", Some(192))));
        let columns: Vec<&str> = absent
            .iter()
            .flat_map(|a| a.columns.iter().map(String::as_str))
            .collect();
        assert!(
            columns.contains(&"sender.csv delivered_ce_segs"),
            "{columns:?}"
        );
    }

    #[test]
    fn a_whole_structure_or_an_unknown_one_claims_nothing() {
        assert!(of_kernels(&host("6.12", Some(248)), Some(&host("6.12", Some(248)))).is_empty());
        // A daemon that did not say its length: nothing is claimed of it.
        assert!(of_kernels(&host("6.12", Some(248)), Some(&host("5.10", None))).is_empty());
        // A 3.x reader: its window and the delivered bytes both.
        let old = of_kernels(&host("3.10", Some(120)), None);
        let columns: Vec<&str> = old
            .iter()
            .flat_map(|a| a.columns.iter().map(String::as_str))
            .collect();
        assert_eq!(
            columns,
            ["reader.csv delivered_bytes", "reader.csv rcv_wnd"]
        );
    }
}
