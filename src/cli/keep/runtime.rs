//! The user's runtime folder for kept-alive sessions: `$XDG_RUNTIME_DIR/
//! tether` (the login session's own, private folder), else
//! `/tmp/tether-UID`. Either must be a real folder, the user's, open to
//! nobody else: a neighbour who could plant a socket there could answer
//! in place of a keeper. Sockets live there, so the path stays short
//! (a socket's path is at most 107 bytes).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The longest path a socket may have (`sun_path` less its last zero).
const SOCKET_PATH_MAX: usize = 107;

/// The folder, made if need be; why not, when it is not safe to use.
pub(super) fn folder() -> Result<PathBuf, String> {
    // SAFETY: no arguments; it cannot fail.
    let uid = unsafe { libc::geteuid() };
    // Room for `/tether/` and a socket's name (16 hex digits, `.sock`).
    let fits = |base: &Path| base.as_os_str().len() + "/tether/".len() + 21 <= SOCKET_PATH_MAX;
    let folder = match std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        Some(base) if base.is_absolute() && fits(&base) && private(&base, uid).is_ok() => {
            base.join("tether")
        }
        _ => PathBuf::from(format!("/tmp/tether-{uid}")),
    };
    match std::fs::DirBuilder::new().mode(0o700).create(&folder) {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
        Err(err) => return Err(format!("{}: {err}", folder.display())),
    }
    private(&folder, uid).map_err(|why| format!("{}: {why}", folder.display()))?;
    Ok(folder)
}

/// Ok when `folder` is a folder (not a link), owned by `uid`, and open to
/// nobody else.
fn private(folder: &Path, uid: u32) -> Result<(), String> {
    let meta = std::fs::symlink_metadata(folder).map_err(|err| err.to_string())?;
    if !meta.is_dir() {
        return Err("not a folder (a link, or a file)".into());
    }
    if meta.uid() != uid {
        return Err(format!("owned by user {}, not by you", meta.uid()));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(format!(
            "open to others (mode {:o}); tether wants it 700",
            meta.mode() & 0o777
        ));
    }
    Ok(())
}

/// Holds `path`'s exclusive lock (made 0600, never through a link) until
/// dropped, waiting at most `wait` for a command starting the same keeper.
pub(super) fn lock(
    path: &Path,
    wait: std::time::Duration,
) -> Result<tether::for_cli::Lock, String> {
    tether::for_cli::lock_within(path, wait)
}

/// `path` made anew, 0600, never through a link.
pub(super) fn create_private(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}
