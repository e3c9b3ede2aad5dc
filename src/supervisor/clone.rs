//! The supervisor started in tether's own memory (x86_64 Linux).
//!
//! `spawn` clones a process that shares tether's address space
//! (`CLONE_VM`, not a thread: its own pid, signals, descriptors and
//! limits) on a 64 KiB stack mapped for it. That process becomes the
//! supervisor and starts the server the way `vfork` does (`CLONE_VM |
//! CLONE_VFORK`, on the unused part of its own stack), which sets up the
//! server's descriptors and execs it. Nothing is copied, so a start costs
//! the same in a small process as in one with hundreds of threads.
//!
//! Sharing memory sets the rules: both children run only the system calls
//! of `sys.rs` (no C library: its `errno` is a tether thread's); they read
//! what tether prepared (`Start`: paths, argument and environment arrays,
//! descriptors) and write nothing of tether's. tether frees what they read
//! only after the exec-status pipe says the server has exec'd or failed, and
//! unmaps the stack only after it has reaped the supervisor.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::ptr;

use libc::{c_char, c_int, pid_t};

use super::{life, sys, Sweep};

/// The supervisor's stack; it uses a few KiB (the deepest is reading
/// `/proc` while it ends a tree), and the server's start runs below it.
const STACK: usize = 64 * 1024;
/// An inaccessible page under the stack, so an overflow faults.
const GUARD: usize = 4096;
/// The bottom of the stack, where the server's start runs before its exec.
const SERVER_STACK: usize = 16 * 1024;

/// What to start: the program's resolved path, what it is called (its
/// `argv[0]`), its arguments, its whole environment, its directory.
pub(crate) struct Launch<'a> {
    pub(crate) path: &'a Path,
    pub(crate) name: &'a str,
    pub(crate) args: &'a [String],
    pub(crate) env: &'a [(String, String)],
    pub(crate) cwd: Option<&'a Path>,
}

/// A started supervisor (with the server under it): its pid, and its stack,
/// unmapped once it has been reaped (leaked if it never is).
pub(crate) struct Supervised {
    pid: pid_t,
    stack: Option<Stack>,
}

impl Supervised {
    pub(crate) fn id(&self) -> u32 {
        self.pid as u32
    }

    /// Waits for the supervisor to exit (it exits as the server did) and
    /// reaps it.
    pub(crate) fn wait(&mut self) -> io::Result<ExitStatus> {
        loop {
            let mut status = 0;
            // SAFETY: waitpid writes only into `status`.
            let reaped = unsafe { libc::waitpid(self.pid, &mut status, 0) };
            if reaped == self.pid {
                self.stack = None;
                return Ok(ExitStatus::from_raw(status));
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                if err.raw_os_error() == Some(libc::ECHILD) {
                    // Someone else (the host) reaped it: it is gone too.
                    self.stack = None;
                }
                return Err(err);
            }
        }
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        // Never unmap the stack of a process that may still run on it.
        if let Some(stack) = self.stack.take() {
            std::mem::forget(stack);
        }
    }
}

