//! Transports: the only code that touches processes and sockets.
//!
//! A transport is handed an [`Inbox`] to deliver what it reads and a channel
//! of [`Outgoing`] frames to write, and gives back an [`Endpoint`] that can end
//! it. Routing, ids and timeouts live above, in `client`, so that every
//! transport behaves the same for a caller. The reader thread delivers straight
//! into the inbox (no extra hop), which keeps a call to two thread hand-offs
//! each way.

pub(crate) mod stdio;

use std::io;

use crate::error::CloseReason;
use crate::jsonrpc::Message;

/// Where a transport's reader delivers what arrives.
pub(crate) trait Inbox: Send + Sync {
    /// One well-formed message from the server.
    fn deliver(&self, message: Message);
    /// The transport will deliver nothing more, for this reason.
    fn closed(&self, reason: CloseReason);
}

/// What the client gives a transport's writer.
pub(crate) enum Outgoing {
    /// One encoded JSON-RPC message, without framing.
    Frame(Vec<u8>),
    /// Stop writing and close the output (stdin of a server).
    Close,
}

/// A running transport, as the client sees it once connected.
pub(crate) trait Endpoint: Send + Sync {
    /// Ends the transport and joins its threads; idempotent.
    fn close(&self) -> io::Result<()>;
    /// The last bytes the server wrote to stderr, if it has one.
    fn stderr_tail(&self) -> Option<String>;
}
