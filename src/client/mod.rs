//! One connection to one MCP server: its era and session start (`era.rs`,
//! `probe.rs`, `handshake.rs`, one `Session`), one request (`exchange.rs`);
//! for a stateless server also the rounds of input (`rounds.rs`), kept lists
//! (`cache.rs`) and the listen stream (`listen.rs`).
//!
//! The transport's reader calls the [`Router`] for every message: a response
//! goes straight to the channel of the caller waiting for it (found by id in
//! `Pending`), a progress notification to the same channel (resetting that
//! caller's timer), a `ping` is answered on the spot, and everything else
//! (server requests, other notifications) is queued for the `{server}-events`
//! thread (`EventQueue`) so that the reader never waits on the host.
//!
//! Many callers may be in flight at once; each waits on its own channel with a
//! deadline. Ids are never reused, so a late response finds no waiter and is
//! dropped. When the transport closes, every waiter is woken at once with the
//! reason, and later requests fail without being sent.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::error::{CloseReason, Error};
use crate::jsonrpc::Frame;
use crate::protocol::{
    Completion, CompletionRef, Era, Prompt, PromptResult, Resource, ResourceContents,
    ResourceTemplate, ServerInfo, Task, TaskStart, Tool, ToolResult, UrlElicitation,
};
use crate::threads::NamedThread;

mod cache;
mod era;
mod eras;
mod events;
mod exchange;
mod handshake;
mod listed;
mod listen;
mod options;
mod param_headers;
mod pending;
mod probe;
mod rounds;
mod router;
mod session;
mod stateless;
mod tasks;
mod url_elicitations;

use crate::transport::{self, Endpoint, Inbox, Transport};
pub(crate) use eras::EraMemory;

/// A result that may be passed on: parsed, or as the server wrote it
/// ([`Client::call_tool_passed`], `tether serve`).
pub(crate) enum PassedResult {
    /// The result, parsed (a server or a call it could not be taken from
    /// as it came).
    Value(Value),
    /// The result's JSON text, as the server wrote it.
    #[cfg_attr(not(feature = "serve"), allow(dead_code))]
    Text(Vec<u8>),
}

impl PassedResult {
    /// The result as a value (a text parsed after all).
    pub(crate) fn into_value(self) -> Value {
        match self {
            PassedResult::Value(value) => value,
            PassedResult::Text(text) => serde_json::from_slice(&text).unwrap_or(Value::Null),
        }
    }
}
use exchange::Params;
pub use options::{
    CallOptions, CancelHandle, ClientInfo, ClientOptions, Declared, ProgressCallback,
};
use router::Router;
use session::Session;
use stateless::StatelessSession;

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
/// The most items a list keeps (tools, resources, templates or prompts);
/// past it the list is cut, and said.
const MAX_LIST_ITEMS: usize = 10_000;
/// The most a list's items may weigh, as JSON text (about: see
/// `json_size`); past it the list is cut, and said.
const MAX_LIST_BYTES: usize = 32 * 1024 * 1024;
/// The longest a start waits for the listen stream's acknowledgement.
const LISTEN_ACK_WAIT: Duration = Duration::from_secs(2);
/// How long `close` waits for the listen thread.
const LISTEN_JOIN_WAIT: Duration = Duration::from_secs(1);

/// About how long `value` is as JSON text: its strings' lengths and a few
/// bytes per value, without writing it out.
fn json_size(value: &Value) -> usize {
    match value {
        Value::Null | Value::Bool(_) | Value::Number(_) => 8,
        Value::String(text) => text.len() + 2,
        Value::Array(items) => items.iter().map(json_size).sum::<usize>() + 2 + items.len(),
        Value::Object(members) => {
            members.iter().map(|(key, value)| key.len() + 4 + json_size(value)).sum::<usize>() + 2
        }
    }
}

