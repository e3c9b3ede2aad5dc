//! Copying servers from other clients' configuration files.
//!
//! Each client's file is read into one shape first (`dialects.rs`: Claude,
//! Cursor, VS Code with its comments and `${input:…}`/`${env:…}` variables,
//! Gemini, Codex, Windsurf, Zed, OpenCode). Entries are then translated
//! into this format where the meaning is the same, and skipped with a
//! reason where it is not, so that nothing is imported half-understood.

use std::path::Path;

use serde_json::{Map, Value};

use super::entry::{check_name, FOREIGN_FIELDS, KNOWN_FIELDS};
use super::{file, name_key};

/// What an import did.
#[derive(Debug, Default, Clone, PartialEq)]
#[non_exhaustive]
pub struct ImportReport {
    /// Servers copied into the user file.
    pub imported: Vec<String>,
    /// Servers not copied, and why.
    pub skipped: Vec<(String, String)>,
    /// Fields dropped from imported servers, and why.
    pub notes: Vec<String>,
    /// What the loader finds worth fixing in an imported entry (a literal
    /// credential, say), as `tether add` says it.
    pub warnings: Vec<String>,
}

/// Imports every server of `source` into the user file `target`.
///
/// # Errors
/// The source cannot be read or parsed, or has no servers; the target cannot
/// be rewritten.
pub(crate) fn import(source: &Path, target: &Path) -> Result<ImportReport, String> {
    let shown = source.display().to_string();
    let text = crate::bounded_read::read_text(source, crate::bounded_read::IMPORT_FILE_LIMIT)
        .map_err(|err| format!("cannot read {shown}: {err}"))?;
    let read = super::dialects::read(source, &text)?;
    let mut report =
        ImportReport { skipped: read.skipped, notes: read.notes, ..ImportReport::default() };
    let mut translated = Vec::new();
    for (name, entry) in &read.entries {
        match translate(name, entry, source.parent().unwrap_or(Path::new(".")), &mut report.notes) {
            // Checked as `add` checks: nothing is written that would not load.
            Ok(entry) => match super::check_entry(name, super::Scope::User, target, &entry) {
                Ok(warnings) => translated.push((name.clone(), entry, warnings)),
                Err(why) => report.skipped.push((name.clone(), why)),
            },
            Err(why) => report.skipped.push((name.clone(), why)),
        }
    }
    let target_shown = target.display().to_string();
    file::edit(target, true, |document| {
        let existing = file::servers_mut(document, &target_shown)?;
        for (name, entry, warnings) in translated {
            if existing.keys().any(|key| name_key(key) == name_key(&name)) {
                report.skipped.push((name, "a server of that name is already configured".into()));
                continue;
            }
            existing.insert(name.clone(), entry);
            report.imported.push(name);
            report.warnings.extend(warnings);
        }
        Ok(())
    })?;
    Ok(report)
}

fn translate(
    name: &str,
    entry: &Value,
    source_dir: &Path,
    notes: &mut Vec<String>,
) -> Result<Value, String> {
    check_name(name).map_err(|why| format!("the name {why}"))?;
    // Here a value that starts with `!` runs a command; elsewhere it was text.
    for field in ["env", "headers"] {
        if let Some(Value::Object(values)) = entry.get(field) {
            if values.values().any(|value| value.as_str().is_some_and(|text| text.starts_with('!')))
            {
                return Err(format!(
                    "a value in {field:?} starts with '!', which tether would run as a command"
                ));
            }
        }
    }
    let Value::Object(fields) = entry else {
        return Err("the entry is not an object".into());
    };
    if entry.to_string().contains("${input:") {
        return Err(
            "it uses VS Code ${input:…} prompts, which tether cannot ask; add it by hand".into()
        );
    }
    if entry.to_string().contains("${workspaceFolder") {
        return Err("it uses ${workspaceFolder}; add it to the project's .mcp.json by hand".into());
    }
    let mut out = Map::new();
    for (key, value) in fields {
        if key == "disabled" {
            if value == &Value::Bool(true) {
                out.insert("enabled".into(), Value::Bool(false));
            }
            continue;
        }
        if key == "type" {
            match value.as_str() {
                Some("stdio" | "local") => {}
                Some("http" | "streamable-http" | "streamableHttp") => {
                    out.insert("type".into(), Value::String("http".into()));
                }
                Some("sse") => {
                    out.insert("type".into(), Value::String("sse".into()));
                }
                _ => return Err(format!("its type {value} is not one tether knows")),
            }
            continue;
        }
        if key == "cwd" {
            // Relative to the file it came from, not to tether's folder.
            if let Some(cwd) =
                value.as_str().filter(|cwd| !cwd.starts_with('/') && !cwd.starts_with('~'))
            {
                out.insert(key.clone(), Value::String(source_dir.join(cwd).display().to_string()));
                continue;
            }
        }
        if KNOWN_FIELDS.contains(&key.as_str()) {
            // Cursor and VS Code write `${env:VAR}`; VS Code also `${userHome}`.
            out.insert(key.clone(), rewrite_editor_variables(value));
        } else if FOREIGN_FIELDS.contains(&key.as_str()) {
            notes.push(format!("{name}: dropped {key:?}, which means nothing to tether"));
        } else {
            notes.push(format!("{name}: dropped the unknown field {key:?}"));
        }
    }
    split_command_line(name, &mut out, notes)?;
    let out = Value::Object(out);
    let variables = variables_named(&out.to_string());
    if !variables.is_empty() {
        notes.push(format!(
            "{name}: reads the host variables {} from tether's environment",
            variables.join(", ")
        ));
    }
    match (out.get("command").is_some(), out.get("url").is_some()) {
        (true, true) => Err("it has both \"command\" and \"url\"".into()),
        (false, false) => Err("it has neither \"command\" nor \"url\"".into()),
        _ => Ok(out),
    }
}

