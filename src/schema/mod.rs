//! JSON Schema checks: a tool result's `structuredContent` against the
//! tool's `outputSchema`, on every call, and the values a form collects.
//!
//! MCP schemas are JSON Schema 2020-12 (older drafts' spellings are read
//! too), and this is the whole of it that a schema of data uses: types,
//! `enum`/`const`, numeric, string, array and object bounds, `pattern` and
//! `patternProperties` (ECMA-262, `pattern.rs`), the combinators,
//! `if`/`then`/`else`, the dependent keywords, `unevaluatedProperties` and
//! `unevaluatedItems`, and `$ref`/`$dynamicRef` into the same document
//! (`#`, JSON pointers, `$anchor`, `$id`). `format` is an annotation, as
//! 2020-12 says, and is not judged.
//!
//! What cannot be judged passes: a reference outside the document, a
//! pattern the matcher does not understand or gives up on, a malformed
//! keyword, a loop of references. A false alarm about a server's answer is
//! worse than a missed one. The path of a mismatch is built only when one
//! is found, so a matching value costs no allocation for paths.

mod pattern;

use serde_json::{Map, Value};

use crate::protocol::clip;
pub(crate) use pattern::Pattern;

/// Checks `value` against `schema`. The error is the first mismatch found,
/// prefixed with its JSON path, as in `$.items[2].name: expected a string`.
pub fn check_schema(value: &Value, schema: &Value) -> Result<(), String> {
    let mut checker = Checker { root: schema, depth: 0, steps: 0, anchors: None };
    checker.check(value, schema, &Path::Root).map(|_| ())
}

/// Why a `tools/call` result breaks the `outputSchema` of `tool`: its
/// `structuredContent` does not match, or it has none. A tool error is not
/// judged (its content is the error), and neither is a result that is not
/// an object. An explicit `null` counts as none: the schema asks for an
/// object, and `null` is what a careless serializer writes for a missing one.
pub(crate) fn output_mismatch(tool: &str, schema: &Value, result: &Value) -> Option<String> {
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        return None;
    }
    match result.get("structuredContent").filter(|value| !value.is_null()) {
        Some(structured) => check_schema(structured, schema).err().map(|why| {
            format!("structuredContent does not match the outputSchema of {}: {why}", clip(tool))
        }),
        None => Some(format!(
            "{} has an outputSchema but its result has no structuredContent",
            clip(tool)
        )),
    }
}

/// A schema object with the keywords it holds found in one pass: most
/// schemas hold a handful of the forty keywords a check asks about, and a
/// miss is then a bit test, not a hash of the key.
struct Node<'s> {
    map: &'s Map<String, Value>,
    present: u64,
}

impl<'s> Node<'s> {
    fn new(map: &'s Map<String, Value>) -> Node<'s> {
        let present = map.keys().filter_map(|key| bit(key)).fold(0, |bits, bit| bits | 1 << bit);
        Node { map, present }
    }

    fn get(&self, keyword: &str) -> Option<&'s Value> {
        match bit(keyword) {
            Some(bit) if self.present & (1 << bit) == 0 => None,
            _ => self.map.get(keyword),
        }
    }

    fn contains_key(&self, keyword: &str) -> bool {
        self.get(keyword).is_some()
    }
}

/// A keyword's place in [`Node`]'s bits.
fn bit(keyword: &str) -> Option<u32> {
    Some(match keyword {
        "type" => 0,
        "enum" => 1,
        "const" => 2,
        "minimum" => 3,
        "maximum" => 4,
        "exclusiveMinimum" => 5,
        "exclusiveMaximum" => 6,
        "multipleOf" => 7,
        "minLength" => 8,
        "maxLength" => 9,
        "pattern" => 10,
        "minItems" => 11,
        "maxItems" => 12,
        "uniqueItems" => 13,
        "prefixItems" => 14,
        "items" => 15,
        "additionalItems" => 16,
        "contains" => 17,
        "minContains" => 18,
        "maxContains" => 19,
        "unevaluatedItems" => 20,
        "minProperties" => 21,
        "maxProperties" => 22,
        "required" => 23,
        "dependentRequired" => 24,
        "dependentSchemas" => 25,
        "dependencies" => 26,
        "propertyNames" => 27,
        "properties" => 28,
        "patternProperties" => 29,
        "additionalProperties" => 30,
        "unevaluatedProperties" => 31,
        "allOf" => 32,
        "anyOf" => 33,
        "oneOf" => 34,
        "not" => 35,
        "if" => 36,
        "then" => 37,
        "else" => 38,
        "$ref" => 39,
        "$dynamicRef" => 40,
        _ => return None,
    })
}

