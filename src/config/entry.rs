//! One `mcpServers` entry: checked field by field, expanded, and turned into
//! a [`ServerConfig`] (or, in a project file, an override of a user entry).
//!
//! Every error names the file, the server and the field, so that a person can
//! fix it without reading this code; the value of a variable never appears.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use super::expand::{self, Expander};
use super::{
    Exposure, HttpConfig, HttpKind, Scope, ServerConfig, StdioConfig, TransportConfig,
    DEFAULT_KEEP_ALIVE, DEFAULT_START_TIMEOUT, DEFAULT_TIMEOUT,
};
use crate::protocol::EraChoice;
use crate::spelling::closest;

/// Fields tether understands.
pub(crate) const KNOWN_FIELDS: &[&str] = &[
    "type",
    "command",
    "args",
    "env",
    "envFrom",
    "inheritEnv",
    "cwd",
    "url",
    "headers",
    "bearerTokenEnv",
    "caFile",
    "oauth",
    "auth",
    "enabled",
    "timeout",
    "maxTotalTimeout",
    "startTimeout",
    "shutdownTimeout",
    "tools",
    "protocol",
    "exposure",
    "toolExposure",
    "description",
    "keepAlive",
    // Claude Code's inverse of `enabled`.
    "disabled",
];

/// Fields other clients write that mean nothing here: accepted with a warning.
pub(crate) const FOREIGN_FIELDS: &[&str] = &[
    "autoApprove",
    "alwaysAllow",
    "transportType",
    "transport",
    "timeoutMs",
    "trust",
    "note",
    "envFile",
    "disabledTools",
    "autoStart",
];

/// What an entry turned out to be.
pub(crate) enum Parsed {
    /// A whole server.
    Server(Box<ServerConfig>),
    /// A project entry without `command`, `url` or `type`: it changes only
    /// these settings of the user entry of the same name.
    Override(Override),
}

/// The settings a project entry may override on its own.
#[derive(Debug, Clone, Default)]
pub(crate) struct Override {
    pub(crate) enabled: Option<bool>,
    pub(crate) exposure: Option<Exposure>,
    pub(crate) tool_exposure: Option<Vec<(String, Exposure)>>,
}

/// What parsing an entry needs to know about where it is.
pub(crate) struct Context<'a> {
    pub(crate) scope: Scope,
    pub(crate) path: Option<&'a Path>,
    /// How the file is named in messages.
    pub(crate) shown: &'a str,
    pub(crate) environment: &'a [(String, String)],
    /// `TETHER_MCP_ENV`, when set.
    pub(crate) allowed: Option<&'a BTreeSet<String>>,
    /// True when checking an entry before it is written (`tether add`): no
    /// `!command` runs, and a variable that is not set yet is no error.
    pub(crate) checking: bool,
}

