//! The one status line on stderr: which servers are still starting, a
//! call's progress. Shown only on a terminal, rewritten in place, and cleared
//! before anything else is printed and when a signal ends tether, so no
//! half line is left behind.

use std::io::{self, IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// True while a status line is on screen.
static SHOWN: AtomicBool = AtomicBool::new(false);
/// The line on screen, so that an unchanged one is not drawn again.
static LAST: Mutex<String> = Mutex::new(String::new());

/// True when stderr is a terminal, so a status line can be drawn.
pub(super) fn available() -> bool {
    io::stderr().is_terminal()
}

/// Replaces the status line with `text` (escaped by the caller).
pub(super) fn show(text: &str) {
    let mut last = super::output::lock(&LAST);
    if SHOWN.load(Ordering::SeqCst) && *last == text {
        return;
    }
    text.clone_into(&mut last);
    let mut stderr = io::stderr().lock();
    let _ = write!(stderr, "\r{text}\x1b[K");
    let _ = stderr.flush();
    SHOWN.store(true, Ordering::SeqCst);
}

/// Erases the status line, if one is shown.
pub(super) fn clear() {
    if SHOWN.swap(false, Ordering::SeqCst) {
        let mut stderr = io::stderr().lock();
        let _ = write!(stderr, "\r\x1b[K");
        let _ = stderr.flush();
    }
}
