//! The commands that talk to servers: `list`, `tools`, `call`.
//!
//! Each starts a hub in the background under a `SignalWatch`, so that SIGINT,
//! SIGTERM and SIGHUP at any moment (during start, a call, or the shutdown
//! itself) end every server's process group before tether exits.

use std::io::{self, IsTerminal};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use tether::{CallOptions, Config, Error, HubOptions, Scope, ServerState};

use super::args::Command;
use super::output::{
    emit, emit_body, emit_json, report, EXIT_OK, EXIT_TOOL_ERROR, EXIT_USAGE, INTERRUPTED,
};
use super::signals::SignalWatch;
use super::starting::{
    connected_hub, only_server, report_start_failure, unknown_server, warn_not_connected,
};
use super::{browse, escape, progress, status, table};

/// Runs a server command.
/// `around`: the roots offered to servers, the token store's path, and the
/// servers reached through kept-alive sessions.
pub(super) fn run(
    command: Command,
    config: Config,
    options: HubOptions,
    around: (&[String], &std::path::Path, &[String]),
    signals: &mut SignalWatch,
) -> u8 {
    let (roots, store, kept) = around;
    signals.options = options;
    if let Command::Call { timeout: Some(ceiling), .. }
    | Command::Run { timeout: Some(ceiling), .. } = &command
    {
        // --timeout bounds the whole command, the servers' closing too.
        signals.stop_by = Some(Instant::now() + *ceiling);
    }
    if let Command::Watch { server, uri, count, read, json } = &command {
        let wanted = (server.as_str(), uri.as_str());
        return super::watch::watch(config, wanted, *count, (*read, *json), signals);
    }
    let code = match command {
        Command::List { names, scope, json, no_connect: true } => {
            list_configured(config, &names, scope, json)
        }
        Command::List { names, scope, json, .. } => {
            list(config, &names, scope, json, (roots, store, kept), signals)
        }
        Command::Resources { server, json } => {
            browse::resources(config, server.as_deref(), json, signals)
        }
        Command::Read { server, uri, output, raw, json } => {
            browse::read(config, &server, &uri, output.as_deref(), raw, json, signals)
        }
        Command::Prompts { server, json } => {
            browse::prompts(config, server.as_deref(), json, signals)
        }
        Command::Prompt { server, name, arguments, pairs, json } => {
            // MCP prompt arguments are strings: say so before asking.
            let arguments = if pairs.is_empty() {
                super::arguments::from_json(arguments.as_deref())
            } else {
                super::arguments::from_pairs(&pairs, &json!({}))
            };
            let arguments = arguments.and_then(|arguments| {
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
                    errln!("{message}");
                    EXIT_USAGE
                }
            }
        }
        Command::Complete { server, reference, argument, value, context, json } => {
            let argument = (argument.as_str(), value.as_str());
            browse::complete(config, &server, &reference, argument, &context, json, signals)
        }
        Command::Tools { server, json, signatures } => {
            tools(config, server.as_deref(), json, signatures, signals)
        }
        Command::Run { file, code, timeout, json, .. } => {
            super::run::run(config, file.as_deref(), code.as_deref(), timeout, json, signals)
        }
        #[cfg(feature = "serve")]
        Command::Serve { names, status_tool, check, http } => {
            let about = store.with_file_name("served.json");
            super::serve::serve(config, (&names, &about), status_tool, check, &http, signals)
        }
        #[cfg(feature = "serve")]
        Command::Proxy(args) => {
            super::proxy::proxy(&args, &store.with_file_name("served.json"), signals)
        }
        #[cfg(not(feature = "serve"))]
        Command::Serve { .. } | Command::Proxy(_) => {
            errln!("this tether was built without serving (the \"serve\" cargo feature)");
            EXIT_USAGE
        }
        Command::Call { server, tool, arguments, pairs, timeout, json, max_chars, save_images } => {
            let given = Given { json: arguments.as_deref(), pairs: &pairs };
            let shown = Shown { json, max_chars, save_images };
            call(config, &server, &tool, given, timeout, &shown, signals)
        }
        _ => unreachable!("only server commands are routed here"),
    };
    // The caller stops the watch, which shuts the hub down.
    code
}

