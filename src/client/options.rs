//! What a connection and a call can be told: timeouts, the host, progress,
//! cancellation. Each options type starts from its defaults and is changed
//! with `with_` methods, so that a new setting never breaks a host.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use serde_json::Value;

use super::eras::EraMemory;
use crate::host::{DefaultHost, Host};
use crate::protocol::{EraChoice, LogLevel, LogMessage, Progress};
use crate::sync::lock;

/// Settings of one connection: the defaults, changed with the `with_`
/// methods. Clones share what the connections learn of servers' eras (an
/// HTTP server found to speak the handshake is not probed again).
#[derive(Clone)]
#[non_exhaustive]
pub struct ClientOptions {
    /// The default per-request timeout.
    pub request_timeout: Duration,
    /// The most a request may run when progress keeps resetting its timer.
    pub max_total_timeout: Duration,
    /// Answers server→client requests and sees notifications.
    pub host: Arc<dyn Host>,
    /// Which era to speak: found by probing (the default), or pinned.
    pub era: EraChoice,
    /// The least severe log message a server should send: a handshake-era
    /// server that declares `logging` is told once (`logging/setLevel`), a
    /// stateless one with each request (`debug` … `emergency`); `None`
    /// tells neither.
    pub log_level: Option<String>,
    /// How the client names itself, and the capabilities it declares
    /// beyond its host's.
    pub declared: Declared,
    /// The era each HTTP server spoke, by URL: shared by every clone of
    /// these options (a hub shares one among its servers).
    pub(crate) eras: EraMemory,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            request_timeout: Duration::from_secs(60),
            max_total_timeout: Duration::from_secs(600),
            host: Arc::new(DefaultHost),
            era: EraChoice::Auto,
            log_level: None,
            declared: Declared::default(),
            eras: EraMemory::default(),
        }
    }
}

impl ClientOptions {
    /// The default per-request timeout (60 s unless set).
    pub fn with_request_timeout(mut self, timeout: Duration) -> ClientOptions {
        self.request_timeout = timeout;
        self
    }

    /// The ceiling when progress keeps resetting a request's timer.
    pub fn with_max_total_timeout(mut self, ceiling: Duration) -> ClientOptions {
        self.max_total_timeout = ceiling;
        self
    }

    /// Who answers server→client requests and sees notifications.
    pub fn with_host(mut self, host: Arc<dyn Host>) -> ClientOptions {
        self.host = host;
        self
    }

    /// Which era to speak (probe by default).
    pub fn with_era(mut self, era: EraChoice) -> ClientOptions {
        self.era = era;
        self
    }

    /// How the client names itself to servers (`clientInfo`).
    pub fn with_client_info(mut self, info: ClientInfo) -> ClientOptions {
        self.declared.client_info = info;
        self
    }

    /// Declares `capabilities.experimental` as given.
    pub fn with_experimental(mut self, experimental: Value) -> ClientOptions {
        self.declared.experimental = Some(experimental);
        self
    }

    /// Declares the extension `name` (`capabilities.extensions`) with its
    /// settings (`{}` for none).
    pub fn with_extension(mut self, name: &str, settings: Value) -> ClientOptions {
        self.declared.add_extension(name, settings);
        self
    }

    /// The least severe log message a server should send (`debug`,
    /// `info`, `notice`, `warning`, `error`, …).
    pub fn with_log_level(mut self, level: &str) -> ClientOptions {
        self.log_level = Some(level.to_owned());
        self
    }
}

/// How a client names itself to servers (`clientInfo`): tether and its
/// version unless the host says otherwise.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ClientInfo {
    /// A name, for programs (`my-agent`).
    pub name: String,
    /// Its version.
    pub version: String,
    /// A name for people (`My Agent`).
    pub title: Option<String>,
    /// Its web site.
    pub website_url: Option<String>,
    /// Icons, as MCP writes them (`{"src", "mimeType", "sizes"}`).
    pub icons: Vec<Value>,
}

impl Default for ClientInfo {
    fn default() -> Self {
        ClientInfo::new("tether", env!("CARGO_PKG_VERSION"))
    }
}

