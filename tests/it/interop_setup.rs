//! Installs and starts third-party MCP servers for tether's interop tests.
//!
//! On first use this module installs, into `<target>/interop/` (the cargo
//! target directory), pinned exact versions of:
//!
//! * the npm packages `@modelcontextprotocol/server-everything` and
//!   `@modelcontextprotocol/server-filesystem` (one `npm install` into
//!   `<target>/interop/npm`), run with `node`;
//! * the PyPI package `mcp`, the official Python SDK, into a virtualenv at
//!   `<target>/interop/venv`, which runs `fixtures/python/mcp_server.py`.
//!
//! Each install is done once: threads of one test process share a `OnceLock`,
//! test processes share a lock directory (`<name>.lock`, created atomically,
//! removed when the install ends, broken when older than [`STALE_LOCK`]).
//! Every install goes into a fresh temporary directory that is renamed into
//! place only when complete, with a marker file naming the pinned versions
//! written last, so a crashed or concurrent install can never leave a
//! half-installed tree where the tests look. A new pin replaces the old tree.
//! Each install command is killed after [`INSTALL_TIMEOUT`]. A failed install
//! is remembered for the rest of the process, so the tests that follow fail
//! at once with the same message instead of retrying.
//!
//! Without Node.js/npm or Python the functions panic with a message saying
//! what to install.
//!
//! HTTP servers bind 127.0.0.1 only, on a port the kernel picks (port 0), and
//! announce it on stderr with a line containing
//! `listening on http://127.0.0.1:PORT`; [`spawn_http_server`] starts a
//! server, reads that line and returns the port. server-everything itself
//! has no host setting (it calls `app.listen(process.env.PORT || 3001)`,
//! which binds every interface), so in HTTP modes node preloads a small
//! script that makes port-only `listen` calls bind 127.0.0.1 and prints the
//! line above.
//!
//! Endpoints (`http://127.0.0.1:PORT` + path):
//!
//! | server | sse | streamable HTTP |
//! | --- | --- | --- |
//! | server-everything | `GET /sse`, then `POST /message?sessionId=…` | `/mcp` |
//! | Python fixture | `GET /sse`, then `POST /messages/?session_id=…` | `/mcp` |

// A test binary may use only some of these helpers.
#![allow(dead_code)]

use std::fs;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, OnceLock};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// npm package `@modelcontextprotocol/server-everything`, exact version.
pub const EVERYTHING_VERSION: &str = "2026.8.31";
/// npm package `@modelcontextprotocol/server-filesystem`, exact version.
pub const FILESYSTEM_VERSION: &str = "2026.8.31";
/// npm package `@modelcontextprotocol/conformance` (the official MCP
/// conformance suite), exact version.
pub const CONFORMANCE_VERSION: &str = "0.1.16";
/// npm package `node-linux-<arch>`: the suite needs Node.js 22 or newer,
/// which the machine's own node may not be.
pub const SUITE_NODE_VERSION: &str = "22.23.5";
/// PyPI package `mcp` (the official Python SDK), exact version.
pub const PYTHON_MCP_VERSION: &str = "2.3.0";

const EVERYTHING_PKG: &str = "@modelcontextprotocol/server-everything";
const CONFORMANCE_PKG: &str = "@modelcontextprotocol/conformance";

/// Preloaded into the conformance suite's node: `fetch` to any host that is
/// not loopback is refused (one scenario's teardown fetches a client
/// metadata URL on the internet; nothing here may leave the machine).
const LOOPBACK_GUARD: &str = r#"'use strict';
const originalFetch = globalThis.fetch;
const local = (host) => host === 'localhost' || host === '[::1]' || host === '::1' || host.startsWith('127.');
globalThis.fetch = function loopbackOnly(input, init) {
  let target;
  try {
    target = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
  } catch (_) {
    return originalFetch(input, init);
  }
  if (!local(target.hostname)) {
    return Promise.reject(new TypeError('loopback only: not fetching ' + target.host));
  }
  return originalFetch(input, init);
};
"#;
const FILESYSTEM_PKG: &str = "@modelcontextprotocol/server-filesystem";

