//! Which projects are trusted to start servers.
//!
//! A project's `.mcp.json` is written by whoever can write the repository, so
//! its servers start only once the user said `tether trust` for that folder.
//! Trust is kept in `<config-dir>/trusted-projects.json` by canonical path,
//! so a symlink or a `..` does not make a different project trusted.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::file;

/// The file that lists trusted projects.
pub(crate) fn trust_file(config_dir: &Path) -> PathBuf {
    config_dir.join("trusted-projects.json")
}

/// True when `project` is in the trusted list.
pub(crate) fn is_trusted(config_dir: &Path, project: &Path) -> bool {
    let Ok(canonical) = fs::canonicalize(project) else {
        return false;
    };
    let Ok(text) = fs::read_to_string(trust_file(config_dir)) else {
        return false;
    };
    let Ok(document) = serde_json::from_str::<Value>(&text) else {
        log::warn!("{} is not valid JSON; no project is trusted", trust_file(config_dir).display());
        return false;
    };
    let target = canonical.to_string_lossy();
    document
        .get("trusted")
        .and_then(Value::as_array)
        .is_some_and(|trusted| trusted.iter().any(|entry| entry.as_str() == Some(&target)))
}

/// Adds or removes `project` from the trusted list; returns whether anything
/// changed and the canonical path.
///
/// # Errors
/// The folder does not exist, or the file cannot be rewritten.
pub(crate) fn set_trusted(
    config_dir: &Path,
    project: &Path,
    trusted: bool,
) -> Result<(bool, PathBuf), String> {
    let canonical = fs::canonicalize(project)
        .map_err(|err| format!("cannot resolve the folder {}: {err}", project.display()))?;
    let target = canonical.to_string_lossy().into_owned();
    let path = trust_file(config_dir);
    let shown = path.display().to_string();
    let changed = file::edit(&path, true, |document| {
        let list = document.entry("trusted").or_insert_with(|| json!([]));
        let Value::Array(list) = list else {
            return Err(format!("{shown}: \"trusted\" is not a list; fix it by hand first"));
        };
        let present = list.iter().any(|entry| entry.as_str() == Some(&target));
        match (trusted, present) {
            (true, false) => list.push(Value::String(target.clone())),
            (false, true) => list.retain(|entry| entry.as_str() != Some(&target)),
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    Ok((changed, canonical))
}
