//! What a script can ask about the tools, answered from one snapshot taken
//! at the script's start: the names `tools` answers to, `describeNamespace`,
//! `searchTools` (the hub's BM25 ranking, with TypeScript signatures) and
//! `ALL_TOOLS`. Also which servers a script names, so that only those are
//! waited for (or started, by `tether run`).
//!
//! Hidden tools are not in the snapshot: for a script they do not exist.
//! Names are the hub's qualified names; a server or tool name with `-` is
//! also reachable with `_` in its place, since `tools.mcp__dev-radius__x`
//! is not JavaScript.

use serde_json::{json, Value};

use crate::config::{name_key, Exposure};
use crate::model::registry::{namespace, NameStyle, RegisteredTool};
use crate::model::search::{SearchDoc, SearchIndex};
use crate::model::signature::signature;
use crate::protocol::first_line;
use crate::spelling::closest;

/// How many matches `searchTools` returns unless asked for another number.
const DEFAULT_MATCHES: usize = 10;
/// The most matches `searchTools` returns.
const MAX_MATCHES: usize = 50;

/// One configured server as a script sees it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ServerSummary {
    /// The configured name.
    pub(crate) name: String,
    /// The configured `description`.
    pub(crate) description: Option<String>,
    /// The server's `instructions`, once it connected.
    pub(crate) instructions: Option<String>,
    /// Whether it is connected now.
    pub(crate) connected: bool,
    /// Its state, in `list`'s words (`ready`, `failed`, `disabled`, …).
    pub(crate) state: &'static str,
    /// Why it is not connected, when it failed.
    pub(crate) error: Option<String>,
}

/// The reachable tools and the servers, as a script's start found them.
#[derive(Debug, Clone, Default)]
pub(crate) struct Catalog {
    /// Every tool that is not hidden.
    pub(crate) tools: Vec<RegisteredTool>,
    /// The qualified names of the hidden ones, to say so when called.
    hidden: Vec<String>,
    pub(crate) servers: Vec<ServerSummary>,
    pub(crate) style: NameStyle,
}

impl Catalog {
    /// A snapshot of `tools` (hidden ones left out) and `servers`.
    pub(crate) fn new(
        tools: &[RegisteredTool],
        servers: Vec<ServerSummary>,
        style: NameStyle,
    ) -> Catalog {
        let (hidden, tools): (Vec<&RegisteredTool>, Vec<&RegisteredTool>) =
            tools.iter().partition(|entry| entry.exposure == Exposure::Hidden);
        Catalog {
            tools: tools.into_iter().cloned().collect(),
            hidden: hidden.into_iter().map(|entry| entry.qualified_name.clone()).collect(),
            servers,
            style,
        }
    }

