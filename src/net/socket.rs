//! The TCP link of the connector chain: ureq's own, minus the system calls
//! a kept-alive connection does not need.
//!
//! Every call over a pooled connection used to cost ureq's TCP link five
//! system calls besides the send and the read: a socket timeout set before
//! each write and each read (the time left changes with every request, so
//! its cache never hits), and a liveness probe when the connection goes
//! back to the pool and again when it comes out (non-blocking on, a
//! one-byte read, non-blocking off). Here the probe is one `recv` with
//! `MSG_PEEK | MSG_DONTWAIT`, and a socket timeout is set only when the one
//! in force would sleep past the time left, or is far shorter than the
//! time left; a read that times out early looks at the clock and reads
//! again. So a deadline is never overslept, and a quiet long read wakes at
//! most once a second (ten times a second under a caller's watch).
//!
//! ureq also writes a request's head and its body with two sends, and on a
//! loopback each send costs a whole trip through the TCP stack (both ends'
//! halves of it run in the sender's system call). A head that announces a
//! body is held back and leaves together with the body's first bytes, in
//! one `sendmsg`; anything else is sent at once, and nothing held back is
//! ever left unsent when the transport reads.
//!
//! A caller may POST its own request on its own thread, with no worker in
//! between (`HttpTransport::send`). It then waits inside this link's reads,
//! so the transport holds that I/O to the [`Caller`] first
//! ([`Caller::held`]): every connect, read and write asks it how long the
//! caller may still wait and ends there, so no caller is held past its own
//! deadline.

use std::cell::Cell;
use std::fmt;
use std::io::{self, IoSlice, Read};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, Either, LazyBuffers, NextTimeout, ShutdownHandle,
    Transport,
};

/// The longest socket timeout set: a read with more time left than this
/// wakes once per `QUANTUM` to look at the clock.
const QUANTUM: Duration = Duration::from_secs(1);
/// The same under a caller's watch, which is asked at each wake (progress
/// that came another way reaches the callback this soon).
const WATCHED_QUANTUM: Duration = Duration::from_millis(100);

/// A caller that posts its own request on its own thread and waits in
/// this link's reads. Its watch says how long it may still wait (its
/// timeout, moved on by progress, which the watch hands to the caller's
/// callback as it comes). The client makes it and hands it down the HTTP
/// transport's calls as a parameter; only this file puts it where ureq's
/// I/O can see it ([`Caller::held`]), since ureq's connector API has no
/// way to pass it.
pub(crate) struct Caller<'a> {
    watch: &'a dyn Fn() -> Instant,
    /// Set when I/O held to this caller stopped at its deadline.
    expired: Cell<bool>,
}

