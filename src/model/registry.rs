//! The tool registry: qualified names for the model, mapped back to servers.
//!
//! A model sees one flat namespace of tool names limited to `[A-Za-z0-9_-]`
//! and 64 characters; servers name their tools freely. Qualified names are
//! `mcp__<server>__<tool>` with every other character made `_`; a name that is
//! too long, or that collides with one already taken, is cut and gets `_` plus
//! eight hex digits of a stable hash of the original, so the same tools always
//! get the same names. The registry is plain data; the hub guards it with a
//! mutex and never holds that lock during I/O.

use std::collections::HashMap;

use serde::Serialize;

use crate::config::Exposure;
use crate::protocol::Tool;

/// The longest tool name models accept.
pub const MAX_TOOL_NAME: usize = 64;

/// How qualified names are formed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NameStyle {
    /// `mcp__<server>__<tool>` (the default, as other MCP hosts do).
    #[default]
    Prefixed,
    /// `<server>__<tool>`.
    Short,
}

/// One tool in the registry.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct RegisteredTool {
    /// The name the model uses.
    pub qualified_name: String,
    /// The server's configured name.
    pub server: String,
    /// The tool as the server listed it (its `name` is the server's own).
    pub tool: Tool,
    /// How it reaches the model (from `exposure` and `toolExposure`).
    pub exposure: Exposure,
}

impl RegisteredTool {
    /// The tool as a codemode script reads it: a TypeScript-style signature
    /// from its input and output schemas,
    /// `mcp__s__t(args: { text: string }): Promise<CallToolResult>`, under
    /// the name a script writes (each `-`, JavaScript's minus, as `_`).
    pub fn signature(&self) -> String {
        let name = crate::config::name_key(&self.qualified_name);
        super::signature::signature(&name, &self.tool)
    }
}

/// All tools of all connected servers, by qualified name.
#[derive(Debug, Clone, Default)]
pub struct ToolRegistry {
    tools: Vec<RegisteredTool>,
    by_name: HashMap<String, usize>,
}

impl ToolRegistry {
    /// Builds the registry from each server's tools, in the given order
    /// (the order decides who keeps a contested name).
    pub fn build<'a>(
        servers: impl IntoIterator<Item = (&'a str, &'a [Tool])>,
        style: NameStyle,
    ) -> ToolRegistry {
        let listed: Vec<(&str, &Tool)> = servers
            .into_iter()
            .flat_map(|(server, tools)| tools.iter().map(move |tool| (server, tool)))
            .collect();
        // `mcp__a__x__y` reads as server `a__x`'s tool `y` and as server
        // `a`'s tool `x__y`. A tool whose own name has no `__` reads one
        // way only, so it is named first and keeps the plain name, whatever
        // the order of the servers; a tool it collides with is cut, and said.
        let mut names: Vec<Option<String>> = vec![None; listed.len()];
        let mut by_name = HashMap::with_capacity(listed.len());
        for splits_two_ways in [false, true] {
            for (at, (server, tool)) in listed.iter().enumerate() {
                if tool.name.contains("__") != splits_two_ways {
                    continue;
                }
                let plain = qualified_name(server, &tool.name, style);
                let name = match by_name.get(&plain) {
                    None => plain,
                    Some(&taken) => {
                        let cut = with_hash(&plain, server, &tool.name);
                        let (other_server, other): (&str, &Tool) = listed[taken];
                        say_once(&cut, || {
                            format!(
                                "tool {:?} of server {server:?} would be named {plain} as tool {:?} \
                                 of server {other_server:?} is; it is named {cut}",
                                tool.name, other.name
                            )
                        });
                        cut
                    }
                };
                by_name.insert(name.clone(), at);
                names[at] = Some(name);
            }
        }
        let tools = listed
            .into_iter()
            .zip(names)
            .map(|((server, tool), name)| RegisteredTool {
                qualified_name: name.unwrap_or_default(),
                server: server.to_owned(),
                tool: tool.clone(),
                exposure: Exposure::Direct,
            })
            .collect();
        ToolRegistry { tools, by_name }
    }

    /// Sets every tool's exposure from `(server, tool name) -> exposure`.
    pub fn with_exposure(mut self, exposure_of: impl Fn(&str, &str) -> Exposure) -> ToolRegistry {
        for entry in &mut self.tools {
            entry.exposure = exposure_of(&entry.server, &entry.tool.name);
        }
        self
    }

    /// Finds a tool by qualified name.
    pub fn get(&self, qualified_name: &str) -> Option<&RegisteredTool> {
        self.by_name.get(qualified_name).map(|&index| &self.tools[index])
    }

    /// Every tool, in server order then the server's order.
    pub fn tools(&self) -> &[RegisteredTool] {
        &self.tools
    }
}

/// Warns once per process about a name given in place of a contested one
/// (the registry is built again on every change).
fn say_once(name: &str, message: impl FnOnce() -> String) {
    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut said = SAID.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if said.len() < 1000 && !said.iter().any(|seen| seen == name) {
        said.push(name.to_owned());
        log::warn!("{}", message());
    }
}

