//! The command line as data: a hand-written lexopt loop turns the arguments
//! into [`Args`] and one [`Command`], from any iterator of arguments, so that
//! every command's parsing is unit-tested without running anything.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use lexopt::prelude::*;

mod add;
mod scope;

pub(crate) use add::{key_value, AddArgs};
use scope::{scope_flag, scope_of};

#[derive(Debug, Default)]
pub(super) struct Args {
    pub(super) config_dir: Option<PathBuf>,
    /// `--config FILE`: this run's servers are that file's alone.
    pub(super) config_file: Option<PathBuf>,
    pub(super) project: Option<PathBuf>,
    /// `--root DIR`, in order; empty means the project folder.
    pub(super) roots: Vec<PathBuf>,
    /// `--no-roots`: offer the servers no folder.
    pub(super) no_roots: bool,
    /// `--keep-alive`: the command's servers kept running for the next
    /// command (a kept-alive session each).
    pub(super) keep_alive: bool,
    pub(super) verbosity: i32,
    pub(super) command: Option<Command>,
    /// `--help` (or `help`): the global help, or with `help_topic` a command's.
    pub(super) help: bool,
    pub(super) help_topic: Option<String>,
    pub(super) version: bool,
}

#[derive(Debug)]
pub(super) enum Command {
    List {
        names: Vec<String>,
        scope: Option<tether::Scope>,
        json: bool,
        /// `--no-connect`: the configuration alone; nothing starts.
        no_connect: bool,
    },
    Get {
        name: String,
        json: bool,
    },
    Tools {
        server: Option<String>,
        json: bool,
        /// `--signatures`: the TypeScript-style signatures scripts see.
        signatures: bool,
    },
    Resources {
        server: Option<String>,
        json: bool,
    },
    Read {
        server: String,
        uri: String,
        output: Option<PathBuf>,
        raw: bool,
        json: bool,
    },
    Prompts {
        server: Option<String>,
        json: bool,
    },
    Prompt {
        server: String,
        name: String,
        arguments: Option<String>,
        /// `key=value` words, in place of `arguments`.
        pairs: Vec<String>,
        json: bool,
    },
    /// `watch SERVER URI [--count N] [--read] [--json]`.
    Watch {
        server: String,
        uri: String,
        count: Option<usize>,
        read: bool,
        json: bool,
    },
    /// `complete SERVER (--prompt NAME | --resource TEMPLATE) ARG [VALUE]`.
    Complete {
        server: String,
        reference: tether::CompletionRef,
        argument: String,
        value: String,
        /// `--context k=v`: the arguments chosen already.
        context: Vec<String>,
        json: bool,
    },
    Call {
        server: String,
        tool: String,
        /// A JSON object, or `-` for stdin.
        arguments: Option<String>,
        /// `key=value` words (`k:=JSON`, `k=@FILE`, `k=@-`), in place of
        /// `arguments`, typed by the tool's schema.
        pairs: Vec<String>,
        timeout: Option<Duration>,
        json: bool,
        /// `--max-chars N`: the printed text cut at N characters.
        max_chars: Option<usize>,
        /// `--save-images DIR`: each image block written to a file there.
        save_images: Option<PathBuf>,
    },
    Run {
        /// The script's file, or `-` for stdin; `None` with `code`, or
        /// to read a stdin that is not a terminal.
        file: Option<String>,
        /// `-e CODE`: the script itself.
        code: Option<String>,
        timeout: Option<Duration>,
        json: bool,
        /// `--stdio CMD` and `--url URL`: servers for this run alone.
        adhoc: Vec<String>,
    },
    #[cfg_attr(not(feature = "serve"), allow(dead_code))]
    Serve {
        /// The servers to serve; none: every enabled one. One: served with
        /// its own names.
        names: Vec<String>,
        /// `--status-tool`: offer `tether__status`.
        status_tool: bool,
        /// `--check`: start them, say how each is, and exit.
        check: bool,
        /// `--http ADDRESS` and its companions: Streamable HTTP, not stdio.
        http: HttpListen,
    },
    Proxy(Box<ProxyArgs>),
    Add(AddArgs),
    Remove {
        name: String,
        scope: Option<tether::Scope>,
    },
    Enable {
        name: String,
        enabled: bool,
        scope: Option<tether::Scope>,
    },
    Trust {
        dir: Option<PathBuf>,
        trusted: bool,
        /// `--yes`: approve without asking.
        yes: bool,
    },
    #[cfg_attr(not(feature = "desktop"), allow(dead_code))]
    Completion {
        /// `bash`, `zsh` or `fish`.
        shell: String,
    },
    #[cfg_attr(not(feature = "desktop"), allow(dead_code))]
    Import {
        /// None: offer the files other clients keep where they usually are.
        file: Option<PathBuf>,
    },
    Logs {
        server: Option<String>,
        lines: usize,
        follow: bool,
    },
    Expose {
        name: String,
        mode: tether::Exposure,
        tool: Option<String>,
        scope: Option<tether::Scope>,
    },
    Login {
        name: String,
        /// Only the client id, secret and callback port are read.
        overrides: tether::OAuthSettings,
    },
    Logout {
        name: String,
    },
    /// `sessions [--json]`, `sessions end NAME... | --all`.
    #[cfg_attr(not(feature = "serve"), allow(dead_code))]
    Sessions {
        end: bool,
        names: Vec<String>,
        all: bool,
        json: bool,
    },
    /// `_keeper --socket PATH --idle S SERVER`: a kept-alive session's
    /// background process (started by tether, not typed).
    #[cfg_attr(not(feature = "serve"), allow(dead_code))]
    Keeper {
        server: String,
        socket: PathBuf,
        idle: Duration,
    },
    /// `_attach SOCKET`: a kept-alive session as a stdio server (run by
    /// tether, not typed).
    #[cfg_attr(not(feature = "serve"), allow(dead_code))]
    Attach {
        socket: PathBuf,
    },
}

