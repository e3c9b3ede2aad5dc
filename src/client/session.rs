//! The one session value a client holds once its start found the server's
//! era: the `initialize` handshake's session (which the transport keeps:
//! the session id, the GET stream), or a stateless (2026-07-28) server's,
//! whose state is all on this side: the `_meta` every request carries, the
//! `{server}-listen` thread that keeps `subscriptions/listen` open, and
//! the tools whose parameters travel in headers.
//!
//! Set once by the start; a client that was never initialized speaks as
//! the handshake era does.

use std::collections::HashMap;
use std::sync::Mutex;

use crossbeam_channel::Sender;
use serde_json::Value;

use super::param_headers::{self, ParamHeader};
use crate::sync::lock;
use crate::threads::NamedThread;

/// How this client's requests travel.
pub(super) enum Session {
    /// Opened by `initialize`: nothing more to keep here.
    Handshake,
    /// A stateless server's session.
    Stateless(Box<StatelessSession>),
}

/// What a client keeps for a stateless server.
pub(super) struct StatelessSession {
    meta: Value,
    /// The `{server}-listen` thread, and what stops it.
    listener: Mutex<Option<(NamedThread, Sender<()>)>>,
    /// The tools whose parameters go into headers (`x-mcp-header`), as the
    /// last tool list said, and why each tool it left out was left out.
    tools: Mutex<HeaderTools>,
}

#[derive(Default)]
struct HeaderTools {
    annotated: HashMap<String, Vec<ParamHeader>>,
    left_out: Vec<String>,
}

impl StatelessSession {
    /// A session whose every request carries `meta`.
    pub(super) fn new(meta: Value) -> StatelessSession {
        StatelessSession { meta, listener: Mutex::new(None), tools: Mutex::default() }
    }

    /// The `_meta` every request carries.
    pub(super) fn meta(&self) -> &Value {
        &self.meta
    }

    /// The listen thread started; `stop` ends it when dropped.
    pub(super) fn listening(&self, thread: NamedThread, stop: Sender<()>) {
        *lock(&self.listener) = Some((thread, stop));
    }

    /// The listen thread and what stops it, taken for the close.
    pub(super) fn take_listener(&self) -> Option<(NamedThread, Sender<()>)> {
        lock(&self.listener).take()
    }

    /// What the last tool list said of parameters in headers.
    pub(super) fn listed(
        &self,
        annotated: HashMap<String, Vec<ParamHeader>>,
        left_out: Vec<String>,
    ) {
        *lock(&self.tools) = HeaderTools { annotated, left_out };
    }

    /// Why each tool the last list left out was left out.
    pub(super) fn tools_left_out(&self) -> Vec<String> {
        lock(&self.tools).left_out.clone()
    }

    /// The headers a call of `tool` with `arguments` carries.
    ///
    /// # Errors
    /// An argument the annotations name cannot travel in a header.
    pub(super) fn headers_for(
        &self,
        tool: &str,
        arguments: &Value,
    ) -> Result<Vec<(String, String)>, String> {
        match lock(&self.tools).annotated.get(tool) {
            Some(headers) => param_headers::for_call(headers, arguments),
            None => Ok(Vec::new()),
        }
    }
}
