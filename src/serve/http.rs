//! The Streamable HTTP front: `tether serve --http`. The caller's thread
//! accepts connections; each is read on its own `serve-http-N` thread (at
//! most `MAX_CONNECTIONS` at once), which checks the request (path, Host,
//! Origin, bearer token), hands a JSON-RPC request to the serving's
//! workers (`Core::submit`), and writes the answer: as JSON, or as an
//! event stream that carries the request's news first (`streams.rs`).
//!
//! A client that sends `initialize` gets a session (`Mcp-Session-Id`),
//! which is one `Link`: its capabilities, its requests under way, its
//! streams. At most `MAX_SESSIONS` live at once; a new one takes the place
//! of the one idle longest, if it has been idle a while. A 2026-07-28
//! client needs no session: its requests share one stateless link, and its
//! `subscriptions/listen` is a request stream held open.
//!
//! Every bound is here: connections, sessions, a request's size and the
//! time it may take to arrive, frames waiting on a stream. Stopping shuts
//! every connection, so that each thread ends and is joined.

use std::collections::HashMap;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use serde_json::{json, Value};

use super::http_wire::{self, Conn, HttpRequest, Incoming};
use super::link::{Link, Links, Outlet};
use super::streams::{Piece, Streams};
use super::{Core, ServeOptions};
use crate::jsonrpc::{Message, Request, RequestId};
use crate::protocol::{MODERN_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS};
use crate::sync::lock;
use crate::url::WebUrl;

/// Where MCP is served.
pub(super) const PATH: &str = "/mcp";
/// Connections read at once; past this one is answered 503.
const MAX_CONNECTIONS: usize = 64;
/// Sessions kept at once.
const MAX_SESSIONS: usize = 32;
/// A session idle this long (no request, no stream open) may give its
/// place to a new one when `MAX_SESSIONS` live: a client that crashed
/// never ends its session, and one that restarts often must not lock every
/// other out for long. A client whose session ended so is told 404 and
/// initializes again, as MCP asks.
const SESSION_IDLE: Duration = Duration::from_secs(60);
/// The same for a session whose client never said `initialized`: a
/// handshake begun and left.
const HALF_OPEN_IDLE: Duration = Duration::from_secs(10);
/// The largest request body.
const MAX_BODY: usize = 4 * 1024 * 1024;
/// How long a kept connection waits for its next request.
const CONNECTION_IDLE: Duration = Duration::from_secs(30);
/// How long a request may take to arrive, once begun.
const REQUEST_WAIT: Duration = Duration::from_secs(10);
/// How often a stream that waits looks whether the serving stopped.
const TICK: Duration = Duration::from_millis(500);
/// A quiet stream gets a comment this often (a client gone is found so).
const QUIET: Duration = Duration::from_secs(15);

/// A request refused: its status and why.
type Refusal = (u16, &'static str);

/// One session: its link and its streams.
struct Session {
    link: Arc<Link>,
    streams: Arc<Streams>,
    used: Instant,
}

pub(super) struct Front<'a> {
    core: &'a Core<'a>,
    links: &'a Links,
    options: &'a ServeOptions,
    listener: &'a TcpListener,
    /// Listening on loopback: the Host header must name loopback too.
    loopback: bool,
    sessions: Mutex<HashMap<String, Session>>,
    /// The connections being read, to shut when stopping.
    open: Mutex<HashMap<u64, TcpStream>>,
    active: AtomicUsize,
}

/// A connection's place among those read at once, given back on drop.
struct Slot<'a, 'b> {
    front: &'a Front<'b>,
    number: u64,
}

impl Drop for Slot<'_, '_> {
    fn drop(&mut self) {
        lock(&self.front.open).remove(&self.number);
        self.front.active.fetch_sub(1, Ordering::SeqCst);
    }
}

/// How a request leaves its connection.
enum After {
    /// Ready for the connection's next request.
    Next,
    /// Answered on an event stream: the connection closes.
    Answered,
    /// Ended without an answer (the serving stopped, the session ended):
    /// the connection closes.
    Close,
}

