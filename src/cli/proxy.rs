//! `tether proxy URL`: a remote server as a local stdio one, for clients
//! that start servers as commands, with `mcp-remote`'s flags where they
//! are sane. The server is an entry made from the flags (never written),
//! served alone with its own names; a sign-in it needs runs in the
//! background with the browser, while the client's `initialize` is
//! answered at once and the tools are announced once the server connects.
//! The arguments are parsed in every build; the serving needs the `serve`
//! feature.
#![cfg_attr(not(feature = "serve"), allow(dead_code, unused_imports))]

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tether::{Config, Exposure, HttpKind, OAuthSettings, ServerConfig, TransportConfig};

use super::args::ProxyArgs;
use super::login::TerminalSignIn;
use super::output::EXIT_USAGE;
#[cfg(feature = "serve")]
use super::serve::serve_config;
use super::signals::SignalWatch;

/// How long a sign-in may take by default (mcp-remote's `--auth-timeout`).
const AUTH_TIMEOUT: Duration = Duration::from_secs(300);

#[cfg(feature = "serve")]
pub(super) fn proxy(
    args: &ProxyArgs,
    about_file: &std::path::Path,
    signals: &mut SignalWatch,
) -> u8 {
    let server = match entry(args) {
        Ok(server) => server,
        Err(message) => {
            errln!("{message}");
            return EXIT_USAGE;
        }
    };
    let name = server.name.clone();
    let settings = match &server.transport {
        TransportConfig::Http(http) => http.oauth.as_deref().cloned().unwrap_or_default(),
        _ => OAuthSettings::default(),
    };
    let wait = args.auth_timeout.unwrap_or(AUTH_TIMEOUT);
    let config = Config::new().with_server(server);
    let sign_in = TerminalSignIn::new(&config).with(settings, wait);
    let hub_options = signals.options.clone().with_authorization_handler(Arc::new(sign_in));
    let options = tether::ServeOptions::default().with_about_file(about_file);
    serve_config(config, hub_options, Some(&name), options, args.check, &args.http, signals)
}

/// The entry the flags make.
fn entry(args: &ProxyArgs) -> Result<ServerConfig, String> {
    let name =
        url_name(&args.url).ok_or_else(|| format!("{:?} is not an http(s) URL", args.url))?;
    // Judged as a browser reads the URL, as every sign-in URL is.
    if !tether::for_cli::is_https_or_loopback_http(&args.url) && !args.allow_http {
        return Err(format!(
            "{} is plain http to another machine: tokens would cross the network readable; \
             use https, or pass --allow-http",
            args.url
        ));
    }
    let kind = match args.transport.as_deref() {
        None | Some("http-first") => HttpKind::Auto,
        Some("http-only") => HttpKind::Streamable,
        // tether falls back from Streamable HTTP to SSE, not the other way
        // round: SSE first is SSE.
        Some("sse-only" | "sse-first") => HttpKind::Sse,
        Some(other) => {
            return Err(format!(
                "--transport {other:?}: expected http-first, sse-first, http-only or sse-only"
            ))
        }
    };
    let mut server = ServerConfig::http(&name, &args.url, kind);
    // Time for a person's sign-in, which happens during the start.
    server.start_timeout = args.auth_timeout.unwrap_or(AUTH_TIMEOUT) + Duration::from_secs(30);
    server.tool_exposure =
        args.ignore_tools.iter().map(|pattern| (pattern.clone(), Exposure::Hidden)).collect();
    let mut settings = OAuthSettings::default();
    settings.callback_port = args.callback_port;
    if let Some(host) = &args.callback_host {
        let port = args.callback_port.ok_or("--callback-host needs --callback-port")?;
        settings.callback_url = Some(format!("http://{host}:{port}/callback"));
    }
    if args.resource.is_some() && args.no_resource {
        return Err("--resource and --no-resource-param do not go together".into());
    }
    settings.resource.clone_from(&args.resource);
    settings.omit_resource = args.no_resource;
    if let Some(info) = &args.client_info {
        let (id, secret) = client_info(info)?;
        settings.client_id = Some(id);
        settings.client_secret = secret;
    }
    if let TransportConfig::Http(http) = &mut server.transport {
        http.headers =
            args.headers.iter().map(|header| header_of(header)).collect::<Result<_, _>>()?;
        http.oauth = Some(Box::new(settings));
    }
    Ok(server)
}

