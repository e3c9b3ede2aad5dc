//! List results a stateless server said may be kept (`ttlMs`), so that a
//! host listing tools, prompts or resources every turn asks the server only
//! when the list may have changed.
//!
//! A whole list (every page) is kept under its method, until the shortest
//! `ttlMs` of its pages runs out, or until the server says that list changed
//! (the router forgets it on the reader thread, before the notification
//! reaches the host, so a re-list it triggers always asks the server). A
//! page without a positive `ttlMs` keeps nothing. `cacheScope` does not
//! matter here: one connection is one authorization context.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::sync::lock;

/// Kept lists, by method.
#[derive(Default)]
pub(super) struct ListCache {
    lists: Mutex<HashMap<&'static str, Kept>>,
    /// Counts the changes the server announced, so that a list fetched
    /// while one arrived is not kept (it may be the old one).
    changes: AtomicU64,
}

struct Kept {
    items: Vec<Value>,
    fresh_until: Instant,
}

/// The list methods, and the notification that makes each stale.
const LISTS: [(&str, &str); 4] = [
    ("tools/list", "notifications/tools/list_changed"),
    ("prompts/list", "notifications/prompts/list_changed"),
    ("resources/list", "notifications/resources/list_changed"),
    ("resources/templates/list", "notifications/resources/list_changed"),
];

impl ListCache {
    /// The list kept for `method`, while fresh.
    pub(super) fn get(&self, method: &str) -> Option<Vec<Value>> {
        let lists = lock(&self.lists);
        let kept = lists.get(method)?;
        (Instant::now() < kept.fresh_until).then(|| kept.items.clone())
    }

    /// How many changes were announced so far: read before fetching a list.
    pub(super) fn changes(&self) -> u64 {
        self.changes.load(Ordering::Acquire)
    }

    /// Keeps `items` for `ttl`, when the method is a list and no change was
    /// announced since `changes` was read.
    pub(super) fn keep(&self, method: &str, items: &[Value], ttl: Duration, changes: u64) {
        if let Some((method, _)) = LISTS.iter().find(|(list, _)| *list == method) {
            if let Some(fresh_until) = Instant::now().checked_add(ttl) {
                let mut lists = lock(&self.lists);
                if self.changes.load(Ordering::Acquire) == changes {
                    lists.insert(method, Kept { items: items.to_vec(), fresh_until });
                }
            }
        }
    }

    /// Forgets what `notification` says changed.
    pub(super) fn changed(&self, notification: &str) {
        if !notification.ends_with("/list_changed") {
            return;
        }
        let mut lists = lock(&self.lists);
        // Under the lock, so that a `keep` either sees the change or is undone.
        self.changes.fetch_add(1, Ordering::AcqRel);
        for (method, _) in LISTS.iter().filter(|(_, says)| *says == notification) {
            lists.remove(method);
        }
    }
}

/// How long a page may be kept: its `ttlMs`, when positive.
pub(super) fn page_ttl(page: &Value) -> Option<Duration> {
    page.get("ttlMs").and_then(Value::as_u64).filter(|&ms| ms > 0).map(Duration::from_millis)
}
