//! The signal watch every server command runs under: SIGINT, SIGTERM and
//! SIGHUP at any moment (during the start, a call, or the shutdown itself)
//! end every server's process group before tether exits, and a second one
//! exits at once.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use tether::{Config, Hub, HubOptions, ServerState, ServerStatus};

use super::output::{lock, INTERRUPTED};
use super::{escape, progress};

/// How often a start in progress is looked at.
const POLL: Duration = Duration::from_millis(50);
/// A start shorter than this shows no status line (no flicker).
const LINE_AFTER: Duration = Duration::from_millis(400);
/// How long past the longest start timeout the wait for a start may last.
const START_SLACK: Duration = Duration::from_secs(2);

/// Set once the command's servers are closing (or a signal asked for it).
static STOPPING: AtomicBool = AtomicBool::new(false);
/// The signal that ended the command, once one did.
static SIGNALLED: AtomicI32 = AtomicI32::new(0);
/// What to do before a signal ends the process (a keeper's socket to
/// remove).
static AT_EXIT: Mutex<Vec<Box<dyn FnOnce() + Send>>> = Mutex::new(Vec::new());
/// Set once the terminal was told why tether waits for its servers.
static SAID_SLOW: AtomicBool = AtomicBool::new(false);
/// How long a signal's closing may take, in milliseconds, before tether
/// exits and leaves the servers to their supervisors; 0: until they are
/// gone (`SignalWatch::close_within_on_signal`).
static SIGNAL_CLOSE_MS: AtomicU64 = AtomicU64::new(0);
/// How long closing may take before the terminal is told why it waits.
const SLOW_CLOSING: Duration = Duration::from_secs(1);
/// Whether every server has a supervisor that ends its tree when tether
/// exits (Linux), so that tether may exit without waiting for them.
const SUPERVISED: bool = cfg!(target_os = "linux");
/// How long past a `--timeout` the servers get to close: enough for one
/// that ignores its input's end and SIGTERM under the default grace periods
/// (the one-shot grace, then the supervisor's), so that only an entry's own
/// longer `shutdownTimeout` leaves a server to its supervisor.
const STOP_SLACK: Duration = Duration::from_secs(2);

/// Watches SIGINT, SIGTERM and SIGHUP on a named thread; on the first one it
/// shuts the current hub down (ending every server's process group) and
/// exits. A second one, or one while the command's servers are closing
/// (each may take its `shutdownTimeout`), exits at once: on Linux every
/// server's supervisor ends its tree as tether goes.
pub(super) struct SignalWatch {
    /// How hubs are started (set once the configuration is loaded).
    pub(super) options: HubOptions,
    /// When the closing must be over (`call --timeout`): past it tether
    /// exits and leaves the servers to their supervisors.
    pub(super) stop_by: Option<Instant>,
    /// When the closing must be over, with no slack: `tether serve` whose
    /// client went away (every server gone within half a second of its
    /// stdin's end). Past it tether exits, leaving the servers to their
    /// supervisors.
    pub(super) close_by: Option<Instant>,
    hub: Arc<Mutex<Option<Hub>>>,
    handle: signal_hook::iterator::Handle,
    thread: std::thread::JoinHandle<()>,
}

