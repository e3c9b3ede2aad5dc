//! Text from a server or a file, made safe to print on a terminal.
//!
//! A server's tool names, error messages and URLs, and a project file's
//! commands, are chosen by someone else. Printed as they are, an escape
//! sequence (`\e[2K\r`) could erase a line and draw another, so a review
//! would show one command while another runs. Every such text goes through
//! [`escaped`] before it reaches stdout or stderr: control characters and
//! the Unicode controls that reorder or hide text come out as visible
//! escapes, and everything else is untouched. A backslash is doubled, so
//! that the escaped form of a real escape (`\e`) never reads the same as
//! the same two characters written by a server.

use std::fmt::Write;

/// `text` with every control character visible: `\e`, `\r`, `\n`, `\t`,
/// `\u{…}` for the others (C0, DEL, C1, bidirectional overrides and
/// isolates, zero-width and other default-ignorable characters), and `\\`
/// for a backslash.
pub(super) fn escaped(text: &str) -> String {
    escape(text, true)
}

fn escape(text: &str, backslashes: bool) -> String {
    if !text.chars().any(|c| (backslashes && c == '\\') || hidden(c)) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut previous = ' ';
    for c in text.chars() {
        // In a body, an emoji's presentation selector and joiner (`⚠️`,
        // `👩‍💻`) stay: after a visible symbol they cannot hide or move text.
        let emoji_part = !backslashes
            && matches!(c, '\u{fe0e}' | '\u{fe0f}' | '\u{200d}')
            && !previous.is_ascii()
            && !hidden(previous);
        previous = c;
        match c {
            c if emoji_part => out.push(c),
            '\\' if backslashes => out.push_str("\\\\"),
            '\u{1b}' => out.push_str("\\e"),
            '\r' => out.push_str("\\r"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if hidden(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// Like [`escaped`], but line breaks and tabs stay, and backslashes are
/// left as they are: for the body of a tool result or a resource, which is
/// many lines (of code, often) and is read, or piped, as it was sent.
pub(super) fn escaped_body(text: &str) -> String {
    text.split('\n')
        .map(|line| line.split('\t').map(|part| escape(part, false)).collect::<Vec<_>>().join("\t"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// True for characters that change what a terminal shows instead of showing
/// themselves, or show as nothing: controls, every default-ignorable code
/// point (Unicode's `Default_Ignorable_Code_Point`), the other format
/// characters, and the line and paragraph separators.
pub(super) fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            // Default-ignorable: soft hyphen, combining grapheme joiner,
            // Arabic letter mark, Hangul fillers, Khmer inherent vowels,
            // Mongolian free variation selectors and vowel separator.
            '\u{ad}' | '\u{34f}' | '\u{61c}' | '\u{115f}' | '\u{1160}'
            | '\u{17b4}' | '\u{17b5}' | '\u{180b}'..='\u{180f}'
            // Zero-width marks, line and paragraph separators, embeddings
            // and overrides, invisible operators and isolates.
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            // Hangul filler, variation selectors, byte order mark, halfwidth
            // Hangul filler, reserved specials, interlinear annotations.
            | '\u{3164}' | '\u{fe00}'..='\u{fe0f}' | '\u{feff}' | '\u{ffa0}'
            | '\u{fff0}'..='\u{fffb}'
            // Shorthand format controls, musical formatting, tags and
            // variation selectors supplement (the rest of the plane is
            // reserved as default-ignorable).
            | '\u{1bca0}'..='\u{1bca3}'
            | '\u{1d173}'..='\u{1d17a}'
            | '\u{e0000}'..='\u{e0fff}'
            // The other format characters: prepended number signs and the
            // like, Egyptian hieroglyph format controls.
            | '\u{600}'..='\u{605}' | '\u{6dd}' | '\u{70f}' | '\u{890}' | '\u{891}'
            | '\u{8e2}' | '\u{110bd}' | '\u{110cd}' | '\u{13430}'..='\u{1345f}'
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_untouched() {
        assert_eq!(escaped("npx -y @scope/server --dir ./ü"), "npx -y @scope/server --dir ./ü");
    }

    #[test]
    fn controls_are_visible() {
        assert_eq!(
            escaped("sh -c 'touch PWNED'\u{1b}[2K\rnpx server\u{1b}[8m"),
            "sh -c 'touch PWNED'\\e[2K\\rnpx server\\e[8m"
        );
        assert_eq!(escaped("a\nb\tc\u{7f}\u{9b}"), "a\\nb\\tc\\u{7f}\\u{9b}");
        assert_eq!(escaped("evil\u{202e}txt.exe"), "evil\\u{202e}txt.exe");
        assert_eq!(escaped("a\u{e0041}b\u{2028}c\u{ad}"), "a\\u{e0041}b\\u{2028}c\\u{ad}");
        assert_eq!(escaped_body("a\tb\nc\u{1b}]0;x\u{7}"), "a\tb\nc\\e]0;x\\u{7}");
    }

    // Issue 27 (item 10): every default-ignorable character is visible, and
    // a literal `\e[2K` never reads like an escaped real escape sequence.
    #[test]
    fn invisible_characters_and_backslashes_are_unambiguous() {
        assert_eq!(escaped("np\u{34f}x"), "np\\u{34f}x");
        assert_eq!(escaped("a\u{3164}b\u{ffa0}c\u{fe0f}"), "a\\u{3164}b\\u{ffa0}c\\u{fe0f}");
        // A body keeps an emoji whole, and escapes the same marks elsewhere.
        assert_eq!(escaped_body("\u{26a0}\u{fe0f} ok"), "\u{26a0}\u{fe0f} ok");
        assert_eq!(escaped_body("\u{1f469}\u{200d}\u{1f4bb}"), "\u{1f469}\u{200d}\u{1f4bb}");
        assert_eq!(escaped_body("a\u{fe0f}\u{200d}b"), "a\\u{fe0f}\\u{200d}b");
        assert_eq!(escaped("\u{26a0}\u{fe0f}"), "\u{26a0}\\u{fe0f}");
        assert_eq!(escaped("\u{e0100}\u{1d173}\u{115f}"), "\\u{e0100}\\u{1d173}\\u{115f}");
        assert_eq!(escaped("x\\e[2K"), "x\\\\e[2K");
        assert_eq!(escaped("x\u{1b}[2K"), "x\\e[2K");
        assert_ne!(escaped("x\\e[2K"), escaped("x\u{1b}[2K"));
        assert_eq!(escaped("C:\\dir ü"), "C:\\\\dir ü");
    }
}
