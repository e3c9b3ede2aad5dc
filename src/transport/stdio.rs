//! The stdio transport: a server as a child process.
//!
//! The child runs in its own process group so that shutdown reaches whatever
//! it started (`npx`, `uvx` and shell wrappers start the real server as a
//! grandchild). On Linux that group is led by a supervisor that ends the
//! whole tree when tether dies (`supervisor`); `launch` starts both.
//!
//! Each connection has two named threads, `{server}-reader` (frames from
//! stdout, straight into the inbox) and `{server}-stderr` (drains stderr into
//! a 64 KiB tail so that a chatty server never blocks), and a third,
//! `{server}-writer`, only while the outbox has a backlog (see `outbox`). A blocking read cannot be
//! cancelled, so shutdown ends the process and the reads end with it.

use std::collections::VecDeque;
use std::fs;
use std::io::{self, Read};
use std::path::PathBuf;
use std::process::{ChildStderr, ExitStatus};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::error::{CloseReason, Error};
use crate::sync::{lock, wait_timeout};
use crate::threads::NamedThread;
use crate::transport::launch::{self, ServerChild, Started};
use crate::transport::outbox::Outbox;
use crate::transport::reading::{Pipe, Reading};
use crate::transport::{Endpoint, Inbox, Outlet, SharedRead};

/// How long a server gets to exit after its stdin closes, and again after
/// SIGTERM, before the next step.
const GRACE: Duration = Duration::from_secs(2);
/// How much of the server's stderr is kept for error messages.
const STDERR_TAIL: usize = 64 * 1024;
/// How long shutdown waits for an I/O thread whose pipe some escaped process
/// still holds open before leaving it behind.
const JOIN_WAIT: Duration = Duration::from_secs(1);

/// A fully resolved command: what to run, with exactly this environment.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StdioCommand {
    /// The program: a path, or a name looked up in the environment's `PATH`.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// The complete environment of the child (nothing else is inherited).
    pub env: Vec<(String, String)>,
    /// The working directory; tether's own when `None`.
    pub cwd: Option<PathBuf>,
    /// How long the server gets to exit after its stdin closes, before
    /// SIGTERM (2 s when `None`).
    pub shutdown_grace: Option<Duration>,
}

impl std::fmt::Debug for StdioCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The environment may hold secrets: show only the names.
        let names: Vec<&str> = self.env.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("StdioCommand")
            .field("program", &self.program)
            .field("args", &format_args!("[{} arguments]", self.args.len()))
            .field("env", &names)
            .field("cwd", &self.cwd)
            .finish()
    }
}

/// A running server process and the threads that talk to it.
pub(crate) struct StdioEndpoint {
    process: Arc<ServerProcess>,
    threads: Mutex<Vec<NamedThread>>,
    stderr_tail: Arc<StderrTail>,
    /// Who reads stdout: the reader thread or a waiting caller.
    reading: Arc<Reading>,
}

/// The child, ended exactly once by whoever comes first: the reader when the
/// server's output ends (so a crashed server does not linger as a zombie),
/// or `close`. A second caller waits for the first to finish.
struct ServerProcess {
    server: String,
    pid: i32,
    /// How long it gets to exit after its stdin closes.
    eof_grace: Duration,
    state: Mutex<ProcessState>,
    ended: Condvar,
    outbox: Arc<Outbox>,
}

enum ProcessState {
    Running(ServerChild),
    Ending,
    Ended,
}

