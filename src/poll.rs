//! Waiting, bounded, until one descriptor can be read or written: the one
//! `poll` the blocking design needs wherever a thread must not block in a
//! read or write itself (a leader that must look at its deadline, a writer
//! that must notice a close, a reader asking whether more waits).

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

/// True once `fd` has something to read (or its end), false when `within`
/// passed first or a signal interrupted the wait.
pub(crate) fn readable(fd: RawFd, within: Duration) -> io::Result<bool> {
    ready(fd, libc::POLLIN, within)
}

/// True once `fd` takes a write, false when `within` passed first or a
/// signal interrupted the wait.
pub(crate) fn writable(fd: RawFd, within: Duration) -> io::Result<bool> {
    ready(fd, libc::POLLOUT, within)
}

fn ready(fd: RawFd, events: libc::c_short, within: Duration) -> io::Result<bool> {
    // Rounded up: a wait of 0.4 ms must not become a busy loop.
    let ms = within.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
    let mut poll = libc::pollfd { fd, events, revents: 0 };
    // SAFETY: one pollfd, valid for the call.
    match unsafe { libc::poll(&mut poll, 1, ms) } {
        0 => Ok(false),
        n if n > 0 => Ok(true),
        _ => {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(err)
            }
        }
    }
}