impl SignalWatch {
    /// Watches from now on: a signal before any hub exists (while the
    /// configuration loads and runs its `!command` helpers) exits at once,
    /// and the helpers' supervisors end them.
    pub(super) fn start() -> io::Result<SignalWatch> {
        let options = HubOptions::default();
        let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP])?;
        let handle = signals.handle();
        let hub: Arc<Mutex<Option<Hub>>> = Arc::new(Mutex::new(None));
        let watched = Arc::clone(&hub);
        let thread =
            std::thread::Builder::new().name("tether-signals".into()).spawn(move || {
                for signal in signals.forever() {
                    if STOPPING.swap(true, Ordering::SeqCst) && SUPERVISED {
                        std::process::exit(128 + signal);
                    }
                    INTERRUPTED.store(true, Ordering::SeqCst);
                    SIGNALLED.store(signal, Ordering::SeqCst);
                    progress::clear();
                    log::info!("signal {signal}: shutting down");
                    // On a thread of its own, so that a second signal is heard;
                    // that thread ends the process.
                    let hub = lock(&watched).clone();
                    let within = SIGNAL_CLOSE_MS.load(Ordering::SeqCst);
                    let by = (within > 0 && SUPERVISED)
                        .then(|| Instant::now() + Duration::from_millis(within));
                    let stop = move || {
                        if let Some(hub) = hub {
                            close(hub, by);
                        }
                        for then in std::mem::take(&mut *lock(&AT_EXIT)) {
                            then();
                        }
                        std::process::exit(128 + signal);
                    };
                    if std::thread::Builder::new()
                        .name("tether-interrupted".into())
                        .spawn(stop)
                        .is_err()
                    {
                        std::process::exit(128 + signal);
                    }
                }
            })?;
        Ok(SignalWatch { options, stop_by: None, close_by: None, hub, handle, thread })
    }

    /// Starts a hub that a signal will shut down, with these options, and
    /// returns at once: its servers start in the background.
    #[cfg_attr(not(feature = "serve"), allow(dead_code))]
    pub(super) fn start_hub_now(&self, config: Config, options: HubOptions) -> Hub {
        let mut slot = lock(&self.hub);
        let hub = Hub::start(config, options.with_background(true));
        *slot = Some(hub.clone());
        hub
    }

    /// Starts a hub that a signal will shut down, and waits for its servers.
    pub(super) fn start_hub(&self, config: Config) -> Hub {
        self.start_hub_reporting(config, |_| {})
    }

    /// Starts a hub that a signal will shut down, and waits until no server
    /// is starting (each at most its start timeout). `settled` sees each
    /// server as it finishes starting; a terminal sees which are still
    /// starting.
    pub(super) fn start_hub_reporting(
        &self,
        config: Config,
        mut settled: impl FnMut(&ServerStatus),
    ) -> Hub {
        let longest = config.servers.iter().map(|server| server.start_timeout).max();
        let deadline = Instant::now() + longest.unwrap_or_default() + START_SLACK;
        // Held while the hub is made, so that a signal arriving meanwhile
        // finds it. Starting in the background only spawns threads; the
        // servers start on those, with the lock released.
        let mut slot = lock(&self.hub);
        let hub = Hub::start(config, self.options.clone().with_background(true));
        *slot = Some(hub.clone());
        drop(slot);
        let began = Instant::now();
        let mut reported: Vec<String> = Vec::new();
        let show_line = progress::available() && log::log_enabled!(log::Level::Error);
        loop {
            let done = hub.wait_started_for(POLL) || Instant::now() >= deadline;
            let statuses = hub.status();
            let mut starting = Vec::new();
            for status in &statuses {
                if status.state == ServerState::Connecting && !done {
                    starting.push(escape::escaped(&status.name));
                } else if !reported.contains(&status.name) {
                    progress::clear();
                    // Interrupted, a start that was cut short is no news.
                    if !INTERRUPTED.load(Ordering::SeqCst) {
                        settled(status);
                    }
                    reported.push(status.name.clone());
                }
            }
            if done {
                progress::clear();
                return hub;
            }
            if show_line && began.elapsed() >= LINE_AFTER {
                progress::show(&format!(
                    "starting {} ({:.0} s)",
                    starting.join(", "),
                    began.elapsed().as_secs_f64().floor()
                ));
            }
        }
    }

    /// From now on a signal's closing takes at most `within`: then tether
    /// exits, and the servers' supervisors end what is left (`tether
    /// serve`, whose host waits for it to be gone).
    #[cfg_attr(not(feature = "serve"), allow(dead_code))]
    pub(super) fn close_within_on_signal(&self, within: Duration) {
        let ms = u64::try_from(within.as_millis()).unwrap_or(u64::MAX).max(1);
        SIGNAL_CLOSE_MS.store(ms, Ordering::SeqCst);
    }

    /// Shuts the hub down, and stops watching. Within `stop_by` (and a
    /// little more) when a ceiling was given: past it tether exits, and the
    /// servers' supervisors end what is left. Returns the exit code a
    /// signal gave the command (128 + its number), if one came.
    pub(super) fn stop(self) -> Option<u8> {
        STOPPING.store(true, Ordering::SeqCst);
        // The hub stays in its slot: a signal during the shutdown finds it,
        // and its own shutdown waits until the servers are gone.
        let hub = lock(&self.hub).clone();
        if let Some(hub) = hub {
            let slack = self.stop_by.map(|by| by.max(Instant::now()) + STOP_SLACK);
            let by = match (slack, self.close_by) {
                (Some(slack), Some(close_by)) => Some(slack.min(close_by)),
                (slack, close_by) => slack.or(close_by),
            };
            close(hub, by.filter(|_| SUPERVISED));
        }
        self.handle.close();
        let _ = self.thread.join();
        match SIGNALLED.load(Ordering::SeqCst) {
            0 => None,
            signal => Some((128 + signal) as u8),
        }
    }
}

/// Runs `then` when a signal ends the process, after its servers closed.
#[cfg_attr(not(feature = "serve"), allow(dead_code))]
pub(super) fn at_exit(then: impl FnOnce() + Send + 'static) {
    lock(&AT_EXIT).push(Box::new(then));
}

/// Shuts `hub` down, on a `tether-stop` thread watched from here: past
/// `by`, tether leaves the servers to their supervisors (it is about to
/// exit); past a moment, a terminal is told once why it waits (an entry's
/// `shutdownTimeout` may be long) and how to stop waiting.
fn close(hub: Hub, by: Option<Instant>) {
    let began = Instant::now();
    let stopper = match std::thread::Builder::new().name("tether-stop".into()).spawn({
        let hub = hub.clone();
        move || hub.shutdown()
    }) {
        Ok(stopper) => stopper,
        Err(_) => return hub.shutdown(),
    };
    let mut said = false;
    // Looked at often at first: most servers close at once, and a command's
    // exit waits for this.
    let mut pause = Duration::from_micros(250);
    while !stopper.is_finished() {
        if by.is_some_and(|by| Instant::now() >= by) {
            log::info!("servers still closing past the time given; leaving them");
            return;
        }
        if !said && began.elapsed() >= SLOW_CLOSING && progress::available() {
            said = true;
            if !SAID_SLOW.swap(true, Ordering::SeqCst) {
                let again = if INTERRUPTED.load(Ordering::SeqCst) { " again" } else { "" };
                eprintln!(
                    "Waiting for the servers to close (each may take its shutdownTimeout); \
                     press Ctrl-C{again} to quit now."
                );
            }
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(10));
    }
    let _ = stopper.join();
}
