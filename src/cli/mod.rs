//! The `tether` command line: arguments → configuration → hub → output → exit code.
//!
//! A hand-written lexopt loop fills a plain [`Args`]; each command is a
//! function returning an exit code. Commands that talk to servers live in
//! `connect`, commands that change the configuration files in `manage`.
//! stdout carries only results; errors go to stderr as `error: …` naming the
//! server, then a hint.

#[macro_use]
mod output;

mod adhoc;
mod args;
mod arguments;
mod browse;
#[cfg(feature = "desktop")]
mod completion;
mod connect;
mod escape;
mod form;
mod get;
mod help;
#[cfg(feature = "serve")]
mod keep;
mod login;
mod logs;
mod manage;
mod progress;
mod proxy;
mod run;
#[cfg(feature = "serve")]
mod serve;
mod signals;
mod starting;
mod status;
mod table;
mod terminal;
mod watch;

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;
use std::sync::atomic::Ordering;

use std::sync::Arc;
use std::time::Duration;

use tether::{ConfigFiles, ConfigLoader, HubOptions, LogFile, Root};

use args::Command;
use output::{EXIT_OK, EXIT_SERVER, EXIT_TOOL_ERROR, EXIT_USAGE, OUTPUT_FAILED};

/// How long a server of a one-shot command may take to exit once its input
/// ends, before SIGTERM (an entry's `shutdownTimeout` says otherwise).
const ONE_SHOT_GRACE: Duration = Duration::from_millis(150);

/// Runs the command line and returns the process exit code: 1 for a
/// command that succeeded but could not write its result.
pub fn main() -> ExitCode {
    let code = run();
    if code == ExitCode::from(EXIT_OK) && OUTPUT_FAILED.load(Ordering::Relaxed) {
        return ExitCode::from(EXIT_TOOL_ERROR);
    }
    // With --json, the errors kept are said now, as one object.
    let exit = (0..=u8::MAX).find(|n| ExitCode::from(*n) == code).unwrap_or(EXIT_TOOL_ERROR);
    output::finish_errors(exit);
    code
}