impl Command {
    /// The server field of a command that names one (for an ad-hoc server,
    /// replaced by its entry's name).
    pub(super) fn server_mut(&mut self) -> Option<&mut String> {
        match self {
            Command::Call { server, .. }
            | Command::Read { server, .. }
            | Command::Prompt { server, .. }
            | Command::Complete { server, .. }
            | Command::Watch { server, .. } => Some(server),
            Command::Tools { server, .. }
            | Command::Resources { server, .. }
            | Command::Prompts { server, .. } => server.as_mut(),
            Command::Keeper { server, .. } => Some(server),
            _ => None,
        }
    }

    /// The one server this command works with, when it names one.
    pub(super) fn server(&self) -> Option<&str> {
        match self {
            Command::Call { server, .. }
            | Command::Read { server, .. }
            | Command::Prompt { server, .. }
            | Command::Complete { server, .. }
            | Command::Watch { server, .. } => Some(server),
            Command::Tools { server, .. }
            | Command::Resources { server, .. }
            | Command::Prompts { server, .. } => server.as_deref(),
            Command::Login { name, .. } => Some(name),
            _ => None,
        }
    }
}

/// Parses the arguments after the program's name.
///
/// # Errors
/// What lexopt says of a malformed command line, or a usage line.
pub(super) fn parse(
    arguments: impl IntoIterator<Item = impl Into<OsString>>,
) -> Result<Args, lexopt::Error> {
    let mut args = Args::default();
    let mut parser = lexopt::Parser::from_args(arguments);
    while let Some(arg) = parser.next()? {
        match arg {
            Long("config-dir") => args.config_dir = Some(parser.value()?.into()),
            Long("config") => args.config_file = Some(parser.value()?.into()),
            Long("project") => args.project = Some(parser.value()?.into()),
            Long("root") => args.roots.push(parser.value()?.into()),
            Long("no-roots") => args.no_roots = true,
            Long("keep-alive") => args.keep_alive = true,
            Short('v') | Long("verbose") => args.verbosity += 1,
            Short('q') | Long("quiet") => args.verbosity = -1,
            Short('h') | Long("help") => args.help = true,
            Short('V') | Long("version") => args.version = true,
            Value(word) => {
                let word = word.string()?;
                if word == "help" {
                    args.help = true;
                    args.help_topic = optional_value(&mut parser)?;
                    return Ok(args);
                }
                // Run by tether itself, never typed: no help, no completion.
                #[cfg(feature = "serve")]
                if word == "_keeper" || word == "_attach" {
                    args.command = Some(parse_internal(&mut parser, &word)?);
                    return Ok(args);
                }
                if super::help::of(&word).is_none() {
                    let known: Vec<&str> = super::help::commands().collect();
                    // What other tools call these.
                    let alias = match word.as_str() {
                        "status" | "ls" => Some("list"),
                        "show" | "info" => Some("get"),
                        "rm" | "delete" => Some("remove"),
                        "invoke" | "exec" => Some("call"),
                        _ => None,
                    };
                    // `claude mcp add`, `codex mcp list`: tether's are top-level.
                    if word == "mcp" {
                        let next = parser.raw_args()?.next();
                        let next = next.and_then(|next| next.into_string().ok());
                        let shown = next.as_deref().filter(|next| super::help::of(next).is_some());
                        return Err(match shown {
                            Some(next) => format!(
                                "tether's commands are top-level: tether {next} … (not tether mcp {next})"
                            ),
                            None => "tether's commands are top-level (tether add, tether list, …); \
                                     there is no \"mcp\" command"
                                .to_owned(),
                        }
                        .into());
                    }
                    let hint = alias
                        .or_else(|| tether::for_cli::closest(&word, &known))
                        .map(|close| format!(" (did you mean {close:?}?)"))
                        .unwrap_or_default();
                    return Err(format!("unknown command {word:?}{hint}").into());
                }
                // `COMMAND --help` anywhere before a `--` asks for that command's help.
                let rest: Vec<OsString> = parser.raw_args()?.collect();
                let asks_help = rest
                    .iter()
                    .take_while(|arg| *arg != "--")
                    .any(|arg| arg == "-h" || arg == "--help");
                if asks_help {
                    args.help = true;
                    args.help_topic = Some(word);
                    return Ok(args);
                }
                // `--keep-alive` where the command's flags go, too.
                let mut rest = rest;
                if SERVER_COMMANDS.contains(&word.as_str()) {
                    let dashes = rest.iter().position(|arg| arg == "--").unwrap_or(rest.len());
                    let before = rest.len();
                    let mut at = 0;
                    rest.retain(|arg| {
                        at += 1;
                        !(at <= dashes && arg == "--keep-alive")
                    });
                    args.keep_alive |= rest.len() != before;
                }
                // For `add`, what follows `--` is the server's command, verbatim.
                let mut after_dashes = None;
                if word == "add" {
                    if let Some(at) = rest.iter().position(|arg| arg == "--") {
                        let tail = rest.split_off(at);
                        after_dashes = Some(
                            tail.into_iter()
                                .skip(1)
                                .map(|arg| {
                                    arg.into_string().map_err(lexopt::Error::NonUnicodeValue)
                                })
                                .collect::<Result<Vec<String>, _>>()?,
                        );
                    }
                }
                let mut parser = lexopt::Parser::from_args(rest);
                let parser = &mut parser;
                args.command = Some(match word.as_str() {
                    "list" => parse_list(parser)?,
                    "get" => parse_get(parser)?,
                    "tools" | "resources" | "prompts" => parse_listing(parser, &word)?,
                    "read" | "prompt" => parse_fetch(parser, &word)?,
                    "logs" => parse_logs(parser)?,
                    "expose" => parse_expose(parser)?,
                    "call" => parse_call(parser)?,
                    "complete" => parse_complete(parser)?,
                    "watch" => parse_watch(parser)?,
                    "run" => parse_run(parser)?,
                    "serve" => parse_serve(parser)?,
                    "proxy" => parse_proxy(parser)?,
                    "login" => parse_login(parser)?,
                    "logout" => Command::Logout { name: single_name(parser, "logout")? },
                    "add" => Command::Add(add::parse_add(parser, after_dashes)?),
                    "add-json" => Command::Add(add::parse_add_json(parser)?),
                    "remove" => {
                        let (name, scope) = name_and_scope(parser, "remove")?;
                        Command::Remove { name, scope }
                    }
                    "enable" | "disable" => {
                        let (name, scope) = name_and_scope(parser, &word)?;
                        Command::Enable { name, enabled: word == "enable", scope }
                    }
                    "trust" | "untrust" => parse_trust(parser, word == "trust")?,
                    "import" => Command::Import { file: optional_value(parser)?.map(Into::into) },
                    #[cfg(feature = "serve")]
                    "sessions" => parse_sessions(parser)?,
                    #[cfg(not(feature = "serve"))]
                    "sessions" => {
                        return Err("this tether was built without kept-alive sessions (the \
                                    \"serve\" cargo feature)"
                            .into())
                    }
                    "completion" => Command::Completion {
                        shell: optional_value(parser)?
                            .ok_or("usage: tether completion bash|zsh|fish")?,
                    },
                    other => unreachable!("{other} has help but no parser"),
                });
                return Ok(args);
            }
            _ => return Err(arg.unexpected()),
        }
    }
    Ok(args)
}