/// Parses one entry.
///
/// # Errors
/// A message naming the file, the server and the field.
pub(crate) fn parse(
    name: &str,
    entry: &Value,
    context: &Context,
    warnings: &mut Vec<String>,
) -> Result<Parsed, String> {
    let shown = context.shown;
    check_name(name).map_err(|why| format!("{shown}: server name {name:?} {why}"))?;
    let Value::Object(fields) = entry else {
        return Err(format!("{shown}: server {name:?} must be an object"));
    };
    check_fields(shown, name, fields, warnings)?;
    let this = Entry { shown, name, fields, context };
    let field = |key: &str, why: String| this.field(key, why);
    let command = optional_string(fields, "command").map_err(|why| field("command", why))?;
    let url = optional_string(fields, "url").map_err(|why| field("url", why))?;
    let kind = optional_string(fields, "type").map_err(|why| field("type", why))?;
    let mut enabled = optional_bool(fields, "enabled").map_err(|why| field("enabled", why))?;
    if fields.get("disabled") == Some(&Value::Bool(true)) && enabled.is_none() {
        enabled = Some(false);
    }
    let exposure = match fields.get("exposure") {
        None => None,
        Some(value) => Some(parse_exposure(value).map_err(|why| field("exposure", why))?),
    };
    let tool_exposure = match fields.get("toolExposure") {
        None => None,
        Some(Value::Object(patterns)) => Some(
            patterns
                .iter()
                .map(|(pattern, value)| Ok((pattern.clone(), parse_exposure(value)?)))
                .collect::<Result<Vec<_>, String>>()
                .map_err(|why| field("toolExposure", why))?,
        ),
        Some(other) => {
            return Err(field(
                "toolExposure",
                format!("must be an object, not {}", type_name(other)),
            ))
        }
    };
    if command.is_none() && url.is_none() && kind.is_none() && context.scope == Scope::Project {
        return Ok(Parsed::Override(Override { enabled, exposure, tool_exposure }));
    }

    let mut expander =
        Expander::new(context.environment, context.allowed, context.scope == Scope::Project);
    expander.run_commands = enabled != Some(false) && !context.checking;
    expander.unset_allowed = context.checking;
    let transport = match (command, url) {
        (Some(_), Some(_)) => {
            return Err(format!(
                "{shown}: server {name:?} has both \"command\" and \"url\"; keep one"
            ))
        }
        (None, None) => {
            return Err(format!(
                "{shown}: server {name:?} needs \"command\" (stdio) or \"url\" (remote)"
            ))
        }
        (Some(command), None) => {
            stdio_transport(&this, &command, kind.as_deref(), &mut expander, warnings)?
        }
        (None, Some(url)) => http_transport(&this, &url, kind.as_deref(), &mut expander, warnings)?,
    };
    let mut transport = transport;
    let (timeout, max_total_timeout, start_timeout) = timeouts(&this, &mut transport, warnings)?;
    let protocol = era_choice(&this, &transport)?;
    let tools = match fields.get("tools") {
        None | Some(Value::Null) => None,
        Some(_) => Some(string_list(fields, "tools").map_err(|why| field("tools", why))?),
    };
    Ok(Parsed::Server(Box::new(ServerConfig {
        name: name.to_owned(),
        scope: context.scope,
        transport,
        enabled: enabled.unwrap_or(true),
        timeout,
        max_total_timeout,
        start_timeout,
        tools,
        protocol,
        exposure: exposure.unwrap_or_default(),
        tool_exposure: tool_exposure.unwrap_or_default(),
        description: optional_string(fields, "description")
            .map_err(|why| field("description", why))?,
        keep_alive: keep_alive(fields).map_err(|why| field("keepAlive", why))?,
        source: context.path.map(Path::to_owned),
        secret_vars: expander.named.into_iter().collect(),
        warnings: Vec::new(),
        raw: Some(entry.clone()),
    })))
}

/// `timeout`, `maxTotalTimeout` and `startTimeout` (and a stdio entry's
/// `shutdownTimeout`), in seconds; a value that looks like milliseconds
/// is warned about.
fn timeouts(
    this: &Entry<'_>,
    transport: &mut TransportConfig,
    warnings: &mut Vec<String>,
) -> Result<(Duration, Duration, Duration), String> {
    let seconds = |key: &str| -> Result<Option<Duration>, String> {
        match this.fields.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => match value.as_f64() {
                Some(secs) if secs > 0.0 && secs < 1e7 => Ok(Some(Duration::from_secs_f64(secs))),
                _ => Err(this.field(
                    key,
                    "must be a number of seconds above 0 and below 10000000 (115 days)".into(),
                )),
            },
        }
    };
    let timeout = seconds("timeout")?.unwrap_or(DEFAULT_TIMEOUT);
    let max_total_timeout = seconds("maxTotalTimeout")?.unwrap_or(timeout * 10).max(timeout);
    let start_timeout = seconds("startTimeout")?.unwrap_or(DEFAULT_START_TIMEOUT);
    if let TransportConfig::Stdio(stdio) = transport {
        stdio.shutdown_timeout = seconds("shutdownTimeout")?;
    }
    // Other clients count some of these in milliseconds: 5000 here is not 5 s.
    for (key, likely_ms) in
        [("timeout", 3600.0), ("startTimeout", 600.0), ("shutdownTimeout", 600.0)]
    {
        match this.fields.get(key).and_then(Value::as_f64) {
            Some(secs) if secs >= likely_ms => warnings.push(format!(
                "{}: server {:?}: field {key:?} is {secs} seconds ({:.0} minutes): \
                 tether counts timeouts in seconds, not milliseconds",
                this.shown,
                this.name,
                secs / 60.0
            )),
            _ => {}
        }
    }
    Ok((timeout, max_total_timeout, start_timeout))
}

