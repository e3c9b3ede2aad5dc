//! The MCP shapes tether reads and writes: revisions and their two eras,
//! the initialize handshake's and `server/discover`'s results here; tools and
//! their results (`tools.rs`), resources, prompts and completions
//! (`items.rs`), log messages and progress (`news.rs`), tasks and pages to
//! open (`tasks.rs`).
//!
//! Results are kept as the server sent them (`serde_json::Value`) behind typed
//! accessors: nothing is lost for `--json`, and the per-call path does no
//! conversion the caller did not ask for.

use serde::{Deserialize, Serialize};
use serde_json::Value;

mod items;
mod news;
mod tasks;
mod tools;

pub use items::{
    Completion, CompletionRef, Prompt, PromptArgument, PromptResult, Resource, ResourceContents,
    ResourceTemplate,
};
pub(crate) use news::LOG_LEVEL_META;
pub use news::{LogLevel, LogMessage, Progress};
pub use tasks::{Task, TaskStart, TaskStatus, UrlElicitation};
pub(crate) use tools::decoded_size;
pub use tools::{ContentBlock, Tool, ToolResult};

/// The revision tether offers.
pub const LATEST_PROTOCOL_VERSION: &str = "2025-11-25";

/// Every handshake-era revision tether accepts from a server, newest first.
pub const SUPPORTED_PROTOCOL_VERSIONS: &[&str] =
    &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The stateless revision tether speaks (no handshake; `_meta` on every request).
pub(crate) const MODERN_PROTOCOL_VERSION: &str = "2026-07-28";

/// The two eras of MCP: revisions that open a session with `initialize`
/// (2025-11-25 and before), and stateless ones that carry the version and
/// the client's capabilities on every request (2026-07-28 on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Era {
    /// A session opened by the `initialize` handshake.
    #[default]
    Legacy,
    /// Stateless: `server/discover`, `_meta` on every request.
    Modern,
}

impl Era {
    /// `legacy` or `modern`.
    pub fn as_str(self) -> &'static str {
        match self {
            Era::Legacy => "legacy",
            Era::Modern => "modern",
        }
    }
}

/// Which era to speak to a server: found out by probing (`Auto`), or
/// pinned for a server that misbehaves on the probe (`"protocol"` in its
/// entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum EraChoice {
    /// Probe with `server/discover` and fall back to `initialize`.
    #[default]
    Auto,
    /// Only the `initialize` handshake; no probe.
    Legacy,
    /// Only the stateless revision; no fallback.
    Modern,
}

/// What a server told us about itself in `initialize` or `server/discover`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ServerInfo {
    /// The era the server speaks.
    pub era: Era,
    /// The protocol revision in use (negotiated, or chosen from the
    /// server's `supportedVersions`).
    pub protocol_version: String,
    /// The server's own name (`serverInfo.name`).
    pub name: String,
    /// The server's version (`serverInfo.version`).
    pub version: String,
    /// The server's `instructions`, if any.
    pub instructions: Option<String>,
    /// The server's capabilities object, as sent.
    pub capabilities: Value,
    /// Its `serverInfo` as sent (`name`, `version`, and `title`, `icons`,
    /// `websiteUrl`, `description` when it gives them).
    pub implementation: Value,
}

impl ServerInfo {
    /// Reads an `initialize` result.
    pub(crate) fn from_initialize_result(result: &Value) -> Result<ServerInfo, String> {
        let protocol_version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .ok_or("the initialize result has no protocolVersion")?
            .to_owned();
        let text =
            |value: Option<&Value>| value.and_then(Value::as_str).unwrap_or_default().to_owned();
        let server_info = result.get("serverInfo");
        Ok(ServerInfo {
            era: Era::Legacy,
            protocol_version,
            name: text(server_info.and_then(|info| info.get("name"))),
            version: text(server_info.and_then(|info| info.get("version"))),
            instructions: result.get("instructions").and_then(Value::as_str).map(str::to_owned),
            capabilities: result.get("capabilities").cloned().unwrap_or(Value::Null),
            implementation: server_info.cloned().unwrap_or(Value::Null),
        })
    }

