//! `tether run`: a codemode script against the configured servers, so that a
//! person chains calls from a shell the way a model does in one `codemode`
//! call. Only the servers the script names are started; the returned value
//! is the one thing on stdout, and each call the script made (with its
//! time) and each console line go to stderr as they happen. A failure says
//! what `call` would say of the server behind it: its last stderr lines, and
//! what to do.

use std::io::{self, IsTerminal, Read};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use tether::for_cli::{closest, servers_named, Named};
use tether::{
    CallHook, Config, Error, Hub, NestedCall, NestedOutcome, ParentCall, PlannedCall, ScriptError,
    ScriptErrorKind, ScriptOptions, ScriptRun, Verdict,
};

use super::output::{
    emit, emit_body, emit_json, EXIT_OK, EXIT_SERVER, EXIT_TOOL_ERROR, EXIT_USAGE, INTERRUPTED,
};
use super::signals::SignalWatch;
use super::starting::warn_not_connected;
use super::{escape, output, status};

/// The most bytes of a script read from a file or stdin; the engine's own
/// source limit (64 KiB unless the configuration says) refuses less.
const MAX_READ: u64 = 16 << 20;

/// Runs `tether run`.
pub(super) fn run(
    mut config: Config,
    file: Option<&str>,
    code: Option<&str>,
    timeout: Option<Duration>,
    json: bool,
    signals: &SignalWatch,
) -> u8 {
    if !tether::CODEMODE_AVAILABLE {
        errln!(
            "this tether was built without codemode (the \"codemode\" cargo feature); \
             install it with its default features"
        );
        return EXIT_USAGE;
    }
    let began = Instant::now();
    let source = match source(file, code) {
        Ok(source) => source,
        Err(message) => {
            errln!("{message}");
            return EXIT_USAGE;
        }
    };
    warn_of_servers_that_will_not_start(&config, &source);
    // Only the servers the script names start.
    let names: Vec<&str> = config.servers.iter().map(|server| server.name.as_str()).collect();
    if let Named::Some(named) = servers_named(&source, &names) {
        config.servers.retain(|server| named.contains(&server.name));
    }
    let mut limits = config.codemode;
    if let Some(ceiling) = timeout {
        for server in &mut config.servers {
            server.start_timeout = server.start_timeout.min(ceiling);
        }
    }
    let hub = signals.start_hub(config);
    warn_not_connected(&hub);
    if let Some(ceiling) = timeout {
        // What the starts left of the ceiling.
        limits.timeout = ceiling.saturating_sub(began.elapsed());
        if limits.timeout < Duration::from_millis(1) {
            errln!("--timeout ran out while the servers started; pass a longer one");
            return EXIT_SERVER;
        }
    }
    let quiet = !log::log_enabled!(log::Level::Warn);
    let options = ScriptOptions::default()
        .with_limits(limits)
        .with_hook(Arc::new(ShowCalls { quiet }))
        .with_console(|line| eprintln!("{}", escape::escaped(line)));
    let ran = match hub.run_script(&source, &options) {
        Ok(ran) => ran,
        Err(err) => return output::report(&err),
    };
    if json {
        emit_json(&to_json(&ran));
    } else {
        // What the console said went out as it was said, but the note on
        // lines left out.
        if let Some(note) = ran.console.lines().last().filter(|line| line.contains("left out")) {
            eprintln!("{note}");
        }
        for image in &ran.images {
            let mime = image.get("mimeType").and_then(Value::as_str).unwrap_or("?");
            let bytes =
                image.get("data").and_then(Value::as_str).map_or(0, |data| data.len() * 3 / 4);
            eprintln!(
                "image: {}, about {bytes} bytes (not shown here; --json has it)",
                escape::escaped(mime)
            );
        }
        if let Some(text) = ran.value_text() {
            emit_body(&text);
            if !text.ends_with('\n') {
                emit("\n");
            }
        }
    }
    exit_code(&ran, &hub)
}

