//! Kept-alive sessions: a server whose state matters between commands (a
//! browser, a REPL) kept running by a background `tether` of the user's,
//! which the one-shot commands reach over a Unix socket.
//!
//! One keeper per kept server (`keeper.rs`): a `tether _keeper` process,
//! started on demand by the first command that needs it, in that command's
//! folder and environment (so the server sees what it would have seen
//! started directly), serving that one server with the library's
//! `Downstream::serve_unix` until it has had no client for its idle time.
//! It lives in the user's runtime folder (`runtime.rs`, private to the
//! user), as `KEY.sock` (0600) beside `KEY.json` (what `tether sessions`
//! shows) and `KEY.log` (the keeper's own stderr).
//! KEY is a digest of the entry as written and where it runs, so an
//! edited entry gets a keeper of its own and the old one idles away.
//!
//! A command reaches a kept server through `tether _attach SOCKET`
//! (`attach.rs`), run as that entry's stdio command: to the command's hub
//! the kept server is one more stdio server, with every part of the client
//! (eras, timeouts, cancellation, the host's roots, sampling and
//! elicitation) unchanged. The keeper's server dies with the keeper, also
//! when it is killed: its supervisor has the keeper as its parent.

pub(super) mod attach;
pub(super) mod keeper;
mod runtime;
pub(super) mod sessions;

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use tether::{Config, ServerConfig, TransportConfig};

use super::args::Command;
use super::escape;
use super::output::{self, EXIT_SERVER, EXIT_USAGE};

/// How long a server kept with `--keep-alive` (and no `keepAlive` idle
/// time of its entry's) is kept unused.
pub(super) const DEFAULT_IDLE: Duration = Duration::from_secs(15 * 60);
/// How long past the entry's start timeout a keeper may take to listen.
const START_SLACK: Duration = Duration::from_secs(5);
/// How often a starting keeper is looked at.
const START_POLL: Duration = Duration::from_millis(5);

/// How the command was run, for a keeper started by it: the same files.
pub(super) struct Invocation<'a> {
    pub(super) config_dir: &'a Path,
    pub(super) project_dir: &'a Path,
    pub(super) only_file: Option<&'a Path>,
    /// The words that made ad-hoc entries (a URL, `stdio:CMD`), by the
    /// entry's name: a keeper makes the same entry from the same word.
    pub(super) adhoc: &'a HashMap<String, String>,
}

/// One kept server's files.
pub(super) struct Kept {
    socket: PathBuf,
    log: PathBuf,
    lock: PathBuf,
}

impl Kept {
    /// The files of `server`'s keeper in `folder`, under its name and key.
    fn of(folder: &Path, server: &ServerConfig, cwd: &Path) -> Kept {
        let stem = key(server, cwd);
        let file = |extension: &str| folder.join(format!("{stem}.{extension}"));
        Kept { socket: file("sock"), log: file("log"), lock: file("lock") }
    }

    /// True when a keeper answers on the socket.
    fn answers(&self) -> bool {
        UnixStream::connect(&self.socket).is_ok()
    }
}

