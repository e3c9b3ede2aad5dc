//! The requests a connection waits on: their ids, the channel each
//! caller's answer goes down, which to cancel when the client closes, and
//! whether anyone waits at all (lsp-server's `ReqQueue` is the model).
//!
//! A waiter is a caller's channel, or (for `tether serve`, which passes
//! many calls on at once) a `Sink`: the thread that reads the answer hands
//! it over itself, so that no thread waits per call.
//!
//! One mutex guards the map, held only to insert, look up or take a
//! waiter, never while a reply is sent. Ids are never reused, so a late
//! answer finds no waiter and is dropped; once the connection closed,
//! nothing is registered any more and every waiter has been told why.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_channel::Sender;
use serde_json::Value;

use crate::error::{CloseReason, Error};
use crate::jsonrpc::RpcError;
use crate::protocol::LogLevel;
use crate::sync::lock;

/// A reply for the caller of request `id`. A caller's channel outlives
/// its calls (one per thread, `Client::exchange`), so each reply names its
/// request, and a late one for an earlier call is recognised and dropped.
pub(super) type TaggedReply = (i64, Reply);

/// What the reader sends a waiting caller.
pub(super) enum Reply {
    Done(Result<Value, RpcError>),
    /// A result's JSON text as it came, for a caller that passes it on.
    #[cfg_attr(not(feature = "serve"), allow(dead_code))]
    Passed(Vec<u8>),
    Progress(Value),
    /// A log message about the request (`notifications/message`'s params).
    Log(Value),
    Closed(CloseReason),
    Failed(Error),
}

/// Where the answer of a request sent ahead goes (`Client::send_tool_call`):
/// called on the thread that read it (or that gave the request up), never
/// under a lock; neither may wait on anything but a bounded moment, since
/// the server's output waits meanwhile.
pub(crate) trait Sink: Send + Sync {
    /// A progress update's parameters, as the server sent them.
    fn progress(&self, params: &Value);
    /// A log message about the call (at the level it was sent asking
    /// for, or above), its parameters as the server sent them.
    fn log(&self, params: &Value);
    /// The call's end, once: its result, or why it failed.
    fn finish(&self, outcome: Result<super::PassedResult, Error>);
}

/// Where a waiter's replies go.
pub(super) enum ReplyTo {
    /// A caller waits on this channel.
    Caller {
        replies: Sender<TaggedReply>,
        /// Updates (progress, log messages) sent but not yet taken;
        /// bounds the queue.
        queued_progress: Arc<AtomicUsize>,
    },
    /// Nobody waits: the reader hands the answer on.
    #[cfg_attr(not(feature = "serve"), allow(dead_code))]
    Sink(Arc<dyn Sink>),
}

/// Where an update (progress, a log message) for a waiting request goes.
pub(super) enum UpdateTo {
    Caller(Sender<TaggedReply>, Arc<AtomicUsize>),
    Sink(Arc<dyn Sink>),
}

/// A caller waiting for its answer.
pub(super) struct Waiter {
    pub(super) to: ReplyTo,
    /// Waits for as long as the connection lives (the listen stream): it
    /// does not need the stream read at once, so a reader thread need not
    /// stay for it.
    pub(super) patient: bool,
    /// Told `notifications/cancelled` if the client closes while it waits
    /// (never `initialize`, the era probe or the listen stream).
    pub(super) cancel_on_close: bool,
    /// Wants a success's result as it came, unparsed (`Reply::Passed`).
    pub(super) passing: bool,
    /// Takes the log messages about it at this level or above.
    pub(super) logs: Option<LogLevel>,
}

impl Waiter {
    fn update_to(&self) -> UpdateTo {
        match &self.to {
            ReplyTo::Caller { replies, queued_progress } => {
                UpdateTo::Caller(replies.clone(), Arc::clone(queued_progress))
            }
            ReplyTo::Sink(sink) => UpdateTo::Sink(Arc::clone(sink)),
        }
    }

    /// Hands the last reply of request `id` to its caller or its sink.
    pub(super) fn reply(self, id: i64, reply: Reply) {
        match self.to {
            ReplyTo::Caller { replies, .. } => {
                let _ = replies.send((id, reply));
            }
            ReplyTo::Sink(sink) => {
                if let Some(outcome) = reply.outcome() {
                    sink.finish(outcome);
                }
            }
        }
    }
}

