//! Server configuration: the `mcpServers` files, their scopes, and the rules
//! about trust and secrets.
//!
//! Plain data. Parsing is by hand over `serde_json::Value` rather than derived,
//! because the rules are about people's files: an unknown field refuses only
//! its entry and says which known field was meant, fields other clients write
//! are warnings, and one bad entry (or one unreadable file) never hides the
//! other servers: it becomes a [`FailedEntry`] that `list` and `status` show.
//!
//! Scopes, weakest first: servers the host registers in code, the user file
//! (`<config-dir>/mcp.json`), the project file (`<project>/.mcp.json`, read
//! only in a trusted project). A later scope's entry replaces an earlier one
//! of the same name; a project entry with no `command`, `url` or `type` only
//! overrides `enabled`, `exposure` and `toolExposure`.

mod entry;
pub(crate) mod expand;
pub(crate) mod file;
pub(crate) mod import;
mod manage;
mod oauth;
pub(crate) mod redact;
pub(crate) mod trust;
mod words;

use std::collections::BTreeSet;
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::auth::OAuthSettings;

pub(crate) use entry::check_name;
pub use import::ImportReport;
pub use manage::{ConfigFiles, ProjectEntry};
pub use trust::Unapproved;
pub use words::UnknownWord;

/// tether's own environment, as UTF-8 pairs (others are skipped): what
/// `${VAR}` expands from, and what a stdio server's base set is taken from.
pub(crate) fn host_environment() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
        .collect()
}

/// All configured servers, with what could not be used and why.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Config {
    /// The servers, host-registered first, then user, then project entries.
    pub servers: Vec<ServerConfig>,
    /// Entries (or whole files) that could not be used.
    pub failed: Vec<FailedEntry>,
    /// Project servers not started because the project is not trusted.
    pub untrusted: Vec<UntrustedServer>,
    /// Things worth fixing in the files that did not stop anything; an
    /// entry's own are in its [`ServerConfig::warnings`].
    pub warnings: Vec<String>,
    /// `TETHER_MCP=0`: nothing was read and nothing may start.
    pub off: bool,
}

/// Where a server's entry came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Registered in code by the host.
    Host,
    /// The user's `mcp.json`.
    User,
    /// The project's `.mcp.json`.
    Project,
}

/// How a server's tools reach the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Exposure {
    /// Declared to the model.
    #[default]
    Direct,
    /// Found through `tool_search`, then declared.
    Deferred,
    /// Never reachable.
    Hidden,
    /// Accepted; treated as deferred until a script engine exists.
    Codemode,
}

/// One server's settings.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
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
    /// How the server's tools reach the model.
    pub exposure: Exposure,
    /// Per-tool exposure: exact names win over `*` patterns; the first
    /// matching pattern wins.
    pub tool_exposure: Vec<(String, Exposure)>,
    /// One sentence: what the server is for.
    pub description: Option<String>,
    /// The file the entry came from, if any.
    pub source: Option<PathBuf>,
    /// The host variables the entry hands to the server (names only).
    pub secret_vars: Vec<String>,
    /// What the loader found worth fixing in this entry (a literal
    /// credential, a field tether ignores); the file-wide ones are in
    /// [`Config::warnings`].
    pub warnings: Vec<String>,
    /// The entry as written, before expansion (`None` when built in code).
    /// Refresh compares this, so a `!command` whose output changes (a
    /// short-lived token) does not restart the server every turn.
    pub raw: Option<Value>,
}

/// How to reach a server.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum TransportConfig {
    /// A child process over stdio.
    Stdio(StdioConfig),
    /// A server at a URL.
    Http(HttpConfig),
}

/// A stdio server's command and environment rules, expanded.
#[derive(Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct StdioConfig {
    /// One executable (never a shell string).
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Extra variables for the server (values may be secrets).
    pub env: std::collections::BTreeMap<String, String>,
    /// `SERVER_VAR -> HOST_VAR`: variables taken from tether's environment.
    pub env_from: std::collections::BTreeMap<String, String>,
    /// `true`: the server gets tether's whole environment.
    pub inherit_env: bool,
    /// The working directory.
    pub cwd: Option<PathBuf>,
    /// How long the server gets to exit after its stdin closes, before
    /// SIGTERM (`shutdownTimeout`); `None`: the host's default.
    pub shutdown_timeout: Option<Duration>,
}

