//! tether: a synchronous, thread-based Model Context Protocol client.
//!
//! tether connects to MCP servers over stdio, Streamable HTTP and the legacy
//! HTTP+SSE transport, discovers their tools, resources and prompts, and
//! hands them to a host's agent loop through a thread-safe registry. There is
//! no async runtime: each connection has its own named threads joined by
//! channels, and every call blocks the calling thread only.
//!
//! ```no_run
//! use tether::{CallOptions, Config, Hub, HubOptions};
//!
//! let config = Config::load(&tether::default_config_dir().unwrap());
//! let hub = Hub::start(config, HubOptions::default());
//! for tool in hub.tools() {
//!     println!("{}", tool.qualified_name);
//! }
//! let result = hub.call("mcp__demo__echo", serde_json::json!({"text": "hi"}), &CallOptions::default())?;
//! println!("{}", result.to_text());
//! hub.shutdown();
//! # Ok::<(), tether::Error>(())
//! ```
//!
//! For one server and no configuration, [`Client::connect`] is the lower
//! level: give it a [`Transport`] ([`StdioCommand::new`] for a program with
//! tether's base environment, [`HttpTarget::new`] for a URL).
//!
//! Options are built from their defaults with `with_` methods
//! (`CallOptions::default().with_timeout(…)`), so that new settings can be
//! added without breaking a host.
//!
//! # Logging
//! Through the `log` crate: `warn` for misconfiguration and misbehaving
//! servers, `info` for connect and disconnect, `debug` for state changes and
//! server stderr lines, `trace` for every frame on the wire. Values of
//! environment variables handed to servers are never logged.

#![deny(missing_docs)]

mod auth;
mod bounded_read;
mod client;
mod clock;
// Without the engine (the `codemode` feature), what it would ask of the
// hub is built but never called.
#[cfg_attr(not(feature = "codemode"), allow(dead_code))]
mod codemode;
mod config;
#[cfg(feature = "serve")]
mod envelope;
mod error;
mod framing;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
mod host;
mod hub;
mod jsonrpc;
mod kept;
mod model;
mod net;
mod poll;
mod protocol;
mod schema;
#[cfg(feature = "serve")]
mod serve;
mod server_state;
mod shell;
mod spelling;

/// Helpers the `tether` binary shares with the library, so that the binary
/// holds one copy of each. Not part of the API: they may change at any time.
#[doc(hidden)]
pub mod for_cli {
    pub use crate::clock::rfc3339;
    pub use crate::codemode::{servers_named, Named};
    pub use crate::config::file::{lock_within, Lock};
    pub use crate::schema::check_schema;
    #[cfg(feature = "serve")]
    pub use crate::serve::unix_peer;
    pub use crate::shell::{shell_quote, shell_words};
    pub use crate::spelling::closest;
    pub use crate::url::is_https_or_loopback_http;
}
#[cfg(target_os = "linux")]
mod supervisor;
mod sync;
mod threads;
mod transport;
mod url;
mod value_command;

pub use auth::{forget_credentials, sign_in_state, AuthorizationHandler, SignIn, TokenProvider};
pub use client::{
    CallOptions, CancelHandle, Client, ClientInfo, ClientOptions, Declared, LogCallback,
    ProgressCallback,
};
pub use codemode::{
    CallHook, ConsoleCallback, NestedCall, NestedOutcome, ParentCall, PlannedCall, ScriptError,
    ScriptErrorKind, ScriptOptions, ScriptRun, Verdict, CODEMODE_AVAILABLE,
};
#[cfg(feature = "desktop")]
pub use config::ImportReport;
pub use config::{
    default_config_dir, Config, ConfigFiles, ConfigLoader, EnterpriseIdentity, Exposure,
    FailedEntry, HttpConfig, HttpKind, OAuthSettings, ProjectEntry, Scope, ScriptLimits,
    ServerConfig, StdioConfig, TransportConfig, Unapproved, UnknownWord, UntrustedServer,
};
pub use error::{CloseReason, Error, Step, Timeout};
pub use host::{sampled_text, DefaultHost, Elicitation, ElicitationModes, Elicited, Host, Root};
pub use hub::{Hub, HubOptions, LogFile, LogSink, Offered, RefreshReport, ServerStatus};
pub use jsonrpc::{Notification, RpcError};
pub use model::{
    shape_result, ModelBlock, ModelResult, ModelTool, NameStyle, RegisteredTool, ResultLimits,
    ServersPrompt, CODEMODE, TOOL_SEARCH,
};
pub use protocol::{
    Completion, CompletionRef, ContentBlock, Era, EraChoice, LogLevel, LogMessage, Progress,
    Prompt, PromptArgument, PromptResult, Resource, ResourceContents, ResourceTemplate, ServerInfo,
    Task, TaskStart, TaskStatus, Tool, ToolResult, UrlElicitation,
};
#[cfg(feature = "serve")]
pub use serve::{Downstream, ServeOptions};
pub use server_state::ServerState;
pub use transport::{sign_in, HttpTarget, StdioCommand, Transport};
