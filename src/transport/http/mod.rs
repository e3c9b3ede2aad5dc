//! Remote servers: Streamable HTTP, and the legacy HTTP+SSE transport, over
//! blocking ureq.
//!
//! Every message is one POST. `{server}-http-N` worker threads (started as
//! needed, so a long tool call never holds up another) do the POST and
//! deliver what comes back — a JSON body, or an SSE stream of progress,
//! server requests and finally the response — into the inbox, while the
//! caller waits for its answer as over stdio. So timeouts and cancellation
//! are the client's, exactly as over stdio.
//!
//! A request of an established session whose caller waits with no cancel
//! handle skips the hand-off (two thread switches a call): the caller hands
//! it over with `send_waiting` and POSTs it on its own thread
//! (`post_inline`), its I/O held to the caller's deadline (`Caller::held`),
//! which also hands it progress as it comes. Who posts travels down every
//! call as a [`Poster`], so nothing below decides by which thread it is on.
//! What could hold it longer — a session renewal, a sign-in — goes to a
//! worker, which sends the request anew (the server did not take it: 401,
//! 403, 404).
//!
//! The session starts in order: `Client::initialize` hands
//! `notifications/initialized` to `begin_session`, which POSTs it on the
//! caller's thread (so no request can overtake it) and then opens the
//! `{server}-http-get` stream and waits, within the start timeout, until the
//! server answered it; only then does the first request go out.
//!
//! This file is the connection's state, its start and close, and the choice
//! between a worker and the caller's own thread; `workers.rs` is the pool,
//! `streamable.rs` Streamable HTTP (session, renewal, the GET stream, one
//! POST classified by `outcome.rs` and acted on), `answer.rs` a request's
//! answer (resumed when its stream breaks), `legacy.rs` the 2024-11-05
//! HTTP+SSE transport, `wire.rs` what every exchange shares (headers,
//! delivery, errors), `target.rs` `HttpTarget`, `poster.rs` `Poster`.
//!
//! Nothing blocks shutdown: `close` ends the session (DELETE), then shuts the
//! agent down, which wakes every blocked read at once, and joins every thread.

mod answer;
mod legacy;
mod outcome;
mod poster;
mod streamable;
mod target;
mod wire;
mod workers;

pub use target::{sign_in, HttpTarget};

use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use crate::auth::OAuth;
use crate::config::HttpKind;
use crate::error::{CloseReason, Error};
use crate::jsonrpc::Frame;
use crate::net::resolver::LiteralFirstResolver;
use crate::net::socket::Caller;
use crate::net::tls;
use crate::sync::{lock, ThrottledWarning};
use crate::threads::NamedThread;
use crate::transport::outbox::Closed;
use crate::transport::{Endpoint, Inbox, Outlet, SessionKind, Traits};

use poster::Poster;
use wire::Posted;

/// Frames waiting for a worker; past this, callers wait and answers to the
/// server's requests are dropped.
const MAX_QUEUED: usize = 256;
/// At most this many POSTs in flight to one server.
const MAX_WORKERS: usize = 32;
/// How long shutdown waits for each thread.
const JOIN_WAIT: Duration = Duration::from_secs(2);
/// Retries of a request that is safe to repeat, and the pauses before them.
const RETRY_PAUSES: [Duration; 2] = [Duration::from_millis(250), Duration::from_millis(1000)];
/// How often a response stream may be resumed before giving up.
const MAX_RESUMES: usize = 10;
/// The reconnection delay when the server gave none.
const DEFAULT_RETRY: Duration = Duration::from_secs(1);
/// The longest reconnection delay honoured, whatever the server asks.
const MAX_RETRY: Duration = Duration::from_secs(30);
/// The longest pause between attempts to reopen the GET stream.
const MAX_GET_BACKOFF: Duration = Duration::from_secs(30);
/// How long the last messages before a close may take (`send_last`).
const CANCEL_WAIT: Duration = Duration::from_secs(1);
/// How long a legacy server may take to name its endpoint.
const ENDPOINT_WAIT: Duration = Duration::from_secs(30);

/// Which transport the connection settled on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Mode {
    /// `Auto`, before `initialize` answered.
    #[default]
    Undecided,
    Streamable,
    Sse,
}

