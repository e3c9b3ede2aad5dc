//! One downstream request answered from the hub: the handshake
//! (`initialize`, or 2026-07-28's `server/discover`), the lists, a call,
//! a read, a prompt. Everything the hub says goes back as MCP sends it; an
//! upstream's failure becomes a JSON-RPC error naming the server, never
//! silence.
//!
//! Two ways to name things. Serving many servers, a tool is `SERVER__TOOL`
//! (the hub's short style, cut to 64 characters with a hash as the model's
//! names are) and a prompt `SERVER__PROMPT`; a resource keeps its URI, and
//! is read from the server that listed it. Serving one server (`tether
//! serve NAME`), everything keeps the server's own names, and a request
//! tether does not know is passed to that server as it is.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::about::AboutMemory;
use super::link::Link;
use super::rounds;
use super::ServeOptions;
use crate::client::{CallOptions, CancelHandle, PassedResult, ProgressCallback};
use crate::config::{name_key, Exposure};
use crate::error::Error;
use crate::hub::Hub;
use crate::jsonrpc::{Request, RequestId, RpcError};
use crate::protocol::{
    LATEST_PROTOCOL_VERSION, MODERN_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS,
};
use crate::sync::lock;

/// The one tool tether adds, with `--status-tool`.
pub(super) const STATUS_TOOL: &str = "tether__status";
const INVALID_PARAMS: i64 = -32602;
const METHOD_NOT_FOUND: i64 = -32601;
const INTERNAL: i64 = -32603;
/// How long a list (or a call of a tool not listed yet) waits for servers
/// still starting: most clients list once, right after `initialize`, and
/// many never list again. A server slower than this (a sign-in) is
/// announced as a list change later.
const LIST_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// What answering needs: the hub, the options, and which server each
/// resource came from.
pub(super) struct Answerer<'a> {
    pub(super) hub: &'a Hub,
    pub(super) options: &'a ServeOptions,
    /// URI → server, from the last `resources/list`.
    pub(super) resource_servers: Mutex<HashMap<String, String>>,
    /// What the one server served alone said of itself last.
    pub(super) about: AboutMemory,
}

