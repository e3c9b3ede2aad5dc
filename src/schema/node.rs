//! A schema object with the keywords it holds found once: a check asks
//! each object about some forty keywords, and most hold a handful, so a
//! miss is a bit test rather than a hash of the keyword.

use serde_json::{Map, Value};

/// A schema object with the keywords it holds found in one pass: most
/// schemas hold a handful of the forty keywords a check asks about, and a
/// miss is then a bit test, not a hash of the key.
pub(super) struct Node<'s> {
    map: &'s Map<String, Value>,
    present: u64,
}

impl<'s> Node<'s> {
    pub(super) fn new(map: &'s Map<String, Value>) -> Node<'s> {
        let present = map.keys().filter_map(|key| bit(key)).fold(0, |bits, bit| bits | 1 << bit);
        Node { map, present }
    }

    pub(super) fn get(&self, keyword: &str) -> Option<&'s Value> {
        match bit(keyword) {
            Some(bit) if self.present & (1 << bit) == 0 => None,
            _ => self.map.get(keyword),
        }
    }

    pub(super) fn contains_key(&self, keyword: &str) -> bool {
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
