//! Splitting a byte stream into JSON-RPC frames.
//!
//! MCP's stdio transport is newline-delimited JSON, but some servers still
//! write LSP-style `Content-Length:` frames; the framing is detected per
//! message, so a server may even mix them. The reader works on raw bytes (a
//! frame that is not UTF-8 is the parser's problem, not a fatal one) and never
//! holds more than the frame limit: a `Content-Length` over the limit is
//! refused before a byte of its body is read, and a line is read through a
//! `Take` so that it stops at the limit.

use std::io::{self, BufRead, Read};

/// The largest frame tether accepts: 16 MiB.
pub const MAX_FRAME: usize = 16 * 1024 * 1024;

/// The longest header line of a `Content-Length` frame we accept.
const MAX_HEADER_LINE: u64 = 1024;

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

/// The frame buffer's first size; it grows with the frames.
const INITIAL_CAPACITY: usize = 1024;
/// A buffer bigger than this is let go once its frame is parsed.
const KEPT_CAPACITY: usize = 1024 * 1024;

/// Reads frames from a buffered byte stream.
pub struct FrameReader<R> {
    input: R,
    limit: usize,
    frame: Vec<u8>,
}

impl<R: BufRead> FrameReader<R> {
    /// A reader with the default 16 MiB limit.
    pub fn new(input: R) -> Self {
        Self::with_limit(input, MAX_FRAME)
    }

    /// A reader with another limit (tests use small ones).
    pub fn with_limit(input: R, limit: usize) -> Self {
        FrameReader { input, limit, frame: Vec::with_capacity(INITIAL_CAPACITY) }
    }

    /// Lets go of a buffer a big frame left behind, so that a 15 MiB
    /// answer is not held twice (as bytes here and as the caller's value).
    pub fn release_large(&mut self) {
        if self.frame.capacity() > KEPT_CAPACITY {
            self.frame = Vec::with_capacity(INITIAL_CAPACITY);
        }
    }

    /// The next frame's bytes, without its line ending or headers.
    ///
    /// Returns `Ok(None)` at a clean end of stream. Blank lines between frames
    /// are skipped.
    ///
    /// # Errors
    /// [`FrameError::TooLarge`] past the limit, [`FrameError::Io`] when reading
    /// fails or a `Content-Length` header cannot be parsed.
    pub fn next_frame(&mut self) -> Result<Option<&[u8]>, FrameError> {
        loop {
            self.frame.clear();
            let limit = self.limit as u64 + 1;
            let n = self.input.by_ref().take(limit).read_until(b'\n', &mut self.frame)?;
            if n == 0 {
                return Ok(None);
            }
            let ended_with_newline = self.frame.last() == Some(&b'\n');
            if !ended_with_newline && self.frame.len() > self.limit {
                return Err(FrameError::TooLarge { size: self.frame.len() });
            }
            let line = trim_line_end(&self.frame);
            if line.iter().all(u8::is_ascii_whitespace) {
                if ended_with_newline {
                    continue;
                }
                return Ok(None);
            }
            if let Some(length) = content_length(line)? {
                return self.read_content_length_body(length).map(Some);
            }
            let end = line.len();
            self.frame.truncate(end);
            return Ok(Some(&self.frame));
        }
    }

    fn read_content_length_body(&mut self, length: usize) -> Result<&[u8], FrameError> {
        if length > self.limit {
            return Err(FrameError::TooLarge { size: length });
        }
        // Further headers (Content-Type) until the blank line.
        loop {
            let mut header = Vec::new();
            let n = self.input.by_ref().take(MAX_HEADER_LINE).read_until(b'\n', &mut header)?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "end of stream in frame headers",
                )
                .into());
            }
            if trim_line_end(&header).is_empty() {
                break;
            }
        }
        self.frame.clear();
        self.frame.resize(length, 0);
        self.input.read_exact(&mut self.frame)?;
        Ok(&self.frame)
    }
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

    fn frames(input: &[u8], limit: usize) -> Vec<Result<String, String>> {
        let mut reader = FrameReader::with_limit(input, limit);
        let mut out = Vec::new();
        loop {
            match reader.next_frame() {
                Ok(Some(frame)) => out.push(Ok(String::from_utf8_lossy(frame).into_owned())),
                Ok(None) => return out,
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
}
