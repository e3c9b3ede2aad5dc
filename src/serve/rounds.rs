//! 2026-07-28's `input_required` rounds, for the clients in front of tether
//! that speak that revision. Such a client takes no request from tether, so
//! when an upstream server asks something in the middle of a call (an
//! elicitation, a sampling, the roots), the call is held as a `Round`: the
//! client's request is answered at once with `resultType: "input_required"`,
//! the question under a key of its own and a `requestState` token, while the
//! call itself goes on waiting for the answer on its worker. The client's
//! retry (a new request with a new id, the same token) brings
//! `inputResponses`: each goes to the question it answers, and the retry
//! becomes the request that the call's final answer, or its next question,
//! goes to. The upstream never hears of any of this: to it the question was
//! answered as any host answers.
//!
//! Which call a question belongs to: a stateless upstream asks on the
//! thread of the call (the worker marks it, `within`); a handshake-era
//! upstream asks on its connection's events thread, so there the question
//! goes to the newest call to that server whose client takes it.
//!
//! A token is 128 random bits, given out with the call's first question and
//! good for that call only (the same method and name). A call that ends
//! while its client is away keeps its answer for the retry a while; one
//! whose client never comes back gives up its questions after the same
//! wait a person gets over the handshake.

use std::cell::RefCell;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, select, Sender};
use serde_json::{json, Map, Value};

use super::link::{takes, Link, Underway};
use super::streams::Route;
use crate::client::{CancelHandle, LogCallback, ProgressCallback};
use crate::jsonrpc::{Frame, Request, RequestId, RpcError};
use crate::protocol::{LogLevel, LogMessage};
use crate::sync::lock;

/// Requests that may be answered `input_required` (the revision's list).
const MAY_ASK: [&str; 3] = ["tools/call", "resources/read", "prompts/get"];
/// How long the answer of a call that ended while its client was away
/// waits for the client's retry.
const ENDED_KEPT: Duration = Duration::from_secs(120);
/// Questions one call may have open at once.
const MAX_OPEN: usize = 64;
/// Calls that may wait at once for their clients to come back with an
/// answer: each holds a worker, and the others must stay free.
pub(super) const MAX_PARKED: usize = 4;
const INVALID_PARAMS: i64 = -32602;

thread_local! {
    /// The round of the call this thread answers (a worker's).
    static CURRENT: RefCell<Option<Arc<Round>>> = const { RefCell::new(None) };
}

/// Runs `answer` with `round` marked as this thread's call: what a
/// stateless upstream asks meanwhile is asked on this thread.
pub(super) fn within<T>(round: Option<&Arc<Round>>, answer: impl FnOnce() -> T) -> T {
    struct Unmark;
    impl Drop for Unmark {
        fn drop(&mut self) {
            CURRENT.with(|current| current.borrow_mut().take());
        }
    }
    CURRENT.with(|current| *current.borrow_mut() = round.cloned());
    let _unmark = Unmark;
    answer()
}

/// The round of the call this thread answers, if it has one.
pub(super) fn current() -> Option<Arc<Round>> {
    CURRENT.with(|current| current.borrow().clone())
}

/// Names the upstream server the call this thread answers went to: a
/// handshake-era server's questions find the call by it.
pub(super) fn note_server(server: &str) {
    if let Some(round) = current() {
        server.clone_into(&mut lock(&round.server));
    }
}

/// The calls of stateless clients that may ask them something: running, or
/// ended and keeping their answer for a retry.
#[derive(Default)]
pub(super) struct Rounds {
    calls: Mutex<Vec<Arc<Round>>>,
}

/// One request of the client's that a call answers now: the call's own
/// first, then each retry.
struct Attempt {
    link: Arc<Link>,
    id: RequestId,
    /// Its `_meta.progressToken`: the call's progress goes under it.
    progress: Option<Value>,
    /// The log level it asked for: the call's log messages at that level
    /// or above go to it.
    log_level: Option<LogLevel>,
}

impl Attempt {
    fn of(link: &Arc<Link>, request: &Request) -> Attempt {
        let params = request.params.as_ref();
        let progress = params.and_then(|params| params.pointer("/_meta/progressToken"));
        // Refused before any round began when it names no level.
        let log_level = params.and_then(LogLevel::asked_by).and_then(Result::ok);
        Attempt {
            link: Arc::clone(link),
            id: request.id.clone(),
            progress: progress.cloned(),
            log_level,
        }
    }

    /// Answers the request; the call it waited for no longer ends with it
    /// (its link may close now without cancelling anything).
    fn answer(self, bytes: Vec<u8>) {
        lock(&self.link.in_flight).remove(&self.id);
        self.link.send_bytes(Route::Answer(&self.id), bytes);
    }

