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
//!
//! Here: which request goes where, the handshake (with what the one server
//! served alone said of itself, `about.rs`), and what the others share.
//! `tools.rs` lists and calls the tools, `resources.rs` lists, reads, gets,
//! completes and subscribes what resources and prompts are, and
//! `upstream.rs` turns a server's failure into the client's error.

mod resources;
mod tools;
mod upstream;

pub(super) use upstream::upstream_error_with;

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::about::AboutMemory;
use super::link::Link;
use super::ServeOptions;
use crate::client::{CallOptions, CancelHandle, LogCallback, PassedResult};
use crate::config::name_key;
use crate::error::Error;
use crate::hub::Hub;
use crate::jsonrpc::{Request, RequestId, RpcError};
use crate::protocol::{
    LogLevel, LogMessage, Progress, LATEST_PROTOCOL_VERSION, MODERN_PROTOCOL_VERSION,
    SUPPORTED_PROTOCOL_VERSIONS,
};
use crate::serve::rounds;
use crate::sync::lock;
use upstream::upstream_error;

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
        let empty = Value::Object(serde_json::Map::new());
        let params = request.params.as_ref().unwrap_or(&empty);
        if stateless {
            envelope_refusal(&request.method, params)?;
        }
        if stateless && matches!(request.method.as_str(), "ping" | "logging/setLevel") {
            let removed = format!("2026-07-28 has no {}", request.method);
            return Err(rpc(METHOD_NOT_FOUND, removed));
        }
        // A stateless client asks for log messages request by request; a
        // handshake client takes those about its calls at the level it set
        // (its others come session-wide, `LinkHost::notification`).
        let log_level = match stateless {
            true => asked_log_level(params)?,
            false => Some(lock(&link.peer).log_level.unwrap_or(LogLevel::Info)),
        };
        let asked = Asked { link, id: &request.id, params, cancel, log_level };
        let answered = self.answer_bare(request, &asked, !stateless)?;
        if !stateless {
            return Ok(answered);
        }
        let mut result = answered.into_value();
        if let Some(fields) = result.as_object_mut() {
            fields.entry("resultType").or_insert_with(|| json!("complete"));
            // Who answers is tether, not the server whose result it passes
            // on (serving one server alone, that server: its own stands).
            if self.options.passthrough.is_none() {
                let meta = fields.entry("_meta").or_insert_with(|| json!({}));
                if let Some(meta) = meta.as_object_mut() {
                    let tether = json!({"name": "tether", "version": env!("CARGO_PKG_VERSION")});
                    meta.insert("io.modelcontextprotocol/serverInfo".into(), tether);
                }
            }
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
        request: &Request,
        asked: &Asked<'_>,
        passing: bool,
    ) -> Result<PassedResult, RpcError> {
        match request.method.as_str() {
            "tools/call" => self.call(asked, passing),
            "resources/read" => self.read(asked, passing),
            "prompts/get" => self.prompt(asked, passing),
            _ => self.answer_value(request, asked, passing),
        }
    }

    /// Every answer but a call's, a read's and a prompt's.
    fn answer_value(
        &self,
        request: &Request,
        asked: &Asked<'_>,
        passing: bool,
    ) -> Result<PassedResult, RpcError> {
        let (params, link) = (asked.params, asked.link);
        let method = request.method.as_str();
        if let Some(server) = self.options.passthrough.as_deref().filter(|_| !answers(method)) {
            // One server: what tether does not know is that server's,
            // passed to a handshake client as the server wrote it.
            let options = asked.options(server);
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
            "ping" => Ok(json!({})),
            // The client's own level; the servers behind log at theirs.
            "logging/setLevel" => {
                let level = params.get("level").and_then(Value::as_str);
                let Some(level) = level.and_then(LogLevel::from_name) else {
                    return Err(rpc(
                        INVALID_PARAMS,
                        format!("invalid log level {}", params["level"]),
                    ));
                };
                lock(&link.peer).log_level = Some(level);
                Ok(json!({}))
            }
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

/// One request of a client's, as passing it upstream needs it: whose it
/// is, its parameters, its cancellation, and the level of the log messages
/// about it that the client takes (a stateless client's asked, a handshake
/// client's set), if any.
pub(super) struct Asked<'r> {
    pub(super) link: &'r Arc<Link>,
    pub(super) id: &'r RequestId,
    pub(super) params: &'r Value,
    pub(super) cancel: &'r CancelHandle,
    pub(super) log_level: Option<LogLevel>,
}

impl Asked<'_> {
    /// How the request is passed to `server`: cancelled when the client
    /// cancels it, its progress sent back under the client's token, and
    /// the log messages about it at the level the client asked (both to
    /// the request the client waits on now, in a round). Updates go before
    /// the answer, on the request's own stream; one that finds no room at
    /// once is dropped (the call is never held up).
    pub(super) fn options(&self, server: &str) -> CallOptions {
        let mut options = CallOptions::default().with_cancel(self.cancel.clone());
        let round = rounds::current();
        if let Some(round) = &round {
            options.progress = Some(round.progress());
        } else if let Some(token) = self.params.pointer("/_meta/progressToken").cloned() {
            let (link, id) = (Arc::clone(self.link), self.id.clone());
            options.progress = Some(Arc::new(move |progress: &Progress| {
                link.progress(&id, &token, progress);
            }));
        }
        if let Some(level) = self.log_level {
            let log: LogCallback = match &round {
                Some(round) => round.log(server),
                None => {
                    let (link, id, server) =
                        (Arc::clone(self.link), self.id.clone(), server.to_owned());
                    Arc::new(move |message: &LogMessage| link.log(&id, &server, message))
                }
            };
            options.log = Some((level, log));
        } else {
            // A stateless server behind is not asked for what nobody takes.
            options.quiet_logs = true;
        }
        options
    }
}

