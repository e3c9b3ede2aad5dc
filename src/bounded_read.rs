//! Reading a file someone else may have planted: a project's `.mcp.json`
//! in a cloned repository, a file handed to `tether import`, the stores in
//! the configuration folder.
//!
//! `fs::read_to_string` trusts the path: a link to `/dev/zero` fills memory
//! until the machine gives out, a FIFO blocks for ever, a 200 MB file is
//! held (and parsed, and printed) whole. So every such read goes through
//! [`read_text`]: the file is opened without blocking (`O_NONBLOCK`, so a
//! FIFO's open returns at once), must be a regular file once open (the
//! check is on the descriptor, so nothing can be swapped in between), and
//! is read up to a limit, past which it is refused rather than cut.

use std::fs::OpenOptions;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The most a configuration file, the trust store or the token store may
/// hold: a hand-written file with a hundred servers is some 30 KB, and a
/// parsed `Value` costs up to thirty times the text.
pub(crate) const CONFIG_FILE_LIMIT: u64 = 1024 * 1024;

/// The most a file given to `tether import` may hold: other clients keep
/// more than their servers in theirs (Claude Code its history).
#[cfg(feature = "desktop")]
pub(crate) const IMPORT_FILE_LIMIT: u64 = 32 * 1024 * 1024;

/// The most a CA file or folder entry may hold: a full bundle is ~250 KB.
pub(crate) const CA_FILE_LIMIT: u64 = 8 * 1024 * 1024;

/// The text of the regular file at `path` (links followed), at most
/// `limit` bytes.
///
/// # Errors
/// The file cannot be opened (`NotFound` passes through as it is), is not
/// a regular file (`InvalidInput`), is larger than `limit` (`FileTooLarge`),
/// or is not UTF-8 (`InvalidData`).
pub(crate) fn read_text(path: &Path, limit: u64) -> io::Result<String> {
    let bytes = read_bytes(path, limit)?;
    String::from_utf8(bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "the file is not UTF-8 text"))
}

/// The bytes of the regular file at `path`, at most `limit` of them; the
/// errors of [`read_text`] but the last.
pub(crate) fn read_bytes(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file (a device, FIFO, socket or folder is never read)",
        ));
    }
    if meta.len() > limit {
        return Err(too_large(limit));
    }
    // The size may change while reading (a file still being written): the
    // limit holds whatever the metadata said.
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(limit));
    }
    Ok(bytes)
}

fn too_large(limit: u64) -> io::Error {
    let shown = if limit >= 1024 * 1024 {
        format!("{} MiB", limit / (1024 * 1024))
    } else {
        format!("{limit} bytes")
    };
    io::Error::new(io::ErrorKind::FileTooLarge, format!("larger than the {shown} tether reads"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn temp_dir(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("tether-bounded-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_regular_file_is_read_and_one_over_the_limit_is_refused() {
        let dir = temp_dir("sizes");
        let path = dir.join("a.json");
        std::fs::write(&path, "{\"k\": 1}").unwrap();
        assert_eq!(read_text(&path, 8).unwrap(), "{\"k\": 1}");
        let err = read_text(&path, 7).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::FileTooLarge);
        assert!(err.to_string().contains("7 bytes"), "{err}");
        let missing = read_text(&dir.join("missing"), 8).unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn devices_fifos_and_folders_are_refused_at_once() {
        let dir = temp_dir("kinds");
        let zero = dir.join("zero");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let fifo = dir.join("fifo");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mkfifo reads a NUL-terminated path that lives for the call.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        for path in [zero.as_path(), fifo.as_path(), dir.as_path(), Path::new("/dev/urandom")] {
            let started = Instant::now();
            let err = read_text(path, CONFIG_FILE_LIMIT).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{}: {err}", path.display());
            assert!(started.elapsed() < Duration::from_secs(1));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
