//! The system calls the supervisor makes, and nothing else.
//!
//! The supervisor runs where the C library must not be used: sharing
//! tether's memory (`clone.rs`), or as a forked copy of a multi-threaded
//! process (the fork path). The C library's wrappers write `errno` in the
//! thread-local storage of the tether thread the supervisor was started
//! from, which in shared memory is that live thread's own. So on x86_64
//! each call here is a bare `syscall` instruction returning `-errno`; on
//! other targets (which use only the fork path, a private copy) it goes
//! through libc's `syscall`, with `errno` turned into the same `-errno`.
//!
//! Every function returns the kernel's raw result: a value, or `-errno`.

use libc::{c_int, c_long, pid_t};

/// One system call with up to six arguments; the result or `-errno`.
///
/// # Safety
/// The arguments must be valid for the call `number` names.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn call(number: c_long, args: [usize; 6]) -> isize {
    let result: isize;
    // SAFETY: the Linux x86_64 system call convention; the kernel clobbers
    // rcx and r11 and nothing else.
    core::arch::asm!(
        "syscall",
        inlateout("rax") number as isize => result,
        in("rdi") args[0],
        in("rsi") args[1],
        in("rdx") args[2],
        in("r10") args[3],
        in("r8") args[4],
        in("r9") args[5],
        lateout("rcx") _,
        lateout("r11") _,
        options(nostack),
    );
    result
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn call(number: c_long, args: [usize; 6]) -> isize {
    let result = libc::syscall(number, args[0], args[1], args[2], args[3], args[4], args[5]);
    if result == -1 {
        -(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO) as isize)
    } else {
        result as isize
    }
}

/// A signal set: one bit per signal, 64 signals.
pub(super) type SigSet = u64;
/// Every signal (SIGKILL and SIGSTOP cannot be blocked; the kernel ignores them here).
pub(super) const ALL_SIGNALS: SigSet = !0;
/// The size of the kernel's signal set: 64 signals, except MIPS's 128.
#[cfg(not(any(target_arch = "mips", target_arch = "mips64")))]
const SIGSET_SIZE: usize = 8;
#[cfg(any(target_arch = "mips", target_arch = "mips64"))]
const SIGSET_SIZE: usize = 16;
/// A kernel signal set's storage, large enough for every architecture.
type KernelSet = [u64; 2];

pub(super) const fn sigset(signals: &[c_int]) -> SigSet {
    let mut set = 0;
    let mut at = 0;
    while at < signals.len() {
        set |= 1 << (signals[at] - 1);
        at += 1;
    }
    set
}

pub(super) unsafe fn getpid() -> pid_t {
    call(libc::SYS_getpid, [0; 6]) as pid_t
}

pub(super) unsafe fn getppid() -> pid_t {
    call(libc::SYS_getppid, [0; 6]) as pid_t
}

pub(super) unsafe fn kill(pid: pid_t, signal: c_int) -> isize {
    call(libc::SYS_kill, [pid as usize, signal as usize, 0, 0, 0, 0])
}

/// `wait4` without resource usage: the pid reaped, 0, or `-errno`.
pub(super) unsafe fn wait4(pid: pid_t, status: *mut c_int, options: c_int) -> isize {
    call(libc::SYS_wait4, [pid as usize, status as usize, options as usize, 0, 0, 0])
}

pub(super) unsafe fn prctl(option: c_int, value: usize) -> isize {
    call(libc::SYS_prctl, [option as usize, value, 0, 0, 0, 0])
}

#[cfg(target_arch = "x86_64")]
pub(super) unsafe fn setpgid(pid: pid_t, group: pid_t) -> isize {
    call(libc::SYS_setpgid, [pid as usize, group as usize, 0, 0, 0, 0])
}

/// No core file for this process, whatever signal ends it.
pub(super) unsafe fn forbid_core_dump() -> isize {
    let none = libc::rlimit64 { rlim_cur: 0, rlim_max: 0 };
    call(libc::SYS_prlimit64, [0, libc::RLIMIT_CORE as usize, &none as *const _ as usize, 0, 0, 0])
}

