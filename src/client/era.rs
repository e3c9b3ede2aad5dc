//! Which era a server speaks, and the session start of each: the stateless
//! revision's `server/discover`, or the `initialize` handshake.
//!
//! Detection follows the 2026-07-28 `basic/versioning.mdx`. tether probes
//! with `server/discover` at the stateless version. A result that lists
//! that version makes the server modern. An `UnsupportedProtocolVersionError`
//! (-32022) names the versions the server does speak: a handshake-era one
//! among them means the handshake, none means no common version (never a
//! fallback on a guess). Any other error reply (even another modern one:
//! a dual-era server may still take the handshake), an HTTP 4xx, a result
//! that is not a `DiscoverResult`, or on stdio silence until the probe's
//! wait runs out makes it a handshake-era server. A -32022 to
//! `initialize` after a probe that timed out is a slow modern server: it is
//! probed once more. Network failures and 5xx are no verdict: they fail the
//! start as before.
//!
//! The era belongs to the server process (stdio: found again by every new
//! connection) or its URL (HTTP: remembered in the options' `EraMemory`,
//! which a hub shares among its servers, so a reconnect to a handshake-era
//! server skips the probe; forgotten as soon as the handshake is refused).
//! An entry may pin the era (`"protocol"`).

use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use super::session::{Session, StatelessSession};
use super::{CallOptions, Client};
use crate::error::{CloseReason, Error};
use crate::host::{self, Host};
use crate::jsonrpc::{Frame, RpcError, METHOD_NOT_FOUND};
use crate::protocol::{
    Era, EraChoice, ServerInfo, LATEST_PROTOCOL_VERSION, MODERN_PROTOCOL_VERSION,
    SUPPORTED_PROTOCOL_VERSIONS,
};
use crate::transport::outbox::Closed;
use crate::transport::Dialect;

/// `UnsupportedProtocolVersionError`.
pub(super) const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
/// Refusals only a stateless server sends: a header that does not match
/// its body, a client capability it needs.
const MODERN_REFUSALS: [i64; 2] = [-32020, -32021];
/// The most a stdio probe waits for an answer before the handshake is
/// tried: a handshake-era server may ignore what comes before `initialize`.
const PROBE_WAIT: Duration = Duration::from_secs(5);

/// How much of the time left a probe may wait.
#[derive(Clone, Copy)]
enum ProbeWait {
    /// On stdio, half of it and 5 s at most (the server may be of the
    /// handshake era and ignore the probe).
    Part,
    /// All of it (the era is pinned, or a second probe).
    Whole,
}

/// What the probe found.
enum Verdict {
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
    /// Opens the session in the server's era within `timeout`: probes with
    /// `server/discover` and falls back to the `initialize` handshake (and
    /// `notifications/initialized`; over HTTP, the GET stream answered), or
    /// speaks only the era the options pin.
    ///
    /// # Errors
    /// A failed or timed-out start, a malformed result, or no revision in
    /// common (the connection is then closed).
    pub fn initialize(&self, timeout: Duration) -> Result<&ServerInfo, Error> {
        let deadline = Instant::now() + timeout;
        // The 2024-11-05 HTTP+SSE transport belongs to the handshake era.
        let carries_stateless = self.endpoint.traits().carries_stateless;
        let era = if carries_stateless { self.options.era } else { EraChoice::Legacy };
        let info = match era {
            EraChoice::Legacy => match self.handshake(deadline) {
                // Refused outright: the pin may be what is wrong.
                Err(Error::Rpc(refusal))
                    if era == self.options.era
                        && matches!(
                            refusal.code,
                            METHOD_NOT_FOUND | UNSUPPORTED_PROTOCOL_VERSION
                        ) =>
                {
                    return Err(Error::Protocol(format!(
                        "the entry pins \"protocol\": \"legacy\", but the server refused the \
                         handshake ({}: {}); remove the pin to let tether find its era",
                        refusal.code, refusal.message
                    )))
                }
                other => other?,
            },
            EraChoice::Modern => match self.probe_within(deadline, ProbeWait::Whole)? {
                Verdict::Modern(info) => info,
                Verdict::Legacy { refusal: Some(refusal), .. } => return Err(Error::Rpc(refusal)),
                Verdict::Legacy { why, .. } => {
                    return Err(Error::Protocol(format!(
                        "the entry pins \"protocol\": \"modern\", but the server does not \
                         speak {MODERN_PROTOCOL_VERSION}: {why}"
                    )))
                }
            },
            EraChoice::Auto => self.detect(deadline)?,
        };
        if info.era == Era::Modern {
            self.adopt(&info, deadline);
        } else {
            let _ = self.session.set(Session::Handshake);
        }
        if let Some(key) = self.endpoint.era_key() {
            self.options.eras.remember(key, info.era);
        }
        log::info!(
            "{}: connected to {} {} (protocol {})",
            self.router.server(),
            info.name,
            info.version,
            info.protocol_version
        );
        Ok(self.info.get_or_init(|| info))
    }