/// `protocol`: which era to speak, and never the stateless one over the
/// 2024-11-05 transport.
fn era_choice(this: &Entry<'_>, transport: &TransportConfig) -> Result<EraChoice, String> {
    let protocol = match this.fields.get("protocol") {
        None | Some(Value::Null) => EraChoice::Auto,
        Some(value) => value.as_str().and_then(|word| word.parse().ok()).ok_or_else(|| {
            this.field(
                "protocol",
                format!("must be \"auto\", \"legacy\" or \"modern\", not {value}"),
            )
        })?,
    };
    let legacy_transport =
        matches!(transport, TransportConfig::Http(http) if http.kind == HttpKind::Sse);
    if protocol == EraChoice::Modern && legacy_transport {
        return Err(this.field(
            "protocol",
            "is \"modern\", but \"type\": \"sse\" is the 2024-11-05 transport, which only the \
             handshake era speaks"
                .into(),
        ));
    }
    Ok(protocol)
}

/// A server URL: http(s), with a host and no spaces.
fn check_url(url: &str) -> Result<(), String> {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err("must start with http:// or https://".into());
    }
    let host = url.split_once("://").map_or("", |(_, rest)| rest);
    let host = host.split(['/', '?', '#']).next().unwrap_or("");
    let readable = crate::url::WebUrl::parse(url).is_some();
    if host.is_empty() || !readable || url.chars().any(char::is_whitespace) {
        return Err(format!("is not a valid URL ({url:?} has no host, or has spaces)"));
    }
    Ok(())
}

/// One entry's fields, and how an error names them.
struct Entry<'a> {
    shown: &'a str,
    name: &'a str,
    fields: &'a Map<String, Value>,
    context: &'a Context<'a>,
}

impl Entry<'_> {
    /// An error about field `key`, naming the file and the server.
    fn field(&self, key: &str, why: String) -> String {
        format!("{}: server {:?}: field {key:?} {why}", self.shown, self.name)
    }

    /// A path field (`cwd`, `caFile`), expanded, relative to the folder of
    /// the file it is written in.
    fn path(&self, key: &str, expander: &mut Expander<'_>) -> Result<Option<PathBuf>, String> {
        let Some(path) = optional_string(self.fields, key).map_err(|why| self.field(key, why))?
        else {
            return Ok(None);
        };
        let expanded = expander.expand(&path).map_err(|why| self.field(key, why))?;
        Ok(Some(resolve_cwd(&expanded, self.context.path)))
    }
}

/// Refuses a field tether does not know (naming the closest one) and warns
/// about those of other clients, which mean nothing here.
fn check_fields(
    shown: &str,
    name: &str,
    fields: &Map<String, Value>,
    warnings: &mut Vec<String>,
) -> Result<(), String> {
    for key in fields.keys() {
        if KNOWN_FIELDS.contains(&key.as_str()) {
            continue;
        }
        if FOREIGN_FIELDS.contains(&key.as_str()) {
            warnings.push(format!(
                "{shown}: server {name:?}: field {key:?} means nothing to tether and is ignored"
            ));
            continue;
        }
        // What `list --json` calls the era is set with `protocol`.
        let synonym = matches!(key.as_str(), "era" | "protocolVersion").then_some("protocol");
        let hint = synonym
            .or_else(|| closest(key, KNOWN_FIELDS))
            .map(|known| format!(" (did you mean {known:?}?)"))
            .unwrap_or_default();
        return Err(format!("{shown}: server {name:?}: unknown field {key:?}{hint}"));
    }
    Ok(())
}

