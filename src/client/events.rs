//! The queue between a connection's reader and its host: server requests,
//! notifications and a stdio server's stderr lines wait here for the
//! `{server}-events` thread, which hands them to the host in order, so that
//! the reader never waits on the host. A request is answered on a
//! `{server}-asked` thread of its own (at most [`ASKED_AT_ONCE`]): MCP's
//! requests are concurrent, and one the host takes long over (a person's
//! form) must not hold up the server's next (a sampling).
//!
//! The queue is bounded by a count (requests and notifications apart from
//! stderr lines): past it a flooding server's notifications are dropped and
//! its requests refused. The thread is started by the first event and ends
//! after a while without one, so an idle connection has none; close hands
//! on what was queued before it, for a moment, and joins the thread.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError};
use serde_json::Value;

use super::url_elicitations::UrlElicitations;
use crate::host::{self, Host};
use crate::jsonrpc::{Frame, Notification, Request, RequestId, RpcError};
use crate::sync::lock;
use crate::threads::NamedThread;
use crate::transport::Outlet;

/// What the reader queues for the events thread.
pub(super) enum Event {
    Request(Request),
    Notification(Notification),
    /// A log message a call took (`CallOptions::with_log`).
    TakenLog(Notification),
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
    server: String,
    /// Sees what the thread hands on: requests, notifications and stderr
    /// lines.
    host: Arc<dyn Host>,
    /// Where the answers to the server's requests go (set once the
    /// transport starts).
    outlet: Arc<OnceLock<Arc<dyn Outlet>>>,
    /// Itself, for the thread it starts.
    myself: Weak<EventQueue>,
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
    /// The server's requests queued or being answered, by id: a request the
    /// server gives up is skipped, or the host told and its answer kept.
    requests: Mutex<HashMap<RequestId, Asked>>,
    /// The URL-mode elicitations open: a completion for another id is not
    /// handed on.
    url_elicitations: UrlElicitations,
    /// The `{server}-asked` threads, each answering one request; joined
    /// once ended (by the next one started), or at close.
    asked: Mutex<Vec<NamedThread>>,
}

/// A server request the host has not answered yet.
struct Asked {
    method: String,
    /// Handed to the host (else still queued).
    answering: bool,
    /// The server gave it up (`notifications/cancelled`).
    withdrawn: bool,
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
pub(super) fn busy() -> RpcError {
    RpcError { code: -32603, message: "the client is busy; try again".into(), data: None }
}

/// How long the events thread waits for another event before it ends.
const EVENTS_IDLE: Duration = Duration::from_secs(5);
/// How long `close` waits for the events thread (it may be inside the host).
const EVENTS_JOIN_WAIT: Duration = Duration::from_secs(1);
/// How many stderr lines may wait for the events thread.
const STDERR_QUEUE: usize = 256;
/// How many of a server's requests the host answers at once; past it the
/// events thread answers the next itself (and the queue waits).
pub(super) const ASKED_AT_ONCE: usize = 8;

impl EventQueue {
    pub(super) fn new(
        server: &str,
        host: Arc<dyn Host>,
        outlet: Arc<OnceLock<Arc<dyn Outlet>>>,
        limit: usize,
    ) -> Arc<EventQueue> {
        let (sender, events) = crossbeam_channel::unbounded();
        Arc::new_cyclic(|myself| EventQueue {
            server: server.to_owned(),
            host,
            outlet,
            myself: myself.clone(),
            sender,
            events,
            queued: AtomicUsize::new(0),
            limit,
            stderr_queued: AtomicUsize::new(0),
            worker: Mutex::default(),
            closing: OnceLock::new(),
            requests: Mutex::default(),
            url_elicitations: UrlElicitations::default(),
            asked: Mutex::default(),
        })
    }

    pub(super) fn url_elicitations(&self) -> &UrlElicitations {
        &self.url_elicitations
    }

    /// Notes the id of a URL-mode `elicitation/create`.
    pub(super) fn note_url_elicitation(&self, method: &str, params: &Value) {
        if method == "elicitation/create"
            && params.get("mode").and_then(Value::as_str) == Some("url")
        {
            if let Some(id) = params.get("elicitationId").and_then(Value::as_str) {
                self.url_elicitations.opened(id);
            }
        }
    }

