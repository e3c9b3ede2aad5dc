//! Every stdio server's stderr, drained by one thread: `tether-stderr`.
//!
//! A server must never block on a full stderr pipe, and its last words must
//! be at hand for an error message; but a thread per server just to drain a
//! stream that is silent nearly always cost each idle server a stack and a
//! share of malloc's per-thread arenas. So one thread polls the stderr of
//! every running server (and a wake-up socket through which streams are
//! added and removed), keeps each stream's last 64 KiB, and cuts it into
//! lines for the host. It never calls the host itself: a line goes to the
//! connection's inbox, which queues it for the connection's events thread,
//! so a slow host handler holds up no server's stderr.
//!
//! The thread starts with the first stream and ends when the last one has
//! ended; the next start joins it. A stream ends when the server's side of
//! the pipe closes (every process holding it exited). A connection's close
//! waits for that a moment; if some escaped process still holds the pipe,
//! the stream is detached (its tail says it ended, nothing more reaches the
//! host) but still read until it ends: a pipe closed under a writer would
//! kill it with SIGPIPE. A panicking logger on this thread loses its lines,
//! never the thread.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::ChildStderr;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use crate::sync::{lock, wait_timeout, ThrottledWarning};
use crate::threads::NamedThread;
use crate::transport::Inbox;

/// How much of a server's stderr is kept for error messages.
const STDERR_TAIL: usize = 64 * 1024;
/// What the thread reads from one stream at a time.
const CHUNK: usize = 4096;
/// The longest stderr line handed on whole.
const MAX_STDERR_LINE: usize = 4096;
/// How many stderr lines a second are handed to the host.
const STDERR_LINES_PER_SECOND: u32 = 200;
/// How long joining an ended drain thread may take (it has returned).
const JOIN_WAIT: Duration = Duration::from_secs(1);
/// The pause before polling again after `poll` failed.
const POLL_RETRY: Duration = Duration::from_millis(100);
/// Said once a second at most, however long `poll` keeps failing.
static POLL_FAILED: ThrottledWarning = ThrottledWarning::new();
/// What the host is told in place of a flood's lines.
const LEFT_OUT: &str = "(more stderr lines than can be shown; see the tail)";

/// One server's stderr, as its connection sees it.
pub(super) struct StderrWatch {
    id: u64,
    tail: Arc<StderrTail>,
}

/// The drain: its thread, while one runs.
struct Drain {
    running: Option<Running>,
    /// The thread that ended last, joined by whoever starts the next.
    ended: Option<NamedThread>,
    next_id: u64,
}

struct Running {
    commands: Sender<Command>,
    /// Written to wake the thread's `poll`.
    wake: UnixStream,
    thread: NamedThread,
}

enum Command {
    Add(Stream),
    /// The connection closed without seeing the end of the stream.
    Detach(u64),
}

static DRAIN: Mutex<Drain> = Mutex::new(Drain { running: None, ended: None, next_id: 1 });

/// Starts draining `stderr`: its lines go to `inbox`, its tail to the watch.
///
/// # Errors
/// When the drain thread or its wake-up socket cannot be created.
pub(super) fn watch(
    server: &str,
    stderr: ChildStderr,
    inbox: Weak<dyn Inbox>,
) -> io::Result<StderrWatch> {
    let tail = Arc::new(StderrTail::default());
    let mut drain = lock(&DRAIN);
    let id = drain.next_id;
    drain.next_id += 1;
    let lines = StderrLines::new(server, inbox);
    let stream = Stream { id, stderr, tail: Arc::clone(&tail), lines, detached: false };
    if drain.running.is_none() {
        if let Some(ended) = drain.ended.take() {
            ended.join_within(JOIN_WAIT);
        }
        let (commands, received) = crossbeam_channel::unbounded();
        let (wake, woken) = UnixStream::pair()?;
        woken.set_nonblocking(true)?;
        wake.set_nonblocking(true)?;
        let thread = NamedThread::spawn("tether-stderr".into(), move || run(&received, &woken))?;
        drain.running = Some(Running { commands, wake, thread });
    }
    if let Some(running) = &drain.running {
        running.tell(Command::Add(stream));
    }
    Ok(StderrWatch { id, tail })
}

