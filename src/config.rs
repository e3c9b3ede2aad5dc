//! Server configuration: the `mcpServers` file format, parsed and validated.
//!
//! Plain data. Parsing is by hand over `serde_json::Value` rather than derived,
//! because the rules are about people's files: an unknown field refuses only
//! its entry and says which known field was meant, fields other clients write
//! are warnings, and one bad entry (or one unreadable file) never hides the
//! other servers: it becomes a [`FailedEntry`] that `list` and `status` show.

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::error::Error;

/// All configured servers, with what could not be used and why.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// The servers, in file order (user file first).
    pub servers: Vec<ServerConfig>,
    /// Entries (or whole files) that could not be used.
    pub failed: Vec<FailedEntry>,
    /// Things worth fixing that did not stop anything.
    pub warnings: Vec<String>,
}

/// Where a server's entry came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// The user's `mcp.json`.
    User,
    /// The project's `.mcp.json`.
    Project,
    /// Registered in code by the host.
    Host,
}

/// One server's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// The name (1–32 of `[A-Za-z0-9_-]`).
    pub name: String,
    /// Where the entry came from.
    pub scope: Scope,
    /// How to reach the server.
    pub transport: TransportConfig,
    /// `false` keeps the entry without connecting.
    pub enabled: bool,
    /// The per-request timeout.
    pub timeout: Duration,
    /// The ceiling when progress keeps resetting the timeout.
    pub max_total_timeout: Duration,
    /// Connect + initialize + first tools/list.
    pub start_timeout: Duration,
    /// Keep only these tools, when set.
    pub tools: Option<Vec<String>>,
    /// One sentence: what the server is for.
    pub description: Option<String>,
    /// The file the entry came from, if any.
    pub source: Option<PathBuf>,
}

/// How to reach a server.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum TransportConfig {
    /// A child process over stdio.
    Stdio(StdioConfig),
}

/// A stdio server's command and environment rules.
#[derive(Clone, PartialEq, Default)]
pub struct StdioConfig {
    /// One executable (never a shell string).
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Extra variables for the server.
    pub env: BTreeMap<String, String>,
    /// `SERVER_VAR -> HOST_VAR`: variables taken from tether's environment.
    pub env_from: BTreeMap<String, String>,
    /// `true`: the server gets tether's whole environment.
    pub inherit_env: bool,
    /// The working directory.
    pub cwd: Option<PathBuf>,
}

impl fmt::Debug for StdioConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `env` values may be secrets: names only.
        f.debug_struct("StdioConfig")
            .field("command", &self.command)
            .field("args", &self.args)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("env_from", &self.env_from)
            .field("inherit_env", &self.inherit_env)
            .field("cwd", &self.cwd)
            .finish()
    }
}

/// An entry, or a file, that could not be used.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailedEntry {
    /// The server name, or the file name when the whole file failed.
    pub name: String,
    /// Which scope it was in.
    pub scope: Scope,
    /// The file.
    pub source: Option<PathBuf>,
    /// What is wrong, naming the field.
    pub error: String,
}

/// Default per-request timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Default start timeout (cold `npx` downloads are slow).
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(30);

const KNOWN_FIELDS: &[&str] = &[
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
    "oauth",
    "auth",
    "enabled",
    "timeout",
    "maxTotalTimeout",
    "startTimeout",
    "tools",
    "exposure",
    "toolExposure",
    "description",
];

/// Fields other clients write that mean nothing here: accepted with a warning.
const FOREIGN_FIELDS: &[&str] = &[
    "autoApprove",
    "alwaysAllow",
    "disabled",
    "transportType",
    "transport",
    "timeoutMs",
    "trust",
    "note",
];

impl ServerConfig {
    /// A stdio server with default settings, for hosts that build config in code.
    pub fn stdio(name: &str, command: &str, args: &[&str]) -> ServerConfig {
        ServerConfig {
            name: name.to_owned(),
            scope: Scope::Host,
            transport: TransportConfig::Stdio(StdioConfig {
                command: command.to_owned(),
                args: args.iter().map(|arg| arg.to_string()).collect(),
                ..StdioConfig::default()
            }),
            enabled: true,
            timeout: DEFAULT_TIMEOUT,
            max_total_timeout: DEFAULT_TIMEOUT * 10,
            start_timeout: DEFAULT_START_TIMEOUT,
            tools: None,
            description: None,
            source: None,
        }
    }

