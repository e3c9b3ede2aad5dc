//! What the model sees, in one home: the registry of qualified tool names
//! (`registry.rs`), the tools offered each turn and the hub's own
//! (`tools.rs`), the ranking behind `tool_search` (`search.rs`), a tool
//! result shaped for a model (`shaping.rs`), a tool as a TypeScript signature
//! for codemode scripts (`signature.rs`), and the servers section of the
//! system prompt (`servers_prompt.rs`).
//!
//! Nothing here talks to a server or holds the hub's lock: the hub hands
//! over a snapshot and asks what to declare, what matches, what to show.

pub(crate) mod registry;
pub(crate) mod search;
pub(crate) mod servers_prompt;
mod shaping;
pub(crate) mod signature;
pub(crate) mod tools;

pub use registry::{NameStyle, RegisteredTool};
pub use servers_prompt::ServersPrompt;
pub use shaping::{shape_result, ModelBlock, ModelResult, ResultLimits};
pub use tools::{ModelTool, CODEMODE, TOOL_SEARCH};

use crate::config::Exposure;
pub(crate) use crate::protocol::{clip, floor_char_boundary};

/// How a tool is reached in this build: `codemode` needs the script engine
/// (the `codemode` feature), and is `deferred` without it.
pub(crate) fn reached_as(exposure: Exposure) -> Exposure {
    if exposure == Exposure::Codemode && !cfg!(feature = "codemode") {
        Exposure::Deferred
    } else {
        exposure
    }
}
