//! What a Streamable HTTP POST's response means, decided apart from what
//! is done about it (rmcp's `StreamableHttpPostResponse` is the model).
//!
//! [`classify`] is pure: from the status, the headers and what the request
//! was, it says which of a few things happened. `post_streamable` then
//! acts on that in one short match, where the order of the arms is the
//! policy (hand-offs first, then renewal, the old transport, sign-in).

use ureq::http::Response;
use ureq::Body;

use super::wire::is_transient;
use crate::auth::Challenge;
use crate::url::origin_of;

/// What was sent, as far as the meaning of its answer depends on it.
#[derive(Clone, Copy)]
pub(super) struct Sent {
    /// It carried a session id.
    pub(super) in_session: bool,
    /// It was `initialize`.
    pub(super) initialize: bool,
    /// The transport is not known yet (no POST has been answered with a 2xx).
    pub(super) undecided: bool,
    /// It was a request (not a notification or a response) to a stateless
    /// server, which refuses with a JSON-RPC error in the body.
    pub(super) stateless_request: bool,
}

/// What a response to a POST means.
pub(super) enum Outcome {
    /// 2xx: the answer (or the acceptance of what is not a request).
    Ok,
    /// 307 or 308: the request moved, to this URL (resolved against the
    /// one it was sent to) when the server said where.
    Moved(Option<String>),
    /// 404 to what was sent in a session: the session is over (a stateless
    /// request's 404 is then that server's refusal, once renewed).
    SessionGone,
    /// 400, 404 or 405 to the first `initialize`: perhaps the 2024-11-05
    /// HTTP+SSE transport, unless the body is a JSON-RPC error.
    OldTransport,
    /// 401, or 403 asking for more scope: the server wants (another) sign-in.
    WantsSignIn { status: u16, challenge: Challenge },
    /// A stateless server's 4xx to a request: its JSON-RPC error is in
    /// the body.
    Refused,
    /// 408, 429 or a 5xx: worth sending again, where that is safe.
    Transient,
    /// Anything else: an error to say.
    Failed,
}

/// What `response` to a POST sent to `url` means.
pub(super) fn classify(response: &Response<Body>, url: &str, sent: Sent) -> Outcome {
    let header = |name: &str| response.headers().get(name).and_then(|value| value.to_str().ok());
    match response.status().as_u16() {
        307 | 308 => Outcome::Moved(header("location").map(|location| resolve(url, location))),
        200..=299 => Outcome::Ok,
        404 if sent.in_session && !sent.initialize => Outcome::SessionGone,
        400 | 404 | 405 if sent.initialize && sent.undecided => Outcome::OldTransport,
        status @ (401 | 403) => {
            let challenge = Challenge::parse(header("www-authenticate").unwrap_or(""));
            if status == 401 || challenge.is_insufficient_scope() {
                Outcome::WantsSignIn { status, challenge }
            } else if sent.stateless_request {
                Outcome::Refused
            } else {
                Outcome::Failed
            }
        }
        status if is_transient(status) && !sent.stateless_request => Outcome::Transient,
        // Statelessly a request the server saw is sent again only under a
        // new id, by the client.
        status if is_transient(status) => Outcome::Failed,
        400..=499 if sent.stateless_request => Outcome::Refused,
        _ => Outcome::Failed,
    }
}

/// `location` (absolute, or a path) as an absolute URL next to `base`.
pub(super) fn resolve(base: &str, location: &str) -> String {
    if location.contains("://") {
        return location.to_owned();
    }
    let origin = origin_of(base).unwrap_or_default();
    if location.starts_with('/') {
        format!("{origin}{location}")
    } else {
        let path = base.split(['?', '#']).next().unwrap_or(base);
        format!("{}{location}", &path[..path.rfind('/').map_or(path.len(), |at| at + 1)])
    }
}
