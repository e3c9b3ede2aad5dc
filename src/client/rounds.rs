//! A request to a stateless (2026-07-28) server: its `_meta`, the rounds of
//! a Multi Round-Trip Request, and a resend when the answer is lost.
//!
//! A stateless server never sends the client a request. When it needs the
//! host (an elicitation, a sampling, the roots), it ends the request with an
//! `input_required` result listing what it needs; the client asks the same
//! [`Host`](crate::Host) a handshake-era server's own requests go to, on the
//! caller's thread, and sends the original request again with the answers
//! (`inputResponses`) and the server's `requestState`, under a new id. The
//! rounds are bounded in number and by the call's own deadline, so a host
//! written for the handshake era works unchanged and no server can keep a
//! caller forever.
//!
//! A broken response stream (HTTP) loses its request: it is sent again
//! under a new id, except `tools/call`, which may have run.

use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::{CallOptions, Client};
use crate::error::Error;
use crate::host;
use crate::protocol::LOG_LEVEL_META;

impl Client {
    /// Answers an `inputRequests` map through the host, on this thread:
    /// the `inputResponses` to send back, by the same keys.
    pub(super) fn answer_inputs(&self, requests: &Value) -> Result<Map<String, Value>, Error> {
        let server = self.router.server();
        let Some(requests) = requests.as_object() else {
            return Err(Error::Protocol("inputRequests is not an object".into()));
        };
        if requests.len() > MAX_INPUTS_PER_ROUND {
            return Err(Error::Protocol(format!(
                "the server asked for {} inputs in one round; tether answers at most \
                 {MAX_INPUTS_PER_ROUND}",
                requests.len()
            )));
        }
        let mut answers = Map::new();
        for (key, request) in requests {
            let Some(method) = request.get("method").and_then(Value::as_str) else {
                return Err(Error::Protocol(format!("input request {key:?} has no method")));
            };
            let input = request.get("params").unwrap_or(&Value::Null);
            log::debug!("{server}: the server asks for {method} ({key})");
            self.router.note_url_elicitation(method, input);
            let answer =
                host::answer(&*self.options.host, server, method, input).map_err(Error::Rpc)?;
            answers.insert(key.clone(), answer);
        }
        Ok(answers)
    }
}

/// Rounds of input one request may ask for before tether gives up on it.
const MAX_ROUNDS: usize = 16;
/// Inputs one round may ask for: each is a question to the host (a person,
/// a model), and its answers go back in one request.
const MAX_INPUTS_PER_ROUND: usize = 64;
/// The most a round's `requestState` may hold: it is sent back as it is.
const MAX_REQUEST_STATE: usize = 1024 * 1024;
/// The most the next round's request may weigh (as JSON text, about): well
/// under the 16 MiB a frame may be, whatever the answers came to.
const MAX_ROUND_REQUEST: usize = 8 * 1024 * 1024;
/// Times a request whose answer was lost is sent again, and the pauses before.
const MAX_RESENDS: usize = 2;
const RESEND_PAUSES: [Duration; MAX_RESENDS] =
    [Duration::from_millis(250), Duration::from_millis(1000)];
/// `HeaderMismatchError`: the headers do not match the body.
const HEADER_MISMATCH: i64 = -32020;
/// Requests that may end with `input_required`.
const MAY_ASK: [&str; 3] = ["tools/call", "resources/read", "prompts/get"];

/// The 2026-07-28 tasks extension, which tether declares in every request.
pub(super) const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

impl Client {
    /// Sends `method` statelessly with `meta`, through as many rounds of
    /// input as the server asks for.
    pub(super) fn stateless_request(
        &self,
        method: &str,
        params: Option<Value>,
        meta: &Value,
        options: &CallOptions,
    ) -> Result<Value, Error> {
        let mut params = with_meta(params, meta);
        // The call's own log level (or none), in place of the connection's.
        if let Some(Value::Object(fields)) = &mut params {
            if let Some(Value::Object(meta)) = fields.get_mut("_meta") {
                match &options.log {
                    Some((level, _)) => {
                        meta.insert(LOG_LEVEL_META.into(), level.as_str().into());
                    }
                    None if options.quiet_logs => {
                        meta.remove(LOG_LEVEL_META);
                    }
                    None => {}
                }
            }
        }
        // Every round shares the call's ceiling (as progress does).
        let mut round_options = options.clone();
        round_options.deadline = self.hard_deadline(options);
        for _ in 0..MAX_ROUNDS {
            let mut result = self.resending(method, params.as_ref(), &round_options)?;
            match result.get("resultType").map(|kind| kind.as_str()) {
                None | Some(Some("complete")) => return Ok(result),
                // A call the server runs on as a task (the tasks extension
                // tether declares): `call_tool` waits it out.
                Some(Some("task")) if method == "tools/call" => return Ok(result),
                Some(Some("input_required")) if MAY_ASK.contains(&method) => {
                    self.answer_round(&mut params, &mut result)?;
                }
                Some(Some("input_required")) => {
                    return Err(Error::Protocol(format!(
                        "the server asked for input in answer to {method}, which may not"
                    )))
                }
                Some(other) => {
                    return Err(Error::Protocol(format!(
                        "{method} result has an unknown resultType {}",
                        other.map_or_else(|| "(not a string)".to_owned(), str::to_owned)
                    )))
                }
            }
        }
        Err(Error::Protocol(format!(
            "the server still asked for input after {MAX_ROUNDS} rounds of {method}"
        )))
    }