/// The digest that tells one kept server from another: the entry as
/// written, what it runs as expanded now (its arguments, its variables'
/// values, those it takes from this environment; a URL and its headers),
/// where it came from, and the folder it runs in. A variable that changed
/// (a rotated token) makes another session.
fn key(server: &ServerConfig, cwd: &Path) -> String {
    let mut parts: Vec<String> = vec![
        server.name.clone(),
        server.scope.as_str().to_owned(),
        server.source.as_deref().map(|path| path.display().to_string()).unwrap_or_default(),
        server.raw.as_ref().map(ToString::to_string).unwrap_or_default(),
        cwd.display().to_string(),
    ];
    match &server.transport {
        TransportConfig::Stdio(stdio) => {
            parts.push(stdio.command.clone());
            parts.extend(stdio.args.iter().cloned());
            parts.extend(stdio.env.iter().map(|(name, value)| format!("{name}={value}")));
            parts.extend(
                stdio.env_from.iter().map(|(name, from)| {
                    format!("{name}={}", std::env::var(from).unwrap_or_default())
                }),
            );
            parts.push(format!("{}{:?}", stdio.inherit_env, stdio.cwd));
        }
        TransportConfig::Http(http) => {
            parts.push(http.url.clone());
            parts.extend(http.headers.iter().map(|(name, value)| format!("{name}: {value}")));
        }
        _ => {}
    }
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    for part in &parts {
        context.update(part.as_bytes());
        context.update(&[0]);
    }
    context.finish().as_ref()[..8].iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Which of a command's servers it names: a session is started on demand
/// only for those (a plain `list` starts none, a script only those it
/// calls), and with `--keep-alive` on a command that names none, for all.
pub(super) enum Named {
    All,
    These(Vec<String>),
    /// A script that calls no server's tool: none, even with --keep-alive.
    Nothing,
}

impl Named {
    /// The servers `command` names (a script's, as `run` finds them).
    pub(super) fn by(command: &Command, config: &Config) -> Named {
        match command {
            Command::Run { code: Some(source), .. } => {
                let names: Vec<&str> =
                    config.servers.iter().map(|server| server.name.as_str()).collect();
                match tether::for_cli::servers_named(source, &names) {
                    tether::for_cli::Named::Some(named) if named.is_empty() => Named::Nothing,
                    tether::for_cli::Named::Some(named) => Named::These(named),
                    _ => Named::All,
                }
            }
            Command::List { names, .. } if !names.is_empty() => Named::These(names.clone()),
            _ => Named::These(command.server().map(str::to_owned).into_iter().collect()),
        }
    }

    fn names(&self, server: &str) -> bool {
        match self {
            Named::All => true,
            Named::These(names) => names.iter().any(|name| Config::same_name(name, server)),
            Named::Nothing => false,
        }
    }
}

/// Points `config`'s servers through their keepers: a server with a
/// session running always; one the command names and that is kept
/// (`keepAlive`, or `--keep-alive`) through a session started now.
/// Returns the names now kept, or the exit code of a session that did not
/// start for the one server a command names (among many, that server
/// starts as it would have, and its failure is said with the others').
pub(super) fn reach(
    config: &mut Config,
    command: &Command,
    forced: bool,
    invocation: &Invocation<'_>,
) -> Result<Vec<String>, u8> {
    if matches!(command, Command::Serve { .. } | Command::Proxy(_))
        || matches!(command, Command::List { no_connect: true, .. })
    {
        return Ok(Vec::new());
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| invocation.project_dir.to_owned());
    let named = match Named::by(command, config) {
        Named::These(names) if names.is_empty() && forced => Named::All,
        named => named,
    };
    let wanted = |server: &ServerConfig| {
        server.enabled && named.names(&server.name) && (forced || server.keep_alive.is_some())
    };
    let folder = match runtime::folder() {
        Ok(folder) => folder,
        Err(why) => {
            // Nothing can be kept; without being asked to, nothing needs to be.
            if config.servers.iter().any(wanted) {
                errln!("cannot keep servers alive: {}", escape::escaped(&why));
                return Err(EXIT_SERVER);
            }
            return Ok(Vec::new());
        }
    };
    let alone = config.servers.iter().filter(|server| wanted(server)).count() == 1;
    // `--timeout` bounds the whole command, a session's start too.
    let ceiling = match command {
        Command::Call { timeout, .. } | Command::Run { timeout, .. } => *timeout,
        _ => None,
    };
    let mut kept_now = Vec::new();
    for server in &mut config.servers {
        if !server.enabled {
            continue;
        }
        let kept = Kept::of(&folder, server, &cwd);
        if wanted(server) {
            let idle = server.keep_alive.unwrap_or(DEFAULT_IDLE);
            let mut bounded = server.clone();
            if let Some(ceiling) = ceiling {
                bounded.start_timeout = bounded.start_timeout.min(ceiling);
            }
            match ensure(&kept, &bounded, idle, invocation, &cwd) {
                Ok(()) => {}
                // The keeper said why, as the command would have.
                Err(Failure::Said(code, words)) if alone => {
                    output::said_errors(&words);
                    return Err(code);
                }
                Err(Failure::Other(why)) if alone => {
                    errln!(
                        "server {:?}: its kept-alive session did not start: {}",
                        server.name,
                        escape::escaped(&why)
                    );
                    return Err(EXIT_SERVER);
                }
                Err(_) => {
                    log::warn!("server {:?}: its kept-alive session did not start", server.name);
                    continue;
                }
            }
        } else if !kept.socket.exists() || !kept.answers() {
            continue;
        }
        log::info!("server {:?} through its kept-alive session", server.name);
        through(server, &kept).map_err(|why| {
            errln!("{why}");
            EXIT_USAGE
        })?;
        kept_now.push(server.name.clone());
    }
    Ok(kept_now)
}

/// Why a keeper could not be had.
enum Failure {
    /// It ended with this exit code, having said these lines: its server
    /// did not start, in the words the command would have used.
    Said(u8, String),
    /// It could not be started or watched, or did not listen in time.
    Other(String),
}

/// Makes `server` reach its keeper: a stdio entry running `tether _attach`,
/// speaking the handshake, so that the keeper can ask this command's host
/// (roots, elicitation, sampling) for its server.
fn through(server: &mut ServerConfig, kept: &Kept) -> Result<(), String> {
    let program = std::env::current_exe()
        .map_err(|err| format!("cannot tell where tether's own program is: {err}"))?;
    let socket = kept.socket.display().to_string();
    let attach =
        ServerConfig::stdio(&server.name, &program.display().to_string(), &["_attach", &socket]);
    server.transport = attach.transport;
    server.protocol = tether::EraChoice::Legacy;
    Ok(())
}

/// A keeper for `server` answering on its socket: one that runs already,
/// or one started now and waited for (its server started, within the
/// entry's start timeout). Two commands at once start one keeper: the
/// second waits on the first's lock.
fn ensure(
    kept: &Kept,
    server: &ServerConfig,
    idle: Duration,
    invocation: &Invocation<'_>,
    cwd: &Path,
) -> Result<(), Failure> {
    // Another command starting the same keeper has it for its start at most.
    let wait = server.start_timeout + START_SLACK + START_SLACK;
    let _lock = runtime::lock(&kept.lock, wait).map_err(Failure::Other)?;
    if kept.answers() {
        return Ok(());
    }
    let mut child = spawn_keeper(kept, server, idle, invocation, cwd).map_err(Failure::Other)?;
    // The keeper's own start timeout is the entry's; a shorter one here
    // (--timeout) gives up waiting sooner.
    let slack = if server.start_timeout < START_SLACK { Duration::ZERO } else { START_SLACK };
    let deadline = Instant::now() + server.start_timeout + slack;
    loop {
        if kept.answers() {
            return Ok(());
        }
        match child.try_wait() {
            // Its code says whose fault it was (2: the entry's, 3: the server's).
            Ok(Some(status)) => {
                let code = status.code().and_then(|code| u8::try_from(code).ok());
                let code = code.filter(|code| *code != 0).unwrap_or(EXIT_SERVER);
                return Err(Failure::Said(code, said_by(&kept.log)));
            }
            Ok(None) => {}
            Err(err) => return Err(Failure::Other(format!("cannot watch the keeper: {err}"))),
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Failure::Other(format!(
                "it did not start within {:.1} s (the start timeout, or --timeout)",
                server.start_timeout.as_secs_f64()
            )));
        }
        std::thread::sleep(START_POLL);
    }
}

