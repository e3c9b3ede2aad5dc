//! `x-mcp-header`: tool parameters a stateless Streamable HTTP server wants
//! mirrored into `Mcp-Param-{Name}` headers, so that a gateway can route on
//! them without reading the body (2026-07-28, `server/tools.mdx`).
//!
//! A tool's annotations are read once, when its list arrives: a tool whose
//! annotations break the rules (a name that is not an HTTP token, twice the
//! same name, a type that is not string, integer or boolean, an annotation
//! that is not reachable from the root through `properties` alone) is left
//! out of the list with a warning, as the revision requires. At each call
//! the values found at the annotated paths become headers, encoded as the
//! transport encodes `Mcp-Name`.

use serde_json::Value;

/// One annotated parameter: the header's name part, and where its value is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParamHeader {
    pub(super) name: String,
    pub(super) path: Vec<String>,
}

const KEY: &str = "x-mcp-header";
/// JavaScript's safe integers, the range a header value may carry.
const SAFE_INTEGER: i64 = (1 << 53) - 1;

/// The annotated parameters of an input schema, or why the tool is invalid.
pub(crate) fn annotations(schema: &Value) -> Result<Vec<ParamHeader>, String> {
    let mut found = Vec::new();
    collect(schema, &mut Vec::new(), &mut found)?;
    let reachable = found.len();
    if count_anywhere(schema) != reachable {
        return Err(format!(
            "an {KEY} annotation is not reachable from the schema's root through properties alone"
        ));
    }
    for (at, header) in found.iter().enumerate() {
        if found[..at].iter().any(|earlier| earlier.name.eq_ignore_ascii_case(&header.name)) {
            return Err(format!("{KEY} {:?} appears twice", header.name));
        }
    }
    Ok(found)
}

/// Walks the `properties` chain from `schema`, checking each annotation.
fn collect(
    schema: &Value,
    path: &mut Vec<String>,
    found: &mut Vec<ParamHeader>,
) -> Result<(), String> {
    if let Some(name) = schema.get(KEY) {
        let Some(name) = name.as_str().filter(|name| is_token(name)) else {
            return Err(format!("{KEY} {name} is not an HTTP field name"));
        };
        if path.is_empty() {
            return Err(format!("{KEY} {name:?} annotates the schema itself"));
        }
        match schema.get("type").and_then(Value::as_str) {
            Some("string" | "integer" | "boolean") => {}
            other => {
                return Err(format!(
                "{KEY} {name:?} annotates a parameter of type {}, not string, integer or boolean",
                other.unwrap_or("(none)")
            ))
            }
        }
        found.push(ParamHeader { name: name.to_owned(), path: path.clone() });
    }
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (key, property) in properties {
            path.push(key.clone());
            collect(property, path, found)?;
            path.pop();
        }
    }
    Ok(())
}

/// How many `x-mcp-header` annotations a schema holds, wherever they are
/// (a parameter named `x-mcp-header`, a key of `properties`, is none).
fn count_anywhere(value: &Value) -> usize {
    match value {
        Value::Object(map) => map
            .iter()
            .map(|(key, child)| {
                let below = match (key.as_str(), child) {
                    // Its keys are parameter names, its values schemas.
                    ("properties", Value::Object(properties)) => {
                        properties.values().map(count_anywhere).sum()
                    }
                    _ => count_anywhere(child),
                };
                usize::from(key == KEY) + below
            })
            .sum(),
        Value::Array(items) => items.iter().map(count_anywhere).sum(),
        _ => 0,
    }
}

/// RFC 9110's `token`: one or more `tchar`.
fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte))
}

/// The headers a call with `arguments` carries: `(Mcp-Param-Name, value)`
/// for each annotated parameter present (and not null).
///
/// # Errors
/// A present value a header cannot carry (not a string, a boolean or a
/// safe integer): the server would refuse the call without its header.
pub(crate) fn for_call(
    headers: &[ParamHeader],
    arguments: &Value,
) -> Result<Vec<(String, String)>, String> {
    let mut sent = Vec::with_capacity(headers.len());
    for header in headers {
        let Some(value) = header.path.iter().try_fold(arguments, |at, key| at.get(key)) else {
            continue;
        };
        let text = match value {
            Value::Null => continue,
            Value::String(text) => text.clone(),
            Value::Bool(flag) => flag.to_string(),
            Value::Number(number) => match number.as_i64().filter(|n| n.abs() <= SAFE_INTEGER) {
                Some(integer) => integer.to_string(),
                None => return Err(cannot_carry(header, value)),
            },
            other => return Err(cannot_carry(header, other)),
        };
        sent.push((format!("Mcp-Param-{}", header.name), text));
    }
    Ok(sent)
}

fn cannot_carry(header: &ParamHeader, value: &Value) -> String {
    format!(
        "the argument {} must also go in the header Mcp-Param-{} ({KEY}), which cannot carry {value}",
        header.path.join("."),
        header.name
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn annotated_properties_become_headers_at_their_paths() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "limits": {"type": "object", "properties": {
                "max": {"type": "integer", "x-mcp-header": "Max"}}},
            "dry": {"type": "boolean", "x-mcp-header": "Dry-Run"},
            "query": {"type": "string"}}});
        let headers = annotations(&schema).unwrap();
        assert_eq!(headers.len(), 3);
        let args = json!({"region": "us-west1", "limits": {"max": 42}, "dry": false, "query": "q"});
        let mut sent = for_call(&headers, &args).unwrap();
        sent.sort();
        assert_eq!(
            sent,
            [
                ("Mcp-Param-Dry-Run".to_owned(), "false".to_owned()),
                ("Mcp-Param-Max".to_owned(), "42".to_owned()),
                ("Mcp-Param-Region".to_owned(), "us-west1".to_owned()),
            ]
        );
        // Absent or null: no header.
        assert!(for_call(&headers, &json!({"region": null})).unwrap().is_empty());
        // Present but not carriable: the call fails here, not at the server.
        assert!(for_call(&headers, &json!({"limits": {"max": 1.5}})).is_err());
        assert!(for_call(&headers, &json!({"region": ["a"]})).is_err());
        // A parameter that is itself called x-mcp-header is no annotation.
        let named = json!({"properties": {"x-mcp-header": {"type": "string"}}});
        assert_eq!(annotations(&named).unwrap(), []);
    }

    #[test]
    fn broken_annotations_make_the_tool_invalid() {
        let bad = [
            json!({"properties": {"a": {"type": "number", "x-mcp-header": "A"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "A B"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": ""}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "X"},
                                  "b": {"type": "string", "x-mcp-header": "x"}}}),
            json!({"properties": {"a": {"type": "array",
                "items": {"type": "string", "x-mcp-header": "Item"}}}}),
            json!({"properties": {"a": {"anyOf": [{"type": "string", "x-mcp-header": "A"}]}}}),
            json!({"$defs": {"d": {"type": "string", "x-mcp-header": "D"}}}),
        ];
        for schema in bad {
            assert!(annotations(&schema).is_err(), "{schema}");
        }
        assert_eq!(annotations(&json!({"type": "object"})).unwrap(), []);
    }
}
