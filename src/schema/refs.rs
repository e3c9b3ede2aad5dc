//! References within the schema checked: `#`, JSON pointers, `$anchor`,
//! `$dynamicAnchor` and `$id`. A reference outside the document is not
//! found, and its value then passes.

use serde_json::Value;

use super::Checker;

impl<'s> Checker<'s> {
    /// The schema a reference names in this document, if it can be found.
    pub(super) fn resolve(&mut self, reference: &str) -> Option<&'s Value> {
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
}

/// A JSON pointer from a URI fragment: percent escapes decoded (borrowed
/// when there are none).
fn unescape_pointer(pointer: &str) -> std::borrow::Cow<'_, str> {
    percent_encoding::percent_decode_str(pointer).decode_utf8_lossy()
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
