//! The commands that talk to servers: `list`, `tools`, `call`.
//!
//! Each starts a hub in the background under a `SignalWatch`, so that SIGINT,
//! SIGTERM and SIGHUP at any moment (during start, a call, or the shutdown
//! itself) end every server's process group before tether exits.

use std::io::{self, IsTerminal, Read};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use tether::{CallOptions, Config, Error, Hub, HubOptions, Scope, ServerState, ServerStatus};

use super::{
    browse, emit, lock, report, status, Command, EXIT_OK, EXIT_SERVER, EXIT_TOOL_ERROR, EXIT_USAGE,
    INTERRUPTED,
};

/// Runs a server command.
pub(super) fn run(command: Command, config: Config, options: HubOptions) -> u8 {
    let signals = match SignalWatch::start(options) {
        Ok(signals) => signals,
        Err(err) => {
            eprintln!("error: cannot watch signals: {err}");
            return EXIT_SERVER;
        }
    };
    let code = match command {
        Command::List { names, scope, json } => list(config, &names, scope, json, &signals),
        Command::Resources { server, json } => {
            browse::resources(config, server.as_deref(), json, &signals)
        }
        Command::Read { server, uri, raw, json } => {
            browse::read(config, &server, &uri, raw, json, &signals)
        }
        Command::Prompts { server, json } => {
            browse::prompts(config, server.as_deref(), json, &signals)
        }
        Command::Prompt { server, name, arguments, json } => {
            match read_arguments(arguments.as_deref()) {
                Ok(arguments) => browse::prompt(config, &server, &name, arguments, json, &signals),
                Err(message) => {
                    eprintln!("error: {message}");
                    EXIT_USAGE
                }
            }
        }
        Command::Tools { server, json } => tools(config, server.as_deref(), json, &signals),
        Command::Call { server, tool, arguments, timeout, json } => {
            call(config, &server, &tool, arguments.as_deref(), timeout, json, &signals)
        }
        _ => unreachable!("only server commands are routed here"),
    };
    signals.stop();
    code
}

/// Watches SIGINT, SIGTERM and SIGHUP on a named thread; on the first one it
/// shuts the current hub down (ending every server's process group) and exits.
pub(super) struct SignalWatch {
    options: HubOptions,
    hub: Arc<Mutex<Option<Hub>>>,
    handle: signal_hook::iterator::Handle,
    thread: std::thread::JoinHandle<()>,
}

impl SignalWatch {
    fn start(options: HubOptions) -> io::Result<SignalWatch> {
        let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP])?;
        let handle = signals.handle();
        let hub: Arc<Mutex<Option<Hub>>> = Arc::new(Mutex::new(None));
        let watched = Arc::clone(&hub);
        let thread =
            std::thread::Builder::new().name("tether-signals".into()).spawn(move || {
                if let Some(signal) = signals.forever().next() {
                    INTERRUPTED.store(true, Ordering::SeqCst);
                    log::info!("signal {signal}: shutting down");
                    let hub = lock(&watched).clone();
                    if let Some(hub) = hub {
                        hub.shutdown();
                    }
                    std::process::exit(128 + signal);
                }
            })?;
        Ok(SignalWatch { options, hub, handle, thread })
    }

    /// Starts a hub that a signal will shut down.
    pub(super) fn start_hub(&self, config: Config) -> Hub {
        // Held while the hub is made, so that a signal arriving meanwhile
        // finds it. Starting in the background only spawns threads; the
        // servers start on those, with the lock released.
        let mut slot = lock(&self.hub);
        let hub = Hub::start(config, self.options.clone().with_background(true));
        *slot = Some(hub.clone());
        drop(slot);
        hub.wait_started();
        hub
    }

    fn stop(self) {
        // The hub stays in its slot: a signal during the shutdown finds it,
        // and its own shutdown waits until the servers are gone.
        let hub = lock(&self.hub).clone();
        if let Some(hub) = hub {
            hub.shutdown();
        }
        self.handle.close();
        let _ = self.thread.join();
    }
}

fn list(
    mut config: Config,
    names: &[String],
    scope: Option<Scope>,
    json: bool,
    signals: &SignalWatch,
) -> u8 {
    let wanted = |name: &str, server_scope: Scope| {
        (names.is_empty() || names.iter().any(|wanted| Config::same_name(wanted, name)))
            && scope.is_none_or(|scope| scope == server_scope)
    };
    for name in names {
        let known = config.server(name).is_some()
            || config.failed.iter().any(|entry| Config::same_name(&entry.name, name))
            || config.untrusted.iter().any(|entry| Config::same_name(&entry.name, name));
        if !known {
            return unknown_server(&config, name);
        }
    }
    config.servers.retain(|server| wanted(&server.name, server.scope));
    config.failed.retain(|entry| wanted(&entry.name, entry.scope));
    config.untrusted.retain(|entry| wanted(&entry.name, Scope::Project));
    let hub = signals.start_hub(config);
    let statuses = hub.status();
    if json {
        let rows: Vec<Value> = statuses.iter().map(status::to_json).collect();
        emit(&format!("{}\n", serde_json::to_string_pretty(&rows).unwrap_or_default()));
    } else if statuses.is_empty() {
        eprintln!("No servers configured. Add one to mcp.json in the configuration folder.");
    } else {
        emit(&render_list(&statuses));
    }
    // An untrusted project's servers count only when asked for by name.
    let all_connected = statuses.iter().all(|status| match status.state {
        ServerState::Ready | ServerState::Disabled => true,
        ServerState::Untrusted => names.is_empty(),
        _ => false,
    });
    if all_connected {
        EXIT_OK
    } else {
        EXIT_TOOL_ERROR
    }
}

