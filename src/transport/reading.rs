//! Who reads a stdio server's output: its reader thread, or a caller
//! waiting for an answer (leader/follower).
//!
//! A thread handing each answer to its caller costs a wake-up and, on a busy
//! or single CPU, a switch between threads per call: the largest cost of a
//! call. So the pipe (with its framer) is passed around: a caller that waits
//! while nobody reads takes it and reads itself, delivering whatever comes
//! (answers to other callers, notifications, server requests) exactly as the
//! reader thread would, until its own answer is in; then it puts the pipe
//! back. A lone sequential caller never switches threads. A leader with a
//! cancel handle looks at it between reads (a blocking read cannot watch
//! one), so a cancel is seen within a poll slice ([`LEADER_SLICE`]).
//! Callers that find the pipe taken wait on their channel as before: they
//! follow.
//!
//! The reader thread still owns the pipe whenever no caller does. It takes
//! the pipe back when a follower waits (the leader that leaves, or the
//! follower itself, wakes it), when a leader met the end of the stream, and
//! when no caller has led for [`LINGER`], so that notifications and server
//! requests of an idle connection wait no longer than that. It puts the pipe
//! down once it has answered the last caller waiting and delivered all it
//! has read (late answers nobody waits for do not count): the next call,
//! likely soon, can lead.
//!
//! Bounded waits: a leader polls before each read, never past its deadline
//! and never more than [`LEADER_SLICE`] without checking whether its answer
//! came another way (a shutdown fails every waiter). The framer does no I/O
//! of its own, so the pipe can change hands between any two reads.

