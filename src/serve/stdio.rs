//! The stdio front's reading: one client, whose frames are read in turns by
//! two threads, the caller's and `serve-reader`.
//!
//! Handing each request to a worker costs a thread switch per call, which
//! on one CPU is a good part of what serving adds to a call. So when a
//! request comes alone (nothing else read and waiting, the read that brought
//! it emptied the pipe, no other request of the client's under way), the
//! thread that read
//! it answers it itself, as a worker would, and puts the input down for the
//! other thread meanwhile. That one keeps watch: once the answer has taken
//! longer than `TAKE_OVER` (a slow tool, a question to the client, whose
//! answer must be read), it takes the input and reads on, and the thread
//! that answered keeps watch in its turn. A request that comes with others
//! goes to the workers as before. The watch ticks only while requests come
//! (it sleeps once none has for `WATCH`), so an idle serving wakes nobody.
//!
//! The end of the input ends both threads; the client's requests under way
//! are given up after a short grace (answered if they are quick), so that
//! one answered on the other thread ends soon too.

use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::link::Link;
use super::{read_on_after, take_frame, Admitted, Core, Taken};
use crate::framing::{Framer, Next};
use crate::sync::{lock, wait_timeout};

/// How long a request answered on the reading thread may hold the input
/// before the other thread reads on.
const TAKE_OVER: Duration = Duration::from_millis(2);
/// How long after the last such request the watch keeps ticking.
const WATCH: Duration = Duration::from_secs(1);
/// How long the requests under way when the input ends may take to be
/// answered before they are given up; the serving's exit (within 500 ms
/// of the end, servers closed) has room for it.
const END_GRACE: Duration = Duration::from_millis(100);

struct TurnState<R> {
    /// The input and its framer while no thread reads them.
    input: Option<(R, Framer)>,
    /// A thread answers a request it read, since then.
    answering_since: Option<Instant>,
    /// When the last such answer began: the watch ticks a while after.
    last_answer: Option<Instant>,
    /// The watching thread waits without a tick (nothing came for a while).
    watch_asleep: bool,
    ended: bool,
}

struct Turns<R> {
    state: Mutex<TurnState<R>>,
    /// Wakes the watching thread.
    turn: Condvar,
}

/// What reading came to.
enum Came {
    /// A request that came alone: the reading thread answers it.
    Alone(Admitted),
    /// The end of the input (or a break in it).
    End,
}

/// Reads the client's frames from `input` until it ends, answering a
/// request that comes alone on the thread that read it. The descriptor is
/// read directly: a buffer in between (std's `Stdin` has one) would take
/// more than a read's room holds, and hide whether the pipe was emptied.
pub(super) fn read_in_turns(input: BorrowedFd<'_>, core: &Core<'_>, link: &Arc<Link>) {
    let input = Raw(input);
    let turns = Turns {
        state: Mutex::new(TurnState {
            input: None,
            answering_since: None,
            last_answer: None,
            watch_asleep: false,
            ended: false,
        }),
        turn: Condvar::new(),
    };
    std::thread::scope(|scope| {
        let watch =
            std::thread::Builder::new().name("serve-reader".into()).spawn_scoped(scope, || {
                let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    turns.take_turns(None, core, link);
                }));
                // Its panic ends the other thread's turns too (see below).
                if let Err(panic) = read {
                    turns.end(core, link);
                    std::panic::resume_unwind(panic);
                }
            });
        // Without a second thread, every request goes to the workers.
        let alone_allowed = watch.is_ok();
        let first = Some((input, Framer::default(), alone_allowed));
        let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            turns.take_turns(first, core, link);
        }));
        // A panic in an answer given here ends the watch too, or the
        // scope would wait for it forever.
        if read.is_err() {
            turns.end(core, link);
        }
        if let Ok(watch) = watch {
            let _ = watch.join();
        }
        if let Err(panic) = read {
            std::panic::resume_unwind(panic);
        }
    });
}

