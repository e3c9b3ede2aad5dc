//! Streamable HTTP: one POST per message, answered with JSON or an event
//! stream; the session id, its renewal on 404, resumption of a broken
//! response stream with `Last-Event-ID`, and the standalone GET stream.
//!
//! Network errors and 408/429/5xx are retried twice for requests that are
//! safe to repeat (never `tools/call`). An `initialize` answered 400, 404 or
//! 405 on a URL of no fixed type falls back to the legacy transport.
//!
//! Spoken statelessly (2026-07-28, after the client's `set_session_kind`), there is no
//! session, no GET stream and no resumption: a response stream that breaks
//! fails its request with `ResponseLost` (the client sends it again), and a
//! 4xx whose body is a JSON-RPC error is that error for the caller, which
//! is how the era probe tells a modern server's refusal from an old one's.

use std::io::{BufReader, Read};
use std::time::{Duration, Instant};

use crossbeam_channel::{RecvTimeoutError, Sender};
use ureq::http::Response;
use ureq::Body;

use super::outcome::{classify, Outcome, Sent};
use super::wire::{http_error, rpc_refusal, unauthorized, Attempt, Credentials, Posted};
use super::{HttpTransport, Mode, Poster, DEFAULT_RETRY, MAX_GET_BACKOFF, MAX_RETRY};
use crate::error::{CloseReason, Error};
use crate::framing::MAX_FRAME;
use crate::jsonrpc::Frame;
use crate::sync::{lock, wait_timeout};
use crate::transport::sse::SseReader;
use crate::url::{origin_of, redact_url};

/// Sign-ins (and step-ups) for one request before it fails: a server that
/// keeps asking for more is refused after the third.
const MAX_SIGN_INS: usize = 3;
/// How long a `subscriptions/listen` stream may stay open (close ends it
/// at once; the server's keep-alive comments keep it from idling out).
const LISTEN_CEILING: Duration = Duration::from_secs(24 * 3600);
/// Same-origin 307/308 redirects followed for one request.
const MAX_REDIRECTS: usize = 3;

/// What one request's tries so far did, for the rules that allow each
/// thing a few times at most.
#[derive(Default)]
struct Tries {
    renewed_session: bool,
    /// The headers' `!command`s were run again after a 401 or 403.
    reran_headers: bool,
    sign_ins: usize,
    /// Where a same-origin 307/308 sent it.
    redirected: Option<String>,
    redirects: usize,
}

/// One try, as the policy sees it.
struct Posting<'a> {
    frame: &'a Frame,
    deadline: Option<Instant>,
    by: Poster<'a>,
    /// The session id it carried.
    sent_session: Option<String>,
    /// The token it carried.
    bearer: Option<String>,
    sent: Sent,
}

/// The error of a redirect tether does not follow: to another origin, or
/// to nowhere said.
fn moved_away(status: u16, to: Option<&str>) -> Error {
    Error::Http {
        status: Some(status),
        message: match to {
            Some(to) => format!(
                "the server moved to {}, another origin; tether does not follow it there: \
                 put that URL in the entry if you trust it",
                redact_url(to)
            ),
            None => "the server redirects, but says not where".into(),
        },
    }
}

impl HttpTransport {
    /// POSTs a frame to the Streamable HTTP endpoint, with retries, session
    /// renewal and the fallback to the legacy transport.
    ///
    /// Posted by a waiting caller (`by`), a renewal or a sign-in is handed
    /// back ([`Posted::HandedOff`]) for a worker, and whatever stops at the
    /// caller's deadline ends quietly: the caller's own timeout says what
    /// happened.
    pub(super) fn post_streamable(
        &self,
        frame: &Frame,
        deadline: Option<Instant>,
        by: Poster<'_>,
    ) -> Result<Posted, Error> {
        let method = frame.method.as_deref();
        let mut tries = Tries::default();
        // No pause past the caller's own ceiling: its error says why
        // ("connection refused"), not that it timed out.
        let pauses_until = deadline.or(frame.deadline);
        self.with_retries(method != Some("tools/call"), frame.retrying, pauses_until, by, || {
            self.try_post(frame, deadline, by, &mut tries)
        })
    }

