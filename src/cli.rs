//! The `tether` command line: arguments → configuration → hub → output → exit code.
//!
//! A hand-written lexopt loop fills a plain [`Args`]; each command is a
//! function returning an exit code. stdout carries only results; errors go to
//! stderr as `error: …` naming the server, then a hint. A `tether-signals`
//! thread turns SIGINT, SIGTERM and SIGHUP into a hub shutdown (every server
//! process group ended) before the process exits.

use std::io::{self, IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lexopt::prelude::*;
use serde_json::{json, Value};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use tether::{CallOptions, Config, Error, Hub, HubOptions, ServerState, ServerStatus};

const HELP: &str = "\
tether: a Model Context Protocol client

Usage: tether [GLOBAL OPTIONS] COMMAND [ARGS]

Commands:
  list [--json]                         connect every enabled server and show its state
  tools [--server NAME] [--json]        the tools as the model sees them
  call SERVER TOOL [ARGS_JSON|-] [--timeout S] [--json]
                                        call one tool (ARGS_JSON defaults to {}; - reads stdin)

Global options (before the command):
  --config-dir DIR   user configuration folder (default: $TETHER_CONFIG_DIR,
                     else $XDG_CONFIG_HOME/tether, else ~/.config/tether)
  --project DIR      the project folder (default: the current directory)
  -v, --verbose      more log output on stderr (repeat for more); RUST_LOG overrides
  -q, --quiet        only errors on stderr
  -h, --help         this text
  -V, --version      the version

Exit codes: 0 success; 1 the tool reported an error, or `list` found a server
not connected; 2 bad usage, bad JSON, unknown server or tool, invalid config;
3 the server could not be reached or broke the protocol.
";

/// Success.
const EXIT_OK: u8 = 0;
/// The tool reported an error, or a server is not connected.
const EXIT_TOOL_ERROR: u8 = 1;
/// Bad usage, bad JSON, unknown server or tool, invalid config.
const EXIT_USAGE: u8 = 2;
/// The server could not be reached or broke the protocol.
const EXIT_SERVER: u8 = 3;

/// Set once a signal arrived: errors from the shutdown it causes are not news.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// Set once stdout is a closed pipe (`tether tools | head -1`): output stops,
/// but the command still ends its servers before exiting.
static OUTPUT_CLOSED: AtomicBool = AtomicBool::new(false);

#[derive(Debug, Default)]
struct Args {
    config_dir: Option<PathBuf>,
    project: Option<PathBuf>,
    verbosity: i32,
    command: Option<Command>,
    help: bool,
    version: bool,
}

#[derive(Debug)]
enum Command {
    List {
        json: bool,
    },
    Tools {
        server: Option<String>,
        json: bool,
    },
    Call {
        server: String,
        tool: String,
        arguments: Option<String>,
        timeout: Option<Duration>,
        json: bool,
    },
}

/// Runs the command line and returns the process exit code.
pub fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(err) => {
            eprintln!("error: {err}\nRun `tether --help` for usage.");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    init_logging(args.verbosity);
    if args.help {
        print!("{HELP}");
        return ExitCode::from(EXIT_OK);
    }
    if args.version {
        println!("tether {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::from(EXIT_OK);
    }
    let Some(command) = args.command.as_ref() else {
        eprint!("{HELP}");
        return ExitCode::from(EXIT_USAGE);
    };
    if std::env::var("TETHER_MCP").as_deref() == Ok("0") {
        // Off means off: no file is read and no server started.
        return ExitCode::from(match command {
            Command::Call { .. } => {
                eprintln!("error: MCP is turned off (TETHER_MCP=0)");
                EXIT_USAGE
            }
            _ => {
                eprintln!("MCP is turned off (TETHER_MCP=0): no servers.");
                EXIT_OK
            }
        });
    }
    let Some(config_dir) = args.config_dir.clone().or_else(tether::default_config_dir) else {
        eprintln!(
            "error: no configuration folder: set HOME, TETHER_CONFIG_DIR or pass --config-dir"
        );
        return ExitCode::from(EXIT_USAGE);
    };
    let _ = &args.project; // The project scope arrives with the configuration work.
    let config = Config::load(&config_dir);
    for warning in &config.warnings {
        log::warn!("{warning}");
    }
    let signals = match SignalWatch::start() {
        Ok(signals) => signals,
        Err(err) => {
            eprintln!("error: cannot watch signals: {err}");
            return ExitCode::from(EXIT_SERVER);
        }
    };
    let code = match command {
        Command::List { json } => list(config, *json, &signals),
        Command::Tools { server, json } => tools(config, server.as_deref(), *json, &signals),
        Command::Call { server, tool, arguments, timeout, json } => {
            call(config, server, tool, arguments.as_deref(), *timeout, *json, &signals)
        }
    };
    signals.stop();
    ExitCode::from(code)
}

fn parse_args() -> Result<Args, lexopt::Error> {
    let mut args = Args::default();
    let mut parser = lexopt::Parser::from_env();
    while let Some(arg) = parser.next()? {
        match arg {
            Long("config-dir") => args.config_dir = Some(parser.value()?.into()),
            Long("project") => args.project = Some(parser.value()?.into()),
            Short('v') | Long("verbose") => args.verbosity += 1,
            Short('q') | Long("quiet") => args.verbosity = -1,
            Short('h') | Long("help") => args.help = true,
            Short('V') | Long("version") => args.version = true,
            Value(word) => {
                let word = word.string()?;
                args.command = Some(match word.as_str() {
                    "list" => parse_list(&mut parser)?,
                    "tools" => parse_tools(&mut parser)?,
                    "call" => parse_call(&mut parser)?,
                    "help" => {
                        args.help = true;
                        return Ok(args);
                    }
                    other => return Err(format!("unknown command {other:?}").into()),
                });
                return Ok(args);
            }
            _ => return Err(arg.unexpected()),
        }
    }
    Ok(args)
}

fn parse_list(parser: &mut lexopt::Parser) -> Result<Command, lexopt::Error> {
    let mut json = false;
    while let Some(arg) = parser.next()? {
        match arg {
            Long("json") => json = true,
            _ => return Err(arg.unexpected()),
        }
    }
    Ok(Command::List { json })
}

fn parse_tools(parser: &mut lexopt::Parser) -> Result<Command, lexopt::Error> {
    let (mut server, mut json) = (None, false);
    while let Some(arg) = parser.next()? {
        match arg {
            Long("server") => server = Some(parser.value()?.string()?),
            Long("json") => json = true,
            _ => return Err(arg.unexpected()),
        }
    }
    Ok(Command::Tools { server, json })
}

fn parse_call(parser: &mut lexopt::Parser) -> Result<Command, lexopt::Error> {
    let mut positional = Vec::new();
    let (mut timeout, mut json) = (None, false);
    while let Some(arg) = parser.next()? {
        match arg {
            Long("timeout") => {
                let seconds: f64 = parser.value()?.parse()?;
                if !(seconds > 0.0 && seconds < 1e7) {
                    return Err("--timeout takes a positive number of seconds".into());
                }
                timeout = Some(Duration::from_secs_f64(seconds));
            }
            Long("json") => json = true,
            Value(word) if positional.len() < 3 => positional.push(word.string()?),
            _ => return Err(arg.unexpected()),
        }
    }
    let mut positional = positional.into_iter();
    let (Some(server), Some(tool)) = (positional.next(), positional.next()) else {
        return Err("usage: tether call SERVER TOOL [ARGS_JSON|-] [--timeout S] [--json]".into());
    };
    Ok(Command::Call { server, tool, arguments: positional.next(), timeout, json })
}

fn init_logging(verbosity: i32) {
    let level = match verbosity {
        i32::MIN..=-1 => "error",
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(level))
        .format_target(false)
        .init();
}

/// Watches SIGINT, SIGTERM and SIGHUP on a named thread; on the first one it
/// shuts the current hub down (ending every server's process group) and exits.
struct SignalWatch {
    hub: Arc<Mutex<Option<Hub>>>,
    handle: signal_hook::iterator::Handle,
    thread: std::thread::JoinHandle<()>,
}

impl SignalWatch {
    fn start() -> io::Result<SignalWatch> {
        let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP])?;
        let handle = signals.handle();
        let hub: Arc<Mutex<Option<Hub>>> = Arc::new(Mutex::new(None));
        let watched = Arc::clone(&hub);
        let thread =
            std::thread::Builder::new().name("tether-signals".into()).spawn(move || {
                if let Some(signal) = signals.forever().next() {
                    INTERRUPTED.store(true, Ordering::SeqCst);
                    log::info!("signal {signal}: shutting down");
                    let hub = watched.lock().unwrap().clone(); // Poisoned only if a holder panicked.
                    if let Some(hub) = hub {
                        hub.shutdown();
                    }
                    std::process::exit(128 + signal);
                }
            })?;
        Ok(SignalWatch { hub, handle, thread })
    }

    /// Starts a hub that a signal will shut down.
    fn start_hub(&self, config: Config) -> Hub {
        // The lock is held while the servers are spawned: a signal arriving
        // meanwhile waits for it, then finds the hub and ends them.
        let mut slot = self.hub.lock().unwrap(); // Poisoned only if a holder panicked.
        let hub = Hub::start(config, HubOptions { background: true, ..HubOptions::default() });
        *slot = Some(hub.clone());
        drop(slot);
        hub.wait_started();
        hub
    }

    fn stop(self) {
        {
            // Held through the shutdown, so that a signal during it waits
            // for the servers to be gone instead of exiting halfway.
            let slot = self.hub.lock().unwrap(); // Poisoned only if a holder panicked.
            if let Some(hub) = slot.as_ref() {
                hub.shutdown();
            }
        }
        self.handle.close();
        let _ = self.thread.join();
    }
}

