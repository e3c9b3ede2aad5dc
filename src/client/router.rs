//! The reader's side of a connection: every message that arrives is routed
//! here, on the transport's reader thread, and nowhere does it wait.
//!
//! A response goes straight to the channel of the caller waiting for it
//! (found by id in the pending map), a progress notification to the same
//! channel (resetting that caller's timer), a `ping` is answered on the spot,
//! and everything else (server requests, other notifications, a stdio
//! server's stderr lines) is queued for the `{server}-events` thread, which
//! hands it to the host, so that the reader never waits on the host. The
//! queue is bounded: past it, a flooding server's notifications are dropped
//! and its requests refused; its stderr lines are bounded apart.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError};
use serde_json::{json, Value};

use super::cache::ListCache;
use super::PROGRESS_QUEUE;
use crate::error::{CloseReason, Error};
use crate::host::{self, Host};
use crate::jsonrpc::{Frame, Message, Notification, Request, RequestId, RpcError};
use crate::sync::{lock, Occasional};
use crate::threads::NamedThread;
use crate::transport::outbox::Closed;
use crate::transport::{Caller, Inbox, Outlet, SharedRead};

/// A reply for the caller of request `id`. A caller's channel outlives
/// its calls (one per thread, `Client::exchange`), so each reply names its
/// request, and a late one for an earlier call is recognised and dropped.
pub(super) type Mail = (i64, Reply);

/// What the reader sends a waiting caller.
pub(super) enum Reply {
    Done(Result<Value, RpcError>),
    Progress(Value),
    Closed(CloseReason),
    Failed(Error),
}

/// What the reader queues for the events thread.
pub(super) enum Event {
    Request(Request),
    Notification(Notification),
    /// A line of a stdio server's stderr.
    Stderr(String),
    Stop,
}

/// The queue to the events thread: bounded by a count, not by a buffer
/// allocated up front (a bounded channel of 1024 events was a third of an
/// idle server's memory), and served by a `{server}-events` thread that is
/// started by the first event and ends after [`EVENTS_IDLE`] without one, so
/// that an idle connection has none.
pub(super) struct EventQueue {
    sender: Sender<Event>,
    events: Receiver<Event>,
    /// Requests and notifications waiting, at most `limit`.
    queued: AtomicUsize,
    limit: usize,
    /// Stderr lines waiting, at most [`STDERR_QUEUE`]: counted apart, so
    /// that a chatty server never crowds out its own requests and
    /// notifications while the host is slow (the lines past the bound are
    /// only in the stderr tail, which keeps the last 64 KiB).
    stderr_queued: AtomicUsize,
    worker: Mutex<EventsWorker>,
    /// Set by close, to when it began: the thread hands the host the
    /// notifications and stderr lines queued (for as long as the close waits
    /// for it, [`EVENTS_JOIN_WAIT`]; what is left after that is dropped),
    /// answers no more requests, and ends once the queue is empty. What is
    /// queued after that (a closed connection's last stderr fragment) starts
    /// no thread and stays until the router goes.
    closing: OnceLock<Instant>,
}

/// The events thread, when one runs.
#[derive(Default)]
struct EventsWorker {
    running: bool,
    /// Set by close: no thread starts any more.
    closed: bool,
    thread: Option<NamedThread>,
}

/// The answer to a server request the client cannot take now.
fn busy() -> RpcError {
    RpcError { code: -32603, message: "the client is busy; try again".into(), data: None }
}

/// How long the events thread waits for another event before it ends.
const EVENTS_IDLE: Duration = Duration::from_secs(5);
/// How long `close` waits for the events thread (it may be inside the host).
const EVENTS_JOIN_WAIT: Duration = Duration::from_secs(1);
/// How many stderr lines may wait for the events thread.
const STDERR_QUEUE: usize = 256;

impl EventQueue {
    pub(super) fn new(limit: usize) -> EventQueue {
        let (sender, events) = crossbeam_channel::unbounded();
        EventQueue {
            sender,
            events,
            queued: AtomicUsize::new(0),
            limit,
            stderr_queued: AtomicUsize::new(0),
            worker: Mutex::default(),
            closing: OnceLock::new(),
        }
    }

    /// The count `event` belongs to, and its bound (a `Stop` has none).
    fn count_of(&self, event: &Event) -> Option<(&AtomicUsize, usize)> {
        match event {
            Event::Stop => None,
            Event::Stderr(_) => Some((&self.stderr_queued, STDERR_QUEUE)),
            Event::Request(_) | Event::Notification(_) => Some((&self.queued, self.limit)),
        }
    }

