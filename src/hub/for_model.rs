//! The hub's side of what the model sees: the snapshot `model/tools.rs`
//! decides from (the registry, the tools `tool_search` found, what the
//! servers offer), and the hub's own tools answered from the hub's state.
//! Calling a hidden tool fails as if it did not exist; the built-in tools
//! never reach a server by their names.

use std::collections::HashSet;

use serde_json::{json, Value};

use super::slot::Phase;
use super::Hub;
use crate::client::CallOptions;
use crate::config::Exposure;
use crate::error::Error;
use crate::model::tools::{
    self, json_result, tool_error, ModelTool, CODEMODE, LIST_RESOURCES, LIST_TEMPLATES,
    READ_RESOURCE, TOOL_SEARCH,
};
use crate::protocol::ToolResult;

impl Hub {
    /// The tools to declare to the model this turn: direct tools, deferred
    /// tools `tool_search` has found, `codemode` while any tool has codemode
    /// exposure (or a server that may have some is starting), `tool_search`
    /// itself while any tool is deferred, and the resource tools while any
    /// server offers resources. A hub started in the background first waits
    /// for the servers that have direct tools (each at most its start
    /// timeout); a codemode script waits for the servers it names.
    pub fn model_tools(&self) -> Vec<ModelTool> {
        let shared = &self.core.shared;
        if shared.options.background {
            self.wait_for_direct_servers();
        }
        let registry = shared.registry();
        let (discovered, codemode_starting) = {
            let state = shared.state();
            let codemode_starting = crate::codemode::CODEMODE_AVAILABLE
                && state.slots.iter().any(|slot| {
                    matches!(slot.phase, Phase::Starting { .. })
                        && slot.config.may_expose(Exposure::Codemode)
                });
            (state.discovered.clone(), codemode_starting)
        };
        let offers_resources = self.any_server_offers("resources");
        tools::declared(&registry, &discovered, offers_resources, codemode_starting)
    }

    /// Answers the hub's own tools; `None` for any other name.
    pub(super) fn call_builtin(
        &self,
        name: &str,
        arguments: &Value,
        options: &CallOptions,
    ) -> Option<Result<ToolResult, Error>> {
        let text_argument =
            |key: &str| arguments.get(key).and_then(Value::as_str).map(str::to_owned);
        Some(match name {
            CODEMODE => self.call_codemode(arguments, options),
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
                (Some(server), Some(uri)) => {
                    self.read_resource(&server, &uri, &CallOptions::default()).map(|contents| {
                        let content: Vec<Value> = contents
                            .into_iter()
                            .map(|item| json!({"type": "resource", "resource": item}))
                            .collect();
                        ToolResult::new(json!({"content": content}))
                    })
                }
                _ => Ok(tool_error("read_mcp_resource needs \"server\" and \"uri\"")),
            },
            _ => return None,
        })
    }

    /// Ranks the deferred tools for a query and declares the matches.
    fn tool_search(&self, query: &str, limit: Option<&Value>) -> Result<ToolResult, Error> {
        let shared = &self.core.shared;
        let registry = shared.registry();
        let descriptions = self.server_descriptions();
        let (found, answer) = tools::search(&registry, &descriptions, query, limit);
        let mut state = shared.state();
        state.discovered.extend(found.iter().map(|entry| entry.qualified_name.clone()));
        Ok(answer)
    }

    /// Each server's description, or the first line of its instructions.
    fn server_descriptions(&self) -> Vec<(String, String)> {
        let state = self.core.shared.state();
        state
            .slots
            .iter()
            .map(|slot| (slot.config.name.clone(), slot.about().unwrap_or_default()))
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
