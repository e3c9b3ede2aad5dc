//! Codemode: the model writes one short JavaScript script that calls many
//! tools, and only what the script returns reaches the model.
//!
//! The script runs on embedded QuickJS (`rquickjs`, behind the `codemode`
//! feature), built from the engine's C core only: no file system, network,
//! process, module loader, timers or `std`/`os`. The language is the
//! sandbox, and what the script can reach is a handful of frozen globals
//! made for it in a fresh runtime (`prelude.js`): `tools.mcp__<server>__<tool>`,
//! `searchTools`, `describeNamespace`, `ALL_TOOLS`, `listResources`,
//! `readResource`, `image` and `console`.
//!
//! The shape keeps tether's promise. The engine runs on one thread: the
//! caller's own when its stack has room for the script's stack limit (a
//! script's call then goes out from the thread a direct call would), else
//! a `codemode` thread sized for it (`stack.rs`). A tool call from the
//! script is a request queued by the engine and made through the hub's
//! normal call path (`ScriptHost`), so allow-lists, exposure, timeouts,
//! progress, cancellation and reconnects apply unchanged. A lone call is
//! made on the engine's thread itself (the script has nothing else to do
//! meanwhile); calls started together (`Promise.all`) go to up to
//! `maxInFlight` `codemode-call-N` threads. Every wait is bounded by the
//! script's deadline, and a stuck loop is interrupted by the engine's
//! interrupt handler, which also watches the host's cancel handle.
//!
//! This file holds the types a host sees; `engine.rs` runs a script and its
//! loop, `mailbox.rs` is what the script's native functions record,
//! `gate.rs` decides whether a call is made, `calls.rs` makes it,
//! `thrown.rs` reads what a script threw, `catalog.rs` answers what the
//! script asks of the tools, `outcome.rs` turns a run into what the model
//! reads, and `prelude.js` is the globals themselves.

#[cfg(feature = "codemode")]
mod calls;
mod catalog;
#[cfg(feature = "codemode")]
mod engine;
#[cfg(feature = "codemode")]
mod gate;
mod hook;
#[cfg(feature = "codemode")]
mod mailbox;
mod outcome;
#[cfg(feature = "codemode")]
mod stack;
#[cfg(all(test, feature = "codemode"))]
mod tests;
#[cfg(feature = "codemode")]
mod thrown;

pub use hook::{CallHook, ParentCall, PlannedCall, Verdict};

pub use catalog::{servers_named, Named};
pub(crate) use catalog::{Catalog, ServerSummary};

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::client::{CallOptions, CancelHandle, ProgressCallback};
use crate::config::ScriptLimits;
use crate::error::Error;
use crate::protocol::{Resource, ResourceContents, ToolResult};

/// Whether this build can run scripts (the `codemode` feature).
pub const CODEMODE_AVAILABLE: bool = cfg!(feature = "codemode");

/// Sees each console line a script writes, as it writes it.
pub type ConsoleCallback = Arc<dyn Fn(&str) + Send + Sync>;

/// How one script runs: its limits, the host's cancel handle and progress
/// callback, and the hook that sees each call. Built from the defaults with
/// the `with_` methods.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct ScriptOptions {
    /// The limits; `None`: the configuration's (the user file's
    /// `"codemode"`, else the defaults).
    pub limits: Option<ScriptLimits>,
    /// Ends the script and its calls in flight (the servers are told).
    pub cancel: Option<CancelHandle>,
    /// Called for each progress notification of a call the script makes.
    pub progress: Option<ProgressCallback>,
    /// Sees each call before it is made (and may deny it), and after;
    /// `None`: the hub's (`HubOptions::with_call_hook`).
    pub hook: Option<Arc<dyn CallHook>>,
    /// Sees each console line as the script writes it (the run's
    /// `console` has them all too, within the output limit).
    pub console: Option<ConsoleCallback>,
}

impl ScriptOptions {
    /// These limits instead of the configuration's.
    pub fn with_limits(mut self, limits: ScriptLimits) -> ScriptOptions {
        self.limits = Some(limits);
        self
    }