/// Longest time one install (all its commands together) may take.
pub const INSTALL_TIMEOUT: Duration = Duration::from_secs(300);
/// A lock directory older than this was left by a process that died.
pub const STALE_LOCK: Duration = Duration::from_secs(330);
/// Longest wait for another process's install before giving up.
const LOCK_WAIT: Duration = Duration::from_secs(360);
/// Longest wait for an HTTP server's "listening" line.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// Written last into a finished install; holds the install's stamp.
const MARKER: &str = ".tether-interop-installed";
/// What HTTP servers print on stderr, followed by the port.
const LISTENING: &str = "listening on http://127.0.0.1:";

const NODE_HINT: &str = "interop tests need Node.js 18+ and npm on PATH: \
    install them (Debian: apt-get install nodejs npm)";
const PYTHON_HINT: &str =
    "interop tests need Python 3.10+ with its venv module as `python3` on PATH: \
    install it (Debian: apt-get install python3 python3-venv)";

/// Preloaded by node (`--require`) for server-everything's HTTP modes: binds
/// port-only `listen` calls to 127.0.0.1 and prints the port actually bound.
const LOOPBACK_PRELOAD: &str = r#"// Written by tether's tests/it/interop_setup.rs; node --require this file.
// Makes listen(port) and listen({port}) bind 127.0.0.1 instead of every
// interface, and prints "listening on http://127.0.0.1:PORT" to stderr.
"use strict";
const net = require("net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const first = args[0];
  if (first === undefined || typeof first === "function") {
    args.unshift(0, "127.0.0.1");
  } else if (typeof first === "number" || (typeof first === "string" && /^[0-9]+$/.test(first))) {
    if (typeof args[1] !== "string") args.splice(1, 0, "127.0.0.1");
  } else if (first !== null && typeof first === "object" && first.path === undefined && first.fd === undefined && first.host === undefined) {
    args[0] = Object.assign({}, first, { host: "127.0.0.1" });
  }
  this.once("listening", () => {
    const a = this.address();
    if (a !== null && typeof a === "object") {
      process.stderr.write(`interop: listening on http://${a.address}:${a.port}\n`);
    }
  });
  return listen.apply(this, args);
};
"#;

/// argv that starts server-everything over stdio.
pub fn everything_server() -> Vec<String> {
    vec!["node".to_owned(), path_string(&everything_entry()), "stdio".to_owned()]
}

/// argv and environment that start server-everything over HTTP, `mode`
/// being `"sse"` (endpoint `/sse`) or `"streamableHttp"` (endpoint `/mcp`).
///
/// The environment sets `PORT=0`: the server binds 127.0.0.1 on a free port
/// and prints `listening on http://127.0.0.1:PORT` to stderr (see
/// [`spawn_http_server`]). Replace `PORT` to choose the port yourself.
pub fn everything_server_http(mode: &str) -> (Vec<String>, Vec<(String, String)>) {
    assert!(
        mode == "sse" || mode == "streamableHttp",
        "server-everything's HTTP modes are \"sse\" and \"streamableHttp\", not {mode:?}"
    );
    let argv = vec![
        "node".to_owned(),
        "--require".to_owned(),
        path_string(&loopback_preload()),
        path_string(&everything_entry()),
        mode.to_owned(),
    ];
    (argv, vec![("PORT".to_owned(), "0".to_owned())])
}

/// argv that starts server-filesystem over stdio, allowed to use `allowed_dir`.
///
/// If the client declares the `roots` capability the server asks for
/// `roots/list` and uses the roots instead of `allowed_dir`.
pub fn filesystem_server(allowed_dir: &Path) -> Vec<String> {
    let entry = npm_prefix().join("node_modules").join(FILESYSTEM_PKG).join("dist/index.js");
    vec!["node".to_owned(), path_string(&entry), path_string(allowed_dir)]
}