impl Answerer<'_> {
    /// Answers `request`; `cancel` is the downstream's cancellation of it.
    /// A stateless (2026-07-28) client's results say they are complete, and
    /// those it may cache say for how long and for whom; a handshake
    /// client's tool results pass as the server wrote them.
    pub(super) fn answer(
        &self,
        link: &Arc<Link>,
        request: &Request,
        cancel: &CancelHandle,
    ) -> Result<PassedResult, RpcError> {
        if let Some(params) = &request.params {
            learn_stateless(link, params);
        }
        let stateless = lock(&link.peer).stateless || request.method == "server/discover";
        let answered = self.answer_bare(link, request, cancel, !stateless)?;
        if !stateless {
            return Ok(answered);
        }
        let mut result = answered.into_value();
        if let Some(fields) = result.as_object_mut() {
            fields.entry("resultType").or_insert_with(|| json!("complete"));
            let cacheable = matches!(
                request.method.as_str(),
                "server/discover"
                    | "tools/list"
                    | "resources/list"
                    | "resources/templates/list"
                    | "prompts/list"
                    | "resources/read"
            );
            if cacheable {
                // Nothing is kept: the lists change as servers come and go,
                // and they are this client's.
                fields.entry("ttlMs").or_insert_with(|| json!(0));
                fields.entry("cacheScope").or_insert_with(|| json!("private"));
            }
        }
        Ok(PassedResult::Value(result))
    }

    /// The answer; `passing` lets a tool's result pass as it came.
    fn answer_bare(
        &self,
        link: &Arc<Link>,
        request: &Request,
        cancel: &CancelHandle,
        passing: bool,
    ) -> Result<PassedResult, RpcError> {
        let empty = Value::Object(serde_json::Map::new());
        let params = request.params.as_ref().unwrap_or(&empty);
        match request.method.as_str() {
            "tools/call" => self.call(link, &request.id, params, cancel, passing),
            "resources/read" => self.read(params, cancel, passing),
            "prompts/get" => self.prompt(params, cancel, passing),
            _ => self.answer_value(request, params, link, passing),
        }
    }

    /// Every answer but a call's, a read's and a prompt's.
    fn answer_value(
        &self,
        request: &Request,
        params: &Value,
        link: &Arc<Link>,
        passing: bool,
    ) -> Result<PassedResult, RpcError> {
        let method = request.method.as_str();
        if let Some(server) = self.options.passthrough.as_deref().filter(|_| !answers(method)) {
            // One server: what tether does not know is that server's,
            // passed to a handshake client as the server wrote it.
            let options = CallOptions::default();
            let upstream = |err: Error| upstream_error(self.hub, server, &err);
            let client = self.hub.client(server).map_err(upstream)?;
            let params = without_envelope(request.params.as_ref());
            if passing {
                if let Some(passed) =
                    client.request_passed(method, params.as_deref(), &options).map_err(upstream)?
                {
                    return Ok(passed);
                }
            }
            let answered = client.request(method, params.map(Cow::into_owned), &options);
            return answered.map(PassedResult::Value).map_err(upstream);
        }
        self.answer_own(request, params, link).map(PassedResult::Value)
    }

    /// What tether answers itself.
    fn answer_own(
        &self,
        request: &Request,
        params: &Value,
        link: &Arc<Link>,
    ) -> Result<Value, RpcError> {
        let method = request.method.as_str();
        // tether lists everything in one page: a cursor is none it gave.
        let listing = matches!(
            method,
            "tools/list" | "resources/list" | "resources/templates/list" | "prompts/list"
        );
        if listing && params.get("cursor").is_some_and(|cursor| !cursor.is_null()) {
            return Err(rpc(INVALID_PARAMS, "invalid cursor: tether lists all in one page".into()));
        }
        match method {
            "initialize" => Ok(self.initialize(link, params)),
            "server/discover" => Ok(self.discover()),
            "ping" | "logging/setLevel" => Ok(json!({})),
            "tools/list" => {
                self.hub.wait_started_for(LIST_WAIT);
                // Once the one server served alone connected (announced as
                // a list change, which brings the client here), what it
                // says of itself is kept for the next serving's initialize.
                self.passed_about();
                Ok(json!({"tools": self.tools()}))
            }
            "resources/list" => self.resources(),
            "resources/templates/list" => self.templates(),
            "prompts/list" => self.prompts(),
            // Serving many: routed to the server they name.
            "completion/complete" => self.complete(params),
            "resources/subscribe" | "resources/unsubscribe" => self.subscription(method, params),
            method => Err(rpc(METHOD_NOT_FOUND, format!("tether does not serve {method}"))),
        }
    }

    /// What `initialize` and `server/discover` say of the server: its
    /// capabilities, `serverInfo` and instructions. tether's own; serving
    /// one server alone, what that server says of itself (`passed_about`):
    /// its name, version and instructions, and what it offers beyond the
    /// lists (completions, resource subscriptions), which pass through.
    fn about(&self) -> (Value, Value, Option<String>) {
        let mut capabilities = json!({
            "tools": {"listChanged": true},
            "resources": {"listChanged": true},
            "prompts": {"listChanged": true},
            "logging": {},
        });
        let mut server_info = json!({"name": "tether", "version": env!("CARGO_PKG_VERSION")});
        if self.options.passthrough.is_none() {
            // Routed to the server the request names (`complete`,
            // `subscription`), whose own refusal passes on when it has none.
            capabilities["completions"] = json!({});
            capabilities["resources"]["subscribe"] = json!(true);
        }
        let Some(about) = self.passed_about() else {
            return (capabilities, server_info, None);
        };
        if about["serverInfo"]["name"].as_str().is_some_and(|name| !name.is_empty()) {
            server_info = about["serverInfo"].clone();
        }
        if let Some(completions) = about.get("completions") {
            capabilities["completions"] = completions.clone();
        }
        if about["subscribe"] == json!(true) {
            capabilities["resources"]["subscribe"] = json!(true);
        }
        (capabilities, server_info, about["instructions"].as_str().map(str::to_owned))
    }

    /// What the one server served alone says of itself: as it says it now
    /// once connected (kept for the next serving, `about.rs`), else as it
    /// said it last. `initialize` never waits for a server's start (a
    /// sign-in may take minutes).
    fn passed_about(&self) -> Option<Value> {
        let server = self.options.passthrough.as_deref()?;
        let status = self
            .hub
            .status()
            .into_iter()
            .find(|status| crate::config::Config::same_name(&status.name, server))?;
        let key = format!("{} {}", status.name, status.target.as_deref().unwrap_or_default());
        let client = (status.state == crate::server_state::ServerState::Ready)
            .then(|| self.hub.client(server).ok())
            .flatten();
        let Some(info) = client.as_ref().and_then(|client| client.server_info()) else {
            return self.about.recall(&key);
        };
        let mut about = json!({
            "serverInfo": {"name": info.name, "version": info.version},
            "subscribe": info.capabilities.pointer("/resources/subscribe") == Some(&json!(true)),
        });
        if let Some(completions) = info.capabilities.get("completions") {
            about["completions"] = completions.clone();
        }
        if let Some(instructions) = &info.instructions {
            about["instructions"] = json!(instructions);
        }
        self.about.remember(&key, &about);
        Some(about)
    }

    fn initialize(&self, link: &Link, params: &Value) -> Value {
        let asked = params.get("protocolVersion").and_then(Value::as_str).unwrap_or("");
        let version = if SUPPORTED_PROTOCOL_VERSIONS.contains(&asked) {
            asked
        } else {
            LATEST_PROTOCOL_VERSION
        };
        {
            let mut peer = lock(&link.peer);
            peer.capabilities = params.get("capabilities").cloned().unwrap_or_else(|| json!({}));
            peer.stateless = false;
        }
        let (capabilities, server_info, instructions) = self.about();
        let mut result = json!({
            "protocolVersion": version,
            "capabilities": capabilities,
            "serverInfo": server_info,
        });
        if let Some(instructions) = instructions {
            result["instructions"] = json!(instructions);
        }
        result
    }

    fn discover(&self) -> Value {
        let (capabilities, server_info, instructions) = self.about();
        let mut result = json!({
            "supportedVersions": [MODERN_PROTOCOL_VERSION],
            "capabilities": capabilities,
            "serverInfo": server_info,
        });
        if let Some(instructions) = instructions {
            result["instructions"] = json!(instructions);
        }
        result
    }

    /// The tools as the downstream sees them: hidden ones left out, those a
    /// script reaches as the one `codemode` tool.
    fn tools(&self) -> Vec<Value> {
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

    fn call(
        &self,
        link: &Arc<Link>,
        id: &RequestId,
        params: &Value,
        cancel: &CancelHandle,
        passing: bool,
    ) -> Result<PassedResult, RpcError> {
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
        let mut options = CallOptions::default().with_cancel(cancel.clone());
        options.pass_on = true;
        // The downstream's progress token is kept: its updates are its own
        // (a round's go to the request its client waits on now).
        if let Some(round) = rounds::current() {
            options.progress = Some(round.progress());
        } else if let Some(token) = params.pointer("/_meta/progressToken").cloned() {
            options.progress = Some(progress_to(link, id, token));
        }
        let unknown = || rpc(INVALID_PARAMS, format!("unknown tool {name:?}"));
        let (server, outcome) = if self.is_codemode(name) {
            // The one `codemode` tool runs a script over the hub.
            let outcome = self.hub.call(name, arguments, &options);
            ("tether".to_owned(), outcome.map(|result| PassedResult::Value(result.raw)))
        } else {
            let (server, tool) = self.tool_to_call(name)?;
            rounds::note_server(&server);
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
        let status = statuses.iter().find(|status| match self.options.passthrough.as_deref() {
            Some(server) => crate::config::Config::same_name(&status.name, server),
            None => name_key(name)
                .strip_prefix(&name_key(&status.name))
                .is_some_and(|rest| rest.starts_with("__")),
        })?;
        use crate::server_state::ServerState;
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
        let registry = self.hub.registry();
        let entry = match self.options.passthrough.as_deref() {
            Some(server) => registry.tools().iter().find(|entry| {
                entry.tool.name == name && crate::config::Config::same_name(&entry.server, server)
            }),
            None => registry.get(name),
        };
        entry
            .filter(|entry| matches!(entry.exposure, Exposure::Direct | Exposure::Deferred))
            .map(|entry| (entry.server.clone(), entry.tool.name.clone()))
    }

    /// [`Answerer::server_tool`] of a call that a server answers, which can
    /// be passed on as it is (not tether's own status tool, nor codemode).
    pub(super) fn passed_tool(&self, name: &str) -> Option<(String, String)> {
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

    fn resources(&self) -> Result<Value, RpcError> {
        self.hub.wait_started_for(LIST_WAIT);
        let (offered, errors) = self.hub.resources();
        log_errors(&errors);
        let mut servers = HashMap::new();
        let mut listed = Vec::with_capacity(offered.len());
        for resource in offered {
            if self.keeps(&resource.server) {
                servers.insert(resource.item.uri.clone(), resource.server.clone());
                listed.push(serde_json::to_value(&resource.item).unwrap_or_default());
            }
        }
        *lock(&self.resource_servers) = servers;
        Ok(json!({"resources": listed}))
    }

    fn templates(&self) -> Result<Value, RpcError> {
        let (offered, errors) = self.hub.resource_templates();
        log_errors(&errors);
        let listed: Vec<Value> = offered
            .into_iter()
            .filter(|template| self.keeps(&template.server))
            .map(|template| serde_json::to_value(&template.item).unwrap_or_default())
            .collect();
        Ok(json!({"resourceTemplates": listed}))
    }

    /// True for a server this serving includes.
    fn keeps(&self, server: &str) -> bool {
        self.options
            .passthrough
            .as_deref()
            .is_none_or(|only| crate::config::Config::same_name(server, only))
    }

    /// A resource read, from the server the URI belongs to; for a
    /// handshake client (`passing`) the server's result as it wrote it.
    fn read(
        &self,
        params: &Value,
        cancel: &CancelHandle,
        passing: bool,
    ) -> Result<PassedResult, RpcError> {
        let Some(uri) = params.get("uri").and_then(Value::as_str) else {
            return Err(rpc(INVALID_PARAMS, "resources/read needs a \"uri\"".into()));
        };
        let server = match self.options.passthrough.clone() {
            Some(server) => server,
            None => self.server_of_resource(uri)?,
        };
        rounds::note_server(&server);
        let options = CallOptions::default().with_cancel(cancel.clone());
        let upstream = |err: Error| upstream_error(self.hub, &server, &err);
        if passing {
            let asked = json!({"uri": uri});
            if let Some(passed) = self
                .hub
                .pass_request(&server, "resources/read", &asked, &options)
                .map_err(upstream)?
            {
                return Ok(passed);
            }
        }
        let contents = self.hub.read_resource(&server, uri, &options).map_err(upstream)?;
        Ok(PassedResult::Value(json!({"contents": contents})))
    }

    /// The server a URI belongs to: the one that listed it, else the one
    /// whose template it fits, else the only one that offers resources.
    fn server_of_resource(&self, uri: &str) -> Result<String, RpcError> {
        if lock(&self.resource_servers).is_empty() {
            let _ = self.resources();
        }
        if let Some(server) = lock(&self.resource_servers).get(uri) {
            return Ok(server.clone());
        }
        let (templates, _) = self.hub.resource_templates();
        let fitting = templates.iter().find(|template| {
            let fixed = template.item.uri_template.split('{').next().unwrap_or("");
            !fixed.is_empty() && uri.starts_with(fixed)
        });
        if let Some(template) = fitting {
            return Ok(template.server.clone());
        }
        let mut offering: Vec<String> = lock(&self.resource_servers).values().cloned().collect();
        offering.extend(templates.iter().map(|template| template.server.clone()));
        offering.sort();
        offering.dedup();
        match offering.as_slice() {
            [only] => Ok(only.clone()),
            _ => Err(rpc(-32002, format!("no server tether serves lists the resource {uri}"))),
        }
    }

    fn prompts(&self) -> Result<Value, RpcError> {
        self.hub.wait_started_for(LIST_WAIT);
        let (offered, errors) = self.hub.prompts();
        log_errors(&errors);
        let listed: Vec<Value> = offered
            .into_iter()
            .filter(|prompt| self.keeps(&prompt.server))
            .map(|prompt| {
                let mut value = serde_json::to_value(&prompt.item).unwrap_or_default();
                if self.options.passthrough.is_none() {
                    value["name"] = json!(format!("{}__{}", prompt.server, prompt.item.name));
                }
                value
            })
            .collect();
        Ok(json!({"prompts": listed}))
    }

    /// A completion, asked of the server its reference names: a prompt's
    /// (`SERVER__PROMPT`, sent on with the server's own name for it), or a
    /// resource template's (the server that lists it).
    fn complete(&self, params: &Value) -> Result<Value, RpcError> {
        let reference = params.get("ref").unwrap_or(&Value::Null);
        let mut asked = without_envelope(Some(params)).map(Cow::into_owned).unwrap_or_default();
        let server = match reference.get("type").and_then(Value::as_str) {
            Some("ref/prompt") => {
                let name = reference.get("name").and_then(Value::as_str).unwrap_or_default();
                let (server, prompt) = self.split_prompt(name)?;
                asked["ref"]["name"] = json!(prompt);
                server
            }
            Some("ref/resource") => {
                let uri = reference.get("uri").and_then(Value::as_str).unwrap_or_default();
                self.server_of_resource(uri)?
            }
            _ => {
                let why = "completion/complete needs a \"ref\" to a prompt or a resource";
                return Err(rpc(INVALID_PARAMS, why.into()));
            }
        };
        self.ask_server(&server, "completion/complete", asked)
    }

    /// A subscription to a resource (or its end), asked of the server the
    /// URI belongs to; its updates reach every client (`host.rs`).
    fn subscription(&self, method: &str, params: &Value) -> Result<Value, RpcError> {
        let Some(uri) = params.get("uri").and_then(Value::as_str) else {
            return Err(rpc(INVALID_PARAMS, format!("{method} needs a \"uri\"")));
        };
        let server = self.server_of_resource(uri)?;
        self.ask_server(&server, method, json!({"uri": uri}))
    }

    /// `method` asked of `server` as it is; its failure is named.
    fn ask_server(&self, server: &str, method: &str, params: Value) -> Result<Value, RpcError> {
        let upstream = |err: Error| upstream_error(self.hub, server, &err);
        let client = self.hub.client(server).map_err(upstream)?;
        client.request(method, Some(params), &CallOptions::default()).map_err(upstream)
    }

    /// A prompt, from the server its name says; for a handshake client
    /// (`passing`) the server's result as it wrote it.
    fn prompt(
        &self,
        params: &Value,
        cancel: &CancelHandle,
        passing: bool,
    ) -> Result<PassedResult, RpcError> {
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return Err(rpc(INVALID_PARAMS, "prompts/get needs a \"name\"".into()));
        };
        let arguments = params.get("arguments").cloned().unwrap_or_else(|| json!({}));
        let (server, prompt) = match self.options.passthrough.clone() {
            Some(server) => (server, name.to_owned()),
            None => self.split_prompt(name)?,
        };
        rounds::note_server(&server);
        let options = CallOptions::default().with_cancel(cancel.clone());
        let upstream = |err: Error| upstream_error(self.hub, &server, &err);
        if passing {
            let asked = json!({"name": prompt, "arguments": arguments});
            if let Some(passed) =
                self.hub.pass_request(&server, "prompts/get", &asked, &options).map_err(upstream)?
            {
                return Ok(passed);
            }
        }
        let result =
            self.hub.get_prompt(&server, &prompt, arguments, &options).map_err(upstream)?;
        Ok(PassedResult::Value(serde_json::to_value(result).unwrap_or_default()))
    }

    /// `SERVER__PROMPT` as the server and its prompt: the longest server
    /// name that fits (a server's name may hold `__` too).
    fn split_prompt(&self, name: &str) -> Result<(String, String), RpcError> {
        let servers: Vec<String> =
            self.hub.status().into_iter().map(|status| status.name).collect();
        servers
            .iter()
            .filter_map(|server| {
                let rest = name.strip_prefix(server.as_str())?.strip_prefix("__")?;
                Some((server.clone(), rest.to_owned()))
            })
            .max_by_key(|(server, _)| server.len())
            .or_else(|| {
                // `-` and `_` are the same in server names.
                servers.iter().find_map(|server| {
                    let key = name_key(server);
                    let rest = name_key(name).strip_prefix(&key)?.strip_prefix("__")?.to_owned();
                    Some((server.clone(), name[name.len() - rest.len()..].to_owned()))
                })
            })
            .ok_or_else(|| rpc(INVALID_PARAMS, format!("unknown prompt {name:?}")))
    }
}

/// True for the methods tether answers itself, whichever servers it serves
/// (the arms of `Answerer::answer_own`), each at once.
pub(super) fn answers(method: &str) -> bool {
    matches!(
        method,
        "initialize"
            | "server/discover"
            | "ping"
            | "logging/setLevel"
            | "tools/list"
            | "resources/list"
            | "resources/templates/list"
            | "prompts/list"
    )
}

/// `params` without the 2026-07-28 envelope a stateless client sends in
/// `_meta` (its revision, capabilities, log level): passed on, a request is
/// the upstream connection's to wrap as its era asks, and a handshake-era
/// server refuses one that carries it. Borrowed when there is none.
fn without_envelope(params: Option<&Value>) -> Option<Cow<'_, Value>> {
    let params = params?;
    let meta = params.get("_meta").and_then(Value::as_object);
    let enveloped =
        meta.is_some_and(|meta| meta.keys().any(|key| key.starts_with("io.modelcontextprotocol/")));
    if !enveloped {
        return Some(Cow::Borrowed(params));
    }
    let mut params = params.clone();
    if let Some(fields) = params.as_object_mut() {
        if let Some(Value::Object(meta)) = fields.get_mut("_meta") {
            meta.retain(|key, _| !key.starts_with("io.modelcontextprotocol/"));
            if meta.is_empty() {
                fields.remove("_meta");
            }
        }
    }
    Some(Cow::Owned(params))
}