    /// Queues an event, unless its count is at its bound (a `Stop` always goes).
    // As crossbeam's own `try_send`: a refused request comes back, to be
    // answered "busy".
    #[allow(clippy::result_large_err)]
    fn try_send(&self, event: Event) -> Result<(), TrySendError<Event>> {
        let count = self.count_of(&event);
        if let Some((count, bound)) = count {
            if count.fetch_add(1, Ordering::AcqRel) >= bound {
                count.fetch_sub(1, Ordering::AcqRel);
                return Err(TrySendError::Full(event));
            }
        }
        self.sender.try_send(event).inspect_err(|_| {
            if let Some((count, _)) = count {
                count.fetch_sub(1, Ordering::AcqRel);
            }
        })
    }

    /// The events thread took `event` off the queue.
    fn taken(&self, event: &Event) {
        if let Some((count, _)) = self.count_of(event) {
            count.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Closing, and the close has stopped waiting for the thread: what is
    /// still queued is dropped.
    fn past_close(&self) -> bool {
        self.closing.get().is_some_and(|since| since.elapsed() >= EVENTS_JOIN_WAIT)
    }

    /// Stops the events thread and joins it, unless this is that thread (a
    /// host may close from inside its own callback; it ends after it).
    pub(super) fn close(&self) {
        let _ = self.closing.set(Instant::now());
        let thread = {
            let mut worker = lock(&self.worker);
            worker.closed = true;
            worker.thread.take()
        };
        let _ = self.sender.try_send(Event::Stop);
        if let Some(thread) = thread {
            if thread.id() == std::thread::current().id() {
                return;
            }
            thread.join_within(EVENTS_JOIN_WAIT);
        }
    }
}

/// A caller waiting for its answer.
pub(super) struct Waiter {
    pub(super) replies: Sender<Mail>,
    /// Progress updates sent but not yet taken; bounds the queue.
    pub(super) queued_progress: Arc<AtomicUsize>,
    /// Waits for as long as the connection lives (the listen stream): it
    /// does not need the stream read at once, so a reader thread need not
    /// stay for it.
    pub(super) patient: bool,
    /// Told `notifications/cancelled` if the client closes while it waits
    /// (never `initialize`, the era probe or the listen stream).
    pub(super) cancel_on_close: bool,
}

#[derive(Default)]
pub(super) struct PendingState {
    /// Private: `insert` and `remove` keep `impatient` counted.
    waiters: HashMap<i64, Waiter>,
    /// How many waiters are not `patient`: asked after every answer the
    /// reader delivers, so counted rather than looked for.
    impatient: usize,
    pub(super) closed: Option<CloseReason>,
}

impl PendingState {
    fn insert(&mut self, id: i64, waiter: Waiter) {
        self.impatient += usize::from(!waiter.patient);
        if let Some(old) = self.waiters.insert(id, waiter) {
            self.impatient -= usize::from(!old.patient);
        }
    }

    fn remove(&mut self, id: i64) -> Option<Waiter> {
        let waiter = self.waiters.remove(&id)?;
        self.impatient -= usize::from(!waiter.patient);
        Some(waiter)
    }

    /// The requests to cancel if the client closes now.
    pub(super) fn to_cancel_on_close(&self) -> Vec<i64> {
        let mut ids: Vec<i64> = self
            .waiters
            .iter()
            .filter(|(_, waiter)| waiter.cancel_on_close)
            .map(|(id, _)| *id)
            .collect();
        ids.sort_unstable();
        ids
    }

    fn take_all(&mut self) -> HashMap<i64, Waiter> {
        self.impatient = 0;
        std::mem::take(&mut self.waiters)
    }
}

/// `notifications/cancelled` for request `id`, saying why.
pub(super) fn cancellation(id: i64, reason: &str) -> Frame {
    let params = serde_json::json!({"requestId": id, "reason": reason});
    Frame::notification("notifications/cancelled", Some(&params))
}

/// Removes a request's pending entry when its call ends, however it ends.
pub(super) struct PendingGuard<'a> {
    pub(super) router: &'a Router,
    pub(super) id: i64,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        self.router.forget(self.id);
    }
}

