//! The commands that talk to servers: `list`, `tools`, `call`.
//!
//! Each starts a hub in the background under a `SignalWatch`, so that SIGINT,
//! SIGTERM and SIGHUP at any moment (during start, a call, or the shutdown
//! itself) end every server's process group before tether exits.

use std::io::{self, IsTerminal, Read};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use tether::{CallOptions, Config, Error, Hub, HubOptions, Scope, ServerState, ServerStatus};

use super::{
    browse, emit, emit_body, emit_json, lock, progress, report, shown, status, table, Command,
    EXIT_OK, EXIT_SERVER, EXIT_TOOL_ERROR, EXIT_USAGE, INTERRUPTED,
};

/// How often a start in progress is looked at.
const POLL: Duration = Duration::from_millis(50);
/// A start shorter than this shows no status line (no flicker).
const LINE_AFTER: Duration = Duration::from_millis(400);
/// How long past the longest start timeout the wait for a start may last.
const START_SLACK: Duration = Duration::from_secs(2);

/// Runs a server command.
pub(super) fn run(
    command: Command,
    config: Config,
    options: HubOptions,
    roots: &[String],
    signals: &mut SignalWatch,
) -> u8 {
    signals.options = options;
    if let Command::Call { timeout: Some(ceiling), .. } = &command {
        // --timeout bounds the whole command, the servers' closing too.
        signals.stop_by = Some(Instant::now() + *ceiling);
    }
    let signals = &*signals;
    let code = match command {
        Command::List { names, scope, json } => list(config, &names, scope, json, roots, signals),
        Command::Resources { server, json } => {
            browse::resources(config, server.as_deref(), json, signals)
        }
        Command::Read { server, uri, output, raw, json } => {
            browse::read(config, &server, &uri, output.as_deref(), raw, json, signals)
        }
        Command::Prompts { server, json } => {
            browse::prompts(config, server.as_deref(), json, signals)
        }
        Command::Prompt { server, name, arguments, json } => {
            // MCP prompt arguments are strings: say so before asking.
            let arguments = read_arguments(arguments.as_deref()).and_then(|arguments| {
                match arguments.as_object().and_then(|map| map.iter().find(|(_, v)| !v.is_string()))
                {
                    Some((key, value)) => Err(format!(
                        "prompt arguments are strings; {key:?} is {value}; write it as \"{}\"",
                        value.to_string().trim_matches('"')
                    )),
                    None => Ok(arguments),
                }
            });
            match arguments {
                Ok(arguments) => browse::prompt(config, &server, &name, arguments, json, signals),
                Err(message) => {
                    eprintln!("error: {message}");
                    EXIT_USAGE
                }
            }
        }
        Command::Tools { server, json } => tools(config, server.as_deref(), json, signals),
        Command::Call { server, tool, arguments, timeout, json } => {
            call(config, &server, &tool, arguments.as_deref(), timeout, json, signals)
        }
        _ => unreachable!("only server commands are routed here"),
    };
    // The caller stops the watch, which shuts the hub down.
    code
}

/// Set once the command's servers are closing (or a signal asked for it).
static STOPPING: AtomicBool = AtomicBool::new(false);
/// The signal that ended the command, once one did.
static SIGNALLED: AtomicI32 = AtomicI32::new(0);
/// Set once the terminal was told why tether waits for its servers.
static SAID_SLOW: AtomicBool = AtomicBool::new(false);
/// How long closing may take before the terminal is told why it waits.
const SLOW_CLOSING: Duration = Duration::from_secs(1);
/// Whether every server has a supervisor that ends its tree when tether
/// exits (Linux), so that tether may exit without waiting for them.
const SUPERVISED: bool = cfg!(target_os = "linux");
/// How long past a `--timeout` the servers get to close: enough for one
/// that ignores its input's end and SIGTERM under the default grace periods
/// (the one-shot grace, then the supervisor's), so that only an entry's own
/// longer `shutdownTimeout` leaves a server to its supervisor.
const STOP_SLACK: Duration = Duration::from_secs(2);