/// A connection to one MCP server.
pub struct Client {
    router: Arc<Router>,
    endpoint: Box<dyn Endpoint>,
    info: OnceLock<ServerInfo>,
    options: ClientOptions,
    /// The session, once the start found the server's era.
    session: OnceLock<Session>,
    /// What the last tool list said: output schemas, tools run as tasks.
    listed: listed::ListedTools,
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
        Client::over(server, options, |inbox| transport::open(server, transport, inbox, ceiling))
    }

    /// A client over whatever transport `open` starts with the inbox it is
    /// given (the unit tests' in-memory one, say).
    pub(crate) fn over(
        server: &str,
        options: ClientOptions,
        open: impl FnOnce(Arc<dyn Inbox>) -> Result<Box<dyn Endpoint>, Error>,
    ) -> Result<Client, Error> {
        let router = Arc::new(Router::new(server, Arc::clone(&options.host), EVENTS_QUEUE));
        let inbox = Arc::clone(&router) as Arc<dyn Inbox>;
        let endpoint = open(inbox)?;
        Ok(Client {
            router,
            endpoint,
            info: OnceLock::new(),
            options,
            session: OnceLock::new(),
            listed: listed::ListedTools::default(),
        })
    }

    /// The connection is gone: why, as far as it is known.
    pub(super) fn disconnected(&self) -> Error {
        Error::Disconnected(self.close_reason().unwrap_or(CloseReason::Eof))
    }

    /// A server that sent only garbage times out; say so rather than just "timed out".
    fn explain_silence(&self, err: Error) -> Error {
        let skipped = self.router.skipped_so_far();
        match err {
            Error::Timeout(timeout) if skipped > 0 => {
                let what = match (self.endpoint.traits().line_per_message, skipped) {
                    (true, 1) => "line that is",
                    (true, _) => "lines that are",
                    (_, 1) => "message that is",
                    _ => "messages that are",
                };
                Error::Protocol(format!(
                    "no valid answer to {} before its time ran out; the server wrote {skipped} \
                     {what} not JSON-RPC",
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
        self.router.server()
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
        self.endpoint.traits().name
    }

    /// Why the connection closed, if it did.
    pub fn close_reason(&self) -> Option<CloseReason> {
        self.router.pending().closed()
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
        // The caller's `_meta` keys first; tether's own take their place.
        let params = match &options.meta {
            Some(meta) => rounds::with_meta(params, meta),
            None => params,
        };
        let answer = match self.stateless_session() {
            Some(session) => self.stateless_request(method, params, session.meta(), options),
            None => self.exchange(method, params.as_ref(), options),
        };
        answer.map_err(|err| self.noted(err))
    }

    /// Notes the pages a `-32042` error lists as open, so that their
    /// completions reach the host and [`Client::wait_elicitations`] waits
    /// for them.
    fn noted(&self, err: Error) -> Error {
        if let Error::UrlElicitationRequired { elicitations, .. } = &err {
            for elicitation in elicitations {
                self.router.url_elicitations().opened(&elicitation.elicitation_id);
            }
        }
        err
    }

    /// Waits until the server says each of `elicitations` is done
    /// (`notifications/elicitation/complete`), at most `timeout`; true when
    /// it did. Those of an [`Error::UrlElicitationRequired`] this client
    /// returned, or of a URL-mode `elicitation/create` its host answered;
    /// any other counts as done. The server need not say so (MCP makes it
    /// optional), so a host should also let the person retry by hand.
    pub fn wait_elicitations(&self, elicitations: &[UrlElicitation], timeout: Duration) -> bool {
        let ids: Vec<&str> =
            elicitations.iter().map(|elicitation| elicitation.elicitation_id.as_str()).collect();
        // A timeout too long to add is a day: nobody waits longer at a page.
        let now = Instant::now();
        let deadline = now.checked_add(timeout).unwrap_or(now + Duration::from_secs(86_400));
        self.router.url_elicitations().wait(&ids, deadline)
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
        self.listed.listed(&tools);
        if !self.stateless_http() {
            return Ok(tools);
        }
        // A stateless HTTP server's tools may ask for parameters in headers;
        // one whose annotations break the rules is left out.
        let mut annotated = HashMap::new();
        let mut valid = Vec::with_capacity(tools.len());
        let mut left_out = Vec::new();
        for tool in tools {
            match param_headers::annotations(&tool.input_schema) {
                Ok(headers) => {
                    if !headers.is_empty() {
                        annotated.insert(tool.name.clone(), headers);
                    }
                    valid.push(tool);
                }
                Err(why) => {
                    log::warn!("{}: tool {:?} left out: {why}", self.router.server(), tool.name);
                    left_out.push(format!("tool {:?} left out: {why}", tool.name));
                }
            }
        }
        if let Some(session) = self.stateless_session() {
            session.listed(annotated, left_out);
        }
        Ok(valid)
    }

    /// Why each tool the last `tools/list` left out was left out (for the
    /// hub's status warnings).
    pub(crate) fn tools_left_out(&self) -> Vec<String> {
        self.stateless_session().map(StatelessSession::tools_left_out).unwrap_or_default()
    }

    /// The stateless server's session, when the server is one.
    fn stateless_session(&self) -> Option<&StatelessSession> {
        match self.session.get() {
            Some(Session::Stateless(session)) => Some(session),
            Some(Session::Handshake) | None => None,
        }
    }

    /// True for a stateless server over Streamable HTTP: headers mirror
    /// what a request names, and ending a stream cancels it.
    fn stateless_http(&self) -> bool {
        self.stateless_session().is_some() && self.endpoint.traits().stream_per_request
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
        if let Some(kept) = self.router.stateless().lists().get(method) {
            return Ok(kept);
        }
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        let mut seen_cursors = HashSet::new();
        // A stateless server's list may be kept for its pages' shortest ttlMs.
        let mut keep_for = self.stateless_session().map(|_| Duration::MAX);
        let changes = self.router.stateless().lists().changes();
        let done = |items: Vec<Value>, keep_for: Option<Duration>| {
            if let Some(ttl) = keep_for {
                self.router.stateless().lists().keep(method, &items, ttl, changes);
            }
            Ok(items)
        };
        let mut weight = 0usize;
        for _ in 0..MAX_PAGES {
            let params = cursor.as_ref().map(|cursor| json!({"cursor": cursor}));
            let mut page = self.request(method, params, options)?;
            keep_for = keep_for.zip(cache::page_ttl(&page)).map(|(kept, page)| kept.min(page));
            let Some(Value::Array(page_items)) = page.get_mut(key).map(Value::take) else {
                return Err(Error::Protocol(format!("{method} result has no {key:?} array")));
            };
            for item in page_items {
                weight = weight.saturating_add(json_size(&item));
                if items.len() == MAX_LIST_ITEMS || weight > MAX_LIST_BYTES {
                    log::warn!(
                        "{}: {method}: the list is cut at {} items ({} MiB); tether keeps at most \
                         {MAX_LIST_ITEMS} items and {} MiB",
                        self.router.server(),
                        items.len(),
                        (weight - json_size(&item)) / (1024 * 1024),
                        MAX_LIST_BYTES / (1024 * 1024),
                    );
                    return done(items, keep_for);
                }
                items.push(item);
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
        Err(Error::Protocol(format!(
            "{method}: more than {MAX_PAGES} pages ({} items so far); tether stops there, as \
             with a server that pages forever (a long list needs bigger pages)",
            items.len()
        )))
    }

    /// [`Client::call_tool`] for a result passed on unread (`tether
    /// serve`): the server's own text of it, where it can be taken as it
    /// came (a handshake-era server's plain call, a plain response), else
    /// the parsed result. Never checked against the tool's output schema.
    #[cfg(feature = "serve")]
    pub(crate) fn call_tool_passed(
        &self,
        name: &str,
        arguments: Value,
        options: &CallOptions,
    ) -> Result<PassedResult, Error> {
        let plain = self.stateless_session().is_none()
            && options.meta.is_none()
            && !(self.takes_tool_tasks() && self.listed.task_required(name));
        if !plain {
            return self
                .call_tool(name, arguments, options)
                .map(|result| PassedResult::Value(result.raw));
        }
        let params = Params::ToolCall { name, arguments: &arguments };
        let answer = self
            .exchange_answer("tools/call", params, options, true)
            .map_err(|err| self.noted(err))?;
        match answer {
            // The text's first byte is its value's (the envelope's scan).
            PassedResult::Text(text) if text.first() == Some(&b'{') => Ok(PassedResult::Text(text)),
            PassedResult::Value(raw) if raw.is_object() => Ok(PassedResult::Value(raw)),
            other => Err(Error::Protocol(format!(
                "tools/call result is not an object: {}",
                other.into_value()
            ))),
        }
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
        // A tool that must run as a task (and a server that takes tasks).
        // (The server's capability first: no lock where it takes no tasks.)
        if self.stateless_session().is_none()
            && self.takes_tool_tasks()
            && self.listed.task_required(name)
        {
            return match self.start_tool_task(name, arguments, options)? {
                TaskStart::Task(task) => self.waited_out(task, Some(name), options),
                TaskStart::Done(result) => Ok(result),
            };
        }
        let raw = match (self.stateless_session(), &options.meta) {
            // The lean way for the commonest request: nothing to merge.
            (None, None) => self
                .exchange_with(
                    "tools/call",
                    Params::ToolCall { name, arguments: &arguments },
                    options,
                )
                .map_err(|err| self.noted(err))?,
            _ => self.request(
                "tools/call",
                Some(json!({"name": name, "arguments": arguments})),
                options,
            )?,
        };
        if !raw.is_object() {
            return Err(Error::Protocol(format!("tools/call result is not an object: {raw}")));
        }
        // A 2026-07-28 server may make any call a task: waited out here.
        if raw.get("resultType").and_then(Value::as_str) == Some("task") {
            let task = Task::of(raw).map_err(Error::Protocol)?;
            return self.waited_out(task, Some(name), options);
        }
        if options.pass_on {
            return Ok(ToolResult::new(raw));
        }
        Ok(self.listed.checked(name, raw))
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

    /// Completes an argument (`completion/complete`): the values `argument`
    /// of a prompt or a resource template may take, given what was typed
    /// so far (`value`) and the arguments chosen already (`context`, an
    /// object of names to values, as the revision has them).
    ///
    /// # Errors
    /// As [`Client::request`] (a server without the `completions`
    /// capability answers "method not found"), or a result without
    /// `completion`.
    pub fn complete(
        &self,
        reference: &CompletionRef,
        argument: &str,
        value: &str,
        context: Option<&Value>,
        options: &CallOptions,
    ) -> Result<Completion, Error> {
        let mut params = json!({
            "ref": reference.to_json(),
            "argument": {"name": argument, "value": value},
        });
        if let Some(arguments) = context.filter(|arguments| arguments.is_object()) {
            params["context"] = json!({"arguments": arguments});
        }
        let result = self.request("completion/complete", Some(params), options)?;
        // At most 100 values, as the revision allows.
        result.get("completion").and_then(Completion::from_json).ok_or_else(|| {
            Error::Protocol(format!("bad completion/complete result (no values): {result}"))
        })
    }

    /// Subscribes to changes of the resource `uri`: the server sends
    /// `notifications/resources/updated` for it, which reach the host's
    /// [`Host::notification`](crate::Host::notification). A handshake-era
    /// server is asked (`resources/subscribe`); a stateless one hears it in
    /// the filter of the listen stream, which is opened again with it.
    ///
    /// # Errors
    /// As [`Client::request`]: a server without `resources.subscribe`
    /// refuses.
    pub fn subscribe_resource(&self, uri: &str, options: &CallOptions) -> Result<(), Error> {
        self.subscription(uri, true, options)
    }

    /// Ends a subscription [`Client::subscribe_resource`] made.
    ///
    /// # Errors
    /// As [`Client::request`].
    pub fn unsubscribe_resource(&self, uri: &str, options: &CallOptions) -> Result<(), Error> {
        self.subscription(uri, false, options)
    }

    fn subscription(&self, uri: &str, on: bool, options: &CallOptions) -> Result<(), Error> {
        if self.stateless_session().is_some() {
            let offered =
                self.info.get().is_some_and(|info| listen::worth_listening(&info.capabilities));
            if on && !offered {
                return Err(Error::Rpc(crate::jsonrpc::RpcError {
                    code: crate::jsonrpc::METHOD_NOT_FOUND,
                    message: "the server offers no resource subscriptions".into(),
                    data: None,
                }));
            }
            let since = self.router.stateless().subscribe(uri, on);
            if !on {
                return Ok(());
            }
            // The stream opens again with the new filter; its acknowledgment
            // says whether the server took the resource.
            let timeout = options.timeout.unwrap_or(self.options.request_timeout);
            let now = Instant::now();
            let deadline = now.checked_add(timeout).unwrap_or(now + Duration::from_secs(86_400));
            return match self.router.stateless().taken(uri, since, deadline) {
                Some(true) => Ok(()),
                Some(false) => {
                    self.router.stateless().subscribe(uri, false);
                    Err(Error::Rpc(crate::jsonrpc::RpcError {
                        code: crate::jsonrpc::INVALID_PARAMS,
                        message: format!(
                            "the server did not take the subscription to {uri} (its \
                             acknowledgment of the listen stream left it out)"
                        ),
                        data: None,
                    }))
                }
                None => {
                    // Not known to be taken: not kept either.
                    self.router.stateless().subscribe(uri, false);
                    Err(Error::Timeout(crate::error::Timeout::request(
                        "subscriptions/listen",
                        timeout,
                    )))
                }
            };
        }
        let method = if on { "resources/subscribe" } else { "resources/unsubscribe" };
        self.request(method, Some(json!({"uri": uri})), options).map(|_| ())
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
        let Some(session) = self.stateless_session() else { return };
        if !listen::worth_listening(&info.capabilities) {
            return;
        }
        let lists = listen::filter(&info.capabilities);
        let meta = session.meta().clone();
        let (stop, stopped) = crossbeam_channel::bounded::<()>(0);
        let (refilter, refiltered) = crossbeam_channel::bounded::<()>(1);
        self.router.stateless().refilter_by(refilter);
        let router = Arc::clone(&self.router);
        // One shared stream (stdio) is told; over HTTP the stream just ends.
        let cancel_by_notification = !self.endpoint.traits().stream_per_request;
        let listens_at_once = lists.is_some();
        let thread = NamedThread::spawn(format!("{}-listen", self.router.server()), move || {
            let filter = (&meta, lists.as_ref());
            listen::listen_loop(&router, filter, &stopped, &refiltered, cancel_by_notification);
        });
        let first_ack = self.router.stateless().await_first_ack();
        match thread {
            Ok(thread) => session.listening(thread, stop),
            Err(err) => {
                log::warn!("{}: cannot start the listen thread: {err}", self.router.server());
                return;
            }
        }
        if !listens_at_once {
            return;
        }
        // No change may fall between the first list and the stream: the
        // start waits for its acknowledgement (a server that never sends
        // one is given up on at the start deadline, 2 s at most).
        let wait = deadline.min(Instant::now() + LISTEN_ACK_WAIT);
        self.follow();
        if first_ack.recv_deadline(wait).is_err() {
            log::debug!("{}: the listen stream was not acknowledged in time", self.router.server());
        }
    }

    /// Closes the connection: pending requests fail at once, then the
    /// transport ends (for stdio: stdin, SIGTERM, SIGKILL, reap) and every
    /// thread is joined. Idempotent.
    ///
    /// # Errors
    /// Errors from ending the transport (waiting for the process).
    pub fn close(&self) -> Result<(), Error> {
        if let Some((thread, stop)) = self.stateless_session().and_then(|s| s.take_listener()) {
            // Told while the connection is up, so that stdio can cancel it.
            drop(stop);
            thread.join_within(LISTEN_JOIN_WAIT);
        }
        // Requests still in flight are cancelled first: a server that
        // outlives the connection (one that refuses to end an HTTP session,
        // say) need not finish work nobody waits for. A stateless server
        // takes the end of the response stream as its cancellation.
        if self.close_reason().is_none() && !self.stateless_http() {
            let in_flight = self.router.pending().to_cancel_on_close();
            let cancellations: Vec<Frame> = in_flight
                .into_iter()
                .map(|id| router::cancellation(id, "the client is closing"))
                .collect();
            if let (false, Ok(outlet)) = (cancellations.is_empty(), self.router.outlet()) {
                outlet.send_last(cancellations);
            }
        }
        self.router.closed(CloseReason::Shutdown);
        let result = self.endpoint.close();
        self.router.close_events();
        result.map_err(Error::Io)
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Err(err) = self.close() {
            log::warn!("{}: close failed: {err}", self.router.server());
        }
    }
}

#[cfg(test)]
mod tests;