    /// The transport's name as `list` shows it.
    pub fn transport_name(&self) -> &'static str {
        match self.transport {
            TransportConfig::Stdio(_) => "stdio",
        }
    }
}

impl Config {
    /// An empty configuration.
    pub fn new() -> Config {
        Config::default()
    }

    /// Adds a server built in code.
    pub fn with_server(mut self, server: ServerConfig) -> Config {
        self.servers.push(server);
        self
    }

    /// Reads `<config_dir>/mcp.json`; a missing file is an empty config.
    pub fn load(config_dir: &Path) -> Config {
        let mut config = Config::new();
        config.add_file(&config_dir.join("mcp.json"), Scope::User);
        config
    }

    /// Parses a configuration from JSON text (as if it were a user file).
    pub fn from_json(text: &str) -> Config {
        let mut config = Config::new();
        config.add_json(text, Scope::User, None);
        config
    }

    /// Reads one file into this config; a missing file adds nothing.
    pub fn add_file(&mut self, path: &Path, scope: Scope) {
        match fs::read_to_string(path) {
            Ok(text) => self.add_json(&text, scope, Some(path)),
            Err(err) if err.kind() == io::ErrorKind::NotFound => {}
            Err(err) => {
                self.fail_file(path, scope, format!("cannot read {}: {err}", path.display()))
            }
        }
    }

    /// Finds a server by name (`-` and `_` are the same).
    pub fn server(&self, name: &str) -> Option<&ServerConfig> {
        let key = name_key(name);
        self.servers.iter().find(|server| name_key(&server.name) == key)
    }

    fn fail_file(&mut self, path: &Path, scope: Scope, error: String) {
        let name = path
            .file_name()
            .map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
        self.failed.push(FailedEntry { name, scope, source: Some(path.to_owned()), error });
    }

    fn add_json(&mut self, text: &str, scope: Scope, path: Option<&Path>) {
        let shown =
            path.map_or_else(|| "configuration".to_owned(), |path| path.display().to_string());
        let document: Value = match serde_json::from_str(text) {
            Ok(document) => document,
            Err(err) => {
                let error = format!(
                    "{shown}: invalid JSON at line {} column {}: {}",
                    err.line(),
                    err.column(),
                    strip_position(&err.to_string())
                );
                self.failed.push(FailedEntry {
                    name: path
                        .and_then(Path::file_name)
                        .map_or("config".into(), |n| n.to_string_lossy().into_owned()),
                    scope,
                    source: path.map(Path::to_owned),
                    error,
                });
                return;
            }
        };
        let servers = match document.get("mcpServers") {
            None => return,
            Some(Value::Object(servers)) => servers,
            Some(_) => {
                let error = format!("{shown}: \"mcpServers\" must be an object");
                self.failed.push(FailedEntry {
                    name: "mcpServers".into(),
                    scope,
                    source: path.map(Path::to_owned),
                    error,
                });
                return;
            }
        };
        for (name, entry) in servers {
            let parsed = parse_entry(name, entry, scope, path, &mut self.warnings, &shown).and_then(|server| {
                match self.server(name) {
                    Some(existing) if existing.scope == scope => Err(format!(
                        "{shown}: server {name:?} is the same name as {:?} (`-` and `_` are equal in names)",
                        existing.name
                    )),
                    _ => Ok(server),
                }
            });
            match parsed {
                Ok(server) => self.servers.push(server),
                Err(error) => self.failed.push(FailedEntry {
                    name: name.clone(),
                    scope,
                    source: path.map(Path::to_owned),
                    error,
                }),
            }
        }
    }
}

/// `-` and `_` are the same in server names.
pub(crate) fn name_key(name: &str) -> String {
    name.replace('-', "_")
}

/// serde_json puts " at line L column C" at the end; we say it first.
fn strip_position(message: &str) -> &str {
    message.find(" at line ").map_or(message, |at| &message[..at])
}