/// How the parsers hand a `--stdio CMD` on in a command's server field
/// (a configured name never holds `:`); `adhoc.rs` makes its entry.
pub(crate) const STDIO: &str = "stdio:";

/// The commands that start servers, which take `--keep-alive`.
pub(super) const SERVER_COMMANDS: &[&str] = &[
    "list",
    "tools",
    "resources",
    "read",
    "prompts",
    "prompt",
    "call",
    "run",
    "complete",
    "watch",
];

/// `watch SERVER URI [--count N] [--read] [--json]`.
fn parse_watch(parser: &mut lexopt::Parser) -> Result<Command, lexopt::Error> {
    let (mut words, mut count, mut read, mut json) = (Vec::new(), None, false, false);
    while let Some(arg) = parser.next()? {
        match arg {
            Long("count") => count = Some(number(parser, "--count", "a number of updates")?),
            Long("read") => read = true,
            Long("json") => json = true,
            Long("stdio") if words.is_empty() => words.push(stdio_server(parser)?),
            Value(word) if words.len() < 2 => words.push(word.string()?),
            _ => return Err(arg.unexpected()),
        }
    }
    let mut words = words.into_iter();
    match (words.next(), words.next()) {
        (Some(server), Some(uri)) => Ok(Command::Watch { server, uri, count, read, json }),
        _ => Err("usage: tether watch SERVER URI [--count N] [--read] [--json]".into()),
    }
}

/// `complete SERVER (--prompt NAME | --resource TEMPLATE) ARG [VALUE]
/// [--context K=V]... [--json]`.
fn parse_complete(parser: &mut lexopt::Parser) -> Result<Command, lexopt::Error> {
    const USAGE: &str = "usage: tether complete SERVER (--prompt NAME | --resource TEMPLATE) ARG \
                         [VALUE] [--context K=V]... [--json]";
    let (mut words, mut reference, mut context, mut json) = (Vec::new(), None, Vec::new(), false);
    while let Some(arg) = parser.next()? {
        match arg {
            Long("prompt" | "resource") if reference.is_some() => {
                return Err("complete takes one of --prompt NAME or --resource TEMPLATE".into())
            }
            Long("prompt") => {
                reference = Some(tether::CompletionRef::Prompt(parser.value()?.string()?));
            }
            Long("resource") => {
                let template = parser.value()?.string()?;
                reference = Some(tether::CompletionRef::ResourceTemplate(template));
            }
            Long("stdio") if words.is_empty() => words.push(stdio_server(parser)?),
            Long("context") => context.push(parser.value()?.string()?),
            Long("json") => json = true,
            Value(word) if words.len() < 3 => words.push(word.string()?),
            _ => return Err(arg.unexpected()),
        }
    }
    let Some(reference) = reference else { return Err(USAGE.into()) };
    let mut words = words.into_iter();
    match (words.next(), words.next(), words.next()) {
        (Some(server), Some(argument), value) => Ok(Command::Complete {
            server,
            reference,
            argument,
            value: value.unwrap_or_default(),
            context,
            json,
        }),
        _ => Err(USAGE.into()),
    }
}