    /// Ends the script and its calls in flight when cancelled.
    pub fn with_cancel(mut self, cancel: CancelHandle) -> ScriptOptions {
        self.cancel = Some(cancel);
        self
    }

    /// Called for each progress notification of a call the script makes.
    pub fn with_progress(
        mut self,
        progress: impl Fn(&crate::protocol::Progress) + Send + Sync + 'static,
    ) -> ScriptOptions {
        self.progress = Some(Arc::new(progress));
        self
    }

    /// Sees each call the script makes, and may deny it.
    pub fn with_hook(mut self, hook: Arc<dyn CallHook>) -> ScriptOptions {
        self.hook = Some(hook);
        self
    }

    /// Sees each console line as the script writes it, on the script's
    /// thread (a terminal shows it at once).
    pub fn with_console(mut self, console: impl Fn(&str) + Send + Sync + 'static) -> ScriptOptions {
        self.console = Some(Arc::new(console));
        self
    }

    /// The options of a call to the `codemode` tool: its timeout caps the
    /// script's wall time, and its cancel handle and progress carry over.
    pub(crate) fn from_call(call: &CallOptions) -> ScriptOptions {
        ScriptOptions {
            limits: None,
            cancel: call.cancel.clone(),
            progress: call.progress.clone(),
            hook: None,
            console: None,
        }
    }
}

/// What running a script gave: its value or its error, what it logged, the
/// images it forwarded, and every call it made.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ScriptRun {
    /// What the script returned, as JSON (a string stays a string); `None`
    /// when it returned nothing (or failed).
    pub value: Option<Value>,
    /// What it wrote with `console.log` (and `info`, `debug`; `warn` and
    /// `error` lines begin `[warn] ` and `[error] `), one line per call,
    /// cut at the output limit.
    pub console: String,
    /// Image content blocks the script forwarded with `image(block)`.
    pub images: Vec<Value>,
    /// Every call the script made, in the order they ended.
    pub calls: Vec<NestedCall>,
    /// Why the script failed, if it did.
    pub error: Option<ScriptError>,
    /// How long it ran, from its start to its end (not counting the wait
    /// for the servers it names).
    pub elapsed: Duration,
}

/// Why a script failed, and where.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ScriptError {
    /// What kind of failure.
    pub kind: ScriptErrorKind,
    /// The engine's or the call's message.
    pub message: String,
    /// The script's line (1-based), when known.
    pub line: Option<u32>,
    /// The column (1-based) on that line, when known.
    pub column: Option<u32>,
    /// The error of the call the script did not catch, when it was one.
    pub cause: Option<Arc<Error>>,
}

/// The kinds of script failure the model is told about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScriptErrorKind {
    /// The source does not parse.
    Syntax,
    /// A call named a tool no server offers (or a hidden one).
    UnknownTool,
    /// A call failed: the server failed, refused or could not be reached.
    ToolFailed,
    /// The script, or a call in it, ran out of time.
    Timeout,
    /// A limit was reached: calls, memory, stack, source size.
    Limit,
    /// The host's hook denied a call.
    Denied,
    /// The script threw an error of its own.
    Threw,
    /// The host cancelled the script.
    Cancelled,
}

impl ScriptErrorKind {
    /// The kind as the model reads it (`"syntax error"`, `"tool failed"`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            ScriptErrorKind::Syntax => "syntax error",
            ScriptErrorKind::UnknownTool => "unknown tool",
            ScriptErrorKind::ToolFailed => "tool failed",
            ScriptErrorKind::Timeout => "timeout",
            ScriptErrorKind::Limit => "limit",
            ScriptErrorKind::Denied => "denied",
            ScriptErrorKind::Threw => "error",
            ScriptErrorKind::Cancelled => "cancelled",
        }
    }

    fn from_str(kind: &str) -> Option<ScriptErrorKind> {
        [
            ScriptErrorKind::Syntax,
            ScriptErrorKind::UnknownTool,
            ScriptErrorKind::ToolFailed,
            ScriptErrorKind::Timeout,
            ScriptErrorKind::Limit,
            ScriptErrorKind::Denied,
            ScriptErrorKind::Threw,
            ScriptErrorKind::Cancelled,
        ]
        .into_iter()
        .find(|known| known.as_str() == kind)
    }
}