/// argv that starts `fixtures/python/mcp_server.py`, `mode` being `"stdio"`,
/// `"sse"` (endpoint `/sse`) or `"http"` (streamable HTTP, endpoint `/mcp`).
///
/// HTTP modes get port 0: the server binds 127.0.0.1 on a free port and
/// prints `listening on http://127.0.0.1:PORT/...` to stderr (see
/// [`spawn_http_server`]). Replace the last element to choose the port.
pub fn python_server(mode: &str) -> Vec<String> {
    let port: &[&str] = match mode {
        "stdio" => &[],
        "sse" | "http" => &["0"],
        _ => panic!("the Python fixture's modes are \"stdio\", \"sse\" and \"http\", not {mode:?}"),
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/python/mcp_server.py");
    let mut argv =
        vec![path_string(&venv().join("bin/python")), path_string(&script), mode.to_owned()];
    argv.extend(port.iter().map(|p| (*p).to_owned()));
    argv
}

/// argv that starts `fixtures/python/wordcount_server.py` over stdio: one
/// tool, `word_count`, codemode's example.
pub fn python_wordcount_server() -> Vec<String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/python/wordcount_server.py");
    vec![path_string(&venv().join("bin/python")), path_string(&script)]
}

/// An HTTP server started by [`spawn_http_server`]; killed when dropped.
pub struct HttpServer {
    pub child: Child,
    /// The port it listens on, at 127.0.0.1.
    pub port: u16,
}