use std::os::fd::{AsRawFd, RawFd};
use std::process::ChildStdout;
use std::sync::{Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::error::CloseReason;
use crate::framing::{FrameError, Framer, Next, MAX_FRAME};
use crate::jsonrpc::Message;
use crate::sync::{lock, wait_timeout};
use crate::transport::{Inbox, SharedRead};

/// How long after a caller last read the reader thread takes the pipe back
/// by itself.
const LINGER: Duration = Duration::from_millis(50);
/// The longest a leader waits in `poll` before checking its channel.
const LEADER_SLICE: Duration = Duration::from_millis(100);

/// The server's stdout and the framer over it.
pub(super) struct Pipe {
    stdout: ChildStdout,
    framer: Framer,
}

impl Pipe {
    pub(super) fn new(stdout: ChildStdout) -> Pipe {
        Pipe { stdout, framer: Framer::default() }
    }
}

/// The pipe's holder: nobody (it lies here), the reader thread, or a caller.
pub(super) struct Reading {
    server: String,
    fd: RawFd,
    /// Where frames go; weak, since the inbox holds this.
    inbox: Weak<dyn Inbox>,
    state: Mutex<ReadState>,
    /// Wakes the reader thread.
    turn: Condvar,
}

struct ReadState {
    /// The pipe, when nobody holds it.
    idle: Option<Pipe>,
    /// When a caller (or the thread, stepping aside for one) last put it
    /// down; at first, when the connection started.
    put_down: Instant,
    /// The thread must take the pipe at once: a leader met the end of the
    /// stream or an error, or the connection is closing.
    thread_needed: bool,
}

/// Why the reader thread stopped reading for now.
enum Pause {
    /// It delivered an answer and nobody waits: a caller may lead.
    StepAside,
    /// The connection is over.
    Over(CloseReason),
}

impl Reading {
    pub(super) fn new(server: &str, pipe: Pipe, inbox: Weak<dyn Inbox>) -> Reading {
        Reading {
            server: server.to_owned(),
            fd: pipe.stdout.as_raw_fd(),
            inbox,
            // As if a caller had just read: the session start's first exchanges are
            // read by the starting thread, so the deep parsing of their answers
            // never touches (and keeps resident) this thread's stack.
            state: Mutex::new(ReadState {
                idle: Some(pipe),
                put_down: Instant::now(),
                thread_needed: false,
            }),
            turn: Condvar::new(),
        }
    }

    /// The reader thread's life: hold the pipe whenever no caller does,
    /// until the stream ends; returns why it ended. `exit_of` says how the
    /// server exited once its output closed.
    pub(super) fn run_thread(
        &self,
        inbox: &dyn Inbox,
        exit_of: impl Fn() -> Option<CloseReason>,
    ) -> CloseReason {
        loop {
            let mut pipe = self.take_for_thread(inbox);
            match self.read_until_pause(&mut pipe, inbox, &exit_of) {
                Pause::StepAside => {
                    let mut state = lock(&self.state);
                    state.idle = Some(pipe);
                    state.put_down = Instant::now();
                }
                Pause::Over(reason) => return reason,
            }
        }
    }

    /// Waits until the thread should read: a follower waits, a leader left
    /// trouble, or no caller read for [`LINGER`].
    fn take_for_thread(&self, inbox: &dyn Inbox) -> Pipe {
        let mut state = lock(&self.state);
        loop {
            let since = state.put_down.elapsed();
            if state.idle.is_some() && (state.thread_needed || since >= LINGER || inbox.waiting()) {
                state.thread_needed = false;
                if let Some(pipe) = state.idle.take() {
                    return pipe;
                }
            }
            let pause = if state.idle.is_some() { LINGER.saturating_sub(since) } else { LINGER };
            state = wait_timeout(&self.turn, state, pause.max(Duration::from_millis(1)));
        }
    }

    /// Reads (blocking) and delivers until it should step aside or the
    /// stream ends.
    fn read_until_pause(
        &self,
        pipe: &mut Pipe,
        inbox: &dyn Inbox,
        exit_of: &impl Fn() -> Option<CloseReason>,
    ) -> Pause {
        // Set once an answer reached the last caller waiting: the thread
        // steps aside when what it has read is delivered. A late answer
        // nobody waits for does not count, so a burst of them is read at once.
        let mut served = false;
        loop {
            let waited = inbox.waiting();
            match next(&self.server, pipe, inbox) {
                Ok(Step::Delivered { answer }) => {
                    served |= answer && waited && !inbox.waiting();
                }
                Ok(Step::More) if served => return Pause::StepAside,
                Ok(Step::More) => {
                    if let Err(err) = pipe.framer.fill_from(&mut pipe.stdout) {
                        return Pause::Over(CloseReason::Io(err.to_string()));
                    }
                }
                // Its output closed: usually it exited, and how says most.
                Ok(Step::End) => return Pause::Over(exit_of().unwrap_or(CloseReason::Eof)),
                Err(reason) => return Pause::Over(reason),
            }
        }
    }

    /// The connection is closing: the thread takes the pipe at once (to
    /// read the end of the stream) rather than after its linger.
    pub(super) fn wake_thread(&self) {
        lock(&self.state).thread_needed = true;
        self.turn.notify_one();
    }

    fn put_back(&self, pipe: Pipe, trouble: bool, inbox: &dyn Inbox) {
        {
            let mut state = lock(&self.state);
            state.idle = Some(pipe);
            state.put_down = Instant::now();
            state.thread_needed |= trouble;
        }
        // Asked once the pipe lies idle: a follower that registered before
        // is seen here; one that registers after finds the pipe idle.
        if trouble || inbox.waiting() {
            self.turn.notify_one();
        }
    }
}

impl SharedRead for Reading {
    fn lead(&self, deadline: Instant, done: &dyn Fn() -> bool) -> bool {
        let Some(inbox) = self.inbox.upgrade() else { return false };
        let taken = {
            let mut state = lock(&self.state);
            if state.thread_needed {
                None
            } else {
                state.idle.take()
            }
        };
        let Some(pipe) = taken else { return false };
        // Put back however this ends, a panic (a host's logger) included.
        let mut held = HeldPipe { reading: self, inbox: &*inbox, pipe: Some(pipe), trouble: true };
        let pipe = held.pipe.as_mut().expect("just taken");
        let mut trouble = false;
        while !done() {
            match next(&self.server, pipe, &*inbox) {
                // Another caller's answer, or a notification: never past the
                // deadline for what was already read.
                Ok(Step::Delivered { .. }) => {
                    if !done() && Instant::now() >= deadline {
                        break;
                    }
                }
                Ok(Step::More) => {
                    let now = Instant::now();
                    if now >= deadline {
                        break;
                    }
                    match crate::poll::readable(self.fd, (deadline - now).min(LEADER_SLICE)) {
                        Ok(true) => {}
                        // Time to look at the channel (or the deadline) again.
                        Ok(false) => continue,
                        Err(_) => {
                            trouble = true;
                            break;
                        }
                    }
                    if pipe.framer.fill_from(&mut pipe.stdout).is_err() {
                        trouble = true;
                        break;
                    }
                }
                // The end of the stream, or a frame that ends the connection:
                // the thread reads it again and closes the connection.
                Ok(Step::End) | Err(_) => {
                    trouble = true;
                    break;
                }
            }
        }
        held.trouble = trouble;
        true
    }

    fn follow(&self) {
        let idle = {
            let mut state = lock(&self.state);
            // Someone waits on a channel alone (a cancel handle, the listen
            // stream's start): the thread reads, whoever waits.
            state.thread_needed |= state.idle.is_some();
            state.idle.is_some()
        };
        if idle {
            self.turn.notify_one();
        }
    }
}

/// A leader's hold on the pipe: put back when dropped, as trouble unless
/// the leader ended normally.
struct HeldPipe<'a> {
    reading: &'a Reading,
    inbox: &'a dyn Inbox,
    pipe: Option<Pipe>,
    trouble: bool,
}

