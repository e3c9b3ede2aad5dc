//! What every HTTP exchange shares: building a request with its headers
//! and credentials, delivering what comes back into the inbox, the error a
//! status makes, URLs as messages may show them, and the resolver.

use std::io::{self, Read};
use std::time::{Duration, Instant};

use serde_json::Value;
use ureq::http::Response;
use ureq::Body;

use super::{HttpTransport, Poster, RETRY_PAUSES};
use crate::error::{CloseReason, Error};
use crate::jsonrpc::{Frame, Message, RequestId, RpcError};
use crate::sync::lock;
use crate::transport::sse::SseReader;
use crate::url::redact_url;

/// Bytes of an error page kept for the message.
const ERROR_BODY: u64 = 1024;

/// What one try at a POST came to.
pub(super) enum Attempt {
    /// Finished, well or badly: no retry.
    Done(Result<(), Error>),
    /// A failure that another try may mend (408, 429, 5xx, a network error).
    Transient(Error),
    /// The server could not be reached at all (the message says why): retried
    /// like a transient failure; when the last try fails too, the connection
    /// is lost and the next call reconnects.
    Unreachable(String),
    /// Nothing listens there, on this machine: no try can mend it in the
    /// time a retry waits, so the connection is lost at once.
    Refused(String),
    /// Try again at once, not counted as a retry (the session was renewed).
    Again,
    /// Not for a caller's own thread (a session renewal or a sign-in may
    /// take longer than it may wait): a worker sends the request anew. Only
    /// for answers that say the server did not take the request.
    HandOff,
}

/// How a POST ended, when it did not fail.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Posted {
    /// Sent, and whatever came back delivered (or nobody waits any more).
    Done,
    /// Handed back untaken (see [`Attempt::HandOff`]): a worker must send it.
    HandedOff,
    /// A caller's own try met a failure worth another: a worker sends it
    /// again after the first pause (`Frame::retrying`).
    ToRetry,
}

/// True for a status worth another try.
pub(super) fn is_transient(status: u16) -> bool {
    matches!(status, 408 | 429 | 500..=599)
}

/// Who a POST is from, as its headers say: the session (when
/// `with_session` and the transport has one) and the bearer token read for
/// this request.
#[derive(Clone, Copy)]
pub(super) struct Credentials<'a> {
    pub(super) with_session: bool,
    pub(super) bearer: Option<&'a str>,
}

impl HttpTransport {
    /// The one retry loop: runs `attempt` until it is done, and retries a
    /// transient failure after each of [`RETRY_PAUSES`] when the request is
    /// `repeatable` (safe to send twice). Ends quietly when the transport
    /// closes meanwhile.
    /// `retrying`: a first try already failed (on a caller's thread), so
    /// this begins with the first pause.
    pub(super) fn with_retries(
        &self,
        repeatable: bool,
        retrying: bool,
        deadline: Option<Instant>,
        by: Poster<'_>,
        mut attempt: impl FnMut() -> Attempt,
    ) -> Result<Posted, Error> {
        let mut pauses = RETRY_PAUSES.iter();
        let in_time = |pause: &&Duration| deadline.is_none_or(|at| Instant::now() + **pause < at);
        if retrying {
            // The first pause is this one: taken only when a try failed.
            if let Some(pause) = pauses.next().filter(in_time) {
                if !self.pause(*pause, by) {
                    return Ok(Posted::Done);
                }
            }
        }
        loop {
            let (error, unreachable) = match attempt() {
                Attempt::Done(outcome) => return outcome.map(|()| Posted::Done),
                Attempt::Again => continue,
                Attempt::HandOff => return Ok(Posted::HandedOff),
                _ if self.is_closing() || by.gave_up() => return Ok(Posted::Done),
                Attempt::Refused(why) => {
                    let message = format!("cannot reach {}: {why}", redact_url(&self.target.url));
                    self.lost(CloseReason::Unreachable(message.clone()));
                    return Err(Error::Http { status: None, message });
                }
                // A worker has the time for every retry (and for declaring
                // the server unreachable only after them).
                _ if repeatable && by.waits() => return Ok(Posted::ToRetry),
                Attempt::Transient(error) => (error, false),
                Attempt::Unreachable(why) => {
                    let message = format!("cannot reach {}: {why}", redact_url(&self.target.url));
                    (Error::Http { status: None, message }, true)
                }
            };
            match pauses.next().filter(|_| repeatable).filter(in_time) {
                Some(pause) => {
                    log::debug!("{}: {error}; retrying", self.server);
                    if !self.pause(*pause, by) {
                        return Ok(Posted::Done);
                    }
                }
                None => {
                    if let (true, Error::Http { message, .. }) = (unreachable, &error) {
                        self.lost(CloseReason::Unreachable(message.clone()));
                    }
                    return Err(error);
                }
            }
        }
    }