/// A connection to a remote server; both the outlet and the endpoint.
pub(crate) struct HttpTransport {
    server: String,
    target: HttpTarget,
    /// The OAuth sign-in, unless the entry authorizes statically.
    oauth: Option<OAuth>,
    agent: ureq::Agent,
    /// The longest a request may run (its POST is cut off after this).
    request_ceiling: Duration,
    state: Mutex<State>,
    /// Signalled when the legacy endpoint arrives (or cannot), and when a
    /// session renewal ends.
    changed: Condvar,
    inbox: Mutex<Option<Arc<dyn Inbox>>>,
    jobs: Mutex<Option<Sender<Frame>>>,
    queue: Receiver<Frame>,
    idle_workers: AtomicUsize,
    /// Callers POSTing their own requests right now (`post_inline`).
    inline_posts: AtomicUsize,
    /// Frames sent but not yet taken by a worker.
    queued: AtomicUsize,
    /// Said once a second at most, however many answers a flood drops.
    dropped: ThrottledWarning,
    threads: Mutex<Vec<NamedThread>>,
    closing: AtomicBool,
    /// Dropped on close: wakes every pause at once.
    stop: Mutex<Option<Sender<()>>>,
    stopped: Receiver<()>,
    myself: Weak<HttpTransport>,
}

#[derive(Default)]
struct State {
    mode: Mode,
    /// The target's headers as their `!command`s gave them again, once a
    /// server refused the first ones.
    headers: Option<Vec<(String, String)>>,
    session_id: Option<String>,
    protocol_version: Option<String>,
    /// The server speaks the stateless revision (2026-07-28): no session,
    /// no GET stream, the method and name mirrored in headers.
    stateless: bool,
    initialize_frame: Option<Vec<u8>>,
    get_stream_started: bool,
    legacy_endpoint: Option<String>,
    legacy_error: Option<Error>,
    legacy_started: bool,
    workers: usize,
    /// The server answered the GET stream with 405.
    no_get_stream: bool,
    /// A worker is starting a new session; others wait for it on `changed`.
    renewing: bool,
    /// The expired session whose renewal failed: not tried again.
    renewal_failed: Option<String>,
    /// A session a caller's own POST found expired (404), for the worker
    /// it handed the request to.
    expired_session: Option<String>,
    /// Stateless requests sent and not yet done with (queued or posting).
    pending: std::collections::HashSet<i64>,
    /// Those of them whose callers gave up: not posted if still queued, their
    /// streams closed if posting.
    abandoned: std::collections::HashSet<i64>,
}

impl State {
    /// The session in use is one a caller's own POST found expired.
    fn session_known_expired(&self) -> bool {
        self.session_id.is_some() && self.expired_session == self.session_id
    }
}

impl HttpTransport {
    /// Prepares the connection; nothing is sent until the first frame, except
    /// that a legacy (`sse`) server's stream is opened at once.
    ///
    /// # Errors
    /// A URL that is not `http://` or `https://`.
    pub(crate) fn start(
        server: &str,
        target: HttpTarget,
        inbox: Arc<dyn Inbox>,
        request_ceiling: Duration,
    ) -> Result<Arc<HttpTransport>, Error> {
        if !(target.url.starts_with("http://") || target.url.starts_with("https://")) {
            return Err(Error::Config(format!(
                "{:?} is not an http:// or https:// URL",
                target.url
            )));
        }
        // Redirects are never followed by the agent: configured headers
        // (keys, tokens) must not go to another origin. Streamable HTTP
        // follows 307/308 on the same origin itself.
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            // A connection kept for every worker: past ureq's default of
            // three, calls in flight opened a new connection every few calls.
            .max_idle_connections(MAX_WORKERS)
            .max_idle_connections_per_host(MAX_WORKERS)
            // Each kept connection holds both buffers (ureq's default is
            // 128 KiB each): input as large as the longest head ureq takes.
            .input_buffer_size(64 * 1024)
            .output_buffer_size(32 * 1024)
            .timeout_connect(Some(Duration::from_secs(10)))
            .user_agent(format!("tether/{}", env!("CARGO_PKG_VERSION")))
            .build();
        let agent = ureq::Agent::with_parts(
            config,
            tls::connector(target.ca_file.as_deref())?,
            LiteralFirstResolver::default(),
        );
        let (jobs, queue) = crossbeam_channel::bounded(MAX_QUEUED);
        let (stop, stopped) = crossbeam_channel::bounded(0);
        let mode = match target.kind {
            HttpKind::Auto => Mode::Undecided,
            HttpKind::Streamable => Mode::Streamable,
            HttpKind::Sse => Mode::Sse,
        };
        let oauth = (!target.has_static_authorization()).then(|| target.oauth_for(server));
        let transport = Arc::new_cyclic(|myself| HttpTransport {
            server: server.to_owned(),
            target,
            oauth,
            agent,
            request_ceiling,
            state: Mutex::new(State { mode, ..State::default() }),
            changed: Condvar::new(),
            inbox: Mutex::new(Some(inbox)),
            jobs: Mutex::new(Some(jobs)),
            queue,
            idle_workers: AtomicUsize::new(0),
            inline_posts: AtomicUsize::new(0),
            queued: AtomicUsize::new(0),
            dropped: ThrottledWarning::default(),
            threads: Mutex::new(Vec::new()),
            closing: AtomicBool::new(false),
            stop: Mutex::new(Some(stop)),
            stopped,
            myself: myself.clone(),
        });
        if let Some(inbox) = transport.inbox() {
            inbox.attach(Arc::clone(&transport) as Arc<dyn Outlet>);
        }
        if mode == Mode::Sse {
            if let Err(err) = transport.start_legacy_stream() {
                // Breaks the inbox's hold on this transport.
                let _ = Endpoint::close(&transport);
                return Err(err);
            }
        }
        Ok(transport)
    }

