//! What servers tell the hub on their own: their lists changed, or a log line.
//!
//! Every connection's host is wrapped in a `HubHost`, which sees each
//! notification on that connection's events thread, acts on the hub's part,
//! and passes it on to the host's own handler. A `tools/list_changed` is not
//! handled on the spot: it queues the server for the `tether-relist` thread,
//! which waits a moment and takes the whole burst at once, so a server that
//! sends fifty notifications in a row is re-listed once.

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime};

use crossbeam_channel::{select, Receiver, RecvTimeoutError, Sender};
use serde_json::Value;

use super::Shared;
use crate::clock;
use crate::host::{Host, Root};
use crate::jsonrpc::{Notification, RpcError};
use crate::protocol::LogMessage;
use crate::sync::lock;
use crate::threads::NamedThread;

/// How long a burst of list changes is gathered before re-listing.
const BURST: Duration = Duration::from_millis(50);
/// The size past which `mcp.log` moves to `mcp.log.1`.
const LOG_ROTATE_BYTES: u64 = 5 * 1024 * 1024;

/// Where servers' log messages (and stdio servers' stderr lines) go.
pub trait LogSink: Send + Sync {
    /// One message from `server`.
    fn log(&self, server: &str, message: &LogMessage);

    /// One line `server` wrote to its stderr (stdio servers), on the
    /// connection's events thread: keep it quick.
    fn stderr(&self, server: &str, line: &str) {
        let _ = (server, line);
    }
}

/// A log file: `<RFC 3339 time> [<server>] log <level> <logger>: <message>`
/// and `<RFC 3339 time> [<server>] stderr <line>` lines, moved to
/// `<file>.1` once past 5 MB.
#[derive(Debug, Clone)]
pub struct LogFile {
    path: PathBuf,
    rotate_bytes: u64,
    /// Each server's log messages this second: (the second, how many).
    written: Arc<Mutex<HashMap<String, (u64, u32)>>>,
}

/// The log messages a server may write to the file in one second: a flood
/// must not rotate the useful lines away. Past it, one line says so and the
/// rest of that second's are left out (the host still gets every one).
const LOG_LINES_PER_SECOND: u32 = 200;

impl LogFile {
    /// A log file at `path` (its folder is created on the first write).
    pub fn new(path: impl Into<PathBuf>) -> LogFile {
        LogFile { path: path.into(), rotate_bytes: LOG_ROTATE_BYTES, written: Arc::default() }
    }

    /// The same, rotating past `bytes` instead of 5 MB.
    pub fn with_rotation(mut self, bytes: u64) -> LogFile {
        self.rotate_bytes = bytes;
        self
    }

    /// The file's path.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }
}

impl LogFile {
    /// Appends one line. Each line is one append: whole lines, with no lock
    /// held across the write. Rotation may race another process; at worst a
    /// line lands in the older file.
    fn append(&self, line: &str) {
        if fs::metadata(&self.path).is_ok_and(|meta| meta.len() >= self.rotate_bytes) {
            let mut rotated = self.path.clone().into_os_string();
            rotated.push(".1");
            let _ = fs::rename(&self.path, rotated);
        }
        if let Some(folder) = self.path.parent() {
            let _ = crate::config::file::create_private_dir(folder);
        }
        // Servers' log lines may say private things: readable by the user only.
        let written = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&self.path)
            .and_then(|mut file| file.write_all(line.as_bytes()));
        if let Err(err) = written {
            log::debug!("cannot write {}: {err}", self.path.display());
        }
    }
}

/// A server must not forge lines (or another server's name): no control
/// characters in what it chose.
fn clean(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect()
}

impl LogSink for LogFile {
    fn log(&self, server: &str, message: &LogMessage) {
        let second =
            SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |at| at.as_secs());
        let count = {
            let mut written = lock(&self.written);
            let entry = written.entry(server.to_owned()).or_insert((second, 0));
            if entry.0 != second {
                *entry = (second, 0);
            }
            entry.1 = entry.1.saturating_add(1);
            entry.1
        };
        if count > LOG_LINES_PER_SECOND {
            if count == LOG_LINES_PER_SECOND + 1 {
                self.append(&format!(
                    "{} [{server}] log warning tether: more than {LOG_LINES_PER_SECOND} log \
                     messages this second; the rest of this second's are left out\n",
                    clock::rfc3339(SystemTime::now())
                ));
            }
            return;
        }
        let logger = clean(message.logger.as_deref().unwrap_or("-"));
        self.append(&format!(
            "{} [{server}] log {} {logger}: {}\n",
            clock::rfc3339(SystemTime::now()),
            clean(&message.level),
            clean(&message.text())
        ));
    }

    fn stderr(&self, server: &str, line: &str) {
        if line.trim().is_empty() {
            return;
        }
        self.append(&format!(
            "{} [{server}] stderr {}\n",
            clock::rfc3339(SystemTime::now()),
            clean(line)
        ));
    }
}