/// The reader's side of a connection: routes each incoming message.
pub(super) struct Router {
    pub(super) server: String,
    pub(super) next_id: AtomicU64,
    pub(super) state: Mutex<PendingState>,
    /// Set once, right after the transport starts.
    pub(super) outlet: OnceLock<Arc<dyn Outlet>>,
    /// The incoming stream, when a waiting caller may read it itself (stdio).
    pub(super) reading: OnceLock<Arc<dyn SharedRead>>,
    /// Frames skipped because they were not JSON-RPC.
    pub(super) skipped: AtomicU64,
    /// Said once a second at most, however many notifications a flood drops.
    pub(super) dropped: Occasional,
    /// The same for stderr lines dropped (a chatty server, a slow host), so
    /// that they never hide dropped notifications.
    pub(super) stderr_dropped: Occasional,
    /// Lists a stateless server said may be kept; forgotten when they change.
    pub(super) lists: ListCache,
    /// The server speaks the stateless revision: it may not send requests
    /// (its questions come as rounds of input), and none is answered.
    pub(super) stateless: AtomicBool,
    /// The id of the open `subscriptions/listen` request (0: none); list
    /// changes tagged with another subscription are not this client's.
    pub(super) listening: AtomicI64,
    /// Told when the first listen stream is acknowledged (the start waits).
    pub(super) first_ack: Mutex<Option<Sender<()>>>,
    pub(super) events: EventQueue,
    /// Itself, for the events thread it starts.
    pub(super) myself: Weak<Router>,
    /// Sees what the events thread hands on: requests, notifications and
    /// stderr lines.
    pub(super) host: Arc<dyn Host>,
}

impl Router {
    pub(super) fn outlet(&self) -> Result<&Arc<dyn Outlet>, Closed> {
        self.outlet.get().ok_or(Closed)
    }

    /// Queues a server request or notification for the host, starting the
    /// events thread if none runs.
    #[allow(clippy::result_large_err)]
    fn queue(&self, event: Event) -> Result<(), TrySendError<Event>> {
        self.events.try_send(event)?;
        let mut worker = lock(&self.events.worker);
        if worker.running || worker.closed {
            return Ok(());
        }
        // The last thread left its loop already (it cleared `running`).
        if let Some(done) = worker.thread.take() {
            done.join_within(EVENTS_JOIN_WAIT);
        }
        let Some(router) = self.myself.upgrade() else { return Ok(()) };
        match NamedThread::spawn(format!("{}-events", self.server), move || events_loop(&router)) {
            Ok(thread) => {
                worker.running = true;
                worker.thread = Some(thread);
            }
            Err(err) => {
                log::warn!("{}: cannot start the events thread: {err}", self.server);
                // Nobody would take what waits: refuse it now rather than
                // leave a server waiting for an answer. Taken under the
                // worker's lock (no thread can start meanwhile), answered
                // after it.
                let mut refused = Vec::new();
                while let Ok(event) = self.events.events.try_recv() {
                    self.events.taken(&event);
                    if let Event::Request(request) = event {
                        refused.push(request.id);
                    }
                }
                drop(worker);
                for id in refused {
                    let _ = self.send(Frame::response(&id, &Err(busy())));
                }
            }
        }
        Ok(())
    }

    pub(super) fn send(&self, frame: Frame) -> Result<(), Closed> {
        self.outlet()?.send(frame)
    }

    /// Sends a request whose caller waits on this thread, held to `caller`.
    pub(super) fn send_waiting(&self, frame: Frame, caller: &Caller<'_>) -> Result<(), Closed> {
        self.outlet()?.send_waiting(frame, caller)
    }

    pub(super) fn register(&self, id: i64, waiter: Waiter) -> Result<(), Error> {
        let mut state = lock(&self.state);
        if let Some(reason) = &state.closed {
            return Err(Error::Disconnected(reason.clone()));
        }
        state.insert(id, waiter);
        Ok(())
    }

    /// Removes a waiter; false when it was already gone (answered or closed).
    pub(super) fn forget(&self, id: i64) -> bool {
        lock(&self.state).remove(id).is_some()
    }

    pub(super) fn deliver_response(&self, id: RequestId, outcome: Result<Value, RpcError>) {
        let waiter = match &id {
            RequestId::Number(n) => lock(&self.state).remove(*n).map(|waiter| (*n, waiter)),
            RequestId::String(_) => None,
        };
        match waiter {
            Some((n, waiter)) => {
                let _ = waiter.replies.send((n, Reply::Done(outcome)));
            }
            None => log::debug!(
                "{}: dropped a response to unknown or abandoned request {id}",
                self.server
            ),
        }
    }

