//! Transports: the only code that touches processes and sockets.
//!
//! The boundary is here: [`for_entry`] turns a resolved entry into a
//! [`Transport`], and [`open`] turns a `Transport` into a running
//! connection. A transport attaches its [`Outlet`] (where the client writes
//! frames) to the [`Inbox`] it is given (where its reader delivers) before
//! it delivers anything, and gives back an [`Endpoint`] that ends it.
//! Routing, ids and timeouts live above, in `client`, so that every
//! transport behaves the same for a caller.

mod command;
mod environment;
pub(crate) mod http;
mod launch;
#[cfg(test)]
pub(crate) mod memory;
pub(crate) mod outbox;
mod reading;
pub(crate) mod sse;
mod stderr;
pub(crate) mod stdio;

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::auth::{AuthorizationHandler, TokenProvider};
use crate::config::{self, ServerConfig, TransportConfig};
use crate::error::{CloseReason, Error};
use crate::jsonrpc::{Frame, Message};

pub(crate) use crate::net::socket::Caller;
pub use command::StdioCommand;
pub use http::{sign_in, HttpTarget};

/// How to reach a server.
#[derive(Debug, Clone)]
#[non_exhaustive]
// Made once per connection: the size of a variant does not matter.
#[allow(clippy::large_enum_variant)]
pub enum Transport {
    /// A child process speaking over its stdin and stdout.
    Stdio(StdioCommand),
    /// A server at a URL (Streamable HTTP, or the legacy HTTP+SSE).
    Http(HttpTarget),
}

/// Starts a transport: the one function from a way to reach a server to a
/// running connection. It attaches its outlet to `inbox`, delivers what
/// arrives there, and gives back the endpoint that ends it. Over HTTP, a
/// request may run for `request_ceiling` at most.
///
/// # Errors
/// [`Error::Spawn`] when a program cannot be started, [`Error::Config`] for
/// a URL that is not http(s), [`Error::Io`] when a thread cannot be created.
pub(crate) fn open(
    server: &str,
    transport: &Transport,
    inbox: Arc<dyn Inbox>,
    request_ceiling: Duration,
) -> Result<Box<dyn Endpoint>, Error> {
    match transport {
        Transport::Stdio(command) => Ok(Box::new(stdio::spawn(server, command, inbox)?)),
        Transport::Http(target) => {
            let http = http::HttpTransport::start(server, target.clone(), inbox, request_ceiling)?;
            Ok(Box::new(http))
        }
    }
}

/// What the host lends every connection: for remote ones, who has a person
/// sign in, where sign-ins are kept, and its named token providers; for
/// stdio ones, how long a server may take to exit once its stdin closes
/// (unless its entry says).
#[derive(Clone, Default)]
pub(crate) struct FromHost {
    pub(crate) shutdown_grace: Option<std::time::Duration>,
    pub(crate) authorization: Option<Arc<dyn AuthorizationHandler>>,
    pub(crate) token_store: Option<std::path::PathBuf>,
    pub(crate) providers: Vec<(String, Arc<dyn TokenProvider>)>,
}

