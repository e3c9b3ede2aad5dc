//! How a server's status reads: the words, hints and times of `list`, of
//! `list --json`, and of the errors the other commands print.
//!
//! The library's `ServerStatus` is typed data (a state, an `Error` with its
//! causes, a `SystemTime`); everything meant for a person is made here.

use serde_json::{json, Value};
use tether::{Era, Error, ServerState, ServerStatus, Step, Timeout, Unapproved};

use super::escape::escaped;
use super::table;

/// The word `tether list` prints for a state; `--json` says the same in
/// camelCase ([`json_label`]).
pub(super) fn label(state: ServerState) -> &'static str {
    match state {
        ServerState::Connecting => "connecting",
        ServerState::Ready => "connected",
        ServerState::Failed => "failed",
        ServerState::Disabled => "disabled",
        ServerState::Untrusted => "untrusted",
        ServerState::NeedsLogin => "needs login",
        ServerState::Closed => "closed",
        _ => "unknown",
    }
}

/// A state as `--json` says it: the library's word for it.
pub(super) fn json_label(state: ServerState) -> &'static str {
    state.as_str()
}

/// The status's error on one line, if it has one.
pub(super) fn error_text(status: &ServerStatus) -> Option<String> {
    status.error.as_deref().map(|error| match error.root() {
        // An entry that could not be used: the loader's message says it all.
        Error::Config(message) if status.transport == "-" => message.clone(),
        _ => error.chain(),
    })
}

/// True when the failed "server" is a whole file that could not be read.
fn is_file_failure(status: &ServerStatus) -> bool {
    status.source.as_ref().and_then(|source| source.file_name()).and_then(|name| name.to_str())
        == Some(status.name.as_str())
}

/// What to do about a server that is not connected.
pub(super) fn hint(status: &ServerStatus) -> Option<String> {
    let file = status
        .source
        .as_ref()
        .map_or_else(|| "the configuration".to_owned(), |path| path.display().to_string());
    if status.state == ServerState::Untrusted {
        let project = status
            .source
            .as_ref()
            .and_then(|source| source.parent())
            .map_or_else(|| ".".into(), |dir| dir.display().to_string());
        let would_run = escaped(status.target.as_deref().unwrap_or("?"));
        let why = match status.unapproved {
            Some(Unapproved::Changed) => "this entry changed since the project was trusted",
            Some(Unapproved::Added) => "this entry was added since the project was trusted",
            _ => "the project is not trusted",
        };
        return Some(format!(
            "{why}; it would run: {would_run}; review and approve it with: tether trust {project}"
        ));
    }
    match status.error.as_deref()?.root() {
        // The whole file failed: it is named in place of a server.
        Error::Config(_) if status.transport == "-" && is_file_failure(status) => {
            Some(format!("fix {file}: none of its servers is known until it reads"))
        }
        Error::Config(_) if status.transport == "-" => Some(format!("fix the entry in {file}")),
        // An entry of no file is typed on the command line (an ad-hoc one).
        Error::Spawn { command, source }
            if source.kind() == std::io::ErrorKind::NotFound && status.source.is_none() =>
        {
            Some(format!("check that `{command}` is installed and on PATH, or give its full path"))
        }
        Error::Spawn { command, source } if source.kind() == std::io::ErrorKind::NotFound => {
            Some(format!(
                "check that `{command}` is installed and on PATH, or give its full path in {file}"
            ))
        }
        Error::Timeout(Timeout { step: Step::Start { .. }, .. }) => {
            // What it was doing first: a server waiting for a download or a
            // password says so on stderr.
            if status.transport != "stdio" {
                return Some(format!(
                    "the server did not answer in time; if it needs longer, raise \"startTimeout\" in {file}"
                ));
            }
            let doing = match status.stderr_tail.as_deref().map(|tail| last_lines(tail, 1)) {
                Some(last) if !last.is_empty() => format!("its stderr last said {:?}", last[0]),
                _ => "it printed nothing on stderr".to_owned(),
            };
            Some(format!(
                "the server was still starting ({doing}); if it needs longer, raise \"startTimeout\" in {file}"
            ))
        }
        Error::Timeout(Timeout { step: Step::Ceiling { .. }, .. }) => {
            Some(format!("raise \"maxTotalTimeout\" in {file}"))
        }
        Error::Timeout(_) => Some(format!("raise \"timeout\" in {file}")),
        // Nothing at that path, over either transport: most often a typo.
        Error::Http { status: Some(404), .. } => {
            let url = escaped(status.target.as_deref().unwrap_or("?"));
            Some(match &status.source {
                Some(_) => format!(
                    "no MCP server answers at {url}; check the URL in {file} (tether tried \
                     Streamable HTTP, then the older HTTP+SSE transport, unless \"type\" names \
                     one)"
                ),
                // An ad-hoc URL or `tether proxy`'s: no file to fix.
                None => format!(
                    "no MCP server answers at {url}; check the URL (tether tried Streamable \
                     HTTP, then the older HTTP+SSE transport)"
                ),
            })
        }
        // MissingRequiredClientCapability: most often elicitation, which the
        // CLI offers only on a terminal.
        Error::Rpc(rpc) if rpc.code == -32021 => Some(
            "the server needs something this client did not offer; tether answers questions \
             (elicitation) only when it runs on a terminal"
                .to_owned(),
        ),
        // Only when there is something below to read.
        Error::Disconnected(_) if status.stderr_tail.is_some() => {
            Some("the server exited; the end of its stderr is below".to_owned())
        }
        Error::LoginRequired { .. } => Some(format!("sign in with: tether login {}", status.name)),
        // A Streamable HTTP server refuses the legacy transport's GET.
        Error::Http { status: Some(405), .. } if status.transport == "sse" => Some(format!(
            "the server may speak Streamable HTTP: set \"type\": \"http\" (or remove \"type\") in {file}"
        )),
        _ => None,
    }
}

