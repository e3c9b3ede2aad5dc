//! The URL-mode elicitations open on one connection: those the server asked
//! for (`elicitation/create` with `mode: "url"`) and those a `-32042` error
//! listed, until the server says each is done
//! (`notifications/elicitation/complete`).
//!
//! MCP has clients ignore a completion for an id they do not know or saw
//! completed already, and lets them wait for completions before retrying
//! the request the error refused: the events thread asks [`complete`] whether
//! to hand a completion on, and [`UrlElicitations::wait`] is that wait. A
//! server that opens ids without end keeps at most [`MAX_OPEN`], the oldest
//! forgotten first.
//!
//! [`complete`]: UrlElicitations::complete

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex};
use std::time::Instant;

use crate::sync::{lock, wait_timeout};

/// The most ids kept open at once.
const MAX_OPEN: usize = 256;

#[derive(Default)]
pub(super) struct UrlElicitations {
    open: Mutex<VecDeque<String>>,
    completed: Condvar,
}

impl UrlElicitations {
    /// Notes an id the server opened.
    pub(super) fn opened(&self, id: &str) {
        let mut open = lock(&self.open);
        if !open.iter().any(|known| known == id) {
            if open.len() == MAX_OPEN {
                open.pop_front();
            }
            open.push_back(id.to_owned());
        }
    }

    /// The server says `id` is done: true when it was open (and so the
    /// host should hear of it), false for an unknown or repeated id.
    pub(super) fn complete(&self, id: &str) -> bool {
        let mut open = lock(&self.open);
        let Some(at) = open.iter().position(|known| known == id) else {
            return false;
        };
        open.remove(at);
        self.completed.notify_all();
        true
    }

    /// Waits until none of `ids` is open, at most until `deadline`; true
    /// when none is.
    pub(super) fn wait(&self, ids: &[&str], deadline: Instant) -> bool {
        let mut open = lock(&self.open);
        loop {
            if !ids.iter().any(|id| open.iter().any(|known| known == id)) {
                return true;
            }
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return false;
            };
            open = wait_timeout(&self.completed, open, left);
        }
    }
}
