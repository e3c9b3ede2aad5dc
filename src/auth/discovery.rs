//! Finding the authorization server: the protected resource metadata
//! (RFC 9728) and its `resource` check, then the authorization server's
//! metadata (RFC 8414, OpenID discovery) in the order the MCP specification
//! gives, and the 2025-03-26 fallback to the MCP server's own origin.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::web::{check_url, Web};
use crate::error::Error;
use crate::url::{origin_of, redact_url};

/// What discovery found: the resource to name, and where to sign in.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Discovered {
    /// The `resource` of authorization and token requests (RFC 8707).
    pub(super) resource: String,
    /// The protected resource's `scopes_supported`.
    pub(super) scopes_supported: Vec<String>,
    pub(super) server: AuthServer,
}

/// An authorization server, from its metadata or the 2025-03-26 defaults.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct AuthServer {
    pub(super) issuer: String,
    pub(super) authorization_endpoint: String,
    pub(super) token_endpoint: String,
    pub(super) registration_endpoint: Option<String>,
    pub(super) scopes_supported: Vec<String>,
    /// `None` when there is no metadata document (the defaults apply).
    pub(super) code_challenge_methods: Option<Vec<String>>,
    pub(super) token_auth_methods: Vec<String>,
    pub(super) client_id_metadata_documents: bool,
    pub(super) iss_parameter: bool,
}

/// Discovers where `server_url` is signed in to. `metadata_hint` is the
/// challenge's `resource_metadata`; `as_metadata_url` an authorization
/// server metadata URL configured in place of discovery.
///
/// # Errors
/// [`Error::Auth`] when the resource metadata names another resource, or the
/// authorization server cannot be found or does not do PKCE with S256.
pub(super) fn discover(
    web: &Web,
    server_url: &str,
    metadata_hint: Option<&str>,
    as_metadata_url: Option<&str>,
) -> Result<Discovered, Error> {
    let origin = origin_of(server_url)
        .ok_or_else(|| Error::Auth(format!("{} has no origin", redact_url(server_url))))?;
    let resource_metadata = fetch_first(web, &resource_metadata_urls(server_url, metadata_hint));
    let (resource, scopes_supported, issuer) = match &resource_metadata {
        Some(document) => {
            let resource = document.get("resource").and_then(Value::as_str).ok_or_else(|| {
                Error::Auth(
                    "the server's resource metadata names no resource; not signing in".into(),
                )
            })?;
            if !resource_matches(resource, server_url) {
                return Err(Error::Auth(format!(
                    "the server's metadata names the resource {}, not {}; not signing in",
                    redact_url(resource),
                    redact_url(server_url)
                )));
            }
            let issuer = document
                .get("authorization_servers")
                .and_then(Value::as_array)
                .and_then(|servers| servers.first())
                .and_then(Value::as_str)
                .unwrap_or(&origin)
                .to_owned();
            (resource.to_owned(), strings(document, "scopes_supported"), issuer)
        }
        // 2025-03-26: no resource metadata; the MCP server's origin is the
        // authorization server.
        None => (without_fragment(server_url), Vec::new(), origin.clone()),
    };
    let metadata_urls = match as_metadata_url {
        Some(url) => vec![url.to_owned()],
        None => auth_server_metadata_urls(&issuer),
    };
    let server = match fetch_first(web, &metadata_urls) {
        // The issuer is held to the one named by the resource metadata; a
        // configured metadata URL, or a 2025-03-26 server's own origin,
        // names no issuer to hold it to.
        Some(document) => from_metadata(
            &document,
            &issuer,
            as_metadata_url.is_some() || resource_metadata.is_none(),
        )?,
        None if resource_metadata.is_none() => legacy_defaults(&origin),
        None => {
            return Err(Error::Auth(format!(
                "the authorization server {} publishes no metadata",
                redact_url(&issuer)
            )))
        }
    };
    if let Some(methods) = &server.code_challenge_methods {
        if !methods.iter().any(|method| method == "S256") {
            return Err(Error::Auth(format!(
                "the authorization server {} does not offer PKCE with S256; not signing in",
                redact_url(&server.issuer)
            )));
        }
    }
    Ok(Discovered { resource, scopes_supported, server })
}

/// True when the server publishes protected resource metadata (it signs
/// in with OAuth even if it did not ask yet).
pub(super) fn offers_sign_in(web: &Web, server_url: &str) -> bool {
    fetch_first(web, &resource_metadata_urls(server_url, None)).is_some()
}

/// The challenge's metadata URL, then the path-inserted well-known URI,
/// then the root one.
fn resource_metadata_urls(server_url: &str, hint: Option<&str>) -> Vec<String> {
    let mut urls: Vec<String> = hint.map(str::to_owned).into_iter().collect();
    if let Some(origin) = origin_of(server_url) {
        let path = path_of(server_url);
        if !path.is_empty() {
            urls.push(format!("{origin}/.well-known/oauth-protected-resource{path}"));
        }
        urls.push(format!("{origin}/.well-known/oauth-protected-resource"));
    }
    urls
}

/// RFC 8414 and OpenID discovery, in the MCP specification's order; an
/// issuer with a path never gets the root documents.
fn auth_server_metadata_urls(issuer: &str) -> Vec<String> {
    let Some(origin) = origin_of(issuer) else { return Vec::new() };
    let path = path_of(issuer);
    if path.is_empty() {
        return vec![
            format!("{origin}/.well-known/oauth-authorization-server"),
            format!("{origin}/.well-known/openid-configuration"),
        ];
    }
    vec![
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{origin}/.well-known/openid-configuration{path}"),
        format!("{origin}{path}/.well-known/openid-configuration"),
    ]
}

