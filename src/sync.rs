//! Locking, said once.
//!
//! Every mutex in tether guards plain data, and no holder calls out (to a
//! server, a host callback or the disk) while holding one, so a holder that
//! panicked cannot have left the data half-changed in a way others could
//! trip on. A poisoned lock is therefore taken as it is, rather than turning
//! one panic into a panic in every thread that touches the same data.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

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
