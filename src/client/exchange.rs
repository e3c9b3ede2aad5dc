//! One request and its answer: the id, the reply channel (one per calling
//! thread), the frame with its progress token, the wait with its deadline,
//! progress and cancel handle (reading the server's output meanwhile when
//! nobody else does), and giving up: `notifications/cancelled`, or for a
//! stateless HTTP server the end of the response stream.
//!
//! Over HTTP the caller may POST on its own thread (`Outlet::send_waiting`,
//! with a `Caller`): the watch it gives the transport takes progress off its
//! channel, hands it to the callback and moves the deadline on, exactly as
//! the wait does.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{select, Receiver, RecvTimeoutError, Sender, TryRecvError};
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

use super::pending::{PendingGuard, Reply, ReplyTo, TaggedReply, Waiter};
use super::{CallOptions, CancelHandle, Client, PassedResult, CLOSE_REASON_WAIT};
use crate::error::{CloseReason, Error, Timeout};
use crate::jsonrpc::Frame;
use crate::protocol::{LogMessage, Progress};
use crate::transport::{Caller, Traits};

impl Client {
    /// One request under a fresh id, and its answer. A `tools/call` (or a
    /// request with a progress callback) goes out with that id as its
    /// progress token, added as the frame is written (`with_progress_token`).
    pub(super) fn exchange(
        &self,
        method: &str,
        params: Option<&Value>,
        options: &CallOptions,
    ) -> Result<Value, Error> {
        self.exchange_with(method, Params::Value(params), options)
    }

    /// [`Client::exchange`] with parameters that may not be a `Value` yet.
    pub(super) fn exchange_with(
        &self,
        method: &str,
        params: Params<'_>,
        options: &CallOptions,
    ) -> Result<Value, Error> {
        self.exchange_answer(method, params, options, false).map(PassedResult::into_value)
    }

    /// [`Client::exchange_with`]; when `passing`, a success's result comes
    /// as the text the server sent ([`PassedResult::Text`]) wherever the reader
    /// can tell it is plain (`envelope.rs`).
    pub(super) fn exchange_answer(
        &self,
        method: &str,
        params: Params<'_>,
        options: &CallOptions,
        passing: bool,
    ) -> Result<PassedResult, Error> {
        if options.cancel.as_ref().is_some_and(CancelHandle::is_cancelled) {
            return Err(Error::Cancelled);
        }
        if let Some((level, _)) = &options.log {
            self.lower_log_level(*level);
        }
        let id = self.router.pending().next_id();
        let progress_token = (options.progress.is_some() || method == "tools/call").then_some(id);
        let channel = ReplyChannel::take();
        let replies = &channel.receiver;
        let queued_progress = &channel.queued_progress;
        let waiter = Waiter {
            to: ReplyTo::Caller {
                replies: channel.sender.clone(),
                queued_progress: Arc::clone(queued_progress),
            },
            patient: false,
            cancel_on_close: method != "initialize" && method != "server/discover",
            passing,
            logs: options.log.as_ref().map(|(level, _)| *level),
        };
        self.router.pending().register(id, waiter)?;
        // Whatever happens from here (even a panicking progress callback),
        // the pending entry goes when this call does.
        let _pending = PendingGuard { pending: self.router.pending(), id };
        let mut frame = match (params, progress_token) {
            (Params::Value(params), Some(token)) => {
                Frame::request_with(id, method, Some(with_progress_token(params, token)))
            }
            (Params::Value(params), None) => Frame::request(id, method, params),
            (Params::ToolCall { name, arguments }, progress_token) => Frame::request_with(
                id,
                method,
                Some(ToolCallParams { name, arguments, progress_token }),
            ),
        };
        let traits = self.endpoint.traits();
        if traits.exchange_per_request {
            match params {
                Params::Value(params) => {
                    self.route_over_http(&mut frame, method, params, options, traits)?
                }
                // Not stateless (its requests carry `_meta` and take the `Value` path).
                Params::ToolCall { .. } => frame.deadline = self.hard_deadline(options),
            }
        }
        let clock = self.clock(options);
        // What the watch below took from the channel besides progress (the
        // answer itself, delivered on this thread): the wait's first mail.
        let early = RefCell::new(VecDeque::new());
        let sent = if traits.exchange_per_request && options.cancel.is_none() {
            // The transport may POST on this thread and wait in its reads
            // (`Outlet::send_waiting`): they end at this call's deadline,
            // and progress reaches the callback meanwhile (run with no
            // caller held: a call it makes keeps its own limits).
            let watch = || {
                while let Ok((of, reply)) = replies.try_recv() {
                    match reply {
                        // The callback is the host's: what it sends is not
                        // this caller's to watch.
                        Reply::Progress(params) if of == id => {
                            self.progressed(&params, queued_progress, options, &clock)
                        }
                        Reply::Log(params) if of == id => {
                            logged(&params, queued_progress, options);
                        }
                        reply if of == id => early.borrow_mut().push_back(reply),
                        _ => {} // A late reply to an earlier call.
                    }
                }
                if early.borrow().is_empty() {
                    clock.deadline.get()
                } else {
                    // Answered (or failed, or closed): nothing to wait for.
                    Instant::now()
                }
            };
            self.router.send_waiting(frame, &Caller::new(&watch))
        } else {
            self.router.send(frame)
        };
        if sent.is_err() {
            // The server stopped reading: the reader says why (how it
            // exited) as soon as its output ends, which is at once.
            self.follow();
            let reason = match replies.recv_timeout(CLOSE_REASON_WAIT) {
                Ok((of, Reply::Closed(reason))) if of == id => reason,
                _ => self.close_reason().unwrap_or(CloseReason::Eof),
            };
            return Err(Error::Disconnected(reason));
        }
        self.wait(id, method, replies, queued_progress, options, &clock, early.into_inner())
    }

