//! The gate every call a script makes passes before it is made: is the tool
//! there (a hidden or unknown one is not; `get_sum` finds `get-sum`), is
//! the script within its calls limit, and does the host's hook allow it.
//! A call turned back here is answered to the script at once and recorded,
//! never sent.

use std::sync::Arc;
use std::time::Duration;

use super::calls::Request;
use super::{
    CallHook, Catalog, NestedCall, NestedOutcome, ParentCall, PlannedCall, ScriptErrorKind, Verdict,
};
use crate::error::Error;

/// A call let through: its id in the script, what it asks, its server.
pub(super) struct Call {
    pub(super) id: u32,
    pub(super) request: Request,
    pub(super) server: Option<String>,
}

/// A call turned back, and what the script is told of it.
pub(super) struct Refusal {
    pub(super) id: u32,
    pub(super) record: NestedCall,
    pub(super) message: String,
    pub(super) kind: ScriptErrorKind,
}

/// One script's gate: its hook, the run it belongs to, and its count.
pub(super) struct Gate<'h> {
    pub(super) hook: Option<&'h dyn CallHook>,
    pub(super) parent: ParentCall,
    max_calls: usize,
    /// Calls counted against the limit so far.
    made: usize,
}

impl<'h> Gate<'h> {
    pub(super) fn new(
        hook: Option<&'h dyn CallHook>,
        parent: ParentCall,
        max_calls: usize,
    ) -> Self {
        Gate { hook, parent, max_calls, made: 0 }
    }

    /// Lets a call through, or says why not. `at`: the script's time, for
    /// the record of a call turned back.
    pub(super) fn admit(
        &mut self,
        catalog: &Catalog,
        id: u32,
        mut request: Request,
        at: Duration,
    ) -> Result<Call, Box<Refusal>> {
        let refuse = |request: &Request, server, message, kind, outcome| {
            let record = NestedCall {
                name: request.name().to_owned(),
                server,
                arguments: request.arguments(),
                started: at,
                elapsed: Duration::ZERO,
                outcome,
            };
            Box::new(Refusal { id, record, message, kind })
        };
        let mut server = match &request {
            Request::Read { server, .. } => Some(server.clone()),
            Request::List { server } => server.clone(),
            Request::Tool { .. } => None,
        };
        let (mut tool, mut annotations) = (None, None);
        if let Request::Tool { name, .. } = &mut request {
            match catalog.resolve(name) {
                Ok(entry) => {
                    // `get_sum` for `get-sum`: the call goes out by the real name.
                    name.clone_from(&entry.qualified_name);
                    server = Some(entry.server.clone());
                    tool = Some(entry.tool.name.clone());
                    annotations = entry.tool.annotations.clone();
                }
                // A server not connected yet may still be starting: the hub
                // waits for it, or says why it is not there.
                Err(message) => match starting_server(catalog, name) {
                    Some(starting) => server = Some(starting),
                    None => {
                        let error = Arc::new(Error::UnknownTool(name.clone()));
                        let outcome = NestedOutcome::Failed(error);
                        let kind = ScriptErrorKind::UnknownTool;
                        return Err(refuse(&request, None, message, kind, outcome));
                    }
                },
            }
        }
        if request.counts() {
            if self.made >= self.max_calls {
                let message = format!(
                    "{}: not made: a script may make {} calls",
                    request.name(),
                    self.max_calls
                );
                let outcome = NestedOutcome::Refused(message.clone());
                return Err(refuse(&request, server, message, ScriptErrorKind::Limit, outcome));
            }
            self.made += 1;
        }
        if let (Some(hook), Some(server_name)) = (self.hook, &server) {
            if !matches!(request, Request::List { .. }) {
                let planned = PlannedCall {
                    name: request.name().to_owned(),
                    server: server_name.clone(),
                    tool,
                    arguments: request.arguments(),
                    annotations,
                    parent: self.parent.clone(),
                };
                if let Verdict::Deny(reason) = hook.before_call(&planned) {
                    let message = format!("{}: denied by the host: {reason}", request.name());
                    let outcome = NestedOutcome::Denied(reason);
                    return Err(refuse(
                        &request,
                        server,
                        message,
                        ScriptErrorKind::Denied,
                        outcome,
                    ));
                }
            }
        }
        Ok(Call { id, request, server })
    }

    /// Tells the hook a call ended.
    pub(super) fn ended(&self, call: &NestedCall) {
        if let Some(hook) = self.hook {
            hook.after_call(call, &self.parent);
        }
    }
}

/// The server, not connected when the script started, whose namespace the
/// name is in.
fn starting_server(catalog: &Catalog, name: &str) -> Option<String> {
    catalog
        .servers
        .iter()
        .find(|summary| {
            !summary.connected
                && name.starts_with(&format!("{}__", catalog.namespace(&summary.name)))
        })
        .map(|summary| summary.name.clone())
}
