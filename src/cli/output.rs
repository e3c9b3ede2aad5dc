//! What the CLI writes and how it ends: stdout through [`emit`] (a closed
//! pipe ends it quietly, a failed write is exit code 1, JSON escapes C1
//! controls), errors through [`report`] (the error, its causes, and the
//! exit code it maps to) and `errln!` (with `--json`, kept and said once at
//! the end as one JSON object), the exit codes, and the flag a signal sets.
//!
//! Every command file writes through here, and nothing here knows any
//! command, so that no two files of `cli/` import each other.

use std::io::{self, IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use tether::{Error, ServerState};

use super::escape;

/// `print!` through [`emit`]: a closed pipe ends the output quietly, and a
/// full disk is an error and exit code 1, never a panic.
macro_rules! out {
    ($($arg:tt)*) => { $crate::cli::output::emit(&format!($($arg)*)) };
}

/// `println!` through [`emit`].
macro_rules! outln {
    () => { $crate::cli::output::emit("\n") };
    ($($arg:tt)*) => { $crate::cli::output::emit(&format!("{}\n", format_args!($($arg)*))) };
}

/// `errln!("…")`, or with `--json` kept for the one JSON object
/// said at the end ([`finish_errors`]).
macro_rules! errln {
    ($($arg:tt)*) => { $crate::cli::output::error_line(format!($($arg)*)) };
}

/// A line that explains an error (`hint: …`, `stderr: …`): indented under
/// it on stderr, or with `--json` in the error object's `details`.
macro_rules! detail {
    ($($arg:tt)*) => { $crate::cli::output::detail_line(format!($($arg)*)) };
}

/// Success.
pub(crate) const EXIT_OK: u8 = 0;
/// The tool reported an error, or a server is not connected.
pub(crate) const EXIT_TOOL_ERROR: u8 = 1;
/// Bad usage, bad JSON, unknown server or tool, invalid config.
pub(crate) const EXIT_USAGE: u8 = 2;
/// The server could not be reached or broke the protocol.
pub(crate) const EXIT_SERVER: u8 = 3;

/// Set once a signal arrived: errors from the shutdown it causes are not news.
pub(crate) static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// Set once stdout is a closed pipe (`tether tools | head -1`): output stops,
/// but the command still ends its servers before exiting.
pub(crate) static OUTPUT_CLOSED: AtomicBool = AtomicBool::new(false);
/// Set once writing a result failed otherwise (a full disk): the command
/// did not do its job, whatever its servers said.
pub(crate) static OUTPUT_FAILED: AtomicBool = AtomicBool::new(false);
/// `--json`: errors are kept, and said once at the end as one JSON object.
static JSON_ERRORS: AtomicBool = AtomicBool::new(false);
/// The error lines kept for that object.
static ERRORS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
/// The lines explaining them (hints, a server's stderr).
static DETAILS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Makes errors one JSON object at the end (`--json`).
pub(crate) fn json_errors() {
    JSON_ERRORS.store(true, Ordering::SeqCst);
}

/// An error line: said now, or kept for the JSON object.
pub(crate) fn error_line(text: String) {
    if JSON_ERRORS.load(Ordering::SeqCst) {
        lock(&ERRORS).push(text);
    } else {
        eprintln!("error: {text}");
    }
}

/// A line explaining an error: said now, indented, or kept for the JSON
/// object's `details`.
pub(crate) fn detail_line(text: String) {
    if JSON_ERRORS.load(Ordering::SeqCst) {
        lock(&DETAILS).push(text);
    } else {
        eprintln!("  {text}");
    }
}

/// What another tether process said on its stderr (a keeper whose server
/// did not start): its `error:` lines as errors, the rest as details.
#[cfg_attr(not(feature = "serve"), allow(dead_code))]
pub(crate) fn said_errors(words: &str) {
    for line in words.lines().filter(|line| !line.trim().is_empty()) {
        match line.strip_prefix("error: ") {
            Some(error) => error_line(error.to_owned()),
            None => detail_line(line.trim_start().to_owned()),
        }
    }
}

/// With `--json`, the kept errors as one object on stderr:
/// `{"error": {"code", "exit", "message", "causes", "details"}}`, `code` a
/// stable word for the exit code (`toolError`, `usage`, `serverFailed`,
/// `interrupted`), `details` the hints and stderr lines that explain it.
pub(crate) fn finish_errors(exit: u8) {
    let details = std::mem::take(&mut *lock(&DETAILS));
    let kept = std::mem::take(&mut *lock(&ERRORS));
    let Some((message, causes)) = kept.split_first() else { return };
    let code = match exit {
        EXIT_TOOL_ERROR => "toolError",
        EXIT_USAGE => "usage",
        EXIT_SERVER => "serverFailed",
        code if code >= 128 => "interrupted",
        _ => "failed",
    };
    let object = serde_json::json!({"error": {"code": code, "exit": exit, "message": message,
                                              "causes": causes, "details": details}});
    eprintln!("{object}");
}

/// Writes a server's text (a tool result, a resource, a prompt) to stdout:
/// on a terminal with its control characters escaped (line breaks and tabs
/// kept), so it cannot move the cursor or hide lines; to a pipe or a file as
/// it came.
pub(crate) fn emit_body(text: &str) {
    if io::stdout().is_terminal() {
        emit(&escape::escaped_body(text));
    } else {
        emit(text);
    }
}

/// Writes to stdout; a closed pipe (`tether list | head`) is not an error.
/// Once a signal came, nothing more: what the command would print then
/// comes from its own teardown (servers "shut down by the host").
pub(crate) fn emit(text: &str) {
    if OUTPUT_CLOSED.load(Ordering::Relaxed) || INTERRUPTED.load(Ordering::SeqCst) {
        return;
    }
    let mut stdout = io::stdout().lock();
    if let Err(err) = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        OUTPUT_CLOSED.store(true, Ordering::Relaxed);
        if err.kind() != io::ErrorKind::BrokenPipe {
            OUTPUT_FAILED.store(true, Ordering::Relaxed);
            errln!("cannot write the output: {err}");
        }
    }
}