    /// When a request with these options, starting now, is given up.
    fn clock(&self, options: &CallOptions) -> Clock {
        let Limits { timeout, ceiling } = self.limits(options);
        let started = Instant::now();
        // A huge timeout means "no timeout", not an overflow.
        let far = |after: Duration| {
            started.checked_add(after).unwrap_or(started + Duration::from_secs(100 * 365 * 86_400))
        };
        let mut hard_deadline = far(ceiling);
        if let Some(deadline) = options.deadline {
            hard_deadline = hard_deadline.min(deadline);
        }
        let deadline = Cell::new(far(timeout).min(hard_deadline));
        Clock { started, timeout, hard_deadline, deadline }
    }

    /// How long a request with these options may wait without progress,
    /// and in all.
    pub(super) fn limits(&self, options: &CallOptions) -> Limits {
        let timeout = options.timeout.unwrap_or(self.options.request_timeout);
        let ceiling =
            options.max_total_timeout.unwrap_or(self.options.max_total_timeout).max(timeout);
        Limits { timeout, ceiling }
    }

    /// A progress update for the call: to the callback, and the timeout
    /// starts again (never past the hard deadline).
    fn progressed(
        &self,
        params: &Value,
        queued_progress: &AtomicUsize,
        options: &CallOptions,
        clock: &Clock,
    ) {
        queued_progress.fetch_sub(1, Ordering::AcqRel);
        if let Some(callback) = &options.progress {
            callback(&Progress::from_params(params));
        }
        clock.deadline.set(
            Instant::now()
                .checked_add(clock.timeout)
                .unwrap_or(clock.hard_deadline)
                .min(clock.hard_deadline),
        );
    }

