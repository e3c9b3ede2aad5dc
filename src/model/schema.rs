//! A small JSON Schema check, for a tool result's `structuredContent`
//! against the tool's `outputSchema`.
//!
//! Only the keywords that output schemas use in practice are implemented,
//! and the rest (`$ref` included) are ignored, because a false alarm is
//! worse than a missed one when all a mismatch can do is warn.

use serde_json::{Map, Value};

use super::clip;

/// Checks a value against a JSON Schema, in the subset output schemas use.
///
/// Understood: `type` (a name or a list; `integer` is a number without a
/// fractional part), `properties`, `required`, `additionalProperties` (`false`
/// or a schema), `items` (a schema or, as in drafts before 2020-12, a list),
/// `prefixItems`, `enum`, `const`, `minimum`, `maximum`, `exclusiveMinimum`,
/// `exclusiveMaximum` (as numbers), `minLength` and `maxLength` (in
/// characters), `minItems`, `maxItems`, `anyOf`, `oneOf`, `allOf`, `not`, and
/// the boolean schemas `true` and `false`. Every other keyword is ignored, so a
/// schema with a `$ref` passes where the reference would be checked.
///
/// The error is the first mismatch found, prefixed with its JSON path, as in
/// `$.items[2].name: expected a string`.
pub fn check_schema(value: &Value, schema: &Value) -> Result<(), String> {
    check(value, schema, "$")
}

/// [`check_schema`] at `path`.
fn check(value: &Value, schema: &Value, path: &str) -> Result<(), String> {
    let schema = match schema {
        Value::Bool(true) => return Ok(()),
        Value::Bool(false) => return Err(format!("{path}: no value is allowed here")),
        Value::Object(schema) => schema,
        // Anything else is not a schema; a malformed schema is the server's
        // fault, not its result's, so it allows everything.
        _ => return Ok(()),
    };
    let fail = |why: String| Err(format!("{path}: {why}"));
    if let Err(why) = check_value(value, schema) {
        return fail(why);
    }
    if let Some(items) = value.as_array() {
        check_items(items, schema, path)?;
    }
    if let Some(object) = value.as_object() {
        check_properties(object, schema, path)?;
    }
    check_combinators(value, schema, path)
}

/// The keywords on the value itself: `type`, `enum`, `const`, and the
/// bounds of a number or a string's length. The error says why, without
/// the path.
fn check_value(value: &Value, schema: &Map<String, Value>) -> Result<(), String> {
    let count = |name: &str| schema.get(name).and_then(Value::as_u64);
    match schema.get("type") {
        Some(Value::String(name)) if !has_type(value, name) => {
            return Err(format!("expected {}", type_phrase(name)));
        }
        Some(Value::Array(names)) => {
            let names: Vec<&str> = names.iter().filter_map(Value::as_str).collect();
            if !names.is_empty() && !names.iter().any(|name| has_type(value, name)) {
                let phrases: Vec<String> = names.iter().map(|name| type_phrase(name)).collect();
                return Err(format!("expected {}", phrases.join(" or ")));
            }
        }
        _ => {}
    }

    if let Some(Value::Array(allowed)) = schema.get("enum") {
        if !allowed.iter().any(|candidate| json_equal(candidate, value)) {
            return Err(format!(
                "expected one of {}",
                clip(&Value::from(allowed.clone()).to_string())
            ));
        }
    }
    if let Some(constant) = schema.get("const") {
        if !json_equal(constant, value) {
            return Err(format!("expected {}", clip(&constant.to_string())));
        }
    }

    if let Some(number) = value.as_f64() {
        let bound = |name: &str| schema.get(name).and_then(Value::as_f64);
        if let Some(minimum) = bound("minimum").filter(|&minimum| number < minimum) {
            return Err(format!("expected at least {minimum}"));
        }
        if let Some(maximum) = bound("maximum").filter(|&maximum| number > maximum) {
            return Err(format!("expected at most {maximum}"));
        }
        if let Some(minimum) = bound("exclusiveMinimum").filter(|&minimum| number <= minimum) {
            return Err(format!("expected more than {minimum}"));
        }
        if let Some(maximum) = bound("exclusiveMaximum").filter(|&maximum| number >= maximum) {
            return Err(format!("expected less than {maximum}"));
        }
    }

    if let Some(text) = value.as_str() {
        // JSON Schema counts characters (code points), not bytes.
        let length = text.chars().count() as u64;
        if let Some(minimum) = count("minLength").filter(|&minimum| length < minimum) {
            return Err(format!("expected at least {minimum} characters, found {length}"));
        }
        if let Some(maximum) = count("maxLength").filter(|&maximum| length > maximum) {
            return Err(format!("expected at most {maximum} characters, found {length}"));
        }
    }

    Ok(())
}

