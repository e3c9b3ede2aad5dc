//! The keywords judged on a value itself (`type`, `enum`, `const`, the
//! bounds of numbers and strings, `pattern`), the bounds of a count, and
//! JSON Schema's equality (for `enum`, `const` and `uniqueItems`).

use serde_json::Value;

use super::node::Node;
use super::Pattern;
use crate::protocol::clip;

/// Arrays longer than this are checked for `uniqueItems` by hashing, not
/// by comparing every pair.
const PAIRWISE_UNIQUE: usize = 64;

/// The keywords on the value itself: `type`, `enum`, `const`, the bounds
/// of a number, and a string's length and `pattern`. The error says why,
/// without the path.
pub(super) fn check_value(value: &Value, schema: &Node<'_>) -> Result<(), String> {
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
        check_number(value, number, schema)?;
    }
    if let Some(text) = value.as_str() {
        check_string(text, schema)?;
    }
    Ok(())
}

fn check_number(value: &Value, number: f64, schema: &Node<'_>) -> Result<(), String> {
    let bound = |name: &str| schema.get(name).and_then(Value::as_f64);
    // Draft 4 spelt an exclusive bound as a flag beside the bound.
    let flag = |name: &str| schema.get(name) == Some(&Value::Bool(true));
    if let Some(minimum) = bound("minimum") {
        if flag("exclusiveMinimum") && number <= minimum {
            return Err(format!("expected more than {minimum}"));
        }
        if number < minimum {
            return Err(format!("expected at least {minimum}"));
        }
    }
    if let Some(maximum) = bound("maximum") {
        if flag("exclusiveMaximum") && number >= maximum {
            return Err(format!("expected less than {maximum}"));
        }
        if number > maximum {
            return Err(format!("expected at most {maximum}"));
        }
    }
    if let Some(minimum) = bound("exclusiveMinimum").filter(|&minimum| number <= minimum) {
        return Err(format!("expected more than {minimum}"));
    }
    if let Some(maximum) = bound("exclusiveMaximum").filter(|&maximum| number >= maximum) {
        return Err(format!("expected less than {maximum}"));
    }
    if let Some(divisor) = schema.get("multipleOf").filter(|divisor| divisor.as_f64() > Some(0.0)) {
        let whole = match (value.as_i64(), divisor.as_i64()) {
            (Some(value), Some(divisor)) => value % divisor == 0,
            _ => {
                let quotient = number / divisor.as_f64().unwrap_or(1.0);
                // Within rounding: 0.3 is a multiple of 0.1.
                !quotient.is_finite()
                    || (quotient - quotient.round()).abs() <= 1e-9 * quotient.abs().max(1.0)
            }
        };
        if !whole {
            return Err(format!("expected a multiple of {divisor}"));
        }
    }
    Ok(())
}

fn check_string(text: &str, schema: &Node<'_>) -> Result<(), String> {
    if schema.contains_key("minLength") || schema.contains_key("maxLength") {
        // JSON Schema counts characters (code points), not bytes.
        let length = text.chars().count() as u64;
        check_count(schema, ("minLength", "maxLength"), length, "characters")?;
    }
    if let Some(source) = schema.get("pattern").and_then(Value::as_str) {
        let matched = Pattern::cached(source).and_then(|pattern| pattern.is_match(text));
        if matched == Some(false) {
            return Err(format!(
                "does not match the pattern {}",
                clip(&Value::from(source).to_string())
            ));
        }
    }
    Ok(())
}

/// A count's bounds (`min`, `max`: of items, properties or characters):
/// why `length` is outside them.
pub(super) fn check_count(
    schema: &Node<'_>,
    (min, max): (&str, &str),
    length: u64,
    noun: &str,
) -> Result<(), String> {
    let bound = |name: &str| schema.get(name).and_then(Value::as_u64);
    if let Some(minimum) = bound(min).filter(|&minimum| length < minimum) {
        return Err(format!("expected at least {minimum} {noun}, found {length}"));
    }
    if let Some(maximum) = bound(max).filter(|&maximum| length > maximum) {
        return Err(format!("expected at most {maximum} {noun}, found {length}"));
    }
    Ok(())
}

/// The first two equal items, by index, if any.
pub(super) fn repeated(items: &[Value]) -> Option<(usize, usize)> {
    if items.len() <= PAIRWISE_UNIQUE {
        return items.iter().enumerate().find_map(|(second, item)| {
            let first = items[..second].iter().position(|earlier| json_equal(earlier, item))?;
            Some((first, second))
        });
    }
    // Many items: sorted by a canonical text (then by place), so that equal
    // items stand together; the pair whose second comes first wins.
    let mut texts: Vec<(String, usize)> =
        items.iter().enumerate().map(|(at, item)| (canonical(item), at)).collect();
    texts.sort();
    texts
        .windows(2)
        .filter(|two| two[0].0 == two[1].0)
        .map(|two| (two[0].1, two[1].1))
        .min_by_key(|&(_, second)| second)
}

/// A text equal for values JSON Schema calls equal: numbers by value, an
/// object's keys in order.
fn canonical(value: &Value) -> String {
    match value {
        Value::Number(number) => match number.as_f64() {
            Some(float) if float.fract() == 0.0 && float.abs() < 9e15 => {
                format!("{}", float as i64)
            }
            _ => number.to_string(),
        },
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(canonical).collect();
            format!("[{}]", items.join(","))
        }
        Value::Object(object) => {
            let mut entries: Vec<String> = object
                .iter()
                .map(|(key, value)| format!("{}:{}", Value::from(key.as_str()), canonical(value)))
                .collect();
            entries.sort();
            format!("{{{}}}", entries.join(","))
        }
        other => other.to_string(),
    }
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
