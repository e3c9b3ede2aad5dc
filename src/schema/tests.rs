use super::*;
use serde_json::json;

#[test]
fn schema_types() {
    let check = |value: Value, schema: Value| check_schema(&value, &schema);
    assert_eq!(check(json!("x"), json!({"type": "string"})), Ok(()));
    assert_eq!(check(json!(1), json!({"type": "string"})), Err("$: expected a string".into()));
    assert_eq!(check(json!(2.0), json!({"type": "integer"})), Ok(()));
    assert_eq!(check(json!(2.5), json!({"type": "integer"})), Err("$: expected an integer".into()));
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
    let schema =
        json!({"patternProperties": {"^x": {"type": "integer"}}, "additionalProperties": false});
    assert_eq!(check_schema(&json!({"x1": 1}), &schema), Ok(()));
    assert_eq!(check_schema(&json!({"x1": "a"}), &schema), Err("$.x1: expected an integer".into()));
    assert_eq!(check_schema(&json!({"y": 1}), &schema), Err("$.y: unexpected property".into()));
    // A pattern the matcher does not understand judges no name extra.
    let schema = json!({"patternProperties": {"(a)\\1": {}}, "additionalProperties": false});
    assert_eq!(check_schema(&json!({"y": 1}), &schema), Ok(()));
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
    assert_eq!(check_schema(&json!(["a", 1, "b"]), &schema), Err("$[2]: expected a number".into()));
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
fn schema_ignores_annotations() {
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "T",
        "description": "d",
        "properties": {"when": {"type": "string", "format": "date-time"}},
    });
    assert_eq!(check_schema(&json!({"when": "yesterday"}), &schema), Ok(()));
    // Malformed schemas allow everything rather than fail a result.
    assert_eq!(check_schema(&json!(1), &json!("not a schema")), Ok(()));
    assert_eq!(check_schema(&json!(1), &json!({"type": "decimal"})), Ok(()));
    assert_eq!(check_schema(&json!([1]), &json!({"items": 3, "required": "a"})), Ok(()));
}

#[test]
fn schema_references() {
    let schema = json!({
        "type": "object",
        "properties": {
            "next": {"$ref": "#/$defs/node"},
            "odd": {"$ref": "#/$defs/a~1b%20c"},
            "named": {"$ref": "#leaf"},
            "by_id": {"$ref": "https://example.com/schemas/tag"},
            "relative": {"$ref": "tag"},
            "elsewhere": {"$ref": "https://example.com/other.json"}
        },
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"value": {"type": "integer"}, "next": {"$ref": "#/$defs/node"}},
                "required": ["value"]
            },
            "a/b c": {"type": "string"},
            "leaf": {"$anchor": "leaf", "type": "boolean"},
            "tag": {"$id": "https://example.com/schemas/tag", "type": "string"}
        }
    });
    let check = |value: Value| check_schema(&value, &schema);
    assert_eq!(check(json!({"next": {"value": 1, "next": {"value": 2}}})), Ok(()));
    assert_eq!(check(json!({"next": 42})), Err("$.next: expected an object".into()));
    assert_eq!(
        check(json!({"next": {"value": 1, "next": {"value": "two"}}})),
        Err("$.next.next.value: expected an integer".into())
    );
    assert_eq!(check(json!({"odd": 1})), Err("$.odd: expected a string".into()));
    assert_eq!(check(json!({"named": 1})), Err("$.named: expected a boolean".into()));
    assert_eq!(check(json!({"by_id": 1})), Err("$.by_id: expected a string".into()));
    assert_eq!(check(json!({"relative": 1})), Err("$.relative: expected a string".into()));
    // A reference outside the document cannot be judged, so it passes.
    assert_eq!(check(json!({"elsewhere": 1})), Ok(()));
    // Draft 7's `definitions`, and a loop of references, which passes.
    let schema = json!({"$ref": "#/definitions/x", "definitions": {"x": {"type": "string"}}});
    assert_eq!(check_schema(&json!(1), &schema), Err("$: expected a string".into()));
    assert_eq!(check_schema(&json!(1), &json!({"$ref": "#"})), Ok(()));
    let schema = json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"});
    assert_eq!(check_schema(&json!(1), &schema), Ok(()));
}

