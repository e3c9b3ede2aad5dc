//! `tether get NAME`: one entry as tether resolved it, without starting it.
//!
//! Reads the loaded configuration only: which file and scope the entry came
//! from, whether it may start (enabled, trusted, valid), and the entry as
//! written with its secrets redacted by the library.

use serde_json::{json, Map, Value};
use tether::{Config, ServerConfig};

use super::escape::escaped;
use super::output::{emit, emit_json, EXIT_OK, EXIT_USAGE};
use super::starting::unknown_server;

pub(super) fn get(config: &Config, store: &std::path::Path, name: &str, json: bool) -> u8 {
    let value = if let Some(server) = config.server(name) {
        let mut value = resolved(server);
        if let tether::TransportConfig::Http(http) = &server.transport {
            value["signIn"] = sign_in(store, &server.name, &http.url);
        }
        value
    } else if let Some(untrusted) =
        config.untrusted.iter().find(|entry| Config::same_name(&entry.name, name))
    {
        json!({
            "name": untrusted.name,
            "scope": "project",
            "file": untrusted.source,
            "state": "untrusted",
            "wouldRun": untrusted.command_line,
        })
    } else if let Some(failed) =
        config.failed.iter().find(|entry| Config::same_name(&entry.name, name))
    {
        json!({
            "name": failed.name,
            "scope": failed.scope,
            "file": failed.source,
            "state": "invalid",
            "error": failed.error,
        })
    } else {
        return unknown_server(config, name);
    };
    if json {
        emit_json(&value);
    } else {
        emit(&render(&value));
    }
    if value["state"] == "invalid" {
        EXIT_USAGE
    } else {
        EXIT_OK
    }
}

/// What the token store keeps for a remote server, as `get` and `list
/// --json` say it: `{"state": "none"}`, or `{"state": "kept", "expiresIn":
/// seconds (below 0 once expired), "refreshable", "scopes"}`.
pub(super) fn sign_in(store: &std::path::Path, server: &str, url: &str) -> Value {
    match tether::sign_in_state(store, server, url) {
        tether::SignIn::Kept { expires_at, refreshable, scopes } => {
            let expires_in =
                expires_at.map(|at| match at.duration_since(std::time::SystemTime::now()) {
                    Ok(left) => left.as_secs() as i64,
                    Err(past) => -(past.duration().as_secs() as i64),
                });
            json!({"state": "kept", "expiresIn": expires_in, "refreshable": refreshable,
                   "scopes": scopes})
        }
        _ => json!({"state": "none"}),
    }
}

/// A sign-in as `get` shows it to a person.
fn sign_in_words(value: &Value) -> String {
    if value["state"] != "kept" {
        return "none (tether login NAME signs in)".into();
    }
    let mut words = vec!["kept".to_owned()];
    match value["expiresIn"].as_i64() {
        Some(left) if left >= 0 => words.push(format!("expires in {}", span(left))),
        Some(past) => words.push(format!("expired {} ago", span(-past))),
        None => {}
    }
    if value["refreshable"] == true {
        words.push("renewed without you".into());
    }
    let scopes: Vec<&str> =
        value["scopes"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    if !scopes.is_empty() {
        words.push(format!("scopes {}", scopes.join(" ")));
    }
    words.join(", ")
}

/// A length of time in words: `45 s`, `12 min`, `3 h`, `2 days`.
pub(super) fn span(seconds: i64) -> String {
    match seconds {
        s if s < 120 => format!("{s} s"),
        s if s < 7200 => format!("{} min", s / 60),
        s if s < 172_800 => format!("{} h", s / 3600),
        s => format!("{} days", s / 86_400),
    }
}

/// A usable entry: where it came from and what it would start.
fn resolved(server: &ServerConfig) -> Value {
    let mut value = Map::new();
    value.insert("name".into(), json!(server.name));
    value.insert("scope".into(), json!(server.scope));
    value.insert("file".into(), json!(server.source));
    value.insert("state".into(), json!(if server.enabled { "enabled" } else { "disabled" }));
    value.insert("transport".into(), json!(server.transport_name()));
    value.insert("timeout".into(), json!(server.timeout.as_secs_f64()));
    value.insert("startTimeout".into(), json!(server.start_timeout.as_secs_f64()));
    value.insert("exposure".into(), json!(server.exposure));
    if let Some(description) = &server.description {
        value.insert("description".into(), json!(description));
    }
    if let Some(idle) = server.keep_alive {
        value.insert("keepAlive".into(), json!(idle.as_secs()));
    }
    if let Some(entry) = server.redacted_entry() {
        value.insert("entry".into(), entry);
    }
    if !server.warnings.is_empty() {
        value.insert("warnings".into(), json!(server.warnings));
    }
    Value::Object(value)
}

/// The same as aligned `key: value` lines, everything from a file escaped.
fn render(value: &Value) -> String {
    let mut rows: Vec<(String, String)> = Vec::new();
    let text = |value: &Value| match value {
        Value::String(text) => escaped(text),
        other => escaped(&other.to_string()),
    };
    let top = value.as_object();
    for (key, field) in value.as_object().into_iter().flatten() {
        match (key.as_str(), field) {
            ("name", _) => {}
            ("file", Value::Null) => {}
            ("entry", Value::Object(entry)) => {
                // What the top shows already (description, exposure, …) once.
                for (entry_key, entry_value) in entry {
                    if top.is_some_and(|top| top.contains_key(entry_key)) {
                        continue;
                    }
                    match entry_value {
                        Value::Object(map) => {
                            for (name, item) in map {
                                rows.push((format!("{entry_key}.{name}"), text(item)));
                            }
                        }
                        Value::Array(items) => rows.push((
                            entry_key.clone(),
                            items.iter().map(text).collect::<Vec<_>>().join(" "),
                        )),
                        other => rows.push((entry_key.clone(), text(other))),
                    }
                }
            }
            ("warnings", Value::Array(warnings)) => {
                for warning in warnings {
                    rows.push(("warning".into(), text(warning)));
                }
            }
            ("signIn", sign_in) => rows.push(("sign-in".into(), escaped(&sign_in_words(sign_in)))),
            ("timeout" | "startTimeout", seconds) => {
                rows.push((key.clone(), format!("{} s", text(seconds))))
            }
            _ => rows.push((key.clone(), text(field))),
        }
    }
    let width = rows.iter().map(|(key, _)| key.len()).max().unwrap_or(0);
    let mut out = format!("{}\n", text(&value["name"]));
    for (key, shown) in rows {
        out.push_str(&format!("  {key:width$}  {shown}\n"));
    }
    out
}
