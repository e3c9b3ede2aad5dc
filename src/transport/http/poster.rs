//! Who posts a frame: the explicit parameter every HTTP function that
//! posts takes, instead of asking which thread it runs on.

use std::time::Duration;

use crate::net::socket::Caller;

/// Who posts a frame, and so by when its I/O must end: passed down every
/// call that posts, so that nothing behaves differently by which thread it
/// runs on without saying so.
#[derive(Clone, Copy)]
pub(crate) enum Poster<'a> {
    /// Nobody waits in this POST's I/O (a worker's, or one bounded by its
    /// own deadline): it keeps its own limits.
    OwnLimits,
    /// The caller, on its own thread, waits in it: held to its deadline. A
    /// renewal or a sign-in the server wants is handed to a worker, and
    /// whatever stops at the deadline ends quietly (the caller's own
    /// timeout says what happened).
    Caller(&'a Caller<'a>),
}

impl Poster<'_> {
    /// True when a caller waits in this POST.
    pub(crate) fn waits(self) -> bool {
        matches!(self, Poster::Caller(_))
    }

    /// True once the waiting caller's deadline has passed.
    pub(crate) fn gave_up(self) -> bool {
        match self {
            Poster::OwnLimits => false,
            Poster::Caller(caller) => caller.gave_up(),
        }
    }

    /// `duration`, or less when the waiting caller's deadline comes sooner.
    pub(crate) fn pause_within(self, duration: Duration) -> Duration {
        match self {
            Poster::OwnLimits => duration,
            Poster::Caller(caller) => caller.pause_within(duration),
        }
    }
}
