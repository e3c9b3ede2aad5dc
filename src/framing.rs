//! Splitting a byte stream into JSON-RPC frames.
//!
//! MCP's stdio transport is newline-delimited JSON, but some servers still
//! write LSP-style `Content-Length:` frames; the framing is detected per
//! message, so a server may even mix them. The framer works on raw bytes (a
//! frame that is not UTF-8 is the parser's problem, not a fatal one) and never
//! holds more than the frame limit: a `Content-Length` over the limit is
//! refused before a byte of its body is read, and a line is refused once it
//! passes the limit without its newline.
//!
//! It does no I/O of its own (`fill_from` reads once, `next_frame` only looks
//! at what was read), so a frame is never half-consumed: whoever reads the
//! pipe, the reader thread blocking or a caller that polls first with a
//! deadline (`transport::stdio`'s leader), can stop between any two reads and
//! hand the framer to the other.

use std::io::{self, Read};

/// The largest frame tether accepts: 16 MiB.
pub const MAX_FRAME: usize = 16 * 1024 * 1024;

/// The longest header block of a `Content-Length` frame we accept.
const MAX_HEADERS: usize = 16 * 1024;

/// Why no frame could be read.
#[derive(Debug)]
pub enum FrameError {
    /// The frame is larger than the limit; the stream cannot be resynchronised.
    TooLarge {
        /// The announced size, or the size reached before giving up.
        size: usize,
    },
    /// Reading failed, or a `Content-Length` header was malformed.
    Io(io::Error),
}

impl From<io::Error> for FrameError {
    fn from(err: io::Error) -> Self {
        FrameError::Io(err)
    }
}

/// What the bytes read so far hold next.
#[derive(Debug, PartialEq, Eq)]
pub enum Next<'a> {
    /// A frame's bytes, without its line ending or headers.
    Frame(&'a [u8]),
    /// Not a whole frame yet: read more (`fill_from`).
    More,
    /// The stream ended cleanly.
    End,
}

/// The buffer a connection starts with and keeps while its frames are
/// small (most answers are; bigger ones grow it by doubling): an idle
/// connection holds this much.
const READ_CHUNK: usize = 2 * 1024;
/// Below this much room the buffer is compacted or grown before a read.
const MIN_READ: usize = 1024;
/// A buffer bigger than this is let go once its frame is parsed.
const KEPT_CAPACITY: usize = 1024 * 1024;

/// Splits what is read from a stream into frames.
pub struct Framer {
    /// Read bytes live in `buffer[start..end]`; `buffer.len()` is how much
    /// is allocated and initialised.
    buffer: Vec<u8>,
    start: usize,
    end: usize,
    limit: usize,
    /// The stream ended (a read returned 0).
    ended: bool,
    /// How many unconsumed bytes the frame being read needs, when known (a
    /// `Content-Length` body), so the buffer grows once to its size.
    wanted: usize,
    /// How many unconsumed bytes are known to hold no newline, so that a
    /// long line arriving in many reads is scanned once, not once a read.
    scanned: usize,
    /// The last read took less than it had room for.
    drained: bool,
    /// The rest of a line too large to read is being dropped, up to its
    /// newline ([`Framer::skip_oversized`]).
    skipping: bool,
}

impl Default for Framer {
    fn default() -> Self {
        Framer::with_limit(MAX_FRAME)
    }
}

impl Framer {
    /// A framer with another limit than 16 MiB (tests use small ones).
    pub fn with_limit(limit: usize) -> Self {
        Framer {
            buffer: Vec::new(),
            start: 0,
            end: 0,
            limit,
            ended: false,
            wanted: 0,
            scanned: 0,
            drained: false,
            skipping: false,
        }
    }

    /// Reads once from `input` (which may block) into the buffer; the bytes
    /// read, 0 at the end of the stream.
    pub fn fill_from(&mut self, input: &mut impl Read) -> io::Result<usize> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        // Room for the rest of a frame of known size (up to 1 MiB ahead: a
        // header alone must not make us hold 16 MiB), else for a read.
        let unread = self.wanted.saturating_sub(self.end - self.start).min(KEPT_CAPACITY);
        let room = unread.max(MIN_READ);
        if self.buffer.len() - self.end < room && self.start > 0 {
            self.buffer.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.buffer.len() - self.end < room {
            // Doubling, so a long line costs few copies; never far past the limit.
            let doubled = (self.buffer.len() * 2).min(self.limit + 2 * READ_CHUNK);
            self.buffer.resize((self.end + room).max(doubled).max(READ_CHUNK), 0);
        }
        let room = self.buffer.len() - self.end;
        let read = loop {
            match input.read(&mut self.buffer[self.end..]) {
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                other => break other?,
            }
        };
        self.end += read;
        self.drained = read < room;
        if read == 0 {
            self.ended = true;
        }
        Ok(read)
    }

