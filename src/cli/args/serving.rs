//! The commands that serve: `serve` and `proxy` (with their `--http`
//! companions), and kept-alive sessions: `sessions`, and the `_keeper`
//! and `_attach` that tether runs itself.

use std::path::PathBuf;
use std::time::Duration;

use lexopt::prelude::*;

use super::{number, Command};

/// `sessions [--json]`, `sessions end NAME... | --all`.
#[cfg(feature = "serve")]
pub(super) fn parse_sessions(parser: &mut lexopt::Parser) -> Result<Command, lexopt::Error> {
    let (mut end, mut names, mut all, mut json) = (false, Vec::new(), false, false);
    while let Some(arg) = parser.next()? {
        match arg {
            Long("json") if !end => json = true,
            Long("all") if end => all = true,
            Value(word) if !end && names.is_empty() && (word == "end" || word == "stop") => {
                end = true
            }
            Value(name) if end => names.push(name.string()?),
            _ => return Err(arg.unexpected()),
        }
    }
    if end && names.is_empty() != all {
        return Err("usage: tether sessions end NAME... | --all".into());
    }
    Ok(Command::Sessions { end, names, all, json })
}

/// `_keeper --socket PATH --idle S SERVER` and `_attach SOCKET`.
#[cfg(feature = "serve")]
pub(super) fn parse_internal(
    parser: &mut lexopt::Parser,
    word: &str,
) -> Result<Command, lexopt::Error> {
    let (mut socket, mut idle, mut server) = (None, None, None);
    while let Some(arg) = parser.next()? {
        match arg {
            Long("socket") => socket = Some(PathBuf::from(parser.value()?)),
            Long("idle") => idle = Some(Duration::from_secs(number(parser, "--idle", "seconds")?)),
            Value(value) if word == "_attach" && socket.is_none() => {
                socket = Some(PathBuf::from(value))
            }
            Value(value) if server.is_none() => server = Some(value.string()?),
            _ => return Err(arg.unexpected()),
        }
    }
    match (word, socket, idle, server) {
        ("_attach", Some(socket), None, None) => Ok(Command::Attach { socket }),
        ("_keeper", Some(socket), Some(idle), Some(server)) => {
            Ok(Command::Keeper { server, socket, idle })
        }
        _ => Err(format!("{word} is run by tether itself").into()),
    }
}

/// What `tether proxy` was given.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct ProxyArgs {
    pub(crate) url: String,
    /// `--header "K: V"`, repeatable; `${VAR}` expanded.
    pub(crate) headers: Vec<String>,
    /// `--transport http-first|sse-first|http-only|sse-only`.
    pub(crate) transport: Option<String>,
    pub(crate) allow_http: bool,
    pub(crate) callback_port: Option<u16>,
    pub(crate) callback_host: Option<String>,
    /// `--static-oauth-client-info JSON|@file`.
    pub(crate) client_info: Option<String>,
    pub(crate) auth_timeout: Option<Duration>,
    /// `--ignore-tool PATTERN`, repeatable (`*` matches any run).
    pub(crate) ignore_tools: Vec<String>,
    pub(crate) debug_log: Option<PathBuf>,
    /// `--resource URL`: the RFC 8707 resource to sign in for.
    pub(crate) resource: Option<String>,
    /// `--no-resource-param`: name no resource at all.
    pub(crate) no_resource: bool,
    pub(crate) check: bool,
    /// `--http ADDRESS` and its companions: serve over Streamable HTTP.
    pub(crate) http: HttpListen,
}

/// Serving over Streamable HTTP: `--http [HOST:]PORT`, `--token-env VAR`,
/// `--allow-origin ORIGIN` (repeatable).
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct HttpListen {
    /// Where to listen; `None`: serve on stdio.
    pub(crate) address: Option<String>,
    /// The environment variable holding the bearer token; none: one is made.
    pub(crate) token_env: Option<String>,
    pub(crate) origins: Vec<String>,
}

