//! What a host asks of a server beyond its lists: a tool call (waited out
//! as a task when the tool or the server makes it one, or passed on as the
//! server wrote it for `tether serve`), a resource read, a prompt, a
//! completion, a resource subscription.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::exchange::Params;
#[cfg(feature = "serve")]
use super::pending::Sink;
use super::{listen, CallOptions, Client};
use crate::error::Error;
use crate::protocol::{
    Completion, CompletionRef, PromptResult, ResourceContents, Task, TaskStart, ToolResult,
};

impl Client {
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
    ) -> Result<super::PassedResult, Error> {
        use super::PassedResult;
        if !self.passes_plain(name, options) {
            return self
                .call_tool(name, arguments, options)
                .map(|result| PassedResult::Value(result.raw));
        }
        let params = Params::ToolCall { name, arguments: &arguments };
        let answer = self
            .exchange_answer("tools/call", params, options, true)
            .map_err(|err| self.noted(err))?;
        checked_object("tools/call", answer)
    }

    /// A request whose result is passed on unread (`tether serve`'s reads
    /// and prompts): the server's own text of it, where the server is a
    /// handshake-era one and nothing is merged into the request; `None`
    /// otherwise, and nothing was sent (call [`Client::request`]).
    ///
    /// # Errors
    /// As [`Client::request`], or a result that is not an object.
    #[cfg(feature = "serve")]
    pub(crate) fn request_passed(
        &self,
        method: &str,
        params: Option<&Value>,
        options: &CallOptions,
    ) -> Result<Option<super::PassedResult>, Error> {
        if self.stateless_session().is_some() || options.meta.is_some() {
            return Ok(None);
        }
        let answer = self
            .exchange_answer(method, Params::Value(params), options, true)
            .map_err(|err| self.noted(err))?;
        checked_object(method, answer).map(Some)
    }

    /// True when a call of `name` with `options` is one request and one
    /// plain answer, which can be passed on as it came: a handshake-era
    /// server, no `_meta` to merge, no task.
    #[cfg(feature = "serve")]
    fn passes_plain(&self, name: &str, options: &CallOptions) -> bool {
        self.stateless_session().is_none() && options.meta.is_none() && !self.runs_as_task(name)
    }

    /// [`Client::call_tool_passed`] without a thread waiting for it: the
    /// request is written, and the thread that reads its answer hands the
    /// result (or the failure) to `sink`, as it hands progress. Only where
    /// the server's output is read by a thread of its own (stdio) and the
    /// call is plain; `None` otherwise, and nothing was sent (call
    /// [`Client::call_tool_passed`] instead). The log messages about it at
    /// `logs` or above go to the sink too, unless the server must first be
    /// told a lower level (then `None`: that takes a caller's wait). The call's limits are the
    /// caller's to keep: `Sent` says them, and [`Client::give_up_sent`]
    /// ends it.
    ///
    /// # Errors
    /// [`Error::Disconnected`] when the connection had closed; the sink
    /// then hears nothing. A request that cannot be written is the sink's
    /// to hear of, as the connection's close.
    #[cfg(feature = "serve")]
    pub(crate) fn send_tool_call(
        &self,
        name: &str,
        arguments: &Value,
        sink: std::sync::Arc<dyn Sink>,
        logs: Option<crate::protocol::LogLevel>,
    ) -> Result<Option<Sent>, Error> {
        use super::pending::{ReplyTo, Waiter};
        use crate::jsonrpc::Frame;
        let default = CallOptions::default();
        let read_for_us = self.router.reading().is_some();
        // Telling the server a lower level is an exchange to wait for: a
        // caller's to make, not the sender's.
        if !read_for_us
            || self.endpoint.traits().exchange_per_request
            || !self.passes_plain(name, &default)
            || logs.is_some_and(|level| self.would_lower_log_level(level))
        {
            return Ok(None);
        }
        let pending = self.router.pending();
        let id = pending.next_id();
        let waiter = Waiter {
            to: ReplyTo::Sink(std::sync::Arc::new(CheckedTool(sink))),
            patient: false,
            cancel_on_close: true,
            passing: true,
            logs,
        };
        pending.register(id, waiter)?;
        let params = super::exchange::ToolCallParams { name, arguments, progress_token: Some(id) };
        let frame = Frame::request_with(id, "tools/call", Some(params));
        // Written or not, the reader thread reads now if no caller does:
        // a server that stopped reading closes the connection, and the
        // close tells the sink how the server ended.
        let _ = self.router.send(frame);
        self.follow();
        Ok(Some(Sent { id, limits: self.limits(&default) }))
    }

    /// Gives up a call sent with [`Client::send_tool_call`] and tells the
    /// server (`notifications/cancelled`, with `reason`); false when its
    /// answer (or the connection's end) is being handed to its sink
    /// already. The sink hears nothing of a call given up.
    #[cfg(feature = "serve")]
    pub(crate) fn give_up_sent(&self, id: i64, reason: &str) -> bool {
        if self.router.pending().take(id).is_none() {
            return false;
        }
        let _ = self.router.send(super::router::cancellation(id, reason));
        true
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
        if self.runs_as_task(name) {
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
}

/// A call sent ahead ([`Client::send_tool_call`]): its request id, and
/// its limits, which its sender keeps.
#[cfg(feature = "serve")]
pub(crate) struct Sent {
    pub(crate) id: i64,
    pub(crate) limits: super::exchange::Limits,
}

/// A `method` result as `serve` passes it on: an object.
#[cfg(feature = "serve")]
fn checked_object(method: &str, answer: super::PassedResult) -> Result<super::PassedResult, Error> {
    use super::PassedResult;
    match answer {
        // The text's first byte is its value's (the envelope's scan).
        PassedResult::Text(text) if text.first() == Some(&b'{') => Ok(PassedResult::Text(text)),
        PassedResult::Value(raw) if raw.is_object() => Ok(PassedResult::Value(raw)),
        other => Err(Error::Protocol(format!(
            "{method} result is not an object: {}",
            other.into_value()
        ))),
    }
}

/// A sink that hears a tool call's result only once it is checked.
#[cfg(feature = "serve")]
struct CheckedTool(std::sync::Arc<dyn Sink>);

#[cfg(feature = "serve")]
impl Sink for CheckedTool {
    fn progress(&self, params: &Value) {
        self.0.progress(params);
    }

    fn log(&self, params: &Value) {
        self.0.log(params);
    }

    fn finish(&self, outcome: Result<super::PassedResult, Error>) {
        self.0.finish(outcome.and_then(|answer| checked_object("tools/call", answer)));
    }
}