impl Running {
    fn tell(&self, command: Command) {
        // The thread ends only under the drain's lock, after finding no
        // command: it is there to take this one.
        let _ = self.commands.send(command);
        // A full socket already has a wake-up waiting. Never SIGPIPE: the
        // thread's end of it lives as long as `running` names it.
        // SAFETY: one byte from a valid buffer to an open socket.
        let _ = unsafe {
            libc::send(
                self.wake.as_raw_fd(),
                [1u8].as_ptr().cast(),
                1,
                libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
            )
        };
    }
}

impl StderrWatch {
    /// The tail; first waits up to `wait_for_end` for the stream to end, so
    /// that a server's last words before it exited are in it.
    pub(super) fn text(&self, wait_for_end: Duration) -> String {
        self.tail.text(wait_for_end)
    }

    /// At close: waits up to `within` for the stream to end (its last lines
    /// handed on); if it has not, detaches it: it is still read to its end,
    /// and what comes is dropped.
    pub(super) fn close(&self, within: Duration) {
        if self.tail.wait_for_end(within) {
            return;
        }
        log::debug!("stderr of a closed server is still open (an escaped process holds it)");
        if let Some(running) = &lock(&DRAIN).running {
            running.tell(Command::Detach(self.id));
        }
    }
}

/// The drain thread: polls the streams until none is left.
fn run(commands: &Receiver<Command>, woken: &UnixStream) {
    /// Should this thread unwind after all, the next stream starts another.
    struct Unwinding;
    impl Drop for Unwinding {
        fn drop(&mut self) {
            if std::thread::panicking() {
                let mut drain = lock(&DRAIN);
                drain.ended = drain.running.take().map(|running| running.thread);
            }
        }
    }
    let _unwinding = Unwinding;
    let mut streams: Vec<Stream> = Vec::new();
    let mut polled: Vec<libc::pollfd> = Vec::new();
    let mut chunk = vec![0u8; CHUNK];
    loop {
        for command in commands.try_iter() {
            match command {
                Command::Add(stream) => streams.push(stream),
                Command::Detach(id) => {
                    if let Some(stream) = streams.iter_mut().find(|stream| stream.id == id) {
                        stream.detach();
                    }
                }
            }
        }
        if streams.is_empty() {
            let mut drain = lock(&DRAIN);
            if commands.is_empty() {
                drain.ended = drain.running.take().map(|running| running.thread);
                return;
            }
            continue;
        }
        polled.clear();
        polled.push(readable(woken.as_raw_fd()));
        polled.extend(streams.iter().map(|stream| readable(stream.stderr.as_raw_fd())));
        if let Err(err) = poll(&mut polled) {
            // Out of kernel memory, say. Dropping the pipes would kill the
            // servers (SIGPIPE) at their next line: wait and try again.
            let said = AssertUnwindSafe(|| {
                POLL_FAILED.warn(|| format!("polling stderr failed: {err}; trying again"));
            });
            let _ = catch_unwind(said);
            std::thread::sleep(POLL_RETRY);
            continue;
        }
        if polled[0].revents != 0 {
            let mut sink = [0u8; 64];
            while matches!((&*woken).read(&mut sink), Ok(n) if n > 0) {}
        }
        // From the back, so that removing one moves none still to be seen.
        for at in (0..streams.len()).rev() {
            if polled[at + 1].revents != 0 && !streams[at].read(&mut chunk) {
                streams.swap_remove(at).finish();
            }
        }
    }
}

fn readable(fd: RawFd) -> libc::pollfd {
    libc::pollfd { fd, events: libc::POLLIN, revents: 0 }
}

/// Waits, without a time limit, until one of `fds` is ready.
fn poll(fds: &mut [libc::pollfd]) -> io::Result<()> {
    loop {
        // SAFETY: a valid array of `fds.len()` pollfds, for the call.
        if unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) } >= 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// One server's stderr, read by the drain thread.
