//! Shared test support: fixture binaries, process accounting, bounded waits.
//!
//! Every fixture process gets a unique `--tag` in its argv (its grandchildren
//! inherit it), so a test can prove that nothing it started is still alive by
//! scanning `/proc`. Every wait here has a deadline.

#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tether::{ClientOptions, StdioCommand, Transport};

/// The cargo target folder (`target/`).
pub fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).parent().expect("target/tmp has a parent").to_owned()
}

/// The path of a fixture binary, building the fixtures package once.
pub fn fixture(name: &str) -> PathBuf {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let status = Command::new(env!("CARGO"))
            .args(["build", "--quiet", "-p", "tether-fixtures", "--bins"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building the fixture servers failed");
    });
    let path = target_dir().join("debug").join(name);
    assert!(path.exists(), "fixture {} missing", path.display());
    path
}

/// Starts a fixture server that prints its URL as its first stdout line
/// (`http-server`, `oauth-server`); returns it with that URL. The caller
/// kills it (its stdin is piped: dropping the child's stdin ends it too).
pub fn start_url_fixture(name: &str, tag: &Tag, flags: &[&str]) -> (std::process::Child, String) {
    let mut child = Command::new(fixture(name))
        .args(["--tag", &tag.0])
        .args(flags)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (sender, receiver) = crossbeam_channel::bounded(1);
    thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line);
        let _ = sender.send(line);
    });
    let url = receiver
        .recv_timeout(Duration::from_secs(10))
        .unwrap_or_else(|_| panic!("{name} did not print its URL"));
    (child, url.trim().to_owned())
}

/// A process's resident memory in KiB, from /proc.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Waits for a child at most `within`; kills it and fails past that.
pub fn wait_within(child: &mut std::process::Child, within: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("a child did not finish within {within:?}");
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// The tether binary under test.
pub fn tether_bin() -> &'static str {
    env!("CARGO_BIN_EXE_tether")
}

/// A marker unique to one test, put in every fixture's argv.
#[derive(Debug, Clone)]
pub struct Tag(pub String);

