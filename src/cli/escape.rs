//! Text from a server or a file, made safe to print on a terminal.
//!
//! A server's tool names, error messages and URLs, and a project file's
//! commands, are chosen by someone else. Printed as they are, an escape
//! sequence (`\e[2K\r`) could erase a line and draw another, so a review
//! would show one command while another runs. Every such text goes through
//! [`escaped`] before it reaches stdout or stderr: control characters and
//! the Unicode controls that reorder or hide text come out as visible
//! escapes, and everything else is untouched.

use std::fmt::Write;

/// `text` with every control character visible: `\e`, `\r`, `\n`, `\t`,
/// `\u{…}` for the others (C0, DEL, C1, bidirectional overrides and
/// isolates, zero-width characters).
pub(super) fn escaped(text: &str) -> String {
    if !text.chars().any(hidden) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
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

/// Like [`escaped`], but line breaks and tabs stay: for the body of a tool
/// result or a resource, which is many lines.
pub(super) fn escaped_body(text: &str) -> String {
    text.split('\n')
        .map(|line| line.split('\t').map(escaped).collect::<Vec<_>>().join("\t"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// True for characters that change what a terminal shows instead of showing
/// themselves.
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            // Soft hyphen, Arabic letter mark, Mongolian vowel separator.
            '\u{ad}' | '\u{61c}' | '\u{180e}'
            // Zero-width marks, line and paragraph separators, embeddings
            // and overrides, invisible operators and isolates.
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            // Byte order mark, interlinear annotations, tag characters.
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{e0000}'..='\u{e007f}'
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
}
