//! HTTP/1.1 as tether's HTTP front needs it, on a blocking socket: one
//! request read at a time (head and body within limits and one deadline),
//! a response with a length, or an event stream written as it comes.
//!
//! Hand-written because the only HTTP crate in the tree is a client
//! (`ureq`); what is here is the little a Streamable HTTP server needs,
//! and every read is bounded in size and time, so a slow or hostile
//! client holds one connection thread for at most the deadline.
//!
//! CORS: a connection thread answers one request at a time, and the
//! origin its response must name (a page allowed with `--allow-origin`) is
//! that request's, so it is kept per thread ([`answering_origin`]) and every
//! response head written on the thread carries it, whichever path answered.

use std::cell::RefCell;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

/// The longest request head.
const MAX_HEAD: usize = 16 * 1024;
/// The most header lines.
const MAX_HEADERS: usize = 100;
/// How long a write may wait for the client to read.
const WRITE_WAIT: Duration = Duration::from_secs(10);

thread_local! {
    /// The cross-origin page whose request this thread answers now.
    static ORIGIN: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// What a browser is told a page may send and read here.
const CORS_METHODS: &str = "GET, POST, DELETE, OPTIONS";
const CORS_HEADERS: &str = "Authorization, Content-Type, Accept, Mcp-Session-Id, \
     Mcp-Protocol-Version, Last-Event-ID, Mcp-Method, Mcp-Name";
/// How long a connection whose request was refused unread is read on, and
/// how much of it at most, before it closes ([`linger`]).
const LINGER: Duration = Duration::from_secs(2);
const LINGER_BYTES: usize = 64 * 1024 * 1024;
const CORS_EXPOSED: &str = "Mcp-Session-Id, Mcp-Protocol-Version, WWW-Authenticate";

/// The request this thread answers next came from `origin`, a page allowed
/// to read the answer (`None`: the same origin, or no browser).
pub(super) fn answering_origin(origin: Option<&str>) {
    ORIGIN.with(|kept| *kept.borrow_mut() = origin.map(str::to_owned));
}

/// The CORS lines of a response head, for the origin answered now.
fn cors_lines(out: &mut String, preflight: Option<&str>) {
    ORIGIN.with(|kept| {
        if let Some(origin) = kept.borrow().as_deref() {
            out.push_str(&format!("Access-Control-Allow-Origin: {origin}\r\nVary: Origin\r\n"));
            if let Some(asked) = preflight {
                let params = mirrored_params(asked);
                out.push_str(&format!(
                    "Access-Control-Allow-Methods: {CORS_METHODS}\r\n\
                     Access-Control-Allow-Headers: {CORS_HEADERS}{params}\r\n\
                     Access-Control-Max-Age: 600\r\n"
                ));
            } else {
                out.push_str(&format!("Access-Control-Expose-Headers: {CORS_EXPOSED}\r\n"));
            }
        }
    });
}

/// The `Mcp-Param-{Name}` headers among those a preflight asks for (a
/// 2026-07-28 request mirrors its tool's `x-mcp-header` parameters into
/// them), each as `, NAME`: names of ASCII letters, digits and `-` only.
fn mirrored_params(asked: &str) -> String {
    asked
        .split(',')
        .map(str::trim)
        .filter(|name| {
            // Bytes, not a slice of the text: a name may hold any
            // character (the head is read lossily) where byte 10 falls.
            let bytes = name.as_bytes();
            bytes.len() > 10
                && bytes[..10].eq_ignore_ascii_case(b"mcp-param-")
                && bytes.iter().all(|byte| byte.is_ascii_alphanumeric() || *byte == b'-')
        })
        .map(|name| format!(", {name}"))
        .collect()
}

/// One request.
#[derive(Debug)]
pub(super) struct HttpRequest {
    pub(super) method: String,
    /// The target's path, without its query.
    pub(super) path: String,
    /// Names in lower case.
    headers: Vec<(String, String)>,
    pub(super) body: Vec<u8>,
    /// The client keeps the connection for another request.
    pub(super) keep_alive: bool,
}

impl HttpRequest {
    /// The first value of header `name` (lower case).
    pub(super) fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }

    /// How many times header `name` (lower case) is sent.
    pub(super) fn header_count(&self, name: &str) -> usize {
        self.headers.iter().filter(|(key, _)| key == name).count()
    }

    /// A POST with these headers (names in lower case) and no body.
    #[cfg(test)]
    pub(super) fn for_test(headers: &[(&str, &str)]) -> HttpRequest {
        HttpRequest {
            method: "POST".into(),
            path: "/mcp".into(),
            headers: headers.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
            body: Vec::new(),
            keep_alive: false,
        }
    }
}