/// Starts the server and its I/O threads.
///
/// # Errors
/// [`Error::Spawn`] when the program cannot be started; [`Error::Io`] when a
/// thread cannot be created.
pub(crate) fn spawn(
    server: &str,
    command: &StdioCommand,
    inbox: Arc<dyn Inbox>,
) -> Result<StdioEndpoint, Error> {
    let outbox = Outbox::new(server);
    inbox.attach(Arc::clone(&outbox) as Arc<dyn Outlet>);
    let spawn_error = |source| Error::Spawn { command: command.program.clone(), source };
    if let Some(cwd) = &command.cwd {
        if !cwd.is_dir() {
            let message = format!("working directory {} does not exist", cwd.display());
            return Err(spawn_error(io::Error::new(io::ErrorKind::NotFound, message)));
        }
    }
    let Started { process: mut child, stdin, stdout, stderr } =
        launch::start(command).map_err(spawn_error)?;
    let pid = child.id() as i32;
    log::info!("{server}: started `{}` (pid {pid})", command.program);
    let stderr_tail = Arc::new(StderrTail::default());
    if let Err(err) = outbox.attach(stdin, Arc::clone(&inbox)) {
        outbox.close();
        let _ = end_process_group(server, pid, &mut child, Duration::ZERO);
        return Err(Error::Io(err));
    }
    let process = Arc::new(ServerProcess {
        server: server.to_owned(),
        pid,
        eof_grace: command.shutdown_grace.unwrap_or(GRACE),
        state: Mutex::new(ProcessState::Running(child)),
        ended: Condvar::new(),
        outbox: Arc::clone(&outbox),
    });
    let reading = Arc::new(Reading::new(server, Pipe::new(stdout), Arc::downgrade(&inbox)));
    inbox.attach_reading(Arc::clone(&reading) as Arc<dyn SharedRead>);
    let endpoint = StdioEndpoint {
        process: Arc::clone(&process),
        threads: Mutex::new(Vec::new()),
        stderr_tail: Arc::clone(&stderr_tail),
        reading,
    };
    let stderr_inbox = Arc::clone(&inbox);
    let reading = Arc::clone(&endpoint.reading);
    let threads = [
        NamedThread::spawn(format!("{server}-reader"), {
            let server = server.to_owned();
            move || {
                let reason = reading.run_thread(&*inbox, || exit_of(pid, EXIT_PEEK));
                log::debug!("{server}: reader stopped: {reason}");
                inbox.closed(reason);
                // The connection is over: end the process now rather than at
                // close, so that a crashed server is reaped at once.
                if let Err(err) = process.end() {
                    log::debug!("{server}: ending the server failed: {err}");
                }
            }
        }),
        NamedThread::spawn(format!("{server}-stderr"), {
            let server = server.to_owned();
            move || drain_stderr(&server, stderr, &stderr_tail, &*stderr_inbox)
        }),
    ];
    let mut started = Vec::new();
    let mut failure = None;
    for thread in threads {
        match thread {
            Ok(thread) => started.push(thread),
            Err(err) => failure = Some(err),
        }
    }
    *lock(&endpoint.threads) = started;
    if let Some(err) = failure {
        let _ = endpoint.close();
        return Err(Error::Io(err));
    }
    Ok(endpoint)
}

impl ServerProcess {
    fn end(&self) -> io::Result<()> {
        let mut child = {
            let mut state = lock(&self.state);
            match std::mem::replace(&mut *state, ProcessState::Ending) {
                ProcessState::Running(child) => child,
                ProcessState::Ending => {
                    // Another thread is ending it; its wait is bounded by the
                    // grace periods, and so is ours.
                    let deadline = Instant::now() + self.eof_grace + GRACE * 2;
                    while matches!(*state, ProcessState::Ending) {
                        let now = Instant::now();
                        if now >= deadline {
                            break;
                        }
                        state = wait_timeout(&self.ended, state, deadline - now);
                    }
                    return Ok(());
                }
                ProcessState::Ended => {
                    *state = ProcessState::Ended;
                    return Ok(());
                }
            }
        };
        self.outbox.close();
        let result = end_process_group(&self.server, self.pid, &mut child, self.eof_grace);
        *lock(&self.state) = ProcessState::Ended;
        self.ended.notify_all();
        result.map(|_| ())
    }
}

impl Endpoint for StdioEndpoint {
    fn close(&self) -> io::Result<()> {
        let result = self.process.end();
        // The reader thread reads the end of the stream now, not after its linger.
        self.reading.wake_thread();
        let threads = std::mem::take(&mut *lock(&self.threads));
        for thread in threads {
            thread.join_within(JOIN_WAIT);
        }
        self.process.outbox.join_writer();
        result
    }

    fn stderr_tail(&self, wait_for_end: Duration) -> Option<String> {
        Some(self.stderr_tail.text(wait_for_end))
    }

    fn transport_name(&self) -> &'static str {
        "stdio"
    }
}

impl Drop for StdioEndpoint {
    fn drop(&mut self) {
        if let Err(err) = self.close() {
            log::warn!("{}: closing the server failed: {err}", self.process.server);
        }
    }
}

/// What the stderr thread reads at a time.
const STDERR_CHUNK: usize = 1024;
/// How long the reader waits, at end of output, for the server to exit.
const EXIT_PEEK: Duration = Duration::from_millis(100);

fn drain_stderr(server: &str, mut stderr: ChildStderr, tail: &StderrTail, inbox: &dyn Inbox) {
    let mut chunk = vec![0u8; STDERR_CHUNK];
    let mut lines = StderrLines::new(server, inbox);
    loop {
        let n = match stderr.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        lock(&tail.bytes).push(&chunk[..n]);
        lines.chunk(&chunk[..n]);
    }
    lines.finish();
    lock(&tail.bytes).ended = true;
    tail.changed.notify_all();
}

