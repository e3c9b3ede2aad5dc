//! The supervisor's life once the server runs: wait for signals, reap,
//! end the tree. Only `sys` system calls, stack buffers and no panics: this
//! runs in a forked copy of a multi-threaded process, or in tether's own
//! memory (see `clone.rs`).

use super::tree::Tree;
use super::{sys, Sweep};

/// How long the tree gets after SIGTERM before SIGKILL when tether died
/// (it must be gone within a second).
const ORPHANED_GRACE_MS: i64 = 300;
/// The same at an orderly shutdown: within the 2 s tether gives a group
/// after SIGTERM before it sends SIGKILL itself.
const SHUTDOWN_GRACE_MS: i64 = 1400;
/// How long the supervisor goes on killing before it gives up on what
/// SIGKILL cannot end (a process in uninterruptible sleep).
const KILL_WAIT_MS: i64 = 2000;
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
            end_tree(tether, server, ORPHANED_GRACE_MS);
            sys::exit(0);
        }
        match signal {
            // tether's shutdown signals the group when the server did not
            // leave on its own (or the server signalled its own group): end
            // the tree, with a grace, and exit as the server did.
            libc::SIGTERM | libc::SIGINT | libc::SIGHUP => {
                let status = end_tree(tether, server, SHUTDOWN_GRACE_MS);
                exit_as(status.unwrap_or(signal));
            }
            _ => {}
        }
        // SIGCHLD (or a stray SIGUSR2 while tether lives): reap; once the
        // server ended, end what it left if this supervisor sweeps.
        if let Some(status) = reap(server) {
            if sweep == Sweep::Tree {
                end_tree(tether, server, SHUTDOWN_GRACE_MS);
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

/// Ends every process of the tree (see `tree.rs`): the supervisor's group,
/// and every process whose parents lead back to it, however it detached.
/// First SIGTERM, once to each, for `grace_ms` (less once tether is gone);
/// then the tree is frozen and killed, pass after pass, until a snapshot
/// finds nobody left: each pass sends SIGSTOP to every member before it
/// sends SIGKILL to any, so none of them can start a new process meanwhile
/// (a parent that starts its child again as soon as it dies included). A
/// process that a pass missed, forked just before it, has a killed parent
/// and is the supervisor's by the next. Gives up only on processes that
/// outlast `KILL_WAIT_MS` of SIGKILL (uninterruptible sleep). Returns the
/// server's wait status if it was reaped meanwhile.
unsafe fn end_tree(tether: libc::pid_t, server: libc::pid_t, grace_ms: i64) -> Option<libc::c_int> {
    let me = sys::getpid();
    let started = sys::now_ms();
    let mut server_status = None;
    let mut tree = Tree::new();
    // Who already got SIGTERM: a shell's `trap` or a Go program's signal
    // handling must not see it again and again.
    let mut termed = [0 as libc::pid_t; REMEMBERED];
    let mut termed_count = 0usize;
    let mut grace_ms = grace_ms;
    let mut killing_since = None;
    loop {
        if sys::getppid() != tether {
            grace_ms = grace_ms.min(ORPHANED_GRACE_MS);
        }
        let now = sys::now_ms();
        let killing = now - started >= grace_ms;
        if killing && killing_since.is_none() {
            killing_since = Some(now);
        }
        let mut left = 0;
        let readable = tree.as_mut().is_some_and(|tree| tree.read(me));
        match tree.as_ref() {
            Some(tree) if readable => {
                for pid in tree.members() {
                    left += 1;
                    if killing {
                        sys::kill(pid, libc::SIGSTOP);
                    } else if !termed[..termed_count].contains(&pid) {
                        sys::kill(pid, libc::SIGTERM);
                        if termed_count < REMEMBERED {
                            termed[termed_count] = pid;
                            termed_count += 1;
                        }
                    }
                }
                if killing {
                    for pid in tree.members() {
                        sys::kill(pid, libc::SIGKILL);
                    }
                }
            }
            _ => {
                // No /proc (a sandbox), or no memory: the group, at least.
                // The supervisor blocks SIGTERM; SIGKILL ends it too, so
                // that comes last.
                sys::kill(-me, if killing { libc::SIGKILL } else { libc::SIGTERM });
                left = 1;
            }
        }
        if let Some(status) = reap(server) {
            server_status = Some(status);
        }
        let unkillable = killing_since.is_some_and(|since| now - since >= KILL_WAIT_MS);
        if left == 0 || unkillable {
            return server_status;
        }
        // Killing: the next pass at once finds what the last one missed.
        sys::sleep_ms(if killing { 1 } else { 10 });
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
