//! The output of a client that reads one byte stream (stdio, a Unix
//! socket), written through by whoever sends a frame.
//!
//! Handing each answer to a writer thread costs a thread switch per call,
//! which on one CPU is a good part of what serving adds to a call. So a
//! worker writes its frame straight into the client's pipe when nothing is
//! queued ahead of it and the pipe has room: one `pwritev2` with
//! `RWF_NOWAIT`, which never waits (the lock is held across that one
//! write only, and it returns at once when the pipe is full), and which
//! leaves the descriptor's own flags alone (stdout is shared with whoever
//! started tether; it may be a terminal). Only when the pipe is full, or
//! the descriptor does not take such writes (older kernels, sockets), does
//! a frame go to the bounded queue that the front's writer thread drains
//! with ordinary blocking writes; while anything waits there, every frame
//! queues behind it, so frames are written whole and in order.
//!
//! The queue is bounded in frames and in bytes: a client that stops
//! reading its output must not make tether hold every answer its servers
//! send (a cold trial saw 870 MB and climbing). Past [`MAX_QUEUED_BYTES`]
//! a big frame waits for room as long as its sender may; one whose sender
//! never waits (a flight's answer, written by the thread that reads a
//! server) is taken up to [`MAX_UNWAITED_BYTES`], so that a client that
//! is only slow still gets the answers of the calls already flying.
//! Past that it is refused. Small frames (progress, an error in place of
//! an answer refused so) are bounded by the count alone.

use std::io;
use std::os::fd::RawFd;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use crate::sync::{lock, wait_timeout};

/// The most bytes queued for a client before a big frame waits for room.
pub(super) const MAX_QUEUED_BYTES: usize = 64 * 1024 * 1024;
/// The most bytes queued before a big frame whose sender never waits is
/// refused.
pub(super) const MAX_UNWAITED_BYTES: usize = 128 * 1024 * 1024;
/// A frame this small is never held back by the bytes queued.
pub(super) const SMALL_FRAME: usize = 4 * 1024;

/// One client's output: its descriptor, and the writer's queue.
pub(super) struct PipeOut {
    fd: RawFd,
    state: Mutex<OutState>,
    /// The writer wrote a frame (or the output closed): room for a frame
    /// that waits.
    freed: Condvar,
}

struct OutState {
    /// The writer's queue; gone once closed, which ends the writer.
    queue: Option<Sender<Vec<u8>>>,
    /// Frames queued or being written by the writer thread.
    queued: usize,
    /// Their bytes.
    queued_bytes: usize,
    /// The descriptor takes `RWF_NOWAIT` writes (until it refuses one).
    write_through: bool,
    /// A write failed: the client is gone.
    broken: bool,
}

impl PipeOut {
    /// The output on `fd`, which must stay open as long as this lives;
    /// frames that cannot be written at once go to `queue`.
    pub(super) fn new(fd: RawFd, queue: Sender<Vec<u8>>) -> PipeOut {
        let state = OutState {
            queue: Some(queue),
            queued: 0,
            queued_bytes: 0,
            write_through: true,
            broken: false,
        };
        PipeOut { fd, state: Mutex::new(state), freed: Condvar::new() }
    }

    /// Nothing more is written: the writer ends once the queue is drained.
    pub(super) fn close(&self) {
        lock(&self.state).queue = None;
        self.freed.notify_all();
    }