/// Hands a server's stderr, line by line, to the host: at most
/// [`STDERR_LINES_PER_SECOND`] lines a second. Past that the rest of the
/// second is skipped whole, without looking for line breaks, so a flood
/// costs the drain nothing, and a line says lines were left out (the tail
/// keeps everything).
struct StderrLines<'a> {
    server: &'a str,
    inbox: &'a dyn Inbox,
    /// The bytes of a line not ended yet.
    partial: Vec<u8>,
    window: Instant,
    in_window: u32,
    /// Over the limit: skipping until the window ends.
    skipping: bool,
    /// After skipping: the next bytes up to a line break are a fragment.
    resync: bool,
}

impl<'a> StderrLines<'a> {
    fn new(server: &'a str, inbox: &'a dyn Inbox) -> StderrLines<'a> {
        StderrLines {
            server,
            inbox,
            partial: Vec::new(),
            window: Instant::now(),
            in_window: 0,
            skipping: false,
            resync: false,
        }
    }

    fn chunk(&mut self, mut bytes: &[u8]) {
        if self.window.elapsed() >= Duration::from_secs(1) {
            if std::mem::take(&mut self.skipping) {
                self.inbox.stderr_line("(more stderr lines than can be shown; see the tail)");
            }
            (self.window, self.in_window) = (Instant::now(), 0);
        }
        if self.skipping {
            return;
        }
        if self.resync {
            match bytes.iter().position(|&byte| byte == b'\n') {
                Some(end) => {
                    bytes = &bytes[end + 1..];
                    self.resync = false;
                }
                None => return,
            }
        }
        self.partial.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(end) = self.partial[start..].iter().position(|&byte| byte == b'\n') {
            if self.in_window >= STDERR_LINES_PER_SECOND {
                (self.skipping, self.resync) = (true, true);
                self.partial.clear();
                return;
            }
            self.hand_on(start, start + end);
            start += end + 1;
        }
        self.partial.drain(..start);
        // A line without end is cut into pieces, never kept without bound.
        if self.partial.len() > MAX_STDERR_LINE {
            self.hand_on(0, self.partial.len());
            self.partial.clear();
        }
    }

    fn hand_on(&mut self, start: usize, end: usize) {
        self.in_window += 1;
        let line = String::from_utf8_lossy(&self.partial[start..end]);
        let line = line.trim_end();
        log::debug!("{} stderr: {line}", self.server);
        self.inbox.stderr_line(line);
    }

    /// At the end of the stream: what is left of a line, or that lines were
    /// left out.
    fn finish(&mut self) {
        if self.skipping {
            self.inbox.stderr_line("(more stderr lines than can be shown; see the tail)");
        } else if !self.partial.is_empty() && !self.resync {
            let end = self.partial.len();
            self.hand_on(0, end);
        }
    }
}

/// The longest stderr line handed on whole.
const MAX_STDERR_LINE: usize = 4096;
/// How many stderr lines a second are handed to the host.
const STDERR_LINES_PER_SECOND: u32 = 200;

/// The end of a server's stderr, and whether the stream has ended.
#[derive(Default)]
struct StderrTail {
    bytes: Mutex<Tail>,
    changed: Condvar,
}

impl StderrTail {
    /// The tail; first waits up to `wait_for_end` for the stream to end, so
    /// that a server's last words before it exited are in it.
    fn text(&self, wait_for_end: Duration) -> String {
        let deadline = Instant::now() + wait_for_end;
        let mut tail = lock(&self.bytes);
        while !tail.ended {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            tail = wait_timeout(&self.changed, tail, deadline - now);
        }
        tail.text()
    }
}

/// The last bytes of a stream, bounded.
#[derive(Default)]
struct Tail {
    bytes: VecDeque<u8>,
    ended: bool,
}

impl Tail {
    fn push(&mut self, chunk: &[u8]) {
        let chunk = &chunk[chunk.len().saturating_sub(STDERR_TAIL)..];
        let overflow = (self.bytes.len() + chunk.len()).saturating_sub(STDERR_TAIL);
        self.bytes.drain(..overflow);
        self.bytes.extend(chunk);
    }

    fn text(&self) -> String {
        let (front, back) = self.bytes.as_slices();
        let mut joined = Vec::with_capacity(self.bytes.len());
        joined.extend_from_slice(front);
        joined.extend_from_slice(back);
        String::from_utf8_lossy(&joined).into_owned()
    }
}

