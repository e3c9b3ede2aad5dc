//! Other clients' configuration files, each read into the one shape that
//! `import.rs` translates: a server's name and its entry in the
//! `mcpServers` style (`command`, `args`, `env`; or `url`, `type`,
//! `headers`), with the fields tether shares spelled as tether spells them.
//!
//! - Claude Desktop, Cursor, Claude Code (`.mcp.json`), Windsurf
//!   (`serverUrl`): `{"mcpServers": {…}}`; VS Code `{"servers": {…}}`.
//! - Claude Code's `~/.claude.json`: `mcpServers` (its user scope), and
//!   `projects.<folder>.mcpServers` (its local scope, kept per folder): each
//!   is named with its folder and skipped (tether's local scope is the
//!   current project's), never dropped silently.
//! - Gemini CLI (`~/.gemini/settings.json`): `httpUrl` is Streamable HTTP,
//!   `url` SSE, `timeout` milliseconds, `includeTools`/`excludeTools`.
//! - Codex (`config.toml`, read with `basic-toml`): `[mcp_servers.NAME]`.
//! - Zed (`context_servers`), OpenCode (`mcp`, `type` local or remote, the
//!   command as one array).

use std::path::Path;

use serde_json::{json, Map, Value};

/// Servers read from a file: each entry, those skipped and why, notes.
#[derive(Default)]
pub(super) struct Read {
    pub(super) entries: Vec<(String, Value)>,
    pub(super) skipped: Vec<(String, String)>,
    pub(super) notes: Vec<String>,
}

/// Reads `text` (the file at `source`) in whichever client's format it is.
pub(super) fn read(source: &Path, text: &str) -> Result<Read, String> {
    let shown = source.display().to_string();
    let toml = source.extension().is_some_and(|extension| extension == "toml");
    let document: Value = if toml {
        from_toml(text).map_err(|err| format!("{shown}: {err}"))?
    } else {
        serde_json::from_slice(super::jsonc::strip_jsonc(text).as_bytes())
            .map_err(|err| super::syntax_error(&shown, &err))?
    };
    let mut read = Read::default();
    if let Some(Value::Object(servers)) = document.get("mcp_servers") {
        for (name, entry) in servers {
            read.entries.push((name.clone(), codex(name, entry, &mut read.notes)));
        }
    } else if let Some(Value::Object(servers)) = document.get("context_servers") {
        for (name, entry) in servers {
            read.entries.push((name.clone(), zed(entry)));
        }
    } else if let (Some(Value::Object(servers)), None) =
        (document.get("mcp"), document.get("mcpServers"))
    {
        for (name, entry) in servers {
            read.entries.push((name.clone(), opencode(entry)));
        }
    } else {
        let servers = match (document.get("mcpServers"), document.get("servers")) {
            (Some(Value::Object(servers)), _) | (_, Some(Value::Object(servers))) => Some(servers),
            _ => None,
        };
        let gemini = shown.contains(".gemini")
            || servers.is_some_and(|servers| {
                servers.values().any(|entry| {
                    ["httpUrl", "includeTools", "excludeTools"]
                        .iter()
                        .any(|field| entry.get(*field).is_some())
                })
            });
        for (name, entry) in servers.into_iter().flatten() {
            let entry =
                if gemini { self::gemini(name, entry, &mut read.notes) } else { entry.clone() };
            read.entries.push((name.clone(), windsurf(entry)));
        }
        // Claude Code's local scope: per folder, in ~/.claude.json.
        if let Some(Value::Object(projects)) = document.get("projects") {
            for (folder, project) in projects {
                let Some(Value::Object(servers)) = project.get("mcpServers") else { continue };
                for name in servers.keys() {
                    read.skipped.push((
                        name.clone(),
                        format!(
                            "Claude Code keeps it for the folder {folder} alone (its local \
                             scope); add it in that folder with: tether add -s local"
                        ),
                    ));
                }
            }
        }
        if servers.is_none() && read.skipped.is_empty() {
            return Err(format!(
                "{shown} has no servers tether knows how to read: \"mcpServers\" (Claude, \
                 Cursor, Gemini, Windsurf), \"servers\" (VS Code), \"context_servers\" (Zed), \
                 \"mcp\" (OpenCode) or [mcp_servers] (Codex)"
            ));
        }
    }
    Ok(read)
}

