//! The era each HTTP server spoke, by URL, so that a reconnect to a
//! handshake-era server skips the probe (forgotten as soon as the
//! handshake is refused).
//!
//! Owned by whoever makes the connections, never a static: a hub holds one
//! for all its servers, and a host that connects clients itself shares one
//! by cloning their `ClientOptions`. Two hubs in one process keep their own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::protocol::Era;
use crate::sync::lock;

/// Which era each server spoke, by the key its transport names it by.
#[derive(Clone, Default)]
pub(crate) struct EraMemory(Arc<Mutex<HashMap<String, Era>>>);

impl EraMemory {
    pub(crate) fn recall(&self, key: &str) -> Option<Era> {
        lock(&self.0).get(key).copied()
    }

    pub(crate) fn remember(&self, key: &str, era: Era) {
        lock(&self.0).insert(key.to_owned(), era);
    }

    pub(crate) fn forget(&self, key: &str) {
        lock(&self.0).remove(key);
    }
}
