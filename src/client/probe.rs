//! The era probe: `server/discover` at the stateless version, and what its
//! answer says of the server (`Verdict`), as the 2026-07-28
//! `basic/versioning.mdx` has it; and the `_meta` that the probe and every
//! later stateless request carry. What follows from the verdict (the
//! handshake, a second probe) is `era.rs`'s.

use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use super::{CallOptions, CancelHandle, Client};
use crate::error::Error;
use crate::host::{self, Host};
use crate::jsonrpc::RpcError;
use crate::protocol::{
    ServerInfo, LOG_LEVEL_META, MODERN_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS,
};
use crate::transport::outbox::Closed;
use crate::transport::SessionKind;

/// `UnsupportedProtocolVersionError`.
pub(super) const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
/// Refusals only a stateless server sends: a header that does not match
/// its body, a client capability it needs.
const MODERN_REFUSALS: [i64; 2] = [-32020, -32021];
/// The most a stdio probe waits alone before `initialize` is sent beside
/// it: a handshake-era server may ignore what comes before `initialize`.
/// Which answer comes first decides the era, not this wait (`era.rs`).
pub(super) const PROBE_WAIT: Duration = Duration::from_secs(1);

/// How much of the time left a probe may wait.
#[derive(Clone, Copy)]
pub(super) enum ProbeWait {
    /// On stdio, half of it and 5 s at most (the server may be of the
    /// handshake era and ignore the probe).
    Part,
    /// All of it (the era is pinned, or a second probe).
    Whole,
}

/// What the probe found.
pub(super) enum Verdict {
    Modern(ServerInfo),
    /// Handshake-era; `timed_out` when the probe went unanswered; `why`
    /// says what the server did; `refusal` keeps a refusal only a stateless
    /// server sends, the cause to report if the handshake fails too.
    Legacy {
        timed_out: bool,
        why: String,
        refusal: Option<RpcError>,
    },
}

impl Client {
    /// Sends `server/discover` at the stateless version and judges the
    /// answer; on stdio waits only part of what is left (a handshake-era
    /// server may stay silent).
    pub(super) fn probe(&self, deadline: Instant) -> Result<Verdict, Error> {
        self.probe_within(deadline, ProbeWait::Part)
    }

    pub(super) fn probe_within(
        &self,
        deadline: Instant,
        wait: ProbeWait,
    ) -> Result<Verdict, Error> {
        self.probe_with(deadline, wait, None)
    }

