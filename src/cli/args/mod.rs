//! The command line as data: a hand-written lexopt loop turns the arguments
//! into [`Args`] and one [`Command`], from any iterator of arguments, so that
//! every command's parsing is unit-tested without running anything.
//!
//! This file holds the data (`Args`, `Command`) and the loop that reads
//! the global options and hands a command's words to its parser: those of
//! the commands that talk to servers in `servers.rs`, of the serving ones
//! and the kept-alive sessions in `serving.rs`, of the other configuration
//! commands in `settings.rs`, of `add` in `add.rs`; `scope.rs` reads the
//! scope flags they share.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use lexopt::prelude::*;

mod add;
mod scope;
mod servers;
mod serving;
mod settings;

use servers::{
    parse_call, parse_complete, parse_fetch, parse_list, parse_listing, parse_run, parse_watch,
};
#[cfg(feature = "serve")]
use serving::{parse_internal, parse_sessions};
use serving::{parse_proxy, parse_serve};
pub(crate) use serving::{HttpListen, ProxyArgs};
use settings::{name_and_scope, parse_expose, parse_get, parse_login, parse_logs, parse_trust};

pub(crate) use add::{key_value, AddArgs};

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
    /// `--answers JSON|@FILE`: a script's answers to servers' forms.
    pub(super) answers: Option<String>,
    /// `--accept-defaults`: a form's defaults where no answer is given.
    pub(super) accept_defaults: bool,
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
            Long("answers") => args.answers = Some(parser.value()?.string()?),
            Long("accept-defaults") => args.accept_defaults = true,
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
                // `--keep-alive`, `--accept-defaults` and `--answers JSON`
                // where the command's flags go, too (before any `--`).
                let mut rest = rest;
                if SERVER_COMMANDS.contains(&word.as_str()) {
                    take_run_options(&mut rest, &mut args)?;
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

/// Takes the options of the whole run a command's flags may hold out of
/// `rest` (up to a `--`): `--keep-alive`, `--accept-defaults`, `--answers
/// JSON` (or `--answers=JSON`).
fn take_run_options(rest: &mut Vec<OsString>, args: &mut Args) -> Result<(), lexopt::Error> {
    let mut kept = Vec::with_capacity(rest.len());
    let mut words = std::mem::take(rest).into_iter();
    while let Some(word) = words.next() {
        if word == "--" {
            kept.push(word);
            kept.extend(words.by_ref());
            break;
        }
        match word.to_str() {
            Some("--keep-alive") => args.keep_alive = true,
            Some("--accept-defaults") => args.accept_defaults = true,
            Some("--answers") => {
                let value = words.next().ok_or("--answers takes a JSON object or @FILE")?;
                args.answers = Some(value.into_string().map_err(lexopt::Error::NonUnicodeValue)?);
            }
            Some(other) if other.starts_with("--answers=") => {
                args.answers = Some(other["--answers=".len()..].to_owned());
            }
            _ => kept.push(word),
        }
    }
    *rest = kept;
    Ok(())
}

/// The commands that start servers, which take `--keep-alive`,
/// `--answers` and `--accept-defaults`.
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

/// The next value as a number: `flag` takes `what`, which the error says.
fn number<T: std::str::FromStr>(
    parser: &mut lexopt::Parser,
    flag: &str,
    what: &str,
) -> Result<T, lexopt::Error> {
    let text = parser.value()?.string()?;
    text.trim().parse().map_err(|_| format!("{flag} takes {what}, not {text:?}").into())
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