/// A TOML document as JSON values (Codex's `config.toml`).
#[cfg(feature = "toml")]
fn from_toml(text: &str) -> Result<Value, String> {
    basic_toml::from_str(text).map_err(|err| err.to_string())
}

#[cfg(not(feature = "toml"))]
fn from_toml(_: &str) -> Result<Value, String> {
    Err("this tether was built without reading TOML (the \"toml\" cargo feature)".into())
}

/// Windsurf names a remote server's URL `serverUrl`.
fn windsurf(mut entry: Value) -> Value {
    if let Some(fields) = entry.as_object_mut() {
        if let (Some(url), false) = (fields.shift_remove("serverUrl"), fields.contains_key("url")) {
            fields.insert("url".into(), url);
        }
    }
    entry
}

/// Gemini CLI: `httpUrl` is Streamable HTTP and `url` SSE; `timeout` is in
/// milliseconds; `includeTools` and `excludeTools` choose the tools.
fn gemini(name: &str, entry: &Value, notes: &mut Vec<String>) -> Value {
    let Some(fields) = entry.as_object() else { return entry.clone() };
    let mut out = Map::new();
    for (key, value) in fields {
        match key.as_str() {
            "httpUrl" => {
                out.insert("url".into(), value.clone());
                out.insert("type".into(), json!("http"));
            }
            // `httpUrl` wins: its URL and type are the entry's.
            "url" if fields.contains_key("httpUrl") => {}
            "url" => {
                out.insert("url".into(), value.clone());
                out.entry("type").or_insert_with(|| json!("sse"));
            }
            "timeout" => {
                if let Some(millis) = value.as_f64() {
                    out.insert("timeout".into(), json!(millis / 1000.0));
                    notes.push(format!(
                        "{name}: Gemini's timeout {millis} ms is {} s",
                        millis / 1000.0
                    ));
                }
            }
            "includeTools" => {
                out.insert("tools".into(), value.clone());
            }
            "excludeTools" => {
                out.insert("toolExposure".into(), hidden(value));
            }
            // Gemini expands `$VAR` as `${VAR}` in these.
            "command" | "args" | "cwd" | "env" | "headers" => {
                out.insert(key.clone(), braced_variables(value));
            }
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    Value::Object(out)
}

/// `$VAR` written as `${VAR}` in every string of `value` (a `$` not
/// followed by a name stays as it is).
fn braced_variables(value: &Value) -> Value {
    match value {
        Value::String(text) => {
            let mut out = String::with_capacity(text.len() + 4);
            let mut rest = text.as_str();
            while let Some(at) = rest.find('$') {
                out.push_str(&rest[..at]);
                let after = &rest[at + 1..];
                let name: String =
                    after.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
                    out.push('$');
                    rest = after;
                } else {
                    out.push_str(&format!("${{{name}}}"));
                    rest = &after[name.len()..];
                }
            }
            out.push_str(rest);
            Value::String(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(braced_variables).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), braced_variables(v))).collect())
        }
        other => other.clone(),
    }
}

/// A list of tool names as `toolExposure`, each hidden.
fn hidden(names: &Value) -> Value {
    let hidden: Map<String, Value> = names
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|name| (name.to_owned(), json!("hidden")))
        .collect();
    Value::Object(hidden)
}

