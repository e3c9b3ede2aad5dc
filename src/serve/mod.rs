//! tether as an MCP server in front of its hub (`tether serve`): the
//! servers it connects, served as one server to the clients in front, on
//! stdio (one client), Streamable HTTP (`http.rs`, many) or a Unix socket
//! (`unix.rs`, many local ones: the CLI's kept-alive sessions).
//!
//! The same blocking shape as the client side. A front reads its clients
//! on the caller's thread (HTTP: one thread per connection as well);
//! requests go to a bounded pool of `serve-worker-N` threads, each
//! answering one at a time from the hub (`answer/`); stdio's one
//! `serve-writer` writes every frame, an HTTP connection writes its own
//! stream; `serve-changes` and `serve-restarts` keep house
//! (`housekeeping.rs`). Every queue is
//! bounded: a request that finds the pool's queue full is answered at once
//! that tether is busy, so a reader never waits on the workers (it must go
//! on reading the answers to tether's own requests to its client,
//! `link.rs`, which a worker may be waiting for). No lock is held while
//! anything is written.
//!
//! Both eras in front: a client that sends `initialize` (2024-11-05 to
//! 2025-11-25) gets the handshake, one that sends `server/discover` and
//! `_meta` on each request (2026-07-28) is answered statelessly, whatever
//! the upstream servers speak. The end of a stdio client's input, or
//! `Downstream::stop` over HTTP, ends the serving: the calls under way are
//! cancelled and every thread is joined.

mod about;
mod answer;
mod flights;
mod host;
mod housekeeping;
mod http;
mod http_wire;
mod link;
mod mirrored;
mod pipe_out;
mod queue;
mod rounds;
mod stdio;
mod streams;
mod unix;

pub use unix::unix_peer;

use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use crossbeam_channel::bounded;

use crate::client::{CancelHandle, PassedResult};
use crate::error::Error;
use crate::framing::{FrameError, Framer, Next};
use crate::host::Host;
use crate::hub::Hub;
use crate::jsonrpc::{Frame, Message, Request, RequestId, RpcError};
use crate::sync::lock;
use answer::Answerer;
use flights::Flights;
use host::LinkHost;
use link::{Link, Links, Outlet, Underway};
use pipe_out::PipeOut;
use queue::Queue;
use rounds::Rounds;
use streams::Route;

/// Requests answered at once.
const WORKERS: usize = 8;
/// Requests waiting for a worker; past this one is answered "busy".
const WAITING_REQUESTS: usize = 64;
/// Frames waiting for the writer.
const WAITING_FRAMES: usize = 1024;

/// How `tether serve` serves.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ServeOptions {
    /// Serve this one server with its own names (`tether serve NAME`), and
    /// pass it what tether does not answer itself.
    pub passthrough: Option<String>,
    /// Offer the `tether__status` tool: each server's state.
    pub status_tool: bool,
    /// Over HTTP: the bearer token every request must carry. `None` takes
    /// requests without one (a host that guards the port otherwise).
    pub bearer_token: Option<String>,
    /// Over HTTP: origins allowed besides loopback ones
    /// (`https://app.example`), for a browser page that may call tether.
    pub allowed_origins: Vec<String>,
    /// Over a Unix socket: end the serving once no client has been
    /// connected for this long.
    pub idle_exit: Option<Duration>,
    /// Serving one server alone: where what it said of itself (its
    /// capabilities beyond the lists, `serverInfo`, instructions) is kept
    /// across servings, so that `initialize`, answered before the server
    /// connects, says it too. `None`: this serving only.
    pub about_file: Option<std::path::PathBuf>,
}

impl ServeOptions {
    /// Serves one server with its own names.
    pub fn with_passthrough(mut self, server: &str) -> ServeOptions {
        self.passthrough = Some(server.to_owned());
        self
    }

    /// Offers the `tether__status` tool.
    pub fn with_status_tool(mut self, on: bool) -> ServeOptions {
        self.status_tool = on;
        self
    }

    /// Over HTTP, requires `Authorization: Bearer TOKEN` on every request.
    pub fn with_bearer_token(mut self, token: &str) -> ServeOptions {
        self.bearer_token = Some(token.to_owned());
        self
    }

