//! The hub: every configured server, connected in parallel, behind one registry.
//!
//! Each enabled server is started on its own `{server}-start` thread; a
//! server's start is bounded by its `startTimeout` (every request of the
//! handshake gets only what is left of it), so `Hub::start` returns on time
//! even when a server hangs. A server that fails is recorded with its error
//! and stderr tail and skipped. The start threads hold only the shared state,
//! never the hub itself, so dropping the last `Hub` handle shuts everything
//! down. Locks guard plain data and are never held while talking to a server.

mod events;
mod model;
mod refresh;

pub use events::{LogFile, LogMessage, LogSink};
pub use model::{ModelTool, TOOL_SEARCH};
pub use refresh::RefreshReport;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;
use serde_json::Value;

use crate::client::{CallOptions, Client, ClientOptions, Transport};
use crate::clock;
use crate::config::{
    Config, ConfigLoader, Exposure, FailedEntry, RemoteConfig, Scope, ServerConfig,
    TransportConfig, UntrustedServer,
};
use crate::environment;
use crate::error::Error;
use crate::host::{DefaultHost, Host};
use crate::protocol::{
    Prompt, PromptResult, Resource, ResourceContents, ResourceTemplate, ServerInfo, Tool,
    ToolResult,
};
use crate::registry::{NameStyle, RegisteredTool, ToolRegistry};
use crate::sync::{lock, wait_timeout};
use crate::transport::http::HttpTarget;

/// How the hub starts and names things.
#[derive(Clone)]
pub struct HubOptions {
    /// Return from `Hub::start` at once; servers connect in the background.
    pub background: bool,
    /// `mcp__server__tool` or `server__tool`.
    pub name_style: NameStyle,
    /// Answers server→client requests.
    pub host: Arc<dyn Host>,
    /// Where servers' log messages go (the CLI's is `mcp.log`).
    pub log_sink: Option<Arc<dyn LogSink>>,
    /// How `refresh` reads the configuration again; without it, `refresh`
    /// only restarts servers that stopped.
    pub reload: Option<ConfigLoader>,
}

impl Default for HubOptions {
    fn default() -> Self {
        HubOptions {
            background: false,
            name_style: NameStyle::default(),
            host: Arc::new(DefaultHost),
            log_sink: None,
            reload: None,
        }
    }
}

/// A server's state, as `status` and `tether list` show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerState {
    /// Starting.
    Connecting,
    /// Connected; its tools are in the registry.
    Ready,
    /// Could not start, or its entry is invalid; see `error`.
    Failed,
    /// `enabled: false`.
    Disabled,
    /// A project server in a project that is not trusted.
    Untrusted,
    /// An HTTP server that needs `tether login`.
    NeedsLogin,
}

impl ServerState {
    /// The word `tether list` prints.
    pub fn label(self) -> &'static str {
        match self {
            ServerState::Connecting => "connecting",
            ServerState::Ready => "connected",
            ServerState::Failed => "failed",
            ServerState::Disabled => "disabled",
            ServerState::Untrusted => "untrusted",
            ServerState::NeedsLogin => "needs login",
        }
    }
}

/// Something a server offers (a resource, a template, a prompt), with the
/// server's name.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Offered<T> {
    /// The configured name of the server.
    pub server: String,
    /// What it offers.
    #[serde(flatten)]
    pub item: T,
}

/// One server's status.
#[derive(Debug, Clone, Serialize)]
pub struct ServerStatus {
    /// The configured name.
    pub name: String,
    /// Where the entry came from.
    pub scope: Scope,
    /// `stdio`, `http` or `sse`.
    pub transport: &'static str,
    /// The state.
    pub state: ServerState,
    /// The negotiated protocol revision, once connected.
    pub protocol_version: Option<String>,
    /// The server's own name.
    pub server_name: Option<String>,
    /// The server's version.
    pub server_version: Option<String>,
    /// The first line of the server's instructions.
    pub instructions: Option<String>,
    /// The server's tool names (its own names).
    pub tools: Vec<String>,
    /// Whether the server offers resources.
    pub resources: bool,
    /// Whether the server offers prompts.
    pub prompts: bool,
    /// Why it failed.
    pub error: Option<String>,
    /// What to do about it.
    pub hint: Option<String>,
    /// Warnings about its entry.
    pub warnings: Vec<String>,
    /// The end of a failed stdio server's stderr.
    pub stderr_tail: Option<String>,
    /// When the state was reached (RFC 3339).
    pub since: String,
}