/// `sessions [--json]`, `sessions end NAME... | --all`.
#[cfg(feature = "serve")]
fn parse_sessions(parser: &mut lexopt::Parser) -> Result<Command, lexopt::Error> {
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
fn parse_internal(parser: &mut lexopt::Parser, word: &str) -> Result<Command, lexopt::Error> {
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

fn parse_list(parser: &mut lexopt::Parser) -> Result<Command, lexopt::Error> {
    let (mut names, mut scope, mut json, mut no_connect) = (Vec::new(), None, false, false);
    while let Some(arg) = parser.next()? {
        if let Some(flag) = scope_flag(&arg) {
            scope = Some(scope_of(flag, parser)?);
            continue;
        }
        match arg {
            Long("json") => json = true,
            Long("no-connect") => no_connect = true,
            Value(name) => names.push(name.string()?),
            _ => return Err(arg.unexpected()),
        }
    }
    Ok(Command::List { names, scope, json, no_connect })
}

/// `tools`, `resources` and `prompts` take the same options:
/// `[SERVER | --server NAME] [--json]` (and `tools` `--signatures`).
fn parse_listing(parser: &mut lexopt::Parser, command: &str) -> Result<Command, lexopt::Error> {
    let (mut server, mut json, mut signatures) = (None, false, false);
    while let Some(arg) = parser.next()? {
        match arg {
            Long("server") if server.is_none() => server = Some(parser.value()?.string()?),
            Long("stdio") if server.is_none() => server = Some(stdio_server(parser)?),
            Value(name) if server.is_none() => server = Some(name.string()?),
            Long("json") => json = true,
            Long("signatures") if command == "tools" => signatures = true,
            _ => return Err(arg.unexpected()),
        }
    }
    Ok(match command {
        "tools" => Command::Tools { server, json, signatures },
        "resources" => Command::Resources { server, json },
        _ => Command::Prompts { server, json },
    })
}

/// `read SERVER URI [-o PATH] [--raw] [--json]` and
/// `prompt SERVER NAME [ARGS_JSON] [--json]`.
fn parse_fetch(parser: &mut lexopt::Parser, command: &str) -> Result<Command, lexopt::Error> {
    let (mut positional, mut raw, mut json, mut output) = (Vec::new(), false, false, None);
    let mut stdio = None;
    while let Some(arg) = parser.next()? {
        match arg {
            Long("stdio") if stdio.is_none() => stdio = Some(stdio_server(parser)?),
            Long("raw") if command == "read" => raw = true,
            Short('o') | Long("output") if command == "read" => {
                output = Some(PathBuf::from(parser.value()?))
            }
            Long("json") => json = true,
            Value(word) if positional.len() < 3 || command == "prompt" => {
                positional.push(word.string()?)
            }
            _ => return Err(arg.unexpected()),
        }
    }
    const PROMPT_USAGE: &str =
        "usage: tether prompt SERVER NAME [ARGS_JSON|-|key=value...] [--json]";
    // `--stdio CMD` is the server: the words after it shift.
    if let Some(stdio) = stdio {
        positional.insert(0, stdio);
    }
    if command == "prompt" && positional.len() >= 2 {
        let rest = positional.split_off(2);
        let (arguments, pairs) = split_arguments(rest, PROMPT_USAGE)?;
        let name = positional.pop().expect("two words");
        let server = positional.pop().expect("two words");
        return Ok(Command::Prompt { server, name, arguments, pairs, json });
    }
    let mut positional = positional.into_iter();
    match (command, positional.next(), positional.next(), positional.next()) {
        ("read", Some(server), Some(uri), None) if !(raw && output.is_some()) => {
            Ok(Command::Read { server, uri, output, raw, json })
        }
        ("read", ..) => Err(
            "usage: tether read SERVER URI [-o|--output PATH] [--raw] [--json] (not -o with --raw)"
                .into(),
        ),
        _ => Err(PROMPT_USAGE.into()),
    }
}

/// The next value as a number: `flag` takes `what`, which the error says.
fn number<T: std::str::FromStr>(
    parser: &mut lexopt::Parser,
    flag: &str,
    what: &str,
) -> Result<T, lexopt::Error> {
    let text = parser.value()?.string()?;
    text.trim().parse().map_err(|_| format!("{flag} takes {what}, not {text:?}").into())
}

/// `--timeout S`: seconds, above 0 and below 115 days.
fn timeout_flag(parser: &mut lexopt::Parser) -> Result<Duration, lexopt::Error> {
    let seconds: f64 = number(parser, "--timeout", "a number of seconds")?;
    if !(seconds > 0.0 && seconds < 1e7) {
        return Err(
            "--timeout takes a number of seconds above 0 and below 10000000 (115 days)".into()
        );
    }
    // 30000 is 30 s in milliseconds (as Gemini's config has it), or 8 h.
    if seconds >= 1000.0 && seconds % 1000.0 == 0.0 {
        return Err(format!(
            "--timeout is in seconds: {seconds} s is {:.1} hours; for {} s write --timeout {}",
            seconds / 3600.0,
            seconds / 1000.0,
            seconds / 1000.0
        )
        .into());
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// `run [FILE|-] [-e CODE] [--timeout S] [--json]`.
fn parse_run(parser: &mut lexopt::Parser) -> Result<Command, lexopt::Error> {
    let (mut file, mut code, mut timeout, mut json) = (None, None, None, false);
    let mut adhoc = Vec::new();
    while let Some(arg) = parser.next()? {
        match arg {
            Long("stdio") => adhoc.push(stdio_server(parser)?),
            Long("url") => adhoc.push(parser.value()?.string()?),
            Short('e') | Long("eval") if code.is_none() => code = Some(parser.value()?.string()?),
            Short('e') | Long("eval") => return Err("-e comes once: one script a run".into()),
            Long("timeout") => timeout = Some(timeout_flag(parser)?),
            Long("json") => json = true,
            Value(word) if file.is_none() => file = Some(word.string()?),
            _ => return Err(arg.unexpected()),
        }
    }
    if file.is_some() && code.is_some() {
        return Err("tether run takes a FILE or -e CODE, not both".into());
    }
    Ok(Command::Run { file, code, timeout, json, adhoc })
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

    /// The flags without `--http` say nothing.
    fn check(&self) -> Result<(), lexopt::Error> {
        if self.address.is_none() && (self.token_env.is_some() || !self.origins.is_empty()) {
            return Err("--token-env and --allow-origin go with --http".into());
        }
        Ok(())
    }
}

/// `serve [NAME...] [--status-tool] [--check] [--http ADDRESS ...]`.
fn parse_serve(parser: &mut lexopt::Parser) -> Result<Command, lexopt::Error> {
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
fn parse_proxy(parser: &mut lexopt::Parser) -> Result<Command, lexopt::Error> {
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

fn parse_call(parser: &mut lexopt::Parser) -> Result<Command, lexopt::Error> {
    let mut positional = Vec::new();
    let (mut timeout, mut json, mut stdio) = (None, false, None);
    let (mut max_chars, mut save_images) = (None, None);
    while let Some(arg) = parser.next()? {
        match arg {
            Long("timeout") => timeout = Some(timeout_flag(parser)?),
            Long("json") => json = true,
            Long("max-chars") => {
                max_chars = Some(number(parser, "--max-chars", "a number of characters")?)
            }
            Long("save-images") => save_images = Some(PathBuf::from(parser.value()?)),
            Long("stdio") if stdio.is_none() => stdio = Some(stdio_server(parser)?),
            Value(word) => positional.push(word.string()?),
            _ => return Err(arg.unexpected()),
        }
    }
    // `--stdio CMD` is the server: the words after it shift.
    if let Some(stdio) = stdio {
        positional.insert(0, stdio);
    }
    const USAGE: &str = "usage: tether call SERVER TOOL [ARGS_JSON|-|key=value...] [--timeout S] \
                         [--json]\n       tether call mcp__SERVER__TOOL [ARGS_JSON|-|key=value...]";
    // `call mcp__SERVER__TOOL [ARGS]`: the qualified name `tools` prints.
    let qualified = positional.first().and_then(|first| split_qualified(first));
    let (server, tool, rest) = match qualified {
        Some((server, tool))
            if positional.len() == 1 || is_arguments(&positional[1]) || is_pair(&positional[1]) =>
        {
            (server, tool, positional.split_off(1))
        }
        _ => {
            if positional.len() < 2 {
                return Err(USAGE.into());
            }
            let rest = positional.split_off(2);
            let tool = positional.pop().expect("two words");
            (positional.pop().expect("two words"), tool, rest)
        }
    };
    let (arguments, pairs) = split_arguments(rest, USAGE)?;
    Ok(Command::Call { server, tool, arguments, pairs, timeout, json, max_chars, save_images })
}

/// A call's words after its tool: one JSON object (or `-`), or
/// `key=value` words.
fn split_arguments(
    rest: Vec<String>,
    usage: &str,
) -> Result<(Option<String>, Vec<String>), lexopt::Error> {
    match rest.as_slice() {
        [] => Ok((None, Vec::new())),
        // One word that is no pair is JSON (or `-`), and said so if not.
        [one] if !is_pair(one) => Ok((rest.into_iter().next(), Vec::new())),
        _ => match rest.iter().find(|word| !is_pair(word)) {
            Some(word) => Err(format!(
                "{word:?} is neither JSON arguments nor key=value (k=v, k:=JSON, k=@FILE, \
                 k=@-)\n{usage}"
            )
            .into()),
            None => Ok((None, rest)),
        },
    }
}

fn is_pair(word: &str) -> bool {
    crate::cli::arguments::is_pair(word)
}

/// `--stdio CMD`: an ad-hoc server, handed on in the server field.
fn stdio_server(parser: &mut lexopt::Parser) -> Result<String, lexopt::Error> {
    let line = parser.value()?.string()?;
    if line.trim().is_empty() {
        return Err("--stdio needs a command, like --stdio \"npx -y pkg\"".into());
    }
    Ok(format!("{STDIO}{line}"))
}

/// `mcp__SERVER__TOOL` as (SERVER, the qualified name): the hub maps the
/// qualified name back to the server's own name for its tool.
fn split_qualified(word: &str) -> Option<(String, String)> {
    let rest = word.strip_prefix("mcp__")?;
    let (server, tool) = rest.split_once("__")?;
    (!server.is_empty() && !tool.is_empty()).then(|| (server.to_owned(), word.to_owned()))
}

/// True for what can only be arguments: JSON, or `-` for stdin.
fn is_arguments(word: &str) -> bool {
    word == "-" || word.trim_start().starts_with('{')
}

fn parse_expose(parser: &mut lexopt::Parser) -> Result<Command, lexopt::Error> {
    let (mut positional, mut tool, mut scope) = (Vec::new(), None, None);
    while let Some(arg) = parser.next()? {
        if let Some(flag) = scope_flag(&arg) {
            scope = Some(scope_of(flag, parser)?);
            continue;
        }
        match arg {
            Long("tool") => tool = Some(parser.value()?.string()?),
            Value(word) if positional.len() < 2 => positional.push(word.string()?),
            _ => return Err(arg.unexpected()),
        }
    }
    let mut positional = positional.into_iter();
    match (positional.next(), positional.next()) {
        (Some(name), Some(mode)) => {
            let mode = mode.parse().map_err(|err: tether::UnknownWord| {
                format!("{:?} is not an exposure; use one of {}", err.given, err.expected)
            })?;
            Ok(Command::Expose { name, mode, tool, scope })
        }
        _ => {
            Err("usage: tether expose SERVER direct|deferred|hidden|codemode [--tool PATTERN] [-s user|project]"
                .into())
        }
    }
}

fn parse_login(parser: &mut lexopt::Parser) -> Result<Command, lexopt::Error> {
    let (mut name, mut overrides) = (None, tether::OAuthSettings::default());
    while let Some(arg) = parser.next()? {
        match arg {
            Long("callback-port") => {
                let port: u16 = number(parser, "--callback-port", "a port number")?;
                overrides.callback_port = Some(port);
            }
            Long("client-id") => overrides.client_id = Some(parser.value()?.string()?),
            Long("client-secret") => overrides.client_secret = Some(parser.value()?.string()?),
            Value(word) if name.is_none() => name = Some(word.string()?),
            _ => return Err(arg.unexpected()),
        }
    }
    let name = name.ok_or(
        "usage: tether login NAME [--callback-port PORT] [--client-id ID [--client-secret S]]",
    )?;
    if overrides.client_secret.is_some() && overrides.client_id.is_none() {
        return Err("--client-secret goes with --client-id".into());
    }
    Ok(Command::Login { name, overrides })
}

fn parse_logs(parser: &mut lexopt::Parser) -> Result<Command, lexopt::Error> {
    let (mut server, mut lines, mut follow) = (None, 50, false);
    while let Some(arg) = parser.next()? {
        match arg {
            // Not -s: everywhere else that is the scope.
            Long("server") => server = Some(parser.value()?.string()?),
            Value(name) if server.is_none() => server = Some(name.string()?),
            Short('n') | Long("lines") => lines = number(parser, "--lines", "a number of lines")?,
            Short('f') | Long("follow") => follow = true,
            _ => return Err(arg.unexpected()),
        }
    }
    Ok(Command::Logs { server, lines, follow })
}

/// `NAME [-s user|project]`: `remove`, `enable`, `disable`.
fn name_and_scope(
    parser: &mut lexopt::Parser,
    command: &str,
) -> Result<(String, Option<tether::Scope>), lexopt::Error> {
    let (mut name, mut scope) = (None, None);
    while let Some(arg) = parser.next()? {
        if let Some(flag) = scope_flag(&arg) {
            scope = Some(scope_of(flag, parser)?);
            continue;
        }
        match arg {
            Value(word) if name.is_none() => name = Some(word.string()?),
            _ => return Err(arg.unexpected()),
        }
    }
    let name = name.ok_or_else(|| format!("usage: tether {command} NAME [-s user|project]"))?;
    Ok((name, scope))
}

fn parse_get(parser: &mut lexopt::Parser) -> Result<Command, lexopt::Error> {
    let (mut name, mut json) = (None, false);
    while let Some(arg) = parser.next()? {
        match arg {
            Long("json") => json = true,
            Value(word) if name.is_none() => name = Some(word.string()?),
            _ => return Err(arg.unexpected()),
        }
    }
    let name = name.ok_or("usage: tether get NAME [--json]")?;
    Ok(Command::Get { name, json })
}

fn parse_trust(parser: &mut lexopt::Parser, trusted: bool) -> Result<Command, lexopt::Error> {
    let (mut dir, mut yes) = (None, false);
    while let Some(arg) = parser.next()? {
        match arg {
            Short('y') | Long("yes") if trusted => yes = true,
            Value(word) if dir.is_none() => dir = Some(PathBuf::from(word)),
            _ => return Err(arg.unexpected()),
        }
    }
    Ok(Command::Trust { dir, trusted, yes })
}

fn single_name(parser: &mut lexopt::Parser, command: &str) -> Result<String, lexopt::Error> {
    optional_value(parser)?.ok_or_else(|| format!("usage: tether {command} NAME").into())
}

/// At most one positional value and no options.
fn optional_value(parser: &mut lexopt::Parser) -> Result<Option<String>, lexopt::Error> {
    let mut value = None;
    while let Some(arg) = parser.next()? {
        match arg {
            Value(word) if value.is_none() => value = Some(word.string()?),
            _ => return Err(arg.unexpected()),
        }
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tether::{Exposure, Scope};

    fn command(line: &str) -> Command {
        parse(line.split_whitespace()).expect("parses").command.expect("has a command")
    }

    fn refused(line: &str) -> String {
        parse(line.split_whitespace()).expect_err("is refused").to_string()
    }

    #[test]
    fn global_options_come_before_the_command() {
        let args = parse("--config-dir /c --project /p -vv list".split_whitespace()).unwrap();
        assert_eq!(args.config_dir, Some(PathBuf::from("/c")));
        assert_eq!(args.project, Some(PathBuf::from("/p")));
        assert_eq!(args.verbosity, 2);
        assert!(matches!(args.command, Some(Command::List { .. })));
        assert_eq!(parse(["-q"]).unwrap().verbosity, -1);
        assert!(parse(["--help"]).unwrap().help);
        assert!(parse(["help"]).unwrap().help);
        assert!(parse(["-V"]).unwrap().version);
        assert!(parse(Vec::<String>::new()).unwrap().command.is_none());
        assert!(refused("frobnicate").contains("unknown command"));
        assert!(refused("lsit").contains("did you mean \"list\""));
        assert!(refused("--nope list").contains("--nope"));
    }

    #[test]
    fn every_command_takes_help() {
        for line in ["call --help", "call fx echo -h", "help call", "add fx --help"] {
            let args = parse(line.split_whitespace()).unwrap();
            assert!(args.help && args.command.is_none(), "{line}");
            let topic = args.help_topic.as_deref().unwrap();
            assert!(super::super::help::of(topic).is_some(), "{line}");
        }
        // After `--` it is the server's own flag.
        assert!(matches!(command("add fx -- srv --help"), Command::Add(_)));
        assert!(parse(["help"]).unwrap().help_topic.is_none());
    }

    #[test]
    fn get() {
        assert!(
            matches!(command("get fx --json"), Command::Get { ref name, json: true } if name == "fx")
        );
        assert!(refused("get").contains("usage: tether get"));
    }

    #[test]
    fn list() {
        let Command::List { names, scope, json, .. } = command("list a b --scope project --json")
        else {
            panic!()
        };
        assert_eq!(
            (names, scope, json),
            (vec!["a".into(), "b".into()], Some(Scope::Project), true)
        );
        assert!(matches!(
            command("list --scope local"),
            Command::List { scope: Some(Scope::Local), .. }
        ));
        assert!(refused("list --scope team").contains("--scope"));
    }

    #[test]
    fn tools_resources_and_prompts() {
        assert!(matches!(
            command("tools --server fx --json"),
            Command::Tools { server: Some(ref s), json: true, signatures: false } if s == "fx"
        ));
        assert!(matches!(command("resources"), Command::Resources { server: None, json: false }));
        assert!(matches!(
            command("tools fx"),
            Command::Tools { server: Some(ref s), json: false, .. } if s == "fx"
        ));
        assert!(refused("tools a b").contains("b"));
        assert!(matches!(command("prompts --json"), Command::Prompts { server: None, json: true }));
        assert!(refused("tools --raw").contains("--raw"));
    }

    #[test]
    fn run_and_signatures() {
        let Command::Run { file, code, timeout, json, .. } =
            command("run -e return_1 --timeout 3 --json")
        else {
            panic!()
        };
        assert_eq!(
            (file, code.as_deref(), timeout, json),
            (None, Some("return_1"), Some(Duration::from_secs(3)), true)
        );
        assert!(
            matches!(command("run script.js"), Command::Run { file: Some(ref f), code: None, .. } if f == "script.js")
        );
        assert!(matches!(command("run -"), Command::Run { file: Some(ref f), .. } if f == "-"));
        assert!(matches!(command("run"), Command::Run { file: None, code: None, .. }));
        assert!(matches!(
            command("serve a b --status-tool"),
            Command::Serve { ref names, status_tool: true, check: false, .. } if names == &["a", "b"]
        ));
        assert!(matches!(command("serve --check"), Command::Serve { check: true, .. }));
        let Command::Proxy(proxy) = command(
            "proxy https://a.example/mcp --header A:1 --header B:2 --callback-port 3334 --check",
        ) else {
            panic!("proxy")
        };
        assert_eq!(proxy.url, "https://a.example/mcp");
        assert_eq!(proxy.headers, ["A:1", "B:2"]);
        assert_eq!(proxy.callback_port, Some(3334));
        assert!(proxy.check);
        assert!(refused("run a.js -e x").contains("not both"));
        assert!(refused("run -e a -e b").contains("once"));
        assert!(refused("run --timeout 0").contains("above 0"));
        assert!(matches!(
            command("tools --signatures fx"),
            Command::Tools { signatures: true, .. }
        ));
        assert!(refused("resources --signatures").contains("--signatures"));
    }

    #[test]
    fn read_and_prompt() {
        let Command::Read { server, uri, raw, json, output } = command("read fx file:///a --raw")
        else {
            panic!()
        };
        assert_eq!((server.as_str(), uri.as_str(), raw, json), ("fx", "file:///a", true, false));
        assert!(output.is_none());
        assert!(matches!(
            command("read fx x://a -o out/"),
            Command::Read { output: Some(ref path), .. } if path == &PathBuf::from("out/")
        ));
        assert!(refused("read fx x://a -o f --raw").contains("usage: tether read"));
        let Command::Prompt { server, name, arguments, json, .. } =
            command("prompt fx greet {\"who\":1} --json")
        else {
            panic!()
        };
        assert_eq!((server.as_str(), name.as_str(), json), ("fx", "greet", true));
        assert_eq!(arguments.as_deref(), Some("{\"who\":1}"));
        assert!(refused("read fx").contains("usage: tether read"));
        assert!(refused("prompt fx greet --raw").contains("--raw"));
        let Command::Prompt { pairs, .. } = command("prompt fx greet who=Ada mood=@-") else {
            panic!()
        };
        assert_eq!(pairs, ["who=Ada", "mood=@-"]);
    }

    #[test]
    fn call() {
        let Command::Call { server, tool, arguments, timeout, json, .. } =
            command("call fx echo - --timeout 2.5 --json")
        else {
            panic!()
        };
        assert_eq!(
            (server.as_str(), tool.as_str(), arguments.as_deref()),
            ("fx", "echo", Some("-"))
        );
        assert_eq!((timeout, json), (Some(Duration::from_millis(2500)), true));
        assert!(matches!(
            command("call fx echo"),
            Command::Call { arguments: None, timeout: None, .. }
        ));
        assert!(refused("call fx").contains("usage: tether call"));
        let Command::Call { server, tool, arguments, .. } = command("call mcp__fx__echo {}") else {
            panic!()
        };
        assert_eq!(
            (server.as_str(), tool.as_str(), arguments.as_deref()),
            ("fx", "mcp__fx__echo", Some("{}"))
        );
        assert!(matches!(command("call mcp__fx__echo"), Command::Call { arguments: None, .. }));
        let Command::Call { tool, pairs, arguments: None, .. } =
            command("call mcp__fx__echo n=3 tags:=[1] --json")
        else {
            panic!()
        };
        assert_eq!(tool, "mcp__fx__echo");
        assert_eq!(pairs, ["n=3", "tags:=[1]"]);
        let Command::Call { server, pairs, .. } = command("call fx echo text=hi") else { panic!() };
        assert_eq!((server.as_str(), pairs), ("fx", vec!["text=hi".to_owned()]));
        assert!(
            refused("call fx echo text=hi oops").contains("neither JSON arguments nor key=value")
        );
        assert!(refused("call fx echo {} {}").contains("neither JSON"));
        assert!(refused("call fx echo --timeout 0").contains("above 0 and below 10000000"));
        assert!(refused("call fx echo --timeout 1e9").contains("above 0 and below 10000000"));
        assert!(refused("call fx echo --timeout soon").contains("soon"));
        assert_eq!(refused("status"), "unknown command \"status\" (did you mean \"list\"?)");
        assert!(refused("rm x").contains("did you mean \"remove\"?"));
        assert_eq!(
            refused("call fx echo --timeout soon"),
            "--timeout takes a number of seconds, not \"soon\""
        );
        assert!(refused("login fx --callback-port 99999").contains("a port number"));
        assert!(refused("logs fx -n many").contains("--lines takes a number of lines"));
    }

    #[test]
    fn add() {
        let Command::Add(add) =
            command("add fx --project -e A=1 --env B=2 -- npx -y server --flag")
        else {
            panic!()
        };
        assert_eq!(add.name.as_deref(), Some("fx"));
        assert_eq!(add.scope, Some(Scope::Project));
        assert_eq!(add.env, [("A".into(), "1".into()), ("B".into(), "2".into())]);
        assert_eq!(add.command, ["npx", "-y", "server", "--flag"]);
        let Command::Add(add) = parse([
            "add",
            "web",
            "--url",
            "https://x/mcp",
            "-t",
            "sse",
            "-H",
            "Cookie: sid=a=b",
            "--bearer-token-env-var",
            "TOKEN",
            "--description",
            "docs search",
        ])
        .unwrap()
        .command
        .unwrap() else {
            panic!()
        };
        assert_eq!(
            (add.url.as_deref(), add.transport.as_deref()),
            (Some("https://x/mcp"), Some("sse"))
        );
        assert_eq!(add.headers, [("Cookie".into(), "sid=a=b".into())]);
        assert_eq!(add.bearer_token_env.as_deref(), Some("TOKEN"));
        assert_eq!(add.description.as_deref(), Some("docs search"));
        assert!(refused("add fx --env NOVALUE").contains("KEY=VALUE"));
        // `add NAME URL`, options before or after; `-s` for the scope.
        let Command::Add(add) = command("add -s project docs https://x/mcp -H X-Key:${K}") else {
            panic!()
        };
        assert_eq!((add.url.as_deref(), add.scope), (Some("https://x/mcp"), Some(Scope::Project)));
        assert_eq!(add.headers, [("X-Key".into(), "${K}".into())]);
        assert!(add.command.is_empty());
    }

    #[test]
    fn remove_enable_disable() {
        assert!(matches!(command("remove fx"), Command::Remove { scope: None, .. }));
        assert!(matches!(
            command("remove fx -s project"),
            Command::Remove { scope: Some(Scope::Project), .. }
        ));
        assert!(matches!(
            command("disable fx --scope user"),
            Command::Enable { scope: Some(Scope::User), enabled: false, .. }
        ));
        assert!(matches!(
            command("remove fx -l"),
            Command::Remove { scope: Some(Scope::Local), .. }
        ));
        assert!(matches!(
            command("remove fx --user"),
            Command::Remove { scope: Some(Scope::User), .. }
        ));
        assert!(refused("remove").contains("usage: tether remove"));
        assert!(
            matches!(command("enable fx"), Command::Enable { enabled: true, ref name, scope: None } if name == "fx")
        );
        assert!(matches!(command("disable fx"), Command::Enable { enabled: false, .. }));
        assert!(refused("disable").contains("usage: tether disable NAME"));
        assert!(refused("enable a b").contains("b"));
    }

    #[test]
    fn trust_import_expose_logs() {
        assert!(matches!(
            command("trust"),
            Command::Trust { dir: None, trusted: true, yes: false }
        ));
        assert!(matches!(command("trust --yes"), Command::Trust { yes: true, .. }));
        assert!(matches!(
            command("untrust /p"),
            Command::Trust { dir: Some(ref dir), trusted: false, .. } if dir == &PathBuf::from("/p")
        ));
        assert!(refused("untrust --yes").contains("--yes"));
        assert!(
            matches!(command("import c.json"), Command::Import { file: Some(ref file) } if file == &PathBuf::from("c.json"))
        );
        assert!(matches!(command("import"), Command::Import { file: None }));
        let Command::Expose { name, mode, tool, scope } =
            command("expose fx deferred --tool del_* --project")
        else {
            panic!()
        };
        assert_eq!(
            (name.as_str(), mode, tool.as_deref(), scope),
            ("fx", Exposure::Deferred, Some("del_*"), Some(Scope::Project))
        );
        assert!(matches!(
            command("expose fx hidden -s user"),
            Command::Expose { scope: Some(Scope::User), .. }
        ));
        assert!(refused("expose fx loud").contains("not an exposure"));
        assert!(matches!(
            command("logs --server fx -n 5 -f"),
            Command::Logs { server: Some(ref s), lines: 5, follow: true } if s == "fx"
        ));
        assert!(matches!(
            command("logs"),
            Command::Logs { server: None, lines: 50, follow: false }
        ));
    }
}