    fn fail(self, code: i64, message: String) {
        let frame = Frame::response(&self.id, &Err(RpcError { code, message, data: None }));
        self.answer(frame.bytes);
    }
}

/// A question an upstream asked, waiting for the client's retry.
struct Question {
    key: String,
    server: String,
    method: String,
    params: Value,
    answer: Sender<Result<Value, RpcError>>,
}

#[derive(Default)]
struct RoundState {
    /// The request the client waits on; none while it answers questions.
    waiting: Option<Attempt>,
    /// Questions asked and not answered yet.
    open: Vec<Question>,
    asked: u64,
    /// The call ended while the client was away: its answer, and when.
    ended: Option<(Instant, Result<Value, RpcError>)>,
}

/// One call of a stateless client's that may ask it something.
pub(super) struct Round {
    /// The client's connection the call came on (a stdio pipe, a socket;
    /// over HTTP each request has its own): its end gives the call up.
    origin: Weak<Link>,
    method: String,
    /// What a retry must name again: the tool's or prompt's name, the URI.
    target: Value,
    capabilities: Value,
    cancel: CancelHandle,
    /// Given out with the first question.
    token: OnceLock<String>,
    server: Mutex<String>,
    state: Mutex<RoundState>,
}

impl Rounds {
    /// The round of `request` when it is a call of a stateless client's
    /// that declared something an upstream may ask; `None` for any other.
    pub(super) fn begin(
        &self,
        link: &Arc<Link>,
        request: &Request,
        cancel: &CancelHandle,
    ) -> Option<Arc<Round>> {
        if !MAY_ASK.contains(&request.method.as_str()) {
            return None;
        }
        let params = request.params.as_ref()?;
        let meta = params.get("_meta")?;
        meta.get("io.modelcontextprotocol/protocolVersion")?;
        let capabilities = meta.get("io.modelcontextprotocol/clientCapabilities")?;
        let answers_any = ["roots", "sampling", "elicitation"]
            .iter()
            .any(|kind| capabilities.get(kind).is_some_and(|declared| !declared.is_null()));
        if !answers_any {
            return None;
        }
        let round = Arc::new(Round {
            origin: Arc::downgrade(link),
            method: request.method.clone(),
            target: target(&request.method, params),
            capabilities: capabilities.clone(),
            cancel: cancel.clone(),
            token: OnceLock::new(),
            server: Mutex::new(String::new()),
            state: Mutex::new(RoundState {
                waiting: Some(Attempt::of(link, request)),
                ..RoundState::default()
            }),
        });
        let mut calls = lock(&self.calls);
        calls.retain(|call| !call.expired());
        calls.push(Arc::clone(&round));
        Some(round)
    }

    /// Takes `request` when it is a retry (it carries a `requestState`):
    /// its answers go to their questions, and it waits for the call (or is
    /// answered at once: more questions, the call's answer, or why its
    /// token is refused). False for a request that is not one.
    pub(super) fn retry(&self, link: &Arc<Link>, request: &Request) -> bool {
        if !MAY_ASK.contains(&request.method.as_str()) {
            return false;
        }
        let Some(params) = request.params.as_ref() else { return false };
        let Some(state) = params.get("requestState") else { return false };
        let attempt = Attempt::of(link, request);
        let found = state.as_str().and_then(|token| {
            let calls = lock(&self.calls);
            calls
                .iter()
                .find(|call| {
                    !call.expired()
                        && call.token.get().is_some_and(|given| {
                            super::same_secret(given.as_bytes(), token.as_bytes())
                        })
                })
                .cloned()
        });
        let Some(round) = found else {
            attempt.fail(
                INVALID_PARAMS,
                "tether does not know this requestState (its call ended, or tether restarted); \
                 send the request again without it"
                    .into(),
            );
            return true;
        };
        if round.method != request.method || round.target != target(&request.method, params) {
            attempt.fail(
                INVALID_PARAMS,
                format!("this requestState belongs to another request ({})", round.method),
            );
            return true;
        }
        if round.resume(attempt, params.get("inputResponses")) {
            self.forget(&round);
        }
        true
    }

    /// The one running call to `server` whose client takes `method`: a
    /// handshake-era server's question names no call, so it goes to a
    /// call only when no other could be the one that asked (one client's
    /// question is never shown to another).
    pub(super) fn only_call_to(
        &self,
        server: &str,
        method: &str,
        params: &Value,
    ) -> Result<Option<Arc<Round>>, RpcError> {
        let calls = lock(&self.calls);
        let mut running = calls
            .iter()
            .filter(|call| *lock(&call.server) == server && lock(&call.state).ended.is_none());
        let (Some(call), None) = (running.next(), running.next()) else {
            let several = calls.iter().filter(|call| *lock(&call.server) == server).count() > 1;
            if several {
                return Err(RpcError {
                    code: -32603,
                    message: format!(
                        "several calls to {server} are under way from clients that take no \
                         requests; tether cannot tell which one {method} is for"
                    ),
                    data: None,
                });
            }
            return Ok(None);
        };
        Ok(takes(&call.capabilities, method, params).then(|| Arc::clone(call)))
    }

