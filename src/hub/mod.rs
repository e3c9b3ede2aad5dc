//! The hub: every configured server, connected in parallel, behind one registry.
//!
//! Each enabled server is started on its own `{server}-start` thread; a
//! server's start is bounded by its `startTimeout` (every request of the
//! handshake gets only what is left of it), so `Hub::start` returns on time
//! even when a server hangs. A server that fails is recorded with its typed
//! error and stderr tail and skipped. Everything the hub knows is one
//! `HubState` behind one lock (`state.rs`); the start threads hold only that
//! shared state, never the hub itself, so dropping the last `Hub` handle
//! shuts everything down. This file is the public face: the options, the
//! status types and the calls.

mod connecting;
mod events;
mod for_model;
mod options;
mod refresh;
mod scripts;
mod slot;
mod state;
mod status;

pub use events::{LogFile, LogSink};
pub use options::HubOptions;
pub use refresh::RefreshReport;
pub use status::{Offered, ServerStatus};

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

use crate::client::{CallOptions, Client};
use crate::config::{Config, Exposure, FailedEntry, Scope, ServerConfig};
use crate::error::{CloseReason, Error};
use crate::model::registry::RegisteredTool;
use crate::protocol::{
    Completion, CompletionRef, Prompt, PromptResult, Resource, ResourceContents, ResourceTemplate,
    Task, TaskStart, ToolResult, UrlElicitation,
};
use crate::server_state::ServerState;
use slot::{Phase, Slot};
use state::Shared;
use status::slot_status;

/// Every configured server behind one tool registry. Cheap to clone; the
/// last clone dropped shuts everything down.
#[derive(Clone)]
pub struct Hub {
    core: Arc<HubCore>,
}

struct HubCore {
    shared: Arc<Shared>,
}

impl Hub {
    /// Connects every enabled server of `config` in parallel and returns when
    /// each is connected or has failed (at most its start timeout), or at once
    /// with `options.background`.
    pub fn start(config: Config, options: HubOptions) -> Hub {
        let Config { servers, mut failed, untrusted, codemode, .. } = config;
        // One slot per name (`-` and `_` are the same): a second server of
        // a name (pushed onto `servers` by hand) fails, said as such.
        let mut slots: Vec<Slot> = Vec::with_capacity(servers.len());
        for server in servers {
            // A server built in code meets the files' name rules too.
            let refused = match crate::config::check_name(&server.name) {
                Err(why) => Some(format!("server name {:?} {why}", server.name)),
                Ok(()) => slots
                    .iter()
                    .find(|slot| Config::same_name(&slot.config.name, &server.name))
                    .map(|first| {
                        format!(
                            "server {:?} is the same name as {:?} (`-` and `_` are equal in names)",
                            server.name, first.config.name
                        )
                    }),
            };
            match refused {
                Some(error) => failed.push(FailedEntry {
                    error,
                    name: server.name,
                    scope: server.scope,
                    source: server.source,
                }),
                None => slots.push(Slot::new(server)),
            }
        }
        let shared = Arc::new(Shared::new(slots, failed, untrusted, codemode, options));
        shared.events.start(&shared);
        shared.start_all();
        let hub = Hub { core: Arc::new(HubCore { shared }) };
        if !hub.core.shared.options.background {
            hub.wait_started();
        }
        hub
    }

    /// Waits until no server is starting (each at most its start timeout,
    /// plus a little): the servers a background start began, and restarts
    /// or reconnects under way.
    pub fn wait_started(&self) {
        self.core.shared.wait_started();
    }

    /// Waits at most `limit` for no server to be starting; true when none
    /// is. A host that shows progress calls it in a loop and reads
    /// [`Hub::status`] between calls.
    pub fn wait_started_for(&self, limit: Duration) -> bool {
        self.core.shared.wait_started_until(Instant::now() + limit)
    }

