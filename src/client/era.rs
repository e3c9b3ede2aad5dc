//! Which era a server speaks, decided at the start: the probe
//! (`probe.rs`), then the handshake (`handshake.rs`) where the probe says
//! so, and the stateless session adopted where it says the other.
//!
//! Detection follows the 2026-07-28 `basic/versioning.mdx`. tether probes
//! with `server/discover` at the stateless version. A result that lists
//! that version makes the server modern. An `UnsupportedProtocolVersionError`
//! (-32022) names the versions the server does speak: a handshake-era one
//! among them means the handshake, none means no common version (never a
//! fallback on a guess). Any other error reply (even another modern one:
//! a dual-era server may still take the handshake), an HTTP 4xx, a result
//! that is not a `DiscoverResult` makes it a handshake-era server. On
//! stdio, where a probe may go unanswered, the order of the answers decides
//! (`detect_by_order`): after a moment `initialize` goes out beside the
//! probe, and the first answer the server gives (it reads in order) says
//! its era, never how long it took to start. A -32022 to `initialize` after
//! an unanswered probe is a modern server: it is probed once more. Network
//! failures and 5xx are no verdict: they fail the start as before.
//!
//! The era is remembered under the transport's key (a URL, a command line)
//! in the options' `EraMemory`, which a hub shares among its servers (and
//! keeps in a file across runs when given one), so a reconnect to a
//! handshake-era server skips the probe; forgotten as soon as the
//! handshake is refused. An entry may pin the era (`"protocol"`).

use std::time::{Duration, Instant};

use super::probe::{ProbeWait, Verdict, PROBE_WAIT, UNSUPPORTED_PROTOCOL_VERSION};
use super::session::Session;
use super::stateless::StatelessSession;
use super::{CancelHandle, Client};
use crate::error::Error;
use crate::jsonrpc::METHOD_NOT_FOUND;
use crate::protocol::{Era, EraChoice, ServerInfo, MODERN_PROTOCOL_VERSION};

