//! A client for the official MCP conformance suite, on tether's public API.
//!
//! The suite runs `conformance <server-url>` once per scenario, with the
//! scenario's name in `MCP_CONFORMANCE_SCENARIO` and, for some, credentials
//! in `MCP_CONFORMANCE_CONTEXT`. Everything the suite grades (the session,
//! discovery, registration, PKCE, tokens, step-up) is the library's; this
//! program only picks the settings and handlers a host would: the client
//! credentials it was given, a Client ID Metadata Document URL, an
//! authorization handler that reads the redirect instead of opening a
//! browser, and a host that accepts elicitations with their defaults.
//!
//! Exit 0 when the scenario's work was done, 1 with the error otherwise.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};
use tether::{
    AuthorizationHandler, CallOptions, Client, ClientOptions, EnterpriseIdentity, Error, Host,
    HttpKind, HttpTarget, OAuthSettings, RpcError, Transport,
};

/// The Client ID Metadata Document URL the suite expects.
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";
/// Where the authorization server is told to redirect; nothing listens.
const REDIRECT_URI: &str = "http://localhost:3000/callback";

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let Some(url) = std::env::args().next_back().filter(|arg| arg.contains("://")) else {
        eprintln!("usage: conformance SERVER_URL (with MCP_CONFORMANCE_SCENARIO set)");
        return ExitCode::from(2);
    };
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or(Value::Null);
    match run(&url, &scenario, &context) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            let mut source = std::error::Error::source(&err);
            while let Some(cause) = source {
                eprintln!("  caused by: {cause}");
                source = cause.source();
            }
            ExitCode::from(1)
        }
    }
}

fn run(url: &str, scenario: &str, context: &Value) -> Result<(), Error> {
    let text = |name: &str| context.get(name).and_then(Value::as_str);
    let mut oauth = OAuthSettings::default().with_client_metadata_url(CLIENT_METADATA_URL);
    if let Some(id) = text("client_id") {
        oauth = oauth.with_client(id, text("client_secret"));
    }
    if let (Some(endpoint), Some(client_id), Some(id_token)) =
        (text("idp_token_endpoint"), text("idp_client_id"), text("idp_id_token"))
    {
        oauth =
            oauth.with_enterprise_identity(EnterpriseIdentity::new(endpoint, client_id, id_token));
    }
    if scenario.starts_with("auth/client-credentials") {
        oauth = oauth.with_client_credentials();
        if let Some(pem) = text("private_key_pem") {
            oauth = oauth.with_private_key_pem(pem);
        }
    }
    let target = HttpTarget::new(url, HttpKind::Streamable)
        .with_oauth(oauth)
        .with_authorization_handler(Arc::new(ReadTheRedirect::new()));
    let options = ClientOptions::default()
        .with_request_timeout(Duration::from_secs(20))
        .with_host(Arc::new(AcceptWithDefaults));
    let client = Client::connect("conformance", &Transport::Http(target), options)?;
    let tools = client.list_tools(&CallOptions::default())?;
    let has = |name: &str| tools.iter().any(|tool| tool.name == name);
    let call = |name: &str, arguments: Value| -> Result<(), Error> {
        let result = client.call_tool(name, arguments, &CallOptions::default())?;
        println!("{name}: {}", result.to_text());
        Ok(())
    };
    for (tool, arguments) in [
        ("add_numbers", json!({"a": 2, "b": 3})),
        ("test_client_elicitation_defaults", json!({})),
        ("test_reconnection", json!({})),
        ("test-tool", json!({})),
    ] {
        if has(tool) {
            call(tool, arguments)?;
        }
    }
    client.close()
}

/// Has the authorization server answer the authorization request, and
/// reads its redirect instead of following it (the suite's authorization
/// server redirects at once; nothing listens at the redirect URI).
struct ReadTheRedirect {
    agent: ureq::Agent,
}

impl ReadTheRedirect {
    fn new() -> ReadTheRedirect {
        let config = ureq::Agent::config_builder()
            .max_redirects(0)
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(15)))
            .build();
        ReadTheRedirect { agent: config.into() }
    }
}

impl AuthorizationHandler for ReadTheRedirect {
    fn redirect_uri(&self) -> String {
        REDIRECT_URI.to_owned()
    }

    fn authorize(&self, url: &str) -> Result<String, Error> {
        let response = self
            .agent
            .get(url)
            .call()
            .map_err(|err| Error::Auth(format!("the authorization request failed: {err}")))?;
        response
            .headers()
            .get("location")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
            .ok_or_else(|| {
                Error::Auth(format!(
                    "the authorization server answered {} without a redirect",
                    response.status()
                ))
            })
    }
}

/// Accepts every elicitation, filling in the defaults its schema gives.
struct AcceptWithDefaults;

impl Host for AcceptWithDefaults {
    fn handles_elicitation(&self) -> bool {
        true
    }

    fn elicit(&self, _server: &str, params: &Value) -> Result<Value, RpcError> {
        let mut content = Map::new();
        if let Some(properties) =
            params.pointer("/requestedSchema/properties").and_then(Value::as_object)
        {
            for (name, schema) in properties {
                if let Some(default) = schema.get("default") {
                    content.insert(name.clone(), default.clone());
                }
            }
        }
        Ok(json!({"action": "accept", "content": content}))
    }
}
