//! The `tether` binary; everything is in `cli`.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}

/// In the fully static build only (`.ci/static-build` sets `--cfg
/// tether_static`): glibc's `pthread_getattr_np` finds the main thread's
/// stack by reading `/proc/self/maps` with `sscanf`, and so links glibc's
/// whole `scanf` and `strtold` family, about 100 KB, into a binary that
/// uses neither. Its only caller is the standard library, which asks where
/// a thread's stack ends so that a stack overflow can be reported as one;
/// told "not supported", it skips that (as it does on systems without the
/// call), and an overflow is then a plain SIGSEGV. Nothing else changes.
#[cfg(all(tether_static, target_os = "linux", target_env = "gnu"))]
#[no_mangle]
pub extern "C" fn pthread_getattr_np(
    _thread: libc::pthread_t,
    _attributes: *mut libc::pthread_attr_t,
) -> libc::c_int {
    libc::ENOSYS
}
