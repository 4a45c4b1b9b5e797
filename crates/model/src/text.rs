//! Text a peer sent, made safe to log or print: a stranger's string must not forge a log
//! line, move a terminal's cursor or fill a disk.

/// How many characters of a peer's string are kept.
pub const PEER_TEXT_CHARS: usize = 200;

/// How many characters of a run's or configuration's label are kept: ample for any label
/// a person writes, short enough that a megabyte of label cannot slow a report.
pub const LABEL_CHARS: usize = 1000;

/// `text` with control and other non-printing characters escaped (`\n`, `\u{1b}`), cut to
/// [`PEER_TEXT_CHARS`] characters with a mark when cut.
pub fn escape_peer(text: &str) -> String {
    escape_bounded(text, PEER_TEXT_CHARS)
}

/// Text read from a run or campaign directory (a label, a reason), safe to print and write anywhere:
/// escaped like [`escape_peer`], cut to [`LABEL_CHARS`] characters.
pub fn escape_stored(text: &str) -> String {
    escape_bounded(text, LABEL_CHARS)
}

fn escape_bounded(text: &str, max_chars: usize) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    for c in chars.by_ref().take(max_chars) {
        if c.is_control() || (c.escape_debug().nth(1).is_some() && !matches!(c, '"' | '\'')) {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    if chars.next().is_some() {
        out.push_str("...(cut)");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(escape_peer("reno\0\nforged"), "reno\\0\\nforged");
        assert_eq!(escape_peer("\u{1b}[31mred"), "\\u{1b}[31mred");
        // Right-to-left override: prints as a visible escape, not an invisible reorder.
        assert_eq!(escape_peer("a\u{202e}b"), "a\\u{202e}b");
    }

    #[test]
    fn ordinary_text_is_kept_as_is() {
        assert_eq!(escape_peer("oscil-reader 0.1.0"), "oscil-reader 0.1.0");
        assert_eq!(
            escape_peer("it's \"quoted\" à l'été"),
            "it's \"quoted\" à l'été"
        );
    }

    #[test]
    fn long_text_is_cut_with_a_mark() {
        let long = "x".repeat(40_000);
        let out = escape_peer(&long);
        assert_eq!(out, format!("{}...(cut)", "x".repeat(200)));
        let lines = "\n".repeat(20_001);
        assert_eq!(escape_peer(&lines).lines().count(), 1);
    }

    #[test]
    fn labels_keep_300_characters_and_cut_a_megabyte() {
        let long = "a".repeat(300);
        assert_eq!(escape_stored(&long), long);
        let huge = "\u{1b}[2J".repeat(250_000);
        let out = escape_stored(&huge);
        assert!(out.ends_with("...(cut)"));
        assert!(!out.contains('\u{1b}'));
        assert!(out.chars().count() < 2 * LABEL_CHARS * 6);
    }
}
