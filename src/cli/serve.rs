//! `tether serve`: the configured servers (or the named ones) served as one
//! MCP server on stdin and stdout (or over Streamable HTTP with `--http`),
//! through the library's `Downstream`; and the serving `tether proxy`
//! shares.
//!
//! stdout carries the protocol alone, so nothing here writes to it but the
//! serving (and `--check`, which serves nothing); the HTTP address and
//! token are said on stderr. The hub starts in the background, so the
//! client's `initialize` is answered at once; the signal watch ends every
//! server on SIGINT, SIGTERM or SIGHUP, and the end of stdin ends a stdio
//! serving.

use std::io;
use std::net::TcpListener;
use std::time::{Duration, Instant};

use tether::{Config, Downstream, Exposure, HubOptions, NameStyle, ServeOptions, ServerState};

use super::args::HttpListen;
use super::output::{report, EXIT_OK, EXIT_SERVER, EXIT_TOOL_ERROR, EXIT_USAGE};
use super::signals::SignalWatch;
use super::starting::only_server;
use super::{output, status};

/// How long the servers may take to close once the client in front went
/// away, or a signal came. The issue gives the whole end half a second:
/// the requests' grace comes before it, and an orphaned supervisor's 0.3 s
/// grace after it for a server that ignores its input's end and SIGTERM.
const CLOSE_AFTER_CLIENT: Duration = Duration::from_millis(100);

pub(super) fn serve(
    mut config: Config,
    (names, about_file): (&[String], &std::path::Path),
    status_tool: bool,
    check: bool,
    http: &HttpListen,
    signals: &mut SignalWatch,
) -> u8 {
    // A name that is unknown, invalid, untrusted or disabled is said, as
    // every command that names a server says it.
    for name in names {
        if let Err(code) = only_server(&config, name) {
            return code;
        }
    }
    if !names.is_empty() {
        config
            .servers
            .retain(|server| names.iter().any(|name| Config::same_name(&server.name, name)));
        // Nor are the others' faults this serving's.
        config.failed.clear();
        config.untrusted.clear();
    }
    let only = match names {
        [one] => Some(one.as_str()),
        _ => None,
    };
    let options = ServeOptions::default().with_status_tool(status_tool).with_about_file(about_file);
    serve_config(config, signals.options.clone(), only, options, check, http, signals)
}

/// Serves `config`'s servers (`only`: that one with its own names), or with
/// `check` starts them, says how each is, and exits.
pub(super) fn serve_config(
    config: Config,
    hub_options: HubOptions,
    only: Option<&str>,
    mut options: ServeOptions,
    check: bool,
    http: &HttpListen,
    signals: &mut SignalWatch,
) -> u8 {
    if check {
        // With these options (a proxy's sign-in handler), waiting for each
        // server at most its start timeout.
        let hub = signals.start_hub_now(config, hub_options);
        hub.wait_started();
        let mut statuses = hub.status();
        // The tools as served: a hidden one (`--ignore-tool`) is not.
        let hidden: Vec<(String, String)> = hub
            .tools()
            .into_iter()
            .filter(|tool| tool.exposure == Exposure::Hidden)
            .map(|tool| (tool.server, tool.tool.name))
            .collect();
        for status in &mut statuses {
            status.tools.retain(|tool| {
                !hidden.iter().any(|(server, name)| *server == status.name && name == tool)
            });
        }
        if statuses.is_empty() {
            eprintln!("no servers are configured: there is nothing to serve");
        }
        output::emit(&status::render_list(&statuses));
        let all = statuses
            .iter()
            .all(|status| matches!(status.state, ServerState::Ready | ServerState::Disabled));
        return if all { EXIT_OK } else { EXIT_TOOL_ERROR };
    }
    // One server keeps its own names; many are SERVER__TOOL.
    let style = match only {
        Some(server) => {
            options = options.with_passthrough(server);
            NameStyle::Prefixed
        }
        None => NameStyle::Short,
    };
    // Over HTTP the port is taken before any server starts: a busy one
    // is said at once.
    let listener = match &http.address {
        Some(address) => match listen(address, http, &mut options) {
            Ok(listener) => Some(listener),
            Err(code) => return code,
        },
        None => None,
    };
    // What cannot be served is warned of as the serving learns it; an
    // empty configuration is said here, or the client would only see no
    // tools.
    if config.servers.is_empty() && config.failed.is_empty() && config.untrusted.is_empty() {
        log::warn!("no servers are configured: serving none");
    }
    let downstream = Downstream::new();
    let hub_options = hub_options.with_host(downstream.host()).with_name_style(style);
    signals.close_within_on_signal(CLOSE_AFTER_CLIENT);
    let hub = signals.start_hub_now(config, hub_options);
    let served = match listener {
        // Until a signal: the watch ends the servers and exits.
        Some(listener) => downstream.serve_http(&hub, listener, &options),
        None => {
            let served = downstream.serve(&hub, io::stdin(), io::stdout(), &options);
            // The client is gone: its servers too, soon, whatever they do
            // with their input's end and SIGTERM (their supervisors end what
            // is left when tether exits).
            signals.close_by = Some(Instant::now() + CLOSE_AFTER_CLIENT);
            served
        }
    };
    match served {
        Ok(()) => EXIT_OK,
        Err(err) => report(&err),
    }
}

/// Listens at `--http`'s address (a bare port is loopback's), takes the
/// bearer token from `--token-env` or makes one, and says both on stderr.
fn listen(address: &str, http: &HttpListen, options: &mut ServeOptions) -> Result<TcpListener, u8> {
    let address = if address.parse::<u16>().is_ok() {
        format!("127.0.0.1:{address}")
    } else {
        address.to_owned()
    };
    let token = match &http.token_env {
        Some(name) => match std::env::var(name) {
            Ok(token) if !token.trim().is_empty() => token.trim().to_owned(),
            _ => {
                errln!("--token-env {name}: the variable is not set, or empty");
                return Err(EXIT_USAGE);
            }
        },
        None => match new_token() {
            Some(token) => token,
            None => {
                errln!("the system gave no random numbers for a token");
                return Err(EXIT_SERVER);
            }
        },
    };
    let listener = match TcpListener::bind(&address) {
        Ok(listener) => listener,
        Err(err) => {
            errln!("cannot listen on {address}: {err}");
            return Err(EXIT_SERVER);
        }
    };
    let bound = listener.local_addr().map(|at| at.to_string()).unwrap_or(address);
    if listener.local_addr().is_ok_and(|at| !at.ip().is_loopback()) {
        eprintln!("warning: listening beyond this machine ({bound}): the token is all that guards it; use TLS in front");
    }
    for origin in &http.origins {
        *options = std::mem::take(options).with_allowed_origin(origin);
    }
    *options = std::mem::take(options).with_bearer_token(&token);
    eprintln!("tether: serving MCP at http://{bound}/mcp");
    if http.token_env.is_none() {
        eprintln!("tether: bearer token (send \"Authorization: Bearer TOKEN\"): {token}");
    }
    Ok(listener)
}

/// 32 random bytes as hex.
fn new_token() -> Option<String> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 32];
    ring::rand::SystemRandom::new().fill(&mut bytes).ok()?;
    Some(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}