#[test]
fn schema_string_patterns_and_numbers() {
    let check = |value: Value, schema: Value| check_schema(&value, &schema);
    assert_eq!(check(json!("ab-12"), json!({"pattern": "^[a-z]+-\\d+$"})), Ok(()));
    assert_eq!(
        check(json!("ab12"), json!({"pattern": "^[a-z]+-\\d+$"})),
        Err(r#"$: does not match the pattern "^[a-z]+-\\d+$""#.into())
    );
    // Unanchored, as ECMA-262 searches.
    assert_eq!(check(json!("xx-1"), json!({"pattern": "-1"})), Ok(()));
    assert_eq!(check(json!(10), json!({"multipleOf": 5})), Ok(()));
    assert_eq!(
        check(json!(11), json!({"multipleOf": 5})),
        Err("$: expected a multiple of 5".into())
    );
    assert_eq!(check(json!(0.3), json!({"multipleOf": 0.1})), Ok(()));
    assert_eq!(
        check(json!(0.35), json!({"multipleOf": 0.1})),
        Err("$: expected a multiple of 0.1".into())
    );
    // Draft 4's flag.
    assert_eq!(
        check(json!(5), json!({"minimum": 5, "exclusiveMinimum": true})),
        Err("$: expected more than 5".into())
    );
    assert_eq!(check(json!(5), json!({"maximum": 5, "exclusiveMaximum": false})), Ok(()));
}

#[test]
fn schema_array_keywords() {
    let check = |value: Value, schema: Value| check_schema(&value, &schema);
    assert_eq!(check(json!([1, 2, 3]), json!({"uniqueItems": true})), Ok(()));
    assert_eq!(
        check(json!([1, {"a": 1}, 1.0]), json!({"uniqueItems": true})),
        Err("$: items 0 and 2 are equal".into())
    );
    let many: Vec<Value> =
        (0..100).map(|n| json!({"n": n, "m": [n]})).chain([json!({"m": [7], "n": 7.0})]).collect();
    assert_eq!(
        check(Value::from(many), json!({"uniqueItems": true})),
        Err("$: items 7 and 100 are equal".into())
    );
    let contains = json!({"contains": {"type": "string"}, "minContains": 2, "maxContains": 3});
    assert_eq!(check(json!([1, "a", "b"]), contains.clone()), Ok(()));
    assert_eq!(
        check(json!([1, "a"]), contains.clone()),
        Err("$: expected at least 2 items matching contains, found 1".into())
    );
    assert_eq!(
        check(json!(["a", "b", "c", "d"]), contains),
        Err("$: expected at most 3 items matching contains, found 4".into())
    );
    assert_eq!(
        check(json!([1]), json!({"contains": {"type": "string"}})),
        Err("$: no item matches the schema in contains".into())
    );
    // Draft 7's `additionalItems` after a list of `items`.
    let schema = json!({"items": [{"type": "string"}], "additionalItems": false});
    assert_eq!(check(json!(["a", 1]), schema), Err("$[1]: no value is allowed here".into()));
    let schema = json!({"prefixItems": [{"type": "string"}], "unevaluatedItems": false});
    assert_eq!(check(json!(["a"]), schema.clone()), Ok(()));
    assert_eq!(check(json!(["a", 1]), schema), Err("$[1]: unexpected item".into()));
}

#[test]
fn schema_object_keywords() {
    let check = |value: Value, schema: Value| check_schema(&value, &schema);
    assert_eq!(
        check(json!({}), json!({"minProperties": 1})),
        Err("$: expected at least 1 properties, found 0".into())
    );
    assert_eq!(
        check(json!({"a": 1, "b": 2}), json!({"maxProperties": 1})),
        Err("$: expected at most 1 properties, found 2".into())
    );
    assert_eq!(
        check(json!({"Bad": 1}), json!({"propertyNames": {"pattern": "^[a-z]+$"}})),
        Err(r#"$.Bad: bad property name: does not match the pattern "^[a-z]+$""#.into())
    );
    let dependent = json!({"dependentRequired": {"card": ["billing"]}});
    assert_eq!(check(json!({"billing": 1}), dependent.clone()), Ok(()));
    assert_eq!(
        check(json!({"card": 1}), dependent),
        Err(r#"$: missing required property "billing""#.into())
    );
    let dependent = json!({"dependencies": {"card": {"required": ["zip"]}}});
    assert_eq!(
        check(json!({"card": 1}), dependent),
        Err(r#"$: missing required property "zip""#.into())
    );
    let conditional = json!({
        "if": {"properties": {"kind": {"const": "n"}}},
        "then": {"properties": {"v": {"type": "number"}}},
        "else": {"properties": {"v": {"type": "string"}}}
    });
    assert_eq!(check(json!({"kind": "n", "v": 1}), conditional.clone()), Ok(()));
    assert_eq!(check(json!({"kind": "s", "v": "x"}), conditional.clone()), Ok(()));
    assert_eq!(
        check(json!({"kind": "s", "v": 1}), conditional),
        Err("$.v: expected a string".into())
    );
}

#[test]
fn schema_unevaluated_properties_see_through_combinators() {
    let schema = json!({
        "allOf": [{"properties": {"a": {"type": "integer"}}}],
        "anyOf": [{"properties": {"b": true}, "required": ["b"]}, {"properties": {"c": true}}],
        "$ref": "#/$defs/d",
        "$defs": {"d": {"properties": {"d": true}}},
        "unevaluatedProperties": false
    });
    assert_eq!(check_schema(&json!({"a": 1, "b": 2, "c": 3, "d": 4}), &schema), Ok(()));
    assert_eq!(
        check_schema(&json!({"c": 3, "e": 5}), &schema),
        Err("$.e: unexpected property".into())
    );
    // A branch that did not match evaluates nothing.
    let schema = json!({
        "oneOf": [
            {"properties": {"x": {"type": "string"}}, "required": ["x"]},
            {"properties": {"y": true}, "required": ["y"]}
        ],
        "unevaluatedProperties": false
    });
    assert_eq!(
        check_schema(&json!({"y": 1, "x": 2}), &schema),
        Err("$.x: unexpected property".into())
    );
    let schema = json!({"properties": {"a": true}, "unevaluatedProperties": {"type": "string"}});
    assert_eq!(check_schema(&json!({"a": 1, "b": "x"}), &schema), Ok(()));
    assert_eq!(
        check_schema(&json!({"a": 1, "b": 2}), &schema),
        Err("$.b: expected a string".into())
    );
}

#[test]
fn schema_hostile_shapes_end_quickly() {
    let started = std::time::Instant::now();
    // Two branches that both refer back to the root: exponential unbounded.
    let schema = json!({"allOf": [{"$ref": "#"}, {"$ref": "#"}], "anyOf": [{"$ref": "#"}, true]});
    assert_eq!(check_schema(&json!({"a": 1}), &schema), Ok(()));
    let many: Vec<Value> = (0..50_000).map(|n| json!(n)).chain([json!(49_999)]).collect();
    assert_eq!(
        check_schema(&Value::from(many), &json!({"uniqueItems": true})),
        Err("$: items 49999 and 50000 are equal".into())
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
}

#[test]
fn schema_dependent_schemas_evaluate_properties() {
    let schema = json!({
        "dependentSchemas": {"a": {"properties": {"b": {}}}},
        "properties": {"a": {}},
        "unevaluatedProperties": false
    });
    assert_eq!(check_schema(&json!({"a": 1, "b": 2}), &schema), Ok(()));
    assert_eq!(check_schema(&json!({"c": 2}), &schema), Err("$.c: unexpected property".into()));
}