impl<R: Read + AsFd> Turns<R> {
    /// One thread's part: reads while it holds the input, answers what
    /// came alone, keeps watch otherwise; until the input ends.
    fn take_turns(&self, first: Option<(R, Framer, bool)>, core: &Core<'_>, link: &Arc<Link>) {
        let alone_allowed = first.as_ref().is_none_or(|(_, _, allowed)| *allowed);
        let mut held = first.map(|(input, framer, _)| (input, framer));
        loop {
            let (mut input, mut framer) = match held.take() {
                Some(io) => io,
                None => match self.wait_turn() {
                    Some(io) => io,
                    None => return,
                },
            };
            match read(&mut input, &mut framer, core, link, alone_allowed) {
                Came::End => {
                    self.end(core, link);
                    return;
                }
                Came::Alone(admitted) => {
                    {
                        let mut state = lock(&self.state);
                        state.input = Some((input, framer));
                        let now = Instant::now();
                        state.answering_since = Some(now);
                        state.last_answer = Some(now);
                        if state.watch_asleep {
                            self.turn.notify_one();
                        }
                    }
                    core.answer(link, admitted);
                    let mut state = lock(&self.state);
                    state.answering_since = None;
                    if state.ended {
                        return;
                    }
                    // Read on, unless the other thread took over.
                    held = state.input.take();
                }
            }
        }
    }

    /// Keeps watch: the input, once a request answered on the reading
    /// thread has held it past `TAKE_OVER`; `None` once the input ended.
    fn wait_turn(&self) -> Option<(R, Framer)> {
        let mut state = lock(&self.state);
        loop {
            if state.ended {
                return None;
            }
            if let Some(since) = state.answering_since {
                if since.elapsed() >= TAKE_OVER && state.input.is_some() {
                    state.answering_since = None;
                    return state.input.take();
                }
            }
            let watching = state.answering_since.is_some()
                || state.last_answer.is_some_and(|at| at.elapsed() < WATCH);
            if watching {
                state = wait_timeout(&self.turn, state, TAKE_OVER);
            } else {
                state.watch_asleep = true;
                state = self.turn.wait(state).unwrap_or_else(std::sync::PoisonError::into_inner);
                state.watch_asleep = false;
            }
        }
    }

    /// The input ended: the other thread stops, and the client's requests
    /// under way are given up (one may be answered on that thread) once
    /// `END_GRACE` has passed, or answered before: a client that writes its
    /// requests and closes its input (a script) hears the quick ones.
    fn end(&self, core: &Core<'_>, link: &Arc<Link>) {
        lock(&self.state).ended = true;
        self.turn.notify_all();
        let until = Instant::now() + END_GRACE;
        while link.answering.load(Ordering::Relaxed) > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
        // Closed, the link is not answered further: a request a worker
        // takes from the queue later is given up too.
        link.close();
        // A call waiting for the client's answer in a round, too.
        core.rounds.cancel_from(link);
    }
}

/// Reads frames and hands them on until a request comes alone or the
/// input ends.
fn read<R: Read + AsFd>(
    input: &mut R,
    framer: &mut Framer,
    core: &Core<'_>,
    link: &Arc<Link>,
    alone_allowed: bool,
) -> Came {
    loop {
        match framer.next_frame() {
            Ok(Next::Frame(frame)) => {
                if let Taken::Request(admitted) = take_frame(frame, core, link) {
                    // Nothing else came with it: the read that brought it
                    // emptied the pipe, and nothing of it is left over.
                    let alone = alone_allowed
                        && !framer.buffered()
                        && framer.drained()
                        && link.answering.load(Ordering::Relaxed) == 0;
                    if alone {
                        core.links.touch(link);
                        return Came::Alone(admitted);
                    }
                    if let Some(admitted) = core.send_ahead(link, admitted) {
                        core.submit(link, admitted);
                    }
                }
            }
            Ok(Next::More) => {
                if let Err(err) = framer.fill_from(input) {
                    log::debug!("the client's input failed: {err}");
                    return Came::End;
                }
            }
            Ok(Next::End) => return Came::End,
            Err(err) => {
                if !read_on_after(err, framer, link) {
                    return Came::End;
                }
            }
        }
    }
}

/// The client's input, read with plain `read`s.
struct Raw<'a>(BorrowedFd<'a>);

impl Read for Raw<'_> {
    fn read(&mut self, into: &mut [u8]) -> io::Result<usize> {
        // SAFETY: a live buffer of that length; the descriptor is borrowed
        // for as long as this lives.
        let read = unsafe { libc::read(self.0.as_raw_fd(), into.as_mut_ptr().cast(), into.len()) };
        if read < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(read as usize)
        }
    }
}

impl AsFd for Raw<'_> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0
    }
}
