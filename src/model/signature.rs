//! A tool as a TypeScript-style signature: what a model writing a codemode
//! script reads to call it, and what `tether tools --signatures` prints.
//!
//! Models read TypeScript far more compactly than JSON Schema: `{ text:
//! string; limit?: number }` says what a page of schema says. The rendering
//! covers what servers write (types and type lists, `enum`, `const`,
//! `anyOf`/`oneOf`/`allOf`, arrays and tuples, maps, local `$ref`s,
//! descriptions and defaults as comments) and says `unknown` for the rest.
//! It is bounded: references are followed a few levels deep, and a
//! signature that grows past a size limit is rendered again without its
//! comments, then with its arguments as a bare object.

use std::cell::Cell;
use std::fmt::Write as _;

use serde_json::{Map, Value};

use crate::protocol::Tool;

/// How many `$ref`s deep a type is followed before it is `unknown`.
const MAX_REF_DEPTH: usize = 4;
/// How deep objects nest before an inner one is `object`.
const MAX_NESTING: usize = 8;
/// The most bytes of one signature.
const MAX_SIGNATURE: usize = 8_000;
/// The most characters of one comment.
const MAX_COMMENT: usize = 200;
/// The most schema nodes one rendering visits: references do not deepen
/// the nesting, so a hostile schema (many properties, each `{"$ref": "#"}`)
/// would otherwise grow as a power of its size before the size check.
const MAX_NODES: usize = 4_000;

/// `name(args: {…}): Promise<CallToolResult<…>>` for a tool called by
/// `name` (its qualified name), from its input and output schemas.
pub fn signature(name: &str, tool: &Tool) -> String {
    for comments in [true, false] {
        if let Some(rendered) = render(name, tool, comments) {
            if rendered.len() <= MAX_SIGNATURE {
                return rendered;
            }
        }
    }
    format!("{name}(args: object /* its schema is too large to show */): Promise<CallToolResult>")
}

/// The signature, or `None` when the schema is too big to render.
fn render(name: &str, tool: &Tool, comments: bool) -> Option<String> {
    let nodes = Cell::new(MAX_NODES);
    let input = Renderer { root: &tool.input_schema, comments, nodes: &nodes };
    let arguments = input.type_of(&tool.input_schema, 0, 0);
    let result = match &tool.output_schema {
        Some(schema) => {
            let output = Renderer { root: schema, comments, nodes: &nodes };
            format!("CallToolResult<{}>", output.type_of(schema, 0, 0))
        }
        None => "CallToolResult".to_owned(),
    };
    (nodes.get() > 0).then(|| format!("{name}(args: {arguments}): Promise<{result}>"))
}

struct Renderer<'a> {
    /// The schema `$ref`s are resolved in.
    root: &'a Value,
    comments: bool,
    /// Nodes left to visit; at 0 every type is `unknown`.
    nodes: &'a Cell<usize>,
}