impl ServerStatus {
    /// The status of an entry that never had a process: invalid or untrusted.
    fn never_started(
        name: &str,
        scope: Scope,
        state: ServerState,
        error: Option<String>,
        hint: Option<String>,
    ) -> ServerStatus {
        ServerStatus {
            name: name.to_owned(),
            scope,
            transport: "-",
            state,
            protocol_version: None,
            server_name: None,
            server_version: None,
            instructions: None,
            tools: Vec::new(),
            resources: false,
            prompts: false,
            error,
            hint,
            warnings: Vec::new(),
            stderr_tail: None,
            since: clock::rfc3339(SystemTime::now()),
        }
    }
}

/// Every configured server behind one tool registry. Cheap to clone; the
/// last clone dropped shuts everything down.
#[derive(Clone)]
pub struct Hub {
    core: Arc<HubCore>,
}

struct HubCore {
    shared: Arc<Shared>,
    /// Held for the whole shutdown, so a second caller returns only once
    /// every server is gone.
    shut_down: Mutex<bool>,
}

struct Shared {
    /// Replaced whole by `refresh`; never held during I/O.
    slots: Mutex<Vec<Arc<Slot>>>,
    /// The `{server}-start` threads, joined at shutdown.
    starters: Mutex<Vec<JoinHandle<()>>>,
    failed_entries: Mutex<Vec<FailedEntry>>,
    untrusted: Mutex<Vec<UntrustedServer>>,
    /// One reconnect at a time.
    reconnecting: Mutex<()>,
    registry: Mutex<Arc<ToolRegistry>>,
    options: HubOptions,
    shutting_down: AtomicBool,
    pending_starts: Mutex<usize>,
    all_started: Condvar,
    /// Deferred tools that `tool_search` found: declared from then on.
    discovered: Mutex<HashSet<String>>,
    /// Re-listing on `list_changed`, and the log sink.
    events: events::Events,
}

struct Slot {
    config: ServerConfig,
    state: Mutex<SlotState>,
    /// This server (in this slot or the one it replaced) was ready once: a
    /// later failure is a server that stopped, which refresh restarts.
    ever_ready: AtomicBool,
}

struct SlotState {
    state: ServerState,
    client: Option<Arc<Client>>,
    tools: Arc<Vec<Tool>>,
    info: Option<ServerInfo>,
    error: Option<String>,
    hint: Option<String>,
    warnings: Vec<String>,
    stderr_tail: Option<String>,
    since: SystemTime,
}

impl Hub {
    /// Connects every enabled server of `config` in parallel and returns when
    /// each is connected or has failed (at most its start timeout), or at once
    /// with `options.background`.
    pub fn start(config: Config, options: HubOptions) -> Hub {
        let slots: Vec<Arc<Slot>> =
            config.servers.into_iter().map(|server| Arc::new(Slot::new(server))).collect();
        let shared = Arc::new(Shared {
            slots: Mutex::new(slots.clone()),
            starters: Mutex::new(Vec::new()),
            failed_entries: Mutex::new(config.failed),
            untrusted: Mutex::new(config.untrusted),
            reconnecting: Mutex::new(()),
            registry: Mutex::new(Arc::new(ToolRegistry::default())),
            options,
            shutting_down: AtomicBool::new(false),
            pending_starts: Mutex::new(0),
            all_started: Condvar::new(),
            discovered: Mutex::new(HashSet::new()),
            events: events::Events::new(),
        });
        shared.events.start(&shared);
        for slot in slots.into_iter().filter(|slot| slot.config.enabled) {
            shared.spawn_start(slot);
        }
        let hub = Hub { core: Arc::new(HubCore { shared, shut_down: Mutex::new(false) }) };
        if !hub.core.shared.options.background {
            hub.wait_started();
        }
        hub
    }

    /// Waits until every server has connected or failed. Returns at once for
    /// a hub started in the foreground.
    pub fn wait_started(&self) {
        let shared = &self.core.shared;
        let longest =
            shared.slots().iter().map(|slot| slot.config.start_timeout).max().unwrap_or_default();
        // Each start is bounded by its own timeout; the slack covers spawning.
        let deadline = Instant::now() + longest + Duration::from_secs(5);
        let mut pending = lock(&shared.pending_starts);
        while *pending > 0 {
            let now = Instant::now();
            if now >= deadline {
                log::warn!("{} server(s) still starting past their start timeout", *pending);
                return;
            }
            pending = wait_timeout(&shared.all_started, pending, deadline - now);
        }
    }

