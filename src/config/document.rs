//! What tether reads of a configuration file, parsed without building the
//! rest: a file may be planted (a cloned repository's `.mcp.json`), and a
//! `serde_json::Value` of a whole file costs ten to fifty times its size.
//!
//! Only three top-level keys are kept: `mcpServers` (its first
//! [`MAX_ENTRIES_PER_FILE`] entries, with the count of all), `codemode`,
//! and whether VS Code's `servers` is there; everything else is skipped as
//! it is read (`IgnoredAny`), so it is checked for syntax but never held.

use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};

/// The most servers one file may hold: past it, the rest is ignored (and
/// said), so a planted file of many entries costs what 1,000 do.
pub(crate) const MAX_ENTRIES_PER_FILE: usize = 1000;

/// The parts of a configuration file tether uses.
#[derive(Default)]
pub(crate) struct ConfigDocument {
    /// `mcpServers`: absent, an object (its first entries), or something
    /// else (an error to report).
    pub(crate) servers: Servers,
    /// How many entries `mcpServers` has in all.
    pub(crate) server_count: usize,
    pub(crate) codemode: Option<Value>,
    /// VS Code's layout: `servers` without `mcpServers`.
    pub(crate) vs_code_servers: bool,
}

/// The `mcpServers` key of a file.
#[derive(Default)]
pub(crate) enum Servers {
    #[default]
    Absent,
    Object(Map<String, Value>),
    NotAnObject,
}

impl ConfigDocument {
    /// Parses `text`.
    ///
    /// # Errors
    /// The text is not JSON.
    pub(crate) fn parse(text: &str) -> Result<ConfigDocument, serde_json::Error> {
        serde_json::from_slice(text.as_bytes())
    }
}

impl<'de> Deserialize<'de> for ConfigDocument {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(DocumentVisitor)
    }
}

struct DocumentVisitor;

impl<'de> Visitor<'de> for DocumentVisitor {
    type Value = ConfigDocument;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a JSON document")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ConfigDocument, A::Error> {
        let mut document = ConfigDocument::default();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                // A key given twice: the last one counts, as in a `Value`.
                "mcpServers" => {
                    let Capped { servers, count } = map.next_value()?;
                    document.servers = servers;
                    document.server_count = count;
                }
                "codemode" => document.codemode = Some(map.next_value()?),
                "servers" => {
                    map.next_value::<IgnoredAny>()?;
                    document.vs_code_servers = true;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(document)
    }

    // A document that is not an object has no servers.
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<ConfigDocument, A::Error> {
        IgnoredAny.visit_seq(seq).map(|_| ConfigDocument::default())
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<ConfigDocument, E> {
        Ok(ConfigDocument::default())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<ConfigDocument, E> {
        Ok(ConfigDocument::default())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<ConfigDocument, E> {
        Ok(ConfigDocument::default())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<ConfigDocument, E> {
        Ok(ConfigDocument::default())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<ConfigDocument, E> {
        Ok(ConfigDocument::default())
    }
    fn visit_unit<E: de::Error>(self) -> Result<ConfigDocument, E> {
        Ok(ConfigDocument::default())
    }
}

/// `mcpServers`, its entries past the limit skipped as they are read.
struct Capped {
    servers: Servers,
    count: usize,
}

impl<'de> Deserialize<'de> for Capped {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(CappedVisitor)
    }
}

struct CappedVisitor;

impl CappedVisitor {
    fn not_an_object() -> Capped {
        Capped { servers: Servers::NotAnObject, count: 0 }
    }
}

impl<'de> Visitor<'de> for CappedVisitor {
    type Value = Capped;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("an object of servers")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Capped, A::Error> {
        let mut servers = Map::new();
        let mut count = 0;
        while let Some(name) = map.next_key::<String>()? {
            count += 1;
            if servers.len() < MAX_ENTRIES_PER_FILE || servers.contains_key(&name) {
                servers.insert(name, map.next_value()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(Capped { servers: Servers::Object(servers), count })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Capped, A::Error> {
        IgnoredAny.visit_seq(seq).map(|_| CappedVisitor::not_an_object())
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Capped, E> {
        Ok(CappedVisitor::not_an_object())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Capped, E> {
        Ok(CappedVisitor::not_an_object())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Capped, E> {
        Ok(CappedVisitor::not_an_object())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Capped, E> {
        Ok(CappedVisitor::not_an_object())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Capped, E> {
        Ok(CappedVisitor::not_an_object())
    }
    fn visit_unit<E: de::Error>(self) -> Result<Capped, E> {
        Ok(CappedVisitor::not_an_object())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_kept_parts_are_read_and_servers_are_capped() {
        let entries: Vec<String> =
            (0..1500).map(|n| format!("\"s{n}\": {{\"command\": \"x\"}}")).collect();
        let text = format!(
            "{{\"other\": [1, {{\"a\": [2]}}], \"codemode\": {{\"timeout\": 5}}, \
             \"mcpServers\": {{{}}}}}",
            entries.join(",")
        );
        let document = ConfigDocument::parse(&text).unwrap();
        let Servers::Object(servers) = &document.servers else { panic!("an object") };
        assert_eq!(servers.len(), MAX_ENTRIES_PER_FILE);
        assert!(servers.contains_key("s999") && !servers.contains_key("s1000"));
        assert_eq!(document.server_count, 1500);
        assert_eq!(document.codemode, Some(serde_json::json!({"timeout": 5})));
        assert!(!document.vs_code_servers);

        let document = ConfigDocument::parse(r#"{"mcpServers": [1], "servers": {}}"#).unwrap();
        assert!(matches!(document.servers, Servers::NotAnObject));
        assert!(document.vs_code_servers);
        for text in ["[1, 2]", "\"text\"", "null", "3"] {
            assert!(matches!(ConfigDocument::parse(text).unwrap().servers, Servers::Absent));
        }
        // Skipped parts are still checked for syntax.
        assert!(ConfigDocument::parse(r#"{"other": [1,, 2], "mcpServers": {}}"#).is_err());
    }
}