    /// Over a Unix socket, ends the serving once no client has been
    /// connected for `idle`.
    pub fn with_idle_exit(mut self, idle: Duration) -> ServeOptions {
        self.idle_exit = Some(idle);
        self
    }

    /// Keeps what the one server served alone said of itself in `file`
    /// (see [`ServeOptions::about_file`]).
    pub fn with_about_file(mut self, file: &std::path::Path) -> ServeOptions {
        self.about_file = Some(file.to_owned());
        self
    }

    /// Over HTTP, also takes requests from a page of `origin`.
    pub fn with_allowed_origin(mut self, origin: &str) -> ServeOptions {
        self.allowed_origins.push(origin.trim_end_matches('/').to_owned());
        self
    }
}

/// The clients in front of tether. Made before the hub, whose host it is
/// ([`Downstream::host`]: server requests for roots, sampling and
/// elicitation go to the client active last that takes them), then served
/// with [`Downstream::serve`] (stdio) or [`Downstream::serve_http`].
#[derive(Default)]
pub struct Downstream {
    links: Arc<Links>,
    /// The calls of 2026-07-28 clients that may ask them something.
    rounds: Arc<Rounds>,
    /// Set by [`Downstream::stop`]; the HTTP front's address, to wake its
    /// listener.
    stopped: AtomicBool,
    listening: Mutex<Option<SocketAddr>>,
}

impl Downstream {
    /// A downstream not connected yet.
    pub fn new() -> Downstream {
        Downstream::default()
    }

    /// The host to give the hub (`HubOptions::with_host`).
    pub fn host(&self) -> Arc<dyn Host> {
        Arc::new(LinkHost { links: Arc::clone(&self.links), rounds: Arc::clone(&self.rounds) })
    }

    /// Serves `hub` to the client writing `input` and reading `output`
    /// (newline-delimited JSON-RPC, as MCP's stdio transport), until
    /// `input` ends. The calls still under way are then cancelled. Both are
    /// read and written through their descriptors (stdin and stdout, pipes,
    /// sockets), which are never made non-blocking.
    ///
    /// # Errors
    /// A serving thread cannot be started.
    pub fn serve(
        &self,
        hub: &Hub,
        input: impl AsFd,
        output: impl AsFd + Send,
        options: &ServeOptions,
    ) -> Result<(), Error> {
        let (frames, outgoing) = bounded::<Vec<u8>>(WAITING_FRAMES);
        let out = Arc::new(PipeOut::new(output.as_fd().as_raw_fd(), frames));
        let link = Arc::new(Link::new(Outlet::Pipe(Arc::clone(&out))));
        self.links.add(&link);
        let served = std::thread::scope(|scope| {
            let writer = std::thread::Builder::new()
                .name("serve-writer".into())
                .spawn_scoped(scope, || out.drain(&outgoing));
            let served =
                self.run(hub, options, |core| stdio::read_in_turns(input.as_fd(), core, &link));
            // The writer ends once what is queued is written.
            self.links.remove(&link);
            link.close();
            out.close();
            let written = writer.map(|writer| {
                let _ = writer.join();
            });
            served.and(written.map_err(Error::Io))
        });
        served
    }

    /// Serves `hub` over Streamable HTTP on `listener` (at its `/mcp`),
    /// until [`Downstream::stop`]: each client that sends `initialize`
    /// gets a session, a 2026-07-28 client is answered statelessly. Every
    /// request must carry `options`' bearer token when it has one, and a
    /// browser's `Origin` must be loopback's or one allowed.
    ///
    /// # Errors
    /// The listener cannot be read, or a serving thread cannot be started.
    pub fn serve_http(
        &self,
        hub: &Hub,
        listener: TcpListener,
        options: &ServeOptions,
    ) -> Result<(), Error> {
        *lock(&self.listening) = Some(listener.local_addr().map_err(Error::Io)?);
        let served = self.run(hub, options, |core| {
            http::Front::new(core, &self.links, options, &listener).accept_all(&self.stopped)
        });
        *lock(&self.listening) = None;
        served.and_then(|accepted| accepted.map_err(Error::Io))
    }

