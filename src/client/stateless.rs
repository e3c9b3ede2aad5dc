//! A stateless (2026-07-28) server's state, in one place. The client's
//! side is [`StatelessSession`]: the `_meta` every request carries, the
//! `{server}-listen` thread, the tools whose parameters travel in headers.
//! The reader's side is [`StatelessState`]: that it is one (it may not send requests; its questions come as
//! rounds of input), which `subscriptions/listen` stream is open (list
//! changes tagged with another are not this client's), when the first
//! stream is acknowledged (the start waits for it), and the lists it said
//! may be kept (forgotten when they change).
//!
//! Written by the session start and the listen thread, read by the reader
//! on every message: atomics and one small lock, never held across I/O.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};
use serde_json::Value;

use super::cache::ListCache;
use super::param_headers::{self, ParamHeader};
use crate::jsonrpc::Notification;
use crate::sync::lock;
use crate::threads::NamedThread;

/// The reader's view of a stateless server's session.
#[derive(Default)]
pub(super) struct StatelessState {
    stateless: AtomicBool,
    /// The id of the open `subscriptions/listen` request (0: none).
    listening: AtomicI64,
    /// Told when the first listen stream is acknowledged.
    first_ack: Mutex<Option<Sender<()>>>,
    lists: ListCache,
    /// The resources the host subscribed to (the listen filter's
    /// `resourceSubscriptions`), and who opens the stream again when they
    /// change.
    resources: Mutex<BTreeSet<String>>,
    refilter: Mutex<Option<Sender<()>>>,
    /// The filter the open stream asked for, and what the server's
    /// acknowledgments took of it: a subscriber waits on `taken` to learn
    /// whether its resource was.
    asked: Mutex<(Value, u64)>,
    acked: Mutex<Taken>,
    taken: Condvar,
    /// Counts the changes of the resources subscribed to: a stream's filter
    /// is of the count read before it was made, and a subscriber waits for
    /// an acknowledgment at least as new as its change.
    generation: std::sync::atomic::AtomicU64,
}

/// What the last acknowledgment took of the filter asked: the resources
/// asked, and those the server agreed to.
#[derive(Default)]
struct Taken {
    generation: u64,
    asked: BTreeSet<String>,
    agreed: BTreeSet<String>,
}

impl StatelessState {
    /// The server proved stateless: from now on its requests are ignored.
    pub(super) fn adopt(&self) {
        self.stateless.store(true, Ordering::Release);
    }

    pub(super) fn is_stateless(&self) -> bool {
        self.stateless.load(Ordering::Acquire)
    }

    /// The lists the server said may be kept.
    pub(super) fn lists(&self) -> &ListCache {
        &self.lists
    }

    /// Adds (`on`) or removes a resource subscription; the listen stream is
    /// opened again with the new filter when the set changed.
    /// Returns the change count an acknowledgment must reach to answer for
    /// this subscription.
    pub(super) fn subscribe(&self, uri: &str, on: bool) -> u64 {
        let changed = {
            let mut resources = lock(&self.resources);
            if on {
                resources.insert(uri.to_owned())
            } else {
                resources.remove(uri)
            }
        };
        if !changed {
            return self.generation();
        }
        let generation = self.generation.fetch_add(1, Ordering::AcqRel) + 1;
        if let Some(refilter) = lock(&self.refilter).as_ref() {
            let _ = refilter.try_send(());
        }
        generation
    }

    /// The change count of the resources subscribed to, read before a
    /// listen filter is made of them.
    pub(super) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The resources subscribed to, for the listen filter.
    pub(super) fn subscribed(&self) -> Vec<String> {
        lock(&self.resources).iter().cloned().collect()
    }

    /// Where a change of the subscriptions is told (the listen thread's).
    pub(super) fn refilter_by(&self, refilter: Sender<()>) {
        *lock(&self.refilter) = Some(refilter);
    }

    /// True when `id` is the open `subscriptions/listen` request's.
    pub(super) fn is_listening_as(&self, id: i64) -> bool {
        id != 0 && self.listening.load(Ordering::Acquire) == id
    }

    /// A `subscriptions/listen` request asking for `filter` went out under
    /// `id`.
    /// `generation`: [`StatelessState::generation`] when the filter was made.
    pub(super) fn listening_as(&self, id: i64, filter: &Value, generation: u64) {
        *lock(&self.asked) = (filter.clone(), generation);
        self.listening.store(id, Ordering::Release);
    }

