//! Remote servers: Streamable HTTP, and the legacy HTTP+SSE transport, over
//! blocking ureq.
//!
//! Every message is one POST. A caller hands its frame to the outlet and goes
//! to wait for its answer as over stdio; `{server}-http-N` worker threads
//! (started as needed, so a long tool call never holds up another) do the
//! POST and deliver what comes back — a JSON body, or an SSE stream of
//! progress, server requests and finally the response — into the inbox. So
//! timeouts and cancellation are the client's, exactly as over stdio.
//!
//! Streamable HTTP: `Mcp-Session-Id` is echoed; `MCP-Protocol-Version` is
//! sent once negotiated (from 2025-06-18); a 404 on a session re-initializes
//! and retries once; a response stream that ends early is resumed with a GET
//! carrying `Last-Event-ID`, after the server's `retry` delay; after
//! `notifications/initialized` a `{server}-http-get` thread keeps the GET
//! stream for server-initiated messages open (405 means the server has none).
//! Network errors and 408/429/5xx are retried twice for requests that are
//! safe to repeat, never `tools/call`. A URL without a type falls back to the
//! legacy transport when the `initialize` POST gets 400, 404 or 405.
//!
//! Legacy HTTP+SSE: a `{server}-sse` thread holds the GET stream, whose first
//! event names the endpoint to POST to; answers arrive as `message` events.
//!
//! Nothing blocks shutdown: `close` ends the session (DELETE), then shuts the
//! agent down, which wakes every blocked read at once, and joins every thread.

use std::fmt;
use std::io::{self, BufReader, Read};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use serde_json::Value;
use ureq::http::Response;
use ureq::Body;

use crate::config::RemoteKind;
use crate::error::{CloseReason, Error};
use crate::framing::MAX_FRAME;
use crate::jsonrpc::{Frame, Message, RequestId};
use crate::sync::{lock, wait_timeout};
use crate::threads::NamedThread;
use crate::transport::outbox::Closed;
use crate::transport::sse::SseReader;
use crate::transport::{Endpoint, Inbox, Outlet};

/// At most this many POSTs in flight to one server.
const MAX_WORKERS: usize = 32;
/// How long shutdown waits for each thread.
const JOIN_WAIT: Duration = Duration::from_secs(2);
/// Bytes of an error page kept for the message.
const ERROR_BODY: u64 = 1024;
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
/// How long a legacy server may take to name its endpoint.
const ENDPOINT_WAIT: Duration = Duration::from_secs(30);

/// A remote server: where, how, and with which credentials.
#[derive(Clone)]
pub struct HttpTarget {
    /// The endpoint URL (`http://` or `https://`).
    pub url: String,
    /// Which transport; `Auto` tries Streamable HTTP, then the legacy one.
    pub kind: RemoteKind,
    /// Headers on every request (values may be secrets).
    pub headers: Vec<(String, String)>,
    /// Sent as `Authorization: Bearer …` unless `headers` has an Authorization.
    pub bearer_token: Option<String>,
    /// How long a legacy server may take to send its `endpoint` event.
    pub endpoint_wait: Duration,
}

impl HttpTarget {
    /// A target with no headers or credentials.
    pub fn new(url: &str, kind: RemoteKind) -> HttpTarget {
        HttpTarget {
            url: url.to_owned(),
            kind,
            headers: Vec::new(),
            bearer_token: None,
            endpoint_wait: ENDPOINT_WAIT,
        }
    }
}

impl fmt::Debug for HttpTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Header values and the token are secrets: names only.
        f.debug_struct("HttpTarget")
            .field("url", &self.url)
            .field("kind", &self.kind)
            .field("headers", &self.headers.iter().map(|(name, _)| name).collect::<Vec<_>>())
            .field("bearer_token", &self.bearer_token.as_ref().map(|_| "***"))
            .finish()
    }
}

/// Which transport the connection settled on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `Auto`, before `initialize` answered.
    Undecided,
    Streamable,
    Legacy,
}