    /// [`Client::probe_within`], given up (silently: nothing may reach a
    /// handshake-era server before `initialize`) when `cancel` is.
    pub(super) fn probe_with(
        &self,
        deadline: Instant,
        wait: ProbeWait,
        cancel: Option<CancelHandle>,
    ) -> Result<Verdict, Error> {
        let outlet = self.router.outlet().map_err(|Closed| self.disconnected())?;
        outlet.set_session_kind(SessionKind::Stateless { version: MODERN_PROTOCOL_VERSION });
        let may_go_unanswered = self.endpoint.traits().probe_may_go_unanswered;
        let left = deadline.saturating_duration_since(Instant::now());
        let wait = match wait {
            ProbeWait::Part if may_go_unanswered => (left / 2).min(PROBE_WAIT),
            _ => left,
        };
        let options = CallOptions {
            timeout: Some(wait),
            max_total_timeout: Some(wait),
            deadline: Some(Instant::now() + wait),
            cancel,
            ..CallOptions::default()
        };
        let meta = self.request_meta(MODERN_PROTOCOL_VERSION);
        let params = json!({"_meta": meta});
        let verdict = match self.resending("server/discover", Some(&params), &options) {
            Ok(result) => {
                match ServerInfo::from_discover_result(&result, MODERN_PROTOCOL_VERSION) {
                    Some(info) => Verdict::Modern(info),
                    None => {
                        let why = format!(
                            "it answered server/discover without {MODERN_PROTOCOL_VERSION}"
                        );
                        log::debug!("{}: {why}", self.router.server());
                        Verdict::Legacy { timed_out: false, why, refusal: None }
                    }
                }
            }
            Err(Error::Rpc(error)) if error.code == UNSUPPORTED_PROTOCOL_VERSION => {
                let supported = supported_versions(&error);
                if !supported.iter().any(|version| SUPPORTED_PROTOCOL_VERSIONS.contains(version)) {
                    return Err(Error::UnsupportedProtocol(if supported.is_empty() {
                        error.message
                    } else {
                        supported.join(", ")
                    }));
                }
                let why = format!("it speaks {}", supported.join(", "));
                Verdict::Legacy { timed_out: false, why, refusal: None }
            }
            Err(Error::Rpc(error)) => {
                log::debug!("{}: server/discover refused: {error}", self.router.server());
                // A refusal only a stateless server sends (header mismatch, a
                // capability it needs) is kept: if the handshake fails too,
                // it is the cause to report.
                let refusal = MODERN_REFUSALS.contains(&error.code).then(|| error.clone());
                Verdict::Legacy {
                    timed_out: false,
                    refusal,
                    why: format!("it refused server/discover ({error})"),
                }
            }
            // A 200 that is no answer (not JSON-RPC, another id): no
            // discovery result, so no modern server; the handshake says more.
            Err(Error::Protocol(what)) if !may_go_unanswered => {
                log::debug!("{}: server/discover: {what}", self.router.server());
                Verdict::Legacy { timed_out: false, why: what, refusal: None }
            }
            // A 4xx without a modern error in its body; not 408 or 429,
            // which say nothing of the era.
            Err(Error::Http { status: Some(status), message })
                if (400..500).contains(&status) && status != 408 && status != 429 =>
            {
                let why = format!("HTTP {status}: {message}");
                Verdict::Legacy { timed_out: false, why, refusal: None }
            }
            Err(Error::Timeout(_)) if may_go_unanswered && Instant::now() < deadline => {
                // No warning: a server slow to start is no news.
                log::debug!(
                    "{}: no answer to server/discover in {:.1} s",
                    self.router.server(),
                    wait.as_secs_f64()
                );
                let why = format!("no answer to server/discover in {:.1} s", wait.as_secs_f64());
                Verdict::Legacy { timed_out: true, why, refusal: None }
            }
            Err(other) => return Err(self.explain_silence(other)),
        };
        if let Verdict::Legacy { .. } = verdict {
            outlet.set_session_kind(SessionKind::Handshake);
        }
        Ok(verdict)
    }

    /// The `_meta` of every stateless request: the version, the client's
    /// capabilities and name, and the log level the host wants.
    pub(super) fn request_meta(&self, version: &str) -> Value {
        let mut meta = Map::new();
        meta.insert("io.modelcontextprotocol/protocolVersion".into(), version.into());
        meta.insert(
            "io.modelcontextprotocol/clientCapabilities".into(),
            stateless_capabilities(&*self.options.host, &self.options.declared),
        );
        meta.insert(
            "io.modelcontextprotocol/clientInfo".into(),
            self.options.declared.client_info.to_json(),
        );
        if let Some(level) = &self.options.log_level {
            meta.insert(LOG_LEVEL_META.into(), level.as_str().into());
        }
        Value::Object(meta)
    }
}

/// The client capabilities of the stateless revision: as the handshake's,
/// less `roots.listChanged` (that notification is gone), with the tasks
/// extension.
fn stateless_capabilities(host: &dyn Host, declared: &super::Declared) -> Value {
    let mut capabilities = host::client_capabilities(host, declared.capabilities());
    capabilities["roots"] = json!({});
    // tether waits out a call the server makes a task (`tasks.rs`).
    if !capabilities["extensions"].is_object() {
        capabilities["extensions"] = json!({});
    }
    capabilities["extensions"][super::rounds::TASKS_EXTENSION] = json!({});
    capabilities
}

/// The versions an `UnsupportedProtocolVersionError` says the server speaks.
fn supported_versions(error: &RpcError) -> Vec<&str> {
    error
        .data
        .as_ref()
        .and_then(|data| data.get("supported"))
        .and_then(Value::as_array)
        .map(|versions| versions.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}