/// Watches SIGINT, SIGTERM and SIGHUP on a named thread; on the first one it
/// shuts the current hub down (ending every server's process group) and
/// exits. A second one, or one while the command's servers are closing
/// (each may take its `shutdownTimeout`), exits at once: on Linux every
/// server's supervisor ends its tree as tether goes.
pub(super) struct SignalWatch {
    /// How hubs are started (set once the configuration is loaded).
    pub(super) options: HubOptions,
    /// When the closing must be over (`call --timeout`): past it tether
    /// exits and leaves the servers to their supervisors.
    pub(super) stop_by: Option<Instant>,
    hub: Arc<Mutex<Option<Hub>>>,
    handle: signal_hook::iterator::Handle,
    thread: std::thread::JoinHandle<()>,
}

impl SignalWatch {
    /// Watches from now on: a signal before any hub exists (while the
    /// configuration loads and runs its `!command` helpers) exits at once,
    /// and the helpers' supervisors end them.
    pub(super) fn start() -> io::Result<SignalWatch> {
        let options = HubOptions::default();
        let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP])?;
        let handle = signals.handle();
        let hub: Arc<Mutex<Option<Hub>>> = Arc::new(Mutex::new(None));
        let watched = Arc::clone(&hub);
        let thread =
            std::thread::Builder::new().name("tether-signals".into()).spawn(move || {
                for signal in signals.forever() {
                    if STOPPING.swap(true, Ordering::SeqCst) && SUPERVISED {
                        std::process::exit(128 + signal);
                    }
                    INTERRUPTED.store(true, Ordering::SeqCst);
                    SIGNALLED.store(signal, Ordering::SeqCst);
                    progress::clear();
                    log::info!("signal {signal}: shutting down");
                    // On a thread of its own, so that a second signal is heard;
                    // that thread ends the process.
                    let hub = lock(&watched).clone();
                    let stop = move || {
                        if let Some(hub) = hub {
                            close(hub, None);
                        }
                        std::process::exit(128 + signal);
                    };
                    if std::thread::Builder::new()
                        .name("tether-interrupted".into())
                        .spawn(stop)
                        .is_err()
                    {
                        std::process::exit(128 + signal);
                    }
                }
            })?;
        Ok(SignalWatch { options, stop_by: None, hub, handle, thread })
    }

    /// Starts a hub that a signal will shut down, and waits for its servers.
    pub(super) fn start_hub(&self, config: Config) -> Hub {
        self.start_hub_reporting(config, |_| {})
    }

    /// Starts a hub that a signal will shut down, and waits until no server
    /// is starting (each at most its start timeout). `settled` sees each
    /// server as it finishes starting; a terminal sees which are still
    /// starting.
    pub(super) fn start_hub_reporting(
        &self,
        config: Config,
        mut settled: impl FnMut(&ServerStatus),
    ) -> Hub {
        let longest = config.servers.iter().map(|server| server.start_timeout).max();
        let deadline = Instant::now() + longest.unwrap_or_default() + START_SLACK;
        // Held while the hub is made, so that a signal arriving meanwhile
        // finds it. Starting in the background only spawns threads; the
        // servers start on those, with the lock released.
        let mut slot = lock(&self.hub);
        let hub = Hub::start(config, self.options.clone().with_background(true));
        *slot = Some(hub.clone());
        drop(slot);
        let began = Instant::now();
        let mut reported: Vec<String> = Vec::new();
        let show_line = progress::available() && log::log_enabled!(log::Level::Error);
        loop {
            let done = hub.wait_started_for(POLL) || Instant::now() >= deadline;
            let statuses = hub.status();
            let mut starting = Vec::new();
            for status in &statuses {
                if status.state == ServerState::Connecting && !done {
                    starting.push(shown::escaped(&status.name));
                } else if !reported.contains(&status.name) {
                    progress::clear();
                    // Interrupted, a start that was cut short is no news.
                    if !INTERRUPTED.load(Ordering::SeqCst) {
                        settled(status);
                    }
                    reported.push(status.name.clone());
                }
            }
            if done {
                progress::clear();
                return hub;
            }
            if show_line && began.elapsed() >= LINE_AFTER {
                progress::show(&format!(
                    "starting {} ({:.0} s)",
                    starting.join(", "),
                    began.elapsed().as_secs_f64().floor()
                ));
            }
        }
    }

    /// Shuts the hub down, and stops watching. Within `stop_by` (and a
    /// little more) when a ceiling was given: past it tether exits, and the
    /// servers' supervisors end what is left. Returns the exit code a
    /// signal gave the command (128 + its number), if one came.
    pub(super) fn stop(self) -> Option<u8> {
        STOPPING.store(true, Ordering::SeqCst);
        // The hub stays in its slot: a signal during the shutdown finds it,
        // and its own shutdown waits until the servers are gone.
        let hub = lock(&self.hub).clone();
        if let Some(hub) = hub {
            let by =
                self.stop_by.filter(|_| SUPERVISED).map(|by| by.max(Instant::now()) + STOP_SLACK);
            close(hub, by);
        }
        self.handle.close();
        let _ = self.thread.join();
        match SIGNALLED.load(Ordering::SeqCst) {
            0 => None,
            signal => Some((128 + signal) as u8),
        }
    }
}