    /// False for a `notifications/elicitation/complete` of an id not open
    /// (it is then dropped); true for every other notification.
    fn known_completion(&self, notification: &Notification) -> bool {
        if notification.method != "notifications/elicitation/complete" {
            return true;
        }
        let id = notification.params.as_ref().and_then(|params| params.get("elicitationId"));
        let known = id.and_then(Value::as_str).is_some_and(|id| self.url_elicitations.complete(id));
        if !known {
            log::debug!("{}: ignored a completion of an unknown elicitation", self.server);
        }
        known
    }

    /// The count `event` belongs to, and its bound (a `Stop` has none).
    fn count_of(&self, event: &Event) -> Option<(&AtomicUsize, usize)> {
        match event {
            Event::Stop => None,
            Event::Stderr(_) => Some((&self.stderr_queued, STDERR_QUEUE)),
            Event::Request(_) | Event::Notification(_) | Event::TakenLog(_) => {
                Some((&self.queued, self.limit))
            }
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
        let began = Instant::now();
        if let Some(thread) = thread {
            if thread.id() == std::thread::current().id() {
                return;
            }
            thread.join_within(EVENTS_JOIN_WAIT);
        }
        // The host answering still: within the same wait, all told.
        let asked = std::mem::take(&mut *lock(&self.asked));
        let me = std::thread::current().id();
        for thread in asked.into_iter().filter(|thread| thread.id() != me) {
            thread.join_within(EVENTS_JOIN_WAIT.saturating_sub(began.elapsed()));
        }
    }
    /// Queues a server request, notification or stderr line for the host,
    /// starting the events thread if none runs; refused when its count is
    /// at its bound.
    #[allow(clippy::result_large_err)]
    pub(super) fn push(&self, event: Event) -> Result<(), TrySendError<Event>> {
        let asked = match &event {
            Event::Request(request) => Some(request.id.clone()),
            _ => None,
        };
        if let (Some(id), Event::Request(request)) = (&asked, &event) {
            let asked =
                Asked { method: request.method.clone(), answering: false, withdrawn: false };
            lock(&self.requests).insert(id.clone(), asked);
        }
        if let Err(refused) = self.try_send(event) {
            if let Some(id) = &asked {
                lock(&self.requests).remove(id);
            }
            return Err(refused);
        }
        let mut worker = lock(&self.worker);
        if worker.running || worker.closed {
            return Ok(());
        }
        // The last thread left its loop already (it cleared `running`).
        if let Some(done) = worker.thread.take() {
            done.join_within(EVENTS_JOIN_WAIT);
        }
        let Some(queue) = self.myself.upgrade() else { return Ok(()) };
        match NamedThread::spawn(format!("{}-events", self.server), move || queue.run()) {
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
                while let Ok(event) = self.events.try_recv() {
                    self.taken(&event);
                    if let Event::Request(request) = event {
                        refused.push(request.id);
                    }
                }
                drop(worker);
                for id in refused {
                    self.settled(&id);
                    self.answer(&id, &Err(busy()));
                }
            }
        }
        Ok(())
    }

    /// The server gave up its request `id`: one still queued is never
    /// handed to the host; the host answering one now is told, and its
    /// answer is not sent (as MCP asks of the receiver of a cancellation).
    pub(super) fn withdraw(&self, id: &RequestId, reason: Option<&str>) {
        let answering = {
            let mut requests = lock(&self.requests);
            let Some(asked) = requests.get_mut(id) else {
                log::debug!("{}: gave up its request {id}, which is answered already", self.server);
                return;
            };
            asked.withdrawn = true;
            asked.answering.then(|| asked.method.clone())
        };
        if let Some(method) = answering {
            let host = &*self.host;
            if catch_unwind(AssertUnwindSafe(|| host.cancelled(&self.server, &method, reason)))
                .is_err()
            {
                log::warn!("{}: the host panicked on a cancellation", self.server);
            }
        }
    }

    /// The server's request `id` leaves the host's hands: whether it was
    /// withdrawn meanwhile.
    fn settled(&self, id: &RequestId) -> bool {
        lock(&self.requests).remove(id).is_some_and(|asked| asked.withdrawn)
    }

    /// Hands request `id` to the host, unless the server withdrew it.
    fn begin_answer(&self, id: &RequestId) -> bool {
        match lock(&self.requests).get_mut(id) {
            Some(asked) if asked.withdrawn => false,
            Some(asked) => {
                asked.answering = true;
                true
            }
            None => true,
        }
    }