    /// True when the last read took less than it had room for: a pipe or
    /// socket held nothing more at that moment (what `poll` would have
    /// said, without asking the kernel again).
    #[cfg_attr(not(feature = "serve"), allow(dead_code))]
    pub fn drained(&self) -> bool {
        self.drained
    }

    /// True when bytes read are not yet consumed (more of a frame, or
    /// another frame, came with the last read).
    #[cfg_attr(not(feature = "serve"), allow(dead_code))]
    pub fn buffered(&self) -> bool {
        self.end > self.start
    }

    /// Drops the line that was [`FrameError::TooLarge`]: what was read of
    /// it now, the rest as it comes, up to its newline; the frames after it
    /// are read as before. The buffer never holds more of it than the
    /// limit. (A `Content-Length` frame that large cannot be skipped so:
    /// what follows its header reads as lines until one ends.)
    #[cfg_attr(not(feature = "serve"), allow(dead_code))]
    pub fn skip_oversized(&mut self) {
        self.skipping = true;
        self.scanned = 0;
        self.wanted = 0;
    }

    /// Lets go of a buffer a big frame left behind, so that a 15 MiB
    /// answer is not held twice (as bytes here and as the caller's value).
    pub fn release_large(&mut self) {
        if self.buffer.len() > KEPT_CAPACITY && self.end - self.start <= READ_CHUNK {
            let mut kept = vec![0; READ_CHUNK];
            kept[..self.end - self.start].copy_from_slice(&self.buffer[self.start..self.end]);
            self.end -= self.start;
            self.start = 0;
            self.buffer = kept;
        }
    }

    /// The next frame among the bytes read, without reading.
    ///
    /// Blank lines between frames are skipped. At the end of the stream, a
    /// last line without its newline is still a frame.
    ///
    /// # Errors
    /// [`FrameError::TooLarge`] past the limit, [`FrameError::Io`] when a
    /// `Content-Length` header cannot be parsed or the stream ends inside a
    /// `Content-Length` frame.
    pub fn next_frame(&mut self) -> Result<Next<'_>, FrameError> {
        loop {
            if self.skipping {
                let pending = &self.buffer[self.start..self.end];
                match pending.iter().position(|&byte| byte == b'\n') {
                    Some(newline) => {
                        self.start += newline + 1;
                        self.skipping = false;
                    }
                    None => {
                        self.start = self.end;
                        self.release_large();
                        return Ok(if self.ended { Next::End } else { Next::More });
                    }
                }
            }
            let pending = &self.buffer[self.start..self.end];
            // Only the first limit + 1 bytes may hold the line's end.
            let window = &pending[..pending.len().min(self.limit + 1)];
            let found = window[self.scanned.min(window.len())..].iter().position(|&b| b == b'\n');
            let Some(newline) = found.map(|at| at + self.scanned.min(window.len())) else {
                self.scanned = window.len();
                if pending.len() > self.limit {
                    return Err(FrameError::TooLarge { size: self.limit + 1 });
                }
                if !self.ended {
                    return Ok(Next::More);
                }
                // The end of the stream: a last line without its newline.
                let line = trim_line_end(pending);
                let (start, len) = (self.start, line.len());
                self.start = self.end;
                self.scanned = 0;
                if line.iter().all(u8::is_ascii_whitespace) {
                    return Ok(Next::End);
                }
                return Ok(Next::Frame(&self.buffer[start..start + len]));
            };
            self.scanned = 0;
            let line = trim_line_end(&pending[..newline]);
            if line.iter().all(u8::is_ascii_whitespace) {
                self.start += newline + 1;
                continue;
            }
            if let Some(length) = content_length(line)? {
                return self.content_length_frame(newline + 1, length);
            }
            let (start, len) = (self.start, line.len());
            self.start += newline + 1;
            return Ok(Next::Frame(&self.buffer[start..start + len]));
        }
    }

    /// A `Content-Length` frame whose first header line ends at `body_from`
    /// bytes into the unconsumed input: consumed once all of it is there.
    fn content_length_frame(
        &mut self,
        after_length: usize,
        length: usize,
    ) -> Result<Next<'_>, FrameError> {
        if length > self.limit {
            return Err(FrameError::TooLarge { size: length });
        }
        let pending = &self.buffer[self.start..self.end];
        // Further headers (Content-Type) until the blank line.
        let mut at = after_length;
        loop {
            let Some(newline) = pending[at..].iter().position(|&byte| byte == b'\n') else {
                return self.incomplete(pending.len() - after_length > MAX_HEADERS, "headers");
            };
            let header = trim_line_end(&pending[at..at + newline]);
            at += newline + 1;
            if at - after_length > MAX_HEADERS {
                return Err(bad_frame("frame headers too long"));
            }
            if header.is_empty() {
                break;
            }
        }
        if pending.len() < at + length {
            self.wanted = at + length;
            return self.incomplete(false, "body");
        }
        self.wanted = 0;
        let start = self.start + at;
        self.start = start + length;
        Ok(Next::Frame(&self.buffer[start..start + length]))
    }

    /// A frame not all read: more to read, or an error at the stream's end.
    fn incomplete(&self, too_long: bool, part: &str) -> Result<Next<'_>, FrameError> {
        if too_long {
            return Err(bad_frame("frame headers too long"));
        }
        if self.ended {
            let message = format!("end of stream in frame {part}");
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, message).into());
        }
        Ok(Next::More)
    }
}