/// Shuts `hub` down, on a `tether-stop` thread watched from here: past
/// `by`, tether leaves the servers to their supervisors (it is about to
/// exit); past a moment, a terminal is told once why it waits (an entry's
/// `shutdownTimeout` may be long) and how to stop waiting.
fn close(hub: Hub, by: Option<Instant>) {
    let began = Instant::now();
    let stopper = match std::thread::Builder::new().name("tether-stop".into()).spawn({
        let hub = hub.clone();
        move || hub.shutdown()
    }) {
        Ok(stopper) => stopper,
        Err(_) => return hub.shutdown(),
    };
    let mut said = false;
    // Looked at often at first: most servers close at once, and a command's
    // exit waits for this.
    let mut pause = Duration::from_micros(250);
    while !stopper.is_finished() {
        if by.is_some_and(|by| Instant::now() >= by) {
            log::info!("servers still closing past --timeout; leaving them");
            return;
        }
        if !said && began.elapsed() >= SLOW_CLOSING && progress::available() {
            said = true;
            if !SAID_SLOW.swap(true, Ordering::SeqCst) {
                let again = if INTERRUPTED.load(Ordering::SeqCst) { " again" } else { "" };
                eprintln!(
                    "Waiting for the servers to close (each may take its shutdownTimeout); \
                     press Ctrl-C{again} to quit now."
                );
            }
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(10));
    }
    let _ = stopper.join();
}

