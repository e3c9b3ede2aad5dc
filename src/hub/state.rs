//! The hub's one state, and the starts that change it.
//!
//! Everything the hub knows sits in one [`HubState`] behind one mutex: each
//! configured server's [`Slot`] (its entry and a [`Phase`]: disabled,
//! starting, ready with its client and tools, or failed with a typed error),
//! the entries that could not be used, the registry built from the ready
//! slots, and what shutdown must join. One condvar, `settled`, wakes whoever
//! waits for a start to end. The lock is never held while talking to a
//! server: a start reads what it needs, lets go, connects, and takes the lock
//! again only to store the outcome, and only into the slot it was started
//! for (`start_id`), so a refresh or reconnect that replaced the slot
//! meanwhile is never overwritten.
//!
//! A server that dropped is reconnected by the first caller that notices, on
//! its own thread; other callers of *that* server wait on `settled` for the
//! slot to leave `Starting`, and callers of every other server never wait.

use std::collections::HashSet;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::connecting::{close_all, handshake};
use super::events::{self, Events};
use super::slot::{is_lost, Connected, Phase, Slot, StartJob};
use super::HubOptions;
use crate::client::{CallOptions, Client, ClientOptions, EraMemory};
use crate::config::{
    name_key, Exposure, FailedEntry, ScriptLimits, ServerConfig, TransportConfig, UntrustedServer,
};
use crate::error::{CloseReason, Error};
use crate::model::reached_as;
use crate::model::registry::ToolRegistry;
use crate::model::servers_prompt::ServersPrompt;
use crate::protocol::Tool;
use crate::sync::{lock, wait_timeout};
use crate::transport;

/// Slack beyond a start timeout for spawning and settling.
const START_SLACK: Duration = Duration::from_secs(5);
/// How long a second caller of shutdown waits for the first to finish,
/// past the longest grace a server gets to exit after its input ends
/// (closing is bounded by that and the SIGTERM grace periods after it).
const SHUTDOWN_WAIT: Duration = Duration::from_secs(10);

/// What every handle of one hub shares.
pub(super) struct Shared {
    state: Mutex<HubState>,
    /// Notified whenever a slot leaves `Starting`.
    settled: Condvar,
    pub(super) options: HubOptions,
    /// Re-listing on `list_changed`, and the log sink.
    pub(super) events: Events,
    /// The era each of this hub's HTTP servers spoke, by URL, so that a
    /// reconnect skips the probe.
    eras: EraMemory,
}

/// Every server's slot and what is derived from them.
pub(super) struct HubState {
    /// In configuration order.
    pub(super) slots: Vec<Slot>,
    pub(super) failed_entries: Vec<FailedEntry>,
    pub(super) untrusted: Vec<UntrustedServer>,
    /// Every ready server's tools by qualified name, as they were at the
    /// last change (a slot became ready, changed its tools, or went).
    registry: RegistryState,
    /// Moves each time the registry changes: what `Hub::wait_tools_changed`
    /// compares.
    pub(super) tools_generation: u64,
    /// Deferred tools that `tool_search` found: declared from then on.
    pub(super) discovered: HashSet<String>,
    /// What a codemode script may use (the configuration's `"codemode"`).
    pub(super) script_limits: ScriptLimits,
    /// The last codemode run's number.
    pub(super) script_runs: u64,
    /// The servers section last handed out, and its generation.
    pub(super) servers_prompt: ServersPrompt,
    /// The `{server}-start` threads not joined yet: each start joins those
    /// that have ended (an ended thread's stack stays until it is joined),
    /// shutdown the rest.
    starters: Vec<JoinHandle<()>>,
    /// Set once by shutdown; nothing starts after it.
    pub(super) shutting_down: bool,
    /// Set when shutdown has ended every server.
    shut_down: bool,
    /// Reconnects running on callers' threads: shutdown waits for them.
    reconnects: usize,
    next_start_id: u64,
}

