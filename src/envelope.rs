//! A JSON-RPC frame read no deeper than its envelope, for results that are
//! passed on unchanged (`tether serve` handing a server's tool result to
//! the client in front).
//!
//! Parsing a result into a `Value` and writing it out again costs time in
//! proportion to its size and an allocation per value, for nothing when
//! nobody looks inside. So the top level of a response is scanned here by
//! hand (its keys and where each value starts and ends), the result is
//! checked to be well-formed JSON without being built (serde's
//! `IgnoredAny`, which allocates nothing), and its bytes are kept as they
//! came. Anything unusual (a key with escapes, a key besides `jsonrpc`,
//! `id` and `result`, a string id) is left to the whole parse.

use std::ops::Range;

use serde::de::IgnoredAny;

use crate::jsonrpc::Strings;

/// The numeric id and the bytes of the result of `frame`, when it is a
/// plain success response with a well-formed result.
pub(crate) fn response_result(frame: &[u8]) -> Option<(i64, Range<usize>)> {
    let mut at = skip_space(frame, 0);
    if frame.get(at) != Some(&b'{') {
        return None;
    }
    at += 1;
    let (mut id, mut result, mut version) = (None, None, None);
    loop {
        at = skip_space(frame, at);
        if frame.get(at)? != &b'"' {
            return None;
        }
        let key_end = string_end(frame, at)?;
        let key = &frame[at + 1..key_end - 1];
        at = skip_space(frame, key_end);
        if frame.get(at) != Some(&b':') {
            return None;
        }
        at = skip_space(frame, at + 1);
        let value_end = value_end(frame, at)?;
        let slot = match key {
            b"id" => &mut id,
            b"result" => &mut result,
            b"jsonrpc" => &mut version,
            _ => return None,
        };
        // A key given twice is left to the whole parse.
        if slot.replace(at..value_end).is_some() {
            return None;
        }
        at = skip_space(frame, value_end);
        match frame.get(at)? {
            b',' => at += 1,
            b'}' => break,
            _ => return None,
        }
    }
    if skip_space(frame, at + 1) != frame.len() {
        return None;
    }
    if &frame[version?] != b"\"2.0\"" {
        return None;
    }
    let id = serde_json::from_slice::<i64>(&frame[id?]).ok()?;
    let result = result?;
    let text = &frame[result.clone()];
    // Passed on as a line of its own: no line break (a pretty-printed
    // HTTP body), and UTF-8 throughout (`IgnoredAny` does not look).
    if text.iter().any(|byte| matches!(byte, b'\n' | b'\r')) || std::str::from_utf8(text).is_err() {
        return None;
    }
    serde_json::from_slice::<IgnoredAny>(text).ok()?;
    Some((id, result))
}

/// A success response to `id` whose result is `result`, a JSON text
/// passed on as it is.
pub(crate) fn response_with(id: &crate::jsonrpc::RequestId, result: &[u8]) -> Vec<u8> {
    let id = serde_json::to_string(id).unwrap_or_else(|_| "null".into());
    let mut frame = Vec::with_capacity(result.len() + id.len() + 36);
    frame.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    frame.extend_from_slice(id.as_bytes());
    frame.extend_from_slice(b",\"result\":");
    frame.extend_from_slice(result);
    frame.push(b'}');
    frame
}

fn skip_space(bytes: &[u8], mut at: usize) -> usize {
    while bytes.get(at).is_some_and(|byte| matches!(byte, b' ' | b'\t' | b'\n' | b'\r')) {
        at += 1;
    }
    at
}

/// Where the string starting at `at` (its opening quote) ends: just past
/// its closing quote.
fn string_end(bytes: &[u8], at: usize) -> Option<usize> {
    let mut escaped = false;
    for (offset, &byte) in bytes.get(at + 1..)?.iter().enumerate() {
        if escaped {
            escaped = false;
        } else if byte == b'\\' {
            escaped = true;
        } else if byte == b'"' {
            return Some(at + 1 + offset + 1);
        }
    }
    None
}

/// Where the value starting at `at` ends: past its closing bracket or
/// quote, or at the first byte a number or word cannot hold.
fn value_end(bytes: &[u8], at: usize) -> Option<usize> {
    match bytes.get(at)? {
        b'"' => string_end(bytes, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut strings = Strings::default();
            for (offset, &byte) in bytes[at..].iter().enumerate() {
                if !strings.outside(byte) {
                    continue;
                }
                match byte {
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(at + offset + 1);
                        }
                    }
                    _ => {}
                }
            }
            None
        }
        _ => {
            let rest = &bytes[at..];
            let len = rest
                .iter()
                .position(|byte| matches!(byte, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                .unwrap_or(rest.len());
            (len > 0).then_some(at + len)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::RequestId;

    fn result_of(frame: &str) -> Option<(i64, &str)> {
        response_result(frame.as_bytes()).map(|(id, range)| (id, &frame[range]))
    }

    #[test]
    fn a_plain_response_gives_its_result_as_it_came() {
        let frame = r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"caf\u00e9 {]\"x"}]}}"#;
        assert_eq!(
            result_of(frame),
            Some((7, r#"{"content":[{"type":"text","text":"caf\u00e9 {]\"x"}]}"#))
        );
        assert_eq!(
            result_of(" { \"result\" : [1, 2] , \"id\" : 3, \"jsonrpc\": \"2.0\" }\n"),
            Some((3, "[1, 2]"))
        );
        assert_eq!(result_of(r#"{"id":1,"jsonrpc":"2.0","result":null}"#), Some((1, "null")));
    }

    #[test]
    fn anything_else_is_left_to_the_whole_parse() {
        for frame in [
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"no"}}"#,
            r#"{"jsonrpc":"2.0","id":"a","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","result":{}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"a":}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"a":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"a":1}} trailing"#,
            r#"{"jsonrpc":"2.0","\u0069d":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"result":{}}"#,
            r#"{"jsonrpc":"2.0","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
            r#"{"id":1,"result":{}}"#,
            r#"{"jsonrpc":"1.0","id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":007,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":+5,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{},"result":{}}"#,
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\n\"a\": 1}}",
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"a\": \"\u{0}\"}}",
            "[]",
            "{}",
            "",
        ] {
            assert_eq!(result_of(frame), None, "{frame}");
        }
        // Bytes that are not UTF-8 inside a string.
        let bad = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"a\":\"\xff\"}}";
        assert_eq!(response_result(bad), None);
    }

    #[test]
    fn a_passed_result_makes_a_whole_response() {
        let frame = response_with(&RequestId::String("r-1".into()), br#"{"a":"\u00e9"}"#);
        assert_eq!(frame, br#"{"jsonrpc":"2.0","id":"r-1","result":{"a":"\u00e9"}}"#);
        let parsed: serde_json::Value = serde_json::from_slice(&frame).unwrap();
        assert_eq!(parsed["result"]["a"], "é");
    }
}