impl Tag {
    pub fn new() -> Tag {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().subsec_nanos();
        Tag(format!(
            "tag{}x{}x{nanos}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ))
    }

    /// Processes (not zombies) whose argv holds this tag.
    pub fn live_processes(&self) -> Vec<(u32, String)> {
        self.processes()
            .into_iter()
            .filter(|(_, _, state)| *state != 'Z' && *state != 'X')
            .map(|(pid, cmd, _)| (pid, cmd))
            .collect()
    }

    /// Processes whose argv holds this tag, zombies included.
    pub fn all_processes(&self) -> Vec<(u32, String, char)> {
        self.processes()
    }

    fn processes(&self) -> Vec<(u32, String, char)> {
        let mut found = Vec::new();
        for entry in fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else { continue };
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if !cmdline.contains(&self.0) {
                continue;
            }
            let state = fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    stat.rfind(')')
                        .map(|at| stat[at + 1..].trim_start().chars().next().unwrap_or('?'))
                })
                .unwrap_or('?');
            found.push((pid, cmdline, state));
        }
        found
    }

    /// Waits (at most `within`) until no live process carries the tag.
    pub fn assert_gone_within(&self, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let live = self.live_processes();
            if live.is_empty() {
                return;
            }
            if Instant::now() >= deadline {
                // Clean up so one failure does not leak into other tests.
                self.kill_all();
                panic!("{} processes left behind: {live:?}", live.len());
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn assert_gone(&self) {
        self.assert_gone_within(Duration::from_secs(1));
    }

    /// Ends every process with the tag, also a chain that starts its
    /// members again as they die: all stopped, then all killed, until none
    /// is left (a bounded number of rounds).
    pub fn kill_all(&self) {
        for _ in 0..100 {
            let live = self.live_processes();
            if live.is_empty() {
                return;
            }
            for signal in [libc::SIGSTOP, libc::SIGKILL] {
                for (pid, _) in &live {
                    unsafe { libc::kill(*pid as i32, signal) };
                }
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits until `count` live processes carry the tag.
    pub fn wait_for_processes(&self, count: usize, within: Duration) -> Vec<(u32, String)> {
        let deadline = Instant::now() + within;
        loop {
            let live = self.live_processes();
            if live.len() >= count {
                return live;
            }
            assert!(Instant::now() < deadline, "expected {count} processes, saw {live:?}");
            thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Tag {
    fn drop(&mut self) {
        // Whatever a failed test left running, end it.
        self.kill_all();
    }
}

/// The `misbehave` fixture with these flags.
pub fn misbehave(tag: &Tag, flags: &[&str]) -> Transport {
    let mut args = vec!["--tag", tag.0.as_str()];
    args.extend_from_slice(flags);
    Transport::Stdio(StdioCommand::new(&fixture("misbehave").display().to_string(), &args))
}

/// Options with a short request timeout.
pub fn quick(timeout_ms: u64) -> ClientOptions {
    ClientOptions::default()
        .with_request_timeout(Duration::from_millis(timeout_ms))
        .with_max_total_timeout(Duration::from_millis(timeout_ms * 10))
}

/// Asserts that `elapsed` is below `limit`.
pub fn assert_quick(started: Instant, limit: Duration, what: &str) {
    let elapsed = started.elapsed();
    assert!(elapsed < limit, "{what} took {elapsed:?}, more than {limit:?}");
}

/// A folder under target/tmp, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new() -> TempDir {
        let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(&Tag::new().0);
        fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A config folder whose `mcp.json` has these servers (`name → entry`).
pub fn config_dir(servers: serde_json::Value) -> TempDir {
    let dir = TempDir::new();
    dir.write("mcp.json", &serde_json::json!({"mcpServers": servers}).to_string());
    dir
}

/// A `misbehave` entry for a config file.
pub fn misbehave_entry(tag: &Tag, flags: &[&str]) -> serde_json::Value {
    let mut args = vec!["--tag".to_owned(), tag.0.clone()];
    args.extend(flags.iter().map(|flag| flag.to_string()));
    serde_json::json!({"command": fixture("misbehave"), "args": args})
}

/// Runs the tether binary with a deadline; kills it (and fails) past it.
pub fn run_tether(config_dir: &Path, args: &[&str], within: Duration) -> (Output, Duration) {
    run_tether_with_stdin(config_dir, args, None, within)
}

pub fn run_tether_with_stdin(
    config_dir: &Path,
    args: &[&str],
    stdin: Option<&str>,
    within: Duration,
) -> (Output, Duration) {
    let mut command = Command::new(tether_bin());
    command.arg("--config-dir").arg(config_dir).args(args).env_remove("RUST_LOG");
    run_command(command, stdin, within)
}

/// A `tether` command with this config folder and project folder.
pub fn tether_in(config_dir: &Path, project: &Path) -> Command {
    let mut command = Command::new(tether_bin());
    command
        .arg("--config-dir")
        .arg(config_dir)
        .arg("--project")
        .arg(project)
        .env_remove("RUST_LOG");
    for variable in ["TETHER_MCP", "TETHER_MCP_ENV", "TETHER_TRUST_PROJECT", "TETHER_CONFIG_DIR"] {
        command.env_remove(variable);
    }
    command
}

/// Runs a command with a deadline, feeding it `stdin`; kills it (and fails) past the deadline.
pub fn run_command(
    mut command: Command,
    stdin: Option<&str>,
    within: Duration,
) -> (Output, Duration) {
    let started = Instant::now();
    let args: Vec<String> =
        command.get_args().map(|arg| arg.to_string_lossy().into_owned()).collect();
    let mut child = command
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(text) = stdin {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    }
    // Read the pipes on threads so a chatty child cannot block.
    let (out, err) = read_outputs(&mut child);
    let deadline = started + within;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            child.kill().ok();
            child.wait().ok();
            panic!("tether {args:?} did not finish within {within:?}");
        }
        thread::sleep(Duration::from_millis(5));
    };
    let elapsed = started.elapsed();
    let output = Output { status, stdout: out.join().unwrap(), stderr: err.join().unwrap() };
    (output, elapsed)
}

pub fn stdout_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// What [`run_measured`] saw: the exit code (128 + signal when killed),
/// the outputs, the time, and the peak resident memory in KiB.
pub struct Measured {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub took: Duration,
    pub peak_kib: i64,
}

/// Runs a command with no stdin and a deadline, and reads its peak memory
/// (through the `peak-rss` fixture, so that the test binary's own memory is
/// not counted). Past the deadline it is killed and counted as such, not a
/// panic: a test of a hang says so itself.
pub fn run_measured(command: Command, within: Duration) -> Measured {
    let started = Instant::now();
    let peak_file = TempDir::new();
    let peak_path = peak_file.path().join("peak");
    let mut measured = Command::new(fixture("peak-rss"));
    measured.arg(&peak_path).arg(command.get_program()).args(command.get_args());
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => measured.env(key, value),
            None => measured.env_remove(key),
        };
    }
    if let Some(dir) = command.get_current_dir() {
        measured.current_dir(dir);
    }
    let mut child = measured
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (out, err) = read_outputs(&mut child);
    let deadline = started + within;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            // Killed, its child's end is peak-rss's exit.
            for pid in children_of(child.id()) {
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
            child.kill().ok();
            break child.wait().unwrap();
        }
        thread::sleep(Duration::from_millis(5));
    };
    let code = status.code().unwrap_or(-1);
    let peak_kib =
        fs::read_to_string(&peak_path).ok().and_then(|text| text.parse().ok()).unwrap_or(-1);
    Measured {
        code,
        stdout: String::from_utf8_lossy(&out.join().unwrap()).into_owned(),
        stderr: String::from_utf8_lossy(&err.join().unwrap()).into_owned(),
        took: started.elapsed(),
        peak_kib,
    }
}

/// The processes whose parent is `parent`, from `/proc`.
fn children_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            fs::read_to_string(format!("/proc/{pid}/stat")).ok().is_some_and(|stat| {
                let after = stat.rfind(')').map_or("", |at| &stat[at + 1..]);
                after.split_whitespace().nth(1) == Some(parent.to_string().as_str())
            })
        })
        .collect()
}