    /// What only an HTTP exchange needs besides the body (the stdio path
    /// does none of it): when to stop, and for a stateless server the name
    /// and `x-mcp-header` parameters mirrored into headers.
    fn route_over_http(
        &self,
        frame: &mut Frame,
        method: &str,
        params: Option<&Value>,
        options: &CallOptions,
        traits: Traits,
    ) -> Result<(), Error> {
        frame.deadline = self.hard_deadline(options);
        // As `stateless_http`, with the traits this exchange already read.
        let stateless_http = traits.stream_per_request && self.stateless_session().is_some();
        let Some(params) = params.filter(|_| stateless_http) else { return Ok(()) };
        let key = match method {
            "tools/call" | "prompts/get" => "name",
            "resources/read" => "uri",
            _ => return Ok(()),
        };
        frame.name = params[key].as_str().map(str::to_owned);
        if method == "tools/call" {
            if let (Some(session), Some(tool)) = (self.stateless_session(), frame.name.as_deref()) {
                frame.headers =
                    session.headers_for(tool, &params["arguments"]).map_err(Error::Protocol)?;
            }
        }
        Ok(())
    }

    /// The instant a request with these options is given up whatever its
    /// progress says (its ceiling, or its deadline if sooner).
    pub(super) fn hard_deadline(&self, options: &CallOptions) -> Option<Instant> {
        let Limits { ceiling, .. } = self.limits(options);
        let at = Instant::now().checked_add(ceiling);
        match (at, options.deadline) {
            (Some(at), Some(deadline)) => Some(at.min(deadline)),
            (at, deadline) => at.or(deadline),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn wait(
        &self,
        id: i64,
        method: &str,
        replies: &Receiver<TaggedReply>,
        queued_progress: &AtomicUsize,
        options: &CallOptions,
        clock: &Clock,
        mut early: VecDeque<Reply>,
    ) -> Result<PassedResult, Error> {
        loop {
            let deadline = clock.deadline.get();
            let wake = match (early.pop_front(), &options.cancel) {
                (Some(reply), _) => Wake::Reply(reply),
                (None, None) => {
                    self.read_while_waiting(replies, deadline, &|| false);
                    match replies.recv_deadline(deadline) {
                        Ok((of, reply)) if of == id => Wake::Reply(reply),
                        Ok(_) => Wake::Stale,
                        Err(RecvTimeoutError::Timeout) => Wake::TimedOut,
                        Err(RecvTimeoutError::Disconnected) => {
                            Wake::Reply(Reply::Closed(CloseReason::Eof))
                        }
                    }
                }
                // A leader looks at its cancel handle between reads (a
                // blocking read cannot watch it), so a cancel is seen
                // within a slice of the leader's poll.
                (None, Some(cancel)) => {
                    let cancelled = cancel.receiver();
                    self.read_while_waiting(replies, deadline, &|| {
                        matches!(cancelled.try_recv(), Err(TryRecvError::Disconnected))
                    });
                    select! {
                        recv(replies) -> mail => match mail {
                            Ok((of, reply)) if of == id => Wake::Reply(reply),
                            Ok(_) => Wake::Stale,
                            Err(_) => Wake::Reply(Reply::Closed(CloseReason::Eof)),
                        },
                        recv(cancel.cancelled) -> _ => Wake::Cancelled,
                        default(deadline.saturating_duration_since(Instant::now())) => Wake::TimedOut,
                    }
                }
            };
            match wake {
                Wake::Reply(Reply::Progress(params)) => {
                    self.progressed(&params, queued_progress, options, clock);
                }
                Wake::Reply(Reply::Log(params)) => logged(&params, queued_progress, options),
                Wake::Reply(reply) => {
                    if let Some(outcome) = reply.outcome() {
                        return outcome;
                    }
                }
                // A late reply to an earlier call on this thread's channel.
                Wake::Stale => {}
                Wake::TimedOut => {
                    if let Some(outcome) = self.abandon(id, method, replies, "timed out") {
                        return outcome;
                    }
                    let mut timeout = Timeout::request(method, clock.started.elapsed());
                    // Progress moved the deadline on until the ceiling stopped it.
                    let ceiling = clock.hard_deadline.saturating_duration_since(clock.started);
                    if clock.deadline.get() >= clock.hard_deadline && ceiling > clock.timeout {
                        timeout.step = crate::error::Step::Ceiling { limit: ceiling };
                    }
                    return Err(Error::Timeout(timeout));
                }
                Wake::Cancelled => {
                    if let Some(outcome) =
                        self.abandon(id, method, replies, "cancelled by the client")
                    {
                        return outcome;
                    }
                    return Err(Error::Cancelled);
                }
            }
        }
    }

    /// Reads the server's output on this thread until a reply is in or the
    /// deadline passes, when nobody else reads it (stdio's leader/follower,
    /// `transport::reading`); otherwise makes sure somebody does.
    fn read_while_waiting(
        &self,
        replies: &Receiver<TaggedReply>,
        deadline: Instant,
        given_up: &dyn Fn() -> bool,
    ) {
        if let Some(reading) = self.router.reading() {
            if !reading.lead(deadline, &|| !replies.is_empty() || given_up()) {
                reading.follow();
            }
        }
    }

    /// Waits on the channel alone: makes sure the output is read meanwhile.
    pub(super) fn follow(&self) {
        if let Some(reading) = self.router.reading() {
            reading.follow();
        }
    }

    /// Forgets a request we stopped waiting for and tells the server; unless
    /// its answer is already on the way, which is then returned instead.
    fn abandon(
        &self,
        id: i64,
        method: &str,
        replies: &Receiver<TaggedReply>,
        reason: &str,
    ) -> Option<Result<PassedResult, Error>> {
        if self.router.pending().take(id).is_none() {
            // The reader took the waiter out: it is sending the answer (or
            // the close) right now, so this wait is short.
            loop {
                match replies.recv_timeout(Duration::from_secs(1)) {
                    Ok((of, _)) if of != id => continue,
                    // `None` for progress: wait on.
                    Ok((_, reply)) => match reply.outcome() {
                        Some(outcome) => return Some(outcome),
                        None => continue,
                    },
                    Err(_) => return None,
                }
            }
        }
        // The spec forbids cancelling initialize; a handshake-era server
        // must hear nothing before it (the probe); a stateless HTTP server
        // takes the end of the response stream as the cancellation.
        if self.stateless_http() {
            if let Ok(outlet) = self.router.outlet() {
                outlet.abandon(id);
            }
        } else if method != "initialize" && method != "server/discover" {
            let _ = self.router.send(super::router::cancellation(id, reason));
        }
        None
    }
}

/// A request's parameters with `_meta.progressToken` added as they are
/// written out (the caller's value is left as it is, and no map is built
/// for it): where inserting it would put it.
/// A log message about the call, to its callback (a log message, unlike
/// progress, does not move the deadline on).
fn logged(params: &Value, queued: &AtomicUsize, options: &CallOptions) {
    queued.fetch_sub(1, Ordering::AcqRel);
    if let Some((_, callback)) = &options.log {
        callback(&LogMessage::from_params(params));
    }
}

pub(super) fn with_progress_token(params: Option<&Value>, token: i64) -> impl Serialize + '_ {
    WithEntry {
        object: params,
        key: "_meta",
        value: move |meta| WithEntry { object: meta, key: "progressToken", value: move |_| token },
    }
}

/// A request's parameters.
#[derive(Clone, Copy)]
pub(super) enum Params<'a> {
    Value(Option<&'a Value>),
    /// `tools/call`'s `{"name", "arguments"}`, written out without being
    /// built as an object first (the commonest request, made lean).
    ToolCall {
        name: &'a str,
        arguments: &'a Value,
    },
}

/// `tools/call`'s parameters as they are written, with the progress token
/// in `_meta` when there is one.
pub(super) struct ToolCallParams<'a> {
    pub(super) name: &'a str,
    pub(super) arguments: &'a Value,
    pub(super) progress_token: Option<i64>,
}

