//! What `initialize` says of the one server served alone (`tether serve
//! NAME`, `tether proxy URL`) before that server has connected.
//!
//! `initialize` is answered at once and never waits for a server (a sign-in
//! may take minutes), so the answer can carry only what is known then. Once
//! the server has connected, what it said of itself beyond the lists (its
//! completions and resource subscriptions, which pass through to it, its
//! `serverInfo` and instructions) is kept here, in a file when one is given
//! (the CLI's `served.json`), by the server's name and where it is; the
//! next serving's `initialize` says it from the first moment. A server that
//! changed is said as it is once it connects again.

use std::path::Path;
use std::sync::Mutex;

use serde_json::Value;

use crate::kept::KeptMap;
use crate::sync::lock;

/// What each server served alone last said of itself, by key.
#[derive(Default)]
pub(super) struct AboutMemory(Mutex<KeptMap<Value>>);

impl AboutMemory {
    /// A memory kept in `file` (none: for this serving only). A file that
    /// cannot be read is an empty memory.
    pub(super) fn kept_in(file: Option<&Path>) -> AboutMemory {
        AboutMemory(Mutex::new(file.map(KeptMap::kept_in).unwrap_or_default()))
    }

    pub(super) fn recall(&self, key: &str) -> Option<Value> {
        lock(&self.0).get(key).cloned()
    }

    /// Keeps `about` for `key`; the file is written only when it changed.
    pub(super) fn remember(&self, key: &str, about: &Value) {
        let change = lock(&self.0).insert(key, about.clone());
        if let Some(change) = change {
            change.write("what the served server said of itself");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kept_across_servings_and_written_when_changed() {
        let dir = std::env::temp_dir().join(format!("tether-about-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("served.json");
        let first = AboutMemory::kept_in(Some(&file));
        let about = json!({"capabilities": {"completions": {}}});
        first.remember("fx stdio", &about);
        assert_eq!(AboutMemory::kept_in(Some(&file)).recall("fx stdio"), Some(about));
        std::fs::write(&file, "not json").unwrap();
        assert_eq!(AboutMemory::kept_in(Some(&file)).recall("fx stdio"), None);
        assert_eq!(AboutMemory::kept_in(None).recall("fx stdio"), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
