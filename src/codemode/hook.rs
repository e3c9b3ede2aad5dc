//! The host's say over a script's calls: a hook that sees each call before
//! it is made, with the `codemode` call it belongs to, and may deny it (a
//! permission prompt, a policy on `destructiveHint`), and sees it again
//! when it ended.

use std::sync::Arc;

use serde_json::Value;

use super::NestedCall;

/// The `codemode` call a script's calls belong to.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ParentCall {
    /// The model tool's name (`codemode`).
    pub tool: String,
    /// The script's source.
    pub code: Arc<str>,
    /// A number for this run, unique within the hub.
    pub run: u64,
}

/// A call a script is about to make.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PlannedCall {
    /// The tool's qualified name (`mcp__server__tool`), or `readResource`.
    pub name: String,
    /// The server it goes to.
    pub server: String,
    /// The server's own name for the tool, for a tool call.
    pub tool: Option<String>,
    /// The arguments (for a resource read: `{"uri": …}`).
    pub arguments: Value,
    /// The tool's hints (`readOnlyHint`, `destructiveHint`, …), as the
    /// server gave them: for the host's policy, never trusted for more.
    pub annotations: Option<Value>,
    /// The script it comes from.
    pub parent: ParentCall,
}

/// What the hook decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Make the call.
    Allow,
    /// Do not; the script's promise rejects with this reason.
    Deny(String),
}

/// Sees a script's calls. Called on the script's engine thread: a slow
/// answer (a person deciding) holds the script, and the script's deadline
/// does not cut the hook short, so a hook that may wait long should watch
/// the time itself.
pub trait CallHook: Send + Sync {
    /// Before each call: allow it or deny it.
    fn before_call(&self, call: &PlannedCall) -> Verdict;

    /// After each call ended, was turned back (an unknown tool) or denied.
    /// Does nothing by default.
    fn after_call(&self, _call: &NestedCall, _parent: &ParentCall) {}
}

impl<F> CallHook for F
where
    F: Fn(&PlannedCall) -> Verdict + Send + Sync,
{
    fn before_call(&self, call: &PlannedCall) -> Verdict {
        self(call)
    }
}