impl HttpServer {
    /// `http://127.0.0.1:PORT` followed by `path` (e.g. `"/mcp"`).
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts an HTTP server from the argv and environment given by
/// [`everything_server_http`] or [`python_server`], waits until it prints
/// that it listens, and returns it with its port. Its stdout is discarded;
/// its stderr is copied to this test's stderr (shown when a test fails).
pub fn spawn_http_server(argv: &[String], env: &[(String, String)]) -> HttpServer {
    let (program, args) = argv.split_first().expect("argv has a program");
    let mut cmd = Command::new(program);
    cmd.args(args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
    for (key, value) in env {
        cmd.env(key, value);
    }
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start {argv:?}: {e}"));
    let stderr = child.stderr.take().expect("stderr is piped");
    let mut server = HttpServer { child, port: 0 };

    let (tx, rx) = mpsc::channel::<Result<u16, String>>();
    thread::spawn(move || {
        let mut tx = Some(tx);
        let mut before = String::new();
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            eprintln!("[interop server] {line}");
            if let Some(sender) = &tx {
                if let Some(port) = parse_listening(&line) {
                    let _ = sender.send(Ok(port));
                    tx = None;
                } else {
                    before.push_str(&line);
                    before.push('\n');
                }
            }
        }
        if let Some(tx) = tx {
            let _ = tx.send(Err(before));
        }
    });

    match rx.recv_timeout(STARTUP_TIMEOUT) {
        Ok(Ok(port)) => {
            server.port = port;
            server
        }
        Ok(Err(stderr)) => panic!("{argv:?} ended without listening; its stderr:\n{stderr}"),
        Err(_) => {
            panic!("{argv:?} did not print {LISTENING:?} within {}s", STARTUP_TIMEOUT.as_secs())
        }
    }
}

fn parse_listening(line: &str) -> Option<u16> {
    let rest = &line[line.find(LISTENING)? + LISTENING.len()..];
    let end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
    rest[..end].parse().ok()
}

fn everything_entry() -> PathBuf {
    npm_prefix().join("node_modules").join(EVERYTHING_PKG).join("dist/index.js")
}

/// Runs a Node.js script of `fixtures/node/` from the npm prefix, where
/// the TypeScript SDK is installed (server-everything depends on it), with
/// these arguments; its stdout, within `within`.
pub fn node_script(script: &str, args: &[&str], within: std::time::Duration) -> String {
    let prefix = npm_prefix();
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/node").join(script);
    let copy = prefix.join(script);
    std::fs::copy(&source, &copy).unwrap_or_else(|e| panic!("cannot copy {script}: {e}"));
    let mut command = Command::new("node");
    command.arg(&copy).args(args).current_dir(&prefix);
    let (output, _) = crate::support::run_command(command, None, within);
    assert!(
        output.status.success(),
        "node {script} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `<target>/interop/npm`, holding both npm packages.
fn npm_prefix() -> PathBuf {
    static NPM: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let result = NPM.get_or_init(|| {
        check_node()?;
        let everything = format!("{EVERYTHING_PKG}@{EVERYTHING_VERSION}");
        let filesystem = format!("{FILESYSTEM_PKG}@{FILESYSTEM_VERSION}");
        let stamp = format!("{everything} {filesystem}\n");
        ensure_installed("npm", &stamp, move |dir, log, deadline| {
            let mut npm = Command::new("npm");
            npm.arg("install")
                .arg("--prefix")
                .arg(dir)
                .args(["--no-audit", "--no-fund", "--no-save", "--no-update-notifier"])
                .arg(everything)
                .arg(filesystem);
            run_logged(npm, "npm install", log, deadline)
        })
    });
    result.clone().unwrap_or_else(|e| panic!("{e}"))
}

/// The conformance suite: the node binary to run it with, its entry point,
/// and a preload script that keeps its traffic on loopback. Installed once
/// into `<target>/interop/conformance` (Node.js 22 from the npm registry's
/// `node-linux-<arch>` package, and the suite).
pub fn conformance_suite() -> (PathBuf, PathBuf, PathBuf) {
    static SUITE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let arch = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        other => panic!("the conformance suite's Node.js is not published for {other}"),
    };
    let node_package = format!("node-linux-{arch}");
    let result = SUITE.get_or_init(|| {
        check_node()?;
        let node = format!("{node_package}@{SUITE_NODE_VERSION}");
        let suite = format!("{CONFORMANCE_PKG}@{CONFORMANCE_VERSION}");
        let stamp = format!("{node} {suite}\n");
        ensure_installed("conformance", &stamp, move |dir, log, deadline| {
            // One install for both (a second one would prune the first);
            // neither needs install scripts.
            let mut npm = Command::new("npm");
            npm.arg("install")
                .arg("--prefix")
                .arg(dir)
                .args(["--no-audit", "--no-fund", "--no-save", "--no-update-notifier"])
                .arg("--ignore-scripts")
                .arg(&node)
                .arg(&suite);
            run_logged(npm, "npm install", log, deadline)?;
            fs::write(dir.join("loopback-guard.cjs"), LOOPBACK_GUARD)
                .map_err(|e| format!("cannot write the loopback guard: {e}"))
        })
    });
    let dir = result.clone().unwrap_or_else(|e| panic!("{e}"));
    let node = dir.join("node_modules").join(&node_package).join("bin/node");
    let suite = dir.join("node_modules").join(CONFORMANCE_PKG).join("dist/index.js");
    (node, suite, dir.join("loopback-guard.cjs"))
}

/// `<target>/interop/venv`, a virtualenv holding the `mcp` package.
fn venv() -> PathBuf {
    static VENV: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let result = VENV.get_or_init(|| {
        check_python()?;
        let requirement = format!("mcp=={PYTHON_MCP_VERSION}");
        let stamp = format!("{requirement}\n");
        ensure_installed("venv", &stamp, move |dir, log, deadline| {
            let mut create = Command::new("python3");
            create.args(["-m", "venv"]).arg(dir);
            run_logged(create, "python3 -m venv", log, deadline)?;
            let mut pip = Command::new(dir.join("bin/python"));
            pip.args(["-m", "pip", "install", "--disable-pip-version-check", "--no-input"])
                .arg(requirement);
            run_logged(pip, "pip install", log, deadline)
        })
    });
    result.clone().unwrap_or_else(|e| panic!("{e}"))
}

/// `<target>/interop/bind-loopback.cjs`, rewritten once per test process.
fn loopback_preload() -> PathBuf {
    static PRELOAD: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let result = PRELOAD.get_or_init(|| {
        let root = interop_root();
        fs::create_dir_all(&root).map_err(|e| format!("cannot create {}: {e}", root.display()))?;
        let path = root.join("bind-loopback.cjs");
        // Written aside then renamed, so a node starting meanwhile in another
        // process reads either the old file or the new one, whole.
        let tmp = root.join(format!("bind-loopback.cjs.tmp-{}", unique()));
        fs::write(&tmp, LOOPBACK_PRELOAD)
            .and_then(|()| fs::rename(&tmp, &path))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Ok(path)
    });
    result.clone().unwrap_or_else(|e| panic!("{e}"))
}

/// `<target>/interop`.
fn interop_root() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("CARGO_TARGET_TMPDIR has a parent")
        .join("interop")
}

fn check_node() -> Result<(), String> {
    let version = tool_output("node", &["--version"], NODE_HINT)?;
    let version = version.trim();
    let major =
        version.trim_start_matches('v').split('.').next().and_then(|m| m.parse::<u32>().ok());
    if major.is_none_or(|major| major < 18) {
        return Err(format!("{NODE_HINT} (found node {version})"));
    }
    tool_output("npm", &["--version"], NODE_HINT)?;
    Ok(())
}

fn check_python() -> Result<(), String> {
    let probe = "import sys, venv, ensurepip; print(sys.version_info[0], sys.version_info[1])";
    let version = tool_output("python3", &["-c", probe], PYTHON_HINT)?;
    let mut parts = version.split_whitespace().map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) if (major, minor) >= (3, 10) => Ok(()),
        _ => Err(format!("{PYTHON_HINT} (found python3 {})", version.trim())),
    }
}

