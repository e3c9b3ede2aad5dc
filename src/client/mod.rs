//! One connection to one MCP server: its era and session start (`era.rs`),
//! request ids, routing, timeouts; for a stateless server also the rounds of
//! input (`rounds.rs`), kept lists (`cache.rs`) and the listen stream
//! (`listen.rs`).
//!
//! The transport's reader thread calls [`Router::deliver`] for every message:
//! a response goes straight to the channel of the caller waiting for it (found
//! by id in the pending map), a progress notification to the same channel
//! (resetting that caller's timer), a `ping` is answered on the spot, and
//! everything else (server requests, other notifications) is queued for the
//! `{server}-events` thread so that the reader never waits on the host.
//!
//! Many callers may be in flight at once; each waits on its own channel with a
//! deadline. Ids are never reused, so a late response finds no waiter and is
//! dropped. When the transport closes, every waiter is woken at once with the
//! reason, and later requests fail without being sent.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crossbeam_channel::{select, Receiver, RecvTimeoutError, Sender};
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{json, Map, Value};

use crate::error::{CloseReason, Error, Timeout};
use crate::jsonrpc::Frame;
use crate::protocol::{
    Era, Progress, Prompt, PromptResult, Resource, ResourceContents, ResourceTemplate, ServerInfo,
    Tool, ToolResult,
};
use crate::sync::lock;
use crate::threads::NamedThread;

mod cache;
mod era;
mod listen;
mod options;
mod param_headers;
mod rounds;
mod router;

use crate::transport::{self, Endpoint, Inbox, Transport};
pub use options::{CallOptions, CancelHandle, ClientOptions, ProgressCallback};
use router::{Mail, PendingGuard, PendingState, Reply, Router, Waiter};

/// How long a caller whose frame could not be written waits for the
/// reader to say why the connection ended (it ends at once when the server
/// exited; the supervisor ends what the server left).
const CLOSE_REASON_WAIT: Duration = Duration::from_millis(500);
/// Server requests and notifications waiting for the host; past this, a
/// flooding server's notifications are dropped and its requests refused.
const EVENTS_QUEUE: usize = 1024;
/// Progress updates waiting for one caller; past this, they are dropped.
pub(super) const PROGRESS_QUEUE: usize = 16;
/// How long to wait for a closed server's stderr to end before showing it.
const STDERR_SETTLE: Duration = Duration::from_millis(500);
/// A server that pages forever is cut off here.
const MAX_PAGES: usize = 1000;
/// The longest a start waits for the listen stream's acknowledgement.
const LISTEN_ACK_WAIT: Duration = Duration::from_secs(2);
/// How long `close` waits for the listen thread.
const LISTEN_JOIN_WAIT: Duration = Duration::from_secs(1);

/// A connection to one MCP server.
pub struct Client {
    router: Arc<Router>,
    endpoint: Box<dyn Endpoint>,
    info: OnceLock<ServerInfo>,
    options: ClientOptions,
    /// The `_meta` every request carries, once the server proved stateless.
    meta: OnceLock<Value>,
    /// A remote server's URL, under which its era is remembered.
    http_url: Option<String>,
    /// The `{server}-listen` thread of a stateless server, and what stops it.
    listener: Mutex<Option<(NamedThread, Sender<()>)>>,
    /// A stateless HTTP server's tools whose parameters go into headers
    /// (`x-mcp-header`), as its last tool list said.
    param_headers: Mutex<HashMap<String, Vec<param_headers::ParamHeader>>>,
}

impl Client {
    /// Starts the transport and runs the `initialize` handshake.
    ///
    /// # Errors
    /// Spawn failures, a handshake that fails or times out (after
    /// `options.request_timeout`), or a revision tether does not speak.
    pub fn connect(
        server: &str,
        transport: &Transport,
        options: ClientOptions,
    ) -> Result<Client, Error> {
        let timeout = options.request_timeout;
        let client = Client::start(server, transport, options)?;
        client.initialize(timeout)?;
        Ok(client)
    }

