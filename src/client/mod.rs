//! One connection to one MCP server: its era and session start (`era.rs`,
//! `probe.rs`, `handshake.rs`, one `Session`), one request (`exchange.rs`),
//! the lists (`lists.rs`) and the other typed requests (`calls.rs`);
//! for a stateless server also the rounds of input (`rounds.rs`), kept lists
//! (`cache.rs`) and the listen stream (`listen.rs`).
//!
//! The transport's reader calls the [`Router`] for every message: a response
//! goes straight to the channel of the caller waiting for it (found by id in
//! `Pending`), a progress notification to the same channel (resetting that
//! caller's timer), a `ping` is answered on the spot, and everything else
//! (server requests, other notifications) is queued for the `{server}-events`
//! thread (`EventQueue`) so that the reader never waits on the host.
//!
//! Many callers may be in flight at once; each waits on its own channel with a
//! deadline. Ids are never reused, so a late response finds no waiter and is
//! dropped. When the transport closes, every waiter is woken at once with the
//! reason, and later requests fail without being sent.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::error::{CloseReason, Error};
use crate::jsonrpc::Frame;
use crate::protocol::{Era, ServerInfo, UrlElicitation};
use crate::threads::NamedThread;

mod cache;
mod calls;
mod era;
mod eras;
mod events;
mod exchange;
mod handshake;
mod listed;
mod listen;
mod lists;
mod options;
pub(crate) mod param_headers;
mod pending;
mod probe;
mod rounds;
mod router;
mod session;
mod stateless;
mod tasks;
mod url_elicitations;

use crate::transport::{self, Endpoint, Inbox, Transport};
pub(crate) use eras::EraMemory;
#[cfg(feature = "serve")]
pub(crate) use {calls::Sent, exchange::Limits, pending::Sink};

/// A result that may be passed on: parsed, or as the server wrote it
/// ([`Client::call_tool_passed`], `tether serve`).
pub(crate) enum PassedResult {
    /// The result, parsed (a server or a call it could not be taken from
    /// as it came).
    Value(Value),
    /// The result's JSON text, as the server wrote it.
    #[cfg_attr(not(feature = "serve"), allow(dead_code))]
    Text(Vec<u8>),
}

impl PassedResult {
    /// The result as a value (a text parsed after all).
    pub(crate) fn into_value(self) -> Value {
        match self {
            PassedResult::Value(value) => value,
            PassedResult::Text(text) => serde_json::from_slice(&text).unwrap_or(Value::Null),
        }
    }
}
pub use options::{
    CallOptions, CancelHandle, ClientInfo, ClientOptions, Declared, LogCallback, ProgressCallback,
};
use router::Router;
use session::Session;
use stateless::StatelessSession;

/// How long a caller whose frame could not be written waits for the
/// reader to say why the connection ended (it ends at once when the server
/// exited; the supervisor ends what the server left).
const CLOSE_REASON_WAIT: Duration = Duration::from_millis(500);
/// Server requests and notifications waiting for the host; past this, a
/// flooding server's notifications are dropped and its requests refused.
const EVENTS_QUEUE: usize = 1024;
/// Progress updates waiting for one caller; past this, they are dropped.
pub(super) const PROGRESS_QUEUE: usize = 16;
/// How long to wait for a closed server's stderr to end before showing it.
const STDERR_SETTLE: Duration = Duration::from_millis(500);
/// The longest a start waits for the listen stream's acknowledgement.
const LISTEN_ACK_WAIT: Duration = Duration::from_secs(2);
/// How long `close` waits for the listen thread.
const LISTEN_JOIN_WAIT: Duration = Duration::from_secs(1);

/// A connection to one MCP server.
pub struct Client {
    router: Arc<Router>,
    endpoint: Box<dyn Endpoint>,
    info: OnceLock<ServerInfo>,
    options: ClientOptions,
    /// The session, once the start found the server's era.
    session: OnceLock<Session>,
    /// What the last tool list said: output schemas, tools run as tasks.
    listed: listed::ListedTools,
    /// The level a handshake-era server that logs was last told
    /// (`logging/setLevel`), for the whole session.
    told_log_level: Mutex<Option<crate::protocol::LogLevel>>,
}

impl Client {
    /// Starts the transport and runs the `initialize` handshake.
    ///
    /// # Errors
    /// Spawn failures, a handshake that fails or times out (after
    /// `options.request_timeout`), or a revision tether does not speak.
    pub fn connect(
        server: &str,
        transport: &Transport,
        options: ClientOptions,
    ) -> Result<Client, Error> {
        let timeout = options.request_timeout;
        let client = Client::start(server, transport, options)?;
        client.initialize(timeout)?;
        Ok(client)
    }

    /// Starts the transport without the handshake; call [`Client::initialize`] next.
    ///
    /// # Errors
    /// [`Error::Spawn`] when the server cannot be started.
    pub fn start(
        server: &str,
        transport: &Transport,
        options: ClientOptions,
    ) -> Result<Client, Error> {
        let ceiling = options.max_total_timeout;
        Client::over(server, options, |inbox| transport::open(server, transport, inbox, ceiling))
    }