/// Writes to stdout; a closed pipe (`tether list | head`) is not an error.
fn emit(text: &str) {
    if OUTPUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut stdout = io::stdout().lock();
    if let Err(err) = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        if err.kind() == io::ErrorKind::BrokenPipe {
            OUTPUT_CLOSED.store(true, Ordering::Relaxed);
        } else {
            eprintln!("error: cannot write the output: {err}");
        }
    }
}

fn report(err: &Error) -> u8 {
    if INTERRUPTED.load(Ordering::SeqCst) {
        return EXIT_SERVER;
    }
    eprintln!("error: {err}");
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        eprintln!("  caused by: {cause}");
        source = cause.source();
    }
    match err.root() {
        // The server answered, correctly: the request was wrong.
        Error::Rpc(rpc) if rpc.code == -32601 || rpc.code == -32602 => EXIT_USAGE,
        // The server answered with an error of its own.
        Error::Rpc(_) => EXIT_TOOL_ERROR,
        _ if err.is_server_failure() => EXIT_SERVER,
        _ => EXIT_USAGE,
    }
}

fn list(config: Config, json: bool, signals: &SignalWatch) -> u8 {
    let hub = signals.start_hub(config);
    let statuses = hub.status();
    if json {
        emit(&format!("{}\n", serde_json::to_string_pretty(&statuses).unwrap_or_default()));
    } else if statuses.is_empty() {
        eprintln!("No servers configured. Add one to mcp.json in the configuration folder.");
    } else {
        emit(&render_list(&statuses));
    }
    let all_connected = statuses
        .iter()
        .all(|status| matches!(status.state, ServerState::Ready | ServerState::Disabled));
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
        let scope = serde_json::to_value(status.scope)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        out.push_str(
            format!(
                "{:name_width$}  {:<10}  {:<5}  {:<7}  {tools}",
                status.name,
                status.state.label(),
                status.transport,
                scope
            )
            .trim_end(),
        );
        out.push('\n');
        if let Some(error) = &status.error {
            out.push_str(&format!("    error: {error}\n"));
        }
        if let Some(hint) = &status.hint {
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
            None => return report(&Error::UnknownServer(server.to_owned())),
        },
    };
    let hub = signals.start_hub(config);
    let tools: Vec<_> = hub
        .tools()
        .into_iter()
        .filter(|tool| server.is_none_or(|name| names_equal(&tool.server, name)))
        .collect();
    if json {
        let rows: Vec<Value> = tools
            .iter()
            .map(|entry| {
                json!({
                    "name": entry.qualified_name,
                    "server": entry.server,
                    "tool": entry.tool.name,
                    "exposure": "direct",
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
                format!("{:width$}  direct  {description}", entry.qualified_name).trim_end(),
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
                && server.is_none_or(|name| names_equal(&status.name, name))
        })
        .collect();
    for status in &failed {
        eprintln!(
            "warning: server {:?} is not connected: {}",
            status.name,
            status.error.as_deref().unwrap_or("?")
        );
    }
    if failed.is_empty() {
        EXIT_OK
    } else {
        EXIT_TOOL_ERROR
    }
}

fn names_equal(a: &str, b: &str) -> bool {
    a.replace('-', "_") == b.replace('-', "_")
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
    let Some(server_config) = config.server(server).cloned() else {
        if let Some(failed) = config.failed.iter().find(|entry| names_equal(&entry.name, server)) {
            eprintln!("error: server {server:?} has an invalid entry: {}", failed.error);
            return EXIT_USAGE;
        }
        return report(&Error::UnknownServer(server.to_owned()));
    };
    if !server_config.enabled {
        eprintln!("error: server {:?} is disabled (\"enabled\": false)", server_config.name);
        return EXIT_USAGE;
    }
    let name = server_config.name.clone();
    let hub = signals.start_hub(Config::new().with_server(server_config));
    if let Some(status) = hub.status().into_iter().find(|status| status.state != ServerState::Ready)
    {
        if INTERRUPTED.load(Ordering::SeqCst) {
            return EXIT_SERVER;
        }
        eprintln!(
            "error: server {name:?} failed to start: {}",
            status.error.as_deref().unwrap_or("unknown error")
        );
        if let Some(hint) = &status.hint {
            eprintln!("  hint: {hint}");
        }
        if let Some(tail) = &status.stderr_tail {
            for line in last_lines(tail, 10) {
                eprintln!("  stderr: {line}");
            }
        }
        return EXIT_SERVER;
    }
    let mut options = CallOptions { timeout, ..CallOptions::default() };
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
