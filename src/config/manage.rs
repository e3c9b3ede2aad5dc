//! Changing the configuration files: what `tether add`, `remove`, `enable`,
//! `disable`, `trust`, `untrust` and `import` do, as a library API.
//!
//! Every change goes through `file::edit` (locked, atomic, order-kept) and
//! works on the files as written, never on the expanded configuration, so a
//! `${VAR}` stays a `${VAR}` and no secret is ever written back.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

#[cfg(feature = "desktop")]
use super::import::{self, ImportReport};
use super::{
    check_entry, check_name, command_line_of, file, name_key, servers_of, trust, Exposure, Scope,
};
use crate::bounded_read::{read_text, CONFIG_FILE_LIMIT};
use crate::error::Error;

/// The fields of an entry besides its command line, flattened to
/// `field` / `field.key` and a value as written, literal secrets redacted.
fn details_of(entry: &Value) -> Vec<(String, String)> {
    let shown = |value: &Value| match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    let mut details = Vec::new();
    let Value::Object(fields) = super::redact::redacted(entry) else { return details };
    for (field, value) in &fields {
        if matches!(field.as_str(), "command" | "args" | "url") {
            continue;
        }
        match value {
            Value::Object(map) => {
                for (key, item) in map {
                    details.push((format!("{field}.{key}"), shown(item)));
                }
            }
            other => details.push((field.clone(), shown(other))),
        }
    }
    details
}

/// One entry of a project's `.mcp.json`, as a review shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProjectEntry {
    /// The server name.
    pub name: String,
    /// What it would run (as written) or the URL it would reach; `None`
    /// for an entry that only overrides settings of a user entry.
    pub command_line: Option<String>,
    /// Every other field as written (`env.PATH`, `headers.X-Key`, `cwd`,
    /// `bearerTokenEnv`, …), literal secrets redacted: a review shows all
    /// that the approval covers, since any of it changes what runs.
    pub details: Vec<(String, String)>,
    /// What the approval records.
    digest: String,
}

/// The two configuration files and the trust list.
#[derive(Debug, Clone)]
pub struct ConfigFiles {
    /// The user configuration folder.
    pub config_dir: PathBuf,
    /// The project folder.
    pub project_dir: PathBuf,
}

impl ConfigFiles {
    /// The files of this user folder and project.
    pub fn new(config_dir: impl Into<PathBuf>, project_dir: impl Into<PathBuf>) -> ConfigFiles {
        ConfigFiles { config_dir: config_dir.into(), project_dir: project_dir.into() }
    }

    /// `<config-dir>/mcp.json`.
    pub fn user_file(&self) -> PathBuf {
        self.config_dir.join("mcp.json")
    }

    /// `<project>/.mcp.json`.
    pub fn project_file(&self) -> PathBuf {
        self.project_dir.join(".mcp.json")
    }

    /// `<config-dir>/local/<project>-<hash>.json`: the user's servers for
    /// this project alone (the local scope), one file per project folder.
    pub fn local_file(&self) -> PathBuf {
        local_file(&self.config_dir, &self.project_dir)
    }

    /// The file of a scope (host scope has none).
    fn file_of(&self, scope: Scope) -> Option<PathBuf> {
        match scope {
            Scope::User => Some(self.user_file()),
            Scope::Project => Some(self.project_file()),
            Scope::Local => Some(self.local_file()),
            Scope::Host => None,
        }
    }

    /// The scopes whose file has an entry of this name (`-` and `_` equal),
    /// the one in force first (local, project, user).
    pub fn defined_in(&self, name: &str) -> Vec<Scope> {
        [Scope::Local, Scope::Project, Scope::User]
            .into_iter()
            .filter(|scope| self.entry_name(*scope, name).is_some())
            .collect()
    }

    /// The name as written in a scope's file, if that file has the server.
    fn entry_name(&self, scope: Scope, name: &str) -> Option<String> {
        let path = self.file_of(scope)?;
        let text = read_text(&path, CONFIG_FILE_LIMIT).ok()?;
        let servers = servers_of(&text, &path.display().to_string()).ok()??;
        servers.keys().find(|key| name_key(key) == name_key(name)).cloned()
    }

    /// Runs `change` on the `mcpServers` object of a scope's file, under the
    /// file's lock, and writes the file back. Returns the file.
    fn edit_servers(
        &self,
        scope: Scope,
        change: impl FnOnce(&mut Map<String, Value>, &str) -> Result<(), String>,
    ) -> Result<PathBuf, Error> {
        let path = self
            .file_of(scope)
            .ok_or_else(|| Error::Config("host servers are registered in code".into()))?;
        let shown = path.display().to_string();
        let private = matches!(scope, Scope::User | Scope::Local);
        file::edit(&path, private, |document| {
            if scope == Scope::Local {
                // Which project the file is for, for a person who opens it.
                let project = self.project_dir.display().to_string();
                document.insert("project".into(), Value::String(project));
            }
            change(file::servers_mut(document, &shown)?, &shown)
        })
        .map_err(Error::Config)?;
        Ok(path)
    }

