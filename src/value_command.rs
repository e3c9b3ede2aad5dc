//! Running a `!command` configuration value: the program, split on white
//! space (no shell), run to completion, its trimmed stdout the value.
//!
//! Apart from configuration so that `config/` stays plain data: reading a
//! file only asks this module for a value. The command runs in its own
//! process group under a supervisor (Linux), so it ends with tether, and no
//! wait here is unbounded, even when something it started keeps its
//! output open.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a `!command` value may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the supervisor may take to end a timed-out command's tree (its
/// grace after SIGTERM is 1.4 s).
#[cfg(target_os = "linux")]
const TREE_END_WAIT: Duration = Duration::from_secs(3);

/// Runs `!command args` (split on white space, no shell) and returns its
/// trimmed stdout. The error names the command, never its output. The
/// command runs in its own process group, which is killed if it takes too
/// long; and no wait here is unbounded, even when something it started
/// keeps its output open.
pub(crate) fn run_command(command_line: &str) -> Result<String, String> {
    let mut words = command_line.split_whitespace();
    let program = words.next().ok_or("has an empty !command")?;
    let shown = format!("!{}", command_line.trim());
    let mut command = Command::new(program);
    command
        .args(words)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // Ended with its whole tree if tether dies while it runs (a helper
    // waiting for a password when the user presses Ctrl-C).
    #[cfg(target_os = "linux")]
    crate::supervisor::install(&mut command, crate::supervisor::Sweep::Nothing);
    let mut child = command.spawn().map_err(|err| format!("could not run `{shown}`: {err}"))?;
    let deadline = Instant::now() + COMMAND_TIMEOUT;
    let output = read_to_channel(child.stdout.take().expect("stdout is piped"), 1024 * 1024);
    let errors = read_to_channel(child.stderr.take().expect("stderr is piped"), 64 * 1024);
    let kill_group = |child: &mut std::process::Child| {
        // On Linux the child is the supervisor: SIGTERM makes it end the
        // whole tree, a process that left the group with `setsid` too
        // (SIGKILL would end the supervisor first and orphan those).
        #[cfg(target_os = "linux")]
        {
            // SAFETY: kill of the child this function started, not reaped yet.
            unsafe {
                libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
            }
            let deadline = Instant::now() + TREE_END_WAIT;
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        // SAFETY: killpg on the group this function created for the child.
        unsafe {
            libc::killpg(child.id() as libc::pid_t, libc::SIGKILL);
        }
        let _ = child.wait();
    };
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                kill_group(&mut child);
                return Err(format!(
                    "`{shown}` did not finish within {} s",
                    COMMAND_TIMEOUT.as_secs()
                ));
            }
            Err(err) => {
                kill_group(&mut child);
                return Err(format!("waiting for `{shown}` failed: {err}"));
            }
        }
    };
    let remaining =
        || deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(100));
    let Ok(output) = output.recv_timeout(remaining()) else {
        return Err(format!("`{shown}` left something running that holds its output open"));
    };
    let errors = errors.recv_timeout(remaining()).unwrap_or_default();
    if !status.success() {
        let first_line =
            String::from_utf8_lossy(&errors).lines().next().unwrap_or("").trim().to_owned();
        let why = if first_line.is_empty() { String::new() } else { format!(": {first_line}") };
        return Err(format!("`{shown}` failed ({status}){why}"));
    }
    let text = String::from_utf8(output)
        .map_err(|_| format!("`{shown}` printed something that is not UTF-8"))?;
    Ok(text.trim().to_owned())
}

/// Reads a pipe (at most `limit` bytes) on a thread; the bytes arrive on
/// the channel when the pipe ends. The thread ends with the pipe.
fn read_to_channel(
    pipe: impl Read + Send + 'static,
    limit: u64,
) -> crossbeam_channel::Receiver<Vec<u8>> {
    let (sender, receiver) = crossbeam_channel::bounded(1);
    let spawned = std::thread::Builder::new().name("tether-bang-output".into()).spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.take(limit).read_to_end(&mut bytes);
        let _ = sender.send(bytes);
    });
    if spawned.is_err() {
        log::warn!("cannot start a thread to read a !command's output");
    }
    receiver
}