    /// Waits at most `wait` for the registry to change from the generation
    /// `since` (a server connected, went, or changed its tools); returns the
    /// generation then (at once when it is not `since`: `u64::MAX` reads
    /// the current one). What a server in front of the hub (`tether serve`)
    /// announces as `notifications/tools/list_changed`.
    pub fn wait_tools_changed(&self, since: u64, wait: Duration) -> u64 {
        self.core.shared.wait_tools_changed(since, Instant::now() + wait)
    }

    /// The registry as it is now, shared rather than copied: what the
    /// crate's own per-call paths look a tool up in.
    #[cfg(feature = "serve")]
    pub(crate) fn registry(&self) -> Arc<crate::model::registry::ToolRegistry> {
        self.core.shared.registry()
    }

    /// The registry as it is now: every tool of every connected server.
    pub fn tools(&self) -> Vec<RegisteredTool> {
        self.core.shared.registry().tools().to_vec()
    }

    /// Calls a tool by its qualified name. Safe from many threads at once;
    /// calls to different servers never wait on each other. A name not
    /// listed yet whose server is still starting (a background start) waits
    /// for that server's start, at most its start timeout.
    ///
    /// # Errors
    /// [`Error::UnknownTool`], or the call's error wrapped with the server's name.
    pub fn call(
        &self,
        qualified_name: &str,
        arguments: Value,
        options: &CallOptions,
    ) -> Result<ToolResult, Error> {
        let lookup = || {
            let registry = self.core.shared.registry();
            registry
                .get(qualified_name)
                .map(|entry| (entry.server.clone(), entry.tool.name.clone(), entry.exposure))
        };
        // Not listed yet: its server may still be starting (a background
        // start), which is waited for (at most its start timeout).
        let found = lookup().or_else(|| self.started_for(qualified_name).then(lookup).flatten());
        let (server, tool_name) = match found {
            Some((server, tool, exposure)) if exposure != Exposure::Hidden => (server, tool),
            Some(_) => return Err(Error::UnknownTool(qualified_name.to_owned())),
            None => {
                return self
                    .call_builtin(qualified_name, &arguments, options)
                    .unwrap_or_else(|| Err(Error::UnknownTool(qualified_name.to_owned())));
            }
        };
        let client = Arc::clone(&self.core.shared.connected(&server)?.client);
        client.call_tool(&tool_name, arguments, options).map_err(|err| err.for_server(&server))
    }

    /// Waits until `server` says each of `elicitations` is done, as
    /// [`Client::wait_elicitations`]: for a call that failed with
    /// [`Error::UrlElicitationRequired`], before calling again.
    ///
    /// # Errors
    /// [`Error::UnknownServer`] or [`Error::NotConnected`].
    pub fn wait_elicitations(
        &self,
        server: &str,
        elicitations: &[UrlElicitation],
        timeout: Duration,
    ) -> Result<bool, Error> {
        let client = Arc::clone(&self.core.shared.connected(server)?.client);
        Ok(client.wait_elicitations(elicitations, timeout))
    }

    /// Calls a tool by its qualified name as a task, as
    /// [`Client::start_tool_task`]: the task, or the answer when the server
    /// gave it at once. Ask about the task with the server's name (the
    /// result's [`Hub::task_result`], [`Hub::get_task`], [`Hub::cancel_task`]).
    ///
    /// # Errors
    /// As [`Hub::call`].
    pub fn start_tool_task(
        &self,
        qualified_name: &str,
        arguments: Value,
        options: &CallOptions,
    ) -> Result<(String, TaskStart), Error> {
        let registry = self.core.shared.registry();
        let entry = registry
            .get(qualified_name)
            .filter(|entry| entry.exposure != Exposure::Hidden)
            .ok_or_else(|| Error::UnknownTool(qualified_name.to_owned()))?;
        let (server, tool) = (entry.server.clone(), entry.tool.name.clone());
        let client = Arc::clone(&self.core.shared.connected(&server)?.client);
        let started = client.start_tool_task(&tool, arguments, options);
        started.map(|start| (server.clone(), start)).map_err(|err| err.for_server(&server))
    }