    /// One POST with every header the request needs; a stateless server
    /// also gets the frame's method and name (`mirrored`) as headers.
    pub(super) fn send_post(
        &self,
        url: &str,
        body: &[u8],
        mirrored: Option<&Frame>,
        ceiling: Duration,
        credentials: Credentials<'_>,
        by: Poster<'_>,
    ) -> Result<Response<Body>, ureq::Error> {
        let Credentials { with_session, bearer } = credentials;
        let mut request = self
            .agent
            .post(url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream");
        request = self.with_common_headers(request, with_session, bearer);
        if let Some(frame) = mirrored.filter(|_| lock(&self.state).stateless) {
            if let Some(method) = &frame.method {
                request = request.header("Mcp-Method", method.as_ref());
            }
            if let Some(name) = &frame.name {
                request = request.header("Mcp-Name", header_value(name));
            }
            for (name, value) in &frame.headers {
                request = request.header(name.as_str(), header_value(value));
            }
        }
        if by.waits() {
            // The caller's watch bounds every step, sooner than the ceiling
            // (and a request-level configuration is a copy of the agent's).
            return request.send(body);
        }
        request.config().timeout_global(Some(ceiling)).build().send(body)
    }

    /// How long one POST may take: a request as long as its caller may
    /// wait, a notification or a response 30 s; never past `deadline`.
    pub(super) fn ceiling(&self, is_request: bool, deadline: Option<Instant>) -> Duration {
        let ceiling = if is_request {
            self.request_ceiling + Duration::from_secs(5)
        } else {
            Duration::from_secs(30)
        };
        match deadline {
            Some(at) => ceiling
                .min(at.saturating_duration_since(Instant::now()))
                .max(Duration::from_millis(1)),
            None => ceiling,
        }
    }

    /// The bearer token to send: the configured one, else OAuth's current
    /// one (refreshed first when it is about to expire). Read once per
    /// request, so that a 401 can say which token it refused.
    pub(super) fn bearer(&self, by: Poster<'_>) -> Option<String> {
        if self.target.has_authorization_header() {
            return None;
        }
        if let Some((server, provider)) = &self.target.token_provider {
            return match provider.token(server) {
                Ok(token) => Some(token),
                Err(err) => {
                    log::warn!("{}: the token provider has no token: {err}", self.server);
                    None
                }
            };
        }
        let oauth = self.oauth.as_ref();
        self.target.bearer_token.clone().or_else(|| match by.waits() {
            // Never a refresh on a caller's thread (`posts_inline` checked
            // none was due): an expired token gets a 401, and a worker.
            true => oauth?.token_now(),
            false => oauth?.token(),
        })
    }

    /// Custom headers, credentials, session and protocol version.
    pub(super) fn with_common_headers<B>(
        &self,
        mut request: ureq::RequestBuilder<B>,
        with_session: bool,
        bearer: Option<&str>,
    ) -> ureq::RequestBuilder<B> {
        let state = lock(&self.state);
        for (name, value) in state.headers.as_ref().unwrap_or(&self.target.headers) {
            request = request.header(name.as_str(), value.as_str());
        }
        if let Some(token) = bearer {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        if let (Some(session), true, false) = (&state.session_id, with_session, state.stateless) {
            request = request.header("Mcp-Session-Id", session.as_str());
        }
        if let Some(version) =
            state.protocol_version.as_deref().filter(|version| *version >= "2025-06-18")
        {
            request = request.header("MCP-Protocol-Version", version);
        }
        request
    }

    /// Delivers every event of a stream; true once the response to `id` came.
    /// With `to_answer`, reading ends at the response (a resumed stream may
    /// stay open after it); otherwise at the end of the stream, so that a
    /// POST's connection is read to its end and kept.
    pub(super) fn deliver_events<R: io::BufRead>(
        &self,
        reader: &mut SseReader<R>,
        id: Option<i64>,
        answered: &mut bool,
        to_answer: bool,
    ) -> io::Result<()> {
        while let Some(event) = reader.next_event()? {
            if event.data.trim().is_empty() {
                continue; // Priming events carry only an id.
            }
            *answered |= self.deliver_json(event.data.as_bytes(), id);
            if to_answer && *answered {
                return Ok(());
            }
            if let Some(id) = id {
                if lock(&self.state).abandoned.contains(&id) {
                    // Closing the stream is the cancellation (stateless).
                    *answered = true;
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Delivers a JSON body, one message or a batch; true when it held the
    /// response to `awaited`.
    pub(super) fn deliver_json(&self, body: &[u8], awaited: Option<i64>) -> bool {
        let answers = |delivered: Option<RequestId>| {
            awaited.is_some_and(|id| delivered == Some(RequestId::Number(id)))
        };
        // Only a batch is parsed twice; a single message goes straight through.
        if body.iter().find(|byte| !byte.is_ascii_whitespace()) != Some(&b'[') {
            return answers(self.deliver_bytes(body, awaited));
        }
        match serde_json::from_slice::<Vec<Value>>(body) {
            Ok(batch) => {
                // Every item is delivered, whichever of them answers.
                let mut answered = false;
                for item in batch {
                    answered |= answers(self.deliver_bytes(item.to_string().as_bytes(), awaited));
                }
                answered
            }
            Err(err) => {
                log::warn!("{}: the answer is not a JSON batch: {err}", self.server);
                false
            }
        }
    }

    /// Parses and delivers one message, which came on the response stream
    /// of request `stream_of` if any; returns its id when it is a response.
    pub(super) fn deliver_bytes(&self, bytes: &[u8], stream_of: Option<i64>) -> Option<RequestId> {
        if let Some(id) = self.inbox()?.deliver_passed(bytes) {
            log::trace!("{} <- {}", self.server, String::from_utf8_lossy(bytes));
            return Some(RequestId::Number(id));
        }
        let message = match Message::parse(bytes) {
            Ok(message) => message,
            Err(why) => {
                log::warn!("{}: skipped a message that is not JSON-RPC ({why})", self.server);
                self.inbox()?.skipped();
                return None;
            }
        };
        log::trace!("{} <- {}", self.server, String::from_utf8_lossy(bytes));
        let inbox = self.inbox()?;
        let id = match &message {
            Message::Response(response) => Some(response.id.clone()),
            _ => None,
        };
        inbox.deliver_on(message, stream_of);
        id
    }

    /// A GET for an event stream; `ceiling` bounds the whole exchange (a
    /// resumed response stream), `None` leaves it open (the GET stream, which
    /// close interrupts).
    pub(super) fn open_get(
        &self,
        last_event_id: Option<&str>,
        ceiling: Option<Duration>,
        by: Poster<'_>,
    ) -> Result<Response<Body>, ureq::Error> {
        let mut request = self.agent.get(&self.target.url).header("Accept", "text/event-stream");
        if let Some(event_id) = last_event_id {
            request = request.header("Last-Event-ID", event_id);
        }
        let bearer = self.bearer(by);
        self.with_common_headers(request, true, bearer.as_deref())
            .config()
            .timeout_global(ceiling)
            .build()
            .call()
    }
}

/// A value as an HTTP header may carry it: as it is when it is plain
/// visible ASCII with no space at either end, else (and when it looks like
/// the sentinel itself) as `=?base64?…?=` of its UTF-8.
pub(super) fn header_value(value: &str) -> String {
    let plain = value.bytes().all(|byte| byte == b'\t' || (0x20..0x7f).contains(&byte))
        && value.trim() == value
        && !(value.starts_with("=?base64?") && value.ends_with("?="));
    if plain {
        value.to_owned()
    } else {
        use base64::Engine;
        format!("=?base64?{}?=", base64::engine::general_purpose::STANDARD.encode(value))
    }
}

/// A refusal whose body is a JSON-RPC error (a stateless server answers
/// 400 or 404 so: an unsupported version, a missing capability, an
/// unknown method): the error itself, for the caller to act on.
///
/// With `for_id`, only an error that names that id counts (one with a null
/// id may come from anything in front of the endpoint).
pub(super) fn rpc_refusal(
    response: &mut Response<Body>,
    for_id: Option<i64>,
) -> Result<RpcError, Error> {
    let mut body = Vec::new();
    let _ = response.body_mut().as_reader().take(ERROR_BODY * 64).read_to_end(&mut body);
    let error = serde_json::from_slice::<Value>(&body)
        .ok()
        .filter(|message| {
            for_id.is_none_or(|id| message.get("id").and_then(Value::as_i64) == Some(id))
        })
        .and_then(|mut message| serde_json::from_value(message.get_mut("error")?.take()).ok());
    error.ok_or_else(|| status_error(response.status().as_u16(), &body))
}

/// An error from a status and (the start of) the body.
pub(super) fn http_error(response: &mut Response<Body>) -> Error {
    let mut body = Vec::new();
    let _ = response.body_mut().as_reader().take(ERROR_BODY * 64).read_to_end(&mut body);
    status_error(response.status().as_u16(), &body)
}

/// An error from a status and what its body says, when that adds to the
/// status's own words.
fn status_error(status: u16, body: &[u8]) -> Error {
    let reason = ureq::http::StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason());
    let reason = reason.unwrap_or("error");
    let text = body_text(body);
    let said = text.to_ascii_lowercase();
    let message = if text.is_empty()
        || said == reason.to_ascii_lowercase()
        || said == format!("{status} {reason}").to_ascii_lowercase()
    {
        reason.to_owned()
    } else {
        format!("{reason}: {text}")
    };
    Error::Http { status: Some(status), message }
}

/// An error body as a line: its text with whitespace collapsed, at most
/// [`ERROR_BODY`] bytes of it. An HTML page (a proxy's, a gateway's) gives
/// its title, or else its text without tags, scripts and styles.
fn body_text(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let page = text.trim_start();
    let text = if page.starts_with('<') { html_text(page) } else { text.into_owned() };
    let mut line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.len() > ERROR_BODY as usize {
        let mut end = ERROR_BODY as usize;
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        line.truncate(end);
        line.push('…');
    }
    line
}

/// The words of an HTML page: its title if it has one, else its text.
fn html_text(page: &str) -> String {
    // ASCII lowercasing keeps every byte offset.
    let lower = page.to_ascii_lowercase();
    let title = lower.find("<title").and_then(|at| {
        let from = at + lower[at..].find('>')? + 1;
        Some(&page[from..from + lower[from..].find("</title")?])
    });
    if let Some(title) = title.filter(|title| !title.trim().is_empty()) {
        return entities(title);
    }
    let mut text = String::new();
    let mut at = 0;
    while let Some(open) = lower[at..].find('<').map(|open| at + open) {
        text.push_str(&page[at..open]);
        text.push(' ');
        let Some(close) = lower[open..].find('>').map(|close| open + close + 1) else {
            return entities(&text);
        };
        at = close;
        // What a browser does not show.
        for (hidden, end) in [("script", "</script"), ("style", "</style")] {
            if lower[open + 1..].starts_with(hidden) {
                at = lower[close..].find(end).map_or(lower.len(), |end| close + end);
            }
        }
    }
    text.push_str(&page[at..]);
    entities(&text)
}

/// The few character references error pages use.
fn entities(text: &str) -> String {
    let mut text = text.to_owned();
    for (name, character) in [
        ("&nbsp;", " "),
        ("&lt;", "<"),
        ("&gt;", ">"),
        ("&quot;", "\""),
        ("&#39;", "'"),
        ("&amp;", "&"),
    ] {
        text = text.replace(name, character);
    }
    text
}

/// A 401, with what to configure; `configured`: the entry has credentials
/// (a token, an `Authorization` header, a token provider), which the server
/// refused.
pub(super) fn unauthorized(response: &Response<Body>, url: &str, configured: bool) -> Error {
    let challenge = response
        .headers()
        .get("www-authenticate")
        .and_then(|value| value.to_str().ok())
        .unwrap_or("");
    let metadata = challenge
        .split("resource_metadata=")
        .nth(1)
        .map(|rest| rest.trim_start_matches('"').split('"').next().unwrap_or(rest).to_owned());
    let mut message = if configured {
        format!(
            "{url} refused the credentials in the server's entry: check the token \
             (\"bearerTokenEnv\", the \"Authorization\" header or the token provider)"
        )
    } else {
        format!(
            "{url} needs authorization: set \"bearerTokenEnv\" to a variable holding a token, \
             or an \"Authorization\" header, in the server's entry"
        )
    };
    if let Some(metadata) = metadata {
        message.push_str(&format!(" (the server advertises OAuth at {metadata})"));
    }
    Error::Http { status: Some(401), message }
}

/// A TLS failure (which no retry mends) as a person says it, when `err`
/// is one: a server that answers TLS with something else is likely plain
/// `http://`.
pub(super) fn tls_failure(err: &ureq::Error) -> Option<String> {
    let ureq::Error::Io(io) = err else { return None };
    use rustls::CertificateError as Refused;
    let tls = io.get_ref()?.downcast_ref::<rustls::Error>()?;
    let hint = match tls {
        rustls::Error::InvalidMessage(_) => " (does the server speak plain http://?)",
        rustls::Error::General(why) if why == crate::net::tls::SILENT_HANDSHAKE => {
            return Some(format!("{why} (does it speak plain http://?)"));
        }
        rustls::Error::InvalidCertificate(Refused::UnknownIssuer) => {
            " (no CA tether trusts signed it: name its CA in the entry's \"caFile\", or in \
             SSL_CERT_FILE or SSL_CERT_DIR)"
        }
        rustls::Error::InvalidCertificate(Refused::Other(other))
            if other.to_string().contains("CaUsedAsEndEntity") =>
        {
            return Some(
                "the TLS handshake failed: the server's certificate is a CA's, which TLS \
                 refuses as a server's own (a self-signed one made without CA:FALSE?); give \
                 the server a certificate its CA signed, and name that CA in \"caFile\""
                    .to_owned(),
            );
        }
        _ => "",
    };
    Some(format!("the TLS handshake failed: {tls}{hint}"))
}

/// True when `err` is a connection refused by this machine: nothing
/// listens at the port, and a retry a moment later would find the same.
pub(crate) fn refused_here(err: &ureq::Error, url: &str) -> bool {
    matches!(err, ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused)
        && crate::url::WebUrl::parse(url).is_some_and(|url| url.is_loopback())
}

/// A network failure as a person says it: "connection refused", not
/// "io: Connection refused (os error 111)".
pub(crate) fn network_words(err: &ureq::Error) -> String {
    if let Some(tls) = tls_failure(err) {
        return tls;
    }
    match err {
        ureq::Error::Io(io) => match io.kind() {
            std::io::ErrorKind::ConnectionRefused => {
                "connection refused (is the server running?)".into()
            }
            std::io::ErrorKind::ConnectionReset => "the connection was reset".into(),
            std::io::ErrorKind::TimedOut => "the connection timed out".into(),
            _ => {
                let text = io.to_string();
                match text.find(" (os error") {
                    Some(at) => text[..at].to_owned(),
                    None => text,
                }
            }
        },
        ureq::Error::HostNotFound => "no such host".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(status: u16, body: &str) -> String {
        match status_error(status, body.as_bytes()) {
            Error::Http { message, .. } => message,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_error_page_is_said_in_its_own_words_not_its_markup() {
        let nginx = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n\
                     <center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n\
                     </body>\r\n</html>\r\n";
        assert_eq!(said(502, nginx), "Bad Gateway");
        let titled = "<!DOCTYPE html><html><head><TITLE>Maintenance &amp; upgrades</TITLE>\
                      <style>body { color: red }</style></head><body>Back soon</body></html>";
        assert_eq!(said(503, titled), "Service Unavailable: Maintenance & upgrades");
        let untitled = "<html><head><script>var x = '<b>';</script><style>p {}</style></head>\
                        <body><p>Route&nbsp;not   found</p></body></html>";
        assert_eq!(said(404, untitled), "Not Found: Route not found");
        assert_eq!(said(500, "  boom\n  at line 3 "), "Internal Server Error: boom at line 3");
        assert_eq!(said(500, ""), "Internal Server Error");
        assert_eq!(said(599, "odd"), "error: odd");
        let long = "é".repeat(2000);
        let message = said(500, &long);
        assert!(message.ends_with('…') && message.len() < 1100, "{message}");
    }
}