    /// The probe, the handshake as its fallback, and one more probe when
    /// the handshake proves the server modern after all.
    fn detect(&self, deadline: Instant) -> Result<ServerInfo, Error> {
        let known = self.endpoint.era_key().and_then(|key| self.options.eras.recall(key));
        let mut probed_in_time = false;
        let mut probe_refusal = None;
        if known != Some(Era::Legacy) {
            match self.probe(deadline)? {
                Verdict::Modern(info) => return Ok(info),
                Verdict::Legacy { timed_out, refusal, .. } => {
                    probed_in_time = !timed_out;
                    probe_refusal = refusal;
                }
            }
        }
        let error = match self.handshake(deadline) {
            Ok(info) => return Ok(info),
            // A stateless server that refused the probe for a reason of its
            // own, then the handshake: the first refusal is the cause.
            Err(_) if probe_refusal.is_some() => {
                return Err(Error::Rpc(probe_refusal.expect("checked")))
            }
            Err(error) => error,
        };
        // A refused `initialize` after an unanswered probe may be a slow
        // modern server that took the probe after all (its refusal's code
        // is its own choice); a remembered era that the server now refuses
        // is forgotten. Either way: probe once more, with the time left.
        let refused = match &error {
            Error::Rpc(_) => true,
            Error::Http { status: Some(status), .. } => (400..500).contains(status),
            _ => false,
        };
        let modern_evidence =
            matches!(&error, Error::Rpc(rpc) if rpc.code == UNSUPPORTED_PROTOCOL_VERSION);
        let unanswered = !probed_in_time && known != Some(Era::Legacy);
        let again = (unanswered && matches!(error, Error::Rpc(_)))
            || (modern_evidence && !probed_in_time)
            || (known == Some(Era::Legacy) && refused);
        if !again {
            return Err(error);
        }
        if let Some(key) = self.endpoint.era_key() {
            self.options.eras.forget(key);
        }
        log::info!("{}: initialize refused ({error}); probing again", self.router.server());
        // A server that refused the handshake is up: a modern one answers
        // the probe at once. Whatever else happens, the refusal is the news.
        let wait = if modern_evidence { ProbeWait::Whole } else { ProbeWait::Part };
        match self.probe_within(deadline, wait) {
            Ok(Verdict::Modern(info)) => Ok(info),
            Ok(Verdict::Legacy { .. }) | Err(_) => Err(error),
        }
    }

    /// Sends `server/discover` at the stateless version and judges the
    /// answer; on stdio waits only part of what is left (a handshake-era
    /// server may stay silent).
    fn probe(&self, deadline: Instant) -> Result<Verdict, Error> {
        self.probe_within(deadline, ProbeWait::Part)
    }

