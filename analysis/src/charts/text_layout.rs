//! Text as the pictures draw it: measured with the bundled DejaVu font, broken into lines
//! that fit their room (never cut short with an ellipsis), and recorded line by line with
//! its width and room, so `report.json` can show what a picture says, and that it fits,
//! without anyone reading pixels.

use std::sync::Once;

use plotters::prelude::*;
use plotters::style::FontStyle;

/// The family every picture draws with, registered from the crate's own font files.
pub const FONT: &str = "sans-serif";

pub fn register_fonts() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The bytes are the crate's own font files, so registering cannot fail.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
        let _ = plotters::style::register_font(FONT, FontStyle::Bold, dejavu::sans::bold());
    });
}

/// A font of the bundled family: `size` pixels, bold or not.
pub fn font(size: u32, bold: bool) -> TextStyle<'static> {
    register_fonts();
    let font = (FONT, size).into_font();
    let font = if bold {
        font.style(FontStyle::Bold)
    } else {
        font
    };
    font.color(&BLACK)
}

/// One line of text a picture holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrawnText {
    pub text: String,
    /// Its width in the font it is drawn in.
    pub width_px: u32,
    /// The width it had to fit in.
    pub room_px: u32,
}

impl DrawnText {
    pub fn fits(&self) -> bool {
        self.width_px <= self.room_px
    }
}

/// The width of `text` in `style`, in pixels.
pub fn width_px(style: &TextStyle, text: &str) -> u32 {
    style.font.box_size(text).map_or(u32::MAX, |(w, _)| w)
}

/// `text` broken into lines that fit `room_px` in `style`, each recorded.
pub fn fit(text: &str, style: &TextStyle, room_px: u32) -> Vec<DrawnText> {
    wrap(text, room_px, |s| width_px(style, s))
        .into_iter()
        .map(|line| DrawnText {
            width_px: width_px(style, &line),
            text: line,
            room_px,
        })
        .collect()
}

/// One line drawn as it is (a legend entry, an axis name), recorded with its room.
pub fn single(text: &str, style: &TextStyle, room_px: u32) -> DrawnText {
    DrawnText {
        text: text.to_string(),
        width_px: width_px(style, text),
        room_px,
    }
}

/// Breaks text into lines no wider than `max_px`, after a space, comma, semicolon or
/// underscore where there is one (long lab labels have no spaces), else anywhere; never
/// between a number and its unit.
pub fn wrap(text: &str, max_px: u32, width_px: impl Fn(&str) -> u32) -> Vec<String> {
    let mut pieces: Vec<String> = Vec::new();
    for piece in text.split_inclusive([' ', ',', ';', '_']) {
        let after_number = pieces.last().is_some_and(|last| {
            let mut tail = last.chars().rev();
            tail.next() == Some(' ') && tail.next().is_some_and(|c| c.is_ascii_digit())
        });
        match pieces.last_mut() {
            Some(last) if after_number && piece.starts_with(char::is_alphabetic) => {
                last.push_str(piece)
            }
            _ => pieces.push(piece.to_string()),
        }
    }
    let mut lines = Vec::new();
    let mut line = String::new();
    for piece in &pieces {
        let candidate = format!("{line}{piece}");
        if line.is_empty() || width_px(candidate.trim_end()) <= max_px {
            line = candidate;
        } else {
            lines.push(line.trim_end().to_string());
            line = piece.trim_start().to_string();
        }
        // A piece wider than a whole line is broken where the line is full.
        while width_px(line.trim_end()) > max_px {
            let mut head = String::new();
            for c in line.chars() {
                head.push(c);
                if width_px(&head) > max_px {
                    head.pop();
                    break;
                }
            }
            if head.is_empty() {
                break;
            }
            line = line[head.len()..].to_string();
            lines.push(head);
        }
    }
    lines.push(line.trim_end().to_string());
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_labels_wrap_at_separators() {
        let chars = |s: &str| s.chars().count() as u32;
        let label = "100mbit_20ms_cubic_lowat-default_wmem-4096-16384-536870912";
        assert_eq!(
            wrap(label, 30, chars),
            vec![
                "100mbit_20ms_cubic_",
                "lowat-default_",
                "wmem-4096-16384-536870912"
            ]
        );
        assert_eq!(wrap("a short line", 30, chars), vec!["a short line"]);
        assert_eq!(
            wrap("one, two, three", 9, chars),
            vec!["one, two,", "three"]
        );
        assert_eq!(wrap("abcdefgh", 3, chars), vec!["abc", "def", "gh"]);
        assert_eq!(
            wrap("RTT 466.0 ms, 1 Gbit/s", 10, chars),
            vec!["RTT", "466.0 ms,", "1 Gbit/s"]
        );
    }

    #[test]
    fn fitted_lines_are_measured_in_the_font_and_fit() {
        let style = font(14, false);
        let text = "lowat 131072 against the default: the sender's slow-phase queue -88% [-90%, -86%], network goodput no clear change";
        let lines = fit(text, &style, 300);
        assert!(lines.len() >= 3, "{lines:?}");
        assert!(lines.iter().all(DrawnText::fits), "{lines:?}");
        let letters = |s: &str| s.split_whitespace().collect::<String>();
        let joined: String = lines.iter().map(|l| letters(&l.text)).collect();
        assert_eq!(joined, letters(text), "nothing lost");
        assert!(width_px(&style, "wide text") > width_px(&style, "wide"));
    }
}