    /// Where `server`'s task is now, as [`Client::get_task`].
    ///
    /// # Errors
    /// [`Error::UnknownServer`], [`Error::NotConnected`], or as the client's.
    pub fn get_task(
        &self,
        server: &str,
        task_id: &str,
        options: &CallOptions,
    ) -> Result<Task, Error> {
        self.on_server(server, |client| client.get_task(task_id, options))
    }

    /// Waits for `server`'s task to end, as [`Client::task_result`].
    ///
    /// # Errors
    /// As [`Hub::get_task`], and the task's own error.
    pub fn task_result(
        &self,
        server: &str,
        task_id: &str,
        options: &CallOptions,
    ) -> Result<ToolResult, Error> {
        self.on_server(server, |client| client.task_result(task_id, options))
    }

    /// Cancels `server`'s task, as [`Client::cancel_task`].
    ///
    /// # Errors
    /// As [`Hub::get_task`].
    pub fn cancel_task(
        &self,
        server: &str,
        task_id: &str,
        options: &CallOptions,
    ) -> Result<(), Error> {
        self.on_server(server, |client| client.cancel_task(task_id, options))
    }

    /// `server`'s tasks, as [`Client::list_tasks`].
    ///
    /// # Errors
    /// As [`Hub::get_task`].
    pub fn list_tasks(&self, server: &str, options: &CallOptions) -> Result<Vec<Task>, Error> {
        self.on_server(server, |client| client.list_tasks(options))
    }

    /// `work` on `server`'s connection, its error named with the server.
    fn on_server<T>(
        &self,
        server: &str,
        work: impl FnOnce(&Client) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let client = Arc::clone(&self.core.shared.connected(server)?.client);
        work(&client).map_err(|err| err.for_server(server))
    }

    /// Waits for the starting servers whose tools' names begin as
    /// `qualified_name` does; true when there was one.
    fn started_for(&self, qualified_name: &str) -> bool {
        let style = self.core.shared.options.name_style;
        let starting: Vec<String> = self
            .status()
            .into_iter()
            .filter(|status| status.state == ServerState::Connecting)
            .map(|status| status.name)
            .filter(|name| {
                qualified_name.starts_with(&crate::model::registry::qualified_name(name, "", style))
            })
            .collect();
        for server in &starting {
            let _ = self.core.shared.connected(server);
        }
        !starting.is_empty()
    }

    /// Calls a server's tool by the server's own name for it (or its
    /// qualified name), as `tether call` does. A tool its entry hides
    /// (`exposure` or `toolExposure` `hidden`) is not called.
    ///
    /// # Errors
    /// [`Error::UnknownServer`], [`Error::NotConnected`], [`Error::UnknownTool`]
    /// when the server did not list the tool or it is hidden, or the call's
    /// error; all but the first wrapped with the server's name.
    pub fn call_server_tool(
        &self,
        server: &str,
        tool: &str,
        arguments: Value,
        options: &CallOptions,
    ) -> Result<ToolResult, Error> {
        let (connected, tool_name) = self.server_tool(server, tool)?;
        let name = connected.client.server_name();
        connected
            .client
            .call_tool(&tool_name, arguments, options)
            .map_err(|err| err.for_server(name))
    }

    /// [`Hub::call_server_tool`] for a result passed on unread (`tether
    /// serve`): the server's own text of it where it can be taken so.
    #[cfg(feature = "serve")]
    pub(crate) fn pass_server_tool(
        &self,
        server: &str,
        tool: &str,
        arguments: Value,
        options: &CallOptions,
    ) -> Result<crate::client::PassedResult, Error> {
        let (connected, tool_name) = self.server_tool(server, tool)?;
        let name = connected.client.server_name();
        connected
            .client
            .call_tool_passed(&tool_name, arguments, options)
            .map_err(|err| err.for_server(name))
    }