/// What one read of a request gave.
#[derive(Debug)]
pub(super) enum Incoming {
    Request(HttpRequest),
    /// The client closed the connection, or sent nothing while idle.
    Closed,
    /// A request that cannot be taken: its status and why.
    Refused(u16, &'static str),
}

/// One client connection: its socket and what was read past the last
/// request.
pub(super) struct Conn {
    pub(super) stream: TcpStream,
    buffer: Vec<u8>,
}

impl Conn {
    pub(super) fn new(stream: TcpStream) -> Conn {
        let _ = stream.set_write_timeout(Some(WRITE_WAIT));
        let _ = stream.set_nodelay(true);
        Conn { stream, buffer: Vec::new() }
    }

    /// Reads the next request: waits at most `idle` for it to begin, then
    /// at most `whole` for all of it; a body past `max_body` is refused.
    pub(super) fn read_request(
        &mut self,
        idle: Duration,
        whole: Duration,
        max_body: usize,
    ) -> Incoming {
        if self.buffer.is_empty() {
            match self.fill(Instant::now() + idle) {
                Ok(0) | Err(_) => return Incoming::Closed,
                Ok(_) => {}
            }
        }
        let deadline = Instant::now() + whole;
        let head_end = loop {
            if let Some(at) = find(&self.buffer, b"\r\n\r\n") {
                break at;
            }
            if self.buffer.len() > MAX_HEAD {
                return Incoming::Refused(431, "the request head is too long");
            }
            match self.fill(deadline) {
                Ok(0) | Err(_) => return Incoming::Closed,
                Ok(_) => {}
            }
        };
        let head = String::from_utf8_lossy(&self.buffer[..head_end]).into_owned();
        self.buffer.drain(..head_end + 4);
        let mut lines = head.split("\r\n");
        let mut start = lines.next().unwrap_or("").split(' ');
        let (Some(method), Some(target), Some(version)) =
            (start.next(), start.next(), start.next())
        else {
            return Incoming::Refused(400, "the request line is malformed");
        };
        let mut headers = Vec::new();
        for line in lines {
            if headers.len() == MAX_HEADERS {
                return Incoming::Refused(431, "too many header lines");
            }
            let Some((name, value)) = line.split_once(':') else {
                return Incoming::Refused(400, "a header line is malformed");
            };
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
        let mut request = HttpRequest {
            method: method.to_owned(),
            path: target.split('?').next().unwrap_or("").to_owned(),
            headers,
            body: Vec::new(),
            keep_alive: false,
        };
        let connection = request.header("connection").unwrap_or("").to_ascii_lowercase();
        request.keep_alive = match version {
            "HTTP/1.1" => !connection.contains("close"),
            "HTTP/1.0" => connection.contains("keep-alive"),
            _ => return Incoming::Refused(505, "only HTTP/1.1 is served"),
        };
        let chunked = request
            .header("transfer-encoding")
            .is_some_and(|coding| coding.to_ascii_lowercase().contains("chunked"));
        let body = if chunked {
            self.chunked_body(deadline, max_body)
        } else {
            match request.header("content-length").map(str::parse::<usize>) {
                None => Ok(Vec::new()),
                Some(Ok(length)) if length > max_body => {
                    Err(Incoming::Refused(413, "the request body is too large"))
                }
                Some(Ok(length)) => self.exactly(length, deadline),
                Some(Err(_)) => Err(Incoming::Refused(400, "the content length is malformed")),
            }
        };
        match body {
            Ok(body) => {
                request.body = body;
                Incoming::Request(request)
            }
            Err(refused) => refused,
        }
    }

    /// Reads more into the buffer, waiting until `deadline` at most.
    fn fill(&mut self, deadline: Instant) -> io::Result<usize> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        self.stream.set_read_timeout(Some(left))?;
        let mut chunk = [0u8; 16 * 1024];
        let read = self.stream.read(&mut chunk)?;
        self.buffer.extend_from_slice(&chunk[..read]);
        Ok(read)
    }

    /// The next `length` bytes.
    fn exactly(&mut self, length: usize, deadline: Instant) -> Result<Vec<u8>, Incoming> {
        while self.buffer.len() < length {
            match self.fill(deadline) {
                Ok(0) | Err(_) => return Err(Incoming::Closed),
                Ok(_) => {}
            }
        }
        Ok(self.buffer.drain(..length).collect())
    }

    /// The next line, without its CRLF.
    fn line(&mut self, deadline: Instant) -> Result<String, Incoming> {
        loop {
            if let Some(at) = find(&self.buffer, b"\r\n") {
                let line = String::from_utf8_lossy(&self.buffer[..at]).into_owned();
                self.buffer.drain(..at + 2);
                return Ok(line);
            }
            if self.buffer.len() > MAX_HEAD {
                return Err(Incoming::Refused(400, "a chunk line is too long"));
            }
            match self.fill(deadline) {
                Ok(0) | Err(_) => return Err(Incoming::Closed),
                Ok(_) => {}
            }
        }
    }