impl HttpListen {
    /// The flags' names.
    const FLAGS: [&'static str; 3] = ["http", "token-env", "allow-origin"];

    /// Takes flag `name`'s value.
    fn take(&mut self, name: &str, parser: &mut lexopt::Parser) -> Result<(), lexopt::Error> {
        let value = parser.value()?.string()?;
        match name {
            "http" => self.address = Some(value),
            "token-env" => self.token_env = Some(value),
            _ => self.origins.push(value),
        }
        Ok(())
    }

    /// The flags without `--http` say nothing; an address that is not
    /// `[HOST:]PORT` and an origin that is not `scheme://host[:port]` are
    /// bad usage, said before anything starts.
    fn check(&self) -> Result<(), lexopt::Error> {
        if self.address.is_none() && (self.token_env.is_some() || !self.origins.is_empty()) {
            return Err("--token-env and --allow-origin go with --http".into());
        }
        if let Some(address) = &self.address {
            let port = address.rsplit_once(':').map_or(address.as_str(), |(host, port)| {
                if host.is_empty() {
                    ""
                } else {
                    port
                }
            });
            if port.parse::<u16>().is_err() {
                return Err(format!("--http {address:?}: expected [HOST:]PORT").into());
            }
        }
        for origin in &self.origins {
            let rest = origin.strip_prefix("https://").or_else(|| origin.strip_prefix("http://"));
            if rest.is_none_or(|rest| rest.is_empty() || rest.contains(['/', '?', '#', ' '])) {
                return Err(format!(
                    "--allow-origin {origin:?}: expected an origin, such as https://app.example"
                )
                .into());
            }
        }
        Ok(())
    }
}

/// `serve [NAME...] [--status-tool] [--check] [--http ADDRESS ...]`.
pub(super) fn parse_serve(parser: &mut lexopt::Parser) -> Result<Command, lexopt::Error> {
    let (mut names, mut status_tool, mut check) = (Vec::new(), false, false);
    let mut http = HttpListen::default();
    while let Some(arg) = parser.next()? {
        if let Long(flag) = arg {
            if HttpListen::FLAGS.contains(&flag) {
                let flag = flag.to_owned();
                http.take(&flag, parser)?;
                continue;
            }
        }
        match arg {
            Long("status-tool") => status_tool = true,
            Long("check") => check = true,
            Value(name) => names.push(name.string()?),
            _ => return Err(arg.unexpected()),
        }
    }
    http.check()?;
    Ok(Command::Serve { names, status_tool, check, http })
}

/// `proxy URL [flags]`: mcp-remote's flags where tether has them.
pub(super) fn parse_proxy(parser: &mut lexopt::Parser) -> Result<Command, lexopt::Error> {
    let mut args = ProxyArgs::default();
    let mut url = None;
    while let Some(arg) = parser.next()? {
        if let Long(flag) = arg {
            if HttpListen::FLAGS.contains(&flag) {
                let flag = flag.to_owned();
                args.http.take(&flag, parser)?;
                continue;
            }
        }
        match arg {
            Long("header") => args.headers.push(parser.value()?.string()?),
            Long("transport") => args.transport = Some(parser.value()?.string()?),
            Long("allow-http") => args.allow_http = true,
            Long("callback-port") => {
                args.callback_port = Some(number(parser, "--callback-port", "a port number")?)
            }
            Long("callback-host") => args.callback_host = Some(parser.value()?.string()?),
            Long("static-oauth-client-info") => args.client_info = Some(parser.value()?.string()?),
            Long("auth-timeout") => {
                let seconds: u64 = number(parser, "--auth-timeout", "a number of seconds")?;
                args.auth_timeout = Some(Duration::from_secs(seconds.max(1)));
            }
            Long("ignore-tool") => args.ignore_tools.push(parser.value()?.string()?),
            Long("debug-log") => args.debug_log = Some(parser.value()?.into()),
            Long("resource") => args.resource = Some(parser.value()?.string()?),
            Long("no-resource-param") => args.no_resource = true,
            Long("check") => args.check = true,
            Value(word) if url.is_none() => url = Some(word.string()?),
            _ => return Err(arg.unexpected()),
        }
    }
    args.url = url.ok_or("usage: tether proxy URL [flags] (see tether proxy --help)")?;
    args.http.check()?;
    Ok(Command::Proxy(Box::new(args)))
}
