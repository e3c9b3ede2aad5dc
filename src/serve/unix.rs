//! The Unix-socket front (`Downstream::serve_unix`): many local clients,
//! each a connection speaking MCP's stdio framing (a JSON-RPC message a
//! line), each a link of its own. This is what keeps a server alive
//! between one-shot commands: `tether`'s kept-alive sessions listen here
//! and every command connects for its moment.
//!
//! The caller's thread accepts, looking every quarter second whether the
//! serving was stopped or has been idle long enough to end
//! (`ServeOptions::idle_exit`: no client connected for that long). Each
//! connection is read on its own `serve-unix-N` thread (at most 64 at
//! once), which hands requests to the core, and written by its own
//! `serve-unix-N-writer`, so a client that stops reading holds up only
//! itself. Only a client of the same user is served: the socket's file
//! mode is the first guard, the peer's credentials the second.

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::bounded;

use super::link::{Link, Links, Outlet};
use super::pipe_out::PipeOut;
use super::{read_all, Core, WAITING_FRAMES};
use crate::sync::lock;

/// Clients connected at once; past this a new one is closed at once.
const MAX_CONNECTIONS: usize = 64;
/// How often the listener looks whether the serving ended.
const ACCEPT_POLL: Duration = Duration::from_millis(250);

/// Accepts clients until `stopped`, or until no client has been connected
/// for `idle_exit`; then closes every connection still open.
pub(super) fn accept_all(
    core: &Core<'_>,
    links: &Links,
    listener: &UnixListener,
    stopped: &AtomicBool,
    idle_exit: Option<Duration>,
) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let open = AtomicUsize::new(0);
    // When the last client left (or the serving began).
    let idle_since = Mutex::new(Instant::now());
    // Every open connection, to shut at the end.
    let streams: Mutex<Vec<(usize, UnixStream)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        let mut number = 0usize;
        while !stopped.load(Ordering::SeqCst) {
            let stream = match listener.accept() {
                Ok((stream, _)) => stream,
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                    let idle = open.load(Ordering::SeqCst) == 0
                        && idle_exit.is_some_and(|idle| lock(&idle_since).elapsed() >= idle);
                    if idle {
                        log::info!("no client for the idle time: the serving ends");
                        break;
                    }
                    wait_readable(listener, ACCEPT_POLL);
                    continue;
                }
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => {
                    // Out of descriptors, say: the next one may work.
                    log::warn!("cannot accept a client: {err}");
                    std::thread::sleep(ACCEPT_POLL);
                    continue;
                }
            };
            if !same_user(&stream) {
                log::warn!("a client of another user was refused");
                continue;
            }
            if open.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
                log::warn!("{MAX_CONNECTIONS} clients are connected: one more was refused");
                continue;
            }
            if stream.set_nonblocking(false).is_err() {
                continue;
            }
            let Ok(kept) = stream.try_clone() else { continue };
            number += 1;
            let id = number;
            lock(&streams).push((id, kept));
            open.fetch_add(1, Ordering::SeqCst);
            let (open, idle_since, streams) = (&open, &idle_since, &streams);
            let spawned = std::thread::Builder::new()
                .name(format!("serve-unix-{id}"))
                .spawn_scoped(scope, move || {
                    serve_client(core, links, stream, id);
                    lock(streams).retain(|(open_id, _)| *open_id != id);
                    *lock(idle_since) = Instant::now();
                    open.fetch_sub(1, Ordering::SeqCst);
                });
            if let Err(err) = spawned {
                log::warn!("cannot serve a client: {err}");
                lock(streams).retain(|(open_id, _)| *open_id != id);
                open.fetch_sub(1, Ordering::SeqCst);
            }
        }
        // The readers see their ends; the scope joins them.
        for (_, stream) in lock(&streams).iter() {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
    });
    Ok(())
}

/// One client: its frames read here until it closes its side; its link's
/// frames written by a writer of its own.
fn serve_client(core: &Core<'_>, links: &Links, stream: UnixStream, id: usize) {
    let (frames, outgoing) = bounded::<Vec<u8>>(WAITING_FRAMES);
    let out = Arc::new(PipeOut::new(stream.as_raw_fd(), frames));
    let link = Arc::new(Link::new(Outlet::Pipe(Arc::clone(&out))));
    links.add(&link);
    std::thread::scope(|scope| {
        let writer = std::thread::Builder::new()
            .name(format!("serve-unix-{id}-writer"))
            .spawn_scoped(scope, || out.drain(&outgoing))
            .ok();
        if writer.is_some() {
            read_all(&mut &stream, core, &link);
        }
        // Gone: what it asked is given up, and the writer ends once its
        // queue is drained; one blocked on a full socket is woken by the
        // shutdown.
        links.remove(&link);
        link.close();
        core.rounds.cancel_from(&link);
        out.close();
        let _ = stream.shutdown(std::net::Shutdown::Both);
        if let Some(writer) = writer {
            let _ = writer.join();
        }
    });
}

/// Waits until a client knocks, or `within` passes.
fn wait_readable(listener: &UnixListener, within: Duration) {
    let _ = crate::poll::readable(listener.as_raw_fd(), within);
}

/// True when the process at the other end runs as this process's user.
fn same_user(stream: &UnixStream) -> bool {
    // SAFETY: no arguments; it cannot fail.
    unix_peer(stream).is_some_and(|(_, uid)| uid == unsafe { libc::geteuid() })
}

/// The process at the other end of a Unix socket, as the kernel says
/// (`SO_PEERCRED`): its pid and user (for a client, the listener's as it
/// was when it listened).
pub fn unix_peer(stream: &UnixStream) -> Option<(i32, u32)> {
    let mut credentials = libc::ucred { pid: 0, uid: u32::MAX, gid: u32::MAX };
    let mut size = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: a valid descriptor and a buffer of the size given.
    let got = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut credentials).cast(),
            &mut size,
        )
    };
    (got == 0).then_some((credentials.pid, credentials.uid))
}