impl ClientInfo {
    /// A client of this name and version.
    pub fn new(name: &str, version: &str) -> ClientInfo {
        ClientInfo {
            name: name.to_owned(),
            version: version.to_owned(),
            title: None,
            website_url: None,
            icons: Vec::new(),
        }
    }

    /// Its name for people.
    pub fn with_title(mut self, title: &str) -> ClientInfo {
        self.title = Some(title.to_owned());
        self
    }

    /// Its web site.
    pub fn with_website_url(mut self, url: &str) -> ClientInfo {
        self.website_url = Some(url.to_owned());
        self
    }

    /// One more icon (`{"src": "https://…/icon.png", "mimeType": "image/png"}`).
    pub fn with_icon(mut self, icon: Value) -> ClientInfo {
        self.icons.push(icon);
        self
    }

    /// As MCP writes an `Implementation`.
    pub(crate) fn to_json(&self) -> Value {
        let mut out = serde_json::json!({"name": self.name, "version": self.version});
        if let Some(title) = &self.title {
            out["title"] = serde_json::json!(title);
        }
        if let Some(url) = &self.website_url {
            out["websiteUrl"] = serde_json::json!(url);
        }
        if !self.icons.is_empty() {
            out["icons"] = serde_json::json!(self.icons);
        }
        out
    }
}

/// What a client declares of itself beyond what its host handles: its
/// name, and the `experimental` and `extensions` capabilities.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct Declared {
    /// `clientInfo`.
    pub client_info: ClientInfo,
    /// `capabilities.experimental`, as given.
    pub experimental: Option<Value>,
    /// `capabilities.extensions`: each extension's settings by its name.
    pub extensions: Option<Value>,
}

impl Declared {
    /// The capabilities it adds to the host's, for `host::client_capabilities`.
    pub(crate) fn capabilities(&self) -> [(&'static str, Option<&Value>); 2] {
        [("experimental", self.experimental.as_ref()), ("extensions", self.extensions.as_ref())]
    }

    /// Adds extension `name` with its `settings` (`{}` for none).
    pub(crate) fn add_extension(&mut self, name: &str, settings: Value) {
        let extensions = self.extensions.get_or_insert_with(|| serde_json::json!({}));
        extensions[name] = settings;
    }
}

/// A progress callback.
pub type ProgressCallback = Arc<dyn Fn(&Progress) + Send + Sync>;

/// A callback for the log messages about one call.
pub type LogCallback = Arc<dyn Fn(&LogMessage) + Send + Sync>;

/// Per-call settings; the defaults come from [`ClientOptions`]. Build with
/// `CallOptions::default()` and the `with_` methods.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct CallOptions {
    /// This call's timeout, reset by each progress notification.
    pub timeout: Option<Duration>,
    /// This call's ceiling when progress keeps resetting the timer.
    pub max_total_timeout: Option<Duration>,
    /// Called on this thread for each progress notification.
    pub progress: Option<ProgressCallback>,
    /// The log messages about this call at a level or above, and the
    /// callback that takes them on this thread (see
    /// [`CallOptions::with_log`]).
    pub log: Option<(LogLevel, LogCallback)>,
    /// Lets another thread give up on the call.
    pub cancel: Option<CancelHandle>,
    /// An instant the call must not outlive, whatever the timeouts say (a
    /// start timeout spread over several requests uses this).
    pub deadline: Option<Instant>,
    /// Keys for the request's `_meta` (a JSON object): trace context such
    /// as `traceparent`, or a server's own keys. tether's (the progress
    /// token, the 2026-07-28 protocol keys) take their place over them.
    pub meta: Option<Value>,
    /// The result is passed on, not used: its `structuredContent` is not
    /// checked against the tool's output schema (`tether serve`, whose
    /// client in front checks what it wants to).
    pub(crate) pass_on: bool,
    /// A stateless server is asked for no log messages about the call,
    /// whatever the connection's level (`tether serve`, for a client that
    /// did not ask for them).
    pub(crate) quiet_logs: bool,
}