struct Stream {
    id: u64,
    stderr: ChildStderr,
    tail: Arc<StderrTail>,
    lines: StderrLines,
    /// Its connection closed: read and dropped until it ends.
    detached: bool,
}

impl Stream {
    /// Reads what is ready (the poll said so; it does not block); false at
    /// the end of the stream.
    fn read(&mut self, chunk: &mut [u8]) -> bool {
        match self.stderr.read(chunk) {
            Ok(0) => false,
            // Nobody looks any more: read on, so that whoever holds the
            // pipe never blocks on it (nor dies of SIGPIPE were it closed).
            Ok(_) if self.detached => true,
            Ok(n) => {
                lock(&self.tail.bytes).push(&chunk[..n]);
                // The host's logger runs here (`log::debug!`): a panic in it
                // loses these lines, never the drain of every server.
                let _ = catch_unwind(AssertUnwindSafe(|| self.lines.chunk(&chunk[..n])));
                true
            }
            Err(err) => {
                matches!(err.kind(), io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock)
            }
        }
    }

    /// The connection closed before the stream ended: its last line and
    /// its end are said now, and what comes after is read and dropped.
    fn detach(&mut self) {
        self.end();
        self.detached = true;
    }

    /// The stream ended.
    fn finish(mut self) {
        if !self.detached {
            self.end();
        }
    }

    fn end(&mut self) {
        let _ = catch_unwind(AssertUnwindSafe(|| self.lines.finish()));
        lock(&self.tail.bytes).ended = true;
        self.tail.changed.notify_all();
    }
}

/// Hands a server's stderr, line by line, to the host: at most
/// [`STDERR_LINES_PER_SECOND`] lines a second. Past that the rest of the
/// second is skipped whole, without looking for line breaks, so a flood
/// costs the drain nothing, and a line says lines were left out (the tail
/// keeps the last 64 KiB). The last 4 KiB skipped are kept meanwhile: if the
/// stream ends while skipping (a server that floods, then fails), its last
/// lines still reach the host, after the note.
struct StderrLines {
    server: String,
    /// Weak: a closed connection's inbox is not kept alive by its stderr.
    inbox: Weak<dyn Inbox>,
    /// The bytes of a line not ended yet.
    partial: Vec<u8>,
    window: Instant,
    in_window: u32,
    /// Over the limit: skipping until the window ends.
    skipping: bool,
    /// While skipping: the last bytes skipped, at most [`MAX_STDERR_LINE`].
    hidden: VecDeque<u8>,
    /// The front of `hidden` is not the start of a line (older bytes went).
    hidden_cut: bool,
    /// After skipping: the next bytes up to a line break are a fragment.
    resync: bool,
}

/// How many of the lines a skip hid are handed on when the stream ends.
const LAST_WORDS: usize = 10;
/// The note before them.
const LAST_WORDS_NOTE: &str = "(more stderr lines than can be shown; the last ones follow)";

impl StderrLines {
    fn new(server: &str, inbox: Weak<dyn Inbox>) -> StderrLines {
        StderrLines {
            server: server.to_owned(),
            inbox,
            partial: Vec::new(),
            window: Instant::now(),
            in_window: 0,
            skipping: false,
            hidden: VecDeque::new(),
            hidden_cut: false,
            resync: false,
        }
    }

