//! An entry as it may be shown (`tether get`): as written, with the values
//! that look like secrets replaced.
//!
//! What is written indirectly (`${VAR}`, `!command`) is shown as written:
//! it names where the secret comes from, not the secret. A literal value is
//! hidden when its key says it is a credential (`Authorization`, `*_TOKEN`,
//! `--api-key`), and a URL loses its user info and query.

use serde_json::{Map, Value};

use super::entry::{is_credential_header, looks_secret};
use super::expand::is_indirect;

/// What a hidden value is shown as.
const HIDDEN: &str = "<redacted>";

/// `entry` (as written in a file) with its secrets hidden.
pub(crate) fn redacted(entry: &Value) -> Value {
    let Value::Object(fields) = entry else { return entry.clone() };
    let mut out = Map::new();
    for (key, value) in fields {
        let shown = match (key.as_str(), value) {
            ("env", Value::Object(map)) => hide_values(map, looks_secret),
            ("headers", Value::Object(map)) => {
                hide_values(map, |name| is_credential_header(name) || looks_secret(name))
            }
            ("oauth", Value::Object(map)) => hide_oauth(map),
            ("url", Value::String(url)) if !is_indirect(url) => {
                Value::String(crate::url::redact_url(url))
            }
            ("args", Value::Array(args)) => Value::Array(hide_arguments(args)),
            _ => value.clone(),
        };
        out.insert(key.clone(), shown);
    }
    Value::Object(out)
}

/// An `oauth` object: its client secret, its private key and its
/// enterprise identity's ID token are secrets.
fn hide_oauth(map: &Map<String, Value>) -> Value {
    let mut shown = hide_values(map, |name| matches!(name, "clientSecret" | "privateKey"));
    if let Some(Value::Object(enterprise)) = map.get("enterprise") {
        shown["enterprise"] = hide_values(enterprise, |name| name == "idToken");
    }
    shown
}

fn hide_values(map: &Map<String, Value>, secret: impl Fn(&str) -> bool) -> Value {
    map.iter()
        .map(|(name, value)| {
            let hide = secret(name)
                && value.as_str().is_some_and(|text| !text.is_empty() && !is_indirect(text));
            (name.clone(), if hide { Value::String(HIDDEN.into()) } else { value.clone() })
        })
        .collect::<Map<_, _>>()
        .into()
}

/// `--api-key=VALUE` and the word after `--token` are hidden when literal.
fn hide_arguments(args: &[Value]) -> Vec<Value> {
    let mut after_secret_flag = false;
    args.iter()
        .map(|arg| {
            let Some(text) = arg.as_str() else { return arg.clone() };
            let hide_this = after_secret_flag && !is_indirect(text);
            after_secret_flag = false;
            if hide_this {
                return Value::String(HIDDEN.into());
            }
            if let Some(flag) = text.strip_prefix('-').map(|flag| flag.trim_start_matches('-')) {
                match flag.split_once('=') {
                    Some((name, value)) if looks_secret(name) && !is_indirect(value) => {
                        return Value::String(format!(
                            "{}={HIDDEN}",
                            &text[..text.len() - value.len() - 1]
                        ));
                    }
                    Some(_) => {}
                    None => after_secret_flag = looks_secret(&flag.replace('-', "_")),
                }
            }
            arg.clone()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn literal_secrets_are_hidden_and_indirect_ones_shown() {
        let entry = json!({
            "command": "server",
            "args": ["--api-key", "sk-live-1", "--token=abc", "--token=${T}", "--port", "80"],
            "env": {"API_TOKEN": "sk-2", "FROM": "${HOST_TOKEN}", "MODE": "fast", "DB_PASSWORD": "!pass db"},
        });
        assert_eq!(
            redacted(&entry),
            json!({
                "command": "server",
                "args": ["--api-key", HIDDEN, "--token=<redacted>", "--token=${T}", "--port", "80"],
                "env": {"API_TOKEN": HIDDEN, "FROM": "${HOST_TOKEN}", "MODE": "fast", "DB_PASSWORD": "!pass db"},
            })
        );
        let remote = json!({
            "url": "https://user:pw@example.com/mcp?key=abc",
            "headers": {"Authorization": "Bearer sk", "X-Auth-Token": "t", "Accept-Language": "fr", "Cookie": "${C}"},
            "oauth": {"clientId": "id", "clientSecret": "s", "privateKey": "-----BEGIN",
                      "enterprise": {"clientId": "c", "idToken": "eyJ", "tokenEndpoint": "https://i"}},
        });
        assert_eq!(
            redacted(&remote),
            json!({
                "url": "https://example.com/mcp?…",
                "headers": {"Authorization": HIDDEN, "X-Auth-Token": HIDDEN, "Accept-Language": "fr", "Cookie": "${C}"},
                "oauth": {"clientId": "id", "clientSecret": HIDDEN, "privateKey": HIDDEN,
                          "enterprise": {"clientId": "c", "idToken": HIDDEN,
                                         "tokenEndpoint": "https://i"}},
            })
        );
    }
}
