//! The per-turn refresh, and reconnecting a server that dropped.
//!
//! `refresh` is meant for the start of each agent turn and is cheap when
//! nothing changed: it re-reads the configuration (when the hub was given a
//! loader), restarts servers whose entry changed, stops removed ones, starts
//! added ones, and restarts servers that ran and then stopped. A server that
//! never started is left alone until its entry changes, so a broken server
//! does not add its start timeout to every turn. Slots are replaced whole
//! (a slot's configuration never changes), under the slot list's lock only.

use std::sync::Arc;

use serde::Serialize;

use super::{Hub, ServerState, Shared, Slot};
use crate::client::Client;
use crate::error::{CloseReason, Error};
use crate::sync::lock;

/// What a `refresh` did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RefreshReport {
    /// Servers started because they are new in the configuration.
    pub started: Vec<String>,
    /// Servers restarted because their entry changed or they had stopped.
    pub restarted: Vec<String>,
    /// Servers stopped because they left the configuration.
    pub stopped: Vec<String>,
}

impl RefreshReport {
    /// True when nothing changed.
    pub fn is_empty(&self) -> bool {
        self.started.is_empty() && self.restarted.is_empty() && self.stopped.is_empty()
    }
}

impl Hub {
    /// Brings the hub up to date for a new turn (see the module docs) and
    /// waits for what it started, each at most its start timeout.
    pub fn refresh(&self) -> RefreshReport {
        let shared = &self.core.shared;
        let mut report = RefreshReport::default();
        // One refresh or reconnect at a time: each replaces slots.
        let _exclusive = lock(&shared.reconnecting);
        if shared.is_shutting_down() {
            return report;
        }
        let old_slots = shared.slots();
        let mut new_slots: Vec<Arc<Slot>> = Vec::new();
        let mut retired: Vec<Arc<Slot>> = Vec::new();
        let mut to_start: Vec<Arc<Slot>> = Vec::new();
        match shared.options.reload.as_ref().map(|loader| loader.load()) {
            Some(config) => {
                for server in config.servers {
                    match old_slots.iter().find(|slot| slot.config.name == server.name) {
                        Some(old) if old.config.same_entry(&server) => {
                            new_slots.push(Arc::clone(old))
                        }
                        Some(old) => {
                            retired.push(Arc::clone(old));
                            let slot = Arc::new(Slot::new(server));
                            if slot.config.enabled {
                                to_start.push(Arc::clone(&slot));
                            }
                            report.restarted.push(slot.config.name.clone());
                            new_slots.push(slot);
                        }
                        None => {
                            let slot = Arc::new(Slot::new(server));
                            if slot.config.enabled {
                                to_start.push(Arc::clone(&slot));
                                report.started.push(slot.config.name.clone());
                            }
                            new_slots.push(slot);
                        }
                    }
                }
                for old in &old_slots {
                    if !new_slots.iter().any(|slot| slot.config.name == old.config.name) {
                        retired.push(Arc::clone(old));
                        report.stopped.push(old.config.name.clone());
                    }
                }
                *lock(&shared.failed_entries) = config.failed;
                *lock(&shared.untrusted) = config.untrusted;
            }
            None => new_slots = old_slots.clone(),
        }
        // A server that ran and then stopped restarts.
        for slot in new_slots.iter_mut() {
            if !to_start.iter().any(|starting| Arc::ptr_eq(starting, slot)) && has_dropped(slot) {
                retired.push(Arc::clone(slot));
                *slot = Arc::new(slot.successor());
                to_start.push(Arc::clone(slot));
                report.restarted.push(slot.config.name.clone());
            }
        }
        *lock(&shared.slots) = new_slots;
        close_all(&retired);
        for slot in to_start {
            shared.spawn_start(slot);
        }
        self.wait_started();
        shared.rebuild_registry();
        if !report.is_empty() {
            log::info!("refresh: {report:?}");
        }
        report
    }
}

impl Shared {
    /// The client of a server for a call: a server that dropped since it
    /// was ready is reconnected once, here, before failing.
    pub(super) fn connected_client(self: &Arc<Self>, server: &str) -> Result<Arc<Client>, Error> {
        let client = self.client(server)?;
        if client.close_reason().is_none_or(|reason| reason == CloseReason::Shutdown) {
            return Ok(client);
        }
        let _one_at_a_time = lock(&self.reconnecting);
        if self.is_shutting_down() {
            return Err(Error::Disconnected(CloseReason::Shutdown));
        }
        let Some(current) = self.slot(server) else {
            return Err(Error::UnknownServer(server.to_owned()));
        };
        // Another caller may have reconnected it meanwhile.
        if !has_dropped(&current) {
            return self.client(server);
        }
        log::info!("{server}: the connection dropped; reconnecting once");
        let fresh = Arc::new(current.successor());
        {
            let mut slots = lock(&self.slots);
            for slot in slots.iter_mut() {
                if Arc::ptr_eq(slot, &current) {
                    *slot = Arc::clone(&fresh);
                }
            }
        }
        close_all(&[current]);
        *lock(&self.pending_starts) += 1;
        self.start_server(&fresh);
        self.client(server)
    }
}

/// True when the server was ready and its connection has since closed, or
/// it ran once and a reconnect since failed.
fn has_dropped(slot: &Slot) -> bool {
    let state = lock(&slot.state);
    if state.state == ServerState::Failed
        && slot.ever_ready.load(std::sync::atomic::Ordering::SeqCst)
    {
        return true;
    }
    state.state == ServerState::Ready
        && state
            .client
            .as_ref()
            .and_then(|client| client.close_reason())
            .is_some_and(|reason| reason != CloseReason::Shutdown)
}

/// Closes the clients of these slots, in parallel.
fn close_all(slots: &[Arc<Slot>]) {
    let clients: Vec<Arc<Client>> =
        slots.iter().filter_map(|slot| lock(&slot.state).client.take()).collect();
    std::thread::scope(|scope| {
        for client in &clients {
            let closer = std::thread::Builder::new()
                .name(format!("{}-close", client.server_name()))
                .spawn_scoped(scope, move || client.close());
            if closer.is_err() {
                let _ = client.close();
            }
        }
    });
}
