//! `tether run`: a codemode script against the configured servers, so that a
//! person chains calls from a shell the way a model does in one `codemode`
//! call. Only the servers the script names are started; the returned value
//! is the one thing on stdout, and each call the script made, with its
//! time, goes to stderr as it ends.

use std::io::{self, IsTerminal, Read};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use tether::for_cli::{servers_named, Named};
use tether::{
    CallHook, Config, Error, NestedCall, NestedOutcome, ParentCall, PlannedCall, ScriptErrorKind,
    ScriptOptions, ScriptRun, Verdict,
};

use super::output::{
    emit, emit_body, emit_json, EXIT_OK, EXIT_SERVER, EXIT_TOOL_ERROR, EXIT_USAGE,
};
use super::signals::SignalWatch;
use super::starting::warn_not_connected;
use super::{escape, output};

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
        eprintln!(
            "error: this tether was built without codemode (the \"codemode\" cargo feature); \
             install it with its default features"
        );
        return EXIT_USAGE;
    }
    let began = Instant::now();
    let source = match source(file, code) {
        Ok(source) => source,
        Err(message) => {
            eprintln!("error: {message}");
            return EXIT_USAGE;
        }
    };
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
        limits.timeout = ceiling.saturating_sub(began.elapsed()).max(Duration::from_millis(1));
    }
    let options = ScriptOptions::default().with_limits(limits).with_hook(Arc::new(ShowCalls));
    let ran = match hub.run_script(&source, &options) {
        Ok(ran) => ran,
        Err(err) => return output::report(&err),
    };
    if json {
        emit_json(&to_json(&ran));
    } else {
        for line in ran.console.lines() {
            eprintln!("{}", escape::escaped(line));
        }
        if let Some(text) = ran.value_text() {
            emit_body(&text);
            if !text.ends_with('\n') {
                emit("\n");
            }
        }
    }
    exit_code(&ran)
}

/// The script: `-e CODE`, a file, `-` for stdin, or stdin when it is not
/// a terminal.
fn source(file: Option<&str>, code: Option<&str>) -> Result<String, String> {
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

/// Prints each call on stderr as it ends: its name, how it ended, its time.
struct ShowCalls;

impl CallHook for ShowCalls {
    fn before_call(&self, _call: &PlannedCall) -> Verdict {
        Verdict::Allow
    }

    fn after_call(&self, call: &NestedCall, _parent: &ParentCall) {
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

/// The exit code of a run (and its error said on stderr): 0; 1 the script
/// threw or returned a tool error; 2 a syntax error or an unknown tool;
/// 3 a server failed or the time ran out.
fn exit_code(ran: &ScriptRun) -> u8 {
    let Some(error) = &ran.error else {
        let tool_error =
            ran.value.as_ref().and_then(|value| value.get("isError")) == Some(&Value::Bool(true));
        if tool_error {
            eprintln!("error: the script returned a tool error");
            return EXIT_TOOL_ERROR;
        }
        return EXIT_OK;
    };
    eprintln!("error: the script failed: {}", escape::escaped(&error.to_string()));
    match error.kind {
        ScriptErrorKind::Syntax | ScriptErrorKind::UnknownTool => {
            if error.kind == ScriptErrorKind::UnknownTool {
                eprintln!("  hint: see the tools with: tether tools --signatures");
            }
            EXIT_USAGE
        }
        ScriptErrorKind::Timeout | ScriptErrorKind::Cancelled => {
            eprintln!("  hint: pass a longer --timeout, or raise \"codemode\": {{\"timeout\": S}} in mcp.json");
            EXIT_SERVER
        }
        ScriptErrorKind::ToolFailed => match error.cause.as_deref() {
            Some(cause) => match cause.root() {
                Error::Rpc(rpc) if rpc.code == -32601 || rpc.code == -32602 => EXIT_USAGE,
                Error::Rpc(_) => EXIT_TOOL_ERROR,
                _ if cause.is_server_failure() => EXIT_SERVER,
                _ => EXIT_USAGE,
            },
            None => EXIT_TOOL_ERROR,
        },
        _ => EXIT_TOOL_ERROR,
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
        "calls": calls,
        "error": error,
        "elapsedMs": millis(ran.elapsed),
    })
}