/// The script: `-e CODE`, a file, `-` for stdin, or stdin when it is not
/// a terminal.
pub(super) fn source(file: Option<&str>, code: Option<&str>) -> Result<String, String> {
    if let Some(code) = code {
        return Ok(code.to_owned());
    }
    let mut text = String::new();
    match file {
        Some("-") => {}
        Some(path) => {
            let opened =
                std::fs::File::open(path).map_err(|err| format!("cannot read {path}: {err}"))?;
            opened
                .take(MAX_READ)
                .read_to_string(&mut text)
                .map_err(|err| format!("cannot read {path}: {err}"))?;
            return Ok(text);
        }
        None if io::stdin().is_terminal() => {
            return Err("usage: tether run [FILE|-] [-e CODE] [--timeout S] [--json] \
                        (no script given; see tether run --help)"
                .into())
        }
        None => {}
    }
    io::stdin()
        .take(MAX_READ)
        .read_to_string(&mut text)
        .map_err(|err| format!("cannot read the script from stdin: {err}"))?;
    Ok(text)
}

/// Says which namespaces the script names (`mcp__NAME__`) whose server
/// will not start: unknown (with the closest name), untrusted, disabled or
/// invalid. The script still runs; its calls there fail, and say so too.
fn warn_of_servers_that_will_not_start(config: &Config, source: &str) {
    if !log::log_enabled!(log::Level::Warn) {
        return;
    }
    let mut named: Vec<&str> = Vec::new();
    for (at, _) in source.match_indices("mcp__") {
        let rest = &source[at + 5..];
        let Some(end) = rest.find("__") else { continue };
        let name = &rest[..end];
        let fits = !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if fits && !named.contains(&name) {
            named.push(name);
        }
    }
    for name in named {
        let shown = escape::escaped(name);
        if let Some(server) = config.server(name) {
            if !server.enabled {
                eprintln!(
                    "warning: server {:?} is disabled; turn it on with: tether enable {}",
                    server.name, server.name
                );
            }
        } else if let Some(entry) =
            config.untrusted.iter().find(|e| Config::same_name(&e.name, name))
        {
            let project =
                entry.source.parent().map_or_else(|| ".".into(), |dir| dir.display().to_string());
            eprintln!(
                "warning: server {shown:?} is in a project that is not trusted (or changed since); \
                 review it, and if you trust it, run: tether trust {project}"
            );
        } else if let Some(entry) = config.failed.iter().find(|e| Config::same_name(&e.name, name))
        {
            eprintln!(
                "warning: server {shown:?} has an invalid entry: {}",
                escape::escaped(&entry.error)
            );
        } else {
            let known: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
            let hint = closest(name, &known).map(|close| format!(" (did you mean {close:?}?)"));
            eprintln!(
                "warning: no server {shown:?} is configured{}",
                hint.unwrap_or_else(|| "; see them with: tether list".into())
            );
        }
    }
}

/// Prints each call on stderr as it ends: its name, how it ended, its time.
struct ShowCalls {
    quiet: bool,
}

impl CallHook for ShowCalls {
    fn before_call(&self, _call: &PlannedCall) -> Verdict {
        Verdict::Allow
    }

    fn after_call(&self, call: &NestedCall, _parent: &ParentCall) {
        if self.quiet || INTERRUPTED.load(Ordering::SeqCst) {
            return;
        }
        let ms = call.elapsed.as_secs_f64() * 1000.0;
        let why = match &call.outcome {
            NestedOutcome::Failed(error) => format!(": {error}"),
            NestedOutcome::Denied(reason) | NestedOutcome::Refused(reason) => format!(": {reason}"),
            _ => String::new(),
        };
        eprintln!(
            "call {} {} in {ms:.1} ms{}",
            escape::escaped(&call.name),
            call.outcome.as_str(),
            escape::escaped(&why)
        );
    }
}