    /// Starts the transport without the handshake; call [`Client::initialize`] next.
    ///
    /// # Errors
    /// [`Error::Spawn`] when the server cannot be started.
    pub fn start(
        server: &str,
        transport: &Transport,
        options: ClientOptions,
    ) -> Result<Client, Error> {
        let ceiling = options.max_total_timeout;
        let mut client = Client::over(server, options, |inbox| {
            transport::open(server, transport, inbox, ceiling)
        })?;
        if let Transport::Http(target) = transport {
            client.http_url = Some(target.url.clone());
        }
        Ok(client)
    }

    /// A client over whatever transport `open` starts with the inbox it is
    /// given (the unit tests' in-memory one, say).
    pub(crate) fn over(
        server: &str,
        options: ClientOptions,
        open: impl FnOnce(Arc<dyn Inbox>) -> Result<Box<dyn Endpoint>, Error>,
    ) -> Result<Client, Error> {
        let router = Arc::new_cyclic(|myself| Router {
            server: server.to_owned(),
            next_id: AtomicU64::new(1),
            state: Mutex::new(PendingState::default()),
            outlet: OnceLock::new(),
            skipped: AtomicU64::new(0),
            dropped: Default::default(),
            lists: Default::default(),
            stateless: Default::default(),
            listening: Default::default(),
            first_ack: Mutex::new(None),
            reading: OnceLock::new(),
            events: router::EventQueue::new(EVENTS_QUEUE),
            myself: myself.clone(),
            host: Arc::clone(&options.host),
        });
        let inbox = Arc::clone(&router) as Arc<dyn Inbox>;
        let endpoint = open(inbox)?;
        Ok(Client {
            router,
            endpoint,
            info: OnceLock::new(),
            options,
            meta: OnceLock::new(),
            http_url: None,
            listener: Mutex::new(None),
            param_headers: Mutex::default(),
        })
    }

    /// A server that sent only garbage times out; say so rather than just "timed out".
    fn explain_silence(&self, err: Error) -> Error {
        let skipped = self.router.skipped.load(Ordering::Relaxed);
        match err {
            Error::Timeout(timeout) if skipped > 0 => {
                let what = match (self.transport_name(), skipped) {
                    ("stdio", 1) => "line that is",
                    ("stdio", _) => "lines that are",
                    (_, 1) => "message that is",
                    _ => "messages that are",
                };
                Error::Protocol(format!(
                    "no valid answer to {}; the server wrote {skipped} {what} not JSON-RPC",
                    timeout.method
                ))
            }
            other => other,
        }
    }

    /// What the server said about itself, once initialized.
    pub fn server_info(&self) -> Option<&ServerInfo> {
        self.info.get()
    }

    /// The server's name in the configuration.
    pub fn server_name(&self) -> &str {
        &self.router.server
    }

    /// The last 64 KiB the server wrote to stderr (stdio only).
    pub fn stderr_tail(&self) -> Option<String> {
        // A server that is gone may still have its last words in the pipe.
        let wait = if self.close_reason().is_some() { STDERR_SETTLE } else { Duration::ZERO };
        self.endpoint.stderr_tail(wait)
    }

