//! The one session value a client holds once its start found the server's
//! era: the `initialize` handshake's session (which the transport keeps:
//! the session id, the GET stream), or a stateless (2026-07-28) server's,
//! whose state is all on this side: the `_meta` every request carries, the
//! `{server}-listen` thread that keeps `subscriptions/listen` open, and
//! the tools whose parameters travel in headers.
//!
//! Set once by the start; a client that was never initialized speaks as
//! the handshake era does.

use super::stateless::StatelessSession;

/// How this client's requests travel.
pub(super) enum Session {
    /// Opened by `initialize`: nothing more to keep here.
    Handshake,
    /// A stateless server's session.
    Stateless(Box<StatelessSession>),
}
