//! The stdio transport: a server as a child process.
//!
//! The child runs in its own process group so that shutdown reaches whatever
//! it started (`npx`, `uvx` and shell wrappers start the real server as a
//! grandchild). On Linux that group is led by a supervisor that ends the
//! whole tree when tether dies (`supervisor`); `launch` starts both.
//!
//! Each connection has one thread of its own, `{server}-reader` (frames
//! from stdout, straight into the inbox, whenever no waiting caller reads
//! them itself: `reading`), and a second, `{server}-writer`, only while the
//! outbox has a backlog (see `outbox`). Its stderr is drained, with every
//! other server's, by the shared `tether-stderr` thread (`stderr`). A
//! blocking read cannot be cancelled, so shutdown ends the process and the
//! reads end with it.

use std::fs;
use std::io;
use std::process::ExitStatus;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::error::{CloseReason, Error};
use crate::sync::{lock, wait_timeout};
use crate::threads::NamedThread;
use crate::transport::command::StdioCommand;
use crate::transport::launch::{self, ServerChild, Started};
use crate::transport::outbox::Outbox;
use crate::transport::reading::{Pipe, Reading};
use crate::transport::stderr::{self, StderrWatch};
use crate::transport::{Endpoint, Inbox, Outlet, SharedRead, Traits};

/// How long a server gets to exit after its stdin closes, and again after
/// SIGTERM, before the next step.
const GRACE: Duration = Duration::from_secs(2);
/// How long shutdown waits for an I/O thread whose pipe some escaped process
/// still holds open before leaving it behind.
const JOIN_WAIT: Duration = Duration::from_secs(1);

/// A running server process and the threads that talk to it.
pub(crate) struct StdioEndpoint {
    process: Arc<ServerProcess>,
    reader: Mutex<Option<NamedThread>>,
    /// Drained by the shared `tether-stderr` thread.
    stderr: StderrWatch,
    /// Who reads stdout: the reader thread or a waiting caller.
    reading: Arc<Reading>,
    /// The command line that names this server across runs: its era is
    /// remembered under it.
    era_key: String,
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
    let stderr = match stderr::watch(server, stderr, Arc::downgrade(&inbox)) {
        Ok(stderr) => stderr,
        Err(err) => {
            let _ = process.end();
            return Err(Error::Io(err));
        }
    };
    let reading = Arc::new(Reading::new(server, Pipe::new(stdout), Arc::downgrade(&inbox)));
    inbox.attach_reading(Arc::clone(&reading) as Arc<dyn SharedRead>);
    let endpoint = StdioEndpoint {
        process: Arc::clone(&process),
        reader: Mutex::new(None),
        stderr,
        reading,
        era_key: era_key(command),
    };
    let reading = Arc::clone(&endpoint.reading);
    let reader = NamedThread::spawn_with_stack(format!("{server}-reader"), READER_STACK, {
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
    });
    match reader {
        Ok(reader) => {
            *lock(&endpoint.reader) = Some(reader);
            Ok(endpoint)
        }
        Err(err) => {
            let _ = endpoint.close();
            Err(Error::Io(err))
        }
    }
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
        let reader = lock(&self.reader).take();
        if let Some(reader) = reader {
            reader.join_within(JOIN_WAIT);
        }
        self.stderr.close(JOIN_WAIT);
        self.process.outbox.join_writer();
        result
    }

    fn stderr_tail(&self, wait_for_end: Duration) -> Option<String> {
        Some(self.stderr.text(wait_for_end))
    }

    fn era_key(&self) -> Option<&str> {
        Some(&self.era_key)
    }

    fn traits(&self) -> Traits {
        Traits {
            name: "stdio",
            carries_stateless: true,
            probe_may_go_unanswered: true,
            line_per_message: true,
            ..Traits::default()
        }
    }
}

/// `stdio:` and the program, its arguments and its folder as JSON: the
/// same command line is the same server (its environment, which may hold
/// secrets, is left out).
fn era_key(command: &StdioCommand) -> String {
    let cwd = command.cwd.as_ref().map(|cwd| cwd.display().to_string());
    let named = serde_json::json!([command.program, command.args, cwd]);
    format!("stdio:{named}")
}

impl Drop for StdioEndpoint {
    fn drop(&mut self) {
        if let Err(err) = self.close() {
            log::warn!("{}: closing the server failed: {err}", self.process.server);
        }
    }
}

/// The reader thread's stack. Smaller than std's 2 MiB default, and more
/// than four times so: glibc hands a new thread a stack cached from an ended
/// one when it is at most four times the size asked for, and an ended start
/// thread's stack keeps the pages its parsing touched (16 KiB more), which an
/// idle reader would then carry for its whole life. The deepest message the
/// parser accepts (128 levels) needs under 64 KiB in an optimised build and
/// between 288 and 384 KiB in a debug build, whose tests send one
/// (`tests/it/reading.rs`): the same size for both, so the test checks it.
const READER_STACK: usize = 448 * 1024;
/// How long the reader waits, at end of output, for the server to exit.
const EXIT_PEEK: Duration = Duration::from_millis(100);

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