/// One status as `list --json` prints it (the README documents the keys).
pub(super) fn to_json(status: &ServerStatus, roots: &[String]) -> Value {
    json!({
        "name": status.name,
        "scope": status.scope,
        "transport": status.transport,
        "state": json_label(status.state),
        "target": status.target,
        "unapproved": status.unapproved,
        "era": status.era.map(Era::as_str),
        "protocolVersion": status.protocol_version,
        "serverName": status.server_name,
        "serverVersion": status.server_version,
        "instructions": status.instructions,
        "tools": status.tools,
        "resources": status.resources,
        "prompts": status.prompts,
        "roots": roots,
        "error": error_text(status),
        "hint": hint(status),
        "warnings": status.warnings,
        "stderrTail": status.stderr_tail,
        "since": tether::for_cli::rfc3339(status.since),
        "file": status.source,
    })
}

/// The widths of `tether list`'s columns: name, state, transport, scope.
pub(super) type Widths = [usize; 4];

/// The cells of a status's first line.
fn cells(status: &ServerStatus) -> [String; 4] {
    [
        escaped(&status.name),
        label(status.state).to_owned(),
        status.transport.to_owned(),
        status.scope.as_str().to_owned(),
    ]
}

/// Columns as wide as these statuses need.
pub(super) fn widths_of(statuses: &[ServerStatus]) -> Widths {
    let rows: Vec<[String; 4]> = statuses.iter().map(cells).collect();
    let widths = table::widths(&rows);
    std::array::from_fn(|column| widths.get(column).copied().unwrap_or(0))
}

/// Columns wide enough for any state of servers with these names, for rows
/// printed before the others are known.
pub(super) fn widths_for_names<'a>(names: impl Iterator<Item = &'a str>) -> Widths {
    let name = names.map(|name| escaped(name).chars().count()).max().unwrap_or(4);
    [name, label(ServerState::NeedsLogin).len(), "stdio".len(), "project".len()]
}

/// `tether list` for these statuses, in their order.
#[cfg_attr(not(feature = "serve"), allow(dead_code))]
pub(super) fn render_list(statuses: &[ServerStatus]) -> String {
    let widths = widths_of(statuses);
    statuses.iter().map(|status| render_row(status, &widths)).collect()
}

/// One server in `tether list`: aligned columns (name, state, transport,
/// scope, command or URL), then its tools, error, hint, warnings and the end
/// of its stderr, indented. Everything a server or a file said is escaped.
pub(super) fn render_row(status: &ServerStatus, widths: &Widths) -> String {
    let mut row = cells(status).to_vec();
    row.push(escaped(status.target.as_deref().unwrap_or("")));
    let mut out = table::line(&row, widths);
    out.push('\n');
    if status.state == ServerState::Ready {
        let count = status.tools.len();
        let noun = if count == 1 { "tool" } else { "tools" };
        let names: Vec<String> = status.tools.iter().map(|name| escaped(name)).collect();
        let names =
            if names.is_empty() { String::new() } else { format!(": {}", names.join(", ")) };
        out.push_str(&format!("    {count} {noun}{names}\n"));
        if let (Some(era), Some(version)) = (status.era, &status.protocol_version) {
            out.push_str(&format!("    MCP {} ({})\n", escaped(version), era_words(era)));
        }
    }
    if let Some(error) = error_text(status) {
        out.push_str(&format!("    error: {}\n", escaped(&error)));
    }
    if let Some(hint) = hint(status) {
        out.push_str(&format!("    hint: {}\n", escaped(&hint)));
    }
    for warning in &status.warnings {
        out.push_str(&format!("    warning: {}\n", escaped(warning)));
    }
    if let Some(tail) = &status.stderr_tail {
        out.push_str("    stderr:\n");
        for line in last_lines(tail, 10) {
            out.push_str(&format!("    | {}\n", escaped(line)));
        }
    }
    out
}

/// The last `count` non-blank lines of a server's stderr.
pub(super) fn last_lines(text: &str, count: usize) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().filter(|line| !line.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(count)..].to_vec()
}

/// How `list` names an era.
fn era_words(era: Era) -> &'static str {
    match era {
        Era::Modern => "stateless",
        _ => "initialize handshake",
    }
}
