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

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::protocol::Era;
use crate::sync::lock;

/// The most servers a file remembers; past it, no new one is added.
const MAX_KEPT: usize = 1_000;
/// The largest file read.
const MAX_FILE: u64 = 1024 * 1024;

/// Which era each server spoke, by the key its transport names it by.
#[derive(Clone, Default)]
pub(crate) struct EraMemory(Arc<Mutex<Remembered>>);

#[derive(Default)]
struct Remembered {
    eras: HashMap<String, Era>,
    /// Where they are kept across runs.
    file: Option<PathBuf>,
}

impl EraMemory {
    /// A memory kept in `file`: what it holds now, and each change written
    /// back. A file that cannot be read is an empty memory.
    pub(crate) fn kept_in(file: &Path) -> EraMemory {
        let eras = crate::bounded_read::read_bytes(file, MAX_FILE)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<HashMap<String, String>>(&bytes).ok())
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(key, era)| match era.as_str() {
                "legacy" => Some((key, Era::Legacy)),
                "modern" => Some((key, Era::Modern)),
                _ => None,
            })
            .take(MAX_KEPT)
            .collect();
        EraMemory(Arc::new(Mutex::new(Remembered { eras, file: Some(file.to_owned()) })))
    }

    pub(crate) fn recall(&self, key: &str) -> Option<Era> {
        lock(&self.0).eras.get(key).copied()
    }

    pub(crate) fn remember(&self, key: &str, era: Era) {
        let mut remembered = lock(&self.0);
        let full = remembered.eras.len() >= MAX_KEPT && !remembered.eras.contains_key(key);
        if full || remembered.eras.get(key) == Some(&era) {
            return;
        }
        remembered.eras.insert(key.to_owned(), era);
        self.keep(remembered);
    }

    pub(crate) fn forget(&self, key: &str) {
        let mut remembered = lock(&self.0);
        if remembered.eras.remove(key).is_some() {
            self.keep(remembered);
        }
    }

    /// Writes the memory to its file, if it has one, with the lock let go.
    fn keep(&self, remembered: std::sync::MutexGuard<'_, Remembered>) {
        let Some(file) = remembered.file.clone() else { return };
        let eras: HashMap<&str, &str> =
            remembered.eras.iter().map(|(key, era)| (key.as_str(), era.as_str())).collect();
        let bytes = serde_json::to_vec_pretty(&eras).unwrap_or_default();
        drop(remembered);
        if let Err(why) = crate::config::file::write_private(&file, &bytes) {
            log::debug!("the servers' eras are not kept: {why}");
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