    /// [`Hub::pass_server_tool`] with no thread waiting for it: sent to a
    /// server that is ready now, its answer handed to `sink` by the thread
    /// that reads it ([`Client::send_tool_call`]), with the log messages
    /// about it at `logs` or above. `None` when the call cannot go so (a
    /// server starting or gone, a task, an HTTP server, a log level the
    /// server must first be told): nothing was sent.
    ///
    /// # Errors
    /// [`Error::UnknownTool`] as [`Hub::call_server_tool`] says it, or the
    /// server's connection closed as the request was written.
    #[cfg(feature = "serve")]
    pub(crate) fn send_server_tool(
        &self,
        server: &str,
        tool: &str,
        arguments: &Value,
        sink: Arc<dyn crate::client::Sink>,
        logs: Option<crate::protocol::LogLevel>,
    ) -> Result<Option<(Arc<Client>, crate::client::Sent)>, Error> {
        let Some(connected) = self.core.shared.ready(server) else { return Ok(None) };
        let tool_name = self.tool_of(&connected, tool)?;
        let client = &connected.client;
        let sent = client
            .send_tool_call(&tool_name, arguments, sink, logs)
            .map_err(|err| err.for_server(client.server_name()))?;
        Ok(sent.map(|sent| (Arc::clone(client), sent)))
    }

    /// The connection to `server` (waited for, or reconnected, as
    /// [`Hub::client`] does) and the server's own name of `tool`, which
    /// may be given qualified; a hidden tool is unknown.
    fn server_tool(
        &self,
        server: &str,
        tool: &str,
    ) -> Result<(Arc<slot::Connected>, String), Error> {
        let connected = self.core.shared.connected(server)?;
        let tool_name = self.tool_of(&connected, tool)?;
        Ok((connected, tool_name))
    }

    /// The server's own name of `tool` on `connected`, which may be given
    /// qualified; a hidden tool is unknown.
    fn tool_of(&self, connected: &slot::Connected, tool: &str) -> Result<String, Error> {
        let shared = &self.core.shared;
        let name = connected.client.server_name();
        let listed = connected.tools.iter().any(|listed| listed.name == tool);
        let tool_name = if listed {
            tool.to_owned()
        } else {
            // The qualified name as `tools` prints it, or spelt with the
            // server name's `-` and `_` swapped (they are the same name).
            let registry = shared.registry();
            let same = |entry: &&RegisteredTool| {
                entry.server == name
                    && crate::config::name_key(&entry.qualified_name)
                        == crate::config::name_key(tool)
            };
            let found = registry
                .get(tool)
                .filter(|entry| entry.server == name)
                .or_else(|| registry.tools().iter().find(same));
            match found {
                Some(entry) => entry.tool.name.clone(),
                None => return Err(Error::UnknownTool(tool.to_owned()).for_server(name)),
            }
        };
        // Asked of the entry, as the registry asks it: no walk over every tool.
        if shared.exposure_of(name, &tool_name) == Some(Exposure::Hidden) {
            return Err(Error::UnknownTool(tool.to_owned()).for_server(name));
        }
        Ok(tool_name)
    }

    /// The connection to one server, for requests the hub does not wrap:
    /// waits for a server that is starting (at most its start timeout), and
    /// reconnects one that dropped, once.
    ///
    /// # Errors
    /// [`Error::UnknownServer`] or [`Error::NotConnected`] (with the failure
    /// as its cause).
    pub fn client(&self, server: &str) -> Result<Arc<Client>, Error> {
        self.core.shared.connected(server).map(|connected| Arc::clone(&connected.client))
    }

    /// Every resource of every connected server that offers resources, and
    /// the errors of the servers that could not list theirs. MCP Apps
    /// interfaces (`ui://`) are left out.
    pub fn resources(&self) -> (Vec<Offered<Resource>>, Vec<Error>) {
        self.resources_within(&CallOptions::default())
    }