impl Drop for HeldPipe<'_> {
    fn drop(&mut self) {
        if let Some(pipe) = self.pipe.take() {
            self.reading.put_back(pipe, self.trouble, self.inbox);
        }
    }
}

/// What reading one step gave.
enum Step {
    /// A frame, delivered (or skipped); `answer` when it was a response.
    Delivered { answer: bool },
    /// No whole frame yet: read more.
    More,
    /// The stream ended.
    End,
}

/// Takes the next frame out of what the pipe has read, and delivers it.
fn next(server: &str, pipe: &mut Pipe, inbox: &dyn Inbox) -> Result<Step, CloseReason> {
    let parsed = match pipe.framer.next_frame() {
        Ok(Next::Frame(frame)) => {
            if log::log_enabled!(log::Level::Trace) {
                log::trace!("{server} <- {}", String::from_utf8_lossy(frame));
            }
            if inbox.deliver_passed(frame).is_some() {
                pipe.framer.release_large();
                return Ok(Step::Delivered { answer: true });
            }
            Message::parse(frame).map_err(|why| (why, shown(frame)))
        }
        Ok(Next::More) => return Ok(Step::More),
        Ok(Next::End) => return Ok(Step::End),
        Err(FrameError::TooLarge { size }) => {
            log::warn!("{server}: refused a frame of {size} bytes or more");
            return Err(CloseReason::FrameTooLarge { size, limit: MAX_FRAME });
        }
        Err(FrameError::Io(err)) => return Err(CloseReason::Io(err.to_string())),
    };
    // The bytes are parsed: a big buffer goes before the caller wakes up
    // with the value.
    pipe.framer.release_large();
    match parsed {
        Ok(message) => {
            let answer = matches!(message, Message::Response(_));
            inbox.deliver(message);
            Ok(Step::Delivered { answer })
        }
        Err((why, shown)) => {
            if inbox.skipped() <= 10 {
                log::warn!("{server}: skipped a line that is not JSON-RPC ({why}): {shown}");
            } else {
                log::debug!("{server}: skipped a line that is not JSON-RPC ({why}): {shown}");
            }
            Ok(Step::Delivered { answer: false })
        }
    }
}

/// The start of a frame, for a log line.
fn shown(frame: &[u8]) -> String {
    String::from_utf8_lossy(&frame[..frame.len().min(200)]).into_owned()
}
