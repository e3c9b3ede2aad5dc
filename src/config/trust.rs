//! Which project entries the user approved to start servers.
//!
//! A project's `.mcp.json` is written by whoever can write the repository,
//! so trust is given to what was reviewed, not to the folder: `tether trust`
//! records a digest of each entry as it was shown (SHA-256 of the entry with
//! its keys sorted). An entry added or changed later does not match and
//! waits for approval again; the others keep working. Approvals live in
//! `<config-dir>/trusted-projects.json` under the project's canonical path,
//! so a symlink or a `..` does not make a different project trusted.
//!
//! The file's older form (`{"trusted": [path, …]}`, a whole folder) grants
//! nothing: such a project's entries wait for one `tether trust`.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::file;

/// The file that keeps approvals.
pub(crate) fn trust_file(config_dir: &Path) -> PathBuf {
    config_dir.join("trusted-projects.json")
}

/// Why a project entry does not start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum Unapproved {
    /// The project was never trusted (or trust was withdrawn).
    NotTrusted,
    /// The project was trusted, but this entry was added since.
    Added,
    /// The project was trusted, but this entry changed since.
    Changed,
}

/// The approved digests of a project's entries, by server name; `None`
/// when the project was never trusted.
pub(crate) fn approvals(config_dir: &Path, project: &Path) -> Option<BTreeMap<String, String>> {
    let canonical = fs::canonicalize(project).ok()?;
    let text = crate::bounded_read::read_text(
        &trust_file(config_dir),
        crate::bounded_read::CONFIG_FILE_LIMIT,
    )
    .ok()?;
    let Ok(document) = serde_json::from_slice::<Value>(text.as_bytes()) else {
        log::warn!("{} is not valid JSON; no project is trusted", trust_file(config_dir).display());
        return None;
    };
    let servers = document
        .get("projects")?
        .get(canonical.to_string_lossy().as_ref())?
        .get("servers")?
        .as_object()?;
    Some(
        servers
            .iter()
            .filter_map(|(name, digest)| Some((name.clone(), digest.as_str()?.to_owned())))
            .collect(),
    )
}

/// Why this entry would not start under these approvals, or `None` when
/// it is approved as it is.
pub(crate) fn check(
    approvals: Option<&BTreeMap<String, String>>,
    name: &str,
    entry: &Value,
) -> Option<Unapproved> {
    let Some(approvals) = approvals else { return Some(Unapproved::NotTrusted) };
    match approvals.get(name) {
        None => Some(Unapproved::Added),
        Some(approved) if *approved == digest(entry) => None,
        Some(_) => Some(Unapproved::Changed),
    }
}

/// SHA-256 (hex) of the entry with every object's keys sorted, so that
/// reformatting the file changes nothing and any change of content does.
pub(crate) fn digest(entry: &Value) -> String {
    let text = serde_json::to_string(&sorted(entry)).unwrap_or_default();
    let hash = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    hash.as_ref().iter().map(|byte| format!("{byte:02x}")).collect()
}

fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(keys.into_iter().map(|key| (key.clone(), sorted(&map[key]))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// Records these entries (name → digest) as the project's approved ones,
/// replacing what was approved before; `None` withdraws the project's trust.
/// Returns whether anything changed and the canonical path.
///
/// # Errors
/// The folder does not exist, or the file cannot be rewritten.
pub(crate) fn set_approvals(
    config_dir: &Path,
    project: &Path,
    approved: Option<BTreeMap<String, String>>,
) -> Result<(bool, PathBuf), String> {
    let canonical = fs::canonicalize(project)
        .map_err(|err| format!("cannot resolve the folder {}: {err}", project.display()))?;
    let key = canonical.to_string_lossy().into_owned();
    let path = trust_file(config_dir);
    let shown = path.display().to_string();
    let changed = file::edit(&path, true, |document| {
        // The older whole-folder list grants nothing any more.
        let legacy = document.shift_remove("trusted").is_some();
        let projects = document.entry("projects").or_insert_with(|| json!({}));
        let Value::Object(projects) = projects else {
            return Err(format!("{shown}: \"projects\" is not an object; fix it by hand first"));
        };
        let before = projects.get(&key).cloned();
        match &approved {
            Some(servers) => {
                let servers: Map<String, Value> =
                    servers.iter().map(|(name, digest)| (name.clone(), json!(digest))).collect();
                projects.insert(key.clone(), json!({ "servers": servers }));
            }
            None => {
                projects.shift_remove(&key);
            }
        }
        Ok(legacy || projects.get(&key) != before.as_ref())
    })?;
    Ok((changed, canonical))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_digest_ignores_key_order_and_sees_any_change() {
        let a = serde_json::json!({"command": "npx", "args": ["-y", "srv"], "env": {"A": "1", "B": "2"}});
        let b: Value = serde_json::from_slice(
            br#"{"env": {"B": "2", "A": "1"}, "args": ["-y", "srv"], "command": "npx"}"#,
        )
        .unwrap();
        assert_eq!(digest(&a), digest(&b));
        let mut c = a.clone();
        c["args"][1] = serde_json::json!("srv2");
        assert_ne!(digest(&a), digest(&c));
        let approvals: BTreeMap<String, String> = [("x".to_owned(), digest(&a))].into();
        assert_eq!(check(Some(&approvals), "x", &b), None);
        assert_eq!(check(Some(&approvals), "x", &c), Some(Unapproved::Changed));
        assert_eq!(check(Some(&approvals), "y", &a), Some(Unapproved::Added));
        assert_eq!(check(None, "x", &a), Some(Unapproved::NotTrusted));
    }
}
