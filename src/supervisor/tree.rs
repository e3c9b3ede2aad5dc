//! The supervisor's view of the tree it ends: every live process whose
//! chain of parents leads to the supervisor, or that is in its process
//! group.
//!
//! A process that left with `setsid` is still its parent's child, and when
//! its parent dies it is re-parented to the supervisor (a subreaper). So
//! the tree is found by following parents, from a snapshot of the whole
//! `/proc` taken at once: finding only the supervisor's children and group
//! (one level per pass) let a chain of 120 `setsid` processes outlive the
//! sweep. The snapshot lives in an anonymous mapping made here, since the
//! supervisor may not use the allocator (see `sys.rs`); it is unmapped on
//! drop, which matters because on x86_64 the mapping is in tether's own
//! address space.

use super::sys;

/// One process of the snapshot.
#[derive(Clone, Copy)]
struct Process {
    pid: libc::pid_t,
    parent: libc::pid_t,
    group: libc::pid_t,
    /// Not a zombie: it can still be signalled and can still fork.
    alive: bool,
    /// In the tree.
    member: bool,
}

/// The most processes a snapshot holds; a system with more is read in part
/// (the rest is found in a later pass, once some of these are gone).
const CAPACITY: usize = 65_536;
const MAPPED: usize = CAPACITY * std::mem::size_of::<Process>();

/// A snapshot of `/proc`, and the tree marked in it.
pub(super) struct Tree {
    processes: *mut Process,
    len: usize,
    /// Pids in ascending order (how `/proc` lists them): parents are found
    /// by binary search.
    sorted: bool,
}

impl Tree {
    /// An empty snapshot; `None` if the mapping cannot be made.
    pub(super) unsafe fn new() -> Option<Tree> {
        let address = sys::map_anonymous(MAPPED);
        if address < 0 {
            return None;
        }
        Some(Tree { processes: address as *mut Process, len: 0, sorted: true })
    }

    fn all(&self) -> &[Process] {
        // SAFETY: the mapping holds CAPACITY entries, the first `len` written.
        unsafe { std::slice::from_raw_parts(self.processes, self.len) }
    }

    fn all_mut(&mut self) -> &mut [Process] {
        // SAFETY: as in `all`, and `&mut self` is the only access.
        unsafe { std::slice::from_raw_parts_mut(self.processes, self.len) }
    }

    /// Takes a new snapshot of `/proc` and marks the tree of `me` in it;
    /// false when `/proc` cannot be read.
    pub(super) unsafe fn read(&mut self, me: libc::pid_t) -> bool {
        self.len = 0;
        self.sorted = true;
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
        let proc_dir = sys::open(c"/proc".as_ptr(), flags);
        if proc_dir < 0 {
            return false;
        }
        let proc_dir = proc_dir as libc::c_int;
        let mut entries = [0u8; 4096];
        'listing: loop {
            let read = sys::getdents64(proc_dir, entries.as_mut_ptr(), entries.len());
            if read <= 0 {
                break;
            }
            let filled = entries.get(..read as usize).unwrap_or(&[]);
            let mut at = 0usize;
            // Indexing by `get`: no bounds check that could panic, whatever the bytes.
            while let Some(&[low, high]) = filled.get(at + 16..at + 18) {
                // struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name.
                let record = u16::from_ne_bytes([low, high]) as usize;
                let Some(name) = filled.get(at + 19..at + record) else { break };
                let name = name.split(|&byte| byte == 0).next().unwrap_or(name);
                at += record;
                let Some(pid) = parse_pid(name) else { continue };
                if pid == me {
                    continue;
                }
                let Some((state, parent, group)) = stat_of(name) else { continue };
                if self.len == CAPACITY {
                    break 'listing;
                }
                if self.len > 0 && self.all()[self.len - 1].pid >= pid {
                    self.sorted = false;
                }
                let alive = state != b'Z' && state != b'X';
                // SAFETY: len < CAPACITY, inside the mapping.
                self.processes.add(self.len).write(Process {
                    pid,
                    parent,
                    group,
                    alive,
                    member: false,
                });
                self.len += 1;
            }
        }
        sys::close(proc_dir);
        self.mark(me);
        true
    }

    /// Marks the tree: the group of `me`, its children, their children, and
    /// so on, until a sweep adds nobody (one sweep, usually: a child's pid
    /// is mostly above its parent's).
    fn mark(&mut self, me: libc::pid_t) {
        loop {
            let mut added = false;
            for at in 0..self.len {
                let process = self.all()[at];
                if process.member {
                    continue;
                }
                let joins = process.group == me
                    || process.parent == me
                    || self.find(process.parent).is_some_and(|parent| parent.member);
                if joins {
                    self.all_mut()[at].member = true;
                    added = true;
                }
            }
            if !added {
                return;
            }
        }
    }

    fn find(&self, pid: libc::pid_t) -> Option<&Process> {
        let all = self.all();
        if self.sorted {
            all.binary_search_by_key(&pid, |process| process.pid).ok().map(|at| &all[at])
        } else {
            all.iter().find(|process| process.pid == pid)
        }
    }

    /// The live members of the tree.
    pub(super) fn members(&self) -> impl Iterator<Item = libc::pid_t> + '_ {
        self.all().iter().filter(|process| process.member && process.alive).map(|p| p.pid)
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        // SAFETY: the mapping this value made, unmapped once.
        unsafe {
            sys::unmap(self.processes as usize, MAPPED);
        }
    }
}