/// How deep references may nest before a loop is suspected (and the value
/// passes): far beyond any real schema.
const MAX_DEPTH: u32 = 200;

/// The most subschemas one check visits; a real result takes a few
/// hundred, a hostile schema is cut here (the rest passes).
const MAX_STEPS: u32 = 100_000;

/// Arrays longer than this are checked for `uniqueItems` by hashing, not
/// by comparing every pair.
const PAIRWISE_UNIQUE: usize = 64;

/// Where a value sits in the document checked, rendered only for an error.
enum Path<'p> {
    Root,
    Key(&'p Path<'p>, &'p str),
    Index(&'p Path<'p>, usize),
}

impl Path<'_> {
    fn render(&self) -> String {
        match self {
            Path::Root => "$".to_owned(),
            Path::Key(parent, name) => {
                let plain =
                    name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if plain {
                    format!("{}.{name}", parent.render())
                } else {
                    format!("{}[{}]", parent.render(), Value::from(*name))
                }
            }
            Path::Index(parent, index) => format!("{}[{index}]", parent.render()),
        }
    }

    fn fail<T>(&self, why: impl Into<String>) -> Result<T, String> {
        Err(format!("{}: {}", self.render(), why.into()))
    }
}

/// What a schema evaluated of the value it matched, for
/// `unevaluatedProperties` and `unevaluatedItems`: property names, the
/// leading items, every item, and the items `contains` matched.
#[derive(Default)]
struct Seen<'v> {
    keys: Vec<&'v str>,
    items: usize,
    all_items: bool,
    contained: Vec<usize>,
}

impl<'v> Seen<'v> {
    fn merge(&mut self, other: Seen<'v>) {
        self.keys.extend(other.keys);
        self.items = self.items.max(other.items);
        self.all_items |= other.all_items;
        self.contained.extend(other.contained);
    }

    fn has_item(&self, index: usize) -> bool {
        self.all_items || index < self.items || self.contained.contains(&index)
    }
}

struct Checker<'s> {
    root: &'s Value,
    depth: u32,
    /// Subschemas checked so far: past [`MAX_STEPS`] the rest passes, so
    /// that branches that recurse (`allOf` of two `$ref`s to `#`) cannot
    /// take exponential time.
    steps: u32,
    /// `$anchor`, `$dynamicAnchor` and `$id` values of the document, with
    /// the schema holding each, gathered at the first reference that needs
    /// them.
    anchors: Option<Vec<(&'s str, &'s Value)>>,
}

type Checked<'v> = Result<Seen<'v>, String>;

impl<'s> Checker<'s> {
    fn check<'v>(&mut self, value: &'v Value, schema: &'s Value, path: &Path) -> Checked<'v> {
        let schema = match schema {
            Value::Bool(true) => return Ok(Seen::default()),
            Value::Bool(false) => return path.fail("no value is allowed here"),
            Value::Object(schema) => schema,
            // Anything else is not a schema; a malformed schema is the
            // server's fault, not its result's, so it allows everything.
            _ => return Ok(Seen::default()),
        };
        self.steps += 1;
        if self.depth > MAX_DEPTH || self.steps > MAX_STEPS {
            return Ok(Seen::default());
        }
        self.depth += 1;
        let checked = self.check_object(value, &Node::new(schema), path);
        self.depth -= 1;
        checked
    }

