//! Resources, resource templates, prompts and completions as a server
//! offers them, and what reading, getting and completing them gives.

use serde::{Deserialize, Serialize};
use serde_json::Value;

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