/// Which HTTP transport a remote server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HttpKind {
    /// Streamable HTTP, falling back to HTTP+SSE when `initialize` is refused.
    #[default]
    Auto,
    /// Streamable HTTP only (`"type": "http"`).
    Streamable,
    /// The legacy HTTP+SSE transport (`"type": "sse"`).
    Sse,
}

/// A remote server's settings, expanded.
#[derive(Clone, PartialEq)]
#[non_exhaustive]
pub struct HttpConfig {
    /// The endpoint.
    pub url: String,
    /// The transport.
    pub kind: HttpKind,
    /// Extra headers on every request (values may be secrets).
    pub headers: Vec<(String, String)>,
    /// The host variable whose value is sent as `Authorization: Bearer …`.
    pub bearer_token_env: Option<String>,
    /// OAuth settings (`oauth`), checked; `None` when the entry has none
    /// (OAuth is still offered on a 401, with every default).
    pub oauth: Option<Box<OAuthSettings>>,
    /// A token provider the host registered.
    pub auth_provider: Option<String>,
    /// A PEM file of extra CAs to trust for this server (`caFile`).
    pub ca_file: Option<PathBuf>,
}

/// A project server that was not started because the project is not trusted.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct UntrustedServer {
    /// The server name.
    pub name: String,
    /// The project file.
    pub source: PathBuf,
    /// What it would run (as written, unexpanded) or the URL it would reach.
    pub command_line: String,
    /// Why it does not start: the project was never trusted, or this entry
    /// was added or changed since it was.
    pub why: Unapproved,
}

/// An entry, or a file, that could not be used.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
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
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Default start timeout (cold `npx` downloads are slow).
pub(crate) const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(30);

impl fmt::Debug for StdioConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `env` values may be secrets: names only.
        f.debug_struct("StdioConfig")
            .field("command", &self.command)
            // Arguments may carry expanded secrets (`--key ${KEY}`): count only.
            .field("args", &format_args!("[{} arguments]", self.args.len()))
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("env_from", &self.env_from)
            .field("inherit_env", &self.inherit_env)
            .field("cwd", &self.cwd)
            .finish()
    }
}

impl fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Header values may be secrets: names only.
        f.debug_struct("HttpConfig")
            .field("url", &crate::url::redact_url(&self.url))
            .field("kind", &self.kind)
            .field("headers", &self.headers.iter().map(|(name, _)| name).collect::<Vec<_>>())
            .field("bearer_token_env", &self.bearer_token_env)
            .field("oauth", &self.oauth.as_ref().map(|_| "…"))
            .field("auth_provider", &self.auth_provider)
            .field("ca_file", &self.ca_file)
            .finish()
    }
}

impl ServerConfig {
    /// A stdio server with default settings, for hosts that build config in code.
    pub fn stdio(name: &str, command: &str, args: &[&str]) -> ServerConfig {
        ServerConfig::with_transport(
            name,
            TransportConfig::Stdio(StdioConfig {
                command: command.to_owned(),
                args: args.iter().map(|arg| arg.to_string()).collect(),
                ..StdioConfig::default()
            }),
        )
    }

    /// A remote server with default settings, for hosts that build config in code.
    pub fn http(name: &str, url: &str, kind: HttpKind) -> ServerConfig {
        ServerConfig::with_transport(
            name,
            TransportConfig::Http(HttpConfig {
                url: url.to_owned(),
                kind,
                headers: Vec::new(),
                bearer_token_env: None,
                oauth: None,
                auth_provider: None,
                ca_file: None,
            }),
        )
    }

    fn with_transport(name: &str, transport: TransportConfig) -> ServerConfig {
        ServerConfig {
            name: name.to_owned(),
            scope: Scope::Host,
            transport,
            enabled: true,
            timeout: DEFAULT_TIMEOUT,
            max_total_timeout: DEFAULT_TIMEOUT * 10,
            start_timeout: DEFAULT_START_TIMEOUT,
            tools: None,
            exposure: Exposure::Direct,
            tool_exposure: Vec::new(),
            description: None,
            source: None,
            secret_vars: Vec::new(),
            warnings: Vec::new(),
            raw: None,
        }
    }

