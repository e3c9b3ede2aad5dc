//! The legacy HTTP+SSE transport (2024-11-05): a `{server}-sse` thread
//! holds the GET stream, whose first event names the endpoint to POST to
//! (same origin only); answers arrive as `message` events on that stream.

use std::io::{self, BufReader, Read};
use std::time::{Duration, Instant};

use super::wire::{http_error, is_transient, unauthorized, Attempt, Credentials};
use super::{HttpTransport, Poster};
use crate::error::{CloseReason, Error};
use crate::framing::MAX_FRAME;
use crate::sync::{lock, wait_timeout};
use crate::transport::sse::SseReader;
use crate::url::{origin_of, redact_url};

/// How long before the caller's deadline the wait for the endpoint ends.
const ENDPOINT_MARGIN: Duration = Duration::from_millis(250);

impl HttpTransport {
    /// Opens the legacy SSE stream (once); its first event names the endpoint.
    pub(super) fn start_legacy_stream(&self) -> Result<(), Error> {
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

    pub(super) fn run_legacy_stream(&self) {
        let reason = match self.open_get(None, None, Poster::OwnLimits) {
            Ok(mut response) if response.status().is_success() => {
                let mut reader =
                    SseReader::new(BufReader::new(response.body_mut().as_reader()), MAX_FRAME);
                self.read_legacy_events(&mut reader)
            }
            Ok(mut response) => {
                let status = response.status().as_u16();
                let error = if status == 401 {
                    unauthorized(
                        &response,
                        &redact_url(&self.target.url),
                        self.target.has_static_authorization(),
                    )
                } else {
                    http_error(&mut response)
                };
                self.legacy_failed(error);
                return;
            }
            Err(err) => {
                let why = super::wire::network_words(&err);
                let message = format!("cannot reach {}: {why}", redact_url(&self.target.url));
                self.legacy_failed(Error::Http { status: None, message });
                return;
            }
        };
        if self.is_closing() {
            return;
        }
        self.legacy_failed(Error::Http { status: None, message: reason.to_string() });
        if let Some(inbox) = self.inbox() {
            inbox.closed(reason);
        }
    }

    pub(super) fn read_legacy_events<R: io::BufRead>(
        &self,
        reader: &mut SseReader<R>,
    ) -> CloseReason {
        loop {
            match reader.next_event() {
                Ok(Some(event)) if event.event == "endpoint" => {
                    match self.resolve_endpoint(event.data.trim()) {
                        Ok(endpoint) => {
                            log::debug!(
                                "{}: legacy endpoint {}",
                                self.server,
                                redact_url(&endpoint)
                            );
                            lock(&self.state).legacy_endpoint = Some(endpoint);
                            self.changed.notify_all();
                        }
                        Err(why) => {
                            self.legacy_failed(Error::Http { status: None, message: why });
                            return CloseReason::Io(
                                "the server named an endpoint on another origin".into(),
                            );
                        }
                    }
                }
                Ok(Some(event)) if event.event == "message" && !event.data.trim().is_empty() => {
                    self.deliver_bytes(event.data.as_bytes(), None);
                }
                Ok(Some(_)) => {}
                Ok(None) => return CloseReason::Eof,
                Err(err) => return CloseReason::Io(format!("the event stream broke: {err}")),
            }
        }
    }

    pub(super) fn legacy_failed(&self, why: Error) {
        let mut state = lock(&self.state);
        if state.legacy_error.is_none() {
            state.legacy_error = Some(why);
        }
        self.changed.notify_all();
    }

    /// The endpoint URL, relative to the stream's URL, same origin only.
    pub(super) fn resolve_endpoint(&self, endpoint: &str) -> Result<String, String> {
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
    pub(super) fn post_legacy(
        &self,
        frame: &[u8],
        method: Option<&str>,
        deadline: Option<Instant>,
        caller_gives_up: Option<Instant>,
        by: Poster<'_>,
    ) -> Result<(), Error> {
        let waited_from = Instant::now();
        // Whichever comes first: this exchange's end, or the caller's.
        let gives_up = deadline.into_iter().chain(caller_gives_up).min();
        let endpoint = {
            // Ends a little before the caller's own deadline, so that the
            // caller hears why (no endpoint), not merely that it timed out.
            let mut deadline = waited_from + self.target.endpoint_wait;
            if let Some(at) = gives_up.and_then(|at| at.checked_sub(ENDPOINT_MARGIN)) {
                deadline = deadline.min(at.max(waited_from));
            }
            let mut state = lock(&self.state);
            loop {
                if let Some(endpoint) = &state.legacy_endpoint {
                    break endpoint.clone();
                }
                if let Some(error) = &state.legacy_error {
                    return Err(again(error));
                }
                let now = Instant::now();
                if now >= deadline || self.is_closing() {
                    return Err(Error::Http {
                        status: None,
                        message: format!(
                            "the SSE server never sent its endpoint event (waited {:.1} s)",
                            waited_from.elapsed().as_secs_f64()
                        ),
                    });
                }
                state = wait_timeout(&self.changed, state, deadline - now);
            }
        };
        self.with_retries(method != Some("tools/call"), false, gives_up, by, || {
            let ceiling = self.ceiling(false, deadline);
            let bearer = self.bearer(by);
            let credentials = Credentials { with_session: true, bearer: bearer.as_deref() };
            match self.send_post(&endpoint, frame, None, ceiling, credentials, by) {
                Ok(mut response) if response.status().is_success() => {
                    let _ = response
                        .body_mut()
                        .as_reader()
                        .take(MAX_FRAME as u64)
                        .read_to_end(&mut Vec::new());
                    Attempt::Done(Ok(()))
                }
                Ok(response) if response.status().as_u16() == 401 => {
                    Attempt::Done(Err(unauthorized(
                        &response,
                        &redact_url(&self.target.url),
                        self.target.has_static_authorization(),
                    )))
                }
                Ok(mut response) if is_transient(response.status().as_u16()) => {
                    Attempt::Transient(http_error(&mut response))
                }
                Ok(mut response) => Attempt::Done(Err(http_error(&mut response))),
                Err(err) => Attempt::Transient(Error::Http {
                    status: None,
                    message: format!(
                        "cannot reach {}: {}",
                        redact_url(&endpoint),
                        super::wire::network_words(&err)
                    ),
                }),
            }
        })
        .map(drop)
    }
}

/// The stream's failure again, for each request that waited on it: typed as
/// it was (an HTTP status, a sign-in wanted), so the hints fit.
fn again(error: &Error) -> Error {
    match error {
        Error::Http { status, message } => {
            Error::Http { status: *status, message: message.clone() }
        }
        Error::LoginRequired { url } => Error::LoginRequired { url: url.clone() },
        other => Error::Http { status: None, message: other.to_string() },
    }
}