    /// The name a script writes for a tool: its qualified name, with `_`
    /// for each `-` (`tools.mcp__dev_radius__look_up`; a `-` is JavaScript's
    /// minus), unless another tool has that spelling.
    pub(crate) fn script_name<'a>(&self, entry: &'a RegisteredTool) -> std::borrow::Cow<'a, str> {
        let alias = name_key(&entry.qualified_name);
        let taken = || self.tools.iter().any(|other| other.qualified_name == alias);
        if alias == entry.qualified_name || taken() {
            std::borrow::Cow::Borrowed(&entry.qualified_name)
        } else {
            std::borrow::Cow::Owned(alias)
        }
    }

    /// The names `tools` answers to: each qualified name, and its spelling
    /// with `_` for `-` when that differs and no other tool has it.
    pub(crate) fn tool_names(&self) -> Vec<String> {
        let mut names: Vec<String> =
            self.tools.iter().map(|entry| entry.qualified_name.clone()).collect();
        for entry in &self.tools {
            let alias = name_key(&entry.qualified_name);
            if !names.contains(&alias) {
                names.push(alias);
            }
        }
        names
    }

    /// The tool a script's name means: the qualified name, else the one
    /// spelt the same with `-` and `_` taken as equal.
    ///
    /// # Errors
    /// No such tool: the message says why (no such server, a hidden tool, a
    /// name without its server) and the closest name there is.
    pub(crate) fn resolve(&self, name: &str) -> Result<&RegisteredTool, String> {
        let exact = self.tools.iter().find(|entry| entry.qualified_name == name);
        let key = name_key(name);
        if let Some(found) =
            exact.or_else(|| self.tools.iter().find(|entry| name_key(&entry.qualified_name) == key))
        {
            return Ok(found);
        }
        Err(self.why_unknown(name, &key))
    }

    /// Why `name` is no tool, and what comes closest.
    fn why_unknown(&self, name: &str, key: &str) -> String {
        const SEARCH: &str = "searchTools(\"…\") finds tools";
        if self.hidden.iter().any(|hidden| name_key(hidden) == key) {
            return format!("{name} is hidden (its exposure is \"hidden\"): no script can call it");
        }
        let server = self.servers.iter().find(|server| {
            key.starts_with(&format!("{}__", name_key(&self.namespace(&server.name))))
        });
        if let Some(server) = server {
            let mine: Vec<String> = self
                .tools
                .iter()
                .filter(|entry| entry.server == server.name)
                .map(|entry| self.script_name(entry).into_owned())
                .collect();
            let known: Vec<&str> = mine.iter().map(String::as_str).collect();
            return match closest(name, &known) {
                Some(close) => format!("no tool named {name} (did you mean {close}?)"),
                None if mine.is_empty() => {
                    format!("server {:?} has no tools a script can call", server.name)
                }
                None => format!(
                    "server {:?} has no tool named {name}; its tools: {}",
                    server.name,
                    shorten(&known)
                ),
            };
        }
        if let Some((namespace, _)) = name.rsplit_once("__") {
            let known: Vec<String> =
                self.servers.iter().map(|server| self.namespace(&server.name)).collect();
            let known: Vec<&str> = known.iter().map(String::as_str).collect();
            let hint = match closest(namespace, &known) {
                Some(close) => format!(" (did you mean {close}?)"),
                None if known.is_empty() => " (none is configured)".to_owned(),
                None => format!("; the servers are {}", shorten(&known)),
            };
            return format!("no tool named {name}: no server {namespace}{hint}");
        }
        // A tool's own name, without its server.
        let owners: Vec<String> = self
            .tools
            .iter()
            .filter(|entry| name_key(&entry.tool.name) == key)
            .map(|entry| self.script_name(entry).into_owned())
            .collect();
        match owners.first() {
            Some(full) => format!("no tool named {name} (did you mean {full}?)"),
            None => {
                format!("no tool named {name}: tools are named mcp__<server>__<tool>; {SEARCH}")
            }
        }
    }

    /// The server a namespace means: `mcp__dev-radius`, `mcp__dev_radius`,
    /// `dev-radius` or `dev_radius` (and a tool's qualified name prefix).
    pub(crate) fn server_of_namespace(&self, namespace: &str) -> Option<&ServerSummary> {
        let trimmed = namespace.trim().trim_end_matches("__");
        let bare = trimmed.strip_prefix("mcp__").unwrap_or(trimmed);
        let key = name_key(bare);
        self.servers.iter().find(|server| name_key(&server.name) == key).or_else(|| {
            self.servers
                .iter()
                .find(|server| name_key(&self.namespace(&server.name)) == name_key(trimmed))
        })
    }

    /// The namespace of a server's tools: `mcp__server` (or `server` with
    /// the short name style).
    pub(crate) fn namespace(&self, server: &str) -> String {
        namespace(server, self.style)
    }

    /// `describeNamespace(ns)`: the server's name, description,
    /// instructions and tools.
    ///
    /// # Errors
    /// No server of that name; the message lists the servers.
    pub(crate) fn describe(&self, namespace: &str) -> Result<Value, String> {
        let Some(server) = self.server_of_namespace(namespace) else {
            let known: Vec<String> =
                self.servers.iter().map(|server| self.namespace(&server.name)).collect();
            return Err(format!(
                "no server named {namespace:?}; the servers are: {}",
                if known.is_empty() { "(none)".to_owned() } else { known.join(", ") }
            ));
        };
        let tools: Vec<String> = self
            .tools
            .iter()
            .filter(|entry| entry.server == server.name)
            .map(|entry| self.script_name(entry).into_owned())
            .collect();
        Ok(json!({
            "name": name_key(&self.namespace(&server.name)),
            "server": server.name,
            "description": server.description,
            "instructions": server.instructions,
            "connected": server.connected,
            "state": server.state,
            "error": server.error,
            "tools": tools,
        }))
    }

    /// `searchTools(query, {namespace, limit})`: the best matches by the
    /// hub's ranking, each with its signature. An empty query lists the
    /// tools (of the namespace) in order.
    ///
    /// # Errors
    /// The namespace names no server.
    pub(crate) fn search(
        &self,
        query: &str,
        namespace: Option<&str>,
        limit: Option<usize>,
    ) -> Result<Value, String> {
        let limit = limit.unwrap_or(DEFAULT_MATCHES).clamp(1, MAX_MATCHES);
        let server = match namespace {
            Some(namespace) => match self.server_of_namespace(namespace) {
                Some(server) => Some(server.name.as_str()),
                None => return Err(self.describe(namespace).unwrap_err()),
            },
            None => None,
        };
        let candidates: Vec<&RegisteredTool> = self
            .tools
            .iter()
            .filter(|entry| server.is_none_or(|server| entry.server == server))
            .collect();
        let found: Vec<&RegisteredTool> = if query.trim().is_empty() {
            candidates.iter().take(limit).copied().collect()
        } else {
            let index = SearchIndex::new(
                candidates
                    .iter()
                    .map(|entry| {
                        SearchDoc::for_tool(entry, self.about(&entry.server).unwrap_or_default())
                    })
                    .collect(),
            );
            index.search(query, limit).into_iter().map(|(index, _)| candidates[index]).collect()
        };
        Ok(Value::Array(
            found
                .into_iter()
                .map(|entry| {
                    let name = self.script_name(entry);
                    json!({
                        "name": name,
                        "server": entry.server,
                        "description": entry.tool.description.as_deref().unwrap_or(""),
                        "signature": signature(&name, &entry.tool),
                    })
                })
                .collect(),
        ))
    }

    /// `ALL_TOOLS`: every reachable tool with its description and hints.
    pub(crate) fn all_tools(&self) -> Value {
        Value::Array(
            self.tools
                .iter()
                .map(|entry| {
                    let hints =
                        ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"];
                    let mut annotations = serde_json::Map::new();
                    for hint in hints {
                        if let Some(value) =
                            entry.tool.annotations.as_ref().and_then(|given| given.get(hint))
                        {
                            annotations.insert(hint.to_owned(), value.clone());
                        }
                    }
                    json!({
                        "name": self.script_name(entry),
                        "server": entry.server,
                        "description": entry.tool.description.as_deref().unwrap_or(""),
                        "annotations": annotations,
                    })
                })
                .collect(),
        )
    }

    /// A server's description, or the first line of its instructions.
    fn about(&self, server: &str) -> Option<String> {
        let summary = self.servers.iter().find(|summary| summary.name == server)?;
        summary
            .description
            .clone()
            .or_else(|| summary.instructions.as_deref().and_then(first_line).map(str::to_owned))
    }
}