fn list(
    mut config: Config,
    names: &[String],
    scope: Option<Scope>,
    json: bool,
    roots: &[String],
    signals: &SignalWatch,
) -> u8 {
    let wanted = |name: &str, server_scope: Scope| {
        (names.is_empty() || names.iter().any(|wanted| Config::same_name(wanted, name)))
            && scope.is_none_or(|scope| scope == server_scope)
    };
    for name in names {
        if !config.knows(name) {
            return unknown_server(&config, name);
        }
    }
    config.servers.retain(|server| wanted(&server.name, server.scope));
    config.failed.retain(|entry| wanted(&entry.name, entry.scope));
    config.untrusted.retain(|entry| wanted(&entry.name, Scope::Project));
    // On a terminal each row is printed as its server finishes starting;
    // otherwise (and for --json) all at once, in configuration order.
    let streaming = !json && io::stdout().is_terminal();
    let all_names = config.servers.iter().map(|server| server.name.as_str());
    let all_names = all_names.chain(config.failed.iter().map(|entry| entry.name.as_str()));
    let all_names = all_names.chain(config.untrusted.iter().map(|entry| entry.name.as_str()));
    let widths = status::widths_for_names(all_names);
    let hub = signals.start_hub_reporting(config, |status| {
        if streaming {
            emit(&status::render_row(status, &widths));
        }
    });
    let statuses = hub.status();
    if json {
        let rows: Vec<Value> =
            statuses.iter().map(|status| status::to_json(status, roots)).collect();
        emit_json(&rows);
    } else if statuses.is_empty() {
        eprintln!("No servers configured. Add one with: tether add NAME -- COMMAND (see tether add --help)");
    } else if !streaming {
        emit(&status::render_list(&statuses));
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

fn tools(config: Config, server: Option<&str>, json: bool, signals: &SignalWatch) -> u8 {
    // A server named that did not connect is an error, as for `call`.
    let hub = match super::browse::connected_hub(config, server, signals) {
        Ok(hub) => hub,
        Err(code) => return code,
    };
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
        emit_json(&rows);
    } else {
        let rows: Vec<[String; 3]> = tools
            .iter()
            .map(|entry| {
                let description =
                    entry.tool.description.as_deref().and_then(|text| text.lines().next());
                [
                    entry.qualified_name.clone(),
                    entry.exposure.as_str().to_owned(),
                    description.unwrap_or("").to_owned(),
                ]
            })
            .collect();
        emit(&table::render(&rows));
    }
    if warn_not_connected(&hub) {
        EXIT_TOOL_ERROR
    } else {
        EXIT_OK
    }
}

/// Says on stderr which servers did not connect (so a listing is known to
/// be partial); true when any did not.
pub(super) fn warn_not_connected(hub: &Hub) -> bool {
    let mut any = false;
    for status in hub.status() {
        if matches!(status.state, ServerState::Failed | ServerState::NeedsLogin) {
            any = true;
            eprintln!(
                "warning: server {:?} is not connected: {}",
                status.name,
                shown::escaped(&status::error_text(&status).unwrap_or_else(|| "?".into()))
            );
        }
    }
    any
}

/// A configuration with only this server, or the exit code of why not
/// (unknown, invalid, untrusted or disabled; each said on stderr).
pub(super) fn only_server(config: &Config, server: &str) -> Result<Config, u8> {
    let Some(server_config) = config.server(server).cloned() else {
        if let Some(failed) =
            config.failed.iter().find(|entry| Config::same_name(&entry.name, server))
        {
            eprintln!(
                "error: server {server:?} has an invalid entry: {}",
                shown::escaped(&failed.error)
            );
            return Err(EXIT_USAGE);
        }
        if let Some(untrusted) =
            config.untrusted.iter().find(|entry| Config::same_name(&entry.name, server))
        {
            let project = untrusted
                .source
                .parent()
                .map_or_else(|| ".".into(), |dir| dir.display().to_string());
            let why = match untrusted.why {
                tether::Unapproved::Changed => "changed since its project was trusted",
                tether::Unapproved::Added => "was added since its project was trusted",
                _ => "is in a project that is not trusted",
            };
            eprintln!(
                "error: server {server:?} {why}; it would run: {}",
                shown::escaped(&untrusted.command_line)
            );
            eprintln!("  hint: review it, and if you trust it, run: tether trust {project}");
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
    let mut config = config;
    let name = config.servers[0].name.clone();
    // --timeout is the whole call's ceiling: the start spends from it too.
    let began = Instant::now();
    let mut cut_by_ceiling = false;
    if let Some(ceiling) = timeout {
        let server = &mut config.servers[0];
        cut_by_ceiling = ceiling < server.start_timeout;
        server.start_timeout = server.start_timeout.min(ceiling);
    }
    let hub = signals.start_hub(config);
    if let Some(status) = hub.status().into_iter().find(|status| status.state != ServerState::Ready)
    {
        return report_start_failure(&name, &status, cut_by_ceiling);
    }
    let mut options = CallOptions::default();
    if let Some(ceiling) = timeout {
        // What the start left of the ceiling; progress does not extend it.
        let left = ceiling.saturating_sub(began.elapsed()).max(Duration::from_millis(1));
        options = options.with_timeout(left).with_max_total_timeout(left);
    }
    if progress::available() {
        options.progress = Some(Arc::new(|update: &tether::Progress| {
            let total = update.total.map(|total| format!("/{total}")).unwrap_or_default();
            let message = match update.message.as_deref() {
                Some(message) if !message.trim().is_empty() => {
                    format!(" {}", shown::escaped(message))
                }
                _ => String::new(),
            };
            progress::show(&format!("progress {}{total}{message}", update.progress));
        }));
    }
    let answer = hub.call_server_tool(&name, tool, arguments, &options);
    progress::clear();
    match answer {
        Ok(result) => {
            if json {
                emit_json(&result.raw);
            } else {
                let text = result.to_text();
                emit_body(&text);
                if !text.ends_with('\n') {
                    emit("\n");
                }
            }
            if result.is_error() {
                // The result above is the tool's own account of it.
                eprintln!(
                    "error: server {name:?}: the tool {:?} reported an error",
                    shown::escaped(tool)
                );
                EXIT_TOOL_ERROR
            } else {
                EXIT_OK
            }
        }
        Err(err) => {
            let code = report(&err);
            if let Error::Disconnected(_) = err.root() {
                // The server went away mid-call: its last words say why.
                let tail = hub
                    .status()
                    .into_iter()
                    .find(|status| Config::same_name(&status.name, &name))
                    .and_then(|status| status.stderr_tail);
                for line in
                    tail.as_deref().map(|tail| status::last_lines(tail, 10)).unwrap_or_default()
                {
                    eprintln!("  stderr: {}", shown::escaped(line));
                }
            }
            if let Error::UnknownTool(_) = err.root() {
                let listed: Vec<String> = hub
                    .status()
                    .into_iter()
                    .filter(|status| Config::same_name(&status.name, &name))
                    .flat_map(|status| status.tools)
                    .collect();
                let known: Vec<&str> = listed.iter().map(String::as_str).collect();
                match tether::for_cli::closest(tool, &known) {
                    Some(close) => eprintln!("  hint: did you mean {:?}?", shown::escaped(close)),
                    None => eprintln!("  hint: see its tools with: tether tools {name}"),
                }
            }
            match err.root() {
                _ if INTERRUPTED.load(Ordering::SeqCst) => {}
                Error::LoginRequired { .. } => {
                    eprintln!("  hint: sign in with: tether login {name}");
                }
                Error::Timeout(tether::Timeout { step: tether::Step::Ceiling { .. }, .. }) => {
                    eprintln!("  hint: the tool was still at work; raise \"maxTotalTimeout\" for {name:?} in the configuration");
                }
                Error::Timeout(_) => {
                    eprintln!("  hint: pass a longer --timeout, or raise \"timeout\" for {name:?} in the configuration");
                }
                _ => {}
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

/// Says why the server named did not start (quietly when interrupted),
/// with a hint and its stderr's last lines; returns the exit code.
/// `cut_by_ceiling`: a `--timeout` shorter than its start timeout applied.
pub(super) fn report_start_failure(name: &str, status: &ServerStatus, cut_by_ceiling: bool) -> u8 {
    if INTERRUPTED.load(Ordering::SeqCst) {
        return EXIT_SERVER;
    }
    eprintln!(
        "error: server {name:?} failed to start: {}",
        shown::escaped(&status::error_text(status).unwrap_or_else(|| "unknown error".into()))
    );
    let start_timed_out = status.error.as_deref().is_some_and(|error| {
        matches!(
            error.root(),
            Error::Timeout(tether::Timeout { step: tether::Step::Start { .. }, .. })
        )
    });
    if start_timed_out && cut_by_ceiling {
        // The limit was the --timeout given, not the entry's startTimeout.
        eprintln!("  hint: it was still starting when --timeout ran out; pass a longer --timeout");
    } else if let Some(hint) = status::hint(status) {
        eprintln!("  hint: {}", shown::escaped(&hint));
    }
    if let Some(tail) = &status.stderr_tail {
        for line in status::last_lines(tail, 10) {
            eprintln!("  stderr: {}", shown::escaped(line));
        }
    }
    start_failure_code(status)
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
