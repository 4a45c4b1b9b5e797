//! Text a peer sent, made safe to log or print: a stranger's string must not forge a log
//! line, move a terminal's cursor or fill a disk.

/// How many characters of a peer's string are shown (escapes counted as shown).
pub const PEER_TEXT_CHARS: usize = 200;

/// How many characters of a run's or configuration's label are kept: ample for any label
/// a person writes, short enough that a megabyte of label cannot slow a report.
pub const LABEL_CHARS: usize = 1000;

/// `text` with control and other non-printing characters escaped (`\n`, `\u{1b}`), cut to
/// [`PEER_TEXT_CHARS`] characters with a mark saying how much was left out
/// (`… (99800 bytes more)`). Every string a peer sent goes through it before a terminal,
/// a log or a file people read sees it.
pub fn escape_peer(text: &str) -> String {
    escape_bounded(text, PEER_TEXT_CHARS)
}

/// How many strings of one list a peer's message keeps: a list of notes or reasons is a
/// few lines, never a screenful.
pub const PEER_LIST_STRINGS: usize = 16;

/// A peer's whole message made safe at once, so that no field is forgotten: every string
/// in `value` (object keys too) through [`escape_peer`], and every list of strings longer
/// than [`PEER_LIST_STRINGS`] cut, its last string saying how many were left out.
pub fn escape_peer_value(value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::String(text) => *text = escape_peer(text),
        Value::Array(items) => {
            if items.len() > PEER_LIST_STRINGS && items.iter().all(Value::is_string) {
                let left_out = items.len() - (PEER_LIST_STRINGS - 1);
                items.truncate(PEER_LIST_STRINGS - 1);
                items.push(Value::String(format!("… ({left_out} more)")));
            }
            items.iter_mut().for_each(escape_peer_value);
        }
        Value::Object(map) => {
            *map = std::mem::take(map)
                .into_iter()
                .map(|(key, mut item)| {
                    escape_peer_value(&mut item);
                    (escape_peer(&key), item)
                })
                .collect();
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Text read from a run or campaign directory (a label, a reason), safe to print and write anywhere:
/// escaped like [`escape_peer`], cut to [`LABEL_CHARS`] characters.
pub fn escape_stored(text: &str) -> String {
    escape_bounded(text, LABEL_CHARS)
}

/// The one escaping: at most `max_chars` characters of output before the mark, so a
/// string of escapes is bounded as tightly as plain text.
fn escape_bounded(text: &str, max_chars: usize) -> String {
    let mut out = String::new();
    let mut shown_chars = 0;
    for (at, c) in text.char_indices() {
        let escaped =
            c.is_control() || (c.escape_debug().nth(1).is_some() && !matches!(c, '"' | '\''));
        let width = if escaped { c.escape_debug().count() } else { 1 };
        if shown_chars + width > max_chars {
            out.push_str(&format!("… ({} bytes more)", text.len() - at));
            return out;
        }
        shown_chars += width;
        match escaped {
            true => out.extend(c.escape_debug()),
            false => out.push(c),
        }
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
        assert_eq!(out, format!("{}… (39800 bytes more)", "x".repeat(200)));
        let lines = "\n".repeat(20_001);
        let out = escape_peer(&lines);
        assert_eq!(out.lines().count(), 1);
        // 100 escaped newlines of two characters each fill the 200.
        assert_eq!(out, format!("{}… (19901 bytes more)", "\\n".repeat(100)));
    }

    #[test]
    fn a_hundred_kilobytes_of_escapes_and_forged_lines_print_as_one_short_line() {
        // 6 bytes each, 12 characters escaped: `\u{1b}` `[31m` `\n`.
        let notes = "\u{1b}[31m\n".repeat(16_667);
        assert_eq!(notes.len(), 100_002);
        let out = escape_peer(&notes);
        assert_eq!(out.lines().count(), 1);
        assert!(!out.contains('\u{1b}'), "{out}");
        // 16 whole repeats (192 characters), then `\u{1b}` and `[3` fit the 200: 99 bytes
        // shown of 100,002.
        let shown = format!("{}\\u{{1b}}[3", "\\u{1b}[31m\\n".repeat(16));
        assert_eq!(out, format!("{shown}… (99903 bytes more)"));
    }

    #[test]
    fn every_string_of_a_message_is_escaped_and_long_lists_are_cut() {
        let mut message = serde_json::json!({
            "software": "d\u{1b}[2J",
            "options": {"notes": vec!["n\nforged"; 40], "rate": 5},
            "host": {"sysctls": {"net.\u{7}x": "1\r"}},
        });
        escape_peer_value(&mut message);
        let expected = serde_json::json!({
            "software": "d\\u{1b}[2J",
            "options": {
                "notes": ([vec!["n\\nforged"; 15], vec!["… (25 more)"]].concat()),
                "rate": 5,
            },
            "host": {"sysctls": {"net.\\u{7}x": "1\\r"}},
        });
        assert_eq!(message, expected);
    }

    #[test]
    fn labels_keep_300_characters_and_cut_a_megabyte() {
        let long = "a".repeat(300);
        assert_eq!(escape_stored(&long), long);
        let huge = "\u{1b}[2J".repeat(250_000);
        let out = escape_stored(&huge);
        assert!(out.ends_with(" bytes more)"), "{out}");
        assert!(!out.contains('\u{1b}'));
        assert!(out.chars().count() <= LABEL_CHARS + 30, "{out}");
    }
}