/// A stateless (2026-07-28) request carries who the client is in its
/// `_meta`: remembered, so that no server request goes its way.
pub(super) fn learn_stateless(link: &Link, params: &Value) {
    let Some(meta) = params.get("_meta") else { return };
    if meta.get("io.modelcontextprotocol/protocolVersion").is_none() {
        return;
    }
    let mut peer = lock(&link.peer);
    peer.stateless = true;
    peer.ready = true;
    if let Some(capabilities) = meta.get("io.modelcontextprotocol/clientCapabilities") {
        peer.capabilities = capabilities.clone();
    }
}

/// Progress updates of call `id`, sent to its client under the client's
/// token (dropped when its stream is full: the call is never held up).
fn progress_to(link: &Arc<Link>, id: &RequestId, token: Value) -> ProgressCallback {
    let (link, id) = (Arc::clone(link), id.clone());
    Arc::new(move |progress: &crate::protocol::Progress| link.progress(&id, &token, progress))
}

fn rpc(code: i64, message: String) -> RpcError {
    RpcError { code, message, data: None }
}

/// An upstream's failure as the downstream hears it: the server's own
/// JSON-RPC error as it sent it, anything else an internal error naming
/// the server.
/// The error a client in front gets for `server`'s: the server's own
/// JSON-RPC error as it sent it; otherwise tether's words, with
/// `data.serverFailed` when the server itself failed (it could not be
/// reached, crashed, timed out) and the end of its stderr (`data.stderr`,
/// its last lines), so that a client can tell that from a refusal.
fn upstream_error(hub: &Hub, server: &str, err: &Error) -> RpcError {
    upstream_error_with(server, err, || {
        hub.status()
            .into_iter()
            .find(|status| crate::config::Config::same_name(&status.name, server))
            .and_then(|status| status.stderr_tail)
    })
}