    /// Every resource, each server's listing made with these options (a
    /// script's deadline and cancel handle).
    pub(super) fn resources_within(
        &self,
        options: &CallOptions,
    ) -> (Vec<Offered<Resource>>, Vec<Error>) {
        let (mut items, errors) =
            self.gather("resources", options, |client, options| client.list_resources(options));
        items.retain(|offered| !offered.item.is_app_ui());
        (items, errors)
    }

    /// Every resource template of every connected server that offers resources.
    pub fn resource_templates(&self) -> (Vec<Offered<ResourceTemplate>>, Vec<Error>) {
        self.gather("resources", &CallOptions::default(), |client, options| {
            client.list_resource_templates(options)
        })
    }

    /// Every prompt of every connected server that offers prompts.
    pub fn prompts(&self) -> (Vec<Offered<Prompt>>, Vec<Error>) {
        self.gather("prompts", &CallOptions::default(), |client, options| {
            client.list_prompts(options)
        })
    }

    /// Reads a resource of one server, with this call's timeout, progress,
    /// cancel handle and `_meta`.
    ///
    /// # Errors
    /// The server is unknown or not connected, or the read failed.
    pub fn read_resource(
        &self,
        server: &str,
        uri: &str,
        options: &CallOptions,
    ) -> Result<Vec<ResourceContents>, Error> {
        let client = Arc::clone(&self.core.shared.connected(server)?.client);
        client.read_resource(uri, options).map_err(|err| err.for_server(server))
    }

    /// A request to one server whose result is passed on unread (`tether
    /// serve`'s reads and prompts): `None` when that server's answers are
    /// not taken so (a stateless server), and nothing was sent.
    ///
    /// # Errors
    /// The server is unknown or not connected, or the request failed.
    #[cfg(feature = "serve")]
    pub(crate) fn pass_request(
        &self,
        server: &str,
        method: &str,
        params: &Value,
        options: &CallOptions,
    ) -> Result<Option<crate::client::PassedResult>, Error> {
        let client = Arc::clone(&self.core.shared.connected(server)?.client);
        client.request_passed(method, Some(params), options).map_err(|err| err.for_server(server))
    }

    /// Gets a prompt of one server, with this call's timeout, progress,
    /// cancel handle and `_meta`.
    ///
    /// # Errors
    /// The server is unknown or not connected, or the request failed.
    pub fn get_prompt(
        &self,
        server: &str,
        name: &str,
        arguments: Value,
        options: &CallOptions,
    ) -> Result<PromptResult, Error> {
        let client = Arc::clone(&self.core.shared.connected(server)?.client);
        client.get_prompt(name, arguments, options).map_err(|err| err.for_server(server))
    }

    /// Subscribes to changes of one server's resource `uri`: its
    /// `notifications/resources/updated` reach the host's
    /// [`Host::notification`](crate::Host::notification). Kept across the
    /// server's reconnects and restarts (subscribed again each time).
    ///
    /// # Errors
    /// The server is unknown or not connected, or it refused (a server
    /// without `resources.subscribe`).
    pub fn subscribe_resource(&self, server: &str, uri: &str) -> Result<(), Error> {
        let client = Arc::clone(&self.core.shared.connected(server)?.client);
        client
            .subscribe_resource(uri, &CallOptions::default())
            .map_err(|err| err.for_server(server))?;
        self.core.shared.subscribed(server, uri, true);
        Ok(())
    }

    /// Ends a subscription [`Hub::subscribe_resource`] made.
    ///
    /// # Errors
    /// The server is unknown or not connected, or the request failed.
    pub fn unsubscribe_resource(&self, server: &str, uri: &str) -> Result<(), Error> {
        self.core.shared.subscribed(server, uri, false);
        let client = Arc::clone(&self.core.shared.connected(server)?.client);
        client
            .unsubscribe_resource(uri, &CallOptions::default())
            .map_err(|err| err.for_server(server))
    }

