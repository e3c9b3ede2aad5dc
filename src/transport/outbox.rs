//! The write side of a stdio connection, with a write-through fast path.
//!
//! Handing every frame to a writer thread costs a thread switch per call,
//! which on one CPU is a third of a round trip. So the pipe is non-blocking
//! and a caller writes its frame straight into it when nothing is queued
//! ahead: the lock is held across one non-blocking `write`, which never waits
//! on the server. Only when the pipe is full (a server that does not read, or
//! a burst) does the rest go to the backlog, and a `{server}-writer` thread,
//! started then, owns the pipe until the backlog is empty, waiting with
//! `poll` in short slices so that `close` is never stuck behind a server that
//! stopped reading; it ends when the backlog is empty, so an idle connection
//! has no writer thread.
//! Frames are written whole and in order: while the writer owns the pipe,
//! every caller queues behind it. The backlog is bounded: a server that stops
//! reading while more than 64 MiB waits for it is failed, not fed forever. A
//! failed write closes the connection through the inbox, so that waiting
//! callers learn at once.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::process::ChildStdin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::Duration;

use crate::error::CloseReason;
use crate::jsonrpc::Frame;
use crate::sync::lock;
use crate::threads::NamedThread;
use crate::transport::{Inbox, Outlet};

/// How long the writer waits for room in the pipe before checking for close.
const POLL_SLICE: Duration = Duration::from_millis(100);
/// How long `close` waits for the writer thread.
const JOIN_WAIT: Duration = Duration::from_secs(2);
/// The most that may wait for a server that does not read.
const MAX_BACKLOG: usize = 64 * 1024 * 1024;

/// Frames to one server's stdin.
pub(crate) struct Outbox {
    server: String,
    state: Mutex<State>,
    backlog_ready: Condvar,
    closed: AtomicBool,
    /// The writer thread while there is a backlog (and the last one, until
    /// it is joined).
    writer: Mutex<Option<NamedThread>>,
    myself: Weak<Outbox>,
}

#[derive(Default)]
struct State {
    pipe: Option<Arc<ChildStdin>>,
    backlog: VecDeque<Vec<u8>>,
    backlog_bytes: usize,
    writer_owns_pipe: bool,
    /// A writer thread is running (or starting) for the backlog.
    writer_running: bool,
    /// Told when writing fails; taken on close, which breaks the cycle
    /// between the connection's router and its outbox.
    inbox: Option<Arc<dyn Inbox>>,
}

/// The outbox is closed: nothing more will be written.
#[derive(Debug)]
pub(crate) struct Closed;

impl Outbox {
    /// An outbox with no pipe yet; frames sent before `attach` are queued.
    pub(crate) fn new(server: &str) -> Arc<Outbox> {
        Arc::new_cyclic(|myself| Outbox {
            server: server.to_owned(),
            state: Mutex::new(State::default()),
            backlog_ready: Condvar::new(),
            closed: AtomicBool::new(false),
            writer: Mutex::new(None),
            myself: myself.clone(),
        })
    }

    /// Starts the writer thread for the backlog, unless one runs; called
    /// with the state locked (`state`), which it releases.
    fn wake_writer(&self, mut state: MutexGuard<'_, State>) {
        if state.writer_running {
            self.backlog_ready.notify_one();
            return;
        }
        state.writer_running = true;
        drop(state);
        let Some(me) = self.myself.upgrade() else { return };
        let mut writer = lock(&self.writer);
        // The last writer has left its loop already (it cleared the flag).
        if let Some(done) = writer.take() {
            done.join_within(JOIN_WAIT);
        }
        if self.closed.load(Ordering::Acquire) {
            // Closed meanwhile: close has joined, or will join, what is here.
            lock(&self.state).writer_running = false;
            return;
        }
        match NamedThread::spawn(format!("{}-writer", self.server), move || me.run_writer()) {
            Ok(thread) => *writer = Some(thread),
            Err(err) => {
                drop(writer);
                self.fail(Some(CloseReason::Io(format!("cannot start the writer thread: {err}"))));
            }
        }
    }

    /// Joins the writer thread, if one ran (after `close`).
    pub(crate) fn join_writer(&self) {
        if let Some(thread) = lock(&self.writer).take() {
            thread.join_within(JOIN_WAIT);
        }
    }

    /// Gives the outbox its pipe, made non-blocking, and the inbox to tell
    /// when writing fails.
    pub(crate) fn attach(&self, pipe: ChildStdin, inbox: Arc<dyn Inbox>) -> io::Result<()> {
        set_nonblocking(&pipe)?;
        let mut state = lock(&self.state);
        state.pipe = Some(Arc::new(pipe));
        state.inbox = Some(inbox);
        if !state.backlog.is_empty() {
            self.wake_writer(state);
        }
        Ok(())
    }

