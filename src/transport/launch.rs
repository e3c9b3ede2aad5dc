//! How a stdio server's process is made.
//!
//! Every server is started by one of four process-long threads,
//! `tether-spawner-N`, never by the short-lived thread that asked: on Linux
//! the server's supervisor gets a parent-death signal, which fires when the
//! *thread* that started it ends, so that thread must live as long as
//! tether. Four, so that many servers starting at once are started side by
//! side (each start waits for its server's exec).
//!
//! The program is looked up in the server's own `PATH` first, so that what
//! is exec'd is a path. Then, by platform:
//! - x86_64 Linux: `supervisor::spawn`, a supervisor sharing tether's
//!   memory that starts the server the way `vfork` does; no page copied.
//! - other Linux: std's `Command` with the supervisor's `pre_exec` (a
//!   forked copy of tether that forks the server).
//! - elsewhere: std's `Command`, which uses `posix_spawn` for a path.

use std::io;
use std::path::{Path, PathBuf};
#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
use std::process::Child;
use std::process::{ChildStderr, ChildStdin, ChildStdout, ExitStatus};
use std::sync::OnceLock;
use std::thread;

use crossbeam_channel::Sender;

use super::command::StdioCommand;

/// How many spawner threads start servers side by side.
const SPAWNERS: usize = 4;

/// A started server: its process, and tether's ends of its standard streams.
pub(crate) struct Started {
    pub(crate) process: ServerChild,
    pub(crate) stdin: ChildStdin,
    pub(crate) stdout: ChildStdout,
    pub(crate) stderr: ChildStderr,
}

/// The process tether waits for: the supervisor (Linux) or the server.
pub(crate) enum ServerChild {
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    Supervised(crate::supervisor::Supervised),
    #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
    Std(Child),
}

impl ServerChild {
    pub(crate) fn id(&self) -> u32 {
        match self {
            #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
            ServerChild::Supervised(supervised) => supervised.id(),
            #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
            ServerChild::Std(child) => child.id(),
        }
    }

    /// Waits for it to exit and reaps it.
    pub(crate) fn wait(&mut self) -> io::Result<ExitStatus> {
        match self {
            #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
            ServerChild::Supervised(supervised) => supervised.wait(),
            #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
            ServerChild::Std(child) => child.wait(),
        }
    }
}