impl Serialize for ToolCallParams<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map =
            serializer.serialize_map(Some(2 + usize::from(self.progress_token.is_some())))?;
        map.serialize_entry("name", self.name)?;
        map.serialize_entry("arguments", self.arguments)?;
        if let Some(token) = self.progress_token {
            // `{"progressToken": token}`.
            let meta = WithEntry { object: None, key: "progressToken", value: move |_| token };
            map.serialize_entry("_meta", &meta)?;
        }
        map.end()
    }
}

/// `object` with `key` set to what `value` makes of the value it had
/// (`None`: absent): in place, or after the other entries. Absent counts as
/// an empty object; a value that is not an object goes out unchanged.
struct WithEntry<'a, F> {
    object: Option<&'a Value>,
    key: &'static str,
    value: F,
}

impl<'a, F, V> Serialize for WithEntry<'a, F>
where
    F: Fn(Option<&'a Value>) -> V,
    V: Serialize,
{
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let entries = match self.object {
            None => None,
            Some(Value::Object(entries)) => Some(entries),
            Some(other) => return other.serialize(serializer),
        };
        let had = entries.is_some_and(|entries| entries.contains_key(self.key));
        let len = entries.map_or(0, Map::len) + usize::from(!had);
        let mut map = serializer.serialize_map(Some(len))?;
        for (key, value) in entries.into_iter().flatten() {
            if key == self.key {
                map.serialize_entry(key, &(self.value)(Some(value)))?;
            } else {
                map.serialize_entry(key, value)?;
            }
        }
        if !had {
            map.serialize_entry(self.key, &(self.value)(None))?;
        }
        map.end()
    }
}