/// The child's stdout and stderr, each read to its end on a thread of its
/// own (so that a chatty child never blocks on a full pipe).
fn read_outputs(
    child: &mut std::process::Child,
) -> (thread::JoinHandle<Vec<u8>>, thread::JoinHandle<Vec<u8>>) {
    let read = |mut pipe: Box<dyn std::io::Read + Send>| {
        thread::spawn(move || {
            let mut buf = Vec::new();
            pipe.read_to_end(&mut buf).ok();
            buf
        })
    };
    (read(Box::new(child.stdout.take().unwrap())), read(Box::new(child.stderr.take().unwrap())))
}

/// Waits at most `within` for the child to exit; its code (128 + signal
/// when killed by one). Past it the child is killed and the test fails.
pub fn wait_exit(child: &mut std::process::Child, within: Duration) -> Option<i32> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().or_else(|| {
                use std::os::unix::process::ExitStatusExt;
                status.signal().map(|signal| 128 + signal)
            });
        }
        if Instant::now() >= deadline {
            child.kill().ok();
            child.wait().ok();
            panic!("tether did not exit within {within:?}");
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// A command run with a terminal (a pseudo-terminal) on its stdin and
/// stderr, as a person at a terminal runs it; stdout is a pipe.
pub struct OnTerminal {
    child: std::process::Child,
    master: std::fs::File,
    screen: Arc<Mutex<String>>,
    stdout: Option<thread::JoinHandle<Vec<u8>>>,
}

impl OnTerminal {
    pub fn start(mut command: Command) -> OnTerminal {
        use std::os::fd::FromRawFd;
        let (mut master, mut slave) = (0, 0);
        // SAFETY: two valid out-pointers; no name, settings or size asked.
        let opened = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        assert_eq!(opened, 0, "openpty: {}", std::io::Error::last_os_error());
        // SAFETY: both descriptors were just opened and are owned here.
        let (master, slave) =
            unsafe { (std::fs::File::from_raw_fd(master), std::fs::File::from_raw_fd(slave)) };
        command
            .stdin(slave.try_clone().unwrap())
            .stderr(slave)
            .stdout(std::process::Stdio::piped());
        let mut child = command.spawn().unwrap();
        let screen = Arc::new(Mutex::new(String::new()));
        let mut reading = master.try_clone().unwrap();
        let shown = Arc::clone(&screen);
        // Ends at EIO once every holder of the terminal's other side is gone.
        thread::spawn(move || {
            let mut buf = [0; 4096];
            while let Ok(n @ 1..) = std::io::Read::read(&mut reading, &mut buf) {
                shown.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let mut stdout = child.stdout.take().unwrap();
        let stdout = thread::spawn(move || {
            let mut buf = Vec::new();
            std::io::Read::read_to_end(&mut stdout, &mut buf).ok();
            buf
        });
        OnTerminal { child, master, screen, stdout: Some(stdout) }
    }

    /// Waits (at most `within`) for `text` on the terminal.
    pub fn expect(&self, text: &str, within: Duration) {
        let deadline = Instant::now() + within;
        while !self.screen.lock().unwrap().contains(text) {
            assert!(
                Instant::now() < deadline,
                "{text:?} not shown; the screen:\n{}",
                self.screen()
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Types `text` at the terminal.
    pub fn type_in(&mut self, text: &str) {
        std::io::Write::write_all(&mut self.master, text.as_bytes()).unwrap();
    }

    pub fn screen(&self) -> String {
        self.screen.lock().unwrap().clone()
    }

    /// Waits at most `within` for the exit: its code and stdout.
    pub fn finish(mut self, within: Duration) -> (Option<i32>, String) {
        let code = wait_exit(&mut self.child, within);
        let stdout = self.stdout.take().unwrap().join().unwrap();
        (code, String::from_utf8_lossy(&stdout).into_owned())
    }
}

impl Drop for OnTerminal {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.child.kill().ok();
            self.child.wait().ok();
        }
    }
}

/// The fixture's record of the client's answers to its requests, once it
/// holds `count` of them or `within` passed: they travel back
/// asynchronously.
pub fn client_replies(
    client: &tether::Client,
    count: usize,
    within: Duration,
) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + within;
    loop {
        let text = client
            .call_tool("client_replies", serde_json::json!({}), &tether::CallOptions::default())
            .unwrap()
            .to_text();
        let replies: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
        if replies.len() >= count || Instant::now() > deadline {
            return replies;
        }
        thread::sleep(Duration::from_millis(20));
    }
}