/// An array's keywords: its length, and each item by position or by the
/// schema for the rest.
fn check_items(items: &[Value], schema: &Map<String, Value>, path: &str) -> Result<(), String> {
    let fail = |why: String| Err(format!("{path}: {why}"));
    let count = |name: &str| schema.get(name).and_then(Value::as_u64);
    let length = items.len() as u64;
    if let Some(minimum) = count("minItems").filter(|&minimum| length < minimum) {
        return fail(format!("expected at least {minimum} items, found {length}"));
    }
    if let Some(maximum) = count("maxItems").filter(|&maximum| length > maximum) {
        return fail(format!("expected at most {maximum} items, found {length}"));
    }
    // `prefixItems` (2020-12) or a list under `items` (earlier drafts)
    // checks items by position; a schema under `items` checks the rest.
    let positional = match (schema.get("prefixItems"), schema.get("items")) {
        (Some(Value::Array(prefix)), _) | (None, Some(Value::Array(prefix))) => &prefix[..],
        _ => &[],
    };
    for (index, (item, item_schema)) in items.iter().zip(positional).enumerate() {
        check(item, item_schema, &format!("{path}[{index}]"))?;
    }
    if let Some(rest @ (Value::Object(_) | Value::Bool(_))) = schema.get("items") {
        for (index, item) in items.iter().enumerate().skip(positional.len()) {
            check(item, rest, &format!("{path}[{index}]"))?;
        }
    }
    Ok(())
}

/// An object's keywords: `required`, `properties` and
/// `additionalProperties`.
fn check_properties(
    object: &Map<String, Value>,
    schema: &Map<String, Value>,
    path: &str,
) -> Result<(), String> {
    let fail = |why: String| Err(format!("{path}: {why}"));
    if let Some(Value::Array(required)) = schema.get("required") {
        for name in required.iter().filter_map(Value::as_str) {
            if !object.contains_key(name) {
                return fail(format!("missing required property {}", Value::from(name)));
            }
        }
    }
    let properties = schema.get("properties").and_then(Value::as_object);
    if let Some(properties) = properties {
        for (name, property_schema) in properties {
            if let Some(property) = object.get(name) {
                check(property, property_schema, &property_path(path, name))?;
            }
        }
    }
    // With `patternProperties`, which would need regular expressions, an
    // extra property may well be allowed, so it is not judged at all.
    let additional = schema.get("additionalProperties");
    if let (Some(additional), None) = (additional, schema.get("patternProperties")) {
        for (name, property) in object {
            if properties.is_some_and(|properties| properties.contains_key(name)) {
                continue;
            }
            let property_path = property_path(path, name);
            if additional == &Value::Bool(false) {
                return Err(format!("{property_path}: unexpected property"));
            }
            check(property, additional, &property_path)?;
        }
    }
    Ok(())
}

/// `allOf`, `anyOf`, `oneOf` and `not`.
fn check_combinators(value: &Value, schema: &Map<String, Value>, path: &str) -> Result<(), String> {
    let fail = |why: String| Err(format!("{path}: {why}"));
    if let Some(Value::Array(schemas)) = schema.get("allOf") {
        for each in schemas {
            check(value, each, path)?;
        }
    }
    if let Some(Value::Array(schemas)) = schema.get("anyOf") {
        if !schemas.iter().any(|each| check(value, each, path).is_ok()) {
            return fail("matches none of the schemas in anyOf".to_owned());
        }
    }
    if let Some(Value::Array(schemas)) = schema.get("oneOf") {
        let matching: Vec<usize> = (0..schemas.len())
            .filter(|&index| check(value, &schemas[index], path).is_ok())
            .collect();
        match matching[..] {
            [_] => {}
            [] => return fail("matches none of the schemas in oneOf".to_owned()),
            [first, second, ..] => {
                return fail(format!(
                    "matches more than one schema in oneOf (#{first} and #{second})"
                ));
            }
        }
    }
    if let Some(not) = schema.get("not") {
        if check(value, not, path).is_ok() {
            return fail("matches the schema in not".to_owned());
        }
    }
    Ok(())
}

/// True when `value` is of the JSON Schema type `name`. An unknown type name
/// allows everything, as a malformed schema should not fail a result.
fn has_type(value: &Value, name: &str) -> bool {
    match name {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => {
            value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|n| n.fract() == 0.0)
        }
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        _ => true,
    }
}

/// A type name as the noun phrase of an error message.
fn type_phrase(name: &str) -> String {
    match name {
        "object" => "an object".to_owned(),
        "array" => "an array".to_owned(),
        "string" => "a string".to_owned(),
        "number" => "a number".to_owned(),
        "integer" => "an integer".to_owned(),
        "boolean" => "a boolean".to_owned(),
        "null" => "null".to_owned(),
        other => format!("type {}", clip(other)),
    }
}

