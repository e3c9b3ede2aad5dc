//! `subscriptions/listen`: how a stateless (2026-07-28) server says that its
//! lists changed, in place of the unprompted notifications of the handshake
//! era.
//!
//! When the server declares `listChanged` for tools, prompts or resources,
//! the `{server}-listen` thread keeps one `subscriptions/listen` request
//! open for those. Its notifications arrive like any other and reach the
//! host (and so the hub's re-listing) the same way as in the handshake era;
//! the listen request itself only ever waits. When the server ends it or
//! the stream drops (an HTTP stream cut off, say), it is opened again after
//! a pause that grows while it keeps dropping; a server that does not know
//! the method is not asked again. The thread ends when the connection
//! closes, or when the client is closed (stdio: the server is told with
//! `notifications/cancelled`).

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{select, Receiver};
use serde_json::{json, Map, Value};

use super::pending::{PendingGuard, Reply, ReplyTo, Waiter};
use super::router::Router;
use crate::error::Error;
use crate::jsonrpc::{Frame, METHOD_NOT_FOUND};

/// The first pause before a dropped stream is opened again.
const FIRST_PAUSE: Duration = Duration::from_millis(500);
/// The longest pause.
const MAX_PAUSE: Duration = Duration::from_secs(30);
/// A stream that stayed open this long dropped by chance: start over.
const STEADY: Duration = Duration::from_secs(60);

/// Whether there is anything to listen for: a list that may change, or
/// resources the host may subscribe to.
pub(super) fn worth_listening(capabilities: &Value) -> bool {
    filter(capabilities).is_some()
        || capabilities.pointer("/resources/subscribe") == Some(&json!(true))
}

/// The `notifications` filter for what the server's capabilities say may
/// change; `None` when nothing may.
pub(super) fn filter(capabilities: &Value) -> Option<Value> {
    let mut filter = Map::new();
    for (capability, key) in [
        ("tools", "toolsListChanged"),
        ("prompts", "promptsListChanged"),
        ("resources", "resourcesListChanged"),
    ] {
        if capabilities.pointer(&format!("/{capability}/listChanged")) == Some(&json!(true)) {
            filter.insert(key.to_owned(), Value::Bool(true));
        }
    }
    (!filter.is_empty()).then_some(Value::Object(filter))
}

/// Keeps a `subscriptions/listen` request open until the connection
/// closes or `stop` does; `cancel_by_notification` on stdio. Its filter is
/// `lists` (the list changes) and the resources subscribed to now; when
/// those change (`refilter`), the stream is given up and opened again.
pub(super) fn listen_loop(
    router: &Router,
    (meta, lists): (&Value, Option<&Value>),
    stop: &Receiver<()>,
    refilter: &Receiver<()>,
    cancel_by_notification: bool,
) {
    let server = router.server();
    let mut pause = FIRST_PAUSE;
    let mut refiltered = false;
    loop {
        let mut filter = lists.cloned().unwrap_or_else(|| json!({}));
        let generation = router.stateless().generation();
        let resources = router.stateless().subscribed();
        if !resources.is_empty() {
            filter["resourceSubscriptions"] = json!(resources);
        }
        if filter.as_object().is_none_or(Map::is_empty) {
            // Nothing to hear until the host subscribes to something.
            select! {
                recv(stop) -> _ => return,
                recv(refilter) -> changed => if changed.is_err() { return },
            }
            continue;
        }
        let params = json!({"_meta": meta, "notifications": filter});
        let params = &params;
        let id = router.pending().next_id();
        let (sender, replies) = crossbeam_channel::unbounded();
        let waiter = Waiter {
            to: ReplyTo::Caller { replies: sender, queued_progress: Arc::new(AtomicUsize::new(0)) },
            patient: true,
            cancel_on_close: false,
            passing: false,
            logs: None,
        };
        if router.pending().register(id, waiter).is_err() {
            return; // Closed.
        }
        let _pending = PendingGuard { pending: router.pending(), id };
        router.stateless().listening_as(id, &filter, generation);
        if router.send(Frame::request(id, "subscriptions/listen", Some(params))).is_err() {
            return;
        }
        log::debug!("{server}: listening for list changes ({params})");
        let opened = Instant::now();
        loop {
            if let Some(reading) = router.reading() {
                reading.follow();
            }
            select! {
                recv(replies) -> reply => match reply.map(|(_, reply)| reply) {
                    Ok(Reply::Progress(_) | Reply::Log(_)) => continue,
                    Ok(Reply::Closed(_)) | Err(_) => return,
                    Ok(Reply::Done(Ok(_)) | Reply::Passed(_)) => log::debug!("{server}: the server ended the listen stream"),
                    Ok(Reply::Done(Err(error))) | Ok(Reply::Failed(Error::Rpc(error)))
                        if error.code == METHOD_NOT_FOUND =>
                    {
                        log::info!("{server}: the server does not offer subscriptions/listen; list changes will not be seen");
                        return;
                    }
                    Ok(Reply::Done(Err(error))) => log::warn!("{server}: subscriptions/listen refused: {error}"),
                    Ok(Reply::Failed(error)) => log::debug!("{server}: the listen stream dropped: {error}"),
                },
                recv(stop) -> _ => {
                    if cancel_by_notification {
                        let _ = router.send(super::router::cancellation(id, "the client closed"));
                    }
                    return;
                }
                // Another filter: this stream is given up, the next opens now.
                recv(refilter) -> _ => {
                    if cancel_by_notification {
                        let _ = router.send(super::router::cancellation(id, "the filter changed"));
                    }
                    pause = FIRST_PAUSE;
                    refiltered = true;
                }
            }
            break;
        }
        if std::mem::take(&mut refiltered) {
            continue;
        }
        if opened.elapsed() >= STEADY {
            pause = FIRST_PAUSE;
        }
        select! {
            recv(stop) -> _ => return,
            default(pause) => {}
        }
        pause = (pause * 2).min(MAX_PAUSE);
    }
}