impl HubState {
    pub(super) fn slot(&self, name: &str) -> Option<&Slot> {
        let key = name_key(name);
        self.slots.iter().find(|slot| name_key(&slot.config.name) == key)
    }

    fn slot_mut(&mut self, name: &str) -> Option<&mut Slot> {
        let key = name_key(name);
        self.slots.iter_mut().find(|slot| name_key(&slot.config.name) == key)
    }

    /// Puts the slot at `index` into `Starting` for a new start, and says
    /// which; `None` once shutdown began.
    pub(super) fn begin_start(&mut self, index: usize) -> Option<StartJob> {
        if self.shutting_down {
            return None;
        }
        self.next_start_id += 1;
        let slot = &mut self.slots[index];
        slot.start_id = self.next_start_id;
        slot.set_phase(Phase::Starting { client: None });
        Some(StartJob { config: Arc::clone(&slot.config), start_id: slot.start_id })
    }

    /// The registry, built now if the ready slots changed since it was
    /// last read.
    fn registry(&mut self, options: &HubOptions) -> Arc<ToolRegistry> {
        let ready = match &self.registry {
            RegistryState::Built(registry) => return Arc::clone(registry),
            RegistryState::Due(ready) => ready,
        };
        let servers = ready.iter().map(|(config, tools)| (config.name.as_str(), tools.as_slice()));
        let built =
            ToolRegistry::build(servers, options.name_style).with_exposure(|server, tool| {
                ready
                    .iter()
                    .find(|(config, _)| config.name == server)
                    .map_or(Exposure::Direct, |(config, _)| reached_as(config.exposure_of(tool)))
            });
        let built = Arc::new(built);
        self.registry = RegistryState::Built(Arc::clone(&built));
        built
    }

    /// The ready slots or their tools changed: the registry is built from
    /// them as they are now when it is next read. Not at once: a hub
    /// starting 200 servers would build it 200 times, cloning every tool
    /// each time (what is kept here is two `Arc`s per ready server).
    pub(super) fn registry_changed(&mut self) {
        let ready = self
            .slots
            .iter()
            .filter_map(|slot| match &slot.phase {
                Phase::Ready(connected) => {
                    Some((Arc::clone(&slot.config), Arc::clone(&connected.tools)))
                }
                _ => None,
            })
            .collect();
        self.registry = RegistryState::Due(ready);
        self.tools_generation += 1;
    }

    fn any_starting(&self) -> bool {
        self.slots.iter().any(|slot| matches!(slot.phase, Phase::Starting { .. }))
    }
}

impl Shared {
    pub(super) fn new(
        slots: Vec<Slot>,
        failed_entries: Vec<FailedEntry>,
        untrusted: Vec<UntrustedServer>,
        script_limits: ScriptLimits,
        options: HubOptions,
    ) -> Shared {
        Shared {
            state: Mutex::new(HubState {
                slots,
                failed_entries,
                untrusted,
                registry: RegistryState::Built(Arc::new(ToolRegistry::default())),
                tools_generation: 0,
                discovered: HashSet::new(),
                script_limits,
                script_runs: 0,
                servers_prompt: ServersPrompt { text: String::new(), generation: 0 },
                starters: Vec::new(),
                shutting_down: false,
                shut_down: false,
                reconnects: 0,
                next_start_id: 0,
            }),
            settled: Condvar::new(),
            eras: options.era_file.as_deref().map_or_else(EraMemory::default, EraMemory::kept_in),
            options,
            events: Events::new(),
        }
    }