    /// Serves `hub` on a Unix socket: each client that connects speaks
    /// MCP's stdio framing (a JSON-RPC message a line) and is a client of
    /// its own, in either era. Only clients of this process's user are
    /// served; make the socket's folder private too. Serves until
    /// [`Downstream::stop`], or until no client has been connected for
    /// `options`' idle time.
    ///
    /// # Errors
    /// The listener cannot be read, or a serving thread cannot be started.
    pub fn serve_unix(
        &self,
        hub: &Hub,
        listener: std::os::unix::net::UnixListener,
        options: &ServeOptions,
    ) -> Result<(), Error> {
        let served = self.run(hub, options, |core| {
            unix::accept_all(core, &self.links, &listener, &self.stopped, options.idle_exit)
        });
        served.and_then(|accepted| accepted.map_err(Error::Io))
    }

    /// Ends [`Downstream::serve_http`] or [`Downstream::serve_unix`]: no more connections are taken, the
    /// open ones are closed, the calls under way are cancelled.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        if let Some(address) = *lock(&self.listening) {
            // Wakes the listener, which waits in `accept`.
            let _ = std::net::TcpStream::connect_timeout(&address, Duration::from_secs(1));
        }
    }

    /// Runs the serving's own threads (the workers, the change announcer,
    /// the restarter) around `front`, which reads the clients on the
    /// caller's thread; when it returns, what runs is given up and every
    /// thread is joined.
    fn run<T>(
        &self,
        hub: &Hub,
        options: &ServeOptions,
        front: impl FnOnce(&Core<'_>) -> T,
    ) -> Result<T, Error> {
        let jobs = Queue::new(WAITING_REQUESTS);
        let ended = AtomicBool::new(false);
        let answerer = Answerer {
            hub,
            options,
            resource_servers: Mutex::new(Default::default()),
            about: about::AboutMemory::kept_in(options.about_file.as_deref()),
        };
        let flights = Arc::new(Flights::default());
        let core = Core {
            hub,
            links: &self.links,
            rounds: &self.rounds,
            jobs: &jobs,
            flights: &flights,
            answerer: &answerer,
        };
        let named = |name: String| std::thread::Builder::new().name(name);
        std::thread::scope(|scope| {
            let mut threads = Vec::with_capacity(WORKERS + 3);
            for n in 0..WORKERS {
                let (jobs, core) = (&jobs, &core);
                threads.push(
                    named(format!("serve-worker-{n}"))
                        .spawn_scoped(scope, move || work(jobs, core)),
                );
            }
            let (links, ended_flag) = (&*self.links, &ended);
            threads.push(named("serve-changes".into()).spawn_scoped(scope, move || {
                housekeeping::announce_changes(hub, links, ended_flag)
            }));
            threads.push(
                named("serve-restarts".into())
                    .spawn_scoped(scope, move || housekeeping::keep_servers(hub, ended_flag)),
            );
            let deadlines = &flights;
            threads.push(
                named("serve-deadlines".into())
                    .spawn_scoped(scope, move || deadlines.keep_deadlines()),
            );
            let failed_early = threads.iter().any(Result::is_err);
            // A panic in the front (a request answered on its thread) still
            // ends the serving below, so that every thread is joined.
            let outcome = (!failed_early)
                .then(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| front(&core))));
            // The clients are gone: nothing more is asked; what runs is
            // given up.
            ended.store(true, Ordering::Relaxed);
            jobs.close();
            for link in self.links.all() {
                link.cancel_all();
            }
            flights.end();
            self.rounds.cancel_all();
            let mut failed = None;
            for thread in threads {
                match thread {
                    Ok(thread) => {
                        let _ = thread.join();
                    }
                    Err(err) => failed = Some(err),
                }
            }
            match (outcome, failed) {
                (Some(Err(panic)), _) => std::panic::resume_unwind(panic),
                (Some(Ok(outcome)), None) => Ok(outcome),
                (_, Some(err)) => Err(Error::Io(err)),
                (None, None) => unreachable!("a thread failed to start"),
            }
        })
    }
}