    /// A client over whatever transport `open` starts with the inbox it is
    /// given (the unit tests' in-memory one, say).
    pub(crate) fn over(
        server: &str,
        options: ClientOptions,
        open: impl FnOnce(Arc<dyn Inbox>) -> Result<Box<dyn Endpoint>, Error>,
    ) -> Result<Client, Error> {
        let router = Arc::new(Router::new(server, Arc::clone(&options.host), EVENTS_QUEUE));
        let inbox = Arc::clone(&router) as Arc<dyn Inbox>;
        let endpoint = open(inbox)?;
        Ok(Client {
            router,
            endpoint,
            info: OnceLock::new(),
            options,
            session: OnceLock::new(),
            listed: listed::ListedTools::default(),
            told_log_level: Mutex::new(None),
        })
    }

    /// The connection is gone: why, as far as it is known.
    pub(super) fn disconnected(&self) -> Error {
        Error::Disconnected(self.close_reason().unwrap_or(CloseReason::Eof))
    }

    /// A server that sent only garbage times out; say so rather than just "timed out".
    fn explain_silence(&self, err: Error) -> Error {
        let skipped = self.router.skipped_so_far();
        match err {
            Error::Timeout(timeout) if skipped > 0 => {
                let what = match (self.endpoint.traits().line_per_message, skipped) {
                    (true, 1) => "line that is",
                    (true, _) => "lines that are",
                    (_, 1) => "message that is",
                    _ => "messages that are",
                };
                Error::Protocol(format!(
                    "no valid answer to {} before its time ran out; the server wrote {skipped} \
                     {what} not JSON-RPC",
                    timeout.method
                ))
            }
            other => other,
        }
    }

    /// What the server said about itself, once initialized.
    pub fn server_info(&self) -> Option<&ServerInfo> {
        self.info.get()
    }

    /// The server's name in the configuration.
    pub fn server_name(&self) -> &str {
        self.router.server()
    }

    /// The last 64 KiB the server wrote to stderr (stdio only).
    pub fn stderr_tail(&self) -> Option<String> {
        // A server that is gone may still have its last words in the pipe.
        let wait = if self.close_reason().is_some() { STDERR_SETTLE } else { Duration::ZERO };
        self.endpoint.stderr_tail(wait)
    }