    /// True when `other` is the same entry: as written, when both came from
    /// files; in every field otherwise.
    pub(crate) fn same_entry(&self, other: &ServerConfig) -> bool {
        match (&self.raw, &other.raw) {
            (Some(mine), Some(theirs)) => {
                mine == theirs && self.scope == other.scope && self.source == other.source
            }
            _ => self == other,
        }
    }

    /// The entry as written, with literal secrets (credential headers,
    /// `*_TOKEN` variables, `--api-key` arguments, a URL's query) replaced by
    /// `<redacted>`; `${VAR}` and `!command` values are shown as written.
    /// `None` for a server built in code.
    pub fn redacted_entry(&self) -> Option<Value> {
        self.raw.as_ref().map(redact::redacted)
    }

    /// What the server runs, as a command line as written (secrets
    /// redacted, `${VAR}` unexpanded), or the URL it reaches (without its
    /// query or user info).
    pub fn target(&self) -> String {
        if let Some(line) = self.redacted_entry().as_ref().and_then(command_line_of) {
            if let Some(url) = line.strip_prefix("connect to ") {
                return url.to_owned();
            }
            return line;
        }
        match &self.transport {
            TransportConfig::Stdio(stdio) => {
                let mut words = vec![shell_quote(&stdio.command)];
                words.extend(stdio.args.iter().map(|_| "…".to_owned()).take(1));
                words.join(" ")
            }
            TransportConfig::Http(remote) => crate::url::redact_url(&remote.url),
        }
    }

    /// The transport's name as `list` shows it.
    pub fn transport_name(&self) -> &'static str {
        match &self.transport {
            TransportConfig::Stdio(_) => "stdio",
            TransportConfig::Http(remote) => match remote.kind {
                HttpKind::Auto | HttpKind::Streamable => "http",
                HttpKind::Sse => "sse",
            },
        }
    }

    /// The exposure of one of this server's tools: an exact `toolExposure`
    /// name wins, then the first matching `*` pattern, then `exposure`.
    pub(crate) fn exposure_of(&self, tool: &str) -> Exposure {
        if let Some((_, exposure)) = self.tool_exposure.iter().find(|(pattern, _)| pattern == tool)
        {
            return *exposure;
        }
        self.tool_exposure
            .iter()
            .find(|(pattern, _)| pattern.contains('*') && glob_matches(pattern, tool))
            .map_or(self.exposure, |(_, exposure)| *exposure)
    }
}

/// `*` matches any run of characters; everything else matches itself.
fn glob_matches(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    true
}

/// Reads the configuration: which folders, which environment, which servers
/// the host registers in code.
#[derive(Debug, Clone, Default)]
pub struct ConfigLoader {
    config_dir: Option<PathBuf>,
    project_dir: Option<PathBuf>,
    host_servers: Vec<ServerConfig>,
    environment: Option<Vec<(String, String)>>,
}

impl ConfigLoader {
    /// A loader that reads nothing yet.
    pub fn new() -> ConfigLoader {
        ConfigLoader::default()
    }

    /// The user configuration folder (`mcp.json`, `trusted-projects.json`).
    pub fn config_dir(mut self, dir: impl Into<PathBuf>) -> ConfigLoader {
        self.config_dir = Some(dir.into());
        self
    }

    /// The project folder (`.mcp.json`).
    pub fn project_dir(mut self, dir: impl Into<PathBuf>) -> ConfigLoader {
        self.project_dir = Some(dir.into());
        self
    }

    /// A server registered in code (scope `host`); a file entry of the same
    /// name replaces it.
    pub fn host_server(mut self, mut server: ServerConfig) -> ConfigLoader {
        server.scope = Scope::Host;
        self.host_servers.push(server);
        self
    }

    /// The environment to expand from (default: the process environment).
    pub fn environment(mut self, environment: Vec<(String, String)>) -> ConfigLoader {
        self.environment = Some(environment);
        self
    }