    /// The registry as it is now: every tool of every connected server.
    pub fn tools(&self) -> Vec<RegisteredTool> {
        self.core.shared.registry().tools().to_vec()
    }

    /// Calls a tool by its qualified name. Safe from many threads at once;
    /// calls to different servers never wait on each other.
    ///
    /// # Errors
    /// [`Error::UnknownTool`], or the call's error wrapped with the server's name.
    pub fn call(
        &self,
        qualified_name: &str,
        arguments: Value,
        options: &CallOptions,
    ) -> Result<ToolResult, Error> {
        let (server, tool_name) = {
            let registry = self.core.shared.registry();
            match registry.get(qualified_name) {
                Some(entry) if entry.exposure != Exposure::Hidden => {
                    (entry.server.clone(), entry.tool.name.clone())
                }
                Some(_) => return Err(Error::UnknownTool(qualified_name.to_owned())),
                None => {
                    return self
                        .call_builtin(qualified_name, &arguments)
                        .unwrap_or_else(|| Err(Error::UnknownTool(qualified_name.to_owned())));
                }
            }
        };
        let client = self.core.shared.connected_client(&server)?;
        client.call_tool(&tool_name, arguments, options).map_err(|err| err.for_server(&server))
    }

    /// Calls a server's tool by the server's own name for it (or its
    /// qualified name), as `tether call` does.
    ///
    /// # Errors
    /// [`Error::UnknownServer`], [`Error::NotConnected`], [`Error::UnknownTool`]
    /// when the server did not list the tool, or the call's error; all but the
    /// first wrapped with the server's name.
    pub fn call_server_tool(
        &self,
        server: &str,
        tool: &str,
        arguments: Value,
        options: &CallOptions,
    ) -> Result<ToolResult, Error> {
        let shared = &self.core.shared;
        let slot = shared.slot(server).ok_or_else(|| Error::UnknownServer(server.to_owned()))?;
        let name = &slot.config.name;
        let client = shared.connected_client(name)?;
        let tools = Arc::clone(&lock(&slot.state).tools);
        let tool_name = if tools.iter().any(|listed| listed.name == tool) {
            tool.to_owned()
        } else {
            let registry = shared.registry();
            match registry.get(tool).filter(|entry| &entry.server == name) {
                Some(entry) => entry.tool.name.clone(),
                None => return Err(Error::UnknownTool(tool.to_owned()).for_server(name)),
            }
        };
        client.call_tool(&tool_name, arguments, options).map_err(|err| err.for_server(name))
    }

    /// The connection to one server, when it is connected (for requests the
    /// hub does not wrap).
    ///
    /// # Errors
    /// [`Error::UnknownServer`] or [`Error::NotConnected`].
    pub fn client(&self, server: &str) -> Result<Arc<Client>, Error> {
        self.core.shared.client(server)
    }

    /// Every resource of every connected server that offers resources, and
    /// the errors of the servers that could not list theirs. MCP Apps
    /// interfaces (`ui://`) are left out.
    pub fn resources(&self) -> (Vec<Offered<Resource>>, Vec<Error>) {
        let (mut items, errors) =
            self.gather("resources", |client, options| client.list_resources(options));
        items.retain(|offered| !offered.item.is_app_ui());
        (items, errors)
    }

    /// Every resource template of every connected server that offers resources.
    pub fn resource_templates(&self) -> (Vec<Offered<ResourceTemplate>>, Vec<Error>) {
        self.gather("resources", |client, options| client.list_resource_templates(options))
    }

    /// Every prompt of every connected server that offers prompts.
    pub fn prompts(&self) -> (Vec<Offered<Prompt>>, Vec<Error>) {
        self.gather("prompts", |client, options| client.list_prompts(options))
    }

    /// Reads a resource of one server.
    ///
    /// # Errors
    /// The server is unknown or not connected, or the read failed.
    pub fn read_resource(&self, server: &str, uri: &str) -> Result<Vec<ResourceContents>, Error> {
        let client = self.core.shared.connected_client(server)?;
        client.read_resource(uri, &CallOptions::default()).map_err(|err| err.for_server(server))
    }