/// The host every connection of the hub gets: the hub's own handling of
/// notifications, then the host's.
pub(super) struct HubHost {
    pub(super) user: Arc<dyn Host>,
    pub(super) relist: Arc<RelistQueue>,
    pub(super) log_sink: Option<Arc<dyn LogSink>>,
}

impl HubHost {
    /// A server's log message, to the log sink if there is one.
    fn to_sink(&self, server: &str, notification: &Notification) {
        if let Some(sink) = &self.log_sink {
            let params = notification.params.as_ref().unwrap_or(&Value::Null);
            sink.log(server, &LogMessage::from_params(params));
        }
    }
}

impl Host for HubHost {
    fn roots(&self) -> Vec<Root> {
        self.user.roots()
    }

    fn handles_sampling(&self) -> bool {
        self.user.handles_sampling()
    }

    fn create_message(&self, server: &str, params: &Value) -> Result<Value, RpcError> {
        self.user.create_message(server, params)
    }

    fn handles_elicitation(&self) -> bool {
        self.user.handles_elicitation()
    }

    fn elicit(&self, server: &str, params: &Value) -> Result<Value, RpcError> {
        self.user.elicit(server, params)
    }

    fn cancelled(&self, server: &str, method: &str, reason: Option<&str>) {
        self.user.cancelled(server, method, reason);
    }

    fn notification(&self, server: &str, notification: &Notification) {
        match notification.method.as_str() {
            "notifications/tools/list_changed" => {
                self.relist.push(server);
            }
            "notifications/message" => self.to_sink(server, notification),
            _ => {}
        }
        self.user.notification(server, notification);
    }

    fn log_taken(&self, server: &str, notification: &Notification) {
        self.to_sink(server, notification);
        self.user.log_taken(server, notification);
    }

    fn stderr(&self, server: &str, line: &str) {
        if let Some(sink) = &self.log_sink {
            sink.stderr(server, line);
        }
        self.user.stderr(server, line);
    }
}

/// The servers waiting to be re-listed: a set, so that however many list
/// changes a server sends (a flood, while it does not answer `tools/list`),
/// it has at most one re-list pending. Memory is bounded by the number of
/// servers.
pub(super) struct RelistQueue {
    pending: Mutex<Vec<String>>,
    /// Holds at most one wake-up for the `tether-relist` thread.
    wake: Sender<()>,
}

impl RelistQueue {
    /// Queues `server` unless it is queued already, and wakes the thread.
    fn push(&self, server: &str) {
        {
            let mut pending = lock(&self.pending);
            if !pending.iter().any(|queued| queued == server) {
                pending.push(server.to_owned());
            }
        }
        let _ = self.wake.try_send(());
    }

    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.pending))
    }
}

/// The `tether-relist` thread and its queue.
pub(super) struct Events {
    queue: Arc<RelistQueue>,
    woken: Mutex<Option<Receiver<()>>>,
    stop: Mutex<Option<Sender<()>>>,
    stopped: Receiver<()>,
    thread: Mutex<Option<NamedThread>>,
}

impl Events {
    pub(super) fn new() -> Events {
        let (wake, woken) = crossbeam_channel::bounded(1);
        let (stop, stopped) = crossbeam_channel::bounded(0);
        Events {
            queue: Arc::new(RelistQueue { pending: Mutex::new(Vec::new()), wake }),
            woken: Mutex::new(Some(woken)),
            stop: Mutex::new(Some(stop)),
            stopped,
            thread: Mutex::new(None),
        }
    }

    /// The queue connections' hosts put list changes in.
    pub(super) fn relist_queue(&self) -> Arc<RelistQueue> {
        Arc::clone(&self.queue)
    }

    /// Starts the re-list thread; it holds the hub only weakly.
    pub(super) fn start(&self, shared: &Arc<Shared>) {
        let Some(woken) = lock(&self.woken).take() else { return };
        let stopped = self.stopped.clone();
        let weak = Arc::downgrade(shared);
        let queue = Arc::clone(&self.queue);
        match NamedThread::spawn("tether-relist".into(), move || {
            run_relist(&weak, &queue, &woken, &stopped)
        }) {
            Ok(thread) => *lock(&self.thread) = Some(thread),
            Err(err) => {
                log::warn!("cannot start the re-list thread: {err}; list changes will be missed")
            }
        }
    }

    pub(super) fn stop(&self) {
        lock(&self.stop).take();
    }

    pub(super) fn join(&self) {
        if let Some(thread) = lock(&self.thread).take() {
            thread.join_within(Duration::from_secs(5));
        }
    }
}

fn run_relist(
    shared: &Weak<Shared>,
    queue: &RelistQueue,
    woken: &Receiver<()>,
    stopped: &Receiver<()>,
) {
    loop {
        select! {
            recv(woken) -> wake => if wake.is_err() { return },
            recv(stopped) -> _ => return,
        }
        // Let the rest of a burst arrive (and be folded into the set);
        // a stop ends the wait at once.
        if !matches!(stopped.recv_timeout(BURST), Err(RecvTimeoutError::Timeout)) {
            return;
        }
        let Some(shared) = shared.upgrade() else { return };
        for server in queue.take() {
            shared.relist(&server);
        }
    }
}
