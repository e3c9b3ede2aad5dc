//! The downstream client as the upstream servers see it: the hub's
//! [`Host`]. Its requests to the host (`roots/list`, `sampling`,
//! `elicitation`) become requests to the downstream client, and its answers
//! come back through the reader; log messages and list changes pass on.
//!
//! The link exists before the hub (the hub takes it as its host) and is
//! connected to the downstream's output while `serve` runs. Every wait on
//! the downstream is bounded; nothing here holds a lock while it writes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crossbeam_channel::{bounded, Sender};
use serde_json::{json, Value};

use crate::host::{Host, Root};
use crate::jsonrpc::{Frame, Notification, RequestId, RpcError};
use crate::sync::lock;

/// How long the downstream may take to list its roots.
const ROOTS_WAIT: Duration = Duration::from_secs(10);
/// How long a person (elicitation) or a model (sampling) may take.
const PERSON_WAIT: Duration = Duration::from_secs(600);
/// How long a frame waits for room in the writer's queue.
const SEND_WAIT: Duration = Duration::from_secs(5);

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
}

/// The downstream's end of the serving: its output, the requests tether
/// sent it, and what it said of itself.
#[derive(Default)]
pub(super) struct Link {
    /// The writer's queue while serving.
    out: Mutex<Option<Sender<Vec<u8>>>>,
    /// Requests sent to the downstream, by id, each with where its answer goes.
    waiting: Mutex<HashMap<i64, Sender<Result<Value, RpcError>>>>,
    next_id: AtomicU64,
    pub(super) peer: Mutex<Peer>,
}

impl Link {
    /// Connects the link to the writer's queue, or disconnects it (`None`).
    pub(super) fn connect(&self, out: Option<Sender<Vec<u8>>>) {
        *lock(&self.out) = out;
        if lock(&self.out).is_none() {
            // Whoever waits for the downstream hears now that it is gone.
            lock(&self.waiting).clear();
        }
    }

    /// The writer's queue, for progress updates sent without waiting.
    pub(super) fn sender(&self) -> Option<Sender<Vec<u8>>> {
        lock(&self.out).clone()
    }

    /// Queues one frame for the downstream; false when it is gone.
    pub(super) fn send(&self, frame: Frame) -> bool {
        let out = lock(&self.out).clone();
        out.is_some_and(|out| out.send_timeout(frame.bytes, SEND_WAIT).is_ok())
    }

    /// A notification, when the downstream takes them: a handshake-era
    /// client once initialized; a stateless one on each listen stream that
    /// asked for this kind, tagged with the stream's subscription id.
    pub(super) fn notify(&self, method: &str, params: Option<&Value>) {
        let frames: Vec<Frame> = {
            let peer = lock(&self.peer);
            if !peer.ready {
                return;
            }
            if !peer.stateless {
                vec![Frame::notification(method, params)]
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
                        Frame::notification(method, Some(&tagged))
                    })
                    .collect()
            }
        };
        for frame in frames {
            self.send(frame);
        }
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
        self.send(Frame::notification(
            "notifications/subscriptions/acknowledged",
            Some(&acknowledged),
        ));
    }

    /// Ends a listen stream the client cancelled; true when `id` was one.
    pub(super) fn stop_listening(&self, id: &RequestId) -> bool {
        let mut peer = lock(&self.peer);
        let before = peer.listens.len();
        peer.listens.retain(|(open, _)| open != id);
        peer.listens.len() != before
    }

    /// An answer from the downstream to one of tether's requests.
    pub(super) fn answered(&self, id: i64, outcome: Result<Value, RpcError>) {
        if let Some(waiter) = lock(&self.waiting).remove(&id) {
            let _ = waiter.send(outcome);
        }
    }

    /// Asks the downstream, and waits at most `wait` for its answer.
    fn ask(&self, method: &str, params: &Value, wait: Duration) -> Result<Value, RpcError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) as i64 + 1;
        let (waiter, answer) = bounded(1);
        lock(&self.waiting).insert(id, waiter);
        if !self.send(Frame::request(id, method, Some(params))) {
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

    /// Asks the downstream when it declared `capability`; else the reason.
    fn ask_if(&self, capability: &str, method: &str, params: &Value) -> Result<Value, RpcError> {
        if !self.offers(capability) {
            return Err(RpcError {
                code: -32601,
                message: format!("the client in front of tether does not take {method}"),
                data: None,
            });
        }
        self.ask(method, params, PERSON_WAIT)
    }

    /// True when the downstream declared `capability` and can be asked.
    fn offers(&self, capability: &str) -> bool {
        let peer = lock(&self.peer);
        !peer.stateless && peer.capabilities.get(capability).is_some_and(|c| !c.is_null())
    }
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

/// The link as the hub's host.
pub(super) struct LinkHost(pub(super) std::sync::Arc<Link>);

impl Host for LinkHost {
    fn roots(&self) -> Vec<Root> {
        if !self.0.offers("roots") {
            return Vec::new();
        }
        match self.0.ask("roots/list", &json!({}), ROOTS_WAIT) {
            Ok(answer) => answer
                .get("roots")
                .and_then(Value::as_array)
                .map(|roots| {
                    roots
                        .iter()
                        .filter_map(|root| {
                            let uri = root.get("uri")?.as_str()?;
                            let mut kept = Root::new(uri);
                            if let Some(name) = root.get("name").and_then(Value::as_str) {
                                kept = kept.with_name(name);
                            }
                            Some(kept)
                        })
                        .collect()
                })
                .unwrap_or_default(),
            Err(err) => {
                log::warn!("the client in front of tether gave no roots: {}", err.message);
                Vec::new()
            }
        }
    }

    // Upstream servers connect before the client in front has said what
    // it takes, and their capabilities are fixed then: tether declares
    // sampling and elicitation to them, and each request is refused, with
    // the reason, when the client in front does not take it.
    fn handles_sampling(&self) -> bool {
        true
    }

    fn create_message(&self, _server: &str, params: &Value) -> Result<Value, RpcError> {
        self.0.ask_if("sampling", "sampling/createMessage", params)
    }

    fn handles_elicitation(&self) -> bool {
        true
    }

    fn elicit(&self, _server: &str, params: &Value) -> Result<Value, RpcError> {
        self.0.ask_if("elicitation", "elicitation/create", params)
    }

    fn notification(&self, server: &str, notification: &Notification) {
        match notification.method.as_str() {
            // The server's log, named as its logger when it names none.
            "notifications/message" => {
                let mut params = notification.params.clone().unwrap_or_else(|| json!({}));
                if let Some(fields) = params.as_object_mut() {
                    fields.entry("logger").or_insert_with(|| json!(server));
                }
                self.0.notify("notifications/message", Some(&params));
            }
            // Tools are announced when the hub's registry moves (mod.rs),
            // after the hub listed them again; these pass on as they come.
            "notifications/resources/list_changed"
            | "notifications/prompts/list_changed"
            | "notifications/resources/updated" => {
                self.0.notify(&notification.method, notification.params.as_ref());
            }
            _ => {}
        }
    }
}
