//! `tether logs`: what servers logged and wrote to stderr, from `mcp.log`
//! (a source column says which: `log` or `stderr`), filtered by server, the
//! last N lines, or followed as they arrive.

use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::Path;
use std::time::Duration;

use super::{emit, EXIT_OK, EXIT_USAGE, OUTPUT_CLOSED};

/// How often `-f` looks for new lines.
const FOLLOW_POLL: Duration = Duration::from_millis(200);

pub(super) fn logs(config_dir: &Path, server: Option<&str>, lines: usize, follow: bool) -> u8 {
    let path = config_dir.join("mcp.log");
    let matches = |line: &str| server.is_none_or(|name| line.contains(&format!(" [{name}] ")));
    let file = match File::open(&path) {
        Ok(file) => file,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound && !follow => {
            eprintln!(
                "No log yet: {} does not exist (it is written when servers log or write to stderr).",
                path.display()
            );
            return EXIT_OK;
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return follow_from(&path, 0, &matches);
        }
        Err(err) => {
            eprintln!("error: cannot read {}: {err}", path.display());
            return EXIT_USAGE;
        }
    };
    let mut reader = BufReader::new(file);
    let mut kept: std::collections::VecDeque<String> =
        std::collections::VecDeque::with_capacity(lines);
    let mut line = String::new();
    while reader.read_line(&mut line).unwrap_or(0) > 0 {
        if matches(&line) && lines > 0 {
            if kept.len() == lines {
                kept.pop_front();
            }
            kept.push_back(std::mem::take(&mut line));
        }
        line.clear();
    }
    for line in &kept {
        emit(line);
    }
    if !follow {
        return EXIT_OK;
    }
    let position = reader.stream_position().unwrap_or(0);
    follow_from(&path, position, &matches)
}

/// Prints new matching lines until interrupted (SIGINT ends the process).
fn follow_from(path: &Path, mut position: u64, matches: &dyn Fn(&str) -> bool) -> u8 {
    let mut partial = String::new();
    while !OUTPUT_CLOSED.load(std::sync::atomic::Ordering::Relaxed) {
        if let Ok(mut file) = File::open(path) {
            let length = file.metadata().map(|meta| meta.len()).unwrap_or(0);
            if length < position {
                // Rotated: start again at the top of the new file.
                position = 0;
            }
            if length > position && file.seek(SeekFrom::Start(position)).is_ok() {
                let mut reader = BufReader::new(file);
                let mut chunk = String::new();
                while let Ok(n) = reader.read_line(&mut chunk) {
                    if n == 0 {
                        break;
                    }
                    position += n as u64;
                    partial.push_str(&chunk);
                    chunk.clear();
                    if partial.ends_with('\n') {
                        if matches(&partial) {
                            emit(&partial);
                        }
                        partial.clear();
                    }
                }
            }
        }
        std::thread::sleep(FOLLOW_POLL);
    }
    EXIT_OK
}
