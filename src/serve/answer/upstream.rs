//! An upstream server's failure as the client in front hears it: never
//! silence, and never a refusal when the server itself failed.

use serde_json::{json, Value};

use super::{rpc, INTERNAL};
use crate::error::Error;
use crate::hub::Hub;
use crate::jsonrpc::RpcError;

/// The error a client in front gets for `server`'s: the server's own
/// JSON-RPC error as it sent it; otherwise tether's words, with
/// `data.serverFailed` when the server itself failed (it could not be
/// reached, crashed, timed out) and the end of its stderr (`data.stderr`,
/// its last lines), so that a client can tell that from a refusal.
pub(super) fn upstream_error(hub: &Hub, server: &str, err: &Error) -> RpcError {
    upstream_error_with(server, err, || {
        hub.status()
            .into_iter()
            .find(|status| crate::config::Config::same_name(&status.name, server))
            .and_then(|status| status.stderr_tail)
    })
}

/// [`upstream_error`], the end of the server's stderr asked of
/// `stderr_tail` (only when the server itself failed).
pub(in crate::serve) fn upstream_error_with(
    server: &str,
    err: &Error,
    stderr_tail: impl FnOnce() -> Option<String>,
) -> RpcError {
    match err.root() {
        Error::Rpc(error) => error.clone(),
        // Read into pages to open on the way in; sent on as the server's.
        Error::UrlElicitationRequired { message, elicitations } => {
            let elicitations: Vec<Value> = elicitations
                .iter()
                .map(|page| {
                    json!({"mode": "url", "elicitationId": page.elicitation_id,
                           "url": page.url, "message": page.message})
                })
                .collect();
            RpcError {
                code: -32042,
                message: message.clone(),
                data: Some(json!({"elicitations": elicitations})),
            }
        }
        _ if err.is_server_failure() => {
            let tail = stderr_tail();
            let lines: Vec<&str> =
                tail.as_deref().map(|tail| tail.lines().collect()).unwrap_or_default();
            let last = &lines[lines.len().saturating_sub(10)..];
            // The hub's words name the server already; a remote server
            // has no stderr to show.
            let data = match last {
                [] => json!({"serverFailed": true}),
                _ => json!({"serverFailed": true, "stderr": last}),
            };
            RpcError { code: INTERNAL, message: err.chain(), data: Some(data) }
        }
        _ => rpc(INTERNAL, format!("{server}: {}", err.chain())),
    }
}

pub(super) fn log_errors(errors: &[Error]) {
    for err in errors {
        log::warn!("{err}");
    }
}