/// The first URL that answers 200 with a JSON object.
fn fetch_first(web: &Web, urls: &[String]) -> Option<Value> {
    urls.iter().find_map(|url| match web.get(url) {
        Ok(answer) if answer.is_success() && answer.body.is_object() => Some(answer.body),
        Ok(answer) => {
            log::debug!("{}: HTTP {}", redact_url(url), answer.status);
            None
        }
        Err(err) => {
            log::debug!("{err}");
            None
        }
    })
}

/// An authorization server from its metadata: its `issuer` must be the one
/// the metadata was looked up for (RFC 8414 §3.3) unless `any_issuer`, and
/// every endpoint must be https (or loopback http).
fn from_metadata(document: &Value, issuer: &str, any_issuer: bool) -> Result<AuthServer, Error> {
    let text = |name: &str| document.get(name).and_then(Value::as_str).map(str::to_owned);
    let named = text("issuer");
    let same = |a: &str, b: &str| a.trim_end_matches('/') == b.trim_end_matches('/');
    if let (Some(named), false) = (&named, any_issuer) {
        if !same(named, issuer) {
            return Err(Error::Auth(format!(
                "the metadata found for {} names the issuer {}; not signing in",
                redact_url(issuer),
                redact_url(named)
            )));
        }
    }
    let issuer = named.unwrap_or_else(|| issuer.to_owned());
    let endpoint = |name: &str| {
        let url = text(name).ok_or_else(|| {
            Error::Auth(format!("the metadata of {} has no {name}", redact_url(&issuer)))
        })?;
        check_url(&url)?;
        Ok::<String, Error>(url)
    };
    let registration_endpoint = match text("registration_endpoint") {
        Some(url) => Some(endpoint("registration_endpoint").map(|_| url)?),
        None => None,
    };
    Ok(AuthServer {
        authorization_endpoint: endpoint("authorization_endpoint")?,
        token_endpoint: endpoint("token_endpoint")?,
        registration_endpoint,
        scopes_supported: strings(document, "scopes_supported"),
        code_challenge_methods: Some(strings(document, "code_challenge_methods_supported")),
        token_auth_methods: strings(document, "token_endpoint_auth_methods_supported"),
        client_id_metadata_documents: document
            .get("client_id_metadata_document_supported")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        iss_parameter: document
            .get("authorization_response_iss_parameter_supported")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        issuer,
    })
}

/// 2025-03-26 with no metadata at all: the default endpoints at the MCP
/// server's origin.
fn legacy_defaults(origin: &str) -> AuthServer {
    AuthServer {
        issuer: origin.to_owned(),
        authorization_endpoint: format!("{origin}/authorize"),
        token_endpoint: format!("{origin}/token"),
        registration_endpoint: Some(format!("{origin}/register")),
        scopes_supported: Vec::new(),
        code_challenge_methods: None,
        token_auth_methods: Vec::new(),
        client_id_metadata_documents: false,
        iss_parameter: false,
    }
}

/// Same origin, and the resource's path a prefix of the server's path.
fn resource_matches(resource: &str, server_url: &str) -> bool {
    if origin_of(resource).is_none() || origin_of(resource) != origin_of(server_url) {
        return false;
    }
    let (resource_path, server_path) = (path_of(resource), path_of(server_url));
    resource_path.is_empty()
        || server_path == resource_path
        || server_path.starts_with(&format!("{resource_path}/"))
}

/// The path of a URL without query, fragment or trailing slash (`""` for
/// the root).
fn path_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let rest = rest.split(['?', '#']).next().unwrap_or(rest);
    let path = rest.find('/').map_or("", |at| &rest[at..]);
    path.trim_end_matches('/').to_owned()
}

fn without_fragment(url: &str) -> String {
    url.split('#').next().unwrap_or(url).to_owned()
}

fn strings(document: &Value, name: &str) -> Vec<String> {
    document
        .get(name)
        .and_then(Value::as_array)
        .map(|items| items.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_metadata_is_looked_for_in_order() {
        assert_eq!(
            resource_metadata_urls("https://a.example/mcp", Some("https://a.example/custom.json")),
            [
                "https://a.example/custom.json",
                "https://a.example/.well-known/oauth-protected-resource/mcp",
                "https://a.example/.well-known/oauth-protected-resource",
            ]
        );
        assert_eq!(
            resource_metadata_urls("http://localhost:5/", None),
            ["http://localhost:5/.well-known/oauth-protected-resource"]
        );
    }

    #[test]
    fn an_issuer_with_a_path_never_gets_the_root_documents() {
        assert_eq!(
            auth_server_metadata_urls("https://as.example"),
            [
                "https://as.example/.well-known/oauth-authorization-server",
                "https://as.example/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            auth_server_metadata_urls("https://as.example/tenant1/"),
            [
                "https://as.example/.well-known/oauth-authorization-server/tenant1",
                "https://as.example/.well-known/openid-configuration/tenant1",
                "https://as.example/tenant1/.well-known/openid-configuration",
            ]
        );
    }

    #[test]
    fn the_resource_must_be_this_server() {
        assert!(resource_matches("https://a.example/mcp", "https://a.example/mcp"));
        assert!(resource_matches("https://a.example", "https://a.example/mcp"));
        assert!(resource_matches("https://a.example/", "https://a.example/mcp"));
        assert!(resource_matches("https://a.example:443/mcp", "https://a.example/mcp/"));
        assert!(!resource_matches("https://evil.example.com/mcp", "https://a.example/mcp"));
        assert!(!resource_matches("https://a.example/mcp2", "https://a.example/mcp"));
        assert!(!resource_matches("https://a.example/other", "https://a.example/mcp"));
        assert!(!resource_matches("not a url", "https://a.example/mcp"));
    }
}
