//! A server-sent events parser of our own, bounded.
//!
//! Follows the event-stream rules: `field: value` lines, `data` lines joined
//! with newlines, `id` remembered for resumption (even on events with no
//! data, which are not dispatched), `retry` in milliseconds, `:` comments
//! ignored, LF, CRLF or CR line endings. No line and no event may exceed the
//! limit, so a server cannot make tether buffer without end.

use std::io::{self, BufRead};

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `event` field, or `message`.
    pub(crate) event: String,
    /// The `data` lines, joined with `\n`.
    pub(crate) data: String,
    /// The last event id seen so far in the stream, if any.
    pub(crate) id: Option<String>,
}

/// Reads events from a byte stream.
pub(crate) struct SseReader<R> {
    input: R,
    limit: usize,
    last_id: Option<String>,
    /// The server's reconnection delay in ms, when it sent one.
    pub(crate) retry_ms: Option<u64>,
    line: Vec<u8>,
}

impl<R: BufRead> SseReader<R> {
    /// A reader that refuses events (and lines) over `limit` bytes.
    pub(crate) fn new(input: R, limit: usize) -> Self {
        SseReader { input, limit, last_id: None, retry_ms: None, line: Vec::new() }
    }

    /// The last event id seen, for `Last-Event-ID`.
    pub(crate) fn last_id(&self) -> Option<&str> {
        self.last_id.as_deref()
    }

    /// The next event with data; `Ok(None)` at the end of the stream.
    ///
    /// # Errors
    /// Reading fails, or an event is over the limit (`InvalidData`).
    pub(crate) fn next_event(&mut self) -> io::Result<Option<SseEvent>> {
        let mut event_type = String::new();
        let mut data = String::new();
        let mut has_data = false;
        loop {
            if !self.read_line()? {
                // End of stream: an unterminated event is discarded, as the
                // standard says.
                return Ok(None);
            }
            let line = String::from_utf8_lossy(&self.line).into_owned();
            let line = line.strip_prefix('\u{feff}').unwrap_or(&line);
            if line.is_empty() {
                if has_data {
                    let event =
                        if event_type.is_empty() { "message".to_owned() } else { event_type };
                    return Ok(Some(SseEvent { event, data, id: self.last_id.clone() }));
                }
                event_type.clear();
                continue;
            }
            if line.starts_with(':') {
                continue;
            }
            let (field, value) = match line.split_once(':') {
                Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
                None => (line, ""),
            };
            match field {
                "event" => event_type = value.to_owned(),
                "data" => {
                    if data.len() + value.len() + 1 > self.limit {
                        return Err(too_large(self.limit));
                    }
                    if has_data {
                        data.push('\n');
                    }
                    data.push_str(value);
                    has_data = true;
                }
                "id" if !value.contains('\0') => self.last_id = Some(value.to_owned()),
                "retry" => {
                    if let Ok(ms) = value.trim().parse::<u64>() {
                        self.retry_ms = Some(ms);
                    }
                }
                _ => {}
            }
        }
    }

    /// Reads one line (without its ending) into `self.line`; false at end.
    fn read_line(&mut self) -> io::Result<bool> {
        self.line.clear();
        loop {
            let available = match self.input.fill_buf() {
                Ok(available) => available,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => return Err(err),
            };
            if available.is_empty() {
                return Ok(!self.line.is_empty());
            }
            match available.iter().position(|&byte| byte == b'\n' || byte == b'\r') {
                Some(end) => {
                    let ending = available[end];
                    self.line.extend_from_slice(&available[..end]);
                    self.input.consume(end + 1);
                    if ending == b'\r' {
                        // CRLF counts as one ending.
                        if let Ok(next) = self.input.fill_buf() {
                            if next.first() == Some(&b'\n') {
                                self.input.consume(1);
                            }
                        }
                    }
                    return Ok(true);
                }
                None => {
                    let n = available.len();
                    self.line.extend_from_slice(available);
                    self.input.consume(n);
                }
            }
            if self.line.len() > self.limit {
                return Err(too_large(self.limit));
            }
        }
    }
}

fn too_large(limit: usize) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("an event over {limit} bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(input: &str, limit: usize) -> (Vec<SseEvent>, Option<String>) {
        let mut reader = SseReader::new(input.as_bytes(), limit);
        let mut out = Vec::new();
        loop {
            match reader.next_event() {
                Ok(Some(event)) => out.push(event),
                Ok(None) => return (out, None),
                Err(err) => return (out, Some(err.to_string())),
            }
        }
    }

    fn event(event: &str, data: &str, id: Option<&str>) -> SseEvent {
        SseEvent { event: event.into(), data: data.into(), id: id.map(str::to_owned) }
    }

    #[test]
    fn fields_comments_and_multiline_data() {
        let (got, err) = events(
            ": hello\nevent: endpoint\ndata: /messages?s=1\n\ndata: a\ndata:b\nid: 7\n\n",
            1000,
        );
        assert_eq!(err, None);
        assert_eq!(
            got,
            [event("endpoint", "/messages?s=1", None), event("message", "a\nb", Some("7"))]
        );
    }

    #[test]
    fn events_without_data_set_the_id_but_are_not_dispatched() {
        let mut reader =
            SseReader::new("id: prime\ndata:\n\nretry: 1500\n\nid: 2\ndata: x\n\n".as_bytes(), 100);
        // `data:` with an empty value is still data: dispatched with "".
        assert_eq!(reader.next_event().unwrap(), Some(event("message", "", Some("prime"))));
        assert_eq!(reader.next_event().unwrap(), Some(event("message", "x", Some("2"))));
        assert_eq!(reader.retry_ms, Some(1500));
        let mut reader = SseReader::new("id: only-an-id\n\n".as_bytes(), 100);
        assert_eq!(reader.next_event().unwrap(), None);
        assert_eq!(reader.last_id(), Some("only-an-id"));
    }

    #[test]
    fn crlf_and_cr_endings() {
        let (got, _) = events("data: one\r\n\r\ndata: two\r\rdata: three\n\n", 100);
        assert_eq!(
            got.iter().map(|e| e.data.as_str()).collect::<Vec<_>>(),
            ["one", "two", "three"]
        );
    }

    #[test]
    fn an_unterminated_event_is_dropped_at_the_end() {
        let (got, err) = events("data: complete\n\ndata: cut off", 100);
        assert_eq!((got.len(), err), (1, None));
    }

    #[test]
    fn oversized_events_and_lines_are_refused() {
        let (_, err) = events(&format!("data: {}\n\n", "x".repeat(200)), 100);
        assert!(err.unwrap().contains("over 100 bytes"));
        let (_, err) =
            events(&format!("data: {}\ndata: {}\n\n", "x".repeat(60), "y".repeat(60)), 100);
        assert!(err.unwrap().contains("over 100 bytes"));
    }
}