/// The transport a resolved entry describes: the one place where
/// configuration becomes a way to reach a server (the environment a stdio
/// server gets, the credentials a remote one is sent).
///
/// # Errors
/// [`Error::Config`] when a remote entry's credentials cannot be had.
pub(crate) fn for_entry(config: &ServerConfig, lent: &FromHost) -> Result<Transport, Error> {
    match &config.transport {
        TransportConfig::Stdio(stdio) => {
            let mut command =
                environment::stdio_command(&config.name, stdio, &config::host_environment());
            command.shutdown_grace = command.shutdown_grace.or(lent.shutdown_grace);
            Ok(Transport::Stdio(command))
        }
        TransportConfig::Http(remote) => {
            let token_provider = match &remote.auth_provider {
                None => None,
                Some(name) => match lent.providers.iter().find(|(known, _)| known == name) {
                    Some((_, provider)) => Some((config.name.clone(), Arc::clone(provider))),
                    None => {
                        return Err(Error::Config(format!(
                            "\"auth\" names the token provider {name:?}, which the host did not register"
                        )))
                    }
                },
            };
            let bearer_token = match &remote.bearer_token_env {
                None => None,
                Some(variable) => match std::env::var(variable) {
                    Ok(token) if !token.is_empty() => Some(token),
                    _ => {
                        return Err(Error::Config(format!(
                            "\"bearerTokenEnv\" names {variable}, which is not set in tether's environment"
                        )))
                    }
                },
            };
            Ok(Transport::Http(HttpTarget {
                url: remote.url.clone(),
                kind: remote.kind,
                headers: remote.headers.clone(),
                header_commands: remote.header_commands.clone(),
                bearer_token,
                endpoint_wait: config.start_timeout,
                oauth: remote.oauth.as_deref().cloned().unwrap_or_default(),
                authorization: lent.authorization.clone(),
                token_store: lent.token_store.clone(),
                token_provider,
                ca_file: remote.ca_file.clone(),
            }))
        }
    }
}

/// Where a transport's reader delivers what arrives.
pub(crate) trait Inbox: Send + Sync {
    /// The transport's outlet, given before anything is delivered, so that
    /// what arrives (a `ping`) can be answered from the first message on.
    fn attach(&self, outlet: Arc<dyn Outlet>);
    /// A frame that is not JSON-RPC was skipped; returns how many so far.
    fn skipped(&self) -> u64;
    /// One well-formed message from the server.
    fn deliver(&self, message: Message);
    /// One well-formed message that came on the response stream of
    /// request `stream_of` (Streamable HTTP); `None` where the server's
    /// messages share one stream.
    fn deliver_on(&self, message: Message, stream_of: Option<i64>) {
        let _ = stream_of;
        self.deliver(message);
    }
    /// Delivers `frame` unparsed when it is the plain success response of
    /// a request whose caller passes the result on (`envelope.rs`); the
    /// request's id when it did. Called before the frame is parsed.
    fn deliver_passed(&self, frame: &[u8]) -> Option<i64> {
        let _ = frame;
        None
    }
    /// The transport will deliver nothing more, for this reason.
    fn closed(&self, reason: CloseReason);
    /// The request with this id cannot be answered, for this reason (an
    /// HTTP error, say); the connection itself goes on.
    fn failed(&self, id: i64, error: Error);
    /// One line of a stdio server's stderr, on the stderr drain's thread:
    /// queued, never waiting on the host.
    fn stderr_line(&self, line: &str) {
        let _ = line;
    }
    /// True while some caller waits for an answer.
    fn waiting(&self) -> bool;
    /// A transport whose stream waiting callers may read themselves
    /// (stdio) gives it here, before delivering anything.
    fn attach_reading(&self, reading: Arc<dyn SharedRead>) {
        let _ = reading;
    }
}

/// A connection's incoming stream, which a waiting caller may read on its
/// own thread instead of being handed its answer (`transport::reading`).
pub(crate) trait SharedRead: Send + Sync {
    /// If nobody reads the stream now, reads and delivers on this thread
    /// until `done()` or `deadline`, and returns true; false at once when
    /// someone else reads it.
    fn lead(&self, deadline: Instant, done: &dyn Fn() -> bool) -> bool;
    /// A caller waits without leading: makes sure the stream is read.
    fn follow(&self);
}

/// How requests travel beyond their bodies: in a session opened by the
/// `initialize` handshake, or statelessly (2026-07-28: over HTTP no session
/// id and no GET stream, the version and the method mirrored in headers,
/// no resumption of a broken response stream).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SessionKind<'a> {
    Handshake,
    Stateless { version: &'a str },
}

/// Where the client writes frames: a pipe, or HTTP requests.
pub(crate) trait Outlet: Send + Sync {
    /// The caller gave up on request `id`: over stateless HTTP, where
    /// ending its response stream is the cancellation, the stream is
    /// closed at its next event (or at the request's deadline).
    fn abandon(&self, id: i64) {
        let _ = id;
    }

