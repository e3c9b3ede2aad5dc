//! The `tether` command line: arguments → configuration → hub → output → exit code.
//!
//! A hand-written lexopt loop fills a plain [`Args`]; each command is a
//! function returning an exit code. Commands that talk to servers live in
//! `connect`, commands that change the configuration files in `manage`.
//! stdout carries only results; errors go to stderr as `error: …` naming the
//! server, then a hint.

mod args;
mod browse;
mod connect;
mod login;
mod logs;
mod manage;
mod status;
mod terminal;

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use std::sync::Arc;
use std::time::Duration;

use tether::{ConfigFiles, ConfigLoader, Error, HubOptions, LogFile};

use args::Command;

const HELP: &str = "\
tether: a Model Context Protocol client

Usage: tether [GLOBAL OPTIONS] COMMAND [ARGS]

Servers:
  list [NAME...] [--scope user|project] [--json]
                                  connect the enabled servers and show each one's state
  tools [--server NAME] [--json]  the tools as the model sees them
  call SERVER TOOL [ARGS_JSON|-] [--timeout S] [--json], call mcp__SERVER__TOOL [ARGS_JSON|-]
                                  call one tool (ARGS_JSON defaults to {}; - reads stdin)
  resources [--server NAME] [--json]
                                  the resources and resource templates servers offer
  read SERVER URI [--raw] [--json]
                                  read a resource: text to stdout, binary to a file
  prompts [--server NAME] [--json]
                                  the prompts servers offer
  prompt SERVER NAME [ARGS_JSON|-] [--json]
                                  get a prompt with its arguments filled in

Configuration:
  add NAME [-l] [--env K=V]... [--description TEXT] -- COMMAND [ARGS...]
  add NAME [-l] --url URL [--transport http|sse] [--header K=V]...
           [--bearer-token-env-var VAR] [--description TEXT]
  add                             (on a terminal) asks for each setting
  remove NAME [-l | --user]       remove a server (-l: from the project file)
    enable NAME, disable NAME       turn a server on or off where it is defined
  expose NAME MODE [--tool PATTERN] [-l]
                                  how its tools reach the model: direct, deferred, hidden
  trust [DIR], untrust [DIR]      let a project's .mcp.json start servers (or not)
  login NAME [--callback-port P] [--client-id ID [--client-secret S]]
                                  sign in to an HTTP server (OAuth); tokens go to mcp-auth.json
  logout NAME                     forget a server's tokens and registered client
    import FILE                     copy servers from Claude, Cursor or VS Code config

Logs:
  logs [--server NAME] [-n N] [-f]
                                  the servers' log messages (mcp.log); -f follows

Global options (before the command):
  --config-dir DIR   user configuration folder (default: $TETHER_CONFIG_DIR,
                     else $XDG_CONFIG_HOME/tether, else ~/.config/tether)
  --project DIR      the project folder, with .mcp.json (default: the current directory)
  -v, --verbose      more log output on stderr (repeat for more); RUST_LOG overrides
  -q, --quiet        only errors on stderr
  -h, --help         this text
  -V, --version      the version

Exit codes: 0 success; 1 the tool reported an error, or `list` found a server
not connected; 2 bad usage, bad JSON, unknown server or tool, invalid config;
3 the server could not be reached or broke the protocol.
";

/// How long a server of a one-shot command may take to exit once its input
/// ends, before SIGTERM (an entry's `shutdownTimeout` says otherwise).
const ONE_SHOT_GRACE: Duration = Duration::from_millis(150);

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

/// Runs the command line and returns the process exit code.
pub fn main() -> ExitCode {
    let args = match args::parse(std::env::args_os().skip(1)) {
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
    let Some(command) = args.command else {
        eprint!("{HELP}");
        return ExitCode::from(EXIT_USAGE);
    };
    let Some(config_dir) = args.config_dir.or_else(tether::default_config_dir) else {
        eprintln!(
            "error: no configuration folder: set HOME, TETHER_CONFIG_DIR or pass --config-dir"
        );
        return ExitCode::from(EXIT_USAGE);
    };
    let project = match args.project.map_or_else(std::env::current_dir, Ok) {
        Ok(project) => project,
        Err(err) => {
            eprintln!("error: cannot tell the current directory: {err}; pass --project");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let files = ConfigFiles::new(config_dir, project);
    let code = match command {
        Command::Add(add) => manage::add(&files, add),
        Command::Remove { name, scope } => manage::remove(&files, &name, scope),
        Command::Enable { name, enabled } => manage::enable(&files, &name, enabled),
        Command::Trust { dir, trusted } => manage::trust(&files, dir, trusted),
        Command::Import { file } => manage::import(&files, &file),
        Command::Expose { name, mode, tool, project } => {
            manage::expose(&files, &name, mode, tool.as_deref(), project)
        }
        Command::Logs { server, lines, follow } => {
            logs::logs(&files.config_dir, server.as_deref(), lines, follow)
        }
        _ => {
            let config = ConfigLoader::new()
                .config_dir(&files.config_dir)
                .project_dir(&files.project_dir)
                .load();
            if config.off {
                // Off means off: no file was read and no server is started.
                if !matches!(
                    command,
                    Command::List { .. }
                        | Command::Tools { .. }
                        | Command::Resources { .. }
                        | Command::Prompts { .. }
                ) {
                    eprintln!("error: MCP is turned off (TETHER_MCP=0)");
                    return ExitCode::from(EXIT_USAGE);
                }
                eprintln!("MCP is turned off (TETHER_MCP=0): no servers.");
                return ExitCode::from(EXIT_OK);
            }
            for warning in &config.warnings {
                log::warn!("{warning}");
            }
            let store = files.config_dir.join("mcp-auth.json");
            match command {
                Command::Login { name, overrides } => {
                    return ExitCode::from(login::login(&config, &store, &name, &overrides))
                }
                Command::Logout { name } => {
                    return ExitCode::from(login::logout(&config, &store, &name))
                }
                _ => {}
            }
            let mut options = HubOptions::default()
                .with_host(Arc::new(terminal::TerminalHost::new()))
                .with_log_sink(Arc::new(LogFile::new(files.config_dir.join("mcp.log"))))
                .with_token_store(&store)
                // A one-shot command has its answer: a server that does not
                // exit when its input ends (many do not) gets SIGTERM soon.
                .with_shutdown_grace(ONE_SHOT_GRACE);
            // On a terminal a server that wants a sign-in gets one; a script
            // never opens a browser by itself (the server shows "needs login").
            if io::stdin().is_terminal() && io::stderr().is_terminal() {
                options =
                    options.with_authorization_handler(Arc::new(login::TerminalSignIn::default()));
            }
            connect::run(command, config, options)
        }
    };
    ExitCode::from(code)
}

fn init_logging(verbosity: i32) {
    let level = match verbosity {
        i32::MIN..=-1 => "error",
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    // The HTTP and TLS crates' own debug and trace lines show request
    // headers (tokens, keys) and raw bytes: they stay out at every level,
    // whatever RUST_LOG says; tether logs what it sends itself.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(level))
        .filter_module("ureq", log::LevelFilter::Info)
        .filter_module("ureq_proto", log::LevelFilter::Info)
        .filter_module("rustls", log::LevelFilter::Info)
        .format_target(false)
        .init();
}

/// Writes to stdout; a closed pipe (`tether list | head`) is not an error.
pub(crate) fn emit(text: &str) {
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

pub(crate) fn report(err: &Error) -> u8 {
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

/// Locks, also when a former holder panicked: what the CLI guards is plain
/// data that a panic cannot leave half-written.
fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