/// A request of a client's taken in (`Link::admit`): its cancellation
/// finds it from now on, queued or being answered, until it is answered.
struct Admitted {
    request: Request,
    /// Given up by the client's cancellation, its going, the serving's end.
    cancel: CancelHandle,
}

/// A request, and the client whose it is.
struct Job {
    link: Arc<Link>,
    admitted: Admitted,
    /// Counted among the link's requests under way from the moment it is
    /// queued until a worker has answered it: between the worker taking it
    /// and beginning its answer, nothing else would count it, and the end
    /// of the input would find nothing under way.
    _counted: Counted,
}

/// One more of a link's requests under way (`Link::answering`), while it
/// lives.
struct Counted(Arc<Link>);

impl Counted {
    fn new(link: &Arc<Link>) -> Counted {
        link.answering.fetch_add(1, Ordering::Relaxed);
        Counted(Arc::clone(link))
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.answering.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What a front hands its clients' frames to.
struct Core<'a> {
    hub: &'a Hub,
    links: &'a Links,
    rounds: &'a Rounds,
    jobs: &'a Queue<Job>,
    flights: &'a Arc<Flights>,
    answerer: &'a Answerer<'a>,
}

impl Core<'_> {
    /// A request from `link`'s client, for a worker; answered "busy" at
    /// once when every worker is taken and the queue is full.
    fn submit(&self, link: &Arc<Link>, admitted: Admitted) {
        self.links.touch(link);
        let job = Job { link: Arc::clone(link), admitted, _counted: Counted::new(link) };
        if let Err(job) = self.jobs.push(job, Duration::ZERO) {
            let busy = RpcError {
                code: -32000,
                message: "tether is busy: too many requests at once".into(),
                data: None,
            };
            let id = &job.admitted.request.id;
            job.link.forget(id, &job.admitted.cancel);
            job.link.send(Route::Answer(id), Frame::response(id, &Err(busy)));
        }
    }

    /// Takes in `request` of `link`'s byte stream (`Link::admit`), or
    /// refuses it at once when its id names a request of the client's under
    /// way (MCP forbids reusing an id): answered twice under one id, the
    /// client could not tell which answer is which, nor cancel one. The
    /// refusal goes under a null id, the message naming the id: under that
    /// id the client would take it for the first request's answer.
    fn admit(&self, link: &Arc<Link>, request: Request) -> Option<Admitted> {
        match link.admit(&request.id) {
            Some(cancel) => Some(Admitted { request, cancel }),
            None => {
                let message = format!("request id {} is in use by a request under way", request.id);
                let refused = json!({"jsonrpc": "2.0", "id": null,
                                     "error": {"code": -32600, "message": message}});
                link.send_bytes(Route::Announce, serde_json::to_vec(&refused).unwrap_or_default());
                None
            }
        }
    }

    /// Passes `request` of `link`'s client on as a flight (`flights.rs`):
    /// written upstream on this thread, answered by the thread that reads
    /// the answer, nobody waiting. A handshake client's call of a server's
    /// tool that is ready and read by a thread of its own goes so; any
    /// other request is handed back, for a worker.
    fn send_ahead(&self, link: &Arc<Link>, admitted: Admitted) -> Option<Admitted> {
        let request = &admitted.request;
        if request.method != "tools/call" {
            return Some(admitted);
        }
        let Some(params) = request.params.as_ref() else { return Some(admitted) };
        // A 2026-07-28 client says so on every request.
        answer::learn_stateless(link, params);
        let (stateless, log_level) = {
            let peer = lock(&link.peer);
            (peer.stateless, peer.log_level)
        };
        // Its answer, written by the thread that reads the server, must
        // find room at once: every flight's, and a frame more.
        if stateless || !link.has_room(flights::MAX_FLYING + 1) {
            return Some(admitted);
        }
        let Some(name) = params.get("name").and_then(serde_json::Value::as_str) else {
            return Some(admitted);
        };
        let Some((server, tool)) = self.answerer.passed_tool(name) else { return Some(admitted) };
        let empty = json!({});
        let arguments = match params.get("arguments") {
            None | Some(serde_json::Value::Null) => &empty,
            Some(arguments) if arguments.is_object() => arguments,
            // A worker refuses it.
            Some(_) => return Some(admitted),
        };
        let token = params.pointer("/_meta/progressToken").cloned();
        let Some(flight) = self.flights.begin(link, &request.id, token, &server) else {
            return Some(admitted);
        };
        self.links.touch(link);
        let sink = Arc::clone(&flight) as Arc<dyn crate::client::Sink>;
        // The log messages about it, at the level the client set, go before
        // its answer as a worker's call's do.
        let logs = Some(log_level.unwrap_or(crate::protocol::LogLevel::Info));
        match self.hub.send_server_tool(&server, &tool, arguments, sink, logs) {
            Ok(Some((client, sent))) => flight.sent(client, sent),
            Ok(None) => {
                flight.not_sent();
                return Some(admitted.readmitted(link));
            }
            // A worker answers an unknown tool as the client named it.
            Err(err) if matches!(err.root(), Error::UnknownTool(_)) => {
                flight.not_sent();
                return Some(admitted.readmitted(link));
            }
            Err(err) => flight.answer(Err(err)),
        }
        None
    }

