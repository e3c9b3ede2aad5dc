//! The few HTTP exchanges a sign-in needs with an authorization server:
//! metadata GETs, form and JSON POSTs. Every request times out after 15 s,
//! follows no redirect, and goes only to `https` URLs or `http` on loopback
//! (a sign-in never sends a secret in the clear over a network).

use std::time::Duration;

use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde_json::Value;

use crate::error::Error;
use crate::url::redact_url;

/// Every request to an authorization server ends within this.
const TIMEOUT: Duration = Duration::from_secs(15);
/// The most of a metadata or token answer that is read.
const MAX_ANSWER: u64 = 1024 * 1024;

/// What form and query values escape: everything but RFC 3986's unreserved.
const ESCAPED: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// An HTTP client for authorization servers.
pub(super) struct Web {
    agent: ureq::Agent,
}

/// An answer: its status and its body as JSON (`Null` when it is not JSON).
pub(super) struct Answer {
    pub(super) status: u16,
    pub(super) body: Value,
}

impl Answer {
    pub(super) fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// A string field of the body.
    pub(super) fn field(&self, name: &str) -> Option<&str> {
        self.body.get(name).and_then(Value::as_str)
    }
}

impl Web {
    /// The authorization server is reached as the MCP server is: through
    /// the environment's proxy, trusting the same CAs (a CA file that cannot
    /// be read already failed the server's own connection).
    pub(super) fn new(ca_file: Option<&std::path::Path>) -> Web {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .timeout_global(Some(TIMEOUT))
            .user_agent(format!("tether/{}", env!("CARGO_PKG_VERSION")))
            .build();
        let extra = crate::net::tls::extra_roots(ca_file).unwrap_or_default();
        let connector = crate::net::tls::connector_with(extra);
        let resolver = ureq::unversioned::resolver::DefaultResolver::default();
        Web { agent: ureq::Agent::with_parts(config, connector, resolver) }
    }

    /// GETs a JSON document.
    pub(super) fn get(&self, url: &str) -> Result<Answer, Error> {
        check_url(url)?;
        let response = self.agent.get(url).header("Accept", "application/json").call();
        answer(url, response)
    }

    /// POSTs a form, with HTTP Basic credentials when given.
    pub(super) fn post_form(
        &self,
        url: &str,
        form: &[(&str, &str)],
        basic: Option<(&str, &str)>,
    ) -> Result<Answer, Error> {
        check_url(url)?;
        let mut request = self
            .agent
            .post(url)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .header("Accept", "application/json");
        if let Some((user, password)) = basic {
            // RFC 6749 §2.3.1: both parts form-encoded before base64.
            let pair = format!("{}:{}", encode(user), encode(password));
            request = request.header("Authorization", format!("Basic {}", base64_standard(&pair)));
        }
        answer(url, request.send(encode_form(form).as_bytes()))
    }

    /// POSTs a JSON-RPC message to an MCP endpoint; returns the status and
    /// the `WWW-Authenticate` header.
    pub(super) fn post_mcp(&self, url: &str, body: &Value) -> Result<(u16, Option<String>), Error> {
        let response = self
            .agent
            .post(url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .send(body.to_string().as_bytes())
            .map_err(|err| Error::Auth(format!("cannot reach {}: {err}", redact_url(url))))?;
        let challenge = response
            .headers()
            .get("www-authenticate")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        Ok((response.status().as_u16(), challenge))
    }

    /// POSTs a JSON document.
    pub(super) fn post_json(&self, url: &str, body: &Value) -> Result<Answer, Error> {
        check_url(url)?;
        let response = self
            .agent
            .post(url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json")
            .send(body.to_string().as_bytes());
        answer(url, response)
    }
}

fn answer(
    url: &str,
    response: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
) -> Result<Answer, Error> {
    let mut response =
        response.map_err(|err| Error::Auth(format!("cannot reach {}: {err}", redact_url(url))))?;
    let status = response.status().as_u16();
    let text = response.body_mut().with_config().limit(MAX_ANSWER).read_to_string();
    let body = text
        .ok()
        .and_then(|text| serde_json::from_slice(text.as_bytes()).ok())
        .unwrap_or(Value::Null);
    Ok(Answer { status, body })
}

/// Only `https`, or `http` to a loopback host, as a browser reads the URL.
pub(super) fn check_url(url: &str) -> Result<(), Error> {
    if crate::url::is_https_or_loopback_http(url) {
        return Ok(());
    }
    Err(Error::Auth(format!(
        "{} is neither https nor http on this machine; tether sends sign-in requests nowhere else",
        redact_url(url)
    )))
}

/// One value, escaped for a form or a query.
pub(super) fn encode(value: &str) -> String {
    utf8_percent_encode(value, ESCAPED).to_string()
}

/// `a=1&b=2`, escaped.
pub(super) fn encode_form(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        // An empty `resource` is one the host chose not to name.
        .filter(|(name, value)| !(*name == "resource" && value.is_empty()))
        .map(|(name, value)| format!("{}={}", encode(name), encode(value)))
        .collect::<Vec<_>>()
        .join("&")
}

/// The query parameters of a URL, decoded (`+` is a space).
pub(super) fn query_pairs(url: &str) -> Vec<(String, String)> {
    let query = url.split_once('?').map_or("", |(_, query)| query);
    let query = query.split('#').next().unwrap_or("");
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let decode =
                |text: &str| percent_decode_str(&text.replace('+', " ")).decode_utf8_lossy().into();
            (decode(name), decode(value))
        })
        .collect()
}

/// `url` with these query parameters added.
pub(super) fn with_query(url: &str, pairs: &[(&str, &str)]) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}{}", encode_form(pairs))
}

fn base64_standard(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// Unpadded base64url, as PKCE and JWTs use it.
pub(super) fn base64_url(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_or_loopback_http() {
        assert!(check_url("https://as.example/token").is_ok());
        assert!(check_url("http://127.0.0.1:9/token").is_ok());
        assert!(check_url("http://localhost/x").is_ok());
        assert!(check_url("http://[::1]:8080/x").is_ok());
        assert!(check_url("http://as.example/token").is_err());
        assert!(check_url("http://localhost.evil.example/x").is_err());
        assert!(check_url("http://127.0.0.1.evil.example/x").is_err());
        assert!(check_url("http://127.1.2.3:80/x").is_ok());
        assert!(check_url("ftp://127.0.0.1/x").is_err());
    }

    #[test]
    fn forms_and_queries_round_trip() {
        let form = encode_form(&[("redirect_uri", "http://127.0.0.1:5/cb?x=1"), ("scope", "a b")]);
        assert_eq!(form, "redirect_uri=http%3A%2F%2F127.0.0.1%3A5%2Fcb%3Fx%3D1&scope=a%20b");
        let url = with_query("http://h/cb", &[("code", "a/b+c"), ("state", "s t")]);
        assert_eq!(
            query_pairs(&url),
            [("code".to_owned(), "a/b+c".to_owned()), ("state".to_owned(), "s t".to_owned())]
        );
        assert_eq!(query_pairs("http://h/cb?code=x+y#frag"), [("code".into(), "x y".into())]);
    }
}