/// Starts the supervisor and, under it, the server; returns once the
/// server has exec'd (or with the error its exec, or its setup, met).
///
/// Must be called from a thread that lives as long as the process: the
/// supervisor's parent-death signal fires when that thread ends.
///
/// Returns tether's ends of the server's stdin, stdout and stderr.
pub(crate) fn spawn(launch: &Launch<'_>, sweep: Sweep) -> io::Result<(Supervised, [OwnedFd; 3])> {
    let strings = Strings::new(launch)?;
    let (stdin_child, stdin_ours) = pipe()?;
    let (stdout_ours, stdout_child) = pipe()?;
    let (stderr_ours, stderr_child) = pipe()?;
    let (status_ours, status_child) = pipe()?;
    // The server puts its pipes on 0, 1 and 2: none of what it moves or
    // still needs may already be there.
    let stdio = [above_stdio(stdin_child)?, above_stdio(stdout_child)?, above_stdio(stderr_child)?];
    let status_child = above_stdio(status_child)?;
    let stack = Stack::new()?;
    let start = Box::new(Start {
        tether: std::process::id() as pid_t,
        sweep,
        path: strings.path.as_ptr(),
        argv: strings.argv.as_ptr(),
        envp: strings.envp.as_ptr(),
        cwd: strings.cwd.as_ref().map_or(ptr::null(), |cwd| cwd.as_ptr()),
        stdio: [stdio[0].as_raw_fd(), stdio[1].as_raw_fd(), stdio[2].as_raw_fd()],
        status: status_child.as_raw_fd(),
        script_argv: strings.script_argv.as_ptr(),
        server_stack: stack.server_top(),
    });
    let flags = (libc::CLONE_VM | libc::SIGCHLD) as usize;
    let pid = {
        // Every signal blocked from before the clone until the supervisor
        // has made that permanent: a handler of tether's must never run in
        // a process that shares its memory.
        let _blocked = BlockedSignals::new();
        // SAFETY: supervisor_main never returns and uses only `sys`;
        // `start`, `strings` and the stack outlive its use of them (module
        // docs).
        unsafe { sys::clone(flags, stack.top(), supervisor_main, &*start as *const Start as usize) }
    };
    drop(stdio);
    drop(status_child);
    if pid < 0 {
        return Err(io::Error::from_raw_os_error(-pid as i32));
    }
    let mut supervised = Supervised { pid: pid as pid_t, stack: Some(stack) };
    let outcome = exec_outcome(status_ours);
    if outcome.is_err() {
        // It exits at once (as the server did, or with 1); until it has,
        // it may still read `start`.
        let _ = supervised.wait();
    }
    // The server has exec'd or given up, and the supervisor has copied
    // what it keeps: nothing reads these any more.
    drop(start);
    drop(strings);
    outcome?;
    if let Some(stack) = &supervised.stack {
        stack.forget_server_part();
    }
    Ok((supervised, [stdin_ours, stdout_ours, stderr_ours]))
}

/// The calling thread's signals, all blocked while this lives.
struct BlockedSignals {
    before: libc::sigset_t,
}

impl BlockedSignals {
    fn new() -> BlockedSignals {
        // SAFETY: sigfillset and pthread_sigmask write only into the sets.
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut before: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut before);
            BlockedSignals { before }
        }
    }
}

impl Drop for BlockedSignals {
    fn drop(&mut self) {
        // SAFETY: restores the mask `new` saved.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.before, ptr::null_mut());
        }
    }
}

/// What the supervisor and the server read, in tether's memory.
#[derive(Clone, Copy)]
struct Start {
    tether: pid_t,
    sweep: Sweep,
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    /// Null for tether's own directory.
    cwd: *const c_char,
    /// The server's ends of its stdin, stdout and stderr.
    stdio: [c_int; 3],
    /// The exec-status pipe: an `errno` on failure, closed on exec.
    status: c_int,
    /// `sh`, the path, the arguments: a script without `#!` runs so.
    script_argv: *const *const c_char,
    /// Where the server's start runs: the bottom of the supervisor's stack.
    server_stack: *mut u8,
}

/// The server's start reads this on the suspended supervisor's stack.
struct ServerStart {
    start: Start,
    supervisor: pid_t,
}

/// The supervisor: takes a copy of `Start`, becomes a group leader and
/// subreaper that dies with tether, starts the server and supervises it.
/// It starts with every signal blocked (`spawn` blocks them around the
/// clone), so none of tether's handlers can run here.
unsafe extern "C" fn supervisor_main(start: usize) -> ! {
    // A volatile copy: the compiler must not read tether's `Start` later,
    // when tether may have freed it.
    let start: Start = ptr::read_volatile(start as *const Start);
    if let Err(result) = life::become_supervisor(start.tether) {
        fail(start.status, result, 1);
    }
    let result = sys::setpgid(0, 0);
    if result != 0 {
        fail(start.status, result, 1);
    }
    let server_start = ServerStart { start, supervisor: sys::getpid() };
    // The server's start runs at the bottom of this stack while this
    // process waits (`CLONE_VFORK`) for its exec; this process only goes
    // deep (ending a tree) after that.
    let flags = (libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD) as usize;
    let arg = &server_start as *const ServerStart as usize;
    let server = sys::clone(flags, start.server_stack, server_main, arg);
    if server < 0 {
        fail(start.status, server, 1);
    }
    life::supervise(start.tether, server as pid_t, start.sweep)
}

