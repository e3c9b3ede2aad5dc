//! The reader's side of a connection: every message that arrives is routed
//! here, on the transport's reader thread (or a caller reading for
//! itself), and nowhere does it wait.
//!
//! A response goes straight to the channel of the caller waiting for it
//! (`pending.rs`), a progress notification to the same channel (resetting
//! that caller's timer), and so does a log message about a request that
//! asked for it (the host sees it after, as one a call took); a `ping` is answered on the spot, and everything
//! else (server requests, other notifications, a stdio server's stderr
//! lines) is queued for the host (`events.rs`). What a stateless server's
//! messages mean is asked of `stateless.rs`. The router owns those three
//! and routes between them; it decides nothing else.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use crossbeam_channel::{Sender, TrySendError};
use serde_json::{json, Value};

use super::events::{busy, Event, EventQueue};
use super::pending::{Pending, Reply, ReplyTo, TaggedReply, UpdateTo};
use super::stateless::StatelessState;
use super::PROGRESS_QUEUE;
use crate::error::{CloseReason, Error};
use crate::host::Host;
use crate::jsonrpc::{Frame, Message, Notification, RequestId, RpcError};
use crate::sync::ThrottledWarning;
use crate::transport::outbox::Closed;
use crate::transport::{Caller, Inbox, Outlet, SharedRead};

/// `notifications/cancelled` for request `id`, saying why.
pub(super) fn cancellation(id: i64, reason: &str) -> Frame {
    let params = serde_json::json!({"requestId": id, "reason": reason});
    Frame::notification("notifications/cancelled", Some(&params))
}

/// The reader's side of a connection: routes each incoming message.
pub(super) struct Router {
    server: String,
    pending: Pending,
    /// Set once, right after the transport starts; shared with the events
    /// queue, which answers the server's requests through it.
    outlet: Arc<OnceLock<Arc<dyn Outlet>>>,
    /// The incoming stream, when a waiting caller may read it itself (stdio).
    reading: OnceLock<Arc<dyn SharedRead>>,
    /// Frames skipped because they were not JSON-RPC.
    skipped: AtomicU64,
    /// Said once a second at most, however many notifications a flood drops.
    dropped: ThrottledWarning,
    /// The same for stderr lines dropped (a chatty server, a slow host), so
    /// that they never hide dropped notifications.
    stderr_dropped: ThrottledWarning,
    stateless: StatelessState,
    events: Arc<EventQueue>,
}

impl Router {
    /// The router of a new connection to `server`, whose requests and
    /// notifications `host` sees (at most `events_limit` waiting).
    pub(super) fn new(server: &str, host: Arc<dyn Host>, events_limit: usize) -> Router {
        let outlet = Arc::new(OnceLock::new());
        Router {
            server: server.to_owned(),
            pending: Pending::new(),
            events: EventQueue::new(server, host, Arc::clone(&outlet), events_limit),
            outlet,
            reading: OnceLock::new(),
            skipped: AtomicU64::new(0),
            dropped: ThrottledWarning::new(),
            stderr_dropped: ThrottledWarning::new(),
            stateless: StatelessState::default(),
        }
    }

    /// The server's configured name.
    pub(super) fn server(&self) -> &str {
        &self.server
    }

    pub(super) fn pending(&self) -> &Pending {
        &self.pending
    }

    pub(super) fn stateless(&self) -> &StatelessState {
        &self.stateless
    }

    /// The URL-mode elicitations open on this connection.
    pub(super) fn url_elicitations(&self) -> &super::url_elicitations::UrlElicitations {
        self.events.url_elicitations()
    }

    /// Notes the pages a `-32042` error lists as open, so that their
    /// completions reach the host.
    pub(super) fn note_pages(&self, err: &Error) {
        if let Error::UrlElicitationRequired { elicitations, .. } = err {
            for elicitation in elicitations {
                self.url_elicitations().opened(&elicitation.elicitation_id);
            }
        }
    }

    /// Notes a URL-mode `elicitation/create` the host is about to answer
    /// outside the events thread (a stateless request's round).
    pub(super) fn note_url_elicitation(&self, method: &str, params: &Value) {
        self.events.note_url_elicitation(method, params);
    }