/// A connection to a remote server; both the outlet and the endpoint.
pub(crate) struct HttpTransport {
    server: String,
    target: HttpTarget,
    agent: ureq::Agent,
    /// The longest a request may run (its POST is cut off after this).
    request_ceiling: Duration,
    state: Mutex<State>,
    /// Signalled when the legacy endpoint arrives (or cannot).
    endpoint_ready: Condvar,
    inbox: Mutex<Option<Arc<dyn Inbox>>>,
    jobs: Mutex<Option<Sender<Frame>>>,
    queue: Receiver<Frame>,
    idle_workers: AtomicUsize,
    /// Frames sent but not yet taken by a worker.
    queued: AtomicUsize,
    /// One session renewal at a time.
    renewal: Mutex<()>,
    threads: Mutex<Vec<NamedThread>>,
    closing: AtomicBool,
    /// Dropped on close: wakes every pause at once.
    stop: Mutex<Option<Sender<()>>>,
    stopped: Receiver<()>,
    myself: Weak<HttpTransport>,
}

#[derive(Default)]
struct State {
    mode: Option<Mode>,
    session_id: Option<String>,
    protocol_version: Option<String>,
    initialize_frame: Option<Vec<u8>>,
    get_stream_started: bool,
    legacy_endpoint: Option<String>,
    legacy_error: Option<String>,
    legacy_started: bool,
    workers: usize,
    /// The server answered the GET stream with 405.
    no_get_stream: bool,
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
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(10)))
            .user_agent(format!("tether/{}", env!("CARGO_PKG_VERSION")))
            .build();
        let agent = ureq::Agent::with_parts(
            config,
            ureq::unversioned::transport::DefaultConnector::new(),
            LiteralFirstResolver::default(),
        );
        let (jobs, queue) = crossbeam_channel::unbounded();
        let (stop, stopped) = crossbeam_channel::bounded(0);
        let mode = match target.kind {
            RemoteKind::Auto => Mode::Undecided,
            RemoteKind::StreamableHttp => Mode::Streamable,
            RemoteKind::Sse => Mode::Legacy,
        };
        let transport = Arc::new_cyclic(|myself| HttpTransport {
            server: server.to_owned(),
            target,
            agent,
            request_ceiling,
            state: Mutex::new(State { mode: Some(mode), ..State::default() }),
            endpoint_ready: Condvar::new(),
            inbox: Mutex::new(Some(inbox)),
            jobs: Mutex::new(Some(jobs)),
            queue,
            idle_workers: AtomicUsize::new(0),
            queued: AtomicUsize::new(0),
            renewal: Mutex::new(()),
            threads: Mutex::new(Vec::new()),
            closing: AtomicBool::new(false),
            stop: Mutex::new(Some(stop)),
            stopped,
            myself: myself.clone(),
        });
        if mode == Mode::Legacy {
            transport.start_legacy_stream()?;
        }
        Ok(transport)
    }

    fn mode(&self) -> Mode {
        lock(&self.state).mode.unwrap_or(Mode::Undecided)
    }

    fn inbox(&self) -> Option<Arc<dyn Inbox>> {
        lock(&self.inbox).clone()
    }

    fn is_closing(&self) -> bool {
        self.closing.load(Ordering::Acquire)
    }

    /// Sleeps, unless the transport closes first; false when it closed.
    fn pause(&self, duration: Duration) -> bool {
        !self.is_closing()
            && matches!(self.stopped.recv_timeout(duration), Err(RecvTimeoutError::Timeout))
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

    /// A worker's loop: one POST at a time until the queue closes.
    fn run_worker(&self) {
        loop {
            self.idle_workers.fetch_add(1, Ordering::AcqRel);
            let job = self.queue.recv();
            self.idle_workers.fetch_sub(1, Ordering::AcqRel);
            if job.is_ok() {
                self.queued.fetch_sub(1, Ordering::AcqRel);
            }
            match job {
                Ok(frame) if !self.is_closing() => self.post(&frame),
                _ => return,
            }
        }
    }

    /// Sends one frame and delivers what comes back.
    fn post(&self, frame: &Frame) {
        let method = frame.method.as_deref();
        if frame.is("initialize") {
            lock(&self.state).initialize_frame = Some(frame.bytes.clone());
        }
        let Err(error) = self.post_now(frame) else { return };
        if self.is_closing() {
            return;
        }
        match frame.id {
            Some(id) => {
                if let Some(inbox) = self.inbox() {
                    inbox.failed(id, error);
                }
            }
            None => log::warn!(
                "{}: sending {} failed: {error}",
                self.server,
                method.unwrap_or("a response")
            ),
        }
    }

    /// POSTs a frame on this thread, by the transport in use.
    fn post_now(&self, frame: &Frame) -> Result<(), Error> {
        let method = frame.method.as_deref();
        match self.mode() {
            Mode::Legacy => self.post_legacy(&frame.bytes, method),
            Mode::Streamable | Mode::Undecided => self.post_streamable(frame),
        }
    }

    /// POSTs a frame to the Streamable HTTP endpoint, with retries, session
    /// renewal and the fallback to the legacy transport.
    fn post_streamable(&self, frame: &Frame) -> Result<(), Error> {
        let (id, method) = (frame.id, frame.method.as_deref());
        let is_request = frame.is_request();
        let repeatable = method != Some("tools/call");
        let mut renewed_session = false;
        let mut attempt = 0;
        loop {
            let sent_session = lock(&self.state).session_id.clone();
            let response = self.send_post(&self.target.url, &frame.bytes, is_request, true);
            let retryable = match response {
                Err(err) => {
                    if self.is_closing() {
                        return Ok(());
                    }
                    Err(Error::Http {
                        status: None,
                        message: format!("cannot reach {}: {err}", redact_url(&self.target.url)),
                    })
                }
                Ok(mut response) => {
                    let status = response.status().as_u16();
                    match status {
                        200..=299 => {
                            if method == Some("initialize") {
                                lock(&self.state).mode = Some(Mode::Streamable);
                            }
                            self.remember_session(&response);
                            return if is_request {
                                self.read_answer(&mut response, id)
                            } else {
                                Ok(())
                            };
                        }
                        404 if sent_session.is_some()
                            && !renewed_session
                            && method != Some("initialize") =>
                        {
                            renewed_session = true;
                            let _one_renewal = lock(&self.renewal);
                            // Another worker may have renewed it meanwhile.
                            if lock(&self.state).session_id == sent_session {
                                log::info!(
                                    "{}: the session expired; starting a new one",
                                    self.server
                                );
                                if let Err(err) = self.renew_session() {
                                    self.lost(format!(
                                        "the session expired and could not be renewed: {err}"
                                    ));
                                    return Err(err);
                                }
                            }
                            continue;
                        }
                        400 | 404 | 405
                            if method == Some("initialize") && self.mode() == Mode::Undecided =>
                        {
                            log::info!(
                                "{}: initialize got HTTP {status}; trying the legacy HTTP+SSE transport",
                                self.server
                            );
                            lock(&self.state).mode = Some(Mode::Legacy);
                            self.start_legacy_stream()?;
                            return self.post_legacy(&frame.bytes, method);
                        }
                        401 => return Err(unauthorized(&response, &redact_url(&self.target.url))),
                        408 | 429 | 500..=599 => Err(http_error(&mut response)),
                        _ => return Err(http_error(&mut response)),
                    }
                }
            };
            match retryable {
                Err(error) if repeatable && attempt < RETRY_PAUSES.len() => {
                    log::debug!("{}: {error}; retrying", self.server);
                    if !self.pause(RETRY_PAUSES[attempt]) {
                        return Ok(());
                    }
                    attempt += 1;
                }
                // The server cannot be reached at all: the connection is lost,
                // and the next call reconnects.
                Err(error @ Error::Http { status: None, .. }) => {
                    self.lost(error.to_string());
                    return Err(error);
                }
                other => return other,
            }
        }
    }

    /// One POST with every header the request needs.
    fn send_post(
        &self,
        url: &str,
        frame: &[u8],
        is_request: bool,
        with_session: bool,
    ) -> Result<Response<Body>, ureq::Error> {
        let mut request = self
            .agent
            .post(url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream");
        request = self.with_common_headers(request, with_session);
        // A request may run as long as its caller waits; a notification or a
        // response is answered at once.
        let ceiling = if is_request {
            self.request_ceiling + Duration::from_secs(5)
        } else {
            Duration::from_secs(30)
        };
        request.config().timeout_global(Some(ceiling)).build().send(frame)
    }

    /// Custom headers, credentials, session and protocol version.
    fn with_common_headers<B>(
        &self,
        mut request: ureq::RequestBuilder<B>,
        with_session: bool,
    ) -> ureq::RequestBuilder<B> {
        let mut has_authorization = false;
        for (name, value) in &self.target.headers {
            has_authorization |= name.eq_ignore_ascii_case("authorization");
            request = request.header(name.as_str(), value.as_str());
        }
        if let (Some(token), false) = (&self.target.bearer_token, has_authorization) {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        let state = lock(&self.state);
        if let (Some(session), true) = (&state.session_id, with_session) {
            request = request.header("Mcp-Session-Id", session.as_str());
        }
        if let Some(version) =
            state.protocol_version.as_deref().filter(|version| *version >= "2025-06-18")
        {
            request = request.header("MCP-Protocol-Version", version);
        }
        request
    }

    fn remember_session(&self, response: &Response<Body>) {
        if let Some(session) =
            response.headers().get("mcp-session-id").and_then(|value| value.to_str().ok())
        {
            let mut state = lock(&self.state);
            if state.session_id.as_deref() != Some(session) {
                log::debug!("{}: session {session}", self.server);
                state.session_id = Some(session.to_owned());
            }
        }
    }

    /// Starts a new session: initialize again (its answer goes nowhere: the
    /// client already has one) and `notifications/initialized`.
    fn renew_session(&self) -> Result<(), Error> {
        // The old id stays in place (other workers keep using it) until the
        // new one arrives with the answer to initialize.
        let initialize = lock(&self.state).initialize_frame.clone();
        let Some(initialize) = initialize else {
            return Err(Error::Http {
                status: Some(404),
                message: "the session expired before it began".into(),
            });
        };
        let mut response =
            self.send_post(&self.target.url, &initialize, true, false).map_err(|err| {
                Error::Http { status: None, message: format!("renewing the session failed: {err}") }
            })?;
        if !response.status().is_success() {
            return Err(http_error(&mut response));
        }
        self.remember_session(&response);
        // Drain the answer so that the connection can be reused.
        let _ = response.body_mut().as_reader().take(MAX_FRAME as u64).read_to_end(&mut Vec::new());
        let initialized = Frame::notification("notifications/initialized", None).bytes;
        match self.send_post(&self.target.url, &initialized, false, true) {
            Ok(response) if response.status().is_success() => Ok(()),
            Ok(mut response) => Err(http_error(&mut response)),
            Err(err) => Err(Error::Http {
                status: None,
                message: format!("renewing the session failed: {err}"),
            }),
        }
    }

    /// Reads a request's answer: one JSON body, or an SSE stream that ends
    /// with the response (resumed with `Last-Event-ID` if it breaks early).
    fn read_answer(&self, response: &mut Response<Body>, id: Option<i64>) -> Result<(), Error> {
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|value| value.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        if content_type.starts_with("text/event-stream") {
            let mut reader =
                SseReader::new(BufReader::new(response.body_mut().as_reader()), MAX_FRAME);
            let mut answered = false;
            let mut outcome = self.deliver_events(&mut reader, id, &mut answered);
            let mut last_id = reader.last_id().map(str::to_owned);
            let mut retry = reader.retry_ms.map(Duration::from_millis);
            let mut resumes = 0;
            loop {
                if answered {
                    return Ok(());
                }
                if let Err(err) = &outcome {
                    if err.kind() == io::ErrorKind::InvalidData {
                        return Err(Error::Http {
                            status: None,
                            message: format!("the server sent {err}"),
                        });
                    }
                }
                if self.is_closing() {
                    return Ok(());
                }
                let Some(event_id) = last_id.clone() else {
                    return Err(Error::Http {
                        status: None,
                        message: "the server ended the response stream without an answer".into(),
                    });
                };
                if resumes == MAX_RESUMES {
                    return Err(Error::Http {
                        status: None,
                        message: "the response stream kept breaking".into(),
                    });
                }
                resumes += 1;
                if !self.pause(retry.unwrap_or(DEFAULT_RETRY).min(MAX_RETRY)) {
                    return Ok(());
                }
                log::debug!("{}: resuming the response stream after event {event_id}", self.server);
                let mut resumed = match self.open_get(Some(&event_id), Some(self.request_ceiling)) {
                    Ok(resumed) if resumed.status().is_success() => resumed,
                    Ok(mut refused) => return Err(http_error(&mut refused)),
                    Err(err) => {
                        outcome = Err(io::Error::other(err.to_string()));
                        continue;
                    }
                };
                let mut reader =
                    SseReader::new(BufReader::new(resumed.body_mut().as_reader()), MAX_FRAME);
                outcome = self.deliver_events(&mut reader, id, &mut answered);
                last_id = reader.last_id().map(str::to_owned).or(last_id);
                retry = reader.retry_ms.map(Duration::from_millis).or(retry);
            }
        }
        let mut body = Vec::new();
        let read =
            response.body_mut().as_reader().take(MAX_FRAME as u64 + 1).read_to_end(&mut body);
        if let Err(err) = read {
            return Err(Error::Http {
                status: None,
                message: format!("reading the answer failed: {err}"),
            });
        }
        if body.len() > MAX_FRAME {
            return Err(Error::Disconnected(CloseReason::FrameTooLarge {
                size: body.len(),
                limit: MAX_FRAME,
            }));
        }
        if !content_type.starts_with("application/json") && body.iter().all(u8::is_ascii_whitespace)
        {
            // 202 Accepted for a request: the answer comes on the GET stream,
            // if there is one; without it, it never comes.
            if lock(&self.state).no_get_stream {
                return Err(Error::Protocol(
                    "the server accepted the request without answering, and offers no stream to answer on".into(),
                ));
            }
            return Ok(());
        }
        self.deliver_json(&body);
        Ok(())
    }

    /// Delivers every event of a stream; true once the response to `id` came.
    fn deliver_events<R: io::BufRead>(
        &self,
        reader: &mut SseReader<R>,
        id: Option<i64>,
        answered: &mut bool,
    ) -> io::Result<()> {
        while let Some(event) = reader.next_event()? {
            if event.data.trim().is_empty() {
                continue; // Priming events carry only an id.
            }
            for message in self.deliver_json(event.data.as_bytes()) {
                if let (Message::Response(response), Some(id)) = (&message, id) {
                    *answered |= response.id == RequestId::Number(id);
                }
            }
        }
        Ok(())
    }

    /// Delivers a JSON body: one message, or a batch.
    /// Delivers one message or a batch; returns what was delivered.
    fn deliver_json(&self, body: &[u8]) -> Vec<Message> {
        // Only a batch is parsed twice; a single message goes straight through.
        if body.iter().find(|byte| !byte.is_ascii_whitespace()) != Some(&b'[') {
            return self.deliver_bytes(body).into_iter().collect();
        }
        match serde_json::from_slice::<Vec<Value>>(body) {
            Ok(batch) => batch
                .into_iter()
                .filter_map(|item| self.deliver_bytes(item.to_string().as_bytes()))
                .collect(),
            Err(err) => {
                log::warn!("{}: the answer is not a JSON batch: {err}", self.server);
                Vec::new()
            }
        }
    }

    /// Parses and delivers one message.
    fn deliver_bytes(&self, bytes: &[u8]) -> Option<Message> {
        let message = match Message::parse(bytes) {
            Ok(message) => message,
            Err(why) => {
                log::warn!("{}: skipped a message that is not JSON-RPC ({why})", self.server);
                return None;
            }
        };
        log::trace!("{} <- {}", self.server, String::from_utf8_lossy(bytes));
        let inbox = self.inbox()?;
        inbox.deliver(message.clone());
        Some(message)
    }

    /// A GET for an event stream; `ceiling` bounds the whole exchange (a
    /// resumed response stream), `None` leaves it open (the GET stream, which
    /// close interrupts).
    fn open_get(
        &self,
        last_event_id: Option<&str>,
        ceiling: Option<Duration>,
    ) -> Result<Response<Body>, ureq::Error> {
        let mut request = self.agent.get(&self.target.url).header("Accept", "text/event-stream");
        if let Some(event_id) = last_event_id {
            request = request.header("Last-Event-ID", event_id);
        }
        self.with_common_headers(request, true).config().timeout_global(ceiling).build().call()
    }

    /// The connection is gone: every waiting caller fails, status shows it,
    /// and the next call reconnects.
    fn lost(&self, why: String) {
        if let Some(inbox) = self.inbox() {
            inbox.closed(CloseReason::Io(why));
        }
    }

    /// Opens the GET stream for server-initiated messages, once, and waits
    /// (at most until `deadline`) until the server has answered it, so that
    /// nothing the server sends on it during the first request is lost.
    fn open_get_stream(&self, deadline: Instant) {
        {
            let mut state = lock(&self.state);
            if state.get_stream_started || state.mode != Some(Mode::Streamable) {
                return;
            }
            state.get_stream_started = true;
        }
        let (answered, first_answer) = crossbeam_channel::bounded(1);
        let name = format!("{}-http-get", self.server);
        if let Err(err) = self.spawn_thread(name, |me| me.run_get_stream(answered)) {
            return log::warn!("{}: cannot start the GET stream thread: {err}", self.server);
        }
        // Any answer will do (a 405 means there is no stream); a dropped
        // sender means the thread is gone.
        if let Err(RecvTimeoutError::Timeout) = first_answer.recv_deadline(deadline) {
            log::debug!("{}: the GET stream has not answered; going on without it", self.server);
        }
    }

    /// Keeps the GET stream open, reopening it when it drops; `answered`
    /// hears of the first answer.
    fn run_get_stream(&self, answered: Sender<()>) {
        let mut answered = Some(answered);
        let mut last_id: Option<String> = None;
        let mut backoff = DEFAULT_RETRY;
        while !self.is_closing() {
            let mut pause = backoff;
            let opened = self.open_get(last_id.as_deref(), None);
            match opened {
                Ok(response) if response.status().as_u16() == 405 => {
                    log::debug!("{}: the server offers no GET stream (405)", self.server);
                    lock(&self.state).no_get_stream = true;
                    return;
                }
                Ok(mut response) if response.status().is_success() => {
                    answered.take().map(|answered| answered.send(()));
                    backoff = DEFAULT_RETRY;
                    let mut reader =
                        SseReader::new(BufReader::new(response.body_mut().as_reader()), MAX_FRAME);
                    if let Err(err) = self.deliver_events(&mut reader, None, &mut false) {
                        log::debug!("{}: the GET stream broke: {err}", self.server);
                    }
                    last_id = reader.last_id().map(str::to_owned).or(last_id);
                    if let Some(retry) = reader.retry_ms {
                        pause = Duration::from_millis(retry).min(MAX_RETRY);
                    }
                }
                Ok(response) => {
                    log::debug!(
                        "{}: the GET stream was refused ({})",
                        self.server,
                        response.status()
                    );
                    backoff = (backoff * 2).min(MAX_GET_BACKOFF);
                }
                Err(err) => {
                    log::debug!("{}: the GET stream failed: {err}", self.server);
                    backoff = (backoff * 2).min(MAX_GET_BACKOFF);
                }
            }
            answered.take();
            if !self.pause(pause) {
                return;
            }
        }
    }

    /// Opens the legacy SSE stream (once); its first event names the endpoint.
    fn start_legacy_stream(&self) -> Result<(), Error> {
        {
            let mut state = lock(&self.state);
            if state.legacy_started {
                return Ok(());
            }
            state.legacy_started = true;
        }
        let name = format!("{}-sse", self.server);
        self.spawn_thread(name, |me| me.run_legacy_stream()).map_err(Error::Io)
    }

    fn run_legacy_stream(&self) {
        let reason = match self.open_get(None, None) {
            Ok(mut response) if response.status().is_success() => {
                let mut reader =
                    SseReader::new(BufReader::new(response.body_mut().as_reader()), MAX_FRAME);
                self.read_legacy_events(&mut reader)
            }
            Ok(mut response) => {
                let status = response.status().as_u16();
                let error = if status == 401 {
                    unauthorized(&response, &redact_url(&self.target.url))
                } else {
                    http_error(&mut response)
                };
                self.legacy_failed(error.to_string());
                return;
            }
            Err(err) => {
                self.legacy_failed(format!("cannot reach {}: {err}", redact_url(&self.target.url)));
                return;
            }
        };
        if self.is_closing() {
            return;
        }
        self.legacy_failed(reason.to_string());
        if let Some(inbox) = self.inbox() {
            inbox.closed(reason);
        }
    }

    fn read_legacy_events<R: io::BufRead>(&self, reader: &mut SseReader<R>) -> CloseReason {
        loop {
            match reader.next_event() {
                Ok(Some(event)) if event.event == "endpoint" => {
                    match self.resolve_endpoint(event.data.trim()) {
                        Ok(endpoint) => {
                            log::debug!("{}: legacy endpoint {endpoint}", self.server);
                            lock(&self.state).legacy_endpoint = Some(endpoint);
                            self.endpoint_ready.notify_all();
                        }
                        Err(why) => {
                            self.legacy_failed(why);
                            return CloseReason::Io(
                                "the server named an endpoint on another origin".into(),
                            );
                        }
                    }
                }
                Ok(Some(event)) if event.event == "message" && !event.data.trim().is_empty() => {
                    self.deliver_bytes(event.data.as_bytes());
                }
                Ok(Some(_)) => {}
                Ok(None) => return CloseReason::Eof,
                Err(err) => return CloseReason::Io(format!("the event stream broke: {err}")),
            }
        }
    }

    fn legacy_failed(&self, why: String) {
        let mut state = lock(&self.state);
        if state.legacy_error.is_none() {
            state.legacy_error = Some(why);
        }
        self.endpoint_ready.notify_all();
    }

    /// The endpoint URL, relative to the stream's URL, same origin only.
    fn resolve_endpoint(&self, endpoint: &str) -> Result<String, String> {
        let origin = origin_of(&self.target.url).ok_or("the server URL has no origin")?;
        let resolved = if endpoint.starts_with("http://") || endpoint.starts_with("https://") {
            endpoint.to_owned()
        } else if endpoint.starts_with('/') {
            format!("{origin}{endpoint}")
        } else if endpoint.starts_with('?') {
            let base = self.target.url.split(['?', '#']).next().unwrap_or(&self.target.url);
            format!("{base}{endpoint}")
        } else {
            let base = self.target.url.split(['?', '#']).next().unwrap_or(&self.target.url);
            let folder = &base[..base.rfind('/').map_or(base.len(), |at| at + 1)];
            format!("{folder}{endpoint}")
        };
        if origin_of(&resolved).as_deref() != Some(origin.as_str()) {
            return Err(format!(
                "the server named the endpoint {resolved}, on another origin than {origin}"
            ));
        }
        Ok(resolved)
    }

    /// POSTs a frame to the legacy endpoint, once the stream has named it.
    fn post_legacy(&self, frame: &[u8], method: Option<&str>) -> Result<(), Error> {
        let endpoint = {
            let deadline = Instant::now() + self.target.endpoint_wait;
            let mut state = lock(&self.state);
            loop {
                if let Some(endpoint) = &state.legacy_endpoint {
                    break endpoint.clone();
                }
                if let Some(error) = &state.legacy_error {
                    return Err(Error::Http { status: None, message: error.clone() });
                }
                let now = Instant::now();
                if now >= deadline || self.is_closing() {
                    return Err(Error::Http {
                        status: None,
                        message: format!(
                            "the SSE server never sent its endpoint event (waited {:.1} s)",
                            self.target.endpoint_wait.as_secs_f64()
                        ),
                    });
                }
                state = wait_timeout(&self.endpoint_ready, state, deadline - now);
            }
        };
        let repeatable = method != Some("tools/call");
        let mut attempt = 0;
        loop {
            let failure = match self.send_post(&endpoint, frame, false, true) {
                Ok(mut response) if response.status().is_success() => {
                    let _ = response
                        .body_mut()
                        .as_reader()
                        .take(MAX_FRAME as u64)
                        .read_to_end(&mut Vec::new());
                    return Ok(());
                }
                Ok(response) if response.status().as_u16() == 401 => {
                    return Err(unauthorized(&response, &redact_url(&self.target.url)))
                }
                Ok(mut response) => {
                    let status = response.status().as_u16();
                    let error = http_error(&mut response);
                    if !matches!(status, 408 | 429 | 500..=599) {
                        return Err(error);
                    }
                    error
                }
                Err(err) => Error::Http {
                    status: None,
                    message: format!("cannot reach {}: {err}", redact_url(&endpoint)),
                },
            };
            if !repeatable || attempt == RETRY_PAUSES.len() || self.is_closing() {
                return Err(failure);
            }
            if !self.pause(RETRY_PAUSES[attempt]) {
                return Ok(());
            }
            attempt += 1;
        }
    }
}

impl Outlet for HttpTransport {
    fn send(&self, frame: Frame) -> Result<(), Closed> {
        if self.is_closing() {
            return Err(Closed);
        }
        log::trace!("{} -> {}", self.server, String::from_utf8_lossy(&frame.bytes));
        {
            let jobs = lock(&self.jobs);
            self.queued.fetch_add(1, Ordering::AcqRel);
            jobs.as_ref().ok_or(Closed)?.send(frame).map_err(|_| Closed)?;
        }
        // A worker for every POST in flight, up to the limit, so that a long
        // call never holds up another: more frames waiting than idle workers
        // means one more worker.
        if self.queued.load(Ordering::Acquire) > self.idle_workers.load(Ordering::Acquire) {
            let number = {
                let mut state = lock(&self.state);
                if state.workers >= MAX_WORKERS {
                    return Ok(());
                }
                state.workers += 1;
                state.workers
            };
            let name = format!("{}-http-{number}", self.server);
            if let Err(err) = self.spawn_thread(name, |me| me.run_worker()) {
                log::warn!("{}: cannot start an HTTP worker: {err}", self.server);
            }
        }
        Ok(())
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
        if let Err(err) = self.post_now(&initialized) {
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
            self.endpoint_ready.notify_all();
            state.session_id.clone()
        };
        if session.is_some() {
            // End the session; a 405 (the server does not allow it) is fine.
            let request = self.with_common_headers(self.agent.delete(&self.target.url), true);
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

    fn transport_name(&self) -> &'static str {
        match self.mode() {
            Mode::Legacy => "sse",
            Mode::Streamable | Mode::Undecided => "http",
        }
    }
}

/// Resolves IP-literal hosts (`127.0.0.1`, `[::1]`) on the spot and leaves
/// names to ureq's resolver. With a timeout set, that resolver looks every
/// name up on a thread of its own, per request: a new thread per call to a
/// local server cost more than the call itself.
#[derive(Debug, Default)]
struct LiteralFirstResolver {
    names: ureq::unversioned::resolver::DefaultResolver,
}

impl ureq::unversioned::resolver::Resolver for LiteralFirstResolver {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: ureq::unversioned::transport::NextTimeout,
    ) -> Result<ureq::unversioned::resolver::ResolvedSocketAddrs, ureq::Error> {
        let literal = uri
            .host()
            .and_then(|host| host.trim_start_matches('[').trim_end_matches(']').parse().ok());
        let port = uri.port_u16().or_else(|| match uri.scheme_str() {
            Some("https") => Some(443),
            Some("http") => Some(80),
            _ => None,
        });
        match (literal, port) {
            (Some(ip), Some(port)) => {
                let mut addresses = self.empty();
                addresses.push(std::net::SocketAddr::new(ip, port));
                Ok(addresses)
            }
            _ => self.names.resolve(uri, config, timeout),
        }
    }
}

/// `scheme://host[:port]` of a URL.
fn origin_of(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host).to_ascii_lowercase();
    let default_port = if scheme == "https" { ":443" } else { ":80" };
    let host = host.strip_suffix(default_port).unwrap_or(&host);
    Some(format!("{scheme}://{host}"))
}

/// A URL as messages may show it: no user info, no query (where keys go).
pub(crate) fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.split(['?', '#']).next().unwrap_or(url).to_owned();
    };
    let without_query = rest.split(['?', '#']).next().unwrap_or(rest);
    let (authority, path) =
        without_query.split_once('/').map_or((without_query, ""), |(a, p)| (a, p));
    let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let slash = if without_query.contains('/') { "/" } else { "" };
    let elided = if rest.len() > without_query.len() { "?…" } else { "" };
    format!("{scheme}://{host}{slash}{path}{elided}")
}