fn render_list(statuses: &[ServerStatus]) -> String {
    let name_width = statuses.iter().map(|status| status.name.len()).max().unwrap_or(4).max(4);
    let mut out = String::new();
    for status in statuses {
        let tools = if status.state == ServerState::Ready {
            let count = status.tools.len();
            let noun = if count == 1 { "tool" } else { "tools" };
            if count == 0 {
                format!("0 {noun}")
            } else {
                format!("{count} {noun}: {}", status.tools.join(", "))
            }
        } else {
            String::new()
        };
        let scope = status.scope.as_str();
        out.push_str(
            format!(
                "{:name_width$}  {:<10}  {:<5}  {:<7}  {tools}",
                status.name,
                status::label(status.state),
                status.transport,
                scope
            )
            .trim_end(),
        );
        out.push('\n');
        if let Some(error) = status::error_text(status) {
            out.push_str(&format!("    error: {error}\n"));
        }
        if let Some(hint) = status::hint(status) {
            out.push_str(&format!("    hint: {hint}\n"));
        }
        for warning in &status.warnings {
            out.push_str(&format!("    warning: {warning}\n"));
        }
        if let Some(tail) = &status.stderr_tail {
            out.push_str("    stderr:\n");
            for line in last_lines(tail, 10) {
                out.push_str(&format!("    | {line}\n"));
            }
        }
    }
    out
}

fn last_lines(text: &str, count: usize) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().filter(|line| !line.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(count)..].to_vec()
}

fn tools(config: Config, server: Option<&str>, json: bool, signals: &SignalWatch) -> u8 {
    let config = match server {
        None => config,
        Some(server) => match config.server(server) {
            Some(entry) => Config::new().with_server(entry.clone()),
            None => return unknown_server(&config, server),
        },
    };
    let hub = signals.start_hub(config);
    let tools: Vec<_> = hub
        .tools()
        .into_iter()
        .filter(|tool| server.is_none_or(|name| Config::same_name(&tool.server, name)))
        .collect();
    if json {
        let rows: Vec<Value> = tools
            .iter()
            .map(|entry| {
                json!({
                    "name": entry.qualified_name,
                    "server": entry.server,
                    "tool": entry.tool.name,
                                        "exposure": entry.exposure,
                    "description": entry.tool.description,
                    "inputSchema": entry.tool.input_schema,
                    "outputSchema": entry.tool.output_schema,
                    "annotations": entry.tool.annotations,
                })
            })
            .collect();
        emit(&format!("{}\n", serde_json::to_string_pretty(&rows).unwrap_or_default()));
    } else {
        let width = tools.iter().map(|entry| entry.qualified_name.len()).max().unwrap_or(0);
        let mut out = String::new();
        for entry in &tools {
            let description = entry
                .tool
                .description
                .as_deref()
                .and_then(|text| text.lines().next())
                .unwrap_or("");
            out.push_str(
                format!(
                    "{:width$}  {:<8}  {description}",
                    entry.qualified_name,
                    entry.exposure.as_str()
                )
                .trim_end(),
            );
            out.push('\n');
        }
        emit(&out);
    }
    let failed: Vec<ServerStatus> = hub
        .status()
        .into_iter()
        .filter(|status| {
            status.state == ServerState::Failed
                && server.is_none_or(|name| Config::same_name(&status.name, name))
        })
        .collect();
    for status in &failed {
        eprintln!(
            "warning: server {:?} is not connected: {}",
            status.name,
            status::error_text(status).unwrap_or_else(|| "?".into())
        );
    }
    if failed.is_empty() {
        EXIT_OK
    } else {
        EXIT_TOOL_ERROR
    }
}