/// Starts the server on a spawner thread (see the module docs).
pub(crate) fn start(command: &StdioCommand) -> io::Result<Started> {
    let path = resolve(command)?;
    let command = command.clone();
    let (reply, answer) = crossbeam_channel::bounded(1);
    let job: Job = Box::new(move || {
        let _ = reply.send(start_here(&command, &path));
    });
    spawner().send(job).map_err(|_| io::Error::other("the spawner thread is gone"))?;
    answer.recv().map_err(|_| io::Error::other("the spawner thread is gone"))?
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn start_here(command: &StdioCommand, path: &Path) -> io::Result<Started> {
    use crate::supervisor::{self, Launch, Sweep};
    let launch = Launch {
        path,
        name: &command.program,
        args: &command.args,
        env: &command.env,
        cwd: command.cwd.as_deref(),
    };
    let (supervised, [stdin, stdout, stderr]) = supervisor::spawn(&launch, Sweep::Tree)?;
    Ok(Started {
        process: ServerChild::Supervised(supervised),
        stdin: ChildStdin::from(stdin),
        stdout: ChildStdout::from(stdout),
        stderr: ChildStderr::from(stderr),
    })
}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
fn start_here(command: &StdioCommand, path: &Path) -> io::Result<Started> {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    let mut std_command = Command::new(path);
    std_command
        .arg0(&command.program)
        .args(&command.args)
        .env_clear()
        .envs(command.env.iter().map(|(name, value)| (name, value)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    if let Some(cwd) = &command.cwd {
        std_command.current_dir(cwd);
    }
    #[cfg(target_os = "linux")]
    crate::supervisor::install(&mut std_command, crate::supervisor::Sweep::Tree);
    let mut child = std_command.spawn()?;
    // All three are piped, so all three are there.
    let stdin = child.stdin.take().expect("stdin is piped");
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    Ok(Started { process: ServerChild::Std(child), stdin, stdout, stderr })
}

/// The path to exec: the program itself when it names a path (relative to
/// the server's directory), or the first file of that name in the server's
/// `PATH` that this user may execute, as `execvp` finds it (`/bin:/usr/bin`
/// when the server's environment has no `PATH`). A path relative to the
/// server's directory stays relative: it is exec'd from there.
fn resolve(command: &StdioCommand) -> io::Result<PathBuf> {
    if command.program.is_empty() {
        return Err(io::Error::from_raw_os_error(libc::ENOENT));
    }
    if command.program.contains('/') {
        return Ok(PathBuf::from(&command.program));
    }
    let search = match command.env.iter().rev().find(|(name, _)| name == "PATH") {
        Some((_, value)) => value.as_str(),
        None => "/bin:/usr/bin",
    };
    let mut denied = false;
    for dir in std::env::split_paths(search) {
        // An empty entry is the current directory, the server's.
        let dir = if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir };
        let candidate = dir.join(&command.program);
        let seen_from_here = match &command.cwd {
            Some(cwd) if candidate.is_relative() => cwd.join(&candidate),
            _ => candidate.clone(),
        };
        match executable(&seen_from_here) {
            Some(true) => return Ok(candidate),
            Some(false) => denied = true,
            None => {}
        }
    }
    Err(io::Error::from_raw_os_error(if denied { libc::EACCES } else { libc::ENOENT }))
}

/// Whether this user may execute the file at `path` (a directory or a file
/// without permission: no, as exec would refuse it); `None` when nothing is
/// there.
fn executable(path: &Path) -> Option<bool> {
    use std::os::unix::ffi::OsStrExt;
    let metadata = std::fs::metadata(path).ok()?;
    if !metadata.is_file() {
        return Some(false);
    }
    let Ok(path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return Some(false);
    };
    // SAFETY: a NUL-terminated path; faccessat reads it only.
    let allowed =
        unsafe { libc::faccessat(libc::AT_FDCWD, path.as_ptr(), libc::X_OK, libc::AT_EACCESS) };
    Some(allowed == 0)
}

type Job = Box<dyn FnOnce() + Send>;

fn spawner() -> &'static Sender<Job> {
    static SPAWNER: OnceLock<Sender<Job>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (jobs, queue) = crossbeam_channel::unbounded::<Job>();
        // These threads live as long as the process: they must, for the
        // parent death signal to mean "tether died". They are the threads
        // never joined.
        for number in 1..=SPAWNERS {
            let queue = queue.clone();
            let started =
                thread::Builder::new().name(format!("tether-spawner-{number}")).spawn(move || {
                    for job in queue {
                        job();
                    }
                });
            match started {
                Ok(_) => {}
                Err(err) if number == 1 => {
                    panic!("the operating system refused to create the spawner thread: {err}")
                }
                Err(err) => log::warn!("cannot start another spawner thread: {err}"),
            }
        }
        jobs
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(program: &str, path: &str) -> StdioCommand {
        let mut command = StdioCommand::new(program, &[] as &[&str]);
        command.env = vec![("PATH".into(), path.into())];
        command
    }

    #[test]
    fn programs_are_found_in_the_servers_path() {
        assert_eq!(resolve(&command("sh", "/nowhere:/bin")).unwrap(), PathBuf::from("/bin/sh"));
        let missing = resolve(&command("sh", "/nowhere")).unwrap_err();
        assert_eq!(missing.raw_os_error(), Some(libc::ENOENT));
        // A path is taken as it is, found or not.
        assert_eq!(resolve(&command("./x", "/bin")).unwrap(), PathBuf::from("./x"));
        // A file that is not executable, or a directory, is refused as
        // execvp refuses it.
        let dir = std::env::temp_dir().join(format!("tether-resolve-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("plain"), "").unwrap();
        let denied = resolve(&command("plain", dir.to_str().unwrap())).unwrap_err();
        assert_eq!(denied.raw_os_error(), Some(libc::EACCES));
        std::fs::create_dir(dir.join("folder")).unwrap();
        let denied = resolve(&command("folder", dir.to_str().unwrap())).unwrap_err();
        assert_eq!(denied.raw_os_error(), Some(libc::EACCES));
        // Found through a relative PATH entry from the server's directory,
        // and exec'd from there: the path stays relative to it.
        std::fs::create_dir(dir.join("bin")).unwrap();
        std::fs::copy("/bin/sh", dir.join("bin/tool")).unwrap();
        let mut relative = command("tool", "bin");
        relative.cwd = Some(dir.clone());
        assert_eq!(resolve(&relative).unwrap(), PathBuf::from("bin/tool"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
