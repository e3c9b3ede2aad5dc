//! The per-turn refresh.
//!
//! `refresh` is meant for the start of each agent turn and is cheap when
//! nothing changed: it re-reads the configuration (when the hub was given a
//! loader), restarts servers whose entry changed, stops removed ones, starts
//! added ones, and restarts servers that ran and then stopped. A server that
//! never started is left alone until its entry changes, so a broken server
//! does not add its start timeout to every turn. A changed entry gets a new
//! slot (a slot's configuration never changes); all of it is decided under
//! the hub's one lock, and the old connections are closed after it is let go.

use std::sync::Arc;

use serde::Serialize;

use super::connecting::close_all;
use super::slot::Slot;
use super::Hub;
use crate::client::Client;

/// What a `refresh` did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
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
        // Read with no lock held: it reads files and may run `!command`s.
        let config = shared.options.reload.as_ref().map(|loader| loader.load());
        let mut retired: Vec<Arc<Client>> = Vec::new();
        let mut starting: Vec<String> = Vec::new();
        {
            let mut state = shared.state();
            if state.shutting_down {
                return report;
            }
            if let Some(config) = config {
                state.script_limits = config.codemode;
                let mut old_slots: Vec<Option<Slot>> =
                    std::mem::take(&mut state.slots).into_iter().map(Some).collect();
                let mut new_slots = Vec::new();
                for server in config.servers {
                    let old = old_slots
                        .iter_mut()
                        .find(|old| old.as_ref().is_some_and(|old| old.config.name == server.name));
                    match old.and_then(Option::take) {
                        Some(old) if old.config.same_entry(&server) => {
                            new_slots.push(old);
                        }
                        Some(old) => {
                            retired.extend(old.phase.client().cloned());
                            report.restarted.push(server.name.clone());
                            new_slots.push(Slot::new(server));
                        }
                        None => {
                            if server.enabled {
                                report.started.push(server.name.clone());
                            }
                            new_slots.push(Slot::new(server));
                        }
                    }
                }
                for old in old_slots.into_iter().flatten() {
                    retired.extend(old.phase.client().cloned());
                    report.stopped.push(old.config.name.clone());
                }
                state.slots = new_slots;
                // At once: no reader sees a removed or changed server's tools.
                state.registry_changed();
                state.failed_entries = config.failed;
                state.untrusted = config.untrusted;
            }
            let restarted = restart_dropped(shared, &mut state, &mut retired);
            starting.extend(restarted.iter().cloned());
            report.restarted.extend(restarted);
            starting.extend(shared.start_waiting(&mut state));
        }
        close_all(&retired);
        // Only what this refresh started: a reconnect under way elsewhere
        // does not hold the turn up.
        let mut state = shared.state();
        for name in &starting {
            state = shared.wait_for(state, name);
        }
        drop(state);
        shared.registry_changed();
        if !report.is_empty() {
            log::info!("refresh: {report:?}");
        }
        report
    }

    /// Starts again every server that ran and then stopped (a crashed stdio
    /// server, say), and returns their names at once: they start in the
    /// background, as a background hub's do. What `tether serve` calls,
    /// with a backoff, so that the servers behind it come back.
    pub fn restart_dropped(&self) -> Vec<String> {
        let shared = &self.core.shared;
        let mut retired = Vec::new();
        let restarted = {
            let mut state = shared.state();
            if state.shutting_down {
                return Vec::new();
            }
            restart_dropped(shared, &mut state, &mut retired)
        };
        close_all(&retired);
        if !restarted.is_empty() {
            shared.registry_changed();
            log::info!("restarted {restarted:?}");
        }
        restarted
    }
}

/// Under the hub's lock: a server that ran and then stopped restarts (a new
/// slot has never run, so it is not among them); its old client is retired.
fn restart_dropped(
    shared: &Arc<super::state::Shared>,
    state: &mut super::state::HubState,
    retired: &mut Vec<Arc<Client>>,
) -> Vec<String> {
    let mut restarted = Vec::new();
    for index in 0..state.slots.len() {
        if state.slots[index].has_dropped() {
            retired.extend(state.slots[index].phase.client().cloned());
            let name = state.slots[index].config.name.clone();
            if let Some(job) = state.begin_start(index) {
                shared.spawn_start(state, job);
            }
            restarted.push(name);
        }
    }
    restarted
}
