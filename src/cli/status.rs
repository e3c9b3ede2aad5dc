//! How a server's status reads: the words, hints and times of `list`, of
//! `list --json`, and of the errors the other commands print.
//!
//! The library's `ServerStatus` is typed data (a state, an `Error` with its
//! causes, a `SystemTime`); everything meant for a person is made here.

use serde_json::{json, Value};
use tether::{Error, ServerState, ServerStatus, Step, Timeout};

#[path = "../clock.rs"]
mod clock;

/// The word `tether list` prints for a state.
pub(super) fn label(state: ServerState) -> &'static str {
    match state {
        ServerState::Connecting => "connecting",
        ServerState::Ready => "connected",
        ServerState::Failed => "failed",
        ServerState::Disabled => "disabled",
        ServerState::Untrusted => "untrusted",
        ServerState::NeedsLogin => "needs login",
        _ => "unknown",
    }
}

/// An error and its causes on one line.
pub(super) fn error_chain(err: &Error) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The status's error on one line, if it has one.
pub(super) fn error_text(status: &ServerStatus) -> Option<String> {
    status.error.as_deref().map(|error| match error.root() {
        // An entry that could not be used: the loader's message says it all.
        Error::Config(message) if status.transport == "-" => message.clone(),
        _ => error_chain(error),
    })
}

/// What to do about a server that is not connected.
pub(super) fn hint(status: &ServerStatus) -> Option<String> {
    let file = status
        .source
        .as_ref()
        .map_or_else(|| "the configuration".to_owned(), |path| path.display().to_string());
    if status.state == ServerState::Untrusted {
        let project = status
            .source
            .as_ref()
            .and_then(|source| source.parent())
            .map_or_else(|| ".".into(), |dir| dir.display().to_string());
        let would_run = status.would_run.as_deref().unwrap_or("?");
        return Some(format!(
            "the project is not trusted; it would run: {would_run}; trust it with: tether trust {project}"
        ));
    }
    match status.error.as_deref()?.root() {
        Error::Config(_) if status.transport == "-" => Some(format!("fix the entry in {file}")),
        Error::Spawn { command, source } if source.kind() == std::io::ErrorKind::NotFound => {
            Some(format!(
                "check that `{command}` is installed and on PATH, or give its full path in {file}"
            ))
        }
        Error::Timeout(Timeout { step: Step::Start { .. }, .. }) => {
            Some(format!("raise \"startTimeout\" in {file}"))
        }
        Error::Timeout(_) => Some(format!("raise \"timeout\" in {file}")),
        // Only when there is something below to read.
        Error::Disconnected(_) if status.stderr_tail.is_some() => {
            Some("the server exited; the end of its stderr is below".to_owned())
        }
        Error::LoginRequired { .. } => Some(format!("sign in with: tether login {}", status.name)),
        _ => None,
    }
}

/// One status as `list --json` prints it.
pub(super) fn to_json(status: &ServerStatus) -> Value {
    json!({
        "name": status.name,
        "scope": status.scope,
        "transport": status.transport,
        "state": status.state,
        "protocol_version": status.protocol_version,
        "server_name": status.server_name,
        "server_version": status.server_version,
        "instructions": status.instructions,
        "tools": status.tools,
        "resources": status.resources,
        "prompts": status.prompts,
        "error": error_text(status),
        "hint": hint(status),
        "warnings": status.warnings,
        "stderr_tail": status.stderr_tail,
        "since": clock::rfc3339(status.since),
    })
}