    /// Gets a prompt of one server.
    ///
    /// # Errors
    /// The server is unknown or not connected, or the request failed.
    pub fn get_prompt(
        &self,
        server: &str,
        name: &str,
        arguments: Value,
    ) -> Result<PromptResult, Error> {
        let client = self.core.shared.connected_client(server)?;
        client
            .get_prompt(name, arguments, &CallOptions::default())
            .map_err(|err| err.for_server(server))
    }

    /// Runs a list request on every connected server with `capability`.
    /// Every server is asked at once (one scoped thread each), so a slow
    /// server delays the listing by its own time only, not by the sum.
    fn gather<T: Send>(
        &self,
        capability: &str,
        list: impl Fn(&Client, &CallOptions) -> Result<Vec<T>, Error> + Sync,
    ) -> (Vec<Offered<T>>, Vec<Error>) {
        let offering: Vec<(String, Arc<Client>)> = self
            .core
            .shared
            .slots()
            .iter()
            .filter_map(|slot| {
                let state = lock(&slot.state);
                let offers =
                    state.info.as_ref().is_some_and(|info| info.has_capability(capability));
                match (&state.client, state.state) {
                    (Some(client), ServerState::Ready) if offers => {
                        Some((slot.config.name.clone(), Arc::clone(client)))
                    }
                    _ => None,
                }
            })
            .collect();
        let answers: Vec<(String, Result<Vec<T>, Error>)> = thread::scope(|scope| {
            let list = &list;
            let asks: Vec<_> = offering
                .iter()
                .map(|(name, client)| {
                    let asked = thread::Builder::new()
                        .name(format!("{name}-list"))
                        .spawn_scoped(scope, move || list(client, &CallOptions::default()));
                    (name, client, asked)
                })
                .collect();
            asks.into_iter()
                .map(|(name, client, asked)| {
                    let answer = match asked {
                        Ok(handle) => handle
                            .join()
                            .unwrap_or_else(|_| Err(Error::Protocol("listing panicked".into()))),
                        // No thread to be had: ask on this one.
                        Err(_) => list(client, &CallOptions::default()),
                    };
                    (name.clone(), answer)
                })
                .collect()
        });
        let mut items = Vec::new();
        let mut errors = Vec::new();
        for (name, answer) in answers {
            match answer {
                Ok(found) => items
                    .extend(found.into_iter().map(|item| Offered { server: name.clone(), item })),
                Err(err) => errors.push(err.for_server(&name)),
            }
        }
        (items, errors)
    }

    /// One entry per configured server, in configuration order, then the
    /// entries that could not be used.
    pub fn status(&self) -> Vec<ServerStatus> {
        let shared = &self.core.shared;
        let mut statuses: Vec<ServerStatus> =
            shared.slots().iter().map(|slot| slot.status()).collect();
        statuses.extend(lock(&shared.failed_entries).iter().map(|entry| {
            let hint =
                entry.source.as_ref().map(|file| format!("fix the entry in {}", file.display()));
            ServerStatus::never_started(
                &entry.name,
                entry.scope,
                ServerState::Failed,
                Some(entry.error.clone()),
                hint,
            )
        }));
        statuses.extend(lock(&shared.untrusted).iter().map(|entry| {
            let project = entry.source.parent().map_or_else(|| ".".into(), |dir| dir.display().to_string());
            let hint = format!(
                "the project is not trusted; it would run: {}; trust it with: tether trust {project}",
                entry.command_line
            );
            ServerStatus::never_started(&entry.name, Scope::Project, ServerState::Untrusted, None, Some(hint))
        }));
        statuses
    }

    /// Tells every connected server that the host's roots changed
    /// (`notifications/roots/list_changed`); they ask again with `roots/list`.
    pub fn notify_roots_changed(&self) {
        for slot in self.core.shared.slots() {
            let client = lock(&slot.state).client.clone();
            if let Some(client) = client {
                if let Err(err) = client.notify_roots_changed() {
                    log::debug!("{}: could not tell it the roots changed: {err}", slot.config.name);
                }
            }
        }
    }

    /// Closes every connection (in parallel) and joins every thread; no server
    /// process is left. Idempotent; also run when the last handle is dropped.
    pub fn shutdown(&self) {
        self.core.shutdown();
    }
}

