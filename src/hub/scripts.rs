//! Codemode on the hub: scripts run against every server the hub holds,
//! through the hub's own call path, and the servers section of the system
//! prompt that tells the model which servers its scripts can reach.
//!
//! The engine (`codemode/`) sits below the hub and asks for what it needs
//! through `ScriptHost`, implemented here over the hub: the catalog of
//! reachable tools, the waits for starting servers, the calls. A script's
//! call is `Hub::call` (hidden tools do not exist, a dropped server is
//! reconnected, a starting one waited for), a resource read the server's
//! client with the script's deadline.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use super::slot::Phase;
use super::Hub;
use crate::client::CallOptions;
use crate::codemode::{
    self, Catalog, Listed, ParentCall, ScriptHost, ScriptOptions, ScriptRun, ServerSummary,
};
use crate::config::{name_key, Exposure};
use crate::error::Error;
use crate::model::reached_as;
use crate::model::registry::namespace;
use crate::model::servers_prompt::{servers_section, PromptServer, ServersPrompt};
use crate::model::tools::{tool_error, CODEMODE};
use crate::protocol::{ResourceContents, ToolResult};
use crate::server_state::ServerState;

impl Hub {
    /// Runs a codemode script against the hub's servers: its calls go
    /// through [`Hub::call`], each seen first by the hook (the options', else
    /// the hub's). The script waits for the servers it names (all of them
    /// when it searches or lists), each at most its start timeout.
    ///
    /// # Errors
    /// [`Error::Engine`] when this build has no script engine (the
    /// `codemode` feature) or the engine could not start. A script that
    /// fails is a [`ScriptRun`] with its error.
    pub fn run_script(&self, code: &str, options: &ScriptOptions) -> Result<ScriptRun, Error> {
        let (limits, run) = {
            let mut state = self.core.shared.state();
            state.script_runs += 1;
            (state.script_limits, state.script_runs)
        };
        let limits = options.limits.unwrap_or(limits);
        let mut options = options.clone();
        if options.hook.is_none() {
            options.hook.clone_from(&self.core.shared.options.call_hook);
        }
        let parent = ParentCall { tool: CODEMODE.to_owned(), code: Arc::from(code), run };
        codemode::run(self, code, &options, limits, parent)
    }

    /// The `codemode` model tool: runs `{code}` and answers as the model
    /// reads it. The call's timeout caps the script's wall time.
    pub(super) fn call_codemode(
        &self,
        arguments: &Value,
        call: &CallOptions,
    ) -> Result<ToolResult, Error> {
        let Some(code) = arguments.get("code").and_then(Value::as_str) else {
            return Ok(tool_error("codemode needs \"code\": the script to run, as a string"));
        };
        let mut options = ScriptOptions::from_call(call);
        let mut limits = self.core.shared.state().script_limits;
        if let Some(timeout) = call.timeout {
            limits.timeout = limits.timeout.min(timeout);
        }
        options.limits = Some(limits);
        self.run_script(code, &options).map(|run| run.to_tool_result())
    }

    /// The servers section for the host's system prompt: one line per
    /// server with codemode or deferred tools, saying how they are reached
    /// and what the server is for. Its `generation` moves when the text
    /// changed since the last call, so a host can append the new section
    /// instead of rewriting earlier turns.
    pub fn servers_prompt(&self) -> ServersPrompt {
        let shared = &self.core.shared;
        let registry = shared.registry();
        let style = shared.options.name_style;
        let servers: Vec<PromptServer> = {
            let state = shared.state();
            state
                .slots
                .iter()
                .filter(|slot| matches!(slot.phase, Phase::Ready(_) | Phase::Starting { .. }))
                .map(|slot| {
                    let config = &slot.config;
                    // How its tools are reached: as listed once it is
                    // ready, as its entry may have them until then.
                    let reached: Vec<Exposure> = match &slot.phase {
                        Phase::Ready(_) => registry
                            .tools()
                            .iter()
                            .filter(|tool| tool.server == config.name)
                            .map(|tool| tool.exposure)
                            .collect(),
                        _ => [Exposure::Codemode, Exposure::Deferred]
                            .into_iter()
                            .filter(|mode| config.may_expose(*mode))
                            .map(reached_as)
                            .collect(),
                    };
                    PromptServer {
                        // As a script writes it: `mcp__dev_radius`.
                        namespace: name_key(&namespace(&config.name, style)),
                        codemode: reached.contains(&Exposure::Codemode),
                        deferred: reached.contains(&Exposure::Deferred),
                        about: slot.about(),
                    }
                })
                .collect()
        };
        let text = servers_section(&servers);
        let mut state = shared.state();
        if state.servers_prompt.text != text || state.servers_prompt.generation == 0 {
            state.servers_prompt =
                ServersPrompt { text, generation: state.servers_prompt.generation + 1 };
        }
        state.servers_prompt.clone()
    }