    /// A chunked body, its trailers skipped.
    fn chunked_body(&mut self, deadline: Instant, max_body: usize) -> Result<Vec<u8>, Incoming> {
        let mut body = Vec::new();
        loop {
            let line = self.line(deadline)?;
            let size = line.split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size, 16)
                .map_err(|_| Incoming::Refused(400, "a chunk size is malformed"))?;
            if size == 0 {
                while !self.line(deadline)?.is_empty() {}
                return Ok(body);
            }
            // Never `body.len() + size`: a size near usize::MAX wraps.
            if size > max_body.saturating_sub(body.len()) {
                return Err(Incoming::Refused(413, "the request body is too large"));
            }
            body.extend(self.exactly(size, deadline)?);
            if !self.line(deadline)?.is_empty() {
                return Err(Incoming::Refused(400, "a chunk is longer than it said"));
            }
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        202 => "Accepted",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Error",
    }
}

/// A whole response: status, headers, a body with its length.
pub(super) fn respond(
    stream: &mut TcpStream,
    status: u16,
    headers: &[(&str, &str)],
    body: &[u8],
    keep_alive: bool,
) -> io::Result<()> {
    let mut out = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    cors_lines(&mut out, None);
    out.push_str(&format!("Content-Length: {}\r\n", body.len()));
    if !keep_alive {
        out.push_str("Connection: close\r\n");
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body);
    stream.write_all(&bytes)
}

/// The head of an event stream, which lasts until the connection closes.
pub(super) fn start_events(stream: &mut TcpStream, headers: &[(&str, &str)]) -> io::Result<()> {
    let mut out = String::from(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
         Connection: close\r\n",
    );
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    cors_lines(&mut out, None);
    out.push_str("\r\n");
    stream.write_all(out.as_bytes())
}

/// The answer to a CORS preflight (`OPTIONS`) from an allowed page: what
/// it may send.
/// `asked` is the page's `Access-Control-Request-Headers`.
pub(super) fn preflight(stream: &mut TcpStream, asked: &str, keep_alive: bool) -> io::Result<()> {
    let mut out = String::from("HTTP/1.1 204 No Content\r\n");
    cors_lines(&mut out, Some(asked));
    out.push_str("Content-Length: 0\r\n");
    if !keep_alive {
        out.push_str("Connection: close\r\n");
    }
    out.push_str("\r\n");
    stream.write_all(out.as_bytes())
}

/// Closes a connection whose request was refused before its body was read
/// (too large): the answer sent, the rest the client still sends is read
/// and dropped for a moment (at most [`LINGER`], [`LINGER_BYTES`]), so
/// that the client reads the answer rather than a reset.
pub(super) fn linger(stream: &mut TcpStream) {
    let _ = stream.shutdown(Shutdown::Write);
    let until = Instant::now() + LINGER;
    let mut dropped = [0u8; 16 * 1024];
    let mut total = 0;
    while total < LINGER_BYTES {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match stream.read(&mut dropped) {
            Ok(0) | Err(_) => return,
            Ok(read) => total += read,
        }
    }
}

/// One JSON-RPC message as one event (each line of it a `data:` line).
pub(super) fn event(stream: &mut TcpStream, message: &[u8]) -> io::Result<()> {
    let mut out = Vec::with_capacity(message.len() + 24);
    out.extend_from_slice(b"event: message\n");
    for line in message.split(|&byte| byte == b'\n') {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    out.push(b'\n');
    stream.write_all(&out)
}

/// A comment line, which keeps a quiet stream open and finds a client gone.
pub(super) fn keep_alive(stream: &mut TcpStream) -> io::Result<()> {
    stream.write_all(b": keep-alive\n\n")
}

/// True when the client closed its end of the connection (or it broke):
/// a peek without waiting finds its end. A request it pipelined behind
/// is left where it is. A client that goes away while its answer is
/// awaited is how a 2026-07-28 client cancels, and a handshake one may too.
pub(super) fn peer_gone(stream: &TcpStream) -> bool {
    use std::os::fd::AsRawFd;
    let mut byte = [0u8; 1];
    // SAFETY: a live one-byte buffer; the descriptor is the stream's, open
    // while it is borrowed.
    let read = unsafe {
        libc::recv(
            stream.as_raw_fd(),
            byte.as_mut_ptr().cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    match read {
        0 => true,
        1.. => false,
        _ => !matches!(
            io::Error::last_os_error().kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::mirrored_params;

    #[test]
    fn a_preflight_allows_the_mirrored_params_it_asks_for_and_no_other() {
        let asked = "authorization, Mcp-Param-Region, mcp-param-x-y, mcp-param-, mcp-parama, x";
        assert_eq!(mirrored_params(asked), ", Mcp-Param-Region, mcp-param-x-y");
        // Where byte 10 falls inside a character: no slice of the text.
        for asked in ["mcp-param\u{fffd}", "mcp-param\u{e9}x", "\u{fffd}\u{fffd}\u{fffd}\u{fffd}"] {
            assert_eq!(mirrored_params(asked), "", "{asked}");
        }
    }
}