/// Codex's `[mcp_servers.NAME]`.
fn codex(name: &str, entry: &Value, notes: &mut Vec<String>) -> Value {
    let Some(fields) = entry.as_object() else { return entry.clone() };
    let mut out = Map::new();
    let env = fields.get("env").and_then(Value::as_object).cloned().unwrap_or_default();
    let mut headers =
        fields.get("http_headers").and_then(Value::as_object).cloned().unwrap_or_default();
    for (key, value) in fields {
        match key.as_str() {
            "command" | "args" | "cwd" | "url" | "enabled" => {
                out.insert(key.clone(), value.clone());
            }
            "env" | "http_headers" => {}
            // Variables passed through from Codex's own environment when
            // set: `envFrom` leaves an unset one out, as Codex does.
            "env_vars" => {
                let mut from = Map::new();
                for variable in value.as_array().into_iter().flatten().filter_map(Value::as_str) {
                    from.insert(variable.to_owned(), json!(variable));
                }
                out.insert("envFrom".into(), Value::Object(from));
            }
            "env_http_headers" => {
                for (header, variable) in value.as_object().into_iter().flatten() {
                    if let Some(variable) = variable.as_str() {
                        headers.insert(header.clone(), json!(format!("${{{variable}}}")));
                    }
                }
            }
            "bearer_token_env_var" => {
                out.insert("bearerTokenEnv".into(), value.clone());
            }
            "enabled_tools" => {
                out.insert("tools".into(), value.clone());
            }
            "disabled_tools" => {
                out.insert("toolExposure".into(), hidden(value));
            }
            "startup_timeout_sec" | "startup_timeout_ms" | "tool_timeout_sec" => {
                let Some(number) = value.as_f64() else { continue };
                let seconds = if key.ends_with("_ms") { number / 1000.0 } else { number };
                let field = if key.starts_with("startup") { "startTimeout" } else { "timeout" };
                out.insert(field.into(), json!(seconds));
            }
            other => notes.push(format!("{name}: dropped Codex's {other:?}")),
        }
    }
    if !env.is_empty() {
        out.insert("env".into(), Value::Object(env));
    }
    if !headers.is_empty() {
        out.insert("headers".into(), Value::Object(headers));
    }
    Value::Object(out)
}

/// Zed's `context_servers` entry: `{"command": {"path", "args", "env"}}`
/// (older) or `{"command": "…", "args": […], "env": {…}}`, or `{"url"}`.
fn zed(entry: &Value) -> Value {
    let mut out = Map::new();
    match entry.get("command") {
        Some(Value::Object(command)) => {
            for (from, to) in [("path", "command"), ("args", "args"), ("env", "env")] {
                if let Some(value) = command.get(from) {
                    out.insert(to.into(), value.clone());
                }
            }
        }
        _ => {
            for field in ["command", "args", "env", "url", "headers"] {
                if let Some(value) = entry.get(field) {
                    out.insert(field.into(), value.clone());
                }
            }
        }
    }
    if entry.get("enabled") == Some(&Value::Bool(false)) {
        out.insert("enabled".into(), json!(false));
    }
    Value::Object(out)
}

/// OpenCode's `mcp` entry: `{"type": "local", "command": ["npx", …],
/// "environment": {…}}` or `{"type": "remote", "url", "headers"}`.
fn opencode(entry: &Value) -> Value {
    let mut out = Map::new();
    if let Some(Value::Array(words)) = entry.get("command") {
        if let Some((program, args)) = words.split_first() {
            out.insert("command".into(), program.clone());
            if !args.is_empty() {
                out.insert("args".into(), Value::Array(args.to_vec()));
            }
        }
    }
    for (from, to) in [("environment", "env"), ("url", "url"), ("headers", "headers")] {
        if let Some(value) = entry.get(from) {
            out.insert(to.into(), value.clone());
        }
    }
    if entry.get("enabled") == Some(&Value::Bool(false)) {
        out.insert("enabled".into(), json!(false));
    }
    Value::Object(out)
}

