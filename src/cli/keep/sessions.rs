//! `tether sessions`: the kept-alive sessions running, and `tether
//! sessions end` to end them.
//!
//! A session is a record in the runtime folder whose socket answers; one
//! whose keeper died (killed, the machine asleep past a restart) is
//! removed when seen. The keeper to end is the process listening on the
//! socket, as the kernel says (`SO_PEERCRED`), never a number read from a
//! file, and only one of the user's own.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use serde::Deserialize;
use serde_json::json;

use tether::Config;

use super::super::get::span;
use super::super::output::{emit, emit_json, EXIT_OK, EXIT_SERVER, EXIT_USAGE};
use super::super::{escape, table};
use super::runtime;

/// How long a keeper gets to close its server after SIGTERM, before SIGKILL.
const END_GRACE: Duration = Duration::from_secs(5);

/// A keeper's record, as it wrote it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Record {
    name: String,
    #[serde(default)]
    started: String,
    #[serde(default)]
    idle_seconds: u64,
    #[serde(default)]
    server: String,
    #[serde(default)]
    folder: String,
}

/// A session that answers: its record and its keeper's process.
struct Session {
    record: Record,
    pid: i32,
    socket: PathBuf,
}

/// `tether sessions [--json]`.
pub(in crate::cli) fn list(json: bool) -> u8 {
    let sessions = match running() {
        Ok(sessions) => sessions,
        Err(why) => {
            errln!("cannot look for kept-alive sessions: {}", escape::escaped(&why));
            return EXIT_SERVER;
        }
    };
    if json {
        let rows: Vec<_> = sessions
            .iter()
            .map(|session| {
                json!({
                    "name": session.record.name,
                    "pid": session.pid,
                    "started": session.record.started,
                    "idleSeconds": session.record.idle_seconds,
                    "server": session.record.server,
                    "folder": session.record.folder,
                })
            })
            .collect();
        emit_json(&json!(rows));
        return EXIT_OK;
    }
    if sessions.is_empty() {
        emit(
            "No kept-alive sessions. A server with \"keepAlive\": true in its entry, or a \
              command with --keep-alive, starts one.\n",
        );
        return EXIT_OK;
    }
    let mut rows = vec![[
        "NAME".to_owned(),
        "PID".to_owned(),
        "UP".to_owned(),
        "IDLE LIMIT".to_owned(),
        "FOLDER".to_owned(),
        "SERVER".to_owned(),
    ]];
    for session in &sessions {
        rows.push([
            session.record.name.clone(),
            session.pid.to_string(),
            up_since(&session.socket),
            span(session.record.idle_seconds as i64),
            session.record.folder.clone(),
            session.record.server.clone(),
        ]);
    }
    emit(&table::render(&rows));
    EXIT_OK
}

/// `tether sessions end NAME... | --all`.
pub(in crate::cli) fn end(names: &[String], all: bool) -> u8 {
    let sessions = match running() {
        Ok(sessions) => sessions,
        Err(why) => {
            errln!("cannot look for kept-alive sessions: {}", escape::escaped(&why));
            return EXIT_SERVER;
        }
    };
    for name in names {
        if !sessions.iter().any(|session| Config::same_name(&session.record.name, name)) {
            errln!("no kept-alive session {:?} runs", escape::escaped(name));
            let running: Vec<String> =
                sessions.iter().map(|session| escape::escaped(&session.record.name)).collect();
            if !running.is_empty() {
                detail!("hint: these run: {}", running.join(", "));
            }
            return EXIT_USAGE;
        }
    }
    let mut code = EXIT_OK;
    for session in sessions.iter().filter(|session| {
        all || names.iter().any(|name| Config::same_name(&session.record.name, name))
    }) {
        let name = escape::escaped(&session.record.name);
        if stop(session) {
            eprintln!("ended {name} (pid {})", session.pid);
        } else {
            errln!("session {name} (pid {}) did not end", session.pid);
            code = EXIT_SERVER;
        }
    }
    code
}

/// SIGTERM to the keeper, SIGKILL past the grace; true once it is gone.
fn stop(session: &Session) -> bool {
    for (signal, within) in [(libc::SIGTERM, END_GRACE), (libc::SIGKILL, Duration::from_secs(2))] {
        // SAFETY: a plain system call on a pid the kernel named.
        unsafe {
            libc::kill(session.pid, signal);
        }
        let until = Instant::now() + within;
        while Instant::now() < until {
            // SAFETY: as above; signal 0 only asks whether it lives.
            let alive = unsafe { libc::kill(session.pid, 0) } == 0;
            if !alive || UnixStream::connect(&session.socket).is_err() {
                // Killed, it left its files: they go with it.
                if !alive {
                    let _ = std::fs::remove_file(&session.socket);
                    let _ = std::fs::remove_file(session.socket.with_extension("json"));
                }
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    false
}

/// Every session whose socket answers, by name; the records of keepers
/// that died are removed.
fn running() -> Result<Vec<Session>, String> {
    let folder = runtime::folder()?;
    let entries = std::fs::read_dir(&folder).map_err(|err| err.to_string())?;
    let mut sessions = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|extension| extension != "json") {
            continue;
        }
        let socket = path.with_extension("sock");
        let mut text = Vec::new();
        let Ok(file) = std::fs::File::open(&path) else { continue };
        if file.take(64 * 1024).read_to_end(&mut text).is_err() {
            continue;
        }
        let Ok(record) = serde_json::from_slice::<Record>(&text) else { continue };
        match keeper_of(&socket) {
            Some(pid) => sessions.push(Session { record, pid, socket }),
            None => {
                let _ = std::fs::remove_file(&socket);
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    sweep(&folder);
    sessions.sort_by(|a, b| a.record.name.cmp(&b.record.name));
    Ok(sessions)
}

/// Removes what keepers that are gone left: the lock and log of each
/// session with no socket, unless a command is starting it now (it holds
/// the lock).
fn sweep(folder: &Path) {
    let Ok(entries) = std::fs::read_dir(folder) else { return };
    for entry in entries.flatten() {
        let lock = entry.path();
        if lock.extension().is_none_or(|extension| extension != "lock")
            || lock.with_extension("sock").exists()
        {
            continue;
        }
        let Ok(file) = std::fs::OpenOptions::new().write(true).open(&lock) else { continue };
        // SAFETY: a valid descriptor.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            let _ = std::fs::remove_file(lock.with_extension("log"));
            let _ = std::fs::remove_file(&lock);
        }
    }
}

/// The pid of the process of this user listening at `socket`, if one does.
fn keeper_of(socket: &Path) -> Option<i32> {
    let stream = UnixStream::connect(socket).ok()?;
    let (pid, uid) = tether::for_cli::unix_peer(&stream)?;
    // SAFETY: no arguments; it cannot fail.
    (uid == unsafe { libc::geteuid() } && pid > 0).then_some(pid)
}

/// How long since the socket was made.
fn up_since(socket: &Path) -> String {
    let made = std::fs::symlink_metadata(socket).and_then(|meta| meta.modified());
    match made.ok().and_then(|made| SystemTime::now().duration_since(made).ok()) {
        Some(up) => span(up.as_secs() as i64),
        None => "?".into(),
    }
}