    /// How many calls wait for their clients to come back with answers.
    pub(super) fn parked(&self) -> usize {
        lock(&self.calls)
            .iter()
            .filter(|call| {
                let state = lock(&call.state);
                !state.open.is_empty() && state.waiting.is_none() && state.ended.is_none()
            })
            .count()
    }

    /// `server` gave up its `method` request: the question is dropped, and
    /// whoever waits for its answer hears so; only when just one question
    /// could be the one (the server names its own id, not the call).
    pub(super) fn withdraw(&self, server: &str, method: &str) {
        let calls = lock(&self.calls);
        let asked = |call: &&Arc<Round>| {
            lock(&call.state)
                .open
                .iter()
                .filter(|question| question.server == server && question.method == method)
                .count()
        };
        let mut asking = calls.iter().filter(|call| asked(call) > 0);
        let (Some(call), None) = (asking.next(), asking.next()) else { return };
        let mut state = lock(&call.state);
        let withdrawn = state.open.iter().position(|q| q.server == server && q.method == method);
        if let Some(question) = withdrawn.map(|at| state.open.remove(at)) {
            let _ = question.answer.try_send(Err(RpcError {
                code: -32800,
                message: format!("{server} gave up its {method}"),
                data: None,
            }));
        }
    }

    /// Gives up the calls that came on `link` (its client went: the end of
    /// a pipe, a closed socket).
    pub(super) fn cancel_from(&self, link: &Arc<Link>) {
        for call in lock(&self.calls).iter() {
            if std::ptr::eq(call.origin.as_ptr(), Arc::as_ptr(link)) {
                call.cancel.cancel();
            }
        }
    }

    /// Gives up every call (the serving ends).
    pub(super) fn cancel_all(&self) {
        for call in lock(&self.calls).iter() {
            call.cancel.cancel();
        }
    }

    /// The call ended and its answer went out: the round is done with.
    pub(super) fn forget(&self, round: &Arc<Round>) {
        lock(&self.calls).retain(|call| !Arc::ptr_eq(call, round));
    }
}

impl Round {
    /// True when the client takes `method` (`params` say which kind of
    /// elicitation).
    pub(super) fn takes(&self, method: &str, params: &Value) -> bool {
        takes(&self.capabilities, method, params)
    }

    /// Asks the client, for `server`, by answering the request it waits on
    /// `input_required`; waits at most `wait` for the retry that brings
    /// the answer.
    pub(super) fn ask(
        &self,
        server: &str,
        method: &str,
        params: &Value,
        wait: Duration,
    ) -> Result<Value, RpcError> {
        let (answer, answered) = bounded(1);
        let Some(token) = self.token() else {
            return Err(RpcError {
                code: -32603,
                message: "tether could not make a requestState (no random source)".into(),
                data: None,
            });
        };
        let (key, asking) = {
            let mut state = lock(&self.state);
            if state.open.len() >= MAX_OPEN {
                return Err(RpcError {
                    code: -32603,
                    message: format!("the client in front of tether has {MAX_OPEN} questions open"),
                    data: None,
                });
            }
            state.asked += 1;
            let key = format!("{}-{}", method.split('/').next().unwrap_or("input"), state.asked);
            let question = Question {
                key: key.clone(),
                server: server.to_owned(),
                method: method.to_owned(),
                params: params.clone(),
                answer,
            };
            state.open.push(question);
            // The client waits on a request: it hears the question now;
            // else with the answer to its retry.
            let asking = state.waiting.take().map(|attempt| {
                let frame = input_required(&attempt.id, &state.open, token);
                (attempt, frame)
            });
            (key, asking)
        };
        if let Some((attempt, frame)) = asking {
            attempt.answer(frame.bytes);
        }
        let outcome = select! {
            recv(answered) -> got => got.unwrap_or_else(|_| Err(gone(method))),
            recv(self.cancel.receiver()) -> _ => Err(RpcError {
                code: -32800,
                message: format!("the call that asked {method} was cancelled"),
                data: None,
            }),
            default(wait) => Err(RpcError {
                code: -32603,
                message: format!(
                    "the client in front of tether did not answer {method} within {} s",
                    wait.as_secs()
                ),
                data: None,
            }),
        };
        lock(&self.state).open.retain(|question| question.key != key);
        outcome
    }

