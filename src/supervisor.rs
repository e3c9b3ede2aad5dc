//! A supervisor between tether and each process it starts (Linux): stdio
//! servers, and `!command` helpers while a configuration loads, so that the
//! whole tree ends even when tether is killed outright.
//!
//! The parent-death signal reaches only the process it is set on. A server
//! started by `npx`, `uvx` or a shell is a tree: children in its process
//! group, maybe a grandchild that left with `setsid`. So the process tether
//! starts is a small supervisor, forked without exec, which forks and execs
//! the server as its own child:
//!
//! ```text
//! tether ── supervisor (group leader, subreaper) ── server ── its children…
//! ```
//!
//! The supervisor is the process group's leader and a child subreaper, so
//! every orphan of the server's tree is re-parented to it, also one that
//! left the group. It waits in `sigwaitinfo` for three things: the server
//! ending (a server's supervisor then ends what it left; a `!command`
//! helper's leaves it, so an agent the helper started on purpose lives on;
//! either exits with the process's own status, so tether sees its exit),
//! tether dying (seen as its parent changing, whatever signal woke it: it
//! ends the whole tree at once), and the SIGTERM tether's shutdown sends the
//! group when the server did not leave on its own (it ends the tree, each
//! process getting SIGTERM once, then SIGKILL after a grace, and exits as the
//! server did). It never dumps core: it holds a copy of tether's memory.
//!
//! It runs in a forked copy of a multi-threaded process, so it uses nothing
//! but system calls: no allocation, no lock, no formatting. It holds no file
//! descriptor, so no pipe of tether's stays open because of it.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

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

/// What the supervisor ends when the process it started ends by itself.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sweep {
    /// A server: what it leaves behind (its group, and what left the group
    /// and was re-parented to the supervisor) ends with it.
    Tree,
    /// A `!command` helper: nothing, so that an agent it started on purpose
    /// (`gpg-agent` behind `pass`) lives on. Its tree still ends if tether
    /// dies while it runs.
    Nothing,
}

/// Makes `command` start as supervisor and server (see the module docs).
///
/// `command` must start in a process group of its own (`process_group(0)`)
/// and be spawned from a thread that lives until the process is done with
/// it: the parent-death signal fires when that thread ends.
pub(crate) fn install(command: &mut Command, sweep: Sweep) {
    let tether = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the forked child before exec. It calls only
    // async-signal-safe system calls; the supervisor branch never returns
    // (it `_exit`s), the server branch returns into std's exec.
    unsafe {
        command.pre_exec(move || start(tether, sweep));
    }
}

/// In the forked child: becomes the supervisor and forks the server, which
/// returns `Ok` to be exec'd. Never returns in the supervisor.
unsafe fn start(tether: libc::pid_t, sweep: Sweep) -> io::Result<()> {
    let mut watched: libc::sigset_t = std::mem::zeroed();
    let mut before: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut watched);
    for signal in [libc::SIGCHLD, libc::SIGUSR2, libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        libc::sigaddset(&mut watched, signal);
    }
    libc::sigprocmask(libc::SIG_BLOCK, &watched, &mut before);
    // tether's death arrives as SIGUSR2, taken by sigwaitinfo (blocked).
    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGUSR2) != 0 {
        return Err(io::Error::last_os_error());
    }
    // tether may have died between fork and prctl: nobody would end this.
    if libc::getppid() != tether {
        libc::_exit(1);
    }
    if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) != 0 {
        return Err(io::Error::last_os_error());
    }
    let supervisor = libc::getpid();
    match libc::fork() {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            // The server: the signal mask it execs with is tether's own, and
            // it dies with the supervisor.
            libc::sigprocmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::getppid() != supervisor {
                libc::_exit(1);
            }
            Ok(())
        }
        server => supervise(tether, server, sweep, &watched),
    }
}