    fn mode(&self) -> Mode {
        lock(&self.state).mode
    }

    fn inbox(&self) -> Option<Arc<dyn Inbox>> {
        lock(&self.inbox).clone()
    }

    fn is_closing(&self) -> bool {
        self.closing.load(Ordering::Acquire)
    }

    /// Sleeps, unless the transport closes first; false when it closed, or
    /// when a caller pausing on its own thread reached its deadline first.
    fn pause(&self, duration: Duration, by: Poster<'_>) -> bool {
        let allowed = by.pause_within(duration);
        !self.is_closing()
            && matches!(self.stopped.recv_timeout(allowed), Err(RecvTimeoutError::Timeout))
            && allowed == duration
    }

    fn spawn_thread(
        &self,
        name: String,
        body: impl FnOnce(Arc<HttpTransport>) + Send + 'static,
    ) -> io::Result<()> {
        let Some(me) = self.myself.upgrade() else { return Ok(()) };
        // Checked under the threads' lock: close takes it to join them all,
        // so no thread starts after that.
        let mut threads = lock(&self.threads);
        if self.is_closing() {
            return Ok(());
        }
        threads.push(NamedThread::spawn(name, move || body(me))?);
        Ok(())
    }

    /// POSTs a frame on this thread, by the transport in use.
    fn post_now(
        &self,
        frame: &Frame,
        deadline: Option<Instant>,
        by: Poster<'_>,
    ) -> Result<Posted, Error> {
        let method = frame.method.as_deref();
        match self.mode() {
            Mode::Sse => self
                .post_legacy(&frame.bytes, method, deadline, frame.deadline, by)
                .map(|()| Posted::Done),
            Mode::Streamable | Mode::Undecided => self.post_streamable(frame, deadline, by),
        }
    }

    /// Whether the caller waiting for `frame` may POST it itself: a request
    /// of an established Streamable HTTP session, while no renewal runs.
    /// The session's own requests (the handshake, the era probe) and
    /// `subscriptions/listen` stay with the workers, and so does all of a
    /// stateless server's traffic (its abandoned requests are the workers').
    fn posts_inline(&self, frame: &Frame) -> bool {
        if !frame.is_request()
            || frame.is("initialize")
            || frame.is("server/discover")
            || frame.is("subscriptions/listen")
        {
            return false;
        }
        // Host code (a token provider) and a refresh ahead may take any
        // time: a worker asks them.
        if self.target.token_provider.is_some()
            || self.oauth.as_ref().is_some_and(|oauth| !oauth.token_at_hand())
        {
            return false;
        }
        let state = lock(&self.state);
        state.mode == Mode::Streamable
            && !state.stateless
            && !state.renewing
            && !state.session_known_expired()
    }

    /// POSTs a caller's request on the caller's thread and delivers the
    /// answer into the inbox, as a worker would; hands it to a worker when
    /// the server wants a renewal or a sign-in first.
    fn post_inline(&self, mut frame: Frame, caller: &Caller<'_>) -> Result<(), Closed> {
        // No more POSTs at once than the workers would make.
        if self.inline_posts.fetch_add(1, Ordering::AcqRel) >= MAX_WORKERS {
            self.inline_posts.fetch_sub(1, Ordering::AcqRel);
            return self.queue(frame);
        }
        let posted = {
            struct Done<'a>(&'a AtomicUsize);
            impl Drop for Done<'_> {
                fn drop(&mut self) {
                    self.0.fetch_sub(1, Ordering::AcqRel);
                }
            }
            let _done = Done(&self.inline_posts);
            log::trace!("{} -> {}", self.server, String::from_utf8_lossy(&frame.bytes));
            caller.held(|| self.post_now(&frame, None, Poster::Caller(caller)))
        };
        match posted {
            Ok(Posted::Done) => Ok(()),
            Ok(Posted::HandedOff) => self.queue(frame),
            Ok(Posted::ToRetry) => {
                frame.retrying = true;
                self.queue(frame)
            }
            // The caller's own timeout says it; a closing transport, Closed.
            Err(_) if caller.gave_up() => Ok(()),
            Err(_) if self.is_closing() => Err(Closed),
            Err(error) => {
                if let (Some(inbox), Some(id)) = (self.inbox(), frame.id) {
                    inbox.failed(id, error);
                }
                Ok(())
            }
        }
    }
}