    /// The incoming stream, when a waiting caller may read it itself.
    pub(super) fn reading(&self) -> Option<&Arc<dyn SharedRead>> {
        self.reading.get()
    }

    /// How many frames were skipped as not JSON-RPC.
    pub(super) fn skipped_so_far(&self) -> u64 {
        self.skipped.load(Ordering::Relaxed)
    }

    /// Stops the events thread (after what was queued) and joins it.
    pub(super) fn close_events(&self) {
        self.events.close();
    }

    pub(super) fn outlet(&self) -> Result<&Arc<dyn Outlet>, Closed> {
        self.outlet.get().ok_or(Closed)
    }

    pub(super) fn send(&self, frame: Frame) -> Result<(), Closed> {
        self.outlet()?.send(frame)
    }

    /// Sends a request whose caller waits on this thread, held to `caller`.
    pub(super) fn send_waiting(&self, frame: Frame, caller: &Caller<'_>) -> Result<(), Closed> {
        self.outlet()?.send_waiting(frame, caller)
    }

    pub(super) fn deliver_response(&self, id: RequestId, outcome: Result<Value, RpcError>) {
        let waiter = match &id {
            RequestId::Number(n) => self.pending.take(*n).map(|waiter| (*n, waiter)),
            RequestId::String(_) => None,
        };
        match waiter {
            Some((n, waiter)) => {
                if let (ReplyTo::Sink(_), Err(error)) = (&waiter.to, &outcome) {
                    // As `Client::noted` does for a caller.
                    self.note_pages(&Error::from_rpc(error.clone()));
                }
                waiter.reply(n, Reply::Done(outcome));
            }
            None => log::debug!(
                "{}: dropped a response to unknown or abandoned request {id}",
                self.server
            ),
        }
    }

    /// `notifications/cancelled` from the server. A handshake-era server
    /// gives up a request of its own (its ids, not ours: both sides count
    /// from 1): the host is told, or never sees it. A stateless server on
    /// stdio ends our `subscriptions/listen` so, and nothing else.
    fn server_cancelled(&self, notification: &Notification) {
        if notification.method != "notifications/cancelled" {
            return;
        }
        let params = notification.params.as_ref();
        let Some(id) = params.and_then(|params| params.get("requestId")) else { return };
        if self.stateless.is_stateless() {
            let listen = id.as_i64().filter(|id| self.stateless.is_listening_as(*id));
            if let Some(id) = listen {
                if let Some(waiter) = self.pending.take(id) {
                    waiter.reply(id, Reply::Failed(Error::Cancelled));
                }
            }
            return;
        }
        if let Ok(id) = serde_json::from_value::<RequestId>(id.clone()) {
            let reason = params.and_then(|params| params.get("reason")).and_then(Value::as_str);
            self.events.withdraw(&id, reason);
        }
    }

    pub(super) fn deliver_progress(&self, params: Option<Value>) {
        let params = params.unwrap_or(Value::Null);
        let token = params.get("progressToken").and_then(Value::as_i64);
        let waiter = token.and_then(|token| Some((token, self.pending.progress_to(token)?)));
        match waiter {
            Some((_, UpdateTo::Sink(sink))) => sink.progress(&params),
            Some((token, UpdateTo::Caller(replies, queued))) => {
                offer(&replies, &queued, token, Reply::Progress(params));
            }
            None => log::debug!("{}: progress for no pending request: {params}", self.server),
        }
    }

    /// A log message, to the request it is about when one asked for it
    /// (`Pending::log_to`): on its caller's channel, so that the caller
    /// has it before the answer the server sent after it. True when one
    /// took it.
    fn route_log(&self, notification: &Notification, stream_of: Option<i64>) -> bool {
        let params = notification.params.as_ref();
        let level = params.and_then(|params| params.get("level")).and_then(Value::as_str);
        let level = level.and_then(crate::protocol::LogLevel::from_name);
        match self.pending.log_to(stream_of, level) {
            Some((id, UpdateTo::Caller(replies, queued))) => {
                let params = params.cloned().unwrap_or(Value::Null);
                offer(&replies, &queued, id, Reply::Log(params));
                true
            }
            Some((_, UpdateTo::Sink(sink))) => {
                sink.log(params.unwrap_or(&Value::Null));
                true
            }
            None => false,
        }
    }
}