impl<'a> Caller<'a> {
    pub(crate) fn new(watch: &'a dyn Fn() -> Instant) -> Caller<'a> {
        Caller { watch, expired: Cell::new(false) }
    }

    /// The caller's deadline now. The watch runs with no caller held: what
    /// it calls (the host's progress callback) keeps its own limits, and a
    /// call it makes may hold its own caller.
    pub(crate) fn deadline(&self) -> Instant {
        let _restore = RestoreHeld(HELD.take());
        (self.watch)()
    }

    /// True once the caller's deadline has passed (its I/O stopped there,
    /// or anything else took that long).
    pub(crate) fn gave_up(&self) -> bool {
        self.expired.get() || self.deadline() <= Instant::now()
    }

    /// `duration`, or less when the caller's deadline comes sooner (then
    /// the caller gave up), for a pause on its thread.
    pub(crate) fn pause_within(&self, duration: Duration) -> Duration {
        let left = self.deadline().saturating_duration_since(Instant::now());
        if left < duration {
            self.expired.set(true);
        }
        duration.min(left)
    }

    /// Runs `io` (ureq's calls on this thread) held to this caller: every
    /// connect, write and read ends at its deadline. Holds nest.
    pub(crate) fn held<T>(&self, io: impl FnOnce() -> T) -> T {
        // SAFETY: only the lifetime is erased; the pointer is taken out of
        // the slot (by `RestoreHeld`, also on unwind) before `self` goes.
        let erased: *const Caller<'static> =
            unsafe { std::mem::transmute(self as *const Caller<'_>) };
        let _restore = RestoreHeld(HELD.replace(Some(erased)));
        io()
    }
}

/// Puts back the caller held before, when dropped (also on unwind).
struct RestoreHeld(Option<*const Caller<'static>>);

impl Drop for RestoreHeld {
    fn drop(&mut self) {
        HELD.set(self.0);
    }
}

thread_local! {
    /// The caller whose I/O runs on this thread now ([`Caller::held`]).
    static HELD: Cell<Option<*const Caller<'static>>> = const { Cell::new(None) };
}

/// The deadline of the caller held on this thread, if one is: for the
/// links of ureq's chain (this one, and the resolver), which ureq calls
/// with no way to pass it.
pub(crate) fn held_deadline() -> Option<Instant> {
    // SAFETY: see `Caller::held`: a pointer in the slot is alive.
    HELD.get().map(|caller| unsafe { (*caller).deadline() })
}

/// Marks that the held caller's I/O stopped at its deadline.
fn held_expired() {
    if let Some(caller) = HELD.get() {
        // SAFETY: see `Caller::held`.
        unsafe { (*caller).expired.set(true) }
    }
}

/// Opens plain TCP connections (the proxy's or the server's).
#[derive(Debug, Default)]
pub(crate) struct TcpLink;

impl<In: Transport> Connector<In> for TcpLink {
    type Out = Either<In, TcpTransport>;

    fn connect(
        &self,
        details: &ConnectionDetails,
        chained: Option<In>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        if let Some(chained) = chained {
            // A proxy's tunnel is already the connection.
            return Ok(Some(Either::A(chained)));
        }
        // (A limit too far to add is no limit.)
        let own = details.timeout.not_zero().and_then(|limit| Instant::now().checked_add(*limit));
        let caller = held_deadline();
        let deadline = match (own, caller) {
            (Some(own), Some(caller)) => Some(own.min(caller)),
            (own, caller) => own.or(caller),
        };
        let mut failure = None;
        let mut stream = None;
        for addr in &*details.addrs {
            let attempt = match deadline {
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    TcpStream::connect_timeout(addr, left)
                }
                None => TcpStream::connect(addr),
            };
            match attempt {
                Ok(connected) => {
                    stream = Some(connected);
                    break;
                }
                Err(err) => failure = Some(err),
            }
        }
        let Some(stream) = stream else {
            if caller.is_some_and(|caller| caller <= Instant::now()) {
                held_expired();
            }
            return Err(match failure {
                Some(err) if err.kind() != io::ErrorKind::TimedOut => ureq::Error::Io(err),
                _ => ureq::Error::Timeout(ureq::Timeout::Connect),
            });
        };
        if details.config.no_delay() {
            stream.set_nodelay(true)?;
        }
        let stream = Arc::new(stream);
        (details.register_shutdown)(Arc::downgrade(&stream) as Weak<dyn ShutdownHandle>)?;
        let buffers = LazyBuffers::new(
            details.config.input_buffer_size(),
            details.config.output_buffer_size(),
        );
        Ok(Some(Either::B(TcpTransport {
            stream,
            buffers,
            read_timeout: None,
            write_timeout: None,
            at_head: true,
            head: Vec::new(),
        })))
    }
}

/// One TCP connection, with the socket timeouts in force.
pub(crate) struct TcpTransport {
    /// Shared (weakly) with the agent, whose shutdown wakes a blocked read.
    stream: Arc<TcpStream>,
    buffers: LazyBuffers,
    read_timeout: Option<Duration>,
    write_timeout: Option<Duration>,
    /// The next bytes written start a request (nothing was written since
    /// the last read).
    at_head: bool,
    /// A request head held back until its body comes.
    head: Vec<u8>,
}

impl fmt::Debug for TcpTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TcpTransport")
    }
}

/// Whether an I/O error means the socket timeout ran out.
fn timed_out(err: &io::Error) -> bool {
    matches!(err.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
}

/// One `sendmsg` of `slices` (`writev` has no `MSG_NOSIGNAL`: a server that
/// hung up must be an error, not a SIGPIPE for the host).
fn send_all_of(stream: &TcpStream, slices: &[IoSlice<'_>]) -> io::Result<usize> {
    // SAFETY: an all-zero msghdr is valid; IoSlice is ABI-compatible with
    // iovec, and the slices outlive the call.
    let sent = unsafe {
        let mut message: libc::msghdr = std::mem::zeroed();
        message.msg_iov = slices.as_ptr().cast_mut().cast();
        message.msg_iovlen = slices.len() as _;
        libc::sendmsg(stream.as_raw_fd(), &raw const message, libc::MSG_NOSIGNAL)
    };
    usize::try_from(sent).map_err(|_| io::Error::last_os_error())
}

/// Whether `output` is a whole request head that announces a body
/// (`Content-Length` other than 0, or chunked).
fn announces_body(output: &[u8]) -> bool {
    let Some(head) = output.strip_suffix(b"\r\n\r\n") else { return false };
    head.split(|&byte| byte == b'\n').skip(1).any(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = line.iter().position(|&byte| byte == b':') else { return false };
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        (name.eq_ignore_ascii_case(b"content-length") && value != b"0")
            || (name.eq_ignore_ascii_case(b"transfer-encoding") && !value.is_empty())
    })
}

/// Runs `io` until it succeeds, fails, or `timeout` has passed, setting the
/// socket timeout (through `set`) only when the one in force (`current`)
/// could sleep past the time left, or would wake far too often.
fn bounded(
    timeout: NextTimeout,
    current: &mut Option<Duration>,
    set: &dyn Fn(Option<Duration>) -> io::Result<()>,
    io: &mut dyn FnMut() -> io::Result<usize>,
) -> Result<usize, ureq::Error> {
    if timeout.after.is_zero() {
        return Err(ureq::Error::Timeout(timeout.reason));
    }
    let deadline = timeout.not_zero().and_then(|after| Instant::now().checked_add(*after));
    loop {
        // Asked again after each wait: progress moves the caller's on.
        let caller = held_deadline();
        let now = Instant::now();
        let left = match (deadline, caller) {
            (Some(own), Some(caller)) => Some(own.min(caller)),
            (own, caller) => own.or(caller),
        }
        .map(|at| at.saturating_duration_since(now));
        if left.is_some_and(|left| left.is_zero()) {
            if caller.is_some_and(|caller| caller <= now) {
                held_expired();
            }
            return Err(ureq::Error::Timeout(timeout.reason));
        }
        let quantum = if caller.is_some() { WATCHED_QUANTUM } else { QUANTUM };
        let wanted = left.map(|left| left.min(quantum));
        let keep = match (*current, wanted) {
            (Some(now), Some(wanted)) => now <= wanted && now * 4 >= wanted,
            (now, wanted) => now == wanted,
        };
        if !keep {
            set(wanted)?;
            *current = wanted;
        }
        match io() {
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) if timed_out(&err) && left.is_some() => {}
            Err(err) => return Err(err.into()),
            Ok(done) => return Ok(done),
        }
    }
}

impl Transport for TcpTransport {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        let output = &self.buffers.output()[..amount];
        if std::mem::take(&mut self.at_head) && announces_body(output) {
            self.head.clear();
            self.head.extend_from_slice(output);
            return Ok(());
        }
        let head = std::mem::take(&mut self.head);
        let stream = Arc::clone(&self.stream);
        let mut slices = [IoSlice::new(&head), IoSlice::new(output)];
        let mut left: &mut [IoSlice<'_>] = &mut slices;
        IoSlice::advance_slices(&mut left, 0);
        while !left.is_empty() {
            let written = bounded(
                timeout.for_write(),
                &mut self.write_timeout,
                &|limit| stream.set_write_timeout(limit),
                &mut || send_all_of(&stream, left),
            )?;
            if written == 0 {
                return Err(io::Error::from(io::ErrorKind::WriteZero).into());
            }
            IoSlice::advance_slices(&mut left, written);
        }
        self.head = head;
        self.head.clear();
        Ok(())
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        if !self.head.is_empty() {
            // A head whose body never came: it goes now, alone.
            self.at_head = false;
            self.transmit_output(0, timeout)?;
        }
        self.at_head = true;
        let stream = Arc::clone(&self.stream);
        let input = self.buffers.input_append_buf();
        let amount = bounded(
            timeout.for_read(),
            &mut self.read_timeout,
            &|limit| stream.set_read_timeout(limit),
            &mut || (&*stream).read(input),
        )?;
        self.buffers.input_appended(amount);
        Ok(amount > 0)
    }

