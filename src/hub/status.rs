//! What the hub tells a host about its servers: [`ServerStatus`], typed
//! data made from a slot (the library never words it for a terminal), and
//! [`Offered`], an item with the server that offers it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use serde::Serialize;

use super::slot::Phase;
use crate::config::{Scope, ServerConfig};
use crate::error::{CloseReason, Error};
use crate::server_state::ServerState;

/// Something a server offers (a resource, a template, a prompt), with the
/// server's name.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Offered<T> {
    /// The configured name of the server.
    pub server: String,
    /// What it offers.
    #[serde(flatten)]
    pub item: T,
}

/// One server's status: typed data, for a host to show as it likes.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerStatus {
    /// The configured name.
    pub name: String,
    /// Where the entry came from.
    pub scope: Scope,
    /// `stdio`, `http` or `sse` (the one in use once connected); `-` for an
    /// entry that could not be used.
    pub transport: &'static str,
    /// The state.
    pub state: ServerState,
    /// The era the server speaks, once connected.
    pub era: Option<crate::Era>,
    /// The protocol revision in use, once connected.
    pub protocol_version: Option<String>,
    /// The server's own name.
    pub server_name: Option<String>,
    /// The server's version.
    pub server_version: Option<String>,
    /// The first line of the server's instructions.
    pub instructions: Option<String>,
    /// The server's tool names (its own names).
    pub tools: Vec<String>,
    /// Whether the server offers resources.
    pub resources: bool,
    /// Whether the server offers prompts.
    pub prompts: bool,
    /// Why it failed or was lost, with its causes ([`Error::Config`] for
    /// an entry that could not be used).
    pub error: Option<Arc<Error>>,
    /// Warnings about its entry.
    pub warnings: Vec<String>,
    /// The end of a failed stdio server's stderr.
    pub stderr_tail: Option<String>,
    /// When the state was reached.
    pub since: SystemTime,
    /// The file the entry came from, if any.
    pub source: Option<PathBuf>,
    /// The command line it runs (as written, secrets redacted) or the URL
    /// it reaches; for an untrusted project entry, what it would run.
    pub target: Option<String>,
    /// For an untrusted project entry: why it waits (never trusted, or
    /// added or changed since the project was).
    pub unapproved: Option<crate::Unapproved>,
}

impl ServerStatus {
    /// The status of an entry in a state with no connection.
    pub(super) fn new(
        name: &str,
        scope: Scope,
        state: ServerState,
        source: Option<PathBuf>,
    ) -> ServerStatus {
        ServerStatus {
            name: name.to_owned(),
            scope,
            transport: "-",
            state,
            era: None,
            protocol_version: None,
            server_name: None,
            server_version: None,
            instructions: None,
            tools: Vec::new(),
            resources: false,
            prompts: false,
            error: None,
            warnings: Vec::new(),
            stderr_tail: None,
            since: SystemTime::now(),
            source,
            target: None,
            unapproved: None,
        }
    }
}

/// One slot's status; a ready server whose connection was lost shows as failed.
pub(super) fn slot_status(config: &ServerConfig, phase: &Phase, since: SystemTime) -> ServerStatus {
    let mut status =
        ServerStatus::new(&config.name, config.scope, ServerState::Failed, config.source.clone());
    status.transport = config.transport_name();
    status.target = Some(config.target());
    status.since = since;
    status.warnings.clone_from(&config.warnings);
    if !crate::codemode::CODEMODE_AVAILABLE && config.may_expose(crate::config::Exposure::Codemode)
    {
        status.warnings.push(
            "exposure \"codemode\" needs tether built with its \"codemode\" feature; \
             these tools are deferred (found with tool_search) instead"
                .to_owned(),
        );
    }
    match phase {
        Phase::Disabled => status.state = ServerState::Disabled,
        Phase::Starting { .. } => status.state = ServerState::Connecting,
        Phase::Failed { error, stderr_tail } => {
            if let Error::LoginRequired { .. } = error.root() {
                status.state = ServerState::NeedsLogin;
            }
            status.error = Some(Arc::clone(error));
            status.stderr_tail = stderr_tail.clone();
        }
        Phase::Ready(connected) => {
            let (client, info) = (&connected.client, &connected.info);
            status.transport = client.transport_name();
            status.era = Some(info.era);
            status.protocol_version = Some(info.protocol_version.clone());
            status.server_name = Some(info.name.clone());
            status.server_version = Some(info.version.clone());
            status.instructions = info.instructions_first_line().map(str::to_owned);
            status.tools = connected.tools.iter().map(|tool| tool.name.clone()).collect();
            status.resources = info.has_capability("resources");
            status.prompts = info.has_capability("prompts");
            status.warnings.extend(connected.warnings.iter().cloned());
            match client.close_reason().filter(|reason| *reason != CloseReason::Shutdown) {
                Some(reason) => {
                    status.error = Some(Arc::new(Error::Disconnected(reason)));
                    status.stderr_tail =
                        client.stderr_tail().filter(|tail| !tail.trim().is_empty());
                }
                None => status.state = ServerState::Ready,
            }
        }
    }
    status
}
