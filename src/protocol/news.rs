//! What a server tells of a request on the way: log messages and their
//! levels, and progress.

use serde_json::Value;

/// How severe a log message is, least to most: the syslog levels of RFC
/// 5424, as MCP names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    /// Detailed debugging information.
    Debug,
    /// General informational messages.
    Info,
    /// Normal but significant events.
    Notice,
    /// Warning conditions.
    Warning,
    /// Error conditions.
    Error,
    /// Critical conditions.
    Critical,
    /// Action must be taken immediately.
    Alert,
    /// The system is unusable.
    Emergency,
}

impl LogLevel {
    const NAMES: [(LogLevel, &'static str); 8] = [
        (LogLevel::Debug, "debug"),
        (LogLevel::Info, "info"),
        (LogLevel::Notice, "notice"),
        (LogLevel::Warning, "warning"),
        (LogLevel::Error, "error"),
        (LogLevel::Critical, "critical"),
        (LogLevel::Alert, "alert"),
        (LogLevel::Emergency, "emergency"),
    ];

    /// The level MCP names `name` (`debug` … `emergency`), if any.
    pub fn from_name(name: &str) -> Option<LogLevel> {
        Self::NAMES.iter().find(|(_, known)| *known == name).map(|(level, _)| *level)
    }

    /// Its name in MCP.
    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize].1
    }

    /// The level a 2026-07-28 request asks its log messages at (its
    /// `_meta`'s [`LOG_LEVEL_META`]): `None` when it asks none, the value
    /// given when MCP names no such level.
    #[cfg_attr(not(feature = "serve"), allow(dead_code))]
    pub(crate) fn asked_by(params: &Value) -> Option<Result<LogLevel, &Value>> {
        let asked = params.get("_meta")?.get(LOG_LEVEL_META)?;
        Some(asked.as_str().and_then(LogLevel::from_name).ok_or(asked))
    }
}

/// Where a 2026-07-28 request's `_meta` asks for the log messages about it.
pub(crate) const LOG_LEVEL_META: &str = "io.modelcontextprotocol/logLevel";

/// A server's `notifications/message`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct LogMessage {
    /// `debug`, `info`, `notice`, `warning`, `error`, `critical`, `alert`, `emergency`.
    pub level: String,
    /// The server's logger name, if any.
    pub logger: Option<String>,
    /// The message: a string, or any JSON.
    pub data: Value,
}

impl LogMessage {
    pub(crate) fn from_params(params: &Value) -> LogMessage {
        LogMessage {
            level: params.get("level").and_then(Value::as_str).unwrap_or("info").to_owned(),
            logger: params.get("logger").and_then(Value::as_str).map(str::to_owned),
            data: params.get("data").cloned().unwrap_or(Value::Null),
        }
    }

    /// Its level, when it is one MCP names.
    pub fn severity(&self) -> Option<LogLevel> {
        LogLevel::from_name(&self.level)
    }

    /// The message as one line of text.
    pub fn text(&self) -> String {
        let text = match &self.data {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        text.replace(['\n', '\r'], " ")
    }
}

/// A `notifications/progress` update for a request.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Progress {
    /// How far along (grows with each update).
    pub progress: f64,
    /// The total, when known.
    pub total: Option<f64>,
    /// A human-readable message, if any.
    pub message: Option<String>,
}

impl Progress {
    pub(crate) fn from_params(params: &Value) -> Progress {
        Progress {
            progress: params.get("progress").and_then(Value::as_f64).unwrap_or(0.0),
            total: params.get("total").and_then(Value::as_f64),
            message: params.get("message").and_then(Value::as_str).map(str::to_owned),
        }
    }
}
