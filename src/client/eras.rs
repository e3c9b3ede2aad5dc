//! The era each server spoke, by the key its transport names it by (an
//! HTTP server's URL, a stdio server's command line), so that a reconnect
//! to a handshake-era server skips the probe (forgotten as soon as the
//! handshake is refused).
//!
//! Owned by whoever makes the connections, never a static: a hub holds one
//! for all its servers, and a host that connects clients itself shares one
//! by cloning their `ClientOptions`. Two hubs in one process keep their own.
//! A hub given a file (`HubOptions::with_era_file`, the CLI's `eras.json`)
//! keeps it across runs: the era of a server is then found once, not at
//! every start, and never depends on how fast it started that time.

use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::kept::KeptMap;
use crate::protocol::Era;
use crate::sync::lock;

/// Which era each server spoke, by the key its transport names it by.
#[derive(Clone, Default)]
pub(crate) struct EraMemory(Arc<Mutex<KeptMap<Era>>>);

impl EraMemory {
    /// A memory kept in `file`: what it holds now, and each change written
    /// back. A file that cannot be read is an empty memory.
    pub(crate) fn kept_in(file: &Path) -> EraMemory {
        EraMemory(Arc::new(Mutex::new(KeptMap::kept_in(file))))
    }

    pub(crate) fn recall(&self, key: &str) -> Option<Era> {
        lock(&self.0).get(key).copied()
    }

    pub(crate) fn remember(&self, key: &str, era: Era) {
        let change = lock(&self.0).insert(key, era);
        if let Some(change) = change {
            change.write("the servers' eras");
        }
    }

    pub(crate) fn forget(&self, key: &str) {
        let change = lock(&self.0).remove(key);
        if let Some(change) = change {
            change.write("the servers' eras");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_across_memories_and_forgotten() {
        let dir = std::env::temp_dir().join(format!("tether-eras-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("eras.json");
        let first = EraMemory::kept_in(&file);
        first.remember("stdio:[\"py\"]", Era::Legacy);
        first.remember("https://x/mcp", Era::Modern);
        let second = EraMemory::kept_in(&file);
        assert_eq!(second.recall("stdio:[\"py\"]"), Some(Era::Legacy));
        assert_eq!(second.recall("https://x/mcp"), Some(Era::Modern));
        second.forget("stdio:[\"py\"]");
        assert_eq!(EraMemory::kept_in(&file).recall("stdio:[\"py\"]"), None);
        std::fs::write(&file, "not json").unwrap();
        assert_eq!(EraMemory::kept_in(&file).recall("https://x/mcp"), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