    /// One try of [`HttpTransport::post_streamable`]: sends the frame, has
    /// the response classified, and acts on what it means.
    fn try_post(
        &self,
        frame: &Frame,
        deadline: Option<Instant>,
        by: Poster<'_>,
        tries: &mut Tries,
    ) -> Attempt {
        let (sent_session, known_expired) = {
            let state = lock(&self.state);
            (state.session_id.clone(), state.session_known_expired())
        };
        if known_expired && !tries.renewed_session && !by.waits() {
            // A caller's own POST met the 404 and handed the request
            // over: renew before sending it, not after a second 404.
            tries.renewed_session = true;
            return self.renewed(sent_session);
        }
        let bearer = self.bearer(by);
        let url = tries.redirected.clone().unwrap_or_else(|| self.target.url.clone());
        // A listen stream stays open until it is closed; a request ends
        // with its caller's ceiling at the latest.
        let ceiling = if frame.is("subscriptions/listen") {
            LISTEN_CEILING
        } else {
            // A second past the caller's own ceiling, so that the caller's
            // timeout is what it hears, not this one.
            let own = frame.deadline.map(|at| at + Duration::from_secs(1));
            self.ceiling(frame.is_request(), deadline.or(own))
        };
        let credentials = Credentials { with_session: true, bearer: bearer.as_deref() };
        let mut response =
            match self.send_post(&url, &frame.bytes, Some(frame), ceiling, credentials, by) {
                Ok(response) => response,
                Err(_) if by.gave_up() => return Attempt::Done(Ok(())),
                Err(err) => {
                    return match super::wire::tls_failure(&err) {
                        Some(why) => Attempt::Done(Err(Error::Http {
                            status: None,
                            message: format!("cannot reach {}: {why}", redact_url(&url)),
                        })),
                        None if super::wire::refused_here(&err, &url) => {
                            Attempt::Refused(super::wire::network_words(&err))
                        }
                        None => Attempt::Unreachable(super::wire::network_words(&err)),
                    }
                }
            };
        let (undecided, stateless) = {
            let state = lock(&self.state);
            (state.mode == Mode::Undecided, state.stateless)
        };
        let sent = Sent {
            in_session: sent_session.is_some(),
            initialize: frame.is("initialize"),
            undecided,
            stateless_request: stateless && frame.is_request(),
        };
        let outcome = classify(&response, &url, sent);
        let this = Posting { frame, deadline, by, sent_session, bearer, sent };
        self.act(outcome, &mut response, this, tries)
    }

    /// The policy: what to do about what a response meant. The order of
    /// the arms is the order of the rules.
    fn act(
        &self,
        outcome: Outcome,
        response: &mut Response<Body>,
        this: Posting<'_>,
        tries: &mut Tries,
    ) -> Attempt {
        let Posting { frame, deadline, by, sent_session, bearer, sent } = this;
        let method = frame.method.as_deref();
        let status = response.status().as_u16();
        match outcome {
            // The request itself moved, on the same origin: sent again
            // there, as 307 and 308 require, a few times at most.
            Outcome::Moved(to) if tries.redirects < MAX_REDIRECTS => match to {
                Some(to) if origin_of(&to) == origin_of(&self.target.url) => {
                    tries.redirects += 1;
                    tries.redirected = Some(to);
                    Attempt::Again
                }
                // Its session, and any credentials, belong to this
                // origin: the user decides to move the entry.
                to => Attempt::Done(Err(moved_away(status, to.as_deref()))),
            },
            Outcome::Ok => Attempt::Done(self.answered(response, frame, by)),
            // A caller never renews a session or signs in on its own
            // thread: a worker sends the request anew.
            _ if by.waits() && matches!(status, 401 | 403 | 404) => {
                if status == 404 && sent_session.is_some() {
                    lock(&self.state).expired_session = sent_session;
                }
                Attempt::HandOff
            }
            // A short-lived credential from a `!command`: it runs again,
            // once, before any sign-in.
            _ if matches!(status, 401 | 403)
                && !tries.reran_headers
                && !self.target.header_commands.is_empty() =>
            {
                tries.reran_headers = true;
                match self.rerun_header_commands() {
                    Ok(()) => Attempt::Again,
                    Err(why) => Attempt::Done(Err(Error::Auth(format!(
                        "the server refused the request (HTTP {status}), and a header's \
                         !command failed when run again: {why}"
                    )))),
                }
            }
            Outcome::SessionGone if !tries.renewed_session => {
                tries.renewed_session = true;
                self.renewed(sent_session)
            }
            Outcome::OldTransport => {
                // A JSON-RPC error is an answer from this endpoint (a
                // stateless server refusing the handshake, say), not an
                // old transport's missing POST endpoint.
                if let Ok(refusal) = rpc_refusal(response, frame.id) {
                    return Attempt::Done(Err(Error::Rpc(refusal)));
                }
                log::info!(
                    "{}: initialize got HTTP {status}; trying the legacy HTTP+SSE transport",
                    self.server
                );
                lock(&self.state).mode = Mode::Sse;
                Attempt::Done(self.start_legacy_stream().and_then(|()| {
                    self.post_legacy(&frame.bytes, method, deadline, frame.deadline, by)
                }))
            }
            Outcome::WantsSignIn { status, challenge } => match &self.oauth {
                Some(oauth) if tries.sign_ins < MAX_SIGN_INS => {
                    tries.sign_ins += 1;
                    match oauth.on_challenge(status, &challenge, bearer.as_deref()) {
                        Ok(()) => Attempt::Again,
                        Err(err) => Attempt::Done(Err(err)),
                    }
                }
                Some(_) if status == 401 => Attempt::Done(Err(Error::Auth(
                    "the server still refuses the token after signing in".into(),
                ))),
                None if status == 401 => Attempt::Done(Err(unauthorized(
                    response,
                    &redact_url(&self.target.url),
                    bearer.is_some() || self.target.has_authorization_header(),
                ))),
                _ => Attempt::Done(Err(self.refusal(response, sent))),
            },
            // A stateless server refuses with a JSON-RPC error in the
            // body (version, capability, headers, method): the caller
            // gets that error, to retry or fall back on.
            Outcome::Refused => Attempt::Done(Err(self.refusal(response, sent))),
            Outcome::Transient => Attempt::Transient(http_error(response)),
            // Gone again after a renewal: a stateless server's refusal, or
            // an error to say.
            Outcome::SessionGone => Attempt::Done(Err(self.refusal(response, sent))),
            Outcome::Moved(_) | Outcome::Failed => Attempt::Done(Err(http_error(response))),
        }
    }