    /// Answers `request` of `link`'s client on this thread (a worker's, or
    /// the stdio reader's). A stateless client's call that may ask it
    /// something is a round (`rounds.rs`): its answer goes to whichever of
    /// the client's requests waits for it then.
    fn answer(&self, link: &Arc<Link>, admitted: Admitted) {
        let Admitted { request, cancel } = admitted;
        // Cancelled while it waited for a worker: no answer, as MCP says
        // (over HTTP its stream still ends).
        if cancel.is_cancelled() {
            link.forget(&request.id, &cancel);
            link.send_bytes(Route::Answer(&request.id), Vec::new());
            return;
        }
        let rounds = self.rounds;
        if rounds.retry(link, &request) {
            return;
        }
        let answering = Answering::begin(link, &request.id, &cancel);
        let round = rounds.begin(link, &request, &cancel);
        let outcome =
            rounds::within(round.as_ref(), || self.answerer.answer(link, &request, &cancel));
        drop(answering);
        if let Some(round) = round {
            let outcome = outcome.map(PassedResult::into_value);
            if round.finish(outcome, cancel.is_cancelled()) {
                rounds.forget(&round);
            }
            return;
        }
        // A request the client cancelled gets no answer (as MCP says);
        // over HTTP its stream still ends.
        let bytes = match outcome {
            _ if cancel.is_cancelled() => Vec::new(),
            Ok(PassedResult::Text(text)) => crate::envelope::response_with(&request.id, &text),
            Ok(PassedResult::Value(value)) => Frame::response(&request.id, &Ok(value)).bytes,
            Err(error) => Frame::response(&request.id, &Err(error)).bytes,
        };
        link.send_bytes(Route::Answer(&request.id), bytes);
    }

    /// A frame from `link`'s client that is not a request: a notification,
    /// or the answer to one of tether's requests.
    fn hear(&self, link: &Link, message: Message) {
        match message {
            Message::Notification(notification) => {
                heard(self.hub, link, &notification.method, notification.params.as_ref());
            }
            Message::Response(response) => {
                if let RequestId::Number(id) = response.id {
                    link.answered(id, response.outcome);
                }
            }
            Message::Request(request) => log::debug!("a request heard as news: {}", request.method),
        }
    }
}

impl Admitted {
    /// Under way on `link` again, as a request a worker answers: a flight
    /// that could not be sent forgot it.
    fn readmitted(self, link: &Link) -> Admitted {
        let underway = Underway::Answered(self.cancel.clone());
        lock(&link.in_flight).insert(self.request.id.clone(), underway);
        self
    }
}

/// A request of a link's being answered: counted until this is dropped
/// (however the answer ends), when the link forgets it.
struct Answering<'a> {
    link: &'a Link,
    id: &'a RequestId,
    cancel: CancelHandle,
}

impl<'a> Answering<'a> {
    fn begin(link: &'a Link, id: &'a RequestId, cancel: &CancelHandle) -> Answering<'a> {
        link.answering.fetch_add(1, Ordering::Relaxed);
        // Closed since a worker took it: given up as the others were.
        if link.is_closed() {
            cancel.cancel();
        }
        Answering { link, id, cancel: cancel.clone() }
    }
}

