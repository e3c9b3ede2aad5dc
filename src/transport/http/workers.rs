//! The `{server}-http-N` workers: frames queue here when no caller posts
//! them itself, and a worker starts whenever every running one is busy (up
//! to [`MAX_WORKERS`]), so that a long call never holds up another. A
//! worker POSTs one frame at a time, delivers what comes back into the
//! inbox, and ends once the queue is closed.

use std::sync::atomic::Ordering;

use crossbeam_channel::{select, TrySendError};

use super::{HttpTransport, Poster, MAX_WORKERS};
use crate::jsonrpc::Frame;
use crate::sync::lock;
use crate::transport::outbox::Closed;

impl HttpTransport {
    /// A worker's loop: one POST at a time until the queue closes.
    pub(super) fn run_worker(&self) {
        loop {
            self.idle_workers.fetch_add(1, Ordering::AcqRel);
            let job = self.queue.recv();
            self.idle_workers.fetch_sub(1, Ordering::AcqRel);
            if job.is_ok() {
                self.queued.fetch_sub(1, Ordering::AcqRel);
            }
            match job {
                Ok(frame) if !self.is_closing() => self.post(&frame),
                _ => return,
            }
        }
    }

    /// Sends one frame and delivers what comes back.
    fn post(&self, frame: &Frame) {
        let method = frame.method.as_deref();
        if frame.is("initialize") {
            lock(&self.state).initialize_frame = Some(frame.bytes.clone());
        }
        if let Some(id) = frame.id {
            let mut state = lock(&self.state);
            if state.abandoned.remove(&id) {
                // Given up while it waited for a worker: never sent.
                state.pending.remove(&id);
                return;
            }
        }
        let outcome = self.post_now(frame, None, Poster::OwnLimits);
        if let Some(id) = frame.id {
            let mut state = lock(&self.state);
            state.pending.remove(&id);
            state.abandoned.remove(&id);
        }
        let Err(error) = outcome else { return };
        if self.is_closing() {
            return;
        }
        match frame.id {
            Some(id) => {
                if let Some(inbox) = self.inbox() {
                    inbox.failed(id, error);
                }
            }
            None => log::warn!(
                "{}: sending {} failed: {error}",
                self.server,
                method.unwrap_or("a response")
            ),
        }
    }

    /// Queues a frame for the workers, starting one when every worker is
    /// busy (up to the limit), so that a long call never holds up another.
    pub(super) fn queue(&self, frame: Frame) -> Result<(), Closed> {
        let jobs = lock(&self.jobs).clone().ok_or(Closed)?;
        if let Some(id) = frame.id {
            let mut state = lock(&self.state);
            if state.stateless {
                state.pending.insert(id);
            }
        }
        self.queued.fetch_add(1, Ordering::AcqRel);
        let sent = if frame.method.is_none() {
            // An answer to the server's own request, from the reader's side:
            // it must not wait. A server that asks faster than its answers
            // can be sent loses answers, not memory.
            jobs.try_send(frame).map_err(|err| match err {
                TrySendError::Full(_) => {
                    self.dropped.warn(|| {
                        format!(
                            "{}: the server asks faster than it takes answers; dropping some",
                            self.server
                        )
                    });
                    None
                }
                TrySendError::Disconnected(_) => Some(Closed),
            })
        } else {
            // A caller waits for room (the workers drain the queue), or for close.
            select! {
                send(jobs, frame) -> sent => sent.map_err(|_| Some(Closed)),
                recv(self.stopped) -> _ => Err(Some(Closed)),
            }
        };
        if let Err(failure) = sent {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            return match failure {
                Some(closed) => Err(closed),
                None => Ok(()),
            };
        }
        // A worker for every POST in flight, up to the limit, so that a long
        // call never holds up another: more frames waiting than idle workers
        // means one more worker.
        if self.queued.load(Ordering::Acquire) > self.idle_workers.load(Ordering::Acquire) {
            let number = {
                let mut state = lock(&self.state);
                if state.workers >= MAX_WORKERS {
                    return Ok(());
                }
                state.workers += 1;
                state.workers
            };
            let name = format!("{}-http-{number}", self.server);
            if let Err(err) = self.spawn_thread(name, |me| me.run_worker()) {
                log::warn!("{}: cannot start an HTTP worker: {err}", self.server);
            }
        }
        Ok(())
    }
}