impl HubCore {
    fn shutdown(&self) {
        let mut shut_down = lock(&self.shut_down);
        if *shut_down {
            return;
        }
        *shut_down = true;
        let shared = &self.shared;
        // Set before looking at the slots: a start thread that registers its
        // client after this point sees the flag and closes it itself.
        {
            // Under the starters' lock, so that no start begins after this.
            let _starters = lock(&shared.starters);
            shared.shutting_down.store(true, Ordering::SeqCst);
        }
        // A reconnect or refresh in progress finishes first (and then sees the flag).
        let _no_reconnects = lock(&shared.reconnecting);
        shared.events.stop();
        let clients: Vec<Arc<Client>> =
            shared.slots().iter().filter_map(|slot| lock(&slot.state).client.take()).collect();
        thread::scope(|scope| {
            for client in &clients {
                let closer = thread::Builder::new()
                    .name(format!("{}-close", client.server_name()))
                    .spawn_scoped(scope, move || client.close());
                if closer.is_err() {
                    let _ = client.close();
                }
            }
        });
        let starters = std::mem::take(&mut *lock(&shared.starters));
        for starter in starters {
            let _ = starter.join();
        }
        shared.events.join();
    }
}

impl Drop for HubCore {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl Shared {
    fn registry(&self) -> Arc<ToolRegistry> {
        Arc::clone(&lock(&self.registry))
    }

    fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }

    fn slots(&self) -> Vec<Arc<Slot>> {
        lock(&self.slots).clone()
    }

    fn slot(&self, name: &str) -> Option<Arc<Slot>> {
        let key = crate::config::name_key(name);
        self.slots().into_iter().find(|slot| crate::config::name_key(&slot.config.name) == key)
    }

    /// Starts a server on its own `{server}-start` thread.
    fn spawn_start(self: &Arc<Self>, slot: Arc<Slot>) {
        // Checked under the starters' lock: shutdown takes the same lock to
        // join them, so no start slips in after it.
        let mut starters = lock(&self.starters);
        if self.is_shutting_down() {
            return;
        }
        *lock(&self.pending_starts) += 1;
        let shared = Arc::clone(self);
        let thread_slot = Arc::clone(&slot);
        let started = thread::Builder::new()
            .name(format!("{}-start", slot.config.name))
            .spawn(move || shared.start_server(&thread_slot));
        match started {
            Ok(handle) => starters.push(handle),
            Err(err) => {
                drop(starters);
                self.settle_failed(&slot, Error::Io(err), None);
            }
        }
    }

    fn client(&self, server: &str) -> Result<Arc<Client>, Error> {
        let slot = self.slot(server).ok_or_else(|| Error::UnknownServer(server.to_owned()))?;
        let state = lock(&slot.state);
        match (&state.client, state.state) {
            (Some(client), ServerState::Ready) => Ok(Arc::clone(client)),
            _ => Err(Error::NotConnected { state: state.state.label().to_owned() }
                .for_server(&slot.config.name)),
        }
    }

    /// The body of a `{server}-start` thread.
    fn start_server(&self, slot: &Slot) {
        let config = &slot.config;
        let deadline = Instant::now() + config.start_timeout;
        let transport = match &config.transport {
            TransportConfig::Stdio(stdio) => Transport::Stdio(environment::stdio_command(
                &config.name,
                stdio,
                &environment::host_environment(),
            )),
            TransportConfig::Remote(remote) => match http_target(remote, config.start_timeout) {
                Ok(target) => Transport::Http(target),
                Err(err) => return self.settle_failed(slot, err, None),
            },
        };
        let client_options = ClientOptions {
            request_timeout: config.timeout,
            max_total_timeout: config.max_total_timeout,
            host: Arc::new(events::HubHost {
                user: Arc::clone(&self.options.host),
                relist: self.events.relist_sender(),
                log_sink: self.options.log_sink.clone(),
            }),
        };
        let client = match Client::start(&config.name, &transport, client_options) {
            Ok(client) => Arc::new(client),
            Err(err) => return self.settle_failed(slot, err, None),
        };
        lock(&slot.state).client = Some(Arc::clone(&client));
        if self.shutting_down.load(Ordering::SeqCst) {
            let _ = client.close();
            return self.settle_failed(
                slot,
                Error::Disconnected(crate::error::CloseReason::Shutdown),
                None,
            );
        }
        match connect(&client, config, deadline) {
            Ok((info, tools, warnings)) => {
                slot.ever_ready.store(true, Ordering::SeqCst);
                {
                    let mut state = lock(&slot.state);
                    state.state = ServerState::Ready;
                    state.tools = Arc::new(tools);
                    state.info = Some(info);
                    state.warnings = warnings;
                    state.since = SystemTime::now();
                }
                self.rebuild_registry();
                self.settled();
            }
            Err(err) => {
                let err = match err {
                    Error::Timeout(mut timeout) => {
                        timeout.step =
                            format!("{} (start timeout {:?})", timeout.step, config.start_timeout);
                        Error::Timeout(timeout)
                    }
                    other => other,
                };
                self.settle_failed(slot, err, Some(&client));
                // The state is final; now end the process, which may take
                // the full grace periods for a server that ignores signals.
                let _ = client.close();
            }
        }
    }

