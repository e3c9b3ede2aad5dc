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
//! entry by entry, only as approved: see `trust`). A later scope's entry replaces an earlier one
//! of the same name; a project entry with no `command`, `url` or `type` only
//! overrides `enabled`, `exposure` and `toolExposure`.

mod codemode;
#[cfg(feature = "desktop")]
mod dialects;
mod document;
mod entry;
pub(crate) mod expand;
pub(crate) mod file;
#[cfg(feature = "desktop")]
pub(crate) mod import;
#[cfg(feature = "desktop")]
mod jsonc;
mod keywords;
mod loader;
mod manage;
mod oauth;
pub(crate) mod redact;
pub(crate) mod trust;

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::protocol::EraChoice;
use crate::shell::shell_quote;

pub use codemode::ScriptLimits;
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) use document::{ConfigDocument, Servers as DocumentServers, MAX_ENTRIES_PER_FILE};
pub(crate) use entry::check_name;
#[cfg(feature = "desktop")]
pub use import::ImportReport;
pub use keywords::UnknownWord;
pub(crate) use loader::check_entry;
pub(crate) use loader::servers_of;
pub use loader::ConfigLoader;
pub use manage::{ConfigFiles, ProjectEntry};
pub use oauth::{EnterpriseIdentity, OAuthSettings};
pub use trust::Unapproved;

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
    /// What a codemode script may use (the user file's `"codemode"`).
    pub codemode: ScriptLimits,
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
    /// The user's own, for one project alone (Claude Code's local scope):
    /// kept in the user's configuration folder (`local/`), never in the
    /// project's file; over the project's and the user's entries of the same
    /// name.
    Local,
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
    /// Reached from scripts the model writes for the `codemode` tool (and
    /// found by `tool_search` where it is offered); deferred in a build
    /// without the `codemode` feature.
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
    /// Which era of MCP to speak (`"protocol"`): probed unless pinned.
    pub protocol: EraChoice,
    /// How the server's tools reach the model.
    pub exposure: Exposure,
    /// Per-tool exposure: exact names win over `*` patterns; the first
    /// matching pattern wins.
    pub tool_exposure: Vec<(String, Exposure)>,
    /// One sentence: what the server is for.
    pub description: Option<String>,
    /// `keepAlive`: the `tether` command line keeps this server running
    /// between its commands, ending it after this long unused. Hosts of
    /// the library keep their servers as long as their hub lives, and may
    /// ignore it.
    pub keep_alive: Option<Duration>,
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
    /// The headers whose value a `!command` gave (name, command line): run
    /// again once when the server refuses a request with 401 or 403 (a
    /// short-lived token), as Claude Code's `headersHelper` is.
    pub header_commands: Vec<(String, String)>,
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
/// How long a `"keepAlive": true` server is kept unused.
pub(crate) const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(15 * 60);

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
            .field(
                "header_commands",
                &self.header_commands.iter().map(|(name, _)| name).collect::<Vec<_>>(),
            )
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
                header_commands: Vec::new(),
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
            protocol: EraChoice::Auto,
            exposure: Exposure::Direct,
            tool_exposure: Vec::new(),
            description: None,
            keep_alive: None,
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

    /// Whether any of this server's tools may have this exposure (its
    /// `exposure`, or any `toolExposure` entry).
    pub(crate) fn may_expose(&self, exposure: Exposure) -> bool {
        self.exposure == exposure || self.tool_exposure.iter().any(|(_, e)| *e == exposure)
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

impl Config {
    /// An empty configuration.
    pub fn new() -> Config {
        Config::default()
    }

    /// Adds a server built in code; one of the same name (`-` and `_` are
    /// equal in names) is replaced.
    pub fn with_server(mut self, server: ServerConfig) -> Config {
        match self.servers.iter_mut().find(|kept| Config::same_name(&kept.name, &server.name)) {
            Some(kept) => *kept = server,
            None => self.servers.push(server),
        }
        self
    }

    /// Reads `<config_dir>/mcp.json` only (no project); a missing file is an
    /// empty config. [`ConfigLoader`] reads every scope.
    pub fn load(config_dir: &Path) -> Config {
        ConfigLoader::new().config_dir(config_dir).load()
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
        // One string built word by word: a planted entry's 400,000
        // arguments are never 400,000 strings at once.
        let mut line = shell_quote(command);
        for arg in entry.get("args").and_then(Value::as_array).into_iter().flatten() {
            line.push(' ');
            line.push_str(&shell_quote(arg.as_str().unwrap_or("?")));
        }
        return Some(line);
    }
    entry.get("url").and_then(Value::as_str).map(|url| format!("connect to {url}"))
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