/// An error from a status and (the start of) the body.
fn http_error(response: &mut Response<Body>) -> Error {
    let status = response.status();
    let mut body = Vec::new();
    let _ = response.body_mut().as_reader().take(ERROR_BODY).read_to_end(&mut body);
    let text = String::from_utf8_lossy(&body).split_whitespace().collect::<Vec<_>>().join(" ");
    let reason = status.canonical_reason().unwrap_or("error");
    let message = if text.is_empty() { reason.to_owned() } else { format!("{reason}: {text}") };
    Error::Http { status: Some(status.as_u16()), message }
}

/// A 401, with what to configure.
fn unauthorized(response: &Response<Body>, url: &str) -> Error {
    let challenge = response
        .headers()
        .get("www-authenticate")
        .and_then(|value| value.to_str().ok())
        .unwrap_or("");
    let metadata = challenge
        .split("resource_metadata=")
        .nth(1)
        .map(|rest| rest.trim_start_matches('"').split('"').next().unwrap_or(rest).to_owned());
    let mut message = format!(
        "{url} needs authorization: set \"bearerTokenEnv\" to a variable holding a token, \
         or an \"Authorization\" header, in the server's entry"
    );
    if let Some(metadata) = metadata {
        message.push_str(&format!(" (the server advertises OAuth at {metadata})"));
    }
    Error::Http { status: Some(401), message }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_in_messages_hide_credentials() {
        assert_eq!(
            redact_url("https://user:pw@example.com/mcp?key=s3cr3t"),
            "https://example.com/mcp?…"
        );
        assert_eq!(redact_url("http://127.0.0.1:9/mcp"), "http://127.0.0.1:9/mcp");
    }

    #[test]
    fn origins() {
        assert_eq!(
            origin_of("http://127.0.0.1:8080/mcp?x=1").as_deref(),
            Some("http://127.0.0.1:8080")
        );
        assert_eq!(origin_of("HTTPS://Example.com").as_deref(), Some("https://example.com"));
        assert_eq!(origin_of("nope"), None);
        assert_eq!(origin_of("https://a.example:443/x"), origin_of("https://a.example/y"));
        assert_eq!(origin_of("http://me@a.example/x").as_deref(), Some("http://a.example"));
    }
}
