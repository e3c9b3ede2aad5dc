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
//!
//! Here: the walk over a schema (`Checker`: combinators, arrays, objects,
//! and what each evaluated, for the `unevaluated*` keywords). Beside it:
//! `node.rs` (a schema object's keywords found once), `values.rs` (the
//! keywords on a value itself, and JSON equality), `refs.rs` (references
//! within the document), `pattern.rs` (the regular expressions).

mod node;
mod pattern;
mod refs;
mod values;

use serde_json::{Map, Value};

use crate::protocol::clip;
use node::Node;
pub(crate) use pattern::Pattern;
use values::{check_count, check_value, repeated};

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

/// How deep references may nest before a loop is suspected (and the value
/// passes): far beyond any real schema.
const MAX_DEPTH: u32 = 200;

/// The most subschemas one check visits; a real result takes a few
/// hundred, a hostile schema is cut here (the rest passes).
const MAX_STEPS: u32 = 100_000;

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

#[cfg(test)]
mod tests;