    fn check_object<'v>(
        &mut self,
        value: &'v Value,
        schema: &Node<'s>,
        path: &Path,
    ) -> Checked<'v> {
        if let Err(why) = check_value(value, schema) {
            return path.fail(why);
        }
        let mut seen = Seen::default();
        for keyword in ["$ref", "$dynamicRef"] {
            if let Some(reference) = schema.get(keyword).and_then(Value::as_str) {
                if let Some(target) = self.resolve(reference) {
                    seen.merge(self.check(value, target, path)?);
                }
            }
        }
        seen.merge(self.check_combinators(value, schema, path)?);
        if let Some(items) = value.as_array() {
            seen.merge(self.check_items(items, schema, path, &seen)?);
        }
        if let Some(object) = value.as_object() {
            let own = self.check_properties(value, object, schema, path, &seen)?;
            seen.merge(own);
        }
        Ok(seen)
    }

    /// The schema a reference names in this document, if it can be found.
    fn resolve(&mut self, reference: &str) -> Option<&'s Value> {
        if let Some(pointer) = reference.strip_prefix('#') {
            if pointer.is_empty() {
                return Some(self.root);
            }
            if pointer.starts_with('/') {
                return self.root.pointer(&unescape_pointer(pointer));
            }
            return self.anchors().iter().find(|(name, _)| *name == pointer).map(|(_, at)| *at);
        }
        // An `$id` in the document, whole or as the last part of one.
        let (base, fragment) = reference.split_once('#').unwrap_or((reference, ""));
        let named = |id: &str| {
            id == base || id.strip_suffix(base).is_some_and(|start| start.ends_with('/'))
        };
        let resource = self.anchors().iter().find(|(id, _)| named(id)).map(|(_, at)| *at)?;
        if fragment.is_empty() {
            Some(resource)
        } else if fragment.starts_with('/') {
            resource.pointer(&unescape_pointer(fragment))
        } else {
            None
        }
    }

    fn anchors(&mut self) -> &[(&'s str, &'s Value)] {
        let root = self.root;
        self.anchors.get_or_insert_with(|| gather_anchors(root))
    }

    /// `allOf`, `anyOf`, `oneOf`, `not`, `if`/`then`/`else`.
    fn check_combinators<'v>(
        &mut self,
        value: &'v Value,
        schema: &Node<'s>,
        path: &Path,
    ) -> Checked<'v> {
        let mut seen = Seen::default();
        if let Some(Value::Array(schemas)) = schema.get("allOf") {
            for each in schemas {
                seen.merge(self.check(value, each, path)?);
            }
        }
        if let Some(Value::Array(schemas)) = schema.get("anyOf") {
            let mut any = false;
            // Every branch, not the first that matches: each one that
            // matches evaluates properties for `unevaluatedProperties`.
            for each in schemas {
                if let Ok(matched) = self.check(value, each, path) {
                    any = true;
                    seen.merge(matched);
                }
            }
            if !any {
                return path.fail("matches none of the schemas in anyOf");
            }
        }
        if let Some(Value::Array(schemas)) = schema.get("oneOf") {
            let mut matching = Vec::new();
            for (index, each) in schemas.iter().enumerate() {
                if let Ok(matched) = self.check(value, each, path) {
                    matching.push((index, matched));
                }
            }
            match matching.len() {
                1 => seen.merge(matching.remove(0).1),
                0 => return path.fail("matches none of the schemas in oneOf"),
                _ => {
                    return path.fail(format!(
                        "matches more than one schema in oneOf (#{} and #{})",
                        matching[0].0, matching[1].0
                    ))
                }
            }
        }
        if let Some(not) = schema.get("not") {
            if self.check(value, not, path).is_ok() {
                return path.fail("matches the schema in not");
            }
        }
        if let Some(condition) = schema.get("if") {
            match self.check(value, condition, path) {
                Ok(matched) => {
                    seen.merge(matched);
                    if let Some(then) = schema.get("then") {
                        seen.merge(self.check(value, then, path)?);
                    }
                }
                Err(_) => {
                    if let Some(otherwise) = schema.get("else") {
                        seen.merge(self.check(value, otherwise, path)?);
                    }
                }
            }
        }
        Ok(seen)
    }

    /// An array's keywords. `before` is what the keywords that apply to
    /// the whole array (references, combinators) evaluated already.
    fn check_items<'v>(
        &mut self,
        items: &'v [Value],
        schema: &Node<'s>,
        path: &Path,
        before: &Seen<'v>,
    ) -> Checked<'v> {
        let count = |name: &str| schema.get(name).and_then(Value::as_u64);
        let length = items.len() as u64;
        if let Err(why) = check_count(schema, ("minItems", "maxItems"), length, "items") {
            return path.fail(why);
        }
        if schema.get("uniqueItems") == Some(&Value::Bool(true)) {
            if let Some((first, second)) = repeated(items) {
                return path.fail(format!("items {first} and {second} are equal"));
            }
        }
        let mut seen = Seen::default();
        // `prefixItems` (2020-12) or a list under `items` (earlier drafts)
        // checks items by position; a schema under `items` (or, after a
        // list, `additionalItems`) checks the rest.
        let (positional, rest) = match (schema.get("prefixItems"), schema.get("items")) {
            (Some(Value::Array(prefix)), rest) => (&prefix[..], rest),
            (None, Some(Value::Array(prefix))) => (&prefix[..], schema.get("additionalItems")),
            (_, rest) => (&[][..], rest),
        };
        for (index, (item, item_schema)) in items.iter().zip(positional).enumerate() {
            self.check(item, item_schema, &Path::Index(path, index))?;
        }
        seen.items = positional.len().min(items.len());
        if let Some(rest @ (Value::Object(_) | Value::Bool(_))) = rest {
            for (index, item) in items.iter().enumerate().skip(positional.len()) {
                self.check(item, rest, &Path::Index(path, index))?;
            }
            seen.all_items = true;
        }
        if let Some(contains) = schema.get("contains") {
            for (index, item) in items.iter().enumerate() {
                if self.check(item, contains, &Path::Index(path, index)).is_ok() {
                    seen.contained.push(index);
                }
            }
            let found = seen.contained.len() as u64;
            let minimum = count("minContains").unwrap_or(1);
            if found < minimum {
                return path.fail(match minimum {
                    1 => "no item matches the schema in contains".to_owned(),
                    _ => format!(
                        "expected at least {minimum} items matching contains, found {found}"
                    ),
                });
            }
            if let Some(maximum) = count("maxContains").filter(|&maximum| found > maximum) {
                return path.fail(format!(
                    "expected at most {maximum} items matching contains, found {found}"
                ));
            }
        }
        if let Some(unevaluated) = schema.get("unevaluatedItems") {
            for (index, item) in items.iter().enumerate() {
                if !seen.has_item(index) && !before.has_item(index) {
                    let at = Path::Index(path, index);
                    if unevaluated == &Value::Bool(false) {
                        return at.fail("unexpected item");
                    }
                    self.check(item, unevaluated, &at)?;
                }
            }
            seen.all_items = true;
        }
        Ok(seen)
    }

    /// An object's keywords. `before` is as for [`Checker::check_items`].
    fn check_properties<'v>(
        &mut self,
        value: &'v Value,
        object: &'v Map<String, Value>,
        schema: &Node<'s>,
        path: &Path,
        before: &Seen<'v>,
    ) -> Checked<'v> {
        let length = object.len() as u64;
        if let Err(why) =
            check_count(schema, ("minProperties", "maxProperties"), length, "properties")
        {
            return path.fail(why);
        }
        if let Some(Value::Array(required)) = schema.get("required") {
            required_in(object, required, path)?;
        }
        let mut seen = Seen::default();
        // `dependentRequired` and `dependentSchemas` (2020-12), or
        // `dependencies`, which held both before.
        for keyword in ["dependentRequired", "dependentSchemas", "dependencies"] {
            let Some(Value::Object(dependents)) = schema.get(keyword) else { continue };
            for (name, dependent) in dependents {
                if !object.contains_key(name) {
                    continue;
                }
                match dependent {
                    Value::Array(required) => required_in(object, required, path)?,
                    dependent => seen.merge(self.check(value, dependent, path)?),
                }
            }
        }
        if let Some(names) = schema.get("propertyNames") {
            for name in object.keys() {
                let key = Value::String(name.clone());
                if let Err(why) = self.check(&key, names, &Path::Root) {
                    let why = why.strip_prefix("$: ").unwrap_or(&why).to_owned();
                    return Path::Key(path, name).fail(format!("bad property name: {why}"));
                }
            }
        }
        let properties = schema.get("properties").and_then(Value::as_object);
        // A pattern not understood (`None`) is taken to match every name.
        let patterns: Vec<(Option<std::rc::Rc<Pattern>>, &'s Value)> =
            match schema.get("patternProperties") {
                Some(Value::Object(patterns)) => patterns
                    .iter()
                    .map(|(source, pattern_schema)| (Pattern::cached(source), pattern_schema))
                    .collect(),
                _ => Vec::new(),
            };
        let additional = schema.get("additionalProperties");
        let unevaluated = schema.get("unevaluatedProperties");
        for (name, property) in object {
            let at = Path::Key(path, name);
            let mut evaluated = false;
            if let Some(property_schema) = properties.and_then(|properties| properties.get(name)) {
                self.check(property, property_schema, &at)?;
                evaluated = true;
            }
            for (pattern, pattern_schema) in &patterns {
                match pattern.as_ref().and_then(|pattern| pattern.is_match(name)) {
                    Some(true) => {
                        self.check(property, pattern_schema, &at)?;
                        evaluated = true;
                    }
                    Some(false) => {}
                    // Could not tell: the name is taken as matching.
                    None => evaluated = true,
                }
            }
            if !evaluated {
                if let Some(additional) = additional {
                    if additional == &Value::Bool(false) {
                        return at.fail("unexpected property");
                    }
                    self.check(property, additional, &at)?;
                    evaluated = true;
                }
            }
            if !evaluated
                && !before.keys.contains(&name.as_str())
                && !seen.keys.contains(&name.as_str())
            {
                if let Some(unevaluated) = unevaluated {
                    if unevaluated == &Value::Bool(false) {
                        return at.fail("unexpected property");
                    }
                    self.check(property, unevaluated, &at)?;
                    evaluated = true;
                }
            }
            if evaluated {
                seen.keys.push(name);
            }
        }
        Ok(seen)
    }
}