/// The server, before its exec: std's plain signal state (tether's
/// handlers gone, SIGPIPE at its default, nothing blocked), death with the
/// supervisor, its pipes on 0, 1 and 2, its directory.
unsafe extern "C" fn server_main(server_start: usize) -> ! {
    let server_start = &*(server_start as *const ServerStart);
    let start = server_start.start;
    // While every signal is still blocked: no handler of tether's may run
    // in its memory, so each one goes back to its default. What tether
    // ignores stays ignored (as `nohup` would have it), but SIGPIPE, which
    // every Rust program ignores.
    for signal in 1..=64 {
        if signal != libc::SIGKILL && signal != libc::SIGSTOP && sys::has_handler(signal) {
            sys::default_action(signal);
        }
    }
    sys::default_action(libc::SIGPIPE);
    sys::sigprocmask(libc::SIG_SETMASK, 0);
    let result = sys::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as usize);
    if result != 0 {
        fail(start.status, result, 127);
    }
    if sys::getppid() != server_start.supervisor {
        fail(start.status, -(libc::ESRCH as isize), 127);
    }
    for (target, fd) in (0..).zip(start.stdio) {
        let result = sys::dup_onto(fd, target);
        if result < 0 {
            fail(start.status, result, 127);
        }
    }
    if !start.cwd.is_null() {
        let result = sys::chdir(start.cwd);
        if result < 0 {
            fail(start.status, result, 127);
        }
    }
    let mut result = sys::execve(start.path, start.argv, start.envp);
    if result == -(libc::ENOEXEC as isize) {
        // Not a binary and no `#!`: a shell script, as `execvp` runs it.
        result = sys::execve(c"/bin/sh".as_ptr(), start.script_argv, start.envp);
    }
    fail(start.status, result, 127)
}

/// Tells tether why the start failed (`-errno` from a system call) and exits.
unsafe fn fail(status: c_int, result: isize, code: c_int) -> ! {
    let errno = (-result as i32).to_ne_bytes();
    sys::write(status, errno.as_ptr(), errno.len());
    sys::exit(code)
}

/// Reads the exec-status pipe to its end: nothing means the server exec'd.
fn exec_outcome(status: OwnedFd) -> io::Result<()> {
    let mut errno = [0u8; 4];
    let mut got = 0;
    loop {
        // SAFETY: reads into the rest of `errno`.
        let read = unsafe {
            libc::read(status.as_raw_fd(), errno[got..].as_mut_ptr().cast(), errno.len() - got)
        };
        match read {
            0 => break,
            n if n > 0 => {
                got += n as usize;
                if got == errno.len() {
                    break;
                }
            }
            _ => {
                let err = io::Error::last_os_error();
                if err.kind() != io::ErrorKind::Interrupted {
                    return Err(err);
                }
            }
        }
    }
    match got {
        0 => Ok(()),
        4 => Err(io::Error::from_raw_os_error(i32::from_ne_bytes(errno))),
        _ => Err(io::Error::other("the server's start reported a broken status")),
    }
}

/// The C strings the server's exec takes, and the pointer arrays over them.
struct Strings {
    path: CString,
    argv: Vec<*const c_char>,
    envp: Vec<*const c_char>,
    script_argv: Vec<*const c_char>,
    cwd: Option<CString>,
    /// Owns what the arrays point into.
    _owned: Vec<CString>,
}

// SAFETY: the pointers point into `_owned` and `path`, which move with them.
unsafe impl Send for Strings {}