pub(super) unsafe fn open(path: *const libc::c_char, flags: c_int) -> isize {
    call(libc::SYS_openat, [libc::AT_FDCWD as usize, path as usize, flags as usize, 0, 0, 0])
}

pub(super) unsafe fn read(fd: c_int, buffer: *mut u8, len: usize) -> isize {
    call(libc::SYS_read, [fd as usize, buffer as usize, len, 0, 0, 0])
}

#[cfg(target_arch = "x86_64")]
pub(super) unsafe fn write(fd: c_int, buffer: *const u8, len: usize) -> isize {
    call(libc::SYS_write, [fd as usize, buffer as usize, len, 0, 0, 0])
}

/// A private, anonymous, read-write mapping of `len` bytes (zeroed), or
/// `-errno`.
pub(super) unsafe fn map_anonymous(len: usize) -> isize {
    let prot = (libc::PROT_READ | libc::PROT_WRITE) as usize;
    let flags = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as usize;
    #[cfg(target_pointer_width = "64")]
    let number = libc::SYS_mmap;
    #[cfg(not(target_pointer_width = "64"))]
    let number = libc::SYS_mmap2;
    call(number, [0, len, prot, flags, usize::MAX, 0])
}

pub(super) unsafe fn unmap(address: usize, len: usize) -> isize {
    call(libc::SYS_munmap, [address, len, 0, 0, 0, 0])
}

pub(super) unsafe fn close(fd: c_int) -> isize {
    call(libc::SYS_close, [fd as usize, 0, 0, 0, 0, 0])
}

pub(super) unsafe fn close_range(first: u32, last: u32) -> isize {
    call(libc::SYS_close_range, [first as usize, last as usize, 0, 0, 0, 0])
}

/// `dup3(from, to, 0)`: `to` becomes `from`, without close-on-exec.
#[cfg(target_arch = "x86_64")]
pub(super) unsafe fn dup_onto(from: c_int, to: c_int) -> isize {
    call(libc::SYS_dup3, [from as usize, to as usize, 0, 0, 0, 0])
}

pub(super) unsafe fn getdents64(fd: c_int, buffer: *mut u8, len: usize) -> isize {
    call(libc::SYS_getdents64, [fd as usize, buffer as usize, len, 0, 0, 0])
}

#[cfg(target_arch = "x86_64")]
pub(super) unsafe fn chdir(path: *const libc::c_char) -> isize {
    call(libc::SYS_chdir, [path as usize, 0, 0, 0, 0, 0])
}

#[cfg(target_arch = "x86_64")]
pub(super) unsafe fn execve(
    path: *const libc::c_char,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
) -> isize {
    call(libc::SYS_execve, [path as usize, argv as usize, envp as usize, 0, 0, 0])
}

/// Ends this process (not tether: the supervisor is a process of its own
/// even when it shares tether's memory).
pub(super) unsafe fn exit(code: c_int) -> ! {
    call(libc::SYS_exit_group, [code as usize, 0, 0, 0, 0, 0]);
    // exit_group does not return; should it, never run on.
    loop {
        call(libc::SYS_exit, [code as usize, 0, 0, 0, 0, 0]);
    }
}

/// Milliseconds on the monotonic clock.
pub(super) unsafe fn now_ms() -> i64 {
    let mut time = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    call(
        libc::SYS_clock_gettime,
        [libc::CLOCK_MONOTONIC as usize, &mut time as *mut _ as usize, 0, 0, 0, 0],
    );
    time.tv_sec * 1000 + time.tv_nsec / 1_000_000
}

pub(super) unsafe fn sleep_ms(ms: i64) {
    let pause = libc::timespec { tv_sec: 0, tv_nsec: ms * 1_000_000 };
    let clock = libc::CLOCK_MONOTONIC as usize;
    call(libc::SYS_clock_nanosleep, [clock, 0, &pause as *const _ as usize, 0, 0, 0]);
}