impl Drop for Answering<'_> {
    fn drop(&mut self) {
        self.link.forget(self.id, &self.cancel);
        self.link.answering.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What a frame read from a byte stream came to.
enum Taken {
    /// A request to answer, taken in.
    Request(Admitted),
    /// Anything else, dealt with already.
    Heard,
}

/// One frame from a byte-stream client: a request to answer, or what is
/// dealt with at once (a listen held open, a notification, an answer to
/// tether, a frame that is not JSON-RPC).
fn take_frame(frame: &[u8], core: &Core<'_>, link: &Arc<Link>) -> Taken {
    match parse(frame) {
        // Held open, not answered: it never takes a worker.
        Ok(Message::Request(request)) if request.method == "subscriptions/listen" => {
            if !link.refuses_listen(&request.id) {
                link.listen(&request.id, request.params.as_ref());
            }
        }
        Ok(Message::Request(request)) => {
            if let Some(admitted) = core.admit(link, request) {
                return Taken::Request(admitted);
            }
        }
        Ok(message) => core.hear(link, message),
        Err(why) => {
            log::warn!("the client in front of tether sent a frame that is not JSON-RPC: {why}");
            if let Some(refused) = refusal(frame, &why) {
                link.send_bytes(Route::Announce, serde_json::to_vec(&refused).unwrap_or_default());
            }
        }
    }
    Taken::Heard
}

/// A client's frame as a message, in JSON-RPC 2.0 only. One with a method
/// and a null id is a request in JSON-RPC's words (a notification has no
/// id at all), which MCP forbids: refused, where `Message::parse` (lenient
/// with servers) reads it as a notification.
fn parse(frame: &[u8]) -> Result<Message, String> {
    let message = Message::parse_strict(frame)?;
    if matches!(message, Message::Notification(_)) && has_null_id(frame) {
        return Err("a request's id may not be null".to_owned());
    }
    Ok(message)
}

/// True when `frame`'s top level has an `id` member that is null (read
/// again, skipped through: only a notification is asked).
fn has_null_id(frame: &[u8]) -> bool {
    use serde::de::IgnoredAny;
    use serde::Deserialize;
    #[derive(Deserialize)]
    struct Shape {
        #[serde(default, deserialize_with = "present")]
        id: Option<Option<IgnoredAny>>,
    }
    fn present<'de, D: serde::Deserializer<'de>>(
        member: D,
    ) -> Result<Option<Option<IgnoredAny>>, D::Error> {
        Option::<IgnoredAny>::deserialize(member).map(Some)
    }
    serde_json::from_slice::<Shape>(frame).is_ok_and(|shape| matches!(shape.id, Some(None)))
}

/// The answer to a frame that is not a message tether takes (JSON-RPC 2.0,
/// section 5): -32700 for text that is not JSON; -32600 for JSON that is
/// not a request (a batch, which MCP no longer has; an id neither a number
/// nor a string), with its id where one can be read, else null. `None` for
/// what has the shape of an answer: an answer is never answered.
fn refusal(frame: &[u8], why: &str) -> Option<serde_json::Value> {
    use serde::de::IgnoredAny;
    use serde_json::Value;
    /// Its top level, the members' values skipped.
    #[derive(serde::Deserialize)]
    struct Shape {
        id: Option<crate::jsonrpc::IdField>,
        method: Option<IgnoredAny>,
        result: Option<IgnoredAny>,
        error: Option<IgnoredAny>,
    }
    let invalid = |id: Value, message: String| Some((-32600, id, message));
    let (code, id, message) = match frame.iter().find(|byte| !byte.is_ascii_whitespace()) {
        _ if serde_json::from_slice::<IgnoredAny>(frame).is_err() => {
            Some((-32700, Value::Null, format!("parse error: {why}")))
        }
        Some(b'[') => invalid(Value::Null, "batches are not served".to_owned()),
        Some(b'{') => match serde_json::from_slice::<Shape>(frame) {
            Ok(shape)
                if shape.method.is_none() && (shape.result.is_some() || shape.error.is_some()) =>
            {
                None
            }
            Ok(shape) => {
                let id = shape.id.and_then(|id| id.0);
                let id = id.map_or(Value::Null, |id| serde_json::to_value(id).unwrap_or_default());
                invalid(id, format!("invalid request: {why}"))
            }
            Err(_) => invalid(Value::Null, format!("invalid request: {why}")),
        },
        _ => invalid(Value::Null, "invalid request: a message is a JSON object".to_owned()),
    }?;
    Some(json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}))
}