/// Other clients accept a whole command line in `command` (`"npx -y
/// server"`, `"bash -c 'serve --port 3'"`); tether takes a program and its
/// arguments. A line of plain words and quotes is split as a shell would
/// (into `command` and `args`); one with shell operators is refused, since
/// tether never runs a shell line. An existing file with spaces in its
/// name is left alone.
fn split_command_line(
    name: &str,
    out: &mut Map<String, Value>,
    notes: &mut Vec<String>,
) -> Result<(), String> {
    let Some(line) = out.get("command").and_then(Value::as_str).map(str::to_owned) else {
        return Ok(());
    };
    let has_args = out.get("args").and_then(Value::as_array).is_some_and(|args| !args.is_empty());
    if has_args || !line.trim().contains(char::is_whitespace) || Path::new(&line).exists() {
        return Ok(());
    }
    let words = crate::shell::shell_words(&line).ok_or_else(|| {
        format!("its command {line:?} is a shell line tether cannot split (quotes or shell operators); add it by hand")
    })?;
    notes.push(format!("{name}: split the command line {line:?} into a program and its arguments"));
    out.insert("command".into(), Value::String(words[0].clone()));
    out.insert(
        "args".into(),
        Value::Array(words[1..].iter().cloned().map(Value::String).collect()),
    );
    Ok(())
}

/// The `${NAME…}` variables a text names.
fn variables_named(text: &str) -> Vec<String> {
    let mut names: Vec<String> = text
        .split("${")
        .skip(1)
        .map(|rest| {
            rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect::<String>()
        })
        .filter(|name| !name.is_empty())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The editors' `${env:VAR}` is our `${VAR}`; VS Code's `${userHome}` is
/// `${HOME}`; Claude Code's `${VAR}` and `${VAR:-default}` mean what ours do.
fn rewrite_editor_variables(value: &Value) -> Value {
    match value {
        Value::String(text) => {
            // A `$` not opening `${` was plain text there; here it must be `$$`.
            let escaped = text.replace('$', "$$").replace("$${", "${");
            Value::String(escaped.replace("${env:", "${").replace("${userHome}", "${HOME}"))
        }
        Value::Array(items) => Value::Array(items.iter().map(rewrite_editor_variables).collect()),
        Value::Object(map) => Value::Object(
            map.iter().map(|(key, value)| (key.clone(), rewrite_editor_variables(value))).collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lone_dollars_stay_literal() {
        let value = rewrite_editor_variables(&serde_json::json!("pa$$w0rd costs $5, key ${KEY}"));
        assert_eq!(value, serde_json::json!("pa$$$$w0rd costs $$5, key ${KEY}"));
        assert_eq!(variables_named("${A} and ${B:-x} and ${A}"), ["A", "B"]);
    }

    #[test]
    fn vscode_variables_are_rewritten() {
        let value = rewrite_editor_variables(
            &serde_json::json!({"env": {"T": "${env:TOKEN}", "H": "${userHome}/x"}}),
        );
        assert_eq!(value, serde_json::json!({"env": {"T": "${TOKEN}", "H": "${HOME}/x"}}));
    }
}

#[cfg(test)]
mod split_tests {
    use crate::shell::shell_words;

    #[test]
    fn command_lines_split_as_a_shell_would_or_not_at_all() {
        assert_eq!(shell_words("npx -y server").unwrap(), ["npx", "-y", "server"]);
        assert_eq!(
            shell_words("bash -c 'serve --port 3'").unwrap(),
            ["bash", "-c", "serve --port 3"]
        );
        assert_eq!(shell_words(r#"run "a b" c\ d"#).unwrap(), ["run", "a b", "c d"]);
        assert_eq!(
            shell_words("node ${HOME}/server.js").unwrap(),
            ["node", "${HOME}/server.js"],
            "tether's own expansion stays"
        );
        for refused in ["a | b", "a && b", "a > f", "a $(b)", "a 'b", "echo $HOME"] {
            assert!(shell_words(refused).is_none(), "{refused}");
        }
    }
}
