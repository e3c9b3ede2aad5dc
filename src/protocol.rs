//! The MCP shapes tether reads and writes: revisions and their two eras,
//! the initialize handshake's and `server/discover`'s results, tools, tool
//! results, progress and log messages.
//!
//! Results are kept as the server sent them (`serde_json::Value`) behind typed
//! accessors: nothing is lost for `--json`, and the per-call path does no
//! conversion the caller did not ask for.

use serde::{Deserialize, Serialize};
use serde_json::Value;

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

/// A tool as the server lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Tool {
    /// The server's own name for the tool.
    pub name: String,
    /// A display title, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the tool does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema of its arguments.
    #[serde(default = "empty_object_schema")]
    pub input_schema: Value,
    /// The JSON Schema of its `structuredContent`, if declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Hints (`readOnlyHint`, …): for the host's policy only, never trusted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    /// How it may run (`taskSupport`), as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<Value>,
    /// Its icons, as sent (`{"src", "mimeType", "sizes"}`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub icons: Vec<Value>,
    /// Its `_meta`, as sent.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
}

fn empty_object_schema() -> Value {
    serde_json::json!({"type": "object"})
}

/// The result of `tools/call`, as the server sent it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// The whole result object.
    pub raw: Value,
    /// Why its `structuredContent` does not match the `outputSchema` the
    /// tool was listed with, or that it has none though the tool declared
    /// one; `None` when it matches, when the tool reported an error, or when
    /// the connection has not listed the tool. The result is still the
    /// server's, whole: the host decides what a mismatch costs (the model's
    /// [`shape_result`](crate::shape_result) makes it a warning).
    pub schema_mismatch: Option<String>,
}

impl ToolResult {
    /// A result as sent, not checked against any schema.
    pub fn new(raw: Value) -> ToolResult {
        ToolResult { raw, schema_mismatch: None }
    }

    /// True when the tool reported an error (a tool error, not a transport one).
    pub fn is_error(&self) -> bool {
        self.raw.get("isError").and_then(Value::as_bool).unwrap_or(false)
    }

    /// The content blocks.
    pub fn content(&self) -> &[Value] {
        self.raw.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The content blocks, each read as its type says.
    pub fn blocks(&self) -> impl Iterator<Item = ContentBlock<'_>> {
        self.content().iter().map(ContentBlock::of)
    }

    /// The text of each text block, in order.
    pub fn texts(&self) -> impl Iterator<Item = &str> {
        self.blocks().filter_map(|block| match block {
            ContentBlock::Text(text) => text,
            _ => None,
        })
    }

    /// The `structuredContent`, if any.
    pub fn structured_content(&self) -> Option<&Value> {
        self.raw.get("structuredContent")
    }

    /// The text blocks joined by newlines, with a one-line note for each
    /// block that is not text (what a terminal can show).
    pub fn to_text(&self) -> String {
        // Built in place: a big answer is copied once, not once per step.
        let mut text = String::new();
        for (at, block) in self.content().iter().enumerate() {
            if at > 0 {
                text.push('\n');
            }
            text.push_str(&describe_block(block));
        }
        if self.content().is_empty() {
            if let Some(structured) = self.structured_content() {
                text = structured.to_string();
            }
        }
        text
    }
}

/// A block's text, or a one-line note saying what it is.
fn describe_block(block: &Value) -> std::borrow::Cow<'_, str> {
    use std::borrow::Cow;
    let note = match ContentBlock::of(block) {
        ContentBlock::Text(Some(text)) | ContentBlock::Resource { text: Some(text), .. } => {
            return Cow::Borrowed(text)
        }
        ContentBlock::Image { mime_type, data } => {
            format!("[image: {mime_type}, {} bytes]", decoded_size(data))
        }
        ContentBlock::Audio { mime_type, data } => {
            format!("[audio: {mime_type}, {} bytes]", decoded_size(data))
        }
        ContentBlock::ResourceLink { uri, .. } => format!("[resource link: {uri}]"),
        ContentBlock::Resource { uri, mime_type, .. } => {
            format!("[resource: {uri}, {}]", mime_type.unwrap_or("binary"))
        }
        ContentBlock::Text(None) => "[text block without text]".to_owned(),
        ContentBlock::Untyped => "[block without a type]".to_owned(),
        ContentBlock::Other(kind) => format!("[{kind} block]"),
    };
    Cow::Owned(note)
}

