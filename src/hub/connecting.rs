//! One server's connection as the hub makes and ends it: the handshake
//! and first tool list within what is left of the start timeout, and the
//! close of many clients at once, one thread each.

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::slot::Connected;
use crate::client::{CallOptions, Client};
use crate::config::ServerConfig;
use crate::error::Error;

/// Handshake and first tool list, each step given what is left of the start
/// timeout; a timeout says it was the start that ran out.
pub(super) fn handshake(
    client: &Arc<Client>,
    config: &ServerConfig,
    deadline: Instant,
) -> Result<Connected, Error> {
    let remaining =
        || deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
    let started = || -> Result<Connected, Error> {
        let info = client.initialize(remaining())?.clone();
        let mut warnings = Vec::new();
        let mut tools = if info.has_capability("tools") {
            let options = CallOptions {
                timeout: Some(remaining()),
                deadline: Some(deadline),
                ..CallOptions::default()
            };
            let tools = client.list_tools(&options)?;
            warnings.extend(client.tools_left_out());
            tools
        } else {
            Vec::new()
        };
        if let Some(allowed) = &config.tools {
            for name in allowed {
                if !tools.iter().any(|tool| &tool.name == name) {
                    warnings
                        .push(format!("\"tools\" names {name:?}, which the server does not offer"));
                }
            }
            tools.retain(|tool| allowed.contains(&tool.name));
        }
        Ok(Connected { client: Arc::clone(client), info, tools: Arc::new(tools), warnings })
    };
    started().map_err(|error| error.during_start(config.start_timeout))
}

/// Closes these clients in parallel, one `{server}-close` thread each.
pub(super) fn close_all(clients: &[Arc<Client>]) {
    thread::scope(|scope| {
        for client in clients {
            let closer = thread::Builder::new()
                .name(format!("{}-close", client.server_name()))
                .spawn_scoped(scope, move || client.close());
            if closer.is_err() {
                let _ = client.close();
            }
        }
    });
}