fn parse_pid(name: &[u8]) -> Option<libc::pid_t> {
    if name.is_empty() || name.len() > 10 || !name.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut pid: i64 = 0;
    for &digit in name {
        pid = pid * 10 + i64::from(digit - b'0');
    }
    libc::pid_t::try_from(pid).ok()
}

/// State, parent and process group of `/proc/<pid>/stat`.
unsafe fn stat_of(pid: &[u8]) -> Option<(u8, libc::pid_t, libc::pid_t)> {
    // "/proc/" + pid + "/stat\0" in a stack buffer.
    let mut path = [0u8; 32];
    let mut len = 0;
    for part in [b"/proc/".as_slice(), pid, b"/stat\0".as_slice()] {
        path.get_mut(len..len + part.len())?.copy_from_slice(part);
        len += part.len();
    }
    let fd = sys::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
    if fd < 0 {
        return None;
    }
    let fd = fd as libc::c_int;
    let mut text = [0u8; 1024];
    let read = sys::read(fd, text.as_mut_ptr(), text.len());
    sys::close(fd);
    if read <= 0 {
        return None;
    }
    let text = &text[..read as usize];
    // "pid (comm) state ppid pgrp …": comm may hold anything, up to the last ')'.
    let after = text.iter().rposition(|&byte| byte == b')')? + 1;
    let mut fields = text[after..].split(|&byte| byte == b' ').filter(|field| !field.is_empty());
    let state = *fields.next()?.first()?;
    let parent = parse_pid(fields.next()?)?;
    let group = parse_pid(fields.next()?)?;
    Some((state, parent, group))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_are_read_past_odd_names() {
        let me = std::process::id().to_string();
        // SAFETY: reads this process's own stat file.
        let (state, parent, group) = unsafe { stat_of(me.as_bytes()) }.unwrap();
        assert!(matches!(state, b'R' | b'S'), "{}", state as char);
        // SAFETY: getppid and getpgrp have no preconditions.
        unsafe {
            assert_eq!(parent, libc::getppid());
            assert_eq!(group, libc::getpgrp());
        }
        assert_eq!(parse_pid(b"1234"), Some(1234));
        assert_eq!(parse_pid(b"self"), None);
        assert_eq!(parse_pid(b""), None);
    }

    #[test]
    fn the_tree_follows_parents_down_every_level() {
        // A shell in a session of its own that starts another in a session
        // of its own; both sleep. Seen from the first shell, as the
        // supervisor sees its server: the second shell and both sleeps.
        let mut child = std::process::Command::new("setsid")
            .args(["sh", "-c", "setsid sh -c 'sleep 30; :' & sleep 30; :"])
            .spawn()
            .unwrap();
        let top = child.id() as libc::pid_t;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        // SAFETY: a snapshot of /proc into a mapping the test owns.
        let mut tree = unsafe { Tree::new() }.unwrap();
        let mut found = 0;
        while std::time::Instant::now() < deadline {
            // SAFETY: as above.
            assert!(unsafe { tree.read(top) });
            found = tree.members().count();
            if found >= 3 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        for pid in tree.members().chain([top]) {
            // SAFETY: kill of processes this test started.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        let _ = child.wait();
        assert_eq!(found, 3);
    }
}
