//! Reading the configuration files: the user file, then the project's
//! (each entry only as approved), merged over the servers a host registers,
//! with the environment's rules (`TETHER_MCP`, `TETHER_MCP_ENV`). An entry
//! that fails is recorded and never stops the others; `check_entry` applies
//! the same rules to an entry before `tether add` or `import` writes it.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::document::{ConfigDocument, Servers, MAX_ENTRIES_PER_FILE};
use super::{
    command_line_of, entry, host_environment, name_key, syntax_error, trust, Config, FailedEntry,
    Scope, ServerConfig, Unapproved, UntrustedServer,
};

/// Reads the configuration: which folders, which environment, which servers
/// the host registers in code.
#[derive(Debug, Clone, Default)]
pub struct ConfigLoader {
    config_dir: Option<PathBuf>,
    project_dir: Option<PathBuf>,
    host_servers: Vec<ServerConfig>,
    environment: Option<Vec<(String, String)>>,
    /// `--config FILE`: this file's servers alone.
    only_file: Option<PathBuf>,
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

    /// Reads the servers of `file` alone, as the user's own (a run given
    /// `--config FILE`): not the user's `mcp.json`, nor the project's or
    /// the local file. The configuration folder still keeps sign-ins.
    pub fn only_file(mut self, file: impl Into<PathBuf>) -> ConfigLoader {
        self.only_file = Some(file.into());
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
        if let Some(file) = &self.only_file {
            config.add_file(file, Scope::User, &reading);
            return config;
        }
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
        // The user's own for this project, over both (Claude Code's order).
        if let (Some(dir), Some(project)) = (&self.config_dir, &self.project_dir) {
            let path = super::manage::local_file(dir, project);
            if path.exists() {
                config.add_file(&path, Scope::Local, &reading);
            }
        }
        config
    }
}

/// What reading a file needs besides the file.
#[derive(Clone, Copy)]
pub(super) struct Reading<'a> {
    pub(super) environment: &'a [(String, String)],
    pub(super) allowed: Option<&'a BTreeSet<String>>,
    /// For a project file not trusted wholesale: the approved entries.
    pub(super) approvals: Option<Approved<'a>>,
    /// Checking only: no `!command` runs, unset variables are allowed.
    pub(super) checking: bool,
}

/// A project's approved entry digests (`None` inside: never trusted).
#[derive(Clone, Copy)]
pub(super) struct Approved<'a>(Option<&'a std::collections::BTreeMap<String, String>>);

impl Config {
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

    fn add_file(&mut self, path: &Path, scope: Scope, reading: &Reading) {
        match crate::bounded_read::read_text(path, crate::bounded_read::CONFIG_FILE_LIMIT) {
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

    pub(super) fn add_json(
        &mut self,
        text: &str,
        scope: Scope,
        path: Option<&Path>,
        reading: &Reading,
    ) {
        let shown = path.map_or_else(|| "JSON text".to_owned(), |path| path.display().to_string());
        let document = ConfigDocument::parse(text).map_err(|err| syntax_error(&shown, &err));
        if let Some(limits) = document.as_ref().ok().and_then(|document| document.codemode.as_ref())
        {
            self.set_script_limits(limits, scope, &shown);
        }
        let server_count = document.as_ref().map_or(0, |document| document.server_count);
        let vs_code = document.as_ref().is_ok_and(|document| document.vs_code_servers);
        let servers = match document.and_then(|document| servers_in(document, &shown)) {
            Ok(Some(servers)) => servers,
            Ok(None) => {
                // VS Code's layout: read by `tether import`, not as it is.
                if vs_code {
                    self.warnings.push(format!(
                        "{shown} has \"servers\" (VS Code's layout) and no \"mcpServers\": \
                         nothing in it is read; `tether import` converts it"
                    ));
                }
                return;
            }
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
        if server_count > MAX_ENTRIES_PER_FILE {
            self.warnings.push(format!(
                "{shown} has {server_count} servers; tether reads the first {MAX_ENTRIES_PER_FILE} and ignores the rest"
            ));
        }
        // Names already known from an earlier scope: only those make an
        // entry replace another, so loading stays linear in the entries.
        let mut earlier: HashSet<String> = self
            .servers
            .iter()
            .map(|server| name_key(&server.name))
            .chain(self.failed.iter().map(|failed| name_key(&failed.name)))
            .collect();
        let mut seen_here: HashMap<String, &String> = HashMap::new();
        for (name, value) in &servers {
            let key = name_key(name);
            if let Some(first) = seen_here.get(&key) {
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
            seen_here.insert(key.clone(), name);
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
                    self.forget_earlier(&key, &mut earlier);
                    self.servers.push(*server);
                }
                Ok(entry::Parsed::Override(changes)) => self.apply_override(name, &shown, changes),
                Err(error) => {
                    // The entry meant to replace any earlier one of its name:
                    // its failure does, rather than the old entry running on.
                    self.forget_earlier(&key, &mut earlier);
                    self.failed.push(FailedEntry {
                        name: name.clone(),
                        scope,
                        source: path.map(Path::to_owned),
                        error,
                    })
                }
            }
        }
    }

    /// Drops an earlier scope's entry (or failure) named `key`, if there is
    /// one.
    fn forget_earlier(&mut self, key: &str, earlier: &mut HashSet<String>) {
        if earlier.remove(key) {
            self.servers.retain(|existing| name_key(&existing.name) != key);
            self.failed.retain(|existing| name_key(&existing.name) != key);
        }
    }

    /// The `"codemode"` limits of a file: the user's (or JSON text a host
    /// parses) only, since a project file must not raise them.
    fn set_script_limits(&mut self, limits: &Value, scope: Scope, shown: &str) {
        if matches!(scope, Scope::Project | Scope::Local) {
            self.warnings.push(format!(
                "{shown}: \"codemode\" limits are read from the user's mcp.json only; ignored here"
            ));
            return;
        }
        let mut warnings = super::codemode::apply(&mut self.codemode, limits, shown);
        self.warnings.append(&mut warnings);
    }

    /// A project entry without `command` or `url` changes only the
    /// settings it names of the user entry of the same name.
    fn apply_override(&mut self, name: &str, shown: &str, changes: entry::Override) {
        let key = name_key(name);
        match self.servers.iter_mut().find(|s| name_key(&s.name) == key) {
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
pub(crate) fn servers_of(
    text: &str,
    shown: &str,
) -> Result<Option<serde_json::Map<String, Value>>, String> {
    let document = ConfigDocument::parse(text).map_err(|err| syntax_error(shown, &err))?;
    servers_in(document, shown)
}

/// The `mcpServers` object of a parsed config file (its first
/// [`MAX_ENTRIES_PER_FILE`] entries), `None` when it has none.
fn servers_in(
    document: ConfigDocument,
    shown: &str,
) -> Result<Option<serde_json::Map<String, Value>>, String> {
    match document.servers {
        Servers::Absent => Ok(None),
        Servers::Object(servers) => Ok(Some(servers)),
        Servers::NotAnObject => Err(format!("{shown}: \"mcpServers\" must be an object")),
    }
}

/// What the environment allows before any file is read: `None` when
/// `TETHER_MCP=0` turns MCP off, else the host variables files may name
/// (`TETHER_MCP_ENV`; `Some(None)` when it is not set: any).
#[allow(clippy::option_option)]
pub(crate) fn allowed_variables(
    environment: &[(String, String)],
) -> Option<Option<BTreeSet<String>>> {
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