impl Renderer<'_> {
    /// The type of a schema; an object's properties are laid out one per
    /// line when any has a comment, else on one line.
    fn type_of(&self, schema: &Value, refs: usize, nesting: usize) -> String {
        let left = self.nodes.get();
        if left == 0 {
            return "unknown".into();
        }
        self.nodes.set(left - 1);
        let schema = match schema {
            Value::Bool(true) => return "unknown".into(),
            Value::Bool(false) => return "never".into(),
            Value::Object(schema) => schema,
            _ => return "unknown".into(),
        };
        let mut rendered = self.bare_type(schema, refs, nesting);
        if schema.get("nullable") == Some(&Value::Bool(true)) && rendered != "null" {
            rendered = format!("{rendered} | null");
        }
        rendered
    }

    fn bare_type(&self, schema: &Map<String, Value>, refs: usize, nesting: usize) -> String {
        if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
            return match self.resolve(reference) {
                Some(target) if refs < MAX_REF_DEPTH => self.type_of(target, refs + 1, nesting),
                _ => "unknown".into(),
            };
        }
        if let Some(constant) = schema.get("const") {
            return literal(constant);
        }
        if let Some(Value::Array(values)) = schema.get("enum") {
            return union(values.iter().map(literal));
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(members)) = schema.get(key) {
                return union(members.iter().map(|member| self.type_of(member, refs, nesting)));
            }
        }
        if let Some(Value::Array(members)) = schema.get("allOf") {
            let parts: Vec<String> = members
                .iter()
                .map(|member| parenthesized(self.type_of(member, refs, nesting)))
                .collect();
            return if parts.is_empty() { "unknown".into() } else { parts.join(" & ") };
        }
        match schema.get("type") {
            Some(Value::String(kind)) => self.of_kind(kind, schema, refs, nesting),
            Some(Value::Array(kinds)) => union(
                kinds
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|k| self.of_kind(k, schema, refs, nesting)),
            ),
            _ if schema.contains_key("properties") => self.of_kind("object", schema, refs, nesting),
            _ if schema.contains_key("items") => self.of_kind("array", schema, refs, nesting),
            _ => "unknown".into(),
        }
    }

    fn of_kind(
        &self,
        kind: &str,
        schema: &Map<String, Value>,
        refs: usize,
        nesting: usize,
    ) -> String {
        match kind {
            "string" => "string".into(),
            "number" | "integer" => "number".into(),
            "boolean" => "boolean".into(),
            "null" => "null".into(),
            "array" => self.array(schema, refs, nesting),
            "object" => self.object(schema, refs, nesting),
            _ => "unknown".into(),
        }
    }

    fn array(&self, schema: &Map<String, Value>, refs: usize, nesting: usize) -> String {
        if let Some(Value::Array(items)) = schema.get("prefixItems") {
            let items: Vec<String> =
                items.iter().map(|item| self.type_of(item, refs, nesting + 1)).collect();
            return format!("[{}]", items.join(", "));
        }
        match schema.get("items") {
            Some(Value::Array(items)) => {
                let items: Vec<String> =
                    items.iter().map(|item| self.type_of(item, refs, nesting + 1)).collect();
                format!("[{}]", items.join(", "))
            }
            Some(items) => format!("{}[]", parenthesized(self.type_of(items, refs, nesting + 1))),
            None => "unknown[]".into(),
        }
    }

    fn object(&self, schema: &Map<String, Value>, refs: usize, nesting: usize) -> String {
        if nesting >= MAX_NESTING {
            return "object".into();
        }
        let properties = schema.get("properties").and_then(Value::as_object);
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let extra = match schema.get("additionalProperties") {
            Some(Value::Bool(false)) | None => None,
            Some(Value::Bool(true)) => Some("unknown".to_owned()),
            Some(extra) => Some(self.type_of(extra, refs, nesting + 1)),
        };
        let Some(properties) = properties.filter(|properties| !properties.is_empty()) else {
            return match extra {
                Some(extra) => format!("{{ [key: string]: {extra} }}"),
                None if schema.contains_key("additionalProperties") => "{}".into(),
                None if nesting == 0 => "{}".into(),
                None => "{ [key: string]: unknown }".into(),
            };
        };
        let mut members = Vec::new();
        for (name, property) in properties {
            let optional = if required.contains(&name.as_str()) { "" } else { "?" };
            let comment = if self.comments { comment_of(property) } else { None };
            let member = format!(
                "{}{optional}: {}",
                property_name(name),
                self.type_of(property, refs, nesting + 1)
            );
            members.push((comment, member));
        }
        if let Some(extra) = extra {
            members.push((None, format!("[key: string]: {extra}")));
        }
        if members.iter().all(|(comment, _)| comment.is_none()) {
            let members: Vec<&str> = members.iter().map(|(_, member)| member.as_str()).collect();
            return format!("{{ {} }}", members.join("; "));
        }
        let indent = "  ".repeat(nesting + 1);
        let mut out = String::from("{\n");
        for (comment, member) in &members {
            if let Some(comment) = comment {
                let _ = writeln!(out, "{indent}/** {comment} */");
            }
            let _ = writeln!(out, "{indent}{member};");
        }
        out.push_str(&"  ".repeat(nesting));
        out.push('}');
        out
    }

    /// A local reference (`#/$defs/X`, `#/definitions/X`, any `#/…` path).
    fn resolve(&self, reference: &str) -> Option<&Value> {
        let path = reference.strip_prefix('#')?;
        if path.is_empty() {
            return Some(self.root);
        }
        let pointer = path.replace("~1", "/").replace("~0", "~");
        self.root.pointer(&pointer).or_else(|| self.root.pointer(path))
    }
}

/// A property's description and default, as one comment line.
fn comment_of(property: &Value) -> Option<String> {
    let description = property.get("description").and_then(Value::as_str).and_then(first_line);
    let default = property.get("default").map(|value| {
        let shown = value.to_string();
        if shown.len() > 40 {
            "…".to_owned()
        } else {
            shown
        }
    });
    match (description, default) {
        (Some(text), Some(default)) => Some(format!("{text} (default {default})")),
        (Some(text), None) => Some(text),
        (None, Some(default)) => Some(format!("default {default}")),
        (None, None) => None,
    }
}

/// The first non-empty line of a text, cut to a comment's length, with
/// nothing that would end the comment early.
fn first_line(text: &str) -> Option<String> {
    let line = crate::protocol::first_line(text)?;
    let line = line.replace("*/", "* /");
    Some(match line.char_indices().nth(MAX_COMMENT) {
        Some((end, _)) => format!("{}…", &line[..end]),
        None => line,
    })
}

fn literal(value: &Value) -> String {
    let shown = value.to_string();
    if shown.len() > 80 {
        "unknown".into()
    } else {
        shown
    }
}