/// Runs a short command and returns its stdout, or `hint` if it cannot run.
fn tool_output(program: &str, args: &[&str], hint: &str) -> Result<String, String> {
    match Command::new(program).args(args).stdin(Stdio::null()).output() {
        Ok(out) if out.status.success() => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
        Ok(out) => Err(format!(
            "{hint} (`{program} {}` failed: {})",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Err(format!("{hint} (cannot run `{program}`: {e})")),
    }
}

/// Makes sure `<target>/interop/<name>` holds a finished install whose
/// marker says `stamp`, running `install(dir, log, deadline)` into a fresh
/// directory `dir` (which `install` creates) if not, then renaming it into
/// place. Safe across threads and processes; see the module docs.
fn ensure_installed(
    name: &str,
    stamp: &str,
    install: impl FnOnce(&Path, &Path, Instant) -> Result<(), String>,
) -> Result<PathBuf, String> {
    let root = interop_root();
    let dest = root.join(name);
    if is_installed(&dest, stamp) {
        return Ok(dest);
    }
    fs::create_dir_all(&root).map_err(|e| format!("cannot create {}: {e}", root.display()))?;
    let _lock = DirLock::acquire(root.join(format!("{name}.lock")))?;
    if is_installed(&dest, stamp) {
        return Ok(dest); // another process installed it while we waited
    }
    if dest.exists() {
        // Left by other pinned versions: move it aside, then delete it.
        let old = root.join(format!("{name}.old-{}", unique()));
        if fs::rename(&dest, &old).is_ok() {
            let _ = fs::remove_dir_all(&old);
        }
    }

    let started = Instant::now();
    let tmp = root.join(format!("{name}.tmp-{}", unique()));
    let log = root.join(format!("{name}.install.log"));
    let installed = install(&tmp, &log, started + INSTALL_TIMEOUT).and_then(|()| {
        fs::write(tmp.join(MARKER), stamp)
            .map_err(|e| format!("cannot write {}: {e}", tmp.join(MARKER).display()))
    });
    if let Err(e) = installed {
        let _ = fs::remove_dir_all(&tmp);
        return Err(format!("installing the interop servers into {} failed: {e}", dest.display()));
    }
    if let Err(e) = fs::rename(&tmp, &dest) {
        let _ = fs::remove_dir_all(&tmp);
        // Losing the race to a process that broke a stale lock is fine.
        if !is_installed(&dest, stamp) {
            return Err(format!("cannot rename {} to {}: {e}", tmp.display(), dest.display()));
        }
    }
    eprintln!(
        "interop: installed {} ({}) in {:.1}s",
        dest.display(),
        stamp.trim(),
        started.elapsed().as_secs_f64()
    );
    Ok(dest)
}

fn is_installed(dir: &Path, stamp: &str) -> bool {
    fs::read_to_string(dir.join(MARKER)).is_ok_and(|found| found == stamp)
}

/// Runs `cmd` with stdout and stderr in `log`, killing it at `deadline`.
fn run_logged(mut cmd: Command, what: &str, log: &Path, deadline: Instant) -> Result<(), String> {
    let out = fs::File::create(log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
    let err = out.try_clone().map_err(|e| format!("cannot reopen {}: {e}", log.display()))?;
    // Its own process group, so that a timeout also kills what it started
    // (npm's helpers, pip's ensurepip).
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("cannot run {what}: {e}"))?;
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => {
                return Err(format!("{what} failed ({status}); its output:\n{}", log_tail(log)));
            }
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(100)),
            Ok(None) => {
                kill_group(&mut child);
                return Err(format!(
                    "{what} was killed after the {}s install time limit; its output:\n{}",
                    INSTALL_TIMEOUT.as_secs(),
                    log_tail(log)
                ));
            }
            Err(e) => {
                kill_group(&mut child);
                return Err(format!("cannot wait for {what}: {e}"));
            }
        }
    }
}

