//! How much stack the calling thread has left, so that a script runs on the
//! caller's own thread when the engine's stack limit fits there (a call
//! from a script is then made from the thread a direct call would be made
//! from), and on a thread of its own, sized for it, when it does not.

/// The bytes of stack below this point on the calling thread; `None` where
/// the system does not say.
#[cfg(target_os = "linux")]
pub(super) fn left() -> Option<usize> {
    // SAFETY: the attributes are initialised by pthread_getattr_np before
    // they are read, and destroyed once; the pointers given are to locals.
    unsafe {
        let mut attributes: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attributes) != 0 {
            return None;
        }
        let mut lowest: *mut libc::c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let found = libc::pthread_attr_getstack(&attributes, &mut lowest, &mut size) == 0;
        libc::pthread_attr_destroy(&mut attributes);
        if !found || lowest.is_null() {
            return None;
        }
        // A local's address stands for the stack pointer: near enough,
        // against the margin the caller adds.
        let here = std::ptr::addr_of!(size) as usize;
        here.checked_sub(lowest as usize)
    }
}

/// Elsewhere: unknown, so scripts get a thread of their own.
#[cfg(not(target_os = "linux"))]
pub(super) fn left() -> Option<usize> {
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_thread_of_a_known_size_has_less_than_that_left() {
        let size = 4 << 20;
        let left = std::thread::Builder::new()
            .stack_size(size)
            .spawn(super::left)
            .unwrap()
            .join()
            .unwrap();
        if cfg!(target_os = "linux") {
            let left = left.expect("Linux says");
            assert!(left > size / 2 && left <= size, "{left}");
        }
    }
}