    /// The call's progress, under the token of the request the client
    /// waits on now (none while it answers questions).
    pub(super) fn progress(self: &Arc<Round>) -> ProgressCallback {
        let round = Arc::clone(self);
        Arc::new(move |progress: &crate::protocol::Progress| {
            let to = {
                let state = lock(&round.state);
                state.waiting.as_ref().and_then(|attempt| {
                    let token = attempt.progress.clone()?;
                    Some((Arc::clone(&attempt.link), attempt.id.clone(), token))
                })
            };
            if let Some((link, id, token)) = to {
                link.progress(&id, &token, progress);
            }
        })
    }

    /// The call's log messages of `server`'s, to the request the client
    /// waits on now if it asked for them at their level.
    pub(super) fn log(self: &Arc<Round>, server: &str) -> LogCallback {
        let (round, server) = (Arc::clone(self), server.to_owned());
        Arc::new(move |message: &LogMessage| {
            let to = {
                let state = lock(&round.state);
                state.waiting.as_ref().and_then(|attempt| {
                    let least = attempt.log_level?;
                    let admitted = message.severity().is_none_or(|level| level >= least);
                    admitted.then(|| (Arc::clone(&attempt.link), attempt.id.clone()))
                })
            };
            if let Some((link, id)) = to {
                link.log(&id, &server, message);
            }
        })
    }

    /// The call ended: its answer goes to the request that waits for it,
    /// or waits for the client's retry. True when the round is done with.
    pub(super) fn finish(&self, outcome: Result<Value, RpcError>, cancelled: bool) -> bool {
        let mut state = lock(&self.state);
        // Nobody waits for these any more.
        state.open.clear();
        match state.waiting.take() {
            Some(attempt) => {
                drop(state);
                // A request the client cancelled gets no answer.
                let bytes = if cancelled {
                    Vec::new()
                } else {
                    Frame::response(&attempt.id, &outcome).bytes
                };
                attempt.answer(bytes);
                true
            }
            None if cancelled || self.token.get().is_none() => true,
            None => {
                state.ended = Some((Instant::now(), outcome));
                false
            }
        }
    }

    /// A retry came: its answers go to their questions; it is answered at
    /// once when questions are left or the call ended, else it waits for
    /// the call. True when the round is done with.
    fn resume(&self, attempt: Attempt, responses: Option<&Value>) -> bool {
        let mut state = lock(&self.state);
        if let Some(responses) = responses.and_then(Value::as_object) {
            state.open.retain(|question| match responses.get(&question.key) {
                Some(answer) => {
                    let _ = question.answer.try_send(Ok(answer.clone()));
                    false
                }
                None => true,
            });
        }
        if let Some((_, outcome)) = state.ended.take() {
            drop(state);
            let frame = Frame::response(&attempt.id, &outcome);
            attempt.answer(frame.bytes);
            return true;
        }
        if !state.open.is_empty() {
            let frame = input_required(&attempt.id, &state.open, self.token().unwrap_or(""));
            drop(state);
            attempt.answer(frame.bytes);
            return false;
        }
        // Cancelling this request cancels the call.
        let underway = Underway::Answered(self.cancel.clone());
        lock(&attempt.link.in_flight).insert(attempt.id.clone(), underway);
        let superseded = state.waiting.replace(attempt);
        drop(state);
        if let Some(older) = superseded {
            older.fail(INVALID_PARAMS, "a newer retry of this request took its place".into());
        }
        false
    }

    /// The call's token, made with its first question.
    fn token(&self) -> Option<&str> {
        if self.token.get().is_none() {
            let _ = self.token.set(super::random_hex()?);
        }
        self.token.get().map(String::as_str)
    }

    /// Ended long enough ago that its client is not coming back.
    fn expired(&self) -> bool {
        lock(&self.state).ended.as_ref().is_some_and(|(at, _)| at.elapsed() >= ENDED_KEPT)
    }
}

/// What a retry must name again.
fn target(method: &str, params: &Value) -> Value {
    let key = if method == "resources/read" { "uri" } else { "name" };
    params.get(key).cloned().unwrap_or(Value::Null)
}

/// The answer that asks the client: every open question by its key, and
/// the call's token.
fn input_required(id: &RequestId, open: &[Question], token: &str) -> Frame {
    let requests: Map<String, Value> = open
        .iter()
        .map(|question| {
            let request = json!({"method": question.method, "params": question.params});
            (question.key.clone(), request)
        })
        .collect();
    let result = json!({
        "resultType": "input_required",
        "inputRequests": requests,
        "requestState": token,
    });
    Frame::response(id, &Ok(result))
}

fn gone(method: &str) -> RpcError {
    RpcError {
        code: -32603,
        message: format!("the client in front of tether went before it answered {method}"),
        data: None,
    }
}
