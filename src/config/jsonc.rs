//! JSON with comments (VS Code's and Zed's settings): `//` and `/* */`
//! comments and trailing commas removed outside strings, so that
//! `serde_json` reads what is left. `dialects.rs` reads other clients'
//! files through it; it stands alone so that the dialects and the import
//! that translates them do not lean on each other.

/// Removes `//` and `/* */` comments and trailing commas outside strings
/// (VS Code's JSON with comments).
pub(super) fn strip_jsonc(text: &str) -> String {
    drop_trailing_commas(&drop_comments(text))
}

fn drop_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match c {
                '\\' => out.extend(chars.next()),
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match (c, chars.peek()) {
            ('/', Some('/')) => {
                // To the end of the line, keeping the line break.
                for next in chars.by_ref() {
                    if next == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            ('/', Some('*')) => {
                chars.next();
                let mut previous = ' ';
                for next in chars.by_ref() {
                    if next == '\n' {
                        out.push('\n');
                    }
                    if previous == '*' && next == '/' {
                        break;
                    }
                    previous = next;
                }
            }
            _ => {
                in_string = c == '"';
                out.push(c);
            }
        }
    }
    out
}

fn drop_trailing_commas(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut index = 0;
    while index < chars.len() {
        let c = chars[index];
        if in_string {
            out.push(c);
            if c == '\\' {
                if let Some(&escaped) = chars.get(index + 1) {
                    out.push(escaped);
                    index += 1;
                }
            } else if c == '"' {
                in_string = false;
            }
        } else if c == ',' {
            let next = chars[index + 1..].iter().find(|next| !next.is_whitespace());
            if !matches!(next, Some('}') | Some(']')) {
                out.push(c);
            }
        } else {
            in_string = c == '"';
            out.push(c);
        }
        index += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_comments_and_trailing_commas_but_not_strings() {
        let text = "{\n // a comment, with a comma\n \"a\": \"http://x//y,}\", /* more */ \"b\": [1, 2, /* c */],\n}";
        let value: serde_json::Value =
            serde_json::from_slice(strip_jsonc(text).as_bytes()).unwrap();
        assert_eq!(value, serde_json::json!({"a": "http://x//y,}", "b": [1, 2]}));
    }
}