    /// Waits until an acknowledgment of a stream that asked for `uri`, made
    /// at change count `since` or later, arrives, at most until `deadline`:
    /// whether the server took it (`None` when none came in time).
    pub(super) fn taken(&self, uri: &str, since: u64, deadline: Instant) -> Option<bool> {
        let mut acked = lock(&self.acked);
        loop {
            if acked.generation >= since && acked.asked.contains(uri) {
                return Some(acked.agreed.contains(uri));
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            acked = crate::sync::wait_timeout(&self.taken, acked, left);
        }
    }

    /// Compares an acknowledged filter with the one asked: list changes the
    /// server will not announce are said (once per stream), and which of
    /// the resources asked it took is kept for [`StatelessState::taken`].
    fn compare(&self, server: &str, agreed: Option<&Value>) {
        let (asked, generation) = lock(&self.asked).clone();
        let agreed_to =
            |key: &str| agreed.and_then(|agreed| agreed.get(key)) == Some(&Value::Bool(true));
        for (key, what) in [
            ("toolsListChanged", "tool"),
            ("promptsListChanged", "prompt"),
            ("resourcesListChanged", "resource"),
        ] {
            if asked.get(key) == Some(&Value::Bool(true)) && !agreed_to(key) {
                log::info!("{server}: the server will not announce {what} list changes");
            }
        }
        let uris = |filter: Option<&Value>| -> BTreeSet<String> {
            filter
                .and_then(|filter| filter.get("resourceSubscriptions"))
                .and_then(Value::as_array)
                .map_or_else(BTreeSet::new, |uris| {
                    uris.iter().filter_map(Value::as_str).map(str::to_owned).collect()
                })
        };
        let taken = Taken { generation, asked: uris(Some(&asked)), agreed: uris(agreed) };
        for refused in taken.asked.difference(&taken.agreed) {
            log::warn!("{server}: the server did not take the subscription to {refused}");
        }
        *lock(&self.acked) = taken;
        self.taken.notify_all();
    }

    /// The start is about to open the first listen stream: the receiver
    /// hears when it is acknowledged.
    pub(super) fn await_first_ack(&self) -> Receiver<()> {
        let (acked, first_ack) = crossbeam_channel::bounded::<()>(1);
        *lock(&self.first_ack) = Some(acked);
        first_ack
    }

    /// False for a notification tagged with a subscription other than the
    /// open `subscriptions/listen` (a stale one, or another client's).
    pub(super) fn for_this_client(&self, notification: &Notification) -> bool {
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
    pub(super) fn acknowledged(
        &self,
        server: &str,
        notification: &Notification,
    ) -> Vec<Notification> {
        if notification.method != "notifications/subscriptions/acknowledged" {
            return Vec::new();
        }
        // Compared with the open stream's filter only when it is that
        // stream's acknowledgment (an older one may come late).
        let tag = notification
            .params
            .as_ref()
            .and_then(|params| params.pointer("/_meta/io.modelcontextprotocol~1subscriptionId"));
        if tag.and_then(Value::as_i64) == Some(self.listening.load(Ordering::Acquire)) {
            let agreed =
                notification.params.as_ref().and_then(|params| params.get("notifications"));
            self.compare(server, agreed);
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
}

/// What a client keeps for a stateless server.
pub(super) struct StatelessSession {
    meta: Value,
    /// The `{server}-listen` thread, and what stops it.
    listener: Mutex<Option<(NamedThread, Sender<()>)>>,
    /// The tools whose parameters go into headers (`x-mcp-header`), as the
    /// last tool list said, and why each tool it left out was left out.
    tools: Mutex<HeaderTools>,
}

#[derive(Default)]
struct HeaderTools {
    annotated: HashMap<String, Vec<ParamHeader>>,
    left_out: Vec<String>,
}

impl StatelessSession {
    /// A session whose every request carries `meta`.
    pub(super) fn new(meta: Value) -> StatelessSession {
        StatelessSession { meta, listener: Mutex::new(None), tools: Mutex::default() }
    }

    /// The `_meta` every request carries.
    pub(super) fn meta(&self) -> &Value {
        &self.meta
    }

    /// The listen thread started; `stop` ends it when dropped.
    pub(super) fn listening(&self, thread: NamedThread, stop: Sender<()>) {
        *lock(&self.listener) = Some((thread, stop));
    }

    /// The listen thread and what stops it, taken for the close.
    pub(super) fn take_listener(&self) -> Option<(NamedThread, Sender<()>)> {
        lock(&self.listener).take()
    }

    /// What the last tool list said of parameters in headers.
    pub(super) fn listed(
        &self,
        annotated: HashMap<String, Vec<ParamHeader>>,
        left_out: Vec<String>,
    ) {
        *lock(&self.tools) = HeaderTools { annotated, left_out };
    }

    /// Why each tool the last list left out was left out.
    pub(super) fn tools_left_out(&self) -> Vec<String> {
        lock(&self.tools).left_out.clone()
    }

    /// The headers a call of `tool` with `arguments` carries.
    ///
    /// # Errors
    /// An argument the annotations name cannot travel in a header.
    pub(super) fn headers_for(
        &self,
        tool: &str,
        arguments: &Value,
    ) -> Result<Vec<(String, String)>, String> {
        match lock(&self.tools).annotated.get(tool) {
            Some(headers) => param_headers::for_call(headers, arguments),
            None => Ok(Vec::new()),
        }
    }
}