    /// Reads and merges every scope.
    pub fn load(&self) -> Config {
        let environment = self.environment.clone().unwrap_or_else(host_environment);
        let Some(allowed) = allowed_variables(&environment) else { return Config::turned_off() };
        let variable = |name: &str| {
            environment.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
        };
        let mut config = Config { servers: self.host_servers.clone(), ..Config::default() };
        let reading = Reading {
            environment: &environment,
            allowed: allowed.as_ref(),
            approvals: None,
            checking: false,
        };
        if let Some(dir) = &self.config_dir {
            config.add_file(&dir.join("mcp.json"), Scope::User, &reading);
        }
        if let Some(project) = &self.project_dir {
            let path = project.join(".mcp.json");
            if path.exists() {
                if variable("TETHER_TRUST_PROJECT") == Some("1") {
                    config.add_file(&path, Scope::Project, &reading);
                } else {
                    // Each entry starts only as it was approved.
                    let approvals =
                        self.config_dir.as_ref().and_then(|dir| trust::approvals(dir, project));
                    let approved = Approved(approvals.as_ref());
                    let reading = Reading { approvals: Some(approved), ..reading };
                    config.add_file(&path, Scope::Project, &reading);
                }
            }
        }
        config
    }
}

/// What reading a file needs besides the file.
#[derive(Clone, Copy)]
struct Reading<'a> {
    environment: &'a [(String, String)],
    allowed: Option<&'a BTreeSet<String>>,
    /// For a project file not trusted wholesale: the approved entries.
    approvals: Option<Approved<'a>>,
    /// Checking only: no `!command` runs, unset variables are allowed.
    checking: bool,
}

