//! The tools as the client in front sees them, and a call of one: found
//! by the name the client knows it by (`SERVER__TOOL`, or serving one
//! server its own), waited for while its server starts, answered with its
//! server's failure when that server cannot be served; tether's own
//! `tether__status` and the one `codemode` tool beside them.

use serde_json::{json, Value};

use super::upstream::{upstream_error, upstream_error_with};
use super::{rpc, split_qualified, Answerer, Asked, INVALID_PARAMS, LIST_WAIT, STATUS_TOOL};
use crate::client::PassedResult;
use crate::config::Exposure;
use crate::error::Error;
use crate::jsonrpc::RpcError;
use crate::model::RegisteredTool;
use crate::serve::rounds;
use crate::server_state::ServerState;

impl Answerer<'_> {
    /// The tools as the downstream sees them: hidden ones left out, those a
    /// script reaches as the one `codemode` tool.
    pub(super) fn tools(&self) -> Vec<Value> {
        let registry = self.hub.registry();
        let mut tools: Vec<Value> = Vec::with_capacity(registry.tools().len() + 2);
        let mut codemode = false;
        for entry in registry.tools() {
            if let Some(server) = self.options.passthrough.as_deref() {
                if !crate::config::Config::same_name(&entry.server, server) {
                    continue;
                }
            }
            match entry.exposure {
                Exposure::Hidden => continue,
                Exposure::Codemode => {
                    codemode = true;
                    continue;
                }
                Exposure::Direct | Exposure::Deferred => {}
            }
            let mut tool = serde_json::to_value(&entry.tool).unwrap_or_else(|_| json!({}));
            if self.options.passthrough.is_none() {
                tool["name"] = json!(entry.qualified_name);
            }
            // tether runs an upstream's task itself and answers the call
            // whole, so the client in front calls every tool plainly.
            if let Some(execution) = tool.get_mut("execution").and_then(Value::as_object_mut) {
                execution.remove("taskSupport");
            }
            tools.push(tool);
        }
        if codemode && crate::codemode::CODEMODE_AVAILABLE {
            let declared = self.hub.model_tools();
            if let Some(script) = declared.iter().find(|tool| tool.name == crate::model::CODEMODE) {
                tools.push(json!({
                    "name": script.name,
                    "description": script.description,
                    "inputSchema": script.input_schema,
                }));
            }
        }
        if self.options.status_tool {
            tools.push(json!({
                "name": STATUS_TOOL,
                "description": "The state of each server tether serves: connected, starting, failed (and why), needs login.",
                "inputSchema": {"type": "object", "properties": {}},
            }));
        }
        tools
    }

    pub(super) fn call(&self, asked: &Asked<'_>, passing: bool) -> Result<PassedResult, RpcError> {
        let params = asked.params;
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return Err(rpc(INVALID_PARAMS, "tools/call needs a \"name\"".into()));
        };
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => json!({}),
            Some(arguments @ Value::Object(_)) => arguments.clone(),
            Some(_) => {
                return Err(rpc(INVALID_PARAMS, "tools/call's \"arguments\" is an object".into()))
            }
        };
        if self.options.status_tool && name == STATUS_TOOL {
            return Ok(PassedResult::Value(self.status()));
        }
        let unknown = || rpc(INVALID_PARAMS, format!("unknown tool {name:?}"));
        let (server, outcome) = if self.is_codemode(name) {
            // The one `codemode` tool runs a script over the hub.
            let options = asked.options("tether");
            let outcome = self.hub.call(name, arguments, &options);
            ("tether".to_owned(), outcome.map(|result| PassedResult::Value(result.raw)))
        } else {
            let (server, tool) = self.tool_to_call(name)?;
            rounds::note_server(&server);
            let mut options = asked.options(&server);
            options.pass_on = true;
            let outcome = if passing {
                self.hub.pass_server_tool(&server, &tool, arguments, &options)
            } else {
                let outcome = self.hub.call_server_tool(&server, &tool, arguments, &options);
                outcome.map(|result| PassedResult::Value(result.raw))
            };
            (server, outcome)
        };
        match outcome {
            Ok(answered) => Ok(answered),
            Err(err) if matches!(err.root(), Error::UnknownTool(_)) => Err(unknown()),
            Err(err) => Err(upstream_error(self.hub, &server, &err)),
        }
    }

    /// The server and its own name of the tool the client calls `name`.
    /// One not listed yet waits for the servers still starting, as a list
    /// does (a client may call from a list it kept, or statelessly); then,
    /// when it is still not there, why: its server's failure, or an unknown
    /// tool.
    fn tool_to_call(&self, name: &str) -> Result<(String, String), RpcError> {
        if let Some(found) = self.server_tool(name) {
            return Ok(found);
        }
        let started = self.hub.wait_started_for(LIST_WAIT);
        if let Some(found) = self.server_tool(name) {
            return Ok(found);
        }
        if let Some(failure) = self.failure_behind(name) {
            return Err(failure);
        }
        let starting = if started { "" } else { ": some servers are still starting" };
        Err(rpc(INVALID_PARAMS, format!("unknown tool {name:?}{starting}")))
    }

    /// Why the server whose tool `name` would be cannot be served (it
    /// failed to start, a sign-in failed or is needed), as its failure: the
    /// one server served alone, or the one whose name begins `name` as
    /// `SERVER__TOOL`. `None` when no such server failed.
    fn failure_behind(&self, name: &str) -> Option<RpcError> {
        let statuses = self.hub.status();
        let server = match self.options.passthrough.as_deref() {
            Some(server) => server.to_owned(),
            None => {
                let names: Vec<String> = statuses.iter().map(|s| s.name.clone()).collect();
                split_qualified(name, &names)?.0
            }
        };
        let status = statuses
            .iter()
            .find(|status| crate::config::Config::same_name(&status.name, &server))?;
        if !matches!(status.state, ServerState::Failed | ServerState::NeedsLogin) {
            return None;
        }
        let error = status.error.as_deref()?;
        let mut failure = upstream_error_with(&status.name, error, || status.stderr_tail.clone());
        // Named as a call's failure is (the status's error names nobody),
        // and a failure of the server's, whatever went wrong.
        failure.message = match error {
            Error::Server { .. } => error.chain(),
            _ => format!("server {:?}: {}", status.name, error.chain()),
        };
        failure.data.get_or_insert_with(|| json!({"serverFailed": true}));
        Some(failure)
    }

    /// True when `name` is the one `codemode` tool, which runs a script
    /// over the hub.
    fn is_codemode(&self, name: &str) -> bool {
        self.options.passthrough.is_none()
            && crate::codemode::CODEMODE_AVAILABLE
            && name == crate::model::CODEMODE
    }

    /// The server and its own name of the tool the client calls `name`:
    /// only what tools/list offers, never a hidden tool (nor an ignored
    /// one), nor a script's tool called directly. Looked up in the shared
    /// registry: a call copies two names, not every tool.
    fn server_tool(&self, name: &str) -> Option<(String, String)> {
        self.served_tool(name, |entry| (entry.server.clone(), entry.tool.name.clone()))
    }

    /// What `read` finds in the tool the client calls `name`, if tools/list
    /// offers it (`server_tool`).
    fn served_tool<T>(&self, name: &str, read: impl FnOnce(&RegisteredTool) -> T) -> Option<T> {
        let registry = self.hub.registry();
        let entry = match self.options.passthrough.as_deref() {
            Some(server) => registry.tools().iter().find(|entry| {
                entry.tool.name == name && crate::config::Config::same_name(&entry.server, server)
            }),
            None => registry.get(name),
        };
        entry
            .filter(|entry| matches!(entry.exposure, Exposure::Direct | Exposure::Deferred))
            .map(read)
    }

    /// What `read` finds in the input schema of the tool the client calls
    /// `name`, as served (read in place: a call need not copy it).
    pub(in crate::serve) fn with_input_schema<T>(
        &self,
        name: &str,
        read: impl FnOnce(&Value) -> T,
    ) -> Option<T> {
        self.served_tool(name, |entry| read(&entry.tool.input_schema))
    }

    /// [`Answerer::server_tool`] of a call that a server answers, which can
    /// be passed on as it is (not tether's own status tool, nor codemode).
    pub(in crate::serve) fn passed_tool(&self, name: &str) -> Option<(String, String)> {
        let own = (self.options.status_tool && name == STATUS_TOOL) || self.is_codemode(name);
        if own {
            return None;
        }
        self.server_tool(name)
    }

    fn status(&self) -> Value {
        let lines: Vec<String> = self
            .hub
            .status()
            .iter()
            .map(|status| {
                let mut line = format!("{}: {}", status.name, status.state.as_str());
                if let Some(error) = &status.error {
                    line.push_str(&format!(" ({})", error.chain()));
                }
                line
            })
            .collect();
        json!({"content": [{"type": "text", "text": lines.join("\n")}]})
    }
}
