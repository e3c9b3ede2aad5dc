//! The clients in front of tether as the hub's [`Host`]: a server's
//! requests to the host (`roots/list`, `sampling`, `elicitation`) become
//! requests to a client in front, and its answer comes back through that
//! client's reader. A 2026-07-28 client's call is asked through its own
//! `input_required` rounds (`rounds.rs`); otherwise the handshake client
//! active last that takes the request is asked. List changes go to every
//! client; a log message a call took went to that call's client only, and
//! every other to each handshake client that takes its level.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::link::Links;
use super::rounds::{self, Round, Rounds, MAX_PARKED};
use crate::host::{Host, Root};
use crate::jsonrpc::{Notification, RpcError};

/// How long the downstream may take to list its roots.
const ROOTS_WAIT: Duration = Duration::from_secs(10);
/// How long a person (elicitation) or a model (sampling) may take.
const PERSON_WAIT: Duration = Duration::from_secs(600);

/// The clients as the hub's host.
pub(super) struct LinkHost {
    pub(super) links: Arc<Links>,
    pub(super) rounds: Arc<Rounds>,
}

impl LinkHost {
    /// Asks `method` of the client whose call it belongs to, when a
    /// stateless client's call asks on its own thread; else of the client
    /// active last that takes it; else of the newest stateless client's
    /// call to `server` that takes it (`rounds.rs`). Else the reason.
    fn ask_if(&self, server: &str, method: &str, params: &Value) -> Result<Value, RpcError> {
        // A stateless client's own call asked: that client, or nobody.
        if let Some(round) = rounds::current() {
            return match round.takes(method, params) {
                true => self.ask_round(&round, server, method, params, PERSON_WAIT),
                false => Err(refused(method)),
            };
        }
        if let Some(link) = self.links.asked_of(method, params) {
            return link.ask(server, method, params, PERSON_WAIT);
        }
        match self.rounds.only_call_to(server, method, params)? {
            Some(round) => self.ask_round(&round, server, method, params, PERSON_WAIT),
            None => Err(refused(method)),
        }
    }

    /// Asks through a round, unless too many calls wait for their
    /// clients already (each holds a worker).
    fn ask_round(
        &self,
        round: &Round,
        server: &str,
        method: &str,
        params: &Value,
        wait: Duration,
    ) -> Result<Value, RpcError> {
        if self.rounds.parked() >= MAX_PARKED {
            return Err(RpcError {
                code: -32603,
                message: format!(
                    "{MAX_PARKED} calls already wait for their clients' answers; tether keeps \
                     its other workers free"
                ),
                data: None,
            });
        }
        round.ask(server, method, params, wait)
    }
}

impl Host for LinkHost {
    fn roots(&self) -> Vec<Root> {
        let (method, params) = ("roots/list", json!({}));
        // The roots name no server: a stateless client is asked only
        // when its own call needs them.
        let asked = match rounds::current() {
            Some(round) if round.takes(method, &params) => {
                self.ask_round(&round, "", method, &params, ROOTS_WAIT)
            }
            Some(_) => return Vec::new(),
            None => match self.links.asked_of(method, &params) {
                Some(link) => link.ask("", method, &params, ROOTS_WAIT),
                None => return Vec::new(),
            },
        };
        match asked {
            Ok(answer) => answer
                .get("roots")
                .and_then(Value::as_array)
                .map(|roots| {
                    roots
                        .iter()
                        .filter_map(|root| {
                            let uri = root.get("uri")?.as_str()?;
                            let mut kept = Root::new(uri);
                            if let Some(name) = root.get("name").and_then(Value::as_str) {
                                kept = kept.with_name(name);
                            }
                            Some(kept)
                        })
                        .collect()
                })
                .unwrap_or_default(),
            Err(err) => {
                log::warn!("the client in front of tether gave no roots: {}", err.message);
                Vec::new()
            }
        }
    }

    // Upstream servers connect before the client in front has said what
    // it takes, and their capabilities are fixed then: tether declares
    // sampling and elicitation to them, and each request is refused, with
    // the reason, when the client in front does not take it.
    fn handles_sampling(&self) -> bool {
        true
    }

    fn create_message(&self, server: &str, params: &Value) -> Result<Value, RpcError> {
        self.ask_if(server, "sampling/createMessage", params)
    }

    fn handles_elicitation(&self) -> bool {
        true
    }

    fn elicit(&self, server: &str, params: &Value) -> Result<Value, RpcError> {
        self.ask_if(server, "elicitation/create", params)
    }

    fn cancelled(&self, server: &str, method: &str, reason: Option<&str>) {
        for link in self.links.all() {
            link.withdraw(server, method, reason);
        }
        self.rounds.withdraw(server, method);
    }

    // A log message a call took went to that call's client, on its
    // stream (`Asked::options`), and to no one else.
    fn log_taken(&self, _server: &str, _notification: &Notification) {}

    fn notification(&self, server: &str, notification: &Notification) {
        match notification.method.as_str() {
            // The server's log, named as its logger when it names none.
            "notifications/message" => {
                let mut params = notification.params.clone().unwrap_or_else(|| json!({}));
                if let Some(fields) = params.as_object_mut() {
                    fields.entry("logger").or_insert_with(|| json!(server));
                }
                self.links.notify("notifications/message", Some(&params));
            }
            // Tools are announced when the hub's registry moves (mod.rs),
            // after the hub listed them again; these pass on as they come.
            // A page opened is done: only ids the upstream connection saw
            // asked get here, and a client ignores those it was not asked.
            "notifications/resources/list_changed"
            | "notifications/prompts/list_changed"
            | "notifications/resources/updated"
            | "notifications/elicitation/complete" => {
                self.links.notify(&notification.method, notification.params.as_ref());
            }
            _ => {}
        }
    }
}

fn refused(method: &str) -> RpcError {
    RpcError {
        code: -32601,
        message: format!("no client in front of tether takes {method}"),
        data: None,
    }
}
