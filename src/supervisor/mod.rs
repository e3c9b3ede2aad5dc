//! A supervisor between tether and each process it starts (Linux): stdio
//! servers, and `!command` helpers while a configuration loads, so that the
//! whole tree ends even when tether is killed outright.
//!
//! The parent-death signal reaches only the process it is set on. A server
//! started by `npx`, `uvx` or a shell is a tree: children in its process
//! group, maybe a grandchild that left with `setsid`. So the process tether
//! starts is a small supervisor that runs tether's code without exec and
//! starts the server as its own child:
//!
//! ```text
//! tether ── supervisor (group leader, subreaper) ── server ── its children…
//! ```
//!
//! The supervisor is the process group's leader and a child subreaper, so
//! every orphan of the server's tree is re-parented to it, also one that
//! left the group. It waits for three things (`life.rs`): the server ending
//! (a server's supervisor then ends what it left; a `!command` helper's
//! leaves it, so an agent the helper started on purpose lives on; either
//! exits with the process's own status, so tether sees its exit), tether
//! dying (seen as its parent changing, whatever signal woke it: it ends the
//! whole tree at once), and the SIGTERM tether's shutdown sends the group
//! when the server did not leave on its own (it ends the tree, each process
//! getting SIGTERM once, then SIGKILL after a grace, and exits as the server
//! did). It blocks every signal for its whole life (no handler of tether's
//! ever runs in it), never dumps core (a server killed by a signal that
//! dumps core is reported as the shell does, exit status 128 + n: a dump of
//! the supervisor would be a dump of tether's memory), and holds no file
//! descriptor, so no pipe of tether's stays open because of it.
//!
//! Two ways to start it, one life:
//! - **`clone.rs`** (x86_64, the servers): the supervisor shares tether's
//!   memory (`CLONE_VM`) on a small stack of its own and starts the server
//!   the way `vfork` does, so a start costs two cheap process creations
//!   however big tether is, and no page of tether's is copied, ever. A
//!   fork copies the page tables of the whole process twice, which is what
//!   made 200 servers start at a third of the speed of a plain spawn loop.
//! - **`install`** (helpers, and other architectures): `pre_exec` on a std
//!   `Command`, where the supervisor is a forked copy of tether and forks
//!   the server.
//!
//! Either way it uses nothing but the system calls of `sys.rs`: no
//! allocation, no lock, no formatting, no C library.

mod life;
mod sys;
mod tree;

#[cfg(target_arch = "x86_64")]
mod clone;
#[cfg(target_arch = "x86_64")]
pub(crate) use clone::{spawn, Launch, Supervised};

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

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

/// Makes `command` start as supervisor and server, by fork (see the module
/// docs).
///
/// `command` must start in a process group of its own (`process_group(0)`)
/// and be spawned from a thread that lives until the process is done with
/// it: the parent-death signal fires when that thread ends.
pub(crate) fn install(command: &mut Command, sweep: Sweep) {
    let tether = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the forked child before exec. It makes
    // only system calls; the supervisor branch never returns (it exits),
    // the server branch returns into std's exec.
    unsafe {
        command.pre_exec(move || start(tether, sweep));
    }
}

/// In the forked child: becomes the supervisor and forks the server, which
/// returns `Ok` to be exec'd. Never returns in the supervisor.
unsafe fn start(tether: libc::pid_t, sweep: Sweep) -> io::Result<()> {
    let failed = |result: isize| io::Error::from_raw_os_error(-result as i32);
    // std reset the mask in this child: this is the one the server gets.
    let before = sys::sigprocmask(libc::SIG_BLOCK, 0);
    life::become_supervisor(tether).map_err(failed)?;
    // A copy of tether's memory (tokens, expanded secrets) never goes into
    // a core file, not even through a piped core_pattern.
    sys::prctl(libc::PR_SET_DUMPABLE, 0);
    let supervisor = sys::getpid();
    // The C library's fork: this process is a private copy, its errno is
    // its own.
    match libc::fork() {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            // The server: the signal mask it execs with is tether's own, and
            // it dies with the supervisor.
            sys::sigprocmask(libc::SIG_SETMASK, before);
            let result = sys::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as usize);
            if result != 0 {
                return Err(failed(result));
            }
            if sys::getppid() != supervisor {
                sys::exit(1);
            }
            Ok(())
        }
        server => life::supervise(tether, server, sweep),
    }
}
