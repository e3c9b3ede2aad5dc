//! `tether _keeper --socket PATH --idle S SERVER`: the background process
//! that keeps one server running, started by the first command that needs
//! it (`super::ensure`).
//!
//! It starts the server, and only once it is ready listens on the socket:
//! a command waiting for the socket so learns that the server runs, and a
//! server that cannot start ends the keeper with the reason in its log and
//! its exit code, which the waiting command passes on. Then it serves the
//! server with its own names (as `tether serve NAME` does) to each command
//! that connects, restarting it if it stops, until no command has been
//! connected for the idle time, or `tether sessions end` (SIGTERM). Either
//! way the server is closed and the socket and its record removed.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::json;

use tether::{Config, Downstream, HubOptions, NameStyle, ServeOptions, ServerState};

use super::super::output::{report, EXIT_OK, EXIT_SERVER};
use super::super::signals::{self, SignalWatch};
use super::super::starting::{only_server, report_start_failure};
use super::runtime;

/// What `_keeper` was told.
pub(in crate::cli) struct Keeping<'a> {
    pub(in crate::cli) server: &'a str,
    pub(in crate::cli) socket: &'a Path,
    pub(in crate::cli) idle: Duration,
}

pub(in crate::cli) fn keep(
    config: Config,
    keeping: &Keeping<'_>,
    options: HubOptions,
    signals: &SignalWatch,
) -> u8 {
    let name = keeping.server;
    let config = match only_server(&config, name) {
        Ok(config) => config,
        Err(code) => return code,
    };
    let Some(server) = config.servers.first() else { return EXIT_SERVER };
    let target = super::target_of(server);
    let downstream = Downstream::new();
    let options = options.with_host(downstream.host()).with_name_style(NameStyle::Prefixed);
    let hub = signals.start_hub_now(config, options);
    hub.wait_started();
    if let Some(status) = hub.status().into_iter().find(|status| status.state != ServerState::Ready)
    {
        return report_start_failure(name, &status, false);
    }
    let socket = keeping.socket;
    let info = socket.with_extension("json");
    let listener = match listen(socket) {
        Ok(Some(listener)) => listener,
        // Another keeper of the same server answers: this one is not needed.
        Ok(None) => return EXIT_OK,
        Err(why) => {
            errln!("{why}");
            return EXIT_SERVER;
        }
    };
    let ours = Ours::new(socket, &info);
    {
        let ours = ours.clone();
        signals::at_exit(move || ours.remove());
    }
    let record = json!({
        "name": name,
        "pid": std::process::id(),
        "started": tether::for_cli::rfc3339(SystemTime::now()),
        "idleSeconds": keeping.idle.as_secs(),
        "server": target,
        "folder": std::env::current_dir().map(|dir| dir.display().to_string()).unwrap_or_default(),
    });
    if let Err(err) = write_record(&info, &record) {
        errln!("{}: {err}", info.display());
    }
    log::info!("keeping {name:?} at {}", socket.display());
    let options = ServeOptions::default().with_passthrough(name).with_idle_exit(keeping.idle);
    let served = downstream.serve_unix(&hub, listener, &options);
    ours.remove();
    match served {
        Ok(()) => EXIT_OK,
        Err(err) => report(&err),
    }
}

/// Listens at `socket` (0600): `None` when a keeper answers there already;
/// what is left of one that died is removed first.
fn listen(socket: &Path) -> Result<Option<UnixListener>, String> {
    if std::fs::symlink_metadata(socket).is_ok() {
        if UnixStream::connect(socket).is_ok() {
            return Ok(None);
        }
        std::fs::remove_file(socket).map_err(|err| format!("{}: {err}", socket.display()))?;
    }
    let listener =
        UnixListener::bind(socket).map_err(|err| format!("{}: {err}", socket.display()))?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))
        .map_err(|err| format!("{}: {err}", socket.display()))?;
    Ok(Some(listener))
}

fn write_record(path: &Path, record: &serde_json::Value) -> std::io::Result<()> {
    use std::io::Write;
    let mut file = runtime::create_private(path)?;
    file.write_all(record.to_string().as_bytes())
}

/// The socket this keeper made, and its record: removed at the end only
/// while they are still this keeper's (a new keeper may have taken the
/// path since).
#[derive(Clone)]
struct Ours {
    socket: PathBuf,
    inode: Option<u64>,
    info: PathBuf,
}

impl Ours {
    fn new(socket: &Path, info: &Path) -> Ours {
        let inode = std::fs::symlink_metadata(socket).ok().map(|meta| meta.ino());
        Ours { socket: socket.to_owned(), inode, info: info.to_owned() }
    }

    fn remove(&self) {
        let now = std::fs::symlink_metadata(&self.socket).ok().map(|meta| meta.ino());
        if now.is_some() && now == self.inode {
            let _ = std::fs::remove_file(&self.socket);
            let _ = std::fs::remove_file(&self.info);
            // A command starting a keeper anew meanwhile holds its own open
            // lock file; a second keeper would find this one's socket.
            let _ = std::fs::remove_file(self.socket.with_extension("log"));
            let _ = std::fs::remove_file(self.socket.with_extension("lock"));
        }
    }
}