    fn settle_failed(&self, slot: &Slot, err: Error, client: Option<&Client>) {
        let name = &slot.config.name;
        log::info!("{name}: failed to start: {}", error_chain(&err));
        let stderr_tail =
            client.and_then(Client::stderr_tail).filter(|tail| !tail.trim().is_empty());
        {
            let mut state = lock(&slot.state);
            state.hint = hint_for(&err, &slot.config);
            state.error = Some(error_chain(&err));
            state.stderr_tail = stderr_tail;
            state.state = ServerState::Failed;
            state.client = None;
            state.since = SystemTime::now();
        }
        self.settled();
    }

    fn settled(&self) {
        let mut pending = lock(&self.pending_starts);
        *pending = pending.saturating_sub(1);
        self.all_started.notify_all();
    }

    /// Lists a server's tools again (after `tools/list_changed`): new tools
    /// appear, withdrawn ones become unreachable.
    fn relist(&self, server: &str) {
        let Some(slot) = self.slot(server) else { return };
        let Ok(client) = self.client(server) else { return };
        let options = CallOptions { timeout: Some(slot.config.timeout), ..CallOptions::default() };
        match client.list_tools(&options) {
            Ok(mut tools) => {
                if let Some(allowed) = &slot.config.tools {
                    tools.retain(|tool| allowed.contains(&tool.name));
                }
                log::info!("{server}: tools changed; now {}", tools.len());
                lock(&slot.state).tools = Arc::new(tools);
                self.rebuild_registry();
            }
            Err(err) => log::warn!("{server}: re-listing tools failed: {err}"),
        }
    }

    fn rebuild_registry(&self) {
        // Held from snapshot to store, so that two servers becoming ready at
        // once cannot store their snapshots out of order. Only plain data is
        // touched meanwhile (slot locks are never held while taking this one).
        let mut registry = lock(&self.registry);
        let slots = self.slots();
        let ready: Vec<(String, Arc<Vec<Tool>>)> = slots
            .iter()
            .filter_map(|slot| {
                let state = lock(&slot.state);
                (state.state == ServerState::Ready)
                    .then(|| (slot.config.name.clone(), Arc::clone(&state.tools)))
            })
            .collect();
        let rebuilt = ToolRegistry::build(
            ready.iter().map(|(name, tools)| (name.as_str(), tools.as_slice())),
            self.options.name_style,
        )
        .with_exposure(|server, tool| {
            slots
                .iter()
                .find(|slot| slot.config.name == server)
                .map_or(Exposure::Direct, |slot| slot.config.exposure_of(tool))
        });
        *registry = Arc::new(rebuilt);
    }
}

impl Slot {
    fn new(config: ServerConfig) -> Slot {
        let state = if config.enabled { ServerState::Connecting } else { ServerState::Disabled };
        Slot {
            config,
            state: Mutex::new(SlotState {
                state,
                client: None,
                tools: Arc::new(Vec::new()),
                info: None,
                error: None,
                hint: None,
                warnings: Vec::new(),
                stderr_tail: None,
                since: SystemTime::now(),
            }),
            ever_ready: AtomicBool::new(false),
        }
    }

    /// A new slot for the same server, remembering that it ran before.
    fn successor(&self) -> Slot {
        let slot = Slot::new(self.config.clone());
        slot.ever_ready.store(self.ever_ready.load(Ordering::SeqCst), Ordering::SeqCst);
        slot
    }