    /// False for a notification tagged with a subscription other than the
    /// open `subscriptions/listen` (a stale one, or another client's).
    fn for_this_client(&self, notification: &Notification) -> bool {
        let tag = notification
            .params
            .as_ref()
            .and_then(|params| params.pointer("/_meta/io.modelcontextprotocol~1subscriptionId"));
        match tag {
            None => true,
            Some(tag) => tag.as_i64() == Some(self.listening.load(Ordering::Acquire)),
        }
    }

    /// When a reopened `subscriptions/listen` stream is acknowledged, the
    /// lists it covers may have changed while none was open: one
    /// `list_changed` for each, so that they are listed again as if the
    /// server had said so. (The first stream is acknowledged before the
    /// start ends, so the first listing misses nothing.)
    fn acknowledged(&self, notification: &Notification) -> Vec<Notification> {
        if notification.method != "notifications/subscriptions/acknowledged" {
            return Vec::new();
        }
        // The first stream is opened before the start ends: nothing to catch up.
        if let Some(first) = lock(&self.first_ack).take() {
            let _ = first.try_send(());
            return Vec::new();
        }
        let filter = notification.params.as_ref().and_then(|params| params.get("notifications"));
        [
            ("toolsListChanged", "notifications/tools/list_changed"),
            ("promptsListChanged", "notifications/prompts/list_changed"),
            ("resourcesListChanged", "notifications/resources/list_changed"),
        ]
        .into_iter()
        .filter(|(key, _)| filter.and_then(|filter| filter.get(key)) == Some(&Value::Bool(true)))
        .map(|(_, method)| Notification { method: method.to_owned(), params: None })
        .collect()
    }

    /// A server that ends one of our requests itself (it ends a listen
    /// stream so on stdio) fails that request's waiter.
    fn server_cancelled(&self, notification: &Notification) {
        if notification.method != "notifications/cancelled" {
            return;
        }
        let id = notification.params.as_ref().and_then(|params| params["requestId"].as_i64());
        if let Some(id) = id {
            let waiter = lock(&self.state).remove(id);
            if let Some(waiter) = waiter {
                let _ = waiter.replies.send((id, Reply::Failed(Error::Cancelled)));
            }
        }
    }

    pub(super) fn deliver_progress(&self, params: Option<Value>) {
        let params = params.unwrap_or(Value::Null);
        let token = params.get("progressToken").and_then(Value::as_i64);
        let waiter = token.and_then(|token| {
            let state = lock(&self.state);
            state
                .waiters
                .get(&token)
                .map(|waiter| (token, waiter.replies.clone(), Arc::clone(&waiter.queued_progress)))
        });
        match waiter {
            Some((token, replies, queued)) => {
                // A caller busy in its callback gets the updates it can take;
                // a flood beyond that is dropped, never queued without bound.
                if queued.fetch_add(1, Ordering::AcqRel) < PROGRESS_QUEUE {
                    let _ = replies.send((token, Reply::Progress(params)));
                } else {
                    queued.fetch_sub(1, Ordering::AcqRel);
                }
            }
            None => log::debug!("{}: progress for no pending request: {params}", self.server),
        }
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
        lock(&self.state).impatient > 0
    }

