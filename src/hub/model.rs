//! What the model is offered: the tools to declare this turn, `tool_search`
//! for the deferred ones, and three tools over servers' resources.
//!
//! Exposure decides: `direct` tools are declared, `deferred` (and `codemode`,
//! until a script engine exists) ones only once `tool_search` found them,
//! `hidden` ones never, and calling a hidden tool fails as if it did not
//! exist. The built-in tools are answered by the hub itself and never reach a
//! server by that name.

use std::collections::HashSet;

use serde::Serialize;
use serde_json::{json, Value};

use super::state::Phase;
use super::Hub;
use crate::config::Exposure;
use crate::error::Error;
use crate::protocol::ToolResult;
use crate::search::{SearchDoc, SearchIndex};

/// The tool that finds deferred tools.
pub const TOOL_SEARCH: &str = "tool_search";
const LIST_RESOURCES: &str = "list_mcp_resources";
const LIST_TEMPLATES: &str = "list_mcp_resource_templates";
const READ_RESOURCE: &str = "read_mcp_resource";
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

impl Hub {
    /// The tools to declare to the model this turn: direct tools, deferred
    /// tools `tool_search` has found, `tool_search` itself while any tool is
    /// deferred, and the resource tools while any server offers resources.
    /// A hub started in the background first waits for the servers that
    /// have direct tools (each at most its start timeout).
    pub fn model_tools(&self) -> Vec<ModelTool> {
        let shared = &self.core.shared;
        if shared.options.background {
            self.wait_for_direct_servers();
        }
        let registry = shared.registry();
        let discovered = shared.state().discovered.clone();
        let mut tools = Vec::new();
        let mut any_deferred = false;
        for entry in registry.tools() {
            let declare = match entry.exposure {
                Exposure::Direct => true,
                Exposure::Deferred | Exposure::Codemode => {
                    any_deferred = true;
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
        if self.any_server_offers("resources") {
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

    /// Answers the hub's own tools; `None` for any other name.
    pub(super) fn call_builtin(
        &self,
        name: &str,
        arguments: &Value,
    ) -> Option<Result<ToolResult, Error>> {
        let text_argument =
            |key: &str| arguments.get(key).and_then(Value::as_str).map(str::to_owned);
        Some(match name {
            TOOL_SEARCH => self
                .tool_search(&text_argument("query").unwrap_or_default(), arguments.get("limit")),
            LIST_RESOURCES => {
                let (resources, errors) = self.resources();
                let server = text_argument("server");
                let listed: Vec<_> = resources
                    .iter()
                    .filter(|r| server.as_ref().is_none_or(|s| &r.server == s))
                    .collect();
                Ok(json_result(&json!({"resources": listed}), &errors))
            }
            LIST_TEMPLATES => {
                let (templates, errors) = self.resource_templates();
                let server = text_argument("server");
                let listed: Vec<_> = templates
                    .iter()
                    .filter(|t| server.as_ref().is_none_or(|s| &t.server == s))
                    .collect();
                Ok(json_result(&json!({"resourceTemplates": listed}), &errors))
            }
            READ_RESOURCE => match (text_argument("server"), text_argument("uri")) {
                (Some(server), Some(uri)) => self.read_resource(&server, &uri).map(|contents| {
                    let content: Vec<Value> = contents
                        .into_iter()
                        .map(|item| json!({"type": "resource", "resource": item}))
                        .collect();
                    ToolResult { raw: json!({"content": content}) }
                }),
                _ => Ok(tool_error("read_mcp_resource needs \"server\" and \"uri\"")),
            },
            _ => return None,
        })
    }

    /// Ranks the deferred tools for a query and declares the matches.
    fn tool_search(&self, query: &str, limit: Option<&Value>) -> Result<ToolResult, Error> {
        let limit =
            limit.and_then(Value::as_u64).map_or(DEFAULT_MATCHES, |n| n.clamp(1, 20) as usize);
        let shared = &self.core.shared;
        let registry = shared.registry();
        let descriptions = self.server_descriptions();
        let candidates: Vec<_> = registry
            .tools()
            .iter()
            .filter(|entry| matches!(entry.exposure, Exposure::Deferred | Exposure::Codemode))
            .collect();
        let index = SearchIndex::new(
            candidates
                .iter()
                .map(|entry| SearchDoc {
                    name: entry.qualified_name.clone(),
                    tool_name: entry.tool.name.clone(),
                    description: entry.tool.description.clone().unwrap_or_default(),
                    server: entry.server.clone(),
                    server_description: descriptions
                        .iter()
                        .find(|(server, _)| server == &entry.server)
                        .map(|(_, description)| description.clone())
                        .unwrap_or_default(),
                })
                .collect(),
        );
        let found: Vec<_> =
            index.search(query, limit).into_iter().map(|(index, _)| candidates[index]).collect();
        {
            let mut state = shared.state();
            let discovered = &mut state.discovered;
            discovered.extend(found.iter().map(|entry| entry.qualified_name.clone()));
        }
        if found.is_empty() {
            return Ok(ToolResult {
                raw: json!({"content": [{"type": "text", "text": format!("No tool matches {query:?}.")}],
                            "structuredContent": {"tools": []}}),
            });
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
        Ok(ToolResult {
            raw: json!({"content": [{"type": "text", "text": text}], "structuredContent": {"tools": listed}}),
        })
    }

    /// Each server's description, or the first line of its instructions.
    fn server_descriptions(&self) -> Vec<(String, String)> {
        let state = self.core.shared.state();
        state
            .slots
            .iter()
            .map(|slot| {
                let description = slot.config.description.clone().or_else(|| match &slot.phase {
                    Phase::Ready(connected) => {
                        connected.info.instructions_first_line().map(str::to_owned)
                    }
                    _ => None,
                });
                (slot.config.name.clone(), description.unwrap_or_default())
            })
            .collect()
    }

    fn any_server_offers(&self, capability: &str) -> bool {
        self.core.shared.state().slots.iter().any(|slot| match &slot.phase {
            Phase::Ready(connected) => connected.info.has_capability(capability),
            _ => false,
        })
    }

    /// Waits for still-connecting servers that have direct tools, each at
    /// most its start timeout.
    fn wait_for_direct_servers(&self) {
        let shared = &self.core.shared;
        let mut state = shared.state();
        let direct: Vec<String> = state
            .slots
            .iter()
            .filter(|slot| {
                slot.config.exposure == Exposure::Direct
                    || slot.config.tool_exposure.iter().any(|(_, e)| *e == Exposure::Direct)
            })
            .map(|slot| slot.config.name.clone())
            .collect();
        for name in direct {
            state = shared.wait_for(state, &name);
        }
    }

    /// The deferred tools `tool_search` has found so far.
    pub fn discovered_tools(&self) -> HashSet<String> {
        self.core.shared.state().discovered.clone()
    }
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

fn json_result(value: &Value, errors: &[Error]) -> ToolResult {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    for error in errors {
        text.push_str(&format!("\n(note: {error})"));
    }
    ToolResult {
        raw: json!({"content": [{"type": "text", "text": text}], "structuredContent": value}),
    }
}

fn tool_error(message: &str) -> ToolResult {
    ToolResult { raw: json!({"content": [{"type": "text", "text": message}], "isError": true}) }
}