    /// Adds a server entry (as JSON) to a scope's file; refuses a name that
    /// file already has, and an entry the loader would refuse (nothing is
    /// written then). Returns the file and the loader's warnings about the
    /// entry (a literal credential in it, say).
    ///
    /// # Errors
    /// A bad name or entry, a taken name, or a file that cannot be rewritten.
    pub fn add_server(
        &self,
        scope: Scope,
        name: &str,
        entry: Value,
    ) -> Result<(PathBuf, Vec<String>), Error> {
        check_name(name).map_err(|why| Error::Config(format!("the server name {name:?} {why}")))?;
        let path = self
            .file_of(scope)
            .ok_or_else(|| Error::Config("host servers are registered in code".into()))?;
        let warnings = check_entry(name, scope, &path, &entry).map_err(Error::Config)?;
        let path = self.edit_servers(scope, |servers, shown| {
            if let Some(existing) = servers.keys().find(|key| name_key(key) == name_key(name)) {
                return Err(format!(
                    "{shown} already has a server named {existing:?}; remove it first"
                ));
            }
            servers.insert(name.to_owned(), entry);
            Ok(())
        })?;
        Ok((path, warnings))
    }

    /// Removes a server from a scope's file. Returns the file.
    ///
    /// # Errors
    /// The file has no such server, or cannot be rewritten.
    pub fn remove_server(&self, scope: Scope, name: &str) -> Result<PathBuf, Error> {
        self.edit_servers(scope, |servers, shown| {
            let key = servers.keys().find(|key| name_key(key) == name_key(name)).cloned();
            match key {
                Some(key) => {
                    servers.shift_remove(&key);
                    Ok(())
                }
                None => Err(format!("{shown} has no server named {name:?}")),
            }
        })
    }

    /// Sets `field` of a server's entry in the scope's file, or without a
    /// scope in the file that defines it (the project file when both do),
    /// or removes it with `None`. Returns the
    /// scope and file changed.
    ///
    /// # Errors
    /// No file defines the server, or the file cannot be rewritten.
    pub fn set_field(
        &self,
        scope: Option<Scope>,
        name: &str,
        field: &str,
        value: Option<Value>,
    ) -> Result<(Scope, PathBuf), Error> {
        let scope = match scope {
            Some(scope) => scope,
            None => *self
                .defined_in(name)
                .first()
                .ok_or_else(|| Error::UnknownServer(name.to_owned()))?,
        };
        self.set_field_in(scope, name, field, value)
    }

    /// Sets `field` of a server's entry in one scope's file.
    ///
    /// # Errors
    /// That file has no such server, or cannot be rewritten.
    fn set_field_in(
        &self,
        scope: Scope,
        name: &str,
        field: &str,
        value: Option<Value>,
    ) -> Result<(Scope, PathBuf), Error> {
        let path = self.edit_servers(scope, |servers, shown| {
            let key = servers.keys().find(|key| name_key(key) == name_key(name)).cloned();
            let Some(Value::Object(entry)) = key.and_then(|key| servers.get_mut(&key)) else {
                return Err(format!("{shown} has no server named {name:?}"));
            };
            match value {
                Some(value) => {
                    entry.insert(field.to_owned(), value);
                }
                None => {
                    entry.shift_remove(field);
                }
            }
            Ok(())
        })?;
        Ok((scope, path))
    }

    /// Sets a server's `exposure`, or one `toolExposure` pattern, in a
    /// scope's file. In the project file a server it does not define gets an
    /// entry that only overrides exposure. Returns the file.
    ///
    /// # Errors
    /// No such server in that (user) file, or a file that
    /// cannot be rewritten.
    pub fn set_exposure(
        &self,
        scope: Scope,
        name: &str,
        mode: Exposure,
        tool: Option<&str>,
    ) -> Result<PathBuf, Error> {
        let mode = mode.as_str();
        check_name(name).map_err(|why| Error::Config(format!("the server name {name:?} {why}")))?;
        self.edit_servers(scope, |servers, shown| {
            let key = servers.keys().find(|key| name_key(key) == name_key(name)).cloned();
            let key = match key {
                Some(key) => key,
                None if scope == Scope::Project => {
                    servers.insert(name.to_owned(), Value::Object(Map::new()));
                    name.to_owned()
                }
                None => return Err(format!("{shown} has no server named {name:?}")),
            };
            let Some(Value::Object(entry)) = servers.get_mut(&key) else {
                return Err(format!("{shown}: server {key:?} is not an object"));
            };
            match tool {
                None => {
                    entry.insert("exposure".into(), Value::String(mode.to_owned()));
                }
                Some(pattern) => {
                    let patterns =
                        entry.entry("toolExposure").or_insert_with(|| Value::Object(Map::new()));
                    let Value::Object(patterns) = patterns else {
                        return Err(format!(
                            "{shown}: server {key:?}: \"toolExposure\" is not an object"
                        ));
                    };
                    patterns.insert(pattern.to_owned(), Value::String(mode.to_owned()));
                }
            }
            Ok(())
        })
    }