    /// Reads a `server/discover` result: `Some` when it is one and lists
    /// `version` among its `supportedVersions`.
    pub(crate) fn from_discover_result(result: &Value, version: &str) -> Option<ServerInfo> {
        let supported = result.get("supportedVersions")?.as_array()?;
        if !supported.iter().any(|offered| offered.as_str() == Some(version)) {
            return None;
        }
        let text =
            |value: Option<&Value>| value.and_then(Value::as_str).unwrap_or_default().to_owned();
        let server_info = result.pointer("/_meta/io.modelcontextprotocol~1serverInfo");
        Some(ServerInfo {
            era: Era::Modern,
            protocol_version: version.to_owned(),
            name: text(server_info.and_then(|info| info.get("name"))),
            version: text(server_info.and_then(|info| info.get("version"))),
            instructions: result.get("instructions").and_then(Value::as_str).map(str::to_owned),
            capabilities: result.get("capabilities").filter(|c| c.is_object())?.clone(),
            implementation: server_info.cloned().unwrap_or(Value::Null),
        })
    }

    /// True when the server declared this capability (`tools`, `resources`, …).
    pub fn has_capability(&self, name: &str) -> bool {
        self.capabilities.get(name).is_some_and(|value| !value.is_null())
    }

    /// The first non-empty line of the instructions.
    pub fn instructions_first_line(&self) -> Option<&str> {
        self.instructions.as_deref().and_then(first_line)
    }
}

/// The first line of a text that is not blank, trimmed: what a one-line
/// summary of a server's words shows.
pub(crate) fn first_line(text: &str) -> Option<&str> {
    text.lines().map(str::trim).find(|line| !line.is_empty())
}

/// The most characters of one server-supplied string (a name, a URI, a MIME
/// type) that a note repeats, so that notes stay one short line each.
const MAX_NOTE_FIELD: usize = 200;

/// The largest char boundary of `text` at or before `index`.
pub(crate) fn floor_char_boundary(text: &str, index: usize) -> usize {
    let mut index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

/// A server-supplied string cut to [`MAX_NOTE_FIELD`] characters.
pub(crate) fn clip(text: &str) -> String {
    match text.char_indices().nth(MAX_NOTE_FIELD) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_initialize_result() {
        let info = ServerInfo::from_initialize_result(&json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "demo", "version": "1.2"},
            "instructions": "\n  Counts words.\nMore."
        }))
        .unwrap();
        assert_eq!(info.protocol_version, "2025-06-18");
        assert_eq!(info.name, "demo");
        assert!(info.has_capability("tools"));
        assert!(!info.has_capability("resources"));
        assert_eq!(info.instructions_first_line(), Some("Counts words."));
        assert!(ServerInfo::from_initialize_result(&json!({})).is_err());
    }

    #[test]
    fn result_text_describes_every_block() {
        let result = ToolResult::new(json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "resource_link", "uri": "file:///x"},
            {"type": "weird"}
        ], "isError": true}));
        assert!(result.is_error());
        assert_eq!(
            result.to_text(),
            "hello\n[image: image/png, 3 bytes]\n[resource link: file:///x]\n[weird block]"
        );
    }

    #[test]
    fn tool_without_schema_gets_an_object_schema() {
        let tool: Tool = serde_json::from_value(json!({"name": "t"})).unwrap();
        assert_eq!(tool.input_schema, json!({"type": "object"}));
    }

    #[test]
    fn what_a_server_says_of_its_items_is_kept_and_written_back() {
        let sent = json!({"name": "t", "inputSchema": {"type": "object"},
            "execution": {"taskSupport": "optional"},
            "icons": [{"src": "https://example.com/t.svg", "mimeType": "image/svg+xml"}],
            "_meta": {"example.com/x": 1}});
        let tool: Tool = serde_json::from_value(sent.clone()).unwrap();
        assert_eq!(tool.execution, Some(json!({"taskSupport": "optional"})));
        assert_eq!(serde_json::to_value(&tool).unwrap(), sent);
        let template: ResourceTemplate = serde_json::from_value(json!({
            "uriTemplate": "x://{id}", "name": "x", "title": "X", "annotations": {"priority": 1}}))
        .unwrap();
        assert_eq!(template.title.as_deref(), Some("X"));
        assert_eq!(template.annotations, Some(json!({"priority": 1})));
        let argument: PromptArgument =
            serde_json::from_value(json!({"name": "city", "title": "City"})).unwrap();
        assert_eq!(argument.title.as_deref(), Some("City"));
        let info = ServerInfo::from_initialize_result(&json!({"protocolVersion": "2025-11-25",
            "serverInfo": {"name": "s", "version": "1", "title": "S", "websiteUrl": "https://s"}}))
        .unwrap();
        assert_eq!(info.implementation["websiteUrl"], "https://s");
    }
}