impl Reply {
    /// The request's outcome, if this reply ends it (all but progress).
    pub(super) fn outcome(self) -> Option<Result<super::PassedResult, Error>> {
        Some(match self {
            Reply::Done(Ok(result)) => Ok(super::PassedResult::Value(result)),
            Reply::Passed(text) => Ok(super::PassedResult::Text(text)),
            Reply::Done(Err(error)) => Err(Error::from_rpc(error)),
            Reply::Closed(reason) => Err(Error::Disconnected(reason)),
            Reply::Failed(error) => Err(error),
            Reply::Progress(_) | Reply::Log(_) => return None,
        })
    }
}

/// The pending requests of one connection.
pub(super) struct Pending {
    next_id: AtomicU64,
    state: Mutex<PendingState>,
    /// How many waiters are `passing`: looked at without the lock for
    /// every response read, so that a connection with none parses as
    /// before.
    passing: AtomicUsize,
}

#[derive(Default)]
struct PendingState {
    waiters: HashMap<i64, Waiter>,
    /// How many waiters are not `patient`: asked after every answer the
    /// reader delivers, so counted rather than looked for. `insert` and
    /// `remove` keep it true.
    impatient: usize,
    /// How many waiters take log messages: most connections have none,
    /// and a log message then looks no further.
    loggers: usize,
    closed: Option<CloseReason>,
}

impl PendingState {
    fn insert(&mut self, id: i64, waiter: Waiter) {
        self.impatient += usize::from(!waiter.patient);
        self.loggers += usize::from(waiter.logs.is_some());
        if let Some(old) = self.waiters.insert(id, waiter) {
            self.impatient -= usize::from(!old.patient);
            self.loggers -= usize::from(old.logs.is_some());
        }
    }

    fn remove(&mut self, id: i64) -> Option<Waiter> {
        let waiter = self.waiters.remove(&id)?;
        self.impatient -= usize::from(!waiter.patient);
        self.loggers -= usize::from(waiter.logs.is_some());
        Some(waiter)
    }
}

impl Pending {
    pub(super) fn new() -> Pending {
        Pending {
            next_id: AtomicU64::new(1),
            state: Mutex::default(),
            passing: AtomicUsize::new(0),
        }
    }

    /// A fresh request id, never handed out before.
    pub(super) fn next_id(&self) -> i64 {
        self.next_id.fetch_add(1, Ordering::Relaxed) as i64
    }

    /// Waits for the answer to `id`, unless the connection closed.
    ///
    /// # Errors
    /// [`Error::Disconnected`] with the reason it closed.
    pub(super) fn register(&self, id: i64, waiter: Waiter) -> Result<(), Error> {
        let mut state = lock(&self.state);
        if let Some(reason) = &state.closed {
            return Err(Error::Disconnected(reason.clone()));
        }
        if waiter.passing {
            self.passing.fetch_add(1, Ordering::Relaxed);
        }
        state.insert(id, waiter);
        Ok(())
    }

    /// Takes the waiter of `id` (to answer it); `None` when it is gone
    /// (answered, given up, or closed).
    pub(super) fn take(&self, id: i64) -> Option<Waiter> {
        let mut state = lock(&self.state);
        let waiter = state.remove(id)?;
        // Counted under the lock, as `close` zeroes it.
        if waiter.passing {
            self.passing.fetch_sub(1, Ordering::Relaxed);
        }
        Some(waiter)
    }

    /// True when some caller wants a result as it came.
    #[cfg(feature = "serve")]
    pub(super) fn any_passing(&self) -> bool {
        self.passing.load(Ordering::Relaxed) > 0
    }

    /// Takes the waiter of `id` if it wants its result as it came.
    #[cfg(feature = "serve")]
    pub(super) fn take_passing(&self, id: i64) -> Option<Waiter> {
        let mut state = lock(&self.state);
        if !state.waiters.get(&id)?.passing {
            return None;
        }
        let waiter = state.remove(id)?;
        self.passing.fetch_sub(1, Ordering::Relaxed);
        Some(waiter)
    }

    /// Where progress for the request `id` goes, if it still waits.
    pub(super) fn progress_to(&self, id: i64) -> Option<UpdateTo> {
        let state = lock(&self.state);
        Some(state.waiters.get(&id)?.update_to())
    }