impl Strings {
    fn new(launch: &Launch<'_>) -> io::Result<Strings> {
        let c_string = |bytes: &[u8], what: &str| {
            CString::new(bytes).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidInput, format!("{what} holds a NUL byte"))
            })
        };
        let path = c_string(launch.path.as_os_str().as_bytes(), "the program")?;
        let cwd = match launch.cwd {
            Some(cwd) => Some(c_string(cwd.as_os_str().as_bytes(), "the directory")?),
            None => None,
        };
        let mut owned = Vec::with_capacity(2 + launch.args.len() + launch.env.len());
        owned.push(c_string(launch.name.as_bytes(), "the program")?);
        for arg in launch.args {
            owned.push(c_string(arg.as_bytes(), "an argument")?);
        }
        // A name given twice has its last value, as std's `envs` gives it.
        for (at, (name, value)) in launch.env.iter().enumerate() {
            if launch.env[at + 1..].iter().all(|(later, _)| later != name) {
                owned.push(c_string(format!("{name}={value}").as_bytes(), "the environment")?);
            }
        }
        owned.push(c"sh".to_owned());
        let arguments = 1 + launch.args.len();
        let environment = owned.len() - 1;
        let array = |strings: &mut dyn Iterator<Item = *const c_char>| {
            strings.chain(std::iter::once(ptr::null())).collect::<Vec<_>>()
        };
        let argv = array(&mut owned[..arguments].iter().map(|s| s.as_ptr()));
        let envp = array(&mut owned[arguments..environment].iter().map(|s| s.as_ptr()));
        // `sh path args…`, as execvp runs a script without `#!`.
        let script_argv = array(
            &mut [owned[environment].as_ptr(), path.as_ptr()]
                .into_iter()
                .chain(owned[1..arguments].iter().map(|s| s.as_ptr())),
        );
        Ok(Strings { path, argv, envp, script_argv, cwd, _owned: owned })
    }
}

/// A pipe, both ends close-on-exec: (read end, write end).
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as c_int; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both are fresh descriptors nothing else owns.
    unsafe { Ok((OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))) }
}

/// The same descriptor, moved to 3 or above if it is 0, 1 or 2 (possible
/// when tether itself runs with a standard stream closed).
fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: duplicates a descriptor we own.
    let moved = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if moved < 0 {
        return Err(io::Error::last_os_error());
    }
    drop(fd);
    // SAFETY: `moved` is a fresh descriptor nothing else owns.
    unsafe { Ok(OwnedFd::from_raw_fd(moved)) }
}

/// The supervisor's stack: mapped for it, with a guard page below.
struct Stack {
    base: *mut u8,
}

// SAFETY: a mapping, owned by whoever holds this.
unsafe impl Send for Stack {}
unsafe impl Sync for Stack {}

impl Stack {
    fn new() -> io::Result<Stack> {
        // SAFETY: a fresh anonymous mapping; the guard is its lowest page.
        unsafe {
            let base = libc::mmap(
                ptr::null_mut(),
                GUARD + STACK,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK | libc::MAP_NORESERVE,
                -1,
                0,
            );
            if base == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            let stack = Stack { base: base.cast() };
            if libc::mprotect(base, GUARD, libc::PROT_NONE) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(stack)
        }
    }

    /// Where the server's start runs until its exec: the stack's lowest
    /// 16 KiB, which the supervisor reaches only if it used 48 KiB.
    fn server_top(&self) -> *mut u8 {
        // SAFETY: inside the mapping, 16-byte aligned.
        unsafe { self.base.add(GUARD + SERVER_STACK) }
    }

    /// The server has exec'd: the pages its start touched go back to the
    /// system (read again, they are zero; nothing reads them).
    fn forget_server_part(&self) {
        // SAFETY: the region lies inside the mapping, and nothing runs on
        // it any more (the supervisor's frames are at the top).
        unsafe {
            libc::madvise(self.base.add(GUARD).cast(), SERVER_STACK, libc::MADV_DONTNEED);
        }
    }

    fn top(&self) -> *mut u8 {
        // SAFETY: one past the mapping's end, 16-byte aligned (page sizes are).
        unsafe { self.base.add(GUARD + STACK) }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: unmaps the mapping `new` made; callers drop a stack only
        // when nothing runs on it.
        unsafe {
            libc::munmap(self.base.cast(), GUARD + STACK);
        }
    }
}
