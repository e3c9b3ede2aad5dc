//! tether as an MCP server in front of its hub (`tether serve`): the
//! servers it connects, served to one downstream client as one server.
//!
//! The same blocking shape as the client side. The caller's thread reads
//! the downstream's frames; requests go to a bounded pool of
//! `serve-worker-N` threads, each answering one at a time from the hub
//! (`answer.rs`); one `serve-writer` thread writes every frame; a
//! `serve-changes` thread announces the hub's tool changes. Every queue is
//! bounded: a request that finds the pool's queue full is answered at once
//! that tether is busy, so the reader never waits on the workers (it must
//! go on reading the answers to tether's own requests to the downstream,
//! `link.rs`, which a worker may be waiting for). No lock is held while
//! anything is written.
//!
//! Both eras downstream: a client that sends `initialize` (2024-11-05 to
//! 2025-11-25) gets the handshake, one that sends `server/discover` and
//! `_meta` on each request (2026-07-28) is answered statelessly, whatever
//! the upstream servers speak. The end of the input ends the serving: the
//! calls under way are cancelled and every thread is joined.

mod answer;
mod link;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, TrySendError};
use serde_json::json;

use crate::client::CancelHandle;
use crate::error::Error;
use crate::framing::{Framer, Next};
use crate::host::Host;
use crate::hub::Hub;
use crate::jsonrpc::{Frame, Message, Request, RequestId, RpcError};
use crate::sync::lock;
use answer::Answerer;
use link::{Link, LinkHost};

/// Requests answered at once.
const WORKERS: usize = 8;
/// Requests waiting for a worker; past this one is answered "busy".
const WAITING_REQUESTS: usize = 64;
/// Frames waiting for the writer.
const WAITING_FRAMES: usize = 1024;
/// How often the changes thread looks whether the serving ended.
const CHANGES_POLL: Duration = Duration::from_millis(250);
/// How often the restarts thread looks for servers that stopped.
const RESTART_POLL: Duration = Duration::from_millis(250);
/// The first pause before restarting a server that stopped again soon, and
/// the longest.
const RESTART_FIRST: Duration = Duration::from_secs(1);
const RESTART_CAP: Duration = Duration::from_secs(30);
/// A server up this long since its last restart starts its backoff afresh.
const RESTART_RESET: Duration = Duration::from_secs(60);

/// How `tether serve` serves.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ServeOptions {
    /// Serve this one server with its own names (`tether serve NAME`), and
    /// pass it what tether does not answer itself.
    pub passthrough: Option<String>,
    /// Offer the `tether__status` tool: each server's state.
    pub status_tool: bool,
}

impl ServeOptions {
    /// Serves one server with its own names.
    pub fn with_passthrough(mut self, server: &str) -> ServeOptions {
        self.passthrough = Some(server.to_owned());
        self
    }

    /// Offers the `tether__status` tool.
    pub fn with_status_tool(mut self, on: bool) -> ServeOptions {
        self.status_tool = on;
        self
    }
}

/// The client in front of tether. Made before the hub, whose host it is
/// ([`Downstream::host`]: server requests for roots, sampling and
/// elicitation go to this client), then served with [`Downstream::serve`].
#[derive(Default)]
pub struct Downstream {
    link: Arc<Link>,
}

impl Downstream {
    /// A downstream not connected yet.
    pub fn new() -> Downstream {
        Downstream::default()
    }

    /// The host to give the hub (`HubOptions::with_host`).
    pub fn host(&self) -> Arc<dyn Host> {
        Arc::new(LinkHost(Arc::clone(&self.link)))
    }

