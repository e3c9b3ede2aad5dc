//! Rewriting a configuration file without ever losing or half-writing it.
//!
//! Every change is read–modify–write under an exclusive lock on a lock file
//! beside the file (so two `tether add` at once both land), works on the
//! parsed JSON with its key order kept (unrelated keys and entries stay as
//! they were), and replaces the file by renaming a fully written temporary
//! file over it. A file that does not parse is never rewritten.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::syntax_error;

/// How long an edit waits for another one to finish.
const LOCK_WAIT: Duration = Duration::from_secs(10);

/// Applies `change` to the JSON document at `path` (an empty object when the
/// file does not exist) and writes the result back atomically. `private`
/// makes the file mode 0600 (the user's files, which may hold secrets).
///
/// # Errors
/// The file cannot be locked, read, parsed or written, or `change` refused.
pub(crate) fn edit<T>(
    path: &Path,
    private: bool,
    change: impl FnOnce(&mut Map<String, Value>) -> Result<T, String>,
) -> Result<T, String> {
    // A file kept as a link (dotfiles) is edited where it really is, so the
    // rename replaces the file, not the link.
    let resolved = match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
        }
        _ => path.to_owned(),
    };
    let path = resolved.as_path();
    let shown = path.display().to_string();
    let folder =
        path.parent().filter(|folder| !folder.as_os_str().is_empty()).unwrap_or(Path::new("."));
    create_private_dir(folder)
        .map_err(|err| format!("cannot create {}: {err}", folder.display()))?;
    let _lock = lock(&lock_path(path))?;
    remove_stale_temporaries(path);
    let mut document =
        match crate::bounded_read::read_text(path, crate::bounded_read::CONFIG_FILE_LIMIT) {
            Ok(text) if text.trim().is_empty() => Map::new(),
            Ok(text) => match serde_json::from_slice::<Value>(text.as_bytes()) {
                Ok(Value::Object(document)) => document,
                Ok(_) => {
                    return Err(format!(
                        "{shown}: the file must hold a JSON object; fix it by hand first"
                    ))
                }
                Err(err) => {
                    return Err(format!("{}; fix it by hand first", syntax_error(&shown, &err)))
                }
            },
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Map::new(),
            Err(err) => return Err(format!("cannot read {shown}: {err}")),
        };
    let result = change(&mut document)?;
    let mut text =
        serde_json::to_string_pretty(&Value::Object(document)).expect("a JSON value serializes");
    text.push('\n');
    write_atomically(path, text.as_bytes(), private)?;
    Ok(result)
}

/// The `mcpServers` object of a document, created when missing.
///
/// # Errors
/// `mcpServers` exists but is not an object.
pub(crate) fn servers_mut<'a>(
    document: &'a mut Map<String, Value>,
    shown: &str,
) -> Result<&'a mut Map<String, Value>, String> {
    match document.entry("mcpServers").or_insert_with(|| Value::Object(Map::new())) {
        Value::Object(servers) => Ok(servers),
        _ => Err(format!("{shown}: \"mcpServers\" is not an object; fix it by hand first")),
    }
}

/// Creates `folder` (and its parents) as tether's own: mode 0700, since it
/// may hold secrets (tokens, the log). An existing folder keeps its mode.
pub(crate) fn create_private_dir(folder: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new().recursive(true).mode(0o700).create(folder)
}

/// Removes the temporaries of `path` that a writer killed mid-write left
/// (`.NAME.tmp-PID-N` of a process that no longer runs). Called under the
/// file's lock, so no live writer's temporary is touched.
fn remove_stale_temporaries(path: &Path) {
    let Some(folder) = path.parent().filter(|folder| !folder.as_os_str().is_empty()) else {
        return;
    };
    let name = path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let prefix = format!(".{}.tmp-", name.trim_start_matches('.'));
    let Ok(entries) = fs::read_dir(folder) else { return };
    for entry in entries.flatten() {
        let file_name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = file_name.strip_prefix(&prefix) else { continue };
        let pid = rest.split('-').next().and_then(|pid| pid.parse::<i32>().ok());
        // SAFETY: kill with signal 0 only asks whether the process exists.
        let alive = pid.is_some_and(|pid| {
            pid == std::process::id() as i32
                || unsafe { libc::kill(pid, 0) } == 0
                || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
        });
        if pid.is_some() && !alive {
            let _ = fs::remove_file(entry.path());
        }
    }
}

fn lock_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map_or_else(|| "config".into(), |name| name.to_string_lossy().into_owned());
    path.with_file_name(format!(".{}.lock", name.trim_start_matches('.')))
}

/// Holds an exclusive `flock` until dropped (closing the file releases it).
pub struct Lock {
    _file: File,
}

fn lock(path: &Path) -> Result<Lock, String> {
    lock_within(path, LOCK_WAIT)
}