/// A project's approved entry digests (`None` inside: never trusted).
#[derive(Clone, Copy)]
struct Approved<'a>(Option<&'a std::collections::BTreeMap<String, String>>);

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

    /// Reads `<config_dir>/mcp.json` only (no project); a missing file is an
    /// empty config. [`ConfigLoader`] reads every scope.
    pub fn load(config_dir: &Path) -> Config {
        ConfigLoader::new().config_dir(config_dir).load()
    }

    /// Parses a configuration from JSON text, as if it were a user file,
    /// expanding from the process environment.
    pub fn from_json(text: &str) -> Config {
        let environment = host_environment();
        let Some(allowed) = allowed_variables(&environment) else { return Config::turned_off() };
        let mut config = Config::new();
        config.add_json(
            text,
            Scope::User,
            None,
            &Reading {
                environment: &environment,
                allowed: allowed.as_ref(),
                approvals: None,
                checking: false,
            },
        );
        config
    }

    /// A configuration from JSON text as `tether add` checks an entry: with
    /// this environment, running no `!command` (for the fuzzer).
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn checked_from_json(text: &str, environment: &[(String, String)]) -> Config {
        let mut config = Config::new();
        let reading = Reading { environment, allowed: None, approvals: None, checking: true };
        config.add_json(text, Scope::User, None, &reading);
        config
    }

    /// `TETHER_MCP=0`: nothing is read and nothing may start.
    fn turned_off() -> Config {
        Config { off: true, ..Config::default() }
    }

    /// True when `name` is a server of this configuration: usable, invalid,
    /// or waiting for the project to be trusted.
    pub fn knows(&self, name: &str) -> bool {
        self.server(name).is_some()
            || self.failed.iter().any(|entry| Config::same_name(&entry.name, name))
            || self.untrusted.iter().any(|entry| Config::same_name(&entry.name, name))
    }

    /// The configured server name closest to `name` (a typo's likely
    /// meaning), if one is close.
    pub fn closest_name(&self, name: &str) -> Option<&str> {
        let names: Vec<&str> = self
            .servers
            .iter()
            .map(|server| server.name.as_str())
            .chain(self.failed.iter().map(|entry| entry.name.as_str()))
            .chain(self.untrusted.iter().map(|entry| entry.name.as_str()))
            .collect();
        crate::spelling::closest(name, &names)
    }

    /// True when two names are the same server's (`-` and `_` are the same).
    pub fn same_name(a: &str, b: &str) -> bool {
        name_key(a) == name_key(b)
    }

    /// Finds a server by name (`-` and `_` are the same).
    pub fn server(&self, name: &str) -> Option<&ServerConfig> {
        let key = name_key(name);
        self.servers.iter().find(|server| name_key(&server.name) == key)
    }

    /// The host variables this configuration hands to servers (`envFrom`,
    /// `bearerTokenEnv`, `${VAR}`), so a host can scrub them from the
    /// commands its agent runs. A server with `inheritEnv` adds `*`.
    pub fn secret_vars(&self) -> Vec<String> {
        let mut names = BTreeSet::new();
        for server in &self.servers {
            names.extend(server.secret_vars.iter().cloned());
            if let TransportConfig::Stdio(stdio) = &server.transport {
                names.extend(stdio.env_from.values().cloned());
                if stdio.inherit_env {
                    names.insert("*".to_owned());
                }
            }
            if let TransportConfig::Http(remote) = &server.transport {
                names.extend(remote.bearer_token_env.iter().cloned());
            }
        }
        names.into_iter().collect()
    }

    fn add_file(&mut self, path: &Path, scope: Scope, reading: &Reading) {
        match fs::read_to_string(path) {
            Ok(text) => self.add_json(&text, scope, Some(path), reading),
            Err(err) if err.kind() == io::ErrorKind::NotFound => {}
            Err(err) => {
                self.fail_file(path, scope, format!("cannot read {}: {err}", path.display()))
            }
        }
    }

    fn fail_file(&mut self, path: &Path, scope: Scope, error: String) {
        let name = path
            .file_name()
            .map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
        self.failed.push(FailedEntry { name, scope, source: Some(path.to_owned()), error });
    }

    fn add_json(&mut self, text: &str, scope: Scope, path: Option<&Path>, reading: &Reading) {
        let shown =
            path.map_or_else(|| "configuration".to_owned(), |path| path.display().to_string());
        let servers = match servers_of(text, &shown) {
            Ok(Some(servers)) => servers,
            Ok(None) => return,
            Err(error) => {
                let name = path
                    .and_then(Path::file_name)
                    .map_or("config".into(), |n| n.to_string_lossy().into_owned());
                self.failed.push(FailedEntry {
                    name,
                    scope,
                    source: path.map(Path::to_owned),
                    error,
                });
                return;
            }
        };
        let context = entry::Context {
            scope,
            path,
            shown: &shown,
            environment: reading.environment,
            allowed: reading.allowed,
            checking: reading.checking,
        };
        let mut seen_here: Vec<String> = Vec::new();
        for (name, value) in &servers {
            let key = name_key(name);
            if let Some(first) = seen_here.iter().find(|seen| name_key(seen) == key) {
                let error = format!(
                    "{shown}: server {name:?} is the same name as {first:?} (`-` and `_` are equal in names)"
                );
                self.failed.push(FailedEntry {
                    name: name.clone(),
                    scope,
                    source: path.map(Path::to_owned),
                    error,
                });
                continue;
            }
            seen_here.push(name.clone());
            if let Some(Approved(approvals)) = reading.approvals {
                if let Some(why) = trust::check(approvals, name, value) {
                    self.add_unapproved(name, value, &shown, path, why);
                    continue;
                }
            }
            let mut entry_warnings = Vec::new();
            let parsed = entry::parse(name, value, &context, &mut entry_warnings);
            if !matches!(parsed, Ok(entry::Parsed::Server(_))) {
                self.warnings.append(&mut entry_warnings);
            }
            match parsed {
                Ok(entry::Parsed::Server(mut server)) => {
                    server.warnings = entry_warnings;
                    // A later scope replaces an earlier one's entry of the same name.
                    self.servers.retain(|existing| name_key(&existing.name) != key);
                    self.failed.retain(|existing| name_key(&existing.name) != key);
                    self.servers.push(*server);
                }
                Ok(entry::Parsed::Override(changes)) => match self.servers.iter_mut().find(|s| name_key(&s.name) == key) {
                    Some(server) => {
                        if let Some(enabled) = changes.enabled {
                            server.enabled = enabled;
                        }
                        if let Some(exposure) = changes.exposure {
                            server.exposure = exposure;
                        }
                        if let Some(tool_exposure) = changes.tool_exposure {
                            server.tool_exposure = tool_exposure;
                        }
                    }
                    None => self.warnings.push(format!(
                        "{shown}: server {name:?} has no \"command\" or \"url\" and overrides no user server of that name"
                    )),
                },
                Err(error) => {
                    // The entry meant to replace any earlier one of its name:
                    // its failure does, rather than the old entry running on.
                    self.servers.retain(|existing| name_key(&existing.name) != key);
                    self.failed.retain(|existing| name_key(&existing.name) != key);
                    self.failed.push(FailedEntry { name: name.clone(), scope, source: path.map(Path::to_owned), error })
                }
            }
        }
    }

    /// Records a project entry that was not approved as it is, without
    /// parsing it further: nothing of it is expanded or started.
    fn add_unapproved(
        &mut self,
        name: &str,
        entry: &Value,
        shown: &str,
        path: Option<&Path>,
        why: Unapproved,
    ) {
        let Some(command_line) = command_line_of(entry) else {
            return; // An override only: nothing would start.
        };
        if self.server(name).is_some() {
            self.warnings.push(format!(
                "{shown}: the project would replace server {name:?}, but that entry is not approved (tether trust)"
            ));
            return;
        }
        self.untrusted.push(UntrustedServer {
            name: name.to_owned(),
            source: path.map_or_else(PathBuf::new, Path::to_owned),
            command_line,
            why,
        });
    }
}