    fn skipped(&self) -> u64 {
        self.skipped.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn deliver(&self, message: Message) {
        match message {
            Message::Response(response) => self.deliver_response(response.id, response.outcome),
            Message::Notification(notification)
                if notification.method == "notifications/progress" =>
            {
                self.deliver_progress(notification.params);
            }
            Message::Request(request) if self.stateless.load(Ordering::Acquire) => {
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
                    self.queue(Event::Request(request))
                {
                    let _ = self.send(Frame::response(&request.id, &Err(busy())));
                }
            }
            Message::Notification(notification) if !self.for_this_client(&notification) => {
                log::debug!(
                    "{}: dropped {} of a subscription that is not open",
                    self.server,
                    notification.method
                );
            }
            Message::Notification(notification) => {
                self.server_cancelled(&notification);
                let caught_up = self.acknowledged(&notification);
                for changed in std::iter::once(notification).chain(caught_up) {
                    self.lists.changed(&changed.method);
                    if self.queue(Event::Notification(changed)).is_err() {
                        self.dropped.warn(|| {
                            format!("{}: too many notifications queued; dropping some", self.server)
                        });
                    }
                }
            }
        }
    }

    fn stderr_line(&self, line: &str) {
        if self.queue(Event::Stderr(line.to_owned())).is_err() {
            self.stderr_dropped
                .warn(|| format!("{}: too many stderr lines queued; dropping some", self.server));
        }
    }

    fn closed(&self, reason: CloseReason) {
        let waiters = {
            let mut state = lock(&self.state);
            if state.closed.is_some() {
                return;
            }
            log::info!("{}: connection closed: {reason}", self.server);
            state.closed = Some(reason.clone());
            state.take_all()
        };
        for (id, waiter) in waiters {
            let _ = waiter.replies.send((id, Reply::Closed(reason.clone())));
        }
        let _ = self.events.try_send(Event::Stop);
    }

    fn failed(&self, id: i64, error: Error) {
        let waiter = lock(&self.state).remove(id);
        match waiter {
            Some(waiter) => {
                let _ = waiter.replies.send((id, Reply::Failed(error)));
            }
            None => log::debug!(
                "{}: request {id} failed after its caller gave up: {error}",
                self.server
            ),
        }
    }
}

/// The `{server}-events` thread: hands server requests and notifications to
/// the host, in order, until the connection closes or none came for a while.
fn events_loop(router: &Router) {
    let (server, host, queue) = (&router.server, &*router.host, &router.events);
    // However this thread ends (a host callback may panic), the next event
    // starts another.
    struct Running<'a> {
        queue: &'a EventQueue,
        /// False once the thread gave up its place itself (another may run).
        armed: bool,
    }
    impl Drop for Running<'_> {
        fn drop(&mut self) {
            if self.armed {
                lock(&self.queue.worker).running = false;
            }
        }
    }
    let mut running = Running { queue, armed: true };
    // Leaves when nothing waits, deciding under the worker's lock: an event
    // queued after the check starts a new thread, unless the client closed
    // (a stderr line can come after the connection's `Stop`: the server's
    // last words).
    let mut leave_if_idle = || {
        let mut worker = lock(&queue.worker);
        if !queue.events.is_empty() {
            return false;
        }
        worker.running = false;
        running.armed = false;
        true
    };
    loop {
        // Closing: what is queued goes to the host, then the thread ends.
        let idle = if queue.closing.get().is_some() { Duration::ZERO } else { EVENTS_IDLE };
        let event = match queue.events.recv_timeout(idle) {
            Ok(event) => event,
            Err(RecvTimeoutError::Disconnected) => return,
            Err(RecvTimeoutError::Timeout) if leave_if_idle() => return,
            Err(RecvTimeoutError::Timeout) => continue,
        };
        queue.taken(&event);
        // Closing: the notifications and stderr lines that arrived before
        // the close still reach the host (a one-shot command's log must have
        // the server's last words), up to the `Stop` the close queued behind
        // them and while the close waits; requests are not answered any more.
        let dropped = match event {
            Event::Request(_) => queue.closing.get().is_some(),
            Event::Notification(_) | Event::Stderr(_) => queue.past_close(),
            Event::Stop => false,
        };
        if dropped {
            continue;
        }
        match event {
            Event::Request(request) => {
                let params = request.params.unwrap_or(Value::Null);
                // A host that panics answers with an error; this thread and
                // what waits behind the request go on.
                let outcome = catch_unwind(AssertUnwindSafe(|| {
                    host::answer(host, server, &request.method, &params)
                }))
                .unwrap_or_else(|_| {
                    log::warn!("{server}: the host panicked answering {}", request.method);
                    Err(RpcError {
                        code: -32603,
                        message: "the client failed to answer".into(),
                        data: None,
                    })
                });
                if let Err(error) = &outcome {
                    log::debug!("{server}: answered {} with an error: {error}", request.method);
                }
                let _ = router.send(Frame::response(&request.id, &outcome));
            }
            Event::Notification(notification) => {
                log::debug!("{server}: notification {}", notification.method);
                let seen =
                    catch_unwind(AssertUnwindSafe(|| host.notification(server, &notification)));
                if seen.is_err() {
                    log::warn!("{server}: the host panicked on {}", notification.method);
                }
            }
            Event::Stderr(line) => {
                if catch_unwind(AssertUnwindSafe(|| host.stderr(server, &line))).is_err() {
                    log::warn!("{server}: the host panicked on a stderr line");
                }
            }
            Event::Stop if leave_if_idle() => return,
            Event::Stop => {}
        }
    }
}