    /// Switches how the frames that follow travel (the era probe speaks
    /// stateless first, and a fallback to `initialize` switches back). A
    /// pipe carries both alike.
    fn set_session_kind(&self, kind: SessionKind<'_>) {
        let _ = kind;
    }

    /// Sends one message. Returns once it is written (stdio) or handed to
    /// a worker (HTTP); frames sent one after another from one thread may
    /// still travel side by side over HTTP.
    ///
    /// # Errors
    /// [`outbox::Closed`] once nothing more can be sent.
    fn send(&self, frame: Frame) -> Result<(), outbox::Closed>;

    /// Sends a request whose caller waits for its answer on this thread,
    /// held to `caller`'s deadline. A transport with one exchange per
    /// request (`Traits::exchange_per_request`) may post it right here;
    /// others send it as any frame.
    ///
    /// # Errors
    /// As [`Outlet::send`].
    fn send_waiting(&self, frame: Frame, caller: &Caller<'_>) -> Result<(), outbox::Closed> {
        let _ = caller;
        self.send(frame)
    }

    /// Sends the last messages before the connection closes (the
    /// cancellations of requests still in flight), so that they are on
    /// their way before it does; what cannot be sent is dropped.
    fn send_last(&self, frames: Vec<Frame>) {
        for frame in frames {
            if self.send(frame).is_err() {
                return;
            }
        }
    }

    /// Completes the session start once `initialize` has been answered with
    /// `protocol_version`: sends `initialized` so that it is on the wire
    /// before this returns (no request can overtake it), and opens whatever
    /// else the session needs before the first request (HTTP: the GET stream
    /// for server-initiated messages, waited for until it answers, at most
    /// until `deadline`).
    ///
    /// The default suits one ordered stream (a pipe): written is enough.
    ///
    /// # Errors
    /// `initialized` could not be sent.
    fn begin_session(
        &self,
        initialized: Frame,
        _protocol_version: &str,
        _deadline: Instant,
    ) -> Result<(), Error> {
        self.send(initialized).map_err(|outbox::Closed| Error::Disconnected(CloseReason::Eof))
    }
}

/// What a running transport does differently, as it states it: the client
/// decides by these, never by which transport it has. (An HTTP endpoint
/// that fell back to the legacy HTTP+SSE transport states other traits
/// from then on.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Traits {
    /// The transport in use, as `list` shows it (`stdio`, `http`, `sse`).
    pub(crate) name: &'static str,
    /// It can carry the stateless revision (2026-07-28); the legacy
    /// HTTP+SSE transport belongs to the handshake era.
    pub(crate) carries_stateless: bool,
    /// Each request is an exchange of its own (HTTP): it carries its
    /// deadline down, and a caller with no cancel handle may post it on its
    /// own thread, waiting in the transport's reads.
    pub(crate) exchange_per_request: bool,
    /// A stateless request gets a response stream of its own (Streamable
    /// HTTP): ending it is the request's cancellation, and its name and
    /// `x-mcp-header` parameters are mirrored in headers.
    pub(crate) stream_per_request: bool,
    /// A server may leave what it does not know unanswered on one ordered
    /// stream (stdio), so an era probe waits only part of the start.
    pub(crate) probe_may_go_unanswered: bool,
    /// Messages are lines (stdio), as an error about garbage says.
    pub(crate) line_per_message: bool,
}

/// A running transport, as the client sees it once connected.
pub(crate) trait Endpoint: Send + Sync {
    /// Ends the transport and joins its threads; idempotent.
    fn close(&self) -> io::Result<()>;
    /// The last bytes the server wrote to stderr, if it has one; waits up
    /// to `wait_for_end` for the stream to end first.
    fn stderr_tail(&self, wait_for_end: std::time::Duration) -> Option<String>;
    /// What it is and does differently (see [`Traits`]).
    fn traits(&self) -> Traits;
    /// What names this server across connections, under which its era is
    /// remembered: a URL does; a process, new each time, does not.
    fn era_key(&self) -> Option<&str> {
        None
    }
}
