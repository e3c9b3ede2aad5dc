//! A word as a person would type it into a POSIX shell: as it is when
//! plain, else single-quoted.
//!
//! Shared by the configuration (how `list` and `trust` show a command line)
//! and the command line (hints that repeat `--config-dir`), which reaches it
//! through the hidden `tether::for_cli`: one copy in the binary, and no
//! quoting helper in the documented API.

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
