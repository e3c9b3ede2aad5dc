//! Locking, said once.
//!
//! Every mutex in tether guards plain data, and no holder calls out (to a
//! server, a host callback or the disk) while holding one, so a holder that
//! panicked cannot have left the data half-changed in a way others could
//! trip on. A poisoned lock is therefore taken as it is, rather than turning
//! one panic into a panic in every thread that touches the same data.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Locks `mutex`, also when a former holder panicked.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Waits on `condvar` for at most `timeout`, also when a former holder panicked.
pub(crate) fn wait_timeout<'a, T>(
    condvar: &Condvar,
    guard: MutexGuard<'a, T>,
    timeout: Duration,
) -> MutexGuard<'a, T> {
    condvar.wait_timeout(guard, timeout).unwrap_or_else(PoisonError::into_inner).0
}

/// A warning a flood would repeat: said at most once a second, with how
/// many times it happened since it was last said.
#[derive(Default)]
pub(crate) struct ThrottledWarning {
    last: Mutex<Option<Instant>>,
    unsaid: AtomicU64,
}

impl ThrottledWarning {
    /// Nothing said yet (usable in a `static`).
    pub(crate) const fn new() -> ThrottledWarning {
        ThrottledWarning { last: Mutex::new(None), unsaid: AtomicU64::new(0) }
    }

    /// Warns `what` now, or counts it for the next time.
    pub(crate) fn warn(&self, what: impl FnOnce() -> String) {
        let mut last = lock(&self.last);
        if last.is_some_and(|at| at.elapsed() < Duration::from_secs(1)) {
            self.unsaid.fetch_add(1, Ordering::Relaxed);
            return;
        }
        *last = Some(Instant::now());
        drop(last);
        match self.unsaid.swap(0, Ordering::Relaxed) {
            0 => log::warn!("{}", what()),
            more => log::warn!("{} (and {more} more times since the last such warning)", what()),
        }
    }
}