impl Client {
    /// Opens the session in the server's era within `timeout`: probes with
    /// `server/discover` and falls back to the `initialize` handshake (and
    /// `notifications/initialized`; over HTTP, the GET stream answered), or
    /// speaks only the era the options pin. Once a session is open, it
    /// returns what the server said then and sends nothing.
    ///
    /// # Errors
    /// A failed or timed-out start, a malformed result, or no revision in
    /// common (the connection is then closed).
    pub fn initialize(&self, timeout: Duration) -> Result<&ServerInfo, Error> {
        // Once a session is open, it stays the one: no second probe or
        // handshake that could leave the client half in each era.
        if let Some(info) = self.info.get() {
            return Ok(info);
        }
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
        if known != Some(Era::Legacy) && self.endpoint.traits().probe_may_go_unanswered {
            return self.detect_by_order(deadline);
        }
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

    /// On stdio, where a handshake-era server may leave the probe
    /// unanswered: the probe alone for a moment, then `initialize` beside
    /// it. A server reads its input in order, so the first answer it gives
    /// decides the era, however long it takes to start: a modern server
    /// answers the probe before it reads `initialize`, a handshake-era one
    /// that ignores the probe answers `initialize`. Neither request is ever
    /// cancelled on the wire; the one that lost is forgotten.
    fn detect_by_order(&self, deadline: Instant) -> Result<ServerInfo, Error> {
        let (answers, answered) = crossbeam_channel::bounded::<Answer>(2);
        let (probe_cancel, handshake_cancel) = (CancelHandle::new(), CancelHandle::new());
        let server = self.router.server().to_owned();
        std::thread::scope(|scope| {
            let probing = {
                let (answers, cancel) = (answers.clone(), probe_cancel.clone());
                std::thread::Builder::new().name(format!("{server}-probe")).spawn_scoped(
                    scope,
                    move || {
                        let verdict = self.probe_with(deadline, ProbeWait::Whole, Some(cancel));
                        let _ = answers.send(Answer::Probe(verdict));
                    },
                )
            };
            probing.map_err(Error::Io)?;
            let left = deadline.saturating_duration_since(Instant::now());
            if let Ok(Answer::Probe(verdict)) = answered.recv_timeout((left / 2).min(PROBE_WAIT)) {
                // Answered alone: the handshake follows if it says so.
                return match verdict? {
                    Verdict::Modern(info) => Ok(info),
                    Verdict::Legacy { refusal, .. } => match self.handshake(deadline) {
                        Ok(info) => Ok(info),
                        Err(_) if refusal.is_some() => Err(Error::Rpc(refusal.expect("checked"))),
                        Err(error) => Err(error),
                    },
                };
            }
            log::debug!("{server}: no answer to server/discover yet; sending initialize too");
            let handshaking = {
                let (answers, cancel) = (answers.clone(), handshake_cancel.clone());
                std::thread::Builder::new().name(format!("{server}-handshake")).spawn_scoped(
                    scope,
                    move || {
                        let info = self.initialize_exchange(deadline, Some(cancel));
                        let _ = answers.send(Answer::Handshake(info));
                    },
                )
            };
            drop(answers);
            if let Err(err) = handshaking {
                probe_cancel.cancel();
                return Err(Error::Io(err));
            }
            let mut probe_refusal = None;
            let mut probe_done = false;
            while let Ok(answer) = answered.recv() {
                match answer {
                    Answer::Probe(Ok(Verdict::Modern(info))) => {
                        handshake_cancel.cancel();
                        return Ok(info);
                    }
                    Answer::Probe(verdict) => {
                        probe_done = true;
                        if let Ok(Verdict::Legacy { refusal, .. }) = verdict {
                            probe_refusal = refusal;
                        }
                    }
                    Answer::Handshake(Ok(info)) => {
                        probe_cancel.cancel();
                        // A server that answered the probe did so before it
                        // answered `initialize` (it reads in order): that
                        // answer is already on its way to the probe thread,
                        // which the cancellation hands it (a dual-era
                        // server answers both; its first answer decides).
                        if !probe_done {
                            if let Ok(Answer::Probe(Ok(Verdict::Modern(modern)))) = answered.recv()
                            {
                                return Ok(modern);
                            }
                        }
                        self.finish_handshake(&info, deadline)?;
                        return Ok(info);
                    }
                    Answer::Handshake(Err(error)) => {
                        if !probe_done {
                            // A refusal: the server is up and reading. A
                            // modern one has the probe's answer on its way.
                            let left = deadline.saturating_duration_since(Instant::now());
                            let wait = (left / 2).min(PROBE_WAIT);
                            if let Ok(Answer::Probe(Ok(verdict))) = answered.recv_timeout(wait) {
                                match verdict {
                                    Verdict::Modern(info) => return Ok(info),
                                    Verdict::Legacy { refusal, .. } => probe_refusal = refusal,
                                }
                            }
                            probe_cancel.cancel();
                        }
                        return Err(probe_refusal.map_or(error, Error::Rpc));
                    }
                }
            }
            Err(Error::Protocol("the era probe ended without an answer".into()))
        })
    }

    /// From now on every request carries the stateless `_meta`; list
    /// changes come on a `subscriptions/listen` stream, acknowledged before
    /// the start ends (as the handshake era's GET stream is open by then).
    fn adopt(&self, info: &ServerInfo, deadline: Instant) {
        let session = StatelessSession::new(self.request_meta(&info.protocol_version));
        if self.session.set(Session::Stateless(Box::new(session))).is_err() {
            // Initialized again after a session was open: the first one
            // stays, whole, rather than half of each.
            return;
        }
        self.router.stateless().adopt();
        self.start_listening(info, deadline);
    }
}

/// What came first in [`Client::detect_by_order`].
enum Answer {
    Probe(Result<Verdict, Error>),
    Handshake(Result<ServerInfo, Error>),
}
