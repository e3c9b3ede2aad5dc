//! The states a configured server can be in, as `status` and `tether list`
//! show them.
//!
//! A leaf: the hub decides the state, the error type names it
//! (`Error::NotConnected`), and neither has to import the other for it.

use serde::Serialize;

/// A server's state, as `status` and `tether list` show it. One
/// vocabulary everywhere: [`ServerState::as_str`], its JSON and `tether
/// list --json` say `connecting`, `connected`, `failed`, `disabled`,
/// `untrusted`, `needsLogin`, `closed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum ServerState {
    /// Starting.
    Connecting,
    /// Connected; its tools are in the registry.
    #[serde(rename = "connected")]
    Ready,
    /// Could not start, or its entry is invalid; see `error`.
    Failed,
    /// `enabled: false`.
    Disabled,
    /// A project server in a project that is not trusted.
    Untrusted,
    /// An HTTP server that needs `tether login`.
    NeedsLogin,
    /// Closed with the hub (`shutdown`).
    Closed,
}

impl ServerState {
    /// The word for it, as its JSON and `tether list --json` say it
    /// (`connected`, `needsLogin`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            ServerState::Connecting => "connecting",
            ServerState::Ready => "connected",
            ServerState::Failed => "failed",
            ServerState::Disabled => "disabled",
            ServerState::Untrusted => "untrusted",
            ServerState::NeedsLogin => "needsLogin",
            ServerState::Closed => "closed",
        }
    }
}