/// Writes `value` as pretty JSON and a newline, as it is serialized (never
/// held whole). A character that would hide or reorder text on a terminal
/// (C1 controls such as U+009B, which starts an escape sequence on many
/// terminals; DEL; bidirectional controls, zero-width and other
/// default-ignorable characters: `escape::hidden`) is written as its `\u`
/// escape, as JSON allows: a server's words reach a terminal as text, never
/// as commands, and the JSON means the same.
pub(crate) fn emit_json(value: &impl serde::Serialize) {
    write_json(|out| serde_json::to_writer_pretty(out, value));
}

/// [`emit_json`] on one line: a stream of objects, one a line (JSON Lines).
pub(crate) fn emit_json_line(value: &serde_json::Value) {
    // `Value`'s own writer: no other serializer made for it.
    write_json(|out| out.write_all(value.to_string().as_bytes()).map_err(serde_json::Error::io));
}

fn write_json(
    write: impl FnOnce(
        &mut JsonEscaper<io::BufWriter<io::StdoutLock<'static>>>,
    ) -> serde_json::Result<()>,
) {
    if OUTPUT_CLOSED.load(Ordering::Relaxed) || INTERRUPTED.load(Ordering::SeqCst) {
        return;
    }
    let stdout = io::stdout().lock();
    let mut out = JsonEscaper { inner: io::BufWriter::with_capacity(64 * 1024, stdout) };
    let written = write(&mut out)
        .map_err(io::Error::from)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
    if let Err(err) = written {
        OUTPUT_CLOSED.store(true, Ordering::Relaxed);
        if err.kind() != io::ErrorKind::BrokenPipe {
            OUTPUT_FAILED.store(true, Ordering::Relaxed);
            errln!("cannot write the output: {err}");
        }
    }
}

/// Escapes what `escape::hidden` names as it passes. The serializer writes
/// whole UTF-8 fragments (it never splits a character across writes), and
/// such characters occur only inside JSON strings, where `\u` escapes are
/// valid.
struct JsonEscaper<W: Write> {
    inner: W,
}

impl<W: Write> Write for JsonEscaper<W> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let Ok(text) = std::str::from_utf8(bytes) else {
            // Not expected from the serializer; passed on as it is.
            return self.inner.write(bytes);
        };
        let mut plain = 0;
        for (at, c) in text.char_indices() {
            if c.is_ascii() && c != '\u{7f}' || !escape::hidden(c) {
                continue;
            }
            self.inner.write_all(&bytes[plain..at])?;
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                write!(self.inner, "\\u{:04x}", unit)?;
            }
            plain = at + c.len_utf8();
        }
        self.inner.write_all(&bytes[plain..])?;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// The end of its stderr, when `rpc` is another tether's word that the
/// server behind it failed (`data.serverFailed`, as `tether serve` says).
fn server_failed_behind(rpc: &tether::RpcError) -> Option<Vec<&str>> {
    let data = rpc.data.as_ref()?;
    if data.get("serverFailed") != Some(&serde_json::Value::Bool(true)) {
        return None;
    }
    let stderr = data.get("stderr").and_then(serde_json::Value::as_array);
    Some(stderr.into_iter().flatten().filter_map(serde_json::Value::as_str).collect())
}

pub(crate) fn report(err: &Error) -> u8 {
    if INTERRUPTED.load(Ordering::SeqCst) {
        return EXIT_SERVER;
    }
    // Error messages carry what servers said: escaped, never interpreted.
    // A server that failed behind another tether: its words, as they
    // would have been said here.
    let behind = match err.root() {
        Error::Rpc(rpc) => server_failed_behind(rpc).map(|stderr| (rpc.message.as_str(), stderr)),
        _ => None,
    };
    match &behind {
        Some((words, _)) => error_line(escape::escaped(words)),
        None => error_line(escape::escaped(&err.to_string())),
    }
    if let Some((_, stderr)) = behind {
        for line in stderr {
            detail_line(format!("stderr: {}", escape::escaped(line)));
        }
    }
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        if JSON_ERRORS.load(Ordering::SeqCst) {
            lock(&ERRORS).push(escape::escaped(&cause.to_string()));
        } else {
            eprintln!("  caused by: {}", escape::escaped(&cause.to_string()));
        }
        source = cause.source();
    }
    exit_code_of(err)
}

/// The exit code an error means (SPEC §2).
pub(crate) fn exit_code_of(err: &Error) -> u8 {
    match err.root() {
        // The server answered, correctly: the request was wrong.
        // (-32002: a resource that does not exist.)
        Error::Rpc(rpc) if matches!(rpc.code, -32601 | -32602 | -32002) => EXIT_USAGE,
        // A server behind another tether (a kept-alive session) failed.
        Error::Rpc(rpc) if server_failed_behind(rpc).is_some() => EXIT_SERVER,
        // The server answered with an error of its own.
        Error::Rpc(_) => EXIT_TOOL_ERROR,
        // Not started for its configuration: fix that, not the server.
        Error::NotConnected {
            state: ServerState::Disabled | ServerState::Untrusted | ServerState::NeedsLogin,
            ..
        } => EXIT_USAGE,
        _ if err.is_server_failure() => EXIT_SERVER,
        _ => EXIT_USAGE,
    }
}

/// Locks, also when a former holder panicked: what the CLI guards is plain
/// data that a panic cannot leave half-written.
pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