/// Takes the exclusive lock on the lock file at `path` (created 0600 when
/// missing), waiting at most `wait` for another process to release it.
///
/// # Errors
/// The file cannot be opened (a link there is refused), or stays locked.
pub fn lock_within(path: &Path, wait: Duration) -> Result<Lock, String> {
    // A link planted where the lock file goes is refused (`ELOOP`), never
    // followed to create or truncate a file where it points.
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|err| format!("cannot open the lock file {}: {err}", path.display()))?;
    let deadline = Instant::now() + wait;
    loop {
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(Lock { _file: file });
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EWOULDBLOCK)
            && err.kind() != std::io::ErrorKind::Interrupted
        {
            return Err(format!("cannot lock {}: {err}", path.display()));
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "{} is locked by another tether for over {} s",
                path.display(),
                wait.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Writes a file only the user reads (tether's own state, such as the
/// servers' eras), whole or not at all, making its folder if need be.
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> Result<(), String> {
    if let Some(folder) = path.parent().filter(|folder| !folder.as_os_str().is_empty()) {
        create_private_dir(folder)
            .map_err(|err| format!("cannot make {}: {err}", folder.display()))?;
    }
    write_atomically(path, bytes, true)
}

/// Writes a temporary file beside `path`, syncs it, and renames it over `path`.
fn write_atomically(path: &Path, bytes: &[u8], private: bool) -> Result<(), String> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let shown = path.display();
    let name = path
        .file_name()
        .map_or_else(|| "config".into(), |name| name.to_string_lossy().into_owned());
    let temporary = path.with_file_name(format!(
        ".{}.tmp-{}-{}",
        name.trim_start_matches('.'),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    // The user file is private; another keeps its mode, or gets the umask's.
    let mode = if private {
        Some(0o600)
    } else {
        fs::metadata(path).ok().map(|meta| meta.permissions().mode() & 0o777)
    };
    let written = (|| -> std::io::Result<()> {
        // `create_new` is `O_EXCL`: a link planted at the temporary's name
        // fails the open; `O_NOFOLLOW` says so once more.
        let mut file = OpenOptions::new()
            .create_new(true)
            .write(true)
            .mode(mode.unwrap_or(0o666))
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&temporary)?;
        file.write_all(bytes)?;
        if let Some(mode) = mode {
            file.set_permissions(fs::Permissions::from_mode(mode))?;
        }
        file.sync_all()?;
        fs::rename(&temporary, path)?;
        if let Some(folder) = path.parent().filter(|folder| !folder.as_os_str().is_empty()) {
            // Make the rename itself durable.
            File::open(folder)?.sync_all()?;
        }
        Ok(())
    })();
    written.map_err(|err| {
        let _ = fs::remove_file(&temporary);
        format!("cannot write {shown}: {err}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("tether-file-test-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn creates_folders_keeps_order_and_unrelated_keys() {
        let dir = scratch("order");
        let path = dir.join("deeper").join("mcp.json");
        edit(&path, true, |doc| {
            doc.insert("zeta".into(), json!(1));
            servers_mut(doc, "x")?.insert("b".into(), json!({"command": "b"}));
            Ok(())
        })
        .unwrap();
        edit(&path, true, |doc| {
            servers_mut(doc, "x")?.insert("a".into(), json!({"command": "a"}));
            Ok(())
        })
        .unwrap();
        let text = fs::read_to_string(&path).unwrap();
        assert!(text.find("zeta").unwrap() < text.find("mcpServers").unwrap());
        assert!(text.find("\"b\"").unwrap() < text.find("\"a\"").unwrap());
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_broken_file_is_never_rewritten() {
        let dir = scratch("broken");
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("mcp.json");
        fs::write(&path, "{\n  \"mcpServers\": {,\n}").unwrap();
        let err = edit(&path, true, |_| Ok(())).unwrap_err();
        assert!(err.contains("line 2 column"), "{err}");
        assert_eq!(fs::read_to_string(&path).unwrap(), "{\n  \"mcpServers\": {,\n}");
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_linked_file_is_edited_where_it_is() {
        let dir = scratch("linked");
        fs::create_dir_all(dir.join("dotfiles")).unwrap();
        fs::write(dir.join("dotfiles/mcp.json"), "{}").unwrap();
        std::os::unix::fs::symlink(dir.join("dotfiles/mcp.json"), dir.join("mcp.json")).unwrap();
        edit(&dir.join("mcp.json"), true, |doc| {
            doc.insert("k".into(), json!(1));
            Ok(())
        })
        .unwrap();
        assert!(fs::symlink_metadata(dir.join("mcp.json")).unwrap().file_type().is_symlink());
        assert!(fs::read_to_string(dir.join("dotfiles/mcp.json")).unwrap().contains("\"k\": 1"));
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_refused_change_writes_nothing() {
        let dir = scratch("refused");
        let path = dir.join("mcp.json");
        let err = edit(&path, true, |_| -> Result<(), String> { Err("no".into()) }).unwrap_err();
        assert_eq!(err, "no");
        assert!(!path.exists());
        fs::remove_dir_all(dir).unwrap();
    }
}