    fn chunk(&mut self, mut bytes: &[u8]) {
        if self.window.elapsed() >= Duration::from_secs(1) {
            if std::mem::take(&mut self.skipping) {
                self.say(LEFT_OUT);
                self.hidden = VecDeque::new();
            }
            (self.window, self.in_window) = (Instant::now(), 0);
        }
        if self.skipping {
            self.hide(bytes);
            return;
        }
        if self.resync {
            match bytes.iter().position(|&byte| byte == b'\n') {
                Some(end) => {
                    bytes = &bytes[end + 1..];
                    self.resync = false;
                }
                None => return,
            }
        }
        self.partial.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(end) = self.partial[start..].iter().position(|&byte| byte == b'\n') {
            if self.in_window >= STDERR_LINES_PER_SECOND {
                // From a line's start: what is not handed on is hidden.
                self.skipping = true;
                self.hidden_cut = false;
                let rest = std::mem::take(&mut self.partial);
                self.hide(&rest[start..]);
                return;
            }
            self.hand_on(start, start + end);
            start += end + 1;
        }
        self.partial.drain(..start);
        // A line without end is cut into pieces, never kept without bound.
        if self.partial.len() > MAX_STDERR_LINE {
            self.hand_on(0, self.partial.len());
            self.partial.clear();
        }
        if self.partial.is_empty() {
            // Most lines come whole: nothing stays allocated between them.
            self.partial = Vec::new();
        }
    }

    /// Skips `bytes`, keeping the last of them.
    fn hide(&mut self, bytes: &[u8]) {
        let Some(&last) = bytes.last() else { return };
        // When the window ends, a line cut by it is a fragment.
        self.resync = last != b'\n';
        self.hidden.extend(&bytes[bytes.len().saturating_sub(MAX_STDERR_LINE)..]);
        let over = self.hidden.len().saturating_sub(MAX_STDERR_LINE);
        if over > 0 {
            self.hidden.drain(..over);
            self.hidden_cut = true;
        }
    }

    fn hand_on(&mut self, start: usize, end: usize) {
        self.in_window += 1;
        let line = String::from_utf8_lossy(&self.partial[start..end]);
        self.say(line.trim_end());
    }

    fn say(&self, line: &str) {
        log::debug!("{} stderr: {line}", self.server);
        if let Some(inbox) = self.inbox.upgrade() {
            inbox.stderr_line(line);
        }
    }

    /// At the end of the stream: what is left of a line, or that lines were
    /// left out and the last of them.
    fn finish(&mut self) {
        if self.skipping {
            self.say(LAST_WORDS_NOTE);
            let hidden: Vec<u8> = std::mem::take(&mut self.hidden).into();
            let mut text = &hidden[..];
            if self.hidden_cut {
                let whole =
                    text.iter().position(|&byte| byte == b'\n').map_or(text.len(), |at| at + 1);
                text = &text[whole..];
            }
            let lines: Vec<&[u8]> =
                text.split(|&byte| byte == b'\n').filter(|line| !line.is_empty()).collect();
            for line in &lines[lines.len().saturating_sub(LAST_WORDS)..] {
                self.say(String::from_utf8_lossy(line).trim_end());
            }
        } else if !self.partial.is_empty() && !self.resync {
            let end = self.partial.len();
            self.hand_on(0, end);
        }
    }
}

/// The end of a server's stderr, and whether the stream has ended.
#[derive(Default)]
struct StderrTail {
    bytes: Mutex<Tail>,
    changed: Condvar,
}

impl StderrTail {
    /// Waits up to `within` for the stream to end; true if it did.
    fn wait_for_end(&self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        let mut tail = lock(&self.bytes);
        while !tail.ended {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            tail = wait_timeout(&self.changed, tail, deadline - now);
        }
        true
    }

    fn text(&self, wait_for_end: Duration) -> String {
        self.wait_for_end(wait_for_end);
        lock(&self.bytes).text()
    }
}

/// The last bytes of a stream, bounded.
#[derive(Default)]
struct Tail {
    bytes: VecDeque<u8>,
    ended: bool,
}

impl Tail {
    fn push(&mut self, chunk: &[u8]) {
        let chunk = &chunk[chunk.len().saturating_sub(STDERR_TAIL)..];
        let overflow = (self.bytes.len() + chunk.len()).saturating_sub(STDERR_TAIL);
        self.bytes.drain(..overflow);
        self.bytes.extend(chunk);
    }