    /// Writes one frame (a newline is added), or queues it for the writer.
    ///
    /// # Errors
    /// [`Closed`] once the outbox is closed or the pipe broke.
    pub(crate) fn send(&self, mut frame: Vec<u8>) -> Result<(), Closed> {
        frame.push(b'\n');
        let mut state = lock(&self.state);
        if self.closed.load(Ordering::Acquire) {
            return Err(Closed);
        }
        if !state.writer_owns_pipe && state.backlog.is_empty() {
            if let Some(pipe) = &state.pipe {
                log::trace!(
                    "{} -> {}",
                    self.server,
                    String::from_utf8_lossy(&frame[..frame.len() - 1])
                );
                match (&**pipe).write(&frame) {
                    Ok(written) if written == frame.len() => return Ok(()),
                    Ok(written) => {
                        frame.drain(..written);
                    }
                    Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
                    Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                    Err(err) => {
                        drop(state);
                        self.fail(write_failure(&err));
                        return Err(Closed);
                    }
                }
            }
        }
        if state.backlog_bytes + frame.len() > MAX_BACKLOG {
            drop(state);
            let queued = MAX_BACKLOG / (1024 * 1024);
            self.fail(Some(CloseReason::Io(format!(
                "the server stopped reading its input ({queued} MiB queued)"
            ))));
            return Err(Closed);
        }
        state.backlog_bytes += frame.len();
        state.backlog.push_back(frame);
        self.wake_writer(state);
        Ok(())
    }

    /// Closes the outbox and the connection, for this reason.
    /// Stops writing for `reason`, and fails the connection with it; a
    /// server that stopped reading because it exited (`None`) is reported by
    /// the reader instead, which sees its output end and how it exited.
    fn fail(&self, reason: Option<CloseReason>) {
        let inbox = lock(&self.state).inbox.take();
        self.close();
        match (reason, inbox) {
            (Some(reason), Some(inbox)) => {
                log::debug!("{}: {reason}", self.server);
                inbox.closed(reason);
            }
            _ => log::debug!("{}: the server stopped reading its input", self.server),
        }
    }

    /// Closes the pipe (the server sees end of input); queued frames are
    /// dropped. Idempotent.
    pub(crate) fn close(&self) {
        let mut state = lock(&self.state);
        self.closed.store(true, Ordering::Release);
        state.pipe = None;
        state.inbox = None;
        state.backlog.clear();
        state.backlog_bytes = 0;
        self.backlog_ready.notify_all();
    }

    /// The body of the `{server}-writer` thread: drains the backlog, and
    /// ends when it is empty or the outbox closes.
    fn run_writer(&self) {
        loop {
            let (pipe, batch) = {
                let mut state = lock(&self.state);
                loop {
                    if self.closed.load(Ordering::Acquire) || state.backlog.is_empty() {
                        // Under the lock: a frame queued after this starts a
                        // new writer.
                        state.writer_owns_pipe = false;
                        state.writer_running = false;
                        return;
                    }
                    if state.pipe.is_some() {
                        break;
                    }
                    state = self.backlog_ready.wait(state).unwrap();
                }
                state.writer_owns_pipe = true;
                state.backlog_bytes = 0;
                let pipe = Arc::clone(state.pipe.as_ref().expect("checked above"));
                (pipe, std::mem::take(&mut state.backlog))
            };
            for frame in batch {
                if let Err(err) = self.write_all(&pipe, &frame) {
                    if !self.closed.load(Ordering::Acquire) {
                        self.fail(write_failure(&err));
                    }
                    return;
                }
            }
        }
    }

    /// Writes a whole frame to the non-blocking pipe, waiting for room in
    /// short slices so that a close is noticed.
    fn write_all(&self, pipe: &ChildStdin, mut frame: &[u8]) -> io::Result<()> {
        while !frame.is_empty() {
            if self.closed.load(Ordering::Acquire) {
                return Err(io::Error::new(io::ErrorKind::BrokenPipe, "closed"));
            }
            match (&*pipe).write(frame) {
                Ok(0) => {
                    return Err(io::Error::new(io::ErrorKind::WriteZero, "pipe accepted nothing"))
                }
                Ok(written) => frame = &frame[written..],
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                    crate::poll::writable(pipe.as_raw_fd(), POLL_SLICE)?;
                }
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }
}

fn set_nonblocking(pipe: &ChildStdin) -> io::Result<()> {
    let fd = pipe.as_raw_fd();
    // SAFETY: fcntl on a file descriptor we own, with integer arguments.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

impl Outlet for Outbox {
    fn send(&self, frame: Frame) -> Result<(), Closed> {
        Outbox::send(self, frame.bytes)
    }
}

/// Why writing to the server failed: a broken pipe means it stopped
/// reading (it exited), which the reader reports with its exit status
/// (`None`); anything else is this connection's failure.
fn write_failure(err: &io::Error) -> Option<CloseReason> {
    if err.kind() == io::ErrorKind::BrokenPipe {
        None
    } else {
        Some(CloseReason::Io(format!("writing to the server failed: {err}")))
    }
}
