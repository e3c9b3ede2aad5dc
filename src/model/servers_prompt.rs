//! The servers section of a host's system prompt: one line per server whose
//! tools the model is not given directly (codemode or deferred), saying how
//! they are reached and what the server is for, so that the model knows
//! what to look for before it looks.
//!
//! A host appends a new section when it changed rather than rewriting
//! earlier turns (which would throw away a model provider's prompt cache),
//! so each section carries a generation that moves only when its text does.

use serde::Serialize;

use super::clip;
use crate::protocol::first_line;

/// The servers section for the system prompt, and when it last changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ServersPrompt {
    /// The section; empty when no server has codemode or deferred tools.
    pub text: String,
    /// Moves by one each time the text differs from the one before: a host
    /// that kept the generation it last showed knows when to show it again.
    pub generation: u64,
}

/// One server as the section shows it.
pub(crate) struct PromptServer {
    /// `mcp__name` (or `name`, with the short name style).
    pub(crate) namespace: String,
    /// Some of its tools are reached from codemode scripts.
    pub(crate) codemode: bool,
    /// Some are found with `tool_search`.
    pub(crate) deferred: bool,
    /// Its description, or the first line of its instructions.
    pub(crate) about: Option<String>,
}

/// The section's text for these servers (those with neither kind of tool
/// are left out); empty when none is left.
pub(crate) fn servers_section(servers: &[PromptServer]) -> String {
    let shown: Vec<&PromptServer> =
        servers.iter().filter(|server| server.codemode || server.deferred).collect();
    if shown.is_empty() {
        return String::new();
    }
    let mut text = String::from("MCP servers whose tools are not listed as tools here:\n");
    for server in &shown {
        let how = match (server.codemode, server.deferred) {
            (true, true) => "codemode, deferred",
            (true, false) => "codemode",
            _ => "deferred",
        };
        let about = server
            .about
            .as_deref()
            .and_then(first_line)
            .map(|line| format!(": {}", clip(line)))
            .unwrap_or_default();
        text.push_str(&format!("- {} ({how}){about}\n", server.namespace));
    }
    if shown.iter().any(|server| server.codemode) {
        text.push_str(
            "Reach codemode tools from a script run by the `codemode` tool: \
             `await tools.<namespace>__<tool>(args)`; `searchTools(query)` gives their signatures.\n",
        );
    }
    if shown.iter().any(|server| server.deferred) {
        text.push_str(
            "Find deferred tools with the `tool_search` tool; found tools can be called.\n",
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(
        namespace: &str,
        codemode: bool,
        deferred: bool,
        about: Option<&str>,
    ) -> PromptServer {
        PromptServer {
            namespace: namespace.into(),
            codemode,
            deferred,
            about: about.map(str::to_owned),
        }
    }

    #[test]
    fn one_line_per_server_with_how_and_what() {
        let text = servers_section(&[
            server("mcp__wordcount", true, false, Some("counts words")),
            server("mcp__plain", false, false, Some("declared directly")),
            server("mcp__docs", false, true, Some("\nSearches the docs.\nMore.")),
            server("mcp__both", true, true, None),
        ]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[1], "- mcp__wordcount (codemode): counts words");
        assert_eq!(lines[2], "- mcp__docs (deferred): Searches the docs.");
        assert_eq!(lines[3], "- mcp__both (codemode, deferred)");
        assert!(lines[4].contains("`codemode` tool"), "{text}");
        assert!(lines[5].contains("`tool_search`"), "{text}");
    }

    #[test]
    fn no_such_server_no_section() {
        assert_eq!(servers_section(&[server("mcp__plain", false, false, None)]), "");
    }
}
