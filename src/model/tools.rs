//! The tools a model is offered: the servers' tools by exposure, and the
//! hub's own (`codemode` for scripts, `tool_search` for the deferred ones,
//! three over resources).
//!
//! Exposure decides: `direct` tools are declared, `deferred` ones only once
//! `tool_search` found them, `codemode` ones are reached from scripts the
//! `codemode` tool runs (and found by `tool_search` where it is offered),
//! `hidden` ones never. Everything here works on a snapshot the hub hands
//! over (the registry, what was found, what servers offer), so that what
//! the model sees is decided in one place and holds no lock.

use std::collections::HashSet;

use serde::Serialize;
use serde_json::{json, Value};

use super::registry::{RegisteredTool, ToolRegistry};
use super::search::{SearchDoc, SearchIndex};
use crate::config::Exposure;
use crate::error::Error;
use crate::protocol::ToolResult;

/// The tool that finds deferred tools.
pub const TOOL_SEARCH: &str = "tool_search";
/// The tool that runs a script calling codemode tools.
pub const CODEMODE: &str = "codemode";
/// What the `codemode` tool tells the model: the API in a few lines, and
/// one example.
const CODEMODE_DESCRIPTION: &str = "\
Runs a JavaScript script that calls MCP tools, and returns what the script returns (a string as \
is, anything else as JSON) with its console.log output. The script is the body of an async \
function: use await and return. Only the returned value reaches you, so filter, join and count \
in the script instead of returning whole results.
In scope, and nothing else (no require, fetch, timers, files or network):
- tools.mcp__<server>__<tool>(args) -> Promise<{content, structuredContent?, isError?}>; \
a tool error resolves with isError: true, a failed call rejects
- searchTools(query, {namespace?, limit?}) -> [{name, description, signature}]
- describeNamespace(\"mcp__<server>\") -> {name, description, instructions, tools}
- ALL_TOOLS -> [{name, server, description, annotations}]
- listResources({server?}), readResource(server, uri) -> Promise
- image(block) shows an image content block; console.log(...)
Example:
const r = await tools.mcp__wordcount__word_count({ text: \"the quick brown fox\" });
return r.content[0].text;";
pub(crate) const LIST_RESOURCES: &str = "list_mcp_resources";
pub(crate) const LIST_TEMPLATES: &str = "list_mcp_resource_templates";
pub(crate) const READ_RESOURCE: &str = "read_mcp_resource";
/// How many matches `tool_search` returns unless asked for another number.
const DEFAULT_MATCHES: usize = 5;

/// A tool as a model should be told about it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ModelTool {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, and which server it comes from.
    pub description: String,
    /// The JSON Schema of its arguments.
    pub input_schema: Value,
    /// The server, or `None` for the hub's own tools.
    pub server: Option<String>,
    /// The server's hints (`readOnlyHint`, …), for the host's policy only.
    pub annotations: Option<Value>,
}

/// The tools to declare this turn: direct tools, deferred tools
/// `tool_search` has found, `codemode` while any tool has codemode
/// exposure, `tool_search` itself while any tool is deferred, and the
/// resource tools while any server offers resources.
///
/// `codemode_starting`: a server still starting may have codemode tools;
/// `codemode` is declared already, since a script waits for the servers
/// it names.
pub(crate) fn declared(
    registry: &ToolRegistry,
    discovered: &HashSet<String>,
    offers_resources: bool,
    codemode_starting: bool,
) -> Vec<ModelTool> {
    let mut tools = Vec::new();
    let mut any_deferred = false;
    let mut any_codemode = codemode_starting;
    for entry in registry.tools() {
        let declare = match entry.exposure {
            Exposure::Direct => true,
            Exposure::Deferred => {
                any_deferred = true;
                discovered.contains(&entry.qualified_name)
            }
            Exposure::Codemode => {
                any_codemode = true;
                discovered.contains(&entry.qualified_name)
            }
            Exposure::Hidden => false,
        };
        if declare {
            tools.push(ModelTool {
                name: entry.qualified_name.clone(),
                description: describe(entry.tool.description.as_deref(), &entry.server),
                input_schema: entry.tool.input_schema.clone(),
                server: Some(entry.server.clone()),
                annotations: entry.tool.annotations.clone(),
            });
        }
    }
    // Without the engine a codemode tool is deferred (`reached_as`).
    if any_codemode && cfg!(feature = "codemode") {
        tools.push(builtin(
            CODEMODE,
            CODEMODE_DESCRIPTION,
            json!({"type": "object", "properties": {
                "code": {"type": "string", "description": "The script: the body of an async function (await the calls, return the result)."}
            }, "required": ["code"]}),
        ));
    }
    if any_deferred {
        tools.push(builtin(
                TOOL_SEARCH,
                "Finds more tools by what they do. Returns the best matches with their names, \
                 descriptions and argument schemas; found tools can then be called. \
                 Use \"select:name1,name2\" to get tools by name.",
                json!({"type": "object", "properties": {
                    "query": {"type": "string", "description": "What the tool should do, in a few words."},
                    "limit": {"type": "integer", "description": "How many tools at most (default 5).", "minimum": 1, "maximum": 20}
                }, "required": ["query"]}),
            ));
    }
    if offers_resources {
        tools.push(builtin(
            LIST_RESOURCES,
            "Lists the resources (files, documents, records) that connected MCP servers offer.",
            json!({"type": "object", "properties": {
                "server": {"type": "string", "description": "Only this server's resources."}
            }}),
        ));
        tools.push(builtin(
            LIST_TEMPLATES,
            "Lists the resource templates (parameterised URIs) that connected MCP servers offer.",
            json!({"type": "object", "properties": {
                "server": {"type": "string", "description": "Only this server's templates."}
            }}),
        ));
        tools.push(builtin(
            READ_RESOURCE,
            "Reads one resource of an MCP server by its URI.",
            json!({"type": "object", "properties": {
                    "server": {"type": "string", "description": "The server that offers it."},
                    "uri": {"type": "string", "description": "The resource's URI."}
                }, "required": ["server", "uri"]}),
        ));
    }
    tools
}

/// Ranks the deferred tools for `query` (at most `limit`, 5 unless asked),
/// with each server's description: the tools found, and the answer that
/// declares them to the model.
pub(crate) fn search<'a>(
    registry: &'a ToolRegistry,
    descriptions: &[(String, String)],
    query: &str,
    limit: Option<&Value>,
) -> (Vec<&'a RegisteredTool>, ToolResult) {
    let limit = limit.and_then(Value::as_u64).map_or(DEFAULT_MATCHES, |n| n.clamp(1, 20) as usize);
    let candidates: Vec<_> = registry
        .tools()
        .iter()
        .filter(|entry| matches!(entry.exposure, Exposure::Deferred | Exposure::Codemode))
        .collect();
    let index = SearchIndex::new(
        candidates
            .iter()
            .map(|entry| {
                let about = descriptions
                    .iter()
                    .find(|(server, _)| server == &entry.server)
                    .map(|(_, description)| description.clone());
                SearchDoc::for_tool(entry, about.unwrap_or_default())
            })
            .collect(),
    );
    let found: Vec<_> =
        index.search(query, limit).into_iter().map(|(index, _)| candidates[index]).collect();
    if found.is_empty() {
        let answer = ToolResult::new(
            json!({"content": [{"type": "text", "text": format!("No tool matches {query:?}.")}],
                            "structuredContent": {"tools": []}}),
        );
        return (found, answer);
    }
    let mut text = format!("{} tool(s) found; you can call them now:\n", found.len());
    let mut listed = Vec::new();
    for entry in &found {
        let description = describe(entry.tool.description.as_deref(), &entry.server);
        text.push_str(&format!(
            "\n- {}: {description}\n  arguments: {}\n",
            entry.qualified_name, entry.tool.input_schema
        ));
        listed.push(json!({
            "name": entry.qualified_name,
            "description": description,
            "inputSchema": entry.tool.input_schema,
        }));
    }
    let answer = ToolResult::new(
        json!({"content": [{"type": "text", "text": text}], "structuredContent": {"tools": listed}}),
    );
    (found, answer)
}

/// A tool's description, saying which server it comes from.
fn describe(description: Option<&str>, server: &str) -> String {
    match description.map(str::trim).filter(|text| !text.is_empty()) {
        Some(text) => format!("{text} (from the MCP server \"{server}\")"),
        None => format!("A tool of the MCP server \"{server}\"."),
    }
}

fn builtin(name: &str, description: &str, input_schema: Value) -> ModelTool {
    ModelTool {
        name: name.to_owned(),
        description: description.to_owned(),
        input_schema,
        server: None,
        annotations: None,
    }
}

pub(crate) fn json_result(value: &Value, errors: &[Error]) -> ToolResult {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    for error in errors {
        text.push_str(&format!("\n(note: {error})"));
    }
    ToolResult::new(
        json!({"content": [{"type": "text", "text": text}], "structuredContent": value}),
    )
}

pub(crate) fn tool_error(message: &str) -> ToolResult {
    ToolResult::new(json!({"content": [{"type": "text", "text": message}], "isError": true}))
}