    /// Serves `hub` to the client reading `output` and writing `input`
    /// (newline-delimited JSON-RPC, as MCP's stdio transport), until
    /// `input` ends. The calls still under way are then cancelled.
    ///
    /// # Errors
    /// A serving thread cannot be started.
    pub fn serve(
        &self,
        hub: &Hub,
        mut input: impl Read,
        output: impl Write + Send,
        options: &ServeOptions,
    ) -> Result<(), Error> {
        let (frames, outgoing) = bounded::<Vec<u8>>(WAITING_FRAMES);
        self.link.connect(Some(frames.clone()));
        let (queue, requests) = bounded::<Request>(WAITING_REQUESTS);
        let in_flight: Mutex<HashMap<RequestId, CancelHandle>> = Mutex::new(HashMap::new());
        let ended = AtomicBool::new(false);
        let answerer = Answerer {
            hub,
            link: &self.link,
            options,
            resource_servers: Mutex::new(HashMap::new()),
        };
        let named = |name: String| std::thread::Builder::new().name(name);
        std::thread::scope(|scope| {
            let writer =
                named("serve-writer".into()).spawn_scoped(scope, || write_all(output, &outgoing));
            let mut threads = Vec::with_capacity(WORKERS + 1);
            for n in 0..WORKERS {
                let requests = requests.clone();
                let (answerer, link, in_flight) = (&answerer, &*self.link, &in_flight);
                threads.push(
                    named(format!("serve-worker-{n}"))
                        .spawn_scoped(scope, move || work(&requests, answerer, link, in_flight)),
                );
            }
            let (link, ended_flag) = (&*self.link, &ended);
            threads.push(
                named("serve-changes".into())
                    .spawn_scoped(scope, move || announce_changes(hub, link, ended_flag)),
            );
            threads.push(
                named("serve-restarts".into())
                    .spawn_scoped(scope, move || restart_stopped(hub, ended_flag)),
            );
            drop(requests);
            read_all(&mut input, hub, &self.link, &queue, &in_flight);
            // The input ended: nothing more is asked; what runs is given up.
            ended.store(true, Ordering::Relaxed);
            drop(queue);
            for cancel in lock(&in_flight).values() {
                cancel.cancel();
            }
            let mut failed = None;
            for thread in threads {
                match thread {
                    Ok(thread) => {
                        let _ = thread.join();
                    }
                    Err(err) => failed = Some(err),
                }
            }
            self.link.connect(None);
            drop(frames);
            match writer {
                Ok(writer) => {
                    let _ = writer.join();
                }
                Err(err) => failed = Some(err),
            }
            failed.map_or(Ok(()), |err| Err(Error::Io(err)))
        })
    }
}

/// The reader: frames from the downstream until its input ends.
fn read_all(
    input: &mut impl Read,
    hub: &Hub,
    link: &Link,
    queue: &crossbeam_channel::Sender<Request>,
    in_flight: &Mutex<HashMap<RequestId, CancelHandle>>,
) {
    let mut framer = Framer::default();
    loop {
        match framer.next_frame() {
            Ok(Next::Frame(frame)) => match Message::parse(frame) {
                // Held open, not answered: it never takes a worker.
                Ok(Message::Request(request)) if request.method == "subscriptions/listen" => {
                    link.listen(&request.id, request.params.as_ref());
                }
                Ok(Message::Request(request)) => {
                    if let Err(TrySendError::Full(request)) = queue.try_send(request) {
                        let busy = RpcError {
                            code: -32000,
                            message: "tether is busy: too many requests at once".into(),
                            data: None,
                        };
                        link.send(Frame::response(&request.id, &Err(busy)));
                    }
                }
                Ok(Message::Notification(notification)) => {
                    heard(hub, link, in_flight, &notification.method, notification.params.as_ref())
                }
                Ok(Message::Response(response)) => {
                    if let RequestId::Number(id) = response.id {
                        link.answered(id, response.outcome);
                    }
                }
                Err(why) => {
                    log::warn!(
                        "the client in front of tether sent a frame that is not JSON-RPC: {why}"
                    );
                }
            },
            Ok(Next::More) => match framer.fill_from(input) {
                Ok(_) => {}
                Err(err) => {
                    log::debug!("the client's input failed: {err}");
                    return;
                }
            },
            Ok(Next::End) => return,
            Err(err) => {
                log::warn!(
                    "the client in front of tether sent a frame tether cannot read: {err:?}"
                );
                return;
            }
        }
    }
}