impl<'a> Front<'a> {
    pub(super) fn new(
        core: &'a Core<'a>,
        links: &'a Links,
        options: &'a ServeOptions,
        listener: &'a TcpListener,
    ) -> Front<'a> {
        let loopback = listener.local_addr().is_ok_and(|address| address.ip().is_loopback());
        Front {
            core,
            links,
            options,
            listener,
            loopback,
            sessions: Mutex::new(HashMap::new()),
            open: Mutex::new(HashMap::new()),
            active: AtomicUsize::new(0),
        }
    }

    /// Accepts connections until `stopped`; then closes every one and every
    /// session, and returns once each connection's thread has ended.
    pub(super) fn accept_all(&self, stopped: &AtomicBool) -> std::io::Result<()> {
        let accepted = std::thread::scope(|scope| {
            let mut number = 0u64;
            let outcome = loop {
                let stream = match self.listener.accept() {
                    Ok((stream, _)) => stream,
                    Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
                    // Out of descriptors, a connection aborted before it was
                    // taken: the listener is still good.
                    Err(err) if !stopped.load(Ordering::SeqCst) => {
                        log::warn!("accepting a connection failed: {err}");
                        std::thread::sleep(Duration::from_millis(50));
                        continue;
                    }
                    Err(err) => break Err(err),
                };
                if stopped.load(Ordering::SeqCst) {
                    break Ok(());
                }
                if self.active.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
                    let mut stream = stream;
                    let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
                    let _ = http_wire::respond(
                        &mut stream,
                        503,
                        &[("Retry-After", "1")],
                        b"too many connections",
                        false,
                    );
                    continue;
                }
                number += 1;
                if let Ok(clone) = stream.try_clone() {
                    lock(&self.open).insert(number, clone);
                }
                self.active.fetch_add(1, Ordering::SeqCst);
                let spawned = std::thread::Builder::new()
                    .name(format!("serve-http-{number}"))
                    .spawn_scoped(scope, move || {
                        // The slot is given back however the thread ends.
                        let _slot = Slot { front: self, number };
                        self.connection(stream, stopped);
                    });
                if let Err(err) = spawned {
                    log::warn!("cannot read a connection: {err}");
                    lock(&self.open).remove(&number);
                    self.active.fetch_sub(1, Ordering::SeqCst);
                }
            };
            // Every connection ends: reads wake, streams close.
            for stream in lock(&self.open).values() {
                let _ = stream.shutdown(Shutdown::Both);
            }
            for (_, session) in lock(&self.sessions).drain() {
                self.end(&session);
            }
            outcome
        });
        accepted
    }

    /// Ends a session: its streams close, its calls are given up.
    fn end(&self, session: &Session) {
        session.streams.close_all();
        session.link.close();
        self.links.remove(&session.link);
    }

    /// One connection's requests, until it closes or the serving stops.
    fn connection(&self, stream: TcpStream, stopped: &AtomicBool) {
        let mut conn = Conn::new(stream);
        while !stopped.load(Ordering::SeqCst) {
            match conn.read_request(CONNECTION_IDLE, REQUEST_WAIT, MAX_BODY) {
                Incoming::Closed => return,
                Incoming::Refused(status, why) => {
                    let _ =
                        http_wire::respond(&mut conn.stream, status, &[], why.as_bytes(), false);
                    http_wire::linger(&mut conn.stream);
                    return;
                }
                Incoming::Request(request) => {
                    let keep = request.keep_alive;
                    match self.exchange(&mut conn.stream, &request, stopped) {
                        Ok(After::Next) if keep => {}
                        Ok(_) | Err(_) => return,
                    }
                }
            }
        }
    }

    /// Answers one HTTP request.
    fn exchange(
        &self,
        stream: &mut TcpStream,
        request: &HttpRequest,
        stopped: &AtomicBool,
    ) -> std::io::Result<After> {
        let keep = request.keep_alive;
        // A page allowed to call (another port of this machine, or an
        // origin given with --allow-origin) may read every answer.
        let origin = request.header("origin").filter(|origin| self.origin_allowed(origin));
        http_wire::answering_origin(origin);
        if request.path != PATH {
            return plain(stream, 404, &format!("MCP is served at {PATH}"), keep);
        }
        // A browser's preflight carries no credentials: only where the
        // request goes and who sends it are checked.
        if request.method == "OPTIONS" {
            match self.misdirected(request) {
                Some((status, text)) => {
                    http_wire::respond(stream, status, &[], text.as_bytes(), keep)?
                }
                None if origin.is_some() => {
                    let asked = request.header("access-control-request-headers").unwrap_or("");
                    http_wire::preflight(stream, asked, keep)?;
                }
                None => http_wire::respond(
                    stream,
                    405,
                    &[("Allow", "GET, POST, DELETE")],
                    b"OPTIONS is a browser's preflight, with an Origin",
                    keep,
                )?,
            }
            return Ok(After::Next);
        }
        if let Some(why) = self.refusal(request) {
            let (status, text) = why;
            let headers: &[(&str, &str)] =
                if status == 401 { &[("WWW-Authenticate", "Bearer")] } else { &[] };
            http_wire::respond(stream, status, headers, text.as_bytes(), keep)?;
            return Ok(After::Next);
        }
        if let Some(version) = request.header("mcp-protocol-version") {
            if version != MODERN_PROTOCOL_VERSION && !SUPPORTED_PROTOCOL_VERSIONS.contains(&version)
            {
                let text = format!("protocol version {version:?} is not served");
                return rpc_refusal(stream, None, 400, -32600, &text, keep);
            }
        }
        match request.method.as_str() {
            "POST" => self.post(stream, request, stopped),
            "GET" => self.get(stream, request, stopped),
            "DELETE" => self.delete(stream, request),
            _ => {
                http_wire::respond(
                    stream,
                    405,
                    &[("Allow", "GET, POST, DELETE, OPTIONS")],
                    b"MCP takes GET, POST and DELETE",
                    keep,
                )?;
                Ok(After::Next)
            }
        }
    }

    /// True for a page that may call: one on this machine, or one given
    /// with --allow-origin.
    fn origin_allowed(&self, origin: &str) -> bool {
        WebUrl::parse(origin).is_some_and(|url| url.is_loopback())
            || self.options.allowed_origins.iter().any(|allowed| allowed == origin)
    }

    /// A Host or Origin not allowed (DNS rebinding, another site's page).
    fn misdirected(&self, request: &HttpRequest) -> Option<Refusal> {
        if self.loopback {
            let host = request.header("host").unwrap_or("");
            let named = WebUrl::parse(&format!("http://{host}/"));
            if !named.is_some_and(|url| url.is_loopback()) {
                return Some((403, "the Host header does not name this machine"));
            }
        }
        match request.header("origin") {
            Some(origin) if !self.origin_allowed(origin) => {
                Some((403, "requests from this origin are not taken"))
            }
            _ => None,
        }
    }

    /// Why a request is refused before it is read: misdirected, or no
    /// bearer token.
    fn refusal(&self, request: &HttpRequest) -> Option<Refusal> {
        if let Some(refusal) = self.misdirected(request) {
            return Some(refusal);
        }
        if let Some(token) = &self.options.bearer_token {
            let given = request.header("authorization").and_then(|value| {
                let (scheme, credentials) = value.split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| credentials.trim())
            });
            match given {
                None => return Some((401, "a bearer token is required")),
                Some(given) if !super::same_secret(given.as_bytes(), token.as_bytes()) => {
                    return Some((401, "the bearer token is not this serving's"));
                }
                Some(_) => {}
            }
        }
        None
    }

    /// A POST: one JSON-RPC message.
    fn post(
        &self,
        stream: &mut TcpStream,
        request: &HttpRequest,
        stopped: &AtomicBool,
    ) -> std::io::Result<After> {
        let keep = request.keep_alive;
        let json = request
            .header("content-type")
            .is_none_or(|kind| kind.to_ascii_lowercase().starts_with("application/json"));
        if !json {
            return plain(stream, 415, "MCP messages are application/json", keep);
        }
        let message = match super::parse(&request.body) {
            Ok(message) => message,
            Err(why) => {
                let refused = super::refusal(&request.body, &why).unwrap_or_else(|| {
                    json!({"jsonrpc": "2.0", "id": null,
                           "error": {"code": -32600, "message": why}})
                });
                let body = serde_json::to_vec(&refused).unwrap_or_default();
                let json = [("Content-Type", "application/json")];
                http_wire::respond(stream, 400, &json, &body, keep)?;
                return Ok(After::Next);
            }
        };
        let stateless = request.header("mcp-protocol-version") == Some(MODERN_PROTOCOL_VERSION)
            || match &message {
                Message::Request(asked) => {
                    asked.method == "server/discover" || is_modern(asked.params.as_ref())
                }
                Message::Notification(told) => is_modern(told.params.as_ref()),
                Message::Response(_) => false,
            };
        let opens = matches!(&message, Message::Request(asked) if asked.method == "initialize");
        let asked_id = match &message {
            Message::Request(asked) => Some(asked.id.clone()),
            _ => None,
        };
        // A stateless request is whole in itself: it gets a link of its own,
        // so that two clients' ids never meet.
        let (link, streams, new_session) = if stateless {
            let streams = Arc::new(Streams::default());
            let link = Arc::new(Link::new(Outlet::Streams(Arc::clone(&streams))));
            {
                let mut peer = lock(&link.peer);
                peer.stateless = true;
                peer.ready = true;
            }
            (link, streams, None)
        } else if opens {
            match self.open_session() {
                Some((id, link, streams)) => (link, streams, Some(id)),
                None => {
                    let text = "too many sessions; end one (DELETE) first";
                    return rpc_refusal(stream, asked_id.as_ref(), 503, -32000, text, keep);
                }
            }
        } else {
            match self.session(request) {
                Ok((link, streams)) => (link, streams, None),
                Err((status, text)) => {
                    return rpc_refusal(stream, asked_id.as_ref(), status, -32001, text, keep)
                }
            }
        };
        let asked = match message {
            Message::Request(asked) => asked,
            told => {
                self.core.hear(&link, told);
                http_wire::respond(stream, 202, &[], b"", keep)?;
                return Ok(After::Next);
            }
        };
        // What a gateway may have routed on must agree with the body.
        if stateless {
            let schema = |name: &str, check: super::mirrored::SchemaCheck<'_>| {
                self.core.answerer.with_input_schema(name, check)?
            };
            if let Some(why) = super::mirrored::mismatch(request, &asked, schema) {
                let text = format!("header mismatch: {why}");
                let code = super::mirrored::HEADER_MISMATCH;
                return rpc_refusal(stream, Some(&asked.id), 400, code, &text, keep);
            }
        }
        let takes_events =
            request.header("accept").is_some_and(|accept| accept.contains("text/event-stream"));
        let session_header = new_session.as_deref().map(|id| ("Mcp-Session-Id", id));
        let headers: Vec<(&str, &str)> = session_header.into_iter().collect();
        if asked.method == "subscriptions/listen" {
            if !takes_events {
                return plain(stream, 406, "subscriptions/listen needs text/event-stream", keep);
            }
            let pieces = streams.open_post(&asked.id, true);
            // A handshake session's: refused on its own stream.
            if !stateless && link.refuses_listen(&asked.id) {
                return self.stream_events(stream, &headers, &pieces, stopped, None);
            }
            // Listening: the link hears the hub's changes while it lasts.
            if stateless {
                self.links.add(&link);
            }
            link.listen(&asked.id, asked.params.as_ref());
            let streamed = self.stream_events(stream, &headers, &pieces, stopped, None);
            link.stop_listening(&asked.id);
            if stateless {
                self.links.remove(&link);
                link.close();
            }
            return streamed;
        }
        // An id the session's client uses for a request under way already
        // would name two requests (and two streams).
        let Some(cancel) = link.admit(&asked.id) else {
            let text = format!("request id {} is in use by a request under way", asked.id);
            return rpc_refusal(stream, Some(&asked.id), 400, -32600, &text, keep);
        };
        let events = takes_events && has_news(&asked);
        let id = asked.id.clone();
        let pieces = streams.open_post(&id, events);
        self.core.submit(&link, super::Admitted { request: asked, cancel });
        // A stateless answer that comes before any news goes as JSON, its
        // status saying what its error is (404 for a method not served).
        let answered = if events {
            self.stream_events(stream, &headers, &pieces, stopped, stateless.then_some(keep))
        } else {
            self.answer_json(stream, &headers, &pieces, stopped, keep, stateless)
        };
        streams.close_post(&id);
        // The client went before its answer: what it asked is given up.
        if !matches!(answered, Ok(After::Next | After::Answered)) {
            link.cancel_request(&id);
        }
        if stateless {
            link.close();
        }
        answered
    }

    /// Writes a request's stream (its news, then its answer) as events.
    /// With `deferred` (a stateless request's: whether the connection is
    /// kept), the stream starts only with the first news: an answer that
    /// comes first goes as JSON instead (`answer_json`), with its status.
    fn stream_events(
        &self,
        stream: &mut TcpStream,
        headers: &[(&str, &str)],
        pieces: &Receiver<Piece>,
        stopped: &AtomicBool,
        deferred: Option<bool>,
    ) -> std::io::Result<After> {
        let mut first = None;
        if let Some(keep) = deferred {
            let deadline = Instant::now() + QUIET;
            while first.is_none() && Instant::now() < deadline {
                if stopped.load(Ordering::SeqCst) {
                    return Ok(After::Close);
                }
                match pieces.recv_timeout(TICK) {
                    Ok(piece) if piece.last => {
                        return self.write_answer(stream, headers, &piece, keep, true);
                    }
                    Ok(piece) => first = Some(piece),
                    Err(RecvTimeoutError::Timeout) if http_wire::peer_gone(stream) => {
                        return Ok(After::Close)
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => return Ok(After::Close),
                }
            }
        }
        http_wire::start_events(stream, headers)?;
        if let Some(piece) = first.filter(|piece| !piece.bytes.is_empty()) {
            http_wire::event(stream, &piece.bytes)?;
        }
        let mut quiet_since = Instant::now();
        while !stopped.load(Ordering::SeqCst) {
            match pieces.recv_timeout(TICK) {
                Ok(piece) => {
                    if !piece.bytes.is_empty() {
                        http_wire::event(stream, &piece.bytes)?;
                    }
                    if piece.last {
                        // Answered; the stream (and its connection) ends.
                        return Ok(After::Answered);
                    }
                    quiet_since = Instant::now();
                }
                Err(RecvTimeoutError::Timeout) => {
                    if http_wire::peer_gone(stream) {
                        return Ok(After::Close);
                    }
                    if quiet_since.elapsed() >= QUIET {
                        http_wire::keep_alive(stream)?;
                        quiet_since = Instant::now();
                    }
                }
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        Ok(After::Close)
    }

    /// Waits for a request's answer alone and writes it as JSON; a
    /// stateless one's status says what its error is.
    fn answer_json(
        &self,
        stream: &mut TcpStream,
        headers: &[(&str, &str)],
        pieces: &Receiver<Piece>,
        stopped: &AtomicBool,
        keep: bool,
        stateless: bool,
    ) -> std::io::Result<After> {
        while !stopped.load(Ordering::SeqCst) {
            match pieces.recv_timeout(TICK) {
                Ok(piece) if piece.last => {
                    return self.write_answer(stream, headers, &piece, keep, stateless);
                }
                Err(RecvTimeoutError::Timeout) if http_wire::peer_gone(stream) => break,
                Ok(_) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        Ok(After::Close)
    }

    /// A request's answer as JSON (none for one cancelled, as MCP says);
    /// with `statused` (2026-07-28), an error's status as the revision
    /// gives it: 404 for a method not served, 400 for a request refused.
    fn write_answer(
        &self,
        stream: &mut TcpStream,
        headers: &[(&str, &str)],
        piece: &Piece,
        keep: bool,
        statused: bool,
    ) -> std::io::Result<After> {
        if piece.bytes.is_empty() {
            http_wire::respond(stream, 202, headers, b"", keep)?;
        } else {
            let mut with_type = headers.to_vec();
            with_type.push(("Content-Type", "application/json"));
            let status = if statused { status_of(&piece.bytes) } else { 200 };
            http_wire::respond(stream, status, &with_type, &piece.bytes, keep)?;
        }
        Ok(After::Next)
    }

    /// A GET: the session's own stream, for what concerns no request.
    fn get(
        &self,
        stream: &mut TcpStream,
        request: &HttpRequest,
        stopped: &AtomicBool,
    ) -> std::io::Result<After> {
        let keep = request.keep_alive;
        if request.header("mcp-protocol-version") == Some(MODERN_PROTOCOL_VERSION) {
            let text = "a 2026-07-28 client listens with subscriptions/listen";
            http_wire::respond(stream, 405, &[("Allow", "POST")], text.as_bytes(), keep)?;
            return Ok(After::Next);
        }
        if !request.header("accept").is_some_and(|accept| accept.contains("text/event-stream")) {
            return plain(stream, 406, "the stream is text/event-stream", keep);
        }
        let (_, streams) = match self.session(request) {
            Ok(found) => found,
            Err((status, text)) => return rpc_refusal(stream, None, status, -32001, text, keep),
        };
        let (number, pieces) = streams.open_general();
        let streamed = self.stream_events(stream, &[], &pieces, stopped, None);
        streams.close_general(number);
        streamed
    }

    /// A DELETE: the client ends its session.
    fn delete(&self, stream: &mut TcpStream, request: &HttpRequest) -> std::io::Result<After> {
        let keep = request.keep_alive;
        let id = request.header("mcp-session-id").unwrap_or("");
        let Some(session) = lock(&self.sessions).remove(id) else {
            return rpc_refusal(stream, None, 404, -32001, "no such session", keep);
        };
        self.end(&session);
        http_wire::respond(stream, 200, &[], b"", keep)?;
        Ok(After::Next)
    }

    /// A new session, in place of the one idle longest when there are too
    /// many; `None` when every one is in use.
    fn open_session(&self) -> Option<(String, Arc<Link>, Arc<Streams>)> {
        let id = super::random_hex()?;
        let streams = Arc::new(Streams::default());
        let link = Arc::new(Link::new(Outlet::Streams(Arc::clone(&streams))));
        let evicted = {
            let mut sessions = lock(&self.sessions);
            let mut evicted = None;
            if sessions.len() >= MAX_SESSIONS {
                let idlest = sessions
                    .iter()
                    .filter(|(_, session)| {
                        let ready = lock(&session.link.peer).ready;
                        let idle = if ready { SESSION_IDLE } else { HALF_OPEN_IDLE };
                        session.used.elapsed() >= idle && !session.streams.is_busy()
                    })
                    .min_by_key(|(_, session)| session.used)
                    .map(|(id, _)| id.clone())?;
                evicted = sessions.remove(&idlest);
            }
            let session = Session {
                link: Arc::clone(&link),
                streams: Arc::clone(&streams),
                used: Instant::now(),
            };
            sessions.insert(id.clone(), session);
            evicted
        };
        if let Some(evicted) = evicted {
            log::info!("ended the session idle longest, for a new one");
            self.end(&evicted);
        }
        self.links.add(&link);
        Some((id, link, streams))
    }

    /// The session a request names.
    fn session(&self, request: &HttpRequest) -> Result<(Arc<Link>, Arc<Streams>), Refusal> {
        let Some(id) = request.header("mcp-session-id") else {
            return Err((400, "Mcp-Session-Id is missing: send initialize first"));
        };
        let mut sessions = lock(&self.sessions);
        let session = sessions.get_mut(id).ok_or((404, "no such session: initialize again"))?;
        session.used = Instant::now();
        Ok((Arc::clone(&session.link), Arc::clone(&session.streams)))
    }
}

/// A request that may have news before its answer (progress, or a
/// server's question): answered as an event stream when the client takes
/// one. What tether answers itself at once is plain JSON.
fn has_news(request: &Request) -> bool {
    !super::answer::answers(&request.method)
}

/// The HTTP status of a stateless answer: 404 for a method not served, 400
/// for a request refused as malformed, invalid or unsupported, else 200.
fn status_of(answer: &[u8]) -> u16 {
    #[derive(serde::Deserialize)]
    struct Answer {
        error: Option<Code>,
    }
    #[derive(serde::Deserialize)]
    struct Code {
        code: i64,
    }
    let code = serde_json::from_slice::<Answer>(answer).ok().and_then(|answer| answer.error);
    match code.map(|error| error.code) {
        Some(-32601) => 404,
        // Parse error, invalid request, invalid params, header mismatch,
        // a capability missing, a revision not spoken.
        Some(-32700 | -32600 | -32602 | -32020 | -32021 | -32022) => 400,
        _ => 200,
    }
}

/// True when `params` carries 2026-07-28's `_meta` (a stateless request).
fn is_modern(params: Option<&Value>) -> bool {
    params
        .and_then(|params| params.get("_meta"))
        .and_then(|meta| meta.get("io.modelcontextprotocol/protocolVersion"))
        .is_some()
}

fn plain(stream: &mut TcpStream, status: u16, text: &str, keep: bool) -> std::io::Result<After> {
    http_wire::respond(stream, status, &[("Content-Type", "text/plain")], text.as_bytes(), keep)?;
    Ok(After::Next)
}

/// A refusal as a JSON-RPC error, for the request `id` when it was read
/// (null otherwise).
fn rpc_refusal(
    stream: &mut TcpStream,
    id: Option<&RequestId>,
    status: u16,
    code: i64,
    text: &str,
    keep: bool,
) -> std::io::Result<After> {
    let body = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": text}});
    let body = serde_json::to_vec(&body).unwrap_or_default();
    http_wire::respond(stream, status, &[("Content-Type", "application/json")], &body, keep)?;
    Ok(After::Next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_has_news() {
        let request = |method: &str| Request {
            id: RequestId::Number(1),
            method: method.into(),
            params: None,
        };
        assert!(has_news(&request("tools/call")));
        assert!(has_news(&request("completion/complete")));
        assert!(!has_news(&request("tools/list")));
    }
}