/// Which servers a script needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Named {
    /// All of them: it searches or lists every tool or resource.
    All,
    /// These (by configured name), in configuration order.
    Some(Vec<String>),
}

/// The servers `code` names, from `servers` (configured names): as a
/// namespace (`mcp__name`, `name__tool`) or as a whole word (a string
/// `"name"`), with `-` and `_` taken as equal. A script that calls
/// `searchTools` or `describeNamespace`, reads `ALL_TOOLS`, lists
/// resources or names a tool it computes (`tools[name]`) needs them all.
pub fn servers_named(code: &str, servers: &[&str]) -> Named {
    let everything = ["searchTools", "ALL_TOOLS", "listResources", "describeNamespace"];
    if everything.iter().any(|word| code.contains(word)) || computes_a_name(code) {
        return Named::All;
    }
    let key = name_key(code);
    let named: Vec<String> = servers
        .iter()
        .filter(|server| mentions(&key, &name_key(server)))
        .map(|server| (*server).to_owned())
        .collect();
    // Calls that name no server (`tools.count_words`) are answered better
    // with every server there: "did you mean mcp__demo__count_words?".
    if named.is_empty() && (code.contains("tools.") || code.contains("tools[")) {
        return Named::All;
    }
    Named::Some(named)
}

/// Whether the code finds its tools by looking at `tools` itself: a name it
/// computes (`tools[` not followed by a plain string), or `tools` as a
/// whole (`Object.keys(tools)`, `for (name in tools)`).
fn computes_a_name(code: &str) -> bool {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$';
    code.match_indices("tools").any(|(at, found)| {
        if code[..at].chars().next_back().is_some_and(|c| is_name(c) || c == '.') {
            return false; // Part of another name, or a property of something.
        }
        let after = &code[at + found.len()..];
        match after.chars().next() {
            Some(c) if is_name(c) || c == '.' => false,
            Some('[') => {
                let key = after[1..].trim_start();
                let templated = key.starts_with('`')
                    && key[1..].split('`').next().is_some_and(|text| text.contains("${"));
                !key.starts_with(['"', '\'', '`']) || templated
            }
            _ => true,
        }
    })
}