    fn text(&self) -> String {
        let (front, back) = self.bytes.as_slices();
        let mut joined = Vec::with_capacity(self.bytes.len());
        joined.extend_from_slice(front);
        joined.extend_from_slice(back);
        String::from_utf8_lossy(&joined).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{CloseReason, Error};
    use crate::jsonrpc::Message;
    use crate::transport::Outlet;

    /// Records the stderr lines it is handed.
    #[derive(Default)]
    struct Lines(Mutex<Vec<String>>);

    impl Inbox for Lines {
        fn attach(&self, _outlet: Arc<dyn Outlet>) {}
        fn skipped(&self) -> u64 {
            0
        }
        fn deliver(&self, _message: Message) {}
        fn closed(&self, _reason: CloseReason) {}
        fn failed(&self, _id: i64, _error: Error) {}
        fn waiting(&self) -> bool {
            false
        }
        fn stderr_line(&self, line: &str) {
            lock(&self.0).push(line.to_owned());
        }
    }

    fn numbered(from: usize, to: usize) -> String {
        (from..=to).map(|n| format!("line {n}\n")).collect()
    }

    fn lines_for(inbox: &Arc<Lines>) -> StderrLines {
        let weak: Weak<dyn Inbox> = Arc::downgrade(&(Arc::clone(inbox) as Arc<dyn Inbox>));
        StderrLines::new("fx", weak)
    }

    /// A server that floods and then fails: its last words still reach the
    /// host when the stream ends, after the note.
    #[test]
    fn a_flood_then_an_end_hands_on_the_last_lines() {
        let inbox = Arc::new(Lines::default());
        let mut lines = lines_for(&inbox);
        lines.chunk(numbered(1, 300).as_bytes());
        lines.chunk(b"fatal: crashing now\n");
        lines.finish();
        let got = lock(&inbox.0).clone();
        assert_eq!(got.len(), 200 + 1 + LAST_WORDS, "{got:?}");
        assert_eq!(got[199], "line 200");
        assert_eq!(got[200], LAST_WORDS_NOTE);
        assert_eq!(got[201], "line 292");
        assert_eq!(got.last().unwrap(), "fatal: crashing now");
    }

    /// Past 4 KiB of skipped bytes, the oldest go, and a line they cut is
    /// not handed on in pieces.
    #[test]
    fn the_last_words_are_whole_lines() {
        let inbox = Arc::new(Lines::default());
        let mut lines = lines_for(&inbox);
        lines.chunk(numbered(1, 2000).as_bytes());
        lines.finish();
        let got = lock(&inbox.0).clone();
        let last: Vec<&str> = got[201..].iter().map(String::as_str).collect();
        let expected: Vec<String> = (1991..=2000).map(|n| format!("line {n}")).collect();
        assert_eq!(last, expected);
    }

    /// When the skipping second ends on a line break, the next line is
    /// whole and handed on; one cut by the window is a fragment and is not.
    #[test]
    fn after_a_skip_whole_lines_come_through_and_fragments_do_not() {
        let inbox = Arc::new(Lines::default());
        let mut lines = lines_for(&inbox);
        lines.chunk(numbered(1, 250).as_bytes());
        lines.window -= Duration::from_secs(2);
        lines.chunk(b"line 251\n");
        lines.chunk(numbered(252, 500).as_bytes());
        lines.chunk(b"line 501 cut by the");
        lines.window -= Duration::from_secs(2);
        lines.chunk(b" window\nline 502\n");
        let got = lock(&inbox.0).clone();
        assert_eq!(got[200], LEFT_OUT);
        assert_eq!(got[201], "line 251");
        assert_eq!(got[401], LEFT_OUT, "{:?}", &got[395..]);
        assert_eq!(got[402..], ["line 502"]);
    }

    #[test]
    fn tail_keeps_the_last_bytes() {
        let mut tail = Tail::default();
        tail.push(&vec![b'a'; STDERR_TAIL - 2]);
        tail.push(b"bcde");
        let text = tail.text();
        assert_eq!(text.len(), STDERR_TAIL);
        assert!(text.ends_with("bcde") && text.starts_with("aa"));
        tail.push(&vec![b'z'; STDERR_TAIL * 3]);
        assert_eq!(tail.text(), "z".repeat(STDERR_TAIL));
    }
}
