//! A tool as a server lists it, and a call's result: kept as the server
//! sent it, read through accessors (its text, its blocks) when asked.

use serde::{Deserialize, Serialize};
use serde_json::Value;

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