fn list(
    mut config: Config,
    names: &[String],
    scope: Option<Scope>,
    json: bool,
    around: (&[String], &std::path::Path, &[String]),
    signals: &SignalWatch,
) -> u8 {
    let (roots, store, kept) = around;
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
    // Each remote server's kept sign-in, read before anything starts.
    let sign_ins: Vec<(String, Value)> = config
        .servers
        .iter()
        .filter_map(|server| match &server.transport {
            tether::TransportConfig::Http(http) => {
                Some((server.name.clone(), super::get::sign_in(store, &server.name, &http.url)))
            }
            _ => None,
        })
        .collect();
    // On a terminal each row is printed as its server finishes starting;
    // otherwise (and for --json) all at once, in configuration order.
    let streaming = !json && io::stdout().is_terminal();
    let all_names = config.servers.iter().map(|server| server.name.as_str());
    let all_names = all_names.chain(config.failed.iter().map(|entry| entry.name.as_str()));
    let all_names = all_names.chain(config.untrusted.iter().map(|entry| entry.name.as_str()));
    let widths = status::widths_for_names(all_names);
    let is_kept = |name: &str| kept.iter().any(|kept| kept == name);
    // A server behind a kept-alive session says so under its row.
    let render = |status: &tether::ServerStatus, widths: &status::Widths| {
        let mut row = status::render_row(status, widths);
        if is_kept(&status.name) {
            row.push_str("    kept alive: served by a kept-alive session (tether sessions)\n");
        }
        row
    };
    let hub = signals.start_hub_reporting(config, |status| {
        if streaming {
            emit(&render(status, &widths));
        }
    });
    let statuses = hub.status();
    if json {
        let rows: Vec<Value> = statuses
            .iter()
            .map(|status| {
                let mut row = status::to_json(status, roots);
                if let Some((_, sign_in)) = sign_ins.iter().find(|(name, _)| *name == status.name) {
                    row["signIn"] = sign_in.clone();
                }
                row["keptAlive"] = json!(is_kept(&status.name));
                row
            })
            .collect();
        emit_json(&Value::Array(rows));
    } else if statuses.is_empty() {
        eprintln!("No servers configured. Add one with: tether add NAME -- COMMAND (see tether add --help)");
    } else if !streaming {
        let widths = status::widths_of(&statuses);
        emit(&statuses.iter().map(|status| render(status, &widths)).collect::<String>());
    }
    // An untrusted server is not connected, however it is asked for.
    let all_connected = statuses
        .iter()
        .all(|status| matches!(status.state, ServerState::Ready | ServerState::Disabled));
    if all_connected {
        EXIT_OK
    } else {
        EXIT_TOOL_ERROR
    }
}

/// `list --no-connect`: what the configuration says of each server, with
/// nothing started (Codex's `mcp list`): its name, whether it would start,
/// how, from which file, and its command or URL.
fn list_configured(config: Config, names: &[String], scope: Option<Scope>, json: bool) -> u8 {
    for name in names {
        if !config.knows(name) {
            return unknown_server(&config, name);
        }
    }
    let wanted = |name: &str, server_scope: Scope| {
        (names.is_empty() || names.iter().any(|wanted| Config::same_name(wanted, name)))
            && scope.is_none_or(|scope| scope == server_scope)
    };
    // name, state, transport, scope, target (or why)
    let mut rows: Vec<[String; 5]> = Vec::new();
    for server in config.servers.iter().filter(|server| wanted(&server.name, server.scope)) {
        let state = if server.enabled { "enabled" } else { "disabled" };
        let row = [server.transport_name(), server.scope.as_str()].map(str::to_owned);
        let [transport, scope] = row;
        rows.push([server.name.clone(), state.into(), transport, scope, server.target()]);
    }
    for entry in config.failed.iter().filter(|entry| wanted(&entry.name, entry.scope)) {
        let why = entry.error.clone();
        rows.push([
            entry.name.clone(),
            "invalid".into(),
            "-".into(),
            entry.scope.as_str().into(),
            why,
        ]);
    }
    for entry in config.untrusted.iter().filter(|entry| wanted(&entry.name, Scope::Project)) {
        let row = [entry.name.clone(), "untrusted".into(), "-".into(), "project".into()];
        let [name, state, transport, scope] = row;
        rows.push([name, state, transport, scope, entry.command_line.clone()]);
    }
    if json {
        let rows: Vec<Value> = rows
            .iter()
            .map(|[name, state, transport, scope, target]| {
                json!({"name": name, "state": state, "transport": transport, "scope": scope,
                       "target": target})
            })
            .collect();
        emit_json(&Value::Array(rows));
    } else if rows.is_empty() {
        eprintln!("No servers configured. Add one with: tether add NAME -- COMMAND (see tether add --help)");
    } else {
        let shown: Vec<Vec<String>> =
            rows.iter().map(|row| row.iter().map(|cell| escape::escaped(cell)).collect()).collect();
        emit(&table::render(&shown));
    }
    EXIT_OK
}

