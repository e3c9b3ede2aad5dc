//! One client in front of tether (a `Link`), and all of them (`Links`):
//! what each said of itself, its requests under way, tether's requests to
//! it and their answers, and how to reach it. `host.rs` makes these the
//! hub's host.
//!
//! A link writes through its `Outlet`: a byte stream's (`pipe_out.rs`), or
//! an HTTP session's open streams (`streams.rs`), where each frame's
//! `Route` (an answer, news of a request, a request, an announcement)
//! picks the stream. Every wait on a client is bounded; nothing here holds
//! a lock while it writes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{bounded, Sender};
use serde_json::{json, Value};

use super::pipe_out::PipeOut;
use super::streams::{Route, Streams};
use crate::client::CancelHandle;
use crate::jsonrpc::{Frame, RequestId, RpcError};
use crate::protocol::{LogLevel, LogMessage, Progress};
use crate::sync::lock;

/// How long a frame waits for room in the writer's queue.
const SEND_WAIT: Duration = Duration::from_secs(5);

/// Sends `bytes` down a byte stream. An answer too big for what is held
/// for a client that is not reading its output (`PipeOut`'s bound) gives
/// its place to a short error under its id: every request is answered.
fn piped(out: &PipeOut, route: Route<'_>, bytes: Vec<u8>, wait: Duration) -> bool {
    let size = bytes.len();
    if out.send(bytes, wait) {
        return true;
    }
    let Route::Answer(id) = route else { return false };
    if size <= super::pipe_out::SMALL_FRAME {
        return false;
    }
    let error = RpcError {
        code: -32603,
        message: format!(
            "tether dropped this answer ({size} bytes): the client was not reading its output, \
             and more than {} MiB waited for it already",
            super::pipe_out::MAX_QUEUED_BYTES >> 20
        ),
        data: None,
    };
    out.send(Frame::response(id, &Err(error)).bytes, Duration::ZERO)
}

/// What the downstream said of itself.
#[derive(Default)]
pub(super) struct Peer {
    /// Its `capabilities` (from `initialize`, or a stateless request's
    /// `_meta`).
    pub(super) capabilities: Value,
    /// It spoke 2026-07-28: it takes no request from a server.
    pub(super) stateless: bool,
    /// `notifications/initialized` came, or it is stateless: notifications
    /// may go to it.
    pub(super) ready: bool,
    /// A stateless client's open `subscriptions/listen` requests: each id
    /// with the kinds of change it asked for (`toolsListChanged`, …). Such a
    /// client hears of changes only through these.
    pub(super) listens: Vec<(RequestId, Value)>,
    /// The least severe log message a handshake client takes, once it set
    /// one (`logging/setLevel`); `info` until then.
    pub(super) log_level: Option<LogLevel>,
}

/// Where a link's frames go.
#[derive(Clone, Default)]
pub(super) enum Outlet {
    /// Not connected (yet, or any more): frames are dropped.
    #[default]
    Closed,
    /// One byte stream (stdio, a Unix socket), whatever the frame.
    Pipe(Arc<PipeOut>),
    /// An HTTP client: the streams it holds open.
    Streams(Arc<Streams>),
}

/// One of tether's requests to its client, waiting for the answer.
struct Asking {
    answer: Sender<Result<Value, RpcError>>,
    /// The upstream server whose request it passes on, and its method.
    server: String,
    method: String,
}

/// A request of the client's under way, as it is given up.
#[derive(Clone)]
pub(super) enum Underway {
    /// A thread answers it, and watches this handle.
    Answered(CancelHandle),
    /// Passed on with no thread waiting (`flights.rs`).
    Flying(Arc<dyn GiveUp>),
}

impl Underway {
    /// The client cancelled the request, or is gone.
    pub(super) fn cancel(&self) {
        match self {
            Underway::Answered(cancel) => cancel.cancel(),
            Underway::Flying(flight) => flight.give_up(),
        }
    }
}

/// What gives up a request no thread waits for.
pub(super) trait GiveUp: Send + Sync {
    fn give_up(&self);
}

