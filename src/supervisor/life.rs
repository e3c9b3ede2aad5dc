//! The supervisor's life once the server runs: wait for signals, reap,
//! end the tree. Only `sys` system calls, stack buffers and no panics: this
//! runs in a forked copy of a multi-threaded process, or in tether's own
//! memory (see `clone.rs`).

use super::{sys, Sweep};

/// How long the tree gets after SIGTERM before SIGKILL when tether died
/// (it must be gone within a second).
const ORPHANED_GRACE_MS: i64 = 300;
/// The same at an orderly shutdown: within the 2 s tether gives a group
/// after SIGTERM before it sends SIGKILL itself.
const SHUTDOWN_GRACE_MS: i64 = 1400;
/// How long after SIGKILL the supervisor waits for the tree to be gone.
const KILL_WAIT_MS: i64 = 300;
/// How many processes of a tree get their SIGTERM only once.
const REMEMBERED: usize = 256;

/// What the supervisor waits for: the server ending (SIGCHLD), tether's
/// death (its parent-death signal, SIGUSR2), and the signals tether's
/// shutdown, or a terminal, sends the group.
pub(super) const WATCHED: sys::SigSet =
    sys::sigset(&[libc::SIGCHLD, libc::SIGUSR2, libc::SIGTERM, libc::SIGINT, libc::SIGHUP]);

/// Makes this process a supervisor: every signal blocked for good (the
/// watched ones are taken by `sigwait`; no handler of tether's ever runs
/// here), dying with tether, subreaper of the server's tree, and told when
/// its child ends. `Err(-errno)` if it cannot be one; it exits at once if
/// tether is already gone.
pub(super) unsafe fn become_supervisor(tether: libc::pid_t) -> Result<(), isize> {
    sys::sigprocmask(libc::SIG_SETMASK, sys::ALL_SIGNALS);
    // tether's death arrives as SIGUSR2, taken by sigwait.
    let result = sys::prctl(libc::PR_SET_PDEATHSIG, libc::SIGUSR2 as usize);
    if result != 0 {
        return Err(result);
    }
    // tether may have died before the prctl: nobody would end this.
    if sys::getppid() != tether {
        sys::exit(1);
    }
    let result = sys::prctl(libc::PR_SET_CHILD_SUBREAPER, 1);
    if result != 0 {
        return Err(result);
    }
    // A host that ignores SIGCHLD (or asks for no zombies) would leave this
    // process never told that the server ended, nor able to read how.
    sys::default_action(libc::SIGCHLD);
    Ok(())
}

/// The supervisor's life once the server is started; it never returns.
/// `become_supervisor` came first. It closes every descriptor it holds
/// (the server has its own copies).
pub(super) unsafe fn supervise(tether: libc::pid_t, server: libc::pid_t, sweep: Sweep) -> ! {
    // A copy of tether's memory (tokens, expanded secrets), or tether's
    // memory itself, must never end up in a core file, whatever signal ends
    // this process.
    sys::forbid_core_dump();
    close_every_descriptor();
    loop {
        let signal = sys::sigwait(WATCHED);
        if signal < 0 {
            // Not expected (no handler runs here, so no EINTR); never spin.
            sys::sleep_ms(100);
        }
        let signal = signal as libc::c_int;
        // tether is gone (whatever signal woke us: its death signal, or the
        // SIGHUP of an orphaned group): end the whole tree now.
        if sys::getppid() != tether {
            end_tree(server, ORPHANED_GRACE_MS);
            sys::exit(0);
        }
        match signal {
            // tether's shutdown signals the group when the server did not
            // leave on its own (or the server signalled its own group): end
            // the tree, with a grace, and exit as the server did.
            libc::SIGTERM | libc::SIGINT | libc::SIGHUP => {
                let status = end_tree(server, SHUTDOWN_GRACE_MS);
                exit_as(status.unwrap_or(signal));
            }
            _ => {}
        }
        // SIGCHLD (or a stray SIGUSR2 while tether lives): reap; once the
        // server ended, end what it left if this supervisor sweeps.
        if let Some(status) = reap(server) {
            if sweep == Sweep::Tree {
                end_tree(server, SHUTDOWN_GRACE_MS);
            }
            exit_as(status);
        }
    }
}