/// What a byte-stream client's frame that cannot be read comes to: a line
/// past the 16 MiB a frame may hold is answered -32600 (its id unread,
/// null) and skipped, and reading goes on (true); anything else (the input
/// failed, a `Content-Length` header that is not one) ends the input.
fn read_on_after(err: FrameError, framer: &mut Framer, link: &Link) -> bool {
    match err {
        FrameError::TooLarge { .. } => {
            let mib = crate::framing::MAX_FRAME >> 20;
            log::warn!("the client in front of tether sent a line of more than {mib} MiB: skipped");
            let message = format!("invalid request: a message of more than {mib} MiB");
            let refused = json!({"jsonrpc": "2.0", "id": null,
                                 "error": {"code": -32600, "message": message}});
            link.send_bytes(Route::Announce, serde_json::to_vec(&refused).unwrap_or_default());
            framer.skip_oversized();
            true
        }
        FrameError::Io(err) => {
            log::warn!("the client in front of tether sent what tether cannot read: {err}");
            false
        }
    }
}

/// A Unix socket client's reader: frames from it until its input ends,
/// each request for the workers.
fn read_all(input: &mut impl Read, core: &Core<'_>, link: &Arc<Link>) {
    let mut framer = Framer::default();
    loop {
        match framer.next_frame() {
            Ok(Next::Frame(frame)) => {
                if let Taken::Request(admitted) = take_frame(frame, core, link) {
                    core.submit(link, admitted);
                }
            }
            Ok(Next::More) => match framer.fill_from(input) {
                Ok(_) => {}
                Err(err) => {
                    log::debug!("the client's input failed: {err}");
                    return;
                }
            },
            Ok(Next::End) => return,
            Err(err) => {
                if !read_on_after(err, &mut framer, link) {
                    return;
                }
            }
        }
    }
}

/// A notification from a client.
fn heard(hub: &Hub, link: &Link, method: &str, params: Option<&serde_json::Value>) {
    match method {
        "notifications/initialized" => {
            let roots = {
                let mut peer = lock(&link.peer);
                peer.ready = true;
                peer.capabilities.get("roots").is_some()
            };
            // The servers connected before the client said it has roots:
            // they ask again now.
            if roots {
                hub.notify_roots_changed();
            }
        }
        "notifications/roots/list_changed" => hub.notify_roots_changed(),
        "notifications/cancelled" => {
            let id = params
                .and_then(|params| params.get("requestId"))
                .and_then(|id| serde_json::from_value::<RequestId>(id.clone()).ok());
            let Some(id) = id else { return };
            if link.stop_listening(&id) {
                return;
            }
            link.cancel_request(&id);
        }
        _ => {}
    }
}

/// A worker: answers requests until the queue closes.
fn work(jobs: &Queue<Job>, core: &Core<'_>) {
    while let Some(Job { link, admitted, _counted }) = jobs.pop() {
        // Its client is gone (a session ended, a connection closed).
        if link.is_closed() {
            link.forget(&admitted.request.id, &admitted.cancel);
        } else {
            core.answer(&link, admitted);
        }
    }
}

/// 128 random bits in hex: a session id, a `requestState` token.
fn random_hex() -> Option<String> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 16];
    ring::rand::SystemRandom::new().fill(&mut bytes).ok()?;
    Some(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

/// Compares two secrets in time that does not depend on where they differ.
fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    given.len() == expected.len()
        && given.iter().zip(expected).fold(0u8, |differ, (a, b)| differ | (a ^ b)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abd", b"abc"));
        assert!(!same_secret(b"ab", b"abc"));
    }

    #[test]
    fn random_ids_are_long_and_differ() {
        let (a, b) = (random_hex().unwrap(), random_hex().unwrap());
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }
}