fn union(types: impl Iterator<Item = String>) -> String {
    let mut seen: Vec<String> = Vec::new();
    for kind in types {
        if !seen.contains(&kind) {
            seen.push(kind);
        }
    }
    if seen.is_empty() {
        "unknown".into()
    } else {
        seen.join(" | ")
    }
}

/// A type that is safe to follow with `[]` or join with `&`.
fn parenthesized(kind: String) -> String {
    if kind.contains(" | ") || kind.contains(" & ") {
        format!("({kind})")
    } else {
        kind
    }
}

/// A property name as TypeScript writes it: bare when it is an
/// identifier, quoted otherwise.
fn property_name(name: &str) -> String {
    let mut chars = name.chars();
    let identifier = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if identifier {
        name.to_owned()
    } else {
        Value::String(name.to_owned()).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(input: Value, output: Option<Value>) -> Tool {
        let mut tool: Tool = serde_json::from_value(json!({"name": "t"})).unwrap();
        tool.input_schema = input;
        tool.output_schema = output;
        tool
    }

    fn check(input: Value, expected: &str) {
        assert_eq!(signature("f", &tool(input, None)), expected);
    }

    #[test]
    fn plain_properties_on_one_line() {
        check(
            json!({"type": "object", "properties": {"text": {"type": "string"}, "n": {"type": "integer"}}, "required": ["text"]}),
            "f(args: { text: string; n?: number }): Promise<CallToolResult>",
        );
    }

    #[test]
    fn no_properties_is_an_empty_object() {
        check(json!({"type": "object"}), "f(args: {}): Promise<CallToolResult>");
        check(json!({}), "f(args: unknown): Promise<CallToolResult>");
    }

    #[test]
    fn enums_unions_arrays_and_maps() {
        check(
            json!({"type": "object", "properties": {
                "mode": {"enum": ["a", "b"]},
                "tags": {"type": "array", "items": {"type": ["string", "number"]}},
                "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "boolean"}]},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "x": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                "k": {"const": 3}
            }}),
            "f(args: { mode?: \"a\" | \"b\"; tags?: (string | number)[]; pair?: [string, boolean]; \
             labels?: { [key: string]: string }; x?: string | null; k?: 3 }): Promise<CallToolResult>",
        );
    }

    #[test]
    fn descriptions_and_defaults_lay_properties_out_one_per_line() {
        check(
            json!({"type": "object", "properties": {
                "query": {"type": "string", "description": "What to find.\nMore words."},
                "limit": {"type": "number", "default": 5},
                "where": {"type": "object", "properties": {"path": {"type": "string", "description": "A */ path"}}}
            }, "required": ["query"]}),
            "f(args: {\n  /** What to find. */\n  query: string;\n  /** default 5 */\n  limit?: number;\n  \
             where?: {\n    /** A * / path */\n    path?: string;\n  };\n}): Promise<CallToolResult>",
        );
    }

    #[test]
    fn local_references_are_followed_a_few_levels() {
        check(
            json!({"type": "object", "properties": {"p": {"$ref": "#/$defs/Point"}},
                   "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}, "next": {"$ref": "#/$defs/Point"}}}}}),
            "f(args: { p?: { x?: number; next?: { x?: number; next?: { x?: number; next?: { x?: number; \
             next?: unknown } } } } }): Promise<CallToolResult>",
        );
    }

    #[test]
    fn the_output_schema_types_the_result() {
        let shown = signature(
            "g",
            &tool(
                json!({"type": "object"}),
                Some(
                    json!({"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]}),
                ),
            ),
        );
        assert_eq!(shown, "g(args: {}): Promise<CallToolResult<{ count: number }>>");
    }

    #[test]
    fn a_schema_that_refers_to_itself_from_everywhere_is_bounded() {
        let properties: Map<String, Value> =
            (0..200).map(|i| (format!("p{i}"), json!({"$ref": "#"}))).collect();
        let started = std::time::Instant::now();
        let shown =
            signature("f", &tool(json!({"type": "object", "properties": properties}), None));
        assert!(started.elapsed() < std::time::Duration::from_secs(1), "{:?}", started.elapsed());
        assert!(shown.contains("too large"), "{shown}");
    }

    #[test]
    fn odd_names_are_quoted_and_huge_schemas_bounded() {
        check(
            json!({"type": "object", "properties": {"a-b": {"type": "string"}}, "required": ["a-b"]}),
            "f(args: { \"a-b\": string }): Promise<CallToolResult>",
        );
        let many: Map<String, Value> = (0..2000)
            .map(|i| {
                (format!("field{i}"), json!({"type": "string", "description": "x".repeat(50)}))
            })
            .collect();
        let shown = signature("f", &tool(json!({"type": "object", "properties": many}), None));
        assert!(shown.len() <= MAX_SIGNATURE, "{}", shown.len());
        assert!(shown.contains("too large"), "{shown}");
    }
}