    /// Completes an argument of one server's prompt or resource template
    /// (`completion/complete`; see [`Client::complete`]).
    ///
    /// # Errors
    /// The server is unknown or not connected, or the request failed.
    pub fn complete(
        &self,
        server: &str,
        reference: &CompletionRef,
        argument: &str,
        value: &str,
        context: Option<&Value>,
        options: &CallOptions,
    ) -> Result<Completion, Error> {
        let client = Arc::clone(&self.core.shared.connected(server)?.client);
        client
            .complete(reference, argument, value, context, options)
            .map_err(|err| err.for_server(server))
    }

    /// Runs a list request on every connected server with `capability`.
    /// Every server is asked at once (one scoped thread each), so a slow
    /// server delays the listing by its own time only, not by the sum.
    fn gather<T: Send>(
        &self,
        capability: &str,
        options: &CallOptions,
        list: impl Fn(&Client, &CallOptions) -> Result<Vec<T>, Error> + Sync,
    ) -> (Vec<Offered<T>>, Vec<Error>) {
        let offering = self.core.shared.ready_clients(Some(capability));
        let answers: Vec<(String, Result<Vec<T>, Error>)> = thread::scope(|scope| {
            let list = &list;
            let asks: Vec<_> = offering
                .iter()
                .map(|(name, client)| {
                    let asked = thread::Builder::new()
                        .name(format!("{name}-list"))
                        .spawn_scoped(scope, move || list(client, options));
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
                        Err(_) => list(client, options),
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
                // A server that does not implement an optional list method
                // (templates, say) simply has none.
                Err(Error::Rpc(rpc)) if rpc.code == crate::jsonrpc::METHOD_NOT_FOUND => {}
                Err(err) => errors.push(err.for_server(&name)),
            }
        }
        (items, errors)
    }

    /// One entry per configured server, in configuration order, then the
    /// entries that could not be used.
    pub fn status(&self) -> Vec<ServerStatus> {
        // A snapshot under the lock; whether a connection was lost (and its
        // stderr, which may take a moment) is read with the lock released.
        let (slots, failed_entries, untrusted, closed) = {
            let state = self.core.shared.state();
            let slots: Vec<(Arc<ServerConfig>, Phase, SystemTime)> = state
                .slots
                .iter()
                .map(|slot| (Arc::clone(&slot.config), slot.phase.clone(), slot.since))
                .collect();
            (slots, state.failed_entries.clone(), state.untrusted.clone(), state.shutting_down)
        };
        let mut statuses: Vec<ServerStatus> =
            slots.iter().map(|(config, phase, since)| slot_status(config, phase, *since)).collect();
        if closed {
            // What the shutdown ended is closed, not ready (nor failed).
            for status in &mut statuses {
                let ended_by_shutdown = status.error.as_deref().is_some_and(|error| {
                    matches!(error.root(), Error::Disconnected(CloseReason::Shutdown))
                });
                if status.state == ServerState::Ready || ended_by_shutdown {
                    status.state = ServerState::Closed;
                    status.error = None;
                }
            }
        }
        statuses.extend(failed_entries.into_iter().map(|entry| {
            let mut status =
                ServerStatus::new(&entry.name, entry.scope, ServerState::Failed, entry.source);
            status.error = Some(Arc::new(Error::Config(entry.error)));
            status
        }));
        statuses.extend(untrusted.into_iter().map(|entry| {
            let mut status = ServerStatus::new(
                &entry.name,
                Scope::Project,
                ServerState::Untrusted,
                Some(entry.source),
            );
            status.target = Some(entry.command_line);
            status.unapproved = Some(entry.why);
            status
        }));
        statuses
    }

    /// Tells every connected server that the host's roots changed
    /// (`notifications/roots/list_changed`); they ask again with `roots/list`.
    pub fn notify_roots_changed(&self) {
        for (name, client) in self.core.shared.ready_clients(None) {
            if let Err(err) = client.notify_roots_changed() {
                log::debug!("{name}: could not tell it the roots changed: {err}");
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
        self.shared.events.stop();
        self.shared.shutdown();
        self.shared.events.join();
    }
}

impl Drop for HubCore {
    fn drop(&mut self) {
        self.shutdown();
    }
}
