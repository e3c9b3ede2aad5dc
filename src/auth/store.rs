//! The token store: `<config-dir>/mcp-auth.json`, mode 0600, rewritten
//! whole under a lock like the configuration files. Each server's record is
//! kept under its name together with its URL: a record whose URL is not the
//! entry's is never used (a changed URL signs in again), and one from
//! another issuer is dropped when discovery finds a different one. It holds
//! what a later run needs to go on without a person: the tokens, the
//! registered client, and where its token endpoint is.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::discovery::Discovered;
use super::flow::{ClientIdentity, Tokens};
use crate::config::file;
use crate::error::Error;

/// Where one server's credentials are kept.
#[derive(Clone)]
pub(crate) struct TokenStore {
    path: PathBuf,
    server: String,
    url: String,
}

/// One server's record.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Record {
    url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) client: Option<ClientIdentity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) discovered: Option<Discovered>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    access_token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    refresh_token: Option<String>,
    /// Unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expires_at: Option<u64>,
    /// Seconds the token lasts, as the server said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lifetime: Option<u64>,
    #[serde(default)]
    pub(super) scopes: Vec<String>,
}

impl Record {
    pub(super) fn new(
        tokens: Option<&Tokens>,
        client: Option<&ClientIdentity>,
        discovered: Option<&Discovered>,
        scopes: &[String],
    ) -> Record {
        let now_unix = unix_now();
        Record {
            url: String::new(),
            client: client.cloned(),
            discovered: discovered.cloned(),
            access_token: tokens.map(|tokens| tokens.access.clone()),
            refresh_token: tokens.and_then(|tokens| tokens.refresh.clone()),
            expires_at: tokens
                .and_then(|tokens| tokens.expires_at)
                .map(|at| now_unix + at.saturating_duration_since(Instant::now()).as_secs()),
            lifetime: tokens.and_then(|tokens| tokens.lifetime).map(|life| life.as_secs()),
            scopes: scopes.to_vec(),
        }
    }

    /// The tokens, with their expiry on this process's clock.
    pub(super) fn tokens(&self) -> Option<Tokens> {
        let now_unix = unix_now();
        Some(Tokens {
            access: self.access_token.clone()?,
            refresh: self.refresh_token.clone(),
            expires_at: self
                .expires_at
                // A hand-edited file's huge expiry is clamped, never a panic.
                .map(|at| {
                    let left = at.saturating_sub(now_unix).min(10 * 365 * 86_400);
                    Instant::now() + Duration::from_secs(left)
                }),
            lifetime: self.lifetime.map(Duration::from_secs),
        })
    }
}

impl TokenStore {
    /// The record of `server` at `url` in `path`.
    pub(crate) fn new(path: &Path, server: &str, url: &str) -> TokenStore {
        TokenStore { path: path.to_owned(), server: server.to_owned(), url: url.to_owned() }
    }

    /// The stored record, if there is one for this server at this URL.
    pub(super) fn load(&self) -> Option<Record> {
        let text =
            crate::bounded_read::read_text(&self.path, crate::bounded_read::CONFIG_FILE_LIMIT)
                .ok()?;
        let document: Value = serde_json::from_slice(text.as_bytes()).ok()?;
        let record = document.get("servers")?.get(&self.server)?;
        let record: Record = serde_json::from_value(record.clone()).ok()?;
        (record.url == self.url).then_some(record)
    }

    /// Takes the lock that makes this process the one, of all tether
    /// processes sharing the store, to spend this server's refresh token or
    /// exchange a code for it, waiting at most `wait` for another to finish.
    /// The lock file sits beside the store, one per server, and holds
    /// nothing: the PKCE verifier and `state` stay in memory.
    pub(super) fn lock_grants(&self, wait: Duration) -> Result<file::Lock, String> {
        let store = self
            .path
            .file_name()
            .map_or_else(|| "mcp-auth.json".into(), |name| name.to_string_lossy().into_owned());
        let server: String = self
            .server
            .chars()
            .take(64)
            .map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' })
            .collect();
        let name = format!(".{}.{server}.grant.lock", store.trim_start_matches('.'));
        if let Some(folder) = self.path.parent().filter(|folder| !folder.as_os_str().is_empty()) {
            file::create_private_dir(folder)
                .map_err(|err| format!("cannot create {}: {err}", folder.display()))?;
        }
        file::lock_within(&self.path.with_file_name(name), wait)
    }

    /// Replaces the record.
    pub(super) fn save(&self, mut record: Record) -> Result<(), Error> {
        record.url = self.url.clone();
        let value = serde_json::to_value(&record).map_err(|err| Error::Auth(err.to_string()))?;
        file::edit(&self.path, true, |document| {
            let servers =
                document.entry("servers").or_insert_with(|| Value::Object(Default::default()));
            match servers {
                Value::Object(servers) => {
                    servers.insert(self.server.clone(), value);
                    Ok(())
                }
                _ => Err(format!("{}: \"servers\" is not an object", self.path.display())),
            }
        })
        .map_err(Error::Auth)
    }
}

/// What the token store keeps for one server: nothing, or a sign-in.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SignIn {
    /// No sign-in is kept for this server at this URL.
    None,
    /// A sign-in is kept.
    Kept {
        /// When its access token expires, if the server said.
        expires_at: Option<SystemTime>,
        /// It has a refresh token: an expired access token is renewed
        /// without a person.
        refreshable: bool,
        /// The scopes it was granted.
        scopes: Vec<String>,
    },
}

/// What `store` keeps for `server` at `url` (a sign-in for another URL
/// under that name counts as none). Never asks any server anything.
pub fn sign_in_state(store: &Path, server: &str, url: &str) -> SignIn {
    let Some(record) = TokenStore::new(store, server, url).load() else { return SignIn::None };
    match record.access_token {
        Some(_) => SignIn::Kept {
            expires_at: record.expires_at.map(|at| UNIX_EPOCH + Duration::from_secs(at)),
            refreshable: record.refresh_token.is_some(),
            scopes: record.scopes,
        },
        None => SignIn::None,
    }
}

/// Forgets what is stored for `server` (tokens and registered client).
/// Returns whether there was anything.
///
/// # Errors
/// The store cannot be rewritten.
pub fn forget_credentials(store: &Path, server: &str) -> Result<bool, Error> {
    if !store.exists() {
        return Ok(false);
    }
    file::edit(store, true, |document| {
        Ok(match document.get_mut("servers") {
            Some(Value::Object(servers)) => servers.remove(server).is_some(),
            _ => false,
        })
    })
    .map_err(Error::Auth)
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs())
}