fn bad_frame(what: &str) -> FrameError {
    io::Error::new(io::ErrorKind::InvalidData, what).into()
}

fn trim_line_end(line: &[u8]) -> &[u8] {
    let mut end = line.len();
    while end > 0 && (line[end - 1] == b'\n' || line[end - 1] == b'\r') {
        end -= 1;
    }
    &line[..end]
}

/// `Some(n)` when the line is a `Content-Length: n` header.
fn content_length(line: &[u8]) -> io::Result<Option<usize>> {
    const NAME: &[u8] = b"content-length:";
    if line.len() < NAME.len() || !line[..NAME.len()].eq_ignore_ascii_case(NAME) {
        return Ok(None);
    }
    let value = std::str::from_utf8(&line[NAME.len()..]).unwrap_or("").trim();
    value.parse::<usize>().map(Some).map_err(|_| {
        io::Error::new(io::ErrorKind::InvalidData, format!("bad Content-Length {value:?}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_too_large_is_skipped_and_the_next_read() {
        for chunk in [7, 64, 4096] {
            let mut input = b"{\"a\":1}\n".to_vec();
            input.extend(std::iter::repeat_n(b'x', 3000));
            input.extend(b"\n{\"b\":2}\n");
            let mut framer = Framer::with_limit(1000);
            let mut source = Chunks { data: &input, chunk };
            let mut seen = Vec::new();
            loop {
                match framer.next_frame() {
                    Ok(Next::Frame(frame)) => {
                        seen.push(String::from_utf8_lossy(frame).into_owned())
                    }
                    Ok(Next::More) => {
                        framer.fill_from(&mut source).unwrap();
                    }
                    Ok(Next::End) => break,
                    Err(FrameError::TooLarge { .. }) => {
                        seen.push("too large".to_owned());
                        framer.skip_oversized();
                    }
                    Err(FrameError::Io(err)) => panic!("{err}"),
                }
                assert!(framer.buffer.len() < 4000, "{}", framer.buffer.len());
            }
            assert_eq!(seen, ["{\"a\":1}", "too large", "{\"b\":2}"], "chunk {chunk}");
        }
    }

    #[test]
    fn a_read_that_took_less_than_its_room_drained_the_stream() {
        let mut framer = Framer::default();
        let mut short = &b"{\"id\":1}\n"[..];
        framer.fill_from(&mut short).unwrap();
        assert!(framer.drained());
        // A stream with more than a read's room: the read filled it.
        let long = vec![b'x'; 64 * 1024];
        let mut framer = Framer::default();
        framer.fill_from(&mut &long[..]).unwrap();
        assert!(!framer.drained());
    }

    /// Every frame of `input`, read `chunk` bytes at a time.
    fn frames_in_chunks(input: &[u8], limit: usize, chunk: usize) -> Vec<Result<String, String>> {
        let mut framer = Framer::with_limit(limit);
        let mut source = Chunks { data: input, chunk };
        let mut out = Vec::new();
        loop {
            match framer.next_frame() {
                Ok(Next::Frame(frame)) => out.push(Ok(String::from_utf8_lossy(frame).into_owned())),
                Ok(Next::More) => {
                    framer.fill_from(&mut source).unwrap();
                }
                Ok(Next::End) => return out,
                Err(FrameError::TooLarge { size }) => {
                    out.push(Err(format!("too large {size}")));
                    return out;
                }
                Err(FrameError::Io(err)) => {
                    out.push(Err(err.to_string()));
                    return out;
                }
            }
        }
    }

    /// A reader that hands out at most `chunk` bytes per read.
    struct Chunks<'a> {
        data: &'a [u8],
        chunk: usize,
    }

    impl Read for Chunks<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.data.len().min(self.chunk).min(buf.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    /// The same frames whatever the reads' sizes.
    fn frames(input: &[u8], limit: usize) -> Vec<Result<String, String>> {
        let whole = frames_in_chunks(input, limit, usize::MAX);
        for chunk in [1, 2, 3, 7, 64] {
            assert_eq!(frames_in_chunks(input, limit, chunk), whole, "{chunk} bytes per read");
        }
        whole
    }

    fn ok(items: &[&str]) -> Vec<Result<String, String>> {
        items.iter().map(|s| Ok(s.to_string())).collect()
    }

    #[test]
    fn lines_with_crlf_and_blank_lines() {
        assert_eq!(frames(b"{\"a\":1}\r\n\n\n{\"b\":2}\n", 100), ok(&["{\"a\":1}", "{\"b\":2}"]));
    }

    #[test]
    fn last_line_without_newline() {
        assert_eq!(frames(b"{\"a\":1}\n{\"b\":2}", 100), ok(&["{\"a\":1}", "{\"b\":2}"]));
    }

    #[test]
    fn content_length_mixed_with_lines() {
        let input = b"Content-Length: 7\r\n\r\n{\"a\":1}{\"b\":2}\ncontent-length:7\r\nContent-Type: x\r\n\r\n{\"c\":3}";
        assert_eq!(frames(input, 100), ok(&["{\"a\":1}", "{\"b\":2}", "{\"c\":3}"]));
    }

    #[test]
    fn content_length_over_limit_is_refused_before_reading() {
        assert_eq!(frames(b"Content-Length: 101\r\n\r\n", 100), vec![Err("too large 101".into())]);
    }

    #[test]
    fn line_over_limit_is_refused() {
        let mut input = vec![b'x'; 150];
        input.push(b'\n');
        assert_eq!(frames(&input, 100), vec![Err("too large 101".into())]);
    }

    #[test]
    fn line_at_limit_is_accepted() {
        let mut input = vec![b'x'; 100];
        input.push(b'\n');
        assert_eq!(frames(&input, 100).len(), 1);
        assert!(frames(&input, 100)[0].is_ok());
    }

    #[test]
    fn invalid_utf8_is_a_frame_not_an_error() {
        let out = frames(b"\xff\xfe\n{}\n", 100);
        assert_eq!(out.len(), 2);
        assert!(out.iter().all(Result::is_ok));
    }

    #[test]
    fn bad_content_length_is_an_error() {
        assert!(frames(b"Content-Length: lots\r\n\r\n", 100)[0].is_err());
    }

    #[test]
    fn a_big_content_length_body_is_read_into_one_buffer_and_let_go() {
        let body = format!("{{\"x\":\"{}\"}}", "y".repeat(3 * 1024 * 1024));
        let input = format!("Content-Length: {}\r\n\r\n{body}{{\"after\":1}}\n", body.len());
        let mut framer = Framer::default();
        let mut source = Chunks { data: input.as_bytes(), chunk: 64 * 1024 };
        let mut seen = Vec::new();
        loop {
            match framer.next_frame().unwrap() {
                Next::Frame(frame) => {
                    seen.push(frame.len());
                    framer.release_large();
                }
                Next::More => {
                    framer.fill_from(&mut source).unwrap();
                }
                Next::End => break,
            }
        }
        assert_eq!(seen, vec![body.len(), 11]);
        assert!(framer.buffer.len() <= READ_CHUNK, "kept {} bytes", framer.buffer.len());
    }

    #[test]
    fn a_stream_ending_inside_a_content_length_frame_is_an_error() {
        let out = frames(b"Content-Length: 10\r\n\r\n{}", 100);
        assert_eq!(out, vec![Err("end of stream in frame body".into())]);
        let out = frames(b"Content-Length: 10\r\n", 100);
        assert_eq!(out, vec![Err("end of stream in frame headers".into())]);
    }
}
