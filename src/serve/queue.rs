//! The workers' bounded queue of requests: a mutex and two condition
//! variables. Not a channel: a channel's receiver spins and yields before
//! it sleeps, and eight idle workers doing so took a sixth of the serving's
//! time in `sched_yield` on one CPU; a worker waiting here sleeps at once
//! and is woken by the one push it waits for. (The stdio writer keeps its
//! channel: measured, it drains bursts better so.)

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::sync::lock;

pub(super) struct Queue<T> {
    state: Mutex<State<T>>,
    /// Told when an item comes, or the queue closes.
    ready: Condvar,
    /// Told when an item leaves.
    room: Condvar,
    capacity: usize,
}

struct State<T> {
    items: VecDeque<T>,
    closed: bool,
}

impl<T> Queue<T> {
    pub(super) fn new(capacity: usize) -> Queue<T> {
        Queue {
            state: Mutex::new(State { items: VecDeque::new(), closed: false }),
            ready: Condvar::new(),
            room: Condvar::new(),
            capacity,
        }
    }

    /// Queues `item`, waiting at most `wait` for room; gives it back when
    /// the queue stayed full or is closed.
    pub(super) fn push(&self, item: T, wait: Duration) -> Result<(), T> {
        let deadline = Instant::now() + wait;
        let mut state = lock(&self.state);
        while !state.closed && state.items.len() >= self.capacity {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(item);
            }
            state = self.room.wait_timeout(state, left).unwrap_or_else(PoisonError::into_inner).0;
        }
        if state.closed {
            return Err(item);
        }
        state.items.push_back(item);
        drop(state);
        self.ready.notify_one();
        Ok(())
    }

    /// The next item, waiting for one; `None` once closed and empty.
    pub(super) fn pop(&self) -> Option<T> {
        let mut state = lock(&self.state);
        loop {
            if let Some(item) = state.items.pop_front() {
                drop(state);
                self.room.notify_one();
                return Some(item);
            }
            if state.closed {
                return None;
            }
            state = self.ready.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Takes nothing more; what is queued is still given out.
    pub(super) fn close(&self) {
        lock(&self.state).closed = true;
        self.ready.notify_all();
        self.room.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_ordered_and_closed() {
        let queue = Queue::new(2);
        assert!(queue.push(1, Duration::ZERO).is_ok());
        assert!(queue.push(2, Duration::ZERO).is_ok());
        assert_eq!(queue.push(3, Duration::from_millis(10)), Err(3));
        assert_eq!(queue.pop(), Some(1));
        queue.close();
        assert_eq!(queue.push(4, Duration::ZERO), Err(4));
        assert_eq!(queue.pop(), Some(2));
        assert_eq!(queue.pop(), None);
    }

    #[test]
    fn a_waiting_pop_is_woken() {
        let queue = std::sync::Arc::new(Queue::new(1));
        let popper = {
            let queue = std::sync::Arc::clone(&queue);
            std::thread::spawn(move || queue.pop())
        };
        std::thread::sleep(Duration::from_millis(20));
        queue.push(7, Duration::ZERO).unwrap();
        assert_eq!(popper.join().unwrap(), Some(7));
    }
}
