//! The one error type of the crate.
//!
//! Shaped by where failures happen (spawning, the wire, the protocol, the
//! server's own answer, time, configuration) so that a caller can decide what
//! to do by matching, and the CLI can map each to an exit code. Context such as
//! the server's name is added by wrapping (`Error::Server`), never by formatting.

use std::fmt;
use std::io;
use std::time::Duration;

use crate::jsonrpc::RpcError;
use crate::protocol::UrlElicitation;
use crate::server_state::ServerState;

/// Everything that can go wrong talking to an MCP server.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The server command could not be started.
    Spawn {
        /// The program that was to be run.
        command: String,
        /// Why the operating system refused.
        source: io::Error,
    },
    /// Reading from or writing to the transport failed.
    Io(io::Error),
    /// The server sent something that is not the MCP we speak (bad initialize
    /// result, a repeated cursor, a result of the wrong shape).
    Protocol(String),
    /// The server negotiated a protocol revision tether does not speak.
    UnsupportedProtocol(String),
    /// The server answered with a JSON-RPC error object.
    Rpc(RpcError),
    /// A stateless (2026-07-28) server's response stream broke before the
    /// answer, and the request was not sent again: a `tools/call` may have
    /// run (other requests are re-sent, twice at most).
    ResponseLost {
        /// The request whose answer was lost.
        method: String,
    },
    /// No answer within the allowed time.
    Timeout(Timeout),
    /// The caller cancelled the request through its cancel handle.
    Cancelled,
    /// The connection is gone: no more responses will arrive.
    Disconnected(CloseReason),
    /// No connected server offers a tool with this name.
    UnknownTool(String),
    /// No server of this name is configured.
    UnknownServer(String),
    /// The server is configured but is not connected (failed, disabled, …).
    NotConnected {
        /// The server's state.
        state: ServerState,
        /// Why it failed, when it did.
        cause: Option<std::sync::Arc<Error>>,
    },
    /// The configuration is invalid.
    Config(String),
    /// An HTTP server refused a request, or could not be reached.
    Http {
        /// The status code, when there was an answer.
        status: Option<u16>,
        /// What went wrong, and what to do about it.
        message: String,
    },
    /// Signing in to a server failed: discovery, registration, the
    /// authorization or a token request, or the server's refusal.
    Auth(String),
    /// The server wants a person to sign in and nobody can here (no
    /// authorization handler): `tether login`.
    LoginRequired {
        /// The server's URL.
        url: String,
    },
    /// The server needs the person to open one or more pages before it can
    /// answer (MCP's URL-mode elicitation, error `-32042`): open each, wait
    /// for the server to say they are done ([`crate::Client::wait_elicitations`],
    /// [`crate::Hub::wait_elicitations`]), then send the request again.
    UrlElicitationRequired {
        /// The server's message.
        message: String,
        /// The pages to open.
        elicitations: Vec<UrlElicitation>,
    },
    /// A codemode script could not be run at all: this build has no script
    /// engine (the `codemode` feature), or the engine could not start. A
    /// script that runs and fails is a [`crate::ScriptRun`] with an error.
    Engine(String),
    /// Adds the server name to an error from below.
    Server {
        /// The configured name of the server.
        name: String,
        /// What went wrong.
        source: Box<Error>,
    },
}

/// The JSON-RPC error code of MCP's `URLElicitationRequiredError`.
const URL_ELICITATION_REQUIRED: i64 = -32042;

/// Which wait ran out, and after how long.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Timeout {
    /// Which limit ran out.
    pub step: Step,
    /// The request that was waiting for its answer.
    pub method: String,
    /// How long tether waited.
    pub after: Duration,
}

/// Which limit a [`Timeout`] ran into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Step {
    /// A server's start (spawn, `initialize`, the first `tools/list`),
    /// bounded by its start timeout.
    Start {
        /// The start timeout.
        limit: Duration,
    },
    /// One request, bounded by its timeout (reset by progress up to its ceiling).
    Request,
    /// One request whose progress kept it going until its ceiling
    /// (`maxTotalTimeout`), past its own timeout.
    Ceiling {
        /// The ceiling.
        limit: Duration,
    },
}

impl Timeout {
    /// A request that timed out.
    pub(crate) fn request(method: &str, after: Duration) -> Timeout {
        Timeout { step: Step::Request, method: method.to_owned(), after }
    }
}

/// Why a connection closed; cloned into every request it fails.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloseReason {
    /// The server closed its output (it exited or crashed).
    Eof,
    /// The server's process ended: with an exit code, or by a signal.
    Exited {
        /// Its exit code, when it exited.
        code: Option<i32>,
        /// The signal that ended it, when one did.
        signal: Option<i32>,
    },
    /// A remote server could not be reached (refused, no such host, TLS).
    Unreachable(String),
    /// The server sent a frame larger than the limit; it was not read.
    FrameTooLarge {
        /// The announced or reached size in bytes.
        size: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// Reading or writing failed.
    Io(String),
    /// The host closed the connection.
    Shutdown,
}