/// Closes every file descriptor: the server's pipes and std's exec-error
/// pipe must close when the server's copies do.
unsafe fn close_every_descriptor() {
    if sys::close_range(0, u32::MAX) != 0 {
        // No close_range (before Linux 5.9, or refused): one by one, up to
        // the limit on descriptors.
        let limit = sys::descriptor_limit().clamp(1024, 1 << 20) as libc::c_int;
        for fd in 0..limit {
            sys::close(fd);
        }
    }
}

/// Exits with the server's wait status: its exit code, or its signal (a
/// bare signal number counts as "killed by it"), raised again here so that
/// tether sees it; except a signal whose default is a core dump, which
/// becomes the shell's exit code 128 + signal: a dump of this process
/// would be a dump of tether's memory (which it shares on x86_64), and
/// before Linux 5.16 it would kill every process sharing that memory.
unsafe fn exit_as(status: libc::c_int) -> ! {
    if libc::WIFSIGNALED(status) {
        let signal = libc::WTERMSIG(status);
        if !dumps_core(signal) {
            sys::default_action(signal);
            sys::sigprocmask(libc::SIG_UNBLOCK, sys::sigset(&[signal]));
            sys::kill(sys::getpid(), signal);
        }
        sys::exit(128 + signal);
    }
    sys::exit(libc::WEXITSTATUS(status));
}

/// Signals whose default action is to dump core (signal(7)).
fn dumps_core(signal: libc::c_int) -> bool {
    matches!(
        signal,
        libc::SIGQUIT
            | libc::SIGILL
            | libc::SIGTRAP
            | libc::SIGABRT
            | libc::SIGBUS
            | libc::SIGFPE
            | libc::SIGSEGV
            | libc::SIGXCPU
            | libc::SIGXFSZ
            | libc::SIGSYS
    )
}

/// Ends every process of the tree: the supervisor's process group, and the
/// processes re-parented to it (those that left the group with `setsid`).
/// SIGTERM once to each, SIGKILL to what is left after `grace_ms`. Returns
/// the server's wait status if it was reaped meanwhile.
unsafe fn end_tree(server: libc::pid_t, grace_ms: i64) -> Option<libc::c_int> {
    let me = sys::getpid();
    let started = sys::now_ms();
    let mut server_status = None;
    // Who already got SIGTERM: a shell's `trap` or a Go program's signal
    // handling must not see it again and again.
    let mut termed = [0 as libc::pid_t; REMEMBERED];
    let mut termed_count = 0usize;
    loop {
        let elapsed = sys::now_ms() - started;
        let killing = elapsed >= grace_ms;
        let mut left = 0;
        let readable = for_each_member(me, |pid| {
            left += 1;
            if killing {
                sys::kill(pid, libc::SIGKILL);
            } else if !termed[..termed_count].contains(&pid) {
                sys::kill(pid, libc::SIGTERM);
                if termed_count < REMEMBERED {
                    termed[termed_count] = pid;
                    termed_count += 1;
                }
            }
        });
        if !readable {
            // No /proc (a sandbox): the group, at least. The supervisor
            // blocks SIGTERM; SIGKILL ends it too, so that comes last.
            sys::kill(-me, if killing { libc::SIGKILL } else { libc::SIGTERM });
            left = 1;
        }
        if let Some(status) = reap(server) {
            server_status = Some(status);
        }
        if left == 0 || elapsed >= grace_ms + KILL_WAIT_MS {
            // Gone, or unkillable (uninterruptible sleep): nothing more to do.
            return server_status;
        }
        sys::sleep_ms(10);
    }
}

/// Reaps every child that has ended; returns the server's wait status if it
/// was one of them.
unsafe fn reap(server: libc::pid_t) -> Option<libc::c_int> {
    let mut server_status = None;
    let mut status = 0;
    loop {
        let reaped = sys::wait4(-1, &mut status, libc::WNOHANG) as libc::pid_t;
        if reaped <= 0 {
            return server_status;
        }
        if reaped == server {
            server_status = Some(status);
        }
    }
}