/// One content block of a tool result (or a prompt message), read as its
/// `type` says: what a terminal's text and the model's shaping both start
/// from, and what a host reads a result by ([`ToolResult::blocks`]).
/// Missing strings read as empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ContentBlock<'a> {
    /// `text`; `None` when the block has no text.
    Text(Option<&'a str>),
    /// `image`, with base64 data.
    Image {
        /// Its media type (`image/png`).
        mime_type: &'a str,
        /// Base64.
        data: &'a str,
    },
    /// `audio`, with base64 data.
    Audio {
        /// Its media type (`audio/wav`).
        mime_type: &'a str,
        /// Base64.
        data: &'a str,
    },
    /// `resource_link`: a pointer to a resource of the server.
    ResourceLink {
        /// The resource's URI (read it with `read_resource`).
        uri: &'a str,
        /// Its title, else its name.
        name: Option<&'a str>,
        /// What it is.
        description: Option<&'a str>,
    },
    /// `resource`: an embedded resource, with text or a base64 blob.
    Resource {
        /// The resource's URI.
        uri: &'a str,
        /// Its media type, if said.
        mime_type: Option<&'a str>,
        /// Its text, for a text resource.
        text: Option<&'a str>,
        /// Its bytes in base64, for a binary one.
        blob: Option<&'a str>,
    },
    /// A block with no `type`.
    Untyped,
    /// A type tether does not know (its `type`).
    Other(&'a str),
}

impl<'a> ContentBlock<'a> {
    /// Reads a content block.
    pub fn of(block: &'a Value) -> ContentBlock<'a> {
        let field = |name: &str| block.get(name).and_then(Value::as_str);
        let Some(kind) = field("type") else { return ContentBlock::Untyped };
        match kind {
            "text" => ContentBlock::Text(field("text")),
            "image" => ContentBlock::Image {
                mime_type: field("mimeType").unwrap_or(""),
                data: field("data").unwrap_or(""),
            },
            "audio" => ContentBlock::Audio {
                mime_type: field("mimeType").unwrap_or(""),
                data: field("data").unwrap_or(""),
            },
            "resource_link" => ContentBlock::ResourceLink {
                uri: field("uri").unwrap_or(""),
                name: field("title").or(field("name")),
                description: field("description"),
            },
            "resource" => {
                let resource = block.get("resource").unwrap_or(&Value::Null);
                let field = |name: &str| resource.get(name).and_then(Value::as_str);
                ContentBlock::Resource {
                    uri: field("uri").unwrap_or(""),
                    mime_type: field("mimeType"),
                    text: field("text"),
                    blob: field("blob"),
                }
            }
            other => ContentBlock::Other(other),
        }
    }
}

/// The decoded size of base64 data: four characters are three bytes, less
/// one for each `=` of padding. (Computed per group of four so that no length
/// can overflow.)
pub(crate) fn decoded_size(data: &str) -> usize {
    let padding = data.bytes().rev().take(2).take_while(|&byte| byte == b'=').count();
    (data.len() / 4 * 3 + data.len() % 4 * 3 / 4).saturating_sub(padding)
}

/// A resource a server offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Resource {
    /// Its URI.
    pub uri: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// A display title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Its size in bytes, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// `audience`, `priority`, `lastModified`, as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    /// Its icons, as sent (`{"src", "mimeType", "sizes"}`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub icons: Vec<Value>,
    /// Its `_meta`, as sent.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
}

impl Resource {
    /// True for MCP Apps user interfaces (`ui://`, `text/html;profile=mcp-app`),
    /// which tether does not render and leaves out of listings.
    pub(crate) fn is_app_ui(&self) -> bool {
        self.uri.starts_with("ui://")
            || self
                .mime_type
                .as_deref()
                .is_some_and(|mime| mime.replace(' ', "").contains("profile=mcp-app"))
    }
}

/// A resource template (an RFC 6570 URI template).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ResourceTemplate {
    /// The URI template.
    pub uri_template: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// A display title, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it gives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The MIME type of what it gives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// `audience`, `priority`, `lastModified`, as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    /// Its icons, as sent (`{"src", "mimeType", "sizes"}`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub icons: Vec<Value>,
    /// Its `_meta`, as sent.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
}

/// One item of a `resources/read` result: text or a base64 blob.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ResourceContents {
    /// The URI of this item.
    pub uri: String,
    /// Its MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// The text, for a text resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The base64 bytes, for a binary resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
    /// `audience`, `priority`, `lastModified`, as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    /// Its `_meta`, as sent.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
}

/// A prompt a server offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Prompt {
    /// Its name.
    pub name: String,
    /// A display title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub arguments: Vec<PromptArgument>,
    /// Its icons, as sent (`{"src", "mimeType", "sizes"}`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub icons: Vec<Value>,
    /// Its `_meta`, as sent.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
}

/// One argument of a prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PromptArgument {
    /// Its name.
    pub name: String,
    /// A display title, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it means.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether it must be given.
    #[serde(default)]
    pub required: bool,
}