    /// The server whose namespace begins `name`, if one is configured.
    fn server_of_name(&self, name: &str) -> Option<String> {
        let style = self.core.shared.options.name_style;
        let key = name_key(name);
        self.core
            .shared
            .state()
            .slots
            .iter()
            .map(|slot| slot.config.name.clone())
            .find(|server| key.starts_with(&name_key(&format!("{}__", namespace(server, style)))))
    }
}

impl ScriptHost for Hub {
    fn catalog(&self) -> Catalog {
        let shared = &self.core.shared;
        let registry = shared.registry();
        let servers = shared
            .state()
            .slots
            .iter()
            .map(|slot| {
                let ready = match &slot.phase {
                    Phase::Ready(connected) => Some(connected),
                    _ => None,
                };
                let (state, error) = match &slot.phase {
                    Phase::Ready(_) => (ServerState::Ready, None),
                    Phase::Starting { .. } => (ServerState::Connecting, None),
                    Phase::Disabled => (ServerState::Disabled, None),
                    Phase::Failed { error, .. } => match error.root() {
                        Error::LoginRequired { .. } => (ServerState::NeedsLogin, None),
                        _ => (ServerState::Failed, Some(error.to_string())),
                    },
                };
                ServerSummary {
                    name: slot.config.name.clone(),
                    description: slot.config.description.clone(),
                    instructions: ready.and_then(|connected| connected.info.instructions.clone()),
                    connected: ready.is_some(),
                    state: state.as_str(),
                    error,
                }
            })
            .collect();
        Catalog::new(registry.tools(), servers, shared.options.name_style)
    }

    fn wait_for(&self, servers: Option<&[String]>, until: Instant) {
        let shared = &self.core.shared;
        let all: Vec<String>;
        let servers = match servers {
            Some(servers) => servers,
            None => {
                all = shared.state().slots.iter().map(|slot| slot.config.name.clone()).collect();
                &all
            }
        };
        let mut state = shared.state();
        for server in servers {
            state = shared.wait_for_until(state, server, Some(until));
        }
    }

    fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        options: &CallOptions,
    ) -> Result<ToolResult, Error> {
        match self.call(name, arguments, options) {
            // A tool of a server that is not connected: why it is not.
            Err(Error::UnknownTool(unknown)) => match self.server_of_name(&unknown) {
                Some(server) => match self.core.shared.connected(&server) {
                    Err(why) => Err(why.for_server(&server)),
                    Ok(_) => Err(Error::UnknownTool(unknown).for_server(&server)),
                },
                None => Err(Error::UnknownTool(unknown)),
            },
            other => other,
        }
    }

    fn read_resource(
        &self,
        server: &str,
        uri: &str,
        options: &CallOptions,
    ) -> Result<Vec<ResourceContents>, Error> {
        let client = self.client(server)?;
        client.read_resource(uri, options).map_err(|err| err.for_server(server))
    }

    fn list_resources(&self, server: Option<&str>, options: &CallOptions) -> Result<Listed, Error> {
        if let Some(server) = server {
            // An unknown or failed server is an error, not an empty list.
            self.client(server)?;
        }
        let (resources, errors) = self.resources_within(options);
        let wanted = |name: &str| server.is_none_or(|server| name_key(server) == name_key(name));
        let listed = resources
            .into_iter()
            .filter(|offered| wanted(&offered.server))
            .map(|offered| (offered.server, offered.item))
            .collect();
        Ok((listed, errors))
    }
}