/// Ends the server, whose stdin is already closed: wait, SIGTERM the group,
/// wait, SIGKILL the group; then the group again, since the server's children
/// may outlive it; then reap. Exit is detected without reaping (`WNOWAIT`),
/// so the leader stays a zombie while its group is signalled and the group id
/// cannot be reused by an unrelated process meanwhile.
fn end_process_group(
    server: &str,
    pgid: i32,
    child: &mut ServerChild,
    eof_grace: Duration,
) -> io::Result<ExitStatus> {
    if !wait_for_exit(pgid, eof_grace) {
        log::debug!("{server}: still running {eof_grace:?} after stdin closed; sending SIGTERM");
        signal_group(pgid, libc::SIGTERM);
        if !wait_for_exit(pgid, GRACE) {
            log::warn!("{server}: ignored SIGTERM; sending SIGKILL");
            signal_group(pgid, libc::SIGKILL);
        }
    }
    if group_has_live_members(pgid) {
        log::debug!("{server}: the server left processes behind; ending them");
        signal_group(pgid, libc::SIGTERM);
        let deadline = Instant::now() + GRACE;
        let mut pause = Duration::from_millis(1);
        while group_has_live_members(pgid) {
            if Instant::now() >= deadline {
                signal_group(pgid, libc::SIGKILL);
                break;
            }
            thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(25));
        }
    }
    let status = child.wait()?;
    log::info!("{server}: stopped ({status})");
    Ok(status)
}

/// How the process ended, if it does within `within`, read without reaping
/// it (the shutdown still signals its group and reaps it).
fn exit_of(pid: i32, within: Duration) -> Option<CloseReason> {
    if !wait_for_exit(pid, within) {
        return None;
    }
    // SAFETY: waitid writes only into `info`, which lives for the call.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
        if libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, flags) != 0 || info.si_pid() == 0
        {
            return None;
        }
        let status = info.si_status();
        Some(match info.si_code {
            libc::CLD_EXITED => CloseReason::Exited { code: Some(status), signal: None },
            _ => CloseReason::Exited { code: None, signal: Some(status) },
        })
    }
}

/// True once the process has exited (it is left a zombie for `wait`).
fn wait_for_exit(pid: i32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    let mut pause = Duration::from_micros(200);
    loop {
        if has_exited(pid) {
            return true;
        }
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(25));
    }
}

fn has_exited(pid: i32) -> bool {
    // SAFETY: waitid writes only into `info`, which lives for the call.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
        if libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, flags) != 0 {
            // ECHILD: someone else (the host) reaped it; it is gone.
            return io::Error::last_os_error().kind() != io::ErrorKind::Interrupted;
        }
        info.si_pid() != 0
    }
}

fn signal_group(pgid: i32, signal: libc::c_int) {
    // SAFETY: killpg has no memory-safety preconditions. The group id is the
    // pid of a child we spawned with process_group(0).
    unsafe {
        libc::killpg(pgid, signal);
    }
}

/// True while some process of the group is alive (not a zombie awaiting its
/// new parent's reaping).
fn group_has_live_members(pgid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    if unsafe { libc::killpg(pgid, 0) } != 0 {
        return false;
    }
    let Ok(entries) = fs::read_dir("/proc") else {
        return true;
    };
    entries.flatten().any(|entry| {
        let Some(pid) = entry.file_name().to_str().and_then(|name| name.parse::<u32>().ok()) else {
            return false;
        };
        let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return false;
        };
        // Fields after the parenthesised command: state ppid pgrp ...
        let Some(after_name) = stat.rfind(')').map(|at| &stat[at + 1..]) else {
            return false;
        };
        let mut fields = after_name.split_whitespace();
        let state = fields.next().unwrap_or("Z");
        let group = fields.nth(1).and_then(|pgrp| pgrp.parse::<i32>().ok());
        group == Some(pgid) && state != "Z" && state != "X"
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_the_last_bytes() {
        let mut tail = Tail::default();
        tail.push(&vec![b'a'; STDERR_TAIL - 2]);
        tail.push(b"bcde");
        let text = tail.text();
        assert_eq!(text.len(), STDERR_TAIL);
        assert!(text.ends_with("bcde") && text.starts_with("aa"));
        tail.push(&vec![b'z'; STDERR_TAIL * 3]);
        assert_eq!(tail.text(), "z".repeat(STDERR_TAIL));
    }
}
