//! Calls passed on with no thread waiting for them: flights.
//!
//! A worker that waits for each call it passes on costs two thread
//! switches per call (the reader hands it the request, the upstream's
//! reader hands it the answer), which is most of what `tether serve` adds
//! when many calls are under way at once. So a stdio client's tool call
//! that arrives among others, to a server that is ready and read by a
//! thread of its own, is written upstream by the thread that read it
//! (`Core::send_ahead`) and becomes a `Flight`: the client's `Sink`. The
//! thread that reads the upstream's answer writes the answer in front,
//! as it passes progress and the log messages about the call on (at the
//! level the client set, so before the answer); nobody waits in between.
//!
//! What a waiting worker did, a flight does by itself. A downstream
//! cancellation gives it up (the upstream is told) and nothing is
//! answered; the link's end and the serving's end give it up the same
//! way. Its limits are the upstream client's: the `serve-deadlines` thread
//! sleeps until the earliest deadline among the flights and answers each
//! flight whose time ran out with the timeout a worker would have sent (a
//! flight's progress moves its deadline on, up to its ceiling). Whoever
//! takes the request from the client's pending requests ends the flight,
//! once: its answer (or the connection's close), the give-up, the
//! timeout; a flight that could not be sent is handed back to a worker.
//!
//! The threads that answer flights read servers or keep time, so they
//! never wait for the client: a call flies only while the client's output
//! has room for every flight's answer at once (in frames; in bytes, while
//! less than half of `pipe_out`'s bound waits, and answers may go past the
//! bound up to its ceiling for frames that never wait), and neither an
//! answer nor its progress waits for room. A server that died is asked for the end of
//! its stderr once a second at most, not once per call it leaves.
//!
//! At most [`MAX_FLYING`] calls fly at once; beyond that a call goes to
//! the workers, whose queue is bounded in turn.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::answer::upstream_error_with;
use super::link::{GiveUp, Link, Underway};
use super::streams::Route;
use crate::client::{Client, Limits, PassedResult, Sent, Sink};
use crate::error::{CloseReason, Error, Step, Timeout};
use crate::jsonrpc::{Frame, RequestId};
use crate::protocol::{LogMessage, Progress};
use crate::sync::{lock, wait_timeout};

/// The most calls that fly at once.
pub(super) const MAX_FLYING: usize = 256;
/// How long the deadlines thread sleeps with no flight (bounded all the
/// same; a new flight wakes it).
const IDLE_SLEEP: Duration = Duration::from_secs(3600);
/// How long the end of a dead server's stderr is kept for the answers of
/// its other flights.
const TAIL_KEPT: Duration = Duration::from_secs(1);

/// The flights under way, and their deadlines' thread.
#[derive(Default)]
pub(super) struct Flights {
    state: Mutex<FlightsState>,
    /// Wakes the deadlines thread: a flight whose deadline is earlier than
    /// its sleep, or the end.
    changed: Condvar,
}

#[derive(Default)]
struct FlightsState {
    /// The end of a dead server's stderr, by server, with when it was read.
    tails: HashMap<String, (Instant, Option<String>)>,
    /// The flights sent, by key, for the deadlines thread.
    flying: HashMap<u64, Arc<Flight>>,
    /// Flights begun and not ended (sent or being sent): bounds them.
    count: usize,
    next_key: u64,
    /// When the deadlines thread wakes next; `None` while it sleeps with
    /// no flight to watch.
    sleeping_until: Option<Instant>,
    ended: bool,
}

impl Flights {
    /// A flight for request `id` of `link`'s client to `server`, with the
    /// client's progress token; `None` when [`MAX_FLYING`] fly already or
    /// the serving is ending. The link counts it as answered, and finds it
    /// by `id` to cancel it, until it ends.
    pub(super) fn begin(
        self: &Arc<Self>,
        link: &Arc<Link>,
        id: &RequestId,
        token: Option<Value>,
        server: &str,
    ) -> Option<Arc<Flight>> {
        let key = {
            let mut state = lock(&self.state);
            if state.ended || state.count >= MAX_FLYING {
                return None;
            }
            state.count += 1;
            state.next_key += 1;
            state.next_key
        };
        let flight = Arc::new(Flight {
            link: Arc::clone(link),
            id: id.clone(),
            token,
            server: server.to_owned(),
            flights: Arc::clone(self),
            key,
            began: Instant::now(),
            upstream: OnceLock::new(),
            deadline: Mutex::new(None),
            cancelled: AtomicBool::new(false),
            ended: AtomicBool::new(false),
        });
        link.answering.fetch_add(1, Ordering::Relaxed);
        let underway = Underway::Flying(Arc::clone(&flight) as Arc<dyn GiveUp>);
        lock(&link.in_flight).insert(id.clone(), underway);
        Some(flight)
    }

