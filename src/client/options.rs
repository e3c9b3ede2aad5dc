//! What a connection and a call can be told: timeouts, the host, progress,
//! cancellation. Each options type starts from its defaults and is changed
//! with `with_` methods, so that a new setting never breaks a host.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use serde_json::Value;

use super::eras::EraMemory;
use crate::host::{DefaultHost, Host};
use crate::protocol::{EraChoice, Progress};
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

    /// The least severe log message a server should send (`debug`,
    /// `info`, `notice`, `warning`, `error`, …).
    pub fn with_log_level(mut self, level: &str) -> ClientOptions {
        self.log_level = Some(level.to_owned());
        self
    }
}

/// A progress callback.
pub type ProgressCallback = Arc<dyn Fn(&Progress) + Send + Sync>;

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
    /// Lets another thread give up on the call.
    pub cancel: Option<CancelHandle>,
    /// An instant the call must not outlive, whatever the timeouts say (a
    /// start timeout spread over several requests uses this).
    pub deadline: Option<Instant>,
    /// Keys for the request's `_meta` (a JSON object): trace context such
    /// as `traceparent`, or a server's own keys. tether's (the progress
    /// token, the 2026-07-28 protocol keys) take their place over them.
    pub meta: Option<Value>,
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

    /// True once `cancel` was called.
    pub fn is_cancelled(&self) -> bool {
        lock(&self.trigger).is_none()
    }

    /// Disconnected once `cancel` was called: to wait on with `select!`
    /// beside other channels, or to look at without a lock.
    #[cfg_attr(not(feature = "codemode"), allow(dead_code))]
    pub(crate) fn receiver(&self) -> &Receiver<()> {
        &self.cancelled
    }
}

impl Default for CancelHandle {
    fn default() -> Self {
        CancelHandle::new()
    }
}