fn parse_entry(
    name: &str,
    entry: &Value,
    scope: Scope,
    path: Option<&Path>,
    warnings: &mut Vec<String>,
    shown: &str,
) -> Result<ServerConfig, String> {
    let here = |field: &str| format!("{shown}: server {name:?}: field {field:?}");
    check_name(name).map_err(|why| format!("{shown}: server name {name:?} {why}"))?;
    let Value::Object(fields) = entry else {
        return Err(format!("{shown}: server {name:?} must be an object"));
    };
    for key in fields.keys() {
        if KNOWN_FIELDS.contains(&key.as_str()) {
            continue;
        }
        if FOREIGN_FIELDS.contains(&key.as_str()) {
            warnings.push(format!("{shown}: server {name:?}: field {key:?} is ignored by tether"));
            continue;
        }
        let hint = closest(key, KNOWN_FIELDS)
            .map(|known| format!(" (did you mean {known:?}?)"))
            .unwrap_or_default();
        return Err(format!("{shown}: server {name:?}: unknown field {key:?}{hint}"));
    }
    let command =
        optional_string(fields, "command").map_err(|why| format!("{} {why}", here("command")))?;
    let url = optional_string(fields, "url").map_err(|why| format!("{} {why}", here("url")))?;
    let kind = optional_string(fields, "type").map_err(|why| format!("{} {why}", here("type")))?;
    let transport = match (command, url) {
        (Some(_), Some(_)) => return Err(format!("{shown}: server {name:?} has both \"command\" and \"url\"; keep one")),
        (None, None) => return Err(format!("{shown}: server {name:?} needs \"command\" (stdio) or \"url\" (remote)")),
        (Some(command), None) => {
            if let Some(kind) = kind.as_deref().filter(|kind| !matches!(*kind, "stdio" | "local")) {
                return Err(format!("{}: {kind:?} does not go with \"command\"; use \"stdio\"", here("type")));
            }
            if command.trim().is_empty() {
                return Err(format!("{} is empty", here("command")));
            }
            TransportConfig::Stdio(StdioConfig {
                command: expand_home(&command),
                args: string_list(fields, "args").map_err(|why| format!("{} {why}", here("args")))?,
                env: string_map(fields, "env").map_err(|why| format!("{} {why}", here("env")))?,
                env_from: string_map(fields, "envFrom").map_err(|why| format!("{} {why}", here("envFrom")))?,
                inherit_env: optional_bool(fields, "inheritEnv").map_err(|why| format!("{} {why}", here("inheritEnv")))?
                    == Some(true),
                cwd: optional_string(fields, "cwd")
                    .map_err(|why| format!("{} {why}", here("cwd")))?
                    .map(|cwd| resolve_cwd(&cwd, path)),
            })
        }
        (None, Some(_)) => {
            return Err(format!("{shown}: server {name:?}: remote servers (\"url\") are not supported by this build yet"))
        }
    };
    let seconds = |field: &str| -> Result<Option<Duration>, String> {
        match fields.get(field) {
            None => Ok(None),
            Some(value) => match value.as_f64() {
                Some(secs) if secs > 0.0 && secs < 1e7 => Ok(Some(Duration::from_secs_f64(secs))),
                _ => Err(format!("{} must be a positive number of seconds", here(field))),
            },
        }
    };
    let timeout = seconds("timeout")?.unwrap_or(DEFAULT_TIMEOUT);
    let max_total_timeout = seconds("maxTotalTimeout")?.unwrap_or(timeout * 10).max(timeout);
    let start_timeout = seconds("startTimeout")?.unwrap_or(DEFAULT_START_TIMEOUT);
    let mut enabled =
        optional_bool(fields, "enabled").map_err(|why| format!("{} {why}", here("enabled")))?;
    if fields.get("disabled") == Some(&Value::Bool(true)) && enabled.is_none() {
        enabled = Some(false);
    }
    let tools = match fields.get("tools") {
        None => None,
        Some(_) => {
            Some(string_list(fields, "tools").map_err(|why| format!("{} {why}", here("tools")))?)
        }
    };
    Ok(ServerConfig {
        name: name.to_owned(),
        scope,
        transport,
        enabled: enabled.unwrap_or(true),
        timeout,
        max_total_timeout,
        start_timeout,
        tools,
        description: optional_string(fields, "description")
            .map_err(|why| format!("{} {why}", here("description")))?,
        source: path.map(Path::to_owned),
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

fn optional_string(fields: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match fields.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(other) => Err(format!("must be a string, not {}", type_name(other))),
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

fn string_map(fields: &Map<String, Value>, key: &str) -> Result<BTreeMap<String, String>, String> {
    match fields.get(key) {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
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

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// `~/` at the start means home.
pub(crate) fn expand_home(value: &str) -> String {
    match (value.strip_prefix("~/"), std::env::var("HOME")) {
        (Some(rest), Ok(home)) => format!("{}/{rest}", home.trim_end_matches('/')),
        _ => value.to_owned(),
    }
}

/// A relative `cwd` is relative to the config file's folder.
fn resolve_cwd(cwd: &str, config_file: Option<&Path>) -> PathBuf {
    let cwd = PathBuf::from(expand_home(cwd));
    match config_file.and_then(Path::parent) {
        Some(folder) if cwd.is_relative() => folder.join(cwd),
        _ => cwd,
    }
}

/// The known word nearest to `word`, if it is near enough to be a typo.
fn closest<'a>(word: &str, known: &[&'a str]) -> Option<&'a str> {
    let lower = word.to_ascii_lowercase();
    known
        .iter()
        .map(|candidate| (edit_distance(&lower, &candidate.to_ascii_lowercase()), *candidate))
        .filter(|(distance, candidate)| *distance <= (candidate.len() / 3).max(1))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current.push(substitution.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

/// The user config folder: `$TETHER_CONFIG_DIR`, else `$XDG_CONFIG_HOME/tether`,
/// else `~/.config/tether`.
pub fn default_config_dir() -> Option<PathBuf> {
    let non_empty =
        |name: &str| std::env::var_os(name).filter(|value| !value.is_empty()).map(PathBuf::from);
    non_empty("TETHER_CONFIG_DIR")
        .or_else(|| non_empty("XDG_CONFIG_HOME").map(|dir| dir.join("tether")))
        .or_else(|| non_empty("HOME").map(|home| home.join(".config").join("tether")))
}

impl From<FailedEntry> for Error {
    fn from(entry: FailedEntry) -> Error {
        Error::Config(entry.error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(json: &str) -> String {
        let config = Config::from_json(json);
        assert!(config.servers.is_empty(), "{json} should fail");
        config.failed[0].error.clone()
    }

    #[test]
    fn parses_a_stdio_entry() {
        let config = Config::from_json(
            r#"{"mcpServers": {"demo": {"command": "demo-server", "args": ["-v"], "env": {"A": "1", "N": 2},
                "timeout": 5, "startTimeout": 1.5, "description": "counts"}}}"#,
        );
        assert!(config.failed.is_empty(), "{:?}", config.failed);
        let server = &config.servers[0];
        assert_eq!(server.timeout, Duration::from_secs(5));
        assert_eq!(server.max_total_timeout, Duration::from_secs(50));
        assert_eq!(server.start_timeout, Duration::from_millis(1500));
        let TransportConfig::Stdio(stdio) = &server.transport;
        assert_eq!(stdio.args, ["-v"]);
        assert_eq!(stdio.env["N"], "2");
    }

    #[test]
    fn unknown_field_names_the_closest_known_one() {
        assert!(failure(r#"{"mcpServers": {"x": {"comand": "a"}}}"#)
            .ends_with(r#"unknown field "comand" (did you mean "command"?)"#));
    }

    #[test]
    fn foreign_fields_warn_and_disabled_means_not_enabled() {
        let config = Config::from_json(
            r#"{"mcpServers": {"x": {"command": "a", "autoApprove": [], "disabled": true}}}"#,
        );
        assert_eq!(config.warnings.len(), 2);
        assert!(!config.servers[0].enabled);
    }

    #[test]
    fn bad_entries_do_not_stop_good_ones() {
        let config = Config::from_json(
            r#"{"mcpServers": {"bad name!": {"command": "a"}, "both": {"command": "a", "url": "http://x"},
                "go_od": {"command": "a"}, "types": {"command": 3}, "go-od": {"command": "b"}}}"#,
        );
        assert_eq!(config.servers.len(), 1);
        assert_eq!(config.failed.len(), 4);
        assert!(config.failed.iter().any(|f| f.error.contains("same name as \"go_od\"")));
        assert!(config.failed.iter().any(|f| f.error.contains("must be a string, not a number")));
    }

    #[test]
    fn syntax_errors_give_line_and_column() {
        let config = Config::from_json("{\n  \"mcpServers\": {,}\n}");
        assert!(config.failed[0].error.contains("line 2 column"), "{}", config.failed[0].error);
    }

    #[test]
    fn names_follow_the_rules() {
        assert!(check_name("a-b_C9").is_ok());
        assert!(check_name("").is_err());
        assert!(check_name(&"x".repeat(33)).is_err());
        assert!(check_name("a.b").is_err());
    }
}