    /// Writes one frame (a newline added), or queues it, waiting at most
    /// `wait` for room in the queue; false when the client is gone or the
    /// queue stayed full. An empty frame (a cancelled request's answer)
    /// writes nothing.
    pub(super) fn send(&self, mut frame: Vec<u8>, wait: Duration) -> bool {
        if frame.is_empty() {
            return true;
        }
        frame.push(b'\n');
        let until = Instant::now() + wait;
        let limit = if wait.is_zero() { MAX_UNWAITED_BYTES } else { MAX_QUEUED_BYTES };
        let mut state = lock(&self.state);
        // A big frame behind many bytes the client has not read yet waits.
        while frame.len() > SMALL_FRAME
            && state.queued > 0
            && state.queued_bytes + frame.len() > limit
        {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || state.broken || state.queue.is_none() {
                return false;
            }
            state = wait_timeout(&self.freed, state, left);
        }
        if state.broken || state.queue.is_none() {
            return false;
        }
        if state.queued == 0 && state.write_through {
            match write_now(self.fd, &frame) {
                Ok(written) if written == frame.len() => return true,
                Ok(written) => {
                    // The rest goes first of all: queued before the lock
                    // is let go (the queue is empty, so there is room).
                    frame.drain(..written);
                    state.queued += 1;
                    state.queued_bytes += frame.len();
                    let queued = state.queue.as_ref().is_some_and(|q| q.try_send(frame).is_ok());
                    state.broken |= !queued;
                    return queued;
                }
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) if refused_flag(&err) => state.write_through = false,
                Err(err) => {
                    log::debug!("the client's output closed: {err}");
                    state.broken = true;
                    return false;
                }
            }
        }
        let Some(queue) = state.queue.clone() else { return false };
        let bytes = frame.len();
        state.queued += 1;
        state.queued_bytes += bytes;
        drop(state);
        let left = until.saturating_duration_since(Instant::now());
        let queued = if left.is_zero() {
            queue.try_send(frame).is_ok()
        } else {
            queue.send_timeout(frame, left).is_ok()
        };
        if !queued {
            let mut state = lock(&self.state);
            state.queued -= 1;
            state.queued_bytes -= bytes;
        }
        queued
    }

    /// True once a write failed: the client closed its end.
    pub(super) fn is_broken(&self) -> bool {
        lock(&self.state).broken
    }

    /// True when the writer's queue takes `frames` more frames now and
    /// fewer bytes than half its bound wait: room for calls whose answers
    /// must never wait (`flights.rs`). False once closed or broken.
    pub(super) fn has_room(&self, frames: usize) -> bool {
        let state = lock(&self.state);
        match &state.queue {
            Some(queue) if !state.broken => {
                let room = queue.capacity().unwrap_or(usize::MAX).saturating_sub(state.queued);
                room >= frames && state.queued_bytes < MAX_QUEUED_BYTES / 2
            }
            _ => false,
        }
    }

    /// The writer thread: writes the queued frames with blocking writes
    /// until the output is closed (and the queue drained) or a write fails.
    pub(super) fn drain(&self, frames: &Receiver<Vec<u8>>) {
        while let Ok(frame) = frames.recv() {
            let written = write_all(self.fd, &frame);
            let mut state = lock(&self.state);
            state.queued -= 1;
            state.queued_bytes -= frame.len();
            self.freed.notify_all();
            if let Err(err) = written {
                log::debug!("the client's output closed: {err}");
                state.broken = true;
                return;
            }
        }
    }
}

/// One write that never waits: what the pipe took, `WouldBlock` when it
/// took nothing.
fn write_now(fd: RawFd, bytes: &[u8]) -> io::Result<usize> {
    let part = libc::iovec { iov_base: bytes.as_ptr() as *mut libc::c_void, iov_len: bytes.len() };
    // SAFETY: one iovec over a live slice; the descriptor is open (the
    // serving holds its owner).
    let written = unsafe { libc::pwritev2(fd, &part, 1, -1, libc::RWF_NOWAIT) };
    if written < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(written as usize)
    }
}

/// The descriptor does not take `RWF_NOWAIT` (or `pwritev2` at all).
fn refused_flag(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(libc::EOPNOTSUPP | libc::ENOSYS | libc::EINVAL | libc::ESPIPE)
    )
}

/// A blocking write of a whole frame.
fn write_all(fd: RawFd, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        // SAFETY: a live slice, an open descriptor.
        let written = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if written < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            // A descriptor someone made non-blocking: wait for room.
            if err.kind() == io::ErrorKind::WouldBlock {
                crate::poll::writable(fd, Duration::from_millis(100))?;
                continue;
            }
            return Err(err);
        }
        if written == 0 {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "the output took nothing"));
        }
        bytes = &bytes[written as usize..];
    }
    Ok(())
}