/// The `mcpServers` object of a config file's text, `None` when it has none.
fn servers_of(text: &str, shown: &str) -> Result<Option<serde_json::Map<String, Value>>, String> {
    let document: Value = serde_json::from_str(text).map_err(|err| syntax_error(shown, &err))?;
    match document.get("mcpServers") {
        None => Ok(None),
        Some(Value::Object(servers)) => Ok(Some(servers.clone())),
        Some(_) => Err(format!("{shown}: \"mcpServers\" must be an object")),
    }
}

/// A JSON syntax error, with its line and column first.
pub(crate) fn syntax_error(shown: &str, err: &serde_json::Error) -> String {
    let message = err.to_string();
    let message = message.find(" at line ").map_or(message.as_str(), |at| &message[..at]);
    format!("{shown}: invalid JSON at line {} column {}: {message}", err.line(), err.column())
}

/// What an entry would run, as written (no expansion, so no secrets), or the
/// URL it would reach; `None` for an entry that starts nothing.
pub(crate) fn command_line_of(entry: &Value) -> Option<String> {
    if let Some(command) = entry.get("command").and_then(Value::as_str) {
        let mut words = vec![shell_quote(command)];
        if let Some(args) = entry.get("args").and_then(Value::as_array) {
            words.extend(args.iter().map(|arg| shell_quote(arg.as_str().unwrap_or("?"))));
        }
        return Some(words.join(" "));
    }
    entry.get("url").and_then(Value::as_str).map(|url| format!("connect to {url}"))
}

/// Quotes a word the way a person would type it into a shell.
fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,~${}".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// What the environment allows before any file is read: `None` when
/// `TETHER_MCP=0` turns MCP off, else the host variables files may name
/// (`TETHER_MCP_ENV`; `Some(None)` when it is not set: any).
#[allow(clippy::option_option)]
fn allowed_variables(environment: &[(String, String)]) -> Option<Option<BTreeSet<String>>> {
    let variable = |name: &str| {
        environment.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    };
    if variable("TETHER_MCP") == Some("0") {
        return None;
    }
    Some(variable("TETHER_MCP_ENV").map(|list| {
        list.split(',').map(str::trim).filter(|name| !name.is_empty()).map(str::to_owned).collect()
    }))
}

/// Checks one entry with the loader's rules before it is written, without
/// running its `!command` values and allowing variables not set yet.
/// Returns the loader's warnings about it (a literal credential, say).
///
/// # Errors
/// What the loader would say of it.
pub(crate) fn check_entry(
    name: &str,
    scope: Scope,
    path: &Path,
    entry: &Value,
) -> Result<Vec<String>, String> {
    let environment = host_environment();
    let allowed = allowed_variables(&environment).flatten();
    let shown = path.display().to_string();
    let context = entry::Context {
        scope,
        path: Some(path),
        shown: &shown,
        environment: &environment,
        allowed: allowed.as_ref(),
        checking: true,
    };
    let mut warnings = Vec::new();
    entry::parse(name, entry, &context, &mut warnings)?;
    Ok(warnings)
}

/// `-` and `_` are the same in server names.
pub(crate) fn name_key(name: &str) -> String {
    name.replace('-', "_")
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

#[cfg(test)]
mod tests;