/// A configuration with only this server, or the exit code of why not
/// (unknown, invalid, untrusted or disabled; each said on stderr).
pub(super) fn only_server(config: &Config, server: &str) -> Result<Config, u8> {
    let Some(server_config) = config.server(server).cloned() else {
        if let Some(failed) =
            config.failed.iter().find(|entry| Config::same_name(&entry.name, server))
        {
            eprintln!("error: server {server:?} has an invalid entry: {}", failed.error);
            return Err(EXIT_USAGE);
        }
        if let Some(untrusted) =
            config.untrusted.iter().find(|entry| Config::same_name(&entry.name, server))
        {
            let project = untrusted
                .source
                .parent()
                .map_or_else(|| ".".into(), |dir| dir.display().to_string());
            eprintln!(
                "error: server {server:?} is in a project that is not trusted; it would run: {}",
                untrusted.command_line
            );
            eprintln!("  hint: if you trust it, run: tether trust {project}");
            return Err(EXIT_USAGE);
        }
        return Err(unknown_server(config, server));
    };
    if !server_config.enabled {
        eprintln!("error: server {:?} is disabled (\"enabled\": false); turn it on with: tether enable {}", server_config.name, server_config.name);
        return Err(EXIT_USAGE);
    }
    Ok(Config::new().with_server(server_config))
}

fn call(
    config: Config,
    server: &str,
    tool: &str,
    arguments: Option<&str>,
    timeout: Option<Duration>,
    json: bool,
    signals: &SignalWatch,
) -> u8 {
    let arguments = match read_arguments(arguments) {
        Ok(arguments) => arguments,
        Err(message) => {
            eprintln!("error: {message}");
            return EXIT_USAGE;
        }
    };
    let config = match only_server(&config, server) {
        Ok(config) => config,
        Err(code) => return code,
    };
    let name = config.servers[0].name.clone();
    let hub = signals.start_hub(config);
    if let Some(status) = hub.status().into_iter().find(|status| status.state != ServerState::Ready)
    {
        if INTERRUPTED.load(Ordering::SeqCst) {
            return EXIT_SERVER;
        }
        eprintln!(
            "error: server {name:?} failed to start: {}",
            status::error_text(&status).unwrap_or_else(|| "unknown error".into())
        );
        if let Some(hint) = status::hint(&status) {
            eprintln!("  hint: {hint}");
        }
        if let Some(tail) = &status.stderr_tail {
            for line in last_lines(tail, 10) {
                eprintln!("  stderr: {line}");
            }
        }
        return start_failure_code(&status);
    }
    let mut options = CallOptions::default();
    if let Some(ceiling) = timeout {
        // --timeout is the whole call's ceiling: progress does not extend it.
        options = options.with_timeout(ceiling).with_max_total_timeout(ceiling);
    }
    if io::stderr().is_terminal() {
        options.progress = Some(Arc::new(|progress: &tether::Progress| {
            let total = progress.total.map(|total| format!("/{total}")).unwrap_or_default();
            let message = progress.message.as_deref().unwrap_or("");
            eprint!("\rprogress {}{total} {message}\x1b[K", progress.progress);
        }));
    }
    match hub.call_server_tool(&name, tool, arguments, &options) {
        Ok(result) => {
            if options.progress.is_some() {
                eprint!("\r\x1b[K");
            }
            if json {
                emit(&format!(
                    "{}\n",
                    serde_json::to_string_pretty(&result.raw).unwrap_or_default()
                ));
            } else {
                let text = result.to_text();
                emit(&text);
                if !text.ends_with('\n') {
                    emit("\n");
                }
            }
            if result.is_error() {
                EXIT_TOOL_ERROR
            } else {
                EXIT_OK
            }
        }
        Err(err) => {
            let code = report(&err);
            if let Error::Timeout(_) = err.root() {
                if !INTERRUPTED.load(Ordering::SeqCst) {
                    eprintln!("  hint: pass a longer --timeout, or raise \"timeout\" for {name:?} in the configuration");
                }
            }
            code
        }
    }
}

fn read_arguments(arguments: Option<&str>) -> Result<Value, String> {
    let text = match arguments {
        None => return Ok(json!({})),
        Some("-") => {
            let mut text = String::new();
            io::stdin()
                .read_to_string(&mut text)
                .map_err(|err| format!("cannot read the arguments from stdin: {err}"))?;
            // Nothing on stdin means no arguments.
            if text.trim().is_empty() {
                return Ok(json!({}));
            }
            text
        }
        Some(text) => text.to_owned(),
    };
    let value: Value = serde_json::from_str(&text)
        .map_err(|err| format!("the arguments are not valid JSON: {err}"))?;
    if !value.is_object() {
        return Err("the arguments must be a JSON object, like {\"text\": \"hi\"}".to_owned());
    }
    Ok(value)
}

/// The exit code of a server that did not start: 2 when its configuration
/// is at fault (an unset `bearerTokenEnv`, say), 3 when the server is.
pub(super) fn start_failure_code(status: &ServerStatus) -> u8 {
    if status.error.as_deref().is_some_and(|error| !error.is_server_failure()) {
        EXIT_USAGE
    } else {
        EXIT_SERVER
    }
}

/// Says that no server has this name, and which one is close.
pub(super) fn unknown_server(config: &Config, name: &str) -> u8 {
    let code = report(&Error::UnknownServer(name.to_owned()));
    if let Some(close) = config.closest_name(name) {
        eprintln!("  hint: did you mean {close:?}?");
    }
    code
}