/// JSON equality as JSON Schema defines it: numbers compare by value, so `1`
/// equals `1.0`, which `Value`'s own equality does not say.
fn json_equal(left: &Value, right: &Value) -> bool {
    match (left, right) {
        (Value::Number(left), Value::Number(right)) => match (left.as_i64(), right.as_i64()) {
            (Some(left), Some(right)) => left == right,
            _ => match (left.as_u64(), right.as_u64()) {
                (Some(left), Some(right)) => left == right,
                _ => left.as_f64() == right.as_f64(),
            },
        },
        (Value::Array(left), Value::Array(right)) => {
            left.len() == right.len() && left.iter().zip(right).all(|(l, r)| json_equal(l, r))
        }
        (Value::Object(left), Value::Object(right)) => {
            left.len() == right.len()
                && left.iter().all(|(key, l)| right.get(key).is_some_and(|r| json_equal(l, r)))
        }
        _ => left == right,
    }
}

/// The path of property `name` under `path`: `.name` for plain names,
/// `["odd name"]` for the rest, so every path reads back unambiguously.
fn property_path(path: &str, name: &str) -> String {
    let plain = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        format!("{path}.{name}")
    } else {
        format!("{path}[{}]", Value::from(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schema_types() {
        let check = |value: Value, schema: Value| check_schema(&value, &schema);
        assert_eq!(check(json!("x"), json!({"type": "string"})), Ok(()));
        assert_eq!(check(json!(1), json!({"type": "string"})), Err("$: expected a string".into()));
        assert_eq!(check(json!(2.0), json!({"type": "integer"})), Ok(()));
        assert_eq!(
            check(json!(2.5), json!({"type": "integer"})),
            Err("$: expected an integer".into())
        );
        assert_eq!(check(json!(2.5), json!({"type": "number"})), Ok(()));
        assert_eq!(check(json!(null), json!({"type": ["string", "null"]})), Ok(()));
        assert_eq!(
            check(json!(true), json!({"type": ["string", "null"]})),
            Err("$: expected a string or null".into())
        );
        assert_eq!(check(json!([]), json!({"type": "array"})), Ok(()));
        assert_eq!(check(json!({}), json!({"type": "array"})), Err("$: expected an array".into()));
        assert_eq!(check(json!(false), json!({"type": "boolean"})), Ok(()));
        assert_eq!(check(json!({}), json!({"type": "object"})), Ok(()));
        assert_eq!(check(json!(1), json!(true)), Ok(()));
        assert_eq!(check(json!(1), json!(false)), Err("$: no value is allowed here".into()));
    }

    #[test]
    fn schema_errors_name_the_path() {
        let schema = json!({
            "type": "object",
            "properties": {"items": {"type": "array", "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"]
            }}}
        });
        let value = json!({"items": [{"name": "a"}, {"name": "b"}, {"name": 3}, {"name": 4}]});
        assert_eq!(check_schema(&value, &schema), Err("$.items[2].name: expected a string".into()));
        let value = json!({"items": [{"name": "a"}, {}]});
        assert_eq!(
            check_schema(&value, &schema),
            Err(r#"$.items[1]: missing required property "name""#.into())
        );
        let schema = json!({"properties": {"odd key": {"type": "number"}}});
        assert_eq!(
            check_schema(&json!({"odd key": "x"}), &schema),
            Err(r#"$["odd key"]: expected a number"#.into())
        );
    }

    #[test]
    fn schema_additional_properties() {
        let schema = json!({"properties": {"a": {}}, "additionalProperties": false});
        assert_eq!(check_schema(&json!({"a": 1}), &schema), Ok(()));
        assert_eq!(
            check_schema(&json!({"a": 1, "b": 2}), &schema),
            Err("$.b: unexpected property".into())
        );
        let schema = json!({"properties": {"a": {}}, "additionalProperties": {"type": "string"}});
        assert_eq!(check_schema(&json!({"a": 1, "b": "x"}), &schema), Ok(()));
        assert_eq!(check_schema(&json!({"b": 2}), &schema), Err("$.b: expected a string".into()));
        // Pattern properties are not understood, so extras are not judged.
        let schema = json!({"patternProperties": {"^x": {}}, "additionalProperties": false});
        assert_eq!(check_schema(&json!({"x1": 1}), &schema), Ok(()));
    }

    #[test]
    fn schema_enum_const_and_bounds() {
        let check = |value: Value, schema: Value| check_schema(&value, &schema);
        assert_eq!(check(json!("b"), json!({"enum": ["a", "b"]})), Ok(()));
        assert_eq!(
            check(json!("c"), json!({"enum": ["a", "b"]})),
            Err(r#"$: expected one of ["a","b"]"#.into())
        );
        assert_eq!(check(json!(1.0), json!({"enum": [1]})), Ok(()));
        assert_eq!(check(json!({"v": 1}), json!({"const": {"v": 1}})), Ok(()));
        assert_eq!(check(json!(2), json!({"const": 1})), Err("$: expected 1".into()));
        assert_eq!(check(json!(5), json!({"minimum": 5, "maximum": 5})), Ok(()));
        assert_eq!(check(json!(4), json!({"minimum": 5})), Err("$: expected at least 5".into()));
        assert_eq!(check(json!(6.5), json!({"maximum": 6})), Err("$: expected at most 6".into()));
        assert_eq!(
            check(json!(5), json!({"exclusiveMinimum": 5})),
            Err("$: expected more than 5".into())
        );
        // Bounds of one type do not apply to another.
        assert_eq!(check(json!("x"), json!({"minimum": 5, "minItems": 2})), Ok(()));
        assert_eq!(check(json!("éé"), json!({"maxLength": 2})), Ok(()));
        assert_eq!(
            check(json!("abc"), json!({"maxLength": 2})),
            Err("$: expected at most 2 characters, found 3".into())
        );
        assert_eq!(
            check(json!("a"), json!({"minLength": 2})),
            Err("$: expected at least 2 characters, found 1".into())
        );
        assert_eq!(
            check(json!([1]), json!({"minItems": 2})),
            Err("$: expected at least 2 items, found 1".into())
        );
        assert_eq!(
            check(json!([1, 2, 3]), json!({"maxItems": 2})),
            Err("$: expected at most 2 items, found 3".into())
        );
    }

    #[test]
    fn schema_positional_items() {
        let schema = json!({"prefixItems": [{"type": "string"}], "items": {"type": "number"}});
        assert_eq!(check_schema(&json!(["a", 1, 2]), &schema), Ok(()));
        assert_eq!(check_schema(&json!([1]), &schema), Err("$[0]: expected a string".into()));
        assert_eq!(
            check_schema(&json!(["a", 1, "b"]), &schema),
            Err("$[2]: expected a number".into())
        );
        let schema = json!({"items": [{"type": "string"}, {"type": "null"}]});
        assert_eq!(check_schema(&json!(["a", null, 3]), &schema), Ok(()));
        assert_eq!(check_schema(&json!(["a", 3]), &schema), Err("$[1]: expected null".into()));
    }

    #[test]
    fn schema_combinators() {
        let check = |value: Value, schema: Value| check_schema(&value, &schema);
        let any = json!({"anyOf": [{"type": "string"}, {"type": "integer"}]});
        assert_eq!(check(json!(1), any.clone()), Ok(()));
        assert_eq!(check(json!(1.5), any), Err("$: matches none of the schemas in anyOf".into()));
        let one = json!({"oneOf": [{"type": "number"}, {"type": "integer"}]});
        assert_eq!(check(json!(1.5), one.clone()), Ok(()));
        assert_eq!(
            check(json!(1), one.clone()),
            Err("$: matches more than one schema in oneOf (#0 and #1)".into())
        );
        assert_eq!(check(json!("x"), one), Err("$: matches none of the schemas in oneOf".into()));
        let all = json!({"allOf": [{"type": "object"}, {"required": ["a"]}]});
        assert_eq!(check(json!({"a": 1}), all.clone()), Ok(()));
        assert_eq!(check(json!({}), all), Err(r#"$: missing required property "a""#.into()));
        assert_eq!(check(json!(1), json!({"not": {"type": "string"}})), Ok(()));
        assert_eq!(
            check(json!("x"), json!({"not": {"type": "string"}})),
            Err("$: matches the schema in not".into())
        );
    }

    #[test]
    fn schema_ignores_unknown_keywords() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "T",
            "description": "d",
            "properties": {
                "when": {"type": "string", "format": "date-time"},
                "next": {"$ref": "#/$defs/node"}
            },
            "$defs": {"node": {"type": "object"}}
        });
        assert_eq!(check_schema(&json!({"when": "yesterday", "next": 42}), &schema), Ok(()));
        // Malformed schemas allow everything rather than fail a result.
        assert_eq!(check_schema(&json!(1), &json!("not a schema")), Ok(()));
        assert_eq!(check_schema(&json!(1), &json!({"type": "decimal"})), Ok(()));
        assert_eq!(check_schema(&json!([1]), &json!({"items": 3, "required": "a"})), Ok(()));
    }
}
