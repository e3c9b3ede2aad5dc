//! The gate every call a script makes passes before it is made: is the tool
//! or the server there (a hidden or unknown tool is not; `get_sum` finds
//! `get-sum`, `mcp__dev_radius` the server `dev-radius`), and does the
//! host's hook allow it. A call turned back here is answered to the script
//! at once and recorded, never sent. (The calls limit is kept where a call
//! is asked for, in `mailbox.rs`, so that no call over it is even kept.)

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

/// One script's gate: its hook, and the run it belongs to.
pub(super) struct Gate<'h> {
    pub(super) hook: Option<&'h dyn CallHook>,
    pub(super) parent: ParentCall,
}

impl<'h> Gate<'h> {
    pub(super) fn new(hook: Option<&'h dyn CallHook>, parent: ParentCall) -> Self {
        Gate { hook, parent }
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
        // A server named by a script, in any of its spellings.
        let mut server = None;
        if let Request::Read { server: given, .. } | Request::List { server: Some(given) } =
            &mut request
        {
            match catalog.server_of_namespace(given) {
                Some(found) => {
                    given.clone_from(&found.name);
                    server = Some(found.name.clone());
                }
                None => {
                    let why = catalog.describe(given).err().unwrap_or_default();
                    let error = Arc::new(Error::UnknownServer(given.clone()));
                    let message = format!("{}: {why}", request.name());
                    let outcome = NestedOutcome::Failed(error);
                    let kind = ScriptErrorKind::ToolFailed;
                    return Err(refuse(&request, None, message, kind, outcome));
                }
            }
        }
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