/// A request's time limits: how long it may wait without progress
/// (`timeout`, which each update starts again) and in all (`ceiling`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub(crate) timeout: Duration,
    pub(crate) ceiling: Duration,
}

/// When a call is given up: `deadline`, which progress moves on by
/// `timeout`, never past `hard_deadline`.
struct Clock {
    started: Instant,
    timeout: Duration,
    hard_deadline: Instant,
    deadline: Cell<Instant>,
}

enum Wake {
    Reply(Reply),
    Stale,
    TimedOut,
    Cancelled,
}

/// Each calling thread's reply channel, kept between its calls: making one
/// per call cost a cache-aligned allocation and a block of slots for every
/// call. Taken for a call and put back after it (a call made inside
/// another's progress callback makes its own); replies carry their
/// request's id, so one that arrives after its call ended is dropped.
struct ReplyChannel {
    sender: Sender<TaggedReply>,
    receiver: Receiver<TaggedReply>,
    /// The progress updates sent to this channel and not yet taken (the
    /// bound the reader keeps); zero between calls.
    queued_progress: Arc<AtomicUsize>,
}

type ChannelParts = (Sender<TaggedReply>, Receiver<TaggedReply>, Arc<AtomicUsize>);

thread_local! {
    static REPLY_CHANNEL: std::cell::Cell<Option<ChannelParts>> = const { std::cell::Cell::new(None) };
}

impl ReplyChannel {
    fn take() -> ReplyChannel {
        let (sender, receiver, queued_progress) =
            REPLY_CHANNEL.try_with(std::cell::Cell::take).ok().flatten().unwrap_or_else(|| {
                let (sender, receiver) = crossbeam_channel::unbounded();
                (sender, receiver, Arc::new(AtomicUsize::new(0)))
            });
        ReplyChannel { sender, receiver, queued_progress }
    }
}

impl Drop for ReplyChannel {
    fn drop(&mut self) {
        // What is left belongs to the call that ended.
        while self.receiver.try_recv().is_ok() {}
        // A late progress update the reader still counts against a call
        // that ended must not count against the next one: a fresh counter
        // then (the old one stays with that call's waiter).
        // (`get_mut` proves this is the last holder, and sees its writes.)
        if Arc::get_mut(&mut self.queued_progress).is_none_or(|count| *count.get_mut() != 0) {
            self.queued_progress = Arc::new(AtomicUsize::new(0));
        }
        let parts = (self.sender.clone(), self.receiver.clone(), Arc::clone(&self.queued_progress));
        // A tuple of parts: putting it back drops no ReplyChannel.
        let _ = REPLY_CHANNEL.try_with(|slot| slot.set(Some(parts)));
    }
}