impl fmt::Display for ScriptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.kind.as_str())?;
        match (self.line, self.column) {
            (Some(line), Some(column)) => write!(f, " at line {line}, column {column}")?,
            (Some(line), None) => write!(f, " at line {line}")?,
            _ => {}
        }
        write!(f, ": {}", self.message)
    }
}

/// One call a script made.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NestedCall {
    /// The tool's qualified name, or `readResource` / `listResources`.
    pub name: String,
    /// The server, when one was named.
    pub server: Option<String>,
    /// The arguments (for a resource read: `{"uri": …}`).
    pub arguments: Value,
    /// When it started, from the script's start.
    pub started: Duration,
    /// How long it took.
    pub elapsed: Duration,
    /// How it ended.
    pub outcome: NestedOutcome,
}

/// How a script's call ended.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum NestedOutcome {
    /// It returned this to the script (a tool's result, with `isError`
    /// when the tool reported one).
    Returned(Value),
    /// It failed; the script's promise rejected.
    Failed(Arc<Error>),
    /// The host's hook denied it, for this reason.
    Denied(String),
    /// It was not made: over a limit, or the script ended first.
    Refused(String),
}

impl NestedOutcome {
    /// One word for it: `ok`, `tool error`, `failed`, `denied`, `refused`.
    pub fn as_str(&self) -> &'static str {
        match self {
            NestedOutcome::Returned(value) if value.get("isError") == Some(&Value::Bool(true)) => {
                "tool error"
            }
            NestedOutcome::Returned(_) => "ok",
            NestedOutcome::Failed(_) => "failed",
            NestedOutcome::Denied(_) => "denied",
            NestedOutcome::Refused(_) => "refused",
        }
    }
}

/// Resources with their servers, and the servers' errors.
pub(crate) type Listed = (Vec<(String, Resource)>, Vec<Error>);

/// What a script's calls reach: the hub, behind the normal call path. The
/// engine asks through this trait only, so it sits below the hub.
pub(crate) trait ScriptHost: Sync {
    /// The reachable tools and the servers, as they are now.
    fn catalog(&self) -> Catalog;
    /// Waits for these servers' starts (each at most its start timeout,
    /// and never past `until`); `None`: all of them.
    fn wait_for(&self, servers: Option<&[String]>, until: Instant);
    /// Calls a tool by its qualified name.
    fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        options: &CallOptions,
    ) -> Result<ToolResult, Error>;
    /// Reads a resource of one server.
    fn read_resource(
        &self,
        server: &str,
        uri: &str,
        options: &CallOptions,
    ) -> Result<Vec<ResourceContents>, Error>;
    /// Lists the resources of one server, or of all: each with its
    /// server, and the errors of servers that could not list theirs.
    fn list_resources(&self, server: Option<&str>, options: &CallOptions) -> Result<Listed, Error>;
}

/// Runs `code` against `host` within `limits`, with `hook` seeing each call
/// as a child of `parent`.
///
/// # Errors
/// [`Error::Engine`] when this build has no engine or it could not start;
/// a script that fails is a [`ScriptRun`] with its error.
pub(crate) fn run(
    host: &dyn ScriptHost,
    code: &str,
    options: &ScriptOptions,
    limits: ScriptLimits,
    parent: ParentCall,
) -> Result<ScriptRun, Error> {
    #[cfg(feature = "codemode")]
    {
        engine::run(host, code, options, limits, parent)
    }
    #[cfg(not(feature = "codemode"))]
    {
        let _ = (host, code, options, limits, parent);
        Err(Error::Engine(
            "this tether was built without the \"codemode\" feature (no script engine)".into(),
        ))
    }
}