    /// Watches `flight`'s deadline from now on.
    fn watch(&self, flight: &Arc<Flight>, deadline: Instant) {
        let mut state = lock(&self.state);
        state.flying.insert(flight.key, Arc::clone(flight));
        if state.sleeping_until.is_none_or(|until| deadline < until) {
            self.changed.notify_one();
        }
    }

    fn forget(&self, key: u64) {
        let mut state = lock(&self.state);
        state.flying.remove(&key);
        state.count -= 1;
    }

    /// The deadlines thread: answers each flight whose time ran out, until
    /// [`Flights::end`].
    pub(super) fn keep_deadlines(&self) {
        let mut state = lock(&self.state);
        while !state.ended {
            let now = Instant::now();
            let mut next: Option<Instant> = None;
            let mut expired = Vec::new();
            for (key, flight) in &state.flying {
                match flight.deadline() {
                    Some(at) if at <= now => expired.push(*key),
                    Some(at) => next = Some(next.map_or(at, |next| next.min(at))),
                    None => {}
                }
            }
            // Watched no more: each is timed out now, or is ending already.
            let expired: Vec<Arc<Flight>> =
                expired.iter().filter_map(|key| state.flying.remove(key)).collect();
            if !expired.is_empty() {
                drop(state);
                for flight in expired {
                    flight.time_out();
                }
                state = lock(&self.state);
                continue;
            }
            state.sleeping_until = next;
            let sleep = next.map_or(IDLE_SLEEP, |at| at.saturating_duration_since(now));
            state = wait_timeout(&self.changed, state, sleep.max(Duration::from_millis(1)));
        }
    }

    /// The end of the stderr of `server`, which died (`client` is its
    /// connection): read once a second at most, since reading it waits a
    /// moment for the last words of a server that is gone.
    fn stderr_tail(&self, server: &str, client: &Client) -> Option<String> {
        if let Some((read, tail)) = lock(&self.state).tails.get(server) {
            if read.elapsed() < TAIL_KEPT {
                return tail.clone();
            }
        }
        let tail = client.stderr_tail().filter(|tail| !tail.trim().is_empty());
        lock(&self.state).tails.insert(server.to_owned(), (Instant::now(), tail.clone()));
        tail
    }

    /// Ends the deadlines thread (the flights are given up by their links).
    pub(super) fn end(&self) {
        lock(&self.state).ended = true;
        self.changed.notify_one();
    }
}

/// One call passed on with no thread waiting for it.
pub(super) struct Flight {
    link: Arc<Link>,
    /// The client's id of the request.
    id: RequestId,
    /// The client's progress token, if it gave one.
    token: Option<Value>,
    server: String,
    flights: Arc<Flights>,
    key: u64,
    began: Instant,
    /// The upstream connection and the request's id there, once sent.
    upstream: OnceLock<(Arc<Client>, i64)>,
    /// When it is given up, once sent; moved on by progress.
    deadline: Mutex<Option<Deadline>>,
    cancelled: AtomicBool,
    ended: AtomicBool,
}

#[derive(Clone, Copy)]
struct Deadline {
    at: Instant,
    limits: Limits,
}

impl Deadline {
    /// The ceiling: never moved past.
    fn hard(&self, began: Instant) -> Instant {
        began.checked_add(self.limits.ceiling).unwrap_or(far(began))
    }

    /// Its timeout counted again from `now`, never past the ceiling.
    fn count_from(&mut self, now: Instant, began: Instant) {
        let hard = self.hard(began);
        self.at = now.checked_add(self.limits.timeout).unwrap_or(hard).min(hard);
    }
}

/// A time so far ahead it counts as never.
fn far(from: Instant) -> Instant {
    from + Duration::from_secs(100 * 365 * 86_400)
}

