//! A call's arguments from the command line: one JSON object (or `-`,
//! JSON on stdin), or words of `key=value` as HTTPie and the shell clients
//! take them, each value made the type the tool's input schema says.
//!
//! - `k=v`: `v`, as the schema's type for `k` (a number, a boolean, JSON
//!   for an array or an object, else the text itself);
//! - `k:=JSON`: the JSON value as written;
//! - `k=@FILE`: the file's text, made the schema's type like `k=v`;
//! - `k=@-`: stdin's text so (once);
//! - `k=\@text`: the text `@text`.
//!
//! A word that names no property of a schema that allows no others is
//! refused with the properties it takes (of one that allows others, it is
//! sent and said); a required property no word gives is refused so too. Nothing here talks to a server:
//! the schema comes from the tool list the call's start already has.

use std::io::Read;

use serde_json::{json, Map, Value};

/// The most a `k=@FILE` reads.
const MAX_FILE: u64 = 8 * 1024 * 1024;

/// True for a word of the `key=value` forms.
pub(super) fn is_pair(word: &str) -> bool {
    match word.find('=') {
        Some(at) => {
            let key = word[..at].strip_suffix(':').unwrap_or(&word[..at]);
            !key.is_empty() && !key.starts_with('{') && !key.contains(char::is_whitespace)
        }
        None => false,
    }
}

/// The arguments as JSON: `text` (a JSON object, or `-` for stdin), or
/// none (`{}`).
pub(super) fn from_json(text: Option<&str>) -> Result<Value, String> {
    let text = match text {
        None => return Ok(json!({})),
        Some("-") => {
            let text = stdin_text()?;
            // Nothing on stdin means no arguments.
            if text.trim().is_empty() {
                return Ok(json!({}));
            }
            text
        }
        Some(text) => text.to_owned(),
    };
    let value: Value = serde_json::from_slice(text.as_bytes())
        .map_err(|err| format!("the arguments are not valid JSON: {err}"))?;
    if !value.is_object() {
        return Err("the arguments must be a JSON object, like {\"text\": \"hi\"}".to_owned());
    }
    Ok(value)
}

/// The arguments `pairs` make, typed by `schema` (the tool's
/// `inputSchema`, `{}` when unknown).
pub(super) fn from_pairs(pairs: &[String], schema: &Value) -> Result<Value, String> {
    let mut arguments = Map::new();
    let mut stdin_used = false;
    for pair in pairs {
        let (key, raw, value) = split(pair)?;
        let property = property(schema, key)?;
        let value = if raw {
            serde_json::from_slice(value.as_bytes())
                .map_err(|err| format!("{key}:= is not valid JSON: {err}"))?
        } else {
            // `\@` at the start is a literal `@`.
            let literal = value.strip_prefix("\\@").map(|rest| format!("@{rest}"));
            let text = match literal.as_deref().map_or_else(|| value.strip_prefix('@'), |_| None) {
                Some("-") if stdin_used => {
                    return Err("stdin can be read once: only one key=@- per call".into())
                }
                Some("-") => {
                    stdin_used = true;
                    stdin_text()?
                }
                Some(path) => file_text(key, path)?,
                None => literal.unwrap_or_else(|| value.to_owned()),
            };
            typed(key, text, property)?
        };
        arguments.insert(key.to_owned(), value);
    }
    check_required(&arguments, schema)?;
    Ok(Value::Object(arguments))
}

/// The arguments a schema takes, on one line: `text: string, n?: integer,
/// mode?: "a" | "b"` (`?` for the optional ones), cut past 80 characters.
pub(super) fn signature(schema: &Value) -> String {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut words = Vec::new();
    for (name, property) in
        schema.get("properties").and_then(Value::as_object).into_iter().flatten()
    {
        let optional = if required.contains(&name.as_str()) { "" } else { "?" };
        let kind = match property.get("enum").and_then(Value::as_array) {
            Some(choices) => choices.iter().map(Value::to_string).collect::<Vec<_>>().join(" | "),
            None => match types(property).as_slice() {
                [] => "any".to_owned(),
                kinds => kinds.join(" | "),
            },
        };
        words.push(format!("{name}{optional}: {kind}"));
    }
    let line = words.join(", ");
    match line.char_indices().nth(80) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line,
    }
}

/// `k=v` as (k, false, v), `k:=v` as (k, true, v).
fn split(pair: &str) -> Result<(&str, bool, &str), String> {
    let Some((key, value)) = pair.split_once('=') else {
        return Err(format!("{pair:?} is not key=value"));
    };
    match key.strip_suffix(':') {
        Some(key) if !key.is_empty() => Ok((key, true, value)),
        _ if !key.is_empty() => Ok((key, false, value)),
        _ => Err(format!("{pair:?} has no key before its =")),
    }
}