impl Error {
    /// The innermost error, past any `Server` wrappers.
    pub fn root(&self) -> &Error {
        match self {
            Error::Server { source, .. } => source.root(),
            other => other,
        }
    }

    /// This error and its causes on one line, `: ` between them.
    pub fn chain(&self) -> String {
        let mut text = self.to_string();
        let mut source = std::error::Error::source(self);
        while let Some(cause) = source {
            text.push_str(": ");
            text.push_str(&cause.to_string());
            source = cause.source();
        }
        text
    }

    /// The error a JSON-RPC error object means: a `-32042` that lists the
    /// pages to open is [`Error::UrlElicitationRequired`], the rest
    /// [`Error::Rpc`].
    pub(crate) fn from_rpc(rpc: RpcError) -> Error {
        if rpc.code == URL_ELICITATION_REQUIRED {
            let listed = rpc.data.as_ref().and_then(|data| data.get("elicitations"));
            let elicitations: Vec<UrlElicitation> = listed
                .and_then(serde_json::Value::as_array)
                .map_or(Vec::new(), |items| items.iter().filter_map(UrlElicitation::of).collect());
            if !elicitations.is_empty() {
                // The TypeScript SDK's servers repeat the code in the message.
                let repeated = format!("MCP error {}: ", rpc.code);
                let message =
                    rpc.message.strip_prefix(&repeated).unwrap_or(&rpc.message).to_owned();
                return Error::UrlElicitationRequired { message, elicitations };
            }
        }
        Error::Rpc(rpc)
    }

    /// Wraps this error with the name of the server it came from.
    pub(crate) fn for_server(self, name: &str) -> Error {
        match self {
            already @ Error::Server { .. } => already,
            other => Error::Server { name: name.to_owned(), source: Box::new(other) },
        }
    }

    /// The same error, with a timeout marked as the server's start running out.
    pub(crate) fn during_start(self, limit: Duration) -> Error {
        match self {
            Error::Timeout(timeout) => {
                Error::Timeout(Timeout { step: Step::Start { limit }, ..timeout })
            }
            Error::Server { name, source } => {
                Error::Server { name, source: Box::new(source.during_start(limit)) }
            }
            other => other,
        }
    }

    /// True when the server could not be reached or broke the protocol
    /// (the CLI's exit code 3), as opposed to bad input from the user.
    pub fn is_server_failure(&self) -> bool {
        !matches!(
            self.root(),
            Error::UnknownTool(_)
                | Error::UnknownServer(_)
                | Error::Config(_)
                | Error::Cancelled
                | Error::Engine(_)
                | Error::UrlElicitationRequired { .. }
        )
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Spawn { command, .. } => write!(f, "could not start `{command}`"),
            Error::Io(_) => f.write_str("i/o error"),
            Error::Protocol(what) => write!(f, "protocol error: {what}"),
            Error::UnsupportedProtocol(version) => {
                write!(
                    f,
                    "server speaks protocol revision {version:?}, which tether does not support \
                     (it speaks {}, {})",
                    crate::protocol::MODERN_PROTOCOL_VERSION,
                    crate::protocol::SUPPORTED_PROTOCOL_VERSIONS.join(", ")
                )
            }
            Error::Rpc(rpc) => {
                // The TypeScript SDK's servers repeat the code in the message.
                let repeated = format!("MCP error {}: ", rpc.code);
                let message = rpc.message.strip_prefix(repeated.as_str()).unwrap_or(&rpc.message);
                write!(f, "server error {}: {message}", rpc.code)
            }
            Error::ResponseLost { method } if method == "tools/call" => f.write_str(
                "the response stream broke before the tool answered; the call may have run, \
                 so it was not sent again",
            ),
            Error::ResponseLost { method } => {
                write!(f, "the response stream broke before {method} was answered, three times")
            }
            Error::Timeout(timeout) => {
                let after = timeout.after.as_secs_f64();
                write!(f, "timed out after {after:.1} s waiting for {}", timeout.method)?;
                match timeout.step {
                    Step::Start { limit } => write!(f, " (start timeout {limit:?})"),
                    Step::Request => Ok(()),
                    Step::Ceiling { limit } => {
                        write!(f, " (its progress went on until the ceiling, {limit:?})")
                    }
                }
            }
            Error::Cancelled => f.write_str("cancelled"),
            // These say what happened in the server's terms already.
            Error::Disconnected(
                reason @ (CloseReason::Exited { .. } | CloseReason::Unreachable(_)),
            ) => write!(f, "{reason}"),
            Error::Disconnected(reason) => write!(f, "connection closed: {reason}"),
            Error::UrlElicitationRequired { message, elicitations } => {
                let pages = if elicitations.len() == 1 { "a page" } else { "pages" };
                write!(f, "the server asks you to open {pages} first: {message}")
            }
            Error::UnknownTool(name) => write!(f, "no tool named {name:?}"),
            Error::UnknownServer(name) => write!(f, "no server named {name:?} is configured"),
            Error::NotConnected { state, .. } => {
                write!(f, "server is not connected ({})", state.as_str())
            }
            Error::Config(what) => write!(f, "invalid configuration: {what}"),
            Error::Http { status: Some(status), message } => write!(f, "HTTP {status}: {message}"),
            // "cannot reach …": the words say it is the network.
            Error::Http { status: None, message } => f.write_str(message),
            Error::Auth(what) => write!(f, "signing in failed: {what}"),
            Error::LoginRequired { url } => {
                write!(f, "{} needs a sign-in (OAuth)", crate::url::redact_url(url))
            }
            Error::Engine(what) => write!(f, "cannot run the script: {what}"),
            Error::Server { name, source } => write!(f, "server {name:?}: {source}"),
        }
    }
}