impl Outlet for HttpTransport {
    fn send(&self, frame: Frame) -> Result<(), Closed> {
        if self.is_closing() {
            return Err(Closed);
        }
        log::trace!("{} -> {}", self.server, String::from_utf8_lossy(&frame.bytes));
        self.queue(frame)
    }

    fn send_waiting(&self, frame: Frame, caller: &Caller<'_>) -> Result<(), Closed> {
        if !self.is_closing() && self.posts_inline(&frame) {
            return self.post_inline(frame, caller);
        }
        self.send(frame)
    }

    /// POSTed on this thread, one after another, within a second in all:
    /// queued, they could meet the close on a worker.
    fn send_last(&self, frames: Vec<Frame>) {
        let until = Instant::now() + CANCEL_WAIT;
        for frame in frames {
            if self.is_closing() || Instant::now() >= until {
                return;
            }
            // Nothing to do about a failure: the connection is closing.
            let _ = self.post_now(&frame, Some(until), Poster::OwnLimits);
        }
    }

    fn abandon(&self, id: i64) {
        let mut state = lock(&self.state);
        if state.pending.contains(&id) {
            state.abandoned.insert(id);
        }
    }

    fn set_session_kind(&self, kind: SessionKind<'_>) {
        let mut state = lock(&self.state);
        match kind {
            SessionKind::Handshake => {
                state.stateless = false;
                state.protocol_version = None;
            }
            SessionKind::Stateless { version } => {
                state.stateless = true;
                state.protocol_version = Some(version.to_owned());
                // A refused handshake may have settled on the legacy
                // transport; a URL of no fixed type is tried afresh.
                if self.target.kind == HttpKind::Auto && state.legacy_endpoint.is_none() {
                    state.mode = Mode::Undecided;
                }
            }
        }
    }

    /// `initialized` is POSTed on the caller's thread, so it is answered
    /// before any request goes out; then the GET stream opens.
    fn begin_session(
        &self,
        initialized: Frame,
        protocol_version: &str,
        deadline: Instant,
    ) -> Result<(), Error> {
        lock(&self.state).protocol_version = Some(protocol_version.to_owned());
        if self.is_closing() {
            return Err(Error::Disconnected(CloseReason::Shutdown));
        }
        log::trace!("{} -> {}", self.server, String::from_utf8_lossy(&initialized.bytes));
        // The server learns nothing new from a failure here; the requests
        // that follow will say what is wrong.
        if let Err(err) = self.post_now(&initialized, Some(deadline), Poster::OwnLimits) {
            log::warn!("{}: sending notifications/initialized failed: {err}", self.server);
        }
        self.open_get_stream(deadline);
        Ok(())
    }
}

impl Endpoint for Arc<HttpTransport> {
    fn close(&self) -> io::Result<()> {
        if self.closing.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        lock(&self.stop).take();
        lock(&self.jobs).take();
        let session = {
            // Notified under the lock, so a worker about to wait cannot miss it.
            let state = lock(&self.state);
            self.changed.notify_all();
            state.session_id.clone()
        };
        if session.is_some() {
            // End the session; a 405 (the server does not allow it) is fine.
            let bearer = self.bearer(Poster::OwnLimits);
            let request = self.with_common_headers(
                self.agent.delete(&self.target.url),
                true,
                bearer.as_deref(),
            );
            match request.config().timeout_global(Some(Duration::from_secs(2))).build().call() {
                Ok(response) => {
                    log::debug!("{}: DELETE session: {}", self.server, response.status())
                }
                Err(err) => log::debug!("{}: DELETE session failed: {err}", self.server),
            }
        }
        // Wakes every read still blocked on a socket.
        self.agent.clone().shutdown();
        let threads = std::mem::take(&mut *lock(&self.threads));
        // One deadline for them all, so many workers cannot add up.
        let deadline = Instant::now() + JOIN_WAIT;
        for thread in threads {
            thread.join_within(
                deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(10)),
            );
        }
        lock(&self.inbox).take();
        Ok(())
    }

    fn stderr_tail(&self, _wait_for_end: Duration) -> Option<String> {
        None
    }

    fn traits(&self) -> Traits {
        let streamable = self.mode() != Mode::Sse;
        Traits {
            name: if streamable { "http" } else { "sse" },
            carries_stateless: streamable,
            exchange_per_request: true,
            stream_per_request: streamable,
            ..Traits::default()
        }
    }

    fn era_key(&self) -> Option<&str> {
        Some(&self.target.url)
    }
}
