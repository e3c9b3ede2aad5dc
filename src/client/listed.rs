//! What a connection keeps of the tools it last listed: each one's output
//! schema, so that every `tools/call` result is checked against the schema
//! its tool declared (as MCP asks of clients), and which tools must be
//! called as tasks (`execution.taskSupport: "required"`).
//!
//! Replaced whole by each complete `tools/list`, so a tool that changed
//! (after `list_changed` and a re-list) is judged by what it says now. A tool
//! never listed on this connection is not judged, and is called plainly.
//! The lock is held only to clone an `Arc`, never while checking.

use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};

use crate::protocol::{Tool, ToolResult};
use crate::schema::output_mismatch;
use crate::sync::lock;

#[derive(Default)]
pub(super) struct ListedTools {
    listed: Mutex<Arc<Listed>>,
}

#[derive(Default)]
struct Listed {
    /// Output schemas, by tool.
    schemas: Map<String, Value>,
    /// The tools that must be called as tasks.
    task_required: Vec<String>,
}

impl ListedTools {
    /// Remembers a complete tool list.
    pub(super) fn listed(&self, tools: &[Tool]) {
        let schemas = tools
            .iter()
            .filter_map(|tool| Some((tool.name.clone(), tool.output_schema.clone()?)))
            .collect();
        let task_required = tools
            .iter()
            .filter(|tool| {
                tool.execution.as_ref().and_then(|execution| execution.get("taskSupport"))
                    == Some(&Value::from("required"))
            })
            .map(|tool| tool.name.clone())
            .collect();
        *lock(&self.listed) = Arc::new(Listed { schemas, task_required });
    }

    /// `raw` as the result of `tool`, with what it breaks of the tool's
    /// declared schema.
    pub(super) fn checked(&self, tool: &str, raw: Value) -> ToolResult {
        let listed = Arc::clone(&lock(&self.listed));
        let schema_mismatch =
            listed.schemas.get(tool).and_then(|schema| output_mismatch(tool, schema, &raw));
        ToolResult { raw, schema_mismatch }
    }

    /// True when `tool` said it must be called as a task.
    pub(super) fn task_required(&self, tool: &str) -> bool {
        lock(&self.listed).task_required.iter().any(|name| name == tool)
    }
}
