//! A request the server runs on as a task, and a page (URL-mode
//! elicitation) the person must open before one can go on.

use serde_json::Value;

use super::ToolResult;

/// Where a task is: MCP's `TaskStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskStatus {
    /// At work.
    Working,
    /// Waiting for input from the client (an elicitation, a sampling).
    InputRequired,
    /// Done; its result is ready.
    Completed,
    /// Ended with a JSON-RPC error.
    Failed,
    /// Cancelled.
    Cancelled,
}

impl TaskStatus {
    /// True for the statuses a task never leaves.
    pub fn is_terminal(self) -> bool {
        matches!(self, TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled)
    }
}

/// A task: a request the server answered with a handle and runs on (MCP
/// 2025-11-25's tasks, and the 2026-07-28 `io.modelcontextprotocol/tasks`
/// extension).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Task {
    /// The server's id for it.
    pub task_id: String,
    /// Where it is.
    pub status: TaskStatus,
    /// What the server says of where it is.
    pub status_message: Option<String>,
    /// When it was made and last changed (RFC 3339), as the server says.
    pub created_at: Option<String>,
    /// When it last changed.
    pub last_updated_at: Option<String>,
    /// How long the server keeps it; `None` when unlimited or not said.
    pub ttl: Option<std::time::Duration>,
    /// How often the server would have it asked about.
    pub poll_interval: Option<std::time::Duration>,
    /// The whole object as sent (a 2026-07-28 task that ended holds its
    /// `result` or `error` here).
    pub raw: Value,
}

impl Task {
    /// Reads a task object (either revision's spelling of its times).
    pub(crate) fn of(raw: Value) -> Result<Task, String> {
        let text = |name: &str| raw.get(name).and_then(Value::as_str).map(str::to_owned);
        let millis = |names: [&str; 2]| {
            names
                .iter()
                .find_map(|name| raw.get(*name).and_then(Value::as_u64))
                .map(std::time::Duration::from_millis)
        };
        let task_id = text("taskId").ok_or("a task without a taskId")?;
        let status = match raw.get("status").and_then(Value::as_str) {
            Some("working") => TaskStatus::Working,
            Some("input_required") => TaskStatus::InputRequired,
            Some("completed") => TaskStatus::Completed,
            Some("failed") => TaskStatus::Failed,
            Some("cancelled") => TaskStatus::Cancelled,
            other => return Err(format!("task {task_id:?} has an unknown status {other:?}")),
        };
        Ok(Task {
            status,
            status_message: text("statusMessage"),
            created_at: text("createdAt"),
            last_updated_at: text("lastUpdatedAt"),
            ttl: millis(["ttlMs", "ttl"]),
            poll_interval: millis(["pollIntervalMs", "pollInterval"]),
            task_id,
            raw,
        })
    }
}

/// How a call started as a task began: as a task, or answered at once (a
/// server that takes no task for it, or a 2026-07-28 server that chose to).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum TaskStart {
    /// The server runs it on: ask with its id.
    Task(Task),
    /// The server answered at once.
    Done(ToolResult),
}

/// A page the person must open before a request can go on (MCP's URL-mode
/// elicitation), as a `-32042` error lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UrlElicitation {
    /// The server's id for it, which `notifications/elicitation/complete`
    /// names when it is done.
    pub elicitation_id: String,
    /// The page to open.
    pub url: String,
    /// What the server says it is for.
    pub message: String,
}

impl UrlElicitation {
    /// One item of the error's `elicitations`: a URL-mode one with an id
    /// and a URL, else nothing.
    pub(crate) fn of(item: &Value) -> Option<UrlElicitation> {
        let text = |name: &str| item.get(name).and_then(Value::as_str);
        if text("mode").is_some_and(|mode| mode != "url") {
            return None;
        }
        Some(UrlElicitation {
            elicitation_id: text("elicitationId")?.to_owned(),
            url: text("url")?.to_owned(),
            message: text("message").unwrap_or("").to_owned(),
        })
    }
}
