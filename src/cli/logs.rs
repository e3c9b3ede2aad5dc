//! `tether logs`: what servers logged and wrote to stderr, from `mcp.log`
//! (a source column says which: `log` or `stderr`), filtered by server, the
//! last N lines, or followed as they arrive.

use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use super::escape::escaped;
use super::output::{emit, EXIT_OK, EXIT_USAGE, OUTPUT_CLOSED};

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
            errln!("cannot read {}: {err}", path.display());
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
        emit_line(line);
    }
    if let (Some(name), true, false) = (server, kept.is_empty(), follow) {
        eprintln!("No lines from {name:?} in {} (yet).", path.display());
    }
    if !follow {
        return EXIT_OK;
    }
    let position = reader.stream_position().unwrap_or(0);
    follow_from(&path, position, &matches)
}

/// Prints one line of the log: what servers wrote, made visible (controls,
/// bidirectional and zero-width characters escaped).
fn emit_line(line: &str) {
    emit(&format!("{}\n", escaped(line.trim_end_matches('\n'))));
}

/// Prints new matching lines until interrupted (SIGINT ends the process).
/// The file is kept open between looks: when it is rotated (`mcp.log`
/// becomes `mcp.log.1`), what was written to it before the move is read
/// from the open file first, then the new file from its start.
fn follow_from(path: &Path, position: u64, matches: &dyn Fn(&str) -> bool) -> u8 {
    let mut open: Option<(BufReader<File>, u64)> = None;
    let mut start = position;
    let mut partial = String::new();
    while !OUTPUT_CLOSED.load(std::sync::atomic::Ordering::Relaxed) {
        if open.is_none() {
            open = File::open(path).ok().and_then(|mut file| {
                let meta = file.metadata().ok()?;
                // Cut short in place (not moved): from the top again.
                let from = if meta.len() < start { 0 } else { start };
                file.seek(SeekFrom::Start(from)).ok()?;
                Some((BufReader::new(file), meta.ino()))
            });
        }
        if let Some((reader, inode)) = &mut open {
            // Looked at before reading: once it moved, nothing more is
            // written to the open file, so reading it to its end now loses
            // nothing.
            let moved = std::fs::metadata(path).map_or(true, |meta| meta.ino() != *inode);
            let mut chunk = String::new();
            while let Ok(n) = reader.read_line(&mut chunk) {
                if n == 0 {
                    break;
                }
                start += n as u64;
                partial.push_str(&chunk);
                chunk.clear();
                if partial.ends_with('\n') {
                    if matches(&partial) {
                        emit_line(&partial);
                    }
                    partial.clear();
                }
            }
            let cut = reader.get_ref().metadata().is_ok_and(|meta| meta.len() < start);
            if moved || cut {
                // The new file (or the one cut short) from its start.
                open = None;
                start = 0;
            }
        }
        std::thread::sleep(FOLLOW_POLL);
    }
    EXIT_OK
}