/// One client in front of tether: its output, the requests tether sent
/// it, its requests under way, and what it said of itself.
#[derive(Default)]
pub(super) struct Link {
    out: Mutex<Outlet>,
    /// Requests sent to the client, by id, each with where its answer goes.
    waiting: Mutex<HashMap<i64, Asking>>,
    next_id: AtomicU64,
    pub(super) peer: Mutex<Peer>,
    /// The client's requests being answered, each as it is given up.
    pub(super) in_flight: Mutex<HashMap<RequestId, Underway>>,
    /// How many of the client's requests are under way: queued for a
    /// worker, or being answered (a call waiting for its client's answer
    /// in a round included, and a flight).
    pub(super) answering: std::sync::atomic::AtomicUsize,
    /// When the client last asked something (`Links::touch`): tether's
    /// own requests go to the client active last.
    seen: AtomicU64,
}

impl Link {
    /// A link writing through `out`.
    pub(super) fn new(out: Outlet) -> Link {
        Link { out: Mutex::new(out), ..Link::default() }
    }

    /// Disconnects the link: whoever waits for the client hears now that
    /// it is gone, and what it asked is given up.
    pub(super) fn close(&self) {
        *lock(&self.out) = Outlet::Closed;
        lock(&self.waiting).clear();
        self.cancel_all();
    }

    /// Takes in request `id` of the client's: under way from now on, so
    /// that its cancellation finds it even while it waits for a worker.
    /// `None` when a request of that id is under way already: one id would
    /// name two requests, and the client could not tell their answers apart.
    pub(super) fn admit(&self, id: &RequestId) -> Option<CancelHandle> {
        use std::collections::hash_map::Entry;
        match lock(&self.in_flight).entry(id.clone()) {
            Entry::Occupied(_) => None,
            Entry::Vacant(vacant) => {
                let cancel = CancelHandle::new();
                vacant.insert(Underway::Answered(cancel.clone()));
                Some(cancel)
            }
        }
    }

    /// Forgets request `id` of the client's, taken in with `cancel`:
    /// answered, or given up. Only that request: once answered (a round's
    /// `input_required`, while its call goes on), its id may name a new one.
    pub(super) fn forget(&self, id: &RequestId, cancel: &CancelHandle) {
        let mut in_flight = lock(&self.in_flight);
        if matches!(in_flight.get(id), Some(Underway::Answered(own)) if own.same(cancel)) {
            in_flight.remove(id);
        }
    }

    /// Gives up every request of the client's under way.
    pub(super) fn cancel_all(&self) {
        // Given up with the lock let go: a flight forgets itself.
        let underway: Vec<Underway> = lock(&self.in_flight).values().cloned().collect();
        for request in underway {
            request.cancel();
        }
    }

    /// Gives up request `id` of the client's (it cancelled it, or went away).
    pub(super) fn cancel_request(&self, id: &RequestId) {
        // Cancelled with the lock let go: a flight forgets itself.
        let underway = lock(&self.in_flight).get(id).cloned();
        if let Some(request) = underway {
            request.cancel();
        }
    }

    /// True once the link is closed: nothing it asked is worth answering.
    pub(super) fn is_closed(&self) -> bool {
        matches!(*lock(&self.out), Outlet::Closed)
    }

    /// Queues one frame for the client; false when it has no way to it.
    pub(super) fn send(&self, route: Route<'_>, frame: Frame) -> bool {
        self.send_bytes(route, frame.bytes)
    }

    /// [`Link::send`] of an encoded frame; an empty one ends a request's
    /// HTTP stream without an answer (a cancelled request's).
    pub(super) fn send_bytes(&self, route: Route<'_>, bytes: Vec<u8>) -> bool {
        let out = lock(&self.out).clone();
        match out {
            Outlet::Closed => false,
            Outlet::Pipe(out) => piped(&out, route, bytes, SEND_WAIT) || self.unless_gone(&out),
            Outlet::Streams(streams) => streams.send(route, bytes, SEND_WAIT),
        }
    }