/// [`upstream_error`], the end of the server's stderr asked of
/// `stderr_tail` (only when the server itself failed).
pub(super) fn upstream_error_with(
    server: &str,
    err: &Error,
    stderr_tail: impl FnOnce() -> Option<String>,
) -> RpcError {
    match err.root() {
        Error::Rpc(error) => error.clone(),
        // Read into pages to open on the way in; sent on as the server's.
        Error::UrlElicitationRequired { message, elicitations } => {
            let elicitations: Vec<Value> = elicitations
                .iter()
                .map(|page| {
                    json!({"mode": "url", "elicitationId": page.elicitation_id,
                           "url": page.url, "message": page.message})
                })
                .collect();
            RpcError {
                code: -32042,
                message: message.clone(),
                data: Some(json!({"elicitations": elicitations})),
            }
        }
        _ if err.is_server_failure() => {
            let tail = stderr_tail();
            let lines: Vec<&str> =
                tail.as_deref().map(|tail| tail.lines().collect()).unwrap_or_default();
            let last = &lines[lines.len().saturating_sub(10)..];
            // The hub's words name the server already; a remote server
            // has no stderr to show.
            let data = match last {
                [] => json!({"serverFailed": true}),
                _ => json!({"serverFailed": true, "stderr": last}),
            };
            RpcError { code: INTERNAL, message: err.chain(), data: Some(data) }
        }
        _ => rpc(INTERNAL, format!("{server}: {}", err.chain())),
    }
}

fn log_errors(errors: &[Error]) {
    for err in errors {
        log::warn!("{err}");
    }
}