/// Why a request's 2026-07-28 `_meta` is not one tether serves: a revision
/// it does not speak (-32022, naming the one it does), or the client's
/// capabilities missing (-32602). A request that names no revision is
/// taken as the client's others were (a bare `server/discover`, say).
fn envelope_refusal(method: &str, params: &Value) -> Result<(), RpcError> {
    let meta = params.get("_meta");
    let version = meta.and_then(|meta| meta.get("io.modelcontextprotocol/protocolVersion"));
    match version {
        None => return Ok(()),
        Some(Value::String(version)) if version == MODERN_PROTOCOL_VERSION => {}
        Some(version) => {
            return Err(RpcError {
                code: -32022,
                message: format!("unsupported protocol version {version}"),
                data: Some(json!({"supported": [MODERN_PROTOCOL_VERSION], "requested": version})),
            })
        }
    }
    let capabilities = meta.and_then(|meta| meta.get("io.modelcontextprotocol/clientCapabilities"));
    if method != "server/discover" && !capabilities.is_some_and(Value::is_object) {
        let missing = "params._meta lacks io.modelcontextprotocol/clientCapabilities".to_owned();
        return Err(rpc(INVALID_PARAMS, missing));
    }
    Ok(())
}

/// The log level a stateless client asked for in `_meta`, if any; one MCP
/// does not name is refused.
fn asked_log_level(params: &Value) -> Result<Option<LogLevel>, RpcError> {
    match LogLevel::asked_by(params) {
        None => Ok(None),
        Some(Ok(level)) => Ok(Some(level)),
        Some(Err(asked)) => Err(rpc(
            INVALID_PARAMS,
            format!(
                "invalid log level {asked}: one of debug, info, notice, warning, error, \
                 critical, alert, emergency"
            ),
        )),
    }
}

/// A `SERVER__NAME` (a prompt's, a tool's) as the server of `servers` it
/// begins with and the server's own name: the longest that fits (a
/// server's name may hold `__` too), `-` and `_` the same in server names.
fn split_qualified(name: &str, servers: &[String]) -> Option<(String, String)> {
    let exact = servers
        .iter()
        .filter_map(|server| {
            let rest = name.strip_prefix(server.as_str())?.strip_prefix("__")?;
            Some((server.clone(), rest.to_owned()))
        })
        .max_by_key(|(server, _)| server.len());
    exact.or_else(|| {
        servers.iter().find_map(|server| {
            let rest = name_key(name).strip_prefix(&name_key(server))?.strip_prefix("__")?.len();
            Some((server.clone(), name[name.len() - rest..].to_owned()))
        })
    })
}

fn rpc(code: i64, message: String) -> RpcError {
    RpcError { code, message, data: None }
}