    /// One request, sent again under a new id when its answer was lost or
    /// the server answered 408, 429 or 5xx (never a `tools/call`).
    pub(super) fn resending(
        &self,
        method: &str,
        params: Option<&Value>,
        options: &CallOptions,
    ) -> Result<Value, Error> {
        let mut resends = 0;
        let mut relisted = false;
        loop {
            match self.exchange(method, params, options) {
                // The tool's parameter headers changed: list again, once.
                Err(Error::Rpc(error))
                    if error.code == HEADER_MISMATCH && method == "tools/call" && !relisted =>
                {
                    relisted = true;
                    log::debug!(
                        "{}: header mismatch ({error}); listing tools again",
                        self.router.server()
                    );
                    self.router.stateless().lists().changed("notifications/tools/list_changed");
                    self.list_tools(options)?;
                }
                Err(error)
                    if method != "tools/call"
                        && resends < MAX_RESENDS
                        && worth_resending(&error) =>
                {
                    // Not past the call's deadline, and not once it is cancelled.
                    let pause = RESEND_PAUSES[resends];
                    if options.deadline.is_some_and(|at| Instant::now() + pause >= at) {
                        return Err(error);
                    }
                    log::debug!("{}: {method}: {error}; sending it again", self.router.server());
                    match &options.cancel {
                        Some(cancel) => {
                            if cancel.cancelled.recv_timeout(pause).is_ok() || cancel.is_cancelled()
                            {
                                return Err(Error::Cancelled);
                            }
                        }
                        None => std::thread::sleep(pause),
                    }
                    resends += 1;
                }
                other => return other,
            }
        }
    }

    /// Answers one `input_required` result's requests through the host and
    /// puts the answers and the server's state into the next round's params.
    fn answer_round(&self, params: &mut Option<Value>, result: &mut Value) -> Result<(), Error> {
        let answers = match result.get("inputRequests") {
            Some(requests) => self.answer_inputs(requests)?,
            None => Map::new(),
        };
        let state = match result.get_mut("requestState").map(Value::take) {
            None | Some(Value::Null) => None,
            Some(Value::String(state)) if state.len() > MAX_REQUEST_STATE => {
                return Err(Error::Protocol(format!(
                    "the server's requestState is {} bytes; tether sends back at most {} MiB",
                    state.len(),
                    MAX_REQUEST_STATE / (1024 * 1024)
                )))
            }
            Some(Value::String(state)) => Some(state),
            Some(_) => return Err(Error::Protocol("requestState is not a string".into())),
        };
        if answers.is_empty() && state.is_none() {
            return Err(Error::Protocol(
                "an input_required result with neither inputRequests nor requestState".into(),
            ));
        }
        let Some(Value::Object(map)) = params else {
            return Err(Error::Protocol("the request's params are not an object".into()));
        };
        map.remove("inputResponses");
        map.remove("requestState");
        if !answers.is_empty() {
            map.insert("inputResponses".into(), Value::Object(answers));
        }
        if let Some(state) = state {
            map.insert("requestState".into(), Value::String(state));
        }
        let weight = params.as_ref().map_or(0, super::lists::json_size);
        if weight > MAX_ROUND_REQUEST {
            return Err(Error::Protocol(format!(
                "the answers to the server's inputs come to about {} MiB; tether sends at most \
                 {} MiB in one request",
                weight / (1024 * 1024),
                MAX_ROUND_REQUEST / (1024 * 1024)
            )));
        }
        Ok(())
    }
}

/// `params` (an object, made one if absent) with the stateless keys added
/// to its `_meta`, keeping any already there.
pub(super) fn with_meta(params: Option<Value>, meta: &Value) -> Option<Value> {
    let mut params = match params {
        Some(Value::Object(map)) => map,
        None | Some(Value::Null) => Map::new(),
        Some(other) => return Some(other),
    };
    let slot = params.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
    if let (Value::Object(slot), Value::Object(meta)) = (slot, meta) {
        for (key, value) in meta {
            slot.insert(key.clone(), value.clone());
        }
    }
    Some(Value::Object(params))
}

/// A lost answer, or a refusal another try may mend.
fn worth_resending(error: &Error) -> bool {
    match error {
        Error::ResponseLost { .. } => true,
        Error::Http { status: Some(status), .. } => matches!(status, 408 | 429 | 500..=599),
        _ => false,
    }
}