    /// A 2xx: the session it names kept, and for a request its answer read
    /// (what stops at a waiting caller's deadline ends quietly).
    fn answered(
        &self,
        response: &mut Response<Body>,
        frame: &Frame,
        by: Poster<'_>,
    ) -> Result<(), Error> {
        if frame.is("initialize") || frame.is("server/discover") {
            lock(&self.state).mode = Mode::Streamable;
        }
        if !lock(&self.state).stateless {
            self.remember_session(response);
        }
        if !frame.is_request() {
            return Ok(());
        }
        let method = frame.method.as_deref();
        self.read_answer(response, frame.id, method, by).or_else(|err| {
            if by.gave_up() {
                Ok(())
            } else {
                Err(err)
            }
        })
    }

    /// The error a refusal is said by: a stateless server's JSON-RPC error
    /// from the body, else the HTTP status and what the body says.
    fn refusal(&self, response: &mut Response<Body>, sent: Sent) -> Error {
        if !sent.stateless_request {
            return http_error(response);
        }
        match rpc_refusal(response, None) {
            Ok(error) => Error::from_rpc(error),
            Err(refusal) => refusal,
        }
    }

    /// The next step once `expired` is known to be over: send again in a
    /// renewed session, or fail, and lose the connection, when it cannot be.
    /// Runs the headers' `!command`s again (their first values were
    /// refused); what they give now goes on every request from here on.
    fn rerun_header_commands(&self) -> Result<(), String> {
        let mut headers =
            lock(&self.state).headers.clone().unwrap_or_else(|| self.target.headers.clone());
        for (name, command_line) in &self.target.header_commands {
            let value = crate::value_command::run_command(command_line)?;
            for header in headers.iter_mut().filter(|(header, _)| header == name) {
                header.1.clone_from(&value);
            }
            log::info!("{}: header {name} from its !command again, after a refusal", self.server);
        }
        lock(&self.state).headers = Some(headers);
        Ok(())
    }

    fn renewed(&self, expired: Option<String>) -> Attempt {
        match self.renew_once(expired) {
            Ok(()) => Attempt::Again,
            Err(err) => {
                self.lost(CloseReason::Io(format!(
                    "the session expired and could not be renewed: {err}"
                )));
                Attempt::Done(Err(err))
            }
        }
    }