impl CallOptions {
    /// This call's timeout, reset by each progress notification.
    pub fn with_timeout(mut self, timeout: Duration) -> CallOptions {
        self.timeout = Some(timeout);
        self
    }

    /// This call's ceiling when progress keeps resetting the timer.
    pub fn with_max_total_timeout(mut self, ceiling: Duration) -> CallOptions {
        self.max_total_timeout = Some(ceiling);
        self
    }

    /// Called on the calling thread for each progress notification.
    pub fn with_progress(
        mut self,
        progress: impl Fn(&Progress) + Send + Sync + 'static,
    ) -> CallOptions {
        self.progress = Some(Arc::new(progress));
        self
    }

    /// Log messages about this call, at `level` or above, handed to `log`
    /// on the calling thread before the call returns, in the order the
    /// server sent them and its answer.
    ///
    /// A 2026-07-28 server is asked for them at this level in the
    /// request's `_meta` (in place of [`ClientOptions::log_level`]); over
    /// Streamable HTTP it sends them on the call's own response stream. A
    /// handshake-era server logs for the whole session, at the level the
    /// connection set; a call asking below it lowers it first
    /// (`logging/setLevel`), for the session. Where messages share one
    /// stream (stdio, or a session's), each goes to the oldest call under
    /// way that asked for messages at its level. The host then sees a
    /// message a call took as [`crate::Host::log_taken`].
    pub fn with_log(
        mut self,
        level: LogLevel,
        log: impl Fn(&LogMessage) + Send + Sync + 'static,
    ) -> CallOptions {
        self.log = Some((level, Arc::new(log)));
        self
    }

    /// Lets another thread give up on the call.
    pub fn with_cancel(mut self, cancel: CancelHandle) -> CallOptions {
        self.cancel = Some(cancel);
        self
    }

    /// An instant the call must not outlive, whatever the timeouts say.
    pub fn with_deadline(mut self, deadline: Instant) -> CallOptions {
        self.deadline = Some(deadline);
        self
    }

    /// Sends these keys in the request's `_meta` (an object; anything else
    /// is not sent), e.g. `{"traceparent": "00-…"}`.
    pub fn with_meta(mut self, meta: Value) -> CallOptions {
        self.meta = meta.is_object().then_some(meta);
        self
    }
}

/// Cancels calls from another thread. Clones share one state; once
/// cancelled, every call using it (now or later) ends with `Error::Cancelled`.
#[derive(Clone)]
pub struct CancelHandle {
    trigger: Arc<Mutex<Option<Sender<()>>>>,
    pub(super) cancelled: Receiver<()>,
}

impl CancelHandle {
    /// A handle that has not been cancelled.
    pub fn new() -> CancelHandle {
        let (trigger, cancelled) = crossbeam_channel::bounded(0);
        CancelHandle { trigger: Arc::new(Mutex::new(Some(trigger))), cancelled }
    }

    /// Cancels: waiting calls return at once and the server is told.
    pub fn cancel(&self) {
        // Dropping the only sender disconnects the channel, which wakes
        // every receiver at once.
        lock(&self.trigger).take();
    }

    /// True when `other` is this handle (a clone of it), not merely
    /// another one in the same state.
    #[cfg_attr(not(feature = "serve"), allow(dead_code))]
    pub(crate) fn same(&self, other: &CancelHandle) -> bool {
        Arc::ptr_eq(&self.trigger, &other.trigger)
    }

    /// True once `cancel` was called.
    pub fn is_cancelled(&self) -> bool {
        lock(&self.trigger).is_none()
    }

    /// Disconnected once `cancel` was called: to wait on with `select!`
    /// beside other channels, or to look at without a lock.
    #[cfg_attr(not(any(feature = "codemode", feature = "serve")), allow(dead_code))]
    pub(crate) fn receiver(&self) -> &Receiver<()> {
        &self.cancelled
    }
}

impl Default for CancelHandle {
    fn default() -> Self {
        CancelHandle::new()
    }
}