    /// True when the client's output is a pipe (or socket) with room for
    /// `frames` more frames without waiting: a flight's answer, written by
    /// the thread that reads a server, must never wait for the client.
    pub(super) fn has_room(&self, frames: usize) -> bool {
        match &*lock(&self.out) {
            Outlet::Pipe(out) => out.has_room(frames),
            _ => false,
        }
    }

    /// [`Link::send_bytes`] without waiting for room (a flight's answer,
    /// sent where [`Link::has_room`] said there was).
    pub(super) fn send_now(&self, route: Route<'_>, bytes: Vec<u8>) -> bool {
        let out = lock(&self.out).clone();
        match out {
            Outlet::Closed => false,
            Outlet::Pipe(out) => {
                piped(&out, route, bytes, Duration::ZERO) || self.unless_gone(&out)
            }
            Outlet::Streams(streams) => streams.send(route, bytes, Duration::ZERO),
        }
    }

    /// After a frame `out` did not take: when it is broken (the client
    /// closed its end of the pipe), nothing can reach the client any more,
    /// so the link closes and what the client asked is given up now, not
    /// when its input ends. False, as the frame was not sent.
    fn unless_gone(&self, out: &PipeOut) -> bool {
        if out.is_broken() && !self.is_closed() {
            log::warn!(
                "the client in front of tether closed its end of the output: \
                 its requests under way are given up"
            );
            self.close();
        }
        false
    }

    /// Queues one frame only if there is room at once (progress: an update
    /// dropped is better than a call held up).
    pub(super) fn offer(&self, route: Route<'_>, frame: Frame) {
        let out = lock(&self.out).clone();
        match out {
            Outlet::Closed => {}
            Outlet::Pipe(out) => {
                if !out.send(frame.bytes, Duration::ZERO) {
                    self.unless_gone(&out);
                }
            }
            Outlet::Streams(streams) => {
                streams.send(route, frame.bytes, Duration::ZERO);
            }
        }
    }

    /// Progress of request `id`, under the client's `token` (dropped when
    /// there is no room at once: the call is never held up).
    pub(super) fn progress(&self, id: &RequestId, token: &Value, progress: &Progress) {
        let mut params = json!({"progressToken": token, "progress": progress.progress});
        if let Some(total) = progress.total {
            params["total"] = json!(total);
        }
        if let Some(message) = &progress.message {
            params["message"] = json!(message);
        }
        let frame = Frame::notification("notifications/progress", Some(&params));
        self.offer(Route::About(id), frame);
    }

    /// A log message of `server`'s about request `id`, named as its logger
    /// when it names none (dropped when there is no room at once).
    pub(super) fn log(&self, id: &RequestId, server: &str, message: &LogMessage) {
        let logger = message.logger.as_deref().unwrap_or(server);
        let params = json!({"level": message.level, "logger": logger, "data": message.data});
        let frame = Frame::notification("notifications/message", Some(&params));
        self.offer(Route::About(id), frame);
    }

    /// A notification, when the downstream takes them: a handshake-era
    /// client once initialized; a stateless one on each listen stream that
    /// asked for this kind, tagged with the stream's subscription id.
    pub(super) fn notify(&self, method: &str, params: Option<&Value>) {
        let frames: Vec<(Option<RequestId>, Frame)> = {
            let peer = lock(&self.peer);
            if !peer.ready {
                return;
            }
            if !peer.stateless {
                if method == "notifications/message" && !admits(peer.log_level, params) {
                    return;
                }
                vec![(None, Frame::notification(method, params))]
            } else {
                let Some(kind) = listen_kind(method) else { return };
                peer.listens
                    .iter()
                    .filter(|(_, asked)| asked.get(kind) == Some(&Value::Bool(true)))
                    .map(|(id, _)| {
                        let mut tagged = params.cloned().unwrap_or_else(|| json!({}));
                        if let Some(fields) = tagged.as_object_mut() {
                            fields.insert(
                                "_meta".into(),
                                json!({"io.modelcontextprotocol/subscriptionId": id}),
                            );
                        }
                        (Some(id.clone()), Frame::notification(method, Some(&tagged)))
                    })
                    .collect()
            }
        };
        for (listen, frame) in frames {
            match &listen {
                Some(id) => self.send(Route::About(id), frame),
                None => self.send(Route::Announce, frame),
            };
        }
    }