/// A notification from the downstream.
fn heard(
    hub: &Hub,
    link: &Link,
    in_flight: &Mutex<HashMap<RequestId, CancelHandle>>,
    method: &str,
    params: Option<&serde_json::Value>,
) {
    match method {
        "notifications/initialized" => {
            let roots = {
                let mut peer = lock(&link.peer);
                peer.ready = true;
                peer.capabilities.get("roots").is_some()
            };
            // The servers connected before the client said it has roots:
            // they ask again now.
            if roots {
                hub.notify_roots_changed();
            }
        }
        "notifications/roots/list_changed" => hub.notify_roots_changed(),
        "notifications/cancelled" => {
            let id = params
                .and_then(|params| params.get("requestId"))
                .and_then(|id| serde_json::from_value::<RequestId>(id.clone()).ok());
            let Some(id) = id else { return };
            if link.stop_listening(&id) {
                return;
            }
            if let Some(cancel) = lock(in_flight).get(&id).cloned() {
                cancel.cancel();
            }
        }
        _ => {}
    }
}

/// A worker: answers requests until the queue closes.
fn work(
    requests: &Receiver<Request>,
    answerer: &Answerer<'_>,
    link: &Link,
    in_flight: &Mutex<HashMap<RequestId, CancelHandle>>,
) {
    while let Ok(request) = requests.recv() {
        let cancel = CancelHandle::new();
        lock(in_flight).insert(request.id.clone(), cancel.clone());
        let outcome = answerer.answer(&request, &cancel);
        lock(in_flight).remove(&request.id);
        // A request the downstream cancelled gets no answer (as MCP says).
        if !cancel.is_cancelled() {
            link.send(Frame::response(&request.id, &outcome));
        }
    }
}

/// Announces each change of the hub's tools to a downstream that takes
/// notifications, until the serving ends.
fn announce_changes(hub: &Hub, link: &Link, ended: &AtomicBool) {
    let mut generation = hub.wait_tools_changed(u64::MAX, Duration::ZERO);
    while !ended.load(Ordering::Relaxed) {
        let now = hub.wait_tools_changed(generation, CHANGES_POLL);
        if now != generation {
            generation = now;
            link.notify("notifications/tools/list_changed", Some(&json!({})));
        }
    }
}

/// Starts again the servers that stopped (a crashed stdio server), with a
/// backoff from 1 s doubling to 30 s between restarts that come soon after
/// one another, afresh once 60 s pass without one.
fn restart_stopped(hub: &Hub, ended: &AtomicBool) {
    let mut pause = RESTART_FIRST;
    let mut last: Option<Instant> = None;
    let mut next = Instant::now() + RESTART_POLL;
    while !ended.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
        let now = Instant::now();
        if now < next {
            continue;
        }
        if last.is_some_and(|at| now.duration_since(at) >= RESTART_RESET) {
            pause = RESTART_FIRST;
        }
        let restarted = hub.restart_dropped();
        if restarted.is_empty() {
            next = now + RESTART_POLL;
        } else {
            log::warn!("restarting {} after it stopped", restarted.join(", "));
            last = Some(now);
            next = now + pause;
            pause = (pause * 2).min(RESTART_CAP);
        }
    }
}

/// The writer: every frame, a line each, until the queue closes or the
/// output does.
fn write_all(mut output: impl Write, frames: &Receiver<Vec<u8>>) {
    while let Ok(mut frame) = frames.recv() {
        frame.push(b'\n');
        let written = output.write_all(&frame).and_then(|()| {
            // Flush only when nothing else is waiting: one write for a burst.
            if frames.is_empty() {
                output.flush()
            } else {
                Ok(())
            }
        });
        if let Err(err) = written {
            log::debug!("the client's output closed: {err}");
            return;
        }
    }
}
