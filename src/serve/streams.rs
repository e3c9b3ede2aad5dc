//! The streams an HTTP client holds open to tether, and which one a frame
//! takes. Streamable HTTP has no single pipe: each POST of a request may
//! be answered with an event stream that carries that request's news
//! (progress) and ends with its answer, and a GET opens the session's own
//! stream for what concerns no request (list changes, log messages).
//! tether's requests to the client (roots, sampling, elicitation) go on
//! the newest request stream, where the client is surely reading, else on
//! the session's own.
//!
//! Each stream is a bounded channel read by the connection thread that
//! holds the HTTP response open; senders never hold the lock while they
//! wait for room.

use std::sync::Mutex;
use std::time::Duration;

use crossbeam_channel::{bounded, Receiver, Sender};

use crate::jsonrpc::RequestId;
use crate::sync::lock;

/// Frames waiting on one stream.
const STREAM_FRAMES: usize = 256;

/// What a frame is to the client, which picks its HTTP stream.
#[derive(Clone, Copy)]
pub(super) enum Route<'a> {
    /// The answer to this request: its stream's last frame.
    Answer(&'a RequestId),
    /// News of this request (progress), or of this listen stream.
    About(&'a RequestId),
    /// A request from tether: any stream the client reads.
    Ask,
    /// A notification of no request: the client's own stream.
    Announce,
}

/// One frame on a stream; `last` ends the stream (a request's answer).
pub(super) struct Piece {
    pub(super) bytes: Vec<u8>,
    pub(super) last: bool,
}

/// A request's stream: its id, whether the client reads events on it
/// (else it waits for the answer alone), and its channel.
struct Post {
    id: RequestId,
    events: bool,
    out: Sender<Piece>,
}

#[derive(Default)]
struct Open {
    posts: Vec<Post>,
    /// The GET stream, with its number (a newer GET replaces it).
    general: Option<(u64, Sender<Piece>)>,
    opened: u64,
    /// The session ended: a stream opened now ends at once.
    closed: bool,
}

/// One HTTP client's open streams.
#[derive(Default)]
pub(super) struct Streams {
    open: Mutex<Open>,
}

impl Streams {
    /// Opens the stream of request `id`; `events` when the client takes
    /// an event stream, not just the answer.
    pub(super) fn open_post(&self, id: &RequestId, events: bool) -> Receiver<Piece> {
        let (out, stream) = bounded(STREAM_FRAMES);
        let mut open = lock(&self.open);
        // After the session ended the sender is dropped here: the reader
        // hears at once that no answer will come.
        if !open.closed {
            open.posts.push(Post { id: id.clone(), events, out });
        }
        stream
    }

    /// Closes request `id`'s stream (answered, or its client went).
    pub(super) fn close_post(&self, id: &RequestId) {
        lock(&self.open).posts.retain(|post| &post.id != id);
    }

    /// Opens the session's own stream, replacing an older one (whose reader
    /// then ends); returns its number for [`Streams::close_general`].
    pub(super) fn open_general(&self) -> (u64, Receiver<Piece>) {
        let (out, stream) = bounded(STREAM_FRAMES);
        let mut open = lock(&self.open);
        open.opened += 1;
        let number = open.opened;
        if !open.closed {
            open.general = Some((number, out));
        }
        (number, stream)
    }

    /// Closes the session's own stream `number`, unless a newer one came.
    pub(super) fn close_general(&self, number: u64) {
        let mut open = lock(&self.open);
        if open.general.as_ref().is_some_and(|(open, _)| *open == number) {
            open.general = None;
        }
    }

    /// Closes every stream, and any opened later: their readers end.
    pub(super) fn close_all(&self) {
        let mut open = lock(&self.open);
        open.closed = true;
        open.posts.clear();
        open.general = None;
    }

    /// True while a stream is open (a request waits, or the GET stream is
    /// read): the session is in use, however long ago it last asked.
    pub(super) fn is_busy(&self) -> bool {
        let open = lock(&self.open);
        !open.posts.is_empty() || open.general.is_some()
    }

    /// Sends `bytes` where `route` says, waiting at most `wait` for room;
    /// false when no stream takes it (or it stayed full).
    pub(super) fn send(&self, route: Route<'_>, bytes: Vec<u8>, wait: Duration) -> bool {
        let (out, last) = {
            let open = lock(&self.open);
            let post = |id: &RequestId| {
                open.posts.iter().find(|post| &post.id == id).map(|post| post.out.clone())
            };
            match route {
                Route::Answer(id) => (post(id), true),
                Route::About(id) => (post(id), false),
                Route::Ask => {
                    let newest = open.posts.iter().rev().find(|post| post.events);
                    let out = newest
                        .map(|post| post.out.clone())
                        .or_else(|| open.general.as_ref().map(|(_, out)| out.clone()));
                    (out, false)
                }
                Route::Announce => (open.general.as_ref().map(|(_, out)| out.clone()), false),
            }
        };
        let Some(out) = out else { return false };
        let piece = Piece { bytes, last };
        if wait.is_zero() {
            out.try_send(piece).is_ok()
        } else {
            out.send_timeout(piece, wait).is_ok()
        }
    }
}