/// The first names of a list, and how many more.
fn shorten(names: &[&str]) -> String {
    const SHOWN: usize = 8;
    let mut text = names.iter().take(SHOWN).copied().collect::<Vec<_>>().join(", ");
    if names.len() > SHOWN {
        text.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    text
}

/// Whether `word` occurs in `text` as a name: not inside a longer word,
/// where `mcp__` before it and `__` after it count as edges.
fn mentions(text: &str, word: &str) -> bool {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let mut from = 0;
    while let Some(found) = text[from..].find(word) {
        let start = from + found;
        let end = start + word.len();
        let before = &text[..start];
        let after = &text[end..];
        let left = before.ends_with("mcp__") || !before.chars().next_back().is_some_and(is_name);
        let right = after.starts_with("__") || !after.chars().next().is_some_and(is_name);
        if left && right {
            return true;
        }
        from = start + 1;
        while !text.is_char_boundary(from) {
            from += 1;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::registry::ToolRegistry;
    use crate::protocol::Tool;

    fn catalog() -> Catalog {
        let tools: Vec<Tool> = vec![
            serde_json::from_value(json!({"name": "word_count", "description": "Counts the words in a text.",
                "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
                "annotations": {"readOnlyHint": true, "title": "x"}})).unwrap(),
            serde_json::from_value(json!({"name": "secret"})).unwrap(),
        ];
        let other: Vec<Tool> = vec![serde_json::from_value(
            json!({"name": "look-up", "description": "Finds a radius."}),
        )
        .unwrap()];
        let registry = ToolRegistry::build(
            [("wordcount", &tools[..]), ("dev-radius", &other[..])],
            NameStyle::Prefixed,
        )
        .with_exposure(|_, tool| {
            if tool == "secret" {
                Exposure::Hidden
            } else {
                Exposure::Codemode
            }
        });
        let servers = vec![
            ServerSummary {
                name: "wordcount".into(),
                description: Some("counts words".into()),
                instructions: None,
                connected: true,
                state: "connected",
                error: None,
            },
            ServerSummary {
                name: "dev-radius".into(),
                description: None,
                instructions: Some("\nRadius lookups.\nMore.".into()),
                connected: true,
                state: "connected",
                error: None,
            },
        ];
        Catalog::new(registry.tools(), servers, NameStyle::Prefixed)
    }

    #[test]
    fn hidden_tools_do_not_exist_and_dashes_have_an_underscore_alias() {
        let catalog = catalog();
        assert_eq!(
            catalog.tool_names(),
            ["mcp__wordcount__word_count", "mcp__dev-radius__look-up", "mcp__dev_radius__look_up"]
        );
        assert_eq!(catalog.resolve("mcp__dev_radius__look_up").unwrap().tool.name, "look-up");
        let hidden = catalog.resolve("mcp__wordcount__secret").unwrap_err();
        assert!(hidden.starts_with("mcp__wordcount__secret is hidden"), "{hidden}");
        let typo = catalog.resolve("mcp__wordcount__word_cont").unwrap_err();
        assert!(typo.contains("did you mean mcp__wordcount__word_count?"), "{typo}");
    }

    #[test]
    fn a_namespace_is_found_by_any_of_its_spellings() {
        let catalog = catalog();
        for spelling in ["mcp__dev-radius", "mcp__dev_radius", "dev-radius", "dev_radius"] {
            let described = catalog.describe(spelling).unwrap();
            assert_eq!(described["name"], "mcp__dev_radius", "{spelling}");
            assert_eq!(described["tools"], json!(["mcp__dev_radius__look_up"]));
            assert_eq!(described["instructions"], "\nRadius lookups.\nMore.");
        }
        let missing = catalog.describe("nope").unwrap_err();
        assert!(missing.contains("mcp__wordcount, mcp__dev-radius"), "{missing}");
    }

    #[test]
    fn search_ranks_and_gives_signatures() {
        let catalog = catalog();
        let found = catalog.search("count words", None, None).unwrap();
        assert_eq!(found[0]["name"], "mcp__wordcount__word_count");
        assert_eq!(
            found[0]["signature"],
            "mcp__wordcount__word_count(args: { text: string }): Promise<CallToolResult>"
        );
        let listed = catalog.search("", Some("dev_radius"), Some(5)).unwrap();
        assert_eq!(listed.as_array().unwrap().len(), 1);
        assert!(catalog.search("x", Some("nope"), None).is_err());
    }

    #[test]
    fn all_tools_carry_the_four_hints_only() {
        let all = catalog().all_tools();
        assert_eq!(all.as_array().unwrap().len(), 2);
        assert_eq!(all[0]["annotations"], json!({"readOnlyHint": true}));
        assert_eq!(all[1]["annotations"], json!({}));
    }

    #[test]
    fn the_servers_a_script_names() {
        let servers = ["wordcount", "dev-radius", "word"];
        let named = |code: &str| servers_named(code, &servers);
        assert_eq!(
            named("return await tools.mcp__wordcount__word_count({text: 'a'})"),
            Named::Some(vec!["wordcount".into()])
        );
        assert_eq!(
            named("await tools.mcp__dev_radius__look_up(); tools['mcp__dev-radius__look-up']()"),
            Named::Some(vec!["dev-radius".into()])
        );
        assert_eq!(named("describeNamespace('dev_radius')"), Named::All);
        assert_eq!(named("const n = 'mcp__word__x'; tools[n]()"), Named::All);
        assert_eq!(named("return Object.keys(tools)"), Named::All);
        assert_eq!(named("return tools[`mcp__word__x`]({})"), Named::Some(vec!["word".into()]));
        assert_eq!(named("const tools_used = 1; return my.tools"), Named::Some(vec![]));
        assert_eq!(named("const words = 1; return words"), Named::Some(vec![]));
        assert_eq!(named("return ALL_TOOLS.length"), Named::All);
        assert_eq!(named("readResource(\"word\", \"x://y\")"), Named::Some(vec!["word".into()]));
    }
}