/// A `prompts/get` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PromptResult {
    /// A description of the filled-in prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The messages (`role` and `content`), as sent.
    pub messages: Vec<Value>,
    /// Its `_meta`, as sent.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
}

/// What `completion/complete` completes an argument of: a prompt (by its
/// name) or a resource template (by its URI template).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CompletionRef {
    /// `ref/prompt`: one of the prompt's arguments.
    Prompt(String),
    /// `ref/resource`: one of the template's variables.
    ResourceTemplate(String),
}

impl CompletionRef {
    pub(crate) fn to_json(&self) -> Value {
        match self {
            CompletionRef::Prompt(name) => serde_json::json!({"type": "ref/prompt", "name": name}),
            CompletionRef::ResourceTemplate(uri) => {
                serde_json::json!({"type": "ref/resource", "uri": uri})
            }
        }
    }
}

/// A `completion/complete` result: the values the argument may take that
/// begin as the value typed so far (at most 100, the server's order).
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct Completion {
    /// The values offered.
    pub values: Vec<String>,
    /// How many there are in all, when the server says.
    pub total: Option<u64>,
    /// More values exist than those offered.
    pub has_more: bool,
}

impl Completion {
    /// Read from a result's `completion`; `None` without `values`.
    pub(crate) fn from_json(completion: &Value) -> Option<Completion> {
        let values = completion.get("values")?.as_array()?;
        Some(Completion {
            values: values.iter().filter_map(Value::as_str).take(100).map(str::to_owned).collect(),
            total: completion.get("total").and_then(Value::as_u64),
            has_more: completion.get("hasMore").and_then(Value::as_bool).unwrap_or(false),
        })
    }

    /// As MCP writes it: `values`, `total` when known, `hasMore`.
    pub fn to_json(&self) -> Value {
        let mut out = serde_json::json!({"values": self.values, "hasMore": self.has_more});
        if let Some(total) = self.total {
            out["total"] = serde_json::json!(total);
        }
        out
    }
}

/// How severe a log message is, least to most: the syslog levels of RFC
/// 5424, as MCP names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    /// Detailed debugging information.
    Debug,
    /// General informational messages.
    Info,
    /// Normal but significant events.
    Notice,
    /// Warning conditions.
    Warning,
    /// Error conditions.
    Error,
    /// Critical conditions.
    Critical,
    /// Action must be taken immediately.
    Alert,
    /// The system is unusable.
    Emergency,
}

impl LogLevel {
    const NAMES: [(LogLevel, &'static str); 8] = [
        (LogLevel::Debug, "debug"),
        (LogLevel::Info, "info"),
        (LogLevel::Notice, "notice"),
        (LogLevel::Warning, "warning"),
        (LogLevel::Error, "error"),
        (LogLevel::Critical, "critical"),
        (LogLevel::Alert, "alert"),
        (LogLevel::Emergency, "emergency"),
    ];

    /// The level MCP names `name` (`debug` … `emergency`), if any.
    pub fn from_name(name: &str) -> Option<LogLevel> {
        Self::NAMES.iter().find(|(_, known)| *known == name).map(|(level, _)| *level)
    }

    /// Its name in MCP.
    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize].1
    }
}

/// A server's `notifications/message`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct LogMessage {
    /// `debug`, `info`, `notice`, `warning`, `error`, `critical`, `alert`, `emergency`.
    pub level: String,
    /// The server's logger name, if any.
    pub logger: Option<String>,
    /// The message: a string, or any JSON.
    pub data: Value,
}

impl LogMessage {
    pub(crate) fn from_params(params: &Value) -> LogMessage {
        LogMessage {
            level: params.get("level").and_then(Value::as_str).unwrap_or("info").to_owned(),
            logger: params.get("logger").and_then(Value::as_str).map(str::to_owned),
            data: params.get("data").cloned().unwrap_or(Value::Null),
        }
    }

    /// Its level, when it is one MCP names.
    pub fn severity(&self) -> Option<LogLevel> {
        LogLevel::from_name(&self.level)
    }

    /// The message as one line of text.
    pub fn text(&self) -> String {
        let text = match &self.data {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        text.replace(['\n', '\r'], " ")
    }
}

/// A `notifications/progress` update for a request.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Progress {
    /// How far along (grows with each update).
    pub progress: f64,
    /// The total, when known.
    pub total: Option<f64>,
    /// A human-readable message, if any.
    pub message: Option<String>,
}

impl Progress {
    pub(crate) fn from_params(params: &Value) -> Progress {
        Progress {
            progress: params.get("progress").and_then(Value::as_f64).unwrap_or(0.0),
            total: params.get("total").and_then(Value::as_f64),
            message: params.get("message").and_then(Value::as_str).map(str::to_owned),
        }
    }
}

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