    fn probe_within(&self, deadline: Instant, wait: ProbeWait) -> Result<Verdict, Error> {
        let outlet = self.router.outlet().map_err(|Closed| self.disconnected())?;
        outlet.speak(Dialect::Stateless { version: MODERN_PROTOCOL_VERSION });
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
                // Said at warning level: every start of this server pays it.
                log::warn!(
                    "{}: no answer to server/discover in {:.1} s; trying initialize \
                     (\"protocol\": \"legacy\" in the entry skips the probe)",
                    self.router.server(),
                    wait.as_secs_f64()
                );
                let why = format!("no answer to server/discover in {:.1} s", wait.as_secs_f64());
                Verdict::Legacy { timed_out: true, why, refusal: None }
            }
            Err(other) => return Err(self.explain_silence(other)),
        };
        if let Verdict::Legacy { .. } = verdict {
            outlet.speak(Dialect::Handshake);
        }
        Ok(verdict)
    }

    /// The `initialize` handshake: `initialize`, a revision tether speaks,
    /// then `notifications/initialized` and whatever the transport's session
    /// needs before the first request.
    fn handshake(&self, deadline: Instant) -> Result<ServerInfo, Error> {
        let timeout = deadline.saturating_duration_since(Instant::now());
        let params = json!({
            "protocolVersion": LATEST_PROTOCOL_VERSION,
            "capabilities": host::client_capabilities(&*self.options.host),
            "clientInfo": {"name": "tether", "version": env!("CARGO_PKG_VERSION")},
        });
        let options = CallOptions {
            timeout: Some(timeout),
            max_total_timeout: Some(timeout),
            deadline: Some(deadline),
            ..CallOptions::default()
        };
        let result = self
            .exchange("initialize", Some(&params), &options)
            .map_err(|err| self.explain_silence(err))?;
        let info = ServerInfo::from_initialize_result(&result).map_err(Error::Protocol)?;
        if !SUPPORTED_PROTOCOL_VERSIONS.contains(&info.protocol_version.as_str()) {
            let _ = self.close();
            return Err(Error::UnsupportedProtocol(info.protocol_version));
        }
        let initialized = Frame::notification("notifications/initialized", None);
        let outlet = self.router.outlet().map_err(|Closed| self.disconnected())?;
        outlet.begin_session(initialized, &info.protocol_version, deadline)?;
        Ok(info)
    }

    /// From now on every request carries the stateless `_meta`; list
    /// changes come on a `subscriptions/listen` stream, acknowledged before
    /// the start ends (as the handshake era's GET stream is open by then).
    fn adopt(&self, info: &ServerInfo, deadline: Instant) {
        let session = StatelessSession::new(self.request_meta(&info.protocol_version));
        let _ = self.session.set(Session::Stateless(Box::new(session)));
        self.router.stateless().adopt();
        self.start_listening(info, deadline);
    }

    /// The `_meta` of every stateless request: the version, the client's
    /// capabilities and name, and the log level the host wants.
    pub(super) fn request_meta(&self, version: &str) -> Value {
        let mut meta = Map::new();
        meta.insert("io.modelcontextprotocol/protocolVersion".into(), version.into());
        meta.insert(
            "io.modelcontextprotocol/clientCapabilities".into(),
            stateless_capabilities(&*self.options.host),
        );
        meta.insert(
            "io.modelcontextprotocol/clientInfo".into(),
            json!({"name": "tether", "version": env!("CARGO_PKG_VERSION")}),
        );
        if let Some(level) = &self.options.log_level {
            meta.insert("io.modelcontextprotocol/logLevel".into(), level.as_str().into());
        }
        Value::Object(meta)
    }

    pub(super) fn disconnected(&self) -> Error {
        Error::Disconnected(self.close_reason().unwrap_or(CloseReason::Eof))
    }
}

/// The client capabilities of the stateless revision: as the handshake's,
/// less `roots.listChanged` (that notification is gone).
fn stateless_capabilities(host: &dyn Host) -> Value {
    let mut capabilities = host::client_capabilities(host);
    capabilities["roots"] = json!({});
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