    /// Refuses a `subscriptions/listen` on a handshake session (a
    /// 2025-11-25 client's, which has no such method; it would otherwise
    /// turn the session stateless); true when it was refused, and answered.
    pub(super) fn refuses_listen(&self, id: &RequestId) -> bool {
        let handshake = {
            let peer = lock(&self.peer);
            !peer.stateless && peer.capabilities.is_object()
        };
        if handshake {
            let refusal = RpcError {
                code: crate::jsonrpc::METHOD_NOT_FOUND,
                message: "subscriptions/listen is of the 2026-07-28 revision; this session began \
                          with initialize"
                    .into(),
                data: None,
            };
            self.send(Route::Answer(id), Frame::response(id, &Err(refusal)));
        }
        handshake
    }

    /// A stateless client's `subscriptions/listen`: kept open (never
    /// answered while it lasts), acknowledged with what it will hear.
    pub(super) fn listen(&self, id: &RequestId, params: Option<&Value>) {
        let asked = params.and_then(|params| params.get("notifications")).cloned();
        let offered = ["toolsListChanged", "promptsListChanged", "resourcesListChanged"];
        let mut granted = serde_json::Map::new();
        if let Some(asked) = asked.as_ref().and_then(Value::as_object) {
            for kind in offered {
                if asked.get(kind) == Some(&Value::Bool(true)) {
                    granted.insert(kind.into(), Value::Bool(true));
                }
            }
        }
        let granted = Value::Object(granted);
        {
            let mut peer = lock(&self.peer);
            peer.stateless = true;
            peer.ready = true;
            peer.listens.push((id.clone(), granted.clone()));
        }
        let acknowledged = json!({
            "_meta": {"io.modelcontextprotocol/subscriptionId": id},
            "notifications": granted,
        });
        self.send(
            Route::About(id),
            Frame::notification("notifications/subscriptions/acknowledged", Some(&acknowledged)),
        );
    }

    /// Ends a listen stream the client cancelled; true when `id` was one.
    pub(super) fn stop_listening(&self, id: &RequestId) -> bool {
        let stopped = {
            let mut peer = lock(&self.peer);
            let before = peer.listens.len();
            peer.listens.retain(|(open, _)| open != id);
            peer.listens.len() != before
        };
        // Over HTTP its stream ends too.
        if let (true, Outlet::Streams(streams)) = (stopped, &*lock(&self.out)) {
            streams.close_post(id);
        }
        stopped
    }

    /// An answer from the downstream to one of tether's requests.
    pub(super) fn answered(&self, id: i64, outcome: Result<Value, RpcError>) {
        if let Some(asking) = lock(&self.waiting).remove(&id) {
            let _ = asking.answer.send(outcome);
        }
    }

    /// Asks the downstream, and waits at most `wait` for its answer.
    pub(super) fn ask(
        &self,
        server: &str,
        method: &str,
        params: &Value,
        wait: Duration,
    ) -> Result<Value, RpcError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) as i64 + 1;
        let (waiter, answer) = bounded(1);
        let asking =
            Asking { answer: waiter, server: server.to_owned(), method: method.to_owned() };
        lock(&self.waiting).insert(id, asking);
        if !self.send(Route::Ask, Frame::request(id, method, Some(params))) {
            lock(&self.waiting).remove(&id);
            return Err(gone(method));
        }
        let outcome = answer.recv_timeout(wait).map_err(|_| RpcError {
            code: -32603,
            message: format!(
                "the client in front of tether did not answer {method} within {} s",
                wait.as_secs()
            ),
            data: None,
        });
        lock(&self.waiting).remove(&id);
        outcome?
    }

    /// The upstream `server` gave up its `method` request that this client
    /// is answering: the client is told (`notifications/cancelled`), and
    /// whoever waits hears it now.
    pub(super) fn withdraw(&self, server: &str, method: &str, reason: Option<&str>) {
        let withdrawn = {
            let mut waiting = lock(&self.waiting);
            let id = waiting
                .iter()
                .find(|(_, asking)| asking.server == server && asking.method == method)
                .map(|(id, _)| *id);
            id.and_then(|id| waiting.remove(&id).map(|asking| (id, asking)))
        };
        let Some((id, asking)) = withdrawn else { return };
        let mut params = json!({"requestId": id});
        if let Some(reason) = reason {
            params["reason"] = json!(reason);
        }
        self.send(Route::Ask, Frame::notification("notifications/cancelled", Some(&params)));
        let _ = asking.answer.send(Err(RpcError {
            code: -32800,
            message: format!("{server} gave up its {method}"),
            data: None,
        }));
    }

    /// True when the downstream can be sent requests and takes `method`.
    fn offers(&self, method: &str, params: &Value) -> bool {
        let peer = lock(&self.peer);
        !peer.stateless && takes(&peer.capabilities, method, params)
    }
}

