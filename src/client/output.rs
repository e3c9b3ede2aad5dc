//! The output schemas of the tools a connection last listed, so that every
//! `tools/call` result is checked against the schema its tool declared, as
//! MCP asks of clients.
//!
//! Kept per connection and replaced whole by each complete `tools/list`, so a
//! tool that changed its schema (after `list_changed` and a re-list) is judged
//! by the new one. A tool never listed on this connection is not judged. The
//! lock is held only to find the schema (an `Arc`), never while checking.

use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};

use crate::protocol::{Tool, ToolResult};
use crate::schema::output_mismatch;
use crate::sync::lock;

/// Shared whole (an `Arc`), so a call takes the lock only to clone it.
#[derive(Default)]
pub(super) struct OutputSchemas {
    by_tool: Mutex<Arc<Map<String, Value>>>,
}

impl OutputSchemas {
    /// Remembers the schemas of a complete tool list.
    pub(super) fn listed(&self, tools: &[Tool]) {
        let by_tool = tools
            .iter()
            .filter_map(|tool| Some((tool.name.clone(), tool.output_schema.clone()?)))
            .collect();
        *lock(&self.by_tool) = Arc::new(by_tool);
    }

    /// `raw` as the result of `tool`, with what it breaks of the tool's
    /// declared schema.
    pub(super) fn checked(&self, tool: &str, raw: Value) -> ToolResult {
        let by_tool = Arc::clone(&lock(&self.by_tool));
        let schema_mismatch =
            by_tool.get(tool).and_then(|schema| output_mismatch(tool, schema, &raw));
        ToolResult { raw, schema_mismatch }
    }
}