    /// The connection closed: the thread hands on what is queued and ends.
    pub(super) fn stop(&self) {
        let _ = self.try_send(Event::Stop);
    }

    /// Answers a server request, if the transport is up.
    fn answer(&self, id: &RequestId, outcome: &Result<Value, RpcError>) {
        if let Some(outlet) = self.outlet.get() {
            let _ = outlet.send(Frame::response(id, outcome));
        }
    }

    /// The `{server}-events` thread's body.
    fn run(&self) {
        events_loop(self);
    }

    /// Hands `request` to the host on a `{server}-asked` thread, or on this
    /// one when [`ASKED_AT_ONCE`] answer already (or no thread starts).
    fn hand_request(&self, request: Request) {
        let params = request.params.unwrap_or(Value::Null);
        // Open before the host sees it: the completion may come while the
        // host still answers.
        self.note_url_elicitation(&request.method, &params);
        let (id, method) = (request.id, request.method);
        {
            let mut asked = lock(&self.asked);
            let (ended, running): (Vec<NamedThread>, Vec<NamedThread>) =
                std::mem::take(&mut *asked).into_iter().partition(NamedThread::is_finished);
            *asked = running;
            for thread in ended {
                thread.join_within(EVENTS_JOIN_WAIT);
            }
            if let Some(queue) = self.myself.upgrade().filter(|_| asked.len() < ASKED_AT_ONCE) {
                let (id, method, params) = (id.clone(), method.clone(), params.clone());
                let name = format!("{}-asked", self.server);
                let body = move || queue.answer_request(&id, &method, &params);
                match NamedThread::spawn(name, body) {
                    Ok(thread) => {
                        asked.push(thread);
                        return;
                    }
                    Err(err) => {
                        log::debug!("{}: answering on the events thread: {err}", self.server)
                    }
                }
            }
        }
        self.answer_request(&id, &method, &params);
    }

    /// Asks the host for the answer to the server's request `id` and sends
    /// it, unless the server withdrew it meanwhile.
    fn answer_request(&self, id: &RequestId, method: &str, params: &Value) {
        let (server, host) = (&self.server, &*self.host);
        // A host that panics answers with an error; the events go on.
        let outcome = catch_unwind(AssertUnwindSafe(|| host::answer(host, server, method, params)))
            .unwrap_or_else(|_| {
                log::warn!("{server}: the host panicked answering {method}");
                Err(RpcError {
                    code: -32603,
                    message: "the client failed to answer".into(),
                    data: None,
                })
            });
        if let Err(error) = &outcome {
            log::debug!("{server}: answered {method} with an error: {error}");
        }
        if self.settled(id) {
            log::debug!("{server}: {method} was withdrawn: no answer");
        } else {
            self.answer(id, &outcome);
        }
    }
}

/// The `{server}-events` thread: hands server requests and notifications to
/// the host, in order, until the connection closes or none came for a while.
fn events_loop(queue: &EventQueue) {
    let (server, host) = (&queue.server, &*queue.host);
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
        let dropped = match &event {
            Event::Request(request) => {
                let closing = queue.closing.get().is_some();
                if closing || !queue.begin_answer(&request.id) {
                    queue.settled(&request.id);
                    log::debug!("{server}: {} not answered: withdrawn, or closing", request.method);
                    true
                } else {
                    false
                }
            }
            // A completion of a URL-mode elicitation this connection does
            // not know open (unknown, or completed already) is ignored.
            Event::Notification(notification) => {
                queue.past_close() || !queue.known_completion(notification)
            }
            Event::Stderr(_) | Event::TakenLog(_) => queue.past_close(),
            Event::Stop => false,
        };
        if dropped {
            continue;
        }
        match event {
            Event::Request(request) => queue.hand_request(request),
            Event::Notification(notification) => {
                log::debug!("{server}: notification {}", notification.method);
                let seen =
                    catch_unwind(AssertUnwindSafe(|| host.notification(server, &notification)));
                if seen.is_err() {
                    log::warn!("{server}: the host panicked on {}", notification.method);
                }
            }
            Event::TakenLog(message) => {
                if catch_unwind(AssertUnwindSafe(|| host.log_taken(server, &message))).is_err() {
                    log::warn!("{server}: the host panicked on a log message");
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