    /// Which request a log message at `level` (`None`: a level MCP does
    /// not name, which every request that asked takes) is about, and where
    /// it goes: the request whose response stream carried it (`stream_of`)
    /// if it asked for it; else, where messages share one stream, the
    /// oldest request under way that asked for it.
    pub(super) fn log_to(
        &self,
        stream_of: Option<i64>,
        level: Option<LogLevel>,
    ) -> Option<(i64, UpdateTo)> {
        let state = lock(&self.state);
        if state.loggers == 0 {
            return None;
        }
        let takes = |waiter: &Waiter| {
            waiter.logs.is_some_and(|least| level.is_none_or(|level| level >= least))
        };
        let id = match stream_of {
            Some(id) => id,
            None => {
                *state.waiters.iter().filter(|(_, waiter)| takes(waiter)).map(|(id, _)| id).min()?
            }
        };
        let waiter = state.waiters.get(&id).filter(|waiter| takes(waiter))?;
        Some((id, waiter.update_to()))
    }

    /// True while some caller waits for an answer it needs soon.
    pub(super) fn waiting(&self) -> bool {
        lock(&self.state).impatient > 0
    }

    /// Why the connection closed, once it did.
    pub(super) fn closed(&self) -> Option<CloseReason> {
        lock(&self.state).closed.clone()
    }

    /// The requests to cancel if the client closes now, in id order.
    pub(super) fn to_cancel_on_close(&self) -> Vec<i64> {
        let state = lock(&self.state);
        let mut ids: Vec<i64> = state
            .waiters
            .iter()
            .filter(|(_, waiter)| waiter.cancel_on_close)
            .map(|(id, _)| *id)
            .collect();
        ids.sort_unstable();
        ids
    }

    /// Marks the connection closed and tells every waiter why; false when
    /// it was closed already.
    pub(super) fn close(&self, reason: &CloseReason) -> bool {
        let waiters = {
            let mut state = lock(&self.state);
            if state.closed.is_some() {
                return false;
            }
            state.closed = Some(reason.clone());
            state.impatient = 0;
            state.loggers = 0;
            self.passing.store(0, Ordering::Relaxed);
            std::mem::take(&mut state.waiters)
        };
        for (id, waiter) in waiters {
            waiter.reply(id, Reply::Closed(reason.clone()));
        }
        true
    }
}

/// Removes a request's pending entry when its call ends, however it ends.
pub(super) struct PendingGuard<'a> {
    pub(super) pending: &'a Pending,
    pub(super) id: i64,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        self.pending.take(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiter(logs: Option<LogLevel>) -> (Waiter, crossbeam_channel::Receiver<TaggedReply>) {
        let (replies, received) = crossbeam_channel::unbounded();
        let to = ReplyTo::Caller { replies, queued_progress: Arc::new(AtomicUsize::new(0)) };
        (Waiter { to, patient: false, cancel_on_close: true, passing: false, logs }, received)
    }

    fn chosen(pending: &Pending, stream_of: Option<i64>, level: Option<LogLevel>) -> Option<i64> {
        pending.log_to(stream_of, level).map(|(id, _)| id)
    }

    // A log message goes to the request whose stream carried it, if it
    // asked at that level; where streams are shared, to the oldest that
    // asked at that level; a level MCP does not name to any that asked.
    #[test]
    fn a_log_message_goes_to_the_request_it_is_about() {
        let pending = Pending::new();
        assert_eq!(chosen(&pending, None, Some(LogLevel::Error)), None);
        let mut kept = Vec::new();
        for (id, logs) in [(1, None), (2, Some(LogLevel::Warning)), (3, Some(LogLevel::Debug))] {
            let (waiter, received) = waiter(logs);
            pending.register(id, waiter).unwrap();
            kept.push(received);
        }
        assert_eq!(chosen(&pending, Some(3), Some(LogLevel::Error)), Some(3));
        assert_eq!(chosen(&pending, Some(1), Some(LogLevel::Error)), None);
        assert_eq!(chosen(&pending, None, Some(LogLevel::Error)), Some(2));
        assert_eq!(chosen(&pending, None, Some(LogLevel::Info)), Some(3));
        assert_eq!(chosen(&pending, Some(2), Some(LogLevel::Info)), None);
        assert_eq!(chosen(&pending, None, None), Some(2));
        pending.take(3);
        assert_eq!(chosen(&pending, None, Some(LogLevel::Info)), None);
        pending.take(2);
        assert_eq!(lock(&pending.state).loggers, 0);
    }
}