/// The supervisor's life; it never returns.
unsafe fn supervise(
    tether: libc::pid_t,
    server: libc::pid_t,
    sweep: Sweep,
    watched: &libc::sigset_t,
) -> ! {
    // A copy of tether's memory (tokens, expanded secrets) must never end up
    // in a core file, whatever signal ends this process.
    libc::prctl(libc::PR_SET_DUMPABLE, 0);
    close_every_descriptor();
    loop {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let signal = libc::sigwaitinfo(watched, &mut info);
        // tether is gone (whatever signal woke us: its death signal, or the
        // SIGHUP of an orphaned group): end the whole tree now.
        if libc::getppid() != tether {
            end_tree(server, ORPHANED_GRACE_MS);
            libc::_exit(0);
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
    if libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32) != 0 {
        for fd in 0..65_536 {
            libc::close(fd);
        }
    }
}

/// Exits with the server's wait status: its exit code, or its signal (a
/// bare signal number counts as "killed by it").
unsafe fn exit_as(status: libc::c_int) -> ! {
    if libc::WIFSIGNALED(status) {
        let signal = libc::WTERMSIG(status);
        libc::signal(signal, libc::SIG_DFL);
        let mut only: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut only);
        libc::sigaddset(&mut only, signal);
        libc::sigprocmask(libc::SIG_UNBLOCK, &only, std::ptr::null_mut());
        libc::kill(libc::getpid(), signal);
        libc::_exit(128 + signal);
    }
    libc::_exit(libc::WEXITSTATUS(status));
}

/// Ends every process of the tree: the supervisor's process group, and the
/// processes re-parented to it (those that left the group with `setsid`).
/// SIGTERM once to each, SIGKILL to what is left after `grace_ms`. Returns
/// the server's wait status if it was reaped meanwhile.
unsafe fn end_tree(server: libc::pid_t, grace_ms: i64) -> Option<libc::c_int> {
    let me = libc::getpid();
    let started = now_ms();
    let mut server_status = None;
    // Who already got SIGTERM: a shell's `trap` or a Go program's signal
    // handling must not see it again and again.
    let mut termed = [0 as libc::pid_t; REMEMBERED];
    let mut termed_count = 0usize;
    loop {
        let elapsed = now_ms() - started;
        let killing = elapsed >= grace_ms;
        let mut left = 0;
        let readable = for_each_member(me, |pid| {
            left += 1;
            if killing {
                libc::kill(pid, libc::SIGKILL);
            } else if !termed[..termed_count].contains(&pid) {
                libc::kill(pid, libc::SIGTERM);
                if termed_count < REMEMBERED {
                    termed[termed_count] = pid;
                    termed_count += 1;
                }
            }
        });
        if !readable {
            // No /proc (a sandbox): the group, at least. The supervisor
            // blocks SIGTERM; SIGKILL ends it too, so that comes last.
            libc::killpg(me, if killing { libc::SIGKILL } else { libc::SIGTERM });
            left = 1;
        }
        if let Some(status) = reap(server) {
            server_status = Some(status);
        }
        if left == 0 || elapsed >= grace_ms + KILL_WAIT_MS {
            // Gone, or unkillable (uninterruptible sleep): nothing more to do.
            return server_status;
        }
        let pause = libc::timespec { tv_sec: 0, tv_nsec: 10_000_000 };
        libc::nanosleep(&pause, std::ptr::null_mut());
    }
}

/// Reaps every child that has ended; returns the server's wait status if it
/// was one of them.
unsafe fn reap(server: libc::pid_t) -> Option<libc::c_int> {
    let mut server_status = None;
    let mut status = 0;
    loop {
        let reaped = libc::waitpid(-1, &mut status, libc::WNOHANG);
        if reaped <= 0 {
            return server_status;
        }
        if reaped == server {
            server_status = Some(status);
        }
    }
}

fn now_ms() -> i64 {
    let mut time = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes only into `time`.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut time);
    }
    time.tv_sec * 1000 + time.tv_nsec / 1_000_000
}

/// Calls `found` for each live process (not a zombie) other than `me`
/// whose process group is `me` or whose parent is `me`, read from `/proc`
/// with raw system calls and stack buffers; false when `/proc` cannot be read.
unsafe fn for_each_member(me: libc::pid_t, mut found: impl FnMut(libc::pid_t)) -> bool {
    let proc_dir =
        libc::open(c"/proc".as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC);
    if proc_dir < 0 {
        return false;
    }
    let mut entries = [0u8; 4096];
    loop {
        let read =
            libc::syscall(libc::SYS_getdents64, proc_dir, entries.as_mut_ptr(), entries.len());
        if read <= 0 {
            break;
        }
        let mut at = 0usize;
        while at < read as usize {
            // struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name.
            let record = u16::from_ne_bytes([entries[at + 16], entries[at + 17]]) as usize;
            let name = &entries[at + 19..at + record];
            let name = &name[..name.iter().position(|&byte| byte == 0).unwrap_or(name.len())];
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
    libc::close(proc_dir);
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
    let fd = libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
    if fd < 0 {
        return None;
    }
    let mut text = [0u8; 1024];
    let read = libc::read(fd, text.as_mut_ptr().cast(), text.len());
    libc::close(fd);
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