    /// What a project's `.mcp.json` would start, entry by entry, as written:
    /// what `tether trust` shows and then approves.
    ///
    /// # Errors
    /// The file cannot be read or parsed.
    pub fn project_entries(project_dir: &Path) -> Result<Vec<ProjectEntry>, Error> {
        let path = project_dir.join(".mcp.json");
        let shown = path.display().to_string();
        let text = match read_text(&path, CONFIG_FILE_LIMIT) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(err) => return Err(Error::Config(format!("cannot read {shown}: {err}"))),
        };
        let servers: Map<String, Value> =
            servers_of(&text, &shown).map_err(Error::Config)?.unwrap_or_default();
        Ok(servers
            .iter()
            .map(|(name, entry)| ProjectEntry {
                name: name.clone(),
                command_line: command_line_of(entry),
                details: details_of(entry),
                digest: trust::digest(entry),
            })
            .collect())
    }

    /// Approves exactly these entries of the project (as
    /// [`ConfigFiles::project_entries`] read them, so what was shown is
    /// what is approved), replacing earlier approvals; an entry added or
    /// changed later waits for approval again. Returns whether anything
    /// changed and the project's canonical path.
    ///
    /// # Errors
    /// The folder does not exist, or the trust file cannot be rewritten.
    pub fn approve(
        &self,
        project_dir: &Path,
        entries: &[ProjectEntry],
    ) -> Result<(bool, PathBuf), Error> {
        let approved =
            entries.iter().map(|entry| (entry.name.clone(), entry.digest.clone())).collect();
        trust::set_approvals(&self.config_dir, project_dir, Some(approved)).map_err(Error::Config)
    }

    /// Approves the project's entries as they are now (`trusted`), or
    /// withdraws every approval; returns whether anything changed and the
    /// canonical path.
    ///
    /// # Errors
    /// The folder does not exist, the project file cannot be read, or the
    /// trust file cannot be rewritten.
    pub fn set_trusted(&self, project_dir: &Path, trusted: bool) -> Result<(bool, PathBuf), Error> {
        if trusted {
            let entries = ConfigFiles::project_entries(project_dir)?;
            return self.approve(project_dir, &entries);
        }
        trust::set_approvals(&self.config_dir, project_dir, None).map_err(Error::Config)
    }

    /// True when the project has approved entries (it was trusted).
    pub fn is_trusted(&self, project_dir: &Path) -> bool {
        trust::approvals(&self.config_dir, project_dir).is_some()
    }

    /// Copies the servers of another client's config file into the user file.
    ///
    /// # Errors
    /// The source cannot be read or has no servers; the user file cannot be
    /// rewritten.
    #[cfg(feature = "desktop")]
    pub fn import(&self, source: &Path) -> Result<ImportReport, Error> {
        import::import(source, &self.user_file()).map_err(Error::Config)
    }

    /// Other clients' configuration files where they usually are (Claude
    /// Code and Desktop, Cursor, VS Code, Codex, Gemini CLI, Windsurf, Zed,
    /// OpenCode), each that exists with its client's name: what `tether
    /// import` offers when given no file.
    #[cfg(feature = "desktop")]
    pub fn import_candidates() -> Vec<(&'static str, PathBuf)> {
        let Some(home) = std::env::var_os("HOME").map(PathBuf::from) else {
            return Vec::new();
        };
        // An empty XDG_CONFIG_HOME is unset, as the XDG specification has it.
        let xdg = std::env::var_os("XDG_CONFIG_HOME")
            .filter(|dir| !dir.is_empty())
            .map_or_else(|| home.join(".config"), PathBuf::from);
        super::dialects::usual_places(&home, &xdg)
    }
}

/// The local scope's file for `project`: named after the folder and a
/// hash of its canonical path (as trust keys projects), so that each
/// project has its own and a person can tell which is which.
pub(crate) fn local_file(config_dir: &Path, project: &Path) -> PathBuf {
    let absolute = project
        .canonicalize()
        .or_else(|_| std::path::absolute(project))
        .unwrap_or_else(|_| project.to_owned());
    let digest =
        ring::digest::digest(&ring::digest::SHA256, absolute.as_os_str().as_encoded_bytes());
    let hash: String = digest.as_ref()[..8].iter().map(|byte| format!("{byte:02x}")).collect();
    let folder: String = absolute
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '-' })
        .take(40)
        .collect();
    config_dir.join("local").join(format!("{folder}-{hash}.json"))
}
