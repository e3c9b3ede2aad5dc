//! Words as a person types them into a POSIX shell: one quoted for the
//! shell when it needs it, and a command line split into its words.
//!
//! Shared by the configuration (how `list` and `trust` show a command line;
//! an imported entry's whole command line split) and the command line
//! (hints that repeat `--config-dir`; `--stdio CMD`), which reaches it
//! through the hidden `tether::for_cli`: one copy in the binary, and no
//! shell helper in the documented API.

/// Quotes `word` unless it is made only of characters a shell leaves alone
/// (and `${…}`, which configuration entries write and show as written).
pub fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,~${}".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// Splits a line into words as a POSIX shell does for plain words, single
/// and double quotes and backslashes; `None` for unbalanced quotes or any
/// shell operator (`|`, `&`, `;`, `<`, `>`, `$(`, backquotes) outside quotes.
pub fn shell_words(line: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' => words.extend(word.take()),
            '\'' => {
                let text = word.get_or_insert_with(String::new);
                loop {
                    match chars.next()? {
                        '\'' => break,
                        other => text.push(other),
                    }
                }
            }
            '"' => {
                let text = word.get_or_insert_with(String::new);
                loop {
                    match chars.next()? {
                        '"' => break,
                        '\\' => text.push(chars.next()?),
                        '$' | '`' => return None,
                        other => text.push(other),
                    }
                }
            }
            '\\' => word.get_or_insert_with(String::new).push(chars.next()?),
            '|' | '&' | ';' | '<' | '>' | '`' | '(' | ')' => return None,
            // `${VAR}` is tether's own expansion, kept as written; any
            // other `$` is the shell's.
            '$' => {
                let text = word.get_or_insert_with(String::new);
                if chars.next()? != '{' {
                    return None;
                }
                text.push_str("${");
                loop {
                    let next = chars.next()?;
                    text.push(next);
                    if next == '}' {
                        break;
                    }
                }
            }
            other => word.get_or_insert_with(String::new).push(other),
        }
    }
    words.extend(word);
    (!words.is_empty()).then_some(words)
}