    fn status(&self) -> ServerStatus {
        // The client's stderr tail may wait for the stream to end: read it
        // with the slot unlocked, so that a lost server stalls nothing else.
        let client = lock(&self.state).client.clone();
        let lost = client
            .as_ref()
            .and_then(|client| client.close_reason().map(|reason| (reason, client.stderr_tail())))
            .filter(|(reason, _)| *reason != crate::error::CloseReason::Shutdown);
        let state = lock(&self.state);
        let info = state.info.as_ref();
        ServerStatus {
            name: self.config.name.clone(),
            scope: self.config.scope,
            transport: state
                .client
                .as_ref()
                .and_then(|client| client.transport_name())
                .unwrap_or_else(|| self.config.transport_name()),
            state: if lost.is_some() { ServerState::Failed } else { state.state },
            protocol_version: info.map(|info| info.protocol_version.clone()),
            server_name: info.map(|info| info.name.clone()),
            server_version: info.map(|info| info.version.clone()),
            instructions: info.and_then(|info| info.instructions_first_line().map(str::to_owned)),
            tools: state.tools.iter().map(|tool| tool.name.clone()).collect(),
            resources: info.is_some_and(|info| info.has_capability("resources")),
            prompts: info.is_some_and(|info| info.has_capability("prompts")),
            error: match &lost {
                Some((reason, _)) => Some(format!("connection closed: {reason}")),
                None => state.error.clone(),
            },
            hint: state.hint.clone(),
            warnings: state.warnings.clone(),
            stderr_tail: match lost {
                Some((_, tail)) => tail.filter(|tail| !tail.trim().is_empty()),
                None => state.stderr_tail.clone(),
            },
            since: clock::rfc3339(state.since),
        }
    }
}

/// The HTTP target of a remote entry, with its bearer token read now.
fn http_target(remote: &RemoteConfig, start_timeout: Duration) -> Result<HttpTarget, Error> {
    if remote.auth_provider.is_some() {
        return Err(Error::Config(
            "\"auth\" token providers are not supported by this build yet".into(),
        ));
    }
    let bearer_token = match &remote.bearer_token_env {
        None => None,
        Some(variable) => match std::env::var(variable) {
            Ok(token) if !token.is_empty() => Some(token),
            _ => {
                return Err(Error::Config(format!(
                    "\"bearerTokenEnv\" names {variable}, which is not set in tether's environment"
                )))
            }
        },
    };
    Ok(HttpTarget {
        url: remote.url.clone(),
        kind: remote.kind,
        headers: remote.headers.clone(),
        bearer_token,
        endpoint_wait: start_timeout,
    })
}

/// Handshake and first tool list, each step given what is left of the start timeout.
fn connect(
    client: &Client,
    config: &ServerConfig,
    deadline: Instant,
) -> Result<(ServerInfo, Vec<Tool>, Vec<String>), Error> {
    let remaining =
        || deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
    let info = client.initialize(remaining())?.clone();
    let mut warnings = Vec::new();
    let mut tools = if info.has_capability("tools") {
        let options = CallOptions {
            timeout: Some(remaining()),
            deadline: Some(deadline),
            ..CallOptions::default()
        };
        client.list_tools(&options)?
    } else {
        Vec::new()
    };
    if let Some(allowed) = &config.tools {
        for name in allowed {
            if !tools.iter().any(|tool| &tool.name == name) {
                warnings.push(format!("\"tools\" names {name:?}, which the server does not offer"));
            }
        }
        tools.retain(|tool| allowed.contains(&tool.name));
    }
    Ok((info, tools, warnings))
}

/// An error and its causes on one line.
pub fn error_chain(err: &Error) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn hint_for(err: &Error, config: &ServerConfig) -> Option<String> {
    let file = config
        .source
        .as_ref()
        .map_or_else(|| "the configuration".to_owned(), |path| path.display().to_string());
    match err.root() {
        Error::Spawn { command, source } if source.kind() == std::io::ErrorKind::NotFound => {
            Some(format!(
                "check that `{command}` is installed and on PATH, or give its full path in {file}"
            ))
        }
        Error::Timeout(timeout)
            if timeout.step.starts_with("initialize") || timeout.step.starts_with("tools/list") =>
        {
            Some(format!("raise \"startTimeout\" in {file}"))
        }
        Error::Timeout(_) => Some(format!("raise \"timeout\" in {file}")),
        Error::Disconnected(_) => Some("the server exited; its stderr is below".to_owned()),
        _ => None,
    }
}