/// Calls `found` for each live process (not a zombie) other than `me`
/// whose process group is `me` or whose parent is `me`, read from `/proc`
/// with raw system calls and stack buffers; false when `/proc` cannot be read.
unsafe fn for_each_member(me: libc::pid_t, mut found: impl FnMut(libc::pid_t)) -> bool {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
    let proc_dir = sys::open(c"/proc".as_ptr(), flags);
    if proc_dir < 0 {
        return false;
    }
    let proc_dir = proc_dir as libc::c_int;
    let mut entries = [0u8; 4096];
    loop {
        let read = sys::getdents64(proc_dir, entries.as_mut_ptr(), entries.len());
        if read <= 0 {
            break;
        }
        let filled = entries.get(..read as usize).unwrap_or(&[]);
        let mut at = 0usize;
        // Indexing by `get`: no bounds check that could panic, whatever the bytes.
        while let Some(&[low, high]) = filled.get(at + 16..at + 18) {
            // struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name.
            let record = u16::from_ne_bytes([low, high]) as usize;
            let Some(name) = filled.get(at + 19..at + record) else { break };
            let name = name.split(|&byte| byte == 0).next().unwrap_or(name);
            if let Some(pid) = parse_pid(name) {
                if pid != me {
                    if let Some((state, parent, group)) = stat_of(name) {
                        if state != b'Z' && state != b'X' && (group == me || parent == me) {
                            found(pid);
                        }
                    }
                }
            }
            at += record;
        }
    }
    sys::close(proc_dir);
    true
}

fn parse_pid(name: &[u8]) -> Option<libc::pid_t> {
    if name.is_empty() || name.len() > 10 || !name.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut pid: i64 = 0;
    for &digit in name {
        pid = pid * 10 + i64::from(digit - b'0');
    }
    libc::pid_t::try_from(pid).ok()
}

/// State, parent and process group of `/proc/<pid>/stat`.
unsafe fn stat_of(pid: &[u8]) -> Option<(u8, libc::pid_t, libc::pid_t)> {
    // "/proc/" + pid + "/stat\0" in a stack buffer.
    let mut path = [0u8; 32];
    let mut len = 0;
    for part in [b"/proc/".as_slice(), pid, b"/stat\0".as_slice()] {
        path.get_mut(len..len + part.len())?.copy_from_slice(part);
        len += part.len();
    }
    let fd = sys::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
    if fd < 0 {
        return None;
    }
    let fd = fd as libc::c_int;
    let mut text = [0u8; 1024];
    let read = sys::read(fd, text.as_mut_ptr(), text.len());
    sys::close(fd);
    if read <= 0 {
        return None;
    }
    let text = &text[..read as usize];
    // "pid (comm) state ppid pgrp …": comm may hold anything, up to the last ')'.
    let after = text.iter().rposition(|&byte| byte == b')')? + 1;
    let mut fields = text[after..].split(|&byte| byte == b' ').filter(|field| !field.is_empty());
    let state = *fields.next()?.first()?;
    let parent = parse_pid(fields.next()?)?;
    let group = parse_pid(fields.next()?)?;
    Some((state, parent, group))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_are_read_past_odd_names() {
        let me = std::process::id().to_string();
        // SAFETY: reads this process's own stat file.
        let (state, parent, group) = unsafe { stat_of(me.as_bytes()) }.unwrap();
        assert!(matches!(state, b'R' | b'S'), "{}", state as char);
        // SAFETY: getppid and getpgrp have no preconditions.
        unsafe {
            assert_eq!(parent, libc::getppid());
            assert_eq!(group, libc::getpgrp());
        }
        assert_eq!(parse_pid(b"1234"), Some(1234));
        assert_eq!(parse_pid(b"self"), None);
        assert_eq!(parse_pid(b""), None);
    }
}