/// A stdio entry's transport: the command, its arguments and environment,
/// expanded; no field of a remote entry.
fn stdio_transport(
    entry: &Entry<'_>,
    command: &str,
    kind: Option<&str>,
    expander: &mut Expander<'_>,
    warnings: &mut Vec<String>,
) -> Result<TransportConfig, String> {
    let (shown, name) = (entry.shown, entry.name);
    if let Some(kind) = kind.filter(|kind| !matches!(*kind, "stdio" | "local")) {
        return Err(entry.field(
            "type",
            format!("is {kind:?}, which does not go with \"command\"; use \"stdio\""),
        ));
    }
    for remote_only in ["headers", "bearerTokenEnv", "caFile", "oauth", "auth"] {
        if entry.fields.contains_key(remote_only) {
            return Err(
                entry.field(remote_only, "is for remote servers (\"url\"), not \"command\"".into())
            );
        }
    }
    let command = expander.expand(command).map_err(|why| entry.field("command", why))?;
    if command.trim().is_empty() {
        return Err(entry.field("command", "is empty".into()));
    }
    let args = string_list(entry.fields, "args").map_err(|why| entry.field("args", why))?;
    let args = args
        .iter()
        .map(|arg| expander.expand(arg))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|why| entry.field("args", why))?;
    let mut env = BTreeMap::new();
    for (key, value) in string_map(entry.fields, "env").map_err(|why| entry.field("env", why))? {
        let expanded = expander
            .expand_secret(&value)
            .map_err(|why| entry.field("env", format!("{key}: {why}")))?;
        if !expand::is_indirect(&value) && looks_secret(&key) && !value.is_empty() {
            warnings.push(format!(
                "{shown}: server {name:?}: env {key} holds a literal credential; \
                 prefer \"envFrom\" or \"${{VAR}}\" so it stays out of the file"
            ));
        }
        env.insert(key, expanded);
    }
    let env_from: BTreeMap<String, String> = string_map(entry.fields, "envFrom")
        .map_err(|why| entry.field("envFrom", why))?
        .into_iter()
        .collect();
    for host_variable in env_from.values() {
        expander.check_variable(host_variable).map_err(|why| entry.field("envFrom", why))?;
    }
    let inherit_env = optional_bool(entry.fields, "inheritEnv")
        .map_err(|why| entry.field("inheritEnv", why))?
        == Some(true);
    if inherit_env && entry.context.scope == Scope::Project {
        return Err(entry.field(
            "inheritEnv",
            "would hand the whole environment to a project's server; not allowed in a project file"
                .into(),
        ));
    }
    let cwd = entry.path("cwd", expander)?;
    Ok(TransportConfig::Stdio(StdioConfig {
        command,
        args,
        env,
        env_from,
        inherit_env,
        cwd,
        shutdown_timeout: None,
    }))
}

/// A remote entry's transport: the URL, checked, and its credentials; no
/// field of a stdio entry.
fn http_transport(
    entry: &Entry<'_>,
    url: &str,
    kind: Option<&str>,
    expander: &mut Expander<'_>,
    warnings: &mut Vec<String>,
) -> Result<TransportConfig, String> {
    let (shown, name) = (entry.shown, entry.name);
    let kind = match kind.map(str::parse::<HttpKind>) {
        None => HttpKind::Auto,
        Some(Ok(kind)) => kind,
        Some(Err(other)) => {
            let other = other.given;
            return Err(
                entry.field("type", format!("is {other:?}; use \"http\" or \"sse\" with \"url\""))
            );
        }
    };
    for stdio_only in ["args", "env", "envFrom", "inheritEnv", "cwd", "shutdownTimeout"] {
        if entry.fields.contains_key(stdio_only) {
            return Err(
                entry.field(stdio_only, "is for stdio servers (\"command\"), not \"url\"".into())
            );
        }
    }
    let url = expander.expand(url).map_err(|why| entry.field("url", why))?;
    let from_unset_variable = entry.context.checking && expander.saw_unset;
    if !from_unset_variable {
        check_url(&url).map_err(|why| entry.field("url", why))?;
    }
    let mut headers = Vec::new();
    let mut header_commands = Vec::new();
    for (key, value) in
        string_map(entry.fields, "headers").map_err(|why| entry.field("headers", why))?
    {
        // Run once now; again when the server refuses what it gave.
        if let Some(command_line) = value.strip_prefix('!') {
            header_commands.push((key.clone(), command_line.to_owned()));
        }
        let expanded = expander
            .expand_secret(&value)
            .map_err(|why| entry.field("headers", format!("{key}: {why}")))?;
        if !expand::is_indirect(&value) && is_credential_header(&key) {
            warnings.push(format!(
                "{shown}: server {name:?}: header {key} holds a literal credential; \
                 prefer \"bearerTokenEnv\" or \"${{VAR}}\" so it stays out of the file"
            ));
        }
        headers.push((key, expanded));
    }
    let bearer_token_env = optional_string(entry.fields, "bearerTokenEnv")
        .map_err(|why| entry.field("bearerTokenEnv", why))?;
    if let Some(variable) = &bearer_token_env {
        expander.check_variable(variable).map_err(|why| entry.field("bearerTokenEnv", why))?;
    }
    let auth_provider = match entry.fields.get("auth") {
        None => None,
        Some(Value::Object(auth)) => match auth.get("provider") {
            Some(Value::String(provider)) => Some(provider.clone()),
            _ => return Err(entry.field("auth", "must be {\"provider\": NAME}".into())),
        },
        Some(other) => {
            return Err(entry.field("auth", format!("must be an object, not {}", type_name(other))))
        }
    };
    if auth_provider.is_some() && entry.context.scope == Scope::Project {
        return Err(
            entry.field("auth", "names a token provider, which a project file may not do".into())
        );
    }
    let oauth = match entry.fields.get("oauth") {
        None | Some(Value::Null) => None,
        Some(Value::Object(object)) => Some(Box::new(
            super::oauth::parse(object, expander).map_err(|why| entry.field("oauth", why))?,
        )),
        Some(other) => {
            return Err(entry.field("oauth", format!("must be an object, not {}", type_name(other))))
        }
    };
    // Relative to the file it is written in, as `cwd` is.
    let ca_file = entry.path("caFile", expander)?;
    Ok(TransportConfig::Http(HttpConfig {
        url,
        kind,
        headers,
        header_commands,
        bearer_token_env,
        oauth,
        auth_provider,
        ca_file,
    }))
}