/// An update for a waiting caller. A caller busy in its callback gets the
/// updates it can take; a flood beyond that is dropped, never queued
/// without bound.
fn offer(replies: &Sender<TaggedReply>, queued: &AtomicUsize, id: i64, update: Reply) {
    if queued.fetch_add(1, Ordering::AcqRel) < PROGRESS_QUEUE {
        let _ = replies.send((id, update));
    } else {
        queued.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Inbox for Router {
    fn attach(&self, outlet: Arc<dyn Outlet>) {
        let _ = self.outlet.set(outlet);
    }

    fn attach_reading(&self, reading: Arc<dyn SharedRead>) {
        let _ = self.reading.set(reading);
    }

    fn waiting(&self) -> bool {
        self.pending.waiting()
    }

    fn skipped(&self) -> u64 {
        self.skipped.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn deliver_passed(&self, frame: &[u8]) -> Option<i64> {
        #[cfg(feature = "serve")]
        if self.pending.any_passing() {
            let (id, result) = crate::envelope::response_result(frame)?;
            let waiter = self.pending.take_passing(id)?;
            waiter.reply(id, Reply::Passed(frame[result].to_vec()));
            return Some(id);
        }
        let _ = frame;
        None
    }

    fn deliver(&self, message: Message) {
        self.deliver_on(message, None);
    }

    fn deliver_on(&self, message: Message, stream_of: Option<i64>) {
        let message = match message {
            Message::Notification(notification)
                if notification.method == "notifications/message"
                    && self.route_log(&notification, stream_of) =>
            {
                // The host sees it as one a call took (`Host::log_taken`).
                if self.events.push(Event::TakenLog(notification)).is_err() {
                    self.dropped.warn(|| {
                        format!("{}: too many notifications queued; dropping some", self.server)
                    });
                }
                return;
            }
            message => message,
        };
        match message {
            Message::Response(response) => self.deliver_response(response.id, response.outcome),
            Message::Notification(notification)
                if notification.method == "notifications/progress" =>
            {
                self.deliver_progress(notification.params);
            }
            Message::Request(request) if self.stateless.is_stateless() => {
                self.dropped.warn(|| {
                    format!(
                        "{}: a stateless server sent a request ({}); ignored, as the revision requires",
                        self.server, request.method
                    )
                });
            }
            Message::Request(request) if request.method == "ping" => {
                let _ = self.send(Frame::response(&request.id, &Ok(json!({}))));
            }
            Message::Request(request) => {
                if let Err(TrySendError::Full(Event::Request(request))) =
                    self.events.push(Event::Request(request))
                {
                    let _ = self.send(Frame::response(&request.id, &Err(busy())));
                }
            }
            Message::Notification(notification)
                if !self.stateless.for_this_client(&notification) =>
            {
                log::debug!(
                    "{}: dropped {} of a subscription that is not open",
                    self.server,
                    notification.method
                );
            }
            Message::Notification(notification) => {
                self.server_cancelled(&notification);
                let caught_up = self.stateless.acknowledged(&self.server, &notification);
                for changed in std::iter::once(notification).chain(caught_up) {
                    self.stateless.lists().changed(&changed.method);
                    if self.events.push(Event::Notification(changed)).is_err() {
                        self.dropped.warn(|| {
                            format!("{}: too many notifications queued; dropping some", self.server)
                        });
                    }
                }
            }
        }
    }

    fn stderr_line(&self, line: &str) {
        if self.events.push(Event::Stderr(line.to_owned())).is_err() {
            self.stderr_dropped
                .warn(|| format!("{}: too many stderr lines queued; dropping some", self.server));
        }
    }

    fn closed(&self, reason: CloseReason) {
        if self.pending.close(&reason) {
            log::info!("{}: connection closed: {reason}", self.server);
            self.events.stop();
        }
    }

    fn failed(&self, id: i64, error: Error) {
        match self.pending.take(id) {
            Some(waiter) => waiter.reply(id, Reply::Failed(error)),
            None => log::debug!(
                "{}: request {id} failed after its caller gave up: {error}",
                self.server
            ),
        }
    }
}
