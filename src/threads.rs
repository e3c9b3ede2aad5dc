//! Named threads whose join can be bounded.
//!
//! Every thread tether starts has a name and is joined. A thread blocked on a
//! pipe that some escaped process still holds open cannot be woken, so a join
//! waits a bounded time (the thread's end is signalled by a channel that
//! disconnects when the thread's closure returns) and then leaves the thread
//! behind with a warning rather than hang the host.

use std::io;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError};

/// A named thread and the signal of its end.
pub(crate) struct NamedThread {
    handle: JoinHandle<()>,
    done: Receiver<()>,
}

impl NamedThread {
    /// Starts `body` on a thread called `name`.
    pub(crate) fn spawn(
        name: String,
        body: impl FnOnce() + Send + 'static,
    ) -> io::Result<NamedThread> {
        NamedThread::spawn_on(thread::Builder::new().name(name), body)
    }

    /// Starts `body` on a thread called `name`, with a stack of `bytes`.
    pub(crate) fn spawn_with_stack(
        name: String,
        bytes: usize,
        body: impl FnOnce() + Send + 'static,
    ) -> io::Result<NamedThread> {
        NamedThread::spawn_on(thread::Builder::new().name(name).stack_size(bytes), body)
    }

    fn spawn_on(
        builder: thread::Builder,
        body: impl FnOnce() + Send + 'static,
    ) -> io::Result<NamedThread> {
        let (done_sender, done) = crossbeam_channel::bounded::<()>(0);
        let handle = builder.spawn(move || {
            // Dropped when the body returns (or unwinds), which wakes `done`.
            let _done = done_sender;
            body();
        })?;
        Ok(NamedThread { handle, done })
    }

    /// The thread's id.
    pub(crate) fn id(&self) -> thread::ThreadId {
        self.handle.thread().id()
    }

    /// True once the thread's body returned.
    pub(crate) fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    /// Joins the thread if it ends within `wait`; otherwise logs and leaves it.
    pub(crate) fn join_within(self, wait: Duration) {
        let name = self.handle.thread().name().unwrap_or("?").to_owned();
        match self.done.recv_timeout(wait) {
            Err(RecvTimeoutError::Timeout) => {
                log::warn!("thread {name} did not end within {wait:?}; leaving it");
            }
            _ => {
                if self.handle.join().is_err() {
                    log::warn!("thread {name} panicked");
                }
            }
        }
    }
}