    /// Starts a new session after `expired` got a 404, unless another
    /// worker has done so or is doing so (then waits for it, at most as long
    /// as a request may run): one renewal at a time, and no lock held while
    /// it talks to the server.
    fn renew_once(&self, expired: Option<String>) -> Result<(), Error> {
        let deadline = Instant::now() + self.request_ceiling;
        let mut state = lock(&self.state);
        while state.renewing && state.session_id == expired {
            let now = Instant::now();
            if now >= deadline || self.is_closing() {
                return Err(Error::Http {
                    status: Some(404),
                    message: "the session expired and its renewal did not finish".into(),
                });
            }
            state = wait_timeout(&self.changed, state, deadline - now);
        }
        if state.session_id != expired {
            return Ok(()); // Renewed by another worker meanwhile.
        }
        if state.renewal_failed.is_some() && state.renewal_failed == expired {
            // Tried already for this session, and failed: once is enough.
            return Err(Error::Http {
                status: Some(404),
                message: "the session expired and could not be renewed".into(),
            });
        }
        state.renewing = true;
        drop(state);
        log::info!("{}: the session expired; starting a new one", self.server);
        let renewed = self.renew_session();
        let mut state = lock(&self.state);
        state.renewing = false;
        // Renewed or not, the hint has served (a server may even hand back
        // the same id).
        state.expired_session = None;
        match &renewed {
            Ok(session) => state.session_id = session.clone(),
            Err(_) => state.renewal_failed = expired,
        }
        drop(state);
        self.changed.notify_all();
        renewed.map(drop)
    }

    pub(super) fn remember_session(&self, response: &Response<Body>) {
        if let Some(session) =
            response.headers().get("mcp-session-id").and_then(|value| value.to_str().ok())
        {
            let mut state = lock(&self.state);
            if state.session_id.as_deref() != Some(session) {
                // A session id lets whoever holds it act in the session: the
                // log shows only its start.
                let start: String = session.chars().take(4).collect();
                log::debug!("{}: session {start}…", self.server);
                state.session_id = Some(session.to_owned());
            }
        }
    }

    /// Starts a new session: `initialize` again (its answer goes nowhere:
    /// the client already has one), then `initialized` on the new session.
    /// Returns the new session id, which the caller publishes only now, so
    /// that no request reaches the new session before `initialized` does.
    fn renew_session(&self) -> Result<Option<String>, Error> {
        let initialize = lock(&self.state).initialize_frame.clone();
        let Some(initialize) = initialize else {
            return Err(Error::Http {
                status: Some(404),
                message: "the session expired before it began".into(),
            });
        };
        let failed = |err: ureq::Error| Error::Http {
            status: None,
            message: format!("renewing the session failed: {err}"),
        };
        let bearer = self.bearer(Poster::OwnLimits);
        let ceiling = self.ceiling(true, None);
        let mut response = self
            .send_post(
                &self.target.url,
                &initialize,
                None,
                ceiling,
                Credentials { with_session: false, bearer: bearer.as_deref() },
                Poster::OwnLimits,
            )
            .map_err(failed)?;
        if !response.status().is_success() {
            return Err(http_error(&mut response));
        }
        let session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        // Drain the answer so that the connection can be reused.
        let _ = response.body_mut().as_reader().take(MAX_FRAME as u64).read_to_end(&mut Vec::new());
        let initialized = Frame::notification("notifications/initialized", None).bytes;
        let mut request = self
            .agent
            .post(&self.target.url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream");
        request = self.with_common_headers(request, false, bearer.as_deref());
        if let Some(session) = &session {
            request = request.header("Mcp-Session-Id", session.as_str());
        }
        let sent = request
            .config()
            .timeout_global(Some(self.ceiling(false, None)))
            .build()
            .send(&initialized[..]);
        match sent {
            Ok(response) if response.status().is_success() => Ok(session),
            Ok(mut response) => Err(http_error(&mut response)),
            Err(err) => Err(failed(err)),
        }
    }

    /// The connection is gone: every waiting caller fails, status shows it,
    /// and the next call reconnects.
    pub(super) fn lost(&self, why: CloseReason) {
        if let Some(inbox) = self.inbox() {
            inbox.closed(why);
        }
    }

    /// Opens the GET stream for server-initiated messages, once, and waits
    /// (at most until `deadline`) until the server has answered it, so that
    /// nothing the server sends on it during the first request is lost.
    pub(super) fn open_get_stream(&self, deadline: Instant) {
        {
            let mut state = lock(&self.state);
            if state.get_stream_started || state.mode != Mode::Streamable {
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
    pub(super) fn run_get_stream(&self, answered: Sender<()>) {
        let mut answered = Some(answered);
        let mut last_id: Option<String> = None;
        let mut backoff = DEFAULT_RETRY;
        while !self.is_closing() {
            let mut pause = backoff;
            let opened = self.open_get(last_id.as_deref(), None, Poster::OwnLimits);
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
                    if let Err(err) = self.deliver_events(&mut reader, None, &mut false, false) {
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
            if !self.pause(pause, Poster::OwnLimits) {
                return;
            }
        }
    }
}
