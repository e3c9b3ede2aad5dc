//! One configured server's place in the hub: its entry and one [`Phase`]
//! (disabled, starting, ready with its client and tools, or failed with a
//! typed error). One enum per slot, never a flag per fact: every change of
//! state is one assignment, made under the hub's lock (`state.rs`).

use std::sync::Arc;
use std::time::SystemTime;

use crate::client::Client;
use crate::config::ServerConfig;
use crate::error::{CloseReason, Error};
use crate::protocol::{ServerInfo, Tool};
use crate::server_state::ServerState;

/// One configured server.
pub(super) struct Slot {
    /// Never changes: a changed entry gets a new slot.
    pub(super) config: Arc<ServerConfig>,
    pub(super) phase: Phase,
    /// The start this slot belongs to; a start stores its outcome only
    /// while this still names it.
    pub(super) start_id: u64,
    /// It was ready once (a restart keeps the slot; a changed entry gets a
    /// new one): a later failure is a server that stopped, which refresh
    /// restarts and a call reconnects.
    pub(super) ever_ready: bool,
    /// When the phase began.
    pub(super) since: SystemTime,
    /// The resources the host subscribed to: subscribed again by each new
    /// connection (a restart, a reconnect).
    pub(super) subscribed: std::collections::BTreeSet<String>,
}

impl Slot {
    /// What the server is for: its configured description, else (once it
    /// connected) the first line of its instructions.
    pub(super) fn about(&self) -> Option<String> {
        self.config.description.clone().or_else(|| match &self.phase {
            Phase::Ready(connected) => connected.info.instructions_first_line().map(str::to_owned),
            _ => None,
        })
    }
}

/// Where a server is.
#[derive(Clone)]
pub(super) enum Phase {
    /// `enabled: false`.
    Disabled,
    /// Connecting: a first start, a restart or a reconnect. The client is
    /// here once its transport is up, so that shutdown can end it.
    Starting { client: Option<Arc<Client>> },
    /// Connected.
    Ready(Arc<Connected>),
    /// It could not start, or a reconnect failed.
    Failed { error: Arc<Error>, stderr_tail: Option<String> },
}

/// A connected server.
pub(super) struct Connected {
    pub(super) client: Arc<Client>,
    pub(super) info: ServerInfo,
    /// Replaced whole when the server's tool list changes.
    pub(super) tools: Arc<Vec<Tool>>,
    /// Warnings about the entry found while connecting.
    pub(super) warnings: Vec<String>,
}

/// A start to run: which server, for which slot.
pub(super) struct StartJob {
    pub(super) config: Arc<ServerConfig>,
    pub(super) start_id: u64,
}

impl Phase {
    /// The client, when there is one.
    pub(super) fn client(&self) -> Option<&Arc<Client>> {
        match self {
            Phase::Starting { client } => client.as_ref(),
            Phase::Ready(connected) => Some(&connected.client),
            Phase::Disabled | Phase::Failed { .. } => None,
        }
    }
}

impl Slot {
    pub(super) fn new(config: ServerConfig) -> Slot {
        let phase = if config.enabled { Phase::Starting { client: None } } else { Phase::Disabled };
        Slot {
            config: Arc::new(config),
            phase,
            start_id: 0,
            ever_ready: false,
            since: SystemTime::now(),
            subscribed: std::collections::BTreeSet::new(),
        }
    }

    /// True when the server was ready and its connection has since closed,
    /// or it ran once and a reconnect since failed.
    pub(super) fn has_dropped(&self) -> bool {
        match &self.phase {
            Phase::Ready(connected) => is_lost(&connected.client),
            Phase::Failed { .. } => self.ever_ready,
            Phase::Disabled | Phase::Starting { .. } => false,
        }
    }

    pub(super) fn set_phase(&mut self, phase: Phase) {
        self.phase = phase;
        self.since = SystemTime::now();
    }
}

/// True when the connection closed for any reason but our own shutdown.
pub(super) fn is_lost(client: &Client) -> bool {
    client.close_reason().is_some_and(|reason| reason != CloseReason::Shutdown)
}

impl Phase {
    /// The state word for `NotConnected`.
    pub(super) fn state_word(&self) -> ServerState {
        match self {
            Phase::Disabled => ServerState::Disabled,
            Phase::Starting { .. } => ServerState::Connecting,
            Phase::Ready(_) | Phase::Failed { .. } => ServerState::Failed,
        }
    }
}