/// `sigprocmask(how, set)`; the mask before, or 0 if the call failed.
pub(super) unsafe fn sigprocmask(how: c_int, set: SigSet) -> SigSet {
    let set: KernelSet = [set, 0];
    let mut before: KernelSet = [0; 2];
    let args =
        [how as usize, set.as_ptr() as usize, before.as_mut_ptr() as usize, SIGSET_SIZE, 0, 0];
    call(libc::SYS_rt_sigprocmask, args);
    before[0]
}

/// Waits for one of `set` (blocked); the signal's number, or `-errno`.
pub(super) unsafe fn sigwait(set: SigSet) -> isize {
    let set: KernelSet = [set, 0];
    let args = [set.as_ptr() as usize, 0, 0, SIGSET_SIZE, 0, 0];
    call(libc::SYS_rt_sigtimedwait, args)
}

/// A kernel `struct sigaction`, large enough for every architecture's
/// (handler, flags, restorer, mask). All zero is `SIG_DFL`, no flags, an
/// empty mask.
type KernelAction = [u64; 5];

/// The signal's default action again.
pub(super) unsafe fn default_action(signal: c_int) -> isize {
    let default: KernelAction = [0; 5];
    let args = [signal as usize, default.as_ptr() as usize, 0, SIGSET_SIZE, 0, 0];
    call(libc::SYS_rt_sigaction, args)
}

/// True when the signal has a handler (neither `SIG_DFL` nor `SIG_IGN`).
#[cfg(target_arch = "x86_64")]
pub(super) unsafe fn has_handler(signal: c_int) -> bool {
    let mut action: KernelAction = [0; 5];
    let args = [signal as usize, 0, action.as_mut_ptr() as usize, SIGSET_SIZE, 0, 0];
    if call(libc::SYS_rt_sigaction, args) != 0 {
        return false;
    }
    // x86_64's kernel sigaction: handler, flags, restorer, mask.
    let handler = action[0] as usize;
    handler != libc::SIG_DFL && handler != libc::SIG_IGN
}

/// The limit on open descriptors (`RLIMIT_NOFILE`), or 0 if unknown.
pub(super) unsafe fn descriptor_limit() -> u64 {
    let mut limit = libc::rlimit64 { rlim_cur: 0, rlim_max: 0 };
    let args = [0, libc::RLIMIT_NOFILE as usize, 0, &mut limit as *mut _ as usize, 0, 0];
    if call(libc::SYS_prlimit64, args) != 0 {
        return 0;
    }
    limit.rlim_cur
}

/// Starts a process running `entry(arg)` on `stack_top` (16-byte aligned,
/// the highest address of its stack); returns its pid, or `-errno`.
///
/// # Safety
/// `flags` must give the child its exit signal and no thread flags;
/// `entry` must never return and, with `CLONE_VM`, use only this module
/// (never the C library, never the allocator, never a panic), since the
/// child shares the caller's memory and thread-local storage.
#[cfg(target_arch = "x86_64")]
pub(super) unsafe fn clone(
    flags: usize,
    stack_top: *mut u8,
    entry: unsafe extern "C" fn(usize) -> !,
    arg: usize,
) -> isize {
    let result: isize;
    // SAFETY: in the parent this is a plain clone system call (rax: the
    // child's pid or -errno). The child resumes at the same instruction on
    // the new stack with rax = 0 and the other registers as they were, so
    // it calls entry(arg) from r12 and r13 there; entry never returns, and
    // `ud2` stops it should it.
    core::arch::asm!(
        "syscall",
        "test rax, rax",
        "jnz 2f",
        "mov rdi, r13",
        "call r12",
        "ud2",
        "2:",
        inlateout("rax") libc::SYS_clone as isize => result,
        in("rdi") flags,
        in("rsi") stack_top,
        in("rdx") 0usize,
        in("r10") 0usize,
        in("r8") 0usize,
        in("r12") entry as usize,
        in("r13") arg,
        lateout("rcx") _,
        lateout("r11") _,
        options(nostack),
    );
    result
}
