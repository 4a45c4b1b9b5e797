//! `/proc/net/sockstat`: the host's TCP socket counts and TCP memory.

use oscil_model::host::Sockstat;

use crate::host::proc::{ParseError, ProcFile, ReadError};

const FILE: &str = "/proc/net/sockstat";

/// Parses the text of `/proc/net/sockstat`.
pub fn parse(text: &str) -> Result<Sockstat, ParseError> {
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("TCP:"))
        .ok_or_else(|| ParseError::new(FILE, "no \"TCP:\" line"))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let field = |name: &str| -> Result<u64, ParseError> {
        let pos = words
            .iter()
            .position(|w| *w == name)
            .ok_or_else(|| ParseError::new(FILE, format!("TCP line has no \"{name}\" field")))?;
        let value = words.get(pos + 1).copied().unwrap_or("");
        value.parse().map_err(|_| {
            ParseError::new(
                FILE,
                format!("TCP {name}: expected a number, found {value:?}"),
            )
        })
    };
    Ok(Sockstat {
        tcp_inuse: field("inuse")?,
        tcp_orphan: field("orphan")?,
        tcp_tw: field("tw")?,
        tcp_alloc: field("alloc")?,
        tcp_mem_pages: field("mem")?,
    })
}

/// Reads and parses `/proc/net/sockstat` of the caller's network namespace.
pub fn read() -> Result<Sockstat, ReadError> {
    open()?.read()
}

/// Opens the file of the caller's network namespace to read it again and again.
pub fn open() -> Result<ProcFile<Sockstat>, ReadError> {
    ProcFile::open(FILE, parse)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_captured_text() {
        let s = parse(include_str!("../../fixtures/sockstat.txt")).unwrap();
        assert_eq!(
            s,
            Sockstat {
                tcp_inuse: 1,
                tcp_orphan: 0,
                tcp_tw: 0,
                tcp_alloc: 1,
                tcp_mem_pages: 240
            }
        );
    }

    #[test]
    fn parses_a_busy_host() {
        let text = "sockets: used 5123\nTCP: inuse 2011 orphan 3 tw 417 alloc 2050 mem 98765\nUDP: inuse 4 mem 2\n";
        let s = parse(text).unwrap();
        assert_eq!((s.tcp_inuse, s.tcp_orphan, s.tcp_tw), (2011, 3, 417));
        assert_eq!((s.tcp_alloc, s.tcp_mem_pages), (2050, 98765));
    }

    #[test]
    fn missing_line_or_field_or_number_is_an_error_that_says_which() {
        assert!(parse("UDP: inuse 0 mem 0\n")
            .unwrap_err()
            .reason
            .contains("TCP:"));
        let e = parse("TCP: inuse 1 orphan 0 tw 0 alloc 1\n").unwrap_err();
        assert!(e.reason.contains("\"mem\""), "{e}");
        let e = parse("TCP: inuse x orphan 0 tw 0 alloc 1 mem 2\n").unwrap_err();
        assert!(
            e.reason.contains("inuse") && e.reason.contains("\"x\""),
            "{e}"
        );
    }

    #[test]
    fn reads_this_host() {
        read().unwrap();
    }

    #[test]
    fn an_open_file_reads_fresh_figures_each_time() {
        let mut file = open().unwrap();
        let before = file.read().unwrap().tcp_inuse;
        let held: Vec<_> = (0..20).map(|_| crate::test_util::loopback_pair()).collect();
        let during = file.read().unwrap().tcp_inuse;
        // 40 more sockets in use; other tests may close a few meanwhile.
        assert!(during >= before + 20, "inuse {before} then {during}");
        drop(held);
        assert!(file.read().is_ok());
    }
}