impl Flight {
    /// The request went upstream (`Hub::send_server_tool`) to `client`.
    pub(super) fn sent(self: &Arc<Self>, client: Arc<Client>, sent: Sent) {
        let mut deadline = Deadline { at: self.began, limits: sent.limits };
        deadline.count_from(self.began, self.began);
        let at = deadline.at;
        *lock(&self.deadline) = Some(deadline);
        let _ = self.upstream.set((client, sent.id));
        self.flights.watch(self, at);
        // Ended meanwhile (answered already): not watched after all.
        if self.ended.load(Ordering::SeqCst) {
            lock(&self.flights.state).flying.remove(&self.key);
        }
        // Cancelled before it was sent: given up now.
        if self.cancelled.load(Ordering::SeqCst) {
            self.give_up();
        }
    }

    /// The request could not go this way (nothing was sent): forgotten,
    /// for a worker to answer.
    pub(super) fn not_sent(&self) {
        self.end();
    }

    fn deadline(&self) -> Option<Instant> {
        lock(&self.deadline).map(|deadline| deadline.at)
    }

    /// Ends the flight once: the link forgets it, the count goes down;
    /// false when it had ended already.
    fn end(&self) -> bool {
        if self.ended.swap(true, Ordering::SeqCst) {
            return false;
        }
        lock(&self.link.in_flight).remove(&self.id);
        self.link.answering.fetch_sub(1, Ordering::Relaxed);
        self.flights.forget(self.key);
        true
    }

    /// Answers the client with `outcome` (nothing when it cancelled).
    pub(super) fn answer(&self, outcome: Result<PassedResult, Error>) {
        if !self.end() || self.cancelled.load(Ordering::SeqCst) {
            return;
        }
        let id = &self.id;
        let bytes = match outcome {
            Ok(PassedResult::Text(text)) => crate::envelope::response_with(id, &text),
            Ok(PassedResult::Value(value)) => Frame::response(id, &Ok(value)).bytes,
            Err(err) => {
                // As the hub's status says it: a server still running has
                // no last words.
                let dead = self.upstream.get().map(|(client, _)| client).filter(|client| {
                    client.close_reason().is_some_and(|reason| reason != CloseReason::Shutdown)
                });
                let tail =
                    || dead.and_then(|client| self.flights.stderr_tail(&self.server, client));
                let error = upstream_error_with(&self.server, &err, tail);
                Frame::response(id, &Err(error)).bytes
            }
        };
        self.link.send_now(Route::Answer(id), bytes);
    }

    /// Its time ran out: the upstream is told, the client answered with
    /// the timeout a waiting worker would have sent.
    fn time_out(&self) {
        let Some((client, upstream_id)) = self.upstream.get() else { return };
        if !client.give_up_sent(*upstream_id, "timed out") {
            return; // Its answer is on the way.
        }
        let mut timeout = Timeout::request("tools/call", self.began.elapsed());
        if let Some(deadline) = *lock(&self.deadline) {
            let hard = deadline.hard(self.began);
            if deadline.at >= hard && deadline.limits.ceiling > deadline.limits.timeout {
                timeout.step = Step::Ceiling { limit: deadline.limits.ceiling };
            }
        }
        self.answer(Err(Error::Timeout(timeout).for_server(&self.server)));
    }
}

impl Sink for Flight {
    fn progress(&self, params: &Value) {
        // Nothing after the answer, nor after the client cancelled.
        if self.ended.load(Ordering::SeqCst) || self.cancelled.load(Ordering::SeqCst) {
            return;
        }
        if let Some(deadline) = lock(&self.deadline).as_mut() {
            deadline.count_from(Instant::now(), self.began);
        }
        if let Some(token) = &self.token {
            self.link.progress(&self.id, token, &Progress::from_params(params));
        }
    }

    fn log(&self, params: &Value) {
        if self.ended.load(Ordering::SeqCst) || self.cancelled.load(Ordering::SeqCst) {
            return;
        }
        self.link.log(&self.id, &self.server, &LogMessage::from_params(params));
    }

    fn finish(&self, outcome: Result<PassedResult, Error>) {
        self.answer(outcome.map_err(|err| err.for_server(&self.server)));
    }
}

impl GiveUp for Flight {
    /// The client cancelled it (or went away): the upstream is told, and
    /// nothing is answered.
    fn give_up(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
        if let Some((client, upstream_id)) = self.upstream.get() {
            if client.give_up_sent(*upstream_id, "cancelled by the client") {
                self.end();
            }
        }
    }
}