/// The exit code of a run (and its error said on stderr, with what to do):
/// 0; 1 the script threw or returned a tool error; 2 a syntax error, an
/// unknown tool or server, a server not started for its configuration;
/// 3 a server failed or the time ran out.
fn exit_code(ran: &ScriptRun, hub: &Hub) -> u8 {
    if INTERRUPTED.load(Ordering::SeqCst) {
        return EXIT_SERVER;
    }
    let Some(error) = &ran.error else {
        let tool_error =
            ran.value.as_ref().and_then(|value| value.get("isError")) == Some(&Value::Bool(true));
        if tool_error {
            errln!("the script returned a tool's result with \"isError\": true");
            return EXIT_TOOL_ERROR;
        }
        return EXIT_OK;
    };
    errln!("the script failed: {}", escape::escaped(&error.to_string()));
    hint(error, hub);
    match error.kind {
        ScriptErrorKind::Syntax | ScriptErrorKind::UnknownTool => EXIT_USAGE,
        ScriptErrorKind::Timeout | ScriptErrorKind::Cancelled => EXIT_SERVER,
        ScriptErrorKind::ToolFailed => {
            error.cause.as_deref().map_or(EXIT_TOOL_ERROR, output::exit_code_of)
        }
        _ => EXIT_TOOL_ERROR,
    }
}

/// What to do about a failed script, on stderr.
fn hint(error: &ScriptError, hub: &Hub) {
    let server = error.cause.as_deref().and_then(|cause| match cause {
        Error::Server { name, .. } => Some(name.clone()),
        _ => None,
    });
    if let (Some(name), Some(cause)) = (&server, error.cause.as_deref()) {
        let status = hub.status().into_iter().find(|status| Config::same_name(&status.name, name));
        if let Some(status) = &status {
            if matches!(cause.root(), Error::Disconnected(_) | Error::NotConnected { .. }) {
                if let Some(hint) = status::hint(status) {
                    detail!("hint: {}", escape::escaped(&hint));
                }
                let tail = status.stderr_tail.as_deref().unwrap_or("");
                for line in status::last_lines(tail, 10) {
                    detail!("stderr: {}", escape::escaped(line));
                }
            }
        }
        if let Error::LoginRequired { .. } = cause.root() {
            detail!("hint: sign in with: tether login {name}");
        }
    }
    let limit = |key: &str| {
        eprintln!(
            "  hint: raise it in mcp.json: {{\"codemode\": {{\"{key}\": …}}, \"mcpServers\": …}}"
        );
    };
    match error.kind {
        ScriptErrorKind::UnknownTool => {
            detail!("hint: see what a script can call with: tether tools --signatures");
        }
        ScriptErrorKind::Timeout => {
            if matches!(error.cause.as_deref().map(Error::root), Some(Error::Timeout(_))) {
                detail!("hint: raise \"timeout\" for the server in the configuration");
            } else {
                detail!("hint: pass a longer --timeout (the script's own default is 30 s: \"codemode\": {{\"timeout\": S}} in mcp.json)");
            }
        }
        ScriptErrorKind::Limit if error.message.contains("calls") => limit("maxCalls"),
        ScriptErrorKind::Limit if error.message.contains("memory") => limit("memoryMb"),
        ScriptErrorKind::Limit if error.message.contains("call stack") => limit("stackKb"),
        ScriptErrorKind::Limit if error.message.contains("the script is") => limit("maxSourceKb"),
        ScriptErrorKind::Threw if error.message.contains("out of memory") => limit("memoryMb"),
        _ => {}
    }
}

/// `--json`: the whole run.
fn to_json(ran: &ScriptRun) -> Value {
    let millis = |duration: Duration| (duration.as_secs_f64() * 1e6).round() / 1e3;
    let calls: Vec<Value> = ran
        .calls
        .iter()
        .map(|call| {
            let error = match &call.outcome {
                NestedOutcome::Failed(error) => Some(error.to_string()),
                NestedOutcome::Denied(reason) | NestedOutcome::Refused(reason) => {
                    Some(reason.clone())
                }
                _ => None,
            };
            json!({
                "name": call.name,
                "server": call.server,
                "arguments": call.arguments,
                "startedMs": millis(call.started),
                "elapsedMs": millis(call.elapsed),
                "outcome": call.outcome.as_str(),
                "error": error,
            })
        })
        .collect();
    let error = ran.error.as_ref().map(|error| {
        json!({
            "kind": error.kind.as_str(),
            "message": error.message,
            "line": error.line,
            "column": error.column,
        })
    });
    json!({
        "value": ran.value,
        "console": ran.console,
        "images": ran.images,
        "calls": calls,
        "error": error,
        "elapsedMs": millis(ran.elapsed),
    })
}