impl fmt::Display for CloseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CloseReason::Eof => f.write_str("the server closed its output (exited or crashed)"),
            CloseReason::FrameTooLarge { size, limit } => {
                write!(
                    f,
                    "frame too large ({} or more; the limit is {})",
                    Bytes(*size),
                    Bytes(*limit)
                )
            }
            CloseReason::Exited { code: Some(code), .. } => {
                write!(f, "the server exited with status {code}")?;
                // A signal that dumps core reaches tether as the shell's
                // 128 + n (the supervisor never dumps core itself).
                match signal_name(code - 128).filter(|_| *code > 128) {
                    Some(name) => write!(f, " (128 + {}: likely killed by {name})", code - 128),
                    None => Ok(()),
                }
            }
            CloseReason::Exited { signal: Some(signal), .. } => {
                write!(f, "the server was killed by signal {signal}")?;
                match signal_name(*signal) {
                    Some(name) => write!(f, " ({name})"),
                    None => Ok(()),
                }
            }
            CloseReason::Exited { .. } => f.write_str("the server exited"),
            CloseReason::Unreachable(what) => f.write_str(what),
            CloseReason::Io(what) => write!(f, "i/o error: {what}"),
            CloseReason::Shutdown => f.write_str("shut down by the host"),
        }
    }
}

/// A size as people read it: `16 MiB`, `1.5 MiB`, `900 KiB`, `512 bytes`.
struct Bytes(usize);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const KIB: usize = 1024;
        const MIB: usize = 1024 * KIB;
        match self.0 {
            n if n >= MIB && n % MIB == 0 => write!(f, "{} MiB", n / MIB),
            n if n >= MIB => write!(f, "{:.1} MiB", n as f64 / MIB as f64),
            n if n >= KIB && n % KIB == 0 => write!(f, "{} KiB", n / KIB),
            n if n >= KIB => write!(f, "{:.1} KiB", n as f64 / KIB as f64),
            n => write!(f, "{n} bytes"),
        }
    }
}

/// The name of a signal people know by name.
fn signal_name(signal: i32) -> Option<&'static str> {
    let name = match signal {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        _ => return None,
    };
    Some(name)
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Spawn { source, .. } => Some(source),
            Error::Io(source) => Some(source),
            // The server wrapper's own Display already includes the inner
            // message, so it reports the inner error's causes, not itself.
            Error::Server { source, .. } => source.source(),
            Error::NotConnected { cause: Some(cause), .. } => Some(&**cause),
            _ => None,
        }
    }
}

impl From<io::Error> for Error {
    fn from(source: io::Error) -> Self {
        Error::Io(source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_said_in_units_people_read() {
        let shown = |size, limit| CloseReason::FrameTooLarge { size, limit }.to_string();
        assert_eq!(
            shown(16 * 1024 * 1024, 16 * 1024 * 1024),
            "frame too large (16 MiB or more; the limit is 16 MiB)"
        );
        assert_eq!(
            shown(3 * 1024 * 1024 / 2, 900 * 1024),
            "frame too large (1.5 MiB or more; the limit is 900 KiB)"
        );
        assert_eq!(shown(1536, 512), "frame too large (1.5 KiB or more; the limit is 512 bytes)");
    }

    #[test]
    fn a_code_the_server_repeats_in_its_message_is_said_once() {
        let rpc = |message: &str| {
            Error::Rpc(RpcError { code: -32602, message: message.into(), data: None }).to_string()
        };
        assert_eq!(
            rpc("MCP error -32602: Resource demo://nope not found"),
            "server error -32602: Resource demo://nope not found"
        );
        assert_eq!(rpc("MCP error -1: odd"), "server error -32602: MCP error -1: odd");
    }

    #[test]
    fn a_death_by_signal_is_named() {
        let exited = |code, signal| CloseReason::Exited { code, signal }.to_string();
        assert_eq!(exited(None, Some(9)), "the server was killed by signal 9 (SIGKILL)");
        assert_eq!(exited(None, Some(40)), "the server was killed by signal 40");
        assert_eq!(
            exited(Some(139), None),
            "the server exited with status 139 (128 + 11: likely killed by SIGSEGV)"
        );
        assert_eq!(exited(Some(3), None), "the server exited with status 3");
        assert_eq!(exited(Some(200), None), "the server exited with status 200");
    }
}