/// The qualified name of a server's tool before any collision handling.
pub fn qualified_name(server: &str, tool: &str, style: NameStyle) -> String {
    let joined = match style {
        NameStyle::Prefixed => format!("mcp__{server}__{tool}"),
        NameStyle::Short => format!("{server}__{tool}"),
    };
    let cleaned: String = joined
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
        .collect();
    if cleaned.len() > MAX_TOOL_NAME {
        with_hash(&cleaned, server, tool)
    } else {
        cleaned
    }
}

/// The namespace of a server's tools: `mcp__server` (`server` with the
/// short style), what comes before `__tool` in each of their names.
pub(crate) fn namespace(server: &str, style: NameStyle) -> String {
    let prefix = qualified_name(server, "", style);
    prefix.strip_suffix("__").map_or_else(|| prefix.clone(), str::to_owned)
}

/// Cuts a cleaned name so that `_` and the hash fit in 64 characters.
fn with_hash(cleaned: &str, server: &str, tool: &str) -> String {
    let suffix = format!("_{:08x}", stable_hash(server, tool));
    // The cleaned name is ASCII, so any byte index is a char boundary.
    let keep = cleaned.len().min(MAX_TOOL_NAME - suffix.len());
    format!("{}{suffix}", &cleaned[..keep])
}

/// FNV-1a over `server`, a separator and `tool`, folded to 32 bits. Stable
/// across runs, platforms and versions, unlike the std hasher.
fn stable_hash(server: &str, tool: &str) -> u32 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in server.bytes().chain([0u8]).chain(tool.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (hash ^ (hash >> 32)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str) -> Tool {
        serde_json::from_value(serde_json::json!({"name": name})).unwrap()
    }

    #[test]
    fn plain_names_are_prefixed() {
        assert_eq!(
            qualified_name("demo", "count_words", NameStyle::Prefixed),
            "mcp__demo__count_words"
        );
        assert_eq!(qualified_name("demo", "count_words", NameStyle::Short), "demo__count_words");
    }

    #[test]
    fn odd_characters_become_underscores() {
        assert_eq!(
            qualified_name("fs", "read.file v2/wörd", NameStyle::Prefixed),
            "mcp__fs__read_file_v2_w_rd"
        );
    }

    #[test]
    fn long_names_are_cut_with_a_stable_hash() {
        let long = "x".repeat(100);
        let name = qualified_name("srv", &long, NameStyle::Prefixed);
        assert_eq!(name.len(), MAX_TOOL_NAME);
        assert_eq!(name, qualified_name("srv", &long, NameStyle::Prefixed));
        assert!(name.starts_with("mcp__srv__xxx"));
        assert_eq!(&name[55..56], "_");
        assert!(name[56..].chars().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn collisions_after_cleaning_get_distinct_names_that_map_back() {
        let tools = [tool("a.b"), tool("a b"), tool("a_b")];
        let registry = ToolRegistry::build([("s", &tools[..])], NameStyle::Prefixed);
        let names: Vec<&str> = registry.tools().iter().map(|t| t.qualified_name.as_str()).collect();
        assert_eq!(names[0], "mcp__s__a_b");
        assert!(names[1].starts_with("mcp__s__a_b_") && names[1].len() == "mcp__s__a_b_".len() + 8);
        assert_ne!(names[1], names[2]);
        for (entry, original) in registry.tools().iter().zip(["a.b", "a b", "a_b"]) {
            assert_eq!(registry.get(&entry.qualified_name).unwrap().tool.name, original);
        }
    }

    #[test]
    fn a_name_that_reads_two_ways_goes_to_the_tool_without_underscores() {
        // Issue 27 (item 11): server `a`'s tool `x__y` and server `a__x`'s
        // tool `y` both read as `mcp__a__x__y`; in either order, the name
        // is `a__x`'s `y`, and `a`'s `x__y` is cut.
        let double = [tool("x__y")];
        let single = [tool("y")];
        for order in [
            [("a", &double[..]), ("a__x", &single[..])],
            [("a__x", &single[..]), ("a", &double[..])],
        ] {
            let registry = ToolRegistry::build(order, NameStyle::Prefixed);
            let plain = registry.get("mcp__a__x__y").unwrap();
            assert_eq!((plain.server.as_str(), plain.tool.name.as_str()), ("a__x", "y"));
            let cut = registry.tools().iter().find(|entry| entry.server == "a").unwrap();
            assert!(cut.qualified_name.starts_with("mcp__a__x__y_"), "{}", cut.qualified_name);
            assert_eq!(registry.get(&cut.qualified_name).unwrap().tool.name, "x__y");
            // The order of the tools is still the servers' order.
            assert_eq!(registry.tools()[0].server, order[0].0);
        }
    }

    #[test]
    fn servers_keep_their_own_tools_apart() {
        let one = [tool("echo")];
        let two = [tool("echo")];
        let registry = ToolRegistry::build([("a", &one[..]), ("b", &two[..])], NameStyle::Prefixed);
        assert_eq!(registry.get("mcp__b__echo").unwrap().server, "b");
        assert_eq!(registry.get("mcp__a__echo").unwrap().server, "a");
    }
}