fn run() -> ExitCode {
    // `--json` before a command (or a malformed one) is known: its errors
    // are one JSON object too.
    if std::env::args_os().skip(1).take_while(|arg| arg != "--").any(|arg| arg == "--json") {
        output::json_errors();
    }
    let args = match args::parse(std::env::args_os().skip(1)) {
        Ok(args) => args,
        Err(err) => {
            // The help of the command being written, when there is one.
            let command = std::env::args()
                .skip(1)
                .find(|word| help::of(word).is_some())
                .map_or_else(|| "tether".to_owned(), |command| format!("tether {command}"));
            errln!("{err}\nRun `{command} --help` for usage.");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let debug_log = match &args.command {
        Some(Command::Proxy(proxy)) => proxy.debug_log.clone(),
        _ => None,
    };
    if let Err(err) = init_logging(args.verbosity, debug_log.as_deref()) {
        errln!("{err}");
        return ExitCode::from(EXIT_USAGE);
    }
    if args.help {
        return match args.help_topic.as_deref() {
            None => {
                out!("{}", help::GLOBAL);
                ExitCode::from(EXIT_OK)
            }
            Some(topic) => match help::of(topic) {
                Some(text) => {
                    out!("{text}");
                    ExitCode::from(EXIT_OK)
                }
                None => {
                    errln!("no command {topic:?}\nRun `tether --help` for the commands.");
                    ExitCode::from(EXIT_USAGE)
                }
            },
        };
    }
    if args.version {
        outln!("tether {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::from(EXIT_OK);
    }
    let Some(mut command) = args.command else {
        eprint!("{}", help::GLOBAL);
        return ExitCode::from(EXIT_USAGE);
    };
    if let Some(file) = args.config_file.as_deref().filter(|file| !file.is_file()) {
        errln!("--config {}: no such file", escape::escaped(&file.display().to_string()));
        return ExitCode::from(EXIT_USAGE);
    }
    // How to run tether again on the same files, for the hints.
    let again = manage::SameFiles::new(args.config_dir.as_deref(), args.project.as_deref());
    let Some(config_dir) = args.config_dir.or_else(tether::default_config_dir) else {
        errln!("no configuration folder: set HOME, TETHER_CONFIG_DIR or pass --config-dir");
        return ExitCode::from(EXIT_USAGE);
    };
    let project = match args.project.map_or_else(std::env::current_dir, Ok) {
        Ok(project) => project,
        Err(err) => {
            errln!("cannot tell the current directory: {err}; pass --project");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let roots = match roots_of(&args.roots, args.no_roots, &project) {
        Ok(roots) => roots,
        Err(message) => {
            errln!("{message}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let files = ConfigFiles::new(config_dir, project);
    // `tether --keep-alive add …` means what `add --keep-alive` does.
    if let (Command::Add(add), true) = (&mut command, args.keep_alive) {
        add.keep_alive = true;
    }
    // `--config FILE` is one run's servers: the commands that write files
    // would write others, which FILE then hides.
    let writes = matches!(
        command,
        Command::Add(_)
            | Command::Remove { .. }
            | Command::Enable { .. }
            | Command::Expose { .. }
            | Command::Trust { .. }
            | Command::Import { .. }
    );
    if let (true, Some(file)) = (writes, args.config_file.as_deref()) {
        errln!(
            "--config {} names one run's servers; this command writes the user, project or \
             local file, which --config would hide: edit that file, or drop --config",
            escape::escaped(&file.display().to_string())
        );
        return ExitCode::from(EXIT_USAGE);
    }
    let code = match command {
        Command::Add(add) => manage::add(&files, add, &again),
        #[cfg(feature = "desktop")]
        Command::Completion { shell } => completion::completion(&shell),
        #[cfg(not(feature = "desktop"))]
        Command::Completion { .. } => {
            errln!(
                "this tether was built without completion scripts (the \"desktop\" cargo feature)"
            );
            EXIT_USAGE
        }
        #[cfg(feature = "serve")]
        Command::Sessions { end: false, json, .. } => keep::sessions::list(json),
        #[cfg(feature = "serve")]
        Command::Sessions { end: true, names, all, .. } => keep::sessions::end(&names, all),
        #[cfg(feature = "serve")]
        Command::Attach { socket } => keep::attach::attach(&socket),
        #[cfg(not(feature = "serve"))]
        Command::Sessions { .. } | Command::Attach { .. } | Command::Keeper { .. } => {
            errln!(
                "this tether was built without kept-alive sessions (the \"serve\" cargo feature)"
            );
            EXIT_USAGE
        }
        Command::Remove { name, scope } => manage::remove(&files, &name, scope, &again),
        Command::Enable { name, enabled, scope } => {
            manage::enable(&files, &name, enabled, scope, &again)
        }
        Command::Trust { dir, trusted, yes } => manage::trust(&files, dir, trusted, yes, &again),
        #[cfg(feature = "desktop")]
        Command::Import { file: Some(file) } => manage::import(&files, &file, &again),
        #[cfg(feature = "desktop")]
        Command::Import { file: None } => manage::import_found(&files, &again),
        #[cfg(not(feature = "desktop"))]
        Command::Import { .. } => {
            errln!("this tether was built without import (the \"desktop\" cargo feature)");
            EXIT_USAGE
        }
        Command::Expose { name, mode, tool, scope } => {
            manage::expose(&files, &name, mode, tool.as_deref(), scope, &again)
        }
        Command::Logs { server, lines, follow } => {
            if let Some(name) = &server {
                let config = ConfigLoader::new()
                    .config_dir(&files.config_dir)
                    .project_dir(&files.project_dir)
                    .load();
                if !config.knows(name) {
                    return ExitCode::from(starting::unknown_server(&config, name));
                }
            }
            logs::logs(&files.config_dir, server.as_deref(), lines, follow)
        }
        _ => {
            // Watched from the start: Ctrl-C while a `!command` helper runs
            // (asking for a password, say) ends tether and the helper.
            let mut signals = match signals::SignalWatch::start() {
                Ok(signals) => signals,
                Err(err) => {
                    errln!("cannot watch signals: {err}");
                    return ExitCode::from(EXIT_SERVER);
                }
            };
            let scripted = match scripted_answers(args.answers.as_deref(), args.accept_defaults) {
                Ok(scripted) => scripted,
                Err(why) => {
                    errln!("{why}");
                    return ExitCode::from(EXIT_USAGE);
                }
            };
            let run = Run {
                only_file: args.config_file.as_deref(),
                keep_alive: args.keep_alive,
                scripted,
            };
            let code = with_config(command, &files, &run, roots, &mut signals);
            signals.stop().unwrap_or(code)
        }
    };
    ExitCode::from(code)
}

/// Global options of the run that the configuration's commands read.
struct Run<'a> {
    /// `--config FILE`.
    only_file: Option<&'a std::path::Path>,
    /// `--keep-alive`.
    keep_alive: bool,
    /// `--answers`, `--accept-defaults`.
    scripted: Option<terminal::Scripted>,
}

/// `--answers JSON|@FILE` and `--accept-defaults`, read: the answers must be
/// a JSON object.
fn scripted_answers(
    answers: Option<&str>,
    accept_defaults: bool,
) -> Result<Option<terminal::Scripted>, String> {
    let answers = match answers {
        None => None,
        Some(given) => {
            let text = match given.strip_prefix('@') {
                Some("") => return Err("--answers @ names no file: --answers @FILE".into()),
                Some(file) => std::fs::read_to_string(file)
                    .map_err(|err| format!("--answers: cannot read {file}: {err}"))?,
                // A word, not JSON: the value was forgotten (`--answers call …`).
                None if !given.trim_start().starts_with('{') => {
                    return Err(format!("--answers takes a JSON object or @FILE, not {given:?}"))
                }
                None => given.to_owned(),
            };
            match serde_json::from_str::<serde_json::Value>(&text) {
                Ok(serde_json::Value::Object(answers)) => Some(answers),
                Ok(_) => return Err("--answers takes a JSON object of the fields' values".into()),
                Err(err) => return Err(format!("--answers is not JSON: {err}")),
            }
        }
    };
    Ok((answers.is_some() || accept_defaults)
        .then(|| terminal::Scripted { answers, accept_defaults }))
}

/// The commands that read the configuration: `get`, `login`, `logout`, and
/// those that talk to servers.
fn with_config(
    mut command: Command,
    files: &ConfigFiles,
    run: &Run<'_>,
    roots: Vec<Root>,
    signals: &mut signals::SignalWatch,
) -> u8 {
    let only_file = run.only_file;
    let mut loader =
        ConfigLoader::new().config_dir(&files.config_dir).project_dir(&files.project_dir);
    if let Some(file) = only_file {
        loader = loader.only_file(file);
    }
    let mut config = loader.load();
    // The words that made ad-hoc entries, by the entry's name.
    let mut adhoc_words = std::collections::HashMap::new();
    // A URL or `--stdio CMD` where a server's name goes: an entry for this
    // run, trusted as the user's own command line.
    // `run --stdio CMD --url URL`: servers for the script, named as the
    // other commands name them.
    if let Command::Run { adhoc: words, .. } = &command {
        for word in words {
            match adhoc::entry(word, &config) {
                Ok(entry) => {
                    eprintln!(
                        "note: {} is the server {:?} (tools.mcp__{}__…)",
                        escape::escaped(word.trim_start_matches(adhoc::STDIO)),
                        entry.name,
                        entry.name.replace('-', "_")
                    );
                    adhoc_words.insert(entry.name.clone(), word.clone());
                    config = config.with_server(entry);
                }
                Err(message) => {
                    errln!("{}", escape::escaped(&message));
                    return EXIT_USAGE;
                }
            }
        }
    }
    if let Some(server) = command.server_mut().filter(|word| adhoc::is_adhoc(word)) {
        match adhoc::entry(server, &config) {
            Ok(entry) => {
                adhoc_words.insert(entry.name.clone(), server.clone());
                server.clone_from(&entry.name);
                config = config.with_server(entry);
            }
            Err(message) => {
                errln!("{}", escape::escaped(&message));
                return EXIT_USAGE;
            }
        }
    }
    if config.off {
        // Off means off: no file was read and no server is started.
        if !matches!(
            command,
            Command::List { .. }
                | Command::Tools { .. }
                | Command::Resources { .. }
                | Command::Prompts { .. }
        ) {
            errln!("MCP is turned off (TETHER_MCP=0)");
            return EXIT_USAGE;
        }
        eprintln!("MCP is turned off (TETHER_MCP=0): no servers.");
        return EXIT_OK;
    }
    // Said as every other warning is (not silenced but by -q): the file's
    // own, and an entry's (a literal credential) when the command uses that
    // server; `list` and `get` show every server's.
    if log::log_enabled!(log::Level::Warn) {
        let used = command.server().and_then(|name| config.server(name));
        for warning in config.warnings.iter().chain(used.iter().flat_map(|s| &s.warnings)) {
            eprintln!("warning: {}", escape::escaped(warning));
        }
    }
    let store = files.config_dir.join("mcp-auth.json");
    match command {
        Command::Get { name, json } => return get::get(&config, &store, &name, json),
        Command::Login { name, overrides } => {
            return login::login(&config, &store, &name, &overrides)
        }
        Command::Logout { name } => return login::logout(&config, &store, &name),
        _ => {}
    }
    let options = HubOptions::default()
        .with_log_sink(Arc::new(LogFile::new(files.config_dir.join("mcp.log"))))
        .with_token_store(&store)
        // Each server's era is found once, not at every run.
        .with_era_file(&files.config_dir.join("eras.json"));
    #[cfg(feature = "serve")]
    if let Command::Keeper { server, socket, idle } = &command {
        let keeping = keep::keeper::Keeping { server, socket, idle: *idle };
        return keep::keeper::keep(config, &keeping, options, signals);
    }
    // The script, read now: the servers it names are the ones kept.
    #[cfg(feature = "serve")]
    if let Command::Run { file, code, .. } = &mut command {
        match run::source(file.as_deref(), code.as_deref()) {
            Ok(source) => {
                *code = Some(source);
                *file = None;
            }
            Err(message) => {
                errln!("{message}");
                return EXIT_USAGE;
            }
        }
    }
    #[cfg(feature = "serve")]
    let kept = {
        let invocation = keep::Invocation {
            config_dir: &files.config_dir,
            project_dir: &files.project_dir,
            only_file,
            adhoc: &adhoc_words,
        };
        match keep::reach(&mut config, &command, run.keep_alive, &invocation) {
            Ok(kept) => kept,
            Err(code) => return code,
        }
    };
    #[cfg(not(feature = "serve"))]
    let kept: Vec<String> = Vec::new();
    #[cfg(not(feature = "serve"))]
    if run.keep_alive {
        errln!("this tether was built without kept-alive sessions (the \"serve\" cargo feature)");
        return EXIT_USAGE;
    }
    let mut options = options
        .with_host(Arc::new(terminal::TerminalHost::new(roots.clone(), run.scripted.clone())))
        // A one-shot command has its answer: a server that does not
        // exit when its input ends (many do not) gets SIGTERM soon.
        .with_shutdown_grace(ONE_SHOT_GRACE);
    // On a terminal a server that wants a sign-in gets one; a script
    // never opens a browser by itself (the server shows "needs login").
    if io::stdin().is_terminal() && io::stderr().is_terminal() {
        options = options.with_authorization_handler(Arc::new(login::TerminalSignIn::new(&config)));
    }
    let root_uris: Vec<String> = roots.into_iter().map(|root| root.uri).collect();
    connect::run(command, config, options, (&root_uris, &store, &kept), signals)
}

/// The folders servers may work in: `--root` folders, else the project
/// folder; none with `--no-roots`.
fn roots_of(
    given: &[std::path::PathBuf],
    none: bool,
    project: &std::path::Path,
) -> Result<Vec<Root>, String> {
    if none {
        if !given.is_empty() {
            return Err("--no-roots and --root do not go together".into());
        }
        return Ok(Vec::new());
    }
    if given.is_empty() {
        // The project folder as given or found; made absolute without
        // resolving links, which is what the user sees.
        let absolute = std::path::absolute(project).unwrap_or_else(|_| project.to_owned());
        return Ok(vec![Root::for_folder(&absolute)]);
    }
    given
        .iter()
        .map(|folder| match std::fs::canonicalize(folder) {
            Ok(path) if path.is_dir() => Ok(Root::for_folder(&path)),
            Ok(_) => Err(format!("--root {}: not a folder", folder.display())),
            Err(err) => Err(format!("--root {}: {err}", folder.display())),
        })
        .collect()
}

/// Logs to stderr at the level `-v`/`-q` set; with `debug_log` (`tether
/// proxy --debug-log FILE`) to that file instead, at debug level.
fn init_logging(verbosity: i32, debug_log: Option<&std::path::Path>) -> Result<(), String> {
    let verbosity = if debug_log.is_some() { verbosity.max(2) } else { verbosity };
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
    let mut builder =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(level));
    builder
        .filter_module("ureq", log::LevelFilter::Info)
        .filter_module("ureq_proto", log::LevelFilter::Info)
        .filter_module("rustls", log::LevelFilter::Info)
        // A log line may carry a server's words (its stderr, a skipped
        // frame, an error message): escaped, so that it cannot move the
        // cursor or hide lines on the terminal.
        .format(|out, record| {
            let message = escape::escaped(&record.args().to_string());
            writeln!(out, "[{:<5}] {message}", record.level())
        });
    if let Some(path) = debug_log {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|err| format!("--debug-log {}: {err}", path.display()))?;
        builder.target(env_logger::Target::Pipe(Box::new(file)));
    }
    builder.init();
    Ok(())
}