fn tools(
    config: Config,
    server: Option<&str>,
    json: bool,
    signatures: bool,
    signals: &SignalWatch,
) -> u8 {
    if signatures && !tether::CODEMODE_AVAILABLE {
        errln!(
            "this tether was built without codemode (the \"codemode\" cargo feature), \
             so no script sees signatures"
        );
        return EXIT_USAGE;
    }
    // A server named that did not connect is an error, as for `call`.
    let hub = match connected_hub(config, server, signals) {
        Ok(hub) => hub,
        Err(code) => return code,
    };
    let tools: Vec<_> = hub
        .tools()
        .into_iter()
        .filter(|tool| server.is_none_or(|name| Config::same_name(&tool.server, name)))
        .filter(|tool| !signatures || tool.exposure != tether::Exposure::Hidden)
        .collect();
    if signatures && !json && tools.is_empty() {
        eprintln!("No tool a script can call (hidden tools are left out); see the servers with: tether list");
    } else if signatures && !json {
        let mut text = String::new();
        for entry in &tools {
            if let Some(line) = entry
                .tool
                .description
                .as_deref()
                .and_then(|text| text.lines().map(str::trim).find(|line| !line.is_empty()))
            {
                text.push_str(&format!("/** {} */\n", line.replace("*/", "* /")));
            }
            text.push_str(&entry.signature());
            text.push_str("\n\n");
        }
        emit(&escape::escaped_body(&text));
    } else if json {
        // Each row is made as it is written, never all at once.
        let rows = Lazy(|| {
            tools.iter().map(|entry| {
                let mut row = json!({
                    "name": entry.qualified_name,
                    "server": entry.server,
                    "tool": entry.tool.name,
                    "exposure": entry.exposure,
                    "description": entry.tool.description,
                    "inputSchema": entry.tool.input_schema,
                    "outputSchema": entry.tool.output_schema,
                    "annotations": entry.tool.annotations,
                });
                // What a script sees, in a build that runs scripts.
                if tether::CODEMODE_AVAILABLE {
                    row["signature"] = Value::String(entry.signature());
                }
                row
            })
        });
        emit_json(&rows);
    } else {
        // One server named: each tool with the arguments it takes, as a
        // call's `key=value` words would give them.
        let rows: Vec<[String; 3]> = tools
            .iter()
            .map(|entry| {
                let description =
                    entry.tool.description.as_deref().and_then(|text| text.lines().next());
                let name = match server {
                    Some(_) => format!(
                        "{}({})",
                        entry.qualified_name,
                        super::arguments::signature(&entry.tool.input_schema)
                    ),
                    None => entry.qualified_name.clone(),
                };
                [name, entry.exposure.as_str().to_owned(), description.unwrap_or("").to_owned()]
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

/// A call's arguments as the command line gave them.
struct Given<'a> {
    json: Option<&'a str>,
    pairs: &'a [String],
}

/// How a call's result is shown: `--json`, `--max-chars`, `--save-images`.
struct Shown {
    json: bool,
    max_chars: Option<usize>,
    save_images: Option<std::path::PathBuf>,
}

fn call(
    config: Config,
    server: &str,
    tool: &str,
    given: Given<'_>,
    timeout: Option<Duration>,
    shown: &Shown,
    signals: &SignalWatch,
) -> u8 {
    // JSON is read before anything starts; `key=value` words need the
    // tool's schema, once the server is up.
    // A folder for images that cannot be one is said before the call.
    if let Some(folder) = &shown.save_images {
        let usable = match std::fs::metadata(folder) {
            Ok(meta) => meta.is_dir(),
            Err(_) => {
                folder.parent().is_none_or(|parent| {
                    parent.as_os_str().is_empty() || std::fs::create_dir_all(parent).is_ok()
                }) && std::fs::create_dir_all(folder).is_ok()
            }
        };
        if !usable {
            errln!(
                "--save-images {}: not a folder tether can write to",
                escape::escaped(&folder.display().to_string())
            );
            return EXIT_USAGE;
        }
    }
    let arguments = match given.pairs {
        // No arguments at all: checked against the schema's required ones
        // once the server is up, as `key=value` words are.
        [] if given.json.is_none() => None,
        [] => match super::arguments::from_json(given.json) {
            Ok(arguments) => Some(arguments),
            Err(message) => {
                errln!("{message}");
                return EXIT_USAGE;
            }
        },
        _ => None,
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
        options.progress = Some(Arc::new(show_progress));
    }
    let arguments = match arguments {
        Some(arguments) => arguments,
        None => {
            let schema = hub
                .tools()
                .into_iter()
                .find(|entry| {
                    // The qualified name as written, or with `_` for `-`
                    // (as signatures and scripts spell it).
                    let key = |name: &str| name.replace('-', "_");
                    Config::same_name(&entry.server, &name)
                        && (entry.tool.name == tool || key(&entry.qualified_name) == key(tool))
                })
                .map(|entry| entry.tool.input_schema)
                .unwrap_or_else(|| json!({}));
            match super::arguments::from_pairs(given.pairs, &schema) {
                Ok(arguments) => arguments,
                Err(message) => {
                    // It names what the server's schema says: escaped.
                    errln!("{}", escape::escaped(&message));
                    return EXIT_USAGE;
                }
            }
        }
    };
    let mut answer = hub.call_server_tool(&name, tool, arguments.clone(), &options);
    // Pages the server wants opened first (`-32042`): on a terminal, offered,
    // waited for, and the call made again (three times at most).
    for _ in 0..3 {
        let Err(err) = &answer else { break };
        let Error::UrlElicitationRequired { message, elicitations } = err.root() else { break };
        progress::clear();
        let done = |wait| hub.wait_elicitations(&name, elicitations, wait).unwrap_or(false);
        if !super::terminal::open_pages(&name, message, elicitations, &done) {
            break;
        }
        answer = hub.call_server_tool(&name, tool, arguments.clone(), &options);
    }
    progress::clear();
    match answer {
        Ok(result) => print_result(&result, shown, &name, tool),
        Err(err) => report_call_error(&err, &hub, &name, tool),
    }
}

/// A call's progress on the status line.
fn show_progress(update: &tether::Progress) {
    let total = update.total.map(|total| format!("/{total}")).unwrap_or_default();
    let message = match update.message.as_deref() {
        Some(message) if !message.trim().is_empty() => {
            format!(" {}", escape::escaped(message))
        }
        _ => String::new(),
    };
    progress::show(&format!("progress {}{total}{message}", update.progress));
}

/// Prints a tool's result; the exit code says whether the tool reported
/// an error.
fn print_result(result: &tether::ToolResult, shown: &Shown, name: &str, tool: &str) -> u8 {
    if shown.json {
        emit_json(&result.raw);
    } else {
        let mut text = result.to_text();
        if let Some(limit) = shown.max_chars {
            if let Some((at, _)) = text.char_indices().nth(limit) {
                let total = text.chars().count();
                text.truncate(at);
                text.push_str(&format!(
                    "\n[cut at {limit} of {total} characters; --json shows the whole result]"
                ));
            }
        }
        emit_body(&text);
        if !text.ends_with('\n') {
            emit("\n");
        }
    }
    if let Some(folder) = &shown.save_images {
        // The result could not be written whole: as a failed write.
        if let Err(why) = save_images(result, folder) {
            errln!("{}", escape::escaped(&why));
            return EXIT_TOOL_ERROR;
        }
    }
    if let Some(mismatch) = &result.schema_mismatch {
        // The result is shown all the same: the server's contract, not the
        // call, is what broke.
        eprintln!("warning: server {name:?}: {}", escape::escaped(mismatch));
    }
    if result.is_error() {
        // The result above is the tool's own account of it.
        errln!("server {name:?}: the tool {:?} reported an error", escape::escaped(tool));
        EXIT_TOOL_ERROR
    } else {
        EXIT_OK
    }
}

/// Writes each image block of `result` to `folder` (made if need be) as
/// `image-N.EXT`, and says each file on stdout.
fn save_images(result: &tether::ToolResult, folder: &std::path::Path) -> Result<(), String> {
    use base64::Engine as _;
    let mut saved = 0;
    for block in result.blocks() {
        let tether::ContentBlock::Image { mime_type, data } = block else { continue };
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(|err| format!("image {}: its data is not base64: {err}", saved + 1))?;
        let extension = match mime_type {
            "image/png" => "png",
            "image/jpeg" => "jpg",
            "image/gif" => "gif",
            "image/webp" => "webp",
            "image/svg+xml" => "svg",
            _ => "bin",
        };
        std::fs::create_dir_all(folder)
            .map_err(|err| format!("cannot make {}: {err}", folder.display()))?;
        saved += 1;
        // A file already there is never replaced: the next free number.
        let mut number = saved;
        let (path, file) = loop {
            let path = folder.join(format!("image-{number}.{extension}"));
            match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(file) => break (path, file),
                Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => number += 1,
                Err(err) => return Err(format!("cannot write {}: {err}", path.display())),
            }
        };
        std::io::Write::write_all(&mut &file, &bytes)
            .map_err(|err| format!("cannot write {}: {err}", path.display()))?;
        outln!("[image {saved} saved to {}]", escape::escaped(&path.display().to_string()));
    }
    Ok(())
}

/// Says why a call failed, with the server's last words when it went away
/// and a hint where one helps; returns the exit code.
fn report_call_error(err: &Error, hub: &tether::Hub, name: &str, tool: &str) -> u8 {
    let code = report(err);
    if let Error::Disconnected(_) = err.root() {
        // The server went away mid-call: its last words say why.
        let tail = hub
            .status()
            .into_iter()
            .find(|status| Config::same_name(&status.name, name))
            .and_then(|status| status.stderr_tail);
        for line in tail.as_deref().map(|tail| status::last_lines(tail, 10)).unwrap_or_default() {
            detail!("stderr: {}", escape::escaped(line));
        }
    }
    if let Error::UnknownTool(_) = err.root() {
        let listed: Vec<String> = hub
            .status()
            .into_iter()
            .filter(|status| Config::same_name(&status.name, name))
            .flat_map(|status| status.tools)
            .collect();
        let known: Vec<&str> = listed.iter().map(String::as_str).collect();
        let key = |name: &str| name.replace('-', "_");
        let hidden = hub.tools().into_iter().find(|entry| {
            Config::same_name(&entry.server, name)
                && (entry.tool.name == tool || key(&entry.qualified_name) == key(tool))
                && entry.exposure == tether::Exposure::Hidden
        });
        if let Some(hidden) = hidden {
            detail!(
                "hint: {:?} hides it (its \"exposure\" or \"toolExposure\", or --exclude-tools); \
                 to call it: tether expose {name} direct --tool {}",
                escape::escaped(name),
                escape::escaped(&hidden.tool.name)
            );
        } else {
            match tether::for_cli::closest(tool, &known) {
                Some(close) => detail!("hint: did you mean {:?}?", escape::escaped(close)),
                None => detail!("hint: see its tools with: tether tools {name}"),
            }
        }
    }
    // An entry typed on the command line has no file to raise a timeout in.
    let in_a_file = hub
        .status()
        .iter()
        .any(|status| Config::same_name(&status.name, name) && status.source.is_some());
    match err.root() {
        _ if INTERRUPTED.load(Ordering::SeqCst) => {}
        Error::LoginRequired { .. } => {
            detail!("hint: sign in with: tether login {name}");
        }
        Error::UrlElicitationRequired { elicitations, .. } => {
            for page in elicitations {
                detail!("open: {}", escape::escaped(&page.url));
            }
            detail!("hint: open it in a browser and finish there, then run the command again");
        }
        Error::Timeout(_) if !in_a_file => {
            detail!("hint: pass a longer --timeout");
        }
        Error::Timeout(tether::Timeout { step: tether::Step::Ceiling { .. }, .. }) => {
            detail!("hint: the tool was still at work; raise \"maxTotalTimeout\" for {name:?} in the configuration");
        }
        Error::Timeout(_) => {
            detail!("hint: pass a longer --timeout, or raise \"timeout\" for {name:?} in the configuration");
        }
        _ => {}
    }
    code
}

/// A JSON array of the items an iterator makes, each made as it is written.
struct Lazy<F>(F);

impl<F, I> serde::Serialize for Lazy<F>
where
    F: Fn() -> I,
    I: Iterator,
    I::Item: serde::Serialize,
{
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq((self.0)())
    }
}