/// The schema of property `key`; `None` when the schema says nothing of
/// it. Refused when the schema lists its properties and allows no others.
fn property<'a>(schema: &'a Value, key: &str) -> Result<Option<&'a Value>, String> {
    let properties = schema.get("properties").and_then(Value::as_object);
    if let Some(found) = properties.and_then(|properties| properties.get(key)) {
        return Ok(Some(found));
    }
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    match properties {
        Some(properties) if closed => {
            let names: Vec<&str> = properties.keys().map(String::as_str).collect();
            Err(format!("the tool takes no argument {key:?}; it takes {}", names.join(", ")))
        }
        // Allowed, but likely a typo: sent, and said.
        Some(properties) if !properties.is_empty() => {
            let names: Vec<&str> = properties.keys().map(String::as_str).collect();
            eprintln!(
                "warning: {key:?} is not among the tool's arguments ({}); sent as given",
                names.join(", ")
            );
            Ok(None)
        }
        _ => Ok(None),
    }
}

/// The schema's required arguments that `arguments` lacks, refused with
/// what the tool takes: the server would refuse them, less clearly.
fn check_required(arguments: &Map<String, Value>, schema: &Value) -> Result<(), String> {
    let missing: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|name| !arguments.contains_key(*name))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let quoted: Vec<String> = missing.iter().map(|name| format!("{name:?}")).collect();
    Err(format!("the tool needs {} as well; it takes: {}", quoted.join(", "), signature(schema)))
}

/// The types a property's schema allows, in its order (`type` as a word or
/// a list, or the branches of `anyOf`/`oneOf`).
fn types(property: &Value) -> Vec<&str> {
    match property.get("type") {
        Some(Value::String(kind)) => vec![kind.as_str()],
        Some(Value::Array(kinds)) => kinds.iter().filter_map(Value::as_str).collect(),
        _ => {
            let mut kinds: Vec<&str> = ["anyOf", "oneOf", "allOf"]
                .iter()
                .filter_map(|branches| property.get(*branches).and_then(Value::as_array))
                .flatten()
                .flat_map(types)
                .collect();
            // An `enum` or `const` without a type: the kinds of its values.
            let values = property
                .get("enum")
                .and_then(Value::as_array)
                .map(|values| values.iter().collect::<Vec<_>>())
                .or_else(|| property.get("const").map(|value| vec![value]))
                .unwrap_or_default();
            for value in values {
                let kind = match value {
                    Value::Number(number) if number.is_i64() || number.is_u64() => "integer",
                    Value::Number(_) => "number",
                    Value::Bool(_) => "boolean",
                    Value::Null => "null",
                    Value::Array(_) => "array",
                    Value::Object(_) => "object",
                    Value::String(_) => "string",
                };
                if !kinds.contains(&kind) {
                    kinds.push(kind);
                }
            }
            kinds
        }
    }
}

/// `text` as the first type the property allows that it reads as; a
/// property the schema says nothing of stays text.
fn typed(key: &str, text: String, property: Option<&Value>) -> Result<Value, String> {
    let Some(property) = property else { return Ok(Value::String(text)) };
    let kinds = types(property);
    if kinds.is_empty() || kinds.contains(&"string") {
        // Text is text, unless an enum of other kinds is all it may be.
        return Ok(Value::String(text));
    }
    let word = text.trim();
    for kind in &kinds {
        let read = match *kind {
            "integer" => word.parse::<i64>().ok().map(Value::from),
            "number" => match word.parse::<i64>() {
                Ok(whole) => Some(Value::from(whole)),
                Err(_) => word
                    .parse::<f64>()
                    .ok()
                    .and_then(serde_json::Number::from_f64)
                    .map(Value::Number),
            },
            "boolean" => match word.to_ascii_lowercase().as_str() {
                "true" | "yes" | "on" | "1" => Some(Value::Bool(true)),
                "false" | "no" | "off" | "0" => Some(Value::Bool(false)),
                _ => None,
            },
            "null" => (word == "null" || word.is_empty()).then_some(Value::Null),
            "array" | "object" => serde_json::from_slice::<Value>(word.as_bytes())
                .ok()
                .filter(|value| value.is_array() == (*kind == "array") && !value.is_null()),
            _ => None,
        };
        if let Some(value) = read {
            return Ok(value);
        }
    }
    let wanted = kinds.join(" or ");
    let hint = if kinds.iter().any(|kind| matches!(*kind, "array" | "object")) {
        format!(" (write JSON: {key}:='[1, 2]')")
    } else {
        String::new()
    };
    Err(format!("{key}: the tool takes {wanted}, not {word:?}{hint}"))
}