fn parse_exposure(value: &Value) -> Result<Exposure, String> {
    value.as_str().and_then(|word| word.parse().ok()).ok_or_else(|| {
        format!("must be \"direct\", \"deferred\", \"hidden\" or \"codemode\", not {value}")
    })
}

/// Checks the name rules: 1–32 characters of `[A-Za-z0-9_-]`.
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 32 {
        return Err("must be 1 to 32 characters long".into());
    }
    if let Some(bad) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        return Err(format!("has {bad:?}; use letters, digits, '_' and '-'"));
    }
    Ok(())
}

/// `Authorization`, `Cookie`, `Proxy-Authorization` and `*-Key` headers carry credentials.
pub(crate) fn is_credential_header(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    matches!(lower.as_str(), "authorization" | "cookie" | "proxy-authorization")
        || lower.ends_with("-key")
}

/// Variable names that usually hold credentials.
pub(crate) fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    ["KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"]
        .iter()
        .any(|word| upper.contains(word))
}

fn optional_string(fields: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match fields.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(other) => Err(format!("must be a string, not {}", type_name(other))),
    }
}

/// `keepAlive`: `true` (kept for [`DEFAULT_KEEP_ALIVE`] after its last
/// use), a number of idle seconds, or `false`.
fn keep_alive(fields: &Map<String, Value>) -> Result<Option<Duration>, String> {
    match fields.get("keepAlive") {
        None | Some(Value::Null | Value::Bool(false)) => Ok(None),
        Some(Value::Bool(true)) => Ok(Some(DEFAULT_KEEP_ALIVE)),
        Some(value) => match value.as_f64() {
            Some(secs) if (1.0..1e7).contains(&secs) => Ok(Some(Duration::from_secs_f64(secs))),
            _ => Err(format!(
                "must be true, false, or the idle seconds (1 to 9999999) after which the \
                 kept server ends, not {value}"
            )),
        },
    }
}

fn optional_bool(fields: &Map<String, Value>, key: &str) -> Result<Option<bool>, String> {
    match fields.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(flag)) => Ok(Some(*flag)),
        Some(other) => Err(format!("must be true or false, not {}", type_name(other))),
    }
}

fn string_list(fields: &Map<String, Value>, key: &str) -> Result<Vec<String>, String> {
    match fields.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| format!("must hold strings, not {}", type_name(item)))
            })
            .collect(),
        Some(other) => Err(format!("must be a list of strings, not {}", type_name(other))),
    }
}

fn string_map(fields: &Map<String, Value>, key: &str) -> Result<Vec<(String, String)>, String> {
    match fields.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(name, value)| match value {
                Value::String(text) => Ok((name.clone(), text.clone())),
                // Numbers and booleans are what people mean as text.
                Value::Number(_) | Value::Bool(_) => Ok((name.clone(), value.to_string())),
                other => {
                    Err(format!("value of {name:?} must be a string, not {}", type_name(other)))
                }
            })
            .collect(),
        Some(other) => Err(format!("must be an object of strings, not {}", type_name(other))),
    }
}

/// How a JSON value's type is said in messages.
pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// A relative `cwd` is relative to the config file's folder.
fn resolve_cwd(cwd: &str, config_file: Option<&Path>) -> PathBuf {
    let cwd = PathBuf::from(cwd);
    match config_file.and_then(Path::parent) {
        Some(folder) if cwd.is_relative() => folder.join(cwd),
        _ => cwd,
    }
}