/// Starts `tether _keeper` for `server`: in a session of its own (no
/// terminal's signals reach it), on the same files, in this folder and
/// environment, its stderr to its log.
fn spawn_keeper(
    kept: &Kept,
    server: &ServerConfig,
    idle: Duration,
    invocation: &Invocation<'_>,
    cwd: &Path,
) -> Result<Child, String> {
    let program = std::env::current_exe()
        .map_err(|err| format!("cannot tell where tether's own program is: {err}"))?;
    let log = runtime::create_private(&kept.log)
        .map_err(|err| format!("{}: {err}", kept.log.display()))?;
    let mut command = std::process::Command::new(program);
    let absolute = |path: &Path| std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    command.arg("--config-dir").arg(absolute(invocation.config_dir));
    command.arg("--project").arg(absolute(invocation.project_dir));
    if let Some(file) = invocation.only_file {
        command.arg("--config").arg(absolute(file));
    }
    let word = invocation.adhoc.get(&server.name).unwrap_or(&server.name);
    command
        .arg("_keeper")
        .arg("--socket")
        .arg(&kept.socket)
        .arg("--idle")
        .arg(idle.as_secs().to_string())
        .arg(word)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    // SAFETY: setsid is async-signal-safe, and nothing else runs here.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command.spawn().map_err(|err| format!("cannot start tether's keeper: {err}"))
}

/// What a keeper that ended said (its log, its own `error:` lines and
/// hints, escaped as it wrote them), or that it said nothing.
fn said_by(log: &Path) -> String {
    let mut text = String::new();
    if let Ok(file) = std::fs::File::open(log) {
        let _ = file.take(64 * 1024).read_to_string(&mut text);
    }
    if text.trim().is_empty() {
        return "error: tether's keeper ended without a word\n".into();
    }
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// The command line or URL a kept server runs, as `sessions` shows it.
pub(super) fn target_of(server: &ServerConfig) -> String {
    match &server.transport {
        TransportConfig::Stdio(stdio) => {
            let mut words = vec![tether::for_cli::shell_quote(&stdio.command)];
            words.extend(stdio.args.iter().map(|arg| tether::for_cli::shell_quote(arg)));
            words.join(" ")
        }
        TransportConfig::Http(http) => http.url.clone(),
        _ => String::new(),
    }
}