    /// The transport in use: `stdio`, `http` (Streamable HTTP) or `sse`
    /// (legacy HTTP+SSE, also after a fallback).
    pub fn transport_name(&self) -> &'static str {
        self.endpoint.transport_name()
    }

    /// Why the connection closed, if it did.
    pub fn close_reason(&self) -> Option<CloseReason> {
        lock(&self.router.state).closed.clone()
    }

    /// Sends a request and waits for its result.
    ///
    /// A `tools/call` (or any request with a progress callback) carries a
    /// progress token, so the server's progress resets the timer.
    ///
    /// # Errors
    /// [`Error::Rpc`] for an error answer, [`Error::Timeout`] (the server is
    /// sent `notifications/cancelled`), [`Error::Cancelled`], or
    /// [`Error::Disconnected`] the moment the connection closes.
    ///
    /// To a stateless (2026-07-28) server the request carries the `_meta`
    /// the revision asks for, goes through as many rounds as the server
    /// asks the host for input (elicitation, sampling, roots), and is sent
    /// again when its answer was lost (never a `tools/call`).
    pub fn request(
        &self,
        method: &str,
        params: Option<Value>,
        options: &CallOptions,
    ) -> Result<Value, Error> {
        match self.meta.get() {
            Some(meta) => self.stateless_request(method, params, meta, options),
            None => self.exchange(method, params.as_ref(), options),
        }
    }

    /// One request under a fresh id, and its answer. A `tools/call` (or a
    /// request with a progress callback) goes out with that id as its
    /// progress token, added as the frame is written (`with_progress_token`).
    fn exchange(
        &self,
        method: &str,
        params: Option<&Value>,
        options: &CallOptions,
    ) -> Result<Value, Error> {
        if options.cancel.as_ref().is_some_and(CancelHandle::is_cancelled) {
            return Err(Error::Cancelled);
        }
        let id = self.router.next_id.fetch_add(1, Ordering::Relaxed) as i64;
        let progress_token = (options.progress.is_some() || method == "tools/call").then_some(id);
        let channel = ReplyChannel::take();
        let replies = &channel.receiver;
        let waiter = Waiter {
            replies: channel.sender.clone(),
            queued_progress: Arc::new(AtomicUsize::new(0)),
            patient: false,
        };
        let queued_progress = Arc::clone(&waiter.queued_progress);
        self.router.register(id, waiter)?;
        // Whatever happens from here (even a panicking progress callback),
        // the pending entry goes when this call does.
        let _pending = PendingGuard { router: &self.router, id };
        let mut frame = match progress_token {
            Some(token) => {
                Frame::request_with(id, method, Some(with_progress_token(params, token)))
            }
            None => Frame::request(id, method, params),
        };
        if self.http_url.is_some() {
            self.route_over_http(&mut frame, method, params, options)?;
        }
        if self.router.send(frame).is_err() {
            // The server stopped reading: the reader says why (how it
            // exited) as soon as its output ends, which is at once.
            self.follow();
            let reason = match replies.recv_timeout(CLOSE_REASON_WAIT) {
                Ok((of, Reply::Closed(reason))) if of == id => reason,
                _ => self.close_reason().unwrap_or(CloseReason::Eof),
            };
            return Err(Error::Disconnected(reason));
        }
        self.wait(id, method, replies, &queued_progress, options)
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
    ) -> Result<(), Error> {
        frame.deadline = self.hard_deadline(options);
        let Some(params) = params.filter(|_| self.stateless_http()) else { return Ok(()) };
        let key = match method {
            "tools/call" | "prompts/get" => "name",
            "resources/read" => "uri",
            _ => return Ok(()),
        };
        frame.name = params[key].as_str().map(str::to_owned);
        if method == "tools/call" {
            let tools = lock(&self.param_headers);
            if let Some(headers) = frame.name.as_deref().and_then(|name| tools.get(name)) {
                frame.headers = param_headers::for_call(headers, &params["arguments"])
                    .map_err(Error::Protocol)?;
            }
        }
        Ok(())
    }

    /// The instant a request with these options is given up whatever its
    /// progress says (its ceiling, or its deadline if sooner).
    fn hard_deadline(&self, options: &CallOptions) -> Option<Instant> {
        let timeout = options.timeout.unwrap_or(self.options.request_timeout);
        let ceiling =
            options.max_total_timeout.unwrap_or(self.options.max_total_timeout).max(timeout);
        let at = Instant::now().checked_add(ceiling);
        match (at, options.deadline) {
            (Some(at), Some(deadline)) => Some(at.min(deadline)),
            (at, deadline) => at.or(deadline),
        }
    }

    fn wait(
        &self,
        id: i64,
        method: &str,
        replies: &Receiver<Mail>,
        queued_progress: &AtomicUsize,
        options: &CallOptions,
    ) -> Result<Value, Error> {
        let timeout = options.timeout.unwrap_or(self.options.request_timeout);
        let ceiling =
            options.max_total_timeout.unwrap_or(self.options.max_total_timeout).max(timeout);
        let started = Instant::now();
        // A huge timeout means "no timeout", not an overflow.
        let far = |after: Duration| {
            started.checked_add(after).unwrap_or(started + Duration::from_secs(100 * 365 * 86_400))
        };
        let mut hard_deadline = far(ceiling);
        if let Some(deadline) = options.deadline {
            hard_deadline = hard_deadline.min(deadline);
        }
        let mut deadline = far(timeout).min(hard_deadline);
        loop {
            let wake = match &options.cancel {
                None => {
                    self.read_while_waiting(replies, deadline);
                    match replies.recv_deadline(deadline) {
                        Ok((of, reply)) if of == id => Wake::Reply(reply),
                        Ok(_) => Wake::Stale,
                        Err(RecvTimeoutError::Timeout) => Wake::TimedOut,
                        Err(RecvTimeoutError::Disconnected) => {
                            Wake::Reply(Reply::Closed(CloseReason::Eof))
                        }
                    }
                }
                // A blocking read cannot watch a cancel handle: follow.
                Some(cancel) => {
                    self.follow();
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
                Wake::Reply(Reply::Done(Ok(result))) => return Ok(result),
                Wake::Reply(Reply::Done(Err(error))) => return Err(Error::Rpc(error)),
                Wake::Reply(Reply::Closed(reason)) => return Err(Error::Disconnected(reason)),
                Wake::Reply(Reply::Failed(error)) => return Err(error),
                // A late reply to an earlier call on this thread's channel.
                Wake::Stale => {}
                Wake::Reply(Reply::Progress(params)) => {
                    queued_progress.fetch_sub(1, Ordering::AcqRel);
                    if let Some(callback) = &options.progress {
                        callback(&Progress::from_params(&params));
                    }
                    deadline = Instant::now()
                        .checked_add(timeout)
                        .unwrap_or(hard_deadline)
                        .min(hard_deadline);
                }
                Wake::TimedOut => {
                    if let Some(outcome) = self.abandon(id, method, replies, "timed out") {
                        return outcome;
                    }
                    return Err(Error::Timeout(Timeout::request(method, started.elapsed())));
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
    fn read_while_waiting(&self, replies: &Receiver<Mail>, deadline: Instant) {
        if let Some(reading) = self.router.reading.get() {
            if !reading.lead(deadline, &|| !replies.is_empty()) {
                reading.follow();
            }
        }
    }

    /// Waits on the channel alone: makes sure the output is read meanwhile.
    fn follow(&self) {
        if let Some(reading) = self.router.reading.get() {
            reading.follow();
        }
    }

    /// Forgets a request we stopped waiting for and tells the server; unless
    /// its answer is already on the way, which is then returned instead.
    fn abandon(
        &self,
        id: i64,
        method: &str,
        replies: &Receiver<Mail>,
        reason: &str,
    ) -> Option<Result<Value, Error>> {
        if !self.router.forget(id) {
            // The reader took the waiter out: it is sending the answer (or
            // the close) right now, so this wait is short.
            loop {
                match replies.recv_timeout(Duration::from_secs(1)) {
                    Ok((of, _)) if of != id => continue,
                    Ok((_, Reply::Progress(_))) => continue,
                    Ok((_, Reply::Done(outcome))) => return Some(outcome.map_err(Error::Rpc)),
                    Ok((_, Reply::Closed(reason))) => {
                        return Some(Err(Error::Disconnected(reason)))
                    }
                    Ok((_, Reply::Failed(error))) => return Some(Err(error)),
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
            let _ = self.notify(
                "notifications/cancelled",
                Some(json!({"requestId": id, "reason": reason})),
            );
        }
        None
    }

    /// Sends a notification.
    ///
    /// # Errors
    /// [`Error::Disconnected`] when the connection is closed.
    pub fn notify(&self, method: &str, params: Option<Value>) -> Result<(), Error> {
        if let Some(reason) = self.close_reason() {
            return Err(Error::Disconnected(reason));
        }
        let frame = Frame::notification(method, params.as_ref());
        self.router.send(frame).map_err(|_| self.disconnected())
    }

    /// Lists every tool, following `nextCursor` to the end.
    ///
    /// # Errors
    /// Request errors, a malformed page, a repeated cursor, or more than
    /// 1000 pages.
    pub fn list_tools(&self, options: &CallOptions) -> Result<Vec<Tool>, Error> {
        let pages = self.list_all("tools/list", "tools", options)?;
        let tools = pages
            .into_iter()
            .map(|tool| {
                serde_json::from_value(tool)
                    .map_err(|err| Error::Protocol(format!("bad tool in tools/list: {err}")))
            })
            .collect::<Result<Vec<Tool>, Error>>()?;
        if !self.stateless_http() {
            return Ok(tools);
        }
        // A stateless HTTP server's tools may ask for parameters in headers;
        // one whose annotations break the rules is left out.
        let mut annotated = HashMap::new();
        let mut valid = Vec::with_capacity(tools.len());
        for tool in tools {
            match param_headers::annotations(&tool.input_schema) {
                Ok(headers) => {
                    if !headers.is_empty() {
                        annotated.insert(tool.name.clone(), headers);
                    }
                    valid.push(tool);
                }
                Err(why) => {
                    log::warn!("{}: tool {:?} left out: {why}", self.router.server, tool.name)
                }
            }
        }
        *lock(&self.param_headers) = annotated;
        Ok(valid)
    }

    /// True for a stateless server over Streamable HTTP: headers mirror
    /// what a request names, and ending a stream cancels it.
    fn stateless_http(&self) -> bool {
        self.meta.get().is_some() && self.transport_name() == "http"
    }

    /// Runs a paginated list request and gathers the `key` arrays of all pages.
    ///
    /// # Errors
    /// As [`Client::list_tools`].
    pub fn list_all(
        &self,
        method: &str,
        key: &str,
        options: &CallOptions,
    ) -> Result<Vec<Value>, Error> {
        if let Some(kept) = self.router.lists.get(method) {
            return Ok(kept);
        }
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        let mut seen_cursors = HashSet::new();
        // A stateless server's list may be kept for its pages' shortest ttlMs.
        let mut keep_for = self.meta.get().map(|_| Duration::MAX);
        let changes = self.router.lists.changes();
        let done = |items: Vec<Value>, keep_for: Option<Duration>| {
            if let Some(ttl) = keep_for {
                self.router.lists.keep(method, &items, ttl, changes);
            }
            Ok(items)
        };
        for _ in 0..MAX_PAGES {
            let params = cursor.as_ref().map(|cursor| json!({"cursor": cursor}));
            let mut page = self.request(method, params, options)?;
            keep_for = keep_for.zip(cache::page_ttl(&page)).map(|(kept, page)| kept.min(page));
            match page.get_mut(key).map(Value::take) {
                Some(Value::Array(page_items)) => items.extend(page_items),
                _ => return Err(Error::Protocol(format!("{method} result has no {key:?} array"))),
            }
            match page.get("nextCursor") {
                None | Some(Value::Null) => return done(items, keep_for),
                // Some servers end the list with an empty cursor.
                Some(Value::String(next)) if next.is_empty() => return done(items, keep_for),
                Some(Value::String(next)) => {
                    if !seen_cursors.insert(next.clone()) {
                        return Err(Error::Protocol(format!(
                            "{method}: the server repeated the cursor {next:?}"
                        )));
                    }
                    cursor = Some(next.clone());
                }
                Some(other) => {
                    return Err(Error::Protocol(format!(
                        "{method}: nextCursor is not a string: {other}"
                    )))
                }
            }
        }
        Err(Error::Protocol(format!("{method}: more than {MAX_PAGES} pages")))
    }

    /// Calls a tool by the server's own name.
    ///
    /// A result with `isError` is `Ok`: it is the tool's error, for the model.
    ///
    /// # Errors
    /// As [`Client::request`].
    pub fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        options: &CallOptions,
    ) -> Result<ToolResult, Error> {
        let raw = self.request(
            "tools/call",
            Some(json!({"name": name, "arguments": arguments})),
            options,
        )?;
        if !raw.is_object() {
            return Err(Error::Protocol(format!("tools/call result is not an object: {raw}")));
        }
        Ok(ToolResult { raw })
    }

    /// Lists every resource, following `nextCursor` to the end.
    ///
    /// # Errors
    /// As [`Client::list_tools`].
    pub fn list_resources(&self, options: &CallOptions) -> Result<Vec<Resource>, Error> {
        self.list_typed("resources/list", "resources", options)
    }

    /// Lists every resource template.
    ///
    /// # Errors
    /// As [`Client::list_tools`].
    pub fn list_resource_templates(
        &self,
        options: &CallOptions,
    ) -> Result<Vec<ResourceTemplate>, Error> {
        self.list_typed("resources/templates/list", "resourceTemplates", options)
    }

    /// Lists every prompt.
    ///
    /// # Errors
    /// As [`Client::list_tools`].
    pub fn list_prompts(&self, options: &CallOptions) -> Result<Vec<Prompt>, Error> {
        self.list_typed("prompts/list", "prompts", options)
    }

    fn list_typed<T: serde::de::DeserializeOwned>(
        &self,
        method: &str,
        key: &str,
        options: &CallOptions,
    ) -> Result<Vec<T>, Error> {
        self.list_all(method, key, options)?
            .into_iter()
            .map(|item| {
                serde_json::from_value(item)
                    .map_err(|err| Error::Protocol(format!("bad item in {method}: {err}")))
            })
            .collect()
    }

    /// Reads a resource.
    ///
    /// # Errors
    /// As [`Client::request`], or a result without `contents`.
    pub fn read_resource(
        &self,
        uri: &str,
        options: &CallOptions,
    ) -> Result<Vec<ResourceContents>, Error> {
        let mut result = self.request("resources/read", Some(json!({"uri": uri})), options)?;
        let contents = result.get_mut("contents").map(Value::take).unwrap_or(Value::Null);
        serde_json::from_value(contents)
            .map_err(|err| Error::Protocol(format!("bad resources/read result: {err}")))
    }

    /// Gets a prompt with its arguments filled in.
    ///
    /// # Errors
    /// As [`Client::request`], or a result without `messages`.
    pub fn get_prompt(
        &self,
        name: &str,
        arguments: Value,
        options: &CallOptions,
    ) -> Result<PromptResult, Error> {
        let result = self.request(
            "prompts/get",
            Some(json!({"name": name, "arguments": arguments})),
            options,
        )?;
        serde_json::from_value(result)
            .map_err(|err| Error::Protocol(format!("bad prompts/get result: {err}")))
    }

    /// Tells the server that the host's roots changed.
    ///
    /// # Errors
    /// [`Error::Disconnected`] when the connection is closed.
    pub fn notify_roots_changed(&self) -> Result<(), Error> {
        if self.era() == Era::Modern {
            // Stateless servers ask for the roots with each request that needs them.
            return Ok(());
        }
        self.notify("notifications/roots/list_changed", None)
    }

    /// The era the server speaks (legacy until the session start says otherwise).
    pub fn era(&self) -> Era {
        self.info.get().map_or(Era::Legacy, |info| info.era)
    }

    /// Starts the `{server}-listen` thread when the server says its lists
    /// may change.
    fn start_listening(&self, info: &ServerInfo, deadline: Instant) {
        let (Some(filter), Some(meta)) = (listen::filter(&info.capabilities), self.meta.get())
        else {
            return;
        };
        let params = json!({"_meta": meta, "notifications": filter});
        let (stop, stopped) = crossbeam_channel::bounded::<()>(0);
        let router = Arc::clone(&self.router);
        // One shared stream (stdio) is told; over HTTP the stream just ends.
        let cancel_by_notification = self.transport_name() != "http";
        let thread = NamedThread::spawn(format!("{}-listen", self.router.server), move || {
            listen::listen_loop(&router, &params, &stopped, cancel_by_notification);
        });
        let (acked, first_ack) = crossbeam_channel::bounded::<()>(1);
        *lock(&self.router.first_ack) = Some(acked);
        match thread {
            Ok(thread) => *lock(&self.listener) = Some((thread, stop)),
            Err(err) => {
                log::warn!("{}: cannot start the listen thread: {err}", self.router.server);
                return;
            }
        }
        // No change may fall between the first list and the stream: the
        // start waits for its acknowledgement (a server that never sends
        // one is given up on at the start deadline, 2 s at most).
        let wait = deadline.min(Instant::now() + LISTEN_ACK_WAIT);
        self.follow();
        if first_ack.recv_deadline(wait).is_err() {
            log::debug!("{}: the listen stream was not acknowledged in time", self.router.server);
        }
    }

    /// Closes the connection: pending requests fail at once, then the
    /// transport ends (for stdio: stdin, SIGTERM, SIGKILL, reap) and every
    /// thread is joined. Idempotent.
    ///
    /// # Errors
    /// Errors from ending the transport (waiting for the process).
    pub fn close(&self) -> Result<(), Error> {
        if let Some((thread, stop)) = lock(&self.listener).take() {
            // Told while the connection is up, so that stdio can cancel it.
            drop(stop);
            thread.join_within(LISTEN_JOIN_WAIT);
        }
        self.router.closed(CloseReason::Shutdown);
        let result = self.endpoint.close();
        self.router.events.close();
        result.map_err(Error::Io)
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Err(err) = self.close() {
            log::warn!("{}: close failed: {err}", self.router.server);
        }
    }
}

/// A request's parameters with `_meta.progressToken` added as they are
/// written out (the caller's value is left as it is, and no map is built
/// for it): where inserting it would put it.
fn with_progress_token(params: Option<&Value>, token: i64) -> impl Serialize + '_ {
    WithEntry {
        object: params,
        key: "_meta",
        value: move |meta| WithEntry { object: meta, key: "progressToken", value: move |_| token },
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
    sender: Sender<Mail>,
    receiver: Receiver<Mail>,
}

type ChannelEnds = (Sender<Mail>, Receiver<Mail>);

thread_local! {
    static REPLY_CHANNEL: std::cell::Cell<Option<ChannelEnds>> = const { std::cell::Cell::new(None) };
}

impl ReplyChannel {
    fn take() -> ReplyChannel {
        let (sender, receiver) = REPLY_CHANNEL
            .try_with(std::cell::Cell::take)
            .ok()
            .flatten()
            .unwrap_or_else(crossbeam_channel::unbounded);
        ReplyChannel { sender, receiver }
    }
}

impl Drop for ReplyChannel {
    fn drop(&mut self) {
        // What is left belongs to the call that ended.
        while self.receiver.try_recv().is_ok() {}
        let ends = (self.sender.clone(), self.receiver.clone());
        // A tuple of channel ends: putting it back drops no ReplyChannel.
        let _ = REPLY_CHANNEL.try_with(|slot| slot.set(Some(ends)));
    }
}

#[cfg(test)]
mod tests;