    /// The transport in use: `stdio`, `http` (Streamable HTTP) or `sse`
    /// (legacy HTTP+SSE, also after a fallback).
    pub fn transport_name(&self) -> &'static str {
        self.endpoint.traits().name
    }

    /// Why the connection closed, if it did.
    pub fn close_reason(&self) -> Option<CloseReason> {
        self.router.pending().closed()
    }

    /// Sends a request and waits for its result.
    ///
    /// A `tools/call` (or any request with a progress callback) carries a
    /// progress token, so the server's progress resets the timer.
    ///
    /// # Errors
    /// [`Error::Rpc`] for an error answer, [`Error::Timeout`] (the server is
    /// sent `notifications/cancelled`), [`Error::Cancelled`], or
    /// [`Error::Disconnected`] the moment the connection closes.
    ///
    /// To a stateless (2026-07-28) server the request carries the `_meta`
    /// the revision asks for, goes through as many rounds as the server
    /// asks the host for input (elicitation, sampling, roots), and is sent
    /// again when its answer was lost (never a `tools/call`).
    pub fn request(
        &self,
        method: &str,
        params: Option<Value>,
        options: &CallOptions,
    ) -> Result<Value, Error> {
        // The caller's `_meta` keys first; tether's own take their place.
        let params = match &options.meta {
            Some(meta) => rounds::with_meta(params, meta),
            None => params,
        };
        let answer = match self.stateless_session() {
            Some(session) => self.stateless_request(method, params, session.meta(), options),
            None => self.exchange(method, params.as_ref(), options),
        };
        answer.map_err(|err| self.noted(err))
    }

    /// Notes the pages a `-32042` error lists as open, so that their
    /// completions reach the host and [`Client::wait_elicitations`] waits
    /// for them.
    fn noted(&self, err: Error) -> Error {
        self.router.note_pages(&err);
        err
    }

    /// Waits until the server says each of `elicitations` is done
    /// (`notifications/elicitation/complete`), at most `timeout`; true when
    /// it did. Those of an [`Error::UrlElicitationRequired`] this client
    /// returned, or of a URL-mode `elicitation/create` its host answered;
    /// any other counts as done. The server need not say so (MCP makes it
    /// optional), so a host should also let the person retry by hand.
    pub fn wait_elicitations(&self, elicitations: &[UrlElicitation], timeout: Duration) -> bool {
        let ids: Vec<&str> =
            elicitations.iter().map(|elicitation| elicitation.elicitation_id.as_str()).collect();
        // A timeout too long to add is a day: nobody waits longer at a page.
        let now = Instant::now();
        let deadline = now.checked_add(timeout).unwrap_or(now + Duration::from_secs(86_400));
        self.router.url_elicitations().wait(&ids, deadline)
    }

    /// Sends a notification.
    ///
    /// # Errors
    /// [`Error::Disconnected`] when the connection is closed.
    pub fn notify(&self, method: &str, params: Option<Value>) -> Result<(), Error> {
        if let Some(reason) = self.close_reason() {
            return Err(Error::Disconnected(reason));
        }
        let frame = Frame::notification(method, params.as_ref());
        self.router.send(frame).map_err(|_| self.disconnected())
    }

    /// The stateless server's session, when the server is one.
    fn stateless_session(&self) -> Option<&StatelessSession> {
        match self.session.get() {
            Some(Session::Stateless(session)) => Some(session),
            Some(Session::Handshake) | None => None,
        }
    }

    /// True for a stateless server over Streamable HTTP: headers mirror
    /// what a request names, and ending a stream cancels it.
    fn stateless_http(&self) -> bool {
        self.stateless_session().is_some() && self.endpoint.traits().stream_per_request
    }

    /// Tells the server that the host's roots changed.
    ///
    /// # Errors
    /// [`Error::Disconnected`] when the connection is closed.
    pub fn notify_roots_changed(&self) -> Result<(), Error> {
        if self.era() == Era::Modern {
            // Stateless servers ask for the roots with each request that needs them.
            return Ok(());
        }
        self.notify("notifications/roots/list_changed", None)
    }

    /// The era the server speaks (legacy until the session start says otherwise).
    pub fn era(&self) -> Era {
        self.info.get().map_or(Era::Legacy, |info| info.era)
    }

    /// Starts the `{server}-listen` thread when the server says its lists
    /// may change.
    fn start_listening(&self, info: &ServerInfo, deadline: Instant) {
        let Some(session) = self.stateless_session() else { return };
        if !listen::worth_listening(&info.capabilities) {
            return;
        }
        let lists = listen::filter(&info.capabilities);
        let meta = session.meta().clone();
        let (stop, stopped) = crossbeam_channel::bounded::<()>(0);
        let (refilter, refiltered) = crossbeam_channel::bounded::<()>(1);
        self.router.stateless().refilter_by(refilter);
        let router = Arc::clone(&self.router);
        // One shared stream (stdio) is told; over HTTP the stream just ends.
        let cancel_by_notification = !self.endpoint.traits().stream_per_request;
        let listens_at_once = lists.is_some();
        let thread = NamedThread::spawn(format!("{}-listen", self.router.server()), move || {
            let filter = (&meta, lists.as_ref());
            listen::listen_loop(&router, filter, &stopped, &refiltered, cancel_by_notification);
        });
        let first_ack = self.router.stateless().await_first_ack();
        match thread {
            Ok(thread) => session.listening(thread, stop),
            Err(err) => {
                log::warn!("{}: cannot start the listen thread: {err}", self.router.server());
                return;
            }
        }
        if !listens_at_once {
            return;
        }
        // No change may fall between the first list and the stream: the
        // start waits for its acknowledgement (a server that never sends
        // one is given up on at the start deadline, 2 s at most).
        let wait = deadline.min(Instant::now() + LISTEN_ACK_WAIT);
        self.follow();
        if first_ack.recv_deadline(wait).is_err() {
            log::debug!("{}: the listen stream was not acknowledged in time", self.router.server());
        }
    }

    /// Closes the connection: pending requests fail at once, then the
    /// transport ends (for stdio: stdin, SIGTERM, SIGKILL, reap) and every
    /// thread is joined. Idempotent.
    ///
    /// # Errors
    /// Errors from ending the transport (waiting for the process).
    pub fn close(&self) -> Result<(), Error> {
        if let Some((thread, stop)) = self.stateless_session().and_then(|s| s.take_listener()) {
            // Told while the connection is up, so that stdio can cancel it.
            drop(stop);
            thread.join_within(LISTEN_JOIN_WAIT);
        }
        // Requests still in flight are cancelled first: a server that
        // outlives the connection (one that refuses to end an HTTP session,
        // say) need not finish work nobody waits for. A stateless server
        // takes the end of the response stream as its cancellation.
        if self.close_reason().is_none() && !self.stateless_http() {
            let in_flight = self.router.pending().to_cancel_on_close();
            let cancellations: Vec<Frame> = in_flight
                .into_iter()
                .map(|id| router::cancellation(id, "the client is closing"))
                .collect();
            if let (false, Ok(outlet)) = (cancellations.is_empty(), self.router.outlet()) {
                outlet.send_last(cancellations);
            }
        }
        self.router.closed(CloseReason::Shutdown);
        let result = self.endpoint.close();
        self.router.close_events();
        result.map_err(Error::Io)
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Err(err) = self.close() {
            log::warn!("{}: close failed: {err}", self.router.server());
        }
    }
}

#[cfg(test)]
mod tests;
