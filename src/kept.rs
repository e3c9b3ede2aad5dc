//! A small map kept in a JSON file across runs, for what tether learns of
//! each server and would otherwise learn again at every start: the era it
//! speaks (`client/eras.rs`), what a server served alone says of itself
//! (`serve/about.rs`).
//!
//! The file is read once, bounded in size (a planted file is refused, not
//! read whole) and in entries; an entry that does not read as a value is
//! skipped, and a file that cannot be read is an empty map. A change is
//! written back whole and privately, only when a value changed; the write
//! is handed back as a [`KeptWrite`], so that its owner writes with its
//! lock let go.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// The most entries a file keeps; past it, no new key is added.
const MAX_KEPT: usize = 1_000;
/// The largest file read.
const MAX_FILE: u64 = 1024 * 1024;

/// Values by key, and the file they are kept in (none: this run only).
pub(crate) struct KeptMap<V> {
    entries: HashMap<String, V>,
    file: Option<PathBuf>,
}

impl<V> Default for KeptMap<V> {
    fn default() -> Self {
        KeptMap { entries: HashMap::new(), file: None }
    }
}

/// A change to write to the map's file.
#[must_use]
pub(crate) struct KeptWrite {
    file: PathBuf,
    bytes: Vec<u8>,
}

impl KeptWrite {
    /// Writes it; `what` names the map in the log when it cannot be kept.
    pub(crate) fn write(self, what: &str) {
        if let Err(why) = crate::config::file::write_private(&self.file, &self.bytes) {
            log::debug!("{what} are not kept: {why}");
        }
    }
}

impl<V: Serialize + DeserializeOwned + PartialEq> KeptMap<V> {
    /// The map `file` holds now, each change to be written back to it.
    pub(crate) fn kept_in(file: &Path) -> KeptMap<V> {
        let entries = crate::bounded_read::read_bytes(file, MAX_FILE)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<HashMap<String, Value>>(&bytes).ok())
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(key, value)| Some((key, serde_json::from_value(value).ok()?)))
            .take(MAX_KEPT)
            .collect();
        KeptMap { entries, file: Some(file.to_owned()) }
    }

    pub(crate) fn get(&self, key: &str) -> Option<&V> {
        self.entries.get(key)
    }

    /// Sets `key`'s value; the write when that changed the map.
    pub(crate) fn insert(&mut self, key: &str, value: V) -> Option<KeptWrite> {
        let full = self.entries.len() >= MAX_KEPT && !self.entries.contains_key(key);
        if full || self.entries.get(key) == Some(&value) {
            return None;
        }
        self.entries.insert(key.to_owned(), value);
        self.to_write()
    }

    /// Forgets `key`; the write when it was there.
    pub(crate) fn remove(&mut self, key: &str) -> Option<KeptWrite> {
        self.entries.remove(key)?;
        self.to_write()
    }

    fn to_write(&self) -> Option<KeptWrite> {
        let file = self.file.clone()?;
        let bytes = serde_json::to_vec_pretty(&self.entries).unwrap_or_default();
        Some(KeptWrite { file, bytes })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_across_runs_written_when_changed_and_forgotten() {
        let dir = std::env::temp_dir().join(format!("tether-kept-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("kept.json");
        let mut first = KeptMap::<String>::kept_in(&file);
        first.insert("a", "one".into()).expect("a change").write("test values");
        assert!(first.insert("a", "one".into()).is_none(), "no change, no write");
        first.insert("b", "two".into()).unwrap().write("test values");
        let mut second = KeptMap::<String>::kept_in(&file);
        assert_eq!(second.get("a").map(String::as_str), Some("one"));
        second.remove("a").unwrap().write("test values");
        assert_eq!(KeptMap::<String>::kept_in(&file).get("a"), None);
        assert_eq!(KeptMap::<String>::kept_in(&file).get("b").map(String::as_str), Some("two"));
        // An entry of another shape is skipped; a broken file is empty.
        std::fs::write(&file, r#"{"a": 1, "b": "two"}"#).unwrap();
        let read = KeptMap::<String>::kept_in(&file);
        assert_eq!((read.get("a"), read.get("b").map(String::as_str)), (None, Some("two")));
        std::fs::write(&file, "not json").unwrap();
        assert_eq!(KeptMap::<String>::kept_in(&file).get("b"), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
