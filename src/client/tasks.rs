//! Tasks: a `tools/call` the server answers with a handle and runs on,
//! asked about until it ends. tether is the requestor only.
//!
//! Two revisions. In 2025-11-25 the client asks for a task (`task` in the
//! call's params) where the server takes them (`tasks.requests.tools.call`)
//! and the tool says so (`execution.taskSupport`), polls `tasks/get`, and
//! fetches the result with `tasks/result`; the server's own requests for
//! the task (an elicitation) reach the host as any request does. In
//! 2026-07-28 tasks are the `io.modelcontextprotocol/tasks` extension, which
//! tether declares in every request: the server may answer any call with
//! `resultType: "task"`, `tasks/get` carries the result or error once it
//! ends, and a task that needs input lists `inputRequests`, answered through
//! the host and sent with `tasks/update`.
//!
//! `call_tool` waits a task out, so for a host it is a call like any other:
//! its timeout counts from the task's last change of status or message (as
//! progress resets a call's timer), within the call's ceiling; cancelling
//! the call, or its timing out, cancels the task (`tasks/cancel`). The
//! polls keep to the server's `pollInterval`, between 20 ms and 5 s.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{CallOptions, Client};
use crate::error::{Error, Timeout};
use crate::jsonrpc::RpcError;
use crate::protocol::{Task, TaskStart, TaskStatus, ToolResult};

/// The bounds of the pause between two polls, whatever the server asks.
const FASTEST_POLL: Duration = Duration::from_millis(20);
const SLOWEST_POLL: Duration = Duration::from_secs(5);
/// The pause when the server suggests none.
const DEFAULT_POLL: Duration = Duration::from_millis(500);
/// How long a `tasks/cancel` sent on the way out may take.
const CANCEL_WAIT: Duration = Duration::from_secs(2);

impl Client {
    /// Calls a tool as a task and returns at once with the task, for a
    /// host that hands control back while the server works; ask about it
    /// with [`Client::get_task`] and [`Client::task_result`]. A server that
    /// takes no task for it answers at once ([`TaskStart::Done`]).
    /// [`Client::call_tool`] runs a task by itself where the tool requires
    /// one (or a 2026-07-28 server makes one), and waits it out.
    ///
    /// # Errors
    /// As [`Client::call_tool`].
    pub fn start_tool_task(
        &self,
        name: &str,
        arguments: Value,
        options: &CallOptions,
    ) -> Result<TaskStart, Error> {
        let mut params = json!({"name": name, "arguments": arguments});
        if self.stateless_session().is_none() {
            params["task"] = json!({});
        }
        let raw = self.request("tools/call", Some(params), options)?;
        let task = match (raw.get("resultType").and_then(Value::as_str), raw.get("task")) {
            (Some("task"), _) => Task::of(raw),
            (None, Some(task)) if task.is_object() => Task::of(task.clone()),
            _ => return Ok(TaskStart::Done(self.listed.checked(name, raw))),
        };
        task.map(TaskStart::Task).map_err(Error::Protocol)
    }

    /// Where a task is now (`tasks/get`).
    ///
    /// # Errors
    /// As [`Client::request`], or an answer that is no task.
    pub fn get_task(&self, task_id: &str, options: &CallOptions) -> Result<Task, Error> {
        let raw = self.request("tasks/get", Some(json!({"taskId": task_id})), options)?;
        Task::of(raw).map_err(Error::Protocol)
    }

    /// Waits for a task to end and returns its tool result: as
    /// [`Client::call_tool`] waits, the timeout counting from the task's
    /// last change.
    ///
    /// # Errors
    /// The task's own error (a failed task), [`Error::Timeout`] and
    /// [`Error::Cancelled`] (the task is then cancelled), or as
    /// [`Client::request`].
    pub fn task_result(&self, task_id: &str, options: &CallOptions) -> Result<ToolResult, Error> {
        let task = self.get_task(task_id, options)?;
        self.waited_out(task, None, options)
    }

    /// Every task the server lists (`tasks/list`; 2025-11-25 servers only).
    ///
    /// # Errors
    /// As [`Client::list_tools`].
    pub fn list_tasks(&self, options: &CallOptions) -> Result<Vec<Task>, Error> {
        self.list_all("tasks/list", "tasks", options)?
            .into_iter()
            .map(|task| Task::of(task).map_err(Error::Protocol))
            .collect()
    }

    /// Asks the server to cancel a task (`tasks/cancel`).
    ///
    /// # Errors
    /// As [`Client::request`]: a task already ended is refused (-32602).
    pub fn cancel_task(&self, task_id: &str, options: &CallOptions) -> Result<(), Error> {
        self.request("tasks/cancel", Some(json!({"taskId": task_id})), options).map(|_| ())
    }

    /// True when the server takes `tools/call` as a task (2025-11-25).
    pub(super) fn takes_tool_tasks(&self) -> bool {
        self.server_info()
            .is_some_and(|info| info.capabilities.pointer("/tasks/requests/tools/call").is_some())
    }

    /// True when `tool` must be called as a task: it says so, and the
    /// (handshake-era) server takes tool tasks. The server's capability is
    /// asked first: no lock where it takes no tasks.
    pub(super) fn runs_as_task(&self, tool: &str) -> bool {
        self.stateless_session().is_none()
            && self.takes_tool_tasks()
            && self.listed.task_required(tool)
    }