/// Where other clients keep their servers, under `home` (and `xdg`, the
/// configuration folder): each file that exists, with its client's name.
pub(crate) fn usual_places(home: &Path, xdg: &Path) -> Vec<(&'static str, std::path::PathBuf)> {
    let mac = home.join("Library/Application Support");
    let codex = std::env::var_os("CODEX_HOME")
        .filter(|codex| !codex.is_empty())
        .map_or_else(|| home.join(".codex"), std::path::PathBuf::from);
    let places = [
        ("Claude Code", home.join(".claude.json")),
        ("Claude Desktop", xdg.join("Claude/claude_desktop_config.json")),
        ("Claude Desktop", mac.join("Claude/claude_desktop_config.json")),
        ("Cursor", home.join(".cursor/mcp.json")),
        ("VS Code", xdg.join("Code/User/mcp.json")),
        ("VS Code", mac.join("Code/User/mcp.json")),
        ("Codex", codex.join("config.toml")),
        ("Gemini CLI", home.join(".gemini/settings.json")),
        ("Windsurf", home.join(".codeium/windsurf/mcp_config.json")),
        ("Zed", xdg.join("zed/settings.json")),
        ("OpenCode", xdg.join("opencode/opencode.json")),
    ];
    places.into_iter().filter(|(_, path)| path.is_file()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_text(name: &str, text: &str) -> Read {
        read(Path::new(name), text).unwrap()
    }

    #[cfg(feature = "toml")]
    #[test]
    fn codex_toml_becomes_entries() {
        let text = r#"
[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-mcp"]
env = { "LEVEL" = "2" }
env_vars = ["API_KEY"]
startup_timeout_sec = 20
tool_timeout_sec = 90
enabled_tools = ["search"]
disabled_tools = ["delete"]

[mcp_servers.web]
url = "https://example.com/mcp"
bearer_token_env_var = "WEB_TOKEN"
env_http_headers = { "X-Team" = "TEAM_ID" }
enabled = false
"#;
        let read = read_text("/home/u/.codex/config.toml", text);
        let docs = &read.entries[0].1;
        assert_eq!(docs["command"], "npx");
        assert_eq!(docs["env"], json!({"LEVEL": "2"}));
        // Passed on when set, as Codex does: `envFrom` leaves it out when not.
        assert_eq!(docs["envFrom"], json!({"API_KEY": "API_KEY"}));
        assert_eq!(
            (docs["startTimeout"].clone(), docs["timeout"].clone()),
            (json!(20.0), json!(90.0))
        );
        assert_eq!(docs["tools"], json!(["search"]));
        assert_eq!(docs["toolExposure"], json!({"delete": "hidden"}));
        let web = &read.entries[1].1;
        assert_eq!(web["bearerTokenEnv"], "WEB_TOKEN");
        assert_eq!(web["headers"], json!({"X-Team": "${TEAM_ID}"}));
        assert_eq!(web["enabled"], false);
    }

    #[test]
    fn gemini_urls_timeouts_and_tool_lists() {
        let text = r#"{"mcpServers": {
            "stream": {"httpUrl": "https://a.example/mcp", "timeout": 30000, "includeTools": ["x"]},
            "events": {"url": "https://b.example/sse", "excludeTools": ["y"]}}}"#;
        let read = read_text("/home/u/.gemini/settings.json", text);
        let stream = &read.entries[0].1;
        assert_eq!(
            (stream["type"].clone(), stream["timeout"].clone()),
            (json!("http"), json!(30.0))
        );
        assert_eq!(stream["tools"], json!(["x"]));
        let events = &read.entries[1].1;
        assert_eq!(events["type"], "sse");
        assert_eq!(events["toolExposure"], json!({"y": "hidden"}));
    }

    #[test]
    fn gemini_dollar_variables_are_braced() {
        let text = r#"{"mcpServers": {"s": {"command": "run", "args": ["$HOME/x", "$5"],
            "env": {"K": "$API_KEY"}, "headers": {"Authorization": "Bearer $TOKEN"}}}}"#;
        let read = read_text("/home/u/.gemini/settings.json", text);
        let entry = &read.entries[0].1;
        assert_eq!(entry["headers"]["Authorization"], "Bearer ${TOKEN}");
        assert_eq!(entry["env"]["K"], "${API_KEY}");
        assert_eq!(entry["args"], json!(["${HOME}/x", "$5"]));
    }

    #[test]
    fn claude_code_local_servers_are_named_not_dropped() {
        let text = r#"{"mcpServers": {"u": {"command": "a"}},
            "projects": {"/work/p": {"mcpServers": {"mine": {"command": "b"}}}}}"#;
        let read = read_text("/home/u/.claude.json", text);
        assert_eq!(read.entries.len(), 1);
        assert_eq!(read.skipped[0].0, "mine");
        assert!(read.skipped[0].1.contains("/work/p"));
    }

    #[test]
    fn zed_opencode_and_windsurf() {
        let zed = read_text(
            "settings.json",
            r#"{"context_servers": {"z": {"command": {"path": "zs", "args": ["1"]}}}}"#,
        );
        assert_eq!(zed.entries[0].1, json!({"command": "zs", "args": ["1"]}));
        let open = read_text(
            "opencode.json",
            r#"{"mcp": {"o": {"type": "local", "command": ["npx", "-y", "o"], "environment": {"K": "v"}}}}"#,
        );
        assert_eq!(
            open.entries[0].1,
            json!({"command": "npx", "args": ["-y", "o"], "env": {"K": "v"}})
        );
        let surf = read_text(
            "mcp_config.json",
            r#"{"mcpServers": {"w": {"serverUrl": "https://w.example/mcp"}}}"#,
        );
        assert_eq!(surf.entries[0].1, json!({"url": "https://w.example/mcp"}));
    }
}