/// True when a client that declared `capabilities` takes the request
/// `method` with `params`: the capability it needs, and for an elicitation
/// its mode (a bare `elicitation` is forms only).
pub(super) fn takes(capabilities: &Value, method: &str, params: &Value) -> bool {
    let declared = |kind: &str| capabilities.get(kind).filter(|declared| !declared.is_null());
    match method {
        "roots/list" => declared("roots").is_some(),
        "sampling/createMessage" => declared("sampling").is_some(),
        "elicitation/create" => {
            let Some(elicitation) = declared("elicitation") else { return false };
            let mode = params.get("mode").and_then(Value::as_str).unwrap_or("form");
            let modes = elicitation.as_object().filter(|modes| !modes.is_empty());
            match modes {
                None => mode == "form",
                Some(modes) => modes.contains_key(mode),
            }
        }
        _ => false,
    }
}

/// Every client in front of tether: stdio's one, or an HTTP front's
/// sessions (and its one link for stateless clients).
#[derive(Default)]
pub(super) struct Links {
    open: Mutex<Vec<Arc<Link>>>,
    clock: AtomicU64,
}

impl Links {
    pub(super) fn add(&self, link: &Arc<Link>) {
        self.touch(link);
        lock(&self.open).push(Arc::clone(link));
    }

    pub(super) fn remove(&self, link: &Arc<Link>) {
        lock(&self.open).retain(|open| !Arc::ptr_eq(open, link));
    }

    /// `link` asked something now.
    pub(super) fn touch(&self, link: &Link) {
        link.seen.store(self.clock.fetch_add(1, Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    pub(super) fn all(&self) -> Vec<Arc<Link>> {
        lock(&self.open).clone()
    }

    /// The client active last that takes `method` and can be sent it.
    pub(super) fn asked_of(&self, method: &str, params: &Value) -> Option<Arc<Link>> {
        self.all()
            .into_iter()
            .filter(|link| link.offers(method, params))
            .max_by_key(|link| link.seen.load(Ordering::Relaxed))
    }

    /// A notification to every client that takes it.
    pub(super) fn notify(&self, method: &str, params: Option<&Value>) {
        for link in self.all() {
            link.notify(method, params);
        }
    }
}

/// True when a log message (`params`) is at `least` or above (`info`, the
/// level tether asks of its servers, while the client set none); one at a
/// level MCP does not name passes.
fn admits(least: Option<LogLevel>, params: Option<&Value>) -> bool {
    let level = params.and_then(|params| params.get("level")).and_then(Value::as_str);
    level.and_then(LogLevel::from_name).is_none_or(|level| level >= least.unwrap_or(LogLevel::Info))
}

/// The listen filter's key for a list-change notification.
fn listen_kind(method: &str) -> Option<&'static str> {
    match method {
        "notifications/tools/list_changed" => Some("toolsListChanged"),
        "notifications/prompts/list_changed" => Some("promptsListChanged"),
        "notifications/resources/list_changed" => Some("resourcesListChanged"),
        _ => None,
    }
}

fn gone(method: &str) -> RpcError {
    RpcError {
        code: -32603,
        message: format!("no client in front of tether to answer {method}"),
        data: None,
    }
}