fn stdin_text() -> Result<String, String> {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|err| format!("cannot read stdin: {err}"))?;
    Ok(text)
}

fn file_text(key: &str, path: &str) -> Result<String, String> {
    let file = std::fs::File::open(path).map_err(|err| format!("{key}=@{path}: {err}"))?;
    let mut text = String::new();
    file.take(MAX_FILE + 1)
        .read_to_string(&mut text)
        .map_err(|err| format!("{key}=@{path}: {err}"))?;
    if text.len() as u64 > MAX_FILE {
        return Err(format!("{key}=@{path}: the file is over {} MiB", MAX_FILE >> 20));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "additionalProperties": false, "properties": {
            "n": {"type": "integer"}, "x": {"type": "number"}, "on": {"type": "boolean"},
            "tags": {"type": "array"}, "name": {"type": "string"},
            "maybe": {"type": ["integer", "null"]}, "either": {"anyOf": [{"type": "boolean"}, {"type": "integer"}]},
        }})
    }

    fn pairs(words: &[&str]) -> Result<Value, String> {
        let words: Vec<String> = words.iter().map(|word| (*word).to_owned()).collect();
        from_pairs(&words, &schema())
    }

    #[test]
    fn values_take_the_schemas_types() {
        let made = pairs(&["n=3", "x=2.5", "on=yes", "tags=[1,2]", "name=42", "maybe=null"]);
        assert_eq!(
            made.unwrap(),
            json!({"n": 3, "x": 2.5, "on": true, "tags": [1, 2], "name": "42", "maybe": null})
        );
        assert_eq!(pairs(&["either=7"]).unwrap(), json!({"either": 7}));
        let levels = json!({"properties": {"level": {"enum": [1, 2]}}});
        assert_eq!(from_pairs(&["level=1".to_owned()], &levels).unwrap(), json!({"level": 1}));
        assert_eq!(pairs(&["n:=\"raw\""]).unwrap(), json!({"n": "raw"}));
    }

    #[test]
    fn wrong_values_and_unknown_keys_are_said() {
        let err = pairs(&["n=three"]).unwrap_err();
        assert!(err.contains("n: the tool takes integer, not \"three\""), "{err}");
        let err = pairs(&["tags=a,b"]).unwrap_err();
        assert!(err.contains("tags:='[1, 2]'"), "{err}");
        let err = pairs(&["nope=1"]).unwrap_err();
        assert!(err.contains("takes no argument \"nope\""), "{err}");
        let open = from_pairs(&["free=1".to_owned()], &json!({})).unwrap();
        assert_eq!(open, json!({"free": "1"}));
        // A required argument no word gives is said with what the tool takes.
        let sum = json!({"properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                         "required": ["a", "b"]});
        let err = from_pairs(&["a=1".to_owned()], &sum).unwrap_err();
        assert!(err.contains("needs \"b\" as well; it takes: a: number, b: number"), "{err}");
        // `\@` is a literal `@`.
        let said = from_pairs(&["name=\\@me".to_owned()], &schema()).unwrap();
        assert_eq!(said, json!({"name": "@me"}));
    }

    #[test]
    fn signatures_say_names_types_and_what_is_optional() {
        let schema = json!({"properties": {"text": {"type": "string"}, "n": {"type": "integer"},
                            "mode": {"enum": ["a", "b"]}}, "required": ["text"]});
        assert_eq!(signature(&schema), "text: string, n?: integer, mode?: \"a\" | \"b\"");
        assert_eq!(signature(&json!({"type": "object"})), "");
    }

    #[test]
    fn pairs_are_told_from_json_and_words() {
        assert!(is_pair("k=v") && is_pair("k:=1") && is_pair("k=@file"));
        assert!(!is_pair("{\"a\": \"b=c\"}") && !is_pair("-") && !is_pair("=v"));
        assert!(!is_pair("two words=x"));
    }

    #[test]
    fn a_file_is_read_and_typed() {
        let path = std::env::temp_dir().join(format!("tether-arg-{}", std::process::id()));
        std::fs::write(&path, "12\n").unwrap();
        let made =
            pairs(&[&format!("n=@{}", path.display()), &format!("name=@{}", path.display())]);
        assert_eq!(made.unwrap(), json!({"n": 12, "name": "12\n"}));
        let _ = std::fs::remove_file(&path);
    }
}