    /// `task`, waited out, as the result of the tool `tool` (checked
    /// against its output schema when known).
    pub(super) fn waited_out(
        &self,
        task: Task,
        tool: Option<&str>,
        options: &CallOptions,
    ) -> Result<ToolResult, Error> {
        let task_id = task.task_id.clone();
        let outcome = self.wait_task(task, options);
        if matches!(outcome, Err(Error::Timeout(_) | Error::Cancelled)) {
            // Nobody waits for it any more: the server need not work on.
            let quick = CallOptions::default().with_timeout(CANCEL_WAIT);
            if let Err(err) = self.cancel_task(&task_id, &quick) {
                log::debug!("{}: task {task_id:?} not cancelled: {err}", self.router.server());
            }
        }
        let raw = outcome?;
        if !raw.is_object() {
            return Err(Error::Protocol(format!("the task's result is not an object: {raw}")));
        }
        Ok(match tool {
            Some(tool) => self.listed.checked(tool, raw),
            None => ToolResult::new(raw),
        })
    }

    /// Polls until the task ends (or, in 2025-11-25, needs input), then
    /// its result as the call would have answered.
    fn wait_task(&self, mut task: Task, options: &CallOptions) -> Result<Value, Error> {
        let server = self.router.server();
        let quiet = options.timeout.unwrap_or(self.options.request_timeout);
        let ceiling = self.hard_deadline(options);
        let started = Instant::now();
        let mut changed = started;
        let stateless = self.stateless_session().is_some();
        loop {
            log::debug!("{server}: task {:?} is {:?}", task.task_id, task.status);
            match task.status {
                TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled if stateless => {
                    return ended(task)
                }
                // 2026-07-28: the questions come with the task, and the
                // answers go back with `tasks/update`; a person may take a
                // while, so the quiet time starts again after.
                TaskStatus::InputRequired if stateless => {
                    let requests = task.raw.get("inputRequests").cloned().unwrap_or(Value::Null);
                    let answers = self.answer_inputs(&requests)?;
                    changed = Instant::now();
                    let update = CallOptions {
                        cancel: options.cancel.clone(),
                        deadline: ceiling,
                        ..CallOptions::default()
                    };
                    let params = json!({"taskId": task.task_id, "inputResponses": answers});
                    self.request("tasks/update", Some(params), &update)?;
                    task.status = TaskStatus::Working;
                }
                // 2025-11-25: `tasks/result` has the result, and waits for
                // it while the task needs input (asked of the host meanwhile).
                TaskStatus::Completed
                | TaskStatus::Failed
                | TaskStatus::Cancelled
                | TaskStatus::InputRequired => {
                    let within = CallOptions { deadline: ceiling, ..options.clone() };
                    let params = json!({"taskId": task.task_id});
                    return self.request("tasks/result", Some(params), &within);
                }
                TaskStatus::Working => {}
            }
            let pause =
                task.poll_interval.unwrap_or(DEFAULT_POLL).clamp(FASTEST_POLL, SLOWEST_POLL);
            // A quiet time too long to add to a clock is no limit at all.
            let limit = match (changed.checked_add(quiet), ceiling) {
                (Some(quiet_end), Some(ceiling)) => Some(quiet_end.min(ceiling)),
                (quiet_end, ceiling) => quiet_end.or(ceiling),
            };
            if limit.is_some_and(|limit| Instant::now() + pause > limit) {
                return Err(Error::Timeout(Timeout::request("tools/call", started.elapsed())));
            }
            let cancelled = match &options.cancel {
                Some(cancel) => {
                    cancel.cancelled.recv_timeout(pause).is_ok() || cancel.is_cancelled()
                }
                None => {
                    std::thread::sleep(pause);
                    false
                }
            };
            if cancelled {
                return Err(Error::Cancelled);
            }
            let poll = CallOptions {
                cancel: options.cancel.clone(),
                deadline: limit,
                ..CallOptions::default()
            };
            let next = self.get_task(&task.task_id, &poll)?;
            if (next.status, &next.status_message, &next.last_updated_at)
                != (task.status, &task.status_message, &task.last_updated_at)
            {
                changed = Instant::now();
            }
            task = next;
        }
    }
}

/// A 2026-07-28 task that ended: its result, or its error.
fn ended(task: Task) -> Result<Value, Error> {
    match task.status {
        TaskStatus::Completed => task.raw.get("result").cloned().ok_or_else(|| {
            Error::Protocol(format!("task {:?} completed without a result", task.task_id))
        }),
        TaskStatus::Failed => {
            let error = task.raw.get("error").cloned().unwrap_or(Value::Null);
            match serde_json::from_value::<RpcError>(error) {
                Ok(error) => Err(Error::from_rpc(error)),
                Err(_) => Err(Error::Protocol(format!(
                    "task {:?} failed without a JSON-RPC error",
                    task.task_id
                ))),
            }
        }
        _ => Err(Error::Rpc(RpcError {
            code: REQUEST_CANCELLED,
            message: format!(
                "the server cancelled the task{}",
                task.status_message.map(|why| format!(": {why}")).unwrap_or_default()
            ),
            data: None,
        })),
    }
}

/// The JSON-RPC error code of a request cancelled.
const REQUEST_CANCELLED: i64 = -32800;