/// Each name in `required` that `object` lacks is a mismatch.
fn required_in(object: &Map<String, Value>, required: &[Value], path: &Path) -> Result<(), String> {
    for name in required.iter().filter_map(Value::as_str) {
        if !object.contains_key(name) {
            return path.fail(format!("missing required property {}", Value::from(name)));
        }
    }
    Ok(())
}

/// The keywords on the value itself: `type`, `enum`, `const`, the bounds
/// of a number, and a string's length and `pattern`. The error says why,
/// without the path.
fn check_value(value: &Value, schema: &Node<'_>) -> Result<(), String> {
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
fn check_count(
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
fn repeated(items: &[Value]) -> Option<(usize, usize)> {
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

/// A JSON pointer from a URI fragment: percent escapes decoded.
fn unescape_pointer(pointer: &str) -> std::borrow::Cow<'_, str> {
    if !pointer.contains('%') {
        return std::borrow::Cow::Borrowed(pointer);
    }
    let bytes = pointer.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let hex = bytes.get(at + 1..at + 3).and_then(|hex| std::str::from_utf8(hex).ok());
        match (bytes[at], hex.and_then(|hex| u8::from_str_radix(hex, 16).ok())) {
            (b'%', Some(byte)) => {
                decoded.push(byte);
                at += 3;
            }
            (byte, _) => {
                decoded.push(byte);
                at += 1;
            }
        }
    }
    std::borrow::Cow::Owned(String::from_utf8_lossy(&decoded).into_owned())
}

/// Every `$anchor`, `$dynamicAnchor` and `$id` under `schema`, with the
/// schema that holds it. Values of `enum`, `const` and the like hold data,
/// not schemas, and are not searched.
fn gather_anchors(schema: &Value) -> Vec<(&str, &Value)> {
    let mut anchors = Vec::new();
    let mut stack = vec![schema];
    while let Some(schema) = stack.pop() {
        match schema {
            Value::Object(object) => {
                for keyword in ["$anchor", "$dynamicAnchor", "$id", "id"] {
                    if let Some(name) = object.get(keyword).and_then(Value::as_str) {
                        anchors.push((name.trim_start_matches('#'), schema));
                    }
                }
                for (keyword, inner) in object {
                    if !matches!(keyword.as_str(), "enum" | "const" | "default" | "examples") {
                        stack.push(inner);
                    }
                }
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    anchors
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

#[cfg(test)]
mod tests;