    /// Open when a peek would block: the server has neither closed the
    /// connection nor sent anything nobody asked for.
    fn is_open(&mut self) -> bool {
        let mut byte = 0u8;
        // SAFETY: a one-byte buffer we own, on a socket this transport owns.
        let peeked = unsafe {
            libc::recv(
                self.stream.as_raw_fd(),
                (&raw mut byte).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        peeked < 0 && io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;
    use std::thread;

    fn agent(timeout: Duration) -> ureq::Agent {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(timeout))
            .build();
        ureq::Agent::with_parts(
            config,
            ().chain(TcpLink),
            ureq::unversioned::resolver::DefaultResolver::default(),
        )
    }

    /// Reads one request (head and `Content-Length` body) from `reader`;
    /// None at the end of the stream.
    fn read_request(reader: &mut impl BufRead) -> Option<(String, Vec<u8>)> {
        let mut head = String::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).ok()? == 0 {
                return None;
            }
            if line == "\r\n" {
                break;
            }
            head.push_str(&line);
        }
        let length = head
            .lines()
            .find_map(|line| {
                line.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().parse::<usize>().unwrap())
            })
            .unwrap_or(0);
        let mut body = vec![0; length];
        reader.read_exact(&mut body).ok()?;
        Some((head, body))
    }