/// The entry's name for a remote server's URL: its host (and port), `.`
/// and `:` made `-` (the token store keeps sign-ins by name and URL); an
/// IPv6 address begun `ipv6-`, each run of its colons one `-`. `None` for
/// a URL that is not http(s) or names no host. Shared with ad-hoc URLs.
pub(super) fn url_name(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    if !matches!(scheme.to_ascii_lowercase().as_str(), "https" | "http") {
        return None;
    }
    let authority = rest.split(['/', '\\', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    if host.is_empty() {
        return None;
    }
    let ipv6 = host.starts_with('[');
    let mut name = String::with_capacity(host.len() + 5);
    if ipv6 {
        name.push_str("ipv6-");
    }
    for c in host.chars() {
        if c.is_ascii_alphanumeric() {
            name.push(c.to_ascii_lowercase());
        } else if !(ipv6 && name.ends_with('-')) {
            name.push('-');
        }
    }
    let name: String = name.trim_matches('-').chars().take(48).collect();
    Some(if name.is_empty() { "remote".into() } else { name })
}

/// `"K: V"` (or `K:V`) with `${VAR}` expanded from the environment.
fn header_of(header: &str) -> Result<(String, String), String> {
    let (key, value) = header
        .split_once(':')
        .ok_or_else(|| format!("--header {header:?}: expected \"Name: value\""))?;
    let key = key.trim();
    if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b)) {
        return Err(format!("--header {header:?}: {key:?} is not a header name"));
    }
    Ok((key.to_owned(), expand(value.trim())?))
}

/// `${VAR}` from the environment; an unset variable is an error.
fn expand(value: &str) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').ok_or_else(|| format!("{value:?}: a ${{ without its }}"))?;
        let name = &after[..end];
        let found = std::env::var(name)
            .map_err(|_| format!("--header names ${{{name}}}, which is not set"))?;
        out.push_str(&found);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// `--static-oauth-client-info`: JSON, or `@file` holding it, with
/// `client_id` and maybe `client_secret`.
fn client_info(given: &str) -> Result<(String, Option<String>), String> {
    let text = match given.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|err| format!("--static-oauth-client-info: cannot read {path}: {err}"))?,
        None => given.to_owned(),
    };
    let info: Value = serde_json::from_slice(text.as_bytes())
        .map_err(|err| format!("--static-oauth-client-info is not JSON: {err}"))?;
    let id = info
        .get("client_id")
        .and_then(Value::as_str)
        .ok_or("--static-oauth-client-info has no \"client_id\"")?;
    let secret = info.get("client_secret").and_then(Value::as_str).map(str::to_owned);
    Ok((id.to_owned(), secret))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_made_from_the_flags() {
        let args = ProxyArgs {
            url: "https://mcp.example.com/mcp".into(),
            headers: vec!["X-Team: ${HOME}".into()],
            transport: Some("http-only".into()),
            callback_port: Some(3334),
            client_info: Some(r#"{"client_id": "abc", "client_secret": "s"}"#.into()),
            ignore_tools: vec!["delete_*".into()],
            ..ProxyArgs::default()
        };
        let server = entry(&args).unwrap();
        assert_eq!(server.name, "mcp-example-com");
        let TransportConfig::Http(http) = &server.transport else { panic!("http") };
        assert_eq!(http.kind, HttpKind::Streamable);
        assert_eq!(http.headers[0].0, "X-Team");
        assert_eq!(http.headers[0].1, std::env::var("HOME").unwrap());
        let oauth = http.oauth.as_deref().unwrap();
        assert_eq!(oauth.client_id.as_deref(), Some("abc"));
        assert_eq!(oauth.callback_port, Some(3334));
        assert_eq!(server.tool_exposure, [("delete_*".to_owned(), Exposure::Hidden)]);

        let plain = ProxyArgs { url: "http://mcp.example.com/mcp".into(), ..ProxyArgs::default() };
        assert!(entry(&plain).unwrap_err().contains("--allow-http"));
        let local = ProxyArgs { url: "http://127.0.0.1:9/mcp".into(), ..ProxyArgs::default() };
        assert!(entry(&local).is_ok());
        let unset = ProxyArgs {
            url: "https://a.example/mcp".into(),
            headers: vec!["Authorization: Bearer ${TETHER_SURELY_UNSET_VAR}".into()],
            ..ProxyArgs::default()
        };
        assert!(entry(&unset).unwrap_err().contains("not set"));
    }
}