/// Kills `child` and the process group it leads (see `run_logged`).
fn kill_group(child: &mut Child) {
    #[cfg(unix)]
    let _ = Command::new("kill")
        .args(["-KILL", "--"])
        .arg(format!("-{}", child.id()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let _ = child.kill();
    let _ = child.wait();
}

/// The last few kilobytes of a log file.
fn log_tail(log: &Path) -> String {
    let text = String::from_utf8_lossy(&fs::read(log).unwrap_or_default()).into_owned();
    let mut start = text.len().saturating_sub(4000);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("[{}]\n{}", log.display(), &text[start..])
}

/// A cross-process lock: a directory that exists while it is held.
struct DirLock(PathBuf);

impl DirLock {
    fn acquire(path: PathBuf) -> Result<DirLock, String> {
        let start = Instant::now();
        loop {
            match fs::create_dir(&path) {
                Ok(()) => return Ok(DirLock(path)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    if start.elapsed() > LOCK_WAIT {
                        return Err(format!(
                            "gave up after {}s waiting for {} (another test process installing?); \
                             remove it if no test is running",
                            LOCK_WAIT.as_secs(),
                            path.display()
                        ));
                    }
                    let age = fs::metadata(&path)
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| t.elapsed().ok());
                    if age.is_some_and(|age| age > STALE_LOCK) {
                        // Its holder died without removing it (a live holder
                        // gives up after INSTALL_TIMEOUT, well before this).
                        let _ = fs::remove_dir(&path);
                    }
                    thread::sleep(Duration::from_millis(250));
                }
                Err(e) => return Err(format!("cannot create lock {}: {e}", path.display())),
            }
        }
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        let _ = fs::remove_dir(&self.0);
    }
}

/// A name part that no other install attempt uses.
fn unique() -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    format!("{}-{nanos}", std::process::id())
}

fn path_string(path: &Path) -> String {
    path.to_str()
        .unwrap_or_else(|| panic!("interop tests need UTF-8 paths, not {}", path.display()))
        .to_owned()
}