    #[test]
    fn a_head_announces_a_body_only_with_a_length_or_chunks() {
        assert!(announces_body(b"POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\n"));
        assert!(announces_body(b"POST / HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n"));
        assert!(!announces_body(b"POST / HTTP/1.1\r\ncontent-length: 0\r\n\r\n"));
        assert!(!announces_body(b"GET / HTTP/1.1\r\nhost: a\r\n\r\n"));
        assert!(!announces_body(b"GET / HTTP/1.1\r\ncontent-length: 5\r\n"), "not a whole head");
    }

    #[test]
    fn requests_with_and_without_bodies_go_out_whole_on_one_kept_connection() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let server = thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut writer = stream.try_clone().unwrap();
            let mut reader = BufReader::new(stream);
            let mut seen = Vec::new();
            while let Some((head, body)) = read_request(&mut reader) {
                let method = head.split(' ').next().unwrap().to_owned();
                seen.push((method, String::from_utf8(body.clone()).unwrap()));
                let answer = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len());
                writer.write_all(answer.as_bytes()).unwrap();
                writer.write_all(&body).unwrap();
            }
            seen
        });
        let agent = agent(Duration::from_secs(5));
        for text in ["one", "", "three"] {
            let mut response = agent.post(&url).send(text).unwrap();
            assert_eq!(response.body_mut().read_to_string().unwrap(), text);
        }
        let mut response = agent.get(&url).call().unwrap();
        assert_eq!(response.body_mut().read_to_string().unwrap(), "");
        drop(agent);
        let seen = server.join().unwrap();
        let expected = [("POST", "one"), ("POST", ""), ("POST", "three"), ("GET", "")];
        assert_eq!(
            seen,
            expected.map(|(m, b)| (m.to_owned(), b.to_owned())),
            "one connection, in order"
        );
    }

    #[test]
    fn a_silent_server_times_out_when_asked_not_a_quantum_later() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let server = thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream);
            // Reads the request, answers nothing, and waits for the client to go.
            let _ = read_request(&mut reader);
            let _ = read_request(&mut reader);
        });
        let started = Instant::now();
        let failed = agent(Duration::from_millis(1300)).post(&url).send("hello").unwrap_err();
        let took = started.elapsed();
        assert!(matches!(failed, ureq::Error::Timeout(_)), "{failed:?}");
        assert!(
            took >= Duration::from_millis(1300) && took < Duration::from_millis(1900),
            "{took:?}"
        );
        server.join().unwrap();
    }

    #[test]
    fn a_connection_the_server_closed_is_not_reused() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let server = thread::spawn(move || {
            // Each connection gets one answer, then is closed.
            for _ in 0..2 {
                let (stream, _) = listener.accept().unwrap();
                let mut writer = stream.try_clone().unwrap();
                let mut reader = BufReader::new(stream);
                read_request(&mut reader).unwrap();
                writer.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").unwrap();
            }
        });
        let agent = agent(Duration::from_secs(5));
        for _ in 0..2 {
            let mut response = agent.post(&url).send("x").unwrap();
            assert_eq!(response.body_mut().read_to_string().unwrap(), "ok");
            // Lets the server's close arrive before the next request.
            thread::sleep(Duration::from_millis(100));
        }
        server.join().unwrap();
    }
}