    /// The one lock. Hold it for plain data only.
    pub(super) fn state(&self) -> MutexGuard<'_, HubState> {
        lock(&self.state)
    }

    pub(super) fn registry(&self) -> Arc<ToolRegistry> {
        self.state().registry(&self.options)
    }

    /// Starts every enabled server that is waiting to, each on its own thread.
    pub(super) fn start_all(self: &Arc<Self>) {
        let mut state = self.state();
        self.start_waiting(&mut state);
    }

    /// Starts the slots that are new and enabled (never started yet);
    /// returns their names.
    pub(super) fn start_waiting(self: &Arc<Self>, state: &mut HubState) -> Vec<String> {
        let mut started = Vec::new();
        for index in 0..state.slots.len() {
            let slot = &state.slots[index];
            if slot.start_id == 0 && matches!(slot.phase, Phase::Starting { client: None }) {
                if let Some(job) = state.begin_start(index) {
                    started.push(job.config.name.clone());
                    self.spawn_start(state, job);
                }
            }
        }
        started
    }

    /// Runs `job` on a `{server}-start` thread (joined at shutdown).
    pub(super) fn spawn_start(self: &Arc<Self>, state: &mut HubState, job: StartJob) {
        let shared = Arc::clone(self);
        let name = format!("{}-start", job.config.name);
        let (config, start_id) = (Arc::clone(&job.config), job.start_id);
        join_ended(&mut state.starters);
        match thread::Builder::new().name(name).spawn(move || shared.run_start(job)) {
            Ok(handle) => state.starters.push(handle),
            Err(err) => {
                if let Some(slot) = state.slot_mut(&config.name) {
                    if slot.start_id == start_id {
                        let error = Arc::new(Error::Io(err));
                        slot.set_phase(Phase::Failed { error, stderr_tail: None });
                    }
                }
                self.settled.notify_all();
            }
        }
    }

    /// Connects a server and stores the outcome in its slot. Runs on a
    /// `{server}-start` thread, or on the caller's thread for a reconnect.
    pub(super) fn run_start(&self, job: StartJob) {
        let config = &job.config;
        let name = &config.name;
        let (client, outcome) = match self.connect(&job) {
            Ok((client, connected)) => (Some(client), Ok(connected)),
            Err((client, error)) => (client, Err(error)),
        };
        // Read before taking the lock: it may wait for a dead server's
        // stderr to end.
        let stderr_tail = match (&outcome, &client) {
            (Err(_), Some(client)) => client.stderr_tail().filter(|tail| !tail.trim().is_empty()),
            _ => None,
        };
        let stored = {
            let mut state = self.state();
            let shutting_down = state.shutting_down;
            let stored = match state.slot_mut(name) {
                Some(slot) if slot.start_id == job.start_id && !shutting_down => {
                    match &outcome {
                        Ok(connected) => {
                            log::debug!("{name}: ready");
                            slot.ever_ready = true;
                            slot.set_phase(Phase::Ready(Arc::clone(connected)));
                        }
                        Err(error) => {
                            log::info!("{name}: failed to start: {error}");
                            let error = Arc::clone(error);
                            slot.set_phase(Phase::Failed { error, stderr_tail });
                        }
                    }
                    true
                }
                // Replaced by a refresh or reconnect meanwhile, or shutting down.
                _ => false,
            };
            if stored && outcome.is_ok() {
                state.registry_changed();
            }
            join_ended(&mut state.starters);
            stored
        };
        self.settled.notify_all();
        // A failed start, or one nobody wants any more, ends its process now
        // (which may take the grace periods of a server that ignores signals).
        if !stored || outcome.is_err() {
            if let Some(client) = client {
                let _ = client.close();
            }
        }
    }

    /// The transport, the handshake and the first tool list, within the
    /// start timeout. On failure, the client (if it got that far) comes back
    /// too, for its stderr and its close.
    #[allow(clippy::type_complexity)]
    fn connect(
        &self,
        job: &StartJob,
    ) -> Result<(Arc<Client>, Arc<Connected>), (Option<Arc<Client>>, Arc<Error>)> {
        let config = &job.config;
        let deadline = Instant::now() + config.start_timeout;
        let client_options = ClientOptions {
            request_timeout: config.timeout,
            max_total_timeout: config.max_total_timeout,
            host: Arc::new(events::HubHost {
                user: Arc::clone(&self.options.host),
                relist: self.events.relist_queue(),
                log_sink: self.options.log_sink.clone(),
            }),
            era: config.protocol,
            // The level the log sink takes: a handshake-era server that
            // logs is told once, a stateless one with each request.
            log_level: self.options.log_sink.as_ref().map(|_| "info".to_owned()),
            declared: self.options.declared.clone(),
            eras: self.eras.clone(),
        };
        let client = transport::for_entry(config, &self.options.lent)
            .and_then(|transport| Client::start(&config.name, &transport, client_options))
            .map(Arc::new)
            .map_err(|error| (None, Arc::new(error)))?;
        // Registered so that shutdown can end it while it connects.
        let subscribed = {
            let mut state = self.state();
            let shutting_down = state.shutting_down;
            match state.slot_mut(&config.name) {
                Some(slot) if slot.start_id == job.start_id && !shutting_down => {
                    slot.phase = Phase::Starting { client: Some(Arc::clone(&client)) };
                    slot.subscribed.clone()
                }
                _ => {
                    let error = Arc::new(Error::Disconnected(CloseReason::Shutdown));
                    return Err((Some(client), error));
                }
            }
        };
        match handshake(&client, config, deadline) {
            Ok(connected) => {
                // The subscriptions of the connection before.
                let options = CallOptions::default().with_deadline(deadline);
                for uri in &subscribed {
                    if let Err(err) = client.subscribe_resource(uri, &options) {
                        log::warn!("{}: cannot subscribe to {uri} again: {err}", config.name);
                    }
                }
                Ok((client, Arc::new(connected)))
            }
            Err(error) => Err((Some(client), Arc::new(error))),
        }
    }

    /// How `server`'s entry exposes `tool` (`None`: no such server).
    pub(super) fn exposure_of(&self, server: &str, tool: &str) -> Option<Exposure> {
        self.state().slot(server).map(|slot| slot.config.exposure_of(tool))
    }

    /// Keeps (`on`) or forgets a subscription of `server`'s, for its next
    /// connections.
    pub(super) fn subscribed(&self, server: &str, uri: &str, on: bool) {
        if let Some(slot) = self.state().slot_mut(server) {
            if on {
                slot.subscribed.insert(uri.to_owned());
            } else {
                slot.subscribed.remove(uri);
            }
        }
    }

    /// Waits until no slot is starting, at most the longest start timeout
    /// (plus slack).
    pub(super) fn wait_started(&self) {
        let longest = {
            let state = self.state();
            state.slots.iter().map(|slot| slot.config.start_timeout).max().unwrap_or_default()
        };
        if !self.wait_started_until(Instant::now() + longest + START_SLACK) {
            log::warn!("servers still starting past their start timeout");
        }
    }

    /// Waits until the registry's generation is not `since`, or `until`;
    /// returns the generation then. A change that does not wake `settled`
    /// is seen within 100 ms.
    pub(super) fn wait_tools_changed(&self, since: u64, until: Instant) -> u64 {
        let mut state = self.state();
        while state.tools_generation == since {
            let now = Instant::now();
            if now >= until || state.shutting_down {
                break;
            }
            let slice = (until - now).min(Duration::from_millis(100));
            state = wait_timeout(&self.settled, state, slice);
        }
        state.tools_generation
    }

    /// Waits until no server is starting, or `until`; true when none is.
    pub(super) fn wait_started_until(&self, until: Instant) -> bool {
        let mut state = self.state();
        while state.any_starting() {
            let now = Instant::now();
            if now >= until {
                return false;
            }
            state = wait_timeout(&self.settled, state, until - now);
        }
        true
    }

    /// Waits until `server`'s slot is not starting, at most its start timeout.
    pub(super) fn wait_for<'a>(
        &'a self,
        state: MutexGuard<'a, HubState>,
        server: &str,
    ) -> MutexGuard<'a, HubState> {
        self.wait_for_until(state, server, None)
    }

    /// Waits until `server`'s slot is not starting, at most its start
    /// timeout, and never past `until`.
    pub(super) fn wait_for_until<'a>(
        &'a self,
        mut state: MutexGuard<'a, HubState>,
        server: &str,
        until: Option<Instant>,
    ) -> MutexGuard<'a, HubState> {
        let Some(slot) = state.slot(server) else { return state };
        let mut deadline = Instant::now() + slot.config.start_timeout + START_SLACK;
        if let Some(until) = until {
            deadline = deadline.min(until);
        }
        while state.slot(server).is_some_and(|slot| matches!(slot.phase, Phase::Starting { .. })) {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            state = wait_timeout(&self.settled, state, deadline - now);
        }
        state
    }

    /// A server's connection if it is ready now (never waited for nor
    /// reconnected).
    #[cfg(feature = "serve")]
    pub(super) fn ready(&self, server: &str) -> Option<Arc<Connected>> {
        let state = self.state();
        match &state.slot(server)?.phase {
            Phase::Ready(connected) if !is_lost(&connected.client) => Some(Arc::clone(connected)),
            _ => None,
        }
    }

    /// A server's connection for a request: one that is starting is
    /// waited for; one that dropped since it was ready is reconnected once,
    /// here, before failing. Callers of other servers never wait on this.
    pub(super) fn connected(self: &Arc<Self>, server: &str) -> Result<Arc<Connected>, Error> {
        let (mut reconnected, mut waited) = (false, false);
        let mut state = self.state();
        loop {
            let slot = state.slot(server).ok_or_else(|| Error::UnknownServer(server.to_owned()))?;
            if let Phase::Ready(connected) = &slot.phase {
                if !is_lost(&connected.client) {
                    return Ok(Arc::clone(connected));
                }
            }
            let name = slot.config.name.clone();
            match &slot.phase {
                // Waited for once, at most its start timeout.
                Phase::Starting { .. } if !waited && !reconnected => {
                    waited = true;
                    state = self.wait_for(state, &name);
                }
                _ if slot.has_dropped() && !reconnected && !state.shutting_down => {
                    reconnected = true;
                    let old = slot.phase.client().cloned();
                    let index = state.slots.iter().position(|slot| slot.config.name == name);
                    let Some(job) = index.and_then(|index| state.begin_start(index)) else {
                        continue;
                    };
                    state.reconnects += 1;
                    drop(state);
                    log::info!("{name}: the connection dropped; reconnecting once");
                    if let Some(old) = old {
                        let _ = old.close();
                    }
                    self.run_start(job);
                    state = self.state();
                    state.reconnects -= 1;
                    self.settled.notify_all();
                }
                phase => {
                    let cause = match phase {
                        Phase::Failed { error, .. } => Some(Arc::clone(error)),
                        _ => None,
                    };
                    let error = Error::NotConnected { state: phase.state_word(), cause };
                    return Err(error.for_server(&name));
                }
            }
        }
    }

    /// The connected servers (those offering `capability`, when given), by
    /// name, with their clients.
    pub(super) fn ready_clients(&self, capability: Option<&str>) -> Vec<(String, Arc<Client>)> {
        self.state()
            .slots
            .iter()
            .filter_map(|slot| match &slot.phase {
                Phase::Ready(connected)
                    if capability.is_none_or(|name| connected.info.has_capability(name)) =>
                {
                    Some((slot.config.name.clone(), Arc::clone(&connected.client)))
                }
                _ => None,
            })
            .collect()
    }

    /// Lists a server's tools again (after `tools/list_changed`): new tools
    /// appear, withdrawn ones become unreachable.
    pub(super) fn relist(&self, server: &str) {
        let (client, config) = {
            let state = self.state();
            match state.slot(server) {
                Some(Slot { phase: Phase::Ready(connected), config, .. }) => {
                    (Arc::clone(&connected.client), Arc::clone(config))
                }
                _ => return,
            }
        };
        let options = CallOptions::default().with_timeout(config.timeout);
        match client.list_tools(&options) {
            Ok(mut tools) => {
                if let Some(allowed) = &config.tools {
                    tools.retain(|tool| allowed.contains(&tool.name));
                }
                log::info!("{server}: tools changed; now {}", tools.len());
                let mut state = self.state();
                let Some(slot) = state.slot_mut(server) else { return };
                // Only into the connection that was asked.
                if let Phase::Ready(connected) = &slot.phase {
                    if Arc::ptr_eq(&connected.client, &client) {
                        let updated = Connected {
                            client,
                            info: connected.info.clone(),
                            tools: Arc::new(tools),
                            warnings: connected.warnings.clone(),
                        };
                        slot.phase = Phase::Ready(Arc::new(updated));
                        state.registry_changed();
                    }
                }
            }
            // Closed by our own shutdown meanwhile: nothing went wrong.
            Err(Error::Disconnected(CloseReason::Shutdown)) => {
                log::debug!("{server}: not re-listing tools: shutting down");
            }
            Err(err) => log::warn!("{server}: re-listing tools failed: {err}"),
        }
    }

    /// The registry is built again when next read (slots went away).
    pub(super) fn registry_changed(&self) {
        self.state().registry_changed();
    }

    /// Shuts down: ends every client (in parallel) and joins every start
    /// thread, with the lock released. A second caller waits until the
    /// first is done (bounded), so that no caller returns while a server
    /// still runs.
    pub(super) fn shutdown(&self) {
        let mut state = self.state();
        if state.shutting_down {
            // An entry's own `shutdownTimeout` may be long: waited out too,
            // so that nobody returns (and exits) while a server still closes.
            let longest_grace = state
                .slots
                .iter()
                .filter_map(|slot| match &slot.config.transport {
                    TransportConfig::Stdio(stdio) => stdio.shutdown_timeout,
                    TransportConfig::Http(_) => None,
                })
                .chain(self.options.lent.shutdown_grace)
                .max()
                .unwrap_or_default();
            let deadline = Instant::now() + longest_grace + SHUTDOWN_WAIT;
            while !state.shut_down && Instant::now() < deadline {
                state = wait_timeout(&self.settled, state, deadline - Instant::now());
            }
            return;
        }
        // From here no start begins, and a start that ends stores nothing
        // and closes its own client. A slot still starting is settled now,
        // so that nobody waits for it.
        state.shutting_down = true;
        let clients: Vec<Arc<Client>> =
            state.slots.iter().filter_map(|slot| slot.phase.client().cloned()).collect();
        for slot in &mut state.slots {
            if let Phase::Starting { .. } = slot.phase {
                let error = Arc::new(Error::Disconnected(CloseReason::Shutdown));
                slot.set_phase(Phase::Failed { error, stderr_tail: None });
            }
        }
        let starters = std::mem::take(&mut state.starters);
        drop(state);
        self.settled.notify_all();
        close_all(&clients);
        for starter in starters {
            let _ = starter.join();
        }
        // A reconnect on a caller's thread sees the flag when it registers
        // its client, and closes it; wait for that (bounded).
        let deadline = Instant::now() + SHUTDOWN_WAIT;
        let mut state = self.state();
        while state.reconnects > 0 && Instant::now() < deadline {
            state = wait_timeout(&self.settled, state, deadline - Instant::now());
        }
        state.shut_down = true;
        drop(state);
        self.settled.notify_all();
    }
}

/// The registry, or what it is to be built from when next read.
enum RegistryState {
    Built(Arc<ToolRegistry>),
    /// The ready servers at the last change, each with its tools.
    Due(Vec<(Arc<ServerConfig>, Arc<Vec<Tool>>)>),
}

/// Joins the start threads that have ended (at once: they have returned).
fn join_ended(starters: &mut Vec<JoinHandle<()>>) {
    let mut at = 0;
    while at < starters.len() {
        if starters[at].is_finished() {
            let _ = starters.swap_remove(at).join();
        } else {
            at += 1;
        }
    }
}
